/* The element-wise loops GCC vectorises, compiled once per kernel variant:
 * kernels/ref/eltwise.c (baseline x86-64 or any CPU), kernels/x86/avx2/
 * and avx512/eltwise.c (their directory's -m flags) each include this file
 * with TNK_ELTWISE_LOOPS naming the table it defines (config.h,
 * tnk_eltwise_loops_t). The drivers (unary.c, binary.c) take the table of
 * this process's configuration, so TORCH_NEURONX_ISA forces these too.
 * ISO C mode keeps FMA contraction off, so every variant's arithmetic
 * agrees bit for bit (libmvec's variants of each width may differ in the
 * last ulp).
 *
 * The ops are the rows of eltwise_ops.h. Unary: one loop per (op, dtype)
 * from the row's kernel column; fp32 uses float libm functions, fp64
 * double, half types compute in fp32 and round once. Binary: the ARITH
 * rows' floating loops (the integer, bool, complex and comparison loops do
 * not vectorise usefully and stay in binary.c). */
#ifndef TNK_ELTWISE_LOOPS
#error "define TNK_ELTWISE_LOOPS (the table's name) before including eltwise_loops.h"
#endif

#include <complex.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "dtype.h"
#include "mvec.h"

/* The tables below are filled by designated initializer from the rows of
 * eltwise_ops.h: an op given twice is a compile error, not a silent
 * override. */
#pragma GCC diagnostic error "-Woverride-init"

/* Plain loops the compiler vectorises at this file's ISA (integer
 * rounding, no bf16 instruction: VCVTNEPS2BF16 flushes subnormals). */
static void cvt_f32_to_bf16(uint16_t *restrict y, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = tnk_f32_to_bf16(x[i]);
}
static void cvt_bf16_to_f32(float *restrict y, const uint16_t *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = tnk_bf16_to_f32(x[i]);
}
static void cvt_f16_to_f32(float *restrict y, const uint16_t *restrict x, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__ /* (GCC does not vectorise the scalar conversion) */
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
#endif
  for (; i < n; i++) y[i] = tnk_f16_to_f32(x[i]);
}
static void cvt_f32_to_f16(uint16_t *restrict y, const float *restrict x, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; i++) y[i] = tnk_f32_to_f16(x[i]);
}

/* With F16C, contiguous fp16 loops convert a block at a time with its
 * vector instructions and run the fp32 loop over the block: the same
 * arithmetic (fp16 computes in fp32 and rounds once), where the scalar
 * conversion would keep the loop from vectorising. */
#define F16_BLOCK 256

/* ---- unary ---------------------------------------------------------------- */
#define SIGMOID(x) (1 / (1 + EXP(-(x))))
/* clamp to [0, 6], NaN kept (hardswish / hardsigmoid, as ATen writes them) */
#define CLAMP06(v) ((v) < 0 ? 0 : (v) > 6 ? 6 : (v))
#define LOGIT_CLAMP(x) ((x) < (C)p0 ? (C)p0 : (x) > 1 - (C)p0 ? 1 - (C)p0 : (x))

/* Inverse error function: a rational first guess (Giles, "Approximating the
 * erfinv function", GPU Gems 2012) refined by two Newton steps on erf. */
static double erfinv_d(double y) {
  if (y != y || y < -1 || y > 1) return NAN;
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  double w = -log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int it = 0; it < 2; it++) {
    double d = 1.1283791670955126 * exp(-x * x); /* erf'(x) */
    if (d == 0) break;
    x -= (erf(x) - y) / d;
  }
  return x;
}

static float lgamma_f(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}

static double lgamma_d(double x) {
  int sign;
  return lgamma_r(x, &sign);
}

/* I0, the modified Bessel function of the first kind of order 0: its power
 * series sum ((x/2)^k / k!)^2 (positive terms, no cancellation) up to
 * |x| = 40, the asymptotic series e^x / sqrt(2 pi x) * sum c_k / x^k,
 * c_k = ((2k-1)!!)^2 / (k! 8^k), beyond (below 1e-16 relative there with
 * 20 terms); even in x, inf at +-inf. */
