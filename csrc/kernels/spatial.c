/* Pooling (max, average, adaptive average) and bilinear resampling of NCHW
 * planes, forward and backward. Work is split over planes (and rows of the
 * output for the forward passes); the backward passes own whole input planes,
 * so their scatter-adds never race. Values go through the shared floating
 * accessors (fp64 accumulation); fp32 is the common case and stays exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "tnk.h"

int tnk_pool2d_supported(int dt) {
  return dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
}

/* Window of output position o along one axis (begin/end clipped to the
 * input, `full` the unclipped size that count_include_pad divides by). */
typedef struct win {
  int64_t b, e, full;
} win_t;

static win_t avg_window(const tnk_pool2d_args_t *a, int64_t o, int axis) {
  int64_t in = axis ? a->w : a->h, out = axis ? a->ow : a->oh;
  win_t r;
  if (a->kind == TNK_POOL_ADAPTIVE_AVG) {
    r.b = (o * in) / out;
    r.e = ((o + 1) * in + out - 1) / out;
    r.full = r.e - r.b;
    return r;
  }
  int64_t k = axis ? a->kw : a->kh, s = axis ? a->sw : a->sh, p = axis ? a->pw : a->ph;
  int64_t b = o * s - p, e = b + k;
  if (e > in + p) e = in + p;
  r.full = e - b;
  r.b = b < 0 ? 0 : b;
  r.e = e > in ? in : e;
  return r;
}

static double avg_divisor(const tnk_pool2d_args_t *a, win_t wh, win_t ww) {
  if (a->divisor) return (double)a->divisor;
  if (a->count_include_pad && a->kind == TNK_POOL_AVG) return (double)(wh.full * ww.full);
  return (double)((wh.e - wh.b) * (ww.e - ww.b));
}

/* forward: one unit = one output row of one plane */
static void pool_fwd_rows(void *p, int64_t begin, int64_t end) {
  const tnk_pool2d_args_t *a = p;
  const int dt = a->dtype;
  for (int64_t r = begin; r < end; r++) {
    int64_t plane = r / a->oh, oh = r % a->oh;
    int64_t ibase = plane * a->h * a->w, obase = plane * a->oh * a->ow + oh * a->ow;
    for (int64_t ow = 0; ow < a->ow; ow++) {
      if (a->kind == TNK_POOL_MAX) {
        /* as ATen: the first in-bounds tap is the default, a later value
         * wins when greater or NaN */
        int64_t h0 = oh * a->sh - a->ph, w0 = ow * a->sw - a->pw;
        while (h0 < 0) h0 += a->dh;
        while (w0 < 0) w0 += a->dw;
        int64_t hend = oh * a->sh - a->ph + (int64_t)(a->kh - 1) * a->dh + 1;
        int64_t wend = ow * a->sw - a->pw + (int64_t)(a->kw - 1) * a->dw + 1;
        if (hend > a->h) hend = a->h;
        if (wend > a->w) wend = a->w;
        int64_t best_i = h0 * a->w + w0;
        double best = -INFINITY;
        for (int64_t y = h0; y < hend; y += a->dh)
          for (int64_t x = w0; x < wend; x += a->dw) {
            double v = tnk_ldf(a->in, dt, ibase + y * a->w + x);
            if (v > best || v != v) {
              best = v;
              best_i = y * a->w + x;
            }
          }
        tnk_stf(a->out, dt, obase + ow, best);
        a->indices[obase + ow] = best_i;
      } else {
        win_t wh = avg_window(a, oh, 0), ww = avg_window(a, ow, 1);
        double sum = 0;
        for (int64_t y = wh.b; y < wh.e; y++)
          for (int64_t x = ww.b; x < ww.e; x++) sum += tnk_ldf(a->in, dt, ibase + y * a->w + x);
        double v = (wh.b >= wh.e || ww.b >= ww.e) ? 0 : sum / avg_divisor(a, wh, ww);
        tnk_stf(a->out, dt, obase + ow, v);
      }
    }
  }
}

/* Backward passes accumulate one input plane in an fp64 scratch plane, then
 * store it once (half types would otherwise round at every add). */
static double *scratch_plane(int64_t n) { return malloc((size_t)n * sizeof(double)); }
/* Without scratch (allocation failed) the plane accumulates in place. */
static void zero_plane(double *acc, void *out, int dt, int64_t base, int64_t n) {
  if (acc) memset(acc, 0, (size_t)n * sizeof(double));
  else
    for (int64_t i = 0; i < n; i++) tnk_stf(out, dt, base + i, 0.0);
}
static inline void add_at(double *acc, void *out, int dt, int64_t base, int64_t i, double v) {
  if (acc) acc[i] += v;
  else tnk_stf(out, dt, base + i, tnk_ldf(out, dt, base + i) + v);
}
static void store_plane(void *out, int dt, int64_t base, const double *acc, int64_t n) {
  if (!acc) return;
  for (int64_t i = 0; i < n; i++) tnk_stf(out, dt, base + i, acc[i]);
}

