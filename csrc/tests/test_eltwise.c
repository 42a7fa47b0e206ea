/* The element-wise kernels (unary.c, binary.c, ternary.c, copy.c, fill.c,
 * the loop tables of eltwise_loops.h and the vector math of vmath.h)
 * against independent references: every row of eltwise_ops.h against its
 * reference column. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_half_conversions(void) {
  /* every finite half round-trips; compare with the compiler's _Float16 */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = tnk_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    if (tnk_f32_to_f16(f) != h) bad++;
#ifdef __FLT16_MAX__
    _Float16 ref;
    uint16_t hh = (uint16_t)h;
    memcpy(&ref, &hh, 2);
    if ((float)ref != f) bad++;
#endif
  }
  CHECK(bad == 0);
#ifdef __FLT16_MAX__
  /* rounding of arbitrary floats, including subnormals and overflow */
  srand(1);
  bad = 0;
  for (int i = 0; i < 200000; i++) {
    uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
    float f;
    memcpy(&f, &u, 4);
    if (isnan(f)) continue;
    _Float16 r = (_Float16)f;
    uint16_t want;
    memcpy(&want, &r, 2);
    if (tnk_f32_to_f16(f) != want) bad++;
  }
  CHECK(bad == 0);
#endif
  /* bf16: round to nearest even, NaN stays NaN */
  CHECK(tnk_f32_to_bf16(1.0f) == 0x3f80);
  float up;
  uint32_t u = 0x3f808000u; /* exactly halfway, even below: rounds down */
  memcpy(&up, &u, 4);
  CHECK(tnk_f32_to_bf16(up) == 0x3f80);
  u = 0x3f818000u; /* halfway, odd below: rounds up */
  memcpy(&up, &u, 4);
  CHECK(tnk_f32_to_bf16(up) == 0x3f82);
  CHECK(isnan(tnk_bf16_to_f32(tnk_f32_to_bf16(NAN))));
}

static void test_copy_strided_cast(void) {
  /* transpose a 3x5 int32 matrix into float64 */
  int32_t src[15];
  double dst[15];
  for (int i = 0; i < 15; i++) src[i] = i - 7;
  tnk_copy_args_t a = {
      .shape = {2, 0, {5, 3}}, .dst = {dst, TNK_F64, 0, {3, 1}}, .src = {src, TNK_I32, 0, {1, 5}}};
  tnk_copy(&a);
  int ok = 1;
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) ok &= dst[r * 3 + c] == (double)src[c * 5 + r];
  CHECK(ok);
  /* broadcast (stride 0) float -> bool */
  float one = 0.5f;
  unsigned char flags[6] = {0};
  tnk_copy_args_t b = {
      .shape = {1, 0, {6}}, .dst = {flags, TNK_BOOL, 0, {1}}, .src = {&one, TNK_F32, 0, {0}}};
  tnk_copy(&b);
  ok = 1;
  for (int i = 0; i < 6; i++) ok &= flags[i] == 1;
  CHECK(ok);
  /* int64 keeps all 64 bits through int64 -> int64 and truncates to int8 */
  int64_t big = (1LL << 62) + 3, out64 = 0;
  int8_t out8 = 0;
  tnk_copy_args_t c = {
      .shape = {0}, .dst = {&out64, TNK_I64, 0, {0}}, .src = {&big, TNK_I64, 0, {0}}};
  tnk_copy(&c);
  CHECK(out64 == big);
  c.dst = (tnk_view_t){&out8, TNK_I8, 0, {0}};
  tnk_copy(&c);
  CHECK(out8 == 3);
  /* NaN -> int does not trap */
  double nan_v = NAN;
  int32_t i32 = 0;
  c.src = (tnk_view_t){&nan_v, TNK_F64, 0, {0}};
  c.dst = (tnk_view_t){&i32, TNK_I32, 0, {0}};
  tnk_copy(&c);
  /* empty shapes touch nothing */
  tnk_copy_args_t e = {.shape = {2, 0, {0, 4}},
                       .dst = {NULL, TNK_F32, 0, {4, 1}},
                       .src = {NULL, TNK_F32, 0, {4, 1}}};
  tnk_copy(&e);
}

static void test_fill(void) {
  uint16_t h[10] = {0};
  tnk_fill_args_t a = {
      .shape = {2, 0, {5, 2}}, .dst = {h, TNK_BF16, 0, {2, 1}}, .value = {.f = 1.5}};
  tnk_fill(&a);
  int ok = 1;
  for (int i = 0; i < 10; i++) ok &= tnk_bf16_to_f32(h[i]) == 1.5f;
  CHECK(ok);
  static float big[100003];
  tnk_fill_args_t b = {
      .shape = {1, 0, {100003}}, .dst = {big, TNK_F32, 0, {1}}, .value = {.f = -2.0}};
  tnk_fill(&b);
  ok = 1;
  for (int i = 0; i < 100003; i++) ok &= big[i] == -2.0f;
  CHECK(ok);
  int64_t ints[3];
  tnk_fill_args_t c = {.shape = {1, 0, {3}},
                       .dst = {ints, TNK_I64, 0, {1}},
                       .value = {.i = (1LL << 60) + 1, .is_integral = 1}};
  tnk_fill(&c);
  CHECK(ints[2] == (1LL << 60) + 1);
}

