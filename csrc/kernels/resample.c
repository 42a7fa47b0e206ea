/* Resampling of NC(D)HW planes, forward and backward: linear and cubic
 * interpolation (tnk_resample: linear, bilinear, trilinear, bicubic) and
 * grid_sample in 2-D and 3-D (tnk_grid_sample: bilinear/trilinear, nearest
 * or 2-D bicubic; zeros, border or reflection padding); the kernels of csrc/aten/resample_ops.cpp. Work is
 * split over planes (and rows of the output for the forward passes); the
 * backward passes own whole input planes, so their scatter-adds never race,
 * and accumulate them in fp64 (plane.h). Values go through the shared
 * floating accessors; fp32 is the common case and stays exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "plane.h"
#include "tnk.h"

/* ---- linear and cubic resampling -------------------------------------------- */

/* The taps of one output coordinate along one axis: up to four source
 * indices and their weights. */
typedef struct taps {
  int64_t i[4];
  double wt[4];
  int n;
} taps_t;

static int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : i >= in ? in - 1 : i; }

static taps_t axis_taps(int mode, int64_t dst, int64_t in, double scale, int align) {
  taps_t t;
  if (in == 1) { /* every tap clamps to the one source; the weights sum to one */
    t.i[0] = 0;
    t.wt[0] = 1;
    t.n = 1;
    return t;
  }
  double src = align ? scale * (double)dst : scale * ((double)dst + 0.5) - 0.5;
  if (mode == TNK_RESAMPLE_CUBIC) {
    double f = floor(src), x = src - f, A = -0.75;
    double x0 = x + 1, x1 = x, x2 = 1 - x, x3 = 2 - x; /* distances to the taps */
    t.wt[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
    t.wt[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
    t.wt[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    t.wt[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
    for (int k = 0; k < 4; k++) t.i[k] = clamp_index((int64_t)f - 1 + k, in);
    t.n = 4;
    return t;
  }
  if (src < 0) src = 0;
  int64_t i0 = (int64_t)src;
  if (i0 > in - 1) i0 = in - 1;
  double l1 = src - (double)i0;
  if (l1 > 1) l1 = 1;
  t.i[0] = i0;
  t.wt[0] = 1 - l1;
  t.i[1] = i0 + (i0 < in - 1 ? 1 : 0);
  t.wt[1] = l1;
  t.n = t.i[1] == i0 ? 1 : 2; /* one source: its weights sum to 1 */
  if (t.n == 1) t.wt[0] = 1;
  return t;
}

static void row_taps(const tnk_resample_args_t *a, int64_t oz, int64_t oy, taps_t *tz, taps_t *ty) {
  *tz = axis_taps(a->mode, oz, a->d, a->scale_d, a->align_corners);
  *ty = axis_taps(a->mode, oy, a->h, a->scale_h, a->align_corners);
}

/* forward: one unit = one output row (plane, oz, oy) */
static void resample_fwd_rows(void *p, int64_t begin, int64_t end) {
  const tnk_resample_args_t *a = p;
  const int dt = a->dtype;
  for (int64_t r = begin; r < end; r++) {
    int64_t plane = r / (a->od * a->oh), oz = r / a->oh % a->od, oy = r % a->oh;
    taps_t tz, ty;
    row_taps(a, oz, oy, &tz, &ty);
    int64_t base = plane * a->d * a->h * a->w;
    for (int64_t ox = 0; ox < a->ow; ox++) {
      taps_t tx = axis_taps(a->mode, ox, a->w, a->scale_w, a->align_corners);
      double v = 0;
      for (int z = 0; z < tz.n; z++)
        for (int y = 0; y < ty.n; y++) {
          int64_t row = base + (tz.i[z] * a->h + ty.i[y]) * a->w;
          double s = 0;
          for (int x = 0; x < tx.n; x++) s += tx.wt[x] * tnk_ldf(a->in, dt, row + tx.i[x]);
          v += tz.wt[z] * ty.wt[y] * s;
        }
      tnk_stf(a->out, dt, r * a->ow + ox, v);
    }
  }
}

/* backward: one unit = one input plane, accumulated in fp64 */
static void resample_bwd_planes(void *p, int64_t begin, int64_t end) {
  const tnk_resample_args_t *a = p;
  const int dt = a->dtype;
  const int64_t isz = a->d * a->h * a->w;
  double *acc = scratch_plane(isz);
  for (int64_t plane = begin; plane < end; plane++) {
    zero_plane(acc, a->out, dt, plane * isz, isz);
    for (int64_t oz = 0; oz < a->od; oz++)
      for (int64_t oy = 0; oy < a->oh; oy++) {
        taps_t tz, ty;
        row_taps(a, oz, oy, &tz, &ty);
        for (int64_t ox = 0; ox < a->ow; ox++) {
          taps_t tx = axis_taps(a->mode, ox, a->w, a->scale_w, a->align_corners);
          double g = tnk_ldf(a->in, dt, ((plane * a->od + oz) * a->oh + oy) * a->ow + ox);
          for (int z = 0; z < tz.n; z++)
            for (int y = 0; y < ty.n; y++)
              for (int x = 0; x < tx.n; x++)
                add_at(acc, a->out, dt, plane * isz, (tz.i[z] * a->h + ty.i[y]) * a->w + tx.i[x],
                       g * tz.wt[z] * ty.wt[y] * tx.wt[x]);
        }
      }
    store_plane(a->out, dt, plane * isz, acc, isz);
  }
  free(acc);
}

void tnk_resample(const tnk_resample_args_t *a) {
  if (!tnk_pool_supported(a->dtype) || a->planes <= 0 || a->d <= 0 || a->h <= 0 || a->w <= 0 ||
      a->od <= 0 || a->oh <= 0 || a->ow <= 0)
    return;
  if (a->backward) {
    tnk_parallel_for(a->planes, 1, resample_bwd_planes, (void *)a);
    return;
  }
  tnk_parallel_for(a->planes * a->od * a->oh, a->ow >= 1024 ? 1 : 1024 / a->ow + 1,
                   resample_fwd_rows, (void *)a);
}

/* ---- grid_sample (2-D and 3-D) ------------------------------------------------- */

int tnk_grid_sample_supported(int dt, int mode, int padding) {
  return tnk_pool_supported(dt) &&
         (mode == TNK_GRID_BILINEAR || mode == TNK_GRID_NEAREST || mode == TNK_GRID_BICUBIC) &&
         padding >= TNK_GRID_PAD_ZEROS && padding <= TNK_GRID_PAD_REFLECTION;
}

/* One axis: grid coordinate -> source coordinate, and d source / d grid.
 * Written once per precision (fp32 for fp32 and half types, fp64) so the
 * floor/round decisions match a CPU computing in that precision. */
#define GRID_COORD(T, SFX, FLOOR, FMOD)                                           \
  static T clip_##SFX(T in, int64_t limit, T *grad) {                             \
    if (in <= 0) {                                                                \
      *grad = 0;                                                                  \
      return 0;                                                                   \
    }                                                                             \
    T mx = (T)(limit - 1);                                                        \
    if (in >= mx) {                                                               \
      *grad = 0;                                                                  \
      return mx;                                                                  \
    }                                                                             \
    *grad = 1;                                                                    \
    return in;                                                                    \
  }                                                                               \
  static T reflect_##SFX(T in, int64_t twice_low, int64_t twice_high, T *grad) {  \
    if (twice_low == twice_high) {                                                \
      *grad = 0;                                                                  \
      return 0;                                                                   \
    }                                                                             \
    T mn = (T)twice_low / 2, span = (T)(twice_high - twice_low) / 2, sign = 1;    \
    in -= mn;                                                                     \
    if (in < 0) {                                                                 \
      sign = -1;                                                                  \
      in = -in;                                                                   \
    }                                                                             \
    T extra = FMOD(in, span);                                                     \
    /* parity of the flips in floating point: no integer cast of inf */           \
    if (FMOD(FLOOR(in / span), 2) == 0) {                                         \
      *grad = sign;                                                               \
      return extra + mn;                                                          \
    }                                                                             \
    *grad = -sign;                                                                \
    return span - extra + mn;                                                     \
  }                                                                               \
  static T pad_##SFX(T coord, int64_t size, int padding, int align, T *grad) {    \
    T g1 = 1, g2 = 1;                                                             \
    if (padding == TNK_GRID_PAD_BORDER) {                                         \
      coord = clip_##SFX(coord, size, &g1);                                       \
    } else if (padding == TNK_GRID_PAD_REFLECTION) {                              \
      coord = align ? reflect_##SFX(coord, 0, 2 * (size - 1), &g1)                \
                    : reflect_##SFX(coord, -1, 2 * size - 1, &g1);                \
      coord = clip_##SFX(coord, size, &g2);                                       \
    }                                                                             \
    *grad = g1 * g2;                                                              \
    return coord;                                                                 \
  }                                                                               \
  static T source_##SFX(T coord, int64_t size, int padding, int align, T *grad) { \
    T s = align ? (T)(size - 1) / 2 : (T)size / 2, g;                             \
    coord = align ? coord * s + s : coord * s + (s - (T)0.5);                     \
    coord = pad_##SFX(coord, size, padding, align, &g);                           \
    *grad = s * g;                                                                \
    return coord;                                                                 \
  }
