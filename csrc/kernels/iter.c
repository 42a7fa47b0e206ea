/* The n-dimensional iterator (iter.h). */
#include "iter.h"

#include <stdlib.h>

/* Dimension a lies outside dimension b in memory: it has the larger stride
 * in the first view (the output first) where the two differ and neither is
 * a broadcast (stride 0). */
static int outer_of(const tnk_view_t *v, int nv, int a, int b) {
  for (int k = 0; k < nv; k++) {
    int64_t sa = llabs(v[k].strides[a]), sb = llabs(v[k].strides[b]);
    if (sa == 0 || sb == 0 || sa == sb) continue;
    return sa > sb;
  }
  return 0;
}

/* Orders the dimensions as the views lie in memory, outermost first (as
 * TensorIterator does): a transposed or channels-last output and its
 * like-strided inputs then coalesce into one dense run. Dimensions of size
 * 1 go (they hold no elements to order). A stable insertion sort: ties
 * keep the caller's order. */
static void order_by_memory(tnk_shape_t *shape, tnk_view_t *v, int nv) {
  if (tnk_numel(shape) == 0) return; /* an empty shape stays as it is */
  int perm[TNRT_MAX_DIMS], nd = 0;
  for (int d = 0; d < shape->ndim; d++)
    if (shape->sizes[d] != 1) perm[nd++] = d;
  for (int i = 1; i < nd; i++)
    for (int j = i; j > 0 && outer_of(v, nv, perm[j], perm[j - 1]); j--) {
      int t = perm[j];
      perm[j] = perm[j - 1], perm[j - 1] = t;
    }
  tnk_shape_t s = {.ndim = nd};
  tnk_view_t w[TNK_ITER_MAX_VIEWS];
  for (int k = 0; k < nv; k++) w[k] = v[k];
  for (int d = 0; d < nd; d++) {
    s.sizes[d] = shape->sizes[perm[d]];
    for (int k = 0; k < nv; k++) w[k].strides[d] = v[k].strides[perm[d]];
  }
  *shape = s;
  for (int k = 0; k < nv; k++) v[k] = w[k];
}

static int64_t iter_init(tnk_iter_t *it, const tnk_shape_t *shape, int nv, const tnk_view_t *views,
                         const int64_t *esz, int any_order) {
  tnk_view_t v[TNK_ITER_MAX_VIEWS];
  *it = (tnk_iter_t){.shape = *shape, .nv = nv};
  for (int k = 0; k < nv; k++) v[k] = views[k];
  if (any_order) order_by_memory(&it->shape, v, nv);
  tnk_coalesce(&it->shape, v, nv);
  it->numel = tnk_numel(&it->shape);
  if (it->shape.ndim == 0) { /* a scalar: one element */
    it->shape.ndim = 1;
    it->shape.sizes[0] = 1;
    for (int k = 0; k < nv; k++) v[k].strides[0] = 0;
  }
  for (int k = 0; k < nv; k++) {
    it->data[k] = v[k].data;
    it->esz[k] = esz[k];
    for (int d = 0; d < it->shape.ndim; d++) it->strides[k][d] = v[k].strides[d] * esz[k];
  }
  return it->numel;
}

int64_t tnk_iter_init(tnk_iter_t *it, const tnk_shape_t *shape, int nv, const tnk_view_t *views,
                      const int64_t *esz) {
  return iter_init(it, shape, nv, views, esz, 0);
}

int64_t tnk_iter_init_any_order(tnk_iter_t *it, const tnk_shape_t *shape, int nv,
                                const tnk_view_t *views, const int64_t *esz) {
  return iter_init(it, shape, nv, views, esz, 1);
}

int tnk_iter_contiguous(const tnk_iter_t *it) {
  if (it->shape.ndim != 1) return 0;
  for (int k = 0; k < it->nv; k++)
    if (it->strides[k][0] != it->esz[k]) return 0;
  return 1;
}

/* One row split in chunks (the coalesced shape is 1-D). */
static void iter_chunks(void *p, int64_t begin, int64_t end) {
  const tnk_iter_t *it = p;
  char *ptrs[TNK_ITER_MAX_VIEWS];
  int64_t s[TNK_ITER_MAX_VIEWS];
  for (int k = 0; k < it->nv; k++) {
    s[k] = it->strides[k][0];
    ptrs[k] = it->data[k] + begin * s[k];
  }
  it->loop(it->ctx, ptrs, s, end - begin, begin);
}

/* Rows of the coalesced shape: the first row's index is decomposed once;
 * then runs of rows along the second-innermost dimension step the pointers
 * by that dimension's strides, and only the end of a run carries into the
 * outer dimensions. The innermost dimension goes to the loop. (Updating an
 * offset array per row cost more than a 64-byte row's copy: the vectorised
 * reload of the array after scalar stores stalled on store forwarding.) */