static void test_binary(void) {
  /* broadcast add with alpha, fp32 and bf16, and int8 wrap-around */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, out[6];
  tnk_binary_args_t x = {.shape = {2, 0, {2, 3}},
                         .out = {out, TNK_F32, 0, {3, 1}},
                         .a = {a, TNK_F32, 0, {3, 1}},
                         .b = {b, TNK_F32, 0, {0, 1}},
                         .op = TNK_ADD,
                         .dtype = TNK_F32,
                         .alpha = 0.5};
  tnk_binary(&x);
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= out[i] == a[i] + 0.5f * b[i % 3];
  CHECK(ok);
  x.op = TNK_MAXIMUM;
  b[1] = NAN;
  tnk_binary(&x);
  CHECK(isnan(out[1]) && isnan(out[4]) && out[0] == 10 && out[5] == 30);
  int8_t i1[2] = {120, -128}, i2[2] = {10, -1}, io[2];
  tnk_binary_args_t y = {.shape = {1, 0, {2}},
                         .out = {io, TNK_I8, 0, {1}},
                         .a = {i1, TNK_I8, 0, {1}},
                         .b = {i2, TNK_I8, 0, {1}},
                         .op = TNK_ADD,
                         .dtype = TNK_I8,
                         .ialpha = 1};
  tnk_binary(&y);
  CHECK(io[0] == (int8_t)-126 && io[1] == 127);
  CHECK(!tnk_binary_supported(TNK_DIV, TNK_I32));
  CHECK(tnk_binary_supported(TNK_ADD, TNK_BOOL) && !tnk_binary_supported(TNK_SUB, TNK_BOOL));
  uint16_t h1 = tnk_f32_to_bf16(1.5f), h2 = tnk_f32_to_bf16(2.25f), ho;
  tnk_binary_args_t z = {.shape = {0},
                         .out = {&ho, TNK_BF16, 0, {0}},
                         .a = {&h1, TNK_BF16, 0, {0}},
                         .b = {&h2, TNK_BF16, 0, {0}},
                         .op = TNK_MUL,
                         .dtype = TNK_BF16};
  tnk_binary(&z);
  CHECK(tnk_bf16_to_f32(ho) == tnk_bf16_to_f32(tnk_f32_to_bf16(1.5f * 2.25f)));
}

/* The vector exp/sigmoid against libm, across the range, with the edges
 * softmax relies on: exp(-inf) = 0 exactly, NaN propagates. */
typedef float (*vexp_fn)(const float *, float, float *, int64_t);
typedef void (*vsig_fn)(const float *, float *, int64_t, int);
typedef void (*vsilu_fn)(const float *, const float *, float *, int64_t);

