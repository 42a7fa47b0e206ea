/* bench_gemm: bf16 GEMM throughput of the kernel library's variants on the
 * benchmark's shapes, against the measured peaks. A benchmark, not a test:
 * it prints and asserts nothing (make bench_gemm; runs where no Python or
 * torch is installed, e.g. on a host with AMX). It runs as a task on a
 * device stream, so every kernel thread (TORCH_NEURONX_NUM_THREADS) takes
 * part on its own CPU, as in the extension's kernels (run from an unpinned
 * main thread, two of the threads shared a CPU and halved every number).
 *   bench_gemm [reps]
 * Columns: GFLOPS of the AVX512-BF16 dot-product kernel and of AMX tiles
 * (where usable) at three depths per packed block (the configured one
 * marked *), each as % of its own measured peak, and the largest difference
 * between the dot and the configured AMX outputs relative to the output's
 * scale. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "dtype.h"
#include "tnk.h"
#include "tnrt.h"

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* best seconds per product over 5 timings of `reps` products */
static double time_gemm(const tnk_config_t *c, tnk_gemm_args_t *g, int reps) {
  tnk_gemm_with(c, g); /* warm: pages, caches, the pool's threads */
  double best = 1e30;
  for (int t = 0; t < 5; t++) {
    double t0 = seconds();
    for (int r = 0; r < reps; r++) tnk_gemm_with(c, g);
    double s = (seconds() - t0) / reps;
    if (s < best) best = s;
  }
  return best;
}

static void bench(void *arg) {
  int reps = *(const int *)arg;
  static const int64_t shapes[][3] = {/* m, k, n (results.md's GEMM rows) */
                                      {2048, 2048, 2048}, {512, 2048, 2048}, {2048, 512, 2048},
                                      {1024, 512, 1344},  {1024, 1344, 512}, {256, 512, 1536},
                                      {4096, 4096, 4096}};
  tnk_config_t dot, amx;
  if (tnk_config_for_isa(TNK_ISA_AVX512, &dot) != 0 || !dot.gemm.bf16) {
    printf("no AVX512-BF16 on this CPU: nothing to compare\n");
    return;
  }
  amx = dot;
  dot.gemm.amx_bf16 = NULL;
  int have_amx = amx.gemm.amx_bf16 != NULL;
  double peak_dot = tnk_measure_peak(TNK_PEAK_BF16_DOT512) / 1e9;
  double peak_amx = have_amx ? tnk_measure_peak(TNK_PEAK_BF16_AMX) / 1e9 : 0;
  printf("threads %lld; bf16 peaks (GFLOPS): AVX512-BF16 dot %.0f, AMX tiles %s%.0f\n",
         (long long)tnk_num_threads(), peak_dot, have_amx ? "" : "(not usable) ", peak_amx);
  static const int64_t kcs[] = {256, 512, 1024};
  printf("%-16s %10s %6s", "m x k x n", "dot GF/s", "%peak");
  for (int i = 0; i < 3; i++)
    printf(" %5s%4lld%c %6s", "AMX k", (long long)kcs[i], kcs[i] == amx.gemm.amx_kc ? '*' : ' ',
           "%peak");
  printf(" %8s %10s\n", "AMX/dot", "max diff");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
    uint16_t *A = malloc(2 * m * k), *B = malloc(2 * k * n), *C1 = malloc(2 * m * n),
             *C2 = malloc(2 * m * n);
    for (int64_t i = 0; i < m * k; i++) A[i] = tnk_f32_to_bf16((float)((i * 7 % 13) - 6) / 8.0f);
    for (int64_t i = 0; i < k * n; i++) B[i] = tnk_f32_to_bf16((float)((i * 5 % 11) - 5) / 4.0f);
    tnk_gemm_args_t g = {.batch = 1, .m = m, .n = n, .k = k, .a = A, .b = B, .c = C1};
    g.dtype = TNK_BF16;
    g.alpha = 1.0;
    g.sa_r = k;
    g.sa_c = 1;
    g.sb_r = n;
    g.sb_c = 1;
    g.sc_r = n;
    g.sc_c = 1;
    double flops = 2.0 * (double)m * (double)n * (double)k;
    double t_dot = time_gemm(&dot, &g, reps);
    double gf_dot = flops / t_dot / 1e9, gf_amx = 0, gf_kc[3] = {0, 0, 0}, diff = 0;
    if (have_amx) {
      g.c = C2;
      for (int i = 0; i < 3; i++) {
        tnk_config_t v = amx;
        v.gemm.amx_kc = kcs[i];
        gf_kc[i] = flops / time_gemm(&v, &g, reps) / 1e9;
      }
      gf_amx = flops / time_gemm(&amx, &g, reps) / 1e9; /* C2: the configured depth's output */
      double scale = 0;
      for (int64_t i = 0; i < m * n; i++) scale = fmax(scale, fabs(tnk_bf16_to_f32(C1[i])));
      for (int64_t i = 0; i < m * n; i++)
        diff = fmax(diff, fabs(tnk_bf16_to_f32(C1[i]) - tnk_bf16_to_f32(C2[i])) / scale);
    }
    char name[48];
    snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)m, (long long)k, (long long)n);
    printf("%-16s %10.0f %5.0f%%", name, gf_dot, 100 * gf_dot / peak_dot);
    for (int i = 0; i < 3; i++)
      printf(" %10.0f %5.0f%%", gf_kc[i], peak_amx > 0 ? 100 * gf_kc[i] / peak_amx : 0);
    printf(" %7.2fx %10.2g\n", gf_amx / gf_dot, diff);
    free(A);
    free(B);
    free(C1);
    free(C2);
  }
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  /* the runtime's thread pool, as the extension installs it */
  tnk_set_parallel((tnk_parallel_fn)tnrt_parallel_for);
  tnk_set_num_threads(tnrt_num_threads());
  tnrt_stream_t *s = tnrt_stream_get(0, 0);
  if (!s || tnrt_launch(s, bench, &reps, sizeof reps, "bench_gemm") != TNRT_OK ||
      tnrt_stream_synchronize(s) != TNRT_OK) {
    fprintf(stderr, "bench_gemm: %s\n", tnrt_last_error());
    return 1;
  }
  return 0;
}