static double i0_d(double x) {
  double ax = fabs(x);
  if (ax != ax) return ax;
  if (ax <= 40) {
    double q = ax * ax / 4, term = 1, sum = 1;
    for (int k = 1; k < 200 && term > sum * 1e-17; k++) {
      term *= q / ((double)k * k);
      sum += term;
    }
    return sum;
  }
  double term = 1, sum = 1;
  for (int k = 1; k <= 20; k++) {
    term *= (2.0 * k - 1) * (2.0 * k - 1) / (8.0 * k * ax);
    sum += term;
  }
  /* e^x split in two so that e^(x/2)^2 / sqrt(...) overflows only where I0 does */
  double h = exp(ax / 2);
  return h * (h / sqrt(2 * 3.14159265358979323846 * ax)) * sum;
}

/* Digamma: the reflection psi(x) = psi(1 - x) - pi / tan(pi x) for x < 0
 * (tan taken of the fractional part, which has the same value and keeps
 * the argument small), psi(x) = psi(x + 1) - 1/x up to x >= 10, then the
 * asymptotic series ln x - 1/(2x) - sum B_2k / (2k x^2k), B_2k the
 * Bernoulli numbers (seven terms: below 1e-16 relative at x = 10). */
static double digamma_d(double x) {
  if (x == 0) return copysign(INFINITY, -x);
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    return digamma_d(1 - x) - M_PI / tan(M_PI * (x - trunc(x)));
  }
  double acc = 0;
  while (x < 10) {
    acc -= 1 / x;
    x += 1;
  }
  double z = 1 / (x * x);
  double series =
      z * (1.0 / 12 -
           z * (1.0 / 120 -
                z * (1.0 / 252 -
                     z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760 - z * (1.0 / 12)))))));
  return acc + log(x) - 0.5 / x - series;
}

