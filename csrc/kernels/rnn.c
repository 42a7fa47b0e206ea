/* The fused LSTM and GRU cells (tnk.h). A task takes one row of the batch
 * and a block of up to BLK hidden units: it loads the gate blocks it needs
 * into fp32 scratch (converting half types), adds them up, runs the
 * activations as the variant's vector loops (the sigmoid of vmath, the tanh
 * of the unary loops, as torch.sigmoid and torch.tanh on the device) and
 * stores. One launch per cell and time step, where composing the cell from
 * element-wise ops took about a dozen. */
#include <string.h>

#include "config.h"
#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

#define BLK 256

int tnk_rnn_cell_supported(int dtype) {
  return dtype == TNK_F32 || dtype == TNK_BF16 || dtype == TNK_F16;
}

/* x[k] = src[at + k] in fp32, k < n */
static void load(float *x, const void *src, int dt, int64_t at, int64_t n) {
  const tnk_eltwise_loops_t *l = tnk_config()->loops;
  if (dt == TNK_F32)
    memcpy(x, (const float *)src + at, (size_t)n * sizeof(float));
  else if (dt == TNK_BF16)
    l->bf16_to_f32(x, (const uint16_t *)src + at, n);
  else
    l->f16_to_f32(x, (const uint16_t *)src + at, n);
}

/* dst[at + k] = x[k], rounded to dt */
static void store(void *dst, int dt, int64_t at, const float *x, int64_t n) {
  const tnk_eltwise_loops_t *l = tnk_config()->loops;
  if (dt == TNK_F32)
    memcpy((float *)dst + at, x, (size_t)n * sizeof(float));
  else if (dt == TNK_BF16)
    l->f32_to_bf16((uint16_t *)dst + at, x, n);
  else
    l->f32_to_f16((uint16_t *)dst + at, x, n);
}

/* x[k] += src[at + k]; nothing when src is NULL (no bias) */
static void add_from(float *x, const void *src, int dt, int64_t at, int64_t n, float *tmp) {
  if (!src) return;
  load(tmp, src, dt, at, n);
  for (int64_t k = 0; k < n; k++) x[k] += tmp[k];
}

static void vsigmoid(float *x, float *tmp, int64_t n) {
  tnk_vsigmoid_f32(x, tmp, n, 0);
  memcpy(x, tmp, (size_t)n * sizeof(float));
}

static void vtanh(float *y, const float *x, int64_t n) {
  static const double p[3] = {0, 0, 0};
  tnk_config()->loops->unary[TNK_TANH][TNK_F32]((char *)y, (const char *)x, sizeof(float),
                                                sizeof(float), n, p);
}

/* gate q of row r, hidden units [j0, j0 + n): ig + hg + b1 + b2 */
static void gate_sum(const tnk_rnn_cell_args_t *a, int k, int q, int64_t r, int64_t j0, int64_t n,
                     float *x, float *tmp) {
  int64_t h = a->h, at = r * k * h + q * h + j0;
  load(x, a->ig, a->dtype, at, n);
  add_from(x, a->hg, a->dtype, at, n, tmp);
  add_from(x, a->b1, a->dtype, q * h + j0, n, tmp);
  add_from(x, a->b2, a->dtype, q * h + j0, n, tmp);
}

static void lstm_forward(const tnk_rnn_cell_args_t *a, int64_t r, int64_t j0, int64_t n) {
  float g[4][BLK], cx[BLK], cy[BLK], t[BLK];
  int dt = a->dtype;
  int64_t h = a->h;
  for (int q = 0; q < 4; q++) gate_sum(a, 4, q, r, j0, n, g[q], t);
  vsigmoid(g[0], t, n);
  vsigmoid(g[1], t, n);
  vtanh(g[2], g[2], n);
  vsigmoid(g[3], t, n);
  load(cx, a->prev, dt, r * h + j0, n);
  for (int64_t k = 0; k < n; k++) cy[k] = g[1][k] * cx[k] + g[0][k] * g[2][k];
  vtanh(t, cy, n);
  for (int64_t k = 0; k < n; k++) t[k] *= g[3][k];
  store(a->out0, dt, r * h + j0, t, n);
  store(a->out1, dt, r * h + j0, cy, n);
  for (int q = 0; q < 4; q++) store(a->ws, dt, r * 4 * h + q * h + j0, g[q], n);
}

