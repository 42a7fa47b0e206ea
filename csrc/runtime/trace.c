/* Task tracing for the profiler: queue workers append one record per task
 * while tracing is on. The buffer is fixed-size; overflow drops records. */
#include "internal.h"

#include <string.h>

#define TRACE_CAP 65536

atomic_int g_trace_enabled;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static tnrt_trace_record_t g_buf[TRACE_CAP]; /* guarded by g_mu */
static size_t g_n;

void tnrt_trace_push(const tnrt_trace_record_t *rec) {
  pthread_mutex_lock(&g_mu);
  if (g_n < TRACE_CAP) g_buf[g_n++] = *rec;
  pthread_mutex_unlock(&g_mu);
}

void tnrt_trace_start(void) {
  pthread_mutex_lock(&g_mu);
  g_n = 0;
  pthread_mutex_unlock(&g_mu);
  atomic_store(&g_trace_enabled, 1);
}

size_t tnrt_trace_stop(tnrt_trace_record_t *out, size_t max) {
  atomic_store(&g_trace_enabled, 0);
  pthread_mutex_lock(&g_mu);
  size_t n = g_n < max ? g_n : max;
  if (n) memcpy(out, g_buf, n * sizeof *out);
  g_n = 0;
  pthread_mutex_unlock(&g_mu);
  return n;
}
