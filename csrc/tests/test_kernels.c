/* Tests of the kernel library against independent references. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "tnk.h"
#include "kernel_list.h"
#include "provider.h"
#include "vmath.h"
#include "dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_philox_known_answers(void) {
  /* Known-answer vectors of Philox4x32-10 (Salmon et al., Random123). */
  uint32_t out[4];
  uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  tnk_philox(c0, k0, out);
  CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu &&
        out[3] == 0x9b00dbd8u);
  uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
           k1[2] = {0xffffffffu, 0xffffffffu};
  tnk_philox(c1, k1, out);
  CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u &&
        out[3] == 0x6d5451fdu);
  uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
           k2[2] = {0xa4093822u, 0x299f31d0u};
  tnk_philox(c2, k2, out);
  CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u &&
        out[3] == 0x24126ea1u);
}

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

/* A "pool" that splits ranges into odd-sized chunks, to show results do not
 * depend on how work is divided. */
static void odd_parallel(int64_t n, int64_t grain, tnk_range_fn fn, void *c) {
  for (int64_t b = 0; b < n; b += 7) fn(c, b, b + 7 < n ? b + 7 : n);
}

static void test_random(void) {
  enum { N = 200000 };
  static float x[N], y[N];
  tnk_random_args_t a = {.shape = {1, 0, {N}},
                         .dst = {x, TNK_F32, 0, {1}},
                         .kind = TNK_RAND_NORMAL,
                         .seed = 42,
                         .offset = 7,
                         .lo = 1.0,
                         .hi = 2.0};
  tnk_random(&a);
  tnk_set_parallel(odd_parallel);
  a.dst.data = y;
  tnk_random(&a);
  tnk_set_parallel(NULL);
  CHECK(memcmp(x, y, sizeof x) == 0);
  double mean = 0, var = 0;
  for (int i = 0; i < N; i++) mean += x[i];
  mean /= N;
  for (int i = 0; i < N; i++) var += (x[i] - mean) * (x[i] - mean);
  var /= N;
  CHECK(fabs(mean - 1.0) < 0.02 && fabs(sqrt(var) - 2.0) < 0.02);
  a.offset = 8; /* another offset: another stream of numbers */
  tnk_random(&a);
  CHECK(memcmp(x, y, sizeof x) != 0);
  /* uniform in [lo, hi) even after rounding to bf16 */
  static uint16_t b[N];
  tnk_random_args_t u = {.shape = {1, 0, {N}},
                         .dst = {b, TNK_BF16, 0, {1}},
                         .kind = TNK_RAND_UNIFORM,
                         .seed = 1,
                         .lo = 0,
                         .hi = 1};
  tnk_random(&u);
  int in_range = 1;
  for (int i = 0; i < N; i++) {
    float f = tnk_bf16_to_f32(b[i]);
    in_range &= f >= 0.0f && f < 1.0f;
  }
  CHECK(in_range);
  /* integers in [3, 10) hit every value */
  static int64_t r[N];
  tnk_random_args_t ri = {.shape = {1, 0, {N}},
                          .dst = {r, TNK_I64, 0, {1}},
                          .kind = TNK_RAND_INT,
                          .seed = 5,
                          .ilo = 3,
                          .irange = 7};
  tnk_random(&ri);
  int seen[7] = {0}, ok = 1;
  for (int i = 0; i < N; i++) {
    ok &= r[i] >= 3 && r[i] < 10;
    if (ok) seen[r[i] - 3] = 1;
  }
  for (int i = 0; i < 7; i++) ok &= seen[i];
  CHECK(ok);
  /* bernoulli with a per-element probability of 0 or 1 is exact */
  static float p[1000], out[1000];
  for (int i = 0; i < 1000; i++) p[i] = (float)(i % 2);
  tnk_random_args_t be = {.shape = {1, 0, {1000}},
                          .dst = {out, TNK_F32, 0, {1}},
                          .prob = {p, TNK_F32, 0, {1}},
                          .kind = TNK_RAND_BERNOULLI,
                          .has_prob = 1,
                          .seed = 3};
  tnk_random(&be);
  ok = 1;
  for (int i = 0; i < 1000; i++) ok &= out[i] == p[i];
  CHECK(ok);
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

/* Every GEMM variant the CPU has against the reference, over shapes that
 * hit the small path, the packed path, edges and transposed operands. */
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

/* Fused attention against a naive softmax(q k^T s) v, with a causal mask,
 * grouped heads and lengths that are not multiples of the 128 tiles; the
 * backward is checked against central differences of a weighted sum. */
static double naive_attention_loss(const float *q, const float *k, const float *v, const float *w,
                                   int H, int HK, int LQ, int LK, int E, float scale, float *o) {
  double loss = 0;
  for (int h = 0; h < H; h++) {
    int kh = h / (H / HK);
    for (int i = 0; i < LQ; i++) {
      double s[200], mx = -1e300, sum = 0;
      for (int j = 0; j < LK; j++) {
        double d = 0;
        for (int e = 0; e < E; e++) d += q[(h * LQ + i) * E + e] * k[(kh * LK + j) * E + e];
        s[j] = j <= i ? d * scale : -INFINITY;
        if (s[j] > mx) mx = s[j];
      }
      for (int j = 0; j < LK; j++) sum += s[j] = exp(s[j] - mx);
      for (int e = 0; e < E; e++) {
        double acc = 0;
        for (int j = 0; j < LK; j++) acc += s[j] / sum * v[(kh * LK + j) * E + e];
        if (o) o[(h * LQ + i) * E + e] = (float)acc;
        loss += acc * w[(h * LQ + i) * E + e];
      }
    }
  }
  return loss;
}

static void test_attention(void) {
  enum { H = 4, HK = 2, LQ = 70, LK = 70, E = 8 };
  static float q[H * LQ * E], k[HK * LK * E], v[HK * LK * E], w[H * LQ * E], o[H * LQ * E],
      ref[H * LQ * E], lse[H * LQ], gq[H * LQ * E], gk[HK * LK * E], gv[HK * LK * E];
  for (int i = 0; i < H * LQ * E; i++) {
    q[i] = (float)((i * 37 % 23) - 11) / 11.0f;
    w[i] = (float)((i * 13 % 7) - 3) / 3.0f;
  }
  for (int i = 0; i < HK * LK * E; i++) {
    k[i] = (float)((i * 29 % 19) - 9) / 9.0f;
    v[i] = (float)((i * 11 % 17) - 8) / 8.0f;
  }
  float scale = 0.35f;
  tnk_sdpa_args_t a = {.batch = 1,
                       .heads = H,
                       .kv_heads = HK,
                       .lq = LQ,
                       .lk = LK,
                       .e = E,
                       .ev = E,
                       .q = q,
                       .k = k,
                       .v = v,
                       .go = w,
                       .o = o,
                       .lse = lse,
                       .gq = gq,
                       .gk = gk,
                       .gv = gv,
                       .causal = 1,
                       .scale = scale};
  int64_t sq[3] = {H * LQ * E, LQ * E, E}, sk[3] = {HK * LK * E, LK * E, E};
  memcpy(a.sq, sq, sizeof sq);
  memcpy(a.so, sq, sizeof sq);
  memcpy(a.sgo, sq, sizeof sq);
  memcpy(a.sgq, sq, sizeof sq);
  memcpy(a.sk, sk, sizeof sk);
  memcpy(a.sv, sk, sizeof sk);
  memcpy(a.sgk, sk, sizeof sk);
  memcpy(a.sgv, sk, sizeof sk);
  tnk_sdpa_forward(&a);
  naive_attention_loss(q, k, v, w, H, HK, LQ, LK, E, scale, ref);
  int bad = 0;
  for (int i = 0; i < H * LQ * E; i++) bad += fabsf(o[i] - ref[i]) > 1e-5f;
  CHECK(bad == 0);
  tnk_sdpa_backward(&a);
  /* spot-check gradients by central differences */
  float *params[3] = {q, k, v}, *grads[3] = {gq, gk, gv};
  int sizes[3] = {H * LQ * E, HK * LK * E, HK * LK * E};
  for (int t = 0; t < 3; t++)
    for (int idx = 3; idx < sizes[t]; idx += sizes[t] / 7) {
      float keep = params[t][idx], eps = 1e-2f;
      params[t][idx] = keep + eps;
      double up = naive_attention_loss(q, k, v, w, H, HK, LQ, LK, E, scale, NULL);
      params[t][idx] = keep - eps;
      double down = naive_attention_loss(q, k, v, w, H, HK, LQ, LK, E, scale, NULL);
      params[t][idx] = keep;
      double fd = (up - down) / (2 * eps);
      if (fabs(fd - grads[t][idx]) > 2e-3 * (1 + fabs(fd))) bad++;
    }
  CHECK(bad == 0);
}

/* 3-D im2col against a direct gather, and col2im as its adjoint:
 * <col2im(y), x> == <y, im2col(x)> for any x, y. */
static void test_im2col_3d(void) {
  tnk_im2col_args_t a = {.batch = 2,
                         .c = 3,
                         .d = 4,
                         .h = 5,
                         .w = 6,
                         .kd = 2,
                         .kh = 3,
                         .kw = 2,
                         .sd = 1,
                         .sh = 2,
                         .sw = 1,
                         .pd = 1,
                         .ph = 1,
                         .pw = 0,
                         .dd = 2,
                         .dh = 1,
                         .dw = 2,
                         .dtype = TNK_F32};
  a.od = (a.d + 2 * a.pd - a.dd * (a.kd - 1) - 1) / a.sd + 1;
  a.oh = (a.h + 2 * a.ph - a.dh * (a.kh - 1) - 1) / a.sh + 1;
  a.ow = (a.w + 2 * a.pw - a.dw * (a.kw - 1) - 1) / a.sw + 1;
  int64_t planes = a.batch * a.c, vol = a.d * a.h * a.w, kk = a.kd * a.kh * a.kw;
  int64_t L = a.od * a.oh * a.ow, ncol = planes * kk * L;
  float *x = malloc(sizeof(float) * planes * vol), *col = malloc(sizeof(float) * ncol);
  float *y = malloc(sizeof(float) * ncol), *back = calloc(planes * vol, sizeof(float));
  for (int64_t i = 0; i < planes * vol; i++) x[i] = (float)((i * 37 % 101) - 50) / 25.0f;
  for (int64_t i = 0; i < ncol; i++) y[i] = (float)((i * 13 % 29) - 14) / 7.0f;
  a.im = x;
  a.col = col;
  tnk_im2col(&a);
  int bad = 0;
  for (int64_t r = 0; r < planes * kk; r++) {
    int64_t pl = r / kk, kz = r % kk / (a.kh * a.kw), ky = r % (a.kh * a.kw) / a.kw, kx = r % a.kw;
    for (int64_t oz = 0; oz < a.od; oz++)
      for (int64_t oy = 0; oy < a.oh; oy++)
        for (int64_t ox = 0; ox < a.ow; ox++) {
          int64_t iz = oz * a.sd - a.pd + kz * a.dd, iy = oy * a.sh - a.ph + ky * a.dh,
                  ix = ox * a.sw - a.pw + kx * a.dw;
          int inside = iz >= 0 && iz < a.d && iy >= 0 && iy < a.h && ix >= 0 && ix < a.w;
          float want = inside ? x[pl * vol + (iz * a.h + iy) * a.w + ix] : 0.0f;
          if (col[r * L + (oz * a.oh + oy) * a.ow + ox] != want) bad++;
        }
  }
  CHECK(bad == 0);
  a.col2im = 1;
  a.im = back;
  a.col = y;
  tnk_im2col(&a);
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < planes * vol; i++) lhs += (double)back[i] * x[i];
  for (int64_t i = 0; i < ncol; i++) rhs += (double)y[i] * col[i];
  CHECK(fabs(lhs - rhs) < 1e-3 * (1 + fabs(rhs)));
  free(x);
  free(col);
  free(y);
  free(back);
}

