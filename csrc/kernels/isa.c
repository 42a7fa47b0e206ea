/* CPU feature detection, once per process. The kernel tables pick their
 * variants from it; TORCH_NEURONX_ISA forces one ("reference", "avx2",
 * "avx512") for testing. */
#include "tnk.h"

#include <stdlib.h>
#include <string.h>

static int detect(void) {
  int f = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    f |= TNK_ISA_AVX2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    f |= TNK_ISA_AVX512;
  if ((f & TNK_ISA_AVX512) && __builtin_cpu_supports("avx512bf16")) f |= TNK_FEAT_AVX512BF16;
#endif
  return f;
}

int tnk_cpu_features(void) {
  static int features = -1; /* benign race: every thread computes the same */
  if (features < 0) features = detect();
  return features;
}

int tnk_isa(void) {
  static int isa = -1; /* benign race, as above */
  if (isa >= 0) return isa;
  int f = tnk_cpu_features(), chosen;
  if (f & TNK_ISA_AVX512) chosen = TNK_ISA_AVX512;
  else if (f & TNK_ISA_AVX2) chosen = TNK_ISA_AVX2;
  else chosen = TNK_ISA_REFERENCE;
  const char *force = getenv("TORCH_NEURONX_ISA");
  if (force && *force) {
    if (!strcmp(force, "reference")) chosen = TNK_ISA_REFERENCE;
    else if (!strcmp(force, "avx2") && (f & TNK_ISA_AVX2)) chosen = TNK_ISA_AVX2;
    else if (!strcmp(force, "avx512") && (f & TNK_ISA_AVX512))
      chosen = TNK_ISA_AVX512;
  }
  isa = chosen;
  return isa;
}

const char *tnk_isa_name(int isa) {
  switch (isa) {
    case TNK_ISA_AVX512: return "avx512";
    case TNK_ISA_AVX2: return "avx2";
    default: return "reference";
  }
}
