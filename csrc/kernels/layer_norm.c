/* Layer normalisation, forward and backward, over contiguous rows. Rows
 * are independent tasks; the weight and bias gradients reduce over rows per
 * column, as a second parallel pass. Statistics in double. */
#include <math.h>
#include <stdlib.h>

#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

int tnk_layer_norm_supported(int dt) {
  return dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
}

static void ln_forward_rows(void *p, int64_t begin, int64_t end) {
  const tnk_layer_norm_args_t *a = p;
  int dt = a->dtype;
  if (dt == TNK_F32) { /* two vector passes for the statistics, one to write */
    /* outputs over 16 MiB: rows normalised into scratch (L1), then streamed
     * out, saving the read of every destination line; with AVX-512 and whole
     * 64-byte lines per row, pipelined (next row's loads under this row's
     * stores) */
    int stream = a->rows * a->n * 4 > TNK_STREAM_BYTES;
    if (stream && TNK_VM->layer_norm_rows_stream && tnk_vrows_pipelined_ok(a->y, a->n)) {
      TNK_VM->layer_norm_rows_stream(
          (const float *)a->x + begin * a->n, (float *)a->y + begin * a->n, end - begin, a->n,
          (float)a->eps, a->w, a->b, (float *)a->mean + begin, (float *)a->rstd + begin);
      return;
    }
    float *scratch = stream ? malloc(sizeof(float) * (size_t)a->n) : NULL;
    for (int64_t r = begin; r < end; r++) {
      const float *x = (const float *)a->x + r * a->n;
      float mean = tnk_vsum_f32(x, a->n) / (float)a->n;
      float var = tnk_vsumsqdev_f32(x, a->n, mean) / (float)a->n;
      float rstd = 1.0f / sqrtf(var + (float)a->eps);
      float *y = (float *)a->y + r * a->n;
      if (scratch) {
        tnk_vnormalize_f32(x, scratch, a->n, mean, rstd, a->w, a->b);
        tnk_vscale_stream_f32(scratch, 1.0f, y, a->n);
      } else {
        tnk_vnormalize_f32(x, y, a->n, mean, rstd, a->w, a->b);
      }
      ((float *)a->mean)[r] = mean;
      ((float *)a->rstd)[r] = rstd;
    }
    free(scratch);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t base = r * a->n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < a->n; j++) mean += tnk_ldf(a->x, dt, base + j);
    mean /= (double)a->n;
    for (int64_t j = 0; j < a->n; j++) {
      double d = tnk_ldf(a->x, dt, base + j) - mean;
      var += d * d;
    }
    var /= (double)a->n;
    double rstd = 1.0 / sqrt(var + a->eps);
    for (int64_t j = 0; j < a->n; j++) {
      double v = (tnk_ldf(a->x, dt, base + j) - mean) * rstd;
      if (a->w) v *= tnk_ldf(a->w, dt, j);
      if (a->b) v += tnk_ldf(a->b, dt, j);
      tnk_stf(a->y, dt, base + j, v);
    }
    tnk_stf(a->mean, dt, r, mean);
    tnk_stf(a->rstd, dt, r, rstd);
  }
}

static void ln_backward_rows(void *p, int64_t begin, int64_t end) {
  const tnk_layer_norm_args_t *a = p;
  int dt = a->dtype;
  for (int64_t r = begin; r < end; r++) {
    int64_t base = r * a->n;
    double mean = tnk_ldf(a->mean, dt, r), rstd = tnk_ldf(a->rstd, dt, r);
    double s1 = 0, s2 = 0; /* mean of g*w and of g*w*xhat */
    for (int64_t j = 0; j < a->n; j++) {
      double gw = tnk_ldf(a->g, dt, base + j) * (a->w ? tnk_ldf(a->w, dt, j) : 1.0);
      double xh = (tnk_ldf(a->x, dt, base + j) - mean) * rstd;
      s1 += gw;
      s2 += gw * xh;
    }
    s1 /= (double)a->n;
    s2 /= (double)a->n;
    for (int64_t j = 0; j < a->n; j++) {
      double gw = tnk_ldf(a->g, dt, base + j) * (a->w ? tnk_ldf(a->w, dt, j) : 1.0);
      double xh = (tnk_ldf(a->x, dt, base + j) - mean) * rstd;
      tnk_stf(a->gx, dt, base + j, rstd * (gw - s1 - xh * s2));
    }
  }
}

static void ln_backward_cols(void *p, int64_t begin, int64_t end) {
  const tnk_layer_norm_args_t *a = p;
  int dt = a->dtype;
  for (int64_t j = begin; j < end; j++) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < a->rows; r++) {
      double g = tnk_ldf(a->g, dt, r * a->n + j);
      double xh =
          (tnk_ldf(a->x, dt, r * a->n + j) - tnk_ldf(a->mean, dt, r)) * tnk_ldf(a->rstd, dt, r);
      sw += g * xh;
      sb += g;
    }
    if (a->gw) tnk_stf(a->gw, dt, j, sw);
    if (a->gb) tnk_stf(a->gb, dt, j, sb);
  }
}

void tnk_layer_norm(const tnk_layer_norm_args_t *a) {
  if (!tnk_layer_norm_supported(a->dtype) || a->n <= 0) return;
  int64_t grain = a->n >= 4096 ? 1 : 4096 / a->n;
  if (!a->backward) {
    if (a->rows > 0) tnk_parallel_for(a->rows, grain, ln_forward_rows, (void *)a);
    return;
  }
  if (a->gx && a->rows > 0) tnk_parallel_for(a->rows, grain, ln_backward_rows, (void *)a);
  if (a->gw || a->gb) {
    int64_t cgrain = a->rows >= 4096 ? 1 : 4096 / (a->rows ? a->rows : 1);
    tnk_parallel_for(a->n, cgrain, ln_backward_cols, (void *)a);
  }
}
