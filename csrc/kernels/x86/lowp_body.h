/* The low-precision GEMM pieces of the x86 variants (lowp_gemm.c), written
 * once for the vector width this translation unit is compiled for
 * (x86/simd.h): the int8 micro-kernel on the widening int16 multiply-add
 * (pmaddwd: pairs of int16 products summed into int32 lanes, exact), and
 * the weight-only int8 dot rows. Each variant's file includes it after
 * defining I8_MR (rows of the int8 tile) and I8_ROWS(X) (X(0) .. X(I8_MR -
 * 1)); the tile is I8_MR x (2 * VF_LANES). */
#ifndef TNK_X86_LOWP_BODY_H
#define TNK_X86_LOWP_BODY_H

#include "simd.h"

#if defined(__AVX512F__)
typedef __m512i vi;
#define vi_load(p) _mm512_loadu_si512((const void *)(p))
#define vi_store(p, v) _mm512_storeu_si512((void *)(p), (v))
#define vi_set1 _mm512_set1_epi32
#define vi_zero _mm512_setzero_si512
#define vi_add _mm512_add_epi32
#define vi_madd16 _mm512_madd_epi16
/* VF_LANES int8 widened exactly to fp32 */
static inline vf vf_load_i8(const int8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
#else
typedef __m256i vi;
#define vi_load(p) _mm256_loadu_si256((const __m256i *)(p))
#define vi_store(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define vi_set1 _mm256_set1_epi32
#define vi_zero _mm256_setzero_si256
#define vi_add _mm256_add_epi32
#define vi_madd16 _mm256_madd_epi16
static inline vf vf_load_i8(const int8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
#endif

/* int8 tile on int16 pairs: T[r][:] += sum over pairs of a[r] * b (both
 * words hold two int16, k and k + 1). */
#define I8_DECL(r) vi c##r##0 = vi_zero(), c##r##1 = vi_zero();
#define I8_STEP(r)                                \
  {                                               \
    vi av = vi_set1((int)ap[(r)]);                \
    c##r##0 = vi_add(c##r##0, vi_madd16(av, b0)); \
    c##r##1 = vi_add(c##r##1, vi_madd16(av, b1)); \
  }
#define I8_STORE(r)                 \
  vi_store(c + (r) * ldc, c##r##0); \
  vi_store(c + (r) * ldc + VF_LANES, c##r##1);
#define I8_ACCUM(r)                                                 \
  vi_store(c + (r) * ldc, vi_add(vi_load(c + (r) * ldc), c##r##0)); \
  vi_store(c + (r) * ldc + VF_LANES, vi_add(vi_load(c + (r) * ldc + VF_LANES), c##r##1));

static void ukernel_i8_madd(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                            int64_t ldc, int accumulate) {
  I8_ROWS(I8_DECL)
  for (int64_t q = 0; q < kq; q++) {
    vi b0 = vi_load(b + q * 2 * VF_LANES), b1 = vi_load(b + q * 2 * VF_LANES + VF_LANES);
    const uint32_t *ap = a + q * I8_MR;
    I8_ROWS(I8_STEP)
  }
  if (accumulate) {
    I8_ROWS(I8_ACCUM)
  } else {
    I8_ROWS(I8_STORE)
  }
}

/* Weight-only int8 dot rows: R (1-4, a constant where it is inlined) x
 * rows against 4 weight rows, a cache line (64 k) of each weight row per
 * step, each weight vector widened once and used for every x row (4R sums
 * in registers); the weight lines PREFETCH_W bytes ahead are requested
 * early (four row streams at once outrun the hardware prefetcher: one
 * thread streamed 19 GB/s without, 24.5 GB/s with, at 4096 x 4096). */
#define PREFETCH_W 512
static inline __attribute__((always_inline)) void dot_w8_rx4(int R, int64_t k, const float *x,
                                                             int64_t ldx, const int8_t *w,
                                                             int64_t ldw, float *out, int64_t ldo) {
  vf s[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) s[r][j] = vf_zero();
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
      _mm_prefetch((const char *)(w + j * ldw + i + PREFETCH_W), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int u = 0; u < 64; u += VF_LANES) {
      vf wv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) wv[j] = vf_load_i8(w + j * ldw + i + u);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        vf xv = vf_load(x + r * ldx + i + u);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) s[r][j] = vf_fmadd(xv, wv[j], s[r][j]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) {
      float acc = vf_hsum(s[r][j]);
      for (int64_t t = i; t < k; t++) acc += x[r * ldx + t] * (float)w[j * ldw + t];
      out[r * ldo + j] = acc;
    }
}

/* x rows against fewer than 4 weight rows (the last columns) */
static void dot_w8_tail(int64_t k, const float *x, int64_t ldx, int64_t m, const int8_t *w,
                        int64_t ldw, int cols, float *out, int64_t ldo) {
  for (int64_t r = 0; r < m; r++)
    for (int j = 0; j < cols; j++) {
      vf s = vf_zero();
      int64_t i = 0;
      for (; i + VF_LANES <= k; i += VF_LANES)
        s = vf_fmadd(vf_load(x + r * ldx + i), vf_load_i8(w + j * ldw + i), s);
      float acc = vf_hsum(s);
      for (; i < k; i++) acc += x[r * ldx + i] * (float)w[j * ldw + i];
      out[r * ldo + j] = acc;
    }
}

/* One x row against one weight row read straight through: one
 * sequential stream, what the hardware prefetcher follows best (one
 * thread, 4096 x 4096: 32 GB/s, against 24.5 GB/s for four weight rows
 * side by side with software prefetch and 29.5 GB/s for a plain read
 * loop); four vectors per step into independent sums. */
static inline void dot_w8_row(int64_t k, const float *x, const int8_t *w, float *out) {
  vf s0 = vf_zero(), s1 = vf_zero(), s2 = vf_zero(), s3 = vf_zero();
  int64_t i = 0;
  for (; i + 4 * VF_LANES <= k; i += 4 * VF_LANES) {
    s0 = vf_fmadd(vf_load(x + i), vf_load_i8(w + i), s0);
    s1 = vf_fmadd(vf_load(x + i + VF_LANES), vf_load_i8(w + i + VF_LANES), s1);
    s2 = vf_fmadd(vf_load(x + i + 2 * VF_LANES), vf_load_i8(w + i + 2 * VF_LANES), s2);
    s3 = vf_fmadd(vf_load(x + i + 3 * VF_LANES), vf_load_i8(w + i + 3 * VF_LANES), s3);
  }
  for (; i + VF_LANES <= k; i += VF_LANES) s0 = vf_fmadd(vf_load(x + i), vf_load_i8(w + i), s0);
  float acc = vf_hsum(vf_add(vf_add(s0, s1), vf_add(s2, s3)));
  for (; i < k; i++) acc += x[i] * (float)w[i];
  *out = acc;
}

static void dot_rows_w8(int64_t k, const float *x, int64_t ldx, int64_t m, const int8_t *w,
                        int64_t ldw, int64_t n, float *out, int64_t ldo) {
  int64_t j = 0;
  if (m == 1) { /* batch-1 decode: the weight as one stream (two rows at
                  * once measured 0.94 ms against 0.78 ms side by side) */
    for (; j < n; j++) dot_w8_row(k, x, w + j * ldw, out + j);
    return;
  }
  for (; j + 4 <= n; j += 4)
    for (int64_t r = 0; r < m; r += 4) {
      const float *xr = x + r * ldx;
      float *o = out + r * ldo + j;
      switch (m - r < 4 ? m - r : 4) {
        case 1: dot_w8_rx4(1, k, xr, ldx, w + j * ldw, ldw, o, ldo); break;
        case 2: dot_w8_rx4(2, k, xr, ldx, w + j * ldw, ldw, o, ldo); break;
        case 3: dot_w8_rx4(3, k, xr, ldx, w + j * ldw, ldw, o, ldo); break;
        default: dot_w8_rx4(4, k, xr, ldx, w + j * ldw, ldw, o, ldo); break;
      }
    }
  if (j < n) dot_w8_tail(k, x, ldx, m, w + j * ldw, ldw, (int)(n - j), out + j, ldo);
}

#endif