GRID_COORD(float, f, floorf, fmodf)
GRID_COORD(double, d, floor, fmod)

/* Depths of the input and output (1 in 2-D), and coordinates per grid point. */
static int64_t in_d(const tnk_grid_sample_args_t *a) { return a->three_d ? a->d : 1; }
static int64_t out_d(const tnk_grid_sample_args_t *a) { return a->three_d ? a->od : 1; }
static int ncoord(const tnk_grid_sample_args_t *a) { return a->three_d ? 3 : 2; }

/* The source point of output row r = (b, oz, oy) and column ox: coordinates
 * and their gradients with respect to the grid's x, y (and z in 3-D). */
typedef struct grid_point {
  double x, y, z, gx, gy, gz;
} grid_point_t;

static grid_point_t grid_point(const tnk_grid_sample_args_t *a, int64_t r, int64_t ox) {
  int dt = a->dtype == TNK_F64 ? TNK_F64 : a->dtype;
  int64_t gi = (r * a->ow + ox) * ncoord(a);
  /* bicubic pads each of its taps, not the point (as ATen), and takes the
   * point in double for every dtype: its weights are smooth in the point,
   * so no floor decision needs to match a CPU computing in float, and the
   * float rounding of the point is what limits its grid gradient */
  int pad = a->mode == TNK_GRID_BICUBIC ? TNK_GRID_PAD_ZEROS : a->padding;
  grid_point_t p = {0};
  if (dt == TNK_F64 || a->mode == TNK_GRID_BICUBIC) {
    double gx, gy, gz;
    p.x = source_d(tnk_ldf(a->grid, dt, gi), a->w, pad, a->align_corners, &gx);
    p.y = source_d(tnk_ldf(a->grid, dt, gi + 1), a->h, pad, a->align_corners, &gy);
    p.gx = gx;
    p.gy = gy;
    if (a->three_d) {
      p.z = source_d(tnk_ldf(a->grid, dt, gi + 2), a->d, pad, a->align_corners, &gz);
      p.gz = gz;
    }
  } else {
    float gx, gy, gz;
    p.x = source_f((float)tnk_ldf(a->grid, dt, gi), a->w, pad, a->align_corners, &gx);
    p.y = source_f((float)tnk_ldf(a->grid, dt, gi + 1), a->h, pad, a->align_corners, &gy);
    p.gx = gx;
    p.gy = gy;
    if (a->three_d) {
      p.z = source_f((float)tnk_ldf(a->grid, dt, gi + 2), a->d, pad, a->align_corners, &gz);
      p.gz = gz;
    }
  }
  if (a->three_d && !a->backward && pad != TNK_GRID_PAD_ZEROS) {
    /* ATen's 3-D forward clips with min(size - 1, max(v, 0)), which takes a
     * NaN (a NaN grid value, or reflection of an infinite one) to the last
     * pixel; its 3-D backward and its 2-D kernels keep the NaN */
    if (isnan(p.x)) p.x = (double)(a->w - 1);
    if (isnan(p.y)) p.y = (double)(a->h - 1);
    if (isnan(p.z)) p.z = (double)(a->d - 1);
  }
  return p;
}

