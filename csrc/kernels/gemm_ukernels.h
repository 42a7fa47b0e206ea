/* fp32 GEMM micro-kernels: acc[mr][nr] = sum over k of A[r][k] * B[k][:],
 * with A[r][k] at a[r * a_rs + k * a_cs] and B row k at b + k * b_rs (nr
 * contiguous floats). acc is overwritten (row stride nr). */
#ifndef TNK_GEMM_UKERNELS_H
#define TNK_GEMM_UKERNELS_H

#include <stdint.h>

#define TNK_UKERNEL_MAX_TILE (12 * 32)

typedef void (*tnk_ukernel_fn)(int64_t kc, const float *a, int64_t a_rs,
                               int64_t a_cs, const float *b, int64_t b_rs,
                               float *acc);

void tnk_ukernel_f32_avx2_6x16(int64_t kc, const float *a, int64_t a_rs,
                               int64_t a_cs, const float *b, int64_t b_rs,
                               float *acc);
void tnk_ukernel_f32_avx512_12x32(int64_t kc, const float *a, int64_t a_rs,
                                  int64_t a_cs, const float *b, int64_t b_rs,
                                  float *acc);
#endif
