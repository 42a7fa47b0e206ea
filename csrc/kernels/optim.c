/* Fused Adam/AdamW: the whole update of one parameter in one pass over its
 * five tensors, instead of the eight element-wise passes of the per-op
 * (foreach) path. The arithmetic follows PyTorch's fused CPU kernel: decay,
 * then the moment updates, then the step with bias corrections. */
#include <math.h>

#include "dtype.h"
#include "tnk.h"

int tnk_adam_supported(int dtype) {
  return dtype == TNK_F32 || dtype == TNK_F64 || dtype == TNK_BF16 || dtype == TNK_F16;
}

typedef struct adam_ctx {
  const tnk_adam_args_t *a;
  double lr, bc1, bc2_sqrt, inv_scale;
} adam_ctx_t;

static void adam_range(void *p, int64_t begin, int64_t end) {
  const adam_ctx_t *c = p;
  const tnk_adam_args_t *a = c->a;
  int dt = a->dtype;
  double b1 = a->beta1, b2 = a->beta2, wd = a->weight_decay, eps = a->eps;
  double step_size = c->lr / c->bc1;
  if (dt == TNK_F32) { /* the common case without per-element dispatch */
    float *pa = a->param, *m = a->exp_avg, *v = a->exp_avg_sq, *vm = a->max_exp_avg_sq;
    const float *g = a->grad;
    /* 1 - beta in double, then rounded: 1 - (float)0.999 is 1.3e-5 off */
    float omb1 = (float)(1.0 - b1), fb2 = (float)b2, omb2 = (float)(1.0 - b2);
    float fwd = (float)wd, feps = (float)eps;
    float decay = (float)(1.0 - c->lr * wd), fss = (float)step_size;
    float fbc2 = (float)c->bc2_sqrt, fscale = (float)c->inv_scale;
    for (int64_t i = begin; i < end; i++) {
      float gi = g[i] * fscale;
      if (a->maximize) gi = -gi;
      float pi = pa[i];
      if (a->adamw)
        pi *= decay;
      else if (wd != 0.0)
        gi += fwd * pi;
      float mi = m[i] + omb1 * (gi - m[i]);
      float vi = fb2 * v[i] + omb2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float vd = vi;
      if (a->amsgrad) {
        vd = vm[i] > vi ? vm[i] : vi;
        vm[i] = vd;
      }
      float denom = sqrtf(vd) / fbc2 + feps;
      pa[i] = pi - fss * mi / denom;
    }
    return;
  }
  for (int64_t i = begin; i < end; i++) {
    double gi = tnk_ldf(a->grad, dt, i) * c->inv_scale;
    if (a->maximize) gi = -gi;
    double pi = tnk_ldf(a->param, dt, i);
    if (a->adamw)
      pi *= 1.0 - c->lr * wd;
    else if (wd != 0.0)
      gi += wd * pi;
    double mi = tnk_ldf(a->exp_avg, dt, i), vi = tnk_ldf(a->exp_avg_sq, dt, i);
    mi += (1.0 - b1) * (gi - mi);
    vi = b2 * vi + (1.0 - b2) * gi * gi;
    tnk_stf(a->exp_avg, dt, i, mi);
    tnk_stf(a->exp_avg_sq, dt, i, vi);
    double vd = vi;
    if (a->amsgrad) {
      double old = tnk_ldf(a->max_exp_avg_sq, dt, i);
      vd = old > vi ? old : vi;
      tnk_stf(a->max_exp_avg_sq, dt, i, vd);
    }
    tnk_stf(a->param, dt, i, pi - step_size * mi / (sqrt(vd) / c->bc2_sqrt + eps));
  }
}

void tnk_adam(const tnk_adam_args_t *a) {
  if (!tnk_adam_supported(a->dtype) || a->n <= 0) return;
  if (a->found_inf && *a->found_inf != 0.0f) return;
  double step = a->step ? (double)*a->step : 1.0;
  adam_ctx_t c = {.a = a, .lr = a->lr_ptr ? (double)*a->lr_ptr : a->lr};
  c.bc1 = 1.0 - pow(a->beta1, step);
  c.bc2_sqrt = sqrt(1.0 - pow(a->beta2, step));
  c.inv_scale = a->grad_scale ? 1.0 / (double)*a->grad_scale : 1.0;
  tnk_parallel_for(a->n, 16384, adam_range, &c);
}
