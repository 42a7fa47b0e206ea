/* The neural-network kernels (attention.c, softmax.c, layer_norm.c,
 * rnn.c, pooling.c, resample.c: pooling, resampling, grid sampling) against
 * references in double. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Fused attention against a naive softmax(q k^T s) v, with a causal mask,
 * grouped heads and lengths that are not multiples of the 128 tiles; the
 * backward is checked against central differences of a weighted sum. */
static double naive_attention_loss(const float *q, const float *k, const float *v, const float *w,
                                   int H, int HK, int LQ, int LK, int E, float scale, float *o) {
  double loss = 0;
  for (int h = 0; h < H; h++) {
    int kh = h / (H / HK);
    for (int i = 0; i < LQ; i++) {
      double s[200], mx = -1e300, sum = 0;
      for (int j = 0; j < LK; j++) {
        double d = 0;
        for (int e = 0; e < E; e++) d += q[(h * LQ + i) * E + e] * k[(kh * LK + j) * E + e];
        s[j] = j <= i ? d * scale : -INFINITY;
        if (s[j] > mx) mx = s[j];
      }
      for (int j = 0; j < LK; j++) sum += s[j] = exp(s[j] - mx);
      for (int e = 0; e < E; e++) {
        double acc = 0;
        for (int j = 0; j < LK; j++) acc += s[j] / sum * v[(kh * LK + j) * E + e];
        if (o) o[(h * LQ + i) * E + e] = (float)acc;
        loss += acc * w[(h * LQ + i) * E + e];
      }
    }
  }
  return loss;
}

static void test_attention(void) {
  enum { H = 4, HK = 2, LQ = 70, LK = 70, E = 8 };
  static float q[H * LQ * E], k[HK * LK * E], v[HK * LK * E], w[H * LQ * E], o[H * LQ * E],
      ref[H * LQ * E], lse[H * LQ], gq[H * LQ * E], gk[HK * LK * E], gv[HK * LK * E];
  for (int i = 0; i < H * LQ * E; i++) {
    q[i] = (float)((i * 37 % 23) - 11) / 11.0f;
    w[i] = (float)((i * 13 % 7) - 3) / 3.0f;
  }
  for (int i = 0; i < HK * LK * E; i++) {
    k[i] = (float)((i * 29 % 19) - 9) / 9.0f;
    v[i] = (float)((i * 11 % 17) - 8) / 8.0f;
  }
  float scale = 0.35f;
  tnk_sdpa_args_t a = {.batch = 1,
                       .heads = H,
                       .kv_heads = HK,
                       .lq = LQ,
                       .lk = LK,
                       .e = E,
                       .ev = E,
                       .q = q,
                       .k = k,
                       .v = v,
                       .go = w,
                       .o = o,
                       .lse = lse,
                       .gq = gq,
                       .gk = gk,
                       .gv = gv,
                       .causal = 1,
                       .scale = scale};
  int64_t sq[3] = {H * LQ * E, LQ * E, E}, sk[3] = {HK * LK * E, LK * E, E};
  memcpy(a.sq, sq, sizeof sq);
  memcpy(a.so, sq, sizeof sq);
  memcpy(a.sgo, sq, sizeof sq);
  memcpy(a.sgq, sq, sizeof sq);
  memcpy(a.sk, sk, sizeof sk);
  memcpy(a.sv, sk, sizeof sk);
  memcpy(a.sgk, sk, sizeof sk);
  memcpy(a.sgv, sk, sizeof sk);
  tnk_sdpa_forward(&a);
  naive_attention_loss(q, k, v, w, H, HK, LQ, LK, E, scale, ref);
  int bad = 0;
  for (int i = 0; i < H * LQ * E; i++) bad += fabsf(o[i] - ref[i]) > 1e-5f;
  CHECK(bad == 0);
  tnk_sdpa_backward(&a);
  /* spot-check gradients by central differences */
  float *params[3] = {q, k, v}, *grads[3] = {gq, gk, gv};
  int sizes[3] = {H * LQ * E, HK * LK * E, HK * LK * E};
  for (int t = 0; t < 3; t++)
    for (int idx = 3; idx < sizes[t]; idx += sizes[t] / 7) {
      float keep = params[t][idx], eps = 1e-2f;
      params[t][idx] = keep + eps;
      double up = naive_attention_loss(q, k, v, w, H, HK, LQ, LK, E, scale, NULL);
      params[t][idx] = keep - eps;
      double down = naive_attention_loss(q, k, v, w, H, HK, LQ, LK, E, scale, NULL);
      params[t][idx] = keep;
      double fd = (up - down) / (2 * eps);
      if (fabs(fd - grads[t][idx]) > 2e-3 * (1 + fabs(fd))) bad++;
    }
  CHECK(bad == 0);
}

/* Flash attention's forms: packed sequences (cu_q / cu_k, one empty, one of
 * a single query, lengths past a tile), queries shorter than keys, causal
 * and windows aligned to the end of the keys, grouped heads; against a
 * naive per-sequence softmax in double. A query that sees no key gives 0. */
