/* Sorting (stable merge sort of order-preserving integer keys), top-k
 * (a bounded insertion buffer for small k), histograms and binary search
 * (searchsorted). */
#include "dtype.h"
#include "tnk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tnk_sort_supported(int dtype) { return dtype >= TNK_BOOL && dtype <= TNK_F64; }

/* A uint64 key whose unsigned order is the element order: NaN above every
 * number, -0.0 equal to 0.0, signed integers offset by 2^63. */
static uint64_t sort_key(const char *p, int dt) {
  if (tnk_floating(dt)) {
    double d;
    switch (dt) {
      case TNK_F32: {
        float f;
        memcpy(&f, p, 4);
        d = f;
        break;
      }
      case TNK_F64: memcpy(&d, p, 8); break;
      default: d = tnk_ldf(p, dt, 0); break;
    }
    if (isnan(d)) return UINT64_MAX;
    if (d == 0) d = 0.0;
    uint64_t u;
    memcpy(&u, &d, 8);
    return (u >> 63) ? ~u : u | (1ull << 63);
  }
  tnk_val_t v = tnk_load_any(p, dt);
  if (dt == TNK_BOOL || dt == TNK_U8) return (uint64_t)v.i;
  return (uint64_t)v.i ^ (1ull << 63);
}

typedef struct item {
  uint64_t key;
  int64_t idx;
} item_t;

