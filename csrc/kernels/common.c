/* Shared helpers of the kernel library: dtype table, shape coalescing and
 * the parallel hook. */
#include "tnk.h"

static const size_t k_sizes[TNK_DTYPE_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};

size_t tnk_dtype_size(tnk_dtype_t dt) { return (unsigned)dt < TNK_DTYPE_COUNT ? k_sizes[dt] : 0; }

static void serial_for(int64_t n, int64_t grain, tnk_range_fn fn, void *ctx) {
  (void)grain;
  if (n > 0) fn(ctx, 0, n);
}

/* Written once at start-up, before any kernel runs. */
static tnk_parallel_fn g_parallel = serial_for;

void tnk_set_parallel(tnk_parallel_fn fn) { g_parallel = fn ? fn : serial_for; }

static int g_threads = 1;
void tnk_set_num_threads(int n) { g_threads = n > 0 ? n : 1; }
int tnk_num_threads(void) { return g_threads; }

void tnk_parallel_for(int64_t n, int64_t grain, tnk_range_fn fn, void *ctx) {
  g_parallel(n, grain, fn, ctx);
}

int64_t tnk_numel(const tnk_shape_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < shape->ndim; d++) n *= shape->sizes[d];
  return n;
}

int tnk_coalesce(tnk_shape_t *shape, tnk_view_t *views, int nviews) {
  int nd = 0;
  for (int d = 0; d < shape->ndim; d++) {
    if (shape->sizes[d] == 1) continue;
    if (nd > 0) {
      int mergeable = 1;
      for (int v = 0; v < nviews; v++)
        if (views[v].strides[nd - 1] != views[v].strides[d] * shape->sizes[d]) mergeable = 0;
      if (mergeable) {
        shape->sizes[nd - 1] *= shape->sizes[d];
        for (int v = 0; v < nviews; v++) views[v].strides[nd - 1] = views[v].strides[d];
        continue;
      }
    }
    shape->sizes[nd] = shape->sizes[d];
    for (int v = 0; v < nviews; v++) views[v].strides[nd] = views[v].strides[d];
    nd++;
  }
  if (tnk_numel(shape) == 0) { /* keep an empty shape empty */
    shape->ndim = 1;
    shape->sizes[0] = 0;
    return 1;
  }
  shape->ndim = nd;
  return nd;
}

void tnk_assert(const tnk_assert_args_t *a) {
  if (!*(const unsigned char *)a->flag && a->fault.fn)
    a->fault.fn(a->fault.ctx, a->fault.kind, a->fault.what, 0, 0, a->fault.origin);
}
