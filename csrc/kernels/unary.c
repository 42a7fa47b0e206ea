/* Elementwise unary math on strided views of floating dtypes. One loop per
 * (op, dtype) from macros; fp32 uses float libm functions, fp64 double,
 * half types compute in fp32 and round once. */
#include <math.h>

#include "dtype.h"
#include "tnk.h"

#define SIGMOID(x) (1 / (1 + EXP(-(x))))

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
  X(pow_scalar, POW(x, (C)p0))                                                \
  X(ceil, CEIL(x))                                                            \
  X(floor, FLOOR(x))                                                          \
  X(trunc, TRUNC(x))                                                          \
  X(round, NEARBYINT(x))

typedef void (*uloop_fn)(char *o, const char *i, int64_t so, int64_t si,
                         int64_t n, double p0);

#define DEFINE_LOOP(T, C, LOAD, STORE, NAME, EXPR)                            \
  static void NAME(char *o, const char *in, int64_t so, int64_t si,          \
                   int64_t n, double p0) {                                    \
    (void)p0;                                                                 \
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
#define C double
#define F64_LOOP(N, E) DEFINE_LOOP(double, double, ID, ID, f64_##N, E)
UNARY_OPS(F64_LOOP)

#define TABLE_ROW(N, E)                                                       \
  {[TNK_F16] = f16_##N, [TNK_BF16] = bf16_##N, [TNK_F32] = f32_##N,           \
   [TNK_F64] = f64_##N},
static const uloop_fn k_uloops[TNK_UNARY_OP_COUNT][TNK_DTYPE_COUNT] = {
    UNARY_OPS(TABLE_ROW)};

int tnk_unary_supported(int op, int dtype) {
  return op >= 0 && op < TNK_UNARY_OP_COUNT && dtype >= 0 &&
         dtype < TNK_DTYPE_COUNT && k_uloops[op][dtype] != NULL;
}

typedef struct un_ctx {
  tnk_shape_t shape;
  tnk_view_t v[2];
  uloop_fn fn;
  int64_t esz;
  double p0;
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
          inner, c->p0);
  }
}

static void un_chunks(void *p, int64_t begin, int64_t end) {
  const un_ctx_t *c = p;
  c->fn((char *)c->v[0].data + begin * c->v[0].strides[0] * c->esz,
        (const char *)c->v[1].data + begin * c->v[1].strides[0] * c->esz,
        c->v[0].strides[0] * c->esz, c->v[1].strides[0] * c->esz, end - begin,
        c->p0);
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
  c.fn = k_uloops[a->op][a->dtype];
  c.esz = (int64_t)tnk_dtype_size(a->dtype);
  c.p0 = a->p0;
  int64_t inner = c.shape.sizes[c.shape.ndim - 1];
  if (c.shape.ndim == 1)
    tnk_parallel_for(inner, 1 << 14, un_chunks, &c);
  else
    tnk_parallel_for(n / inner, inner >= (1 << 14) ? 1 : (1 << 14) / inner,
                     un_rows, &c);
}

/* ---- classification ------------------------------------------------------ */

typedef struct cls_ctx {
  tnk_shape_t shape;
  tnk_view_t out, in;
  int op, dt;
  int64_t esz;
} cls_ctx_t;

static void cls_range(void *p, int64_t begin, int64_t end) {
  const cls_ctx_t *c = p;
  for (int64_t i = begin; i < end; i++) {
    int64_t rem = i, oo = 0, io = 0;
    for (int d = c->shape.ndim - 1; d >= 0; d--) {
      int64_t idx = rem % c->shape.sizes[d];
      rem /= c->shape.sizes[d];
      oo += idx * c->out.strides[d];
      io += idx * c->in.strides[d];
    }
    double x = tnk_ldf(c->in.data, c->dt, io);
    int r;
    switch (c->op) {
      case TNK_ISNAN: r = x != x; break;
      case TNK_ISINF: r = isinf(x) != 0; break;
      case TNK_ISPOSINF: r = x == INFINITY; break;
      case TNK_ISNEGINF: r = x == -INFINITY; break;
      default: r = isfinite(x) != 0; break;
    }
    ((unsigned char *)c->out.data)[oo] = (unsigned char)r;
  }
}

void tnk_classify(const tnk_unary_args_t *a) {
  if (a->op < 0 || a->op >= TNK_CLASSIFY_OP_COUNT || !tnk_unary_supported(TNK_NEG, a->dtype) ||
      a->out.dtype != TNK_BOOL)
    return;
  cls_ctx_t c = {.shape = a->shape, .out = a->out, .in = a->in, .op = a->op, .dt = a->dtype};
  tnk_view_t v[2] = {c.out, c.in};
  tnk_coalesce(&c.shape, v, 2);
  c.out = v[0];
  c.in = v[1];
  c.esz = (int64_t)tnk_dtype_size(a->dtype);
  int64_t n = tnk_numel(&c.shape);
  if (n > 0) tnk_parallel_for(n, 1 << 15, cls_range, &c);
}

/* ---- bitwise not ----------------------------------------------------------- */

typedef struct not_ctx {
  tnk_shape_t shape;
  tnk_view_t out, in;
  int64_t esz;
  int is_bool;
} not_ctx_t;

static void not_range(void *p, int64_t begin, int64_t end) {
  const not_ctx_t *c = p;
  for (int64_t i = begin; i < end; i++) {
    int64_t rem = i, oo = 0, io = 0;
    for (int d = c->shape.ndim - 1; d >= 0; d--) {
      int64_t idx = rem % c->shape.sizes[d];
      rem /= c->shape.sizes[d];
      oo += idx * c->out.strides[d];
      io += idx * c->in.strides[d];
    }
    unsigned char buf[8];
    memcpy(buf, (const char *)c->in.data + io * c->esz, (size_t)c->esz);
    if (c->is_bool) buf[0] = !buf[0];
    else
      for (int64_t k = 0; k < c->esz; k++) buf[k] = (unsigned char)~buf[k];
    memcpy((char *)c->out.data + oo * c->esz, buf, (size_t)c->esz);
  }
}

void tnk_bitwise_not(const tnk_unary_args_t *a) {
  int dt = a->dtype;
  if (!(dt == TNK_BOOL || dt == TNK_U8 || dt == TNK_I8 || dt == TNK_I16 || dt == TNK_I32 ||
        dt == TNK_I64))
    return;
  not_ctx_t c = {.shape = a->shape, .out = a->out, .in = a->in,
                 .esz = (int64_t)tnk_dtype_size(dt), .is_bool = dt == TNK_BOOL};
  tnk_view_t v[2] = {c.out, c.in};
  tnk_coalesce(&c.shape, v, 2);
  c.out = v[0];
  c.in = v[1];
  int64_t n = tnk_numel(&c.shape);
  if (n > 0) tnk_parallel_for(n, 1 << 15, not_range, &c);
}
