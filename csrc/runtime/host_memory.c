/* Pinned host memory. On the software device every host page is reachable,
 * so "pinned" means: tracked, so that is_pinned() answers, non_blocking
 * copies may return before they run, and a free is deferred until the
 * streams that still read or write the buffer have passed that work (the
 * job CUDA's caching host allocator does with events). */
#include "internal.h"

#include <stdlib.h>

#define MAX_USES 4

typedef struct pinned {
  uintptr_t base;
  size_t size;
  int freed, n_uses;
  tnrt_stream_t *uses[MAX_USES];
  uint64_t use_seq[MAX_USES];
} pinned_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pinned_t *g_pins; /* guarded by g_mu */
static size_t g_n, g_cap;

static pinned_t *find(uintptr_t p) {
  for (size_t i = 0; i < g_n; i++)
    if (p >= g_pins[i].base && p < g_pins[i].base + g_pins[i].size) return &g_pins[i];
  return NULL;
}

static int busy(const pinned_t *x) {
  for (int i = 0; i < x->n_uses; i++)
    if (tnrt_stream_completed(x->uses[i]) < x->use_seq[i]) return 1;
  return 0;
}

/* Releases freed buffers whose streams have moved on. Caller holds g_mu. */
static void reap(void) {
  for (size_t i = 0; i < g_n;) {
    if (g_pins[i].freed && !busy(&g_pins[i])) {
      free((void *)g_pins[i].base);
      g_pins[i] = g_pins[--g_n];
    } else {
      i++;
    }
  }
}

void *tnrt_host_alloc(size_t bytes) {
  size_t size = bytes ? (bytes + 63) / 64 * 64 : 64;
  void *p = aligned_alloc(64, size);
  if (!p) return NULL;
  pthread_mutex_lock(&g_mu);
  reap();
  if (g_n == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 64;
    pinned_t *n = realloc(g_pins, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_mu);
      free(p);
      return NULL;
    }
    g_pins = n;
    g_cap = cap;
  }
  g_pins[g_n++] = (pinned_t){.base = (uintptr_t)p, .size = size};
  pthread_mutex_unlock(&g_mu);
  return p;
}

void tnrt_host_free(void *ptr) {
  if (!ptr) return;
  pthread_mutex_lock(&g_mu);
  pinned_t *x = find((uintptr_t)ptr);
  if (x) x->freed = 1;
  reap();
  pthread_mutex_unlock(&g_mu);
}

int tnrt_host_is_pinned(const void *ptr) {
  pthread_mutex_lock(&g_mu);
  pinned_t *x = find((uintptr_t)ptr);
  int pinned = x && !x->freed;
  pthread_mutex_unlock(&g_mu);
  return pinned;
}

tnrt_status_t tnrt_host_record_stream(const void *ptr, tnrt_stream_t *s) {
  pthread_mutex_lock(&g_mu);
  pinned_t *x = find((uintptr_t)ptr);
  if (x) {
    uint64_t seq = tnrt_stream_submitted(s);
    int i = 0;
    while (i < x->n_uses && x->uses[i] != s) i++;
    if (i == x->n_uses && i == MAX_USES) {
      /* No slot left: wait for the oldest user instead of losing track. */
      tnrt_stream_wait(x->uses[0]);
      i = 0;
    } else if (i == x->n_uses) {
      x->n_uses++;
    }
    x->uses[i] = s;
    x->use_seq[i] = seq;
  }
  pthread_mutex_unlock(&g_mu);
  return TNRT_OK;
}
