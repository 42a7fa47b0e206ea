/* GEMM: C = beta*C + alpha*A@B over a batch, for any strides.
 *
 * fp32 runs the BLIS-style five loops around a register-blocked micro-kernel
 * (AVX2+FMA 6x16, AVX-512 12x32) with A and B packed into cache-sized panels;
 * small problems with row-contiguous B skip the packing. bf16/fp16 are
 * converted to fp32 while packing and accumulate in fp32 (bf16 on AVX512-BF16 dot products, or
 * on AMX tiles where the CPU has them); fp64 packs A and B the same way for
 * the variant's fp64 micro-kernel (AVX2 6x8, AVX-512 12x16); tiny products and
 * every ISA-less case run the portable reference, which is also the oracle
 * the tests compare against. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dtype.h"
#include "tnk.h"

/* The micro-kernels, their tiles and the blocking sizes come from the
 * kernel configuration (config.h, tnk_gemm_config_t: mc rows of A per
 * packed block, kc depth per packed block, nc columns of B per panel). */
typedef tnk_gemm_config_t ukernel_desc_t;

int tnk_gemm_supported(int dtype) {
  return dtype == TNK_F32 || dtype == TNK_F64 || dtype == TNK_BF16 || dtype == TNK_F16;
}

/* aligned_alloc wants a size that is a multiple of the alignment (C11). */
static float *alloc_floats(int64_t n) {
  size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
  return aligned_alloc(64, bytes ? bytes : 64);
}

/* ---- portable reference --------------------------------------------------- */

typedef struct ref_ctx {
  const tnk_gemm_args_t *g;
  int64_t esz;
  atomic_int *failed; /* a buffer could not be allocated */
} ref_ctx_t;

/* Rows [begin, end) of every batch (rows are flattened batch * m). */
static void ref_rows(void *p, int64_t begin, int64_t end) {
  const ref_ctx_t *c = p;
  const tnk_gemm_args_t *g = c->g;
  int wide = g->dtype == TNK_F64;
  double *acc = malloc(sizeof(double) * (size_t)(g->n ? g->n : 1));
  if (!acc) {
    atomic_store(c->failed, 1);
    return;
  }
  for (int64_t row = begin; row < end; row++) {
    int64_t bi = row / g->m, i = row % g->m;
    const char *a = (const char *)g->a + (bi * g->sa_b + i * g->sa_r) * c->esz;
    const char *b = (const char *)g->b + bi * g->sb_b * c->esz;
    char *crow = (char *)g->c + (bi * g->sc_b + i * g->sc_r) * c->esz;
    for (int64_t j = 0; j < g->n; j++) acc[j] = 0.0;
    for (int64_t k = 0; k < g->k; k++) {
      double av = tnk_ldf(a + k * g->sa_c * c->esz, g->dtype, 0);
      const char *brow = b + k * g->sb_r * c->esz;
      if (wide) {
        for (int64_t j = 0; j < g->n; j++)
          acc[j] += av * tnk_ldf(brow + j * g->sb_c * c->esz, g->dtype, 0);
      } else { /* fp32 accumulation, as the optimised kernels do */
        float af = (float)av;
        for (int64_t j = 0; j < g->n; j++)
          acc[j] = (float)acc[j] + af * (float)tnk_ldf(brow + j * g->sb_c * c->esz, g->dtype, 0);
      }
    }
    for (int64_t j = 0; j < g->n; j++) {
      char *cp = crow + j * g->sc_c * c->esz;
      double v = g->alpha * acc[j];
      if (g->beta != 0.0) v += g->beta * tnk_ldf(cp, g->dtype, 0);
      tnk_stf(cp, g->dtype, 0, v);
    }
  }
  free(acc);
}

static void gemm_reference(const tnk_gemm_args_t *g, atomic_int *failed) {
  ref_ctx_t c = {g, (int64_t)tnk_dtype_size(g->dtype), failed};
  int64_t rows = g->batch * g->m;
  int64_t work = g->n * (g->k ? g->k : 1);
  tnk_parallel_for(rows, work >= 65536 ? 1 : 65536 / (work ? work : 1), ref_rows, &c);
}

/* ---- packed fp64 path ------------------------------------------------------- */

/* fp64 on the variant's micro-kernel: B packed per (kc x nc) panel, shared;
 * each task packs its own mc rows of A and adds its tiles into C with
 * alpha and beta (beta only on the first k block; beta 0 never reads C). */
enum { F64_KC = 256, F64_MC = 96, F64_NC = 1536 };

typedef struct f64_ctx {
  const tnk_gemm_args_t *g;
  const tnk_gemm_config_t *uk;
  const double *a, *b;
  double *c;
  double *bpack;
  int64_t pc, kc, jc, nc;
  atomic_int *failed;
} f64_ctx_t;

/* B panels [pc, pc + kc) x [jc, jc + nc): panel q holds kc rows of nr
 * values, zero past n */
static void f64_pack_b(void *p, int64_t begin, int64_t end) {
  const f64_ctx_t *c = p;
  const tnk_gemm_args_t *g = c->g;
  int nr = c->uk->f64_nr;
  for (int64_t q = begin; q < end; q++) {
    double *dst = c->bpack + q * c->kc * nr;
    int64_t j0 = c->jc + q * nr, w = c->jc + c->nc - j0 < nr ? c->jc + c->nc - j0 : nr;
    for (int64_t k = 0; k < c->kc; k++) {
      const double *src = c->b + (c->pc + k) * g->sb_r + j0 * g->sb_c;
      int64_t j = 0;
      for (; j < w; j++) dst[k * nr + j] = src[j * g->sb_c];
      for (; j < nr; j++) dst[k * nr + j] = 0;
    }
  }
}

static void f64_rows(void *p, int64_t begin, int64_t end) {
  const f64_ctx_t *c = p;
  const tnk_gemm_args_t *g = c->g;
  const int mr = c->uk->f64_mr, nr = c->uk->f64_nr;
  double *apack = aligned_alloc(64, sizeof(double) * F64_MC * F64_KC);
  double *t = aligned_alloc(64, sizeof(double) * (size_t)(mr * nr));
  if (!apack || !t) {
    atomic_store(c->failed, 1);
    free(apack);
    free(t);
    return;
  }
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t i0 = blk * F64_MC, mc = g->m - i0 < F64_MC ? g->m - i0 : F64_MC;
    for (int64_t ir = 0; ir < mc; ir += mr) { /* A: kc columns of mr rows, zero past m */
      int64_t h = mc - ir < mr ? mc - ir : mr;
      double *dst = apack + ir * c->kc;
      for (int64_t k = 0; k < c->kc; k++) {
        const double *src = c->a + (i0 + ir) * g->sa_r + (c->pc + k) * g->sa_c;
        int r = 0;
        for (; r < h; r++) dst[k * mr + r] = src[r * g->sa_r];
        for (; r < mr; r++) dst[k * mr + r] = 0;
      }
    }
    for (int64_t jr = 0; jr < c->nc; jr += nr) {
      int64_t w = c->nc - jr < nr ? c->nc - jr : nr;
      const double *bp = c->bpack + (jr / nr) * c->kc * nr;
      for (int64_t ir = 0; ir < mc; ir += mr) {
        int64_t h = mc - ir < mr ? mc - ir : mr;
        c->uk->f64(c->kc, apack + ir * c->kc, bp, t);
        for (int64_t r = 0; r < h; r++) {
          double *crow = c->c + (i0 + ir + r) * g->sc_r + (c->jc + jr) * g->sc_c;
          for (int64_t j = 0; j < w; j++) {
            double v = g->alpha * t[r * nr + j], *cp = crow + j * g->sc_c;
            if (c->pc > 0)
              v += *cp;
            else if (g->beta != 0.0)
              v += g->beta * *cp;
            *cp = v;
          }
        }
      }
    }
  }
  free(apack);
  free(t);
}

