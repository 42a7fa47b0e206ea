/* Index-free selection and generation: where, tril/triu, arange. Byte moves
 * for where (dtype-agnostic), per-dtype stores for the rest. */
#include "dtype.h"
#include "tnk.h"

typedef struct where_ctx {
  tnk_shape_t shape;
  tnk_view_t v[4]; /* out, cond, a, b */
  size_t esz;
} where_ctx_t;

static void where_range(void *p, int64_t begin, int64_t end) {
  const where_ctx_t *c = p;
  const tnk_shape_t *sh = &c->shape;
  int64_t esz = (int64_t)c->esz;
  for (int64_t i = begin; i < end; i++) {
    int64_t rem = i, off[4] = {0, 0, 0, 0};
    for (int d = sh->ndim - 1; d >= 0; d--) {
      int64_t idx = rem % sh->sizes[d];
      rem /= sh->sizes[d];
      for (int v = 0; v < 4; v++) off[v] += idx * c->v[v].strides[d];
    }
    int take_a = ((const unsigned char *)c->v[1].data)[off[1]] != 0;
    const char *src = take_a ? (const char *)c->v[2].data + off[2] * esz
                             : (const char *)c->v[3].data + off[3] * esz;
    memmove((char *)c->v[0].data + off[0] * esz, src, (size_t)esz);
  }
}

void tnk_where(const tnk_where_args_t *a) {
  where_ctx_t c = {.shape = a->shape, .v = {a->out, a->cond, a->a, a->b}};
  c.esz = tnk_dtype_size(a->out.dtype);
  if (!c.esz || a->cond.dtype != TNK_BOOL) return;
  tnk_coalesce(&c.shape, c.v, 4);
  int64_t n = tnk_numel(&c.shape);
  if (n > 0) tnk_parallel_for(n, 1 << 14, where_range, &c);
}

static void tri_rows(void *p, int64_t begin, int64_t end) {
  const tnk_tri_args_t *a = p;
  size_t esz = tnk_dtype_size(a->dtype);
  for (int64_t r = begin; r < end; r++) { /* r indexes batch * rows */
    int64_t i = r % a->rows;
    char *o = (char *)a->out + (size_t)(r * a->cols) * esz;
    const char *x = (const char *)a->in + (size_t)(r * a->cols) * esz;
    for (int64_t j = 0; j < a->cols; j++) {
      int keep = a->upper ? j - i >= a->diagonal : j - i <= a->diagonal;
      if (keep) {
        if (o != x) memcpy(o + (size_t)j * esz, x + (size_t)j * esz, esz);
      } else {
        memset(o + (size_t)j * esz, 0, esz);
      }
    }
  }
}

void tnk_tri(const tnk_tri_args_t *a) {
  int64_t rows = a->batch * a->rows;
  if (rows <= 0 || a->cols <= 0 || !tnk_dtype_size(a->dtype)) return;
  tnk_parallel_for(rows, a->cols >= 4096 ? 1 : 4096 / a->cols, tri_rows, (void *)a);
}

static void arange_range(void *p, int64_t begin, int64_t end) {
  const tnk_arange_args_t *a = p;
  size_t esz = tnk_dtype_size(a->dtype);
  for (int64_t i = begin; i < end; i++) {
    tnk_val_t v = {0, 0, 0, 0};
    if (a->integral) {
      v.i = (int64_t)((uint64_t)a->istart + (uint64_t)i * (uint64_t)a->istep);
      v.re = (double)v.i;
      v.isint = 1;
    } else {
      v.re = a->start + (double)i * a->step;
    }
    char *dst = (char *)a->out + (size_t)i * esz;
    switch (a->dtype) {
#define S(E, N) case E: tnk_store_##N(dst, v); break;
      TNK_FOR_EACH_DTYPE(S)
#undef S
      default: break;
    }
  }
}

void tnk_arange(const tnk_arange_args_t *a) {
  if (a->n > 0 && tnk_dtype_size(a->dtype))
    tnk_parallel_for(a->n, 1 << 15, arange_range, (void *)a);
}
