/* The kernel-provider registry and the kernel launch (provider.h). */
#include <stdatomic.h>
#include <string.h>

#include "internal.h"
#include "provider.h"

static _Atomic(const tnrt_kernel_provider_t *) g_provider;

tnrt_status_t tnrt_set_kernel_provider(const tnrt_kernel_provider_t *p) {
  if (!p) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "kernel provider: NULL");
  if (p->api_version != TNRT_PROVIDER_API_VERSION)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "kernel provider '%s': api_version %d, this runtime speaks %d",
                          p->name ? p->name : "?", p->api_version, TNRT_PROVIDER_API_VERSION);
  if (!p->name || !p->run || !p->supports || p->kernel_count < 1 ||
      p->kernel_count > TNRT_MAX_KERNELS)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "kernel provider '%s': name, run and supports are required and "
                          "kernel_count must be 1 to %d",
                          p->name ? p->name : "?", TNRT_MAX_KERNELS);
  atomic_store(&g_provider, p);
  return TNRT_OK;
}

const tnrt_kernel_provider_t *tnrt_kernel_provider(void) { return atomic_load(&g_provider); }

int tnrt_kernel_supported(int32_t kernel, const tnrt_kernel_query_t *q) {
  const tnrt_kernel_provider_t *p = atomic_load(&g_provider);
  if (!p || kernel < 0 || kernel >= p->kernel_count) return 0;
  return p->supports(p->ctx, kernel, q) != 0;
}

/* The stream task of kernel k is run_k<k>(descriptor): one trampoline per
 * id, so a launch queues the caller's descriptor as it is (no header, no
 * extra copy) and a small kernel still runs in place. The trampoline reads
 * the provider in use when the task runs (provider.h). */
/* clang-format off */
#define KERNEL_SLOTS(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
  X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) \
  X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) \
  X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63)
/* clang-format on */
_Static_assert(TNRT_MAX_KERNELS == 64, "KERNEL_SLOTS lists TNRT_MAX_KERNELS ids");

#define RUN_K(N)                                                \
  static void run_k##N(void *args) {                            \
    const tnrt_kernel_provider_t *p = atomic_load(&g_provider); \
    p->run(p->ctx, N, args);                                    \
  }
KERNEL_SLOTS(RUN_K)
#undef RUN_K
#define ENTRY(N) run_k##N,
static const tnrt_task_fn k_run[TNRT_MAX_KERNELS] = {KERNEL_SLOTS(ENTRY)};
#undef ENTRY

tnrt_status_t tnrt_launch_kernel(tnrt_stream_t *s, int32_t kernel, const void *args,
                                 size_t args_size, const char *name, int small, uint64_t *seq) {
  const tnrt_kernel_provider_t *p = atomic_load(&g_provider);
  if (!p)
    return tnrt_set_error(TNRT_ERR_NOT_SUPPORTED, "kernel launch '%s': no kernel provider is set",
                          name ? name : "?");
  if (kernel < 0 || kernel >= p->kernel_count)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "kernel launch '%s': kernel id %d is not one of provider '%s''s %d",
                          name ? name : "?", (int)kernel, p->name, (int)p->kernel_count);
  if (args_size > TNRT_KERNEL_ARGS_MAX)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "kernel launch '%s': a %zu-byte descriptor is over the %d bytes a "
                          "launch carries",
                          name ? name : "?", args_size, (int)TNRT_KERNEL_ARGS_MAX);
  if (small) return tnrt_launch_small(s, k_run[kernel], args, args_size, name, seq);
  return seq ? tnrt_launch_seq(s, k_run[kernel], args, args_size, name, seq)
             : tnrt_launch(s, k_run[kernel], args, args_size, name);
}