static void gemm_f64(const tnk_gemm_args_t *g, const tnk_gemm_config_t *uk, atomic_int *failed) {
  int nr = uk->f64_nr;
  double *bpack = aligned_alloc(64, sizeof(double) * F64_KC * ((F64_NC + nr - 1) / nr * nr));
  if (!bpack) {
    atomic_store(failed, 1);
    return;
  }
  for (int64_t bi = 0; bi < g->batch; bi++) {
    f64_ctx_t c = {.g = g,
                   .uk = uk,
                   .a = (const double *)g->a + bi * g->sa_b,
                   .b = (const double *)g->b + bi * g->sb_b,
                   .c = (double *)g->c + bi * g->sc_b,
                   .bpack = bpack,
                   .failed = failed};
    for (c.jc = 0; c.jc < g->n; c.jc += F64_NC) {
      c.nc = g->n - c.jc < F64_NC ? g->n - c.jc : F64_NC;
      for (c.pc = 0; c.pc < g->k; c.pc += F64_KC) {
        c.kc = g->k - c.pc < F64_KC ? g->k - c.pc : F64_KC;
        tnk_parallel_for((c.nc + nr - 1) / nr, 4, f64_pack_b, &c);
        tnk_parallel_for((g->m + F64_MC - 1) / F64_MC, 1, f64_rows, &c);
      }
    }
  }
  free(bpack);
}

/* ---- packed fp32 path ------------------------------------------------------- */

/* fp32 views of A and B for one batch (converted if the dtype is narrower). */
typedef struct f32_problem {
  int64_t m, n, k;
  const float *a, *b;
  const uint16_t *a16, *b16; /* bf16/fp16 sources (converted while packing) */
  int src_dtype;
  int64_t sa_r, sa_c, sb_r, sb_c;
  char *c;
  int64_t sc_r, sc_c;
  int dtype;
  float alpha, beta;
  atomic_int *failed; /* set when a packing buffer cannot be allocated */
  /* the variant's contiguous fp32 -> bf16 conversion (NULL: scalar) */
  void (*to_bf16)(uint16_t *y, const float *x, int64_t n);
} f32_problem_t;

/* Writes alpha*acc (+ beta*C, or + C when accumulate) into the mr x nr tile. */
static void store_tile(const f32_problem_t *p, const float *acc, int nr, int64_t i0, int64_t j0,
                       int64_t mr_used, int64_t nr_used, int accumulate) {
  int64_t esz = (int64_t)tnk_dtype_size(p->dtype);
  for (int64_t r = 0; r < mr_used; r++) {
    char *crow = p->c + ((i0 + r) * p->sc_r + j0 * p->sc_c) * esz;
    const float *ar = acc + r * nr;
    if (p->dtype == TNK_F32 && p->sc_c == 1) {
      float *cf = (float *)crow;
      if (accumulate)
        for (int64_t j = 0; j < nr_used; j++) cf[j] += p->alpha * ar[j];
      else if (p->beta == 0.0f)
        for (int64_t j = 0; j < nr_used; j++) cf[j] = p->alpha * ar[j];
      else
        for (int64_t j = 0; j < nr_used; j++) cf[j] = p->alpha * ar[j] + p->beta * cf[j];
      continue;
    }
    if (p->sc_c == 1 && !accumulate && p->beta == 0.0f) { /* a narrow C row: C = alpha T */
      uint16_t *h = (uint16_t *)crow;
      if (p->dtype == TNK_BF16 && p->alpha == 1.0f && p->to_bf16)
        p->to_bf16(h, ar, nr_used);
      else if (p->dtype == TNK_BF16)
        for (int64_t j = 0; j < nr_used; j++) h[j] = tnk_f32_to_bf16(p->alpha * ar[j]);
      else
        for (int64_t j = 0; j < nr_used; j++) h[j] = tnk_f32_to_f16(p->alpha * ar[j]);
      continue;
    }
    for (int64_t j = 0; j < nr_used; j++) {
      char *cp = crow + j * p->sc_c * esz;
      float v = p->alpha * ar[j];
      if (accumulate)
        v += (float)tnk_ldf(cp, p->dtype, 0);
      else if (p->beta != 0.0f)
        v += p->beta * (float)tnk_ldf(cp, p->dtype, 0);
      tnk_stf(cp, p->dtype, 0, v);
    }
  }
}

/* Runs the micro-kernel for the tile at (i0, j0): straight into C when it is
 * a full fp32 tile with unit column stride and no scaling (C = T on the
 * first k block when beta is 0, C += T after; beta 1 accumulates from the
 * start), else through a scratch tile and store_tile. */
static void run_tile_with(const f32_problem_t *p, tnk_ukernel_f32_fn fn, int rows, int nr,
                          int64_t kc, const float *a, int64_t a_rs, int64_t a_cs, const float *b,
                          int64_t b_rs, int64_t i0, int64_t j0, int64_t h, int64_t w,
                          int accumulate) {
  float acc[TNK_UKERNEL_MAX_TILE] __attribute__((aligned(64)));
  int direct = p->dtype == TNK_F32 && p->sc_c == 1 && p->alpha == 1.0f && h == rows && w == nr &&
               (accumulate || p->beta == 0.0f || p->beta == 1.0f);
  if (direct) {
    float *c = (float *)p->c + i0 * p->sc_r + j0;
    fn(kc, a, a_rs, a_cs, b, b_rs, c, p->sc_r, accumulate || p->beta == 1.0f);
    return;
  }
  fn(kc, a, a_rs, a_cs, b, b_rs, acc, nr, 0);
  store_tile(p, acc, nr, i0, j0, h, w, accumulate);
}

static void run_tile(const f32_problem_t *p, const ukernel_desc_t *uk, int64_t kc, const float *a,
                     int64_t a_rs, int64_t a_cs, const float *b, int64_t b_rs, int64_t i0,
                     int64_t j0, int64_t h, int64_t w, int accumulate) {
  run_tile_with(p, uk->f32, uk->mr, uk->nr, kc, a, a_rs, a_cs, b, b_rs, i0, j0, h, w, accumulate);
}

typedef struct pack_b_ctx {
  const f32_problem_t *p;
  int nr;
  int64_t pc, kc, jc, nc;
  float *dst;
} pack_b_ctx_t;

