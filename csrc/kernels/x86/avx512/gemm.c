/* The AVX-512 GEMM micro-kernels: fp32 12x32 and dot rows
 * (x86/gemm_body.h), and bf16 12x32 on the AVX512-BF16 dot product (its
 * own target attribute: the configuration takes it only where the CPU
 * has the instruction). */
#include "../x86.h"

#define UK_MR 12
#define UK_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#include "../gemm_body.h"

void tnk_ukernel_f32_avx512(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                            int64_t b_rs, float *c, int64_t ldc, int accumulate) {
  ukernel_f32(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}

void tnk_ukernel_f64_avx512(int64_t kc, const double *a, const double *b, double *t) {
  ukernel_f64(kc, a, b, t);
}

void tnk_ukernel4_f32_avx512(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                             int64_t b_rs, float *c, int64_t ldc, int accumulate) {
  ukernel4_f32(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}

void tnk_dot_rows_f32_avx512(int64_t k, const float *x, const float *w, int64_t ldw, int64_t n,
                             float *out) {
  dot_rows_f32(k, x, w, ldw, n, out);
}

void tnk_dot_rows4_f32_avx512(int64_t k, const float *x, int64_t ldx, const float *w, int64_t ldw,
                              int64_t n, float *out, int64_t ldo) {
  dot_rows4_f32(k, x, ldx, w, ldw, n, out, ldo);
}

void tnk_dot_rows4_bf16_avx512(int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w,
                               int64_t ldw, int64_t n, float *out, int64_t ldo) {
  dot_rows4_bf16(k, x, ldx, w, ldw, n, out, ldo);
}

void tnk_dot_rows_bf16_avx512(int64_t k, const uint16_t *x, const uint16_t *w, int64_t ldw,
                              int64_t n, float *out) {
  dot_rows_bf16(k, x, w, ldw, n, out);
}

/* dot_rows4 over bf16 on the AVX512-BF16 dot product (its own target
 * attribute: the configuration takes it only where the CPU has the
 * instruction): each instruction takes 32 values of k, in pairs summed into
 * fp32 lanes, twice the widening form's rate; products as the blocked bf16
 * kernel's. */
__attribute__((target("avx512f,avx512bf16"))) void tnk_dot_rows4_bf16dp_avx512(
    int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw, int64_t n,
    float *out, int64_t ldo) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512 s[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) s[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      __m512bh wv[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; c++) wv[c] = (__m512bh)_mm512_loadu_si512(w + (j + c) * ldw + i);
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++) {
        __m512bh xv = (__m512bh)_mm512_loadu_si512(x + r * ldx + i);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) s[r][c] = _mm512_dpbf16_ps(s[r][c], xv, wv[c]);
      }
    }
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 4; c++) {
        float acc = _mm512_reduce_add_ps(s[r][c]);
        for (int64_t t = i; t < k; t++)
          acc += bf16_widen(x[r * ldx + t]) * bf16_widen(w[(j + c) * ldw + t]);
        out[r * ldo + j + c] = acc;
      }
  }
  for (; j < n; j++) /* the last columns, one at a time */
    for (int r = 0; r < 4; r++)
      dot_rows_bf16(k, x + r * ldx, w + j * ldw, ldw, 1, out + r * ldo + j);
}

#define BF16_STEP(r)                                         \
  {                                                          \
    __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[(r)]); \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, av, b0);             \
    c##r##1 = _mm512_dpbf16_ps(c##r##1, av, b1);             \
  }
#define BF16_STORE(r)                                                                    \
  _mm256_storeu_si256((__m256i *)(o + (r) * ldc), (__m256i)_mm512_cvtneps_pbh(c##r##0)); \
  _mm256_storeu_si256((__m256i *)(o + (r) * ldc + 16), (__m256i)_mm512_cvtneps_pbh(c##r##1));

__attribute__((target("avx512f,avx512bf16"))) void tnk_ukernel_bf16_avx512(
    int64_t kp, const uint32_t *a, const uint32_t *b, void *cv, int64_t ldc, int mode) {
  float *c = cv;
  uint16_t *o = cv;
  UK_ROWS(UK_DECL)
#pragma GCC unroll 2
  for (int64_t p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * 32);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * 32 + 16);
    const uint32_t *ap = a + p * 12;
    UK_ROWS(BF16_STEP)
  }
  if (mode == 2) {
    UK_ROWS(BF16_STORE)
  } else if (mode == 1) {
    UK_ROWS(UK_ACCUM)
  } else {
    UK_ROWS(UK_STORE)
  }
}
