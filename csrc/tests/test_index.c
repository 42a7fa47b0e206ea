/* Indexing, sorting and scans (index.c, sort.c, reduce.c's scans and
 * cummax/cummin) against direct loops. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The log-sum-exp scan against log(sum exp) in double, with -inf entries,
 * large magnitudes (no overflow), along an inner dim. */
static void test_scan_logsumexp(void) {
  float x[2 * 5] = {-INFINITY, 1.0f, 800.0f, -3.0f, 2.0f, 0.5f, -INFINITY, -700.0f, 4.0f, 1.0f};
  float y[2 * 5];
  /* [2, 5] scanned along dim 0 of a [5, 2] view: outer 1, len 5, inner 2 */
  tnk_scan_args_t a = {.in = x,
                       .out = y,
                       .outer = 1,
                       .len = 5,
                       .inner = 2,
                       .in_dtype = TNK_F32,
                       .out_dtype = TNK_F32,
                       .op = TNK_SCAN_LOGSUMEXP};
  tnk_scan(&a);
  int bad = 0;
  for (int c = 0; c < 2; c++) {
    double mx = -INFINITY;
    for (int k = 0; k < 5; k++) {
      double v = x[k * 2 + c];
      if (v > mx) mx = v;
      double s = 0;
      for (int j = 0; j <= k; j++) s += exp((double)x[j * 2 + c] - mx);
      double want = isinf(mx) ? mx : mx + log(s);
      bad += isinf(want) ? y[k * 2 + c] != (float)want
                         : fabs(y[k * 2 + c] - want) > 1e-5 * (1 + fabs(want));
    }
  }
  CHECK(bad == 0);
  a.in_dtype = a.out_dtype = TNK_I32; /* integers: no log-sum-exp; nothing written */
  y[0] = 42.0f;
  tnk_scan(&a);
  CHECK(y[0] == 42.0f);
}

/* searchsorted against a linear count: lower bound = boundaries < v,
 * upper bound = boundaries <= v, for sorted rows with repeats, through a
 * sorter, in int64 and int32; a sorter entry out of range faults. */
static int searchsorted_faults;
static void count_fault(void *ctx, int kind, const char *what, int64_t value, int64_t bound,
                        uint32_t origin) {
  (void)ctx, (void)kind, (void)what, (void)origin;
  CHECK(value == 7 && bound == 6);
  searchsorted_faults++;
}

static void test_searchsorted(void) {
  enum { ROWS = 3, LEN = 6, PER = 5 };
  int64_t bd[ROWS * LEN], shuffled[ROWS * LEN], sorter[ROWS * LEN], vals[ROWS * PER];
  int64_t out64[ROWS * PER];
  int32_t out32[ROWS * PER];
  for (int r = 0; r < ROWS; r++) {
    for (int j = 0; j < LEN; j++) bd[r * LEN + j] = 2 * j - (j == 3) + r; /* 1 repeat a row */
    for (int j = 0; j < LEN; j++) { /* stored reversed, read through the sorter */
      shuffled[r * LEN + j] = bd[r * LEN + LEN - 1 - j];
      sorter[r * LEN + j] = LEN - 1 - j;
    }
    for (int k = 0; k < PER; k++) vals[r * PER + k] = 3 * k - 2 + r;
  }
  const tnk_searchsorted_args_t base = {.boundaries = bd,
                                        .values = vals,
                                        .out = out64,
                                        .n = ROWS * PER,
                                        .per_row = PER,
                                        .len = LEN,
                                        .bd_rows = ROWS,
                                        .dtype = TNK_I64};
  for (int variant = 0; variant < 4; variant++) {
    int right = variant & 1, use_sorter = variant >> 1;
    tnk_searchsorted_args_t a = base;
    if (use_sorter) {
      a.boundaries = shuffled;
      a.sorter = sorter;
    }
    a.right = right;
    tnk_searchsorted(&a);
    a.out = out32;
    a.out_int32 = 1;
    tnk_searchsorted(&a);
    for (int r = 0; r < ROWS; r++)
      for (int k = 0; k < PER; k++) {
        int64_t v = vals[r * PER + k], want = 0;
        for (int j = 0; j < LEN; j++) want += right ? bd[r * LEN + j] <= v : bd[r * LEN + j] < v;
        CHECK(out64[r * PER + k] == want);
        CHECK(out32[r * PER + k] == want);
      }
  }
  sorter[4] = 7;
  tnk_searchsorted_args_t bad = base;
  bad.boundaries = shuffled;
  bad.sorter = sorter;
  bad.fault.fn = count_fault;
  tnk_searchsorted(&bad);
  CHECK(searchsorted_faults == 1);
}

