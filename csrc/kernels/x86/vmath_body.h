/* The vector algorithms of vmath.h, written once against x86/simd.h and
 * compiled per width by kernels/x86/avx2/vmath.c and avx512/vmath.c, each
 * of which defines vf_exp (full-range exp) before including this file and
 * gets the entry points named with its suffix (tnk_vgelu_f32_avx2, ...).
 *
 * Numerics:
 * - exp_poly: the Cephes degree-7 polynomial of exp(r) on [-ln2/2, ln2/2]
 *   in Horner steps; the caller finishes y r^2 + r + 1.
 * - expb: exp(z) for z <= 88 (a value minus its maximum, or minus a bound
 *   above it: softmax and attention), cheaper than vf_exp: n = round(z / ln 2)
 *   from the rounding of an add to 1.5 2^23 (whose low mantissa bits then
 *   hold n + 127, the biased exponent of 2^n), r = z - n ln 2 in two parts,
 *   e^r by a degree-6 polynomial with e^0 = 1 exactly (fitted for relative
 *   error on [-ln2/2, ln2/2], 2e-9), times 2^n by one multiply: 1.02 ulp at
 *   worst against the exact exp in a stride through every 7th float of
 *   [-87.33, 0], as accurate as vf_exp (a degree-5 fit was 15% faster but
 *   2 ulp, enough to move gradients through Gemma 3n's activation-sparsity
 *   threshold away from CPU's). Below ln FLT_MIN (-87.33) the result is 0
 *   where the exact one is a subnormal under 1.2e-38; NaN propagates.
 * - GELU, exact: x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. erfc(z) for
 *   z >= 0 is exp(-z^2) t P(t), t = 1 / (1 + 0.4 z), P of degree 8 fitted
 *   for relative error over [0, 10] (7e-8 in double, 4e-7 evaluated in
 *   float), so Phi keeps its relative accuracy far into the negative tail,
 *   where 1 + erf(x / sqrt 2) would cancel; z^2 = x^2 / 2 is carried in two
 *   parts into the exponential (the tail's relative accuracy depends on it;
 *   an infinite x makes the low part NaN, which a clamp turns finite). The
 *   backward, Phi(x) + x phi(x), reuses exp(-z^2) = sqrt(2 pi) phi(x). The
 *   tanh form is x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
 *   (0.5 (1 + tanh u) = sigmoid(2u)), from one exp; its backward
 *   s + 2 x s (1 - s) u'(x). x = -inf gives NaN (-inf * 0), as CPU.
 * Tails (n not a multiple of the width) run one partial vector. */
#ifndef TNK_X86_VMATH_BODY_H
#define TNK_X86_VMATH_BODY_H

#include "simd.h"

static inline vf vf_exp(vf x); /* defined by the including ISA file */

static inline vf exp_poly(vf r) {
  vf p = vf_set1(1.9875691500e-4f);
  p = vf_fmadd(p, r, vf_set1(1.3981999507e-3f));
  p = vf_fmadd(p, r, vf_set1(8.3334519073e-3f));
  p = vf_fmadd(p, r, vf_set1(4.1665795894e-2f));
  p = vf_fmadd(p, r, vf_set1(1.6666665459e-1f));
  return vf_fmadd(p, r, vf_set1(5.0000001201e-1f));
}

#define EXPB_MAGIC 12583039.0f /* 1.5 * 2^23 + 127 */
static inline vf expb(vf z) {
  vm keep = vf_not_lt(z, vf_set1(-87.33f)); /* or NaN */
  vf magic = vf_set1(EXPB_MAGIC);
  vf t = vf_fmadd(z, vf_set1(1.44269504088896341f), magic);
  vf n = vf_sub(t, magic);
  vf r = vf_fnmadd(n, vf_set1(0.693359375f), z);
  r = vf_fnmadd(n, vf_set1(-2.12194440e-4f), r);
  vf p = vf_set1(1.384359668e-3f);
  p = vf_fmadd(p, r, vf_set1(8.374140598e-3f));
  p = vf_fmadd(p, r, vf_set1(4.166800156e-2f));
  p = vf_fmadd(p, r, vf_set1(1.666643173e-1f));
  p = vf_fmadd(p, r, vf_set1(4.999999404e-1f));
  p = vf_fmadd(p, r, vf_set1(1.0f));
  p = vf_fmadd(p, r, vf_set1(1.0f));
  vf two_n = vf_of_int(vi_shl32(vf_as_int(t), 23));
  return vf_keep(keep, vf_mul(p, two_n));
}

