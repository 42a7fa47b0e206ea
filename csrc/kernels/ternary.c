/* Elementwise ternary arithmetic used by optimizers (addcmul, addcdiv,
 * lerp) on strided, broadcast views of floating dtypes. Generic loops over
 * a coalesced shape; values go through tnk_val_t (fp32 or fp64 compute). */
#include "config.h"
#include "dtype.h"
#include "iter.h"
#include "tnk.h"

int tnk_ternary_supported(int op, int dtype) {
  return op >= 0 && op < TNK_TERNARY_OP_COUNT &&
         (dtype == TNK_F32 || dtype == TNK_F64 || dtype == TNK_BF16 || dtype == TNK_F16);
}

typedef struct tern_ctx {
  int op, dt;
  int contiguous; /* fp32, every view dense: the plain loops */
  double value;
} tern_ctx_t;

/* fp32 inputs compute in fp32, like PyTorch's CPU kernels */
static inline double apply(int op, int dt, double a, double b, double c, double value) {
  if (dt != TNK_F64) {
    float fa = (float)a, fb = (float)b, fc = (float)c, fv = (float)value;
    switch (op) {
      case TNK_ADDCMUL: return fa + fv * fb * fc;
      case TNK_ADDCDIV: return fa + fv * (fb / fc);
      default: return fv < 0.5f ? fa + fv * (fb - fa) : fb - (fb - fa) * (1 - fv);
    }
  }
  switch (op) {
    case TNK_ADDCMUL: return a + value * b * c;
    case TNK_ADDCDIV: return a + value * (b / c);
    default: return value < 0.5 ? a + value * (b - a) : b - (b - a) * (1 - value);
  }
}

/* The element loop of the other cases (element strides e). */
static void tern_generic(const tern_ctx_t *c, char **p, const int64_t *e, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    int64_t off[4];
    for (int v = 0; v < 4; v++) off[v] = i * e[v];
    double a = tnk_ldf(p[1], c->dt, off[1]);
    double b = tnk_ldf(p[2], c->dt, off[2]);
    double cc = c->op == TNK_LERP ? 0.0 : tnk_ldf(p[3], c->dt, off[3]);
    double r = c->op == TNK_LERP_TENSOR ? apply(TNK_LERP, c->dt, a, b, 0.0, cc)
                                        : apply(c->op, c->dt, a, b, cc, c->value);
    tnk_stf(p[0], c->dt, off[0], r);
  }
}

/* fp32, all views contiguous: the optimizer's case, in the configuration's
 * per-ISA loops (config.h). */
static void tern_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  const tern_ctx_t *c = p;
  if (!c->contiguous) {
    int64_t e[4], esz = (int64_t)tnk_dtype_size(c->dt);
    for (int v = 0; v < 4; v++) e[v] = s[v] / esz;
    tern_generic(c, ptrs, e, n);
    return;
  }
  tnk_config()->loops->ternary_f32(c->op, (float *)ptrs[0], (const float *)ptrs[1],
                                   (const float *)ptrs[2], (const float *)ptrs[3], (float)c->value,
                                   n);
}

void tnk_ternary(const tnk_ternary_args_t *a) {
  if (!tnk_ternary_supported(a->op, a->dtype)) return;
  tern_ctx_t c = {.op = a->op, .dt = a->dtype, .value = a->value};
  int64_t esz = (int64_t)tnk_dtype_size(a->dtype);
  /* lerp has no third input: b again keeps coalescing honest */
  tnk_iter_t it;
  if (!tnk_iter_init_any_order(&it, &a->shape, 4,
                               (tnk_view_t[]){a->out, a->a, a->b, a->op == TNK_LERP ? a->b : a->c},
                               (int64_t[]){esz, esz, esz, esz}))
    return;
  c.contiguous = a->dtype == TNK_F32 && tnk_iter_contiguous(&it);
  tnk_iter_run(&it, c.contiguous ? 1 << 15 : 1 << 14, tern_loop, &c);
}