/* One variant of the vector exp family against libm. */
static void check_vmath(vexp_fn vexp, vsig_fn vsig, vsilu_fn vsilu) {
  enum { N = 2003 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = -100.0f + 190.0f * (float)i / N;
  x[0] = -INFINITY;
  x[1] = NAN;
  x[2] = 0.0f;
  x[3] = -0.0f;
  x[4] = 88.0f;
  float sum = vexp(x, 0.0f, y, N);
  int bad = 0;
  double ref_sum = 0;
  for (int i = 0; i < N; i++) {
    float want = expf(x[i]);
    if (i == 1) {
      bad += !isnan(y[i]);
      continue;
    }
    ref_sum += want;
    /* 3 ulp, 12 near the overflow edge where x - ln 2 rounds */
    float tol = x[i] > 88.3f ? 1.5e-6f : 4e-7f;
    if (fabsf(y[i] - want) > tol * fabsf(want) + 1e-37f) bad++;
  }
  CHECK(y[0] == 0.0f);
  CHECK(bad == 0);
  CHECK(isnan(sum));
  float s2 = vexp(x + 2, 1.0f, NULL, 100);
  double r2 = 0;
  for (int i = 2; i < 102; i++) r2 += expf(x[i] - 1.0f);
  CHECK(fabs(s2 - r2) <= 1e-5 * r2);
  vsig(x + 2, y, N - 2, 1);
  bad = 0;
  for (int i = 2; i < N; i++) {
    float want = x[i] / (1.0f + expf(-x[i]));
    if (fabsf(y[i - 2] - want) > 1e-6f * fabsf(want) + 1e-30f) bad++;
  }
  CHECK(bad == 0);
  /* SiLU backward: g * s * (1 + x (1 - s)) */
  static float g[N];
  for (int i = 0; i < N; i++) g[i] = (float)((i * 7 % 11) - 5) / 5.0f;
  vsilu(g, x + 2, y, N - 2);
  for (int i = 2; i < N; i++) {
    double s = 1.0 / (1.0 + exp(-(double)x[i]));
    double want = g[i - 2] * s * (1.0 + x[i] * (1.0 - s));
    if (fabs(y[i - 2] - want) > 2e-6 * fabs(want) + 1e-6) bad++;
  }
  CHECK(bad == 0);
}

/* The bounded exp of softmax and attention (arguments <= 88) against
 * libm: 1.5 ulp over [-87.33, 88] in a 2^-8-spaced sweep plus every
 * 64th float in [-1, 0], exp(0) = 1 and exp(-inf) = 0 exactly, NaN
 * propagates, 0 below FLT_MIN; the sum, and the offset taken off. */
static void check_vexp_bounded(vexp_fn vexp) {
  enum { N = 65536 };
  static float x[N], y[N];
  int n = 0;
  for (float v = -87.33f; v <= 88.0f && n < N / 2; v += 1.0f / 256) x[n++] = v;
  for (uint32_t u = 0x3f800000u; n < N; u -= 64) { /* -1 up towards -0 */
    float v;
    memcpy(&v, &u, 4);
    x[n++] = -v;
  }
  float sum = vexp(x, 0.0f, y, n);
  int bad = 0;
  double ref = 0;
  for (int i = 0; i < n; i++) {
    double want = exp((double)x[i]);
    ref += want;
    float w = (float)want, ulp = nextafterf(w, INFINITY) - w;
    bad += fabs(y[i] - want) > 1.5 * ulp;
  }
  CHECK(bad == 0);
  CHECK(fabs(sum - ref) <= 1e-5 * ref);
  float sp[7] = {0.0f, -0.0f, -INFINITY, NAN, -87.4f, -100.0f, -1e-30f}, ys[7];
  float s = vexp(sp, 0.0f, ys, 7);
  CHECK(ys[0] == 1.0f && ys[1] == 1.0f && ys[2] == 0.0f && isnan(ys[3]));
  CHECK(ys[4] == 0.0f && ys[5] == 0.0f && ys[6] == 1.0f && isnan(s));
  float z[3] = {2.0f, 3.0f, 5.0f}, yz[3]; /* minus the maximum, as softmax calls it */
  float sz = vexp(z, 5.0f, yz, 3);
  CHECK(yz[2] == 1.0f && fabsf(yz[0] - expf(-3.0f)) <= 1.2e-7f * expf(-3.0f));
  CHECK(fabsf(sz - (expf(-3.0f) + expf(-2.0f) + 1.0f)) <= 1e-6f);
}

/* GELU and its backward, both forms, against double-precision formulas
 * over [-12, 12] (the negative tail relative to its tiny values), an odd
 * length for the tails; +inf, -inf and NaN give inf, NaN, NaN forward. */
typedef void (*vgelu_fn)(const float *, float *, int64_t, int);
typedef void (*vgelu_bwd_fn)(const float *, const float *, float *, int64_t, int);
static void check_vgelu(vgelu_fn fwd, vgelu_bwd_fn bwd) {
  enum { N = 4803 };
  static float x[N], g[N], y[N], d[N];
  for (int i = 0; i < N; i++) {
    x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    g[i] = (float)((i * 7 % 13) - 6) / 3.0f;
  }
  for (int form = 0; form < 2; form++) {
    fwd(x, y, N, form);
    bwd(g, x, d, N, form);
    int bad = 0;
    for (int i = 0; i < N; i++) {
      double v = x[i], phi, dphi;
      if (form) {
        /* 0.5 (1 + tanh u) = sigmoid(2u), 1 - tanh^2 u = 4 s (1 - s): no cancellation */
        double u = 0.7978845608028654 * (v + 0.044715 * v * v * v), sg = 1 / (1 + exp(-2 * u));
        phi = sg;
        dphi = 2 * v * sg * (1 - sg) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
      } else {
        phi = 0.5 * erfc(-v / sqrt(2.0));
        dphi = v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
      }
      double want = v * phi, want_d = g[i] * (phi + dphi);
      /* the tanh form's tail is as accurate as u = k (x + c x^3) rounded to
       * float: 2u ulps of relative error, up to 88 (CPU's 1 + tanh u
       * cancels there); below 1e-30 absolute, where exp(-2u) overflows, its
       * sigmoid is 0 instead of subnormal (CPU's tanh rounds to -1) */
      double rel = form ? 1.5e-5 : 2e-6;
      bad += fabs(y[i] - want) > rel * fabs(want) + 1e-30;
      bad += fabs(d[i] - want_d) > rel * (fabs(g[i]) * (phi + fabs(dphi))) + 1e-30;
    }
    CHECK(bad == 0);
    float sp[5] = {INFINITY, -INFINITY, NAN, 0.0f, -100.0f}, one[5] = {1, 1, 1, 1, 1}, ys[5], ds[5];
    fwd(sp, ys, 5, form);
    bwd(one, sp, ds, 5, form);
    CHECK(ys[0] == INFINITY && isnan(ys[1]) && isnan(ys[2]) && ys[3] == 0.0f && ys[4] == 0.0f);
    CHECK(isnan(ds[2]) && fabsf(ds[3] - 0.5f) <= 1e-6f && ds[4] == 0.0f);
  }
}

static void test_vmath(void) {
  check_vgelu(tnk_vgelu_f32, tnk_vgelu_bwd_f32);                      /* dispatched */
  check_vmath(tnk_vexp_sum_f32, tnk_vsigmoid_f32, tnk_vsilu_bwd_f32); /* dispatched */
  check_vexp_bounded(tnk_vexp_bounded_sum_f32);
  /* streaming scale: unaligned heads and odd tails land exactly */
  static float src[300], dst[310];
  for (int i = 0; i < 300; i++) src[i] = (float)i - 7.5f;
  for (int off = 0; off < 5; off++) {
    for (int i = 0; i < 310; i++) dst[i] = -1.0f;
    tnk_vscale_stream_f32(src, 0.5f, dst + off, 300 - off);
    int bad = 0;
    for (int i = 0; i < 310; i++) {
      float want = i >= off && i < 300 ? src[i - off] * 0.5f : -1.0f;
      bad += dst[i] != want;
    }
    CHECK(bad == 0);
  }
  for (int isa = TNK_ISA_AVX2; isa <= TNK_ISA_AVX512; isa++) {
    tnk_config_t c;
    if (tnk_config_for_isa(isa, &c) != 0) continue;
    check_vmath(c.vmath.exp_sum, c.vmath.sigmoid, c.vmath.silu_bwd);
    check_vexp_bounded(c.vmath.exp_bounded_sum);
    check_vgelu(c.vmath.gelu, c.vmath.gelu_bwd);
  }
}

/* ---- the rows of eltwise_ops.h against their reference columns ---------- */

/* round half to even, from floor */
static double ref_round_half_even(double v) {
  double r = floor(v), d = v - r;
  return d > 0.5 ? r + 1 : d < 0.5 ? r : fmod(r, 2) == 0 ? r : r + 1;
}
/* erf's inverse by bisection on erf */
static double ref_erfinv(double v) {
  if (isnan(v) || fabs(v) > 1) return NAN;
  if (fabs(v) == 1) return copysign(INFINITY, v);
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; i++) {
    double mid = (lo + hi) / 2;
    if (erf(mid) < v)
      lo = mid;
    else
      hi = mid;
  }
  return (lo + hi) / 2;
}
static double ref_logit(double v, double eps) {
  double z = eps < 0 ? v : fmin(fmax(v, eps), 1 - eps);
  return log(z / (1 - z));
}
/* the derivative of lgamma by central difference; -inf at +0, NaN at the
 * negative integers (the poles) */
