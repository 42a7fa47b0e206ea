/* Elementwise unary math on strided views of floating dtypes. One loop per
 * (op, dtype) from macros; fp32 uses float libm functions, fp64 double,
 * half types compute in fp32 and round once. */
#define _GNU_SOURCE /* lgammaf_r / lgamma_r: lgamma without the global signgam */
#include <complex.h>
#include <math.h>

#include "dtype.h"
#include "mvec.h"
#include "tnk.h"
#include "vmath.h"

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
  double series = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 -
                  z * (1.0 / 132 - z * (691.0 / 32760 - z * (1.0 / 12)))))));
  return acc + log(x) - 0.5 / x - series;
}

#define UNARY_OPS(X)                                                          \
  X(exp, EXP(x))                                                              \
  X(log, LOG(x))                                                              \
  X(log1p, LOG1P(x))                                                          \
  X(expm1, EXPM1(x))                                                          \
  X(tanh, TANH(x))                                                            \
  X(sigmoid, SIGMOID(x))                                                      \
  X(gelu, (x) * (C)0.5 * (1 + ERF((x) * (C)0.7071067811865476)))              \
  X(gelu_tanh, (C)0.5 * (x) *                                                 \
                   (1 + TANH((C)0.7978845608028654 *                          \
                             ((x) + (C)0.044715 * (x) * (x) * (x)))))         \
  X(silu, (x) * SIGMOID(x))                                                   \
  X(relu, (x) > 0 ? (x) : ((x) != (x) ? (x) : 0))                             \
  X(rsqrt, 1 / SQRT(x))                                                       \
  X(sqrt, SQRT(x))                                                            \
  X(neg, -(x))                                                                \
  X(abs, FABS(x))                                                             \
  X(sin, SIN(x))                                                              \
  X(cos, COS(x))                                                              \
  X(erf, ERF(x))                                                              \
  X(reciprocal, 1 / (x))                                                      \
  X(pow_scalar, (p0 == 2.0 ? (x) * (x) : p0 == 0.5 ? SQRT(x) : p0 == 1.0 ? (x) : POW(x, (C)p0)))                                                \
  X(ceil, CEIL(x))                                                            \
  X(floor, FLOOR(x))                                                          \
  X(trunc, TRUNC(x))                                                          \
  X(round, NEARBYINT(x))                                                      \
  X(atan, ATAN(x))                                                            \
  X(asin, ASIN(x))                                                            \
  X(acos, ACOS(x))                                                            \
  X(tan, TAN(x))                                                              \
  X(sinh, SINH(x))                                                            \
  X(cosh, COSH(x))                                                            \
  X(asinh, ASINH(x))                                                          \
  X(acosh, ACOSH(x))                                                          \
  X(atanh, ATANH(x))                                                          \
  X(exp2, EXP2(x))                                                            \
  X(log2, LOG2(x))                                                            \
  X(log10, LOG10(x))                                                          \
  X(frac, (x) - TRUNC(x))                                                     \
  X(erfinv, (C)erfinv_d((double)(x)))                                         \
  X(mish, (x) * TANH(LOG1P(EXP(x))))                                          \
  X(hardswish, (x) * CLAMP06((x) + 3) / 6)                                    \
  X(hardsigmoid, CLAMP06((x) + 3) / 6)                                        \
  X(leaky_relu, (x) > 0 ? (x) : (x) * (C)p0)                                  \
  X(hardtanh, (x) < (C)p0 ? (C)p0 : (x) > (C)p1 ? (C)p1 : (x))                \
  X(elu, ({ /* expm1 of min(x, 0) on every lane: a call outside the branch vectorises */ \
    C em_ = EXPM1(((x) < 0 ? (x) : 0) * (C)p2);                               \
    (x) <= 0 ? em_ * ((C)p0 * (C)p1) : (x) * (C)p1; }))                       \
  X(logit, p0 < 0 ? LOG((x) / (1 - (x)))                                      \
                  : LOG(LOGIT_CLAMP(x) / (1 - LOGIT_CLAMP(x))))               \
  X(nan_to_num, (x) != (x) ? (C)p0 : (x) == (C)INFINITY ? (C)p1               \
                : (x) == -(C)INFINITY ? (C)p2 : (x))                          \
  X(erfc, ERFC(x))                                                            \
  X(lgamma, LGAMMA(x))                                                        \
  X(digamma, (C)digamma_d((double)(x)))