static void test_gemm_variants(void) {
  static const int64_t shapes[][3] = {
      {1, 1, 1},      {5, 7, 3},      {6, 16, 8},      {13, 33, 17}, {64, 64, 64},
      {100, 70, 300}, {130, 257, 40}, {1, 300, 260},   {3, 50, 37},  {4, 600, 64},
      {37, 45, 531},  {300, 700, 37}, {260, 530, 600}, /* column split */
      {23, 40, 50},   {10, 32, 9},    {66, 64, 33}};   /* 4-row tiles past the full ones */
  tnk_config_t cfg[4];
  int have[4];
  for (int v = 0; v < 3; v++) have[v] = tnk_config_for_isa(v, &cfg[v]) == 0;
  /* the widest variant with its blocking fitted to small caches (256 KiB
   * L2, 2 MiB L3): several A blocks and B panels on the larger shapes */
  cfg[3] = cfg[have[2] ? 2 : 1];
  have[3] = have[2] || have[1];
  tnk_fit_gemm_to_caches(&cfg[3].gemm, 256 << 10, 2 << 20);
  if (have[3]) CHECK(cfg[3].gemm.mc < cfg[have[2] ? 2 : 1].gemm.mc && cfg[3].gemm.nc <= 512);
  int bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    for (int trans = 0; trans < 4; trans++) {
      float *A = malloc(sizeof(float) * m * k), *B = malloc(sizeof(float) * k * n);
      float *C0 = malloc(sizeof(float) * m * n), *C1 = malloc(sizeof(float) * m * n);
      for (int64_t i = 0; i < m * k; i++) A[i] = (float)((i * 7 % 13) - 6) / 7.0f;
      for (int64_t i = 0; i < k * n; i++) B[i] = (float)((i * 5 % 11) - 5) / 5.0f;
      tnk_gemm_args_t g = {.batch = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = A,
                           .b = B,
                           .dtype = TNK_F32,
                           .alpha = 1.5,
                           .beta = 0.5,
                           .sc_r = n,
                           .sc_c = 1};
      /* alpha and beta per layout: the full tiles' direct paths (alpha 1
       * with beta 0 or 1) and scaled epilogues with beta 0 and 1 */
      static const double ab[4][2] = {{1.5, 0.5}, {1.0, 1.0}, {0.5, 0.0}, {0.5, 1.0}};
      g.alpha = ab[trans][0];
      g.beta = ab[trans][1];
      /* trans bit 0: A stored column-major; bit 1: B stored column-major */
      g.sa_r = trans & 1 ? 1 : k;
      g.sa_c = trans & 1 ? m : 1;
      g.sb_r = trans & 2 ? 1 : n;
      g.sb_c = trans & 2 ? k : 1;
      for (int64_t i = 0; i < m * n; i++) C0[i] = (float)(i % 3);
      memcpy(C1, C0, sizeof(float) * m * n);
      g.c = C0;
      tnk_gemm_with(&cfg[0], &g);
      for (int v = 1; v < 4; v++) {
        if (!have[v]) continue;
        float *Cv = malloc(sizeof(float) * m * n);
        memcpy(Cv, C1, sizeof(float) * m * n);
        g.c = Cv;
        tnk_gemm_with(&cfg[v], &g);
        for (int64_t i = 0; i < m * n; i++)
          if (fabsf(Cv[i] - C0[i]) > 1e-4f * (1.0f + fabsf(C0[i]))) bad++;
        free(Cv);
      }
      /* independent check of one element against a plain sum */
      double want = g.beta * (double)((((m - 1) * n + (n - 1)) % 3));
      double dot = 0;
      for (int64_t kk = 0; kk < k; kk++)
        dot += (double)A[(m - 1) * g.sa_r + kk * g.sa_c] * B[kk * g.sb_r + (n - 1) * g.sb_c];
      want += g.alpha * dot;
      if (fabs(C0[m * n - 1] - want) > 1e-3 * (1 + fabs(want))) bad++;
      free(A);
      free(B);
      free(C0);
      free(C1);
    }
  }
  CHECK(bad == 0);
  /* bf16 inputs accumulate in fp32; beta = 0 ignores NaN in C */
  uint16_t a2[4], b2[4], c2[4];
  for (int i = 0; i < 4; i++) {
    a2[i] = tnk_f32_to_bf16((float)(i + 1));
    b2[i] = tnk_f32_to_bf16((float)(4 - i));
    c2[i] = tnk_f32_to_bf16(NAN);
  }
  tnk_gemm_args_t h = {.batch = 1,
                       .m = 2,
                       .n = 2,
                       .k = 2,
                       .a = a2,
                       .b = b2,
                       .c = c2,
                       .sa_r = 2,
                       .sa_c = 1,
                       .sb_r = 2,
                       .sb_c = 1,
                       .sc_r = 2,
                       .sc_c = 1,
                       .dtype = TNK_BF16,
                       .alpha = 1,
                       .beta = 0};
  tnk_gemm(&h);
  /* [[1,2],[3,4]] @ [[4,3],[2,1]] = [[8,5],[20,13]] */
  CHECK(tnk_bf16_to_f32(c2[0]) == 8 && tnk_bf16_to_f32(c2[1]) == 5 &&
        tnk_bf16_to_f32(c2[2]) == 20 && tnk_bf16_to_f32(c2[3]) == 13);
}

static void test_unary(void) {
  /* each op on f32 and bf16 against a double-precision formula */
  float x[7] = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.5f}, out[7];
  uint16_t xb[7], ob[7];
  for (int i = 0; i < 7; i++) xb[i] = tnk_f32_to_bf16(x[i]);
  int bad = 0;
  for (int op = 0; op < TNK_UNARY_OP_COUNT; op++) {
    tnk_unary_args_t a = {.shape = {1, 0, {7}},
                          .out = {out, TNK_F32, 0, {1}},
                          .in = {x, TNK_F32, 0, {1}},
                          .op = op,
                          .dtype = TNK_F32,
                          .p0 = 2.0,
                          .p1 = 3.0,
                          .p2 = 0.5};
    tnk_unary(&a);
    tnk_unary_args_t b = a;
    b.out = (tnk_view_t){ob, TNK_BF16, 0, {1}};
    b.in = (tnk_view_t){xb, TNK_BF16, 0, {1}};
    b.dtype = TNK_BF16;
    tnk_unary(&b);
    for (int i = 0; i < 7; i++) {
      double v = x[i], w;
      switch (op) {
        case TNK_EXP: w = exp(v); break;
        case TNK_LOG: w = log(v); break;
        case TNK_LOG1P: w = log1p(v); break;
        case TNK_EXPM1: w = expm1(v); break;
        case TNK_TANH: w = tanh(v); break;
        case TNK_SIGMOID: w = 1 / (1 + exp(-v)); break;
        case TNK_GELU: w = 0.5 * v * (1 + erf(v / sqrt(2.0))); break;
        case TNK_GELU_TANH:
          w = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
          break;
        case TNK_SILU: w = v / (1 + exp(-v)); break;
        case TNK_RELU: w = v > 0 ? v : 0; break;
        case TNK_RSQRT: w = 1 / sqrt(v); break;
        case TNK_SQRT: w = sqrt(v); break;
        case TNK_NEG: w = -v; break;
        case TNK_ABS: w = fabs(v); break;
        case TNK_SIN: w = sin(v); break;
        case TNK_COS: w = cos(v); break;
        case TNK_ERF: w = erf(v); break;
        case TNK_RECIPROCAL: w = 1 / v; break;
        case TNK_CEIL: w = ceil(v); break;
        case TNK_FLOOR: w = floor(v); break;
        case TNK_TRUNC: w = trunc(v); break;
        case TNK_ROUND: w = nearbyint(v); break; /* half to even */
        case TNK_ATAN: w = atan(v); break;
        case TNK_ASIN: w = asin(v); break;
        case TNK_ACOS: w = acos(v); break;
        case TNK_TAN: w = tan(v); break;
        case TNK_SINH: w = sinh(v); break;
        case TNK_COSH: w = cosh(v); break;
        case TNK_ASINH: w = asinh(v); break;
        case TNK_ACOSH: w = acosh(v); break;
        case TNK_ATANH: w = atanh(v); break;
        case TNK_EXP2: w = exp2(v); break;
        case TNK_LOG2: w = log2(v); break;
        case TNK_LOG10: w = log10(v); break;
        case TNK_FRAC: w = v - trunc(v); break;
        /* erf(erfinv(v)) == v: checked through erf below */
        case TNK_ERFINV: w = fabs(v) < 1 ? v : fabs(v) == 1 ? copysign(INFINITY, v) : NAN; break;
        case TNK_MISH: w = v * tanh(log1p(exp(v))); break;
        case TNK_HARDSWISH: w = v * fmin(fmax(v + 3, 0), 6) / 6; break;
        case TNK_HARDSIGMOID: w = fmin(fmax(v + 3, 0), 6) / 6; break;
        case TNK_LEAKY_RELU: w = v > 0 ? v : 2.0 * v; break;
        case TNK_HARDTANH: w = fmin(fmax(v, 2.0), 3.0); break;
        case TNK_ELU: w = v <= 0 ? expm1(v * 0.5) * 2.0 * 3.0 : v * 3.0; break;
        case TNK_LOGIT: w = NAN; break; /* eps 2 clamps to [2, -1]: log(-2) */
        case TNK_NAN_TO_NUM: w = v; break;
        case TNK_ERFC: w = erfc(v); break;
        case TNK_LGAMMA: w = lgamma(v); break;
        case TNK_DIGAMMA: /* the derivative of lgamma, by central difference */
          w = v <= 0 && v == trunc(v) ? (v == 0 ? -INFINITY : NAN)
                                      : (lgamma(v + 1e-6) - lgamma(v - 1e-6)) / 2e-6;
          break;
        case TNK_SINC: w = v == 0 ? 1 : sin(M_PI * v) / (M_PI * v); break;
        default: w = pow(v, 2.0); break;
      }
      double got = out[i], gotb = tnk_bf16_to_f32(ob[i]);
      if (op == TNK_ERFINV && fabs(v) < 1) {
        got = erf(got);
        gotb = erf(gotb);
      }
      if (isnan(w)) {
        bad += !isnan(got) + !isnan(gotb);
        continue;
      }
      if (isinf(w)) {
        bad += got != (float)w;
        continue;
      }
      if (fabs(got - w) > 1e-5 * (1 + fabs(w)) || fabs(gotb - w) > 2e-2 * (1 + fabs(w))) {
        printf("  unary op %d at %g: %g (bf16 %g), want %g\n", op, v, got, gotb, w);
        bad++;
      }
    }
  }
  CHECK(bad == 0);
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