static double ref_digamma(double v) {
  if (v <= 0 && v == trunc(v)) return v == 0 && !signbit(v) ? -INFINITY : NAN;
  return (lgamma(v + 1e-6) - lgamma(v - 1e-6)) / 2e-6;
}
/* I0(v) = (1/pi) * integral over [0, pi] of exp(v cos t): the trapezoid
 * rule on this periodic integrand converges geometrically (256 points) */
static double ref_i0(double v) {
  double s = 0;
  for (int k = 0; k < 256; k++) s += exp(v * cos(M_PI * (k + 0.5) / 256));
  return s / 256;
}
static double sech2(double u) { return 1 / (cosh(u) * cosh(u)); }
static double ref_gelu_tanh_bwd(double g, double x) {
  const double k = sqrt(2 / M_PI), c = 0.044715, u = k * (x + c * x * x * x);
  return g * (0.5 * (1 + tanh(u)) + 0.5 * x * sech2(u) * k * (1 + 3 * c * x * x));
}
static double ref_mish_bwd(double g, double x) {
  double sp = log(1 + exp(x));
  return g * (tanh(sp) + x * sech2(sp) / (1 + exp(-x)));
}
static double ref_logit_bwd(double g, double x, double eps) {
  if (eps < 0) return x < 0 || x > 1 ? NAN : g / (x * (1 - x));
  return x < eps || x > 1 - eps ? 0 : g / (x * (1 - x));
}

#define UNARY_REF_CASE(ID, name, kernel, ref) \
  case TNK_##ID: return (ref);
static double unary_ref(int op, double v, double p0, double p1, double p2) {
  switch (op) { TNK_UNARY_OPS(UNARY_REF_CASE) }
  return NAN;
}

/* got against want: NaN where want is NaN, the same infinity, else within
 * tol relative to 1 + |want| */
