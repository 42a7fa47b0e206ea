/* Low-precision GEMM (tnk.h, tnk_lowp_gemm): int8 x int8 -> int32, and
 * products whose operands are 8-bit (fp8 e4m3fn / e5m2, int8) or any
 * float format, with tensor, per-row/column or per-block scales and a bias.
 *
 * No operand is converted in a separate pass: the float kind widens each
 * operand to fp32 while packing it into the panels the variant's fp32
 * micro-kernel reads (a block scale is applied there too), sums in fp32 and
 * applies the scales and bias when the tile is stored. The int8 kind packs
 * k-groups into 32-bit words for the variant's int8 micro-kernel: four
 * bytes for the VNNI dot product (unsigned times signed: A is stored as a +
 * 128 and 128 times B's column sums are subtracted at the store), two
 * int16 for the widening multiply-add. Weight-only int8 decode (few rows of
 * A against int8 weight rows) streams the weights once through the dot-row
 * kernel, widening in registers. Without a variant the scalar reference
 * runs; it is also the tests' oracle. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dtype.h"
#include "f8_cvt.h"
#include "tnk.h"

float tnk_f8e4m3_to_f32(uint8_t v) {
  int e = (v >> 3) & 15, m = v & 7;
  float r;
  if (e == 15 && m == 7)
    r = NAN;
  else if (e == 0)
    r = ldexpf((float)m, -9); /* subnormal: m / 8 * 2^-6 */
  else
    r = ldexpf((float)(8 + m), e - 10); /* (1 + m / 8) * 2^(e - 7) */
  return (v & 0x80) ? -r : r;
}

float tnk_f8e5m2_to_f32(uint8_t v) { return tnk_f16_to_f32((uint16_t)(v << 8)); }

uint8_t tnk_f32_to_f8e4m3(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  return tnk_f32_bits_to_f8(u, 3, 7, 0x7F, 0x7E);
}

uint8_t tnk_f32_to_f8e5m2(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  return tnk_f32_bits_to_f8(u, 2, 15, 0x7C, 0x7C);
}

/* 256-entry tables of the 8-bit formats' values, filled once */
static float lut_i8[256], lut_e4m3[256], lut_e5m2[256];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;
static void fill_luts(void) {
  for (int v = 0; v < 256; v++) {
    lut_i8[v] = (float)(int8_t)v;
    lut_e4m3[v] = tnk_f8e4m3_to_f32((uint8_t)v);
    lut_e5m2[v] = tnk_f8e5m2_to_f32((uint8_t)v);
  }
}
static const float *lut_of(int fmt) {
  pthread_once(&lut_once, fill_luts);
  switch (fmt) {
    case TNK_I8: return lut_i8;
    case TNK_F8E4M3: return lut_e4m3;
    case TNK_F8E5M2: return lut_e5m2;
    default: return NULL;
  }
}

static int float_fmt(int f) { return f == TNK_F32 || f == TNK_BF16 || f == TNK_F16; }
static int operand_fmt(int f) {
  return float_fmt(f) || f == TNK_I8 || f == TNK_F8E4M3 || f == TNK_F8E5M2;
}

int tnk_lowp_gemm_supported(int a_fmt, int b_fmt, int c_dtype) {
  if (c_dtype == TNK_I32) return a_fmt == TNK_I8 && b_fmt == TNK_I8;
  return operand_fmt(a_fmt) && operand_fmt(b_fmt) && float_fmt(c_dtype);
}

/* Element i of an operand, widened (lut: the 8-bit format's table). */
static inline float ld_op(const void *p, int64_t i, int fmt, const float *lut) {
  if (lut) return lut[((const uint8_t *)p)[i]];
  switch (fmt) {
    case TNK_F32: return ((const float *)p)[i];
    case TNK_BF16: return tnk_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return tnk_f16_to_f32(((const uint16_t *)p)[i]);
  }
}

static int is_block(int mode) { return mode == TNK_SCALE_BLOCK || mode == TNK_SCALE_BLOCK_MX; }

/* Scale element i: e8m0 is a power of two (0xFF NaN), else a float. */
static inline float ld_scale(const void *s, int dt, int64_t i) {
  if (dt == TNK_E8M0) {
    uint8_t e = ((const uint8_t *)s)[i];
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
  }
  return (float)tnk_ldf(s, dt, i);
}

