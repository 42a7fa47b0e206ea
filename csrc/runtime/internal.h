/* Runtime-private declarations shared by the runtime's translation units. */
#ifndef TNRT_INTERNAL_H
#define TNRT_INTERNAL_H

#include "hal.h"
#include "tnrt.h"

#include <pthread.h>
#include <stdatomic.h>

struct tnrt_stream {
  int device, index;
  pthread_once_t once;
  tnrt_hal_queue_t *queue; /* created on first use */
  /* a sticky device-side fault (stream.c): has_fault is the lock-free hint,
   * fault/fault_seq are guarded by stream.c's fault mutex */
  atomic_int has_fault;
  struct fault_rec *fault;
  uint64_t fault_seq;
  /* threads that exited with tasks still queued here: a fault of one of
   * those tasks has nobody left to tell (stream.c, under the fault mutex) */
  struct orphan *orphans;
  int n_orphans, cap_orphans;
  /* What the queue's tail holds (stream.c, tnrt_stream_wait_event): the
   * sequence number of the last task that is not a stream wait, and the
   * stream every wait queued after it waits on (NULL: none, or more than
   * one stream). Guarded by tail_mu, held across a submission. */
  pthread_mutex_t tail_mu;
  uint64_t last_work;
  struct tnrt_stream *tail_waits_on;
  int tail_waits;
  /* The graph being captured (graph.c): while set, launches append to it
   * instead of queueing. Guarded by tail_mu. */
  struct tnrt_graph *capture;
};

/* Global runtime state, written once by tnrt_init under g_init_once. */
typedef struct tnrt_runtime {
  const tnrt_hal_t *hal;
  int device_count;
  tnrt_device_props_t props[TNRT_MAX_DEVICES];
  uint64_t capacity[TNRT_MAX_DEVICES];
  int launch_blocking;
  uint64_t host_budget;   /* device memory all devices together may reserve */
  tnrt_stream_t *streams; /* device_count * TNRT_STREAMS_PER_DEVICE */
} tnrt_runtime_t;

extern tnrt_runtime_t g_rt;

/* Sets the thread-local error detail; returns status for tail calls. */
tnrt_status_t tnrt_set_error(tnrt_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* TNRT_OK when the runtime is usable and device is in range. */
tnrt_status_t tnrt_check_device(int device);
tnrt_hal_queue_t *tnrt_stream_queue(tnrt_stream_t *s);
/* Records a task in a graph being captured (graph.c; the caller holds the
 * stream's tail_mu). */
tnrt_status_t tnrt_graph_append(struct tnrt_graph *g, tnrt_task_fn fn, const void *args,
                                size_t size, const char *name);

/* Selects the HAL and reads its devices into rt (device.c). */
tnrt_status_t tnrt_configure_devices(tnrt_runtime_t *rt);

/* Allocator lifecycle (allocator.c). */
void tnrt_allocator_init(int device_count);

/* Places the calling device-queue worker on the CPU of the pool's first
 * participant when the pool pins its threads (pool.c). */
void tnrt_pin_queue_worker(void);

/* Tracing hook called by queue workers (trace.c). */
extern atomic_int g_trace_enabled;
void tnrt_trace_push(const tnrt_trace_record_t *rec);

#endif