static void test_ternary_softmax_reduce_layernorm(void) {
  int bad = 0;
  /* addcmul / addcdiv / lerp: contiguous fast path and broadcast path */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {6, 5, 4, 3, 2, 1}, c[6] = {1, 2, 1, 2, 1, 2}, o[6];
  for (int op = 0; op < TNK_TERNARY_OP_COUNT; op++)
    for (int bc = 0; bc < 2; bc++) {
      tnk_ternary_args_t t = {.shape = {2, 0, {2, 3}},
                              .out = {o, TNK_F32, 0, {3, 1}},
                              .a = {a, TNK_F32, 0, {3, 1}},
                              .b = {b, TNK_F32, 0, {3, 1}},
                              .c = {c, TNK_F32, 0, {bc ? 0 : 3, 1}},
                              .op = op,
                              .dtype = TNK_F32,
                              .value = 0.25};
      tnk_ternary(&t);
      for (int i = 0; i < 6; i++) {
        float cv = c[bc ? i % 3 : i];
        float w = op == TNK_ADDCMUL   ? a[i] + 0.25f * b[i] * cv
                  : op == TNK_ADDCDIV ? a[i] + 0.25f * (b[i] / cv)
                  : op == TNK_LERP_TENSOR /* the weight from c, ATen's two halves */
                      ? (cv < 0.5f ? a[i] + cv * (b[i] - a[i]) : b[i] - (b[i] - a[i]) * (1 - cv))
                      : a[i] + 0.25f * (b[i] - a[i]);
        bad += fabsf(o[i] - w) > 1e-6f;
      }
    }
  /* softmax over the middle dim of (2, 3, 2), then its backward */
  float x[12], y[12], gy[12], gx[12];
  for (int i = 0; i < 12; i++) {
    x[i] = (float)(i % 5) - 2;
    gy[i] = (float)(i % 3);
  }
  tnk_softmax_args_t sm = {
      .out = y, .in = x, .outer = 2, .len = 3, .inner = 2, .dtype = TNK_F32, .out_dtype = TNK_F32};
  tnk_softmax(&sm);
  for (int o2 = 0; o2 < 2; o2++)
    for (int i2 = 0; i2 < 2; i2++) {
      double s = 0, dot = 0;
      for (int k = 0; k < 3; k++) s += exp(x[o2 * 6 + k * 2 + i2]);
      for (int k = 0; k < 3; k++) {
        double want = exp(x[o2 * 6 + k * 2 + i2]) / s;
        bad += fabs(y[o2 * 6 + k * 2 + i2] - want) > 1e-6;
        dot += gy[o2 * 6 + k * 2 + i2] * want;
      }
      tnk_softmax_args_t bw = {.out = gx,
                               .in = y,
                               .grad = gy,
                               .outer = 2,
                               .len = 3,
                               .inner = 2,
                               .dtype = TNK_F32,
                               .out_dtype = TNK_F32,
                               .backward = 1};
      tnk_softmax(&bw);
      for (int k = 0; k < 3; k++) {
        int idx = o2 * 6 + k * 2 + i2;
        bad += fabs(gx[idx] - y[idx] * (gy[idx] - dot)) > 1e-5;
      }
    }
  /* sum over dim 1 of a (2, 3, 2) int32 tensor into int64 */
  int32_t xi[12];
  int64_t so[4];
  for (int i = 0; i < 12; i++) xi[i] = i;
  tnk_reduce_args_t r = {.shape = {3, 0, {2, 3, 2}},
                         .out = {so, TNK_I64, 0, {2, 0, 1}},
                         .in = {xi, TNK_I32, 0, {6, 2, 1}},
                         .reduced = {0, 1, 0},
                         .op = TNK_SUM};
  tnk_reduce(&r);
  bad += so[0] != 0 + 2 + 4 || so[1] != 1 + 3 + 5 || so[2] != 6 + 8 + 10 || so[3] != 7 + 9 + 11;
  /* layer norm, forward and backward, with and without weight and bias,
   * against the formulas in double (rows of 37: no multiple of a vector) */
  enum { LR = 3, LN = 37 };
  float lx[LR * LN], lw[LN], lbias[LN], lg[LR * LN], ly[LR * LN], mean[LR], rstd[LR];
  float lgx[LR * LN], lgw[LN], lgb[LN];
  for (int i = 0; i < LR * LN; i++) {
    lx[i] = (float)((i * 37) % 23) * 0.37f - 3.0f + (float)(i / LN) * 10.0f;
    lg[i] = (float)((i * 11) % 7) - 2.5f;
  }
  for (int j = 0; j < LN; j++) {
    lw[j] = 0.5f + (float)(j % 5) * 0.25f;
    lbias[j] = (float)(j % 3) - 1.0f;
  }
  for (int affine = 0; affine < 2; affine++) {
    tnk_layer_norm_args_t ln = {.rows = LR,
                                .n = LN,
                                .dtype = TNK_F32,
                                .eps = 1e-5,
                                .x = lx,
                                .w = affine ? lw : NULL,
                                .b = affine ? lbias : NULL,
                                .y = ly,
                                .mean = mean,
                                .rstd = rstd};
    tnk_layer_norm(&ln);
    tnk_layer_norm_args_t lb = ln;
    lb.backward = 1;
    lb.y = NULL;
    lb.g = lg;
    lb.gx = lgx;
    lb.gw = affine ? lgw : NULL;
    lb.gb = affine ? lgb : NULL;
    tnk_layer_norm(&lb);
    double rgw[LN] = {0}, rgb[LN] = {0};
    for (int rr = 0; rr < LR; rr++) {
      const float *x = lx + rr * LN, *g = lg + rr * LN;
      double m = 0, v = 0;
      for (int j = 0; j < LN; j++) m += x[j];
      m /= LN;
      for (int j = 0; j < LN; j++) v += (x[j] - m) * (x[j] - m);
      double rs = 1.0 / sqrt(v / LN + 1e-5), xh[LN], sg = 0, sgx = 0;
      bad += fabs(mean[rr] - m) > 1e-5 || fabs(rstd[rr] - rs) > 1e-5 * rs;
      for (int j = 0; j < LN; j++) {
        xh[j] = (x[j] - m) * rs;
        double w = affine ? lw[j] : 1.0, b = affine ? lbias[j] : 0.0;
        bad += fabs(ly[rr * LN + j] - (xh[j] * w + b)) > 1e-5;
        double gh = g[j] * w;
        sg += gh;
        sgx += gh * xh[j];
        rgw[j] += g[j] * xh[j];
        rgb[j] += g[j];
      }
      for (int j = 0; j < LN; j++) {
        double w = affine ? lw[j] : 1.0;
        double want = rs * (g[j] * w - sg / LN - xh[j] * sgx / LN);
        bad += fabs(lgx[rr * LN + j] - want) > 1e-4 * (1 + fabs(want));
      }
    }
    for (int j = 0; j < LN && affine; j++)
      bad += fabs(lgw[j] - rgw[j]) > 1e-4 * (1 + fabs(rgw[j])) ||
             fabs(lgb[j] - rgb[j]) > 1e-4 * (1 + fabs(rgb[j]));
  }
  CHECK(bad == 0);
}

