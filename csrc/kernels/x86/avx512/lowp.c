/* The AVX-512 low-precision GEMM pieces: the int8 12x32 tile on int16
 * multiply-adds (x86/lowp_body.h) and on the VNNI dot product (its own
 * target attribute: the configuration takes it only where the CPU has
 * AVX512-VNNI), the weight-only int8 dot rows. */
#include "../x86.h"

#define I8_MR 12
#define I8_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#include "../lowp_body.h"

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
