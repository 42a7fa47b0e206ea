/* Streams and events with CUDA's semantics, on top of HAL queues. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static tnrt_status_t g_queue_status[TNRT_MAX_DEVICES];

tnrt_stream_t *tnrt_stream_get(int device, int index) {
  if (tnrt_check_device(device) != TNRT_OK) return NULL;
  if (index < 0 || index >= TNRT_STREAMS_PER_DEVICE) return NULL;
  return &g_rt.streams[device * TNRT_STREAMS_PER_DEVICE + index];
}

int tnrt_stream_device(const tnrt_stream_t *s) { return s->device; }
int tnrt_stream_index(const tnrt_stream_t *s) { return s->index; }

/* pthread_once has no argument, so the stream being created is passed in a
 * thread-local: once-routines run on the calling thread. */
static _Thread_local tnrt_stream_t *t_creating;

static void create_queue(void) {
  tnrt_stream_t *s = t_creating;
  pthread_mutex_init(&s->tail_mu, NULL);
  tnrt_status_t st = g_rt.hal->queue_create(g_rt.hal->context, s->device, s->index, &s->queue);
  if (st != TNRT_OK) g_queue_status[s->device] = st;
}

tnrt_hal_queue_t *tnrt_stream_queue(tnrt_stream_t *s) {
  if (!s->queue) {
    t_creating = s;
    pthread_once(&s->once, create_queue);
  }
  return s->queue;
}

static tnrt_status_t usable(tnrt_stream_t *s, tnrt_hal_queue_t **q) {
  if (!s) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "null stream");
  if (tnrt_in_bad_fork())
    return tnrt_set_error(TNRT_ERR_FORKED,
                          "the neuron runtime cannot be used in a forked "
                          "subprocess");
  *q = tnrt_stream_queue(s);
  if (!*q)
    return tnrt_set_error(g_queue_status[s->device] ? g_queue_status[s->device] : TNRT_ERR_INTERNAL,
                          "stream %d of neuron:%d could not be started", s->index, s->device);
  return TNRT_OK;
}

/* ---- device-side faults ---------------------------------------------------
 * A fault belongs to the stream whose task met it, at that task's sequence
 * number, and remembers the host thread that launched the task. It is sticky,
 * as CUDA's device-side asserts are: every synchronisation that covers the
 * faulting task (stream, event or device synchronize, a query that finds the
 * stream idle, a launch under NEURON_LAUNCH_BLOCKING) raises it, in any
 * thread, until it has been raised in the thread that launched the faulting
 * work; then it is cleared and the device is usable again. A stream that
 * waits on a faulted stream's event inherits the fault (the data it consumes
 * is wrong), so the error follows the data to whoever reads it. Faults are
 * rare: their bookkeeping takes one global mutex; the common no-fault path
 * reads one atomic per stream. */

typedef struct fault_rec {
  int active; /* cleared once raised in the launching thread */
  int refs;   /* streams holding it */
  int kind, device;
  const char *what;
  int64_t value, bound;
  uint32_t origin; /* tnrt_thread_token() of the launching thread */
} fault_rec_t;

static pthread_mutex_t g_fault_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint g_next_token;
static _Thread_local uint32_t t_token;
static pthread_key_t g_token_key;
static pthread_once_t g_token_once = PTHREAD_ONCE_INIT;

/* A thread that exited with tasks up to seq still queued on a stream. */
struct orphan {
  uint32_t token;
  uint64_t seq;
};

/* A thread that exits leaves its faults to whoever synchronises next
 * (origin 0): there is nobody else left to tell. That covers the faults
 * already recorded, and, through the stream's orphan list, those its queued
 * tasks have yet to find. */
static void token_thread_exit(void *p) {
  uint32_t token = (uint32_t)(uintptr_t)p;
  pthread_mutex_lock(&g_fault_mu);
  int n = g_rt.streams ? g_rt.device_count * TNRT_STREAMS_PER_DEVICE : 0;
  for (int i = 0; i < n; i++) {
    tnrt_stream_t *s = &g_rt.streams[i];
    struct fault_rec *r = s->fault;
    if (r && r->origin == token) r->origin = 0;
    if (!s->queue) continue;
    uint64_t submitted = g_rt.hal->queue_submitted(s->queue);
    uint64_t completed = g_rt.hal->queue_completed(s->queue);
    /* forget the exited threads whose tasks have all run */
    int k = 0;
    for (int j = 0; j < s->n_orphans; j++)
      if (s->orphans[j].seq > completed) s->orphans[k++] = s->orphans[j];
    s->n_orphans = k;
    if (submitted <= completed) continue;
    if (s->n_orphans == s->cap_orphans) {
      int cap = s->cap_orphans ? 2 * s->cap_orphans : 4;
      struct orphan *grown = realloc(s->orphans, (size_t)cap * sizeof *grown);
      if (!grown) abort(); /* cannot lose a fault's owner */
      s->orphans = grown;
      s->cap_orphans = cap;
    }
    s->orphans[s->n_orphans++] = (struct orphan){token, submitted};
  }
  pthread_mutex_unlock(&g_fault_mu);
}

