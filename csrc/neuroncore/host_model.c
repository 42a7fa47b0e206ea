/* The software NeuronCore's devices, modelled from the environment (the
 * host HAL's device_count / get_properties / memory_budget):
 *   TORCH_NEURONX_INSTANCE   trn2 (default) or trn3
 *   TORCH_NEURONX_NUM_CHIPS  chips in the instance (default 1)
 *   NEURON_LOGICAL_NC_CONFIG physical cores per logical core (default 2)
 *   NEURON_RT_VISIBLE_CORES  e.g. "0-3" or "1,3": logical cores to expose
 *   NEURON_RT_NUM_CORES      expose the first N logical cores
 *   TORCH_NEURONX_DEVICE_MEMORY  per-core HBM capacity override ("512M") */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "neuroncore.h"

#include <stdarg.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct instance_model {
  const char *name, *core_name;
  uint32_t generation, physical_cores_per_chip;
  uint64_t hbm_bytes_per_chip;
  double hbm_gbs_per_chip, bf16_tflops_per_chip;
} instance_model_t;

static const instance_model_t k_models[] = {
    {"trn2", "NeuronCore-v3", 2, 8, 96ull << 30, 2900.0, 667.0},
    {"trn3", "NeuronCore-v4", 3, 8, 144ull << 30, 4900.0, 671.0},
};

static int env_int(const char *name, int dflt, int *out) {
  const char *v = getenv(name);
  if (!v || !*v) {
    *out = dflt;
    return 0;
  }
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 20) return -1;
  *out = (int)x;
  return 0;
}

/* "512M", "2G", "1048576" -> bytes; 0 on error (a sign, a value that
 * overflows 64 bits, an unknown suffix). */
static uint64_t parse_bytes(const char *v) {
  if (!isdigit((unsigned char)*v)) return 0; /* strtoull would take "-1" */
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (end == v || errno == ERANGE) return 0;
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 0: return x;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return 0;
  }
  if (x > (ULLONG_MAX >> shift)) return 0;
  x <<= shift;
  end++;
  if (*end == 'i' || *end == 'I') end++;
  if (*end == 'B' || *end == 'b') end++;
  return *end ? 0 : x;
}

/* What the host can back: physical memory, or the cgroup's limit when lower,
 * less 1/8 kept for the process itself and the rest of the system. */
static uint64_t host_memory_budget(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
  FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
  if (f) {
    unsigned long long lim;
    if (fscanf(f, "%llu", &lim) == 1 && lim < total) total = lim;
    fclose(f);
  }
  return total - total / 8;
}

/* Parses "0-3,5" into a list of core ids; returns count or -1. */
static int parse_core_list(const char *v, int max_core, int *ids, int cap) {
  int n = 0;
  const char *p = v;
  while (*p) {
    char *end;
    long a = strtol(p, &end, 10), b;
    if (end == p) return -1;
    p = end;
    if (*p == '-') {
      p++;
      b = strtol(p, &end, 10);
      if (end == p) return -1;
      p = end;
    } else {
      b = a;
    }
    if (a < 0 || b < a || b >= max_core) return -1;
    for (long c = a; c <= b; c++) {
      if (n >= cap) return -1;
      for (int i = 0; i < n; i++)
        if (ids[i] == c) return -1;
      ids[n++] = (int)c;
    }
    while (*p == ' ') p++;
    if (*p == ',')
      p++;
    else if (*p)
      return -1;
  }
  return n;
}

static char g_error[256];

const char *tnc_host_model_error(void) { return g_error; }

static tnrt_status_t fail(tnrt_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static tnrt_status_t fail(tnrt_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  return status;
}

tnrt_status_t tnc_host_model(tnc_host_model_t *out) {
  const char *inst = getenv("TORCH_NEURONX_INSTANCE");
  const instance_model_t *m = &k_models[0];
  if (inst && *inst) {
    m = NULL;
    for (size_t i = 0; i < sizeof k_models / sizeof *k_models; i++)
      if (!strcmp(inst, k_models[i].name)) m = &k_models[i];
    if (!m)
      return fail(TNRT_ERR_CONFIG,
                  "TORCH_NEURONX_INSTANCE=%s is not a known instance "
                  "model; use trn2 or trn3",
                  inst);
  }
  int chips, lnc, num_cores;
  if (env_int("TORCH_NEURONX_NUM_CHIPS", 1, &chips) || chips < 1 || chips > 16)
    return fail(TNRT_ERR_CONFIG, "TORCH_NEURONX_NUM_CHIPS must be an integer in 1..16");
  if (env_int("NEURON_LOGICAL_NC_CONFIG", 2, &lnc) || (lnc != 1 && lnc != 2))
    return fail(TNRT_ERR_CONFIG, "NEURON_LOGICAL_NC_CONFIG must be 1 or 2");
  int per_chip = (int)m->physical_cores_per_chip / lnc;
  int total = per_chip * chips;

  int ids[TNRT_MAX_DEVICES];
  int n = total;
  for (int i = 0; i < total; i++) ids[i] = i;
  const char *vis = getenv("NEURON_RT_VISIBLE_CORES");
  if (vis && *vis) {
    n = parse_core_list(vis, total, ids, TNRT_MAX_DEVICES);
    if (n < 0)
      return fail(TNRT_ERR_CONFIG,
                  "NEURON_RT_VISIBLE_CORES=%s is not a list of "
                  "distinct logical cores in 0..%d (e.g. \"0-3\" or "
                  "\"1,2\")",
                  vis, total - 1);
  }
  if (env_int("NEURON_RT_NUM_CORES", n, &num_cores) || num_cores > n)
    return fail(TNRT_ERR_CONFIG, "NEURON_RT_NUM_CORES must be an integer in 0..%d", n);
  n = num_cores;

  uint64_t cap = m->hbm_bytes_per_chip / (uint64_t)per_chip;
  const char *mem = getenv("TORCH_NEURONX_DEVICE_MEMORY");
  if (mem && *mem) {
    cap = parse_bytes(mem);
    if (!cap)
      return fail(TNRT_ERR_CONFIG,
                  "TORCH_NEURONX_DEVICE_MEMORY=%s is not a size like "
                  "\"512M\" or \"8G\"",
                  mem);
  }
  /* The software core's device memory is host memory: no device may model
   * more than the host can back, and all devices together share that
   * budget (allocator.c), so running out is torch.OutOfMemoryError and not
   * the kernel's OOM killer. */
  out->budget = host_memory_budget();
  uint64_t modelled = cap;
  if (cap > out->budget) cap = out->budget;

  out->count = n;
  for (int d = 0; d < n; d++) {
    tnrt_device_props_t *p = &out->props[d];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s %s (software)", m->name, m->core_name);
    snprintf(p->instance_model, sizeof p->instance_model, "%s", m->name);
    p->total_memory = cap;
    p->modelled_memory = modelled;
    p->generation = m->generation;
    p->physical_cores = (uint32_t)lnc;
    p->logical_cores_per_chip = (uint32_t)per_chip;
    p->global_core_id = (uint32_t)ids[d];
    p->chip = (uint32_t)(ids[d] / per_chip);
    p->hbm_bandwidth_gbs = m->hbm_gbs_per_chip / per_chip;
    p->bf16_tflops = m->bf16_tflops_per_chip / per_chip;
  }
  return TNRT_OK;
}
