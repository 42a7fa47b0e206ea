/* The kernel library's providers (kernel_list.h): the host provider runs
 * each kernel id's tnk_* entry point on the calling (pool) thread; the
 * counting provider wraps it. Both are generated from TNK_KERNELS. */
#include <stdatomic.h>
#include <string.h>

#include "../runtime/provider.h"
#include "kernel_list.h"

#define NAME_(ID, FN, ARGS, SUPPORTED) [TNK_K_##ID] = #ID,
const char *const tnk_kernel_names[TNK_KERNEL_COUNT] = {TNK_KERNELS(NAME_)};
#undef NAME_

/* one run thunk and one support probe per id */
#define THUNK_(ID, FN, ARGS, SUPPORTED)                        \
  static void run_##ID(void *a) { (void)FN((const ARGS *)a); } \
  static int supports_##ID(const tnrt_kernel_query_t *q) {     \
    (void)q;                                                   \
    return (SUPPORTED) != 0;                                   \
  }
TNK_KERNELS(THUNK_)
#undef THUNK_

#define RUN_(ID, FN, ARGS, SUPPORTED) [TNK_K_##ID] = run_##ID,
static void (*const k_run[TNK_KERNEL_COUNT])(void *) = {TNK_KERNELS(RUN_)};
#undef RUN_
#define SUP_(ID, FN, ARGS, SUPPORTED) [TNK_K_##ID] = supports_##ID,
static int (*const k_supports[TNK_KERNEL_COUNT])(const tnrt_kernel_query_t *) = {TNK_KERNELS(SUP_)};
#undef SUP_

static int host_supports(void *ctx, int32_t kernel, const tnrt_kernel_query_t *q) {
  (void)ctx;
  return k_supports[kernel](q);
}

static void host_run(void *ctx, int32_t kernel, void *args) {
  (void)ctx;
  k_run[kernel](args);
}

static _Atomic uint64_t g_counts[TNK_KERNEL_COUNT];

static void counting_run(void *ctx, int32_t kernel, void *args) {
  atomic_fetch_add_explicit(&g_counts[kernel], 1, memory_order_relaxed);
  host_run(ctx, kernel, args);
}

/* the library's providers differ only in name, run and whether host code
 * may share their queues */
#define PROVIDER(NAME, RUN, HOST_CODE)       \
  {.api_version = TNRT_PROVIDER_API_VERSION, \
   .name = NAME,                             \
   .kernel_count = TNK_KERNEL_COUNT,         \
   .runs_host_code = HOST_CODE,              \
   .supports = host_supports,                \
   .run = RUN}
static const tnrt_kernel_provider_t k_host = PROVIDER("host", host_run, 1);
static const tnrt_kernel_provider_t k_counting = PROVIDER("counting", counting_run, 1);
static const tnrt_kernel_provider_t k_kernels_only = PROVIDER("kernels-only", host_run, 0);
#undef PROVIDER

const tnrt_kernel_provider_t *tnk_host_provider(void) { return &k_host; }

const tnrt_kernel_provider_t *tnk_counting_provider(void) { return &k_counting; }

const tnrt_kernel_provider_t *tnk_provider_named(const char *name) {
  if (!name) return NULL;
  if (!strcmp(name, "host")) return tnk_host_provider();
  if (!strcmp(name, "counting")) return tnk_counting_provider();
  if (!strcmp(name, "kernels-only")) return &k_kernels_only;
  return NULL;
}

void tnk_kernel_launch_counts(uint64_t *out, int reset) {
  for (int k = 0; k < TNK_KERNEL_COUNT; k++)
    out[k] = reset ? atomic_exchange(&g_counts[k], 0) : atomic_load(&g_counts[k]);
}
