/* Index-free selection and generation: where, tril/triu, arange. Byte moves
 * for where (dtype-agnostic), per-dtype stores for the rest. */
#include "dtype.h"
#include "tnk.h"

typedef struct where_ctx {
  tnk_shape_t shape;
  tnk_view_t v[4]; /* out, cond, a, b */
  size_t esz;
} where_ctx_t;

/* Rows of the coalesced shape; the innermost dimension is walked with its
 * strides, with a word-sized move for 4- and 2-byte elements. */
static void where_range(void *p, int64_t begin, int64_t end) {
  const where_ctx_t *c = p;
  const tnk_shape_t *sh = &c->shape;
  int nd = sh->ndim;
  int64_t esz = (int64_t)c->esz, inner = sh->sizes[nd - 1];
  int64_t s[4];
  for (int v = 0; v < 4; v++) s[v] = c->v[v].strides[nd - 1];
  for (int64_t r = begin; r < end; r++) {
    int64_t rem = r, off[4] = {0, 0, 0, 0};
    for (int d = nd - 2; d >= 0; d--) {
      int64_t idx = rem % sh->sizes[d];
      rem /= sh->sizes[d];
      for (int v = 0; v < 4; v++) off[v] += idx * c->v[v].strides[d];
    }
    char *o = (char *)c->v[0].data + off[0] * esz;
    const unsigned char *cond = (const unsigned char *)c->v[1].data + off[1];
    const char *a = (const char *)c->v[2].data + off[2] * esz;
    const char *b = (const char *)c->v[3].data + off[3] * esz;
    if (esz == 4) {
      for (int64_t k = 0; k < inner; k++) {
        uint32_t x, y;
        memcpy(&x, a + k * s[2] * 4, 4);
        memcpy(&y, b + k * s[3] * 4, 4);
        uint32_t res = cond[k * s[1]] ? x : y;
        memcpy(o + k * s[0] * 4, &res, 4);
      }
    } else if (esz == 2) {
      for (int64_t k = 0; k < inner; k++) {
        uint16_t x, y;
        memcpy(&x, a + k * s[2] * 2, 2);
        memcpy(&y, b + k * s[3] * 2, 2);
        uint16_t res = cond[k * s[1]] ? x : y;
        memcpy(o + k * s[0] * 2, &res, 2);
      }
    } else {
      for (int64_t k = 0; k < inner; k++) {
        const char *src = cond[k * s[1]] ? a + k * s[2] * esz : b + k * s[3] * esz;
        memmove(o + k * s[0] * esz, src, (size_t)esz);
      }
    }
  }
}

void tnk_where(const tnk_where_args_t *a) {
  where_ctx_t c = {.shape = a->shape, .v = {a->out, a->cond, a->a, a->b}};
  c.esz = tnk_dtype_size(a->out.dtype);
  if (!c.esz || a->cond.dtype != TNK_BOOL) return;
  tnk_coalesce(&c.shape, c.v, 4);
  int64_t n = tnk_numel(&c.shape);
  if (n <= 0) return;
  if (c.shape.ndim == 0) {
    c.shape.ndim = 1;
    c.shape.sizes[0] = 1;
    for (int v = 0; v < 4; v++) c.v[v].strides[0] = 0;
  }
  /* rows of the innermost dimension; a single long row is split in rows
   * of 4096 (contiguous strides make that the same walk) */
  int64_t inner = c.shape.sizes[c.shape.ndim - 1];
  if (c.shape.ndim == 1 && inner > 4096 && inner % 4096 == 0) {
    c.shape.ndim = 2;
    c.shape.sizes[0] = inner / 4096;
    c.shape.sizes[1] = 4096;
    for (int v = 0; v < 4; v++) {
      c.v[v].strides[1] = c.v[v].strides[0];
      c.v[v].strides[0] *= 4096;
    }
    inner = 4096;
  }
  tnk_parallel_for(n / inner, inner >= (1 << 14) ? 1 : (1 << 14) / inner, where_range, &c);
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