#define DEFINE_LOOP(T, C, LOAD, STORE, NAME, EXPR)                                                \
  static void NAME(char *o, const char *in, int64_t so, int64_t si, int64_t n, const double *p) { \
    const double p0 = p[0], p1 = p[1], p2 = p[2];                                                 \
    (void)p0;                                                                                     \
    (void)p1;                                                                                     \
    (void)p2;                                                                                     \
    if (so == sizeof(T) && si == sizeof(T)) {                                                     \
      T *po = (T *)o; /* po may equal pi (in place): neither is restrict */                       \
      const T *pi = (const T *)in;                                                                \
      for (int64_t k = 0; k < n; k++) {                                                           \
        C x = (C)LOAD(pi[k]);                                                                     \
        po[k] = STORE(EXPR);                                                                      \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    for (int64_t k = 0; k < n; k++) {                                                             \
      T v;                                                                                        \
      memcpy(&v, in + k * si, sizeof v);                                                          \
      C x = (C)LOAD(v);                                                                           \
      T r = STORE(EXPR);                                                                          \
      memcpy(o + k * so, &r, sizeof r);                                                           \
    }                                                                                             \
  }

#define ID(x) (x)

/* fp32 (and half types through fp32) */
#define EXP expf
#define LOG logf
#define LOG1P log1pf
#define EXPM1 expm1f
#define TANH tanhf
#define ERF erff
#define SQRT sqrtf
#define FABS fabsf
#define SIN sinf
#define COS cosf
#define POW powf
#define NEARBYINT nearbyintf
#define TRUNC truncf
#define FLOOR floorf
#define CEIL ceilf
#define ATAN atanf
#define ASIN asinf
#define ACOS acosf
#define TAN tanf
#define SINH sinhf
#define COSH coshf
#define ASINH asinhf
#define ACOSH acoshf
#define ATANH atanhf
#define EXP2 exp2f
#define LOG2 log2f
#define LOG10 log10f
#define ERFC erfcf
#define LGAMMA lgamma_f
#define C float
#define F32_LOOP(OPID, N, E, R) DEFINE_LOOP(float, float, ID, ID, f32_##N, E)
#define BF16_LOOP(OPID, N, E, R) \
  DEFINE_LOOP(uint16_t, float, tnk_bf16_to_f32, tnk_f32_to_bf16, bf16_##N, E)
#define F16_LOOP(OPID, N, E, R) \
  DEFINE_LOOP(uint16_t, float, tnk_f16_to_f32, tnk_f32_to_f16, f16_##N, E)
TNK_UNARY_OPS(F32_LOOP)
TNK_UNARY_OPS(BF16_LOOP)
TNK_UNARY_OPS(F16_LOOP)
#ifdef __F16C__
#define F16_BLOCKED_U(OPID, N, E, R)                                               \
  static void f16b_##N(char *o, const char *in, int64_t so, int64_t si, int64_t n, \
                       const double *p) {                                          \
    if (so != 2 || si != 2) {                                                      \
      f16_##N(o, in, so, si, n, p);                                                \
      return;                                                                      \
    }                                                                              \
    float x[F16_BLOCK], y[F16_BLOCK];                                              \
    for (int64_t k = 0; k < n; k += F16_BLOCK) {                                   \
      int64_t w = n - k < F16_BLOCK ? n - k : F16_BLOCK;                           \
      cvt_f16_to_f32(x, (const uint16_t *)(const void *)in + k, w);                \
      f32_##N((char *)y, (const char *)x, 4, 4, w, p);                             \
      cvt_f32_to_f16((uint16_t *)(void *)o + k, y, w);                             \
    }                                                                              \
  }
TNK_UNARY_OPS(F16_BLOCKED_U)
#define F16_FN(N) f16b_##N
#else
#define F16_FN(N) f16_##N
#endif
#undef EXP
#undef LOG
#undef LOG1P
#undef EXPM1
#undef TANH
#undef ERF
#undef SQRT
#undef FABS
#undef SIN
#undef COS
#undef POW
#undef NEARBYINT
#undef TRUNC
#undef FLOOR
#undef CEIL
#undef ATAN
#undef ASIN
#undef ACOS
#undef TAN
#undef SINH
#undef COSH
#undef ASINH
#undef ACOSH
#undef ATANH
#undef EXP2
#undef LOG2
#undef LOG10
#undef ERFC
#undef LGAMMA
#undef C

/* fp64 */
#define EXP exp
#define LOG log
#define LOG1P log1p
#define EXPM1 expm1
#define TANH tanh
#define ERF erf
#define SQRT sqrt
#define FABS fabs
#define SIN sin
#define COS cos
#define POW pow
#define NEARBYINT nearbyint
#define TRUNC trunc
#define FLOOR floor
#define CEIL ceil
#define ATAN atan
#define ASIN asin
#define ACOS acos
#define TAN tan
#define SINH sinh
#define COSH cosh
#define ASINH asinh
#define ACOSH acosh
#define ATANH atanh
#define EXP2 exp2
#define LOG2 log2
#define LOG10 log10
#define ERFC erfc
#define LGAMMA lgamma_d
#define C double
#define F64_LOOP(OPID, N, E, R) DEFINE_LOOP(double, double, ID, ID, f64_##N, E)
TNK_UNARY_OPS(F64_LOOP)

#define TABLE_ROW(ID, N, E, R) \
  [TNK_##ID] = {               \
      [TNK_F16] = F16_FN(N), [TNK_BF16] = bf16_##N, [TNK_F32] = f32_##N, [TNK_F64] = f64_##N},
#define INEG(x) ((int64_t)(0 - (uint64_t)(x)))
#define IABS(x) ((x) < 0 ? INEG(x) : (x))
#define INT_LOOP(T, NAME, EXPR) DEFINE_LOOP(T, int64_t, ID, (T), NAME, EXPR)
#define INT_UNARY(T, SFX) INT_LOOP(T, neg_##SFX, INEG(x)) INT_LOOP(T, abs_##SFX, IABS(x))
INT_UNARY(uint8_t, u8)
INT_UNARY(int8_t, i8)
INT_UNARY(int16_t, i16)
INT_UNARY(int32_t, i32)
INT_UNARY(int64_t, i64)

/* ---- binary (floating) ------------------------------------------------------ */

#define OP_ADD(x, y, al) ((x) + (al) * (y))
#define OP_SUB(x, y, al) ((x) - (al) * (y))
#define OP_MUL(x, y, al) ((x) * (y))
#define OP_DIV(x, y, al) ((x) / (y))
/* maximum/minimum propagate NaN, as torch.maximum does */
#define OP_MAXIMUM(x, y, al) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) > (y) ? (x) : (y))
#define OP_MINIMUM(x, y, al) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) < (y) ? (x) : (y))

/* activation backward, in the compute type C (float or double) */
/* in the compute type: float math for fp32 and half types, double for fp64 */
#define ERF_C(x) (sizeof(x) == sizeof(float) ? erff((float)(x)) : erf((double)(x)))
#define EXP_C(x) (sizeof(x) == sizeof(float) ? expf((float)(x)) : exp((double)(x)))
#define OP_GELU_BWD(g, x, al)                                             \
  ((g) * ((ctype_t)0.5 * (1 + ERF_C((x) * (ctype_t)0.7071067811865476)) + \
          (x) * (ctype_t)0.3989422804014327 * EXP_C((ctype_t) - 0.5 * (x) * (x))))
#define OP_GELU_TANH_BWD(g, x, al) gelu_tanh_bwd((g), (x))
#define OP_SILU_BWD(g, x, al) \
  ((g) * (1 / (1 + EXP_C(-(x)))) * (1 + (x) * (1 - 1 / (1 + EXP_C(-(x))))))
#define OP_SIGMOID_BWD(g, y, al) ((g) * (1 - (y)) * (y))
#define OP_TANH_BWD(g, y, al) ((g) * (1 - (y) * (y)))
#define OP_THRESHOLD_BWD(g, x, al) ((x) <= (al) ? 0 : (g))
#define OP_LEAKY_RELU_BWD(g, x, al) ((x) > 0 ? (g) : (g) * (al))
#define OP_HARDTANH_BWD(g, x, al) ((x) <= (al) || (x) >= beta ? 0 : (g))
#define OP_HARDSWISH_BWD(g, x, al) ((x) < -3 ? 0 : (x) <= 3 ? (g) * ((x) / 3 + (ctype_t)0.5) : (g))
#define OP_HARDSIGMOID_BWD(g, x, al) ((x) > -3 && (x) < 3 ? (g) * ((ctype_t)1 / 6) : 0)
#define OP_MISH_BWD(g, x, al)                                                     \
  (sizeof(ctype_t) == sizeof(float) ? (ctype_t)mish_bwd_f((float)(g), (float)(x)) \
                                    : (ctype_t)mish_bwd((g), (x)))
/* ELU: al = alpha, beta = scale, gamma = input_scale; from the input or, for
 * the _RESULT form, from the output y (then exp(x * is) - 1 = y / (al*sc)) */
#define OP_ELU_BWD(g, x, al) \
  ((x) <= 0 ? (g) * gamma * ((al) * beta) * EXP_C((x) * gamma) : (g) * beta)
#define OP_ELU_RESULT_BWD(g, y, al) ((y) <= 0 ? (g) * gamma * ((y) + (al) * beta) : (g) * beta)
#define OP_LOGIT_BWD(g, x, al) logit_bwd((g), (x), (al))
#define OP_ATAN2(x, y, al) \
  (sizeof(x) == sizeof(float) ? atan2f((float)(x), (float)(y)) : atan2((double)(x), (double)(y)))
#define LOG_C(x) (sizeof(x) == sizeof(float) ? logf((float)(x)) : log((double)(x)))
#define OP_XLOGY(x, y, al) ((y) != (y) ? (y) : (x) == 0 ? 0 : (x) * LOG_C(y))
/* fmax/fmin take the other operand where one is NaN */
#define OP_FMAX(x, y, al) ((x) != (x) ? (y) : (y) != (y) ? (x) : (x) > (y) ? (x) : (y))
#define OP_FMIN(x, y, al) ((x) != (x) ? (y) : (y) != (y) ? (x) : (x) < (y) ? (x) : (y))
#define FLT_FN2(F, x, y) \
  (sizeof(x) == sizeof(float) ? F##f((float)(x), (float)(y)) : F((double)(x), (double)(y)))
#define OP_COPYSIGN(x, y, al) FLT_FN2(copysign, x, y)
#define OP_HYPOT(x, y, al) FLT_FN2(hypot, x, y)
#define OP_FMOD(x, y, al) FLT_FN2(fmod, x, y)
#define OP_HEAVISIDE(x, y, al) ((x) == 0 ? (y) : (ctype_t)((x) > 0))
/* log(e^x + e^y) as max + log1p(e^-|x - y|); equal infinities give
 * themselves (their difference is NaN), as PyTorch's kernels define */
#define LOG1P_C(x) (sizeof(x) == sizeof(float) ? log1pf((float)(x)) : log1p((double)(x)))
#define EXP2_C(x) (sizeof(x) == sizeof(float) ? exp2f((float)(x)) : exp2((double)(x)))
#define FABS_C(x) (sizeof(x) == sizeof(float) ? fabsf((float)(x)) : fabs((double)(x)))
#define OP_LOGADDEXP(x, y, al) \
  (isinf(x) && (x) == (y) ? (x) : ((x) > (y) ? (x) : (y)) + LOG1P_C(EXP_C(-FABS_C((x) - (y)))))
#define OP_LOGADDEXP2(x, y, al)                       \
  (isinf(x) && (x) == (y) ? (x)                       \
                          : ((x) > (y) ? (x) : (y)) + \
                                LOG1P_C(EXP2_C(-FABS_C((x) - (y)))) * (ctype_t)1.4426950408889634)

static inline double gelu_tanh_bwd(double g, double x) {
  const double k = 0.7978845608028654, c = 0.044715;
  double inner = k * (x + c * x * x * x);
  double t = tanh(inner);
  double left = 0.5 * x, right = 1.0 + t;
  double dinner = k * (1.0 + 3.0 * c * x * x);
  return g * (0.5 * right + left * (1.0 - t * t) * dinner);
}

/* fp32 (and half types) in float math, which vectorises through mvec.h:
 * the double form ran 10x slower than PyTorch CPU */
static inline float mish_bwd_f(float g, float x) {
  float sig = 1.0f / (1.0f + expf(-x));
  float tsp = tanhf(log1pf(expf(x)));
  return g * (tsp + x * sig * (1.0f - tsp * tsp));
}
static inline double mish_bwd(double g, double x) {
  double sig = 1.0 / (1.0 + exp(-x));
  double tsp = tanh(log1p(exp(x)));
  return g * (tsp + x * sig * (1.0 - tsp * tsp));
}
static inline double logit_bwd(double g, double x, double eps) {
  if (eps < 0) return x < 0 || x > 1 ? NAN : g / (x * (1 - x));
  return x < eps || x > 1 - eps ? 0 : g / (x * (1 - x));
}

/* Python's floor division and modulo on floats, as PyTorch computes them
 * (through fmod, so that a - b * floor_div(a, b) == remainder(a, b)). */
static inline double floor_div_f(double a, double b, double al) {
  (void)al;
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  return div - fl > 0.5 ? fl + 1 : fl;
}
static inline double trunc_div_f(double a, double b, double al) {
  (void)al;
  return trunc(a / b);
}
static inline double remainder_f(double a, double b, double al) {
  (void)al;
  double m = fmod(a, b);
  return m != 0 && (b < 0) != (m < 0) ? m + b : m;
}
static inline double pow_f(double a, double b, double al) {
  (void)al;
  return pow(a, b);
}

/* T: storage type, C: compute type, LOAD/STORE convert between them. */
#define FLOAT_LOOP(NAME, OP, T, C, LOAD, STORE)                                                  \
  static int64_t NAME(char *o, const char *a, const char *b, int64_t so, int64_t sa, int64_t sb, \
                      int64_t n, const double *al, int64_t ial) {                                \
    (void)ial;                                                                                   \
    typedef C ctype_t __attribute__((unused)); /* compute type, for op macros */                 \
    C alpha = (C)al[0], beta = (C)al[1], gamma = (C)al[2];                                       \
    const int ks = (int)al[4]; /* operand given at compute precision */                          \
    const C kv = (C)al[3];                                                                       \
    (void)alpha;                                                                                 \
    (void)beta;                                                                                  \
    (void)gamma;                                                                                 \
    if (so == sizeof(T) && sa == sizeof(T) && sb == sizeof(T)) {                                 \
      T *po = (T *)o; /* po may equal pa or pb (in place): none is restrict */                   \
      const T *pa = (const T *)a, *pb = (const T *)b;                                            \
      for (int64_t i = 0; i < n; i++) po[i] = STORE(OP((C)LOAD(pa[i]), (C)LOAD(pb[i]), alpha));  \
      return 0;                                                                                  \
    }                                                                                            \
    if (so == sizeof(T) && (sa == 0) != (sb == 0) &&                                             \
        (sa == sizeof(T) || sb == sizeof(T))) { /* one scalar operand */                         \
      T *po = (T *)o;                                                                            \
      T sv;                                                                                      \
      memcpy(&sv, sa == 0 ? a : b, sizeof sv);                                                   \
      const C k = ks ? kv : (C)LOAD(sv);                                                         \
      const T *pv = (const T *)(sa == 0 ? b : a);                                                \
      if (sa == 0)                                                                               \
        for (int64_t i = 0; i < n; i++) po[i] = STORE(OP(k, (C)LOAD(pv[i]), alpha));             \
      else                                                                                       \
        for (int64_t i = 0; i < n; i++) po[i] = STORE(OP((C)LOAD(pv[i]), k, alpha));             \
      return 0;                                                                                  \
    }                                                                                            \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T x, y;                                                                                    \
      memcpy(&x, a + i * sa, sizeof x);                                                          \
      memcpy(&y, b + i * sb, sizeof y);                                                          \
      T r = STORE(OP(ks == 1 ? kv : (C)LOAD(x), ks == 2 ? kv : (C)LOAD(y), alpha));              \
      memcpy(o + i * so, &r, sizeof r);                                                          \
    }                                                                                            \
    return 0;                                                                                    \
  }
#define ID(x) (x)
#define F32_OF_BF16(x) tnk_bf16_to_f32(x)
#define BF16_OF_F32(x) tnk_f32_to_bf16(x)
#define F32_OF_F16(x) tnk_f16_to_f32(x)
#define F16_OF_F32(x) tnk_f32_to_f16(x)
#ifdef __F16C__
/* contiguous operands, or one of them a scalar (stride 0) */
#define F16_BLOCKED_B(OPN)                                                                        \
  static int64_t f16b_##OPN(char *o, const char *a, const char *b, int64_t so, int64_t sa,        \
                            int64_t sb, int64_t n, const double *al, int64_t ial) {               \
    if (so != 2 || (sa != 2 && sa != 0) || (sb != 2 && sb != 0) || (sa == 0 && sb == 0))          \
      return f16_##OPN(o, a, b, so, sa, sb, n, al, ial);                                          \
    float x[F16_BLOCK], y[F16_BLOCK], r[F16_BLOCK], ka = 0, kb = 0;                               \
    if (sa == 0) ka = tnk_f16_to_f32(*(const uint16_t *)(const void *)a);                         \
    if (sb == 0) kb = tnk_f16_to_f32(*(const uint16_t *)(const void *)b);                         \
    for (int64_t k = 0; k < n; k += F16_BLOCK) {                                                  \
      int64_t w = n - k < F16_BLOCK ? n - k : F16_BLOCK;                                          \
      if (sa) cvt_f16_to_f32(x, (const uint16_t *)(const void *)a + k, w);                        \
      if (sb) cvt_f16_to_f32(y, (const uint16_t *)(const void *)b + k, w);                        \
      f32_##OPN((char *)r, sa ? (const char *)x : (const char *)&ka,                              \
                sb ? (const char *)y : (const char *)&kb, 4, sa ? 4 : 0, sb ? 4 : 0, w, al, ial); \
      cvt_f32_to_f16((uint16_t *)(void *)o + k, r, w);                                            \
    }                                                                                             \
    return 0;                                                                                     \
  }
#else
#define F16_BLOCKED_B(OPN)
#endif
#define FLOAT_OPS(OPN, OP)                                              \
  FLOAT_LOOP(f32_##OPN, OP, float, float, ID, ID)                       \
  FLOAT_LOOP(f64_##OPN, OP, double, double, ID, ID)                     \
  FLOAT_LOOP(bf16_##OPN, OP, uint16_t, float, F32_OF_BF16, BF16_OF_F32) \
  FLOAT_LOOP(f16_##OPN, OP, uint16_t, float, F32_OF_F16, F16_OF_F32)    \
  F16_BLOCKED_B(OPN)
/* the floating loops of the table's ARITH rows */
#define FLOAT_ROW_LOOPS(ID, N, KIND, OP, R) FLOAT_LOOPS_##KIND(N, OP)
#define FLOAT_LOOPS_ARITH(N, OP) FLOAT_OPS(N, OP)
#define FLOAT_LOOPS_CMP(N, OP)
#define FLOAT_LOOPS_BITS(N, OP)
TNK_BINARY_OPS(FLOAT_ROW_LOOPS)

/* ---- the table ------------------------------------------------------------ */

#define FROW(OPN) \
  {[TNK_F16] = F16_FN(OPN), [TNK_BF16] = bf16_##OPN, [TNK_F32] = f32_##OPN, [TNK_F64] = f64_##OPN}
#define BINARY_ROW(ID, N, KIND, OP, R) BINARY_ROW_##KIND(TNK_##ID, N)
#define BINARY_ROW_ARITH(OPID, N) [OPID] = FROW(N),
#define BINARY_ROW_CMP(OPID, N)
#define BINARY_ROW_BITS(OPID, N)

/* Contiguous fp32 addcmul / addcdiv / lerp (the optimizers' steps), computed
 * as ternary.c's generic loop does. o may be any of a, b, c (in place), so
 * no pointer is restrict; the compiler's run-time overlap check still takes
 * the vector loop when o equals an input (measured: same speed in place). */
static void ternary_f32(int op, float *o, const float *a, const float *b, const float *c, float v,
                        int64_t n) {
  switch (op) {
    case TNK_ADDCMUL:
      for (int64_t i = 0; i < n; i++) o[i] = a[i] + v * b[i] * c[i];
      break;
    case TNK_ADDCDIV:
      for (int64_t i = 0; i < n; i++) o[i] = a[i] + v * (b[i] / c[i]);
      break;
    case TNK_LERP_TENSOR:
      for (int64_t i = 0; i < n; i++) {
        float w = c[i], d = b[i] - a[i];
        o[i] = w < 0.5f ? a[i] + w * d : b[i] - d * (1 - w);
      }
      break;
    default:
      if (v < 0.5f)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + v * (b[i] - a[i]);
      else
        for (int64_t i = 0; i < n; i++) o[i] = b[i] - (b[i] - a[i]) * (1 - v);
      break;
  }
}

const tnk_eltwise_loops_t TNK_ELTWISE_LOOPS = {
    .ternary_f32 = ternary_f32,
    .f32_to_bf16 = cvt_f32_to_bf16,
    .bf16_to_f32 = cvt_bf16_to_f32,
    .f16_to_f32 = cvt_f16_to_f32,
    .f32_to_f16 = cvt_f32_to_f16,
    .unary = {TNK_UNARY_OPS(TABLE_ROW)},
    .int_neg = {[TNK_U8] = neg_u8,
                [TNK_I8] = neg_i8,
                [TNK_I16] = neg_i16,
                [TNK_I32] = neg_i32,
                [TNK_I64] = neg_i64},
    .int_abs = {[TNK_U8] = abs_u8,
                [TNK_I8] = abs_i8,
                [TNK_I16] = abs_i16,
                [TNK_I32] = abs_i32,
                [TNK_I64] = abs_i64},
    .binary = {TNK_BINARY_OPS(BINARY_ROW)},
};