/* The scale of row (or column) i at depth k; 1 without one. */
static inline float scale_at(int mode, const void *s, int dt, int64_t ld, int64_t block, int64_t i,
                             int64_t k) {
  switch (mode) {
    case TNK_SCALE_TENSOR: return ld_scale(s, dt, 0);
    case TNK_SCALE_VECTOR: return ld_scale(s, dt, i * ld);
    case TNK_SCALE_BLOCK: return ld_scale(s, dt, i * ld + k / block);
    case TNK_SCALE_BLOCK_MX: {
      int64_t b = k / block;
      return ld_scale(
          s, dt, ((i / 128) * ld + b / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + b % 4);
    }
    default: return 1.0f;
  }
}

/* The store of C[i][j] from its fp32 sum: scales outside the sum, bias. */
static inline void store_float(const tnk_lowp_gemm_args_t *g, int64_t i, int64_t j, float v) {
  if (g->sa_mode == TNK_SCALE_TENSOR || g->sa_mode == TNK_SCALE_VECTOR)
    v *= scale_at(g->sa_mode, g->sa, g->sa_dtype, g->sa_ld, 1, i, 0);
  if (g->sb_mode == TNK_SCALE_TENSOR || g->sb_mode == TNK_SCALE_VECTOR)
    v *= scale_at(g->sb_mode, g->sb, g->sb_dtype, g->sb_ld, 1, j, 0);
  if (g->bias) v += (float)tnk_ldf(g->bias, g->bias_dtype, j);
  tnk_stf((char *)g->c + (i * g->sc_r + j * g->sc_c) * (int64_t)tnk_dtype_size(g->c_dtype),
          g->c_dtype, 0, v);
}

static void report(const tnk_lowp_gemm_args_t *g, const char *what) {
  if (g->fault.fn) g->fault.fn(g->fault.ctx, g->fault.kind, what, 0, 0, g->fault.origin);
}

/* ---- the reference ----------------------------------------------------- */

static void ref_rows(void *vp, int64_t begin, int64_t end) {
  const tnk_lowp_gemm_args_t *g = vp;
  const float *la = lut_of(g->a_fmt), *lb = lut_of(g->b_fmt);
  for (int64_t i = begin; i < end; i++)
    for (int64_t j = 0; j < g->n; j++) {
      if (g->c_dtype == TNK_I32) {
        int64_t s = 0;
        for (int64_t k = 0; k < g->k; k++)
          s += (int64_t)((const int8_t *)g->a)[i * g->sa_r + k * g->sa_c] *
               ((const int8_t *)g->b)[k * g->sb_r + j * g->sb_c];
        ((int32_t *)g->c)[i * g->sc_r + j * g->sc_c] = (int32_t)(uint32_t)s;
        continue;
      }
      float s = 0.0f;
      for (int64_t k = 0; k < g->k; k++) {
        float a = ld_op(g->a, i * g->sa_r + k * g->sa_c, g->a_fmt, la);
        float b = ld_op(g->b, k * g->sb_r + j * g->sb_c, g->b_fmt, lb);
        if (is_block(g->sa_mode))
          a *= scale_at(g->sa_mode, g->sa, g->sa_dtype, g->sa_ld, g->block, i, k);
        if (is_block(g->sb_mode))
          b *= scale_at(g->sb_mode, g->sb, g->sb_dtype, g->sb_ld, g->block, j, k);
        s += a * b;
      }
      store_float(g, i, j, s);
    }
}

/* ---- the float kind: widened while packing ------------------------------- */

typedef struct fctx {
  const tnk_lowp_gemm_args_t *g;
  const tnk_gemm_config_t *uk;
  const float *la, *lb;
  /* pairs: operands exact in bf16 (bf16, int8, fp8) packed as k-pairs of
   * bf16 for the variant's bf16 dot-product micro-kernel (twice the fp32
   * rate); else fp32 for the fp32 one. Both pack 4-byte units: a float
   * per k, or a word per two k. */
  int pairs, mr, nr, unit;
  const uint16_t *ha, *hb; /* bf16 bits of the 8-bit formats (pairs) */
  int64_t kc, mc;
  int64_t jc, nw;  /* the panel's first column and width */
  int64_t nw_pad;  /* nw rounded up to nr */
  uint32_t *bpack; /* the panel over all k: block pc at bpack + pc / unit * nw_pad */
  int64_t mblocks, jparts, part_w; /* work items: row blocks x column parts */
  atomic_int failed;
} fctx_t;

static void *alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static uint16_t bf16_i8[256], bf16_e4m3[256], bf16_e5m2[256];
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;
static void fill_bf16(void) {
  for (int v = 0; v < 256; v++) {
    bf16_i8[v] = tnk_f32_to_bf16(lut_of(TNK_I8)[v]); /* every value exact in bf16 */
    bf16_e4m3[v] = tnk_f32_to_bf16(lut_of(TNK_F8E4M3)[v]);
    bf16_e5m2[v] = tnk_f32_to_bf16(lut_of(TNK_F8E5M2)[v]);
  }
}
static const uint16_t *bf16_lut_of(int fmt) {
  pthread_once(&bf16_once, fill_bf16);
  switch (fmt) {
    case TNK_I8: return bf16_i8;
    case TNK_F8E4M3: return bf16_e4m3;
    case TNK_F8E5M2: return bf16_e5m2;
    default: return NULL;
  }
}
static int bf16_exact(int fmt) {
  return fmt == TNK_BF16 || fmt == TNK_I8 || fmt == TNK_F8E4M3 || fmt == TNK_F8E5M2;
}

/* bf16 bits of element i (formats exact in bf16) */
static inline uint32_t ld_bits(const void *p, int64_t i, const uint16_t *h) {
  return h ? h[((const uint8_t *)p)[i]] : ((const uint16_t *)p)[i];
}

/* One packed unit of an operand: lane element at x (k advancing by step),
 * with `avail` values of k left; the block scale of the lane applied. */
static inline uint32_t unit_of(const fctx_t *c, const void *src, int fmt, const float *lut,
                               const uint16_t *h, int64_t x, int64_t step, int64_t avail, int smode,
                               const void *sp, int sdt, int64_t sld, int64_t lane, int64_t k) {
  const tnk_lowp_gemm_args_t *g = c->g;
  if (c->pairs) {
    uint32_t lo = ld_bits(src, x, h);
    uint32_t hi = avail > 1 ? ld_bits(src, x + step, h) : 0u;
    return lo | hi << 16;
  }
  float v = ld_op(src, x, fmt, lut);
  if (is_block(smode)) v *= scale_at(smode, sp, sdt, sld, g->block, lane, k);
  uint32_t u;
  memcpy(&u, &v, 4);
  return u;
}

/* kq bf16 k-pairs of one lane whose k values are contiguous (an fp8 /
 * int8 byte row through the table h, or bf16 as it is), words `stride`
 * apart; an odd tail pairs with 0. */
static void pairs_of_lane(uint32_t *d, int64_t stride, const void *src, int64_t x, int64_t kcur,
                          const uint16_t *h) {
  int64_t full = kcur / 2;
  if (h) {
    const uint8_t *s8 = (const uint8_t *)src + x;
    for (int64_t q = 0; q < full; q++)
      d[q * stride] = (uint32_t)h[s8[2 * q]] | (uint32_t)h[s8[2 * q + 1]] << 16;
    if (kcur & 1) d[full * stride] = h[s8[2 * full]];
  } else {
    const uint16_t *s16 = (const uint16_t *)src + x;
    for (int64_t q = 0; q < full; q++) memcpy(&d[q * stride], s16 + 2 * q, 4);
    if (kcur & 1) d[full * stride] = s16[2 * full];
  }
}

/* B's nr-wide panels [begin, end) of the current column panel, all k:
 * unit (q, j) of block pc (q = (k - pc) / unit) at bpack[pc / unit *
 * nw_pad + (j / nr) * kq * nr + q * nr + j % nr], kq the block's units;
 * zero past the panel's columns. */
static void fpack_b(void *vp, int64_t begin, int64_t end) {
  fctx_t *c = vp;
  const tnk_lowp_gemm_args_t *g = c->g;
  int nr = c->nr, u = c->unit;
  for (int64_t p = begin; p < end; p++) {
    int64_t j0 = p * nr;
    for (int64_t pc = 0; pc < g->k; pc += c->kc) {
      int64_t kcur = g->k - pc < c->kc ? g->k - pc : c->kc, kq = (kcur + u - 1) / u;
      uint32_t *d = c->bpack + pc / u * c->nw_pad + j0 * kq;
      if (c->pairs && g->sb_r == 1) { /* columns of B hold their k contiguous */
        for (int64_t jj = 0; jj < nr; jj++) {
          if (j0 + jj < c->nw)
            pairs_of_lane(d + jj, nr, g->b, pc + (c->jc + j0 + jj) * g->sb_c, kcur, c->hb);
          else
            for (int64_t q = 0; q < kq; q++) d[q * nr + jj] = 0u;
        }
        continue;
      }
      for (int64_t q = 0; q < kq; q++)
        for (int64_t jj = 0; jj < nr; jj++) {
          int64_t j = c->jc + j0 + jj, k = pc + q * u;
          d[q * nr + jj] =
              j0 + jj < c->nw
                  ? unit_of(c, g->b, g->b_fmt, c->lb, c->hb, k * g->sb_r + j * g->sb_c, g->sb_r,
                            kcur - q * u, g->sb_mode, g->sb, g->sb_dtype, g->sb_ld, j, k)
                  : 0u;
        }
    }
  }
}

/* A's rows [i0, i0 + h) at depths [pc, pc + kcur) into mr-row panels. */
static void fpack_a(const fctx_t *c, uint32_t *d, int64_t i0, int64_t h, int64_t pc, int64_t kcur) {
  const tnk_lowp_gemm_args_t *g = c->g;
  int mr = c->mr, u = c->unit;
  int64_t kq = (kcur + u - 1) / u;
  for (int64_t r0 = 0; r0 < h; r0 += mr, d += mr * kq)
    for (int64_t r = 0; r < mr; r++) {
      int64_t i = i0 + r0 + r;
      if (c->pairs && g->sa_c == 1 && r0 + r < h) { /* a row of A: k contiguous */
        pairs_of_lane(d + r, mr, g->a, i * g->sa_r + pc, kcur, c->ha);
        continue;
      }
      for (int64_t q = 0; q < kq; q++) {
        int64_t k = pc + q * u;
        d[q * mr + r] = r0 + r < h ? unit_of(c, g->a, g->a_fmt, c->la, c->ha,
                                             i * g->sa_r + k * g->sa_c, g->sa_c, kcur - q * u,
                                             g->sa_mode, g->sa, g->sa_dtype, g->sa_ld, i, k)
                                   : 0u;
      }
    }
}

static void fitems(void *vp, int64_t begin, int64_t end) {
  fctx_t *c = vp;
  const tnk_lowp_gemm_args_t *g = c->g;
  int mr = c->mr, nr = c->nr, u = c->unit;
  int64_t mc_pad = (c->mc + mr - 1) / mr * mr;
  uint32_t *apack = alloc64((size_t)(mc_pad * ((c->kc + u - 1) / u)) * sizeof(uint32_t));
  float *acc = alloc64((size_t)(mc_pad * c->part_w) * sizeof(float));
  if (!apack || !acc) {
    atomic_store(&c->failed, 1);
    free(apack);
    free(acc);
    return;
  }
  for (int64_t it = begin; it < end; it++) {
    int64_t ib = it / c->jparts, jp = it % c->jparts;
    int64_t i0 = ib * c->mc, h = g->m - i0 < c->mc ? g->m - i0 : c->mc;
    int64_t jlo = jp * c->part_w, jhi = jlo + c->part_w < c->nw_pad ? jlo + c->part_w : c->nw_pad;
    if (jlo >= jhi) continue;
    int64_t ld = jhi - jlo, hp = (h + mr - 1) / mr * mr;
    for (int64_t pc = 0; pc < g->k; pc += c->kc) {
      int64_t kcur = g->k - pc < c->kc ? g->k - pc : c->kc, kq = (kcur + u - 1) / u;
      fpack_a(c, apack, i0, h, pc, kcur);
      for (int64_t j = jlo; j < jhi; j += nr) {
        const uint32_t *bp = c->bpack + pc / u * c->nw_pad + j * kq;
        for (int64_t r = 0; r < hp; r += mr) {
          float *t = acc + r * ld + (j - jlo);
          if (c->pairs)
            c->uk->bf16(kq, apack + r * kq, bp, t, ld, pc > 0);
          else
            c->uk->f32(kq, (const float *)(apack + r * kq), 1, mr, (const float *)bp, nr, t, ld,
                       pc > 0);
        }
      }
    }
    for (int64_t r = 0; r < h; r++)
      for (int64_t j = jlo; j < jhi && j < c->nw; j++)
        store_float(g, i0 + r, c->jc + j, acc[r * ld + (j - jlo)]);
  }
  free(apack);
  free(acc);
}

static int float_blocked(const tnk_lowp_gemm_args_t *g, const tnk_gemm_config_t *uk) {
  fctx_t c = {.g = g, .uk = uk, .la = lut_of(g->a_fmt), .lb = lut_of(g->b_fmt)};
  c.pairs = uk->bf16 && bf16_exact(g->a_fmt) && bf16_exact(g->b_fmt) && !is_block(g->sa_mode) &&
            !is_block(g->sb_mode);
  if (c.pairs) {
    c.mr = uk->bf16_mr, c.nr = uk->bf16_nr, c.unit = 2, c.kc = uk->bf16_kc;
    c.ha = bf16_lut_of(g->a_fmt), c.hb = bf16_lut_of(g->b_fmt);
  } else {
    c.mr = uk->mr, c.nr = uk->nr, c.unit = 1, c.kc = uk->kc;
  }
  c.mc = uk->mc / c.mr * c.mr;
  /* a column panel packed over all of k stays within 16 MiB: A is packed
   * again for every panel (4 MiB panels made a 2048 x 4096 x 1024 fp8
   * product pack A three times) */
  int64_t kq_all = (g->k + c.unit - 1) / c.unit + 1;
  int64_t nc = (int64_t)(16 << 20) / (4 * kq_all) / c.nr * c.nr;
  if (nc < c.nr) nc = c.nr;
  if (nc > uk->nc) nc = uk->nc / c.nr * c.nr;
  int64_t npan = g->n < nc ? g->n : nc;
  c.bpack = alloc64((size_t)(((npan + c.nr - 1) / c.nr * c.nr) * kq_all) * sizeof(uint32_t));
  if (!c.bpack) {
    report(g, "packing buffer");
    return -1;
  }
  int threads = tnk_num_threads();
  c.mblocks = (g->m + c.mc - 1) / c.mc;
  for (c.jc = 0; c.jc < g->n; c.jc += nc) {
    c.nw = g->n - c.jc < nc ? g->n - c.jc : nc;
    c.nw_pad = (c.nw + c.nr - 1) / c.nr * c.nr;
    int64_t panels = c.nw_pad / c.nr;
    /* split the columns when the row blocks alone do not fill the pool */
    c.jparts = c.mblocks >= 2 * threads ? 1 : (2 * threads + c.mblocks - 1) / c.mblocks;
    if (c.jparts > panels) c.jparts = panels;
    c.part_w = (panels + c.jparts - 1) / c.jparts * c.nr;
    c.jparts = (c.nw_pad + c.part_w - 1) / c.part_w;
    tnk_parallel_for(panels, 1, fpack_b, &c);
    tnk_parallel_for(c.mblocks * c.jparts, 1, fitems, &c);
    if (atomic_load(&c.failed)) break;
  }
  free(c.bpack);
  if (atomic_load(&c.failed)) {
    report(g, "packing buffer");
    return -1;
  }
  return 0;
}

/* ---- weight-only int8 decode: few rows against int8 weight rows ---------- */

typedef struct dctx {
  const tnk_lowp_gemm_args_t *g;
  const tnk_gemm_config_t *uk;
  const float *x;     /* A widened, m x k */
  const uint16_t *xb; /* or A's bf16 rows, ldxb apart (bf16 dot products) */
  int64_t ldxb;
} dctx_t;

#define DECODE_COLS 64

static void decode_cols(void *vp, int64_t begin, int64_t end) {
  const dctx_t *c = vp;
  const tnk_lowp_gemm_args_t *g = c->g;
  float out[16 * DECODE_COLS];
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t j0 = blk * DECODE_COLS, w = g->n - j0 < DECODE_COLS ? g->n - j0 : DECODE_COLS;
    const int8_t *wr = (const int8_t *)g->b + j0 * g->sb_c;
    if (c->xb)
      c->uk->dot_rows_w8_bf16(g->k, c->xb, c->ldxb, g->m, wr, g->sb_c, w, out, DECODE_COLS);
    else
      c->uk->dot_rows_w8(g->k, c->x, g->k, g->m, wr, g->sb_c, w, out, DECODE_COLS);
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < w; j++) store_float(g, i, j0 + j, out[i * DECODE_COLS + j]);
  }
}

