/* Indexing kernels, those of csrc/aten/index_ops.cpp: index_select /
 * index_add / index_put (embedding forward and backward, advanced
 * indexing), nonzero and count_nonzero, gather / scatter (and the scatter
 * reductions) and isin. Every index is checked before it is used: a bad
 * one is skipped and reported through the fault sink, so a kernel never
 * reads or writes outside its views. */
#include "dtype.h"
#include "tnk.h"

#include <string.h>

static int64_t load_index(const void *base, int dt, int64_t i) {
  return dt == TNK_I32 ? ((const int32_t *)base)[i] : ((const int64_t *)base)[i];
}

/* Adds alpha * src into dst elementwise (one element), for any real dtype:
 * floating types through double, integers in int64 (wrapping), bool as or. */
static void accumulate(char *dst, const char *src, int dt, double alpha) {
  if (tnk_floating(dt)) {
    tnk_stf(dst, dt, 0, tnk_ldf(dst, dt, 0) + alpha * tnk_ldf(src, dt, 0));
  } else if (dt == TNK_BOOL) {
    *dst = (char)(*dst || (*src && alpha != 0.0));
  } else {
    tnk_val_t a = tnk_load_any(dst, dt), b = tnk_load_any(src, dt);
    int64_t r = (int64_t)((uint64_t)a.i + (uint64_t)((int64_t)alpha * b.i));
    tnk_store_any(dst, dt, (tnk_val_t){(double)r, 0, r, 1});
  }
}

/* dst = dst op src for the scatter reductions (real dtypes): products wrap
 * for integers; max/min keep a NaN from either side. */
static void combine(char *dst, const char *src, int dt, int mode) {
  if (tnk_floating(dt)) {
    double a = tnk_ldf(dst, dt, 0), b = tnk_ldf(src, dt, 0), r;
    if (mode == TNK_SCATTER_MUL)
      r = a * b;
    else if (a != a || b != b)
      r = a != a ? a : b;
    else
      r = mode == TNK_SCATTER_AMAX ? (a > b ? a : b) : (a < b ? a : b);
    tnk_stf(dst, dt, 0, r);
    return;
  }
  tnk_val_t a = tnk_load_any(dst, dt), b = tnk_load_any(src, dt);
  int64_t r;
  if (mode == TNK_SCATTER_MUL)
    r = (int64_t)((uint64_t)a.i * (uint64_t)b.i);
  else
    r = mode == TNK_SCATTER_AMAX ? (a.i > b.i ? a.i : b.i) : (a.i < b.i ? a.i : b.i);
  if (dt == TNK_BOOL) r = r != 0;
  tnk_store_any(dst, dt, (tnk_val_t){(double)r, 0, r, 1});
}

/* ---- index_select / index_add / index_put ---------------------------------- */

int tnk_index_supported(int dtype, int index_dtype, int mode) {
  if (index_dtype != TNK_I32 && index_dtype != TNK_I64) return 0;
  if (dtype < 0 || dtype >= TNK_DTYPE_COUNT) return 0;
  return mode == TNK_INDEX_ADD ? tnk_real_dtype(dtype) : 1;
}

/* The row (in units of inner) of entry j within one outer slice, or -1 for
 * a bad index (reported once per task through *reported). */
static int64_t index_row(const tnk_index_args_t *a, int64_t j, int *reported) {
  int64_t row = 0;
  for (int k = 0; k < a->nindex; k++) {
    int64_t v = load_index(a->index[k], a->index_dtype, j * a->index_stride[k]);
    int64_t x = v < 0 && a->wrap ? v + a->size[k] : v;
    if (x < 0 || x >= a->size[k]) {
      if (!*reported) tnk_report_fault(&a->fault, v, a->size[k]);
      *reported = 1;
      return -1;
    }
    row = row * a->size[k] + x;
  }
  return row;
}

static int64_t index_rows(const tnk_index_args_t *a) {
  int64_t r = 1;
  for (int k = 0; k < a->nindex; k++) r *= a->size[k];
  return r;
}

static void select_range(void *p, int64_t begin, int64_t end) {
  const tnk_index_args_t *a = p;
  size_t row = (size_t)a->inner * tnk_dtype_size(a->dtype);
  int64_t rows = index_rows(a);
  int reported = 0;
  for (int64_t r = begin; r < end; r++) { /* r = o * n + j */
    int64_t o = r / a->n, j = r % a->n;
    int64_t k = index_row(a, j, &reported);
    char *dst = (char *)a->dense + (size_t)r * row;
    if (k < 0)
      memset(dst, 0, row);
    else
      memcpy(dst, (const char *)a->indexed + (size_t)(o * rows + k) * row, row);
  }
}

