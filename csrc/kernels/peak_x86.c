/* The machine's limits, measured rather than derived (a VM does not report
 * its boost clock, and a clock estimate times a nominal issue rate was off
 * by 2x): peak arithmetic by instruction throughput, every kernel thread
 * at once timing 12 independent accumulator chains of one instruction;
 * and a plain libc memcpy timing, the benchmarks' bandwidth anchor. */
#include <string.h>
#include <time.h>

#include "tnk.h"

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* flops of one instruction of each kind (tnk.h's TNK_PEAK_* order) */
static const double k_instr_flops[] = {8 * 2,  16 * 2, 16 * 2 * 2, 16 * 16 * 32 * 2,
                                       64 * 2, 32 * 2, 16 * 2};

#if defined(__x86_64__)
#include <immintrin.h>

#include "x86/x86.h"

/* 12 chains of OP over ITERS steps; returns flops per second, FLOPS being
 * the flops of one instruction. Twelve chains cover the latency (4-5
 * cycles) times the issue width (2 per cycle) of the FMA and dot units. */
#define CHAINS(VT, INIT, OP, RED, FLOPS)                                       \
  VT acc[12];                                                                  \
  for (int j = 0; j < 12; j++) acc[j] = INIT((float)j);                        \
  double t = seconds();                                                        \
  for (long i = 0; i < iters; i++) {                                           \
    _Pragma("GCC unroll 12") for (int j = 0; j < 12; j++) acc[j] = OP(acc[j]); \
  }                                                                            \
  t = seconds() - t;                                                           \
  volatile float sink = 0;                                                     \
  for (int j = 0; j < 12; j++) sink += RED(acc[j]);                            \
  (void)sink;                                                                  \
  return (double)iters * 12.0 * (FLOPS) / t;

static float red256(__m256 v) __attribute__((target("avx2,fma")));
static float red256(__m256 v) {
  float x[8];
  _mm256_storeu_ps(x, v);
  return x[0] + x[7];
}

#define FMA256(x) _mm256_fmadd_ps(x, _mm256_set1_ps(1.0000001f), _mm256_set1_ps(1e-9f))
#define FMA512(x) _mm512_fmadd_ps(x, _mm512_set1_ps(1.0000001f), _mm512_set1_ps(1e-9f))
/* each lane adds the two products of a bf16 pair (1, 1) with a pair
 * (2^-7, 2^-7): a multiply and an add per product */
#define DOT512(x)                                              \
  _mm512_dpbf16_ps(x, (__m512bh)_mm512_set1_epi32(0x3f803f80), \
                   (__m512bh)_mm512_set1_epi32(0x3c003c00))

__attribute__((target("avx2,fma"))) static double chains_fma256(long iters) {
  CHAINS(__m256, _mm256_set1_ps, FMA256, red256, k_instr_flops[TNK_PEAK_F32_FMA256])
}

__attribute__((target("avx512f"))) static double chains_fma512(long iters) {
  CHAINS(__m512, _mm512_set1_ps, FMA512, _mm512_reduce_add_ps, k_instr_flops[TNK_PEAK_F32_FMA512])
}

__attribute__((target("avx512f,avx512bf16"))) static double chains_dot512(long iters){
    CHAINS(__m512, _mm512_set1_ps, DOT512, _mm512_reduce_add_ps,
           k_instr_flops[TNK_PEAK_BF16_DOT512])}
/* int8 products as the int8 GEMM runs them: VPDPBUSD (unsigned times
 * signed bytes, four per lane, summed into int32), or VPMADDWD on int16
 * pairs followed by the VPADDD that accumulates it */
#define VNNI512(x) \
  _mm512_dpbusd_epi32(x, _mm512_set1_epi32(0x01010101), _mm512_set1_epi32(0x01020102))
#define MADD512(x) _mm512_add_epi32(x, _mm512_madd_epi16(x, _mm512_set1_epi32(0x00010001)))
#define MADD256(x) _mm256_add_epi32(x, _mm256_madd_epi16(x, _mm256_set1_epi32(0x00010001)))
static inline __attribute__((target("avx512f"))) __m512i i512_init(float v) {
  return _mm512_set1_epi32((int)v);
}
static inline __attribute__((target("avx2"))) __m256i i256_init(float v) {
  return _mm256_set1_epi32((int)v);
}
static inline __attribute__((target("avx512f"))) float i512_red(__m512i v) {
  return (float)_mm512_reduce_add_epi32(v);
}
static inline __attribute__((target("avx2"))) float i256_red(__m256i v) {
  return (float)_mm256_extract_epi32(v, 0);
}

__attribute__((target("avx512f,avx512vnni"))) static double chains_vnni512(long iters) {
  CHAINS(__m512i, i512_init, VNNI512, i512_red, k_instr_flops[TNK_PEAK_I8_VNNI512])
}
__attribute__((target("avx512f,avx512bw"))) static double chains_madd512(long iters) {
  CHAINS(__m512i, i512_init, MADD512, i512_red, k_instr_flops[TNK_PEAK_I16_MADD512])
}
__attribute__((target("avx2"))) static double chains_madd256(long iters) {
  CHAINS(__m256i, i256_init, MADD256, i256_red, k_instr_flops[TNK_PEAK_I16_MADD256])
}

static int peak_supported(int kind) {
  int f = tnk_cpu_features();
  switch (kind) {
    case TNK_PEAK_F32_FMA256: return (f & TNK_ISA_AVX2) != 0;
    case TNK_PEAK_F32_FMA512: return (f & TNK_ISA_AVX512) != 0;
    case TNK_PEAK_BF16_DOT512: return (f & TNK_FEAT_AVX512BF16) != 0;
    case TNK_PEAK_BF16_AMX: return tnk_amx_usable();
    case TNK_PEAK_I8_VNNI512: return (f & TNK_FEAT_AVX512VNNI) != 0;
    case TNK_PEAK_I16_MADD512: return (f & TNK_ISA_AVX512) != 0;
    case TNK_PEAK_I16_MADD256: return (f & TNK_ISA_AVX2) != 0;
    default: return 0;
  }
}

static double chains(int kind, long iters) {
  if (kind == TNK_PEAK_F32_FMA256) return chains_fma256(iters);
  if (kind == TNK_PEAK_F32_FMA512) return chains_fma512(iters);
  if (kind == TNK_PEAK_BF16_AMX) { /* 12 independent tile products per step too */
    double t = seconds();
    tnk_amx_peak_chains(iters);
    return (double)iters * 12.0 * k_instr_flops[kind] / (seconds() - t);
  }
  if (kind == TNK_PEAK_I8_VNNI512) return chains_vnni512(iters);
  if (kind == TNK_PEAK_I16_MADD512) return chains_madd512(iters);
  if (kind == TNK_PEAK_I16_MADD256) return chains_madd256(iters);
  return chains_dot512(iters);
}
#else
static int peak_supported(int kind) {
  (void)kind;
  return 0;
}
static double chains(int kind, long iters) {
  (void)kind;
  (void)iters;
  return 0.0;
}
#endif

enum { PEAK_MAX_THREADS = 256 };

typedef struct peak_ctx {
  int kind;
  long iters;
  double rate[PEAK_MAX_THREADS];
} peak_ctx_t;

static void peak_parts(void *p, int64_t begin, int64_t end) {
  peak_ctx_t *c = p;
  for (int64_t i = begin; i < end; i++) c->rate[i] = chains(c->kind, c->iters);
}

double tnk_measure_peak(int kind) {
  if (!peak_supported(kind)) return 0.0;
  int64_t threads = tnk_num_threads();
  if (threads > PEAK_MAX_THREADS) threads = PEAK_MAX_THREADS;
  static peak_ctx_t c; /* benchmarks only: one caller at a time */
  c.kind = kind;
  /* about 0.25 s per thread, sized from a short calibration run */
  double rate = chains(kind, 1000000);
  c.iters = rate > 0 ? (long)(0.25 * rate / (12 * k_instr_flops[kind])) : 1000000;
  if (c.iters < 1000000) c.iters = 1000000;
  tnk_parallel_for(threads, 1, peak_parts, &c);
  double sum = 0;
  for (int64_t i = 0; i < threads; i++) sum += c.rate[i];
  return sum;
}

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
