/* Grouped GEMM (torch._grouped_mm): every group's product in one launch,
 * each a tnk_gemm call on a view of the operands. Groups large enough to
 * occupy the pool run one after another, each GEMM parallel inside; the
 * small ones (many experts with few tokens each) run in parallel over
 * groups, one thread per group, so the launch and split costs of a GEMM are
 * paid once per thread rather than once per group. The offsets are read
 * when the kernel runs (no host synchronisation before the launch). */
#include <string.h>

#include "tnk.h"

/* A group is "small" below this many multiply-adds: splitting it over the
 * pool costs more than it saves. */
#define SMALL_GROUP_MACS (1 << 24)

typedef struct group {
  int64_t m, n, k;
  const char *a, *b;
  char *c;
} group_t;

typedef struct ctx {
  const tnk_grouped_gemm_args_t *g;
  int64_t groups; /* groups with valid offsets */
  size_t es;
} ctx_t;

/* The view of group i; its m, n or k may be 0. */
static group_t group_view(const ctx_t *c, int64_t i) {
  const tnk_grouped_gemm_args_t *g = c->g;
  int64_t lo = i ? g->offs ? g->offs[i - 1] : 0 : 0, hi = g->offs ? g->offs[i] : 0;
  size_t es = c->es;
  group_t v = {g->m, g->n, g->k, g->a, g->b, g->c};
  switch (g->mode) {
    case 0: /* rows [lo, hi) of A and C, B[i] */
      v.m = hi - lo;
      v.a += (size_t)(lo * g->sa[1]) * es;
      v.b += (size_t)(i * g->sb[0]) * es;
      v.c += (size_t)(lo * g->sc[1]) * es;
      break;
    case 1: /* A[i], columns [lo, hi) of B and C */
      v.n = hi - lo;
      v.a += (size_t)(i * g->sa[0]) * es;
      v.b += (size_t)(lo * g->sb[2]) * es;
      v.c += (size_t)(lo * g->sc[2]) * es;
      break;
    case 2: /* columns [lo, hi) of A, rows [lo, hi) of B, C[i] */
      v.k = hi - lo;
      v.a += (size_t)(lo * g->sa[2]) * es;
      v.b += (size_t)(lo * g->sb[1]) * es;
      v.c += (size_t)(i * g->sc[0]) * es;
      break;
    default: /* A[i] B[i] -> C[i] */
      v.a += (size_t)(i * g->sa[0]) * es;
      v.b += (size_t)(i * g->sb[0]) * es;
      v.c += (size_t)(i * g->sc[0]) * es;
  }
  return v;
}

static void zero_rows(const tnk_grouped_gemm_args_t *g, char *c, int64_t rows, int64_t cols,
                      size_t es) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t x = 0; x < cols; x++)
      memset(c + (size_t)(r * g->sc[1] + x * g->sc[2]) * es, 0, es);
}

static void run_group(const ctx_t *c, int64_t i) {
  const tnk_grouped_gemm_args_t *g = c->g;
  group_t v = group_view(c, i);
  if (v.m <= 0 || v.n <= 0) return;
  if (v.k <= 0) { /* an empty sum: zeros */
    zero_rows(g, v.c, v.m, v.n, c->es);
    return;
  }
  tnk_gemm_args_t a = {.batch = 1,
                       .m = v.m,
                       .n = v.n,
                       .k = v.k,
                       .c = v.c,
                       .a = v.a,
                       .b = v.b,
                       .sa_r = g->sa[1],
                       .sa_c = g->sa[2],
                       .sb_r = g->sb[1],
                       .sb_c = g->sb[2],
                       .sc_r = g->sc[1],
                       .sc_c = g->sc[2],
                       .dtype = g->dtype,
                       .alpha = 1.0,
                       .beta = 0.0,
                       .fault = g->fault};
  tnk_gemm(&a);
}

static int is_small(const ctx_t *c, int64_t i) {
  group_t v = group_view(c, i);
  return v.m * v.n * (v.k > 0 ? v.k : 1) < SMALL_GROUP_MACS;
}

static void small_groups(void *p, int64_t begin, int64_t end) {
  const ctx_t *c = p;
  for (int64_t i = begin; i < end; i++)
    if (is_small(c, i)) run_group(c, i);
}

static void tell(const tnk_grouped_gemm_args_t *g, const char *what, int64_t value, int64_t bound) {
  if (g->fault.fn) g->fault.fn(g->fault.ctx, g->fault.kind, what, value, bound, g->fault.origin);
}

void tnk_grouped_gemm(const tnk_grouped_gemm_args_t *g) {
  size_t es = tnk_dtype_size((tnk_dtype_t)g->dtype);
  ctx_t c = {g, g->groups, es};
  /* the grouped extent: rows of A (0), columns of B (1), the sum (2) */
  int64_t extent = g->mode == 0 ? g->m : g->mode == 1 ? g->n : g->k;
  int64_t end = 0;
  if (g->mode != 3) {
    for (int64_t i = 0; i < g->groups; i++) {
      int64_t o = g->offs[i];
      if (o < end || o > extent) {
        tell(g,
             o < end ? "_grouped_mm: offs must be non-decreasing"
                     : "_grouped_mm: an offset is past the end of the grouped dimension",
             o, o < end ? end : extent);
        c.groups = i;
        break;
      }
      end = o;
    }
  }
  /* what no valid group covers is zero */
  if (g->mode == 0) {
    zero_rows(g, (char *)g->c + (size_t)(end * g->sc[1]) * es, g->m - end, g->n, es);
  } else if (g->mode == 1) {
    zero_rows(g, (char *)g->c + (size_t)(end * g->sc[2]) * es, g->m, g->n - end, es);
  } else if (c.groups < g->groups) {
    for (int64_t i = c.groups; i < g->groups; i++)
      zero_rows(g, (char *)g->c + (size_t)(i * g->sc[0]) * es, g->m, g->n, es);
  }
  for (int64_t i = 0; i < c.groups; i++)
    if (!is_small(&c, i)) run_group(&c, i);
  tnk_parallel_for(c.groups, 1, small_groups, &c);
}