static void test_pool_upsample(void) {
  /* 4x5 plane: max 2x2 stride 2 with padding 1, avg and bilinear; backward
   * passes conserve the gradient's sum (avg without padding, bilinear) */
  float x[20], out[12], gout[12], gin[20];
  int64_t idx[12];
  for (int i = 0; i < 20; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
  tnk_pool_args_t a = {.in = x,
                       .out = out,
                       .indices = idx,
                       .planes = 1,
                       .h = 4,
                       .w = 5,
                       .oh = 3,
                       .ow = 3,
                       .kh = 2,
                       .kw = 2,
                       .sh = 2,
                       .sw = 2,
                       .ph = 1,
                       .pw = 1,
                       .dh = 1,
                       .dw = 1,
                       .dtype = TNK_F32,
                       .kind = TNK_POOL_MAX};
  tnk_pool(&a);
  int bad = 0;
  for (int oh = 0; oh < 3; oh++)
    for (int ow = 0; ow < 3; ow++) {
      float best = -INFINITY;
      for (int y = oh * 2 - 1; y < oh * 2 + 1; y++)
        for (int xx = ow * 2 - 1; xx < ow * 2 + 1; xx++)
          if (y >= 0 && y < 4 && xx >= 0 && xx < 5 && x[y * 5 + xx] > best) best = x[y * 5 + xx];
      bad += out[oh * 3 + ow] != best || x[idx[oh * 3 + ow]] != best;
    }
  CHECK(bad == 0);
  for (int i = 0; i < 12; i++) gout[i] = 1.0f + (float)i;
  a.backward = 1;
  a.in = gout;
  a.out = gin;
  tnk_pool(&a);
  double s = 0;
  for (int i = 0; i < 20; i++) s += gin[i];
  CHECK(s == 45.0); /* each of the 9 output gradients lands on one input */
  tnk_resample_args_t u = {.in = x,
                           .out = gin,
                           .planes = 1,
                           .d = 1,
                           .h = 4,
                           .w = 5,
                           .od = 1,
                           .oh = 2,
                           .ow = 2,
                           .scale_h = 2.0,
                           .scale_w = 2.5,
                           .dtype = TNK_F32};
  tnk_resample(&u);
  u.backward = 1;
  u.in = gout;
  u.out = gin;
  u.oh = 3;
  u.ow = 4;
  u.scale_h = 4.0 / 3;
  u.scale_w = 5.0 / 4;
  tnk_resample(&u);
  s = 0;
  for (int i = 0; i < 20; i++) s += gin[i];
  CHECK(fabs(s - 78.0) < 1e-4); /* tap weights sum to one */
}

/* 3-D pooling: max 2x2x2 with dilation in depth against a direct search,
 * and the average pool's backward conserving the gradient (no padding,
 * windows that tile the volume). */
static void test_pool3d(void) {
  enum { D = 3, H = 4, W = 5 };
  float x[D * H * W], out[2 * 3 * 4], gin[D * H * W], gout[2 * 3 * 4];
  int64_t idx[2 * 3 * 4];
  for (int i = 0; i < D * H * W; i++) x[i] = (float)((i * 13) % 17) - 8.0f;
  tnk_pool_args_t a = {.in = x,
                       .out = out,
                       .indices = idx,
                       .planes = 1,
                       .d = D,
                       .h = H,
                       .w = W,
                       .od = 1,
                       .oh = 3,
                       .ow = 4,
                       .kd = 2,
                       .kh = 2,
                       .kw = 2,
                       .sd = 1,
                       .sh = 1,
                       .sw = 1,
                       .pd = 0,
                       .ph = 0,
                       .pw = 0,
                       .dd = 2,
                       .dh = 1,
                       .dw = 1,
                       .dtype = TNK_F32,
                       .kind = TNK_POOL_MAX};
  tnk_pool(&a);
  int bad = 0;
  for (int oy = 0; oy < 3; oy++)
    for (int ox = 0; ox < 4; ox++) {
      float best = -INFINITY;
      for (int z = 0; z <= 2; z += 2)
        for (int y = oy; y < oy + 2; y++)
          for (int xx = ox; xx < ox + 2; xx++)
            if (x[(z * H + y) * W + xx] > best) best = x[(z * H + y) * W + xx];
      bad += out[oy * 4 + ox] != best || x[idx[oy * 4 + ox]] != best;
    }
  CHECK(bad == 0);
  /* average 1x2x... windows over a [2, 4, 4] volume part: stride = kernel */
  tnk_pool_args_t v = {.in = x,
                       .out = out,
                       .planes = 1,
                       .d = D,
                       .h = H,
                       .w = W,
                       .od = 3,
                       .oh = 2,
                       .ow = 2,
                       .kd = 1,
                       .kh = 2,
                       .kw = 2,
                       .sd = 1,
                       .sh = 2,
                       .sw = 2,
                       .dd = 1,
                       .dh = 1,
                       .dw = 1,
                       .dtype = TNK_F32,
                       .kind = TNK_POOL_AVG};
  tnk_pool(&v);
  CHECK(out[0] == (x[0] + x[1] + x[W] + x[W + 1]) / 4);
  for (int i = 0; i < 12; i++) gout[i] = 1.0f + (float)i;
  v.backward = 1;
  v.in = gout;
  v.out = gin;
  tnk_pool(&v);
  double s = 0;
  for (int i = 0; i < D * H * W; i++) s += gin[i];
  CHECK(fabs(s - 78.0) < 1e-4); /* windows tile the pooled part: the sum is kept */
  CHECK(gin[4] == 0.0f);        /* column 4 lies outside every window */
}

/* Cubic resampling interpolates: with align_corners and scale 1/2 every
 * even output lands on an input sample and equals it; a constant stays
 * constant (the weights sum to one), so the backward keeps the gradient's
 * sum. */
static void test_resample_cubic(void) {
  float in[8], up[15], g[15], back[8];
  for (int i = 0; i < 8; i++) in[i] = (float)(i * i) - 3.0f;
  tnk_resample_args_t c = {.in = in,
                           .out = up,
                           .planes = 1,
                           .d = 1,
                           .h = 1,
                           .w = 8,
                           .od = 1,
                           .oh = 1,
                           .ow = 15,
                           .scale_w = 0.5,
                           .dtype = TNK_F32,
                           .align_corners = 1,
                           .mode = TNK_RESAMPLE_CUBIC};
  tnk_resample(&c);
  int bad = 0;
  for (int k = 0; k < 8; k++) bad += fabsf(up[2 * k] - in[k]) > 1e-5f;
  for (int i = 0; i < 8; i++) in[i] = 2.5f;
  tnk_resample(&c);
  for (int o = 0; o < 15; o++) bad += fabsf(up[o] - 2.5f) > 1e-5f;
  CHECK(bad == 0);
  for (int o = 0; o < 15; o++) g[o] = (float)(o % 5) - 1.0f;
  c.backward = 1;
  c.in = g;
  c.out = back;
  tnk_resample(&c);
  double sg = 0, sb = 0;
  for (int o = 0; o < 15; o++) sg += g[o];
  for (int i = 0; i < 8; i++) sb += back[i];
  CHECK(fabs(sg - sb) < 1e-4);
}

/* The AVX-512 configuration (the callers return early without AVX-512). */
static const tnk_config_t *avx512_cfg(void) {
  static tnk_config_t c;
  tnk_config_for_isa(TNK_ISA_AVX512, &c);
  return &c;
}

/* The pipelined AVX-512 softmax against a double-precision reference:
 * rows of 48, one with a NaN (all NaN out), one all -inf (NaN, as CPU's),
 * one with -inf entries (exact zeros) and large values. */
static void test_softmax_pipelined(void) {
  if (!(tnk_cpu_features() & TNK_ISA_AVX512)) return;
  enum { R = 6, N = 48 };
  float *x = aligned_alloc(64, sizeof(float) * R * N),
        *y = aligned_alloc(64, sizeof(float) * R * N);
  float *scratch = aligned_alloc(64, sizeof(float) * 2 * N);
  for (int i = 0; i < R * N; i++) x[i] = (float)((i * 37) % 23) * 0.7f - 8.0f;
  x[1 * N + 5] = NAN;
  for (int k = 0; k < N; k++) x[2 * N + k] = -INFINITY;
  x[3 * N + 0] = -INFINITY;
  x[3 * N + 7] = 80.0f;
  x[4 * N + 3] = 1e30f;
  avx512_cfg()->vmath.softmax_rows_stream(x, y, R, N, scratch);
  int bad = 0;
  for (int r = 0; r < R; r++) {
    double mx = -INFINITY, sum = 0;
    int nan = 0;
    for (int k = 0; k < N; k++) {
      nan |= isnan(x[r * N + k]);
      if (x[r * N + k] > mx) mx = x[r * N + k];
    }
    for (int k = 0; k < N; k++) sum += exp((double)x[r * N + k] - mx);
    for (int k = 0; k < N; k++) {
      double want = nan || isinf(mx) ? NAN : exp((double)x[r * N + k] - mx) / sum;
      double got = y[r * N + k];
      if (isnan(want))
        bad += !isnan(got);
      else
        bad += fabs(got - want) > 1e-6 * (1 + want) || (want == 0 && got != 0);
    }
  }
  CHECK(bad == 0);
  free(x);
  free(y);
  free(scratch);
}

/* grid_sample: with align_corners, grid points on pixel centres read those
 * pixels exactly; NaN, infinite and huge coordinates read nothing (zeros
 * padding) and never index outside the input; the backward runs on them. */
static void test_grid_sample(void) {
  enum { H = 3, W = 4, P = 6 };
  float x[H * W], grid[P * 2], out[P], gout[P], gin[H * W], ggrid[P * 2];
  for (int i = 0; i < H * W; i++) x[i] = (float)(i * 3 % 7) - 2.0f;
  /* (x, y) pixel (2, 1), (0, 0), (3, 2), then NaN, +inf, 1e30 */
  float pts[P][2] = {{2.0f * 2 / (W - 1) - 1, 2.0f * 1 / (H - 1) - 1},
                     {-1, -1},
                     {1, 1},
                     {NAN, 0},
                     {INFINITY, 0.5f},
                     {1e30f, -1e30f}};
  for (int i = 0; i < P; i++) {
    grid[2 * i] = pts[i][0];
    grid[2 * i + 1] = pts[i][1];
  }
  for (int mode = 0; mode < 2; mode++)
    for (int pad = 0; pad < 3; pad++) {
      tnk_grid_sample_args_t a = {.in = x,
                                  .grid = grid,
                                  .out = out,
                                  .n = 1,
                                  .c = 1,
                                  .h = H,
                                  .w = W,
                                  .oh = 1,
                                  .ow = P,
                                  .dtype = TNK_F32,
                                  .mode = mode,
                                  .padding = pad,
                                  .align_corners = 1};
      tnk_grid_sample(&a);
      CHECK(fabsf(out[0] - x[1 * W + 2]) < 1e-5f);
      CHECK(fabsf(out[1] - x[0]) < 1e-5f && fabsf(out[2] - x[H * W - 1]) < 1e-5f);
      /* NaN: a NaN bilinear sample (as CPU), no tap for nearest */
      if (pad == TNK_GRID_PAD_ZEROS)
        CHECK((mode == TNK_GRID_NEAREST ? out[3] == 0 && out[4] == 0
                                        : isnan(out[3]) && isnan(out[4])) &&
              out[5] == 0);
      for (int i = 0; i < P; i++) gout[i] = 1.0f;
      a.backward = 1;
      a.gout = gout;
      a.gin = gin;
      a.ggrid = ggrid;
      tnk_grid_sample(&a);
      double s = 0;
      for (int i = 0; i < H * W; i++) s += gin[i];
      if (pad == TNK_GRID_PAD_ZEROS) CHECK(fabs(s - 3.0) < 1e-5); /* three points inside */
    }
}

/* Complex unary against real-math identities: |z| = hypot(re, im),
 * arg z = atan2(im, re), exp z = e^re (cos im + i sin im), conj flips im;
 * strided input, real output for abs and angle. */
static void test_complex_unary(void) {
  enum { N = 5 };
  float z[2 * 2 * N], out[2 * N], r[N];
  for (int i = 0; i < 2 * N; i++) {
    z[2 * i] = (float)(i % 4) - 1.5f;
    z[2 * i + 1] = (float)((i * 3) % 5) - 2.0f;
  }
  int bad = 0;
  for (int op = TNK_CX_EXP; op < TNK_CX_OP_COUNT; op++) {
    int real = op == TNK_CX_ABS || op == TNK_CX_ANGLE;
    if (op != TNK_CX_EXP && op != TNK_CX_CONJ && !real) continue;
    tnk_unary_args_t a = {.shape = {1, 0, {N}},
                          .out = {real ? (void *)r : out, real ? TNK_F32 : TNK_C64, 0, {1}},
                          .in = {z, TNK_C64, 0, {2}},
                          .op = op,
                          .dtype = TNK_C64};
    CHECK(tnk_complex_unary_supported(op, TNK_C64, a.out.dtype));
    tnk_complex_unary(&a);
    for (int i = 0; i < N; i++) {
      double re = z[4 * i], im = z[4 * i + 1];
      if (op == TNK_CX_ABS) bad += fabs(r[i] - hypot(re, im)) > 1e-5;
      if (op == TNK_CX_ANGLE) bad += fabs(r[i] - atan2(im, re)) > 1e-6;
      if (op == TNK_CX_CONJ) bad += out[2 * i] != (float)re || out[2 * i + 1] != (float)-im;
      if (op == TNK_CX_EXP)
        bad += fabs(out[2 * i] - exp(re) * cos(im)) > 1e-5 * (1 + exp(re)) ||
               fabs(out[2 * i + 1] - exp(re) * sin(im)) > 1e-5 * (1 + exp(re));
    }
  }
  CHECK(bad == 0);
  CHECK(!tnk_complex_unary_supported(TNK_CX_ABS, TNK_C64, TNK_C64)); /* abs is real */
  CHECK(!tnk_complex_unary_supported(TNK_CX_EXP, TNK_F32, TNK_F32));
}

/* The pipelined AVX-512 layer norm against a double-precision reference,
 * with and without weight and bias. */
static void test_layer_norm_pipelined(void) {
  if (!(tnk_cpu_features() & TNK_ISA_AVX512)) return;
  enum { R = 5, N = 32 };
  float *x = aligned_alloc(64, sizeof(float) * R * N),
        *y = aligned_alloc(64, sizeof(float) * R * N);
  float w[N], b[N], mean[R], rstd[R];
  for (int i = 0; i < R * N; i++) x[i] = (float)((i * 29) % 31) * 0.3f - 4.0f + (float)(i / N);
  for (int k = 0; k < N; k++) {
    w[k] = 0.5f + 0.01f * (float)k;
    b[k] = (float)(k % 3) - 1.0f;
  }
  int bad = 0;
  for (int affine = 0; affine < 2; affine++) {
    avx512_cfg()->vmath.layer_norm_rows_stream(x, y, R, N, 1e-5f, affine ? w : NULL,
                                               affine ? b : NULL, mean, rstd);
    for (int r = 0; r < R; r++) {
      double mu = 0, var = 0;
      for (int k = 0; k < N; k++) mu += x[r * N + k];
      mu /= N;
      for (int k = 0; k < N; k++) var += (x[r * N + k] - mu) * (x[r * N + k] - mu);
      double rs = 1 / sqrt(var / N + 1e-5);
      bad += fabs(mean[r] - mu) > 1e-5 * (1 + fabs(mu)) || fabs(rstd[r] - rs) > 1e-5 * rs;
      for (int k = 0; k < N; k++) {
        double want = (x[r * N + k] - mu) * rs;
        if (affine) want = want * w[k] + b[k];
        bad += fabs(y[r * N + k] - want) > 1e-5 * (1 + fabs(want));
      }
    }
  }
  CHECK(bad == 0);
  free(x);
  free(y);
}

/* The streaming copy: every head/tail alignment and length around the
 * 64- and 256-byte steps copies exactly, and writes nothing outside. */
static void test_copy_stream(void) {
  if (!(tnk_cpu_features() & TNK_ISA_AVX512)) return;
  enum { B = 1200 };
  unsigned char *src = malloc(B), *dst = malloc(B + 64);
  for (int i = 0; i < B; i++) src[i] = (unsigned char)(i * 7 + 3);
  int bad = 0;
  for (int off = 0; off < 64; off += 7)
    for (int len = 0; len < B - 64; len += 61) {
      memset(dst, 0xEE, B + 64);
      avx512_cfg()->vmath.copy_stream(dst + off, src + (off * 3) % 64, len);
      bad += memcmp(dst + off, src + (off * 3) % 64, (size_t)len) != 0;
      for (int i = 0; i < off; i++) bad += dst[i] != 0xEE;
      for (int i = off + len; i < B + 64; i++) bad += dst[i] != 0xEE;
    }
  CHECK(bad == 0);
  free(src);
  free(dst);
}

/* The log-sum-exp scan against log(sum exp) in double, with -inf entries,
 * large magnitudes (no overflow), along an inner dim. */
static void test_scan_logsumexp(void) {
  float x[2 * 5] = {-INFINITY, 1.0f, 800.0f, -3.0f, 2.0f, 0.5f, -INFINITY, -700.0f, 4.0f, 1.0f};
  float y[2 * 5];
  /* [2, 5] scanned along dim 0 of a [5, 2] view: outer 1, len 5, inner 2 */
  tnk_scan_args_t a = {.in = x,
                       .out = y,
                       .outer = 1,
                       .len = 5,
                       .inner = 2,
                       .in_dtype = TNK_F32,
                       .out_dtype = TNK_F32,
                       .op = TNK_SCAN_LOGSUMEXP};
  tnk_scan(&a);
  int bad = 0;
  for (int c = 0; c < 2; c++) {
    double mx = -INFINITY;
    for (int k = 0; k < 5; k++) {
      double v = x[k * 2 + c];
      if (v > mx) mx = v;
      double s = 0;
      for (int j = 0; j <= k; j++) s += exp((double)x[j * 2 + c] - mx);
      double want = isinf(mx) ? mx : mx + log(s);
      bad += isinf(want) ? y[k * 2 + c] != (float)want
                         : fabs(y[k * 2 + c] - want) > 1e-5 * (1 + fabs(want));
    }
  }
  CHECK(bad == 0);
  a.in_dtype = a.out_dtype = TNK_I32; /* integers: no log-sum-exp; nothing written */
  y[0] = 42.0f;
  tnk_scan(&a);
  CHECK(y[0] == 42.0f);
}

/* The configurations the bf16 GEMM tests run against the reference: each
 * ISA's this CPU has, and the AVX-512 one again without AMX where AMX is
 * used, so that both bf16 kernels are checked there. */
static int bf16_gemm_variants(tnk_config_t out[3]) {
  int n = 0;
  for (int isa = TNK_ISA_AVX2; isa <= TNK_ISA_AVX512; isa++) {
    if (tnk_config_for_isa(isa, &out[n]) != 0) continue;
    if (out[n++].gemm.amx_bf16) {
      out[n] = out[n - 1];
      out[n].gemm.amx_bf16 = NULL;
      n++;
    }
  }
  return n;
}

/* The AVX-512 configuration runs bf16 GEMMs on AMX exactly when the
 * process decided AMX is usable (CPU, TORCH_NEURONX_AMX, the OS grant and
 * the tile self-test: config.c). */
static void test_amx_configured(void) {
  tnk_config_t c;
  if (tnk_config_for_isa(TNK_ISA_AVX512, &c) != 0) return;
  CHECK((c.gemm.amx_bf16 != NULL) == (tnk_amx_usable() && c.gemm.bf16 != NULL));
  printf("  AMX: %s; bf16 GEMM kernels checked: %s\n", tnk_amx_status(),
         c.gemm.amx_bf16 ? "AMX tiles and AVX512-BF16"
         : c.gemm.bf16   ? "AVX512-BF16"
                         : "fp32");
}

#if defined(__x86_64__)
#include <signal.h>

#include "x86/x86.h"

/* The bytes LDTILECFG loads are the intended configuration: palette 1,
 * tiles 0-7 of 16 rows x 64 bytes, the rest zero. (GCC 12 once dropped
 * the colsb/rows stores of a stack configuration: 0-row tiles, SIGILL on
 * the first tile instruction of every AMX host.) */
static void test_amx_tile_config_bytes(void) {
  const uint8_t *cfg = tnk_amx_tile_config();
  CHECK(((uintptr_t)cfg & 63) == 0);
  CHECK(cfg[0] == 1); /* palette */
  CHECK(cfg[1] == 0); /* start_row */
  for (int i = 2; i < 16; i++) CHECK(cfg[i] == 0);
  for (int t = 0; t < 16; t++) {
    uint16_t colsb = (uint16_t)(cfg[16 + 2 * t] | cfg[16 + 2 * t + 1] << 8);
    CHECK(colsb == (t < 8 ? 64 : 0));
    CHECK(cfg[48 + t] == (t < 8 ? 16 : 0));
  }
}

static int g_prior_handler_ran;
static void prior_sigill_handler(int sig) { g_prior_handler_ran = sig; }

/* The self-test cannot take the process down: where tiles work (AMX-BF16
 * granted) it returns 0, the exact product; everywhere else the first tile
 * instruction raises SIGILL, which it catches and returns. Either way the
 * SIGILL handler the process had before is back afterwards. */
static void test_amx_self_test_guard(void) {
  struct sigaction mine, before, after;
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = prior_sigill_handler;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGILL, &mine, &before);
  int tiles = (tnk_cpu_features() & TNK_FEAT_AMX_BF16) && tnk_amx_request();
  int r = tnk_amx_self_test();
  CHECK(r == (tiles ? 0 : SIGILL));
  sigaction(SIGILL, NULL, &after);
  CHECK(after.sa_handler == prior_sigill_handler);
  raise(SIGILL); /* the handler restored is the one that runs */
  CHECK(g_prior_handler_ran == SIGILL);
  sigaction(SIGILL, &before, NULL);
  printf("  AMX tile self-test on this CPU: %s\n", r == 0        ? "exact product"
                                                   : r == SIGILL ? "SIGILL caught"
                                                                 : "unexpected");
}
#endif

