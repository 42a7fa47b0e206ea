/* The AVX-512 variants of vmath.h (this directory is compiled with
 * -mavx512f): the shared vector algorithms (x86/vmath_body.h) at 16 lanes,
 * and the AVX-512-only pipelined row kernels and streaming copy. */
#include <math.h>
#include <string.h>

#include "../simd.h"
#include "../x86.h"
#include "../vmath_body.h"

/* exp16 scales by 2^n with vscalefps, which rounds overflow to inf and
 * underflow through the subnormals to 0 exactly as IEEE does, so the only
 * special handling is a clamp that keeps n finite (NaN passes the clamp:
 * vminps/vmaxps return their second operand when either is NaN). */
static inline vf vf_exp(vf x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = exp_poly(r);
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

/* The pipelined softmax below issues one load of the next row per vector
 * of arithmetic on the current row, so the out-of-order window holds
 * only a dozen of those loads and the hardware prefetcher does not run far
 * enough ahead to cover memory latency at full bandwidth. A software
 * prefetch 16 KiB ahead of the streamed-in row does; into L2 only (T2), as
 * L1 is busy with the rows being computed (64 MiB softmax in the C harness,
 * two threads, while the host's streaming copy ran 49-53 GB/s: 34-36 GB/s
 * without, 38-41 with a T0 prefetch, 43-54 with T2 8 KiB ahead; while it
 * ran 80-86 GB/s: 54-67 GB/s 8 KiB ahead, 57-70 16 KiB ahead; the lighter
 * layer norm loop below measured the same with or without). A prefetch
 * never faults, so running past the last row is harmless. A macro: GCC 12
 * finds a function holding only a prefetch side-effect free and deletes
 * its calls. */
#define PREFETCH_AHEAD_BYTES 16384
#define prefetch_ahead(p) \
  _mm_prefetch((const char *)((uintptr_t)(p) + PREFETCH_AHEAD_BYTES), _MM_HINT_T2)

/* Softmax of `rows` contiguous rows of n floats, software-pipelined: one
 * pass over the columns computes the exponentials of row r (in L1 since its
 * maximum was taken), the maximum of row r + 1 (streamed in from memory) and
 * the scaled output of row r - 1 (streamed out), so the memory traffic of
 * two rows overlaps the arithmetic of a third. n is a multiple of 16, y rows
 * start 64-byte aligned, scratch holds 2n floats (64-byte aligned). */
typedef struct sm_pass {
  __m512 sum, max;
  __mmask16 nan;
} sm_pass_t;

static inline __attribute__((always_inline)) sm_pass_t sm_columns(const float *xr, float m,
                                                                  float *cur, const float *xn,
                                                                  const float *prev, float inv,
                                                                  float *yp, int64_t n, int next,
                                                                  int out) {
  __m512 vm = _mm512_set1_ps(m), vi = _mm512_set1_ps(inv);
  sm_pass_t p = {_mm512_setzero_ps(), _mm512_set1_ps(-INFINITY), 0};
  for (int64_t k = 0; k < n; k += 16) {
    __m512 e = expb(_mm512_sub_ps(_mm512_loadu_ps(xr + k), vm));
    _mm512_store_ps(cur + k, e);
    p.sum = _mm512_add_ps(p.sum, e);
    if (next) {
      prefetch_ahead(xn + k);
      __m512 v = _mm512_loadu_ps(xn + k);
      p.nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      p.max = _mm512_max_ps(p.max, v);
    }
    if (out) _mm512_stream_ps(yp + k, _mm512_mul_ps(_mm512_load_ps(prev + k), vi));
  }
  return p;
}

static float sm_row_max(const float *x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t k = 0; k < n; k += 16) {
    __m512 v = _mm512_loadu_ps(x + k);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    mx = _mm512_max_ps(mx, v);
  }
  return nan ? NAN : _mm512_reduce_max_ps(mx);
}