static inline __attribute__((always_inline)) float exp_sum(const float *x, float sub, float *y,
                                                           int64_t n, int bounded) {
  vf s0 = vf_zero(), s1 = vf_zero(), vs = vf_set1(sub);
  int64_t k = 0;
  for (; k + 2 * VF_LANES <= n; k += 2 * VF_LANES) {
    vf z0 = vf_sub(vf_load(x + k), vs), z1 = vf_sub(vf_load(x + k + VF_LANES), vs);
    vf e0 = bounded ? expb(z0) : vf_exp(z0), e1 = bounded ? expb(z1) : vf_exp(z1);
    if (y) {
      vf_store(y + k, e0);
      vf_store(y + k + VF_LANES, e1);
    }
    s0 = vf_add(s0, e0);
    s1 = vf_add(s1, e1);
  }
  for (; k < n; k += VF_LANES) { /* lanes past n add 0 */
    int64_t w = n - k < VF_LANES ? n - k : VF_LANES;
    vf z = vf_sub(w == VF_LANES ? vf_load(x + k) : vf_load_part(x + k, w), vs);
    vf e = bounded ? expb(z) : vf_exp(z);
    if (w < VF_LANES) e = vf_keep(vf_first(w), e);
    if (y) {
      if (w == VF_LANES)
        vf_store(y + k, e);
      else
        vf_store_part(y + k, e, w);
    }
    s0 = vf_add(s0, e);
  }
  return vf_hsum(vf_add(s0, s1));
}

float VF_SFX(tnk_vexp_sum_f32)(const float *x, float sub, float *y, int64_t n) {
  return exp_sum(x, sub, y, n, 0);
}

float VF_SFX(tnk_vexp_bounded_sum_f32)(const float *x, float sub, float *y, int64_t n) {
  return exp_sum(x, sub, y, n, 1);
}

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* Phi(x), and exp(-x^2 / 2) into *e_out */
static inline vf gelu_phi(vf x, vf *e_out) {
  vf z = vf_mul(vf_abs(x), vf_set1(0.7071067811865476f));
  vf t = vf_div(vf_set1(1.0f), vf_fmadd(z, vf_set1(0.4f), vf_set1(1.0f)));
  vf x2 = vf_mul(x, x), half = vf_set1(0.5f);
  vf z2 = vf_mul(x2, half); /* x^2 / 2 = z2 + z2lo exactly */
  vf z2lo = vf_mul(vf_fmsub(x, x, x2), half);
  z2lo = vf_min(vf_max(z2lo, vf_set1(-1.0f)), vf_set1(1.0f)); /* inf */
  vf e0 = expb(vf_sub(vf_zero(), z2));
  vf e = vf_fnmadd(e0, z2lo, e0);
  vf q = vf_set1(4.127907380e-2f);
  q = vf_fmadd(q, t, vf_set1(-1.404355168e-1f));
  q = vf_fmadd(q, t, vf_set1(8.420585841e-2f));
  q = vf_fmadd(q, t, vf_set1(8.773953468e-2f));
  q = vf_fmadd(q, t, vf_set1(7.989415526e-2f));
  q = vf_fmadd(q, t, vf_set1(1.933421195e-1f));
  q = vf_fmadd(q, t, vf_set1(2.018987387e-1f));
  q = vf_fmadd(q, t, vf_set1(2.264418155e-1f));
  q = vf_fmadd(q, t, vf_set1(2.256342918e-1f));
  vf half_q = vf_mul(vf_mul(e, vf_set1(0.5f)), vf_mul(t, q));
  *e_out = e;
  return vf_select(vf_ge(x, vf_zero()), vf_sub(vf_set1(1.0f), half_q), half_q);
}

/* sigmoid(2u) of the tanh form */
static inline vf gelu_tanh_s(vf x) {
  vf x2 = vf_mul(x, x);
  vf u = vf_mul(vf_mul(x, vf_set1(GELU_K)), vf_fmadd(x2, vf_set1(GELU_C), vf_set1(1.0f)));
  vf one = vf_set1(1.0f);
  return vf_div(one, vf_add(one, vf_exp(vf_mul(u, vf_set1(-2.0f)))));
}