/* A bf16/fp16 product deeper than one packed block is rounded once, as
 * CPU rounds it: every variant against the reference (fp32 sums, one
 * rounding); only the fp32 summation order may differ, by one ulp on at
 * most 1% of the elements. Rounding after each block put 17% one ulp off. */
static void test_gemm_narrow_rounds_once(void) {
  const int64_t m = 24, n = 48, k = 2048;
  int bad = 0;
  for (int dt = 0; dt < 2; dt++) {
    int dtype = dt ? TNK_F16 : TNK_BF16;
    uint16_t *A = malloc(2 * m * k), *B = malloc(2 * k * n), *C0 = malloc(2 * m * n),
             *C1 = malloc(2 * m * n);
    for (int64_t i = 0; i < m * k; i++) {
      float v = 0.25f + (float)(i * 7919 % 1000) / 2000.0f;
      A[i] = dt ? tnk_f32_to_f16(v) : tnk_f32_to_bf16(v);
    }
    for (int64_t i = 0; i < k * n; i++) {
      float v = (float)(i * 104729 % 1000) / 100000.0f;
      B[i] = dt ? tnk_f32_to_f16(v) : tnk_f32_to_bf16(v);
    }
    tnk_gemm_args_t g = {.batch = 1, .m = m, .n = n, .k = k, .a = A, .b = B, .c = C0};
    g.dtype = dtype;
    g.alpha = 1.0;
    g.sc_r = n;
    g.sc_c = 1;
    g.sa_r = k;
    g.sa_c = 1;
    tnk_config_t ref, cvs[3];
    tnk_config_for_isa(TNK_ISA_REFERENCE, &ref);
    int nv = bf16_gemm_variants(cvs);
    for (int trans = 0; trans < 2; trans++) { /* B row-major, or k-contiguous (a weight) */
      g.sb_r = trans ? 1 : n;
      g.sb_c = trans ? k : 1;
      g.c = C0;
      tnk_gemm_with(&ref, &g);
      for (int v = 0; v < nv; v++) {
        g.c = C1;
        tnk_gemm_with(&cvs[v], &g);
        int off = 0;
        for (int64_t i = 0; i < m * n; i++) {
          int d = abs((int)C0[i] - (int)C1[i]);
          if (d > 1) bad++;
          off += d != 0;
        }
        if (off > m * n / 100) bad++;
      }
    }
    free(A);
    free(B);
    free(C0);
    free(C1);
  }
  CHECK(bad == 0);
}

/* bf16 GEMM: the AVX512-BF16 dot-product kernel (when the CPU has it) and
 * the fp32-converting path (avx2) against the reference, odd depths, edge
 * tiles, transposed operands, alpha/beta and depths over one packed block. */
static void test_gemm_bf16_variants(void) {
  const int64_t shapes[][3] = {
      {13, 7, 33},    {25, 64, 70}, {12, 1101, 32}, {3, 5, 2},
      {40, 300, 64},  {36, 33, 96}, {270, 40, 530}, /* column split */
      {14, 2101, 40},  /* two packed blocks of depth (bf16 kc 2048), odd remainder */
      {65, 1031, 97}}; /* AMX: two depth blocks (1024), edge blocks in m and n */
  int bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int trans = 0; trans < 4; trans++) {
      int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
      uint16_t *A = malloc(2 * m * k), *B = malloc(2 * k * n), *C0 = malloc(2 * m * n),
               *C1 = malloc(2 * m * n);
      for (int64_t i = 0; i < m * k; i++) A[i] = tnk_f32_to_bf16((float)((i * 7 % 13) - 6) / 8.0f);
      for (int64_t i = 0; i < k * n; i++) B[i] = tnk_f32_to_bf16((float)((i * 5 % 11) - 5) / 4.0f);
      for (int64_t i = 0; i < m * n; i++) C0[i] = tnk_f32_to_bf16((float)(i % 3));
      memcpy(C1, C0, 2 * m * n);
      tnk_gemm_args_t g = {.batch = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = A,
                           .b = B,
                           .c = C0,
                           .dtype = TNK_BF16,
                           .alpha = 1.5,
                           .beta = 0.5,
                           .sc_r = n,
                           .sc_c = 1};
      if (trans == 0 || s == 1) { /* plain C = A B: full tiles round straight into C */
        g.alpha = 1.0;
        g.beta = 0.0;
      } else if (trans == 3) { /* C = alpha A B: the same tiles, scaled */
        g.alpha = 0.5;
        g.beta = 0.0;
      }
      g.sa_r = trans & 1 ? 1 : k;
      g.sa_c = trans & 1 ? m : 1;
      g.sb_r = trans & 2 ? 1 : n;
      g.sb_c = trans & 2 ? k : 1;
      tnk_config_t ref, cvs[3];
      tnk_config_for_isa(TNK_ISA_REFERENCE, &ref);
      tnk_gemm_with(&ref, &g);
      int nv = bf16_gemm_variants(cvs);
      for (int v = 0; v < nv; v++) {
        uint16_t *Cv = malloc(2 * m * n);
        memcpy(Cv, C1, 2 * m * n);
        g.c = Cv;
        tnk_gemm_with(&cvs[v], &g);
        for (int64_t i = 0; i < m * n; i++) {
          float got = tnk_bf16_to_f32(Cv[i]), want = tnk_bf16_to_f32(C0[i]);
          /* sums of up to 1101 terms of size ~2: a few bf16 ulps of the
           * partial sums (fp32 accumulation differs only in order) */
          if (fabsf(got - want) > 2e-2f * (1.0f + fabsf(want)) + 1e-3f * (float)k / 64) bad++;
        }
        free(Cv);
        g.c = C0;
      }
      free(A);
      free(B);
      free(C0);
      free(C1);
    }
  CHECK(bad == 0);
}