static int ref_close(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* Every unary op on fp32, bf16 and fp64 against its reference, with four
 * parameter sets (both branches of logit's eps, pow_scalar's special
 * exponents 2, 0.5 and a general one, hardtanh's bounds). */
static void test_unary(void) {
  enum { N = 8 };
  const double xs[N] = {-3.0, -1.0, -0.25, 0.0, 0.5, 0.75, 1.0, 2.5};
  const double params[4][3] = {{2, 3, 0.5}, {0.25, 1.5, 1.5}, {0.5, 1, -1}, {-1, 2, 2}};
  float x[N], out[N];
  double xd[N], od[N];
  uint16_t xb[N], ob[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)xs[i];
    xd[i] = xs[i];
    xb[i] = tnk_f32_to_bf16(x[i]);
  }
  int bad = 0, checked = 0;
  for (int ps = 0; ps < 4; ps++)
    for (int op = 0; op < TNK_UNARY_OP_COUNT; op++) {
      const double *p = params[ps];
      tnk_unary_args_t a = {.shape = {1, 0, {N}},
                            .out = {out, TNK_F32, 0, {1}},
                            .in = {x, TNK_F32, 0, {1}},
                            .op = op,
                            .dtype = TNK_F32,
                            .p0 = p[0],
                            .p1 = p[1],
                            .p2 = p[2]};
      tnk_unary(&a);
      tnk_unary_args_t b = a, d = a;
      b.out = (tnk_view_t){ob, TNK_BF16, 0, {1}};
      b.in = (tnk_view_t){xb, TNK_BF16, 0, {1}};
      b.dtype = TNK_BF16;
      tnk_unary(&b);
      d.out = (tnk_view_t){od, TNK_F64, 0, {1}};
      d.in = (tnk_view_t){xd, TNK_F64, 0, {1}};
      d.dtype = TNK_F64;
      tnk_unary(&d);
      for (int i = 0; i < N; i++) {
        double w = unary_ref(op, xs[i], p[0], p[1], p[2]);
        int ok = ref_close(out[i], w, 1e-5) && ref_close(tnk_bf16_to_f32(ob[i]), w, 2e-2) &&
                 ref_close(od[i], w, 1e-9);
        checked++;
        if (!ok) {
          printf("  unary op %d (params %d) at %g: %g (bf16 %g, f64 %.17g), want %.17g\n", op, ps,
                 xs[i], out[i], tnk_bf16_to_f32(ob[i]), od[i], w);
          bad++;
        }
      }
    }
  CHECK(bad == 0 && checked == 4 * TNK_UNARY_OP_COUNT * N);
  CHECK(!tnk_unary_supported(TNK_EXP, TNK_I32));
  /* integer neg/abs wrap as PyTorch's do */
  int8_t i8[4] = {-128, -3, 0, 127}, o8[4];
  tnk_unary_args_t ia = {.shape = {1, 0, {4}},
                         .out = {o8, TNK_I8, 0, {1}},
                         .in = {i8, TNK_I8, 0, {1}},
                         .op = TNK_ABS,
                         .dtype = TNK_I8};
  tnk_unary(&ia);
  CHECK(o8[0] == -128 && o8[1] == 3 && o8[2] == 0 && o8[3] == 127);
  ia.op = TNK_NEG;
  tnk_unary(&ia);
  CHECK(o8[0] == -128 && o8[1] == 3 && o8[2] == 0 && o8[3] == -127);
}

enum { KIND_ARITH = 1, KIND_CMP, KIND_BITS };
#define BINARY_KIND_ROW(ID, name, kind, kernel, ref) [TNK_##ID] = KIND_##kind,
static const int k_binary_kind[TNK_BINARY_OP_COUNT] = {TNK_BINARY_OPS(BINARY_KIND_ROW)};
#define BINARY_REF_CASE(ID, name, kind, kernel, ref) BINARY_REF_##kind(TNK_##ID, ref)
#define BINARY_REF_ARITH(OP, R) \
  case OP: return (R);
#define BINARY_REF_CMP(OP, R)
#define BINARY_REF_BITS(OP, R)
static double arith_ref(int op, double a, double b, double al, double be, double ga) {
  switch (op) { TNK_BINARY_OPS(BINARY_REF_CASE) }
  return NAN;
}
#undef BINARY_REF_ARITH
#undef BINARY_REF_CMP
#define BINARY_REF_ARITH(OP, R)
#define BINARY_REF_CMP(OP, R) \
  case OP: return (R);
static int cmp_ref(int op, double a, double b) {
  switch (op) { TNK_BINARY_OPS(BINARY_REF_CASE) }
  return -1;
}
#undef BINARY_REF_CMP
#undef BINARY_REF_BITS
#define BINARY_REF_CMP(OP, R)
#define BINARY_REF_BITS(OP, R) \
  case OP: return (R);
static int64_t bits_ref(int op, int64_t a, int64_t b) {
  switch (op) { TNK_BINARY_OPS(BINARY_REF_CASE) }
  return -1;
}

/* Every binary op against its reference over a grid of operand pairs:
 * arithmetic on fp32 and fp64 (alpha, beta, gamma = 0.25, 1.25, 0.75: the
 * bounds, slopes and scales of the backward ops), comparisons on fp32 with
 * equal pairs in the grid, bitwise ops on int32. */
static void test_binary_ops(void) {
  enum { NA = 6, NB = 7, N = NA * NB };
  const double as[NA] = {-2.5, -1, 0, 0.5, 1.5, 3}, bs[NB] = {-2.5, -1, -0.5, 0.5, 0.75, 1.5, 2};
  const double al = 0.25, be = 1.25, ga = 0.75;
  float fa[N], fb[N], fo[N];
  double da[N], db[N], dout[N];
  int32_t ia[N], ib[N], io[N];
  unsigned char bo[N];
  for (int i = 0; i < NA; i++)
    for (int j = 0; j < NB; j++) {
      int k = i * NB + j;
      da[k] = as[i];
      db[k] = bs[j];
      fa[k] = (float)as[i];
      fb[k] = (float)bs[j];
      ia[k] = (int32_t)(as[i] * 37) ^ 0x55; /* mixed signs and bits */
      ib[k] = (int32_t)(bs[j] * 29) - 3;
    }
  int bad = 0, checked = 0;
  for (int op = 0; op < TNK_BINARY_OP_COUNT; op++) {
    int kind = k_binary_kind[op];
    tnk_binary_args_t x = {
        .shape = {1, 0, {N}}, .op = op, .alpha = al, .ialpha = 1, .beta = be, .gamma = ga};
    if (kind == KIND_ARITH) {
      x.dtype = TNK_F32;
      x.out = (tnk_view_t){fo, TNK_F32, 0, {1}};
      x.a = (tnk_view_t){fa, TNK_F32, 0, {1}};
      x.b = (tnk_view_t){fb, TNK_F32, 0, {1}};
      tnk_binary(&x);
      x.dtype = TNK_F64;
      x.out = (tnk_view_t){dout, TNK_F64, 0, {1}};
      x.a = (tnk_view_t){da, TNK_F64, 0, {1}};
      x.b = (tnk_view_t){db, TNK_F64, 0, {1}};
      tnk_binary(&x);
      for (int k = 0; k < N; k++, checked++) {
        double w = arith_ref(op, da[k], db[k], al, be, ga);
        if (!ref_close(fo[k], w, 1e-5) || !ref_close(dout[k], w, 1e-9)) {
          printf("  binary op %d at (%g, %g): %g (f64 %.17g), want %.17g\n", op, da[k], db[k],
                 fo[k], dout[k], w);
          bad++;
        }
      }
    } else if (kind == KIND_CMP) {
      x.dtype = TNK_F32;
      x.out = (tnk_view_t){bo, TNK_BOOL, 0, {1}};
      x.a = (tnk_view_t){fa, TNK_F32, 0, {1}};
      x.b = (tnk_view_t){fb, TNK_F32, 0, {1}};
      tnk_binary(&x);
      for (int k = 0; k < N; k++, checked++) bad += bo[k] != cmp_ref(op, da[k], db[k]);
    } else {
      x.dtype = TNK_I32;
      x.out = (tnk_view_t){io, TNK_I32, 0, {1}};
      x.a = (tnk_view_t){ia, TNK_I32, 0, {1}};
      x.b = (tnk_view_t){ib, TNK_I32, 0, {1}};
      tnk_binary(&x);
      for (int k = 0; k < N; k++, checked++) bad += io[k] != (int32_t)bits_ref(op, ia[k], ib[k]);
    }
  }
  CHECK(bad == 0 && checked == TNK_BINARY_OP_COUNT * N);
}

static void test_activation_backward(void) {
  /* compare with central differences of the forward kernels */
  double xs[5] = {-2.0, -0.5, 0.1, 0.7, 1.9}, g = 1.7;
  int pairs[3][2] = {
      {TNK_GELU_BWD, TNK_GELU}, {TNK_GELU_TANH_BWD, TNK_GELU_TANH}, {TNK_SILU_BWD, TNK_SILU}};
  int bad = 0;
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 5; i++) {
      double x = xs[i], gg = g, out, hp = x + 1e-6, hm = x - 1e-6, fp, fm;
      tnk_binary_args_t b = {.shape = {0},
                             .out = {&out, TNK_F64, 0, {0}},
                             .a = {&gg, TNK_F64, 0, {0}},
                             .b = {&x, TNK_F64, 0, {0}},
                             .op = pairs[p][0],
                             .dtype = TNK_F64};
      tnk_binary(&b);
      tnk_unary_args_t u = {.shape = {0},
                            .out = {&fp, TNK_F64, 0, {0}},
                            .in = {&hp, TNK_F64, 0, {0}},
                            .op = pairs[p][1],
                            .dtype = TNK_F64};
      tnk_unary(&u);
      u.out.data = &fm;
      u.in.data = &hm;
      tnk_unary(&u);
      if (fabs(out - g * (fp - fm) / 2e-6) > 1e-5) bad++;
    }
  double y = 0.3, gg = 2.0, out;
  tnk_binary_args_t s = {.shape = {0},
                         .out = {&out, TNK_F64, 0, {0}},
                         .a = {&gg, TNK_F64, 0, {0}},
                         .b = {&y, TNK_F64, 0, {0}},
                         .op = TNK_SIGMOID_BWD,
                         .dtype = TNK_F64};
  tnk_binary(&s);
  bad += fabs(out - 2.0 * 0.3 * 0.7) > 1e-12;
  s.op = TNK_TANH_BWD;
  tnk_binary(&s);
  bad += fabs(out - 2.0 * (1 - 0.09)) > 1e-12;
  s.op = TNK_THRESHOLD_BWD;
  s.alpha = 0.5;
  tnk_binary(&s);
  bad += out != 0.0;
  CHECK(bad == 0);
}

