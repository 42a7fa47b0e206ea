/* AVX2+FMA and AVX-512 bodies of vmath.h: exp by range reduction to
 * [-ln2/2, ln2/2] (n = round(x / ln 2), r = x - n ln 2 in two parts), a
 * degree-7 polynomial for exp(r) (the classic Cephes coefficients), and 2^n
 * built in the exponent field (vscalefps on AVX-512); a cheaper bounded exp
 * for arguments <= 88 (softmax, attention); row statistics; and the
 * pipelined large-row softmax/layer-norm and streaming copy bodies. */
#include <math.h>
#include <string.h>

#include "vmath.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma")))

/* Horner steps of the Cephes exp(r) polynomial on [-ln2/2, ln2/2], shared by
 * the AVX2 and AVX-512 bodies: ((((c0 r + c1) r + c2) r + c3) r + c4) r + c5;
 * the caller finishes y r^2 + r + 1. A statement expression over the ISA's
 * vector type, fmadd and broadcast. */
#define EXP_POLY(V, FMA, SET1, r)                                  \
  ({                                                               \
    V p_ = SET1(1.9875691500e-4f);                                 \
    p_ = FMA(p_, (r), SET1(1.3981999507e-3f));                     \
    p_ = FMA(p_, (r), SET1(8.3334519073e-3f));                     \
    p_ = FMA(p_, (r), SET1(4.1665795894e-2f));                     \
    p_ = FMA(p_, (r), SET1(1.6666665459e-1f));                     \
    p_ = FMA(p_, (r), SET1(5.0000001201e-1f));                     \
    p_;                                                            \
  })

/* exp(z) for z <= 88 (a value minus its maximum, or minus a bound above
 * it: softmax and attention), cheaper than exp8/exp16, which handle the
 * whole line: n = round(z / ln 2) from the rounding of an add to 1.5 2^23
 * (whose low mantissa bits then hold n + 127, the biased exponent of 2^n),
 * r = z - n ln 2 in two parts, e^r by a degree-6 polynomial with e^0 = 1
 * exactly (fitted for relative error on [-ln2/2, ln2/2], 2e-9), times 2^n
 * by one multiply: 1.02 ulp at worst against the exact exp in a stride
 * through every 7th float of [-87.33, 0], as accurate as exp16 (a degree-5
 * fit was 15% faster but 2 ulp, enough to move gradients through Gemma
 * 3n's activation-sparsity threshold away from CPU's). Below ln FLT_MIN
 * (-87.33) the result is 0 where the exact one is a subnormal under
 * 1.2e-38; NaN propagates through the final multiply. */
#define EXPB_MAGIC 12583039.0f /* 1.5 * 2^23 + 127 */
#define EXPB_POLY(V, FMA, SET1, r)                                 \
  ({                                                               \
    V p_ = SET1(1.384359668e-3f);                                  \
    p_ = FMA(p_, (r), SET1(8.374140598e-3f));                      \
    p_ = FMA(p_, (r), SET1(4.166800156e-2f));                      \
    p_ = FMA(p_, (r), SET1(1.666643173e-1f));                      \
    p_ = FMA(p_, (r), SET1(4.999999404e-1f));                      \
    p_ = FMA(p_, (r), SET1(1.0f));                                 \
    FMA(p_, (r), SET1(1.0f));                                      \
  })

TGT static inline __m256 expb8(__m256 z) {
  __m256 keep = _mm256_cmp_ps(z, _mm256_set1_ps(-87.33f), _CMP_NLT_UQ); /* or NaN */
  __m256 magic = _mm256_set1_ps(EXPB_MAGIC);
  __m256 t = _mm256_fmadd_ps(z, _mm256_set1_ps(1.44269504088896341f), magic);
  __m256 n = _mm256_sub_ps(t, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), z);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = EXPB_POLY(__m256, _mm256_fmadd_ps, _mm256_set1_ps, r);
  __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
  return _mm256_and_ps(keep, _mm256_mul_ps(p, two_n));
}

TGT static inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f); /* 2^n stays finite */
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
  __m256 y = EXP_POLY(__m256, _mm256_fmadd_ps, _mm256_set1_ps, x);
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), x);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_add_ps(y, y), top);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), inf);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
  return _mm256_blendv_ps(y, xin, nan);
}

