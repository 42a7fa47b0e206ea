/* Pooling: max, average, adaptive average and adaptive max over NC(D)HW
 * planes, 2-D and 3-D, forward and backward (tnk_pool; the kernel of
 * csrc/aten/pooling_ops.cpp). Work is split over planes (and rows of the
 * output for the forward pass); the backward pass owns whole input planes,
 * so its scatter-adds never race, and accumulates them in fp64 (plane.h).
 * Values go through the shared floating accessors (fp64 accumulation); fp32
 * is the common case and stays exact. */
#include <math.h>
#include <stdlib.h>

#include "dtype.h"
#include "plane.h"
#include "tnk.h"

int tnk_pool_supported(int dt) {
  return dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
}

/* The pooling geometry per axis (0 depth, 1 height, 2 width). */
typedef struct pool_geom {
  int64_t in[3], out[3], k[3], s[3], p[3], dil[3];
  int64_t vin, vout; /* input and output volume sizes */
} pool_geom_t;

static pool_geom_t geom_of(const tnk_pool_args_t *a) {
  int three = a->kd > 0;
  pool_geom_t g = {.in = {three ? a->d : 1, a->h, a->w},
                   .out = {three ? a->od : 1, a->oh, a->ow},
                   .k = {three ? a->kd : 1, a->kh, a->kw},
                   .s = {three ? a->sd : 1, a->sh, a->sw},
                   .p = {three ? a->pd : 0, a->ph, a->pw},
                   .dil = {three ? a->dd : 1, a->dh, a->dw}};
  g.vin = g.in[0] * g.in[1] * g.in[2];
  g.vout = g.out[0] * g.out[1] * g.out[2];
  return g;
}

/* Window of output position o along one axis (begin/end clipped to the
 * input, `full` the unclipped size that count_include_pad divides by). */
typedef struct win {
  int64_t b, e, full;
} win_t;

static win_t avg_window(const tnk_pool_args_t *a, const pool_geom_t *g, int64_t o, int ax) {
  int64_t in = g->in[ax], out = g->out[ax];
  win_t r;
  if (a->kind == TNK_POOL_ADAPTIVE_AVG || a->kind == TNK_POOL_ADAPTIVE_MAX) {
    r.b = (o * in) / out;
    r.e = ((o + 1) * in + out - 1) / out;
    r.full = r.e - r.b;
    return r;
  }
  int64_t b = o * g->s[ax] - g->p[ax], e = b + g->k[ax];
  if (e > in + g->p[ax]) e = in + g->p[ax];
  r.full = e - b;
  r.b = b < 0 ? 0 : b;
  r.e = e > in ? in : e;
  return r;
}

static double avg_divisor(const tnk_pool_args_t *a, const win_t w[3]) {
  if (a->divisor) return (double)a->divisor;
  if (a->count_include_pad && a->kind == TNK_POOL_AVG)
    return (double)(w[0].full * w[1].full * w[2].full);
  return (double)((w[0].e - w[0].b) * (w[1].e - w[1].b) * (w[2].e - w[2].b));
}

/* The windows of output (oz, oy, ox); 0 when one of them is empty. */
static int avg_windows(const tnk_pool_args_t *a, const pool_geom_t *g, int64_t oz, int64_t oy,
                       int64_t ox, win_t w[3]) {
  w[0] = avg_window(a, g, oz, 0);
  w[1] = avg_window(a, g, oy, 1);
  w[2] = avg_window(a, g, ox, 2);
  return w[0].b < w[0].e && w[1].b < w[1].e && w[2].b < w[2].e;
}

/* Max window along one axis: the first in-bounds tap and the end. */
static void max_span(const pool_geom_t *g, int ax, int64_t o, int64_t *b, int64_t *e) {
  int64_t start = o * g->s[ax] - g->p[ax], v = start;
  while (v < 0) v += g->dil[ax];
  int64_t end = start + (g->k[ax] - 1) * g->dil[ax] + 1;
  *b = v;
  *e = end > g->in[ax] ? g->in[ax] : end;
}

