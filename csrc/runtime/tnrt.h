/* TorchNeuron runtime (tnrt): devices, device memory, streams, events and the
 * host thread pool of the software NeuronCore. C11, no torch headers.
 *
 * Conventions: functions that can fail return tnrt_status_t and, on failure,
 * leave a human-readable detail in tnrt_last_error() (thread-local). Unless a
 * comment says otherwise every function is thread-safe. Handles
 * (tnrt_stream_t, tnrt_block_t, tnrt_event_t) are opaque. */
#ifndef TNRT_H
#define TNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tnrt_status {
  TNRT_OK = 0,
  TNRT_ERR_INVALID_ARGUMENT,
  TNRT_ERR_INVALID_DEVICE,
  TNRT_ERR_OUT_OF_MEMORY,
  TNRT_ERR_FORKED, /* runtime used in a child forked after init */
  TNRT_ERR_CONFIG, /* bad environment configuration */
  TNRT_ERR_NOT_READY,
  TNRT_ERR_INTERNAL,
  TNRT_ERR_DEVICE_INDEX,  /* a kernel met an index out of range (IndexError) */
  TNRT_ERR_DEVICE_ASSERT, /* a kernel met other bad data (RuntimeError) */
  TNRT_ERR_NOT_SUPPORTED, /* the HAL in use does not offer the operation */
} tnrt_status_t;

/* ---- limits and fault kinds, shared with the kernel library (tnk.h) ---- */

/* Dimensions of a tensor view a kernel takes (more fall back to the CPU). */
#define TNRT_MAX_DIMS 12
/* The most devices a HAL may report. */
#define TNRT_MAX_DEVICES 128
/* How a kernel that meets bad data reports it (tnk_fault_t.kind, and
 * tnrt_stream_fault's kind): INDEX an index out of range (IndexError),
 * ASSERT other bad data (RuntimeError), ZERO_DIVISION an integer division by
 * zero (ZeroDivisionError), MESSAGE: `what` is the whole message
 * (RuntimeError). */
typedef enum tnrt_fault_kind {
  TNRT_FAULT_INDEX = 0,
  TNRT_FAULT_ASSERT = 1,
  TNRT_FAULT_ZERO_DIVISION = 2,
  TNRT_FAULT_MESSAGE = 3,
} tnrt_fault_kind_t;

const char *tnrt_status_to_string(tnrt_status_t status);
/* Detail of the last failure on the calling thread ("" if none). */
const char *tnrt_last_error(void);

/* ---- initialisation and devices -------------------------------------- */

/* Reads the environment once and creates the logical devices. Idempotent. */
tnrt_status_t tnrt_init(void);
int tnrt_is_initialized(void);
/* 1 when this process is a fork() child of a process that had initialised
 * the runtime: its worker threads do not exist here. */
int tnrt_in_bad_fork(void);
/* Number of visible logical NeuronCores; 0 when init failed. Never fails. */
int tnrt_device_count(void);

#define TNRT_NAME_MAX 64

typedef struct tnrt_device_props {
  char name[TNRT_NAME_MAX]; /* e.g. "trn2 NeuronCore-v3 (software)" */
  char instance_model[16];  /* "trn2" or "trn3" */
  uint64_t total_memory;    /* HBM bytes owned by this logical core
                                      (the model's, capped by the host) */
  uint64_t modelled_memory; /* the device model's HBM per core */
  uint32_t generation;      /* Trainium generation: 2 or 3 */
  uint32_t physical_cores;  /* physical cores fused into this one (LNC) */
  uint32_t logical_cores_per_chip;
  uint32_t chip;            /* chip this core lives on */
  uint32_t global_core_id;  /* id before NEURON_RT_VISIBLE_CORES */
  double hbm_bandwidth_gbs; /* per logical core, GB/s (modelled) */
  double bf16_tflops;       /* per logical core, dense (modelled) */
} tnrt_device_props_t;