/* Under g_fault_mu: the origin a fault found at seq on s is reported
 * with, 0 when its thread has exited. */
static uint32_t live_origin(const tnrt_stream_t *s, uint32_t origin, uint64_t seq) {
  for (int j = 0; j < s->n_orphans; j++)
    if (s->orphans[j].token == origin && seq <= s->orphans[j].seq) return 0;
  return origin;
}

static void token_key_create(void) { pthread_key_create(&g_token_key, token_thread_exit); }

uint32_t tnrt_thread_token(void) {
  if (!t_token) {
    t_token = atomic_fetch_add(&g_next_token, 1) + 1;
    pthread_once(&g_token_once, token_key_create);
    pthread_setspecific(g_token_key, (void *)(uintptr_t)t_token);
  }
  return t_token;
}

/* Under g_fault_mu. */
static void drop_fault(tnrt_stream_t *s) {
  fault_rec_t *r = s->fault;
  s->fault = NULL;
  s->fault_seq = 0;
  atomic_store(&s->has_fault, 0);
  if (r && --r->refs == 0) free(r);
}

/* Under g_fault_mu: s takes r at seq unless it holds an active fault (the
 * first one wins). */
static void attach_fault(tnrt_stream_t *s, fault_rec_t *r, uint64_t seq) {
  if (s->fault && s->fault->active) return;
  if (s->fault) drop_fault(s);
  r->refs++;
  s->fault = r;
  s->fault_seq = seq;
  atomic_store(&s->has_fault, 1);
}

/* The sequence number of the task running on s (called from that task). */
static uint64_t running_seq(tnrt_stream_t *s) {
  return s->queue ? g_rt.hal->queue_completed(s->queue) + 1 : 0;
}

void tnrt_stream_fault(void *stream, int kind, const char *what, int64_t value, int64_t bound,
                       uint32_t origin) {
  tnrt_stream_t *s = stream;
  if (!s) return;
  fault_rec_t *r = calloc(1, sizeof *r);
  if (!r) abort(); /* cannot lose a fault */
  uint64_t seq = running_seq(s);
  pthread_mutex_lock(&g_fault_mu);
  *r = (fault_rec_t){1, 0, kind, s->device, what, value, bound, live_origin(s, origin, seq)};
  attach_fault(s, r, seq);
  if (r->refs == 0) free(r);
  pthread_mutex_unlock(&g_fault_mu);
}

/* Stream s, having waited for target up to seq, inherits a fault of the
 * work waited for, at its own sequence number at_seq. */
static void inherit_fault(tnrt_stream_t *s, tnrt_stream_t *target, uint64_t seq, uint64_t at_seq) {
  if (!atomic_load(&target->has_fault)) return;
  pthread_mutex_lock(&g_fault_mu);
  fault_rec_t *r = target->fault;
  if (r && r->active && target->fault_seq <= seq) attach_fault(s, r, at_seq);
  pthread_mutex_unlock(&g_fault_mu);
}

/* TNRT_OK, or the fault of s if the work up to seq covers it (raising it in
 * its launching thread clears it). */