static int decode_applies(const tnk_lowp_gemm_args_t *g, const tnk_gemm_config_t *uk) {
  return uk->dot_rows_w8 && g->b_fmt == TNK_I8 && g->sb_r == 1 && g->m <= 16 &&
         !is_block(g->sa_mode) && !is_block(g->sb_mode);
}

static int float_decode(const tnk_lowp_gemm_args_t *g, const tnk_gemm_config_t *uk) {
  if (g->a_fmt == TNK_BF16 && uk->dot_rows_w8_bf16 && g->sa_c == 1 && g->m > 8) {
    /* bf16 rows as they are, the weight widened to bf16 (exact) for the
     * dot products: past 8 rows the fp32 FMAs, not the weight stream,
     * bound the product (one thread, 4096 x 4096, 16 rows: 3.5 ms with
     * fp32 FMAs, 2.5 ms with bf16 dot products; 8 rows: 1.9 ms either
     * way; 1 row: 0.72 ms with fp32 FMAs, 1.06 ms with dot products) */
    dctx_t c = {g, uk, NULL, g->a, g->sa_r};
    tnk_parallel_for((g->n + DECODE_COLS - 1) / DECODE_COLS, 1, decode_cols, &c);
    return 0;
  }
  float *x = alloc64((size_t)(g->m * g->k) * sizeof(float));
  if (!x) {
    report(g, "activation buffer");
    return -1;
  }
  const float *la = lut_of(g->a_fmt);
  for (int64_t i = 0; i < g->m; i++)
    for (int64_t k = 0; k < g->k; k++)
      x[i * g->k + k] = ld_op(g->a, i * g->sa_r + k * g->sa_c, g->a_fmt, la);
  dctx_t c = {g, uk, x, NULL, 0};
  tnk_parallel_for((g->n + DECODE_COLS - 1) / DECODE_COLS, 1, decode_cols, &c);
  free(x);
  return 0;
}