tnrt_status_t tnrt_device_properties(int device, tnrt_device_props_t *out);
/* The HAL in use ("host": the software NeuronCore). */
const char *tnrt_hal_name(void);

/* ---- moving bytes -------------------------------------------------------- */

/* Whether host code may dereference device pointers directly. When 0 (a
 * discrete device, or the host HAL under TORCH_NEURONX_PROTECT_DEVICE_MEMORY)
 * host code reads and writes device memory only with these transfers and
 * device tasks. */
int tnrt_host_addressable(void);
/* Synchronous copies through the HAL between host memory and the memory of
 * `device`; the caller has ordered them after the device work that uses
 * the same memory (a stream synchronisation). */
tnrt_status_t tnrt_memcpy_d2h(int device, void *dst, const void *src, size_t bytes);
tnrt_status_t tnrt_memcpy_h2d(int device, void *dst, const void *src, size_t bytes);

/* ---- device memory other processes map ----------------------------------
 * CUDA IPC's model: memory allocated with tnrt_mem_alloc_shared is named by
 * a handle, plain bytes another process of this host passes to
 * tnrt_mem_import (the same HAL) to map the same memory; both see each
 * other's writes, ordered by the caller (streams of both processes
 * synchronised). The exporter keeps the allocation alive until every
 * importer has unmapped it; the software NeuronCore's memory is a memfd
 * (nothing named in /dev/shm, nothing left behind by a crash), imported
 * through /proc/<pid>/fd while the exporter lives. The collectives and
 * tensors sent to other processes use it. */
#define TNRT_MEM_HANDLE_BYTES 64
typedef struct tnrt_mem_handle {
  unsigned char bytes[TNRT_MEM_HANDLE_BYTES]; /* meaningful to the HAL only */
} tnrt_mem_handle_t;
tnrt_status_t tnrt_mem_alloc_shared(int device, size_t bytes, void **ptr,
                                    tnrt_mem_handle_t *handle);
void tnrt_mem_free_shared(int device, void *ptr, size_t bytes);
/* *ptr: the memory, *bytes: its size. TNRT_ERR_INVALID_ARGUMENT when the
 * handle names nothing this process can map (the exporter has exited). */
tnrt_status_t tnrt_mem_import(int device, const tnrt_mem_handle_t *handle, void **ptr,
                              size_t *bytes);
void tnrt_mem_unimport(int device, void *ptr, size_t bytes);

/* While on, the caching allocator takes its NEW segments from the HAL's
 * shared memory (as tnrt_mem_alloc_shared; a HAL without it keeps giving
 * private memory), so tensors allocated then can be read in place by other
 * processes (the collectives' direct path). Segments already allocated are
 * unchanged. tnrt_init turns it on when TORCH_NEURONX_SHARED_DEVICE_MEMORY
 * is set and not "0", or, unset, when LOCAL_WORLD_SIZE > 1 (ranks torchrun
 * started on this host); the c10d backend turns it on when a process group
 * has more than one rank on this host (unless the variable is "0"). */
void tnrt_set_shared_segments(int on);
/* When ptr lies in an allocator segment that came from shared memory:
 * *handle names the segment (for tnrt_mem_import), *offset is ptr's offset
 * in it and *generation a per-process counter that increases whenever a
 * shared segment is released (an importer that sees it change drops its
 * cached mappings). TNRT_ERR_NOT_SUPPORTED otherwise (private device
 * memory, host memory), without setting an error message. Cheap: a lookup
 * in the allocator's segment registry. Any output may be NULL. */
tnrt_status_t tnrt_mem_shared_handle(const void *ptr, tnrt_mem_handle_t *handle, size_t *offset,
                                     uint64_t *generation);

/* ---- streams ----------------------------------------------------------- */

typedef struct tnrt_stream tnrt_stream_t;
typedef void (*tnrt_task_fn)(void *args);

