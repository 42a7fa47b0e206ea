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
  tnrt_status_t st = g_rt.hal->queue_create(g_rt.hal->context, s->device,
                                            s->index, &s->queue);
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
  if (!s)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "null stream");
  if (tnrt_in_bad_fork())
    return tnrt_set_error(TNRT_ERR_FORKED,
                          "the neuron runtime cannot be used in a forked "
                          "subprocess");
  *q = tnrt_stream_queue(s);
  if (!*q)
    return tnrt_set_error(g_queue_status[s->device] ? g_queue_status[s->device]
                                                    : TNRT_ERR_INTERNAL,
                          "stream %d of neuron:%d could not be started",
                          s->index, s->device);
  return TNRT_OK;
}

/* ---- device-side faults --------------------------------------------------- */

typedef struct fault {
  atomic_int state; /* 0 none, 1 being written, 2 pending */
  int kind;
  const char *what;
  int64_t value, bound;
} fault_t;
static fault_t g_faults[TNRT_MAX_DEVICES];

void tnrt_stream_fault(void *stream, int kind, const char *what, int64_t value,
                       int64_t bound) {
  tnrt_stream_t *s = stream;
  if (!s || s->device < 0 || s->device >= TNRT_MAX_DEVICES) return;
  fault_t *f = &g_faults[s->device];
  int expected = 0; /* the first fault wins; later ones are dropped */
  if (!atomic_compare_exchange_strong(&f->state, &expected, 1)) return;
  f->kind = kind;
  f->what = what;
  f->value = value;
  f->bound = bound;
  atomic_store(&f->state, 2);
}

tnrt_status_t tnrt_take_fault(int device) {
  if (device < 0 || device >= TNRT_MAX_DEVICES) return TNRT_OK;
  fault_t *f = &g_faults[device];
  int pending = 2; /* claim it, so two synchronising threads report it once */
  if (!atomic_compare_exchange_strong(&f->state, &pending, 1)) return TNRT_OK;
  int kind = f->kind;
  const char *what = f->what;
  int64_t value = f->value, bound = f->bound;
  atomic_store(&f->state, 0);
  if (kind == TNRT_FAULT_ZERO_DIVISION)
    return tnrt_set_error(TNRT_ERR_DEVICE_ASSERT,
                          "ZeroDivisionError: integer division by zero in %s "
                          "on neuron:%d (reported at this synchronisation)",
                          what, device);
  return tnrt_set_error(
      kind == TNRT_FAULT_INDEX ? TNRT_ERR_DEVICE_INDEX : TNRT_ERR_DEVICE_ASSERT,
      "%s: index %lld is out of bounds for size %lld (found by the kernel "
      "on neuron:%d and reported at this synchronisation; run with "
      "NEURON_LAUNCH_BLOCKING=1 to raise at the op itself)",
      what, (long long)value, (long long)bound, device);
}

tnrt_status_t tnrt_launch(tnrt_stream_t *s, tnrt_task_fn fn, const void *args,
                          size_t args_size, const char *name) {
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  uint64_t seq;
  st = g_rt.hal->queue_submit(q, fn, args, args_size, name, &seq);
  if (st == TNRT_OK && g_rt.launch_blocking) {
    g_rt.hal->queue_wait(q, seq);
    st = tnrt_take_fault(s->device);
  }
  return st;
}

tnrt_status_t tnrt_stream_wait(tnrt_stream_t *s) {
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  g_rt.hal->queue_wait(q, g_rt.hal->queue_submitted(q));
  return TNRT_OK;
}

tnrt_status_t tnrt_stream_synchronize(tnrt_stream_t *s) {
  tnrt_status_t st = tnrt_stream_wait(s);
  return st != TNRT_OK ? st : tnrt_take_fault(s->device);
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
  tnrt_status_t st = tnrt_device_wait(device);
  return st != TNRT_OK ? st : tnrt_take_fault(device);
}

/* ---- events ------------------------------------------------------------ */

struct tnrt_event {
  int flags;
  tnrt_stream_t *stream; /* NULL until recorded */
  uint64_t seq;          /* sequence number of the record marker */
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
  uint64_t seq;
  if (e->flags & TNRT_EVENT_TIMING) {
    st = g_rt.hal->queue_submit(q, marker_task, &e, sizeof e, "event_record",
                                &seq);
  } else {
    st = g_rt.hal->queue_submit(q, nop_task, NULL, 0, "event_record", &seq);
  }
  if (st != TNRT_OK) return st;
  e->stream = s;
  e->seq = seq;
  if (g_rt.launch_blocking) g_rt.hal->queue_wait(q, seq);
  return TNRT_OK;
}

typedef struct wait_args {
  tnrt_hal_queue_t *target;
  uint64_t seq;
} wait_args_t;

static void wait_task(void *p) {
  wait_args_t *a = p;
  g_rt.hal->queue_wait(a->target, a->seq);
}

tnrt_status_t tnrt_stream_wait_event(tnrt_stream_t *s, tnrt_event_t *e) {
  if (!e->stream) return TNRT_OK;
  if (e->stream == s) return TNRT_OK; /* same stream: already ordered */
  tnrt_hal_queue_t *q;
  tnrt_status_t st = usable(s, &q);
  if (st != TNRT_OK) return st;
  wait_args_t a = {tnrt_stream_queue(e->stream), e->seq};
  if (g_rt.hal->queue_completed(a.target) >= a.seq) return TNRT_OK;
  return tnrt_launch(s, wait_task, &a, sizeof a, "stream_wait_event");
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
  return tnrt_take_fault(e->stream->device);
}

int tnrt_event_device(const tnrt_event_t *e) {
  return e->stream ? e->stream->device : -1;
}

tnrt_status_t tnrt_event_elapsed_ms(tnrt_event_t *start, tnrt_event_t *end,
                                    double *ms) {
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
  *ms = (double)(atomic_load(&end->time_ns) - atomic_load(&start->time_ns)) /
        1e6;
  return TNRT_OK;
}
