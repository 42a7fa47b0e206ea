/* The reference (portable) bodies of vmath.h: plain C and libm. They run
 * where no vector variant applies and are the oracle the C tests compare
 * every variant with. */
#include <math.h>

#include "ref.h"

float tnk_vexp_sum_f32_ref(const float *x, float sub, float *y, int64_t n) {
  float sum = 0;
  for (int64_t k = 0; k < n; k++) {
    float e = expf(x[k] - sub);
    if (y) y[k] = e;
    sum += e;
  }
  return sum;
}

void tnk_vsigmoid_f32_ref(const float *x, float *y, int64_t n, int silu) {
  for (int64_t k = 0; k < n; k++) {
    float s = 1.0f / (1.0f + expf(-x[k]));
    y[k] = silu ? x[k] * s : s;
  }
}

float tnk_vsum_f32_ref(const float *x, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += x[k];
  return (float)s;
}

float tnk_vsumsqdev_f32_ref(const float *x, int64_t n, float mean) {
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += (double)(x[k] - mean) * (x[k] - mean);
  return (float)s;
}

float tnk_vmax_f32_ref(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t k = 0; k < n; k++) {
    if (x[k] != x[k]) return NAN;
    m = x[k] > m ? x[k] : m;
  }
  return m;
}

void tnk_vnormalize_f32_ref(const float *x, float *y, int64_t n, float mean, float rstd,
                            const float *w, const float *b) {
  for (int64_t k = 0; k < n; k++) {
    float v = (x[k] - mean) * rstd;
    if (w) v *= w[k];
    if (b) v += b[k];
    y[k] = v;
  }
}

void tnk_vsilu_bwd_f32_ref(const float *g, const float *x, float *out, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    float s = 1.0f / (1.0f + expf(-x[k]));
    out[k] = g[k] * s * (1.0f + x[k] * (1.0f - s));
  }
}

/* GELU on libm's erff / tanhf, the textbook formulas. */
void tnk_vgelu_f32_ref(const float *x, float *y, int64_t n, int tanh_form) {
  for (int64_t k = 0; k < n; k++) {
    float v = x[k];
    y[k] = tanh_form ? 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))
                     : v * 0.5f * (1 + erff(v * 0.7071067812f));
  }
}

void tnk_vgelu_bwd_f32_ref(const float *g, const float *x, float *out, int64_t n, int tanh_form) {
  for (int64_t k = 0; k < n; k++) {
    float v = x[k], d;
    if (tanh_form) {
      float t = tanhf(0.7978845608f * (v + 0.044715f * v * v * v));
      d = 0.5f * (1 + t) + 0.5f * v * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * v * v);
    } else {
      d = 0.5f * (1 + erff(v * 0.7071067812f)) + v * 0.3989422804f * expf(-0.5f * v * v);
    }
    out[k] = g[k] * d;
  }
}

double tnk_vsum_f32_f64_ref(const float *x, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += x[k];
  return s;
}

void tnk_vscale_stream_f32_ref(const float *x, float s, float *y, int64_t n) {
  for (int64_t k = 0; k < n; k++) y[k] = x[k] * s;
}
