/* Internal to the kernel library: the fp64 scratch plane of the backward
 * passes that scatter-add into whole input planes (pooling.c: tnk_pool;
 * resample.c: tnk_resample and tnk_grid_sample). Each task accumulates one
 * input plane in double, then stores it once (half types would otherwise
 * round at every add). Not part of the public API (tnk.h). */
#ifndef TNK_PLANE_H
#define TNK_PLANE_H

#include <stdlib.h>
#include <string.h>

#include "dtype.h"

static inline double *scratch_plane(int64_t n) { return malloc((size_t)n * sizeof(double)); }
/* Without scratch (allocation failed) the plane accumulates in place. */
static inline void zero_plane(double *acc, void *out, int dt, int64_t base, int64_t n) {
  if (acc)
    memset(acc, 0, (size_t)n * sizeof(double));
  else
    for (int64_t i = 0; i < n; i++) tnk_stf(out, dt, base + i, 0.0);
}
static inline void add_at(double *acc, void *out, int dt, int64_t base, int64_t i, double v) {
  if (acc)
    acc[i] += v;
  else
    tnk_stf(out, dt, base + i, tnk_ldf(out, dt, base + i) + v);
}
static inline void store_plane(void *out, int dt, int64_t base, const double *acc, int64_t n) {
  if (!acc) return;
  for (int64_t i = 0; i < n; i++) tnk_stf(out, dt, base + i, acc[i]);
}

#endif