/* ---- complex ops and classification: their rows against the references */

typedef struct ref_cx {
  double re, im;
} ref_cx_t;
static ref_cx_t ref_cx(double re, double im) { return (ref_cx_t){re, im}; }
static ref_cx_t ref_cinv(ref_cx_t z) {
  double d = z.re * z.re + z.im * z.im;
  return ref_cx(z.re / d, -z.im / d);
}
/* the principal square root, from the modulus */
static ref_cx_t ref_csqrt(double re, double im) {
  double s = sqrt((hypot(re, im) + fabs(re)) / 2);
  if (s == 0) return ref_cx(0, im);
  return re >= 0 ? ref_cx(s, im / (2 * s)) : ref_cx(fabs(im) / (2 * s), copysign(s, im));
}
#define COMPLEX_REF_CASE(ID, name, out, kernel, ref) \
  case TNK_CX_##ID: return (ref);
static ref_cx_t complex_ref(int op, double re, double im) {
  switch (op) { TNK_COMPLEX_OPS(COMPLEX_REF_CASE) }
  return ref_cx(NAN, NAN);
}

/* Every complex op on complex64 and complex128 against its reference, from
 * a strided input (every other element), abs and angle into real outputs. */
static void test_complex_unary(void) {
  enum { N = 6 };
  float z[2 * 2 * N], out[2 * N];
  double zd[2 * 2 * N], outd[2 * N];
  for (int i = 0; i < 2 * N; i++) {
    z[2 * i] = (float)(i % 4) - 1.5f;
    z[2 * i + 1] = (float)((i * 3) % 5) - 2.0f;
    zd[2 * i] = z[2 * i];
    zd[2 * i + 1] = z[2 * i + 1];
  }
  int bad = 0, checked = 0;
  for (int op = 0; op < TNK_CX_OP_COUNT; op++) {
    int real = tnk_complex_real_output(op);
    tnk_unary_args_t a = {.shape = {1, 0, {N}},
                          .out = {out, real ? TNK_F32 : TNK_C64, 0, {1}},
                          .in = {z, TNK_C64, 0, {2}},
                          .op = op,
                          .dtype = TNK_C64};
    CHECK(tnk_complex_unary_supported(op, TNK_C64, a.out.dtype));
    CHECK(!tnk_complex_unary_supported(op, TNK_C64, real ? TNK_C64 : TNK_F32));
    tnk_complex_unary(&a);
    tnk_unary_args_t d = a;
    d.out = (tnk_view_t){outd, real ? TNK_F64 : TNK_C128, 0, {1}};
    d.in = (tnk_view_t){zd, TNK_C128, 0, {2}};
    d.dtype = TNK_C128;
    tnk_complex_unary(&d);
    for (int i = 0; i < N; i++, checked++) {
      ref_cx_t w = complex_ref(op, zd[4 * i], zd[4 * i + 1]);
      double g_re = real ? out[i] : out[2 * i], g_im = real ? 0 : out[2 * i + 1];
      double d_re = real ? outd[i] : outd[2 * i], d_im = real ? 0 : outd[2 * i + 1];
      if (!ref_close(g_re, w.re, 1e-5) || !ref_close(g_im, w.im, 1e-5) ||
          !ref_close(d_re, w.re, 1e-12) || !ref_close(d_im, w.im, 1e-12)) {
        printf("  complex op %d at (%g, %g): (%g, %g) (c128 (%.17g, %.17g)), want (%.17g, %.17g)\n",
               op, zd[4 * i], zd[4 * i + 1], g_re, g_im, d_re, d_im, w.re, w.im);
        bad++;
      }
    }
  }
  CHECK(bad == 0 && checked == TNK_CX_OP_COUNT * N);
  CHECK(!tnk_complex_unary_supported(TNK_CX_EXP, TNK_F32, TNK_F32));
}

