/* Index-free selection and generation: where, tril/triu, arange. Byte moves
 * for where (dtype-agnostic), per-dtype stores for the rest. */
#include "dtype.h"
#include "iter.h"
#include "tnk.h"

/* The innermost dimension walked with its strides, with a word-sized move
 * for 4- and 2-byte elements; ctx is the element size. Strides in elements:
 * the compiler versions the loops for unit strides. */
static void where_loop(void *p, char **ptrs, const int64_t *bs, int64_t n, int64_t index) {
  int64_t esz = *(const int64_t *)p;
  int64_t s[4];
  for (int v = 0; v < 4; v++) s[v] = v == 1 ? bs[v] : bs[v] / esz;
  char *o = ptrs[0];
  const unsigned char *cond = (const unsigned char *)ptrs[1];
  const char *a = ptrs[2], *b = ptrs[3];
  if (esz == 4) {
    for (int64_t k = 0; k < n; k++) {
      uint32_t x, y;
      memcpy(&x, a + k * s[2] * 4, 4);
      memcpy(&y, b + k * s[3] * 4, 4);
      uint32_t res = cond[k * s[1]] ? x : y;
      memcpy(o + k * s[0] * 4, &res, 4);
    }
  } else if (esz == 2) {
    for (int64_t k = 0; k < n; k++) {
      uint16_t x, y;
      memcpy(&x, a + k * s[2] * 2, 2);
      memcpy(&y, b + k * s[3] * 2, 2);
      uint16_t res = cond[k * s[1]] ? x : y;
      memcpy(o + k * s[0] * 2, &res, 2);
    }
  } else {
    for (int64_t k = 0; k < n; k++) {
      const char *src = cond[k * s[1]] ? a + k * s[2] * esz : b + k * s[3] * esz;
      memmove(o + k * s[0] * esz, src, (size_t)esz);
    }
  }
}

void tnk_where(const tnk_where_args_t *a) {
  int64_t esz = (int64_t)tnk_dtype_size(a->out.dtype);
  if (!esz || a->cond.dtype != TNK_BOOL) return;
  tnk_iter_t it;
  if (tnk_iter_init_any_order(&it, &a->shape, 4, (tnk_view_t[]){a->out, a->cond, a->a, a->b},
                              (int64_t[]){esz, 1, esz, esz}))
    tnk_iter_run(&it, 1 << 14, where_loop, &esz);
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
#define S(E, N) \
  case E: tnk_store_##N(dst, v); break;
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
