/* fp32 GEMM micro-kernels: T[mr][nr] = sum over k of A[r][k] * B[k][:],
 * with A[r][k] at a[r * a_rs + k * a_cs] and B row k at b + k * b_rs (nr
 * contiguous floats). The tile goes to c (row r at c + r * ldc, nr
 * contiguous floats): c = T when accumulate is 0, c += T otherwise. Callers
 * pass a scratch tile (ldc = nr) when C is partial, strided or scaled. */
#ifndef TNK_GEMM_UKERNELS_H
#define TNK_GEMM_UKERNELS_H

#include <stdint.h>

#define TNK_UKERNEL_MAX_TILE (12 * 32)

#define TNK_UKERNEL_ARGS                                                     \
  int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,    \
      int64_t b_rs, float *c, int64_t ldc, int accumulate
typedef void (*tnk_ukernel_fn)(TNK_UKERNEL_ARGS);

void tnk_ukernel_f32_avx2_6x16(TNK_UKERNEL_ARGS);
void tnk_ukernel_f32_avx512_12x32(TNK_UKERNEL_ARGS);
/* bf16 micro-kernel (AVX512-BF16): T[12][32] = sum over kp k-pairs of
 * A pair (r) . B pair (column), with a[p * 12 + r] = A[r][2p] | A[r][2p+1]
 * << 16 and b[p * 32 + j] the same for B[2p][j], B[2p+1][j] (bf16 bits);
 * fp32 accumulation. mode 0: fp32 c = T, 1: fp32 c += T, 2: c is bf16 and
 * takes T rounded to nearest even (ldc in elements either way). */
void tnk_ukernel_bf16_avx512_12x32(int64_t kp, const uint32_t *a, const uint32_t *b, void *c,
                                   int64_t ldc, int mode);
/* Dot products for skinny products (GEMV): out[j] = sum_i x[i] * w[j][i]
 * for j < n, w rows ldw floats apart (contiguous along i). */
void tnk_dot_rows_f32_avx2(int64_t k, const float *x, const float *w, int64_t ldw,
                           int64_t n, float *out);
void tnk_dot_rows_f32_avx512(int64_t k, const float *x, const float *w, int64_t ldw,
                             int64_t n, float *out);
#endif
