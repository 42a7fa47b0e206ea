/* The AVX-512 low-precision GEMM pieces: the int8 12x32 tile on int16
 * multiply-adds (x86/lowp_body.h) and on the VNNI dot product (its own
 * target attribute: the configuration takes it only where the CPU has
 * AVX512-VNNI), the weight-only int8 dot rows. */
#include "../x86.h"

#define I8_MR 12
#define I8_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#include "../lowp_body.h"
#include "f8_cvt.h"
#include "../int4_body.h"

void tnk_ukernel_i8_madd_avx512(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                                int64_t ldc, int accumulate) {
  ukernel_i8_madd(kq, a, b, c, ldc, accumulate);
}

void tnk_dot_rows_w8_avx512(int64_t k, const float *x, int64_t ldx, int64_t m, const int8_t *w,
                            int64_t ldw, int64_t n, float *out, int64_t ldo) {
  dot_rows_w8(k, x, ldx, m, w, ldw, n, out, ldo);
}

/* vpdpbusd: four unsigned bytes of A (a + 128) times four signed bytes of
 * B, summed into each int32 lane; lowp_gemm.c subtracts 128 * the column
 * sums of B. */
#define VNNI_STEP(r)                                \
  {                                                 \
    __m512i av = _mm512_set1_epi32((int)ap[(r)]);   \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, av, b0); \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, av, b1); \
  }

__attribute__((target("avx512f,avx512vnni"))) void tnk_ukernel_i8_vnni_avx512(
    int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c, int64_t ldc, int accumulate) {
  I8_ROWS(I8_DECL)
#pragma GCC unroll 2
  for (int64_t q = 0; q < kq; q++) {
    __m512i b0 = _mm512_loadu_si512(b + q * 32), b1 = _mm512_loadu_si512(b + q * 32 + 16);
    const uint32_t *ap = a + q * 12;
    I8_ROWS(VNNI_STEP)
  }
  if (accumulate) {
    I8_ROWS(I8_ACCUM)
  } else {
    I8_ROWS(I8_STORE)
  }
}

/* Weight-only int8 rows against bf16 x rows on the AVX512-BF16 dot product
 * (its own target attribute; the configuration takes it only where the CPU
 * has the instruction): int8 is exact in bf16, so each chunk of 4 weight
 * rows is widened once into an L1 scratch of bf16 and every x row runs its
 * dot products against it, 32 values of k per instruction; the partial
 * sums (m x 4 vectors) live in a buffer across chunks. The products are
 * exact and the sums fp32, as the bf16 GEMM's. m <= 16. */
enum { W8_CHUNK = 1024, W8_PREFETCH = 2048 };

static inline float bf16_val(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static inline __m512bh widen_w8_bf16(
    const int8_t *p) {
  __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
  __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16))));
  return _mm512_cvtne2ps_pbh(hi, lo);
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void tnk_dot_rows_w8_bf16dp_avx512(
    int64_t k, const uint16_t *x, int64_t ldx, int64_t m, const int8_t *w, int64_t ldw, int64_t n,
    float *out, int64_t ldo) {
  __m512bh wb[4][W8_CHUNK / 32];
  __m512 part[16][4];
  int64_t kv = k / 32 * 32; /* the vector part of k; the rest in scalars */
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int64_t r = 0; r < m; r++)
      for (int c = 0; c < 4; c++) part[r][c] = _mm512_setzero_ps();
    for (int64_t k0 = 0; k0 < kv; k0 += W8_CHUNK) {
      int64_t kc = kv - k0 < W8_CHUNK ? kv - k0 : W8_CHUNK, steps = kc / 32;
      for (int c = 0; c < 4; c++) {
        const int8_t *wr = w + (j + c) * ldw + k0;
        for (int64_t s = 0; s < steps; s++) {
          /* the same row's next chunk, a line every other step */
          if (!(s & 1)) _mm_prefetch((const char *)(wr + W8_PREFETCH + s * 32), _MM_HINT_T0);
          wb[c][s] = widen_w8_bf16(wr + s * 32);
        }
      }
      int64_t r = 0;
      for (; r + 4 <= m; r += 4) {
        __m512 acc[4][4];
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++)
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) acc[rr][c] = part[r + rr][c];
        for (int64_t s = 0; s < steps; s++) {
#pragma GCC unroll 4
          for (int rr = 0; rr < 4; rr++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x + (r + rr) * ldx + k0 + s * 32);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) acc[rr][c] = _mm512_dpbf16_ps(acc[rr][c], xv, wb[c][s]);
          }
        }
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; rr++)
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) part[r + rr][c] = acc[rr][c];
      }
      for (; r < m; r++) {
        __m512 acc[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) acc[c] = part[r][c];
        for (int64_t s = 0; s < steps; s++) {
          __m512bh xv = (__m512bh)_mm512_loadu_si512(x + r * ldx + k0 + s * 32);
#pragma GCC unroll 4
          for (int c = 0; c < 4; c++) acc[c] = _mm512_dpbf16_ps(acc[c], xv, wb[c][s]);
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) part[r][c] = acc[c];
      }
    }
    for (int64_t r = 0; r < m; r++)
      for (int c = 0; c < 4; c++) {
        float acc = _mm512_reduce_add_ps(part[r][c]);
        for (int64_t t = kv; t < k; t++)
          acc += bf16_val(x[r * ldx + t]) * (float)w[(j + c) * ldw + t];
        out[r * ldo + j + c] = acc;
      }
  }
  for (; j < n; j++) /* the last weight rows, one at a time */
    for (int64_t r = 0; r < m; r++) {
      float acc = 0.0f;
      for (int64_t t = 0; t < k; t++) acc += bf16_val(x[r * ldx + t]) * (float)w[j * ldw + t];
      out[r * ldo + j] = acc;
    }
}

void tnk_f32_to_f8_avx512(uint8_t *d, const float *s, int64_t n, int e5m2) {
  tnk_f32_to_f8_loop(d, s, n, e5m2);
}

void tnk_int4_unit_avx512(int64_t k, int64_t group, const float *x, int64_t ldx, int64_t m,
                          const uint8_t *w, int64_t ldw, int half, const float *sz, float *out) {
  int4_unit(k, group, x, ldx, m, w, ldw, half, sz, out);
}