TGT static inline __attribute__((always_inline)) float
exp_sum8(const float *x, float sub, float *y, int64_t n, int bounded) {
  __m256 s = _mm256_setzero_ps(), vs = _mm256_set1_ps(sub);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 z = _mm256_sub_ps(_mm256_loadu_ps(x + k), vs);
    __m256 e = bounded ? expb8(z) : exp8(z);
    if (y) _mm256_storeu_ps(y + k, e);
    s = _mm256_add_ps(s, e);
  }
  if (k < n) { /* the tail through a padded lane block; padding is -inf */
    float in[8], out[8];
    for (int l = 0; l < 8; l++) in[l] = k + l < n ? x[k + l] - sub : -INFINITY;
    __m256 e = bounded ? expb8(_mm256_loadu_ps(in)) : exp8(_mm256_loadu_ps(in));
    _mm256_storeu_ps(out, e);
    for (int l = 0; k + l < n; l++)
      if (y) y[k + l] = out[l];
    s = _mm256_add_ps(s, e);
  }
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

TGT float tnk_vexp_sum_f32_avx2(const float *x, float sub, float *y, int64_t n) {
  return exp_sum8(x, sub, y, n, 0);
}

TGT float tnk_vexp_bounded_sum_f32_avx2(const float *x, float sub, float *y, int64_t n) {
  return exp_sum8(x, sub, y, n, 1);
}

/* GELU, exact: x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. erfc(z) for z >= 0
 * is exp(-z^2) t P(t), t = 1 / (1 + 0.4 z), P of degree 8 fitted for
 * relative error over [0, 10] (7e-8 in double, 4e-7 evaluated in float), so
 * Phi keeps its relative accuracy far into the negative tail, where
 * 1 + erf(x / sqrt 2) would cancel; z^2 = x^2 / 2 is carried in two parts
 * into the exponential (the tail's relative accuracy depends on it; an
 * infinite x makes the low part NaN, which a clamp turns finite). The backward, Phi(x) + x phi(x), reuses exp(-z^2) =
 * sqrt(2 pi) phi(x). The tanh form is x sigmoid(2u), u = sqrt(2/pi) (x +
 * 0.044715 x^3) (0.5 (1 + tanh u) = sigmoid(2u)), from one exp; its
 * backward s + 2 x s (1 - s) u'(x). x = -inf gives NaN (-inf * 0), as CPU. */
#define GELU_ERFC_POLY(V, FMA, SET1, t)                            \
  ({                                                               \
    V q_ = SET1(4.127907380e-2f);                                  \
    q_ = FMA(q_, (t), SET1(-1.404355168e-1f));                     \
    q_ = FMA(q_, (t), SET1(8.420585841e-2f));                      \
    q_ = FMA(q_, (t), SET1(8.773953468e-2f));                      \
    q_ = FMA(q_, (t), SET1(7.989415526e-2f));                      \
    q_ = FMA(q_, (t), SET1(1.933421195e-1f));                      \
    q_ = FMA(q_, (t), SET1(2.018987387e-1f));                      \
    q_ = FMA(q_, (t), SET1(2.264418155e-1f));                      \
    FMA(q_, (t), SET1(2.256342918e-1f));                           \
  })
#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* Phi(x), and exp(-x^2 / 2) into *e_out, of 8 lanes */
TGT static inline __m256 gelu_phi8(__m256 x, __m256 *e_out) {
  __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x),
                           _mm256_set1_ps(0.7071067811865476f));
  __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                           _mm256_fmadd_ps(z, _mm256_set1_ps(0.4f), _mm256_set1_ps(1.0f)));
  __m256 x2 = _mm256_mul_ps(x, x), half = _mm256_set1_ps(0.5f);
  __m256 z2 = _mm256_mul_ps(x2, half); /* x^2 / 2 = z2 + z2lo exactly */
  __m256 z2lo = _mm256_mul_ps(_mm256_fmsub_ps(x, x, x2), half);
  z2lo = _mm256_min_ps(_mm256_max_ps(z2lo, _mm256_set1_ps(-1.0f)), _mm256_set1_ps(1.0f)); /* inf */
  __m256 e0 = expb8(_mm256_sub_ps(_mm256_setzero_ps(), z2));
  __m256 e = _mm256_fnmadd_ps(e0, z2lo, e0);
  __m256 half_q = _mm256_mul_ps(_mm256_mul_ps(e, _mm256_set1_ps(0.5f)),
                                _mm256_mul_ps(t, GELU_ERFC_POLY(__m256, _mm256_fmadd_ps,
                                                                _mm256_set1_ps, t)));
  __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  *e_out = e;
  return _mm256_blendv_ps(half_q, _mm256_sub_ps(_mm256_set1_ps(1.0f), half_q), pos);
}

