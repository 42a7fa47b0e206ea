/* bf16 GEMM on AMX tiles (Intel Sapphire Rapids and later), compiled with
 * -mamx-tile -mamx-bf16 and run only where the CPU has AMX-BF16 and the OS
 * has granted this process the tile state (tnk_amx_request).
 *
 * The block kernel computes a 32x32 fp32 tile of C in the four accumulator
 * tiles tmm0-3 (2x2 tiles of 16x16): per 16 k-pairs it loads two A tiles
 * (tmm4-5, rows 0-15 and 16-31, 16 pairs each) and two B tiles (tmm6-7,
 * columns 0-15 and 16-31 of the packed panel's 16 pair rows) and issues four
 * TDPBF16PS, each 16x16x32 multiply-adds with fp32 accumulation. A is packed
 * row by row (row r's k-pairs at a + r * lda), B as gemm.c packs it for the
 * AVX512-BF16 kernel: rows of 32 column pairs, which is AMX's pair-
 * interleaved ("VNNI") B layout with a 128-byte row stride. */
#define _GNU_SOURCE /* syscall */
#include <immintrin.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../x86.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Linux (5.16+) hands the AMX tile data state to a process only when it asks;
 * the grant holds for every thread of the process. */
int tnk_amx_request(void) {
  static int granted = -1; /* benign race: every caller gets the same answer */
  if (granted < 0) granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  return granted;
}

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

/* ---- self-test ---------------------------------------------------------------
 * Run once per process before the GEMM is allowed on tiles (config.c): one
 * 32x32x32 product on the real kernel, checked against a scalar loop. Small
 * integers make every product and sum exact in fp32, so the check is
 * equality. A fault (SIGILL: tiles unconfigured, not granted, or absent;
 * SIGSEGV) is caught: the test returns the signal instead of taking the
 * process down. The handler is process-wide while the test runs; a fault on
 * any other thread in that window puts the previous handler back and
 * returns, so the instruction faults again under it as it would have. */
static __thread volatile sig_atomic_t t_probing, t_tiles_loaded;
static __thread sigjmp_buf t_probe_jump;
static struct sigaction g_old_ill, g_old_segv;

static void probe_fault(int sig, siginfo_t *info, void *uctx) {
  (void)info;
  (void)uctx;
  if (t_probing) {
    t_probing = 0;
    siglongjmp(t_probe_jump, sig);
  }
  sigaction(sig, sig == SIGILL ? &g_old_ill : &g_old_segv, NULL);
}

/* the bf16 bits of a small integer (exact: its fp32 low half is zero) */
static uint32_t bf16_small(int v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u >> 16;
}

int tnk_amx_self_test(void) {
  static uint32_t a[32 * 16] __attribute__((aligned(64))), b[16 * 32] __attribute__((aligned(64)));
  static float c[32 * 32] __attribute__((aligned(64)));
  /* A: 32 rows of 16 k-pairs; B: 16 pair rows of 32 columns (tnk_amx_bf16_32x32) */
  for (int r = 0; r < 32; r++)
    for (int q = 0; q < 16; q++)
      a[r * 16 + q] = bf16_small((r + 2 * q) % 7 - 3) | bf16_small((3 * r + q) % 5 - 2) << 16;
  for (int q = 0; q < 16; q++)
    for (int j = 0; j < 32; j++)
      b[q * 32 + j] = bf16_small((q + j) % 9 - 4) | bf16_small((2 * q + 3 * j) % 5 - 2) << 16;
  for (int i = 0; i < 32 * 32; i++) c[i] = -1.0f;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = probe_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGILL, &sa, &g_old_ill);
  sigaction(SIGSEGV, &sa, &g_old_segv);
  int sig = sigsetjmp(t_probe_jump, 1);
  if (sig == 0) {
    t_probing = 1;
    t_tiles_loaded = 0;
    tnk_amx_begin();
    t_tiles_loaded = 1;
    tnk_amx_bf16_32x32(16, a, 16, b, c, 32, 0);
    tnk_amx_end();
    t_probing = 0;
  } else if (t_tiles_loaded) {
    tnk_amx_end(); /* the configuration loaded before the fault: release it */
  }
  sigaction(SIGILL, &g_old_ill, NULL);
  sigaction(SIGSEGV, &g_old_segv, NULL);
  if (sig) return sig;

  for (int i = 0; i < 32; i++)
    for (int j = 0; j < 32; j++) {
      float want = 0;
      for (int q = 0; q < 16; q++) {
        int a0 = (i + 2 * q) % 7 - 3, a1 = (3 * i + q) % 5 - 2;
        int b0 = (q + j) % 9 - 4, b1 = (2 * q + 3 * j) % 5 - 2;
        want += (float)(a0 * b0 + a1 * b1);
      }
      if (c[i * 32 + j] != want) return -1;
    }
  return 0;
}