/* One packed panel d[k][width] from a source whose lanes (the rows of A, or
 * the columns of B) each hold their k values contiguously:
 * d[k * width + l] = src[l * ld + k] (widened to fp32), lanes w..width zero.
 * Each lane's next cache line of values is read at once; walking k one at a
 * time across the lanes instead reads lines a lane stride apart, which for
 * power-of-two strides fall into the same few L1 sets and miss on nearly
 * every element. Spelled once per source type (fp32, bf16, fp16). */
static inline float f32_same(float v) { return v; }
#define PACK_K_CONTIGUOUS(NAME, ELT, WIDEN)                                                  \
  static void NAME(float *d, const ELT *src, int64_t ld, int64_t w, int width, int64_t kc) { \
    enum { LINE = 64 / (int)sizeof(ELT) };                                                   \
    for (int64_t k0 = 0; k0 < kc; k0 += LINE) {                                              \
      int64_t kb = kc - k0 < LINE ? kc - k0 : LINE;                                          \
      for (int64_t l = 0; l < w; l++) {                                                      \
        const ELT *s = src + l * ld + k0;                                                    \
        for (int64_t kk = 0; kk < kb; kk++) d[(k0 + kk) * width + l] = WIDEN(s[kk]);         \
      }                                                                                      \
      for (int64_t l = w; l < width; l++)                                                    \
        for (int64_t kk = 0; kk < kb; kk++) d[(k0 + kk) * width + l] = 0.0f;                 \
    }                                                                                        \
  }
// clang-format off
PACK_K_CONTIGUOUS(pack_k_contiguous, float, f32_same)
PACK_K_CONTIGUOUS(pack_k_contiguous_bf16, uint16_t, tnk_bf16_to_f32)
PACK_K_CONTIGUOUS(pack_k_contiguous_f16, uint16_t, tnk_f16_to_f32)
// clang-format on

/* The same from a bf16 or fp16 source. */
static void pack_k_contiguous16(const f32_problem_t *p, float *d, const uint16_t *src, int64_t ld,
                                int64_t w, int width, int64_t kc) {
  if (p->src_dtype == TNK_BF16)
    pack_k_contiguous_bf16(d, src, ld, w, width, kc);
  else
    pack_k_contiguous_f16(d, src, ld, w, width, kc);
}

/* One row of a panel: the widths of the variants' panels as constant-size
 * copies the compiler inlines (a libc call per 64-byte row was 7% of a
 * one-thread 1024x512x1344 product on AVX2). */
static inline void copy_panel_row(float *d, const float *s, int64_t w) {
  if (w == 16)
    memcpy(d, s, 16 * sizeof(float));
  else if (w == 32)
    memcpy(d, s, 32 * sizeof(float));
  else
    memcpy(d, s, (size_t)w * sizeof(float));
}

/* The same for a bf16 row, widened (exact); fixed widths unroll and
 * vectorise. */
static inline void widen_panel_row(float *d, const uint16_t *s, int64_t w) {
  if (w == 16)
    for (int j = 0; j < 16; j++) d[j] = tnk_bf16_to_f32(s[j]);
  else if (w == 32)
    for (int j = 0; j < 32; j++) d[j] = tnk_bf16_to_f32(s[j]);
  else
    for (int64_t j = 0; j < w; j++) d[j] = tnk_bf16_to_f32(s[j]);
}

/* Panels [begin, end) of B[pc:pc+kc, jc:jc+nc], nr columns each, zero padded. */
static void pack_b_panels(void *vp, int64_t begin, int64_t end) {
  const pack_b_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  int nr = c->nr;
  int64_t pc = c->pc, kc = c->kc, jc = c->jc, nc = c->nc;
  float *dst = c->dst;
  int64_t full = nc / nr < end ? nc / nr : end; /* the whole panels of the range */
  if ((!p->b16 || p->src_dtype == TNK_BF16) && p->sb_c == 1 && p->sb_r != 1 && begin < full) {
    /* row-major fp32 or bf16 B: row by row across the range's whole panels,
     * so B is read as contiguous rows (one panel at a time read nr
     * elements per row, a new page every row once a row of B is 4 KiB).
     * One thread, AVX2, 256x512x1536 bf16: 58-68 GFLOPS four panels per
     * row, 77-83 across the range; fp32 within noise. */
    for (int64_t k = 0; k < kc; k++) {
      int64_t at = (pc + k) * p->sb_r + jc;
      for (int64_t j = begin; j < full; j++) {
        float *d = dst + j * nr * kc + k * nr;
        if (p->b16)
          widen_panel_row(d, p->b16 + at + j * nr, nr);
        else
          copy_panel_row(d, p->b + at + j * nr, nr);
      }
    }
    begin = full;
  }
  for (int64_t j0 = begin * nr; j0 < nc && j0 < end * nr; j0 += nr) {
    int64_t w = nc - j0 < nr ? nc - j0 : nr;
    if (p->sb_r == 1 && p->sb_c != 1) {
      if (p->b16)
        pack_k_contiguous16(p, dst + j0 * kc, p->b16 + pc + (jc + j0) * p->sb_c, p->sb_c, w, nr,
                            kc);
      else
        pack_k_contiguous(dst + j0 * kc, p->b + pc + (jc + j0) * p->sb_c, p->sb_c, w, nr, kc);
      continue;
    }
    for (int64_t k = 0; k < kc; k++) {
      float *d = dst + j0 * kc + k * nr;
      if (p->b16) {
        const uint16_t *s16 = p->b16 + (pc + k) * p->sb_r + (jc + j0) * p->sb_c;
        if (p->src_dtype == TNK_BF16 && p->sb_c == 1) /* a row of B: widened as a vector */
          widen_panel_row(d, s16, w);
        else
          for (int64_t j = 0; j < w; j++)
            d[j] = p->src_dtype == TNK_BF16 ? tnk_bf16_to_f32(s16[j * p->sb_c])
                                            : tnk_f16_to_f32(s16[j * p->sb_c]);
        for (int64_t j = w; j < nr; j++) d[j] = 0.0f;
        continue;
      }
      const float *src = p->b + (pc + k) * p->sb_r + (jc + j0) * p->sb_c;
      if (p->sb_c == 1) {
        copy_panel_row(d, src, w);
      } else {
        for (int64_t j = 0; j < w; j++) d[j] = src[j * p->sb_c];
      }
      for (int64_t j = w; j < nr; j++) d[j] = 0.0f;
    }
  }
}

static void pack_b(const f32_problem_t *p, int nr, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                   float *dst) {
  pack_b_ctx_t c = {p, nr, pc, kc, jc, nc, dst};
  tnk_parallel_for((nc + nr - 1) / nr, 4, pack_b_panels, &c);
}

