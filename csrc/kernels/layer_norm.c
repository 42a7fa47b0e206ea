/* Layer normalisation, forward and backward, over contiguous rows. Rows
 * are independent tasks; the weight and bias gradients reduce over rows per
 * column, as a second parallel pass. Statistics in double. */
#include <math.h>

#include "dtype.h"
#include "tnk.h"

int tnk_layer_norm_supported(int dt) {
  return dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
}

static inline double ld(const void *base, int dt, int64_t i) {
  switch (dt) {
    case TNK_F32: return ((const float *)base)[i];
    case TNK_F64: return ((const double *)base)[i];
    case TNK_BF16: return tnk_bf16_to_f32(((const uint16_t *)base)[i]);
    default: return tnk_f16_to_f32(((const uint16_t *)base)[i]);
  }
}

static inline void st(void *base, int dt, int64_t i, double v) {
  switch (dt) {
    case TNK_F32: ((float *)base)[i] = (float)v; break;
    case TNK_F64: ((double *)base)[i] = v; break;
    case TNK_BF16: ((uint16_t *)base)[i] = tnk_f32_to_bf16((float)v); break;
    default: ((uint16_t *)base)[i] = tnk_f32_to_f16((float)v); break;
  }
}

static void ln_forward_rows(void *p, int64_t begin, int64_t end) {
  const tnk_layer_norm_args_t *a = p;
  int dt = a->dtype;
  for (int64_t r = begin; r < end; r++) {
    int64_t base = r * a->n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < a->n; j++) mean += ld(a->x, dt, base + j);
    mean /= (double)a->n;
    for (int64_t j = 0; j < a->n; j++) {
      double d = ld(a->x, dt, base + j) - mean;
      var += d * d;
    }
    var /= (double)a->n;
    double rstd = 1.0 / sqrt(var + a->eps);
    for (int64_t j = 0; j < a->n; j++) {
      double v = (ld(a->x, dt, base + j) - mean) * rstd;
      if (a->w) v *= ld(a->w, dt, j);
      if (a->b) v += ld(a->b, dt, j);
      st(a->y, dt, base + j, v);
    }
    st(a->mean, dt, r, mean);
    st(a->rstd, dt, r, rstd);
  }
}

static void ln_backward_rows(void *p, int64_t begin, int64_t end) {
  const tnk_layer_norm_args_t *a = p;
  int dt = a->dtype;
  for (int64_t r = begin; r < end; r++) {
    int64_t base = r * a->n;
    double mean = ld(a->mean, dt, r), rstd = ld(a->rstd, dt, r);
    double s1 = 0, s2 = 0; /* mean of g*w and of g*w*xhat */
    for (int64_t j = 0; j < a->n; j++) {
      double gw = ld(a->g, dt, base + j) * (a->w ? ld(a->w, dt, j) : 1.0);
      double xh = (ld(a->x, dt, base + j) - mean) * rstd;
      s1 += gw;
      s2 += gw * xh;
    }
    s1 /= (double)a->n;
    s2 /= (double)a->n;
    for (int64_t j = 0; j < a->n; j++) {
      double gw = ld(a->g, dt, base + j) * (a->w ? ld(a->w, dt, j) : 1.0);
      double xh = (ld(a->x, dt, base + j) - mean) * rstd;
      st(a->gx, dt, base + j, rstd * (gw - s1 - xh * s2));
    }
  }
}

static void ln_backward_cols(void *p, int64_t begin, int64_t end) {
  const tnk_layer_norm_args_t *a = p;
  int dt = a->dtype;
  for (int64_t j = begin; j < end; j++) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < a->rows; r++) {
      double g = ld(a->g, dt, r * a->n + j);
      double xh = (ld(a->x, dt, r * a->n + j) - ld(a->mean, dt, r)) * ld(a->rstd, dt, r);
      sw += g * xh;
      sb += g;
    }
    if (a->gw) st(a->gw, dt, j, sw);
    if (a->gb) st(a->gb, dt, j, sb);
  }
}

void tnk_layer_norm(const tnk_layer_norm_args_t *a) {
  if (!tnk_layer_norm_supported(a->dtype) || a->n <= 0) return;
  int64_t grain = a->n >= 4096 ? 1 : 4096 / a->n;
  if (!a->backward) {
    if (a->rows > 0) tnk_parallel_for(a->rows, grain, ln_forward_rows, (void *)a);
    return;
  }
  if (a->gx && a->rows > 0)
    tnk_parallel_for(a->rows, grain, ln_backward_rows, (void *)a);
  if (a->gw || a->gb) {
    int64_t cgrain = a->rows >= 4096 ? 1 : 4096 / (a->rows ? a->rows : 1);
    tnk_parallel_for(a->n, cgrain, ln_backward_cols, (void *)a);
  }
}