/* sigmoid(2u) of the tanh form */
TGT static inline __m256 gelu_tanh_s8(__m256 x) {
  __m256 x2 = _mm256_mul_ps(x, x);
  __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(GELU_K)),
                           _mm256_fmadd_ps(x2, _mm256_set1_ps(GELU_C), _mm256_set1_ps(1.0f)));
  __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_mul_ps(u, _mm256_set1_ps(-2.0f)))));
}

TGT static inline __m256 gelu8(__m256 x, int tanh_form) {
  __m256 e;
  return _mm256_mul_ps(x, tanh_form ? gelu_tanh_s8(x) : gelu_phi8(x, &e));
}

TGT static inline __m256 gelu_bwd8(__m256 g, __m256 x, int tanh_form) {
  __m256 d;
  if (tanh_form) {
    __m256 s = gelu_tanh_s8(x);
    __m256 du = _mm256_mul_ps(_mm256_set1_ps(2.0f * GELU_K),
                              _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(3.0f * GELU_C),
                                              _mm256_set1_ps(1.0f)));
    d = _mm256_fmadd_ps(_mm256_mul_ps(x, _mm256_mul_ps(s, _mm256_sub_ps(_mm256_set1_ps(1.0f), s))),
                        du, s);
  } else {
    __m256 e, phi = gelu_phi8(x, &e);
    d = _mm256_fmadd_ps(_mm256_mul_ps(x, e), _mm256_set1_ps(0.3989422804014327f), phi);
  }
  return _mm256_mul_ps(g, d);
}

/* Whole vectors, then the tail through a zero-padded lane block. */
TGT void tnk_vgelu_f32_avx2(const float *x, float *y, int64_t n, int tanh_form) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, gelu8(_mm256_loadu_ps(x + k), tanh_form));
  if (k < n) {
    float in[8] = {0}, out[8];
    memcpy(in, x + k, sizeof(float) * (size_t)(n - k));
    _mm256_storeu_ps(out, gelu8(_mm256_loadu_ps(in), tanh_form));
    memcpy(y + k, out, sizeof(float) * (size_t)(n - k));
  }
}

TGT void tnk_vgelu_bwd_f32_avx2(const float *g, const float *x, float *out, int64_t n,
                                int tanh_form) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(out + k, gelu_bwd8(_mm256_loadu_ps(g + k), _mm256_loadu_ps(x + k), tanh_form));
  if (k < n) {
    float gi[8] = {0}, xi[8] = {0}, o[8];
    memcpy(gi, g + k, sizeof(float) * (size_t)(n - k));
    memcpy(xi, x + k, sizeof(float) * (size_t)(n - k));
    _mm256_storeu_ps(o, gelu_bwd8(_mm256_loadu_ps(gi), _mm256_loadu_ps(xi), tanh_form));
    memcpy(out + k, o, sizeof(float) * (size_t)(n - k));
  }
}

TGT static inline __m256 sigmoid8(__m256 x, int silu) {
  __m256 one = _mm256_set1_ps(1.0f);
  __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
  return silu ? _mm256_mul_ps(x, s) : s;
}

TGT void tnk_vsigmoid_f32_avx2(const float *x, float *y, int64_t n, int silu) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, sigmoid8(_mm256_loadu_ps(x + k), silu));
  if (k < n) {
    float in[8] = {0}, out[8];
    for (int l = 0; k + l < n; l++) in[l] = x[k + l];
    _mm256_storeu_ps(out, sigmoid8(_mm256_loadu_ps(in), silu));
    for (int l = 0; k + l < n; l++) y[k + l] = out[l];
  }
}