/* backward: one unit = one plane */
static void pool_bwd_planes(void *p, int64_t begin, int64_t end) {
  const tnk_pool2d_args_t *a = p;
  const int dt = a->dtype;
  const int64_t isz = a->h * a->w, osz = a->oh * a->ow;
  double *acc = scratch_plane(isz);
  for (int64_t plane = begin; plane < end; plane++) {
    zero_plane(acc, a->out, dt, plane * isz, isz);
    for (int64_t oh = 0; oh < a->oh; oh++)
      for (int64_t ow = 0; ow < a->ow; ow++) {
        int64_t o = plane * osz + oh * a->ow + ow;
        double g = tnk_ldf(a->in, dt, o);
        if (a->kind == TNK_POOL_MAX) {
          int64_t idx = a->indices[o];
          if (idx < 0 || idx >= isz) {
            if (a->fault.fn) a->fault.fn(a->fault.ctx, a->fault.kind, a->fault.what, idx, isz);
            continue;
          }
          add_at(acc, a->out, dt, plane * isz, idx, g);
        } else {
          win_t wh = avg_window(a, oh, 0), ww = avg_window(a, ow, 1);
          if (wh.b >= wh.e || ww.b >= ww.e) continue;
          double v = g / avg_divisor(a, wh, ww);
          for (int64_t y = wh.b; y < wh.e; y++)
            for (int64_t x = ww.b; x < ww.e; x++) add_at(acc, a->out, dt, plane * isz, y * a->w + x, v);
        }
      }
    store_plane(a->out, dt, plane * isz, acc, isz);
  }
  free(acc);
}

void tnk_pool2d(const tnk_pool2d_args_t *a) {
  if (!tnk_pool2d_supported(a->dtype) || a->planes <= 0) return;
  if (a->backward) {
    if (a->h * a->w == 0) return;
    tnk_parallel_for(a->planes, 1, pool_bwd_planes, (void *)a);
    return;
  }
  if (a->oh * a->ow == 0) return;
  int64_t work = a->ow * (int64_t)(a->kind == TNK_POOL_MAX ? a->kh * a->kw : 4);
  tnk_parallel_for(a->planes * a->oh, work >= 4096 ? 1 : 4096 / (work + 1) + 1, pool_fwd_rows,
                   (void *)a);
}

/* ---- bilinear ------------------------------------------------------------------ */

typedef struct tap {
  int64_t i0, i1;
  double l0, l1;
} tap_t;

static tap_t bilinear_tap(int64_t dst, int64_t in, double scale, int align) {
  double src = align ? scale * (double)dst : scale * ((double)dst + 0.5) - 0.5;
  if (src < 0) src = 0;
  tap_t t;
  t.i0 = (int64_t)src;
  if (t.i0 > in - 1) t.i0 = in - 1;
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  t.l1 = src - (double)t.i0;
  if (t.l1 > 1) t.l1 = 1;
  t.l0 = 1 - t.l1;
  return t;
}

static void bilinear_fwd_rows(void *p, int64_t begin, int64_t end) {
  const tnk_upsample2d_args_t *a = p;
  const int dt = a->dtype;
  for (int64_t r = begin; r < end; r++) {
    int64_t plane = r / a->oh, oh = r % a->oh;
    tap_t th = bilinear_tap(oh, a->h, a->scale_h, a->align_corners);
    int64_t b0 = plane * a->h * a->w + th.i0 * a->w, b1 = plane * a->h * a->w + th.i1 * a->w;
    for (int64_t ow = 0; ow < a->ow; ow++) {
      tap_t tw = bilinear_tap(ow, a->w, a->scale_w, a->align_corners);
      double v = th.l0 * (tw.l0 * tnk_ldf(a->in, dt, b0 + tw.i0) +
                          tw.l1 * tnk_ldf(a->in, dt, b0 + tw.i1)) +
                 th.l1 * (tw.l0 * tnk_ldf(a->in, dt, b1 + tw.i0) +
                          tw.l1 * tnk_ldf(a->in, dt, b1 + tw.i1));
      tnk_stf(a->out, dt, r * a->ow + ow, v);
    }
  }
}

static void bilinear_bwd_planes(void *p, int64_t begin, int64_t end) {
  const tnk_upsample2d_args_t *a = p;
  const int dt = a->dtype;
  const int64_t isz = a->h * a->w;
  double *acc = scratch_plane(isz);
  for (int64_t plane = begin; plane < end; plane++) {
    zero_plane(acc, a->out, dt, plane * isz, isz);
    for (int64_t oh = 0; oh < a->oh; oh++) {
      tap_t th = bilinear_tap(oh, a->h, a->scale_h, a->align_corners);
      for (int64_t ow = 0; ow < a->ow; ow++) {
        tap_t tw = bilinear_tap(ow, a->w, a->scale_w, a->align_corners);
        double g = tnk_ldf(a->in, dt, (plane * a->oh + oh) * a->ow + ow);
        int64_t t[4] = {th.i0 * a->w + tw.i0, th.i0 * a->w + tw.i1, th.i1 * a->w + tw.i0,
                        th.i1 * a->w + tw.i1};
        double wgt[4] = {th.l0 * tw.l0, th.l0 * tw.l1, th.l1 * tw.l0, th.l1 * tw.l1};
        for (int k = 0; k < 4; k++) add_at(acc, a->out, dt, plane * isz, t[k], g * wgt[k]);
      }
    }
    store_plane(a->out, dt, plane * isz, acc, isz);
  }
  free(acc);
}

void tnk_upsample_bilinear2d(const tnk_upsample2d_args_t *a) {
  if (!tnk_pool2d_supported(a->dtype) || a->planes <= 0 || a->h <= 0 || a->w <= 0) return;
  if (a->backward) {
    tnk_parallel_for(a->planes, 1, bilinear_bwd_planes, (void *)a);
    return;
  }
  if (a->oh * a->ow == 0) return;
  tnk_parallel_for(a->planes * a->oh, a->ow >= 1024 ? 1 : 1024 / a->ow + 1, bilinear_fwd_rows,
                   (void *)a);
}