/* A[ic:ic+mc, pc:pc+kc] into panels of mr rows: [panel][k][mr]. */
static void pack_a(const f32_problem_t *p, int mr, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                   float *dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += mr) {
    int64_t h = mc - i0 < mr ? mc - i0 : mr;
    float *d = dst + i0 * kc;
    if (p->sa_c == 1 && p->sa_r != 1) {
      if (p->a16)
        pack_k_contiguous16(p, d, p->a16 + (ic + i0) * p->sa_r + pc, p->sa_r, h, mr, kc);
      else
        pack_k_contiguous(d, p->a + (ic + i0) * p->sa_r + pc, p->sa_r, h, mr, kc);
      continue;
    }
    for (int64_t k = 0; k < kc; k++) {
      if (p->a16) {
        const uint16_t *s16 = p->a16 + (ic + i0) * p->sa_r + (pc + k) * p->sa_c;
        for (int64_t r = 0; r < h; r++)
          d[k * mr + r] = p->src_dtype == TNK_BF16 ? tnk_bf16_to_f32(s16[r * p->sa_r])
                                                   : tnk_f16_to_f32(s16[r * p->sa_r]);
      } else {
        const float *src = p->a + (ic + i0) * p->sa_r + (pc + k) * p->sa_c;
        for (int64_t r = 0; r < h; r++) d[k * mr + r] = src[r * p->sa_r];
      }
      for (int64_t r = h; r < mr; r++) d[k * mr + r] = 0.0f;
    }
  }
}

typedef struct macro_ctx {
  const f32_problem_t *p;
  const ukernel_desc_t *uk;
  const float *bpack;
  int64_t pc, kc, jc, nc, mc;
  int accumulate;
} macro_ctx_t;

/* One MC block of rows per index: pack A, run the micro-kernels. */
static void macro_blocks(void *vp, int64_t begin, int64_t end) {
  const macro_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  int mr = c->uk->mr, nr = c->uk->nr;
  float *apack = alloc_floats(c->mc * c->kc + 64);
  if (!apack) {
    atomic_store(p->failed, 1);
    return;
  }
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t ic = blk * c->mc, mc = p->m - ic < c->mc ? p->m - ic : c->mc;
    pack_a(p, mr, ic, mc, c->pc, c->kc, apack);
    for (int64_t j0 = 0; j0 < c->nc; j0 += nr) {
      int64_t w = c->nc - j0 < nr ? c->nc - j0 : nr;
      for (int64_t i0 = 0; i0 < mc; i0 += mr) {
        int64_t h = mc - i0 < mr ? mc - i0 : mr;
        const float *a = apack + i0 * c->kc, *b = c->bpack + j0 * c->kc;
        if (h == mr || !c->uk->f32_rows4) {
          run_tile(p, c->uk, c->kc, a, 1, mr, b, nr, ic + i0, c->jc + j0, h, w, c->accumulate);
          continue;
        }
        /* the last rows: 4-row tiles over the zero-padded panel, not a whole tile */
        for (int64_t r = 0; r < h; r += 4)
          run_tile_with(p, c->uk->f32_rows4, 4, nr, c->kc, a + r, 1, mr, b, nr, ic + i0 + r,
                        c->jc + j0, h - r < 4 ? h - r : 4, w, c->accumulate);
      }
    }
  }
  free(apack);
}

/* Rows per A block: at most mcmax, a multiple of mr, and a block count that
 * is a multiple of the thread count so the static split is even. */
static int64_t block_rows(int64_t m, int mr, int64_t mcmax) {
  int64_t t = tnk_num_threads(), micro = (m + mr - 1) / mr;
  int64_t per_thread = (micro + t - 1) / t;               /* micro-panels */
  int64_t rounds = (per_thread * mr + mcmax - 1) / mcmax; /* blocks per thread */
  int64_t blocks = rounds * t;
  return (micro + blocks - 1) / blocks * mr;
}

static void gemm_packed_shared(const f32_problem_t *p, const ukernel_desc_t *uk);

/* Column split: each thread computes its own columns of C with its own
 * packed B (and its own packed A blocks), sharing nothing it writes. A
 * shared packed B is read by every thread, across last-level caches when
 * the cores do not share one (two vCPUs often do not). Measured (C harness,
 * 2 threads): +2-7% on 2048^3, 512x2048x2048, 1024x512x{512,1344,8000},
 * 1344x1024x512; -5% when A is much taller than B is wide (8000x1024x512),
 * where every thread packing all of A costs more: those keep the row split. */
typedef void (*gemm_run_fn)(const f32_problem_t *p, const ukernel_desc_t *uk);
typedef struct colsplit_ctx {
  const f32_problem_t *p;
  const ukernel_desc_t *uk;
  gemm_run_fn run; /* the shared-B GEMM each part runs on its columns */
  int64_t cols;    /* per part, a multiple of the panel width */
} colsplit_ctx_t;

static void colsplit_parts(void *vp, int64_t begin, int64_t end) {
  const colsplit_ctx_t *c = vp;
  for (int64_t part = begin; part < end; part++) {
    f32_problem_t q = *c->p;
    int64_t j0 = part * c->cols;
    if (j0 >= q.n) break;
    q.n = q.n - j0 < c->cols ? q.n - j0 : c->cols;
    int64_t esz = (int64_t)tnk_dtype_size(q.dtype);
    if (q.b16)
      q.b16 += j0 * q.sb_c;
    else
      q.b += j0 * q.sb_c;
    q.c += j0 * q.sc_c * esz;
    c->run(&q, c->uk); /* nested parallel loops run on this thread */
  }
}

/* Runs `run` per column part when the split pays, else once; 1 if split. */
static int gemm_colsplit(const f32_problem_t *p, const ukernel_desc_t *uk, int nr,
                         gemm_run_fn run) {
  int64_t t = tnk_num_threads();
  if (t < 2 || p->n < t * 256 || p->m < 256 || p->m > 4 * p->n) return 0;
  int64_t cols = (p->n + t - 1) / t;
  cols = (cols + nr - 1) / nr * nr;
  colsplit_ctx_t c = {p, uk, run, cols};
  tnk_parallel_for(t, 1, colsplit_parts, &c);
  return 1;
}

static void gemm_packed(const f32_problem_t *p, const ukernel_desc_t *uk) {
  if (!gemm_colsplit(p, uk, uk->nr, gemm_packed_shared)) gemm_packed_shared(p, uk);
}

static void gemm_packed_shared(const f32_problem_t *p, const ukernel_desc_t *uk) {
  int64_t mcb = block_rows(p->m, uk->mr, uk->mc);
  /* sized for this problem: small GEMMs (attention tiles) must not pay
   * for a full kc x nc panel */
  const int64_t KC = uk->kc, NC = uk->nc;
  int64_t kcmax = p->k < KC ? p->k : KC, ncmax = p->n < NC ? p->n : NC;
  ncmax = (ncmax + uk->nr - 1) / uk->nr * uk->nr;
  float *bpack = alloc_floats(kcmax * ncmax + 64);
  if (!bpack) {
    atomic_store(p->failed, 1);
    return;
  }
  for (int64_t jc = 0; jc < p->n; jc += NC) {
    int64_t nc = p->n - jc < NC ? p->n - jc : NC;
    for (int64_t pc = 0; pc < p->k; pc += KC) {
      int64_t kc = p->k - pc < KC ? p->k - pc : KC;
      pack_b(p, uk->nr, pc, kc, jc, nc, bpack);
      macro_ctx_t c = {p, uk, bpack, pc, kc, jc, nc, mcb, pc > 0};
      tnk_parallel_for((p->m + mcb - 1) / mcb, 1, macro_blocks, &c);
    }
  }
  free(bpack);
}