TGT void tnk_vsilu_bwd_f32_avx2(const float *g, const float *x, float *out, int64_t n) {
  __m256 one = _mm256_set1_ps(1.0f);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 xv = _mm256_loadu_ps(x + k);
    __m256 s = sigmoid8(xv, 0);
    __m256 d = _mm256_fmadd_ps(xv, _mm256_sub_ps(one, s), one);
    _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(g + k), s), d));
  }
  for (; k < n; k++) {
    float s = 1.0f / (1.0f + expf(-x[k]));
    out[k] = g[k] * s * (1.0f + x[k] * (1.0f - s));
  }
}

TGT double tnk_vsum_f32_f64_avx2(const float *x, int64_t n) {
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

TGT static inline float hsum8(__m256 s) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

TGT float tnk_vsum_f32_avx2(const float *x, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + k));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + k + 8));
  }
  float s = hsum8(_mm256_add_ps(s0, s1));
  for (; k < n; k++) s += x[k];
  return s;
}

TGT float tnk_vsumsqdev_f32_avx2(const float *x, int64_t n, float mean) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), m = _mm256_set1_ps(mean);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + k), m);
    __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + k + 8), m);
    s0 = _mm256_fmadd_ps(d0, d0, s0);
    s1 = _mm256_fmadd_ps(d1, d1, s1);
  }
  float s = hsum8(_mm256_add_ps(s0, s1));
  for (; k < n; k++) s += (x[k] - mean) * (x[k] - mean);
  return s;
}

TGT float tnk_vmax_f32_avx2(const float *x, int64_t n) {
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

TGT void tnk_vnormalize_f32_avx2(const float *x, float *y, int64_t n, float mean, float rstd,
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

/* ---- AVX-512 ---------------------------------------------------------------
 * exp16 scales by 2^n with vscalefps, which rounds overflow to inf and
 * underflow through the subnormals to 0 exactly as IEEE does, so the only
 * special handling is a clamp that keeps n finite (NaN passes the clamp:
 * vminps/vmaxps return their second operand when either is NaN). */
#define TGT512 __attribute__((target("avx512f")))

TGT512 static inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = EXP_POLY(__m512, _mm512_fmadd_ps, _mm512_set1_ps, r);
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

/* expb8's AVX-512 twin: the zeroing multiply takes the mask. */
TGT512 static inline __m512 expb16(__m512 z) {
  __mmask16 keep = _mm512_cmp_ps_mask(z, _mm512_set1_ps(-87.33f), _CMP_NLT_UQ);
  __m512 magic = _mm512_set1_ps(EXPB_MAGIC);
  __m512 t = _mm512_fmadd_ps(z, _mm512_set1_ps(1.44269504088896341f), magic);
  __m512 n = _mm512_sub_ps(t, magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), z);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = EXPB_POLY(__m512, _mm512_fmadd_ps, _mm512_set1_ps, r);
  __m512 two_n = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
  return _mm512_maskz_mul_ps(keep, p, two_n);
}

TGT512 static inline __attribute__((always_inline)) float
exp_sum16(const float *x, float sub, float *y, int64_t n, int bounded) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), vs = _mm512_set1_ps(sub);
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    __m512 z0 = _mm512_sub_ps(_mm512_loadu_ps(x + k), vs);
    __m512 z1 = _mm512_sub_ps(_mm512_loadu_ps(x + k + 16), vs);
    __m512 e0 = bounded ? expb16(z0) : exp16(z0);
    __m512 e1 = bounded ? expb16(z1) : exp16(z1);
    if (y) {
      _mm512_storeu_ps(y + k, e0);
      _mm512_storeu_ps(y + k + 16, e1);
    }
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; k < n; k += 16) { /* masked tail: lanes past n read nothing, add 0 */
    __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    __m512 z = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), vs);
    __m512 e = bounded ? expb16(z) : exp16(z);
    if (y) _mm512_mask_storeu_ps(y + k, m, e);
    s0 = _mm512_add_ps(s0, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

TGT512 float tnk_vexp_sum_f32_avx512(const float *x, float sub, float *y, int64_t n) {
  return exp_sum16(x, sub, y, n, 0);
}

TGT512 float tnk_vexp_bounded_sum_f32_avx512(const float *x, float sub, float *y, int64_t n) {
  return exp_sum16(x, sub, y, n, 1);
}

/* The GELU bodies of the AVX2 section above, 16 lanes, masked tails. */
TGT512 static inline __m512 gelu_phi16(__m512 x, __m512 *e_out) {
  __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.7071067811865476f));
  __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                           _mm512_fmadd_ps(z, _mm512_set1_ps(0.4f), _mm512_set1_ps(1.0f)));
  __m512 x2 = _mm512_mul_ps(x, x), half = _mm512_set1_ps(0.5f);
  __m512 z2 = _mm512_mul_ps(x2, half); /* x^2 / 2 = z2 + z2lo exactly */
  __m512 z2lo = _mm512_mul_ps(_mm512_fmsub_ps(x, x, x2), half);
  z2lo = _mm512_min_ps(_mm512_max_ps(z2lo, _mm512_set1_ps(-1.0f)), _mm512_set1_ps(1.0f)); /* inf */
  __m512 e0 = expb16(_mm512_sub_ps(_mm512_setzero_ps(), z2));
  __m512 e = _mm512_fnmadd_ps(e0, z2lo, e0);
  __m512 half_q = _mm512_mul_ps(_mm512_mul_ps(e, _mm512_set1_ps(0.5f)),
                                _mm512_mul_ps(t, GELU_ERFC_POLY(__m512, _mm512_fmadd_ps,
                                                                _mm512_set1_ps, t)));
  __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
  *e_out = e;
  return _mm512_mask_sub_ps(half_q, pos, _mm512_set1_ps(1.0f), half_q);
}

