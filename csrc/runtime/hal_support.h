/* What the runtime offers a HAL (hal.h). A HAL built as its own shared
 * library is loaded with RTLD_LOCAL and cannot link against the runtime, so
 * the runtime hands it this table before any other call: through the
 * library's optional TNRT_HAL_SUPPORT_ENTRY, or tnrt_hal_host_support for
 * the software NeuronCore built in. A HAL calls nothing else of the
 * runtime's. */
#ifndef TNRT_HAL_SUPPORT_H
#define TNRT_HAL_SUPPORT_H

#include "tnrt.h"

#define TNRT_HAL_SUPPORT_VERSION 1

typedef struct tnrt_hal_support {
  uint32_t version; /* TNRT_HAL_SUPPORT_VERSION */
  /* Leaves a message for tnrt_last_error() on the calling thread and
   * returns status: how a HAL entry reports why it failed. */
  tnrt_status_t (*set_error)(tnrt_status_t status, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
  /* The runtime's monotonic clock in ns (tnrt_now_ns: events, traces). */
  int64_t (*now_ns)(void);
  /* Records a finished task for the profiler; a HAL calls it only while
   * trace_enabled() says a trace is on. */
  int (*trace_enabled)(void);
  void (*trace_task)(const tnrt_trace_record_t *rec);
  /* Called on a queue's worker thread when it starts, so that the runtime
   * can place it beside the kernel thread pool (TORCH_NEURONX_PIN_THREADS). */
  void (*pin_queue_worker)(void);
} tnrt_hal_support_t;

/* The optional symbol of a HAL library: void tnrt_hal_support(const
 * tnrt_hal_support_t *), called once, before TNRT_HAL_ENTRY's table is used. */
#define TNRT_HAL_SUPPORT_ENTRY "tnrt_hal_support"
typedef void (*tnrt_hal_support_fn)(const tnrt_hal_support_t *support);

/* The software NeuronCore's (csrc/neuroncore): its table and its support hook. */
const struct tnrt_hal *tnrt_hal_host(void);
void tnrt_hal_host_support(const tnrt_hal_support_t *support);

#endif
