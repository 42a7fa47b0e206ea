/* The fp32 GEMM micro-kernel and the skinny-product dot rows, written once
 * against x86/simd.h and compiled per width (avx2/gemm.c: 6x16, avx512/
 * gemm.c: 12x32). The including file defines UK_MR (rows of the tile) and
 * UK_ROWS(X) (X applied to each row index); the tile is UK_MR x 2 vectors.
 * Contracts: config.h. */
#ifndef TNK_X86_GEMM_BODY_H
#define TNK_X86_GEMM_BODY_H

#include <string.h>

#include "simd.h"

#define UK_NR (2 * VF_LANES)
#define UK_DECL(r) vf c##r##0 = vf_zero(), c##r##1 = vf_zero();
#define UK_STEP(r)                       \
  {                                      \
    vf av = vf_set1(ak[(r) * a_rs]);     \
    c##r##0 = vf_fmadd(av, b0, c##r##0); \
    c##r##1 = vf_fmadd(av, b1, c##r##1); \
  }
#define UK_STORE(r)                 \
  vf_store(c + (r) * ldc, c##r##0); \
  vf_store(c + (r) * ldc + VF_LANES, c##r##1);
#define UK_ACCUM(r)                                                 \
  vf_store(c + (r) * ldc, vf_add(c##r##0, vf_load(c + (r) * ldc))); \
  vf_store(c + (r) * ldc + VF_LANES, vf_add(c##r##1, vf_load(c + (r) * ldc + VF_LANES)));

/* The tile product for the rows ROWS(X) names (X applied to each row
 * index), UK_NR columns: stores to c, or accumulates into it. PREFETCH and
 * K_LOOP are the full kernel's hooks (empty for the 4-row one). Spelled out
 * so every accumulator stays in a register. */
#define UK_TILE_BODY(ROWS, PREFETCH, K_LOOP)  \
  ROWS(UK_DECL)                               \
  PREFETCH                                    \
  K_LOOP                                      \
  for (int64_t k = 0; k < kc; k++) {          \
    vf b0 = vf_load(b + k * b_rs);            \
    vf b1 = vf_load(b + k * b_rs + VF_LANES); \
    const float *ak = a + k * a_cs;           \
    ROWS(UK_STEP)                             \
  }                                           \
  if (accumulate) {                           \
    ROWS(UK_ACCUM)                            \
  } else {                                    \
    ROWS(UK_STORE)                            \
  }

/* The full kernel's hooks. C's tile is prefetched before the k loop, the
 * first and the last element of each row (both cache lines a row can touch
 * on AVX2, where a row is 64 bytes; both ends of the 128-byte row on
 * AVX-512): C comes from memory once per tile, and the loads after the loop
 * would otherwise stall on every row. Measured on an AVX2 host (C harness,
 * 2048^3, 2 threads, old and new kernels interleaved, medians of 11): 93-96
 * -> 109-115 GFLOPS, line-aligned C or not; unrolling alone did not move it. */
#define UK_PREFETCH_C                                                   \
  for (int r = 0; r < UK_MR; r++) {                                     \
    _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);             \
    _mm_prefetch((const char *)(c + r * ldc + UK_NR - 1), _MM_HINT_T0); \
  }
#define UK_K_LOOP _Pragma("GCC unroll 4")

/* The full UK_MR-row tile, inlined twice: once with the packed-panel
 * strides as constants (A broadcasts become immediate-offset loads folded
 * into the FMAs, no stride registers to spill), once generic for unpacked
 * operands. */
static inline __attribute__((always_inline)) void ukernel(int64_t kc, const float *a, int64_t a_rs,
                                                          int64_t a_cs, const float *b,
                                                          int64_t b_rs, float *c, int64_t ldc,
                                                          int accumulate) {
  UK_TILE_BODY(UK_ROWS, UK_PREFETCH_C, UK_K_LOOP)
}

static void ukernel_f32(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                        int64_t b_rs, float *c, int64_t ldc, int accumulate) {
  if (a_rs == 1 && a_cs == UK_MR && b_rs == UK_NR)
    ukernel(kc, a, 1, UK_MR, b, UK_NR, c, ldc, accumulate);
  else
    ukernel(kc, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate);
}

/* A 4-row tile (generic strides): the rows of a product past the last full
 * UK_MR tile, which the full kernel would compute padded to UK_MR rows. */
#define UK_ROWS4(X) X(0) X(1) X(2) X(3)
static void ukernel4_f32(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                         int64_t b_rs, float *c, int64_t ldc, int accumulate) {
  UK_TILE_BODY(UK_ROWS4, , );
}

/* The fp64 micro-kernel: a UK_MR x UKD_NR tile (two vectors of doubles a
 * row) over packed panels, A as kc columns of UK_MR values and B as kc rows
 * of UKD_NR, written to the dense tile t (row stride UKD_NR); the caller
 * scales and adds it into C (gemm.c). */
#define UKD_NR (2 * VD_LANES)
#define UKD_DECL(r) vd d##r##0 = vd_zero(), d##r##1 = vd_zero();
#define UKD_STEP(r)                      \
  {                                      \
    vd av = vd_set1(ak[r]);              \
    d##r##0 = vd_fmadd(av, b0, d##r##0); \
    d##r##1 = vd_fmadd(av, b1, d##r##1); \
  }
#define UKD_STORE(r)                              \
  memcpy(t + (r) * UKD_NR, &d##r##0, sizeof(vd)); \
  memcpy(t + (r) * UKD_NR + VD_LANES, &d##r##1, sizeof(vd));
static void ukernel_f64(int64_t kc, const double *a, const double *b, double *t) {
  UK_ROWS(UKD_DECL)
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; k++) {
    vd b0 = vd_load(b + k * UKD_NR), b1 = vd_load(b + k * UKD_NR + VD_LANES);
    const double *ak = a + k * UK_MR;
    UK_ROWS(UKD_STEP)
  }
  UK_ROWS(UKD_STORE)
}

static inline float f32_id(float v) { return v; }
static inline float bf16_widen(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Skinny products (decoding, and weight gradients of one output channel):
 * out[j] = x . row j of w, four vector accumulators over 4 vectors of k per
 * step (shorter summation chains: a 1320-term conv3d weight gradient on
 * AVX2 with two came out worse than CPU's), for fp32 and for bf16 (widened to fp32 on load,
 * exact; fp32 sums, as CPU's bf16 GEMM). ELT is the element type, LOAD the
 * vector load, ONE the scalar widening. */
#define DOT_ROWS(NAME, ELT, LOAD, ONE)                                                          \
  static void NAME(int64_t k, const ELT *x, const ELT *w, int64_t ldw, int64_t n, float *out) { \
    for (int64_t j = 0; j < n; j++) {                                                           \
      const ELT *r = w + j * ldw;                                                               \
      vf s0 = vf_zero(), s1 = vf_zero(), s2 = vf_zero(), s3 = vf_zero();                        \
      int64_t i = 0;                                                                            \
      for (; i + 4 * VF_LANES <= k; i += 4 * VF_LANES) {                                        \
        s0 = vf_fmadd(LOAD(x + i), LOAD(r + i), s0);                                            \
        s1 = vf_fmadd(LOAD(x + i + VF_LANES), LOAD(r + i + VF_LANES), s1);                      \
        s2 = vf_fmadd(LOAD(x + i + 2 * VF_LANES), LOAD(r + i + 2 * VF_LANES), s2);              \
        s3 = vf_fmadd(LOAD(x + i + 3 * VF_LANES), LOAD(r + i + 3 * VF_LANES), s3);              \
      }                                                                                         \
      for (; i + VF_LANES <= k; i += VF_LANES) s0 = vf_fmadd(LOAD(x + i), LOAD(r + i), s0);     \
      float acc = vf_hsum(vf_add(vf_add(s0, s1), vf_add(s2, s3)));                              \
      for (; i < k; i++) acc += ONE(x[i]) * ONE(r[i]);                                          \
      out[j] = acc;                                                                             \
    }                                                                                           \
  }
// clang-format off
DOT_ROWS(dot_rows_f32, float, vf_load, f32_id)
DOT_ROWS(dot_rows_bf16, uint16_t, vf_load_bf16, bf16_widen)
// clang-format on

/* Small products of a few rows (small-batch inference, recurrent steps):
 * out[r * ldo + j] = x row r . w row j for r < 4, j < n, for fp32 and bf16
 * (widened to fp32 on load, fp32 sums, as the one-row form). A block of
 * 4 x rows and DOT_NW w rows keeps 4 * DOT_NW vector accumulators, so each
 * loaded w vector serves 4 rows and each x vector DOT_NW columns, where
 * the one-row form loads two vectors per FMA. DOT_NW is 4 with AVX-512's 32
 * registers, 2 with AVX2's 16. */
#if VF_LANES >= 16
#define DOT_NW 4
#else
#define DOT_NW 2
#endif
#define DOT_ROWS4(NAME, ONE_ROW, ELT, LOAD, ONE)                                                   \
  static void NAME(int64_t k, const ELT *x, int64_t ldx, const ELT *w, int64_t ldw, int64_t n,     \
                   float *out, int64_t ldo) {                                                      \
    int64_t j = 0;                                                                                 \
    for (; j + DOT_NW <= n; j += DOT_NW) {                                                         \
      vf s[4][DOT_NW];                                                                             \
      _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                          \
          _Pragma("GCC unroll 4") for (int c = 0; c < DOT_NW; c++) s[r][c] = vf_zero();            \
      int64_t i = 0;                                                                               \
      for (; i + VF_LANES <= k; i += VF_LANES) {                                                   \
        vf wv[DOT_NW];                                                                             \
        _Pragma("GCC unroll 4") for (int c = 0; c < DOT_NW; c++) wv[c] =                           \
            LOAD(w + (j + c) * ldw + i);                                                           \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                      \
          vf xv = LOAD(x + r * ldx + i);                                                           \
          _Pragma("GCC unroll 4") for (int c = 0; c < DOT_NW; c++) s[r][c] =                       \
              vf_fmadd(xv, wv[c], s[r][c]);                                                        \
        }                                                                                          \
      }                                                                                            \
      for (int r = 0; r < 4; r++)                                                                  \
        for (int c = 0; c < DOT_NW; c++) {                                                         \
          float acc = vf_hsum(s[r][c]);                                                            \
          for (int64_t t = i; t < k; t++) acc += ONE(x[r * ldx + t]) * ONE(w[(j + c) * ldw + t]);  \
          out[r * ldo + j + c] = acc;                                                              \
        }                                                                                          \
    }                                                                                              \
    for (; j < n; j++) /* the last columns, one at a time */                                       \
      for (int r = 0; r < 4; r++) ONE_ROW(k, x + r * ldx, w + j * ldw, ldw, 1, out + r * ldo + j); \
  }
// clang-format off
DOT_ROWS4(dot_rows4_f32, dot_rows_f32, float, vf_load, f32_id)
DOT_ROWS4(dot_rows4_bf16, dot_rows_bf16, uint16_t, vf_load_bf16, bf16_widen)
// clang-format on

#endif
