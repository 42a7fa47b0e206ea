/* Softmax and log-softmax, forward and backward, along one dimension of a
 * contiguous tensor viewed as (outer, len, inner). One row per task index;
 * fp32 accumulation (fp64 for fp64). */
#include <math.h>
#include <stdlib.h>

#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

int tnk_softmax_supported(int dtype, int out_dtype) {
  return tnk_floating(dtype) && (out_dtype == dtype || out_dtype == TNK_F32);
}

/* fp32 rows along the last dimension: the common case, without per-element
 * dtype dispatch. */
static void softmax_rows_f32(const tnk_softmax_args_t *a, int64_t begin, int64_t end) {
  int64_t n = a->len;
  /* streaming: exponentials go to a row of scratch (in L1/L2), the scaled
   * row straight to memory */
  float *scratch = NULL;
  if (!a->backward && !a->log && a->outer * n * 4 > TNK_STREAM_BYTES) {
    /* AVX-512, whole 64-byte lines per row: the pipelined form, which
     * overlaps the next row's loads and the last row's stores with this
     * row's exponentials */
    if (tnk_vrows_pipelined_ok(a->out, n)) {
      scratch = aligned_alloc(64, sizeof(float) * (size_t)(2 * n));
      if (scratch) {
        TNK_VM->softmax_rows_stream((const float *)a->in + begin * n, (float *)a->out + begin * n,
                                    end - begin, n, scratch);
        free(scratch);
        return;
      }
    }
    scratch = malloc(sizeof(float) * (size_t)n);
  }
  for (int64_t r = begin; r < end; r++) {
    /* y may equal x or g (in place): no pointer here is restrict */
    float *y = (float *)a->out + r * n;
    const float *x = (const float *)a->in + r * n;
    if (scratch) {
      float mx = tnk_vmax_f32(x, n);
      float sum = tnk_vexp_bounded_sum_f32(x, mx, scratch, n);
      tnk_vscale_stream_f32(scratch, 1.0f / sum, y, n);
      continue;
    }
    if (!a->backward) {
      float mx = tnk_vmax_f32(x, n);
      float sum = tnk_vexp_bounded_sum_f32(x, mx, a->log ? NULL : y, n);
      if (a->log) {
        float lsum = logf(sum);
        for (int64_t k = 0; k < n; k++) y[k] = x[k] - mx - lsum;
      } else {
        float inv = 1.0f / sum;
        for (int64_t k = 0; k < n; k++) y[k] *= inv;
      }
    } else {
      const float *g = (const float *)a->grad + r * n;
      float dot = 0;
      if (a->log) {
        for (int64_t k = 0; k < n; k++) dot += g[k];
        if (y != g) {
          tnk_vexp_sum_f32(x, 0.0f, y, n); /* y = exp(log-softmax) = softmax */
          for (int64_t k = 0; k < n; k++) y[k] = g[k] - y[k] * dot;
        } else {
          for (int64_t k = 0; k < n; k++) y[k] = g[k] - expf(x[k]) * dot;
        }
      } else {
        for (int64_t k = 0; k < n; k++) dot += g[k] * x[k];
        for (int64_t k = 0; k < n; k++) y[k] = x[k] * (g[k] - dot);
      }
    }
  }
  free(scratch);
}

static void softmax_rows(void *p, int64_t begin, int64_t end) {
  const tnk_softmax_args_t *a = p;
  if (a->inner == 1 && a->dtype == TNK_F32 && a->out_dtype == TNK_F32) {
    softmax_rows_f32(a, begin, end);
    return;
  }
  int wide = a->dtype == TNK_F64;
  for (int64_t r = begin; r < end; r++) {
    int64_t base = (r / a->inner) * a->len * a->inner + r % a->inner;
    int64_t s = a->inner;
    if (!a->backward) {
      double mx = -INFINITY;
      for (int64_t k = 0; k < a->len; k++) {
        double x = tnk_ldf(a->in, a->dtype, base + k * s);
        if (x > mx || x != x) mx = x;
      }
      double sum = 0;
      for (int64_t k = 0; k < a->len; k++) {
        double e = tnk_ldf(a->in, a->dtype, base + k * s) - mx;
        sum += wide ? exp(e) : (double)expf((float)e);
      }
      double lsum = log(sum);
      for (int64_t k = 0; k < a->len; k++) {
        double x = tnk_ldf(a->in, a->dtype, base + k * s) - mx;
        double y = a->log ? x - lsum : (wide ? exp(x) : (double)expf((float)x)) / sum;
        tnk_stf(a->out, a->out_dtype, base + k * s, y);
      }
    } else { /* in = forward output y, grad = dL/dy */
      double dot = 0;
      for (int64_t k = 0; k < a->len; k++) {
        double g = tnk_ldf(a->grad, a->dtype, base + k * s);
        dot += a->log ? g : g * tnk_ldf(a->in, a->dtype, base + k * s);
      }
      for (int64_t k = 0; k < a->len; k++) {
        double g = tnk_ldf(a->grad, a->dtype, base + k * s);
        double y = tnk_ldf(a->in, a->dtype, base + k * s);
        double v = a->log ? g - exp(y) * dot : y * (g - dot);
        tnk_stf(a->out, a->out_dtype, base + k * s, v);
      }
    }
  }
}

void tnk_softmax(const tnk_softmax_args_t *a) {
  if (!tnk_softmax_supported(a->dtype, a->out_dtype)) return;
  int64_t rows = a->outer * a->inner;
  if (rows == 0 || a->len == 0) return;
  int64_t grain = a->len >= 4096 ? 1 : 4096 / a->len;
  tnk_parallel_for(rows, grain, softmax_rows, (void *)a);
}