TGT512 static inline __m512 gelu_tanh_s16(__m512 x) {
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 u = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(GELU_K)),
                           _mm512_fmadd_ps(x2, _mm512_set1_ps(GELU_C), _mm512_set1_ps(1.0f)));
  __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_mul_ps(u, _mm512_set1_ps(-2.0f)))));
}

TGT512 static inline __m512 gelu16(__m512 x, int tanh_form) {
  __m512 e;
  return _mm512_mul_ps(x, tanh_form ? gelu_tanh_s16(x) : gelu_phi16(x, &e));
}

TGT512 static inline __m512 gelu_bwd16(__m512 g, __m512 x, int tanh_form) {
  __m512 d;
  if (tanh_form) {
    __m512 s = gelu_tanh_s16(x);
    __m512 du = _mm512_mul_ps(_mm512_set1_ps(2.0f * GELU_K),
                              _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(3.0f * GELU_C),
                                              _mm512_set1_ps(1.0f)));
    d = _mm512_fmadd_ps(_mm512_mul_ps(x, _mm512_mul_ps(s, _mm512_sub_ps(_mm512_set1_ps(1.0f), s))),
                        du, s);
  } else {
    __m512 e, phi = gelu_phi16(x, &e);
    d = _mm512_fmadd_ps(_mm512_mul_ps(x, e), _mm512_set1_ps(0.3989422804014327f), phi);
  }
  return _mm512_mul_ps(g, d);
}

TGT512 void tnk_vgelu_f32_avx512(const float *x, float *y, int64_t n, int tanh_form) {
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(y + k, m, gelu16(_mm512_maskz_loadu_ps(m, x + k), tanh_form));
  }
}

TGT512 void tnk_vgelu_bwd_f32_avx512(const float *g, const float *x, float *out, int64_t n,
                                     int tanh_form) {
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(out + k, m, gelu_bwd16(_mm512_maskz_loadu_ps(m, g + k),
                                                 _mm512_maskz_loadu_ps(m, x + k), tanh_form));
  }
}

TGT512 static inline __m512 sigmoid16(__m512 x, int silu) {
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
  return silu ? _mm512_mul_ps(x, s) : s;
}

TGT512 void tnk_vsigmoid_f32_avx512(const float *x, float *y, int64_t n, int silu) {
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(y + k, m, sigmoid16(_mm512_maskz_loadu_ps(m, x + k), silu));
  }
}

TGT512 void tnk_vsilu_bwd_f32_avx512(const float *g, const float *x, float *out, int64_t n) {
  __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
    __m512 s = sigmoid16(xv, 0);
    __m512 d = _mm512_fmadd_ps(xv, _mm512_sub_ps(one, s), one);
    _mm512_mask_storeu_ps(out + k, m,
                          _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, g + k), s), d));
  }
}

/* Streaming scale: scalar head up to 64-byte alignment, non-temporal
 * vector body, scalar tail, then sfence (streaming stores are weakly
 * ordered; the fence orders them before the task's completion is signalled). */
