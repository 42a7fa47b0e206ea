/* The x86 kernel variants (internal): what kernels/x86/avx2/ and
 * kernels/x86/avx512/ define, for their config.c and the C tests. */
#ifndef TNK_X86_H
#define TNK_X86_H

#include <stdint.h>

#define TNK_X86_VMATH_DECL(SFX)                                                                    \
  float tnk_vexp_sum_f32_##SFX(const float *x, float sub, float *y, int64_t n);                    \
  float tnk_vexp_bounded_sum_f32_##SFX(const float *x, float sub, float *y, int64_t n);            \
  void tnk_vsigmoid_f32_##SFX(const float *x, float *y, int64_t n, int silu);                      \
  void tnk_vsilu_bwd_f32_##SFX(const float *g, const float *x, float *out, int64_t n);             \
  void tnk_vgelu_f32_##SFX(const float *x, float *y, int64_t n, int tanh_form);                    \
  void tnk_vgelu_bwd_f32_##SFX(const float *g, const float *x, float *out, int64_t n,              \
                               int tanh_form);                                                     \
  void tnk_vscale_stream_f32_##SFX(const float *x, float s, float *y, int64_t n);                  \
  void tnk_ukernel_f32_##SFX(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs,               \
                             const float *b, int64_t b_rs, float *c, int64_t ldc, int accumulate); \
  void tnk_ukernel_f64_##SFX(int64_t kc, const double *a, const double *b, double *t);             \
  void tnk_ukernel4_f32_##SFX(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs,              \
                              const float *b, int64_t b_rs, float *c, int64_t ldc,                 \
                              int accumulate);                                                     \
  void tnk_dot_rows_f32_##SFX(int64_t k, const float *x, const float *w, int64_t ldw, int64_t n,   \
                              float *out);                                                         \
  void tnk_dot_rows_bf16_##SFX(int64_t k, const uint16_t *x, const uint16_t *w, int64_t ldw,       \
                               int64_t n, float *out);                                             \
  void tnk_dot_rows4_f32_##SFX(int64_t k, const float *x, int64_t ldx, const float *w,             \
                               int64_t ldw, int64_t n, float *out, int64_t ldo);                   \
  void tnk_dot_rows4_bf16_##SFX(int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w,      \
                                int64_t ldw, int64_t n, float *out, int64_t ldo);
TNK_X86_VMATH_DECL(avx2)
TNK_X86_VMATH_DECL(avx512)

/* AVX2 only (the AVX-512 configuration keeps them) */
double tnk_vsum_f32_f64_avx2(const float *x, int64_t n);
float tnk_vsum_f32_avx2(const float *x, int64_t n);
float tnk_vsumsqdev_f32_avx2(const float *x, int64_t n, float mean);
float tnk_vmax_f32_avx2(const float *x, int64_t n);
void tnk_vnormalize_f32_avx2(const float *x, float *y, int64_t n, float mean, float rstd,
                             const float *w, const float *b);

/* the low-precision GEMM pieces (x86/lowp_body.h) */
void tnk_ukernel_i8_madd_avx2(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                              int64_t ldc, int accumulate);
void tnk_f32_to_f8_avx2(uint8_t *d, const float *s, int64_t n, int e5m2);
void tnk_f32_to_f8_avx512(uint8_t *d, const float *s, int64_t n, int e5m2);
void tnk_int4_unit_avx2(int64_t k, int64_t group, const float *x, int64_t ldx, int64_t m,
                        const uint8_t *w, int64_t ldw, int half, const float *sz, float *out);
void tnk_int4_unit_avx512(int64_t k, int64_t group, const float *x, int64_t ldx, int64_t m,
                          const uint8_t *w, int64_t ldw, int half, const float *sz, float *out);
void tnk_dot_rows_w8_avx2(int64_t k, const float *x, int64_t ldx, int64_t m, const int8_t *w,
                          int64_t ldw, int64_t n, float *out, int64_t ldo);
void tnk_ukernel_i8_madd_avx512(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                                int64_t ldc, int accumulate);
void tnk_dot_rows_w8_avx512(int64_t k, const float *x, int64_t ldx, int64_t m, const int8_t *w,
                            int64_t ldw, int64_t n, float *out, int64_t ldo);
/* AVX512-BF16 (the configuration takes it only where the CPU has it) */
void tnk_dot_rows_w8_bf16dp_avx512(int64_t k, const uint16_t *x, int64_t ldx, int64_t m,
                                   const int8_t *w, int64_t ldw, int64_t n, float *out,
                                   int64_t ldo);
/* AVX512-VNNI (the configuration takes it only where the CPU has it) */
void tnk_ukernel_i8_vnni_avx512(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                                int64_t ldc, int accumulate);

/* AVX-512 only */
void tnk_ukernel_bf16_avx512(int64_t kp, const uint32_t *a, const uint32_t *b, void *c, int64_t ldc,
                             int mode);
/* the 4-row dot over bf16 on the AVX512-BF16 dot product (same condition) */
void tnk_dot_rows4_bf16dp_avx512(int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w,
                                 int64_t ldw, int64_t n, float *out, int64_t ldo);
void tnk_vsoftmax_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                         float *scratch);
void tnk_vlayer_norm_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                            float eps, const float *w, const float *b, float *mean,
                                            float *rstd);
void tnk_vcopy_stream_avx512(void *dst, const void *src, int64_t bytes);

/* AMX (x86/amx/gemm.c; call only where the CPU has AMX-BF16) */
int tnk_amx_request(void);
void tnk_amx_begin(void);
void tnk_amx_end(void);
void tnk_amx_bf16_32x32(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                        int64_t ldc, int accumulate);
void tnk_amx_peak_chains(long iters);
/* the 64 bytes LDTILECFG loads (palette 1, tiles 0-7 of 16 x 64 bytes) */
const uint8_t *tnk_amx_tile_config(void);
/* One 32x32x32 product on tiles against a scalar loop, faults caught:
 * 0 when exact, -1 when wrong, else the signal it raised (SIGILL where the
 * CPU or OS gives no tiles). Safe to call on any x86-64 CPU. */
int tnk_amx_self_test(void);

#endif