/* ---- the int8 kind --------------------------------------------------------- */

typedef struct ictx {
  const tnk_lowp_gemm_args_t *g;
  const tnk_gemm_config_t *uk;
  int64_t kc, mc, kq_total; /* kq_total: packed words per column over all of k */
  int64_t jc, nw, nw_pad;
  uint32_t *bpack; /* block pc at bpack + (pc / G) * nw_pad */
  int32_t *colsum; /* the panel's column sums of B (VNNI) */
  int64_t jparts, part_w, mblocks;
  atomic_int failed;
} ictx_t;

/* k values [k, k + G) of one lane as a word; past kend zero (for A under
 * VNNI the offset zero, 128: B's zero there cancels it anyway). */
static inline uint32_t i8_word(const int8_t *s, int64_t step, int64_t avail, int G, int offset) {
  uint32_t w = 0;
  if (step == 1 && avail >= G) { /* consecutive bytes */
    if (G == 4) {
      memcpy(&w, s, 4);
      return offset ? w ^ 0x80808080u : w;
    }
    return (uint32_t)(uint16_t)(int16_t)s[0] | (uint32_t)(uint16_t)(int16_t)s[1] << 16;
  }
  for (int t = 0; t < G; t++) {
    int v = t < avail ? s[t * step] : 0;
    if (G == 4)
      w |= (uint32_t)(uint8_t)(offset ? v + 128 : v) << (8 * t);
    else
      w |= (uint32_t)(uint16_t)(int16_t)v << (16 * t);
  }
  return w;
}