static void iter_rows(void *p, int64_t begin, int64_t end) {
  const tnk_iter_t *it = p;
  int nd = it->shape.ndim, nv = it->nv;
  int64_t inner = it->shape.sizes[nd - 1], rows = it->shape.sizes[nd - 2];
  int64_t idx[TNRT_MAX_DIMS], s[TNK_ITER_MAX_VIEWS], s2[TNK_ITER_MAX_VIEWS];
  char *base[TNK_ITER_MAX_VIEWS], *ptrs[TNK_ITER_MAX_VIEWS];
  for (int k = 0; k < nv; k++) {
    s[k] = it->strides[k][nd - 1];
    s2[k] = it->strides[k][nd - 2];
    base[k] = it->data[k];
  }
  int64_t rem = begin;
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = rem % it->shape.sizes[d];
    rem /= it->shape.sizes[d];
    for (int k = 0; k < nv; k++) base[k] += idx[d] * it->strides[k][d];
  }
  for (int64_t r = begin; r < end;) {
    int64_t run = rows - idx[nd - 2];
    if (run > end - r) run = end - r;
    for (int k = 0; k < nv; k++) ptrs[k] = base[k];
    if (it->rows_loop) {
      it->rows_loop(it->ctx, ptrs, s, s2, inner, run);
    } else {
      for (int64_t j = 0; j < run; j++) {
        it->loop(it->ctx, ptrs, s, inner, (r + j) * inner);
        for (int k = 0; k < nv; k++) ptrs[k] += s2[k];
      }
    }
    r += run;
    if (r >= end) break;
    /* the run ended at the dimension's end: carry into the outer ones */
    for (int k = 0; k < nv; k++) base[k] -= idx[nd - 2] * s2[k];
    idx[nd - 2] = 0;
    for (int d = nd - 3; d >= 0; d--) {
      for (int k = 0; k < nv; k++) base[k] += it->strides[k][d];
      if (++idx[d] < it->shape.sizes[d]) break;
      for (int k = 0; k < nv; k++) base[k] -= idx[d] * it->strides[k][d];
      idx[d] = 0;
    }
  }
}

/* A view is transposed in the last two dimensions: dense along the
 * second-innermost, strided along the innermost. */
static int transposed_view(const tnk_iter_t *it, int k) {
  int nd = it->shape.ndim;
  return llabs(it->strides[k][nd - 2]) == it->esz[k] &&
         llabs(it->strides[k][nd - 1]) != it->esz[k] && it->strides[k][nd - 1] != 0;
}

/* Tiles of ITER_TILE x ITER_TILE over the last two dimensions, for a view
 * dense along the other one than the rest (a transposing copy or cast): a
 * row of the tile reads one element from each of ITER_TILE cache lines of
 * that view, and the next rows read the same lines, so each line is loaded
 * once rather than once per element. Work item w: tile row w % row_tiles of
 * outer index w / row_tiles. */
#define ITER_TILE 32

static void iter_tiles(void *p, int64_t begin, int64_t end) {
  const tnk_iter_t *it = p;
  int nd = it->shape.ndim, nv = it->nv;
  int64_t cols = it->shape.sizes[nd - 1], rows = it->shape.sizes[nd - 2];
  int64_t row_tiles = (rows + ITER_TILE - 1) / ITER_TILE;
  int64_t s[TNK_ITER_MAX_VIEWS], s2[TNK_ITER_MAX_VIEWS];
  for (int k = 0; k < nv; k++) s[k] = it->strides[k][nd - 1], s2[k] = it->strides[k][nd - 2];
  for (int64_t w = begin; w < end; w++) {
    int64_t outer = w / row_tiles, r0 = (w % row_tiles) * ITER_TILE;
    int64_t nr = rows - r0 < ITER_TILE ? rows - r0 : ITER_TILE;
    char *base[TNK_ITER_MAX_VIEWS];
    for (int k = 0; k < nv; k++) base[k] = it->data[k] + r0 * s2[k];
    int64_t rem = outer;
    for (int d = nd - 3; d >= 0; d--) {
      int64_t i = rem % it->shape.sizes[d];
      rem /= it->shape.sizes[d];
      for (int k = 0; k < nv; k++) base[k] += i * it->strides[k][d];
    }
    for (int64_t c0 = 0; c0 < cols; c0 += ITER_TILE) {
      int64_t nc = cols - c0 < ITER_TILE ? cols - c0 : ITER_TILE;
      char *ptrs[TNK_ITER_MAX_VIEWS];
      for (int k = 0; k < nv; k++) ptrs[k] = base[k] + c0 * s[k];
      if (it->rows_loop) {
        it->rows_loop(it->ctx, ptrs, s, s2, nc, nr);
        continue;
      }
      for (int64_t r = 0; r < nr; r++) {
        it->loop(it->ctx, ptrs, s, nc, ((outer * rows) + r0 + r) * cols + c0);
        for (int k = 0; k < nv; k++) ptrs[k] += s2[k];
      }
    }
  }
}

void tnk_iter_run(tnk_iter_t *it, int64_t grain, tnk_iter_loop_fn loop, void *ctx) {
  if (it->numel <= 0) return;
  it->loop = loop;
  it->ctx = ctx;
  int nd = it->shape.ndim;
  int64_t inner = it->shape.sizes[nd - 1];
  if (nd == 1) {
    tnk_parallel_for(inner, grain, iter_chunks, it);
    return;
  }
  int tiled = 0;
  if (inner >= 2 * ITER_TILE && it->shape.sizes[nd - 2] >= 2 * ITER_TILE)
    for (int k = 0; k < it->nv; k++) tiled |= transposed_view(it, k);
  if (tiled) {
    int64_t row_tiles = (it->shape.sizes[nd - 2] + ITER_TILE - 1) / ITER_TILE;
    int64_t per = ITER_TILE * inner;
    tnk_parallel_for(it->numel / (it->shape.sizes[nd - 2] * inner) * row_tiles,
                     grain > per ? grain / per : 1, iter_tiles, it);
    return;
  }
  int64_t rg = it->row_grain ? it->row_grain : inner >= grain ? 1 : grain / inner;
  tnk_parallel_for(it->numel / inner, rg, iter_rows, it);
}