/* The rows [i0, i0+h) of A as a zero-padded column-major panel of `rows`
 * rows (a, a_rs, a_cs point at it), or A itself when h == rows. Returns the
 * buffer to free (NULL when none), and sets *failed when out of memory. */
static float *pad_rows(const f32_problem_t *p, int64_t i0, int64_t h, int rows, const float **a,
                       int64_t *a_rs, int64_t *a_cs, int *failed) {
  *a = p->a + i0 * p->sa_r;
  *a_rs = p->sa_r;
  *a_cs = p->sa_c;
  *failed = 0;
  if (h == rows) return NULL;
  float *edge = malloc(sizeof(float) * (size_t)(rows * p->k));
  if (!edge) {
    *failed = 1;
    return NULL;
  }
  for (int64_t k = 0; k < p->k; k++)
    for (int64_t r = 0; r < rows; r++)
      edge[k * rows + r] = r < h ? (*a)[r * p->sa_r + k * p->sa_c] : 0.0f;
  *a = edge;
  *a_rs = 1;
  *a_cs = rows;
  return edge;
}

/* Small problems with row-contiguous fp32 B: no packing; the micro-kernel
 * reads B rows and strided A directly. Column edges go through a padded
 * copy of the last B columns. */
static void gemm_small(const f32_problem_t *p, const ukernel_desc_t *uk) {
  int mr = uk->mr, nr = uk->nr;
  int64_t nfull = p->n / nr * nr;
  /* rows past the last full tile: 4-row tiles where the variant has them
   * (padding 4 rows to a 12-row tile costs a whole tile) */
  int64_t mfull = uk->f32_rows4 ? p->m / mr * mr : p->m;
  for (int64_t i0 = 0; i0 < p->m;) {
    int full = i0 < mfull;
    int tile = full ? mr : 4;
    int64_t end = full ? mfull : p->m;
    int64_t h = end - i0 < tile ? end - i0 : tile;
    const float *a;
    int64_t a_rs, a_cs;
    int failed;
    float *edge = pad_rows(p, i0, h, tile, &a, &a_rs, &a_cs, &failed);
    if (failed) {
      atomic_store(p->failed, 1);
      return;
    }
    tnk_ukernel_f32_fn fn = full ? uk->f32 : uk->f32_rows4;
    for (int64_t j0 = 0; j0 < nfull; j0 += nr)
      run_tile_with(p, fn, tile, nr, p->k, a, a_rs, a_cs, p->b + j0, p->sb_r, i0, j0, h, nr, 0);
    free(edge);
    i0 += h;
  }
  if (nfull < p->n) { /* remaining columns: packed path on that slice */
    f32_problem_t q = *p;
    q.n = p->n - nfull;
    q.b = p->b + nfull;
    q.c = p->c + nfull * p->sc_c * (int64_t)tnk_dtype_size(p->dtype);
    gemm_packed(&q, uk);
  }
}

/* ---- bf16 with AVX512-BF16 dot products ------------------------------------
 * A and B are packed as pairs of consecutive-k bf16 values in 32-bit words
 * (an odd k pads the last pair with 0); vdpbf16ps multiplies two pairs per
 * lane and accumulates in fp32, twice the fp32 FMA rate. Tiles go through
 * store_tile (alpha, beta, accumulation over k blocks, the bf16 rounding). */

static inline uint32_t bf16_pair(const uint16_t *s, int64_t step, int has_second) {
  return (uint32_t)s[0] | (has_second ? (uint32_t)s[step] << 16 : 0u);
}

typedef struct pack_b16_ctx {
  const f32_problem_t *p;
  int64_t pc, kc, jc, nc;
  uint32_t *dst;
  int64_t kps; /* pair rows per panel, >= (kc + 1) / 2; the rows past it are zero */
} pack_b16_ctx_t;

static void pack_b_bf16_panels(void *vp, int64_t begin, int64_t end) {
  const pack_b16_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  int64_t kp = (c->kc + 1) / 2;
  for (int64_t j0 = begin * 32; j0 < c->nc && j0 < end * 32; j0 += 32) {
    int64_t w = c->nc - j0 < 32 ? c->nc - j0 : 32;
    uint32_t *d = c->dst + j0 * c->kps;
    memset(d + kp * 32, 0, (size_t)(c->kps - kp) * 32 * sizeof *d);
    if (p->sb_r == 1) { /* columns of B hold their k-pairs as consecutive 32-bit words */
      int64_t full = c->kc / 2;
      for (int64_t j = 0; j < w; j++) {
        const uint16_t *src = p->b16 + c->pc + (c->jc + j0 + j) * p->sb_c;
        for (int64_t q = 0; q < full; q++) {
          uint32_t v;
          memcpy(&v, src + 2 * q, sizeof v);
          d[q * 32 + j] = v;
        }
        if (c->kc & 1) d[full * 32 + j] = src[2 * full];
      }
      for (int64_t q = 0; q < kp; q++)
        for (int64_t j = w; j < 32; j++) d[q * 32 + j] = 0;
      continue;
    }
    for (int64_t q = 0; q < kp; q++) {
      int64_t k = c->pc + 2 * q;
      int second = 2 * q + 1 < c->kc;
      const uint16_t *src = p->b16 + k * p->sb_r + (c->jc + j0) * p->sb_c;
      uint32_t *dq = d + q * 32;
      if (p->sb_c == 1 && second) { /* rows k and k+1 side by side: the compiler vectorises */
        const uint16_t *r1 = src + p->sb_r;
        for (int64_t j = 0; j < w; j++) dq[j] = (uint32_t)src[j] | (uint32_t)r1[j] << 16;
      } else {
        for (int64_t j = 0; j < w; j++) dq[j] = bf16_pair(src + j * p->sb_c, p->sb_r, second);
      }
      for (int64_t j = w; j < 32; j++) dq[j] = 0;
    }
  }
}

