/* Triangular solves by substitution: row i of X is (B_i - sum of A[i][j]
 * X_j over the solved rows j) / A[i][i], each row update a vector operation
 * over the right-hand-side columns. Work splits over (batch, column block):
 * columns are independent. */
#include "tnk.h"

#define KBLK 64

int tnk_trsm_supported(int dtype) { return dtype == TNK_F32 || dtype == TNK_F64; }

#define TRSM_BODY(T)                                                                \
  {                                                                                 \
    const T *A = (const T *)a->a + b * a->sa_b;                                     \
    T *X = (T *)a->x + b * a->sx_b;                                                 \
    for (int64_t s = 0; s < a->n; s++) {                                            \
      int64_t i = a->upper ? a->n - 1 - s : s;                                      \
      T *xi = X + i * a->sx_r;                                                      \
      int64_t j0 = a->upper ? i + 1 : 0, j1 = a->upper ? a->n : i;                  \
      for (int64_t j = j0; j < j1; j++) {                                           \
        T aij = A[i * a->sa_r + j * a->sa_c];                                       \
        if (aij == 0) continue;                                                     \
        const T *xj = X + j * a->sx_r;                                              \
        for (int64_t c = c0; c < c1; c++) xi[c * a->sx_c] -= aij * xj[c * a->sx_c]; \
      }                                                                             \
      if (!a->unit) {                                                               \
        T d = A[i * a->sa_r + i * a->sa_c];                                         \
        for (int64_t c = c0; c < c1; c++) xi[c * a->sx_c] /= d;                     \
      }                                                                             \
    }                                                                               \
  }

static void trsm_range(void *p, int64_t begin, int64_t end) {
  const tnk_trsm_args_t *a = p;
  int64_t blocks = (a->k + KBLK - 1) / KBLK;
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t / blocks, c0 = t % blocks * KBLK;
    int64_t c1 = c0 + KBLK < a->k ? c0 + KBLK : a->k;
    if (a->dtype == TNK_F32) TRSM_BODY(float) else TRSM_BODY(double)
  }
}

void tnk_trsm(const tnk_trsm_args_t *a) {
  if (!tnk_trsm_supported(a->dtype) || a->batch <= 0 || a->n <= 0 || a->k <= 0) return;
  int64_t tasks = a->batch * ((a->k + KBLK - 1) / KBLK);
  int64_t work = a->n * a->n * (a->k < KBLK ? a->k : KBLK);
  tnk_parallel_for(tasks, work >= 65536 ? 1 : 65536 / work + 1, trsm_range, (void *)a);
}