/* Streams per device: index 0 is the default stream, 1.. a pool handed out
 * round-robin by the C++ layer (like CUDA's stream pool), and the top
 * TNRT_COMM_STREAMS the collectives' own streams (as NCCL's are not in the
 * pool), one per process group, round-robin. */
#define TNRT_STREAMS_PER_DEVICE 32
#define TNRT_COMM_STREAMS 4
/* Bytes of arguments a task may carry inline (copied at launch). */
/* (1056: a task slot of the host HAL is 1088 bytes, 17 cache lines, with
 * its 32-byte header; the largest kernel descriptor, three copies of
 * tnk_copy_batch_args_t, takes 992) */
#define TNRT_TASK_ARGS_MAX 1056

/* NULL when device/index is out of range. Streams live until process exit. */
tnrt_stream_t *tnrt_stream_get(int device, int index);
int tnrt_stream_device(const tnrt_stream_t *s);
int tnrt_stream_index(const tnrt_stream_t *s);

/* Enqueue fn(args) on stream s; args (args_size bytes) are copied inline, so
 * the caller's buffer may be reused at once. No heap allocation. name must be
 * a string with static lifetime (it labels the task in traces). Blocks only
 * when the stream's queue is full, or always under NEURON_LAUNCH_BLOCKING=1. */
tnrt_status_t tnrt_launch(tnrt_stream_t *s, tnrt_task_fn fn, const void *args, size_t args_size,
                          const char *name);
/* tnrt_launch that also returns the task's sequence number on s (the
 * profiler links the launch to the task's trace record with it). */
tnrt_status_t tnrt_launch_seq(tnrt_stream_t *s, tnrt_task_fn fn, const void *args, size_t args_size,
                              const char *name, uint64_t *seq);
/* tnrt_launch of a task that takes less time than handing it to the device
 * costs (a kernel over a few elements): a device that can (the software
 * NeuronCore) runs it at once on the calling thread when s has nothing
 * queued or running and its worker sleeps, which keeps the stream's order;
 * otherwise it is
 * queued as by tnrt_launch. *seq as for tnrt_launch_seq (may be NULL). */
tnrt_status_t tnrt_launch_small(tnrt_stream_t *s, tnrt_task_fn fn, const void *args,
                                size_t args_size, const char *name, uint64_t *seq);
/* Waits until every task launched on s so far has run. */
tnrt_status_t tnrt_stream_synchronize(tnrt_stream_t *s);
/* 1 when every task launched on s so far has run. */
int tnrt_stream_query(tnrt_stream_t *s);
/* Sequence number of the last task launched / completed on s. */
uint64_t tnrt_stream_submitted(tnrt_stream_t *s);
uint64_t tnrt_stream_completed(tnrt_stream_t *s);
tnrt_status_t tnrt_device_synchronize(int device);
/* Nanoseconds the device's streams have spent running tasks (summed over
 * streams), for utilization: use differences between calls. Small tasks run
 * in place on the launching thread are counted from the first call on. */
tnrt_status_t tnrt_device_busy_ns(int device, uint64_t *busy_ns);
int tnrt_launch_blocking(void);

/* ---- device-side faults ---------------------------------------------------
 * CUDA's device-side asserts: a kernel that meets bad data (an index out of
 * range) skips it and reports a fault instead of touching memory it must
 * not. The fault belongs to the stream that ran the task (the first one of a
 * stream wins) and is sticky: every synchronisation that covers the faulting
 * task returns it, with its message in tnrt_last_error() -
 * tnrt_stream_synchronize, tnrt_device_synchronize, tnrt_event_synchronize
 * of a later record, tnrt_stream_query_status once the stream is idle, the
 * launch itself under NEURON_LAUNCH_BLOCKING=1 - in whichever thread, until
 * it has been returned in the thread that launched the faulting task (origin,
 * tnrt_thread_token()); then it is cleared and the device stays usable. A
 * stream that waits on an event covering a fault inherits it. Results of the
 * faulting op are unspecified but in bounds. */
