/* Elementwise unary math on strided views: the driver. The loops are
 * per variant in the kernel configuration (eltwise_loops.h); a contiguous
 * fp32 op with a vector body in the configuration (sigmoid, SiLU, exp,
 * GELU: config.h, unary_f32) takes it instead. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "dtype.h"
#include "iter.h"
#include "tnk.h"
#include "vmath.h"

/* bf16 / fp16 negation and absolute value on the bits: the sign flipped or
 * cleared and a NaN quieted (QUIET, the top mantissa bit), which is what
 * widening to fp32, negating and rounding back gives, bit for bit, at the
 * cost of a copy (a contiguous bf16 neg of 64K elements: 10.9-11.0 us
 * through fp32, 6.2-8.7 on the bits, 3.2-5.0 for PyTorch CPU). */
#define HALF_SIGN_LOOP(NAME, EXPR, INF, QUIET)                                                    \
  static void NAME(char *o, const char *in, int64_t so, int64_t si, int64_t n, const double *p) { \
    (void)p;                                                                                      \
    if (so == 2 && si == 2) {                                                                     \
      uint16_t *po = (uint16_t *)(void *)o;                                                       \
      const uint16_t *pi = (const uint16_t *)(const void *)in;                                    \
      for (int64_t k = 0; k < n; k++) {                                                           \
        uint16_t v = pi[k];                                                                       \
        po[k] = (uint16_t)((EXPR) | ((v & 0x7fffu) > (INF) ? (QUIET) : 0u));                      \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    for (int64_t k = 0; k < n; k++) {                                                             \
      uint16_t v, r;                                                                              \
      memcpy(&v, in + k * si, 2);                                                                 \
      r = (uint16_t)((EXPR) | ((v & 0x7fffu) > (INF) ? (QUIET) : 0u));                            \
      memcpy(o + k * so, &r, 2);                                                                  \
    }                                                                                             \
  }
HALF_SIGN_LOOP(bf16_sign_neg, v ^ 0x8000u, 0x7f80u, 0x0040u)
HALF_SIGN_LOOP(bf16_sign_abs, v & 0x7fffu, 0x7f80u, 0x0040u)
HALF_SIGN_LOOP(f16_sign_neg, v ^ 0x8000u, 0x7c00u, 0x0200u)
HALF_SIGN_LOOP(f16_sign_abs, v & 0x7fffu, 0x7c00u, 0x0200u)

static tnk_uloop_fn uloop(int op, int dtype) {
  if (op < 0 || op >= TNK_UNARY_OP_COUNT || dtype < 0 || dtype >= TNK_DTYPE_COUNT) return NULL;
  if (op == TNK_NEG && dtype == TNK_BF16) return bf16_sign_neg;
  if (op == TNK_ABS && dtype == TNK_BF16) return bf16_sign_abs;
  if (op == TNK_NEG && dtype == TNK_F16) return f16_sign_neg;
  if (op == TNK_ABS && dtype == TNK_F16) return f16_sign_abs;
  const tnk_eltwise_loops_t *t = tnk_config()->loops;
  if (t->unary[op][dtype]) return t->unary[op][dtype];
  if (op == TNK_NEG) return t->int_neg[dtype];
  if (op == TNK_ABS) return t->int_abs[dtype];
  return NULL;
}

int tnk_unary_supported(int op, int dtype) { return uloop(op, dtype) != NULL; }

typedef struct un_ctx {
  tnk_uloop_fn fn;
  double p[3];
  /* the op's contiguous fp32 vector body (config.h), or NULL */
  void (*body)(const float *x, float *y, int64_t n);
} un_ctx_t;

static void un_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  const un_ctx_t *c = p;
  if (c->body)
    c->body((const float *)ptrs[1], (float *)ptrs[0], n);
  else
    c->fn(ptrs[0], ptrs[1], s[0], s[1], n, c->p);
}

void tnk_unary(const tnk_unary_args_t *a) {
  if (!tnk_unary_supported(a->op, a->dtype)) return;
  int64_t esz = (int64_t)tnk_dtype_size(a->dtype), e[2] = {esz, esz};
  tnk_iter_t it;
  if (!tnk_iter_init_any_order(&it, &a->shape, 2, (tnk_view_t[]){a->out, a->in}, e)) return;
  un_ctx_t c = {.fn = uloop(a->op, a->dtype), .p = {a->p0, a->p1, a->p2}};
  /* vector bodies when the whole shape is one dense run (a dense row of a
   * wider shape takes the loop table, as it always has) */
  if (a->dtype == TNK_F32 && tnk_iter_contiguous(&it)) c.body = TNK_VM->unary_f32[a->op];
  tnk_iter_run(&it, 1 << 14, un_loop, &c);
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

static void map2_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  const map2_t *m = p;
  for (int64_t k = 0; k < n; k++) m->fn(ptrs[0] + k * s[0], ptrs[1] + k * s[1], m);
}

static void map2_run(map2_t *m) {
  tnk_iter_t it;
  if (tnk_iter_init_any_order(&it, &m->shape, 2, (tnk_view_t[]){m->out, m->in},
                              (int64_t[]){m->oesz, m->iesz}))
    tnk_iter_run(&it, 1 << 15, map2_loop, m);
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
  int r = 0;
#define CLASSIFY_CASE(ID, name, kernel, ref) \
  case TNK_##ID: r = (kernel); break;
  switch (m->op) { TNK_CLASSIFY_OPS(CLASSIFY_CASE) }
  *(unsigned char *)out = (unsigned char)r;
}

void tnk_classify(const tnk_unary_args_t *a) {
  if (a->op < 0 || a->op >= TNK_CLASSIFY_OP_COUNT || !tnk_unary_supported(TNK_NEG, a->dtype) ||
      a->out.dtype != TNK_BOOL)
    return;
  map2_t m = {.shape = a->shape,
              .out = a->out,
              .in = a->in,
              .oesz = 1,
              .iesz = (int64_t)tnk_dtype_size(a->dtype),
              .op = a->op,
              .dt = a->dtype,
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
  map2_t m = {.shape = a->shape,
              .out = a->out,
              .in = a->in,
              .oesz = esz,
              .iesz = esz,
              .dt = dt,
              .fn = not_elem};
  map2_run(&m);
}

/* ---- complex ----------------------------------------------------------------- */

int tnk_complex_unary_supported(int op, int dtype, int out_dtype) {
  if ((dtype != TNK_C64 && dtype != TNK_C128) || op < 0 || op >= TNK_CX_OP_COUNT) return 0;
  int real = dtype == TNK_C64 ? TNK_F32 : TNK_F64;
  return out_dtype == (tnk_complex_real_output(op) ? real : dtype);
}

/* The complex libm function f at z's precision (the table's CX_FN). */
#define CX_FN(fn, z) _Generic((z), float complex: fn##f, default: fn)(z)
#define CX_CASE(ID, name, out, kernel, ref) CX_CASE_##out(TNK_CX_##ID, kernel)
#define CX_CASE_SAME(OP, K) \
  case OP: r = (K); break;
#define CX_CASE_REAL(OP, K)      \
  case OP: {                     \
    real_t a_ = (real_t)(K);     \
    memcpy(out, &a_, sizeof a_); \
    return;                      \
  }
/* One precision's element function: T the real type, C its complex type,
 * MK its CMPLX constructor; the ops are the rows of TNK_COMPLEX_OPS. */
#define CX_ELEM(NAME, T, C, F, MK)                               \
  static void NAME(char *out, const char *in, const map2_t *m) { \
    typedef T real_t;                                            \
    T v[2];                                                      \
    memcpy(v, in, sizeof v);                                     \
    C z = MK(v[0], v[1]), r = 0; /* built exactly: no inf * I */ \
    switch (m->op) { TNK_COMPLEX_OPS(CX_CASE) }                  \
    T o[2] = {F(creal)(r), F(cimag)(r)};                         \
    memcpy(out, o, sizeof o);                                    \
  }
#define F32FN(name) name##f
#define F64FN(name) name
CX_ELEM(cx64_elem, float, float complex, F32FN, CMPLXF)
CX_ELEM(cx128_elem, double, double complex, F64FN, CMPLX)

void tnk_complex_unary(const tnk_unary_args_t *a) {
  if (!tnk_complex_unary_supported(a->op, a->dtype, a->out.dtype)) return;
  map2_t m = {.shape = a->shape,
              .out = a->out,
              .in = a->in,
              .oesz = (int64_t)tnk_dtype_size(a->out.dtype),
              .iesz = (int64_t)tnk_dtype_size(a->dtype),
              .op = a->op,
              .dt = a->dtype,
              .fn = a->dtype == TNK_C64 ? cx64_elem : cx128_elem};
  map2_run(&m);
}