/* forward: one unit = one output row (plane, oz, oy) */
static void pool_fwd_rows(void *p, int64_t begin, int64_t end) {
  const tnk_pool_args_t *a = p;
  const pool_geom_t g = geom_of(a);
  const int dt = a->dtype;
  const int64_t H = g.in[1], W = g.in[2];
  for (int64_t r = begin; r < end; r++) {
    int64_t plane = r / (g.out[0] * g.out[1]), oz = r / g.out[1] % g.out[0], oy = r % g.out[1];
    int64_t ibase = plane * g.vin, obase = plane * g.vout + (oz * g.out[1] + oy) * g.out[2];
    for (int64_t ox = 0; ox < g.out[2]; ox++) {
      if (a->kind == TNK_POOL_MAX || a->kind == TNK_POOL_ADAPTIVE_MAX) {
        /* as ATen: the first in-bounds tap is the default, a later value
         * wins when greater or NaN */
        int64_t z0, z1, y0, y1, x0, x1;
        if (a->kind == TNK_POOL_MAX) {
          max_span(&g, 0, oz, &z0, &z1);
          max_span(&g, 1, oy, &y0, &y1);
          max_span(&g, 2, ox, &x0, &x1);
        } else { /* adaptive windows; dilation 1 (geom_of's default) */
          win_t w[3] = {avg_window(a, &g, oz, 0), avg_window(a, &g, oy, 1),
                        avg_window(a, &g, ox, 2)};
          z0 = w[0].b, z1 = w[0].e, y0 = w[1].b, y1 = w[1].e, x0 = w[2].b, x1 = w[2].e;
        }
        int64_t best_i = (z0 * H + y0) * W + x0;
        double best = -INFINITY;
        for (int64_t z = z0; z < z1; z += g.dil[0])
          for (int64_t y = y0; y < y1; y += g.dil[1])
            for (int64_t x = x0; x < x1; x += g.dil[2]) {
              int64_t i = (z * H + y) * W + x;
              double v = tnk_ldf(a->in, dt, ibase + i);
              if (v > best || v != v) {
                best = v;
                best_i = i;
              }
            }
        tnk_stf(a->out, dt, obase + ox, best);
        a->indices[obase + ox] = best_i;
      } else {
        win_t w[3];
        double v = 0;
        if (avg_windows(a, &g, oz, oy, ox, w)) {
          double sum = 0;
          for (int64_t z = w[0].b; z < w[0].e; z++)
            for (int64_t y = w[1].b; y < w[1].e; y++)
              for (int64_t x = w[2].b; x < w[2].e; x++)
                sum += tnk_ldf(a->in, dt, ibase + (z * H + y) * W + x);
          v = sum / avg_divisor(a, w);
        }
        tnk_stf(a->out, dt, obase + ox, v);
      }
    }
  }
}

/* backward: one unit = one plane (volume) */
static void pool_bwd_planes(void *p, int64_t begin, int64_t end) {
  const tnk_pool_args_t *a = p;
  const pool_geom_t g = geom_of(a);
  const int dt = a->dtype;
  const int64_t isz = g.vin, H = g.in[1], W = g.in[2];
  double *acc = scratch_plane(isz);
  for (int64_t plane = begin; plane < end; plane++) {
    zero_plane(acc, a->out, dt, plane * isz, isz);
    for (int64_t oz = 0; oz < g.out[0]; oz++)
      for (int64_t oy = 0; oy < g.out[1]; oy++)
        for (int64_t ox = 0; ox < g.out[2]; ox++) {
          int64_t o = plane * g.vout + (oz * g.out[1] + oy) * g.out[2] + ox;
          double gv = tnk_ldf(a->in, dt, o);
          if (a->kind == TNK_POOL_MAX || a->kind == TNK_POOL_ADAPTIVE_MAX) {
            int64_t idx = a->indices[o];
            if (idx < 0 || idx >= isz) {
              if (a->fault.fn)
                a->fault.fn(a->fault.ctx, a->fault.kind, a->fault.what, idx, isz, a->fault.origin);
              continue;
            }
            add_at(acc, a->out, dt, plane * isz, idx, gv);
          } else {
            win_t w[3];
            if (!avg_windows(a, &g, oz, oy, ox, w)) continue;
            double v = gv / avg_divisor(a, w);
            for (int64_t z = w[0].b; z < w[0].e; z++)
              for (int64_t y = w[1].b; y < w[1].e; y++)
                for (int64_t x = w[2].b; x < w[2].e; x++)
                  add_at(acc, a->out, dt, plane * isz, (z * H + y) * W + x, v);
          }
        }
    store_plane(a->out, dt, plane * isz, acc, isz);
  }
  free(acc);
}

void tnk_pool(const tnk_pool_args_t *a) {
  if (!tnk_pool_supported(a->dtype) || a->planes <= 0) return;
  pool_geom_t g = geom_of(a);
  if (a->backward) {
    if (g.vin == 0) return;
    tnk_parallel_for(a->planes, 1, pool_bwd_planes, (void *)a);
    return;
  }
  if (g.vout == 0) return;
  int64_t work =
      g.out[2] *
      (a->kind == TNK_POOL_MAX || a->kind == TNK_POOL_ADAPTIVE_MAX ? g.k[0] * g.k[1] * g.k[2] : 4);
  tnk_parallel_for(a->planes * g.out[0] * g.out[1], work >= 4096 ? 1 : 4096 / (work + 1) + 1,
                   pool_fwd_rows, (void *)a);
}