static void test_attention_varlen(void) {
  enum { B = 4, H = 2, HK = 1, E = 8, TQ = 1 + 0 + 140 + 9, TK = 5 + 3 + 150 + 9 };
  static const int32_t cu_q[B + 1] = {0, 1, 1, 141, 150}, cu_k[B + 1] = {0, 5, 8, 158, 167};
  static float q[TQ * H * E], k[TK * HK * E], v[TK * HK * E], o[TQ * H * E], lse[H * TQ];
  for (int i = 0; i < TQ * H * E; i++) q[i] = (float)((i * 37 % 23) - 11) / 11.0f;
  for (int i = 0; i < TK * HK * E; i++) {
    k[i] = (float)((i * 29 % 19) - 9) / 9.0f;
    v[i] = (float)((i * 11 % 17) - 8) / 8.0f;
  }
  const int64_t windows[3][2] = {{-1, 0}, {-1, -1}, {4, 2}};
  int bad = 0;
  for (int wi = 0; wi < 3; wi++) {
    int64_t wl = windows[wi][0], wr = windows[wi][1];
    tnk_sdpa_args_t a = {.batch = B,
                         .heads = H,
                         .kv_heads = HK,
                         .lq = 140,
                         .lk = 150,
                         .e = E,
                         .ev = E,
                         .q = q,
                         .k = k,
                         .v = v,
                         .o = o,
                         .lse = lse,
                         .sq = {0, E, H * E},
                         .sk = {0, E, HK * E},
                         .sv = {0, E, HK * E},
                         .so = {0, E, H * E},
                         .scale = 0.4f,
                         .bottom_right = 1,
                         .windowed = 1,
                         .wl = wl,
                         .wr = wr,
                         .lse_total = TQ,
                         .cu_q = cu_q,
                         .cu_k = cu_k};
    tnk_sdpa_forward(&a);
    for (int b = 0; b < B; b++) {
      int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b], d = lk - lq;
      for (int h = 0; h < H; h++)
        for (int i = 0; i < lq; i++) {
          double s[160], mx = -INFINITY, sum = 0;
          for (int j = 0; j < lk; j++) {
            int vis = (wl < 0 || j >= i + d - wl) && (wr < 0 || j <= i + d + wr);
            double dot = 0;
            for (int e = 0; e < E; e++)
              dot += q[((cu_q[b] + i) * H + h) * E + e] * k[(cu_k[b] + j) * HK * E + e];
            s[j] = vis ? dot * 0.4 : -INFINITY;
            if (s[j] > mx) mx = s[j];
          }
          for (int j = 0; j < lk; j++) sum += s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
          for (int e = 0; e < E; e++) {
            double acc = 0;
            for (int j = 0; j < lk; j++) acc += sum > 0 ? s[j] / sum * v[(cu_k[b] + j) * E + e] : 0;
            bad += fabs(o[((cu_q[b] + i) * H + h) * E + e] - acc) > 1e-5;
          }
          float l = lse[h * TQ + cu_q[b] + i];
          bad += sum > 0 ? fabs(l - (mx + log(sum))) > 1e-5 : l != -INFINITY;
        }
    }
  }
  CHECK(bad == 0);
}