/* Each task owns a range of (o, i) columns and walks every index in order,
 * so no two tasks write one element and the order is fixed. */
static void add_range(void *p, int64_t begin, int64_t end) {
  const tnk_index_args_t *a = p;
  size_t esz = tnk_dtype_size(a->dtype);
  int64_t rows = index_rows(a);
  int reported = 0;
  while (begin < end) {
    int64_t o = begin / a->inner, i0 = begin % a->inner;
    int64_t i1 = a->inner < i0 + (end - begin) ? a->inner : i0 + (end - begin);
    for (int64_t j = 0; j < a->n; j++) {
      if (a->has_skip && load_index(a->index[0], a->index_dtype, j * a->index_stride[0]) == a->skip)
        continue;
      int64_t k = index_row(a, j, &reported);
      if (k < 0) continue;
      char *dst = (char *)a->indexed + (size_t)((o * rows + k) * a->inner) * esz;
      const char *src = (const char *)a->dense + (size_t)((o * a->n + j) * a->inner) * esz;
      if (a->mode == TNK_INDEX_PUT) {
        memcpy(dst + i0 * esz, src + i0 * esz, (size_t)(i1 - i0) * esz);
      } else if (a->dtype == TNK_F32) {
        float *d = (float *)dst;
        const float *s = (const float *)src;
        float al = (float)a->alpha;
        for (int64_t i = i0; i < i1; i++) d[i] += al * s[i];
      } else {
        for (int64_t i = i0; i < i1; i++)
          accumulate(dst + i * esz, src + i * esz, a->dtype, a->alpha);
      }
    }
    begin += i1 - i0;
  }
}

void tnk_index(const tnk_index_args_t *a) {
  if (a->nindex < 1 || a->nindex > TNK_MAX_INDICES) return;
  if (a->mode == TNK_INDEX_SELECT) {
    int64_t row = a->inner > 0 ? a->inner : 1;
    tnk_parallel_for(a->outer * a->n, 4096 / row > 1 ? 4096 / row : 1, select_range, (void *)a);
  } else {
    int64_t cols = a->outer * a->inner;
    int64_t work = a->n > 0 ? a->n : 1;
    int64_t grain = 16384 / work > 16 ? 16384 / work : 16;
    tnk_parallel_for(cols, grain, add_range, (void *)a);
  }
}

/* ---- nonzero ------------------------------------------------------------------ */

static int is_nonzero(const char *p, size_t esz) {
  for (size_t b = 0; b < esz; b++)
    if (p[b]) return 1;
  return 0;
}

/* Floating -0.0 is zero: compare values, not bytes, for floating types. */
static int elem_nonzero(const char *base, int dt, size_t esz, int64_t i) {
  if (tnk_floating(dt)) return tnk_ldf(base, dt, i) != 0.0;
  if (dt == TNK_C64 || dt == TNK_C128) {
    tnk_val_t v = tnk_load_any(base + i * (int64_t)esz, dt);
    return v.re != 0.0 || v.im != 0.0;
  }
  return is_nonzero(base + i * (int64_t)esz, esz);
}

void tnk_count_nonzero(const tnk_nonzero_args_t *a) {
  size_t esz = tnk_dtype_size(a->dtype);
  int64_t c = 0;
  for (int64_t i = 0; i < a->numel; i++) c += elem_nonzero(a->in, a->dtype, esz, i);
  *a->count = c;
}

void tnk_nonzero(const tnk_nonzero_args_t *a) {
  size_t esz = tnk_dtype_size(a->dtype);
  int64_t *out = a->out, coord[TNRT_MAX_DIMS] = {0};
  for (int64_t i = 0; i < a->numel; i++) {
    if (elem_nonzero(a->in, a->dtype, esz, i)) {
      for (int d = 0; d < a->ndim; d++) *out++ = coord[d];
    }
    for (int d = a->ndim - 1; d >= 0; d--) { /* advance the coordinate */
      if (++coord[d] < a->sizes[d]) break;
      coord[d] = 0;
    }
  }
}

/* ---- gather / scatter ------------------------------------------------------- */

int tnk_gather_supported(int mode, int dtype) {
  if (dtype < 0 || dtype >= TNK_DTYPE_COUNT) return 0;
  return mode == TNK_SCATTER_ADD || mode >= TNK_SCATTER_MUL ? tnk_real_dtype(dtype) : 1;
}

