/* Vectorised fp32 math shared by the kernels (internal to the library).
 * Each function has an AVX2+FMA body and a portable one; tnk_isa() picks. */
#ifndef TNK_VMATH_H
#define TNK_VMATH_H

#include <stdint.h>

/* y[k] = exp(x[k] - sub) for k < n (y may be NULL) and returns the sum of
 * those values. Accurate to a few ulp; exp(-inf) is exactly 0 and NaN
 * propagates. */
float tnk_vexp_sum_f32(const float *x, float sub, float *y, int64_t n);
float tnk_vexp_sum_f32_avx2(const float *x, float sub, float *y, int64_t n);

/* y[k] = x[k] * sigmoid(x[k]) (silu) when silu, else sigmoid(x[k]). */
void tnk_vsigmoid_f32(const float *x, float *y, int64_t n, int silu);
void tnk_vsigmoid_f32_avx2(const float *x, float *y, int64_t n, int silu);

#endif
