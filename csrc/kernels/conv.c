/* Convolution lowering: im2col turns each output pixel's receptive field
 * into a column so the convolution is one GEMM; col2im is its adjoint (the
 * input gradient). Rows of the column matrix are (channel, ky, kx). */
#include <string.h>

#include "dtype.h"
#include "tnk.h"

static void im2col_rows(void *p, int64_t begin, int64_t end) {
  const tnk_im2col_args_t *a = p;
  size_t esz = tnk_dtype_size(a->dtype);
  int64_t kk = a->kh * a->kw, L = a->oh * a->ow;
  for (int64_t r = begin; r < end; r++) { /* r = (n * c + ch) * kk + ky * kw + kx */
    int64_t n = r / (a->c * kk), ch = r / kk % a->c, ky = r % kk / a->kw, kx = r % a->kw;
    const char *im = (const char *)a->im + (size_t)((n * a->c + ch) * a->h * a->w) * esz;
    char *col = (char *)a->col + (size_t)(r * L) * esz;
    for (int64_t oy = 0; oy < a->oh; oy++) {
      int64_t iy = oy * a->sh - a->ph + ky * a->dh;
      char *dst = col + (size_t)(oy * a->ow) * esz;
      if (iy < 0 || iy >= a->h) {
        memset(dst, 0, (size_t)a->ow * esz);
        continue;
      }
      for (int64_t ox = 0; ox < a->ow; ox++) {
        int64_t ix = ox * a->sw - a->pw + kx * a->dw;
        if (ix < 0 || ix >= a->w) memset(dst + ox * (int64_t)esz, 0, esz);
        else memcpy(dst + ox * (int64_t)esz, im + (iy * a->w + ix) * (int64_t)esz, esz);
      }
    }
  }
}

/* One task per (image, channel) plane: it gathers every kernel offset that
 * lands in its plane, so no two tasks add into one pixel. */
static void col2im_planes(void *p, int64_t begin, int64_t end) {
  const tnk_im2col_args_t *a = p;
  int dt = a->dtype;
  int64_t kk = a->kh * a->kw, L = a->oh * a->ow;
  for (int64_t pl = begin; pl < end; pl++) { /* pl = n * c + ch */
    char *im = (char *)a->im;
    int64_t im_base = pl * a->h * a->w;
    for (int64_t k = 0; k < kk; k++) {
      int64_t ky = k / a->kw, kx = k % a->kw, row = pl * kk + k;
      for (int64_t oy = 0; oy < a->oh; oy++) {
        int64_t iy = oy * a->sh - a->ph + ky * a->dh;
        if (iy < 0 || iy >= a->h) continue;
        for (int64_t ox = 0; ox < a->ow; ox++) {
          int64_t ix = ox * a->sw - a->pw + kx * a->dw;
          if (ix < 0 || ix >= a->w) continue;
          int64_t ci = row * L + oy * a->ow + ox, ii = im_base + iy * a->w + ix;
          if (dt == TNK_F32)
            ((float *)im)[ii] += ((const float *)a->col)[ci];
          else
            tnk_stf(im, dt, ii, tnk_ldf(im, dt, ii) + tnk_ldf(a->col, dt, ci));
        }
      }
    }
  }
}

void tnk_im2col(const tnk_im2col_args_t *a) {
  if (a->batch <= 0 || a->c <= 0 || a->oh <= 0 || a->ow <= 0) return;
  if (a->col2im) {
    if (!(a->dtype == TNK_F32 || a->dtype == TNK_F64 || a->dtype == TNK_BF16 ||
          a->dtype == TNK_F16))
      return;
    tnk_parallel_for(a->batch * a->c, 1, col2im_planes, (void *)a);
  } else {
    int64_t L = a->oh * a->ow;
    tnk_parallel_for(a->batch * a->c * a->kh * a->kw, L >= 4096 ? 1 : 4096 / L, im2col_rows,
                     (void *)a);
  }
}