static tnrt_status_t stream_fault_status(tnrt_stream_t *s, uint64_t seq) {
  if (!atomic_load(&s->has_fault)) return TNRT_OK;
  pthread_mutex_lock(&g_fault_mu);
  fault_rec_t *r = s->fault;
  if (r && !r->active) {
    drop_fault(s);
    r = NULL;
  }
  if (!r || s->fault_seq > seq) {
    pthread_mutex_unlock(&g_fault_mu);
    return TNRT_OK;
  }
  fault_rec_t f = *r;
  int mine = f.origin == 0 || f.origin == tnrt_thread_token();
  if (mine) {
    r->active = 0;
    drop_fault(s);
  }
  pthread_mutex_unlock(&g_fault_mu);
  const char *whose = mine ? "" : " (launched from another host thread)";
  if (f.kind == TNRT_FAULT_MESSAGE)
    return tnrt_set_error(TNRT_ERR_DEVICE_ASSERT,
                          "%s (found by the kernel on neuron:%d%s and reported "
                          "at this synchronisation; run with "
                          "NEURON_LAUNCH_BLOCKING=1 to raise at the op itself)",
                          f.what, f.device, whose);
  if (f.kind == TNRT_FAULT_ZERO_DIVISION)
    return tnrt_set_error(TNRT_ERR_DEVICE_ASSERT,
                          "ZeroDivisionError: integer division by zero in %s "
                          "on neuron:%d%s (reported at this synchronisation)",
                          f.what, f.device, whose);
  return tnrt_set_error(f.kind == TNRT_FAULT_INDEX ? TNRT_ERR_DEVICE_INDEX : TNRT_ERR_DEVICE_ASSERT,
                        "%s: index %lld is out of bounds for size %lld (found by the kernel "
                        "on neuron:%d%s and reported at this synchronisation; run with "
                        "NEURON_LAUNCH_BLOCKING=1 to raise at the op itself)",
                        f.what, (long long)f.value, (long long)f.bound, f.device, whose);
}

static tnrt_status_t device_fault_status(int device) {
  for (int i = 0; i < TNRT_STREAMS_PER_DEVICE; i++) {
    tnrt_status_t st =
        stream_fault_status(&g_rt.streams[device * TNRT_STREAMS_PER_DEVICE + i], UINT64_MAX);
    if (st != TNRT_OK) return st;
  }
  return TNRT_OK;
}

/* Submits a task; waits_on: the stream a stream-wait task waits on, NULL
 * for any other task (the tail record tnrt_stream_wait_event reads). */
static tnrt_status_t submit(tnrt_stream_t *s, tnrt_hal_queue_t *q, tnrt_task_fn fn,
                            const void *args, size_t args_size, const char *name,
                            tnrt_stream_t *waits_on, uint64_t *seq, int small) {
  pthread_mutex_lock(&s->tail_mu);
  if (small && !s->capture && g_rt.hal->queue_run_inline &&
      g_rt.hal->queue_run_inline(q, fn, args, name, seq)) {
    s->last_work = *seq;
    s->tail_waits = 0;
    s->tail_waits_on = NULL;
    pthread_mutex_unlock(&s->tail_mu);
    return TNRT_OK;
  }
  if (s->capture) {
    tnrt_status_t st =
        waits_on ? tnrt_set_error(TNRT_ERR_NOT_SUPPORTED,
                                  "a capturing stream cannot wait on another stream's pending "
                                  "work (make it wait before the capture begins)")
                 : tnrt_graph_append(s->capture, fn, args, args_size, name);
    *seq = 0;
    pthread_mutex_unlock(&s->tail_mu);
    return st;
  }
  tnrt_status_t st = g_rt.hal->queue_submit(q, fn, args, args_size, name, seq);
  if (st == TNRT_OK && !waits_on) {
    s->last_work = *seq;
    s->tail_waits = 0;
    s->tail_waits_on = NULL;
  } else if (st == TNRT_OK) {
    s->tail_waits_on = !s->tail_waits || s->tail_waits_on == waits_on ? waits_on : NULL;
    s->tail_waits = 1;
  }
  pthread_mutex_unlock(&s->tail_mu);
  return st;
}

static tnrt_status_t launch(tnrt_stream_t *s, tnrt_task_fn fn, const void *args, size_t args_size,
                            const char *name, tnrt_stream_t *waits_on, uint64_t *out_seq,
                            int small) {
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  uint64_t seq;
  st = submit(s, q, fn, args, args_size, name, waits_on, &seq, small);
  if (st == TNRT_OK && out_seq) *out_seq = seq;
  if (st == TNRT_OK && seq && g_rt.launch_blocking) {
    g_rt.hal->queue_wait(q, seq);
    st = stream_fault_status(s, seq);
  }
  return st;
}

tnrt_status_t tnrt_launch_seq(tnrt_stream_t *s, tnrt_task_fn fn, const void *args, size_t args_size,
                              const char *name, uint64_t *out_seq) {
  return launch(s, fn, args, args_size, name, NULL, out_seq, 0);
}