TGT void tnk_vscale_stream_f32_avx2(const float *x, float s, float *y, int64_t n) {
  int64_t k = 0;
  for (; k < n && ((uintptr_t)(y + k) & 63); k++) y[k] = x[k] * s;
  __m256 vs = _mm256_set1_ps(s);
  for (; k + 16 <= n; k += 16) {
    _mm256_stream_ps(y + k, _mm256_mul_ps(_mm256_loadu_ps(x + k), vs));
    _mm256_stream_ps(y + k + 8, _mm256_mul_ps(_mm256_loadu_ps(x + k + 8), vs));
  }
  for (; k < n; k++) y[k] = x[k] * s;
  _mm_sfence();
}

TGT512 void tnk_vscale_stream_f32_avx512(const float *x, float s, float *y, int64_t n) {
  int64_t k = 0;
  for (; k < n && ((uintptr_t)(y + k) & 63); k++) y[k] = x[k] * s;
  __m512 vs = _mm512_set1_ps(s);
  for (; k + 16 <= n; k += 16) _mm512_stream_ps(y + k, _mm512_mul_ps(_mm512_loadu_ps(x + k), vs));
  for (; k < n; k++) y[k] = x[k] * s;
  _mm_sfence();
}

/* The pipelined softmax below issues one load of the next row per vector
 * of arithmetic on the current row, so the out-of-order window holds
 * only a dozen of those loads and the hardware prefetcher does not run far
 * enough ahead to cover memory latency at full bandwidth. A software
 * prefetch 16 KiB ahead of the streamed-in row does; into L2 only (T2), as
 * L1 is busy with the rows being computed (64 MiB softmax in the C harness,
 * two threads, while the host's streaming copy ran 49-53 GB/s: 34-36 GB/s
 * without, 38-41 with a T0 prefetch, 43-54 with T2 8 KiB ahead; while it
 * ran 80-86 GB/s: 54-67 GB/s 8 KiB ahead, 57-70 16 KiB ahead; the lighter
 * layer norm loop below measured the same with or without). A prefetch
 * never faults, so running past the last row is harmless. A macro: GCC 12
 * finds a function holding only a prefetch side-effect free and deletes
 * its calls. */
#define PREFETCH_AHEAD_BYTES 16384
#define prefetch_ahead(p) \
  _mm_prefetch((const char *)((uintptr_t)(p) + PREFETCH_AHEAD_BYTES), _MM_HINT_T2)

/* Softmax of `rows` contiguous rows of n floats, software-pipelined: one
 * pass over the columns computes the exponentials of row r (in L1 since its
 * maximum was taken), the maximum of row r + 1 (streamed in from memory) and
 * the scaled output of row r - 1 (streamed out), so the memory traffic of
 * two rows overlaps the arithmetic of a third. n is a multiple of 16, y rows
 * start 64-byte aligned, scratch holds 2n floats (64-byte aligned). */
typedef struct sm_pass {
  __m512 sum, max;
  __mmask16 nan;
} sm_pass_t;

TGT512 static inline __attribute__((always_inline)) sm_pass_t
sm_columns(const float *xr, float m, float *cur, const float *xn, const float *prev, float inv,
           float *yp, int64_t n, int next, int out) {
  __m512 vm = _mm512_set1_ps(m), vi = _mm512_set1_ps(inv);
  sm_pass_t p = {_mm512_setzero_ps(), _mm512_set1_ps(-INFINITY), 0};
  for (int64_t k = 0; k < n; k += 16) {
    __m512 e = expb16(_mm512_sub_ps(_mm512_loadu_ps(xr + k), vm));
    _mm512_store_ps(cur + k, e);
    p.sum = _mm512_add_ps(p.sum, e);
    if (next) {
      prefetch_ahead(xn + k);
      __m512 v = _mm512_loadu_ps(xn + k);
      p.nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      p.max = _mm512_max_ps(p.max, v);
    }
    if (out) _mm512_stream_ps(yp + k, _mm512_mul_ps(_mm512_load_ps(prev + k), vi));
  }
  return p;
}

TGT512 static float sm_row_max(const float *x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t k = 0; k < n; k += 16) {
    __m512 v = _mm512_loadu_ps(x + k);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    mx = _mm512_max_ps(mx, v);
  }
  return nan ? NAN : _mm512_reduce_max_ps(mx);
}