/* the sum of a VNNI word's four signed bytes */
static inline int32_t word_sum(uint32_t w) {
  return (int8_t)w + (int8_t)(w >> 8) + (int8_t)(w >> 16) + (int8_t)(w >> 24);
}

/* B's panels [begin, end): each nr columns wide over all of k, and (VNNI)
 * the columns' sums. The words are made in B's storage order: down a
 * column when its k values are contiguous, across a row otherwise (the
 * rows of kc values of a column-at-a-time walk do not stay in L1). */
static void ipack_b(void *vp, int64_t begin, int64_t end) {
  ictx_t *c = vp;
  const tnk_lowp_gemm_args_t *g = c->g;
  int nr = c->uk->i8_nr, G = c->uk->i8_group;
  const int8_t *b = g->b;
  int by_column = g->sb_r == 1;
  for (int64_t p = begin; p < end; p++) {
    int64_t j0 = p * nr;
    int64_t live = c->nw - j0 < nr ? c->nw - j0 : nr;
    int32_t sums[TNK_UKERNEL_MAX_TILE] = {0};
    for (int64_t pc = 0; pc < g->k; pc += c->kc) {
      int64_t kcur = g->k - pc < c->kc ? g->k - pc : c->kc, kq = (kcur + G - 1) / G;
      uint32_t *d = c->bpack + (pc / G) * c->nw_pad + j0 * kq;
      if (by_column) {
        for (int64_t jj = 0; jj < nr; jj++)
          for (int64_t q = 0; q < kq; q++) {
            int64_t k = pc + q * G, j = c->jc + j0 + jj;
            uint32_t w = jj < live ? i8_word(b + k + j * g->sb_c, 1, kcur - q * G, G, 0) : 0;
            d[q * nr + jj] = w;
            if (G == 4) sums[jj] += word_sum(w);
          }
      } else {
        for (int64_t q = 0; q < kq; q++)
          for (int64_t jj = 0; jj < nr; jj++) {
            int64_t k = pc + q * G, j = c->jc + j0 + jj;
            uint32_t w =
                jj < live ? i8_word(b + k * g->sb_r + j * g->sb_c, g->sb_r, kcur - q * G, G, 0) : 0;
            d[q * nr + jj] = w;
            if (G == 4) sums[jj] += word_sum(w);
          }
      }
    }
    for (int64_t jj = 0; jj < live; jj++) c->colsum[j0 + jj] = sums[jj];
  }
}

