/* The named reference kernels (internal): the portable variant of every
 * configuration entry (config.h), and the oracle of the variant tests. */
#ifndef TNK_REF_H
#define TNK_REF_H

#include <stdint.h>

float tnk_vexp_sum_f32_ref(const float *x, float sub, float *y, int64_t n);
void tnk_vsigmoid_f32_ref(const float *x, float *y, int64_t n, int silu);
void tnk_vsilu_bwd_f32_ref(const float *g, const float *x, float *out, int64_t n);
void tnk_vgelu_f32_ref(const float *x, float *y, int64_t n, int tanh_form);
void tnk_vgelu_bwd_f32_ref(const float *g, const float *x, float *out, int64_t n, int tanh_form);
double tnk_vsum_f32_f64_ref(const float *x, int64_t n);
float tnk_vsum_f32_ref(const float *x, int64_t n);
float tnk_vsumsqdev_f32_ref(const float *x, int64_t n, float mean);
float tnk_vmax_f32_ref(const float *x, int64_t n);
void tnk_vnormalize_f32_ref(const float *x, float *y, int64_t n, float mean, float rstd,
                            const float *w, const float *b);
void tnk_vscale_stream_f32_ref(const float *x, float s, float *y, int64_t n);

#endif
