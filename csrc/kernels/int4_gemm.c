/* Weight-only int4 (tnk.h, tnk_int4_mm / tnk_int4_pack): torch's CPU int4
 * format, packed and multiplied in place.
 *
 * The packed weight is cut into units: 32 columns whose nibbles sit in 16
 * bytes of each k row (8 bytes and 16 columns for a 16-wide block), in the
 * order the bytes give them (low nibbles, then high; the driver maps them
 * to the layout's columns). A unit reads its bytes once, row after row, and
 * the variant's unit kernel (config.h, gemm.int4_unit) widens each row's
 * nibbles to fp32 in registers,
 * applies the group's scale and zero and adds the product with every row of
 * A: for a few rows of A (decode) straight into register sums, for more
 * rows through a small fp32 panel of the dequantised unit in L1. No copy of
 * the whole weight is made. Each column is summed in k order, one fp32 sum,
 * as CPU's kernel sums it. Units are spread over the threads. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dtype.h"
#include "tnk.h"

int tnk_int4_block_n(int layout) { return layout == TNK_INT4_LANES64 ? 64 : 32; }

static int layout_ok(int layout) {
  return layout == TNK_INT4_PAIRS || layout == TNK_INT4_HALVES32 || layout == TNK_INT4_LANES64;
}

int tnk_int4_mm_supported(int dtype, int layout) {
  return layout_ok(layout) && (dtype == TNK_F32 || dtype == TNK_BF16 || dtype == TNK_F16);
}

int tnk_int4_pack_supported(int layout) { return layout_ok(layout); }

static inline uint8_t pack2(int32_t lo, int32_t hi) {
  return (uint8_t)(((uint8_t)hi << 4) | (uint8_t)lo); /* CPU's expression, bit for bit */
}

static void report(const tnk_int4_mm_args_t *g, const char *what) {
  if (g->fault.fn) g->fault.fn(g->fault.ctx, g->fault.kind, what, 0, 0, g->fault.origin);
}

typedef struct pctx {
  const tnk_int4_pack_args_t *a;
  int64_t block_n;
} pctx_t;

static void pack_blocks(void *vp, int64_t begin, int64_t end) {
  const pctx_t *c = vp;
  const tnk_int4_pack_args_t *a = c->a;
  const int64_t K = a->k, bn = c->block_n;
  for (int64_t b = begin; b < end; b++) {
    int64_t c0 = b * bn, w = a->n - c0 < bn ? a->n - c0 : bn;
    const int32_t *src = a->w + c0 * K;
    uint8_t *dst = a->out + c0 * K / 2;
    for (int64_t k = 0; k < K; k++) {
      if (w == bn && a->layout == TNK_INT4_LANES64) {
        for (int d = 0; d < 16; d++) {
          dst[k * 32 + d] = pack2(src[d * K + k], src[(d + 32) * K + k]);
          dst[k * 32 + 16 + d] = pack2(src[(d + 16) * K + k], src[(d + 48) * K + k]);
        }
      } else if (w == bn && a->layout == TNK_INT4_HALVES32) {
        for (int d = 0; d < 16; d++) dst[k * 16 + d] = pack2(src[d * K + k], src[(d + 16) * K + k]);
      } else {
        for (int64_t j = 0; j < w; j += 2)
          dst[k * (w / 2) + j / 2] = pack2(src[j * K + k], src[(j + 1) * K + k]);
      }
    }
  }
}

void tnk_int4_pack(const tnk_int4_pack_args_t *a) {
  if (!layout_ok(a->layout) || a->n <= 0 || a->k <= 0) return;
  pctx_t c = {a, tnk_int4_block_n(a->layout)};
  tnk_parallel_for((a->n + c.block_n - 1) / c.block_n, 1, pack_blocks, &c);
}

/* ---- the product ----------------------------------------------------------- */

/* A unit: its bytes start at b + off, rows ldw bytes apart. Unit column c
 * (config.h's order: c < 16 the low nibble of byte c, else the high nibble
 * of byte c - 16) is matrix column col_lo + c / col_hi + c - 16 in the
 * blocked layouts, and col_lo + 2c / col_lo + 2 (c - 16) + 1 in pairs. */
typedef struct unit {
  int64_t off, ldw, col_lo, col_hi;
  int pairs, half;
} unit_t;

/* The scalar unit kernel (no variant): the variants' contract, config.h. */
static void unit_ref(int64_t K, int64_t group, const float *x, int64_t ldx, int64_t m,
                     const uint8_t *w, int64_t ldw, int half, const float *sz, float *out) {
  for (int64_t r = 0; r < m; r++)
    for (int c = 0; c < 32; c++) {
      float acc = 0.0f;
      if (!half || c % 16 < 8)
        for (int64_t k = 0; k < K; k++) {
          uint8_t byte = w[k * ldw + c % 16];
          int q = c < 16 ? byte & 15 : byte >> 4;
          const float *g = sz + (k / group) * 64;
          acc = fmaf(x[r * ldx + k], fmaf((float)q, g[c], g[32 + c]), acc);
        }
      out[r * 32 + c] = acc;
    }
}

typedef struct mctx {
  const tnk_int4_mm_args_t *g;
  const tnk_gemm_config_t *uk;
  const float *x; /* A widened, m x k */
  const unit_t *units;
  atomic_int failed;
} mctx_t;