typedef void (*uloop_fn)(char *o, const char *i, int64_t so, int64_t si,
                         int64_t n, const double *p);

#define DEFINE_LOOP(T, C, LOAD, STORE, NAME, EXPR)                            \
  TNK_VECTOR_CLONES static void NAME(char *o, const char *in, int64_t so, int64_t si,          \
                   int64_t n, const double *p) {                              \
    const double p0 = p[0], p1 = p[1], p2 = p[2];                             \
    (void)p0;                                                                 \
    (void)p1;                                                                 \
    (void)p2;                                                                 \
    if (so == sizeof(T) && si == sizeof(T)) {                                 \
      T *restrict po = (T *)o;                                                \
      const T *restrict pi = (const T *)in;                                   \
      for (int64_t k = 0; k < n; k++) {                                       \
        C x = (C)LOAD(pi[k]);                                                 \
        po[k] = STORE(EXPR);                                                  \
      }                                                                       \
      return;                                                                 \
    }                                                                         \
    for (int64_t k = 0; k < n; k++) {                                         \
      T v;                                                                    \
      memcpy(&v, in + k * si, sizeof v);                                      \
      C x = (C)LOAD(v);                                                       \
      T r = STORE(EXPR);                                                      \
      memcpy(o + k * so, &r, sizeof r);                                       \
    }                                                                         \
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
#define F32_LOOP(N, E) DEFINE_LOOP(float, float, ID, ID, f32_##N, E)
#define BF16_LOOP(N, E) \
  DEFINE_LOOP(uint16_t, float, tnk_bf16_to_f32, tnk_f32_to_bf16, bf16_##N, E)
#define F16_LOOP(N, E) \
  DEFINE_LOOP(uint16_t, float, tnk_f16_to_f32, tnk_f32_to_f16, f16_##N, E)
UNARY_OPS(F32_LOOP)
UNARY_OPS(BF16_LOOP)
UNARY_OPS(F16_LOOP)
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
#define F64_LOOP(N, E) DEFINE_LOOP(double, double, ID, ID, f64_##N, E)
UNARY_OPS(F64_LOOP)

#define TABLE_ROW(N, E)                                                       \
  {[TNK_F16] = f16_##N, [TNK_BF16] = bf16_##N, [TNK_F32] = f32_##N,           \
   [TNK_F64] = f64_##N},
static const uloop_fn k_uloops[TNK_UNARY_OP_COUNT][TNK_DTYPE_COUNT] = {
    UNARY_OPS(TABLE_ROW)};

/* Integer negation and absolute value, wrapping as PyTorch's do. */
#define INEG(x) ((int64_t)(0 - (uint64_t)(x)))
#define IABS(x) ((x) < 0 ? INEG(x) : (x))
#define INT_LOOP(T, NAME, EXPR) DEFINE_LOOP(T, int64_t, ID, (T), NAME, EXPR)
#define INT_UNARY(T, SFX) INT_LOOP(T, neg_##SFX, INEG(x)) INT_LOOP(T, abs_##SFX, IABS(x))
INT_UNARY(uint8_t, u8)
INT_UNARY(int8_t, i8)
INT_UNARY(int16_t, i16)
INT_UNARY(int32_t, i32)
INT_UNARY(int64_t, i64)
static const uloop_fn k_int_uloops[2][TNK_DTYPE_COUNT] = {
    {[TNK_U8] = neg_u8, [TNK_I8] = neg_i8, [TNK_I16] = neg_i16, [TNK_I32] = neg_i32,
     [TNK_I64] = neg_i64},
    {[TNK_U8] = abs_u8, [TNK_I8] = abs_i8, [TNK_I16] = abs_i16, [TNK_I32] = abs_i32,
     [TNK_I64] = abs_i64}};

static uloop_fn uloop(int op, int dtype) {
  if (op < 0 || op >= TNK_UNARY_OP_COUNT || dtype < 0 || dtype >= TNK_DTYPE_COUNT) return NULL;
  if (k_uloops[op][dtype]) return k_uloops[op][dtype];
  if (op == TNK_NEG) return k_int_uloops[0][dtype];
  if (op == TNK_ABS) return k_int_uloops[1][dtype];
  return NULL;
}

int tnk_unary_supported(int op, int dtype) { return uloop(op, dtype) != NULL; }

typedef struct un_ctx {
  tnk_shape_t shape;
  tnk_view_t v[2];
  uloop_fn fn;
  int64_t esz;
  double p[3];
  int vkind; /* 1 sigmoid, 2 silu, 3 exp, 4 gelu, 5 gelu tanh: contiguous fp32 vector bodies */
} un_ctx_t;

static void un_rows(void *p, int64_t begin, int64_t end) {
  const un_ctx_t *c = p;
  int nd = c->shape.ndim;
  int64_t inner = c->shape.sizes[nd - 1];
  for (int64_t r = begin; r < end; r++) {
    int64_t off[2] = {0, 0}, rem = r;
    for (int d = nd - 2; d >= 0; d--) {
      int64_t idx = rem % c->shape.sizes[d];
      rem /= c->shape.sizes[d];
      off[0] += idx * c->v[0].strides[d];
      off[1] += idx * c->v[1].strides[d];
    }
    c->fn((char *)c->v[0].data + off[0] * c->esz,
          (const char *)c->v[1].data + off[1] * c->esz,
          c->v[0].strides[nd - 1] * c->esz, c->v[1].strides[nd - 1] * c->esz,
          inner, c->p);
  }
}

static void un_chunks(void *p, int64_t begin, int64_t end) {
  const un_ctx_t *c = p;
  if (c->vkind == 3) { /* contiguous fp32 exp */
    tnk_vexp_sum_f32((const float *)c->v[1].data + begin, 0.0f, (float *)c->v[0].data + begin,
                     end - begin);
    return;
  }
  if (c->vkind >= 4) { /* contiguous fp32 gelu */
    tnk_vgelu_f32((const float *)c->v[1].data + begin, (float *)c->v[0].data + begin,
                  end - begin, c->vkind == 5);
    return;
  }
  if (c->vkind) { /* contiguous fp32 sigmoid / silu: the vector body */
    tnk_vsigmoid_f32((const float *)c->v[1].data + begin, (float *)c->v[0].data + begin,
                     end - begin, c->vkind == 2);
    return;
  }
  c->fn((char *)c->v[0].data + begin * c->v[0].strides[0] * c->esz,
        (const char *)c->v[1].data + begin * c->v[1].strides[0] * c->esz,
        c->v[0].strides[0] * c->esz, c->v[1].strides[0] * c->esz, end - begin,
        c->p);
}

void tnk_unary(const tnk_unary_args_t *a) {
  if (!tnk_unary_supported(a->op, a->dtype)) return;
  un_ctx_t c = {.shape = a->shape, .v = {a->out, a->in}};
  tnk_coalesce(&c.shape, c.v, 2);
  int64_t n = tnk_numel(&c.shape);
  if (n == 0) return;
  if (c.shape.ndim == 0) {
    c.shape.ndim = 1;
    c.shape.sizes[0] = 1;
    c.v[0].strides[0] = c.v[1].strides[0] = 0;
  }
  c.fn = uloop(a->op, a->dtype);
  c.esz = (int64_t)tnk_dtype_size(a->dtype);
  c.p[0] = a->p0;
  c.p[1] = a->p1;
  c.p[2] = a->p2;
  int64_t inner = c.shape.sizes[c.shape.ndim - 1];
  if (c.shape.ndim == 1 && a->dtype == TNK_F32 && c.v[0].strides[0] == 1 &&
      c.v[1].strides[0] == 1) {
    static const int vbody[TNK_UNARY_OP_COUNT] = {
        [TNK_SIGMOID] = 1, [TNK_SILU] = 2, [TNK_EXP] = 3, [TNK_GELU] = 4, [TNK_GELU_TANH] = 5};
    c.vkind = vbody[a->op];
  }
  if (c.shape.ndim == 1)
    tnk_parallel_for(inner, 1 << 14, un_chunks, &c);
  else
    tnk_parallel_for(n / inner, inner >= (1 << 14) ? 1 : (1 << 14) / inner,
                     un_rows, &c);
}

/* ---- element-wise maps without a vector path ----------------------------- */
/* Classification and bitwise not share one driver: walk the coalesced
 * shape, hand each (out, in) element pair to the per-op function. */

typedef struct map2 map2_t;
typedef void (*elem2_fn)(char *out, const char *in, const map2_t *m);
struct map2 {
  tnk_shape_t shape;
  tnk_view_t out, in;
  int64_t oesz, iesz;
  int op, dt;
  elem2_fn fn;
};

/* Rows of the coalesced shape: the index is decomposed once per row, the
 * innermost dimension walked with its strides. */
static void map2_range(void *p, int64_t begin, int64_t end) {
  const map2_t *m = p;
  int nd = m->shape.ndim;
  int64_t inner = m->shape.sizes[nd - 1];
  int64_t so = m->out.strides[nd - 1] * m->oesz, si = m->in.strides[nd - 1] * m->iesz;
  for (int64_t r = begin; r < end; r++) {
    int64_t rem = r, oo = 0, io = 0;
    for (int d = nd - 2; d >= 0; d--) {
      int64_t idx = rem % m->shape.sizes[d];
      rem /= m->shape.sizes[d];
      oo += idx * m->out.strides[d];
      io += idx * m->in.strides[d];
    }
    char *o = (char *)m->out.data + oo * m->oesz;
    const char *in = (const char *)m->in.data + io * m->iesz;
    for (int64_t k = 0; k < inner; k++) m->fn(o + k * so, in + k * si, m);
  }
}

/* One row split in chunks (the coalesced shape is one dimension). */
static void map2_chunks(void *p, int64_t begin, int64_t end) {
  const map2_t *m = p;
  int64_t so = m->out.strides[0] * m->oesz, si = m->in.strides[0] * m->iesz;
  char *o = (char *)m->out.data;
  const char *in = (const char *)m->in.data;
  for (int64_t k = begin; k < end; k++) m->fn(o + k * so, in + k * si, m);
}

static void map2_run(map2_t *m) {
  tnk_view_t v[2] = {m->out, m->in};
  tnk_coalesce(&m->shape, v, 2);
  m->out = v[0];
  m->in = v[1];
  int64_t n = tnk_numel(&m->shape);
  if (n <= 0) return;
  if (m->shape.ndim == 0) {
    m->shape.ndim = 1;
    m->shape.sizes[0] = 1;
    m->out.strides[0] = m->in.strides[0] = 0;
  }
  int64_t inner = m->shape.sizes[m->shape.ndim - 1];
  if (m->shape.ndim == 1)
    tnk_parallel_for(n, 1 << 15, map2_chunks, m);
  else
    tnk_parallel_for(n / inner, inner >= (1 << 15) ? 1 : (1 << 15) / inner, map2_range, m);
}

static void classify_elem(char *out, const char *in, const map2_t *m) {
  double x;
  if (m->dt == TNK_F32) {
    float f;
    memcpy(&f, in, 4);
    x = f;
  } else {
    x = tnk_ldf(in, m->dt, 0);
  }
  int r;
  switch (m->op) {
    case TNK_ISNAN: r = x != x; break;
    case TNK_ISINF: r = isinf(x) != 0; break;
    case TNK_ISPOSINF: r = x == INFINITY; break;
    case TNK_ISNEGINF: r = x == -INFINITY; break;
    default: r = isfinite(x) != 0; break;
  }
  *(unsigned char *)out = (unsigned char)r;
}

void tnk_classify(const tnk_unary_args_t *a) {
  if (a->op < 0 || a->op >= TNK_CLASSIFY_OP_COUNT || !tnk_unary_supported(TNK_NEG, a->dtype) ||
      a->out.dtype != TNK_BOOL)
    return;
  map2_t m = {.shape = a->shape, .out = a->out, .in = a->in, .oesz = 1,
              .iesz = (int64_t)tnk_dtype_size(a->dtype), .op = a->op, .dt = a->dtype,
              .fn = classify_elem};
  map2_run(&m);
}

static void not_elem(char *out, const char *in, const map2_t *m) {
  if (m->dt == TNK_BOOL) {
    *out = (char)!*in;
    return;
  }
  for (int64_t k = 0; k < m->iesz; k++) out[k] = (char)~in[k];
}

void tnk_bitwise_not(const tnk_unary_args_t *a) {
  int dt = a->dtype;
  if (!(dt == TNK_BOOL || dt == TNK_U8 || dt == TNK_I8 || dt == TNK_I16 || dt == TNK_I32 ||
        dt == TNK_I64))
    return;
  int64_t esz = (int64_t)tnk_dtype_size(dt);
  map2_t m = {.shape = a->shape, .out = a->out, .in = a->in, .oesz = esz, .iesz = esz,
              .dt = dt, .fn = not_elem};
  map2_run(&m);
}

/* ---- complex ----------------------------------------------------------------- */

int tnk_complex_unary_supported(int op, int dtype, int out_dtype) {
  if ((dtype != TNK_C64 && dtype != TNK_C128) || op < 0 || op >= TNK_CX_OP_COUNT) return 0;
  int real = dtype == TNK_C64 ? TNK_F32 : TNK_F64;
  return out_dtype == (op == TNK_CX_ABS || op == TNK_CX_ANGLE ? real : dtype);
}

/* One precision's element function: T the real type, C its complex type,
 * F(name) the libm function of that precision, MK its CMPLX constructor. */
#define CX_ELEM(NAME, T, C, F, MK)                                            \
  static void NAME(char *out, const char *in, const map2_t *m) {             \
    T v[2];                                                                   \
    memcpy(v, in, sizeof v);                                                  \
    C z = MK(v[0], v[1]), r; /* built exactly: no inf * I */                 \
    switch (m->op) {                                                          \
      case TNK_CX_ABS: {                                                      \
        T a = F(cabs)(z);                                                     \
        memcpy(out, &a, sizeof a);                                            \
        return;                                                               \
      }                                                                       \
      case TNK_CX_ANGLE: {                                                    \
        T a = F(carg)(z);                                                     \
        memcpy(out, &a, sizeof a);                                            \
        return;                                                               \
      }                                                                       \
      case TNK_CX_EXP: r = F(cexp)(z); break;                                 \
      case TNK_CX_LOG: r = F(clog)(z); break;                                 \
      case TNK_CX_SQRT: r = F(csqrt)(z); break;                               \
      case TNK_CX_RSQRT: r = 1 / F(csqrt)(z); break;                          \
      case TNK_CX_SIN: r = F(csin)(z); break;                                 \
      case TNK_CX_COS: r = F(ccos)(z); break;                                 \
      case TNK_CX_TANH: r = F(ctanh)(z); break;                               \
      case TNK_CX_SIGMOID: r = 1 / (1 + F(cexp)(-z)); break;                  \
      case TNK_CX_NEG: r = -z; break;                                         \
      case TNK_CX_CONJ: r = F(conj)(z); break;                                \
      default: r = 1 / z; break; /* reciprocal */                             \
    }                                                                         \
    T o[2] = {F(creal)(r), F(cimag)(r)};                                      \
    memcpy(out, o, sizeof o);                                                 \
  }
#define F32FN(name) name##f
#define F64FN(name) name
CX_ELEM(cx64_elem, float, float complex, F32FN, CMPLXF)
CX_ELEM(cx128_elem, double, double complex, F64FN, CMPLX)

void tnk_complex_unary(const tnk_unary_args_t *a) {
  if (!tnk_complex_unary_supported(a->op, a->dtype, a->out.dtype)) return;
  map2_t m = {.shape = a->shape, .out = a->out, .in = a->in,
              .oesz = (int64_t)tnk_dtype_size(a->out.dtype),
              .iesz = (int64_t)tnk_dtype_size(a->dtype), .op = a->op, .dt = a->dtype,
              .fn = a->dtype == TNK_C64 ? cx64_elem : cx128_elem};
  map2_run(&m);
}