static void pack_a_bf16(const f32_problem_t *p, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                        uint32_t *dst) {
  int64_t kp = (kc + 1) / 2;
  for (int64_t i0 = 0; i0 < mc; i0 += 12) {
    int64_t h = mc - i0 < 12 ? mc - i0 : 12;
    uint32_t *d = dst + i0 * kp;
    if (p->sa_c == 1 && h == 12) {
      /* rows hold their k-pairs as consecutive 32-bit words: each packed
       * group of 12 words is read from the 12 rows and written in order
       * (row by row, the stores went 48 bytes apart: 2.5 cycles a word) */
      const uint16_t *rows[12];
      for (int r = 0; r < 12; r++) rows[r] = p->a16 + (ic + i0 + r) * p->sa_r + pc;
      int64_t full = kc / 2;
      for (int64_t q = 0; q < full; q++, d += 12)
        for (int r = 0; r < 12; r++) memcpy(d + r, rows[r] + 2 * q, 4);
      if (kc & 1)
        for (int r = 0; r < 12; r++) d[r] = rows[r][2 * full];
      continue;
    }
    if (p->sa_c == 1) { /* the last rows of the block */
      int64_t full = kc / 2;
      for (int64_t r = 0; r < h; r++) {
        const uint16_t *src = p->a16 + (ic + i0 + r) * p->sa_r + pc;
        for (int64_t q = 0; q < full; q++) {
          uint32_t w;
          memcpy(&w, src + 2 * q, sizeof w);
          d[q * 12 + r] = w;
        }
        if (kc & 1) d[full * 12 + r] = src[2 * full];
      }
      for (int64_t r = h; r < 12; r++)
        for (int64_t q = 0; q < kp; q++) d[q * 12 + r] = 0;
      continue;
    }
    for (int64_t q = 0; q < kp; q++) {
      int second = 2 * q + 1 < kc;
      const uint16_t *src = p->a16 + (ic + i0) * p->sa_r + (pc + 2 * q) * p->sa_c;
      uint32_t *dq = d + q * 12;
      if (p->sa_r == 1 && second && h == 12) { /* columns k and k+1 side by side */
        const uint16_t *c1 = src + p->sa_c;
        for (int64_t r = 0; r < 12; r++) dq[r] = (uint32_t)src[r] | (uint32_t)c1[r] << 16;
        continue;
      }
      for (int64_t r = 0; r < h; r++) dq[r] = bf16_pair(src + r * p->sa_r, p->sa_c, second);
      for (int64_t r = h; r < 12; r++) dq[r] = 0;
    }
  }
}

typedef struct macro16_ctx {
  const f32_problem_t *p;
  const ukernel_desc_t *uk;
  const uint32_t *bpack;
  int64_t pc, kc, kps, jc, nc, mc; /* kps: pair rows per packed B panel */
} macro16_ctx_t;

static void macro_blocks_bf16(void *vp, int64_t begin, int64_t end) {
  const macro16_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  int64_t kp = (c->kc + 1) / 2;
  uint32_t *apack = aligned_alloc(64, ((size_t)(c->mc * kp) * 4 + 63) / 64 * 64 + 64);
  if (!apack) {
    atomic_store(p->failed, 1);
    return;
  }
  float acc[12 * 32] __attribute__((aligned(64)));
  int direct = p->dtype == TNK_BF16 && p->sc_c == 1 && p->alpha == 1.0f && p->beta == 0.0f &&
               c->pc == 0 && c->kc == p->k;
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t ic = blk * c->mc, mc = p->m - ic < c->mc ? p->m - ic : c->mc;
    pack_a_bf16(p, ic, mc, c->pc, c->kc, apack);
    for (int64_t j0 = 0; j0 < c->nc; j0 += 32) {
      int64_t w = c->nc - j0 < 32 ? c->nc - j0 : 32;
      for (int64_t i0 = 0; i0 < mc; i0 += 12) {
        int64_t h = mc - i0 < 12 ? mc - i0 : 12;
        if (direct) { /* full tile, C = A B in bf16: rounded straight into C */
          uint16_t *o = (uint16_t *)p->c + (ic + i0) * p->sc_r + c->jc + j0;
          if (h == 12 && w == 32) {
            c->uk->bf16(kp, apack + i0 * kp, c->bpack + j0 * kp, o, p->sc_r, 2);
            continue;
          }
        }
        c->uk->bf16(kp, apack + i0 * kp, c->bpack + j0 * kp, acc, 32, 0);
        store_tile(p, acc, 32, ic + i0, c->jc + j0, h, w, c->pc > 0);
      }
    }
  }
  free(apack);
}

/* A bf16/fp16 C is rounded once, as CPU rounds it: when the depth spans
 * more than one packed block of `kc`, the blocks accumulate in an fp32 copy
 * of the product (a narrow C would round after every block: measured, 17% of
 * a 24x48 product with k 2048 one ulp off CPU's), then C = alpha T + beta C
 * once. Shallower products run `run` on C directly. */
typedef struct round_rows_ctx {
  const f32_problem_t *p;
  const float *t; /* the fp32 product, m x n, row-major */
} round_rows_ctx_t;

static void round_rows(void *vp, int64_t begin, int64_t end) {
  const round_rows_ctx_t *c = vp;
  for (int64_t i = begin; i < end; i++)
    store_tile(c->p, c->t + i * c->p->n, (int)c->p->n, i, 0, 1, c->p->n, 0);
}

static void gemm_round_once(const f32_problem_t *p, const ukernel_desc_t *uk, int64_t kc,
                            gemm_run_fn run) {
  if (p->dtype == TNK_F32 || p->k <= kc) {
    run(p, uk);
    return;
  }
  float *t = alloc_floats(p->m * p->n);
  if (!t) {
    atomic_store(p->failed, 1);
    return;
  }
  f32_problem_t q = *p;
  q.c = (char *)t;
  q.sc_r = p->n;
  q.sc_c = 1;
  q.dtype = TNK_F32;
  q.alpha = 1.0f;
  q.beta = 0.0f;
  run(&q, uk);
  /* in parallel (serial, this was 4.5% of a one-thread 2048^3 bf16
   * product on AVX2) */
  round_rows_ctx_t rc = {p, t};
  tnk_parallel_for(p->m, 16, round_rows, &rc);
  free(t);
}

static void gemm_packed_bf16_shared(const f32_problem_t *p, const ukernel_desc_t *uk);

static void gemm_packed_bf16_blocks(const f32_problem_t *p, const ukernel_desc_t *uk) {
  if (!gemm_colsplit(p, uk, 32, gemm_packed_bf16_shared)) gemm_packed_bf16_shared(p, uk);
}

/* The loops around a bf16 kernel's blocks: per panel of nc columns and
 * depth block of kc, B packed once (in parallel, shared), then blocks of A
 * rows (a multiple of mr) on the threads, each running `macro`. pad16: the
 * packed panels' pair rows padded to a multiple of 16 (AMX's tile depth). */
static void bf16_blocks(const f32_problem_t *p, const ukernel_desc_t *uk, int64_t KC, int mr,
                        int pad16, tnk_range_fn macro) {
  const int64_t NC = uk->nc;
  int64_t mcb = block_rows(p->m, mr, uk->mc);
  int64_t kcmax = p->k < KC ? p->k : KC, ncmax = p->n < NC ? p->n : NC;
  ncmax = (ncmax + 31) / 32 * 32;
  int64_t kpsmax = pad16 ? ((kcmax + 1) / 2 + 15) / 16 * 16 : (kcmax + 1) / 2;
  uint32_t *bpack = aligned_alloc(64, ((size_t)(kpsmax * ncmax) * 4 + 63) / 64 * 64 + 64);
  if (!bpack) {
    atomic_store(p->failed, 1);
    return;
  }
  for (int64_t jc = 0; jc < p->n; jc += NC) {
    int64_t nc = p->n - jc < NC ? p->n - jc : NC;
    for (int64_t pc = 0; pc < p->k; pc += KC) {
      int64_t kc = p->k - pc < KC ? p->k - pc : KC;
      int64_t kps = pad16 ? ((kc + 1) / 2 + 15) / 16 * 16 : (kc + 1) / 2;
      pack_b16_ctx_t b = {p, pc, kc, jc, nc, bpack, kps};
      tnk_parallel_for((nc + 31) / 32, 4, pack_b_bf16_panels, &b);
      macro16_ctx_t c = {p, uk, bpack, pc, kc, kps, jc, nc, mcb};
      tnk_parallel_for((p->m + mcb - 1) / mcb, 1, macro, &c);
    }
  }
  free(bpack);
}

