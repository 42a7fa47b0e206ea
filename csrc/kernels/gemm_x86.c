/* x86 fp32 GEMM micro-kernels, compiled for their ISA with target
 * attributes and only called when tnk_isa() says the CPU has it. The row
 * loops are spelled out so every accumulator stays in a register. */
#include "gemm_ukernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_DECL(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define AVX2_STEP(r)                                       \
  {                                                        \
    __m256 av = _mm256_broadcast_ss(ak + (r) * a_rs);      \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);            \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);            \
  }
#define AVX2_STORE(r)                                      \
  _mm256_storeu_ps(c + (r) * ldc, c##r##0);                \
  _mm256_storeu_ps(c + (r) * ldc + 8, c##r##1);
#define AVX2_ACCUM(r)                                                          \
  _mm256_storeu_ps(c + (r) * ldc, _mm256_add_ps(c##r##0, _mm256_loadu_ps(c + (r) * ldc)));         \
  _mm256_storeu_ps(c + (r) * ldc + 8, _mm256_add_ps(c##r##1, _mm256_loadu_ps(c + (r) * ldc + 8)));
#define ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)

/* The bodies are inlined twice: once with the packed-panel strides as
 * constants (A broadcasts become immediate-offset loads folded into the
 * FMAs, no stride registers to spill), once generic for unpacked operands. */
__attribute__((target("avx2,fma"), always_inline))
static inline void ukernel_avx2_6x16(TNK_UKERNEL_ARGS) {
  ROWS6(AVX2_DECL)
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_loadu_ps(b + k * b_rs);
    __m256 b1 = _mm256_loadu_ps(b + k * b_rs + 8);
    const float *ak = a + k * a_cs;
    ROWS6(AVX2_STEP)
  }
  if (accumulate) {
    ROWS6(AVX2_ACCUM)
  } else {
    ROWS6(AVX2_STORE)
  }
}

__attribute__((target("avx2,fma")))
void tnk_ukernel_f32_avx2_6x16(TNK_UKERNEL_ARGS) {
  if (a_rs == 1 && a_cs == 6 && b_rs == 16)
    ukernel_avx2_6x16(kc, a, 1, 6, b, 16, c, ldc, accumulate);
  else
    ukernel_avx2_6x16(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}

#define AVX512_DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define AVX512_STEP(r)                                     \
  {                                                        \
    __m512 av = _mm512_set1_ps(ak[(r) * a_rs]);            \
    c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);            \
    c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);            \
  }
#define AVX512_STORE(r)                                    \
  _mm512_storeu_ps(c + (r) * ldc, c##r##0);                \
  _mm512_storeu_ps(c + (r) * ldc + 16, c##r##1);
#define AVX512_ACCUM(r)                                                         \
  _mm512_storeu_ps(c + (r) * ldc, _mm512_add_ps(c##r##0, _mm512_loadu_ps(c + (r) * ldc)));          \
  _mm512_storeu_ps(c + (r) * ldc + 16, _mm512_add_ps(c##r##1, _mm512_loadu_ps(c + (r) * ldc + 16)));
#define ROWS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f"), always_inline))
static inline void ukernel_avx512_12x32(TNK_UKERNEL_ARGS) {
  ROWS12(AVX512_DECL)
  for (int r = 0; r < 12; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = _mm512_loadu_ps(b + k * b_rs);
    __m512 b1 = _mm512_loadu_ps(b + k * b_rs + 16);
    const float *ak = a + k * a_cs;
    ROWS12(AVX512_STEP)
  }
  if (accumulate) {
    ROWS12(AVX512_ACCUM)
  } else {
    ROWS12(AVX512_STORE)
  }
}

__attribute__((target("avx512f")))
void tnk_ukernel_f32_avx512_12x32(TNK_UKERNEL_ARGS) {
  if (a_rs == 1 && a_cs == 12 && b_rs == 32)
    ukernel_avx512_12x32(kc, a, 1, 12, b, 32, c, ldc, accumulate);
  else
    ukernel_avx512_12x32(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}
#define BF16_STEP(r)                                                       \
  {                                                                        \
    __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[(r)]);               \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, av, b0);                           \
    c##r##1 = _mm512_dpbf16_ps(c##r##1, av, b1);                           \
  }

#define BF16_STORE(r)                                                             \
  _mm256_storeu_si256((__m256i *)(o + (r) * ldc), (__m256i)_mm512_cvtneps_pbh(c##r##0));  \
  _mm256_storeu_si256((__m256i *)(o + (r) * ldc + 16), (__m256i)_mm512_cvtneps_pbh(c##r##1));

__attribute__((target("avx512f,avx512bf16")))
void tnk_ukernel_bf16_avx512_12x32(int64_t kp, const uint32_t *a, const uint32_t *b, void *cv,
                                   int64_t ldc, int mode) {
  float *c = cv;
  uint16_t *o = cv;
  ROWS12(AVX512_DECL)
#pragma GCC unroll 2
  for (int64_t p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * 32);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * 32 + 16);
    const uint32_t *ap = a + p * 12;
    ROWS12(BF16_STEP)
  }
  if (mode == 2) {
    ROWS12(BF16_STORE)
  } else if (mode == 1) {
    ROWS12(AVX512_ACCUM)
  } else {
    ROWS12(AVX512_STORE)
  }
}

__attribute__((target("avx2,fma")))
void tnk_dot_rows_f32_avx2(int64_t k, const float *x, const float *w, int64_t ldw,
                           int64_t n, float *out) {
  for (int64_t j = 0; j < n; j++) {
    const float *r = w + j * ldw;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(r + i), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(r + i + 8), s1);
    }
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    float acc = _mm_cvtss_f32(h);
    for (; i < k; i++) acc += x[i] * r[i];
    out[j] = acc;
  }
}

__attribute__((target("avx512f")))
void tnk_dot_rows_f32_avx512(int64_t k, const float *x, const float *w, int64_t ldw,
                             int64_t n, float *out) {
  for (int64_t j = 0; j < n; j++) {
    const float *r = w + j * ldw;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(r + i), s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(r + i + 16), s1);
    }
    float acc = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < k; i++) acc += x[i] * r[i];
    out[j] = acc;
  }
}

#else /* never selected off x86: tnk_isa() is the reference there */
void tnk_ukernel_f32_avx2_6x16(TNK_UKERNEL_ARGS) {
  (void)kc; (void)a; (void)a_rs; (void)a_cs; (void)b; (void)b_rs; (void)c;
  (void)ldc; (void)accumulate;
}
void tnk_ukernel_f32_avx512_12x32(TNK_UKERNEL_ARGS) {
  (void)kc; (void)a; (void)a_rs; (void)a_cs; (void)b; (void)b_rs; (void)c;
  (void)ldc; (void)accumulate;
}
void tnk_dot_rows_f32_avx2(int64_t k, const float *x, const float *w, int64_t ldw,
                           int64_t n, float *out) {
  (void)k; (void)x; (void)w; (void)ldw; (void)n; (void)out;
}
void tnk_ukernel_bf16_avx512_12x32(int64_t kp, const uint32_t *a, const uint32_t *b, void *c,
                                   int64_t ldc, int mode) {
  (void)kp; (void)a; (void)b; (void)c; (void)ldc; (void)mode;
}
void tnk_dot_rows_f32_avx512(int64_t k, const float *x, const float *w, int64_t ldw,
                             int64_t n, float *out) {
  (void)k; (void)x; (void)w; (void)ldw; (void)n; (void)out;
}
#endif