static void test_ternary_softmax_reduce_layernorm(void) {
  int bad = 0;
  /* addcmul / addcdiv / lerp: contiguous fast path and broadcast path */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {6, 5, 4, 3, 2, 1}, c[6] = {1, 2, 1, 2, 1, 2}, o[6];
  for (int op = 0; op < TNK_TERNARY_OP_COUNT; op++)
    for (int bc = 0; bc < 2; bc++) {
      tnk_ternary_args_t t = {.shape = {2, 0, {2, 3}},
                              .out = {o, TNK_F32, 0, {3, 1}},
                              .a = {a, TNK_F32, 0, {3, 1}},
                              .b = {b, TNK_F32, 0, {3, 1}},
                              .c = {c, TNK_F32, 0, {bc ? 0 : 3, 1}},
                              .op = op,
                              .dtype = TNK_F32,
                              .value = 0.25};
      tnk_ternary(&t);
      for (int i = 0; i < 6; i++) {
        float cv = c[bc ? i % 3 : i];
        float w = op == TNK_ADDCMUL   ? a[i] + 0.25f * b[i] * cv
                  : op == TNK_ADDCDIV ? a[i] + 0.25f * (b[i] / cv)
                  : op == TNK_LERP_TENSOR /* the weight from c, ATen's two halves */
                      ? (cv < 0.5f ? a[i] + cv * (b[i] - a[i]) : b[i] - (b[i] - a[i]) * (1 - cv))
                      : a[i] + 0.25f * (b[i] - a[i]);
        bad += fabsf(o[i] - w) > 1e-6f;
      }
    }
  /* softmax over the middle dim of (2, 3, 2), then its backward */
  float x[12], y[12], gy[12], gx[12];
  for (int i = 0; i < 12; i++) {
    x[i] = (float)(i % 5) - 2;
    gy[i] = (float)(i % 3);
  }
  tnk_softmax_args_t sm = {
      .out = y, .in = x, .outer = 2, .len = 3, .inner = 2, .dtype = TNK_F32, .out_dtype = TNK_F32};
  tnk_softmax(&sm);
  for (int o2 = 0; o2 < 2; o2++)
    for (int i2 = 0; i2 < 2; i2++) {
      double s = 0, dot = 0;
      for (int k = 0; k < 3; k++) s += exp(x[o2 * 6 + k * 2 + i2]);
      for (int k = 0; k < 3; k++) {
        double want = exp(x[o2 * 6 + k * 2 + i2]) / s;
        bad += fabs(y[o2 * 6 + k * 2 + i2] - want) > 1e-6;
        dot += gy[o2 * 6 + k * 2 + i2] * want;
      }
      tnk_softmax_args_t bw = {.out = gx,
                               .in = y,
                               .grad = gy,
                               .outer = 2,
                               .len = 3,
                               .inner = 2,
                               .dtype = TNK_F32,
                               .out_dtype = TNK_F32,
                               .backward = 1};
      tnk_softmax(&bw);
      for (int k = 0; k < 3; k++) {
        int idx = o2 * 6 + k * 2 + i2;
        bad += fabs(gx[idx] - y[idx] * (gy[idx] - dot)) > 1e-5;
      }
    }
  /* sum over dim 1 of a (2, 3, 2) int32 tensor into int64 */
  int32_t xi[12];
  int64_t so[4];
  for (int i = 0; i < 12; i++) xi[i] = i;
  tnk_reduce_args_t r = {.shape = {3, 0, {2, 3, 2}},
                         .out = {so, TNK_I64, 0, {2, 0, 1}},
                         .in = {xi, TNK_I32, 0, {6, 2, 1}},
                         .reduced = {0, 1, 0},
                         .op = TNK_SUM};
  tnk_reduce(&r);
  bad += so[0] != 0 + 2 + 4 || so[1] != 1 + 3 + 5 || so[2] != 6 + 8 + 10 || so[3] != 7 + 9 + 11;
  /* layer norm, forward and backward, with and without weight and bias,
   * against the formulas in double (rows of 37: no multiple of a vector) */
  enum { LR = 3, LN = 37 };
  float lx[LR * LN], lw[LN], lbias[LN], lg[LR * LN], ly[LR * LN], mean[LR], rstd[LR];
  float lgx[LR * LN], lgw[LN], lgb[LN];
  for (int i = 0; i < LR * LN; i++) {
    lx[i] = (float)((i * 37) % 23) * 0.37f - 3.0f + (float)(i / LN) * 10.0f;
    lg[i] = (float)((i * 11) % 7) - 2.5f;
  }
  for (int j = 0; j < LN; j++) {
    lw[j] = 0.5f + (float)(j % 5) * 0.25f;
    lbias[j] = (float)(j % 3) - 1.0f;
  }
  for (int affine = 0; affine < 2; affine++) {
    tnk_layer_norm_args_t ln = {.rows = LR,
                                .n = LN,
                                .dtype = TNK_F32,
                                .eps = 1e-5,
                                .x = lx,
                                .w = affine ? lw : NULL,
                                .b = affine ? lbias : NULL,
                                .y = ly,
                                .mean = mean,
                                .rstd = rstd};
    tnk_layer_norm(&ln);
    tnk_layer_norm_args_t lb = ln;
    lb.backward = 1;
    lb.y = NULL;
    lb.g = lg;
    lb.gx = lgx;
    lb.gw = affine ? lgw : NULL;
    lb.gb = affine ? lgb : NULL;
    tnk_layer_norm(&lb);
    double rgw[LN] = {0}, rgb[LN] = {0};
    for (int rr = 0; rr < LR; rr++) {
      const float *x = lx + rr * LN, *g = lg + rr * LN;
      double m = 0, v = 0;
      for (int j = 0; j < LN; j++) m += x[j];
      m /= LN;
      for (int j = 0; j < LN; j++) v += (x[j] - m) * (x[j] - m);
      double rs = 1.0 / sqrt(v / LN + 1e-5), xh[LN], sg = 0, sgx = 0;
      bad += fabs(mean[rr] - m) > 1e-5 || fabs(rstd[rr] - rs) > 1e-5 * rs;
      for (int j = 0; j < LN; j++) {
        xh[j] = (x[j] - m) * rs;
        double w = affine ? lw[j] : 1.0, b = affine ? lbias[j] : 0.0;
        bad += fabs(ly[rr * LN + j] - (xh[j] * w + b)) > 1e-5;
        double gh = g[j] * w;
        sg += gh;
        sgx += gh * xh[j];
        rgw[j] += g[j] * xh[j];
        rgb[j] += g[j];
      }
      for (int j = 0; j < LN; j++) {
        double w = affine ? lw[j] : 1.0;
        double want = rs * (g[j] * w - sg / LN - xh[j] * sgx / LN);
        bad += fabs(lgx[rr * LN + j] - want) > 1e-4 * (1 + fabs(want));
      }
    }
    for (int j = 0; j < LN && affine; j++)
      bad += fabs(lgw[j] - rgw[j]) > 1e-4 * (1 + fabs(rgw[j])) ||
             fabs(lgb[j] - rgb[j]) > 1e-4 * (1 + fabs(rgb[j]));
  }
  CHECK(bad == 0);
}

