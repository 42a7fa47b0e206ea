/* Loss kernels, those of csrc/aten/loss_ops.cpp: nll_loss forward and
 * backward. A target outside [0, c) (other than ignore_index) is skipped
 * and reported through the fault sink. */
#include "dtype.h"
#include "tnk.h"

#include <string.h>

/* ---- nll_loss ------------------------------------------------------------------ */

int tnk_nll_supported(int dtype) { return tnk_floating(dtype); }

typedef struct zero_ctx {
  void *base;
  int64_t row_bytes;
} zero_ctx_t;

static void zero_rows(void *p, int64_t begin, int64_t end) {
  const zero_ctx_t *z = p;
  memset((char *)z->base + begin * z->row_bytes, 0, (size_t)((end - begin) * z->row_bytes));
}

void tnk_nll(const tnk_nll_args_t *a) {
  const int64_t *tgt = a->target;
  int dt = a->dtype, reported = 0;
  if (!a->backward) {
    double loss = 0, wsum = 0;
    for (int64_t i = 0; i < a->n; i++) {
      int64_t t = tgt[i];
      double l = 0;
      if (t != a->ignore_index) {
        if (t < 0 || t >= a->c) {
          if (!reported) tnk_report_fault(&a->fault, t, a->c);
          reported = 1;
        } else {
          double w = a->weight ? tnk_ldf(a->weight, dt, t) : 1.0;
          l = -w * tnk_ldf(a->input, dt, i * a->c + t);
          wsum += w;
        }
      }
      if (a->reduction == 0)
        tnk_stf(a->out, dt, i, l);
      else
        loss += l;
    }
    if (a->reduction == 1) loss /= wsum;
    if (a->reduction != 0) tnk_stf(a->out, dt, 0, loss);
    tnk_stf(a->total_weight, dt, 0, a->reduction == 0 ? 0.0 : wsum);
    return;
  }
  zero_ctx_t z = {a->out, (int64_t)tnk_dtype_size(dt) * a->c};
  tnk_parallel_for(a->n, 64, zero_rows, &z); /* [n, c] can be large: vocabulary */
  double g0 = a->reduction == 0 ? 0 : tnk_ldf(a->grad, dt, 0);
  if (a->reduction == 1) g0 /= tnk_ldf(a->total_weight, dt, 0);
  for (int64_t i = 0; i < a->n; i++) {
    int64_t t = tgt[i];
    if (t == a->ignore_index) continue;
    if (t < 0 || t >= a->c) {
      if (!reported) tnk_report_fault(&a->fault, t, a->c);
      reported = 1;
      continue;
    }
    double w = a->weight ? tnk_ldf(a->weight, dt, t) : 1.0;
    double g = a->reduction == 0 ? tnk_ldf(a->grad, dt, i) : g0;
    tnk_stf(a->out, dt, i * a->c + t, -w * g);
  }
}