#define CLASSIFY_REF_CASE(ID, name, kernel, ref) \
  case TNK_##ID: return (ref);
static int classify_ref(int op, double v) {
  switch (op) { TNK_CLASSIFY_OPS(CLASSIFY_REF_CASE) }
  return -1;
}

/* Every classification op over the special values, fp32, fp64, bf16 and
 * fp16, against its reference */
static void test_classify(void) {
  const double vals[] = {0.0, -0.0, 1.5, -2.0, INFINITY, -INFINITY, NAN, -NAN, 1e-310, -1e-40};
  enum { N = sizeof vals / sizeof *vals };
  const int dts[] = {TNK_F64, TNK_F32, TNK_BF16, TNK_F16};
  unsigned char in[N * 8];
  uint8_t out[N];
  int bad = 0, checked = 0;
  for (int t = 0; t < 4; t++) {
    int dt = dts[t];
    for (int i = 0; i < N; i++) tnk_stf(in, dt, i, vals[i]);
    for (int op = 0; op < TNK_CLASSIFY_OP_COUNT; op++) {
      tnk_unary_args_t u = {.shape = {1, 0, {N}},
                            .out = {out, TNK_BOOL, 0, {1}},
                            .in = {in, dt, 0, {1}},
                            .op = op,
                            .dtype = dt};
      tnk_classify(&u);
      for (int i = 0; i < N; i++, checked++)
        bad += out[i] != classify_ref(op, tnk_ldf(in, dt, i)); /* the value as stored */
    }
  }
  CHECK(bad == 0 && checked == 4 * TNK_CLASSIFY_OP_COUNT * N);
}

/* The streaming copy: every head/tail alignment and length around the
 * 64- and 256-byte steps copies exactly, and writes nothing outside. */
static void test_copy_stream(void) {
  if (!(tnk_cpu_features() & TNK_ISA_AVX512)) return;
  enum { B = 1200 };
  tnk_config_t cfg;
  if (tnk_config_for_isa(TNK_ISA_AVX512, &cfg) != 0) return;
  unsigned char *src = malloc(B), *dst = malloc(B + 64);
  for (int i = 0; i < B; i++) src[i] = (unsigned char)(i * 7 + 3);
  int bad = 0;
  for (int off = 0; off < 64; off += 7)
    for (int len = 0; len < B - 64; len += 61) {
      memset(dst, 0xEE, B + 64);
      cfg.vmath.copy_stream(dst + off, src + (off * 3) % 64, len);
      bad += memcmp(dst + off, src + (off * 3) % 64, (size_t)len) != 0;
      for (int i = 0; i < off; i++) bad += dst[i] != 0xEE;
      for (int i = off + len; i < B + 64; i++) bad += dst[i] != 0xEE;
    }
  CHECK(bad == 0);
  free(src);
  free(dst);
}

