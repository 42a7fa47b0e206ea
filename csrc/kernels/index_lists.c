/* Source-index lists of the ops that csrc/aten builds from index gathers:
 * for each output position along one dim, the input position it reads.
 * Shape metadata, computed on the host before the gather is launched. */
#include <math.h>

#include "tnk.h"

void tnk_nearest_index(int64_t in, int64_t out, int has_scale, double scale, int exact,
                       int64_t *idx) {
  float s = has_scale && scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
  for (int64_t i = 0; i < out; i++) {
    int64_t v;
    if (exact)
      v = (int64_t)floorf(((float)i + 0.5f) * s);
    else
      v = out == in ? i : out == 2 * in ? i >> 1 : (int64_t)floorf(i * s);
    idx[i] = v < in - 1 ? v : in - 1;
  }
}

void tnk_pad_index(int64_t n, int64_t lo, int64_t hi, int reflect, int64_t *idx) {
  int64_t k = 0;
  for (int64_t o = -lo; o < n + hi; o++) {
    int64_t j = o;
    if (reflect) {
      int64_t period = 2 * (n - 1);
      j = period ? ((o % period) + period) % period : 0;
      if (j >= n) j = period - j;
    } else {
      j = o < 0 ? 0 : o >= n ? n - 1 : o;
    }
    idx[k++] = j;
  }
}

void tnk_unfold_index(int64_t windows, int64_t size, int64_t step, int64_t *idx) {
  for (int64_t w = 0; w < windows; w++)
    for (int64_t j = 0; j < size; j++) idx[w * size + j] = w * step + j;
}
