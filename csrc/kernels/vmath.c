/* Portable bodies of vmath.h and the ISA dispatch. */
#include <math.h>

#include "tnk.h"
#include "vmath.h"

static float exp_sum_portable(const float *x, float sub, float *y, int64_t n) {
  float sum = 0;
  for (int64_t k = 0; k < n; k++) {
    float e = expf(x[k] - sub);
    if (y) y[k] = e;
    sum += e;
  }
  return sum;
}

float tnk_vexp_sum_f32(const float *x, float sub, float *y, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX512) return tnk_vexp_sum_f32_avx512(x, sub, y, n);
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vexp_sum_f32_avx2(x, sub, y, n);
  return exp_sum_portable(x, sub, y, n);
}

float tnk_vexp_bounded_sum_f32(const float *x, float sub, float *y, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX512) return tnk_vexp_bounded_sum_f32_avx512(x, sub, y, n);
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vexp_bounded_sum_f32_avx2(x, sub, y, n);
  return exp_sum_portable(x, sub, y, n);
}

void tnk_vsigmoid_f32(const float *x, float *y, int64_t n, int silu) {
  if (tnk_isa() >= TNK_ISA_AVX512) {
    tnk_vsigmoid_f32_avx512(x, y, n, silu);
    return;
  }
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vsigmoid_f32_avx2(x, y, n, silu);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    float s = 1.0f / (1.0f + expf(-x[k]));
    y[k] = silu ? x[k] * s : s;
  }
}

float tnk_vsum_f32(const float *x, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vsum_f32_avx2(x, n);
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += x[k];
  return (float)s;
}

float tnk_vsumsqdev_f32(const float *x, int64_t n, float mean) {
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vsumsqdev_f32_avx2(x, n, mean);
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += (double)(x[k] - mean) * (x[k] - mean);
  return (float)s;
}

float tnk_vmax_f32(const float *x, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vmax_f32_avx2(x, n);
  float m = -INFINITY;
  for (int64_t k = 0; k < n; k++) {
    if (x[k] != x[k]) return NAN;
    m = x[k] > m ? x[k] : m;
  }
  return m;
}

void tnk_vnormalize_f32(const float *x, float *y, int64_t n, float mean, float rstd,
                        const float *w, const float *b) {
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vnormalize_f32_avx2(x, y, n, mean, rstd, w, b);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    float v = (x[k] - mean) * rstd;
    if (w) v *= w[k];
    if (b) v += b[k];
    y[k] = v;
  }
}

void tnk_vsilu_bwd_f32(const float *g, const float *x, float *out, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX512) {
    tnk_vsilu_bwd_f32_avx512(g, x, out, n);
    return;
  }
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vsilu_bwd_f32_avx2(g, x, out, n);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    float s = 1.0f / (1.0f + expf(-x[k]));
    out[k] = g[k] * s * (1.0f + x[k] * (1.0f - s));
  }
}

/* The portable GELU: libm's erff / tanhf on the textbook formulas. */
void tnk_vgelu_f32(const float *x, float *y, int64_t n, int tanh_form) {
  if (tnk_isa() >= TNK_ISA_AVX512) {
    tnk_vgelu_f32_avx512(x, y, n, tanh_form);
    return;
  }
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vgelu_f32_avx2(x, y, n, tanh_form);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    float v = x[k];
    y[k] = tanh_form ? 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))
                     : v * 0.5f * (1 + erff(v * 0.7071067812f));
  }
}

void tnk_vgelu_bwd_f32(const float *g, const float *x, float *out, int64_t n, int tanh_form) {
  if (tnk_isa() >= TNK_ISA_AVX512) {
    tnk_vgelu_bwd_f32_avx512(g, x, out, n, tanh_form);
    return;
  }
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vgelu_bwd_f32_avx2(g, x, out, n, tanh_form);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    float v = x[k], d;
    if (tanh_form) {
      float t = tanhf(0.7978845608f * (v + 0.044715f * v * v * v));
      d = 0.5f * (1 + t) +
          0.5f * v * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * v * v);
    } else {
      d = 0.5f * (1 + erff(v * 0.7071067812f)) + v * 0.3989422804f * expf(-0.5f * v * v);
    }
    out[k] = g[k] * d;
  }
}

double tnk_vsum_f32_f64(const float *x, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vsum_f32_f64_avx2(x, n);
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += x[k];
  return s;
}

int tnk_vrows_pipelined_ok(const void *y, int64_t n) {
  return tnk_isa() >= TNK_ISA_AVX512 && n % 16 == 0 && ((uintptr_t)y & 63) == 0;
}

void tnk_vscale_stream_f32(const float *x, float s, float *y, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX512) {
    tnk_vscale_stream_f32_avx512(x, s, y, n);
    return;
  }
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vscale_stream_f32_avx2(x, s, y, n);
    return;
  }
  for (int64_t k = 0; k < n; k++) y[k] = x[k] * s;
}
