/* Hardware abstraction layer: the only place the runtime touches a device.
 * One implementation today (hal_host.c: host memory and host worker threads);
 * a real Neuron driver plugs in by filling the same table. */
#ifndef TNRT_HAL_H
#define TNRT_HAL_H

#include "tnrt.h"

#define TNRT_HAL_API_VERSION 1

typedef struct tnrt_hal_queue tnrt_hal_queue_t;

typedef struct tnrt_hal {
  uint32_t api_version;
  const char *name;
  void *context;

  /* optional: properties reported by hardware; NULL means the runtime
   * models them from the environment (device.c). */
  tnrt_status_t (*get_properties)(void *ctx, int device,
                                  tnrt_device_props_t *out);

  /* Device memory: segments handed to the caching allocator. */
  tnrt_status_t (*mem_alloc)(void *ctx, int device, size_t bytes, void **out);
  void (*mem_free)(void *ctx, int device, void *ptr, size_t bytes);

  /* Queues: in-order execution of tasks. seq numbers start at 1. */
  tnrt_status_t (*queue_create)(void *ctx, int device, int index,
                                tnrt_hal_queue_t **out);
  /* Copies args; returns the task's sequence number in *seq. */
  tnrt_status_t (*queue_submit)(tnrt_hal_queue_t *q, tnrt_task_fn fn,
                                const void *args, size_t size,
                                const char *name, uint64_t *seq);
  uint64_t (*queue_completed)(tnrt_hal_queue_t *q);
  uint64_t (*queue_submitted)(tnrt_hal_queue_t *q);
  /* Blocks until every task with sequence number <= seq has run. */
  void (*queue_wait)(tnrt_hal_queue_t *q, uint64_t seq);

  /* optional: nanoseconds the queue has spent running tasks (utilization);
   * NULL when the device cannot tell. */
  uint64_t (*queue_busy_ns)(tnrt_hal_queue_t *q);

  /* optional: host-visible copies; NULL means plain memcpy works. */
  void (*memcpy_d2h)(void *ctx, void *dst, const void *src, size_t n);
} tnrt_hal_t;

const tnrt_hal_t *tnrt_hal_host(void);

#endif
