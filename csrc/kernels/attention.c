/* Flash-style scaled dot product attention on top of the GEMM and vector
 * exp kernels: per (batch, head, block of 64 queries), keys in tiles of 64;
 * the running max m, sum l and output accumulator are rescaled as tiles
 * arrive (online softmax), and the backward recomputes each tile's
 * probabilities from the saved log-sum-exp. GEMMs inside a task run on the
 * task's thread (the pool is busy with the tasks themselves). Query blocks
 * are copied once, pre-multiplied by the softmax scale, so every tile GEMM
 * runs unscaled (the micro-kernels then write straight into their output). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tnk.h"
#include "vmath.h"

#define QB 128
#define KB 128

static void gemm_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t sa_r, int64_t sa_c,
                     const float *b, int64_t sb_r, int64_t sb_c, float *c, int64_t sc_r,
                     float alpha, float beta) {
  tnk_gemm_args_t g = {.batch = 1,
                       .m = m,
                       .n = n,
                       .k = k,
                       .a = a,
                       .b = b,
                       .c = c,
                       .sa_r = sa_r,
                       .sa_c = sa_c,
                       .sb_r = sb_r,
                       .sb_c = sb_c,
                       .sc_r = sc_r,
                       .sc_c = 1,
                       .dtype = TNK_F32,
                       .alpha = alpha,
                       .beta = beta};
  tnk_gemm(&g);
}

/* t[x][c] = src[c][x] for c < kn, x < w: a key/value tile transposed into
 * rows of KB, so products with its transpose read contiguous B rows and run
 * the GEMM's no-packing path. */
static void transpose_tile(const float *src, int64_t stride, int64_t kn, int64_t w, float *t) {
  for (int64_t c = 0; c < kn; c++)
    for (int64_t x = 0; x < w; x++) t[x * KB + c] = src[c * stride + x];
}

/* One batch entry's extent: its queries and keys start at rows q0 and k0
 * of dim 2 (varlen) and number lq and lk; key j is visible to query i for
 * lo(i) <= j < hi(i). */
typedef struct seq {
  int64_t q0, k0, lq, lk, d;
} seq_t;

static seq_t seq_of(const tnk_sdpa_args_t *a, int64_t b) {
  seq_t s = {0, 0, a->lq, a->lk, 0};
  if (a->cu_q) {
    s.q0 = a->cu_q[b];
    s.lq = a->cu_q[b + 1] - s.q0;
    s.k0 = a->cu_k[b];
    s.lk = a->seqused_k ? a->seqused_k[b] : a->cu_k[b + 1] - s.k0;
  }
  if (a->bottom_right) s.d = s.lk - s.lq;
  return s;
}

static int64_t vis_lo(const tnk_sdpa_args_t *a, const seq_t *s, int64_t i) {
  int64_t lo = a->windowed && a->wl >= 0 ? i + s->d - a->wl : 0;
  return lo < 0 ? 0 : lo > s->lk ? s->lk : lo;
}

static int64_t vis_hi(const tnk_sdpa_args_t *a, const seq_t *s, int64_t i) {
  int64_t hi = s->lk;
  if (a->causal && i + s->d + 1 < hi) hi = i + s->d + 1;
  if (a->windowed && a->wr >= 0 && i + s->d + a->wr + 1 < hi) hi = i + s->d + a->wr + 1;
  return hi < 0 ? 0 : hi;
}

/* Scores of one tile: s = scale * q k^T, then the mask and the visible
 * range. kt is scratch for the transposed key tile (e rows of KB). */
static void tile_scores(const tnk_sdpa_args_t *a, const seq_t *sq, int64_t b, int64_t h, int64_t i0,
                        int64_t qn, int64_t j0, int64_t kn, const float *qs, const float *k,
                        float *s, float *kt) {
  transpose_tile(k, a->sk[2], kn, a->e, kt);
  gemm_f32(qn, kn, a->e, qs, a->e, 1, kt, KB, 1, s, KB, 1.0f, 0.0f);
  for (int64_t r = 0; r < qn; r++) {
    float *row = s + r * KB;
    int64_t i = i0 + r;
    if (a->mask_kind) {
      const char *mrow = (const char *)a->mask;
      int64_t off = b * a->sm[0] + h * a->sm[1] + i * a->sm[2];
      for (int64_t c = 0; c < kn; c++) {
        int64_t o = off + (j0 + c) * a->sm[3];
        if (a->mask_kind == 1) {
          if (!((const unsigned char *)mrow)[o]) row[c] = -INFINITY;
        } else {
          row[c] += ((const float *)mrow)[o];
        }
      }
    }
    /* keys outside [lo, hi): only edge tiles have any */
    int64_t lo = vis_lo(a, sq, i) - j0, hi = vis_hi(a, sq, i) - j0;
    for (int64_t c = 0; c < kn && c < lo; c++) row[c] = -INFINITY;
    for (int64_t c = hi < 0 ? 0 : hi; c < kn; c++) row[c] = -INFINITY;
  }
}

