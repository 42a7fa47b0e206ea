/* Graph capture and replay (torch.cuda.CUDAGraph's model for the software
 * NeuronCore). Between tnrt_stream_begin_capture and _end_capture, tasks
 * launched on the stream are recorded (function, a copy of the arguments,
 * name) instead of queued; tnrt_graph_launch queues the whole recording as
 * one task that runs them in order, so a replay costs one launch however
 * many ops the graph holds. Memory the tasks touch is the caller's concern
 * (the Python layer captures into a private MemPool). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct graph_task {
  tnrt_task_fn fn;
  const char *name;
  size_t size;
  size_t offset; /* of the arguments in the graph's args buffer */
} graph_task_t;

struct tnrt_graph {
  int device;
  graph_task_t *tasks;
  size_t n, cap;
  unsigned char *args; /* every task's arguments, 16-byte aligned each */
  size_t args_len, args_cap;
  /* the last replay (tnrt_graph_destroy waits for it) */
  pthread_mutex_t mu;
  tnrt_stream_t *last_stream;
  uint64_t last_seq;
};

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

tnrt_status_t tnrt_graph_append(tnrt_graph_t *g, tnrt_task_fn fn, const void *args, size_t size,
                                const char *name) {
  if (size > TNRT_TASK_ARGS_MAX)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "task arguments of %zu bytes", size);
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 64;
    graph_task_t *t = realloc(g->tasks, cap * sizeof *t);
    if (!t) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "graph capture: task list");
    g->tasks = t;
    g->cap = cap;
  }
  size_t need = g->args_len + round16(size);
  if (need > g->args_cap) {
    size_t cap = g->args_cap ? 2 * g->args_cap : 4096;
    while (cap < need) cap *= 2;
    unsigned char *a = realloc(g->args, cap);
    if (!a) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "graph capture: arguments");
    g->args = a;
    g->args_cap = cap;
  }
  if (size) memcpy(g->args + g->args_len, args, size);
  g->tasks[g->n++] = (graph_task_t){fn, name, size, g->args_len};
  g->args_len = need;
  return TNRT_OK;
}

tnrt_status_t tnrt_stream_begin_capture(tnrt_stream_t *s) {
  if (!s) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "null stream");
  tnrt_graph_t *g = calloc(1, sizeof *g);
  if (!g) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "graph capture");
  g->device = tnrt_stream_device(s);
  pthread_mutex_init(&g->mu, NULL);
  pthread_mutex_lock(&s->tail_mu);
  int busy = s->capture != NULL;
  if (!busy) s->capture = g;
  pthread_mutex_unlock(&s->tail_mu);
  if (busy) {
    tnrt_graph_destroy(g);
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "stream %d of device %d is already capturing",
                          tnrt_stream_index(s), tnrt_stream_device(s));
  }
  return TNRT_OK;
}

tnrt_status_t tnrt_stream_end_capture(tnrt_stream_t *s, tnrt_graph_t **graph) {
  if (!s || !graph) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "null argument");
  pthread_mutex_lock(&s->tail_mu);
  tnrt_graph_t *g = s->capture;
  s->capture = NULL;
  pthread_mutex_unlock(&s->tail_mu);
  if (!g)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "stream %d of device %d is not capturing",
                          tnrt_stream_index(s), tnrt_stream_device(s));
  *graph = g;
  return TNRT_OK;
}

int tnrt_stream_is_capturing(tnrt_stream_t *s) {
  if (!s) return 0;
  pthread_mutex_lock(&s->tail_mu);
  int on = s->capture != NULL;
  pthread_mutex_unlock(&s->tail_mu);
  return on;
}

int tnrt_device_is_capturing(int device) {
  if (tnrt_check_device(device) != TNRT_OK) return 0;
  for (int i = 0; i < TNRT_STREAMS_PER_DEVICE; i++)
    if (tnrt_stream_is_capturing(&g_rt.streams[device * TNRT_STREAMS_PER_DEVICE + i])) return 1;
  return 0;
}

size_t tnrt_graph_task_count(const tnrt_graph_t *g) { return g ? g->n : 0; }

static void replay_task(void *p) {
  const tnrt_graph_t *g = *(tnrt_graph_t *const *)p;
  /* Each task gets a private copy of its arguments: tasks may write to
   * theirs (the compiled-kernel launcher does), and the recording must stay
   * as captured for the next replay. */
  _Alignas(16) unsigned char buf[TNRT_TASK_ARGS_MAX];
  for (size_t i = 0; i < g->n; i++) {
    const graph_task_t *t = &g->tasks[i];
    if (t->size) memcpy(buf, g->args + t->offset, t->size);
    t->fn(buf);
  }
}

tnrt_status_t tnrt_graph_launch(tnrt_graph_t *g, tnrt_stream_t *s) {
  if (!g || !s) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "null argument");
  if (tnrt_stream_device(s) != g->device)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "a graph captured on device %d replayed on a stream of device %d",
                          g->device, tnrt_stream_device(s));
  uint64_t seq = 0;
  tnrt_status_t st = tnrt_launch_seq(s, replay_task, &g, sizeof g, "graph_replay", &seq);
  if (st != TNRT_OK) return st;
  pthread_mutex_lock(&g->mu);
  g->last_stream = s;
  g->last_seq = seq;
  pthread_mutex_unlock(&g->mu);
  return TNRT_OK;
}

void tnrt_graph_destroy(tnrt_graph_t *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  tnrt_stream_t *s = g->last_stream;
  uint64_t seq = g->last_seq;
  pthread_mutex_unlock(&g->mu);
  if (s && seq) g_rt.hal->queue_wait(tnrt_stream_queue(s), seq); /* a replay still queued */
  pthread_mutex_destroy(&g->mu);
  free(g->tasks);
  free(g->args);
  free(g);
}
