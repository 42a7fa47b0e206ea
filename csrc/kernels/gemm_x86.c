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

__attribute__((target("avx2,fma")))
void tnk_ukernel_f32_avx2_6x16(TNK_UKERNEL_ARGS) {
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

__attribute__((target("avx512f")))
void tnk_ukernel_f32_avx512_12x32(TNK_UKERNEL_ARGS) {
  ROWS12(AVX512_DECL)
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
#else /* never selected off x86: tnk_isa() is the reference there */
void tnk_ukernel_f32_avx2_6x16(TNK_UKERNEL_ARGS) {
  (void)kc; (void)a; (void)a_rs; (void)a_cs; (void)b; (void)b_rs; (void)c;
  (void)ldc; (void)accumulate;
}
void tnk_ukernel_f32_avx512_12x32(TNK_UKERNEL_ARGS) {
  (void)kc; (void)a; (void)a_rs; (void)a_cs; (void)b; (void)b_rs; (void)c;
  (void)ldc; (void)accumulate;
}
#endif