/* Triangular solves: A X = B for lower/upper, unit or not, checked by
 * multiplying back; strided (transposed) A. */
static void test_trsm(void) {
  enum { N = 7, K = 70 };
  static double A[N * N], X[N * K], B[N * K];
  int bad = 0;
  for (int upper = 0; upper < 2; upper++)
    for (int unit = 0; unit < 2; unit++)
      for (int dt = 0; dt < 2; dt++) {
        for (int i = 0; i < N; i++)
          for (int j = 0; j < N; j++)
            A[i * N + j] =
                ((upper ? j >= i : j <= i) ? (i == j ? 2.0 + i : 0.3 * ((i + 2 * j) % 5) - 0.6)
                                           : 0);
        for (int i = 0; i < N * K; i++) B[i] = (double)((i * 7) % 11) - 5;
        float Af[N * N], Xf[N * K];
        for (int i = 0; i < N * N; i++) Af[i] = (float)A[i];
        for (int i = 0; i < N * K; i++) {
          X[i] = B[i];
          Xf[i] = (float)B[i];
        }
        /* A read through its transpose's strides: (sa_r, sa_c) = (1, N) of A^T */
        double At[N * N];
        float Aft[N * N];
        for (int i = 0; i < N; i++)
          for (int j = 0; j < N; j++) {
            At[j * N + i] = A[i * N + j];
            Aft[j * N + i] = Af[i * N + j];
          }
        tnk_trsm_args_t t = {.batch = 1,
                             .n = N,
                             .k = K,
                             .a = dt ? (void *)At : (void *)Aft,
                             .x = dt ? (void *)X : (void *)Xf,
                             .sa_r = 1,
                             .sa_c = N,
                             .sx_r = K,
                             .sx_c = 1,
                             .dtype = dt ? TNK_F64 : TNK_F32,
                             .upper = upper,
                             .unit = unit};
        tnk_trsm(&t);
        for (int i = 0; i < N; i++)
          for (int c = 0; c < K; c++) {
            double s = 0;
            for (int j = 0; j < N; j++) {
              double a = i == j && unit ? 1.0 : A[i * N + j];
              s += a * (dt ? X[j * K + c] : Xf[j * K + c]);
            }
            if (fabs(s - B[i * K + c]) > (dt ? 1e-9 : 1e-3) * (1 + fabs(B[i * K + c]))) bad++;
          }
      }
  CHECK(bad == 0);
  CHECK(!tnk_trsm_supported(TNK_BF16));
}

/* Every entry of every variant's configuration against the reference
 * configuration's entry (config.h): the element-wise loops of every
 * (op, dtype) contiguous and strided, on values in [-4, 4] and the special
 * values; the vector row math; GEMM is test_gemm_variants. Tolerance: the
 * vector libm (libmvec) is within 4 ulp of libm, and a half type may round
 * that difference to one of its own ulps. */
static int close_enough(double got, double want, int dtype) {
  if (got != got || want != want) return (got != got) == (want != want);
  if (got == want) return 1;
  double rel = dtype == TNK_F64    ? 1e-13
               : dtype == TNK_F32  ? 4e-6
               : dtype == TNK_BF16 ? 1.6e-2
                                   : 2e-3;
  /* absolute at the scale of 1: ops like GELU's backward cancel terms of
   * size ~1, where a last-ulp difference of erff is not relative to the result */
  return fabs(got - want) <= rel * (fabs(want) + (dtype == TNK_F64 ? 1e-3 : 1.0));
}

enum { VN = 53 };
static void variant_inputs(int dtype, char *buf, int64_t stride, int seed) {
  static const double specials[] = {0.0,   -0.0, INFINITY, -INFINITY, NAN,
                                    1e-30, 60.0, -60.0,    1.0,       -1.0};
  for (int i = 0; i < VN; i++) {
    double v = i < 10 ? specials[(i + seed) % 10] : ((i * 37 + seed * 11) % 97) / 12.0 - 4.0;
    tnk_stf(buf + i * stride, dtype, 0, v);
  }
}

static int compare_outputs(const char *got, const char *want, int64_t stride, int dtype,
                           int out_dtype) {
  int bad = 0;
  for (int i = 0; i < VN; i++) {
    double g = tnk_ldf(got + i * stride, out_dtype, 0),
           w = tnk_ldf(want + i * stride, out_dtype, 0);
    if (!close_enough(g, w, dtype)) bad++;
  }
  return bad;
}

static void test_config_variants(void) {
  tnk_config_t ref, v;
  CHECK(tnk_config_for_isa(TNK_ISA_REFERENCE, &ref) == 0);
  CHECK(tnk_config()->isa == tnk_isa());
  static const int fdt[] = {TNK_F16, TNK_BF16, TNK_F32, TNK_F64};
  const double p[3] = {0.5, 1.5, 2.0}, al[5] = {1.5, 0.5, 1.0, 0, 0};
  int checked = 0;
  for (int isa = TNK_ISA_AVX2; isa <= TNK_ISA_AVX512; isa++) {
    if (tnk_config_for_isa(isa, &v) != 0) continue;
    CHECK(v.isa == isa && v.loops != ref.loops);
    int bad = 0;
    for (int strided = 0; strided < 2; strided++)
      for (int d = 0; d < 4; d++) {
        int dt = fdt[d];
        int64_t esz = (int64_t)tnk_dtype_size(dt), st = strided ? 3 * esz : esz;
        char *a = calloc(VN, (size_t)st), *b = calloc(VN, (size_t)st);
        char *o1 = calloc(VN, (size_t)st), *o2 = calloc(VN, (size_t)st);
        variant_inputs(dt, a, st, 0);
        variant_inputs(dt, b, st, 3);
        for (int op = 0; op < TNK_UNARY_OP_COUNT; op++) {
          tnk_uloop_fn fr = ref.loops->unary[op][dt], fv = v.loops->unary[op][dt];
          CHECK((fr == NULL) == (fv == NULL));
          if (!fr || !fv) continue;
          fr(o1, a, st, st, VN, p);
          fv(o2, a, st, st, VN, p);
          int nb = compare_outputs(o2, o1, st, dt, dt);
          if (nb)
            fprintf(stderr, "  %s unary op %d dtype %d strided %d: %d differ\n", tnk_isa_name(isa),
                    op, dt, strided, nb);
          bad += nb;
          checked++;
        }
        for (int op = 0; op < TNK_BINARY_OP_COUNT; op++) {
          tnk_bloop_fn fr = ref.loops->binary[op][dt], fv = v.loops->binary[op][dt];
          CHECK((fr == NULL) == (fv == NULL));
          if (!fr || !fv) continue;
          fr(o1, a, b, st, st, st, VN, al, 1);
          fv(o2, a, b, st, st, st, VN, al, 1);
          int nb = compare_outputs(o2, o1, st, dt, dt);
          if (nb)
            fprintf(stderr, "  %s binary op %d dtype %d strided %d: %d differ\n", tnk_isa_name(isa),
                    op, dt, strided, nb);
          bad += nb;
          checked++;
        }
        /* contiguous fp32 addcmul / addcdiv / lerp, out of place and in place
         * (c = b: addcdiv divides by b's zeros too) */
        for (int op = 0; op < TNK_TERNARY_OP_COUNT && dt == TNK_F32 && !strided; op++)
          for (int inplace = 0; inplace < 2; inplace++) {
            float *fa = (float *)(void *)a, *fb = (float *)(void *)b;
            float *r1 = inplace ? (float *)(void *)o1 : fa,
                  *r2 = inplace ? (float *)(void *)o2 : fa;
            if (inplace) {
              memcpy(o1, a, VN * sizeof(float));
              memcpy(o2, a, VN * sizeof(float));
            }
            ref.loops->ternary_f32(op, (float *)(void *)o1, r1, fb, fb, 0.75f, VN);
            v.loops->ternary_f32(op, (float *)(void *)o2, r2, fb, fb, 0.75f, VN);
            int nb = compare_outputs(o2, o1, st, dt, dt);
            if (nb)
              fprintf(stderr, "  %s ternary op %d in place %d: %d differ\n", tnk_isa_name(isa), op,
                      inplace, nb);
            bad += nb;
            checked++;
          }
        free(a);
        free(b);
        free(o1);
        free(o2);
      }
    /* the vector row math, every length class around the vector widths */
    float x[VN + 40], g[VN + 40], y1[VN + 40], y2[VN + 40], w[VN + 40], bb[VN + 40];
    for (int i = 0; i < VN + 40; i++) {
      x[i] = (float)((i * 29 % 83) / 10.0 - 4.0);
      g[i] = (float)((i * 13 % 17) / 8.0 - 1.0);
      w[i] = 0.5f + (float)(i % 5) * 0.25f;
      bb[i] = (float)(i % 3) - 1.0f;
    }
    for (int n = 0; n <= VN + 40; n += 7) {
      const tnk_vmath_config_t *R = &ref.vmath, *V = &v.vmath;
      float s1 = R->exp_sum(x, 1.0f, y1, n), s2 = V->exp_sum(x, 1.0f, y2, n);
      bad += !close_enough(s2, s1, TNK_F32);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      s1 = R->exp_bounded_sum(x, 4.0f, y1, n);
      s2 = V->exp_bounded_sum(x, 4.0f, y2, n);
      bad += !close_enough(s2, s1, TNK_F32);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      for (int form = 0; form < 2; form++) {
        R->sigmoid(x, y1, n, form);
        V->sigmoid(x, y2, n, form);
        for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
        R->gelu(x, y1, n, form);
        V->gelu(x, y2, n, form);
        for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
        R->gelu_bwd(g, x, y1, n, form);
        V->gelu_bwd(g, x, y2, n, form);
        for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      }
      R->silu_bwd(g, x, y1, n);
      V->silu_bwd(g, x, y2, n);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      bad += !close_enough(V->sum_f64(x, n), R->sum_f64(x, n), TNK_F64);
      bad += fabsf(V->sum(x, n) - R->sum(x, n)) > 1e-5f * (float)(n + 1);
      bad += fabsf(V->sumsqdev(x, n, 0.25f) - R->sumsqdev(x, n, 0.25f)) > 1e-4f * (float)(n + 1);
      bad += V->max(x, n) != R->max(x, n);
      R->normalize(x, y1, n, 0.5f, 1.25f, w, bb);
      V->normalize(x, y2, n, 0.5f, 1.25f, w, bb);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      R->scale_stream(x, 0.75f, y1, n);
      V->scale_stream(x, 0.75f, y2, n);
      for (int k = 0; k < n; k++) bad += y2[k] != y1[k];
      checked++;
    }
    CHECK(bad == 0);
  }
  if (tnk_cpu_features() & TNK_ISA_AVX2) CHECK(checked > 0);
}

