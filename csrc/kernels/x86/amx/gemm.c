/* bf16 GEMM on AMX tiles (Intel Sapphire Rapids and later), compiled with
 * -mamx-tile -mamx-bf16 and run only where the CPU has AMX-BF16 and the OS
 * has granted this process the tile state (tnk_amx_request, amx_probe.c).
 *
 * The block kernel computes a 32x32 fp32 tile of C in the four accumulator
 * tiles tmm0-3 (2x2 tiles of 16x16): per 16 k-pairs it loads two A tiles
 * (tmm4-5, rows 0-15 and 16-31, 16 pairs each) and two B tiles (tmm6-7,
 * columns 0-15 and 16-31 of the packed panel's 16 pair rows) and issues four
 * TDPBF16PS, each 16x16x32 multiply-adds with fp32 accumulation. A is packed
 * row by row (row r's k-pairs at a + r * lda), B as gemm.c packs it for the
 * AVX512-BF16 kernel: rows of 32 column pairs, which is AMX's pair-
 * interleaved ("VNNI") B layout with a 128-byte row stride. */
#include <immintrin.h>
#include <stdint.h>

#include "../x86.h"

typedef struct {
  uint8_t palette_id, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config_t;

/* The one tile configuration (palette 1; tiles 0-7 of 16 rows x 64 bytes):
 * a constant object, so its bytes are fixed when the library is built. It
 * once was a local filled in a loop, and GCC 12 at -O3 dropped the colsb and
 * rows stores because it does not see LDTILECFG (through its builtin) read
 * the struct: every tile got 0 rows and the first tile instruction raised
 * SIGILL. The asm below names the whole object as its memory input, so no
 * compiler can treat those bytes as dead; the C test checks them. */
static const tile_config_t k_tile_config __attribute__((aligned(64))) = {
    .palette_id = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

const uint8_t *tnk_amx_tile_config(void) { return (const uint8_t *)&k_tile_config; }

/* Tiles are per-thread state: a thread loads the configuration before its
 * first block and releases it after its last, so a context switch does not
 * carry 8 KiB of tile data. */
void tnk_amx_begin(void) { __asm__ volatile("ldtilecfg %0" : : "m"(k_tile_config)); }

void tnk_amx_end(void) { _tile_release(); }

/* c[32][32] (fp32, row r at c + r * ldc) = A (32 rows of kp pairs, row r
 * at a + r * lda) times the 32-column panel b (kp rows of 32 pairs), or
 * c += that when accumulate; kp is a multiple of 16, the packs zero-padded. */
void tnk_amx_bf16_32x32(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                        int64_t ldc, int accumulate) {
  float *c1 = c + 16 * ldc;
  if (accumulate) {
    _tile_loadd(0, c, ldc * 4);
    _tile_loadd(1, c + 16, ldc * 4);
    _tile_loadd(2, c1, ldc * 4);
    _tile_loadd(3, c1 + 16, ldc * 4);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const uint32_t *a1 = a + 16 * lda;
  for (int64_t q = 0; q < kp; q += 16) {
    _tile_loadd(4, a + q, lda * 4);
    _tile_loadd(6, b + q * 32, 128);
    _tile_loadd(7, b + q * 32 + 16, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a1 + q, lda * 4);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, ldc * 4);
  _tile_stored(1, c + 16, ldc * 4);
  _tile_stored(2, c1, ldc * 4);
  _tile_stored(3, c1 + 16, ldc * 4);
}

/* Peak (peak_x86.c): `iters` rounds of 12 independent TDPBF16PS, three on
 * each of four accumulator tiles, the A and B tiles fixed; the caller
 * times it. */
void tnk_amx_peak_chains(long iters) {
  static const uint32_t zeros[16 * 16] __attribute__((aligned(64)));
  tnk_amx_begin();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, zeros, 64);
  _tile_loadd(5, zeros, 64);
  for (long i = 0; i < iters; i++) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  float sink[16 * 16] __attribute__((aligned(64)));
  _tile_stored(0, sink, 64);
  tnk_amx_end();
  __asm__ volatile("" : : "r"(sink) : "memory");
}
