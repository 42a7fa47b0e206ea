/* The AVX2 low-precision GEMM pieces (x86/lowp_body.h): the int8 6x16 tile
 * on int16 multiply-adds, the weight-only int8 dot rows. */
#include "../x86.h"

#define I8_MR 6
#define I8_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#include "../lowp_body.h"
#include "f8_cvt.h"
#include "../int4_body.h"

void tnk_ukernel_i8_madd_avx2(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                              int64_t ldc, int accumulate) {
  ukernel_i8_madd(kq, a, b, c, ldc, accumulate);
}

void tnk_dot_rows_w8_avx2(int64_t k, const float *x, int64_t ldx, int64_t m, const int8_t *w,
                          int64_t ldw, int64_t n, float *out, int64_t ldo) {
  dot_rows_w8(k, x, ldx, m, w, ldw, n, out, ldo);
}

void tnk_f32_to_f8_avx2(uint8_t *d, const float *s, int64_t n, int e5m2) {
  tnk_f32_to_f8_loop(d, s, n, e5m2);
}

void tnk_int4_unit_avx2(int64_t k, int64_t group, const float *x, int64_t ldx, int64_t m,
                        const uint8_t *w, int64_t ldw, int half, const float *sz, float *out) {
  int4_unit(k, group, x, ldx, m, w, ldw, half, sz, out);
}
