/* The n-dimensional iterator (iter.h). */
#include "iter.h"

int64_t tnk_iter_init(tnk_iter_t *it, const tnk_shape_t *shape, int nv, const tnk_view_t *views,
                      const int64_t *esz) {
  tnk_view_t v[TNK_ITER_MAX_VIEWS];
  *it = (tnk_iter_t){.shape = *shape, .nv = nv};
  for (int k = 0; k < nv; k++) v[k] = views[k];
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

void tnk_iter_run(tnk_iter_t *it, int64_t grain, tnk_iter_loop_fn loop, void *ctx) {
  if (it->numel <= 0) return;
  it->loop = loop;
  it->ctx = ctx;
  int64_t inner = it->shape.sizes[it->shape.ndim - 1];
  if (it->shape.ndim == 1) {
    tnk_parallel_for(inner, grain, iter_chunks, it);
    return;
  }
  int64_t rg = it->row_grain ? it->row_grain : inner >= grain ? 1 : grain / inner;
  tnk_parallel_for(it->numel / inner, rg, iter_rows, it);
}
