/* Vectorised fp32 math shared by the kernels (internal to the library):
 * the contracts. Each call goes to this process's variant through the
 * kernel configuration (config.h): a portable body (kernels/ref/vmath.c),
 * AVX2+FMA and AVX-512 ones (kernels/x86/). */
#ifndef TNK_VMATH_H
#define TNK_VMATH_H

#include <stdint.h>

#include "config.h"

#define TNK_VM (&tnk_config()->vmath)

/* Outputs larger than this leave the caches anyway: the softmax, layer-norm
 * and copy kernels write them with streaming stores, saving the read of
 * every destination line. */
#define TNK_STREAM_BYTES ((int64_t)16 << 20)

/* y[k] = exp(x[k] - sub) for k < n (y may be NULL) and returns the sum of
 * those values. Accurate to a few ulp; exp(-inf) is exactly 0 and NaN
 * propagates. */
static inline float tnk_vexp_sum_f32(const float *x, float sub, float *y, int64_t n) {
  return TNK_VM->exp_sum(x, sub, y, n);
}

/* The same for x[k] - sub <= 88, sub the maximum of x or a bound above it
 * (softmax, attention): a cheaper exp, as accurate, NaN propagates, and
 * results below FLT_MIN (x[k] - sub < -87.33) are 0 instead of subnormal
 * (the reference, libm's expf, keeps subnormals). */
static inline float tnk_vexp_bounded_sum_f32(const float *x, float sub, float *y, int64_t n) {
  return TNK_VM->exp_bounded_sum(x, sub, y, n);
}

/* y[k] = x[k] * sigmoid(x[k]) (silu) when silu, else sigmoid(x[k]). */
static inline void tnk_vsigmoid_f32(const float *x, float *y, int64_t n, int silu) {
  TNK_VM->sigmoid(x, y, n, silu);
}

/* out[k] = g[k] * s * (1 + x[k] * (1 - s)), s = sigmoid(x[k]): SiLU's
 * backward. */
static inline void tnk_vsilu_bwd_f32(const float *g, const float *x, float *out, int64_t n) {
  TNK_VM->silu_bwd(g, x, out, n);
}

/* GELU, exact (erf) or its tanh approximation, and its backward
 * out[k] = g[k] * GELU'(x[k]); about 1e-6 relative to the exact values. */
static inline void tnk_vgelu_f32(const float *x, float *y, int64_t n, int tanh_form) {
  TNK_VM->gelu(x, y, n, tanh_form);
}
static inline void tnk_vgelu_bwd_f32(const float *g, const float *x, float *out, int64_t n,
                                     int tanh_form) {
  TNK_VM->gelu_bwd(g, x, out, n, tanh_form);
}

/* Sum of n floats accumulated in double (the reduction kernel's precision). */
static inline double tnk_vsum_f32_f64(const float *x, int64_t n) { return TNK_VM->sum_f64(x, n); }

/* Row primitives of the normalisation and softmax kernels (fp32):
 * the sum, the sum of squared deviations from mean, the maximum (NaN if any
 * element is NaN), and y = (x - mean) * rstd * w + b (w, b may be NULL). */
static inline float tnk_vsum_f32(const float *x, int64_t n) { return TNK_VM->sum(x, n); }
static inline float tnk_vsumsqdev_f32(const float *x, int64_t n, float mean) {
  return TNK_VM->sumsqdev(x, n, mean);
}
static inline float tnk_vmax_f32(const float *x, int64_t n) { return TNK_VM->max(x, n); }
static inline void tnk_vnormalize_f32(const float *x, float *y, int64_t n, float mean, float rstd,
                                      const float *w, const float *b) {
  TNK_VM->normalize(x, y, n, mean, rstd, w, b);
}

/* y[k] = x[k] * s with non-temporal (streaming) stores when y is 64-byte
 * aligned: for large outputs that are not read back soon, it saves the
 * read-for-ownership of every destination line. Ends with a store fence. */
static inline void tnk_vscale_stream_f32(const float *x, float s, float *y, int64_t n) {
  TNK_VM->scale_stream(x, s, y, n);
}

/* The pipelined row kernels, where the variant has them (NULL otherwise):
 * - softmax_rows_stream: softmax of `rows` contiguous rows of n floats into
 *   y with streaming stores, memory traffic overlapped with the
 *   exponentials; scratch 2n aligned floats;
 * - layer_norm_rows_stream: layer norm of `rows` contiguous rows into y,
 *   the next row's loads overlapped with this row's stores; per-row mean and
 *   rstd out; w, b nullable;
 * - copy_stream: memcpy of a large block with streaming stores.
 * The row kernels take n a multiple of rows_stream_multiple and y rows
 * 64-byte aligned: tnk_vrows_pipelined_ok says whether a call qualifies. */
static inline int tnk_vrows_pipelined_ok(const void *y, int64_t n) {
  const tnk_vmath_config_t *v = TNK_VM;
  return v->softmax_rows_stream && v->rows_stream_multiple && n % v->rows_stream_multiple == 0 &&
         ((uintptr_t)y & 63) == 0;
}

#endif
