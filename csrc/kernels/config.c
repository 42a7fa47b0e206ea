/* CPU feature detection and the kernel configuration, once per process
 * (config.h). TORCH_NEURONX_ISA=reference|avx2|avx512 forces the variant
 * of every entry when the CPU has it. */
#include "config.h"

#if defined(__x86_64__)
#include "x86/x86.h"
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int detect(void) {
  int f = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* (F16C: the variants convert fp16 with it; every AVX2 CPU has it) */
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    f |= TNK_ISA_AVX2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c"))
    f |= TNK_ISA_AVX512;
  if ((f & TNK_ISA_AVX512) && __builtin_cpu_supports("avx512bf16")) f |= TNK_FEAT_AVX512BF16;
  if (__builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16"))
    f |= TNK_FEAT_AMX_BF16;
#endif
  return f;
}

int tnk_cpu_features(void) {
  static int features = -1; /* benign race: every thread computes the same */
  if (features < 0) features = detect();
  return features;
}

int tnk_amx_usable(void) {
#if defined(__x86_64__)
  return (tnk_cpu_features() & TNK_FEAT_AMX_BF16) && tnk_amx_request();
#else
  return 0;
#endif
}

/* The best variant this build and CPU run, or the forced one. */
static int choose_isa(void) {
  int f = tnk_cpu_features(), chosen;
  if (f & TNK_ISA_AVX512)
    chosen = TNK_ISA_AVX512;
  else if (f & TNK_ISA_AVX2)
    chosen = TNK_ISA_AVX2;
  else
    chosen = TNK_ISA_REFERENCE;
  const char *force = getenv("TORCH_NEURONX_ISA");
  if (force && *force) {
    if (!strcmp(force, "reference"))
      chosen = TNK_ISA_REFERENCE;
    else if (!strcmp(force, "avx2") && (f & TNK_ISA_AVX2))
      chosen = TNK_ISA_AVX2;
    else if (!strcmp(force, "avx512") && (f & TNK_ISA_AVX512))
      chosen = TNK_ISA_AVX512;
  }
  return chosen;
}

static int64_t cache_size(int name) {
  long v = sysconf(name);
  return v > 0 ? (int64_t)v : 0;
}

void tnk_fit_gemm_to_caches(tnk_gemm_config_t *g, int64_t l2, int64_t l3) {
  if (!g->f32 || g->mr <= 0 || g->nr <= 0) return;
  if (l2 > 0) {
    int64_t mc = l2 / 2 / (g->kc * 4) / g->mr * g->mr;
    if (mc < g->mr) mc = g->mr;
    if (mc < g->mc) g->mc = mc;
    if (g->bf16) {
      int64_t kc = l2 * 3 / 4 / (g->mc * 2) / 2 * 2;
      if (kc < 64) kc = 64;
      if (kc < g->bf16_kc) g->bf16_kc = kc;
    }
  }
  if (l3 > 0) {
    int64_t nc = l3 / 2 / (g->kc * 4) / g->nr * g->nr;
    if (nc < g->nr) nc = g->nr;
    if (nc < g->nc) g->nc = nc;
  }
}

int tnk_config_for_isa(int isa, tnk_config_t *out) {
  int f = tnk_cpu_features();
  if (isa != TNK_ISA_REFERENCE && !(f & isa)) return -1;
  memset(out, 0, sizeof *out);
  out->isa = isa;
  out->features = f;
  tnk_config_init_ref(out);
#if defined(__x86_64__)
  if (isa >= TNK_ISA_AVX2) tnk_config_init_avx2(out);
  if (isa >= TNK_ISA_AVX512) tnk_config_init_avx512(out);
#else
  if (isa != TNK_ISA_REFERENCE) return -1; /* no per-ISA directories built here */
#endif
  out->cache_l2 = cache_size(_SC_LEVEL2_CACHE_SIZE);
  out->cache_l3 = cache_size(_SC_LEVEL3_CACHE_SIZE);
  tnk_fit_gemm_to_caches(&out->gemm, out->cache_l2, out->cache_l3);
  return 0;
}

static tnk_config_t g_config;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_config(void) {
  if (tnk_config_for_isa(choose_isa(), &g_config) != 0)
    tnk_config_for_isa(TNK_ISA_REFERENCE, &g_config);
}

const tnk_config_t *tnk_config(void) {
  pthread_once(&g_once, init_config);
  return &g_config;
}

int tnk_isa(void) { return tnk_config()->isa; }

const char *tnk_bf16_gemm_kernel(void) {
  const tnk_gemm_config_t *g = &tnk_config()->gemm;
  return g->amx_bf16 ? "amx" : g->bf16 ? "avx512-bf16" : "fp32";
}

const char *tnk_isa_name(int isa) {
  switch (isa) {
    case TNK_ISA_AVX512: return "avx512";
    case TNK_ISA_AVX2: return "avx2";
    default: return "reference";
  }
}
