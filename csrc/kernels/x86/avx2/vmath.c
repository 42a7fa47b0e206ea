/* The AVX2+FMA variants of vmath.h (this directory is compiled with
 * -mavx2 -mfma): the shared vector algorithms (x86/vmath_body.h) at 8
 * lanes, and the row statistics of the normalisation and softmax kernels
 * (the AVX-512 configuration keeps these: they are memory-bound). */
#include <math.h>
#include <string.h>

#include "../simd.h"
#include "../x86.h"
#include "../vmath_body.h"

/* exp over the whole float line: without AVX-512's vscalefps, 2^n is built
 * in the exponent field for n clamped to the normal range, and the ends
 * (overflow, the arguments whose 2^n alone would overflow, underflow, NaN)
 * are blended in. */
static inline vf vf_exp(vf x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);  /* 2^n stays finite */
  const __m256 lo = _mm256_set1_ps(-87.3365447504019f); /* 2^n stays normal */
  const __m256 ln2 = _mm256_set1_ps(0.693147180559945f);
  __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 inf = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ);
  /* (hi, ln FLT_MAX]: exp(x - ln 2) * 2 keeps 2^n in range */
  __m256 top = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  __m256 xin = x;
  x = _mm256_sub_ps(x, _mm256_and_ps(top, ln2));
  x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = exp_poly(x);
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), x);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_add_ps(y, y), top);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), inf);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
  return _mm256_blendv_ps(y, xin, nan);
}

double tnk_vsum_f32_f64_avx2(const float *x, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm_loadu_ps(x + k)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm_loadu_ps(x + k + 4)));
  }
  double r[4];
  _mm256_storeu_pd(r, _mm256_add_pd(s0, s1));
  double s = (r[0] + r[1]) + (r[2] + r[3]);
  for (; k < n; k++) s += x[k];
  return s;
}

float tnk_vsum_f32_avx2(const float *x, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + k));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + k + 8));
  }
  float s = vf_hsum(_mm256_add_ps(s0, s1));
  for (; k < n; k++) s += x[k];
  return s;
}

float tnk_vsumsqdev_f32_avx2(const float *x, int64_t n, float mean) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), m = _mm256_set1_ps(mean);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + k), m);
    __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + k + 8), m);
    s0 = _mm256_fmadd_ps(d0, d0, s0);
    s1 = _mm256_fmadd_ps(d1, d1, s1);
  }
  float s = vf_hsum(_mm256_add_ps(s0, s1));
  for (; k < n; k++) s += (x[k] - mean) * (x[k] - mean);
  return s;
}

float tnk_vmax_f32_avx2(const float *x, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 v = _mm256_loadu_ps(x + k);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, v);
  }
  if (_mm256_movemask_ps(nan)) return NAN;
  float r[8];
  _mm256_storeu_ps(r, m);
  float mx = r[0];
  for (int l = 1; l < 8; l++) mx = r[l] > mx ? r[l] : mx;
  for (; k < n; k++) {
    if (x[k] != x[k]) return NAN;
    mx = x[k] > mx ? x[k] : mx;
  }
  return mx;
}

void tnk_vnormalize_f32_avx2(const float *x, float *y, int64_t n, float mean, float rstd,
                             const float *w, const float *b) {
  __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + k), vm), vr);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + k));
    if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + k));
    _mm256_storeu_ps(y + k, v);
  }
  for (; k < n; k++) {
    float v = (x[k] - mean) * rstd;
    if (w) v *= w[k];
    if (b) v += b[k];
    y[k] = v;
  }
}
