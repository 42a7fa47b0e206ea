/* The kernel-provider interface: what runs a device's kernels. The HAL
 * (hal.h) is the boundary for memory and ordering; a provider is the
 * boundary for compute. The runtime knows kernels only as small integer ids
 * and argument descriptors of fixed size, copied into the task slot at
 * launch; which ids exist and what each descriptor holds is the kernel
 * library's list (kernels/kernel_list.h), and a provider maps the ids to
 * the code that runs them: the host provider (kernels/provider.c) to the
 * tnk_* functions on the host cores; a device's own kernel library, or a
 * test's wrapper, the same way (docs/ARCHITECTURE.md, "A kernel provider").
 * ggml's backend interface (graph_compute, supports_op) is the model.
 *
 * No torch header, no kernel header: C, for drivers and tests alike. */
#ifndef TNRT_PROVIDER_H
#define TNRT_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "tnrt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TNRT_PROVIDER_API_VERSION 1

/* What a support query names: the kernel's operation code and dtypes as its
 * descriptor would carry them (-1: not applicable). */
typedef struct tnrt_kernel_query {
  int32_t op, dtype, dtype2, mode;
} tnrt_kernel_query_t;

typedef struct tnrt_kernel_provider {
  int api_version; /* TNRT_PROVIDER_API_VERSION */
  const char *name;
  int32_t kernel_count; /* ids 0 .. kernel_count-1 are defined */
  /* 1 when its tasks run on host cores with device memory readable while
   * they run, so host-code tasks (Inductor's C++, users' C kernels, host
   * copies in collectives) may run in its queues; 0 for a device that runs
   * only its own kernels. */
  int runs_host_code;
  /* 1 when it runs kernel `kernel` for the query; never called with an id
   * outside [0, kernel_count). */
  int (*supports)(void *ctx, int32_t kernel, const tnrt_kernel_query_t *q);
  /* Runs kernel `kernel` over its descriptor, in stream order, on the
   * device's queue (or in place on the launching thread, for a small
   * kernel on an idle stream: then the descriptor is the launcher's own).
   * It reads the descriptor and never writes it. Faults go through
   * tnrt_fault as any task's. */
  void (*run)(void *ctx, int32_t kernel, void *args);
  void *ctx;
} tnrt_kernel_provider_t;

/* The most kernel ids a provider may define. */
#define TNRT_MAX_KERNELS 64

/* Makes p the provider of every device. A kernel task runs with the
 * provider in use when it runs: set it before the first launch (aten sets
 * it once), or synchronize the devices before changing it. p must live
 * until process exit. INVALID_ARGUMENT, naming the fault, for a NULL p, an
 * api_version other than TNRT_PROVIDER_API_VERSION, a missing entry or a
 * kernel_count outside 1..TNRT_MAX_KERNELS. */
tnrt_status_t tnrt_set_kernel_provider(const tnrt_kernel_provider_t *p);
/* The provider in use; NULL until one is set. */
const tnrt_kernel_provider_t *tnrt_kernel_provider(void);
/* 1 when the provider in use runs kernel for q (0 with none set). */
int tnrt_kernel_supported(int32_t kernel, const tnrt_kernel_query_t *q);

/* Bytes of a kernel descriptor a launch carries (a task's inline
 * arguments: the descriptor is the task's argument block, as it is). */
#define TNRT_KERNEL_ARGS_MAX TNRT_TASK_ARGS_MAX

/* Queues kernel `kernel` of the provider in use on s with its descriptor
 * (args_size bytes, copied), as tnrt_launch queues a task; small: as
 * tnrt_launch_small (may run at once on an idle stream); *seq as for
 * tnrt_launch_seq (may be NULL). INVALID_ARGUMENT for an id the provider
 * does not define or a descriptor over TNRT_KERNEL_ARGS_MAX; NOT_SUPPORTED
 * when no provider is set. */
tnrt_status_t tnrt_launch_kernel(tnrt_stream_t *s, int32_t kernel, const void *args,
                                 size_t args_size, const char *name, int small, uint64_t *seq);

#ifdef __cplusplus
}
#endif

#endif
