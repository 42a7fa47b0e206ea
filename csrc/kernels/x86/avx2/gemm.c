/* The AVX2+FMA GEMM micro-kernel (6x16) and dot rows (x86/gemm_body.h). */
#include "../x86.h"

#define UK_MR 6
#define UK_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#include "../gemm_body.h"

void tnk_ukernel_f32_avx2(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                          int64_t b_rs, float *c, int64_t ldc, int accumulate) {
  ukernel_f32(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}

void tnk_ukernel_f64_avx2(int64_t kc, const double *a, const double *b, double *t) {
  ukernel_f64(kc, a, b, t);
}

void tnk_ukernel4_f32_avx2(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                           int64_t b_rs, float *c, int64_t ldc, int accumulate) {
  ukernel4_f32(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}

void tnk_dot_rows_f32_avx2(int64_t k, const float *x, const float *w, int64_t ldw, int64_t n,
                           float *out) {
  dot_rows_f32(k, x, w, ldw, n, out);
}

void tnk_dot_rows4_f32_avx2(int64_t k, const float *x, int64_t ldx, const float *w, int64_t ldw,
                            int64_t n, float *out, int64_t ldo) {
  dot_rows4_f32(k, x, ldx, w, ldw, n, out, ldo);
}

void tnk_dot_rows4_bf16_avx2(int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w,
                             int64_t ldw, int64_t n, float *out, int64_t ldo) {
  dot_rows4_bf16(k, x, ldx, w, ldw, n, out, ldo);
}

void tnk_dot_rows_bf16_avx2(int64_t k, const uint16_t *x, const uint16_t *w, int64_t ldw, int64_t n,
                            float *out) {
  dot_rows_bf16(k, x, w, ldw, n, out);
}