/* Bottom-up stable merge sort by key (ascending); tmp holds n items. */
static void merge_sort(item_t *a, item_t *tmp, int64_t n) {
  for (int64_t i = 1; i < n; i++) { /* insertion sort of runs of 16 */
    if (i % 16 == 0) continue;
    item_t x = a[i];
    int64_t j = i - 1;
    while (j >= (i / 16) * 16 && a[j].key > x.key) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = x;
  }
  item_t *src = a, *dst = tmp;
  for (int64_t w = 16; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = src[j].key < src[i].key ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    item_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

static void sort_range(void *p, int64_t begin, int64_t end) {
  const tnk_sort_args_t *a = p;
  size_t esz = tnk_dtype_size(a->dtype);
  int small_k = a->k <= 32 && a->k * 8 < a->len;
  int64_t cap = small_k ? a->k + 1 : a->len;
  item_t *buf = malloc((size_t)(2 * cap) * sizeof *buf);
  if (!buf) return;
  for (int64_t r = begin; r < end; r++) {
    const char *row = (const char *)a->in + (size_t)(r * a->len) * esz;
    int64_t m = 0;
    for (int64_t i = 0; i < a->len; i++) {
      uint64_t key = sort_key(row + i * (int64_t)esz, a->dtype);
      if (a->descending) key = ~key; /* ascending order of ~key; ties stay */
      if (!small_k) {
        buf[m++] = (item_t){key, i};
        continue;
      }
      /* keep the k smallest keys sorted; a tie never displaces an earlier one */
      if (m == a->k && key >= buf[m - 1].key) continue;
      int64_t j = m < a->k ? m++ : m - 1;
      while (j > 0 && buf[j - 1].key > key) {
        buf[j] = buf[j - 1];
        j--;
      }
      buf[j] = (item_t){key, i};
    }
    if (!small_k) merge_sort(buf, buf + cap, m);
    char *vals = (char *)a->values + (size_t)(r * a->k) * esz;
    int64_t *idx = (int64_t *)a->indices + r * a->k;
    for (int64_t i = 0; i < a->k; i++) {
      idx[i] = buf[i].idx;
      memcpy(vals + i * (int64_t)esz, row + buf[i].idx * (int64_t)esz, esz);
    }
  }
  free(buf);
}

void tnk_sort(const tnk_sort_args_t *a) {
  if (a->k > a->len || a->len <= 0 || a->k <= 0) return;
  int64_t len = a->len;
  tnk_parallel_for(a->rows, 8192 / len > 1 ? 8192 / len : 1, sort_range, (void *)a);
}

/* ---- histc ------------------------------------------------------------------------ */

int tnk_histc_supported(int dtype, int out_dtype) {
  return dtype >= TNK_U8 && dtype <= TNK_F64 && out_dtype >= TNK_U8 && out_dtype <= TNK_F64;
}

void tnk_histc(const tnk_histc_args_t *a) {
  size_t esz = tnk_dtype_size(a->dtype), osz = tnk_dtype_size(a->out_dtype);
  int64_t *counts = calloc((size_t)a->bins, sizeof *counts);
  if (!counts) return;
  for (int64_t i = 0; i < a->n; i++) {
    int64_t pos;
    if (a->dtype == TNK_F64) {
      double x = ((const double *)a->in)[i];
      if (!(x >= a->lo && x <= a->hi)) continue;
      pos = (int64_t)((x - a->lo) * (double)a->bins / (a->hi - a->lo));
    } else if (tnk_floating(a->dtype)) {
      float x = (float)tnk_ldf(a->in, a->dtype, i), lo = (float)a->lo, hi = (float)a->hi;
      if (!(x >= lo && x <= hi)) continue;
      pos = (int64_t)((x - lo) * (float)a->bins / (hi - lo));
    } else {
      double x = (double)tnk_load_any((const char *)a->in + i * (int64_t)esz, a->dtype).i;
      if (!(x >= a->lo && x <= a->hi)) continue;
      pos = (int64_t)((x - a->lo) * (double)a->bins / (a->hi - a->lo));
    }
    if (pos >= a->bins) pos = a->bins - 1;
    if (pos < 0) pos = 0;
    counts[pos]++;
  }
  for (int64_t b = 0; b < a->bins; b++)
    tnk_store_any((char *)a->out + b * (int64_t)osz, a->out_dtype,
                  (tnk_val_t){(double)counts[b], 0, counts[b], 1});
  free(counts);
}

/* ---- searchsorted ------------------------------------------------------------- */

int tnk_searchsorted_supported(int dtype) { return dtype >= TNK_U8 && dtype <= TNK_F64; }

/* Boundary j of a row: floating types widened to double (exact), integers
 * to int64, so one comparison serves every dtype. */
typedef struct bound_val {
  double f;
  int64_t i;
} bound_val_t;

static bound_val_t load_bound(const char *base, int dt, int64_t j) {
  bound_val_t v = {0, 0};
  if (tnk_floating(dt))
    v.f = tnk_ldf(base, dt, j);
  else
    v.i = tnk_load_any(base + j * (int64_t)tnk_dtype_size(dt), dt).i;
  return v;
}

/* PyTorch's conditions: the lower bound moves right while !(mid >= v), the
 * upper bound while !(mid > v) (NaN compares false either way). */
static int go_right(bound_val_t mid, bound_val_t v, int fl, int right) {
  if (fl) return right ? !(mid.f > v.f) : !(mid.f >= v.f);
  return right ? !(mid.i > v.i) : !(mid.i >= v.i);
}

static void searchsorted_range(void *ctx, int64_t begin, int64_t end) {
  const tnk_searchsorted_args_t *a = ctx;
  const int fl = tnk_floating(a->dtype);
  const int64_t esz = (int64_t)tnk_dtype_size(a->dtype);
  int reported = 0;
  for (int64_t k = begin; k < end; k++) {
    int64_t row = a->bd_rows == 1 ? 0 : k / a->per_row;
    const char *bd = (const char *)a->boundaries + row * a->len * esz;
    const int64_t *sorter = a->sorter ? a->sorter + row * a->len : NULL;
    bound_val_t v = load_bound(a->values, a->dtype, k);
    int64_t lo = 0, hi = a->len, bad = 0;
    while (lo < hi) {
      int64_t mid = lo + ((hi - lo) >> 1), j = mid;
      if (sorter) {
        j = sorter[mid];
        if (j < 0 || j >= a->len) {
          if (!reported && a->fault.fn)
            a->fault.fn(a->fault.ctx, a->fault.kind, a->fault.what, j, a->len, a->fault.origin);
          reported = 1;
          bad = 1;
          break;
        }
      }
      if (go_right(load_bound(bd, a->dtype, j), v, fl, a->right))
        lo = mid + 1;
      else
        hi = mid;
    }
    int64_t pos = bad ? 0 : lo;
    if (a->out_int32)
      ((int32_t *)a->out)[k] = (int32_t)pos;
    else
      ((int64_t *)a->out)[k] = pos;
  }
}

void tnk_searchsorted(const tnk_searchsorted_args_t *a) {
  if (a->n <= 0) return;
  /* every sorter entry is checked, read or not, as CPU checks them */
  for (int64_t j = 0; a->sorter && j < a->bd_rows * a->len; j++)
    if (a->sorter[j] < 0 || a->sorter[j] >= a->len) {
      if (a->fault.fn)
        a->fault.fn(a->fault.ctx, a->fault.kind, a->fault.what, a->sorter[j], a->len,
                    a->fault.origin);
      memset(a->out, 0, (size_t)a->n * (a->out_int32 ? 4 : 8));
      return;
    }
  tnk_parallel_for(a->n, 4096, searchsorted_range, (void *)a);
}
