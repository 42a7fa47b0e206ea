/* Loss kernels, those of csrc/aten/loss_ops.cpp: nll_loss and ctc_loss,
 * forward and backward. A target outside [0, c) (other than nll's
 * ignore_index) is skipped and reported through the fault sink. */
#include "dtype.h"
#include "tnk.h"

#include <math.h>
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

/* ---- ctc_loss ------------------------------------------------------------------ */

int tnk_ctc_supported(int dtype) { return dtype == TNK_F32 || dtype == TNK_F64; }

static inline double lse2(double a, double b) {
  double m = a > b ? a : b;
  if (m == -INFINITY) return -INFINITY;
  return m + log(exp(a - m) + exp(b - m));
}

static inline double lse3(double a, double b, double c) {
  double m = a > b ? a : b;
  m = m > c ? m : c;
  if (m == -INFINITY) return -INFINITY;
  return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

typedef struct ctc_sample {
  const tnk_ctc_args_t *a;
  const int64_t *tgt; /* this sample's targets */
  int64_t n, len_in, len_tgt, ext;
} ctc_sample_t;

/* label of extended position s: blank at even s, target s/2 at odd s */
static inline int64_t ctc_label(const ctc_sample_t *c, int64_t s) {
  return (s & 1) ? c->tgt[s / 2] : c->a->blank;
}

static inline double ctc_lp(const ctc_sample_t *c, int64_t t, int64_t k) {
  const tnk_ctc_args_t *a = c->a;
  return tnk_ldf(a->log_probs, a->dtype, (t * a->N + c->n) * a->C + k);
}

/* log_alpha [T, L] row block of this sample; returns the nll */
static double ctc_alpha(const ctc_sample_t *c) {
  const tnk_ctc_args_t *a = c->a;
  int dt = a->dtype;
  int64_t base = c->n * a->T * a->L;
  for (int64_t i = 0; i < a->T * a->L; i++) tnk_stf(a->log_alpha, dt, base + i, -INFINITY);
  if (c->len_in == 0) return c->len_tgt == 0 ? 0.0 : INFINITY;
  tnk_stf(a->log_alpha, dt, base, ctc_lp(c, 0, a->blank));
  if (c->ext > 1) tnk_stf(a->log_alpha, dt, base + 1, ctc_lp(c, 0, ctc_label(c, 1)));
  for (int64_t t = 1; t < c->len_in; t++) {
    const int64_t prev = base + (t - 1) * a->L, cur = base + t * a->L;
    for (int64_t s = 0; s < c->ext; s++) {
      int64_t k = ctc_label(c, s);
      double la = tnk_ldf(a->log_alpha, dt, prev + s);
      double lb = s > 0 ? tnk_ldf(a->log_alpha, dt, prev + s - 1) : -INFINITY;
      double lc =
          s > 1 && k != ctc_label(c, s - 2) ? tnk_ldf(a->log_alpha, dt, prev + s - 2) : -INFINITY;
      double v = lse3(la, lb, lc);
      tnk_stf(a->log_alpha, dt, cur + s, v == -INFINITY ? v : v + ctc_lp(c, t, k));
    }
  }
  const int64_t last = base + (c->len_in - 1) * a->L;
  double l1 = tnk_ldf(a->log_alpha, dt, last + c->ext - 1);
  double l2 = c->ext > 1 ? tnk_ldf(a->log_alpha, dt, last + c->ext - 2) : -INFINITY;
  return -lse2(l1, l2);
}

static void ctc_grad(const ctc_sample_t *c) {
  const tnk_ctc_args_t *a = c->a;
  int dt = a->dtype;
  const int64_t base = c->n * a->T * a->L;
  double nll = tnk_ldf(a->nll, dt, c->n), gr = tnk_ldf(a->grad, dt, c->n);
  for (int64_t t = 0; t < a->T; t++)
    for (int64_t k = 0; k < a->C; k++) tnk_stf(a->out, dt, (t * a->N + c->n) * a->C + k, 0.0);
  if (c->len_in == 0 || (a->zero_infinity && nll == INFINITY)) return;
  for (int64_t i = 0; i < a->T * a->L; i++) tnk_stf(a->log_beta, dt, base + i, -INFINITY);
  {
    const int64_t last = base + (c->len_in - 1) * a->L;
    tnk_stf(a->log_beta, dt, last + c->ext - 1, ctc_lp(c, c->len_in - 1, a->blank));
    if (c->ext > 1)
      tnk_stf(a->log_beta, dt, last + c->ext - 2,
              ctc_lp(c, c->len_in - 1, ctc_label(c, c->ext - 2)));
  }
  for (int64_t t = c->len_in - 2; t >= 0; t--) {
    const int64_t next = base + (t + 1) * a->L, cur = base + t * a->L;
    for (int64_t s = 0; s < c->ext; s++) {
      int64_t k = ctc_label(c, s);
      double la = tnk_ldf(a->log_beta, dt, next + s);
      double lb = s < c->ext - 1 ? tnk_ldf(a->log_beta, dt, next + s + 1) : -INFINITY;
      double lc = s < c->ext - 2 && k != ctc_label(c, s + 2)
                      ? tnk_ldf(a->log_beta, dt, next + s + 2)
                      : -INFINITY;
      double v = lse3(la, lb, lc);
      tnk_stf(a->log_beta, dt, cur + s, v == -INFINITY ? v : v + ctc_lp(c, t, k));
    }
  }
  /* out[t, n, k] first accumulates log sum over s with label k of
   * alpha + beta (in double through the stored dtype; -inf start), then
   * becomes the gradient */
  for (int64_t t = 0; t < c->len_in; t++) {
    const int64_t row = (t * a->N + c->n) * a->C;
    for (int64_t k = 0; k < a->C; k++) tnk_stf(a->out, dt, row + k, -INFINITY);
    for (int64_t s = 0; s < c->ext; s++) {
      int64_t k = ctc_label(c, s);
      double ab = tnk_ldf(a->log_alpha, dt, base + t * a->L + s) +
                  tnk_ldf(a->log_beta, dt, base + t * a->L + s);
      tnk_stf(a->out, dt, row + k, lse2(tnk_ldf(a->out, dt, row + k), ab));
    }
    for (int64_t k = 0; k < a->C; k++) {
      /* with nll inf (no alignment; not zero_infinity) this is NaN, as
       * on CPU: -inf + inf, or exp(inf) * a zero weight */
      double lp = ctc_lp(c, t, k), lcab = tnk_ldf(a->out, dt, row + k);
      tnk_stf(a->out, dt, row + k, (exp(lp) - exp(lcab + nll - lp)) * gr);
    }
  }
}

static void ctc_samples(void *p, int64_t begin, int64_t end) {
  const tnk_ctc_args_t *a = p;
  const int64_t *len = a->lengths, *targets = a->targets;
  for (int64_t n = begin; n < end; n++) {
    ctc_sample_t c = {
        a, targets + len[2 * a->N + n], n, len[n], len[a->N + n], 2 * len[a->N + n] + 1};
    int bad = 0;
    for (int64_t i = 0; i < c.len_tgt && !bad; i++) {
      if (c.tgt[i] < 0 || c.tgt[i] >= a->C) {
        tnk_report_fault(&a->fault, c.tgt[i], a->C);
        bad = 1;
      }
    }
    if (bad) continue;
    if (!a->backward)
      tnk_stf(a->out, a->dtype, n, ctc_alpha(&c));
    else
      ctc_grad(&c);
  }
}

void tnk_ctc(const tnk_ctc_args_t *a) { tnk_parallel_for(a->N, 1, ctc_samples, (void *)a); }