/* (the fault kinds, TNRT_FAULT_*, are with the limits at the top) */
/* Callable from a task; stream is the tnrt_stream_t* the task runs on (as a
 * void* so kernels can carry it without this header). what must have static
 * lifetime; the message is "<what>: index <value> is out of bounds for size
 * <bound>"; kind INDEX reports TNRT_ERR_DEVICE_INDEX, kind ASSERT
 * TNRT_ERR_DEVICE_ASSERT (the callers' IndexError vs RuntimeError); kind
 * ZERO_DIVISION reports TNRT_ERR_DEVICE_ASSERT "ZeroDivisionError". */
void tnrt_stream_fault(void *stream, int kind, const char *what, int64_t value, int64_t bound,
                       uint32_t origin);
/* A nonzero token naming the calling host thread (the origin of its work). */
uint32_t tnrt_thread_token(void);
/* *idle = tnrt_stream_query(s); returns the fault of the work done so far. */
tnrt_status_t tnrt_stream_query_status(tnrt_stream_t *s, int *idle);
/* Wait like the synchronize calls but leave a pending fault for the user's
 * next synchronisation (for internal waits: allocator, profiler). */
tnrt_status_t tnrt_stream_wait(tnrt_stream_t *s);
tnrt_status_t tnrt_device_wait(int device);

/* ---- graphs: capture and replay (graph.c) -----------------------------
 * torch.cuda.CUDAGraph's model. Between begin and end capture, tasks
 * launched on the stream (from any thread) are recorded, not run: the
 * stream's queue does not advance. Synchronising the stream or its device,
 * recording an event on it, or making it wait on another stream's pending
 * work fails while it captures (TNRT_ERR_NOT_SUPPORTED), as in CUDA.
 * tnrt_graph_launch queues the recording as one task on s (of the capture's
 * device) that runs the tasks in order, each on a fresh copy of its
 * arguments. Device-side faults of replayed tasks are reported on the
 * stream they were captured on. Memory the tasks use must outlive the
 * graph (the caller's concern). tnrt_graph_destroy waits for the graph's
 * last replay. */
typedef struct tnrt_graph tnrt_graph_t;
tnrt_status_t tnrt_stream_begin_capture(tnrt_stream_t *s);
tnrt_status_t tnrt_stream_end_capture(tnrt_stream_t *s, tnrt_graph_t **graph);
int tnrt_stream_is_capturing(tnrt_stream_t *s);
int tnrt_device_is_capturing(int device);
tnrt_status_t tnrt_graph_launch(tnrt_graph_t *g, tnrt_stream_t *s);
size_t tnrt_graph_task_count(const tnrt_graph_t *g);
void tnrt_graph_destroy(tnrt_graph_t *g);

/* ---- events ------------------------------------------------------------ */

typedef struct tnrt_event tnrt_event_t;
enum { TNRT_EVENT_DEFAULT = 0, TNRT_EVENT_TIMING = 1 };

/* Caller owns the event; destroy waits for a pending record to finish. */
tnrt_event_t *tnrt_event_create(int flags);
void tnrt_event_destroy(tnrt_event_t *e);
tnrt_status_t tnrt_event_record(tnrt_event_t *e, tnrt_stream_t *s);
/* Records e at the last task launched on s so far, launching nothing (a
 * plain event: a timing event is recorded as by tnrt_event_record). For the
 * glue's internal ordering, where a marker task would only add latency. */
tnrt_status_t tnrt_event_record_last(tnrt_event_t *e, tnrt_stream_t *s);
/* Makes future work on s wait for e's last record (no-op if never recorded). */
tnrt_status_t tnrt_stream_wait_event(tnrt_stream_t *s, tnrt_event_t *e);
int tnrt_event_query(tnrt_event_t *e);
tnrt_status_t tnrt_event_synchronize(tnrt_event_t *e);
/* Milliseconds between two recorded timing events; waits for both. */
tnrt_status_t tnrt_event_elapsed_ms(tnrt_event_t *start, tnrt_event_t *end, double *ms);
int tnrt_event_device(const tnrt_event_t *e); /* -1 before the first record */

