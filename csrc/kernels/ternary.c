/* Elementwise ternary arithmetic used by optimizers (addcmul, addcdiv,
 * lerp) on strided, broadcast views of floating dtypes. Generic loops over
 * a coalesced shape; values go through tnk_val_t (fp32 or fp64 compute). */
#include "dtype.h"
#include "tnk.h"

int tnk_ternary_supported(int op, int dtype) {
  return op >= 0 && op < TNK_TERNARY_OP_COUNT &&
         (dtype == TNK_F32 || dtype == TNK_F64 || dtype == TNK_BF16 ||
          dtype == TNK_F16);
}

typedef struct tern_ctx {
  tnk_shape_t shape;
  tnk_view_t v[4];
  int op, dt;
  int64_t esz;
  double value;
} tern_ctx_t;

/* fp32 inputs compute in fp32, like PyTorch's CPU kernels */
static inline double apply(int op, int dt, double a, double b, double c,
                           double value) {
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

static void tern_range(void *p, int64_t begin, int64_t end) {
  const tern_ctx_t *c = p;
  const tnk_shape_t *sh = &c->shape;
  int nd = sh->ndim;
  for (int64_t i = begin; i < end; i++) {
    int64_t rem = i, off[4] = {0, 0, 0, 0};
    for (int d = nd - 1; d >= 0; d--) {
      int64_t idx = rem % sh->sizes[d];
      rem /= sh->sizes[d];
      for (int v = 0; v < 4; v++) off[v] += idx * c->v[v].strides[d];
    }
    double a = tnk_ldf(c->v[1].data, c->dt, off[1]);
    double b = tnk_ldf(c->v[2].data, c->dt, off[2]);
    double cc = c->op == TNK_LERP
                    ? 0.0
                    : tnk_ldf(c->v[3].data, c->dt, off[3]);
    double r = c->op == TNK_LERP_TENSOR ? apply(TNK_LERP, c->dt, a, b, 0.0, cc)
                                        : apply(c->op, c->dt, a, b, cc, c->value);
    tnk_stf(c->v[0].data, c->dt, off[0], r);
  }
}

/* fp32, all views contiguous: the optimizer's case, as plain loops. */
static void tern_f32_contig(void *p, int64_t begin, int64_t end) {
  const tern_ctx_t *c = p;
  float *restrict o = (float *)c->v[0].data;
  const float *restrict a = c->v[1].data, *restrict b = c->v[2].data,
                        *restrict cc = c->v[3].data;
  float v = (float)c->value;
  switch (c->op) {
    case TNK_ADDCMUL:
      for (int64_t i = begin; i < end; i++) o[i] = a[i] + v * b[i] * cc[i];
      break;
    case TNK_ADDCDIV:
      for (int64_t i = begin; i < end; i++) o[i] = a[i] + v * (b[i] / cc[i]);
      break;
    case TNK_LERP_TENSOR:
      for (int64_t i = begin; i < end; i++) {
        float w = cc[i], d = b[i] - a[i];
        o[i] = w < 0.5f ? a[i] + w * d : b[i] - d * (1 - w);
      }
      break;
    default:
      if (v < 0.5f)
        for (int64_t i = begin; i < end; i++) o[i] = a[i] + v * (b[i] - a[i]);
      else
        for (int64_t i = begin; i < end; i++)
          o[i] = b[i] - (b[i] - a[i]) * (1 - v);
      break;
  }
}

void tnk_ternary(const tnk_ternary_args_t *a) {
  if (!tnk_ternary_supported(a->op, a->dtype)) return;
  tern_ctx_t c = {.shape = a->shape, .v = {a->out, a->a, a->b, a->c},
                  .op = a->op, .dt = a->dtype, .value = a->value};
  if (a->op == TNK_LERP) c.v[3] = c.v[2]; /* keep coalescing honest */
  tnk_coalesce(&c.shape, c.v, 4);
  int64_t n = tnk_numel(&c.shape);
  if (n == 0) return;
  c.esz = (int64_t)tnk_dtype_size(a->dtype);
  int contiguous = c.shape.ndim == 1;
  for (int v = 0; v < 4 && contiguous; v++) contiguous = c.v[v].strides[0] == 1;
  if (contiguous && a->dtype == TNK_F32)
    tnk_parallel_for(n, 1 << 15, tern_f32_contig, &c);
  else
    tnk_parallel_for(n, 1 << 14, tern_range, &c);
}