/* A GEMM whose buffer cannot be allocated says so (return value and the
 * fault sink) instead of leaving C silently unwritten: an fp64 row of 2^58
 * columns needs a 2^61-byte accumulator. */
static int g_gemm_faults;
static const char *g_gemm_fault_what;
static void count_gemm_fault(void *ctx, int kind, const char *what, int64_t v, int64_t b,
                             uint32_t origin) {
  (void)ctx;
  (void)v;
  (void)b;
  (void)origin;
  g_gemm_faults += kind == TNRT_FAULT_MESSAGE;
  g_gemm_fault_what = what;
}

static void test_gemm_reports_allocation_failure(void) {
  double a = 1, b = 1, c = 0;
  tnk_gemm_args_t g = {.batch = 1,
                       .m = 1,
                       .n = (int64_t)1 << 58,
                       .k = 1,
                       .a = &a,
                       .b = &b,
                       .c = &c,
                       .sa_r = 1,
                       .sa_c = 1,
                       .sb_r = 1,
                       .sb_c = 1,
                       .sc_r = 1,
                       .sc_c = 1,
                       .dtype = TNK_F64,
                       .alpha = 1,
                       .beta = 0};
  g.fault.fn = count_gemm_fault;
  CHECK(tnk_gemm(&g) == -1);
  CHECK(g_gemm_faults == 1 && g_gemm_fault_what && strstr(g_gemm_fault_what, "out of host memory"));
  g.n = 1; /* and a product that fits is computed, with no fault */
  CHECK(tnk_gemm(&g) == 0 && c == 1 && g_gemm_faults == 1);
}

/* Softmax and log-softmax of rows whose exponentials overflow or underflow
 * fp32 without the max subtraction (around +-100 and 1e4), along the last
 * dimension (the fp32 row kernel, rows of 37: a vector remainder) and an
 * inner one (the strided path), against the formulas in double. */
static void test_softmax_range(void) {
  enum { R = 4, L = 37 };
  static const float offset[R] = {100.0f, -120.0f, 0.0f, 5e3f};
  static const float scale[R] = {3.0f, 2.0f, 1e4f, 1.0f};
  float x[R * L], xt[L * R], y[R * L], yt[L * R];
  for (int r = 0; r < R; r++)
    for (int k = 0; k < L; k++) {
      x[r * L + k] = offset[r] + scale[r] * (float)((k * 29 % 37) - 18) / 18.0f;
      xt[k * R + r] = x[r * L + k];
    }
  int bad = 0;
  for (int lg = 0; lg < 2; lg++) {
    tnk_softmax_args_t a = {.out = y,
                            .in = x,
                            .outer = R,
                            .len = L,
                            .inner = 1,
                            .dtype = TNK_F32,
                            .out_dtype = TNK_F32,
                            .log = lg};
    tnk_softmax(&a);
    tnk_softmax_args_t t = a;
    t.out = yt;
    t.in = xt;
    t.outer = 1;
    t.inner = R;
    tnk_softmax(&t);
    for (int r = 0; r < R; r++) {
      double mx = -INFINITY, s = 0;
      for (int k = 0; k < L; k++) mx = x[r * L + k] > mx ? x[r * L + k] : mx;
      for (int k = 0; k < L; k++) s += exp((double)x[r * L + k] - mx);
      for (int k = 0; k < L; k++) {
        double z = (double)x[r * L + k] - mx;
        double want = lg ? z - log(s) : exp(z) / s;
        double tol = lg ? 1e-5 * (1 + fabs(want)) + 2e-3 * (scale[r] > 100) : 1e-6;
        bad += !(fabs(y[r * L + k] - want) <= tol);
        bad += !(fabs(yt[k * R + r] - want) <= tol);
      }
    }
  }
  CHECK(bad == 0);
}

/* gather with a transposed index and scatter_add into a strided out;
 * index_add with a strided index and alpha: against loops over the
 * logical indices. */
/* searchsorted against a linear count: lower bound = boundaries < v,
 * upper bound = boundaries <= v, for sorted rows with repeats, through a
 * sorter, in int64 and int32; a sorter entry out of range faults. */
static int searchsorted_faults;
static void count_fault(void *ctx, int kind, const char *what, int64_t value, int64_t bound,
                        uint32_t origin) {
  (void)ctx, (void)kind, (void)what, (void)origin;
  CHECK(value == 7 && bound == 6);
  searchsorted_faults++;
}

static void test_searchsorted(void) {
  enum { ROWS = 3, LEN = 6, PER = 5 };
  int64_t bd[ROWS * LEN], shuffled[ROWS * LEN], sorter[ROWS * LEN], vals[ROWS * PER];
  int64_t out64[ROWS * PER];
  int32_t out32[ROWS * PER];
  for (int r = 0; r < ROWS; r++) {
    for (int j = 0; j < LEN; j++) bd[r * LEN + j] = 2 * j - (j == 3) + r; /* 1 repeat a row */
    for (int j = 0; j < LEN; j++) { /* stored reversed, read through the sorter */
      shuffled[r * LEN + j] = bd[r * LEN + LEN - 1 - j];
      sorter[r * LEN + j] = LEN - 1 - j;
    }
    for (int k = 0; k < PER; k++) vals[r * PER + k] = 3 * k - 2 + r;
  }
  const tnk_searchsorted_args_t base = {.boundaries = bd,
                                        .values = vals,
                                        .out = out64,
                                        .n = ROWS * PER,
                                        .per_row = PER,
                                        .len = LEN,
                                        .bd_rows = ROWS,
                                        .dtype = TNK_I64};
  for (int variant = 0; variant < 4; variant++) {
    int right = variant & 1, use_sorter = variant >> 1;
    tnk_searchsorted_args_t a = base;
    if (use_sorter) {
      a.boundaries = shuffled;
      a.sorter = sorter;
    }
    a.right = right;
    tnk_searchsorted(&a);
    a.out = out32;
    a.out_int32 = 1;
    tnk_searchsorted(&a);
    for (int r = 0; r < ROWS; r++)
      for (int k = 0; k < PER; k++) {
        int64_t v = vals[r * PER + k], want = 0;
        for (int j = 0; j < LEN; j++) want += right ? bd[r * LEN + j] <= v : bd[r * LEN + j] < v;
        CHECK(out64[r * PER + k] == want);
        CHECK(out32[r * PER + k] == want);
      }
  }
  sorter[4] = 7;
  tnk_searchsorted_args_t bad = base;
  bad.boundaries = shuffled;
  bad.sorter = sorter;
  bad.fault.fn = count_fault;
  tnk_searchsorted(&bad);
  CHECK(searchsorted_faults == 1);
}

/* cummax/cummin along the middle dim of [2, 5, 3] against a direct loop:
 * ties take the later index, a NaN takes over until the next NaN. */
static void test_cumext(void) {
  enum { O = 2, L = 5, I = 3 };
  float in[O * L * I], vals[O * L * I];
  int64_t idx[O * L * I];
  for (int k = 0; k < O * L * I; k++) in[k] = (float)((k * 7) % 5) - 2.0f;
  in[1 * I + 1] = NAN;
  for (int is_max = 0; is_max < 2; is_max++) {
    tnk_cumext_args_t a = {.in = in,
                           .values = vals,
                           .indices = idx,
                           .outer = O,
                           .len = L,
                           .inner = I,
                           .dtype = TNK_F32,
                           .is_max = is_max};
    tnk_cumext(&a);
    for (int o = 0; o < O; o++)
      for (int i = 0; i < I; i++) {
        float best = in[o * L * I + i];
        int64_t bi = 0;
        for (int l = 0; l < L; l++) {
          float x = in[(o * L + l) * I + i];
          if (isnan(x) || (!isnan(best) && (is_max ? x >= best : x <= best))) best = x, bi = l;
          int k = (o * L + l) * I + i;
          CHECK(idx[k] == bi);
          CHECK(isnan(best) ? isnan(vals[k]) : vals[k] == best);
        }
      }
  }
}

static void test_gather_index_strides(void) {
  enum { M = 5, N = 6 };
  float src[M * N], out[M * N], want[M * N];
  int64_t idxT[N * M]; /* the (M, N) index stored transposed: strides (1, M) */
  for (int i = 0; i < M * N; i++) src[i] = (float)i;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) idxT[j * M + i] = (i * 3 + j * 2) % N;
  for (int mode = 0; mode < 2; mode++) { /* gather, then scatter_add */
    for (int i = 0; i < M * N; i++) out[i] = want[i] = mode ? 1.0f : -1.0f;
    tnk_gather_args_t g = {.shape = {2, 0, {M, N}},
                           .indexed = {mode ? out : src, TNK_F32, 0, {N, 1}},
                           .dense = {mode ? src : out, TNK_F32, 0, {N, 1}},
                           .index = {idxT, TNK_I64, 0, {1, M}},
                           .dim = 1,
                           .mode = mode ? TNK_SCATTER_ADD : TNK_GATHER,
                           .dim_size = N};
    tnk_gather(&g);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        int64_t k = idxT[j * M + i];
        if (mode)
          want[i * N + k] += src[i * N + j];
        else
          want[i * N + j] = src[i * N + k];
      }
    int bad = 0;
    for (int i = 0; i < M * N; i++) bad += out[i] != want[i];
    CHECK(bad == 0);
  }
  /* index_add along dim 0 of (M, N): index[j] at j * 2 (every other of 8) */
  int64_t idx[8] = {4, 9, 0, 9, 4, 9, 2, 9};
  float dst[M * N], dwant[M * N], add[4 * N];
  for (int i = 0; i < M * N; i++) dst[i] = dwant[i] = (float)(i % 7);
  for (int i = 0; i < 4 * N; i++) add[i] = (float)(i % 5) - 2.0f;
  tnk_index_args_t ia = {.indexed = dst,
                         .dense = add,
                         .index = {idx},
                         .size = {M},
                         .index_stride = {2},
                         .outer = 1,
                         .n = 4,
                         .inner = N,
                         .nindex = 1,
                         .dtype = TNK_F32,
                         .index_dtype = TNK_I64,
                         .mode = TNK_INDEX_ADD,
                         .alpha = 2.0};
  tnk_index(&ia);
  for (int j = 0; j < 4; j++)
    for (int c = 0; c < N; c++) dwant[idx[2 * j] * N + c] += 2.0f * add[j * N + c];
  int bad = 0;
  for (int i = 0; i < M * N; i++) bad += dst[i] != dwant[i];
  CHECK(bad == 0);
}

/* ---- the fused LSTM / GRU cells against a double-precision reference ---- */

static double sig_d(double x) { return 1 / (1 + exp(-x)); }

/* data in dtype dt from doubles (rounded), and back */
static void put(void *dst, int dt, const double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == TNK_F32)
      ((float *)dst)[i] = (float)x[i];
    else
      ((uint16_t *)dst)[i] = tnk_f32_to_bf16((float)x[i]);
  }
}
static double get(const void *src, int dt, int64_t i) {
  return dt == TNK_F32 ? ((const float *)src)[i] : tnk_bf16_to_f32(((const uint16_t *)src)[i]);
}
static int rnn_close(const void *got, int dt, const double *want, int64_t n, const char *what) {
  double tol = dt == TNK_F32 ? 2e-5 : 2e-2;
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(get(got, dt, i) - want[i]) <= tol * (1 + fabs(want[i])))) bad++;
  if (bad)
    fprintf(stderr, "  rnn cell %s (dtype %d): %d of %lld off\n", what, dt, bad, (long long)n);
  return bad;
}