/* A bicubic tap's integer coordinate after the padding mode (border clips,
 * reflection reflects then clips; zeros leaves it to the bounds check), in
 * the tensor's coordinate precision. */
static int64_t tap_coord(const tnk_grid_sample_args_t *a, double v, int64_t size) {
  if (a->padding == TNK_GRID_PAD_ZEROS) return (int64_t)v;
  if (a->dtype == TNK_F64) {
    double g;
    return (int64_t)pad_d(v, size, a->padding, a->align_corners, &g);
  }
  float g;
  return (int64_t)pad_f((float)v, size, a->padding, a->align_corners, &g);
}

/* Keys' cubic convolution with A = -0.75 (bicubic grid_sample): the four
 * tap weights at offset t in [0, 1), and their derivatives in t. */
static void cubic_weights(double t, double w[4], double dw[4]) {
  const double A = -0.75;
  double x;
  x = t + 1; /* |x| in [1, 2) */
  w[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  dw[0] = (3 * A * x - 10 * A) * x + 8 * A;
  x = t; /* [0, 1) */
  w[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  dw[1] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 1 - t;
  w[2] = ((A + 2) * x - (A + 3)) * x * x + 1;
  dw[2] = -(3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 2 - t;
  w[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  dw[3] = -((3 * A * x - 10 * A) * x + 8 * A);
}

/* Bilinear corners (nw, ne, sw, se; trilinear: those of the top then the
 * bottom plane) and weights of a source point; nearest is the single corner
 * nw with weight 1. NaN or infinite coordinates give no taps; the bilinear
 * forward then outputs NaN (nan_out), as CPU does for zero padding (its
 * weights are NaN), while nearest reads nothing (0). z is 0 in 2-D. */
typedef struct corners {
  int64_t x[16], y[16], z[16];
  double wt[16];
  double wx[16], wy[16], wz[16]; /* d weight / d x, y, z of each tap (not nearest) */
  int n, nan_out;
} corners_t;

/* Trilinear: the 8 corners around floor(x, y, z); all outside: none. */
static corners_t corners_3d(const tnk_grid_sample_args_t *a, grid_point_t p, corners_t c) {
  if (a->mode == TNK_GRID_NEAREST) {
    int f64 = a->dtype == TNK_F64;
    double rx = f64 ? nearbyint(p.x) : (double)nearbyintf((float)p.x);
    double ry = f64 ? nearbyint(p.y) : (double)nearbyintf((float)p.y);
    double rz = f64 ? nearbyint(p.z) : (double)nearbyintf((float)p.z);
    if (rx < -1 || ry < -1 || rz < -1 || rx > (double)a->w || ry > (double)a->h ||
        rz > (double)a->d)
      return c;
    c.x[0] = (int64_t)rx;
    c.y[0] = (int64_t)ry;
    c.z[0] = (int64_t)rz;
    c.wt[0] = 1;
    c.n = 1;
    return c;
  }
  double fx = floor(p.x), fy = floor(p.y), fz = floor(p.z);
  if (fx < -2 || fy < -2 || fz < -2 || fx > (double)a->w || fy > (double)a->h || fz > (double)a->d)
    return c;
  double f[3] = {p.x - fx, p.y - fy, p.z - fz};
  for (int k = 0; k < 8; k++) {
    int i = k & 1, j = (k >> 1) & 1, l = k >> 2;
    double wx = i ? f[0] : 1 - f[0], wy = j ? f[1] : 1 - f[1], wz = l ? f[2] : 1 - f[2];
    double sx = i ? 1 : -1, sy = j ? 1 : -1, sz = l ? 1 : -1;
    c.x[k] = (int64_t)fx + i;
    c.y[k] = (int64_t)fy + j;
    c.z[k] = (int64_t)fz + l;
    c.wt[k] = wx * wy * wz;
    c.wx[k] = sx * wy * wz;
    c.wy[k] = wx * sy * wz;
    c.wz[k] = wx * wy * sz;
  }
  c.n = 8;
  return c;
}

static corners_t corners_of(const tnk_grid_sample_args_t *a, grid_point_t p) {
  corners_t c;
  c.n = 0;
  c.nan_out = 0;
  memset(c.z, 0, sizeof c.z);
  if (!isfinite(p.x) || !isfinite(p.y) || !isfinite(p.z)) {
    /* CPU's 2-D bilinear outputs NaN (its weights are NaN); its 3-D kernel
     * finds the taps out of bounds and outputs 0 */
    c.nan_out = a->mode != TNK_GRID_NEAREST && !a->three_d;
    return c;
  }
  if (a->three_d) return corners_3d(a, p, c);
  if (a->mode == TNK_GRID_BICUBIC) {
    /* 4 x 4 taps around floor(x), floor(y); far outside: none (0) */
    double fx = floor(p.x), fy = floor(p.y), w[2][4], dw[2][4];
    if (fx < -3 || fy < -3 || fx > (double)a->w + 2 || fy > (double)a->h + 2) {
      if (a->padding == TNK_GRID_PAD_ZEROS) return c;
    }
    cubic_weights(p.x - fx, w[0], dw[0]);
    cubic_weights(p.y - fy, w[1], dw[1]);
    for (int j = 0; j < 4; j++)
      for (int i = 0; i < 4; i++) {
        int k = j * 4 + i;
        c.x[k] = tap_coord(a, fx - 1 + i, a->w);
        c.y[k] = tap_coord(a, fy - 1 + j, a->h);
        c.wt[k] = w[0][i] * w[1][j];
        c.wx[k] = dw[0][i] * w[1][j];
        c.wy[k] = w[0][i] * dw[1][j];
      }
    c.n = 16;
    return c;
  }
  if (a->mode == TNK_GRID_NEAREST) {
    double rx = a->dtype == TNK_F64 ? nearbyint(p.x) : (double)nearbyintf((float)p.x);
    double ry = a->dtype == TNK_F64 ? nearbyint(p.y) : (double)nearbyintf((float)p.y);
    if (rx < -1 || ry < -1 || rx > (double)a->w || ry > (double)a->h) return c;
    c.x[0] = (int64_t)rx;
    c.y[0] = (int64_t)ry;
    c.wt[0] = 1;
    c.n = 1;
    return c;
  }
  double fx = floor(p.x), fy = floor(p.y);
  if (fx < -2 || fy < -2 || fx > (double)a->w || fy > (double)a->h) return c; /* all outside */
  int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
  double dx = p.x - fx, dy = p.y - fy;
  c.x[0] = x0;
  c.y[0] = y0;
  c.wt[0] = (1 - dx) * (1 - dy);
  c.x[1] = x0 + 1;
  c.y[1] = y0;
  c.wt[1] = dx * (1 - dy);
  c.x[2] = x0;
  c.y[2] = y0 + 1;
  c.wt[2] = (1 - dx) * dy;
  c.x[3] = x0 + 1;
  c.y[3] = y0 + 1;
  c.wt[3] = dx * dy;
  c.n = 4;
  const double wx[4] = {-(1 - dy), 1 - dy, -dy, dy}, wy[4] = {-(1 - dx), -dx, 1 - dx, dx};
  memcpy(c.wx, wx, sizeof wx);
  memcpy(c.wy, wy, sizeof wy);
  return c;
}

/* Tap k of c inside the input: its offset within a plane, else -1. */
static int64_t tap_at(const tnk_grid_sample_args_t *a, const corners_t *c, int k) {
  int64_t x = c->x[k], y = c->y[k], z = c->z[k];
  if (x < 0 || x >= a->w || y < 0 || y >= a->h || z < 0 || z >= in_d(a)) return -1;
  return (z * a->h + y) * a->w + x;
}

/* forward: one unit = one output row (b, oz, oy), all channels */
static void grid_fwd_rows(void *p, int64_t begin, int64_t end) {
  const tnk_grid_sample_args_t *a = p;
  const int dt = a->dtype;
  const int64_t rows = out_d(a) * a->oh, isz = in_d(a) * a->h * a->w;
  for (int64_t r = begin; r < end; r++) {
    int64_t b = r / rows, orow = r % rows;
    for (int64_t ox = 0; ox < a->ow; ox++) {
      corners_t c = corners_of(a, grid_point(a, r, ox));
      for (int64_t ch = 0; ch < a->c; ch++) {
        int64_t plane = (b * a->c + ch) * isz;
        double v = c.nan_out ? NAN : 0;
        for (int k = 0; k < c.n; k++) {
          int64_t at = tap_at(a, &c, k);
          if (at >= 0) v += c.wt[k] * tnk_ldf(a->in, dt, plane + at);
        }
        tnk_stf(a->out, dt, ((b * a->c + ch) * rows + orow) * a->ow + ox, v);
      }
    }
  }
}

/* backward, input gradient: one unit = one (b, channel) plane */
static void grid_bwd_planes(void *p, int64_t begin, int64_t end) {
  const tnk_grid_sample_args_t *a = p;
  const int dt = a->dtype;
  const int64_t isz = in_d(a) * a->h * a->w, rows = out_d(a) * a->oh;
  double *acc = scratch_plane(isz);
  for (int64_t pl = begin; pl < end; pl++) {
    int64_t b = pl / a->c;
    zero_plane(acc, a->gin, dt, pl * isz, isz);
    for (int64_t orow = 0; orow < rows; orow++)
      for (int64_t ox = 0; ox < a->ow; ox++) {
        corners_t c = corners_of(a, grid_point(a, b * rows + orow, ox));
        double g = tnk_ldf(a->gout, dt, (pl * rows + orow) * a->ow + ox);
        for (int k = 0; k < c.n; k++) {
          int64_t at = tap_at(a, &c, k);
          if (at >= 0) add_at(acc, a->gin, dt, pl * isz, at, g * c.wt[k]);
        }
      }
    store_plane(a->gin, dt, pl * isz, acc, isz);
  }
  free(acc);
}

/* backward, grid gradient: one unit = one output row (b, oz, oy) */
static void grid_bwd_rows(void *p, int64_t begin, int64_t end) {
  const tnk_grid_sample_args_t *a = p;
  const int dt = a->dtype;
  const int64_t rows = out_d(a) * a->oh, isz = in_d(a) * a->h * a->w;
  for (int64_t r = begin; r < end; r++) {
    int64_t b = r / rows, orow = r % rows;
    for (int64_t ox = 0; ox < a->ow; ox++) {
      int64_t gi = (r * a->ow + ox) * ncoord(a);
      double gx = 0, gy = 0, gz = 0;
      grid_point_t pt = grid_point(a, r, ox);
      corners_t c = corners_of(a, pt);
      if (a->mode != TNK_GRID_NEAREST && c.n > 0) {
        /* the taps' weight derivatives (corners_of): bilinear's 4, trilinear's
         * 8, bicubic's 16 */
        for (int64_t ch = 0; ch < a->c; ch++) {
          int64_t plane = (b * a->c + ch) * isz;
          double g = tnk_ldf(a->gout, dt, ((b * a->c + ch) * rows + orow) * a->ow + ox);
          for (int k = 0; k < c.n; k++) {
            int64_t at = tap_at(a, &c, k);
            if (at >= 0) {
              double v = tnk_ldf(a->in, dt, plane + at) * g;
              gx += v * c.wx[k];
              gy += v * c.wy[k];
              if (a->three_d) gz += v * c.wz[k];
            }
          }
        }
        gx *= pt.gx;
        gy *= pt.gy;
        gz *= pt.gz;
      }
      tnk_stf(a->ggrid, dt, gi, gx);
      tnk_stf(a->ggrid, dt, gi + 1, gy);
      if (a->three_d) tnk_stf(a->ggrid, dt, gi + 2, gz);
    }
  }
}

void tnk_grid_sample(const tnk_grid_sample_args_t *a) {
  if (!tnk_grid_sample_supported(a->dtype, a->mode, a->padding) || a->n <= 0 || a->oh <= 0 ||
      a->ow <= 0 || out_d(a) <= 0 || (a->three_d && a->mode == TNK_GRID_BICUBIC))
    return;
  const int64_t rows = a->n * out_d(a) * a->oh;
  if (!a->backward) {
    if (a->c > 0)
      tnk_parallel_for(rows, a->ow * a->c >= 1024 ? 1 : 1024 / (a->ow * a->c) + 1, grid_fwd_rows,
                       (void *)a);
    return;
  }
  if (a->gin && a->c > 0 && in_d(a) * a->h * a->w > 0)
    tnk_parallel_for(a->n * a->c, 1, grid_bwd_planes, (void *)a);
  if (a->ggrid)
    tnk_parallel_for(rows, a->ow >= 256 ? 1 : 256 / a->ow + 1, grid_bwd_rows, (void *)a);
}