static void lstm_backward(const tnk_rnn_cell_args_t *a, int64_t r, int64_t j0, int64_t n) {
  float w[4][BLK], tc[BLK], cx[BLK], gh[BLK], gc[BLK];
  int dt = a->dtype;
  int64_t h = a->h, at = r * h + j0;
  for (int q = 0; q < 4; q++) load(w[q], a->ws, dt, r * 4 * h + q * h + j0, n);
  load(gc, a->cy, dt, at, n);
  vtanh(tc, gc, n);
  load(cx, a->prev, dt, at, n);
  if (a->ghy)
    load(gh, a->ghy, dt, at, n);
  else
    memset(gh, 0, sizeof gh);
  if (a->gcy)
    load(gc, a->gcy, dt, at, n);
  else
    memset(gc, 0, sizeof gc);
  for (int64_t k = 0; k < n; k++) {
    float i = w[0][k], f = w[1][k], c = w[2][k], o = w[3][k], t = tc[k];
    /* the loss's gradient with respect to cy: through hy, and directly */
    float gcy = gh[k] * o * (1 - t * t) + gc[k];
    w[0][k] = gcy * c * i * (1 - i);
    w[1][k] = gcy * cx[k] * f * (1 - f);
    w[2][k] = gcy * i * (1 - c * c);
    w[3][k] = gh[k] * t * o * (1 - o);
    cx[k] = gcy * f;
  }
  for (int q = 0; q < 4; q++) store(a->gx0, dt, r * 4 * h + q * h + j0, w[q], n);
  store(a->gprev, dt, at, cx, n);
}

static void gru_forward(const tnk_rnn_cell_args_t *a, int64_t r, int64_t j0, int64_t n) {
  float rg[BLK], zg[BLK], ng[BLK], hn[BLK], hx[BLK], t[BLK];
  int dt = a->dtype;
  int64_t h = a->h, row = r * 3 * h + j0, at = r * h + j0, wrow = r * 5 * h + j0;
  gate_sum(a, 3, 0, r, j0, n, rg, t);
  vsigmoid(rg, t, n);
  gate_sum(a, 3, 1, r, j0, n, zg, t);
  vsigmoid(zg, t, n);
  load(hn, a->hg, dt, row + 2 * h, n); /* the hidden new-gate input, with its bias */
  add_from(hn, a->b2, dt, 2 * h + j0, n, t);
  load(ng, a->ig, dt, row + 2 * h, n);
  add_from(ng, a->b1, dt, 2 * h + j0, n, t);
  for (int64_t k = 0; k < n; k++) ng[k] += rg[k] * hn[k];
  vtanh(ng, ng, n);
  load(hx, a->prev, dt, at, n);
  for (int64_t k = 0; k < n; k++) t[k] = ng[k] + zg[k] * (hx[k] - ng[k]);
  store(a->out0, dt, at, t, n);
  const float *parts[5] = {rg, zg, ng, hx, hn};
  for (int q = 0; q < 5; q++) store(a->ws, dt, wrow + q * h, parts[q], n);
}

static void gru_backward(const tnk_rnn_cell_args_t *a, int64_t r, int64_t j0, int64_t n) {
  float w[5][BLK], go[BLK], ghn[BLK];
  int dt = a->dtype;
  int64_t h = a->h, row = r * 3 * h + j0, at = r * h + j0, wrow = r * 5 * h + j0;
  for (int q = 0; q < 5; q++) load(w[q], a->ws, dt, wrow + q * h, n);
  load(go, a->ghy, dt, at, n);
  for (int64_t k = 0; k < n; k++) {
    float rg = w[0][k], z = w[1][k], ng = w[2][k], hx = w[3][k], hn = w[4][k], g = go[k];
    float gn = g * (1 - z) * (1 - ng * ng); /* with respect to the new gate's tanh input */
    w[0][k] = gn * hn * rg * (1 - rg);
    w[1][k] = g * (hx - ng) * z * (1 - z);
    w[2][k] = gn;
    ghn[k] = gn * rg;
    go[k] = g * z; /* the gradient of hx */
  }
  for (int q = 0; q < 3; q++) store(a->gx0, dt, row + q * h, w[q], n);
  store(a->gx1, dt, row, w[0], n);
  store(a->gx1, dt, row + h, w[1], n);
  store(a->gx1, dt, row + 2 * h, ghn, n);
  store(a->gprev, dt, at, go, n);
}

typedef struct rnn_ctx {
  const tnk_rnn_cell_args_t *a;
  int64_t blocks; /* hidden-unit blocks per row */
} rnn_ctx_t;

static void rnn_range(void *p, int64_t begin, int64_t end) {
  const rnn_ctx_t *c = p;
  const tnk_rnn_cell_args_t *a = c->a;
  for (int64_t t = begin; t < end; t++) {
    int64_t r = t / c->blocks, j0 = (t % c->blocks) * BLK;
    int64_t n = a->h - j0 < BLK ? a->h - j0 : BLK;
    if (a->gru)
      (a->backward ? gru_backward : gru_forward)(a, r, j0, n);
    else
      (a->backward ? lstm_backward : lstm_forward)(a, r, j0, n);
  }
}

void tnk_rnn_cell(const tnk_rnn_cell_args_t *a) {
  if (!tnk_rnn_cell_supported(a->dtype) || a->b <= 0 || a->h <= 0) return;
  rnn_ctx_t c = {a, (a->h + BLK - 1) / BLK};
  /* a block is about 5 * BLK activations: threads split the work only
   * where each gets 16 blocks or more */
  tnk_parallel_for(a->b * c.blocks, 16, rnn_range, &c);
}