static void test_pool_upsample(void) {
  /* 4x5 plane: max 2x2 stride 2 with padding 1, avg and bilinear; backward
   * passes conserve the gradient's sum (avg without padding, bilinear) */
  float x[20], out[12], gout[12], gin[20];
  int64_t idx[12];
  for (int i = 0; i < 20; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
  tnk_pool_args_t a = {.in = x,
                       .out = out,
                       .indices = idx,
                       .planes = 1,
                       .h = 4,
                       .w = 5,
                       .oh = 3,
                       .ow = 3,
                       .kh = 2,
                       .kw = 2,
                       .sh = 2,
                       .sw = 2,
                       .ph = 1,
                       .pw = 1,
                       .dh = 1,
                       .dw = 1,
                       .dtype = TNK_F32,
                       .kind = TNK_POOL_MAX};
  tnk_pool(&a);
  int bad = 0;
  for (int oh = 0; oh < 3; oh++)
    for (int ow = 0; ow < 3; ow++) {
      float best = -INFINITY;
      for (int y = oh * 2 - 1; y < oh * 2 + 1; y++)
        for (int xx = ow * 2 - 1; xx < ow * 2 + 1; xx++)
          if (y >= 0 && y < 4 && xx >= 0 && xx < 5 && x[y * 5 + xx] > best) best = x[y * 5 + xx];
      bad += out[oh * 3 + ow] != best || x[idx[oh * 3 + ow]] != best;
    }
  CHECK(bad == 0);
  for (int i = 0; i < 12; i++) gout[i] = 1.0f + (float)i;
  a.backward = 1;
  a.in = gout;
  a.out = gin;
  tnk_pool(&a);
  double s = 0;
  for (int i = 0; i < 20; i++) s += gin[i];
  CHECK(s == 45.0); /* each of the 9 output gradients lands on one input */
  tnk_resample_args_t u = {.in = x,
                           .out = gin,
                           .planes = 1,
                           .d = 1,
                           .h = 4,
                           .w = 5,
                           .od = 1,
                           .oh = 2,
                           .ow = 2,
                           .scale_h = 2.0,
                           .scale_w = 2.5,
                           .dtype = TNK_F32};
  tnk_resample(&u);
  u.backward = 1;
  u.in = gout;
  u.out = gin;
  u.oh = 3;
  u.ow = 4;
  u.scale_h = 4.0 / 3;
  u.scale_w = 5.0 / 4;
  tnk_resample(&u);
  s = 0;
  for (int i = 0; i < 20; i++) s += gin[i];
  CHECK(fabs(s - 78.0) < 1e-4); /* tap weights sum to one */
}

/* 3-D pooling: max 2x2x2 with dilation in depth against a direct search,
 * and the average pool's backward conserving the gradient (no padding,
 * windows that tile the volume). */
static void test_pool3d(void) {
  enum { D = 3, H = 4, W = 5 };
  float x[D * H * W], out[2 * 3 * 4], gin[D * H * W], gout[2 * 3 * 4];
  int64_t idx[2 * 3 * 4];
  for (int i = 0; i < D * H * W; i++) x[i] = (float)((i * 13) % 17) - 8.0f;
  tnk_pool_args_t a = {.in = x,
                       .out = out,
                       .indices = idx,
                       .planes = 1,
                       .d = D,
                       .h = H,
                       .w = W,
                       .od = 1,
                       .oh = 3,
                       .ow = 4,
                       .kd = 2,
                       .kh = 2,
                       .kw = 2,
                       .sd = 1,
                       .sh = 1,
                       .sw = 1,
                       .pd = 0,
                       .ph = 0,
                       .pw = 0,
                       .dd = 2,
                       .dh = 1,
                       .dw = 1,
                       .dtype = TNK_F32,
                       .kind = TNK_POOL_MAX};
  tnk_pool(&a);
  int bad = 0;
  for (int oy = 0; oy < 3; oy++)
    for (int ox = 0; ox < 4; ox++) {
      float best = -INFINITY;
      for (int z = 0; z <= 2; z += 2)
        for (int y = oy; y < oy + 2; y++)
          for (int xx = ox; xx < ox + 2; xx++)
            if (x[(z * H + y) * W + xx] > best) best = x[(z * H + y) * W + xx];
      bad += out[oy * 4 + ox] != best || x[idx[oy * 4 + ox]] != best;
    }
  CHECK(bad == 0);
  /* average 1x2x... windows over a [2, 4, 4] volume part: stride = kernel */
  tnk_pool_args_t v = {.in = x,
                       .out = out,
                       .planes = 1,
                       .d = D,
                       .h = H,
                       .w = W,
                       .od = 3,
                       .oh = 2,
                       .ow = 2,
                       .kd = 1,
                       .kh = 2,
                       .kw = 2,
                       .sd = 1,
                       .sh = 2,
                       .sw = 2,
                       .dd = 1,
                       .dh = 1,
                       .dw = 1,
                       .dtype = TNK_F32,
                       .kind = TNK_POOL_AVG};
  tnk_pool(&v);
  CHECK(out[0] == (x[0] + x[1] + x[W] + x[W + 1]) / 4);
  for (int i = 0; i < 12; i++) gout[i] = 1.0f + (float)i;
  v.backward = 1;
  v.in = gout;
  v.out = gin;
  tnk_pool(&v);
  double s = 0;
  for (int i = 0; i < D * H * W; i++) s += gin[i];
  CHECK(fabs(s - 78.0) < 1e-4); /* windows tile the pooled part: the sum is kept */
  CHECK(gin[4] == 0.0f);        /* column 4 lies outside every window */
}

/* Cubic resampling interpolates: with align_corners and scale 1/2 every
 * even output lands on an input sample and equals it; a constant stays
 * constant (the weights sum to one), so the backward keeps the gradient's
 * sum. */
static void test_resample_cubic(void) {
  float in[8], up[15], g[15], back[8];
  for (int i = 0; i < 8; i++) in[i] = (float)(i * i) - 3.0f;
  tnk_resample_args_t c = {.in = in,
                           .out = up,
                           .planes = 1,
                           .d = 1,
                           .h = 1,
                           .w = 8,
                           .od = 1,
                           .oh = 1,
                           .ow = 15,
                           .scale_w = 0.5,
                           .dtype = TNK_F32,
                           .align_corners = 1,
                           .mode = TNK_RESAMPLE_CUBIC};
  tnk_resample(&c);
  int bad = 0;
  for (int k = 0; k < 8; k++) bad += fabsf(up[2 * k] - in[k]) > 1e-5f;
  for (int i = 0; i < 8; i++) in[i] = 2.5f;
  tnk_resample(&c);
  for (int o = 0; o < 15; o++) bad += fabsf(up[o] - 2.5f) > 1e-5f;
  CHECK(bad == 0);
  for (int o = 0; o < 15; o++) g[o] = (float)(o % 5) - 1.0f;
  c.backward = 1;
  c.in = g;
  c.out = back;
  tnk_resample(&c);
  double sg = 0, sb = 0;
  for (int o = 0; o < 15; o++) sg += g[o];
  for (int i = 0; i < 8; i++) sb += back[i];
  CHECK(fabs(sg - sb) < 1e-4);
}

/* The AVX-512 configuration (the callers return early without AVX-512). */
static const tnk_config_t *avx512_cfg(void) {
  static tnk_config_t c;
  tnk_config_for_isa(TNK_ISA_AVX512, &c);
  return &c;
}

/* The pipelined AVX-512 softmax against a double-precision reference:
 * rows of 48, one with a NaN (all NaN out), one all -inf (NaN, as CPU's),
 * one with -inf entries (exact zeros) and large values. */
static void test_softmax_pipelined(void) {
  if (!(tnk_cpu_features() & TNK_ISA_AVX512)) return;
  enum { R = 6, N = 48 };
  float *x = aligned_alloc(64, sizeof(float) * R * N),
        *y = aligned_alloc(64, sizeof(float) * R * N);
  float *scratch = aligned_alloc(64, sizeof(float) * 2 * N);
  for (int i = 0; i < R * N; i++) x[i] = (float)((i * 37) % 23) * 0.7f - 8.0f;
  x[1 * N + 5] = NAN;
  for (int k = 0; k < N; k++) x[2 * N + k] = -INFINITY;
  x[3 * N + 0] = -INFINITY;
  x[3 * N + 7] = 80.0f;
  x[4 * N + 3] = 1e30f;
  avx512_cfg()->vmath.softmax_rows_stream(x, y, R, N, scratch);
  int bad = 0;
  for (int r = 0; r < R; r++) {
    double mx = -INFINITY, sum = 0;
    int nan = 0;
    for (int k = 0; k < N; k++) {
      nan |= isnan(x[r * N + k]);
      if (x[r * N + k] > mx) mx = x[r * N + k];
    }
    for (int k = 0; k < N; k++) sum += exp((double)x[r * N + k] - mx);
    for (int k = 0; k < N; k++) {
      double want = nan || isinf(mx) ? NAN : exp((double)x[r * N + k] - mx) / sum;
      double got = y[r * N + k];
      if (isnan(want))
        bad += !isnan(got);
      else
        bad += fabs(got - want) > 1e-6 * (1 + want) || (want == 0 && got != 0);
    }
  }
  CHECK(bad == 0);
  free(x);
  free(y);
  free(scratch);
}

/* grid_sample (bilinear, nearest, bicubic): with align_corners, grid points
 * on pixel centres read those pixels exactly; NaN, infinite and huge
 * coordinates read nothing (zeros padding) and never index outside the
 * input; the backward runs on them. */
static void test_grid_sample(void) {
  enum { H = 3, W = 4, P = 6 };
  float x[H * W], grid[P * 2], out[P], gout[P], gin[H * W], ggrid[P * 2];
  for (int i = 0; i < H * W; i++) x[i] = (float)(i * 3 % 7) - 2.0f;
  /* (x, y) pixel (2, 1), (0, 0), (3, 2), then NaN, +inf, 1e30 */
  float pts[P][2] = {{2.0f * 2 / (W - 1) - 1, 2.0f * 1 / (H - 1) - 1},
                     {-1, -1},
                     {1, 1},
                     {NAN, 0},
                     {INFINITY, 0.5f},
                     {1e30f, -1e30f}};
  for (int i = 0; i < P; i++) {
    grid[2 * i] = pts[i][0];
    grid[2 * i + 1] = pts[i][1];
  }
  for (int mode = 0; mode < 3; mode++) /* bilinear, nearest, bicubic (weights 0 1 0 0) */
    for (int pad = 0; pad < 3; pad++) {
      tnk_grid_sample_args_t a = {.in = x,
                                  .grid = grid,
                                  .out = out,
                                  .n = 1,
                                  .c = 1,
                                  .h = H,
                                  .w = W,
                                  .oh = 1,
                                  .ow = P,
                                  .dtype = TNK_F32,
                                  .mode = mode,
                                  .padding = pad,
                                  .align_corners = 1};
      tnk_grid_sample(&a);
      CHECK(fabsf(out[0] - x[1 * W + 2]) < 1e-5f);
      CHECK(fabsf(out[1] - x[0]) < 1e-5f && fabsf(out[2] - x[H * W - 1]) < 1e-5f);
      /* NaN: a NaN bilinear sample (as CPU), no tap for nearest */
      if (pad == TNK_GRID_PAD_ZEROS)
        CHECK((mode == TNK_GRID_NEAREST ? out[3] == 0 && out[4] == 0
                                        : isnan(out[3]) && isnan(out[4])) &&
              out[5] == 0);
      for (int i = 0; i < P; i++) gout[i] = 1.0f;
      a.backward = 1;
      a.gout = gout;
      a.gin = gin;
      a.ggrid = ggrid;
      tnk_grid_sample(&a);
      double s = 0;
      for (int i = 0; i < H * W; i++) s += gin[i];
      if (pad == TNK_GRID_PAD_ZEROS) CHECK(fabs(s - 3.0) < 1e-5); /* three points inside */
    }
}

/* 3-D grid_sample: with align_corners a grid point on a voxel centre reads
 * that voxel, a point halfway along z the mean of two voxels (trilinear);
 * NaN reads nothing (0, as CPU's 3-D kernel); the input gradient of a unit
 * output gradient sums to the points inside; nearest reads the voxel. */
static void test_grid_sample_3d(void) {
  enum { D = 2, H = 3, W = 4, P = 3 };
  float x[D * H * W], grid[P * 3], out[P], gout[P] = {1, 1, 1}, gin[D * H * W], ggrid[P * 3];
  for (int i = 0; i < D * H * W; i++) x[i] = (float)(i * 5 % 11) - 3.0f;
  /* voxel (z, y, x) = (1, 2, 1); halfway between (0, 1, 3) and (1, 1, 3); NaN */
  float pts[P][3] = {{2.0f / (W - 1) - 1, 1, 1}, {1, 0, 0}, {NAN, 0, 0}};
  memcpy(grid, pts, sizeof pts);
  for (int mode = 0; mode < 2; mode++) {
    tnk_grid_sample_args_t a = {.in = x,
                                .grid = grid,
                                .out = out,
                                .n = 1,
                                .c = 1,
                                .d = D,
                                .h = H,
                                .w = W,
                                .od = 1,
                                .oh = 1,
                                .ow = P,
                                .dtype = TNK_F32,
                                .mode = mode,
                                .align_corners = 1,
                                .three_d = 1};
    tnk_grid_sample(&a);
    CHECK(fabsf(out[0] - x[(1 * H + 2) * W + 1]) < 1e-5f);
    float half = mode == TNK_GRID_BILINEAR
                     ? 0.5f * (x[(0 * H + 1) * W + 3] + x[(1 * H + 1) * W + 3])
                     : x[(0 * H + 1) * W + 3]; /* z = 0.5 rounds half to even: 0 */
    CHECK(fabsf(out[1] - half) < 1e-5f);
    CHECK(out[2] == 0);
    a.backward = 1;
    a.gout = gout;
    a.gin = gin;
    a.ggrid = ggrid;
    tnk_grid_sample(&a);
    double s = 0;
    for (int i = 0; i < D * H * W; i++) s += gin[i];
    CHECK(fabs(s - 2.0) < 1e-5 && ggrid[6] == 0 && ggrid[7] == 0 && ggrid[8] == 0);
  }
}

/* The pipelined AVX-512 layer norm against a double-precision reference,
 * with and without weight and bias. */
static void test_layer_norm_pipelined(void) {
  if (!(tnk_cpu_features() & TNK_ISA_AVX512)) return;
  enum { R = 5, N = 32 };
  float *x = aligned_alloc(64, sizeof(float) * R * N),
        *y = aligned_alloc(64, sizeof(float) * R * N);
  float w[N], b[N], mean[R], rstd[R];
  for (int i = 0; i < R * N; i++) x[i] = (float)((i * 29) % 31) * 0.3f - 4.0f + (float)(i / N);
  for (int k = 0; k < N; k++) {
    w[k] = 0.5f + 0.01f * (float)k;
    b[k] = (float)(k % 3) - 1.0f;
  }
  int bad = 0;
  for (int affine = 0; affine < 2; affine++) {
    avx512_cfg()->vmath.layer_norm_rows_stream(x, y, R, N, 1e-5f, affine ? w : NULL,
                                               affine ? b : NULL, mean, rstd);
    for (int r = 0; r < R; r++) {
      double mu = 0, var = 0;
      for (int k = 0; k < N; k++) mu += x[r * N + k];
      mu /= N;
      for (int k = 0; k < N; k++) var += (x[r * N + k] - mu) * (x[r * N + k] - mu);
      double rs = 1 / sqrt(var / N + 1e-5);
      bad += fabs(mean[r] - mu) > 1e-5 * (1 + fabs(mu)) || fabs(rstd[r] - rs) > 1e-5 * rs;
      for (int k = 0; k < N; k++) {
        double want = (x[r * N + k] - mu) * rs;
        if (affine) want = want * w[k] + b[k];
        bad += fabs(y[r * N + k] - want) > 1e-5 * (1 + fabs(want));
      }
    }
  }
  CHECK(bad == 0);
  free(x);
  free(y);
}

/* Softmax and log-softmax of rows whose exponentials overflow or underflow
 * fp32 without the max subtraction (around +-100 and 1e4), along the last
 * dimension (the fp32 row kernel, rows of 37: a vector remainder) and an
 * inner one (the strided path), against the formulas in double. */
static void test_softmax_range(void) {
  enum { R = 4, L = 37 };
  static const float offset[R] = {100.0f, -120.0f, 0.0f, 5e3f};
  static const float scale[R] = {3.0f, 2.0f, 1e4f, 1.0f};
  float x[R * L], xt[L * R], y[R * L], yt[L * R];
  for (int r = 0; r < R; r++)
    for (int k = 0; k < L; k++) {
      x[r * L + k] = offset[r] + scale[r] * (float)((k * 29 % 37) - 18) / 18.0f;
      xt[k * R + r] = x[r * L + k];
    }
  int bad = 0;
  for (int lg = 0; lg < 2; lg++) {
    tnk_softmax_args_t a = {.out = y,
                            .in = x,
                            .outer = R,
                            .len = L,
                            .inner = 1,
                            .dtype = TNK_F32,
                            .out_dtype = TNK_F32,
                            .log = lg};
    tnk_softmax(&a);
    tnk_softmax_args_t t = a;
    t.out = yt;
    t.in = xt;
    t.outer = 1;
    t.inner = R;
    tnk_softmax(&t);
    for (int r = 0; r < R; r++) {
      double mx = -INFINITY, s = 0;
      for (int k = 0; k < L; k++) mx = x[r * L + k] > mx ? x[r * L + k] : mx;
      for (int k = 0; k < L; k++) s += exp((double)x[r * L + k] - mx);
      for (int k = 0; k < L; k++) {
        double z = (double)x[r * L + k] - mx;
        double want = lg ? z - log(s) : exp(z) / s;
        double tol = lg ? 1e-5 * (1 + fabs(want)) + 2e-3 * (scale[r] > 100) : 1e-6;
        bad += !(fabs(y[r * L + k] - want) <= tol);
        bad += !(fabs(yt[k * R + r] - want) <= tol);
      }
    }
  }
  CHECK(bad == 0);
}

/* ---- the fused LSTM / GRU cells against a double-precision reference ---- */

static double sig_d(double x) { return 1 / (1 + exp(-x)); }

/* data in dtype dt from doubles (rounded), and back */
static void put(void *dst, int dt, const double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == TNK_F32)
      ((float *)dst)[i] = (float)x[i];
    else
      ((uint16_t *)dst)[i] = tnk_f32_to_bf16((float)x[i]);
  }
}
static double get(const void *src, int dt, int64_t i) {
  return dt == TNK_F32 ? ((const float *)src)[i] : tnk_bf16_to_f32(((const uint16_t *)src)[i]);
}
static int rnn_close(const void *got, int dt, const double *want, int64_t n, const char *what) {
  double tol = dt == TNK_F32 ? 2e-5 : 2e-2;
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(get(got, dt, i) - want[i]) <= tol * (1 + fabs(want[i])))) bad++;
  if (bad)
    fprintf(stderr, "  rnn cell %s (dtype %d): %d of %lld off\n", what, dt, bad, (long long)n);
  return bad;
}