static inline vf gelu(vf x, int tanh_form) {
  vf e;
  return vf_mul(x, tanh_form ? gelu_tanh_s(x) : gelu_phi(x, &e));
}

static inline vf gelu_bwd(vf g, vf x, int tanh_form) {
  vf d;
  if (tanh_form) {
    vf s = gelu_tanh_s(x);
    vf du = vf_mul(vf_set1(2.0f * GELU_K),
                   vf_fmadd(vf_mul(x, x), vf_set1(3.0f * GELU_C), vf_set1(1.0f)));
    d = vf_fmadd(vf_mul(x, vf_mul(s, vf_sub(vf_set1(1.0f), s))), du, s);
  } else {
    vf e, phi = gelu_phi(x, &e);
    d = vf_fmadd(vf_mul(x, e), vf_set1(0.3989422804014327f), phi);
  }
  return vf_mul(g, d);
}

static inline vf sigmoid(vf x, int silu) {
  vf one = vf_set1(1.0f);
  vf s = vf_div(one, vf_add(one, vf_exp(vf_sub(vf_zero(), x))));
  return silu ? vf_mul(x, s) : s;
}

static inline vf silu_bwd(vf g, vf x) {
  vf one = vf_set1(1.0f), s = sigmoid(x, 0);
  return vf_mul(vf_mul(g, s), vf_fmadd(x, vf_sub(one, s), one));
}

/* y = F(x) or out = F(g, x) over whole vectors, then one partial vector. */
#define MAP1(F, x, y, n, ...)                                                              \
  do {                                                                                     \
    int64_t k_ = 0;                                                                        \
    for (; k_ + VF_LANES <= (n); k_ += VF_LANES)                                           \
      vf_store((y) + k_, F(vf_load((x) + k_), __VA_ARGS__));                               \
    if (k_ < (n))                                                                          \
      vf_store_part((y) + k_, F(vf_load_part((x) + k_, (n) - k_), __VA_ARGS__), (n) - k_); \
  } while (0)
#define MAP2(F, g, x, y, n, ...)                                                             \
  do {                                                                                       \
    int64_t k_ = 0;                                                                          \
    for (; k_ + VF_LANES <= (n); k_ += VF_LANES)                                             \
      vf_store((y) + k_, F(vf_load((g) + k_), vf_load((x) + k_) __VA_ARGS__));               \
    if (k_ < (n))                                                                            \
      vf_store_part(                                                                         \
          (y) + k_,                                                                          \
          F(vf_load_part((g) + k_, (n) - k_), vf_load_part((x) + k_, (n) - k_) __VA_ARGS__), \
          (n) - k_);                                                                         \
  } while (0)

void VF_SFX(tnk_vgelu_f32)(const float *x, float *y, int64_t n, int tanh_form) {
  MAP1(gelu, x, y, n, tanh_form);
}

void VF_SFX(tnk_vgelu_bwd_f32)(const float *g, const float *x, float *out, int64_t n,
                               int tanh_form) {
  MAP2(gelu_bwd, g, x, out, n, , tanh_form);
}

void VF_SFX(tnk_vsigmoid_f32)(const float *x, float *y, int64_t n, int silu) {
  MAP1(sigmoid, x, y, n, silu);
}

void VF_SFX(tnk_vsilu_bwd_f32)(const float *g, const float *x, float *out, int64_t n) {
  MAP2(silu_bwd, g, x, out, n, );
}

/* Streaming scale: scalar head up to 64-byte alignment, non-temporal
 * vector body, scalar tail, then sfence (streaming stores are weakly
 * ordered; the fence orders them before the task's completion is signalled). */
void VF_SFX(tnk_vscale_stream_f32)(const float *x, float s, float *y, int64_t n) {
  int64_t k = 0;
  for (; k < n && ((uintptr_t)(y + k) & 63); k++) y[k] = x[k] * s;
  vf vs = vf_set1(s);
  for (; k + VF_LANES <= n; k += VF_LANES) vf_stream(y + k, vf_mul(vf_load(x + k), vs));
  for (; k < n; k++) y[k] = x[k] * s;
  _mm_sfence();
}

#endif