static void gemm_packed_bf16_shared(const f32_problem_t *p, const ukernel_desc_t *uk) {
  bf16_blocks(p, uk, uk->bf16_kc, 12, 0, macro_blocks_bf16);
}

/* ---- bf16 on AMX tiles ------------------------------------------------------
 * 32x32 blocks of C on the configuration's AMX kernel (x86/amx/gemm.c). B is
 * packed as for the dot-product kernel (panels of 32 column pairs, which is
 * AMX's pair-interleaved B layout), its depth padded with zero pairs to a
 * multiple of 16 (a tile's 32 k); A row by row, a row's k-pairs contiguous,
 * rows padded to a multiple of 32 and depth as B's. Zero padding keeps edge
 * blocks on full tiles; store_tile writes only the valid part (alpha, beta,
 * accumulation over depth blocks, bf16 rounding). */

static void pack_a_amx(const f32_problem_t *p, int64_t ic, int64_t mc, int64_t rows, int64_t pc,
                       int64_t kc, int64_t kps, uint32_t *dst) {
  int64_t kp = (kc + 1) / 2, full = kc / 2;
  for (int64_t r = 0; r < rows; r++) {
    uint32_t *d = dst + r * kps;
    int64_t done = 0;
    if (r < mc) {
      const uint16_t *src = p->a16 + (ic + r) * p->sa_r + pc * p->sa_c;
      if (p->sa_c == 1) { /* the row's k-pairs are consecutive 32-bit words already */
        memcpy(d, src, (size_t)full * sizeof *d);
        if (kc & 1) d[full] = src[2 * full];
      } else {
        for (int64_t q = 0; q < kp; q++)
          d[q] = bf16_pair(src + 2 * q * p->sa_c, p->sa_c, 2 * q + 1 < kc);
      }
      done = kp;
    }
    memset(d + done, 0, (size_t)(kps - done) * sizeof *d);
  }
}

static void macro_blocks_amx(void *vp, int64_t begin, int64_t end) {
  const macro16_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  int64_t rows = (c->mc + 31) / 32 * 32;
  uint32_t *apack = aligned_alloc(64, (size_t)(rows * c->kps) * sizeof(uint32_t));
  if (!apack) {
    atomic_store(p->failed, 1);
    return;
  }
  float acc[32 * 32] __attribute__((aligned(64)));
  /* full blocks of an fp32 C without scaling go straight into C: C = T on
   * the first depth block when beta is 0, C += T after (beta 1 from the start) */
  int direct = p->dtype == TNK_F32 && p->sc_c == 1 && p->alpha == 1.0f &&
               (c->pc > 0 || p->beta == 0.0f || p->beta == 1.0f);
  int accumulate = c->pc > 0 || p->beta == 1.0f;
  c->uk->amx_begin();
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t ic = blk * c->mc, mc = p->m - ic < c->mc ? p->m - ic : c->mc;
    pack_a_amx(p, ic, mc, (mc + 31) / 32 * 32, c->pc, c->kc, c->kps, apack);
    for (int64_t j0 = 0; j0 < c->nc; j0 += 32) {
      int64_t w = c->nc - j0 < 32 ? c->nc - j0 : 32;
      for (int64_t i0 = 0; i0 < mc; i0 += 32) {
        int64_t h = mc - i0 < 32 ? mc - i0 : 32;
        const uint32_t *a = apack + i0 * c->kps, *b = c->bpack + j0 * c->kps;
        if (direct && h == 32 && w == 32) {
          float *o = (float *)p->c + (ic + i0) * p->sc_r + c->jc + j0;
          c->uk->amx_bf16(c->kps, a, c->kps, b, o, p->sc_r, accumulate);
          continue;
        }
        c->uk->amx_bf16(c->kps, a, c->kps, b, acc, 32, 0);
        store_tile(p, acc, 32, ic + i0, c->jc + j0, h, w, c->pc > 0);
      }
    }
  }
  c->uk->amx_end();
  free(apack);
}

static void gemm_amx_shared(const f32_problem_t *p, const ukernel_desc_t *uk) {
  bf16_blocks(p, uk, uk->amx_kc, 32, 1, macro_blocks_amx);
}

static void gemm_amx(const f32_problem_t *p, const ukernel_desc_t *uk) {
  if (!gemm_colsplit(p, uk, 32, gemm_amx_shared)) gemm_amx_shared(p, uk);
}

/* ---- skinny products (decoding): m <= 4, B with contiguous columns ---------- */

typedef struct gemv_ctx {
  const f32_problem_t *p;
  tnk_dot_rows_fn dot_rows;             /* fp32 */
  tnk_dot_rows_bf16_fn dot_rows_bf16;   /* bf16 (p->a16, p->b16) */
  tnk_dot_rows4_fn dot_rows4;           /* fp32, four rows at once (small products) */
  tnk_dot_rows4_bf16_fn dot_rows4_bf16; /* bf16, four rows at once */
} gemv_ctx_t;

/* Columns [begin, end) of C for every row of A: dot products of A rows with
 * B columns (contiguous: B is a transposed weight, x @ W^T). */
static void gemv_cols(void *vp, int64_t begin, int64_t end) {
  const gemv_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  float tmp[256];
  for (int64_t i = 0; i < p->m; i++) {
    for (int64_t j0 = begin; j0 < end; j0 += 256) {
      int64_t w = end - j0 < 256 ? end - j0 : 256;
      if (p->dtype == TNK_BF16)
        c->dot_rows_bf16(p->k, p->a16 + i * p->sa_r, p->b16 + j0 * p->sb_c, p->sb_c, w, tmp);
      else
        c->dot_rows(p->k, p->a + i * p->sa_r, p->b + j0 * p->sb_c, p->sb_c, w, tmp);
      store_tile(p, tmp, (int)w, i, j0, 1, w, 0);
    }
  }
}

/* fp32, and bf16 (whose blocked path would pack all of B, the weight, for
 * one row: 2.7x fp32's time in a bf16 decode step, against half the bytes) */
static int gemv_applies(const f32_problem_t *p, const ukernel_desc_t *uk) {
  return p->m <= 4 && p->sa_c == 1 && p->sb_r == 1 &&
         ((p->dtype == TNK_F32 && uk->dot_rows) || (p->dtype == TNK_BF16 && uk->dot_rows_bf16));
}