TGT512 void tnk_vsoftmax_rows_stream_f32_avx512(const float *x, float *y, int64_t rows,
                                                 int64_t n, float *scratch) {
  if (rows <= 0) return;
  float *cur = scratch, *prev = scratch + n, inv = 0;
  float m = sm_row_max(x, n);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n, *xn = xr + n;
    float *yp = y + (r - 1) * n;
    int next = r + 1 < rows;
    sm_pass_t p;
    if (next && r > 0) p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 1, 1);
    else if (next) p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 1, 0);
    else if (r > 0) p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 0, 1);
    else p = sm_columns(xr, m, cur, xn, prev, inv, yp, n, 0, 0);
    inv = 1.0f / _mm512_reduce_add_ps(p.sum);
    if (next) m = p.nan ? NAN : _mm512_reduce_max_ps(p.max);
    float *t = cur;
    cur = prev;
    prev = t;
  }
  __m512 vi = _mm512_set1_ps(inv); /* the last row */
  float *yl = y + (rows - 1) * n;
  for (int64_t k = 0; k < n; k += 16) _mm512_stream_ps(yl + k, _mm512_mul_ps(_mm512_load_ps(prev + k), vi));
  _mm_sfence();
}

/* Layer norm of `rows` contiguous rows of n floats, pipelined like the
 * softmax above: one pass over the columns normalises row r (in L1 since
 * its statistics were taken) into y with streaming stores and sums row r + 1
 * as it streams in; the squared deviations of a row are then summed from
 * L1. n a multiple of 16, y rows 64-byte aligned; w, b may be NULL. */
TGT512 static inline __attribute__((always_inline)) __m512
ln_columns(const float *xr, float *yr, const float *xn, float mean, float rstd, const float *w,
           const float *b, int64_t n, int next) {
  __m512 vm = _mm512_set1_ps(mean), vr = _mm512_set1_ps(rstd), acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) {
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + k), vm), vr);
    if (w) v = _mm512_mul_ps(v, _mm512_loadu_ps(w + k));
    if (b) v = _mm512_add_ps(v, _mm512_loadu_ps(b + k));
    _mm512_stream_ps(yr + k, v);
    if (next) acc = _mm512_add_ps(acc, _mm512_loadu_ps(xn + k));
  }
  return acc;
}

TGT512 void tnk_vlayer_norm_rows_stream_f32_avx512(const float *x, float *y, int64_t rows,
                                                    int64_t n, float eps, const float *w,
                                                    const float *b, float *mean, float *rstd) {
  if (rows <= 0) return;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + k));
  float sum = _mm512_reduce_add_ps(acc);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float mu = sum / (float)n;
    __m512 vm = _mm512_set1_ps(mu), sq = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k += 16) {
      __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xr + k), vm);
      sq = _mm512_fmadd_ps(d, d, sq);
    }
    float rs = 1.0f / sqrtf(_mm512_reduce_add_ps(sq) / (float)n + eps);
    mean[r] = mu;
    rstd[r] = rs;
    if (r + 1 < rows)
      sum = _mm512_reduce_add_ps(ln_columns(xr, y + r * n, xr + n, mu, rs, w, b, n, 1));
    else
      ln_columns(xr, y + r * n, xr + n, mu, rs, w, b, n, 0);
  }
  _mm_sfence();
}

/* A large copy: 64-byte loads and streaming stores (the destination is
 * not read first and does not evict the caches), head and tail by memcpy. */
TGT512 void tnk_vcopy_stream_avx512(void *dst, const void *src, int64_t bytes) {
  char *d = dst;
  const char *s = src;
  int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63);
  if (head > bytes) head = bytes;
  memcpy(d, s, (size_t)head);
  int64_t k = head;
  for (; k + 256 <= bytes; k += 256) {
    __m512i a0 = _mm512_loadu_si512((const void *)(s + k));
    __m512i a1 = _mm512_loadu_si512((const void *)(s + k + 64));
    __m512i a2 = _mm512_loadu_si512((const void *)(s + k + 128));
    __m512i a3 = _mm512_loadu_si512((const void *)(s + k + 192));
    _mm512_stream_si512((void *)(d + k), a0);
    _mm512_stream_si512((void *)(d + k + 64), a1);
    _mm512_stream_si512((void *)(d + k + 128), a2);
    _mm512_stream_si512((void *)(d + k + 192), a3);
  }
  for (; k + 64 <= bytes; k += 64)
    _mm512_stream_si512((void *)(d + k), _mm512_loadu_si512((const void *)(s + k)));
  memcpy(d + k, s + k, (size_t)(bytes - k));
  _mm_sfence();
}

