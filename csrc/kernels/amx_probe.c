/* The AMX tile state request and the tile self-test (config.c decides from
 * them whether bf16 GEMMs run on tiles). This file is compiled with the
 * base x86-64 flags, not x86/amx's: the test must be safe to call on any
 * x86-64 CPU, and the compiler vectorizes with whatever ISA a file is built
 * for. Built with AMX's flags (which include AVX-512), its set-up loops
 * became AVX-512 code that ran before the fault guard was in place: on an
 * AVX2-only host the first of them raised SIGILL outside the guard. Only
 * the tile instructions themselves (x86/amx/gemm.c) run under the guard. */
#if defined(__x86_64__)
#define _GNU_SOURCE /* syscall */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "x86/x86.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Linux (5.16+) hands the AMX tile data state to a process only when it asks;
 * the grant holds for every thread of the process. */
int tnk_amx_request(void) {
  static int granted = -1; /* benign race: every caller gets the same answer */
  if (granted < 0) granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  return granted;
}

/* Run once per process before the GEMM is allowed on tiles (config.c): one
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
#endif