static void test_rnn_cell(void) {
  enum { B = 3, H = 300 }; /* two blocks of hidden units per row, the second partial */
  static double ig[B * 5 * H], hg[B * 5 * H], b1[5 * H], b2[5 * H], prev[B * H], g1[B * H],
      g2[B * H], want[6][B * 5 * H];
  static char buf[14][B * 5 * H * 4];
  for (int i = 0; i < B * 5 * H; i++) {
    ig[i] = sin(0.37 * i) * 2.5;
    hg[i] = cos(0.11 * i) * 1.5;
  }
  for (int i = 0; i < 5 * H; i++) b1[i] = 0.2 * sin(0.05 * i), b2[i] = -0.1 * cos(0.03 * i);
  for (int i = 0; i < B * H; i++)
    prev[i] = 0.8 * cos(0.21 * i), g1[i] = sin(0.13 * i), g2[i] = 0.5 * cos(0.07 * i);
  const int dts[2] = {TNK_F32, TNK_BF16};
  for (int d = 0; d < 2; d++)
    for (int gru = 0; gru < 2; gru++)
      for (int bias = 0; bias < 2; bias++)
        for (int grads = 0; grads < (gru ? 1 : 3); grads++) { /* LSTM: both, only hy, only cy */
          int dt = dts[d], k = gru ? 3 : 4;
          /* inputs rounded to dt, and the reference read back from them */
          put(buf[0], dt, ig, B * k * H), put(buf[1], dt, hg, B * k * H);
          put(buf[2], dt, b1, k * H), put(buf[3], dt, b2, k * H), put(buf[4], dt, prev, B * H);
          put(buf[5], dt, g1, B * H), put(buf[6], dt, g2, B * H);
          for (int r = 0; r < B; r++)
            for (int j = 0; j < H; j++) {
              double z[4], x = get(buf[4], dt, r * H + j),
                           gh = grads == 2 ? 0 : get(buf[5], dt, r * H + j),
                           gc = gru || grads == 1 ? 0 : get(buf[6], dt, r * H + j);
              for (int q = 0; q < k; q++) {
                int at = r * k * H + q * H + j;
                z[q] = get(buf[0], dt, at) + get(buf[1], dt, at) +
                       (bias ? get(buf[2], dt, q * H + j) + get(buf[3], dt, q * H + j) : 0);
              }
              int o1 = r * H + j;
              if (!gru) {
                double i = sig_d(z[0]), f = sig_d(z[1]), c = tanh(z[2]), o = sig_d(z[3]);
                double cy = f * x + i * c, tc = tanh(cy), gcy = gh * o * (1 - tc * tc) + gc;
                want[0][o1] = o * tc, want[1][o1] = cy;
                int a = r * 4 * H + j;
                want[2][a] = gcy * c * i * (1 - i), want[2][a + H] = gcy * x * f * (1 - f);
                want[2][a + 2 * H] = gcy * i * (1 - c * c),
                                want[2][a + 3 * H] = gh * tc * o * (1 - o);
                want[3][o1] = gcy * f;
              } else {
                double hn = get(buf[1], dt, r * 3 * H + 2 * H + j) +
                            (bias ? get(buf[3], dt, 2 * H + j) : 0);
                double rg = sig_d(z[0]), zg = sig_d(z[1]);
                double n = tanh(get(buf[0], dt, r * 3 * H + 2 * H + j) +
                                (bias ? get(buf[2], dt, 2 * H + j) : 0) + rg * hn);
                double gn = gh * (1 - zg) * (1 - n * n);
                want[0][o1] = n + zg * (x - n);
                int a = r * 3 * H + j;
                want[2][a] = want[4][a] = gn * hn * rg * (1 - rg);
                want[2][a + H] = want[4][a + H] = gh * (x - n) * zg * (1 - zg);
                want[2][a + 2 * H] = gn, want[4][a + 2 * H] = gn * rg;
                want[3][o1] = gh * zg;
              }
            }
          tnk_rnn_cell_args_t a = {.ig = buf[0],
                                   .hg = buf[1],
                                   .b1 = bias ? buf[2] : NULL,
                                   .b2 = bias ? buf[3] : NULL,
                                   .prev = buf[4],
                                   .out0 = buf[7],
                                   .out1 = buf[8],
                                   .ws = buf[9],
                                   .b = B,
                                   .h = H,
                                   .dtype = dt,
                                   .gru = gru};
          tnk_rnn_cell(&a);
          int bad = rnn_close(buf[7], dt, want[0], B * H, "hy");
          if (!gru) bad += rnn_close(buf[8], dt, want[1], B * H, "cy");
          tnk_rnn_cell_args_t g = {.ghy = grads == 2 ? NULL : buf[5],
                                   .gcy = gru || grads == 1 ? NULL : buf[6],
                                   .cy = buf[8],
                                   .prev = buf[4],
                                   .ws = buf[9],
                                   .gx0 = buf[10],
                                   .gx1 = buf[11],
                                   .gprev = buf[12],
                                   .b = B,
                                   .h = H,
                                   .dtype = dt,
                                   .gru = gru,
                                   .backward = 1};
          tnk_rnn_cell(&g);
          bad += rnn_close(buf[10], dt, want[2], B * k * H, "grad gates");
          if (gru) bad += rnn_close(buf[11], dt, want[4], B * k * H, "grad hidden gates");
          bad += rnn_close(buf[12], dt, want[3], B * H, "grad state");
          CHECK(bad == 0);
        }
  CHECK(!tnk_rnn_cell_supported(TNK_F64) && !tnk_rnn_cell_supported(TNK_I64));
}