tnrt_status_t tnrt_launch(tnrt_stream_t *s, tnrt_task_fn fn, const void *args, size_t args_size,
                          const char *name) {
  return launch(s, fn, args, args_size, name, NULL, NULL, 0);
}

tnrt_status_t tnrt_launch_small(tnrt_stream_t *s, tnrt_task_fn fn, const void *args,
                                size_t args_size, const char *name, uint64_t *out_seq) {
  return launch(s, fn, args, args_size, name, NULL, out_seq, 1);
}

tnrt_status_t tnrt_stream_wait(tnrt_stream_t *s) {
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  g_rt.hal->queue_wait(q, g_rt.hal->queue_submitted(q));
  return TNRT_OK;
}

static tnrt_status_t not_while_capturing(const char *what, int device, int index) {
  return tnrt_set_error(TNRT_ERR_NOT_SUPPORTED,
                        "%s is not permitted while stream %d of device %d is capturing a graph",
                        what, index, device);
}

tnrt_status_t tnrt_stream_synchronize(tnrt_stream_t *s) {
  if (tnrt_stream_is_capturing(s))
    return not_while_capturing("synchronizing the stream", s->device, s->index);
  tnrt_status_t st = tnrt_stream_wait(s);
  return st != TNRT_OK ? st : stream_fault_status(s, UINT64_MAX);
}

uint64_t tnrt_stream_submitted(tnrt_stream_t *s) {
  return s->queue ? g_rt.hal->queue_submitted(s->queue) : 0;
}

uint64_t tnrt_stream_completed(tnrt_stream_t *s) {
  return s->queue ? g_rt.hal->queue_completed(s->queue) : 0;
}

int tnrt_stream_query(tnrt_stream_t *s) {
  return tnrt_stream_completed(s) >= tnrt_stream_submitted(s);
}

tnrt_status_t tnrt_stream_query_status(tnrt_stream_t *s, int *idle) {
  if (!s) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "null stream");
  uint64_t done = tnrt_stream_completed(s);
  *idle = done >= tnrt_stream_submitted(s);
  return stream_fault_status(s, done);
}

tnrt_status_t tnrt_device_wait(int device) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  for (int i = 0; i < TNRT_STREAMS_PER_DEVICE; i++) {
    tnrt_stream_t *s = &g_rt.streams[device * TNRT_STREAMS_PER_DEVICE + i];
    if (s->queue) g_rt.hal->queue_wait(s->queue, tnrt_stream_submitted(s));
  }
  return TNRT_OK;
}

tnrt_status_t tnrt_device_synchronize(int device) {
  if (tnrt_device_is_capturing(device)) {
    for (int i = 0; i < TNRT_STREAMS_PER_DEVICE; i++)
      if (tnrt_stream_is_capturing(&g_rt.streams[device * TNRT_STREAMS_PER_DEVICE + i]))
        return not_while_capturing("synchronizing the device", device, i);
  }
  tnrt_status_t st = tnrt_device_wait(device);
  return st != TNRT_OK ? st : device_fault_status(device);
}

/* ---- events ------------------------------------------------------------ */

struct tnrt_event {
  int flags;
  tnrt_stream_t *stream;   /* NULL until recorded */
  uint64_t seq;            /* sequence number of the record marker */
  _Atomic int64_t time_ns; /* written by the marker of the last record */
};

tnrt_event_t *tnrt_event_create(int flags) {
  tnrt_event_t *e = calloc(1, sizeof *e);
  if (e) e->flags = flags;
  return e;
}

void tnrt_event_destroy(tnrt_event_t *e) {
  if (!e) return;
  /* A pending timing marker still points at e. */
  if (e->stream && (e->flags & TNRT_EVENT_TIMING)) tnrt_event_synchronize(e);
  free(e);
}

static void marker_task(void *p) {
  tnrt_event_t *e = *(tnrt_event_t **)p;
  atomic_store(&e->time_ns, tnrt_now_ns());
}

static void nop_task(void *p) { (void)p; }