static void ipack_a(const ictx_t *c, uint32_t *d, int64_t i0, int64_t h, int64_t pc, int64_t kcur) {
  const tnk_lowp_gemm_args_t *g = c->g;
  int mr = c->uk->i8_mr, G = c->uk->i8_group;
  int64_t kq = (kcur + G - 1) / G;
  const int8_t *a = g->a;
  for (int64_t r0 = 0; r0 < h; r0 += mr, d += mr * kq)
    for (int64_t r = 0; r < mr; r++) {
      int64_t i = i0 + r0 + r;
      for (int64_t q = 0; q < kq; q++)
        d[q * mr + r] = r0 + r < h ? i8_word(a + i * g->sa_r + (pc + q * G) * g->sa_c, g->sa_c,
                                             kcur - q * G, G, G == 4)
                                   : (G == 4 ? 0x80808080u : 0u);
    }
}

static void iitems(void *vp, int64_t begin, int64_t end) {
  ictx_t *c = vp;
  const tnk_lowp_gemm_args_t *g = c->g;
  int mr = c->uk->i8_mr, nr = c->uk->i8_nr, G = c->uk->i8_group;
  int64_t mc_pad = (c->mc + mr - 1) / mr * mr, kqc = (c->kc + G - 1) / G;
  uint32_t *apack = alloc64((size_t)(mc_pad * kqc) * sizeof(uint32_t));
  int32_t *acc = alloc64((size_t)(mc_pad * c->part_w) * sizeof(int32_t));
  if (!apack || !acc) {
    atomic_store(&c->failed, 1);
    free(apack);
    free(acc);
    return;
  }
  for (int64_t it = begin; it < end; it++) {
    int64_t ib = it / c->jparts, jp = it % c->jparts;
    int64_t i0 = ib * c->mc, h = g->m - i0 < c->mc ? g->m - i0 : c->mc;
    int64_t jlo = jp * c->part_w, jhi = jlo + c->part_w < c->nw_pad ? jlo + c->part_w : c->nw_pad;
    if (jlo >= jhi) continue;
    int64_t ld = jhi - jlo, hp = (h + mr - 1) / mr * mr;
    for (int64_t pc = 0; pc < g->k; pc += c->kc) {
      int64_t kcur = g->k - pc < c->kc ? g->k - pc : c->kc, kq = (kcur + G - 1) / G;
      ipack_a(c, apack, i0, h, pc, kcur);
      for (int64_t j = jlo; j < jhi; j += nr) {
        const uint32_t *bp = c->bpack + (pc / G) * c->nw_pad + j * kq;
        for (int64_t r = 0; r < hp; r += mr)
          c->uk->i8(kq, apack + r * kq, bp, acc + r * ld + (j - jlo), ld, pc > 0);
      }
    }
    int32_t *cc = g->c;
    for (int64_t r = 0; r < h; r++)
      for (int64_t j = jlo; j < jhi && j < c->nw; j++) {
        uint32_t v = (uint32_t)acc[r * ld + (j - jlo)];
        if (G == 4) v -= 128u * (uint32_t)c->colsum[j];
        cc[(i0 + r) * g->sc_r + (c->jc + j) * g->sc_c] = (int32_t)v;
      }
  }
  free(apack);
  free(acc);
}

