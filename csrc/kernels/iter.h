/* The n-dimensional iterator of the element-wise drivers (unary, binary,
 * copy, fill, random, where, ternary, the outer loop of reductions):
 * internal to the kernel library. It coalesces the shape over N views (the
 * element-wise maps first order the dimensions as the views lie in memory,
 * tnk_iter_init_any_order), then runs the driver's 1-D inner loop over the
 * work, split across threads with tnk_parallel_for: chunks of the one
 * dimension when the coalesced shape is 1-D (grain elements at least),
 * 32 x 32 tiles of the last two dimensions when a view is dense along the
 * second-innermost and strided along the innermost (a transposing copy),
 * whole rows of the innermost dimension otherwise (grain / row length rows
 * at least, or row_grain rows). */
#ifndef TNK_ITER_H
#define TNK_ITER_H

#include "tnk.h"

#define TNK_ITER_MAX_VIEWS 4

/* n elements: view v's k-th at ptrs[v] + k * strides[v] (bytes). `index` is
 * the row-major linear index of the first one in the caller's shape. */
typedef void (*tnk_iter_loop_fn)(void *ctx, char **ptrs, const int64_t *strides, int64_t n,
                                 int64_t index);

/* A run of `rows` such rows along the second-innermost dimension: row r's
 * elements start at ptrs[v] + r * row_strides[v]. */
typedef void (*tnk_iter_rows_fn)(void *ctx, char **ptrs, const int64_t *strides,
                                 const int64_t *row_strides, int64_t n, int64_t rows);

typedef struct tnk_iter {
  tnk_shape_t shape; /* coalesced, at least 1-D (0-d: one element, strides 0) */
  int nv;
  int64_t numel;
  int64_t row_grain; /* 0: grain / row length (set it after init to override) */
  char *data[TNK_ITER_MAX_VIEWS];
  int64_t esz[TNK_ITER_MAX_VIEWS];
  int64_t strides[TNK_ITER_MAX_VIEWS][TNRT_MAX_DIMS]; /* bytes */
  tnk_iter_loop_fn loop;
  /* optional (set it after init): takes whole runs of rows in one call, where
   * a per-row call would cost more than a short row's work */
  tnk_iter_rows_fn rows_loop;
  void *ctx;
} tnk_iter_t;

/* Views' strides are in elements of esz[v] bytes. Returns the element count
 * (0: nothing to run). */
int64_t tnk_iter_init(tnk_iter_t *it, const tnk_shape_t *shape, int nv, const tnk_view_t *views,
                      const int64_t *esz);
/* The same with the dimensions first ordered as the views lie in memory
 * (the output's order first): for drivers whose loops do not read `index`
 * (element-wise maps, where each element is independent). */
int64_t tnk_iter_init_any_order(tnk_iter_t *it, const tnk_shape_t *shape, int nv,
                                const tnk_view_t *views, const int64_t *esz);
/* The coalesced shape is 1-D and every view dense (stride = element size). */
int tnk_iter_contiguous(const tnk_iter_t *it);
void tnk_iter_run(tnk_iter_t *it, int64_t grain, tnk_iter_loop_fn loop, void *ctx);

#endif