/* The binary kernel reads an inline scalar operand from its descriptor
 * (inline_operand), wherever the descriptor was copied to. */
static void test_binary_inline_operand(void) {
  float x[4] = {1, 2, 3, 4}, out[4] = {0};
  tnk_binary_args_t a;
  memset(&a, 0, sizeof a);
  a.shape.ndim = 1;
  a.shape.sizes[0] = 4;
  a.out = (tnk_view_t){out, TNK_F32, 0, {1}};
  a.a = (tnk_view_t){x, TNK_F32, 0, {1}};
  a.b = (tnk_view_t){NULL, TNK_F32, 0, {0}};
  a.op = TNK_MUL;
  a.dtype = TNK_F32;
  a.alpha = 1;
  a.inline_operand = 2;
  float three = 3;
  memcpy(a.inline_value, &three, sizeof three);
  tnk_binary_args_t moved = a; /* as a launch copies it */
  memset(&a, 0xff, sizeof a);
  tnk_binary(&moved);
  for (int i = 0; i < 4; i++) CHECK(out[i] == x[i] * 3);
}

/* Dense views laid out in any dimension order (transposed, permuted,
 * channels-last), sizes that leave partial tiles, and a broadcast: the
 * element-wise drivers order the dimensions by memory and tile transposing
 * copies; every element against a loop over the logical indices. */
static void strides_for(int nd, const int64_t *sizes, const int *order, int64_t *strides) {
  int64_t st = 1; /* order[0] outermost in memory */
  for (int j = nd - 1; j >= 0; j--) strides[order[j]] = st, st *= sizes[order[j]];
}

static void test_any_layout(void) {
  static const int64_t pick[] = {1, 3, 33, 70, 131};
  uint32_t seed = 11;
  int bad = 0;
  for (int trial = 0; trial < 60; trial++) {
    int nd = 2 + trial % 3;
    int64_t sizes[4], n = 1;
    for (int d = 0; d < nd; d++) {
      seed = seed * 1664525u + 1013904223u;
      sizes[d] = pick[(seed >> 24) % 5];
      if (nd == 4 && sizes[d] > 33) sizes[d] = 33;
      n *= sizes[d];
    }
    int order[3][4];
    int64_t st[3][4];
    for (int v = 0; v < 3; v++) {
      for (int d = 0; d < nd; d++) order[v][d] = d;
      for (int d = nd - 1; d > 0; d--) { /* a random permutation */
        seed = seed * 1664525u + 1013904223u;
        int j = (int)((seed >> 16) % (uint32_t)(d + 1)), t = order[v][d];
        order[v][d] = order[v][j], order[v][j] = t;
      }
      strides_for(nd, sizes, order[v], st[v]);
    }
    int bcast = trial % 4 == 3; /* b broadcast along dimension 0 */
    if (bcast) st[2][0] = 0;
    float *a = malloc(n * 4), *b = malloc(n * 4), *out = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    for (int64_t i = 0; i < n; i++) a[i] = (float)(i % 1000) - 500, b[i] = (float)(i % 77) * 0.25f;
    tnk_binary_args_t x = {.shape = {nd, 0, {0}}, .op = TNK_ADD, .dtype = TNK_F32, .alpha = 1};
    tnk_copy_args_t c = {.shape = {nd, 0, {0}}};
    x.out = (tnk_view_t){out, TNK_F32, 0, {0}};
    x.a = (tnk_view_t){a, TNK_F32, 0, {0}};
    x.b = (tnk_view_t){b, TNK_F32, 0, {0}};
    c.dst = (tnk_view_t){h, TNK_BF16, 0, {0}};
    c.src = (tnk_view_t){a, TNK_F32, 0, {0}};
    for (int d = 0; d < nd; d++) {
      x.shape.sizes[d] = c.shape.sizes[d] = sizes[d];
      x.out.strides[d] = st[0][d], x.a.strides[d] = st[1][d], x.b.strides[d] = st[2][d];
      c.dst.strides[d] = st[0][d], c.src.strides[d] = st[1][d];
    }
    tnk_binary(&x);
    tnk_copy(&c);
    int64_t idx[4] = {0};
    for (int64_t i = 0; i < n; i++) {
      int64_t oo = 0, oa = 0, ob = 0;
      for (int d = 0; d < nd; d++)
        oo += idx[d] * st[0][d], oa += idx[d] * st[1][d], ob += idx[d] * st[2][d];
      bad += out[oo] != a[oa] + b[ob];
      bad += h[oo] != tnk_f32_to_bf16(a[oa]);
      for (int d = nd - 1; d >= 0 && ++idx[d] == sizes[d]; d--) idx[d] = 0;
    }
    free(a), free(b), free(out), free(h);
  }
  CHECK(bad == 0);
}

int main(void) {
  RUN(test_half_conversions);
  RUN(test_copy_strided_cast);
  RUN(test_fill);
  RUN(test_binary);
  RUN(test_vmath);
  RUN(test_unary);
  RUN(test_binary_ops);
  RUN(test_activation_backward);
  RUN(test_complex_unary);
  RUN(test_classify);
  RUN(test_copy_stream);
  RUN(test_binary_inline_operand);
  RUN(test_any_layout);
  return REPORT("test_eltwise");
}
