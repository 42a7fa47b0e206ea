/* Convolution lowering: im2col turns each output pixel's receptive field
 * into a column so the convolution is one GEMM; col2im is its adjoint (the
 * input gradient). Rows of the column matrix are (channel, kz, ky, kx);
 * 1-D and 2-D convolutions are 3-D ones with unit leading dimensions. */
#include <string.h>

#include "dtype.h"
#include "tnk.h"

/* The window offset of kernel row r's (kz, ky, kx) within its image plane
 * and the plane (n * c + ch). */
typedef struct window {
  int64_t plane, kz, ky, kx;
} window_t;

static window_t window_of(const tnk_im2col_args_t *a, int64_t r) {
  int64_t kk = a->kd * a->kh * a->kw, k = r % kk;
  window_t w = {r / kk, k / (a->kh * a->kw), k / a->kw % a->kh, k % a->kw};
  return w;
}

static void im2col_rows(void *p, int64_t begin, int64_t end) {
  const tnk_im2col_args_t *a = p;
  size_t esz = tnk_dtype_size(a->dtype);
  int64_t L = a->od * a->oh * a->ow, plane = a->d * a->h * a->w;
  for (int64_t r = begin; r < end; r++) {
    window_t k = window_of(a, r);
    const char *im = (const char *)a->im + (size_t)(k.plane * plane) * esz;
    char *col = (char *)a->col + (size_t)(r * L) * esz;
    for (int64_t oz = 0; oz < a->od; oz++) {
      int64_t iz = oz * a->sd - a->pd + k.kz * a->dd;
      for (int64_t oy = 0; oy < a->oh; oy++) {
        int64_t iy = oy * a->sh - a->ph + k.ky * a->dh;
        char *dst = col + (size_t)((oz * a->oh + oy) * a->ow) * esz;
        if (iz < 0 || iz >= a->d || iy < 0 || iy >= a->h) {
          memset(dst, 0, (size_t)a->ow * esz);
          continue;
        }
        const char *src = im + (size_t)((iz * a->h + iy) * a->w) * esz;
        for (int64_t ox = 0; ox < a->ow; ox++) {
          int64_t ix = ox * a->sw - a->pw + k.kx * a->dw;
          if (ix < 0 || ix >= a->w)
            memset(dst + ox * (int64_t)esz, 0, esz);
          else
            memcpy(dst + ox * (int64_t)esz, src + ix * (int64_t)esz, esz);
        }
      }
    }
  }
}

/* One task per (image, channel) plane: it gathers every kernel offset that
 * lands in its plane, so no two tasks add into one pixel. */
static void col2im_planes(void *p, int64_t begin, int64_t end) {
  const tnk_im2col_args_t *a = p;
  int dt = a->dtype;
  int64_t kk = a->kd * a->kh * a->kw, L = a->od * a->oh * a->ow;
  char *im = (char *)a->im;
  for (int64_t pl = begin; pl < end; pl++) { /* pl = n * c + ch */
    int64_t im_base = pl * a->d * a->h * a->w;
    for (int64_t row = pl * kk; row < (pl + 1) * kk; row++) {
      window_t k = window_of(a, row);
      for (int64_t oz = 0; oz < a->od; oz++) {
        int64_t iz = oz * a->sd - a->pd + k.kz * a->dd;
        if (iz < 0 || iz >= a->d) continue;
        for (int64_t oy = 0; oy < a->oh; oy++) {
          int64_t iy = oy * a->sh - a->ph + k.ky * a->dh;
          if (iy < 0 || iy >= a->h) continue;
          for (int64_t ox = 0; ox < a->ow; ox++) {
            int64_t ix = ox * a->sw - a->pw + k.kx * a->dw;
            if (ix < 0 || ix >= a->w) continue;
            int64_t ci = row * L + (oz * a->oh + oy) * a->ow + ox;
            int64_t ii = im_base + (iz * a->h + iy) * a->w + ix;
            if (dt == TNK_F32)
              ((float *)im)[ii] += ((const float *)a->col)[ci];
            else
              tnk_stf(im, dt, ii, tnk_ldf(im, dt, ii) + tnk_ldf(a->col, dt, ci));
          }
        }
      }
    }
  }
}

void tnk_im2col(const tnk_im2col_args_t *args) {
  tnk_im2col_args_t a = *args;
  if (a.kd <= 0) { /* 2-D */
    a.d = a.kd = a.sd = a.dd = a.od = 1;
    a.pd = 0;
  }
  if (a.batch <= 0 || a.c <= 0 || a.od <= 0 || a.oh <= 0 || a.ow <= 0) return;
  if (a.col2im) {
    if (!(a.dtype == TNK_F32 || a.dtype == TNK_F64 || a.dtype == TNK_BF16 || a.dtype == TNK_F16))
      return;
    tnk_parallel_for(a.batch * a.c, 1, col2im_planes, &a);
  } else {
    int64_t L = a.od * a.oh * a.ow;
    tnk_parallel_for(a.batch * a.c * a.kd * a.kh * a.kw, L >= 4096 ? 1 : 4096 / L, im2col_rows, &a);
  }
}