typedef struct gather_ctx {
  const tnk_gather_args_t *a;
  int nrest;
  int64_t rsize[TNRT_MAX_DIMS], rind[TNRT_MAX_DIMS], rdense[TNRT_MAX_DIMS], ridx[TNRT_MAX_DIMS];
  size_t esz;
  tnk_val_t value;
} gather_ctx_t;

static void gather_range(void *p, int64_t begin, int64_t end) {
  const gather_ctx_t *c = p;
  const tnk_gather_args_t *a = c->a;
  int d = a->dim, reported = 0;
  int64_t len = a->shape.sizes[d];
  int64_t s_ind = a->indexed.strides[d], s_den = a->dense.strides[d], s_idx = a->index.strides[d];
  for (int64_t q = begin; q < end; q++) {
    int64_t rem = q, oi = 0, od = 0, ox = 0;
    for (int k = c->nrest - 1; k >= 0; k--) {
      int64_t x = rem % c->rsize[k];
      rem /= c->rsize[k];
      oi += x * c->rind[k];
      od += x * c->rdense[k];
      ox += x * c->ridx[k];
    }
    for (int64_t t = 0; t < len; t++) {
      int64_t k = ((const int64_t *)a->index.data)[ox + t * s_idx];
      char *den = (char *)a->dense.data + (od + t * s_den) * (int64_t)c->esz;
      if (k < 0 || k >= a->dim_size) {
        if (!reported) tnk_report_fault(&a->fault, k, a->dim_size);
        reported = 1;
        if (a->mode == TNK_GATHER) memset(den, 0, c->esz);
        continue;
      }
      char *ind = (char *)a->indexed.data + (oi + k * s_ind) * (int64_t)c->esz;
      switch (a->mode) {
        case TNK_GATHER: memcpy(den, ind, c->esz); break;
        case TNK_SCATTER: memcpy(ind, den, c->esz); break;
        case TNK_SCATTER_ADD: accumulate(ind, den, a->indexed.dtype, 1.0); break;
        case TNK_SCATTER_VALUE: tnk_store_any(ind, a->indexed.dtype, c->value); break;
        default: combine(ind, den, a->indexed.dtype, a->mode); break;
      }
    }
  }
}

void tnk_gather(const tnk_gather_args_t *a) {
  gather_ctx_t c = {.a = a, .esz = tnk_dtype_size(a->indexed.dtype)};
  int64_t rest = 1;
  for (int k = 0; k < a->shape.ndim; k++) {
    if (k == a->dim) continue;
    c.rsize[c.nrest] = a->shape.sizes[k];
    c.rind[c.nrest] = a->indexed.strides[k];
    c.rdense[c.nrest] = a->dense.strides[k];
    c.ridx[c.nrest] = a->index.strides[k];
    c.nrest++;
    rest *= a->shape.sizes[k];
  }
  if (rest == 0 || a->shape.sizes[a->dim] == 0) return;
  if (a->mode == TNK_SCATTER_VALUE) {
    const tnk_scalar_t *v = &a->value;
    c.value = v->is_integral || v->is_bool ? (tnk_val_t){(double)v->i, 0, v->i, 1}
                                           : (tnk_val_t){v->f, v->fi, 0, 0};
  }
  int64_t len = a->shape.sizes[a->dim];
  tnk_parallel_for(rest, 8192 / len > 1 ? 8192 / len : 1, gather_range, &c);
}

/* ---- isin -------------------------------------------------------------------------- */

int tnk_isin_supported(int dtype) { return tnk_real_dtype(dtype); }

static void isin_range(void *p, int64_t begin, int64_t end) {
  const tnk_isin_args_t *a = p;
  int dt = a->dtype;
  size_t esz = tnk_dtype_size(dt);
  for (int64_t i = begin; i < end; i++) {
    tnk_val_t e = tnk_load_any((const char *)a->elements + i * (int64_t)esz, dt);
    int found = 0;
    for (int64_t j = 0; j < a->m && !found; j++) {
      tnk_val_t t = tnk_load_any((const char *)a->test + j * (int64_t)esz, dt);
      found = tnk_floating(dt) ? e.re == t.re : e.i == t.i;
    }
    ((uint8_t *)a->out)[i] = (uint8_t)(found != a->invert);
  }
}

void tnk_isin(const tnk_isin_args_t *a) {
  int64_t m = a->m > 0 ? a->m : 1;
  tnk_parallel_for(a->n, 16384 / m > 1 ? 16384 / m : 1, isin_range, (void *)a);
}
