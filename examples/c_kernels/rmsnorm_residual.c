/* Fused residual add + RMSNorm, the block boundary of Llama-style models:
 *   h = x + residual;  y = h / sqrt(mean(h^2) + eps) * weight
 * on rows of `cols` contiguous floats. Writes y and h (the new residual
 * stream) in one pass over the inputs, where eager PyTorch makes four.
 * Rows are split over the device's host threads with tnk_parallel_for. */
#include <math.h>
#include <stdint.h>
#include <tnk.h>

typedef struct {
  const float *x, *residual, *weight;
  float *y, *h;
  int64_t cols;
  float eps;
} rmsnorm_args;

static void rows(void *ctx, int64_t begin, int64_t end) {
  const rmsnorm_args *a = ctx;
  for (int64_t r = begin; r < end; r++) {
    const float *x = a->x + r * a->cols, *res = a->residual + r * a->cols;
    float *h = a->h + r * a->cols, *y = a->y + r * a->cols;
    double ss = 0.0;
    for (int64_t c = 0; c < a->cols; c++) {
      float v = x[c] + res[c];
      h[c] = v;
      ss += (double)v * v;
    }
    float rstd = (float)(1.0 / sqrt(ss / (double)a->cols + (double)a->eps));
    for (int64_t c = 0; c < a->cols; c++) y[c] = h[c] * rstd * a->weight[c];
  }
}

void rmsnorm_residual(const float *x, const float *residual, const float *weight, float *y,
                      float *h, int64_t nrows, int64_t cols, float eps) {
  rmsnorm_args a = {x, residual, weight, y, h, cols, eps};
  /* about 16 Ki elements per chunk: small inputs stay on one thread */
  int64_t grain = cols >= 16384 ? 1 : 16384 / (cols > 0 ? cols : 1);
  tnk_parallel_for(nrows, grain, rows, &a);
}