/* qs = scale * q rows [0, qn), contiguous (row stride e). */
static void scaled_copy(const tnk_sdpa_args_t *a, const float *q, int64_t qn, float *qs) {
  for (int64_t r = 0; r < qn; r++)
    for (int64_t x = 0; x < a->e; x++) qs[r * a->e + x] = a->scale * q[r * a->sq[2] + x];
}

/* The keys a query block [i0, i0 + qn) needs: [*begin, end). */
static int64_t key_range(const tnk_sdpa_args_t *a, const seq_t *s, int64_t i0, int64_t qn,
                         int64_t *begin) {
  *begin = vis_lo(a, s, i0);
  return vis_hi(a, s, i0 + qn - 1);
}

static float *lse_row(const tnk_sdpa_args_t *a, const seq_t *s, int64_t b, int64_t h, int64_t i0) {
  if (a->cu_q) return a->lse + h * a->lse_total + s->q0 + i0;
  return a->lse + (b * a->heads + h) * a->lq + i0;
}

typedef struct fwd_ctx {
  const tnk_sdpa_args_t *a;
  int64_t qblocks;
} fwd_ctx_t;

static void fwd_tasks(void *p, int64_t begin, int64_t end) {
  const fwd_ctx_t *c = p;
  const tnk_sdpa_args_t *a = c->a;
  float *s = malloc(sizeof(float) * (QB * KB + QB * a->ev + 2 * QB + QB * a->e + a->e * KB));
  if (!s) return;
  float *acc = s + QB * KB, *m = acc + QB * a->ev, *l = m + QB, *qs = l + QB;
  float *kt = qs + QB * a->e;
  int64_t group = a->heads / a->kv_heads;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / (a->heads * c->qblocks), h = t / c->qblocks % a->heads;
    seq_t sq = seq_of(a, b);
    int64_t i0 = t % c->qblocks * QB, qn = sq.lq - i0 < QB ? sq.lq - i0 : QB;
    if (qn <= 0) continue;
    int64_t kvh = h / group;
    const float *q = a->q + b * a->sq[0] + h * a->sq[1] + (sq.q0 + i0) * a->sq[2];
    const float *kb = a->k + b * a->sk[0] + kvh * a->sk[1] + sq.k0 * a->sk[2];
    const float *vb = a->v + b * a->sv[0] + kvh * a->sv[1] + sq.k0 * a->sv[2];
    for (int64_t r = 0; r < qn; r++) {
      m[r] = -INFINITY;
      l[r] = 0;
    }
    memset(acc, 0, sizeof(float) * (size_t)(qn * a->ev));
    scaled_copy(a, q, qn, qs);
    int64_t kbeg, kend = key_range(a, &sq, i0, qn, &kbeg);
    for (int64_t j0 = kbeg; j0 < kend; j0 += KB) {
      int64_t kn = kend - j0 < KB ? kend - j0 : KB;
      tile_scores(a, &sq, b, h, i0, qn, j0, kn, qs, kb + j0 * a->sk[2], s, kt);
      for (int64_t r = 0; r < qn; r++) {
        float *row = s + r * KB, mx = m[r];
        /* a NaN score makes the row NaN, as the reference softmax does */
        for (int64_t cc = 0; cc < kn; cc++) mx = row[cc] > mx || row[cc] != row[cc] ? row[cc] : mx;
        if (mx == -INFINITY) { /* nothing visible yet: p = 0 */
          memset(row, 0, sizeof(float) * (size_t)kn);
          continue;
        }
        float alpha = expf(m[r] - mx); /* 0 when m was -inf */
        float sum = tnk_vexp_bounded_sum_f32(row, mx, row, kn);
        l[r] = l[r] * alpha + sum;
        m[r] = mx;
        if (alpha != 1.0f)
          for (int64_t e = 0; e < a->ev; e++) acc[r * a->ev + e] *= alpha;
      }
      gemm_f32(qn, a->ev, kn, s, KB, 1, vb + j0 * a->sv[2], a->sv[2], 1, acc, a->ev, 1.0f, 1.0f);
    }
    float *o = a->o + b * a->so[0] + h * a->so[1] + (sq.q0 + i0) * a->so[2];
    float *lse = lse_row(a, &sq, b, h, i0);
    for (int64_t r = 0; r < qn; r++) {
      float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
      for (int64_t e = 0; e < a->ev; e++) o[r * a->so[2] + e] = acc[r * a->ev + e] * inv;
      lse[r] = l[r] > 0 ? m[r] + logf(l[r]) : l[r] != l[r] ? NAN : -INFINITY;
    }
  }
  free(s);
}

void tnk_sdpa_forward(const tnk_sdpa_args_t *a) {
  if (a->kv_heads <= 0 || a->heads % a->kv_heads || a->lq <= 0) return;
  fwd_ctx_t c = {a, (a->lq + QB - 1) / QB};
  tnk_parallel_for(a->batch * a->heads * c.qblocks, 1, fwd_tasks, &c);
}

/* One task per (batch, kv head): it owns gk and gv of that kv head and the
 * gq of every query head in its group, so no two tasks write one element. */