tnrt_status_t tnrt_event_record(tnrt_event_t *e, tnrt_stream_t *s) {
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  if (tnrt_stream_is_capturing(s))
    return not_while_capturing("recording an event", s->device, s->index);
  uint64_t seq;
  if (e->flags & TNRT_EVENT_TIMING) {
    st = submit(s, q, marker_task, &e, sizeof e, "event_record", NULL, &seq, 0);
  } else {
    st = submit(s, q, nop_task, NULL, 0, "event_record", NULL, &seq, 0);
  }
  if (st != TNRT_OK) return st;
  e->stream = s;
  e->seq = seq;
  if (g_rt.launch_blocking) g_rt.hal->queue_wait(q, seq);
  return TNRT_OK;
}

tnrt_status_t tnrt_event_record_last(tnrt_event_t *e, tnrt_stream_t *s) {
  if (e->flags & TNRT_EVENT_TIMING) return tnrt_event_record(e, s);
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  if (tnrt_stream_is_capturing(s))
    return not_while_capturing("recording an event", s->device, s->index);
  e->stream = s;
  e->seq = g_rt.hal->queue_submitted(q);
  return TNRT_OK;
}

typedef struct wait_args {
  tnrt_stream_t *self, *target;
  uint64_t seq;
} wait_args_t;

static void wait_task(void *p) {
  wait_args_t *a = p;
  g_rt.hal->queue_wait(a->target->queue, a->seq);
  inherit_fault(a->self, a->target, a->seq, running_seq(a->self));
}

tnrt_status_t tnrt_stream_wait_event(tnrt_stream_t *s, tnrt_event_t *e) {
  if (!e->stream) return TNRT_OK;
  if (e->stream == s) return TNRT_OK; /* same stream: already ordered */
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  wait_args_t a = {s, e->stream, e->seq};
  /* When the event's stream has, since its last work, only waited on s
   * (s's earlier tasks, which run before anything queued on s now), s
   * needs only that work: without this, two streams handing work back and
   * forth (a collective on the communication stream, the caller's stream
   * waiting on it) would each wait on the other's wait, one thread waking
   * another at every step. */
  pthread_mutex_lock(&e->stream->tail_mu);
  if (e->stream->last_work <= a.seq && e->stream->tail_waits && e->stream->tail_waits_on == s)
    a.seq = e->stream->last_work;
  pthread_mutex_unlock(&e->stream->tail_mu);
  if (g_rt.hal->queue_completed(tnrt_stream_queue(e->stream)) >= a.seq) {
    /* already passed: inherit a fault at once, ordered before s's next task */
    inherit_fault(s, e->stream, a.seq, tnrt_stream_submitted(s) + 1);
    return TNRT_OK;
  }
  return launch(s, wait_task, &a, sizeof a, "stream_wait_event", e->stream, NULL, 0);
}

int tnrt_event_query(tnrt_event_t *e) {
  if (!e->stream) return 1;
  return tnrt_stream_completed(e->stream) >= e->seq;
}

tnrt_status_t tnrt_event_synchronize(tnrt_event_t *e) {
  if (!e->stream) return TNRT_OK;
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(e->stream, &q);
  if (st != TNRT_OK) return st;
  g_rt.hal->queue_wait(q, e->seq);
  return stream_fault_status(e->stream, e->seq);
}

int tnrt_event_device(const tnrt_event_t *e) { return e->stream ? e->stream->device : -1; }

tnrt_status_t tnrt_event_elapsed_ms(tnrt_event_t *start, tnrt_event_t *end, double *ms) {
  if (!(start->flags & TNRT_EVENT_TIMING) || !(end->flags & TNRT_EVENT_TIMING))
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "both events must be created with "
                          "enable_timing=True to measure elapsed time");
  if (!start->stream || !end->stream)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "both events must be recorded before measuring "
                          "elapsed time");
  tnrt_status_t st = tnrt_event_synchronize(start);
  if (st == TNRT_OK) st = tnrt_event_synchronize(end);
  if (st != TNRT_OK) return st;
  *ms = (double)(atomic_load(&end->time_ns) - atomic_load(&start->time_ns)) / 1e6;
  return TNRT_OK;
}

tnrt_status_t tnrt_device_busy_ns(int device, uint64_t *busy_ns) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  *busy_ns = 0;
  if (!g_rt.hal->queue_busy_ns)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "the %s HAL does not report device utilization", g_rt.hal->name);
  for (int i = 0; i < TNRT_STREAMS_PER_DEVICE; i++) {
    tnrt_stream_t *s = &g_rt.streams[device * TNRT_STREAMS_PER_DEVICE + i];
    if (s->queue) *busy_ns += g_rt.hal->queue_busy_ns(s->queue);
  }
  return TNRT_OK;
}