#else /* tnk_isa() never selects these off x86 */
void tnk_vscale_stream_f32_avx2(const float *x, float s, float *y, int64_t n) {
  (void)x; (void)s; (void)y; (void)n;
}
void tnk_vscale_stream_f32_avx512(const float *x, float s, float *y, int64_t n) {
  (void)x; (void)s; (void)y; (void)n;
}
void tnk_vsoftmax_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                         float *scratch) {
  (void)x; (void)y; (void)rows; (void)n; (void)scratch;
}
void tnk_vlayer_norm_rows_stream_f32_avx512(const float *x, float *y, int64_t rows, int64_t n,
                                            float eps, const float *w, const float *b,
                                            float *mean, float *rstd) {
  (void)x; (void)y; (void)rows; (void)n; (void)eps; (void)w; (void)b; (void)mean; (void)rstd;
}
void tnk_vcopy_stream_avx512(void *dst, const void *src, int64_t bytes) {
  (void)dst; (void)src; (void)bytes;
}
float tnk_vexp_sum_f32_avx512(const float *x, float sub, float *y, int64_t n) {
  (void)x; (void)sub; (void)y; (void)n;
  return 0;
}
float tnk_vexp_bounded_sum_f32_avx512(const float *x, float sub, float *y, int64_t n) {
  (void)x; (void)sub; (void)y; (void)n;
  return 0;
}
void tnk_vsigmoid_f32_avx512(const float *x, float *y, int64_t n, int silu) {
  (void)x; (void)y; (void)n; (void)silu;
}
void tnk_vsilu_bwd_f32_avx512(const float *g, const float *x, float *out, int64_t n) {
  (void)g; (void)x; (void)out; (void)n;
}
float tnk_vexp_sum_f32_avx2(const float *x, float sub, float *y, int64_t n) {
  (void)x; (void)sub; (void)y; (void)n;
  return 0;
}
float tnk_vexp_bounded_sum_f32_avx2(const float *x, float sub, float *y, int64_t n) {
  (void)x; (void)sub; (void)y; (void)n;
  return 0;
}
void tnk_vgelu_f32_avx2(const float *x, float *y, int64_t n, int tanh_form) {
  (void)x; (void)y; (void)n; (void)tanh_form;
}
void tnk_vgelu_f32_avx512(const float *x, float *y, int64_t n, int tanh_form) {
  (void)x; (void)y; (void)n; (void)tanh_form;
}
void tnk_vgelu_bwd_f32_avx2(const float *g, const float *x, float *out, int64_t n,
                            int tanh_form) {
  (void)g; (void)x; (void)out; (void)n; (void)tanh_form;
}
void tnk_vgelu_bwd_f32_avx512(const float *g, const float *x, float *out, int64_t n,
                              int tanh_form) {
  (void)g; (void)x; (void)out; (void)n; (void)tanh_form;
}
void tnk_vsigmoid_f32_avx2(const float *x, float *y, int64_t n, int silu) {
  (void)x; (void)y; (void)n; (void)silu;
}
float tnk_vsum_f32_avx2(const float *x, int64_t n) { (void)x; (void)n; return 0; }
double tnk_vsum_f32_f64_avx2(const float *x, int64_t n) { (void)x; (void)n; return 0; }
void tnk_vsilu_bwd_f32_avx2(const float *g, const float *x, float *out, int64_t n) {
  (void)g; (void)x; (void)out; (void)n;
}
float tnk_vsumsqdev_f32_avx2(const float *x, int64_t n, float mean) {
  (void)x; (void)n; (void)mean;
  return 0;
}
float tnk_vmax_f32_avx2(const float *x, int64_t n) { (void)x; (void)n; return 0; }
void tnk_vnormalize_f32_avx2(const float *x, float *y, int64_t n, float mean, float rstd,
                             const float *w, const float *b) {
  (void)x; (void)y; (void)n; (void)mean; (void)rstd; (void)w; (void)b;
}
#endif