static void bwd_tasks(void *p, int64_t begin, int64_t end) {
  const tnk_sdpa_args_t *a = p;
  int64_t e = a->e, ev = a->ev, group = a->heads / a->kv_heads;
  float *s = malloc(sizeof(float) * (2 * QB * KB + 2 * QB * e + QB + (e + ev) * KB));
  if (!s) return;
  float *dp = s + QB * KB, *dq = dp + QB * KB, *dd = dq + QB * e, *qs = dd + QB;
  float *kt = qs + QB * e, *vt = kt + e * KB;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / a->kv_heads, kvh = t % a->kv_heads;
    seq_t sq = seq_of(a, b);
    /* the gradient rows this task owns (varlen: the whole packed slice,
     * keys past seqused_k included) */
    int64_t krows = a->cu_q ? a->cu_k[b + 1] - sq.k0 : sq.lk;
    const float *kb = a->k + b * a->sk[0] + kvh * a->sk[1] + sq.k0 * a->sk[2];
    const float *vb = a->v + b * a->sv[0] + kvh * a->sv[1] + sq.k0 * a->sv[2];
    float *gk = a->gk + b * a->sgk[0] + kvh * a->sgk[1] + sq.k0 * a->sgk[2];
    float *gv = a->gv + b * a->sgv[0] + kvh * a->sgv[1] + sq.k0 * a->sgv[2];
    for (int64_t j = 0; j < krows; j++) {
      memset(gk + j * a->sgk[2], 0, sizeof(float) * (size_t)e);
      memset(gv + j * a->sgv[2], 0, sizeof(float) * (size_t)ev);
    }
    for (int64_t h = kvh * group; h < (kvh + 1) * group; h++) {
      for (int64_t i0 = 0; i0 < sq.lq; i0 += QB) {
        int64_t qn = sq.lq - i0 < QB ? sq.lq - i0 : QB;
        int64_t row0 = sq.q0 + i0;
        const float *q = a->q + b * a->sq[0] + h * a->sq[1] + row0 * a->sq[2];
        const float *go = a->go + b * a->sgo[0] + h * a->sgo[1] + row0 * a->sgo[2];
        const float *o = a->o + b * a->so[0] + h * a->so[1] + row0 * a->so[2];
        const float *lse = lse_row(a, &sq, b, h, i0);
        for (int64_t r = 0; r < qn; r++) { /* D = rowsum(dO * O) */
          float d = 0;
          for (int64_t x = 0; x < ev; x++) d += go[r * a->sgo[2] + x] * o[r * a->so[2] + x];
          dd[r] = d;
        }
        memset(dq, 0, sizeof(float) * (size_t)(qn * e));
        scaled_copy(a, q, qn, qs);
        int64_t kbeg, kend = key_range(a, &sq, i0, qn, &kbeg);
        for (int64_t j0 = kbeg; j0 < kend; j0 += KB) {
          int64_t kn = kend - j0 < KB ? kend - j0 : KB;
          tile_scores(a, &sq, b, h, i0, qn, j0, kn, qs, kb + j0 * a->sk[2], s, kt);
          for (int64_t r = 0; r < qn; r++) { /* P = exp(S - lse) */
            float *row = s + r * KB;
            if (isinf(lse[r])) /* no visible key (flash attention's +inf too) */
              memset(row, 0, sizeof(float) * (size_t)kn);
            else
              tnk_vexp_bounded_sum_f32(row, lse[r], row, kn); /* S <= lse */
          }
          /* dV += P^T dO */
          gemm_f32(kn, ev, qn, s, 1, KB, go, a->sgo[2], 1, gv + j0 * a->sgv[2], a->sgv[2], 1.0f,
                   1.0f);
          /* dP = dO V^T, dS = P * (dP - D) */
          transpose_tile(vb + j0 * a->sv[2], a->sv[2], kn, ev, vt);
          gemm_f32(qn, kn, ev, go, a->sgo[2], 1, vt, KB, 1, dp, KB, 1.0f, 0.0f);
          for (int64_t r = 0; r < qn; r++)
            for (int64_t cc = 0; cc < kn; cc++)
              dp[r * KB + cc] = s[r * KB + cc] * (dp[r * KB + cc] - dd[r]);
          /* dQ += dS K (scaled once below), dK += dS^T (scale Q) */
          gemm_f32(qn, e, kn, dp, KB, 1, kb + j0 * a->sk[2], a->sk[2], 1, dq, e, 1.0f, 1.0f);
          gemm_f32(kn, e, qn, dp, 1, KB, qs, e, 1, gk + j0 * a->sgk[2], a->sgk[2], 1.0f, 1.0f);
        }
        float *gq = a->gq + b * a->sgq[0] + h * a->sgq[1] + row0 * a->sgq[2];
        for (int64_t r = 0; r < qn; r++)
          for (int64_t x = 0; x < e; x++) gq[r * a->sgq[2] + x] = a->scale * dq[r * e + x];
      }
    }
  }
  free(s);
}

void tnk_sdpa_backward(const tnk_sdpa_args_t *a) {
  if (a->kv_heads <= 0 || a->heads % a->kv_heads || a->lq <= 0) return;
  tnk_parallel_for(a->batch * a->kv_heads, 1, bwd_tasks, (void *)a);
}