static int int8_blocked(const tnk_lowp_gemm_args_t *g, const tnk_gemm_config_t *uk) {
  ictx_t c = {.g = g, .uk = uk};
  int G = uk->i8_group, nr = uk->i8_nr;
  c.kc = 1024; /* a multiple of both groups */
  c.mc = uk->i8_mr * 12;
  int64_t kq_all = 0;
  for (int64_t pc = 0; pc < g->k; pc += c.kc)
    kq_all += ((g->k - pc < c.kc ? g->k - pc : c.kc) + G - 1) / G;
  c.kq_total = kq_all;
  int64_t nc = (int64_t)(4 << 20) / (4 * (kq_all > 0 ? kq_all : 1)) / nr * nr;
  if (nc < nr) nc = nr;
  if (nc > 2048) nc = 2048;
  int64_t npan = (((g->n < nc ? g->n : nc) + nr - 1) / nr) * nr;
  /* blocks are laid out at (pc / G) * nw_pad words: every block but the
   * last spans kc / G words, so the layout covers kq_all * nw_pad words */
  c.bpack = alloc64((size_t)(npan * kq_all) * sizeof(uint32_t));
  c.colsum = malloc((size_t)npan * sizeof(int32_t));
  if (!c.bpack || !c.colsum) {
    free(c.bpack);
    free(c.colsum);
    report(g, "packing buffer");
    return -1;
  }
  int threads = tnk_num_threads();
  c.mblocks = (g->m + c.mc - 1) / c.mc;
  for (c.jc = 0; c.jc < g->n; c.jc += nc) {
    c.nw = g->n - c.jc < nc ? g->n - c.jc : nc;
    c.nw_pad = (c.nw + nr - 1) / nr * nr;
    int64_t panels = c.nw_pad / nr;
    c.jparts = c.mblocks >= 2 * threads ? 1 : (2 * threads + c.mblocks - 1) / c.mblocks;
    if (c.jparts > panels) c.jparts = panels;
    c.part_w = (panels + c.jparts - 1) / c.jparts * nr;
    c.jparts = (c.nw_pad + c.part_w - 1) / c.part_w;
    tnk_parallel_for(panels, 1, ipack_b, &c);
    tnk_parallel_for(c.mblocks * c.jparts, 1, iitems, &c);
    if (atomic_load(&c.failed)) break;
  }
  free(c.bpack);
  free(c.colsum);
  if (atomic_load(&c.failed)) {
    report(g, "packing buffer");
    return -1;
  }
  return 0;
}

