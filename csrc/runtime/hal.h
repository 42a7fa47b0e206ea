/* Hardware abstraction layer: the device boundary. Everything the runtime
 * and the layers above do to a device goes through this table: what the
 * devices are, their memory, moving bytes in and out of it, and queues of
 * tasks. One implementation ships (csrc/neuroncore: the software NeuronCore,
 * host memory and host worker threads); a driver plugs in by filling the
 * same table, built into the library or loaded from a shared library named
 * by TORCH_NEURONX_HAL (it exports TNRT_HAL_ENTRY, and may export
 * TNRT_HAL_SUPPORT_ENTRY to receive what it may call of the runtime:
 * hal_support.h). A HAL calls nothing else of the runtime.
 *
 * Device tasks (tnrt_launch) run on the device: there they may dereference
 * device pointers, and host memory the caller keeps alive (transfers from
 * pinned buffers are tasks). Host code outside tasks must not dereference
 * device pointers unless host_addressable() says so; it moves bytes with
 * the memcpy/memset entries instead. */
#ifndef TNRT_HAL_H
#define TNRT_HAL_H

#include "tnrt.h"

#define TNRT_HAL_API_VERSION 3

typedef struct tnrt_hal_queue tnrt_hal_queue_t;

typedef struct tnrt_hal {
  /* TNRT_HAL_API_VERSION as the implementation was built; tnrt_init refuses
   * a table of another version. */
  uint32_t api_version;
  const char *name;
  void *context;

  /* Devices: how many, and what each is. Errors carry their message
   * (tnrt_set_error) and make tnrt_init fail with it. */
  tnrt_status_t (*device_count)(void *ctx, int *count);
  tnrt_status_t (*get_properties)(void *ctx, int device, tnrt_device_props_t *out);
  /* optional: bytes all devices together may reserve, for devices whose
   * memory is one shared pool (the software core's is the host's RAM);
   * NULL: each device's total_memory bounds it alone. */
  uint64_t (*memory_budget)(void *ctx);

  /* Device memory: segments handed to the caching allocator. */
  tnrt_status_t (*mem_alloc)(void *ctx, int device, size_t bytes, void **out);
  void (*mem_free)(void *ctx, int device, void *ptr, size_t bytes);
  /* optional (NULL: the runtime reports TNRT_ERR_NOT_SUPPORTED): device
   * memory other processes of the host can map (tnrt.h, "device memory
   * other processes map"). mem_alloc_shared fills *handle; mem_free releases
   * the allocation; mem_import maps another process's allocation, which
   * mem_unimport unmaps. */
  tnrt_status_t (*mem_alloc_shared)(void *ctx, int device, size_t bytes, void **out,
                                    tnrt_mem_handle_t *handle);
  tnrt_status_t (*mem_import)(void *ctx, int device, const tnrt_mem_handle_t *handle, void **out,
                              size_t *bytes);
  void (*mem_unimport)(void *ctx, int device, void *ptr, size_t bytes);

  /* Nonzero when host code may dereference device pointers directly (the
   * layers above then read device memory in place instead of staging it
   * through memcpy_d2h). */
  int (*host_addressable)(void *ctx);
  /* Synchronous transfers between host memory and device memory, and within
   * a device. The caller orders them: the device work that uses the memory
   * has finished (a stream synchronisation) or is queued after them. */
  tnrt_status_t (*memcpy_h2d)(void *ctx, int device, void *dst, const void *src, size_t bytes);
  tnrt_status_t (*memcpy_d2h)(void *ctx, int device, void *dst, const void *src, size_t bytes);
  tnrt_status_t (*memcpy_d2d)(void *ctx, int device, void *dst, const void *src, size_t bytes);
  tnrt_status_t (*memset_d)(void *ctx, int device, void *dst, int value, size_t bytes);

  /* Queues: in-order execution of tasks. seq numbers start at 1. */
  tnrt_status_t (*queue_create)(void *ctx, int device, int index, tnrt_hal_queue_t **out);
  /* Copies args; returns the task's sequence number in *seq. */
  tnrt_status_t (*queue_submit)(tnrt_hal_queue_t *q, tnrt_task_fn fn, const void *args, size_t size,
                                const char *name, uint64_t *seq);
  /* optional: runs fn(args) at once on the calling thread, as the queue's
   * next task (*seq), when nothing is queued or running, and returns 1;
   * returns 0, having run nothing, otherwise. NULL: the device never runs
   * tasks on host threads (a real device). */
  int (*queue_run_inline)(tnrt_hal_queue_t *q, tnrt_task_fn fn, const void *args, const char *name,
                          uint64_t *seq);
  uint64_t (*queue_completed)(tnrt_hal_queue_t *q);
  uint64_t (*queue_submitted)(tnrt_hal_queue_t *q);
  /* Blocks until every task with sequence number <= seq has run. */
  void (*queue_wait)(tnrt_hal_queue_t *q, uint64_t seq);

  /* optional: nanoseconds the queue has spent running tasks (utilization);
   * NULL when the device cannot tell. */
  uint64_t (*queue_busy_ns)(tnrt_hal_queue_t *q);
} tnrt_hal_t;

/* The software NeuronCore (csrc/neuroncore/hal_host.c; hal_support.h
 * declares its entry points). */

/* The symbol a HAL shared library exports: a function returning its table
 * (TORCH_NEURONX_HAL=/path/to/libhal.so selects it at tnrt_init). */
#define TNRT_HAL_ENTRY "tnrt_hal_entry"
typedef const tnrt_hal_t *(*tnrt_hal_entry_fn)(void);

#endif
