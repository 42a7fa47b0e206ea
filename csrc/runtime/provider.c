/* The kernel-provider registry and the kernel launch (provider.h): a kernel
 * task is the runtime's one trampoline over a 16-byte header (the provider
 * it was launched with, the kernel id) and the descriptor. */
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
  if (!p->name || !p->run || !p->supports || p->kernel_count < 1)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "kernel provider '%s': name, run and supports are required and "
                          "kernel_count must be at least 1",
                          p->name ? p->name : "?");
  atomic_store(&g_provider, p);
  return TNRT_OK;
}

const tnrt_kernel_provider_t *tnrt_kernel_provider(void) { return atomic_load(&g_provider); }

int tnrt_kernel_supported(int32_t kernel, const tnrt_kernel_query_t *q) {
  const tnrt_kernel_provider_t *p = atomic_load(&g_provider);
  if (!p || kernel < 0 || kernel >= p->kernel_count) return 0;
  return p->supports(p->ctx, kernel, q) != 0;
}

typedef struct kernel_header {
  const tnrt_kernel_provider_t *provider;
  int32_t kernel, reserved;
} kernel_header_t;
_Static_assert(sizeof(kernel_header_t) == TNRT_TASK_ARGS_MAX - TNRT_KERNEL_ARGS_MAX,
               "the launch header is the 16 bytes provider.h reserves");

static void run_kernel(void *p) {
  kernel_header_t *h = p;
  h->provider->run(h->provider->ctx, h->kernel, (char *)p + sizeof *h);
}

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
  _Alignas(16) unsigned char slot[TNRT_TASK_ARGS_MAX];
  kernel_header_t h = {p, kernel, 0};
  memcpy(slot, &h, sizeof h);
  if (args_size) memcpy(slot + sizeof h, args, args_size);
  size_t size = sizeof h + args_size;
  if (small) return tnrt_launch_small(s, run_kernel, slot, size, name, seq);
  return seq ? tnrt_launch_seq(s, run_kernel, slot, size, name, seq)
             : tnrt_launch(s, run_kernel, slot, size, name);
}
