/* The weight-only int4 unit kernel of the x86 variants (config.h,
 * gemm.int4_unit; int4_gemm.c), written once for the vector width this
 * translation unit is compiled for (x86/simd.h). A unit is 32 columns:
 * I4_NV vectors. Each k row's 16 bytes are widened to int32 as they are
 * loaded, split there into low nibbles (unit columns 0-15) and high
 * nibbles (16-31) with one and and one shift, converted to fp32, then
 * dequantised with one FMA against the group's scale and (offset) zero.
 * Up to I4_RF rows of A take the dequantised row straight into register
 * sums; more rows go through a panel of I4_KC dequantised rows in L1 that
 * I4_RT rows at a time read. Each column is one fp32 sum in k order either
 * way. */
#ifndef TNK_X86_INT4_BODY_H
#define TNK_X86_INT4_BODY_H

#include <string.h>

#include "simd.h"

#define I4_NV (32 / VF_LANES)
#if defined(__AVX512F__)
#define I4_RF 4
#define I4_RT 6
#else
#define I4_RF 2
#define I4_RT 3
#endif
#define I4_KC 64

#define I4_INLINE static inline __attribute__((always_inline))

/* row p's nibbles as fp32 in unit order: the low nibbles of bytes 0-15
 * are unit columns 0-15, the high nibbles 16-31 (half: bytes 0-7 only,
 * read; the rest zero); widened to int32 straight from memory, split there */
I4_INLINE void i4_row(const uint8_t *p, int half, vf q[I4_NV]) {
#if defined(__AVX512F__)
  __m512i b = _mm512_cvtepu8_epi32(half ? _mm_loadl_epi64((const __m128i *)p)
                                        : _mm_loadu_si128((const __m128i *)p));
  const __m512i m15 = _mm512_set1_epi32(15);
  q[0] = _mm512_cvtepi32_ps(_mm512_and_si512(b, m15));
  q[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
#else
  __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
  __m256i b1 = half ? _mm256_setzero_si256()
                    : _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8)));
  const __m256i m15 = _mm256_set1_epi32(15);
  q[0] = _mm256_cvtepi32_ps(_mm256_and_si256(b0, m15));
  q[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b1, m15));
  q[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4));
  q[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4));
#endif
}

/* R (a constant) rows of x into register sums */
I4_INLINE void i4_fused(int R, int half, int64_t K, int64_t group, const float *x, int64_t ldx,
                        const uint8_t *w, int64_t ldw, const float *sz, float *out) {
  vf acc[I4_RF][I4_NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < I4_NV; j++) acc[r][j] = vf_zero();
  for (int64_t k0 = 0; k0 < K; k0 += group) {
    const float *s = sz + (k0 / group) * 64;
    int64_t k1 = k0 + group < K ? k0 + group : K;
    vf sv[I4_NV], zv[I4_NV];
#pragma GCC unroll 4
    for (int j = 0; j < I4_NV; j++) {
      sv[j] = vf_load(s + j * VF_LANES);
      zv[j] = vf_load(s + 32 + j * VF_LANES);
    }
    for (int64_t k = k0; k < k1; k++) {
      vf q[I4_NV];
      i4_row(w + k * ldw, half, q);
#pragma GCC unroll 4
      for (int j = 0; j < I4_NV; j++) q[j] = vf_fmadd(q[j], sv[j], zv[j]);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        vf a = vf_set1(x[r * ldx + k]);
#pragma GCC unroll 4
        for (int j = 0; j < I4_NV; j++) acc[r][j] = vf_fmadd(a, q[j], acc[r][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < I4_NV; j++) vf_store(out + r * 32 + j * VF_LANES, acc[r][j]);
}

/* rows [k0, k0 + kc) dequantised into the panel p (32 floats a row) */
I4_INLINE void i4_dequant(int half, int64_t k0, int64_t kc, int64_t group, const uint8_t *w,
                          int64_t ldw, const float *sz, float *p) {
  for (int64_t t = 0; t < kc; t++) {
    const float *s = sz + ((k0 + t) / group) * 64;
    vf q[I4_NV];
    i4_row(w + (k0 + t) * ldw, half, q);
#pragma GCC unroll 4
    for (int j = 0; j < I4_NV; j++)
      vf_store(p + t * 32 + j * VF_LANES,
               vf_fmadd(q[j], vf_load(s + j * VF_LANES), vf_load(s + 32 + j * VF_LANES)));
  }
}

/* R (a constant) rows of x, columns [0, kc), against the panel: out += */
I4_INLINE void i4_panel_rows(int R, int64_t kc, const float *x, int64_t ldx, const float *p,
                             float *out) {
  vf acc[I4_RT][I4_NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < I4_NV; j++) acc[r][j] = vf_load(out + r * 32 + j * VF_LANES);
  for (int64_t t = 0; t < kc; t++) {
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      vf a = vf_set1(x[r * ldx + t]);
#pragma GCC unroll 4
      for (int j = 0; j < I4_NV; j++)
        acc[r][j] = vf_fmadd(a, vf_load(p + t * 32 + j * VF_LANES), acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int j = 0; j < I4_NV; j++) vf_store(out + r * 32 + j * VF_LANES, acc[r][j]);
}

static void i4_panel(int64_t K, int64_t group, const float *x, int64_t ldx, int64_t m,
                     const uint8_t *w, int64_t ldw, int half, const float *sz, float *out) {
  float p[I4_KC * 32] __attribute__((aligned(64)));
  memset(out, 0, (size_t)m * 32 * sizeof(float));
  for (int64_t k0 = 0; k0 < K; k0 += I4_KC) {
    int64_t kc = K - k0 < I4_KC ? K - k0 : I4_KC;
    if (half)
      i4_dequant(1, k0, kc, group, w, ldw, sz, p);
    else
      i4_dequant(0, k0, kc, group, w, ldw, sz, p);
    for (int64_t r0 = 0; r0 < m; r0 += I4_RT) {
      const float *xr = x + r0 * ldx + k0;
      float *o = out + r0 * 32;
      switch (m - r0 < I4_RT ? m - r0 : I4_RT) {
        case 1: i4_panel_rows(1, kc, xr, ldx, p, o); break;
        case 2: i4_panel_rows(2, kc, xr, ldx, p, o); break;
#if I4_RT > 3
        case 3: i4_panel_rows(3, kc, xr, ldx, p, o); break;
        case 4: i4_panel_rows(4, kc, xr, ldx, p, o); break;
        case 5: i4_panel_rows(5, kc, xr, ldx, p, o); break;
#endif
        default: i4_panel_rows(I4_RT, kc, xr, ldx, p, o); break;
      }
    }
  }
}

#define I4_FUSED(R)                                      \
  do {                                                   \
    if (half)                                            \
      i4_fused(R, 1, K, group, x, ldx, w, ldw, sz, out); \
    else                                                 \
      i4_fused(R, 0, K, group, x, ldx, w, ldw, sz, out); \
  } while (0)

static void int4_unit(int64_t K, int64_t group, const float *x, int64_t ldx, int64_t m,
                      const uint8_t *w, int64_t ldw, int half, const float *sz, float *out) {
  switch (m) {
    case 1: I4_FUSED(1); return;
    case 2: I4_FUSED(2); return;
#if I4_RF > 2
    case 3: I4_FUSED(3); return;
    case 4: I4_FUSED(4); return;
#endif
    default: i4_panel(K, group, x, ldx, m, w, ldw, half, sz, out); return;
  }
}

#endif
