/* Elementwise unary math on strided views: the driver. The loops are
 * per variant in the kernel configuration (eltwise_loops.h); contiguous
 * fp32 sigmoid, SiLU, exp and GELU take the vector bodies of vmath.h. */
#include <complex.h>
#include <math.h>

#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

static tnk_uloop_fn uloop(int op, int dtype) {
  if (op < 0 || op >= TNK_UNARY_OP_COUNT || dtype < 0 || dtype >= TNK_DTYPE_COUNT) return NULL;
  const tnk_eltwise_loops_t *t = tnk_config()->loops;
  if (t->unary[op][dtype]) return t->unary[op][dtype];
  if (op == TNK_NEG) return t->int_neg[dtype];
  if (op == TNK_ABS) return t->int_abs[dtype];
  return NULL;
}

int tnk_unary_supported(int op, int dtype) { return uloop(op, dtype) != NULL; }

typedef struct un_ctx {
  tnk_shape_t shape;
  tnk_view_t v[2];
  tnk_uloop_fn fn;
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
