/* The machine's limits, measured rather than looked up (a VM does not
 * report its boost clock): the fp32 FMA peak, from the clock of a dependent
 * add chain and the FMA throughput of 12 independent accumulator chains per
 * ISA; and a plain libc memcpy timing, the benchmarks' bandwidth anchor. */
#include <string.h>
#include <time.h>

#include "tnk.h"

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define FMA_CHAINS(VT, SET1, FMA, RED, LANES)                                         \
  VT acc[12], b = SET1(1.0000001f), c = SET1(1e-9f);                                  \
  for (int j = 0; j < 12; j++) acc[j] = SET1((float)j);                               \
  double t = seconds();                                                               \
  for (long i = 0; i < iters; i++) {                                                  \
    _Pragma("GCC unroll 12") for (int j = 0; j < 12; j++) acc[j] = FMA(acc[j], b, c); \
  }                                                                                   \
  t = seconds() - t;                                                                  \
  volatile float sink = 0;                                                            \
  for (int j = 0; j < 12; j++) sink += RED(acc[j]);                                   \
  (void)sink;                                                                         \
  return (double)iters * 12.0 * (LANES) * 2.0 / t;

static float red256(__m256 v) __attribute__((target("avx2,fma")));
static float red256(__m256 v) {
  float x[8];
  _mm256_storeu_ps(x, v);
  return x[0] + x[7];
}

__attribute__((target("avx2,fma"))) static double fma_avx2(long iters) {
  FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, red256, 8)
}

__attribute__((target("avx512f"))) static double fma_avx512(long iters) {
  FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps, 16)
}

double tnk_measure_fma_peak(int isa, double *ghz) {
  long n = 100000000;
  unsigned long x = 0;
  double t = seconds();
  for (long i = 0; i < n; i++) __asm__ volatile("add $1, %0" : "+r"(x));
  t = seconds() - t;
  *ghz = (double)n / t / 1e9;
  double flops;
  if (isa == TNK_ISA_AVX512)
    flops = fma_avx512(20000000);
  else if (isa == TNK_ISA_AVX2)
    flops = fma_avx2(20000000);
  else
    return 0.0;
  return flops / (*ghz * 1e9);
}
#else
double tnk_measure_fma_peak(int isa, double *ghz) {
  (void)isa;
  *ghz = 0.0;
  return 0.0;
}
#endif

typedef struct memcpy_ctx {
  char *dst;
  const char *src;
  int64_t bytes, part;
} memcpy_ctx_t;

static void memcpy_parts(void *p, int64_t begin, int64_t end) {
  const memcpy_ctx_t *c = p;
  for (int64_t i = begin; i < end; i++) {
    int64_t off = i * c->part, n = c->bytes - off < c->part ? c->bytes - off : c->part;
    memcpy(c->dst + off, c->src + off, (size_t)n);
  }
}

double tnk_time_memcpy(void *dst, const void *src, int64_t bytes) {
  int64_t parts = tnk_num_threads();
  memcpy_ctx_t c = {dst, src, bytes, (bytes + parts - 1) / parts};
  double t = seconds();
  if (bytes > 0) tnk_parallel_for(parts, 1, memcpy_parts, &c);
  return seconds() - t;
}