static void gemm_gemv(const f32_problem_t *p, const ukernel_desc_t *uk) {
  gemv_ctx_t c = {p, uk->dot_rows, uk->dot_rows_bf16, NULL, NULL};
  int64_t grain = 32768 / (p->k > 0 ? p->k : 1);
  tnk_parallel_for(p->n, grain > 16 ? grain : 16, gemv_cols, &c);
}

/* ---- small products: 4 to SMALL_M rows, B with contiguous columns (fp32, bf16) */

/* x @ W^T for a few rows (small-batch inference, recurrent steps): the
 * blocked path packs all of B, the weight, for a handful of rows; here
 * each block of SMALL_NB weight rows is read in place, by four rows of A at
 * a time (dot_rows4), while it stays in L2. Measured on the development
 * host (x [m, 256] @ W^T [256, 1024], fp32, 2 threads): the blocked path
 * took 111 us at m = 5 and 245 us at m = 32. */
#define SMALL_M 64
#define SMALL_NB 64

static void small_cols(void *vp, int64_t begin, int64_t end) {
  const gemv_ctx_t *c = vp;
  const f32_problem_t *p = c->p;
  float tmp[4 * SMALL_NB];
  for (int64_t j0 = begin; j0 < end; j0 += SMALL_NB) {
    int64_t w = end - j0 < SMALL_NB ? end - j0 : SMALL_NB, i = 0;
    if (p->dtype == TNK_BF16) {
      const uint16_t *wb = p->b16 + j0 * p->sb_c;
      for (; i + 4 <= p->m; i += 4) {
        c->dot_rows4_bf16(p->k, p->a16 + i * p->sa_r, p->sa_r, wb, p->sb_c, w, tmp, SMALL_NB);
        store_tile(p, tmp, SMALL_NB, i, j0, 4, w, 0);
      }
      for (; i < p->m; i++) {
        c->dot_rows_bf16(p->k, p->a16 + i * p->sa_r, wb, p->sb_c, w, tmp);
        store_tile(p, tmp, (int)w, i, j0, 1, w, 0);
      }
      continue;
    }
    const float *wb = p->b + j0 * p->sb_c;
    for (; i + 4 <= p->m; i += 4) {
      c->dot_rows4(p->k, p->a + i * p->sa_r, p->sa_r, wb, p->sb_c, w, tmp, SMALL_NB);
      store_tile(p, tmp, SMALL_NB, i, j0, 4, w, 0);
    }
    for (; i < p->m; i++) {
      c->dot_rows(p->k, p->a + i * p->sa_r, wb, p->sb_c, w, tmp);
      store_tile(p, tmp, (int)w, i, j0, 1, w, 0);
    }
  }
}

static int small_applies(const f32_problem_t *p, const ukernel_desc_t *uk) {
  if (p->m < 4 || p->m > SMALL_M || p->sa_c != 1 || p->sb_r != 1) return 0;
  if (p->dtype == TNK_F32) return uk->dot_rows4 && uk->dot_rows;
  return p->dtype == TNK_BF16 && uk->dot_rows4_bf16 && uk->dot_rows_bf16;
}

static void gemm_small_m(const f32_problem_t *p, const ukernel_desc_t *uk) {
  gemv_ctx_t c = {p, uk->dot_rows, uk->dot_rows_bf16, uk->dot_rows4, uk->dot_rows4_bf16};
  int64_t grain = 65536 / (p->k * p->m > 0 ? p->k * p->m : 1);
  tnk_parallel_for(p->n, grain > SMALL_NB ? grain : SMALL_NB, small_cols, &c);
}

/* A buffer could not be allocated: C is incomplete, and the caller hears it. */
static int report(const tnk_gemm_args_t *g, atomic_int *failed) {
  if (!atomic_load(failed)) return 0;
  if (g->fault.fn)
    g->fault.fn(g->fault.ctx, TNRT_FAULT_MESSAGE,
                "out of host memory for the GEMM's buffers: the product was not computed", 0, 0,
                g->fault.origin);
  return -1;
}

int tnk_gemm_with(const tnk_config_t *cfg, const tnk_gemm_args_t *g) {
  if (!tnk_gemm_supported(g->dtype) || g->m <= 0 || g->n <= 0 || g->batch <= 0) return 0;
  atomic_int failed = 0;
  const ukernel_desc_t *uk = &cfg->gemm;
  if (g->dtype == TNK_F64 && uk->f64 && g->k > 0 && (int64_t)g->m * g->n * g->k >= 4096) {
    gemm_f64(g, uk, &failed);
    return report(g, &failed);
  }
  if (g->dtype == TNK_F64 || !uk->f32 || g->k == 0) {
    gemm_reference(g, &failed);
    return report(g, &failed);
  }
  int64_t esz = (int64_t)tnk_dtype_size(g->dtype);
  for (int64_t bi = 0; bi < g->batch; bi++) {
    f32_problem_t p = {.m = g->m,
                       .n = g->n,
                       .k = g->k,
                       .c = (char *)g->c + bi * g->sc_b * esz,
                       .sc_r = g->sc_r,
                       .sc_c = g->sc_c,
                       .dtype = g->dtype,
                       .alpha = (float)g->alpha,
                       .beta = (float)g->beta,
                       .failed = &failed,
                       .to_bf16 = cfg->loops ? cfg->loops->f32_to_bf16 : NULL};
    p.sa_r = g->sa_r;
    p.sa_c = g->sa_c;
    p.sb_r = g->sb_r;
    p.sb_c = g->sb_c;
    p.src_dtype = g->dtype;
    if (g->dtype == TNK_F32) {
      p.a = (const float *)g->a + bi * g->sa_b;
      p.b = (const float *)g->b + bi * g->sb_b;
    } else { /* bf16/fp16: bf16 dot products, or converted to fp32 while packing */
      p.a16 = (const uint16_t *)g->a + bi * g->sa_b;
      p.b16 = (const uint16_t *)g->b + bi * g->sb_b;
      if (small_applies(&p, uk))
        gemm_small_m(&p, uk);
      else if (gemv_applies(&p, uk))
        gemm_gemv(&p, uk);
      else if (g->dtype == TNK_BF16 && uk->amx_bf16)
        gemm_round_once(&p, uk, uk->amx_kc, gemm_amx);
      else if (g->dtype == TNK_BF16 && uk->bf16)
        gemm_round_once(&p, uk, uk->bf16_kc, gemm_packed_bf16_blocks);
      else
        gemm_round_once(&p, uk, uk->kc, gemm_packed);
      continue;
    }
    if (small_applies(&p, uk))
      gemm_small_m(&p, uk);
    else if (gemv_applies(&p, uk))
      gemm_gemv(&p, uk);
    else if (p.sb_c == 1 && p.m * p.n * p.k <= 128 * 128 * 128 && p.n >= uk->nr)
      gemm_small(&p, uk);
    else
      gemm_packed(&p, uk);
  }
  return report(g, &failed);
}

int tnk_gemm(const tnk_gemm_args_t *g) { return tnk_gemm_with(tnk_config(), g); }