/* ---- device memory (caching allocator) -------------------------------- */

typedef struct tnrt_block tnrt_block_t;

/* Allocate bytes on device, for use on stream s (NULL: default stream).
 * On success *ptr is 64-byte aligned (NULL for 0 bytes) and *block is the
 * handle to free it with. On TNRT_ERR_OUT_OF_MEMORY the cache was flushed and
 * the allocation retried once. */
tnrt_status_t tnrt_malloc(int device, size_t bytes, tnrt_stream_t *s, void **ptr,
                          tnrt_block_t **block);
/* Stream-ordered free: the memory may be reused at once by later work on the
 * allocation stream, and by others after the streams given to
 * tnrt_record_stream have passed their current work. NULL is a no-op. */
void tnrt_free(tnrt_block_t *block);
/* The bytes a block holds (its request rounded up) and its device. */
size_t tnrt_block_size(const tnrt_block_t *block);
void *tnrt_block_ptr(const tnrt_block_t *block);
int tnrt_block_device(const tnrt_block_t *block);
tnrt_status_t tnrt_record_stream(tnrt_block_t *block, tnrt_stream_t *s);
/* Device owning the address, or -1 if it is not device memory. */
int tnrt_ptr_device(const void *ptr);
/* Synchronizes the device and returns unused cached segments to the HAL. */
tnrt_status_t tnrt_empty_cache(int device);

enum { TNRT_POOL_ALL = 0, TNRT_POOL_SMALL = 1, TNRT_POOL_LARGE = 2, TNRT_POOL_COUNT = 3 };
typedef struct tnrt_stat {
  int64_t current, peak, allocated, freed;
} tnrt_stat_t;
typedef struct tnrt_memory_stats {
  tnrt_stat_t allocation[TNRT_POOL_COUNT];
  tnrt_stat_t segment[TNRT_POOL_COUNT];
  tnrt_stat_t active[TNRT_POOL_COUNT];
  tnrt_stat_t inactive_split[TNRT_POOL_COUNT];
  tnrt_stat_t allocated_bytes[TNRT_POOL_COUNT];
  tnrt_stat_t reserved_bytes[TNRT_POOL_COUNT];
  tnrt_stat_t active_bytes[TNRT_POOL_COUNT];
  tnrt_stat_t inactive_split_bytes[TNRT_POOL_COUNT];
  tnrt_stat_t requested_bytes[TNRT_POOL_COUNT];
  int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;
  int64_t max_split_size;
} tnrt_memory_stats_t;

tnrt_status_t tnrt_memory_stats(int device, tnrt_memory_stats_t *out);
tnrt_status_t tnrt_reset_peak_stats(int device);
tnrt_status_t tnrt_reset_accumulated_stats(int device);
/* free = capacity - reserved, total = capacity (modelled HBM). */
/* The allocator's state, segment by segment with their blocks in address
 * order (for memory snapshots). The callbacks run under the allocator's
 * lock: they must not allocate device memory. */
typedef struct tnrt_segment_info {
  uint64_t address, size;
  int pool;         /* TNRT_POOL_SMALL / TNRT_POOL_LARGE */
  int stream;       /* index of the stream the segment was allocated for */
  uint64_t mempool; /* 0, or the MemPool the segment belongs to */
} tnrt_segment_info_t;
typedef struct tnrt_block_info {
  uint64_t address, size, requested;
  int allocated;
} tnrt_block_info_t;
typedef void (*tnrt_segment_fn)(void *ctx, const tnrt_segment_info_t *segment);
typedef void (*tnrt_block_fn)(void *ctx, const tnrt_block_info_t *block);
tnrt_status_t tnrt_memory_walk(int device, tnrt_segment_fn on_segment, tnrt_block_fn on_block,
                               void *ctx);