/* Sum and max over any subset of the dimensions of dense inputs laid out in
 * any order (transposed, permuted): the reduction orders the dimensions by
 * the input's memory; against loops over the logical indices in double
 * (integer-valued data: every order of summation is exact). */
static void test_reduce_any_layout(void) {
  static const int64_t pick[] = {1, 2, 5, 33, 257};
  uint32_t seed = 5;
  int bad = 0;
  for (int trial = 0; trial < 80; trial++) {
    int nd = 2 + trial % 3, order[4];
    int64_t sizes[4], n = 1, st[4], ost[4];
    uint8_t red[4];
    for (int d = 0; d < nd; d++) {
      seed = seed * 1664525u + 1013904223u;
      sizes[d] = pick[(seed >> 24) % 5];
      if (nd > 2 && sizes[d] > 33) sizes[d] = 33;
      red[d] = (seed >> 8) & 1;
      n *= sizes[d];
      order[d] = d;
    }
    if (trial % 5 == 0)
      for (int d = 0; d < nd; d++) red[d] = 1; /* a full reduction */
    for (int d = nd - 1; d > 0; d--) {
      seed = seed * 1664525u + 1013904223u;
      int j = (int)((seed >> 16) % (uint32_t)(d + 1)), t = order[d];
      order[d] = order[j], order[j] = t;
    }
    int64_t s1 = 1, outs = 1;
    for (int j = nd - 1; j >= 0; j--) st[order[j]] = s1, s1 *= sizes[order[j]];
    for (int d = nd - 1; d >= 0; d--) { /* the output: kept dims row-major */
      ost[d] = red[d] ? 0 : outs;
      if (!red[d]) outs *= sizes[d];
    }
    float *x = malloc(n * 4), *o = malloc(outs * 4);
    double *want_s = calloc(outs, 8), *want_m = malloc(outs * 8);
    for (int64_t k = 0; k < outs; k++) want_m[k] = -INFINITY;
    for (int64_t k = 0; k < n; k++) x[k] = (float)((k * 7919) % 201) - 100;
    int64_t idx[4] = {0};
    for (int64_t k = 0; k < n; k++) {
      int64_t oi = 0, ii = 0;
      for (int d = 0; d < nd; d++) oi += idx[d] * ost[d], ii += idx[d] * st[d];
      want_s[oi] += x[ii];
      if (x[ii] > want_m[oi]) want_m[oi] = x[ii];
      for (int d = nd - 1; d >= 0 && ++idx[d] == sizes[d]; d--) idx[d] = 0;
    }
    for (int op = 0; op < 2; op++) {
      tnk_reduce_args_t r = {.shape = {nd, 0, {0}},
                             .out = {o, TNK_F32, 0, {0}},
                             .in = {x, TNK_F32, 0, {0}},
                             .op = op ? TNK_MAX : TNK_SUM};
      for (int d = 0; d < nd; d++)
        r.shape.sizes[d] = sizes[d], r.in.strides[d] = st[d], r.out.strides[d] = ost[d],
        r.reduced[d] = red[d];
      tnk_reduce(&r);
      for (int64_t k = 0; k < outs; k++) bad += o[k] != (float)(op ? want_m[k] : want_s[k]);
    }
    free(x), free(o), free(want_s), free(want_m);
  }
  CHECK(bad == 0);
}

int main(void) {
  RUN(test_attention);
  RUN(test_attention_varlen);
  RUN(test_ternary_softmax_reduce_layernorm);
  RUN(test_pool_upsample);
  RUN(test_pool3d);
  RUN(test_resample_cubic);
  RUN(test_softmax_pipelined);
  RUN(test_grid_sample);
  RUN(test_grid_sample_3d);
  RUN(test_layer_norm_pipelined);
  RUN(test_softmax_range);
  RUN(test_rnn_cell);
  RUN(test_reduce_any_layout);
  return REPORT("test_nn");
}
