/* Portable bodies of vmath.h and the ISA dispatch. */
#include <math.h>

#include "tnk.h"
#include "vmath.h"

float tnk_vexp_sum_f32(const float *x, float sub, float *y, int64_t n) {
  if (tnk_isa() >= TNK_ISA_AVX2) return tnk_vexp_sum_f32_avx2(x, sub, y, n);
  float sum = 0;
  for (int64_t k = 0; k < n; k++) {
    float e = expf(x[k] - sub);
    if (y) y[k] = e;
    sum += e;
  }
  return sum;
}

void tnk_vsigmoid_f32(const float *x, float *y, int64_t n, int silu) {
  if (tnk_isa() >= TNK_ISA_AVX2) {
    tnk_vsigmoid_f32_avx2(x, y, n, silu);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    float s = 1.0f / (1.0f + expf(-x[k]));
    y[k] = silu ? x[k] * s : s;
  }
}