/* cummax/cummin along the middle dim of [2, 5, 3] against a direct loop:
 * ties take the later index, a NaN takes over until the next NaN. */
static void test_cumext(void) {
  enum { O = 2, L = 5, I = 3 };
  float in[O * L * I], vals[O * L * I];
  int64_t idx[O * L * I];
  for (int k = 0; k < O * L * I; k++) in[k] = (float)((k * 7) % 5) - 2.0f;
  in[1 * I + 1] = NAN;
  for (int is_max = 0; is_max < 2; is_max++) {
    tnk_cumext_args_t a = {.in = in,
                           .values = vals,
                           .indices = idx,
                           .outer = O,
                           .len = L,
                           .inner = I,
                           .dtype = TNK_F32,
                           .is_max = is_max};
    tnk_cumext(&a);
    for (int o = 0; o < O; o++)
      for (int i = 0; i < I; i++) {
        float best = in[o * L * I + i];
        int64_t bi = 0;
        for (int l = 0; l < L; l++) {
          float x = in[(o * L + l) * I + i];
          if (isnan(x) || (!isnan(best) && (is_max ? x >= best : x <= best))) best = x, bi = l;
          int k = (o * L + l) * I + i;
          CHECK(idx[k] == bi);
          CHECK(isnan(best) ? isnan(vals[k]) : vals[k] == best);
        }
      }
  }
}

/* gather with a transposed index and scatter_add into a strided out;
 * index_add with a strided index and alpha: against loops over the
 * logical indices. */
static void test_gather_index_strides(void) {
  enum { M = 5, N = 6 };
  float src[M * N], out[M * N], want[M * N];
  int64_t idxT[N * M]; /* the (M, N) index stored transposed: strides (1, M) */
  for (int i = 0; i < M * N; i++) src[i] = (float)i;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) idxT[j * M + i] = (i * 3 + j * 2) % N;
  for (int mode = 0; mode < 2; mode++) { /* gather, then scatter_add */
    for (int i = 0; i < M * N; i++) out[i] = want[i] = mode ? 1.0f : -1.0f;
    tnk_gather_args_t g = {.shape = {2, 0, {M, N}},
                           .indexed = {mode ? out : src, TNK_F32, 0, {N, 1}},
                           .dense = {mode ? src : out, TNK_F32, 0, {N, 1}},
                           .index = {idxT, TNK_I64, 0, {1, M}},
                           .dim = 1,
                           .mode = mode ? TNK_SCATTER_ADD : TNK_GATHER,
                           .dim_size = N};
    tnk_gather(&g);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        int64_t k = idxT[j * M + i];
        if (mode)
          want[i * N + k] += src[i * N + j];
        else
          want[i * N + j] = src[i * N + k];
      }
    int bad = 0;
    for (int i = 0; i < M * N; i++) bad += out[i] != want[i];
    CHECK(bad == 0);
  }
  /* index_add along dim 0 of (M, N): index[j] at j * 2 (every other of 8) */
  int64_t idx[8] = {4, 9, 0, 9, 4, 9, 2, 9};
  float dst[M * N], dwant[M * N], add[4 * N];
  for (int i = 0; i < M * N; i++) dst[i] = dwant[i] = (float)(i % 7);
  for (int i = 0; i < 4 * N; i++) add[i] = (float)(i % 5) - 2.0f;
  tnk_index_args_t ia = {.indexed = dst,
                         .dense = add,
                         .index = {idx},
                         .size = {M},
                         .index_stride = {2},
                         .outer = 1,
                         .n = 4,
                         .inner = N,
                         .nindex = 1,
                         .dtype = TNK_F32,
                         .index_dtype = TNK_I64,
                         .mode = TNK_INDEX_ADD,
                         .alpha = 2.0};
  tnk_index(&ia);
  for (int j = 0; j < 4; j++)
    for (int c = 0; c < N; c++) dwant[idx[2 * j] * N + c] += 2.0f * add[j * N + c];
  int bad = 0;
  for (int i = 0; i < M * N; i++) bad += dst[i] != dwant[i];
  CHECK(bad == 0);
}

int main(void) {
  RUN(test_scan_logsumexp);
  RUN(test_searchsorted);
  RUN(test_cumext);
  RUN(test_gather_index_strides);
  return REPORT("test_index");
}
