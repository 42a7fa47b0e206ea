/* CPU feature detection and the kernel configuration, once per process
 * (config.h). TORCH_NEURONX_ISA=reference|avx2|avx512 forces the variant
 * of every entry when the CPU has it. */
#include "config.h"

#if defined(__x86_64__)
#include "x86/x86.h"
#endif

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
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
  if ((f & TNK_ISA_AVX512) && __builtin_cpu_supports("avx512vnni")) f |= TNK_FEAT_AVX512VNNI;
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

static tnk_amx_state_t g_amx_state;
static int g_amx_signal;
static char g_amx_words[160];
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

static void decide_amx(void) {
#if defined(__x86_64__)
  const char *env = getenv("TORCH_NEURONX_AMX");
  int force = env && !strcmp(env, "force");
  if (env && !strcmp(env, "0"))
    g_amx_state = TNK_AMX_OFF;
  else if (!(tnk_cpu_features() & TNK_FEAT_AMX_BF16) && !force)
    g_amx_state = TNK_AMX_ABSENT;
  else if (!tnk_amx_request() && !force)
    g_amx_state = TNK_AMX_NOT_GRANTED;
  else {
    int r = tnk_amx_self_test();
    g_amx_state = r == 0 ? TNK_AMX_IN_USE : r > 0 ? TNK_AMX_FAULTED : TNK_AMX_WRONG;
    g_amx_signal = r > 0 ? r : 0;
  }
#else
  g_amx_state = TNK_AMX_NOT_BUILT;
#endif
  switch (g_amx_state) {
    case TNK_AMX_IN_USE: snprintf(g_amx_words, sizeof g_amx_words, "in use"); break;
    case TNK_AMX_ABSENT: snprintf(g_amx_words, sizeof g_amx_words, "absent"); break;
    case TNK_AMX_OFF: snprintf(g_amx_words, sizeof g_amx_words, "off (TORCH_NEURONX_AMX=0)"); break;
    case TNK_AMX_NOT_GRANTED:
      snprintf(g_amx_words, sizeof g_amx_words,
               "not used: the OS did not grant the tile state (Linux 5.16 or later grants it)");
      break;
    case TNK_AMX_FAULTED:
      snprintf(g_amx_words, sizeof g_amx_words, "not used: the tile self-test raised %s",
               g_amx_signal == SIGILL    ? "SIGILL"
               : g_amx_signal == SIGSEGV ? "SIGSEGV"
                                         : "a signal");
      break;
    case TNK_AMX_WRONG:
      snprintf(g_amx_words, sizeof g_amx_words,
               "not used: the tile self-test gave a wrong product");
      break;
    default: snprintf(g_amx_words, sizeof g_amx_words, "not built (not x86-64)"); break;
  }
  /* the user was promised AMX by the CPU (or asked for it): say why not, once */
  if ((g_amx_state == TNK_AMX_FAULTED || g_amx_state == TNK_AMX_WRONG) &&
      ((tnk_cpu_features() & TNK_FEAT_AMX_BF16) || getenv("TORCH_NEURONX_AMX")))
    fprintf(stderr,
            "torch_neuronx warning: AMX %s; bf16 GEMMs run on the dot-product path instead "
            "(TORCH_NEURONX_AMX=0 silences this)\n",
            g_amx_words);
}

tnk_amx_state_t tnk_amx_state(void) {
  pthread_once(&g_amx_once, decide_amx);
  return g_amx_state;
}

const char *tnk_amx_status(void) {
  pthread_once(&g_amx_once, decide_amx);
  return g_amx_words;
}

int tnk_amx_usable(void) { return tnk_amx_state() == TNK_AMX_IN_USE; }

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
