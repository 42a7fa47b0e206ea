/* Vectorised fp32 math shared by the kernels (internal to the library).
 * Each function has an AVX2+FMA body and a portable one (the exp family an
 * AVX-512 one too); tnk_isa() picks. */
#ifndef TNK_VMATH_H
#define TNK_VMATH_H

#include <stdint.h>

/* The generic element-wise loops (unary, binary) are plain C for GCC to
 * vectorise; compiled for the baseline x86-64 alone they ran with 4-lane
 * SSE2 (relu over 4 MiB 3.3x slower than PyTorch CPU). Each gets AVX-512,
 * AVX2 and baseline clones, and the loader picks one per CPU (an ifunc).
 * ISO C mode keeps FMA contraction off, so their arithmetic agrees bit for
 * bit (libmvec's variants of each width may differ in the last ulp). */
/* Not under ThreadSanitizer: the loader runs the clones' resolver before
 * the TSan runtime is up, and the instrumented resolver crashes. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define TNK_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TNK_VECTOR_CLONES
#endif

/* Outputs larger than this leave the caches anyway: the softmax, layer-norm
 * and copy kernels write them with streaming stores, saving the read of
 * every destination line. */
#define TNK_STREAM_BYTES ((int64_t)16 << 20)

/* Whether the pipelined AVX-512 row kernels below take rows of n floats
 * written at y: AVX-512 chosen, whole 64-byte lines per row, y aligned. */
int tnk_vrows_pipelined_ok(const void *y, int64_t n);

/* y[k] = exp(x[k] - sub) for k < n (y may be NULL) and returns the sum of
 * those values. Accurate to a few ulp; exp(-inf) is exactly 0 and NaN
 * propagates. */
float tnk_vexp_sum_f32(const float *x, float sub, float *y, int64_t n);
float tnk_vexp_sum_f32_avx2(const float *x, float sub, float *y, int64_t n);
float tnk_vexp_sum_f32_avx512(const float *x, float sub, float *y, int64_t n);

/* The same for x[k] - sub <= 88, sub the maximum of x or a bound above it
 * (softmax, attention): a cheaper exp, as accurate, NaN propagates, and
 * results below FLT_MIN (x[k] - sub < -87.33) are 0 instead of subnormal. */
float tnk_vexp_bounded_sum_f32(const float *x, float sub, float *y, int64_t n);
float tnk_vexp_bounded_sum_f32_avx2(const float *x, float sub, float *y, int64_t n);
float tnk_vexp_bounded_sum_f32_avx512(const float *x, float sub, float *y, int64_t n);

/* y[k] = x[k] * sigmoid(x[k]) (silu) when silu, else sigmoid(x[k]). */
void tnk_vsigmoid_f32(const float *x, float *y, int64_t n, int silu);
void tnk_vsigmoid_f32_avx2(const float *x, float *y, int64_t n, int silu);
void tnk_vsigmoid_f32_avx512(const float *x, float *y, int64_t n, int silu);

/* out[k] = g[k] * s * (1 + x[k] * (1 - s)), s = sigmoid(x[k]): SiLU's
 * backward. */
void tnk_vsilu_bwd_f32(const float *g, const float *x, float *out, int64_t n);
void tnk_vsilu_bwd_f32_avx2(const float *g, const float *x, float *out, int64_t n);
void tnk_vsilu_bwd_f32_avx512(const float *g, const float *x, float *out, int64_t n);

/* GELU, exact (erf) or its tanh approximation, and its backward
 * out[k] = g[k] * GELU'(x[k]); about 1e-6 relative to the exact values. */
void tnk_vgelu_f32(const float *x, float *y, int64_t n, int tanh_form);
void tnk_vgelu_f32_avx2(const float *x, float *y, int64_t n, int tanh_form);
void tnk_vgelu_f32_avx512(const float *x, float *y, int64_t n, int tanh_form);
void tnk_vgelu_bwd_f32(const float *g, const float *x, float *out, int64_t n, int tanh_form);
void tnk_vgelu_bwd_f32_avx2(const float *g, const float *x, float *out, int64_t n,
                            int tanh_form);
void tnk_vgelu_bwd_f32_avx512(const float *g, const float *x, float *out, int64_t n,
                              int tanh_form);

/* Sum of n floats accumulated in double (the reduction kernel's precision). */
double tnk_vsum_f32_f64(const float *x, int64_t n);
double tnk_vsum_f32_f64_avx2(const float *x, int64_t n);

/* Row primitives of the normalisation and softmax kernels (fp32):
 * the sum, the sum of squared deviations from mean, the maximum (NaN if any
 * element is NaN), and y = (x - mean) * rstd * w + b (w, b may be NULL). */
float tnk_vsum_f32(const float *x, int64_t n);
float tnk_vsumsqdev_f32(const float *x, int64_t n, float mean);
float tnk_vmax_f32(const float *x, int64_t n);
void tnk_vnormalize_f32(const float *x, float *y, int64_t n, float mean, float rstd,
                        const float *w, const float *b);
float tnk_vsum_f32_avx2(const float *x, int64_t n);
float tnk_vsumsqdev_f32_avx2(const float *x, int64_t n, float mean);
float tnk_vmax_f32_avx2(const float *x, int64_t n);
void tnk_vnormalize_f32_avx2(const float *x, float *y, int64_t n, float mean, float rstd,
                             const float *w, const float *b);

/* y[k] = x[k] * s with non-temporal (streaming) stores when y is 64-byte
 * aligned: for large outputs that are not read back soon, it saves the
 * read-for-ownership of every destination line. Ends with a store fence. */
void tnk_vscale_stream_f32(const float *x, float s, float *y, int64_t n);
void tnk_vscale_stream_f32_avx2(const float *x, float s, float *y, int64_t n);
void tnk_vscale_stream_f32_avx512(const float *x, float s, float *y, int64_t n);
/* Softmax of `rows` contiguous rows of n floats into y with streaming
 * stores, memory traffic overlapped with the exponentials; AVX-512 only,
 * n a multiple of 16, y rows 64-byte aligned, scratch 2n aligned floats. */
void tnk_vsoftmax_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                         float *scratch);
/* memcpy of a large block with streaming stores (AVX-512 only). */
void tnk_vcopy_stream_avx512(void *dst, const void *src, int64_t bytes);
/* Layer norm of `rows` contiguous rows into y with streaming stores, the next
 * row's loads overlapped with this row's stores; per-row mean and rstd out.
 * AVX-512 only, n a multiple of 16, y rows 64-byte aligned; w, b nullable. */
void tnk_vlayer_norm_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                            float eps, const float *w, const float *b,
                                            float *mean, float *rstd);

#endif