/* Memory pools (torch.cuda.MemPool): between begin and end, the calling
 * thread's allocations on device come from segments of pool mempool (a
 * nonzero id), and its blocks are reused only by allocations to that pool;
 * release returns the pool's unused segments. */
tnrt_status_t tnrt_mempool_begin(int device, uint64_t mempool);
tnrt_status_t tnrt_mempool_end(int device);
tnrt_status_t tnrt_mempool_release(int device, uint64_t mempool);

/* The share of the device's capacity this process may reserve (0..1; 1 by
 * default), as torch.cuda.set_per_process_memory_fraction. */
tnrt_status_t tnrt_set_memory_fraction(int device, double fraction);
tnrt_status_t tnrt_get_memory_fraction(int device, double *fraction);
tnrt_status_t tnrt_mem_get_info(int device, uint64_t *free_bytes, uint64_t *total_bytes);

/* ---- pinned host memory ------------------------------------------------ */

/* Page-locked (modelled) host memory for asynchronous copies. */
void *tnrt_host_alloc(size_t bytes);
/* Deferred until streams recorded with tnrt_host_record_stream pass. */
void tnrt_host_free(void *ptr);
int tnrt_host_is_pinned(const void *ptr);
tnrt_status_t tnrt_host_record_stream(const void *ptr, tnrt_stream_t *s);

/* ---- host thread pool -------------------------------------------------- */

typedef void (*tnrt_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Runs fn over [0, n) in chunks of at least grain on the shared pool; the
 * caller takes part. Falls back to running serially when the pool is busy,
 * so nested or concurrent calls never deadlock. */
void tnrt_parallel_for(int64_t n, int64_t grain, tnrt_range_fn fn, void *ctx);
int tnrt_num_threads(void);

/* Teams: OpenMP-style parallel regions on the same pool, for kernels that
 * torch.compile generates (their OpenMP calls are bound to these, see
 * torch_neuronx/_inductor.py), so generated and hand-written kernels share
 * one set of threads placed one per CPU. tnrt_team_run runs fn(data) on a
 * team of threads at once: the caller is thread 0, pool helpers the others.
 * nthreads 0 asks for the default team (the pool, at most one thread per
 * online CPU); a team never exceeds the pool. A nested call, or one that
 * finds the pool busy, runs a team of one: never a deadlock. Inside fn the
 * team's barrier, single construct and thread numbers are below; outside a
 * team they act as for a team of one. */
void tnrt_team_run(void (*fn)(void *), void *data, unsigned nthreads);
void tnrt_team_barrier(void);
int tnrt_team_single_start(void); /* 1 for the first thread to arrive */
int tnrt_team_thread_num(void);
int tnrt_team_num_threads(void);
int tnrt_team_max_threads(void); /* the default team's size */

/* The team functions as a table, for code that reaches them by address. */
typedef struct tnrt_team_ops {
  uint32_t size; /* sizeof(tnrt_team_ops_t) */
  void (*run)(void (*fn)(void *), void *data, unsigned nthreads);
  void (*barrier)(void);
  int (*single_start)(void);
  int (*thread_num)(void);
  int (*num_threads)(void);
  int (*max_threads)(void);
} tnrt_team_ops_t;
const tnrt_team_ops_t *tnrt_team_ops(void);

/* ---- tracing (profiler) ------------------------------------------------ */

typedef struct tnrt_trace_record {
  const char *name;
  int32_t device, stream;
  uint64_t seq;
  int64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
} tnrt_trace_record_t;

/* Starts recording every task's execution interval. */
void tnrt_trace_start(void);
/* Stops recording; returns how many records were copied to out (up to max);
 * the rest are dropped. */
size_t tnrt_trace_stop(tnrt_trace_record_t *out, size_t max);
int64_t tnrt_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