void tnk_vsoftmax_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                         float *scratch) {
  if (rows <= 0) return;
  float *cur = scratch, *prev = scratch + n, inv = 0;
  float m = sm_row_max(x, n);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n, *xn = xr + n;
    float *yp = y + (r - 1) * n;
    int next = r + 1 < rows;
    sm_pass_t p;
    if (next && r > 0)
      p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 1, 1);
    else if (next)
      p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 1, 0);
    else if (r > 0)
      p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 0, 1);
    else
      p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 0, 0);
    inv = 1.0f / _mm512_reduce_add_ps(p.sum);
    if (next) m = p.nan ? NAN : _mm512_reduce_max_ps(p.max);
    float *t = cur;
    cur = prev;
    prev = t;
  }
  __m512 vi = _mm512_set1_ps(inv); /* the last row */
  float *yl = y + (rows - 1) * n;
  for (int64_t k = 0; k < n; k += 16)
    _mm512_stream_ps(yl + k, _mm512_mul_ps(_mm512_load_ps(prev + k), vi));
  _mm_sfence();
}

/* Layer norm of `rows` contiguous rows of n floats, pipelined like the
 * softmax above: one pass over the columns normalises row r (in L1 since
 * its statistics were taken) into y with streaming stores and sums row r + 1
 * as it streams in; the squared deviations of a row are then summed from
 * L1. n a multiple of 16, y rows 64-byte aligned; w, b may be NULL. */
static inline __attribute__((always_inline)) __m512 ln_columns(const float *xr, float *yr,
                                                               const float *xn, float mean,
                                                               float rstd, const float *w,
                                                               const float *b, int64_t n,
                                                               int next) {
  __m512 vm = _mm512_set1_ps(mean), vr = _mm512_set1_ps(rstd), acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) {
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + k), vm), vr);
    if (w) v = _mm512_mul_ps(v, _mm512_loadu_ps(w + k));
    if (b) v = _mm512_add_ps(v, _mm512_loadu_ps(b + k));
    _mm512_stream_ps(yr + k, v);
    if (next) acc = _mm512_add_ps(acc, _mm512_loadu_ps(xn + k));
  }
  return acc;
}

void tnk_vlayer_norm_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                            float eps, const float *w, const float *b, float *mean,
                                            float *rstd) {
  if (rows <= 0) return;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + k));
  float sum = _mm512_reduce_add_ps(acc);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float mu = sum / (float)n;
    __m512 vm = _mm512_set1_ps(mu), sq = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k += 16) {
      __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xr + k), vm);
      sq = _mm512_fmadd_ps(d, d, sq);
    }
    float rs = 1.0f / sqrtf(_mm512_reduce_add_ps(sq) / (float)n + eps);
    mean[r] = mu;
    rstd[r] = rs;
    if (r + 1 < rows)
      sum = _mm512_reduce_add_ps(ln_columns(xr, y + r * n, xr + n, mu, rs, w, b, n, 1));
    else
      ln_columns(xr, y + r * n, xr + n, mu, rs, w, b, n, 0);
  }
  _mm_sfence();
}

/* A large copy: 64-byte loads and streaming stores (the destination is
 * not read first and does not evict the caches), head and tail by memcpy. */
void tnk_vcopy_stream_avx512(void *dst, const void *src, int64_t bytes) {
  char *d = dst;
  const char *s = src;
  int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63);
  if (head > bytes) head = bytes;
  memcpy(d, s, (size_t)head);
  int64_t k = head;
  for (; k + 256 <= bytes; k += 256) {
    __m512i a0 = _mm512_loadu_si512((const void *)(s + k));
    __m512i a1 = _mm512_loadu_si512((const void *)(s + k + 64));
    __m512i a2 = _mm512_loadu_si512((const void *)(s + k + 128));
    __m512i a3 = _mm512_loadu_si512((const void *)(s + k + 192));
    _mm512_stream_si512((void *)(d + k), a0);
    _mm512_stream_si512((void *)(d + k + 64), a1);
    _mm512_stream_si512((void *)(d + k + 128), a2);
    _mm512_stream_si512((void *)(d + k + 192), a3);
  }
  for (; k + 64 <= bytes; k += 64)
    _mm512_stream_si512((void *)(d + k), _mm512_loadu_si512((const void *)(s + k)));
  memcpy(d + k, s + k, (size_t)(bytes - k));
  _mm_sfence();
}