static void test_rnn_cell(void) {
  enum { B = 3, H = 300 }; /* two blocks of hidden units per row, the second partial */
  static double ig[B * 5 * H], hg[B * 5 * H], b1[5 * H], b2[5 * H], prev[B * H], g1[B * H],
      g2[B * H], want[6][B * 5 * H];
  static char buf[14][B * 5 * H * 4];
  for (int i = 0; i < B * 5 * H; i++) {
    ig[i] = sin(0.37 * i) * 2.5;
    hg[i] = cos(0.11 * i) * 1.5;
  }
  for (int i = 0; i < 5 * H; i++) b1[i] = 0.2 * sin(0.05 * i), b2[i] = -0.1 * cos(0.03 * i);
  for (int i = 0; i < B * H; i++)
    prev[i] = 0.8 * cos(0.21 * i), g1[i] = sin(0.13 * i), g2[i] = 0.5 * cos(0.07 * i);
  const int dts[2] = {TNK_F32, TNK_BF16};
  for (int d = 0; d < 2; d++)
    for (int gru = 0; gru < 2; gru++)
      for (int bias = 0; bias < 2; bias++)
        for (int grads = 0; grads < (gru ? 1 : 3); grads++) { /* LSTM: both, only hy, only cy */
          int dt = dts[d], k = gru ? 3 : 4;
          /* inputs rounded to dt, and the reference read back from them */
          put(buf[0], dt, ig, B * k * H), put(buf[1], dt, hg, B * k * H);
          put(buf[2], dt, b1, k * H), put(buf[3], dt, b2, k * H), put(buf[4], dt, prev, B * H);
          put(buf[5], dt, g1, B * H), put(buf[6], dt, g2, B * H);
          for (int r = 0; r < B; r++)
            for (int j = 0; j < H; j++) {
              double z[4], x = get(buf[4], dt, r * H + j),
                           gh = grads == 2 ? 0 : get(buf[5], dt, r * H + j),
                           gc = gru || grads == 1 ? 0 : get(buf[6], dt, r * H + j);
              for (int q = 0; q < k; q++) {
                int at = r * k * H + q * H + j;
                z[q] = get(buf[0], dt, at) + get(buf[1], dt, at) +
                       (bias ? get(buf[2], dt, q * H + j) + get(buf[3], dt, q * H + j) : 0);
              }
              int o1 = r * H + j;
              if (!gru) {
                double i = sig_d(z[0]), f = sig_d(z[1]), c = tanh(z[2]), o = sig_d(z[3]);
                double cy = f * x + i * c, tc = tanh(cy), gcy = gh * o * (1 - tc * tc) + gc;
                want[0][o1] = o * tc, want[1][o1] = cy;
                int a = r * 4 * H + j;
                want[2][a] = gcy * c * i * (1 - i), want[2][a + H] = gcy * x * f * (1 - f);
                want[2][a + 2 * H] = gcy * i * (1 - c * c),
                                want[2][a + 3 * H] = gh * tc * o * (1 - o);
                want[3][o1] = gcy * f;
              } else {
                double hn = get(buf[1], dt, r * 3 * H + 2 * H + j) +
                            (bias ? get(buf[3], dt, 2 * H + j) : 0);
                double rg = sig_d(z[0]), zg = sig_d(z[1]);
                double n = tanh(get(buf[0], dt, r * 3 * H + 2 * H + j) +
                                (bias ? get(buf[2], dt, 2 * H + j) : 0) + rg * hn);
                double gn = gh * (1 - zg) * (1 - n * n);
                want[0][o1] = n + zg * (x - n);
                int a = r * 3 * H + j;
                want[2][a] = want[4][a] = gn * hn * rg * (1 - rg);
                want[2][a + H] = want[4][a + H] = gh * (x - n) * zg * (1 - zg);
                want[2][a + 2 * H] = gn, want[4][a + 2 * H] = gn * rg;
                want[3][o1] = gh * zg;
              }
            }
          tnk_rnn_cell_args_t a = {.ig = buf[0],
                                   .hg = buf[1],
                                   .b1 = bias ? buf[2] : NULL,
                                   .b2 = bias ? buf[3] : NULL,
                                   .prev = buf[4],
                                   .out0 = buf[7],
                                   .out1 = buf[8],
                                   .ws = buf[9],
                                   .b = B,
                                   .h = H,
                                   .dtype = dt,
                                   .gru = gru};
          tnk_rnn_cell(&a);
          int bad = rnn_close(buf[7], dt, want[0], B * H, "hy");
          if (!gru) bad += rnn_close(buf[8], dt, want[1], B * H, "cy");
          tnk_rnn_cell_args_t g = {.ghy = grads == 2 ? NULL : buf[5],
                                   .gcy = gru || grads == 1 ? NULL : buf[6],
                                   .cy = buf[8],
                                   .prev = buf[4],
                                   .ws = buf[9],
                                   .gx0 = buf[10],
                                   .gx1 = buf[11],
                                   .gprev = buf[12],
                                   .b = B,
                                   .h = H,
                                   .dtype = dt,
                                   .gru = gru,
                                   .backward = 1};
          tnk_rnn_cell(&g);
          bad += rnn_close(buf[10], dt, want[2], B * k * H, "grad gates");
          if (gru) bad += rnn_close(buf[11], dt, want[4], B * k * H, "grad hidden gates");
          bad += rnn_close(buf[12], dt, want[3], B * H, "grad state");
          CHECK(bad == 0);
        }
  CHECK(!tnk_rnn_cell_supported(TNK_F64) && !tnk_rnn_cell_supported(TNK_I64));
}

/* The host provider (kernels/provider.c, generated from kernel_list.h):
 * every id has a name and runs its entry point; its support answers are the
 * library's own probes; the counting provider counts each run per id. */
static void test_host_provider(void) {
  const tnrt_kernel_provider_t *host = tnk_host_provider(), *counting = tnk_counting_provider();
  CHECK(host->api_version == TNRT_PROVIDER_API_VERSION && host->kernel_count == TNK_KERNEL_COUNT);
  CHECK(host->runs_host_code == 1 && counting->kernel_count == TNK_KERNEL_COUNT);
  CHECK(tnk_provider_named("host") == host && tnk_provider_named("counting") == counting);
  CHECK(tnk_provider_named("gpu") == NULL && tnk_provider_named(NULL) == NULL);
  CHECK(tnk_provider_named("kernels-only")->runs_host_code == 0);
  for (int k = 0; k < TNK_KERNEL_COUNT; k++) CHECK(tnk_kernel_names[k] && *tnk_kernel_names[k]);
  CHECK(!strcmp(tnk_kernel_names[TNK_K_GEMM], "GEMM"));
  /* supports: the probes, through the table */
  int agree = 1;
  for (int dt = 0; dt < TNK_DTYPE_COUNT; dt++) {
    for (int op = 0; op < TNK_UNARY_OP_COUNT; op++) {
      tnrt_kernel_query_t q = {op, dt, -1, -1};
      agree &= host->supports(NULL, TNK_K_UNARY, &q) == (tnk_unary_supported(op, dt) != 0);
    }
    for (int op = 0; op < TNK_BINARY_OP_COUNT; op++) {
      tnrt_kernel_query_t q = {op, dt, -1, -1};
      agree &= host->supports(NULL, TNK_K_BINARY, &q) == (tnk_binary_supported(op, dt) != 0);
    }
    tnrt_kernel_query_t q = {-1, dt, -1, -1};
    agree &= host->supports(NULL, TNK_K_GEMM, &q) == (tnk_gemm_supported(dt) != 0);
    for (int odt = 0; odt < TNK_DTYPE_COUNT; odt++) {
      tnrt_kernel_query_t q2 = {-1, dt, odt, -1};
      agree &= host->supports(NULL, TNK_K_SOFTMAX, &q2) == (tnk_softmax_supported(dt, odt) != 0);
    }
  }
  CHECK(agree);
  /* run: a copy and a batch of two through the table, counted */
  uint64_t c0[TNK_KERNEL_COUNT], c1[TNK_KERNEL_COUNT];
  tnk_kernel_launch_counts(c0, 1);
  float src[6] = {1, 2, 3, 4, 5, 6}, dst[6] = {0};
  tnk_copy_args_t a = {0};
  a.shape.ndim = 1;
  a.shape.sizes[0] = 6;
  a.dst = (tnk_view_t){dst, TNK_F32, 0, {1}};
  a.src = (tnk_view_t){src, TNK_F32, 0, {1}};
  counting->run(counting->ctx, TNK_K_COPY, &a);
  for (int i = 0; i < 6; i++) CHECK(dst[i] == src[i]);
  tnk_copy_batch_args_t b = {0};
  b.n = 2;
  b.copy[0] = a;
  b.copy[0].shape.sizes[0] = 3;
  b.copy[0].dst.data = dst + 3;
  b.copy[1] = a;
  b.copy[1].shape.sizes[0] = 3;
  b.copy[1].src.data = src + 3;
  counting->run(counting->ctx, TNK_K_COPY_BATCH, &b);
  CHECK(dst[3] == 1 && dst[4] == 2 && dst[5] == 3 && dst[0] == 4 && dst[1] == 5 && dst[2] == 6);
  host->run(host->ctx, TNK_K_COPY, &a); /* the host provider counts nothing */
  tnk_kernel_launch_counts(c1, 0);
  CHECK(c1[TNK_K_COPY] == 1 && c1[TNK_K_COPY_BATCH] == 1 && c1[TNK_K_GEMM] == 0);
  tnk_kernel_launch_counts(c1, 1);
  tnk_kernel_launch_counts(c1, 0);
  CHECK(c1[TNK_K_COPY] == 0);
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

int main(void) {
  RUN(test_philox_known_answers);
  RUN(test_rnn_cell);
  RUN(test_searchsorted);
  RUN(test_cumext);
  RUN(test_half_conversions);
  RUN(test_copy_strided_cast);
  RUN(test_fill);
  RUN(test_random);
  RUN(test_binary);
  RUN(test_vmath);
  RUN(test_config_variants);
  RUN(test_attention);
  RUN(test_gemm_variants);
  RUN(test_gemm_reports_allocation_failure);
  RUN(test_scan_logsumexp);
  RUN(test_copy_stream);
  RUN(test_layer_norm_pipelined);
  RUN(test_complex_unary);
  RUN(test_grid_sample);
  RUN(test_softmax_pipelined);
  RUN(test_resample_cubic);
  RUN(test_pool3d);
  RUN(test_im2col_3d);
  RUN(test_host_provider);
  RUN(test_binary_inline_operand);
  RUN(test_amx_configured);
#if defined(__x86_64__)
  RUN(test_amx_tile_config_bytes);
  RUN(test_amx_self_test_guard);
#endif
  RUN(test_gemm_bf16_variants);
  RUN(test_gemm_narrow_rounds_once);
  RUN(test_unary);
  RUN(test_pool_upsample);
  RUN(test_trsm);
  RUN(test_activation_backward);
  RUN(test_ternary_softmax_reduce_layernorm);
  RUN(test_softmax_range);
  RUN(test_gather_index_strides);
  return REPORT("test_kernels");
}