static inline int64_t unit_col(const unit_t *u, int c) {
  if (u->pairs) return u->col_lo + (c < 16 ? 2 * c : 2 * (c - 16) + 1);
  return c < 16 ? u->col_lo + c : u->col_hi + c - 16;
}

/* whether unit column c holds a column (a half unit has 16) */
static inline int unit_has(const unit_t *u, int c) { return !u->half || c % 16 < 8; }

static void mm_units(void *vp, int64_t begin, int64_t end) {
  mctx_t *c = vp;
  const tnk_int4_mm_args_t *g = c->g;
  const int64_t groups = (g->k + g->group - 1) / g->group;
  float *sz = aligned_alloc(64, (size_t)groups * 64 * sizeof(float));
  float *out = aligned_alloc(64, (size_t)g->m * 32 * sizeof(float));
  if (!sz || !out) {
    free(sz);
    free(out);
    if (!atomic_exchange(&c->failed, 1)) report(g, "int4 product buffers");
    return;
  }
  for (int64_t ui = begin; ui < end; ui++) {
    const unit_t *u = &c->units[ui];
    /* the unit's scales and zeros per group, in unit order, as fp32; the
     * zero takes the nibble's offset of 8: (q - 8) s + z = q s + (z - 8 s)
     * (8 s is exact: one rounding, as an FMA would give) */
    for (int64_t q = 0; q < groups; q++) {
      float *d = sz + q * 64;
      for (int j = 0; j < 32; j++) d[j] = d[32 + j] = 0.0f;
      for (int j = 0; j < 32; j++) {
        if (!unit_has(u, j)) continue;
        int64_t e = (q * g->n + unit_col(u, j)) * 2;
        float s, z;
        switch (g->dtype) {
          case TNK_BF16:
            s = tnk_bf16_to_f32(((const uint16_t *)g->sz)[e]);
            z = tnk_bf16_to_f32(((const uint16_t *)g->sz)[e + 1]);
            break;
          case TNK_F16:
            s = tnk_f16_to_f32(((const uint16_t *)g->sz)[e]);
            z = tnk_f16_to_f32(((const uint16_t *)g->sz)[e + 1]);
            break;
          default: s = ((const float *)g->sz)[e]; z = ((const float *)g->sz)[e + 1];
        }
        d[j] = s;
        d[32 + j] = z - 8.0f * s;
      }
    }
    const uint8_t *w = g->b + u->off;
    if (c->uk->int4_unit)
      c->uk->int4_unit(g->k, g->group, c->x, g->k, g->m, w, u->ldw, u->half, sz, out);
    else
      unit_ref(g->k, g->group, c->x, g->k, g->m, w, u->ldw, u->half, sz, out);
    for (int64_t i = 0; i < g->m; i++)
      for (int j = 0; j < 32; j++)
        if (unit_has(u, j)) tnk_stf(g->c, g->dtype, i * g->ldc + unit_col(u, j), out[i * 32 + j]);
  }
  free(sz);
  free(out);
}

/* The units of the packed weight, in column order. */
static int64_t list_units(const tnk_int4_mm_args_t *g, unit_t *units) {
  const int64_t bn = tnk_int4_block_n(g->layout);
  int64_t count = 0;
  for (int64_t c0 = 0; c0 < g->n; c0 += bn) {
    int64_t w = g->n - c0 < bn ? g->n - c0 : bn, base = c0 * g->k / 2;
    if (w == bn && g->layout == TNK_INT4_LANES64) {
      units[count++] = (unit_t){base, 32, c0, c0 + 32, 0, 0};
      units[count++] = (unit_t){base + 16, 32, c0 + 16, c0 + 48, 0, 0};
    } else if (w == bn && g->layout == TNK_INT4_HALVES32) {
      units[count++] = (unit_t){base, 16, c0, c0 + 16, 0, 0};
    } else {
      for (int64_t j = 0; j < w; j += 32)
        units[count++] = (unit_t){base + j / 2, w / 2, c0 + j, 0, 1, w - j < 32};
    }
  }
  return count;
}

int tnk_int4_mm_with(const tnk_config_t *cfg, const tnk_int4_mm_args_t *g) {
  if (!tnk_int4_mm_supported(g->dtype, g->layout) || g->m <= 0 || g->n <= 0 || g->group <= 0)
    return 0;
  if (g->k <= 0) { /* an empty sum */
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++) tnk_stf(g->c, g->dtype, i * g->ldc + j, 0.0);
    return 0;
  }
  float *x = aligned_alloc(64, ((size_t)(g->m * g->k) * sizeof(float) + 63) / 64 * 64);
  unit_t *units = malloc((size_t)(g->n / 16 + 2) * sizeof(unit_t));
  if (!x || !units) {
    free(x);
    free(units);
    report(g, "int4 activation buffer");
    return -1;
  }
  for (int64_t i = 0; i < g->m; i++)
    for (int64_t k = 0; k < g->k; k++)
      x[i * g->k + k] = (float)tnk_ldf(g->a, g->dtype, i * g->lda + k);
  mctx_t c = {g, &cfg->gemm, x, units, 0};
  int64_t count = list_units(g, units);
  tnk_parallel_for(count, 1, mm_units, &c);
  free(x);
  free(units);
  return atomic_load(&c.failed) ? -1 : 0;
}

int tnk_int4_mm(const tnk_int4_mm_args_t *g) { return tnk_int4_mm_with(tnk_config(), g); }