int tnk_lowp_gemm_with(const tnk_config_t *cfg, const tnk_lowp_gemm_args_t *g) {
  if (!tnk_lowp_gemm_supported(g->a_fmt, g->b_fmt, g->c_dtype) || g->m <= 0 || g->n <= 0) return 0;
  if ((is_block(g->sa_mode) || is_block(g->sb_mode)) && g->block <= 0) return 0;
  const tnk_gemm_config_t *uk = &cfg->gemm;
  if (g->k <= 0) { /* an empty sum: the scales and bias of zero */
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++) {
        if (g->c_dtype == TNK_I32)
          ((int32_t *)g->c)[i * g->sc_r + j * g->sc_c] = 0;
        else
          store_float(g, i, j, 0.0f);
      }
    return 0;
  }
  if (g->c_dtype == TNK_I32) {
    if (uk->i8) return int8_blocked(g, uk);
  } else if (decode_applies(g, uk)) {
    return float_decode(g, uk);
  } else if (uk->f32) {
    return float_blocked(g, uk);
  }
  tnk_parallel_for(g->m, 1, ref_rows, (void *)g);
  return 0;
}

int tnk_lowp_gemm(const tnk_lowp_gemm_args_t *g) { return tnk_lowp_gemm_with(tnk_config(), g); }

/* ---- float <-> fp8 casts --------------------------------------------------- */

int tnk_fp8_convert_supported(int dst_fmt, int src_fmt) {
  int d8 = dst_fmt == TNK_F8E4M3 || dst_fmt == TNK_F8E5M2;
  int s8 = src_fmt == TNK_F8E4M3 || src_fmt == TNK_F8E5M2;
  return (d8 && float_fmt(src_fmt)) || (s8 && float_fmt(dst_fmt));
}

static void convert_range(void *vp, int64_t begin, int64_t end) {
  const tnk_fp8_convert_args_t *a = vp;
  if (a->dst_fmt == TNK_F8E4M3 || a->dst_fmt == TNK_F8E5M2) {
    /* the variant's vectorised loop over f32; bf16 and f16 sources are
     * widened (exactly) a block at a time first */
    void (*to_f8)(uint8_t *, const float *, int64_t, int) = tnk_config()->gemm.f32_to_f8;
    uint8_t *d = a->dst;
    int e5 = a->dst_fmt == TNK_F8E5M2;
    float buf[1024];
    for (int64_t i = begin; i < end; i += 1024) {
      int64_t len = end - i < 1024 ? end - i : 1024;
      const float *src = buf;
      if (a->src_fmt == TNK_F32)
        src = (const float *)a->src + i;
      else if (a->src_fmt == TNK_BF16)
        for (int64_t j = 0; j < len; j++)
          buf[j] = tnk_bf16_to_f32(((const uint16_t *)a->src)[i + j]);
      else
        for (int64_t j = 0; j < len; j++)
          buf[j] = tnk_f16_to_f32(((const uint16_t *)a->src)[i + j]);
      if (to_f8)
        to_f8(d + i, src, len, e5);
      else
        tnk_f32_to_f8_loop(d + i, src, len, e5);
    }
    return;
  }
  const float *lut = lut_of(a->src_fmt);
  const uint8_t *s = a->src;
  switch (a->dst_fmt) {
    case TNK_F32:
      for (int64_t i = begin; i < end; i++) ((float *)a->dst)[i] = lut[s[i]];
      break;
    case TNK_BF16: /* exact: every fp8 value is a bf16 value */
      for (int64_t i = begin; i < end; i++) ((uint16_t *)a->dst)[i] = tnk_f32_to_bf16(lut[s[i]]);
      break;
    default: /* f16: exact too (e5m2 is f16's upper byte; e4m3's range fits) */
      for (int64_t i = begin; i < end; i++) ((uint16_t *)a->dst)[i] = tnk_f32_to_f16(lut[s[i]]);
  }
}

void tnk_fp8_convert(const tnk_fp8_convert_args_t *a) {
  if (!tnk_fp8_convert_supported(a->dst_fmt, a->src_fmt) || a->n <= 0) return;
  tnk_parallel_for(a->n, 1 << 14, convert_range, (void *)a);
}
