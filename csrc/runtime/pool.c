/* The host thread pool shared by every device's kernels. Sized from the
 * CPUs this process may run on; TORCH_NEURONX_NUM_THREADS overrides. One job
 * runs at a time: a caller that finds the pool busy (another stream, or a
 * nested call) runs its range serially, so the pool can never deadlock. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_threads = 1;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_idle = PTHREAD_COND_INITIALIZER;
static atomic_flag g_busy = ATOMIC_FLAG_INIT;
/* g_job.generation, readable without g_mu by spinning helpers. */
static _Atomic uint64_t g_generation;

/* The current job; written by the owner of g_busy under g_mu. */
static struct {
  uint64_t generation;
  tnrt_range_fn fn;
  void *ctx;
  int64_t n, chunk, chunks;
  atomic_llong next, remaining;
  int active; /* workers inside the job, guarded by g_mu */
  int closed; /* all chunks done: late workers must not join (g_mu) */
} g_job;

static void run_chunks(tnrt_range_fn fn, void *ctx, int64_t n, int64_t chunk, int64_t chunks) {
  for (;;) {
    int64_t c = atomic_fetch_add(&g_job.next, 1);
    if (c >= chunks) return;
    int64_t b = c * chunk, e = b + chunk < n ? b + chunk : n;
    fn(ctx, b, e);
    atomic_fetch_sub(&g_job.remaining, 1);
  }
}

/* A helper that just finished a job spins this long for the next one before
 * it sleeps: kernels arrive back to back in a training step, and a futex
 * wake-up costs more than a small kernel. */
#define POOL_SPIN_NS 30000

/* Thread placement. When the pool has one thread per CPU this process may
 * use (the default), helper i runs on the i-th of those CPUs and the device
 * queue workers, which take part in every job as its first participant, on
 * the first: otherwise the scheduler's wake-up placement can put a waking
 * helper on the CPU of the queue worker that woke it, and a job then runs
 * at half speed until the load balancer moves one of them (measured: one
 * 64 MiB softmax in three taking 8.7 ms instead of 4.4 after a pause).
 * TORCH_NEURONX_PIN_THREADS=0 leaves placement to the scheduler. */
static int g_pin, g_ncpus, g_cpu_ids[256];
static void pool_init(void);

static void pin_to_slot(int slot) {
  if (!g_pin) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(g_cpu_ids[slot % g_ncpus], &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one); /* advice: ignore failure */
}

void tnrt_pin_queue_worker(void) {
  pthread_once(&g_once, pool_init);
  pin_to_slot(0);
}

static void *pool_worker(void *arg) {
  pthread_setname_np(pthread_self(), "neuron-pool"); /* for top, perf, gdb */
  pin_to_slot((int)(intptr_t)arg);
  uint64_t seen = 0;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    if (g_job.generation == seen) {
      pthread_mutex_unlock(&g_mu);
      int64_t until = tnrt_now_ns() + POOL_SPIN_NS;
      for (int spins = 0;; spins++) {
        if (atomic_load_explicit(&g_generation, memory_order_acquire) != seen) break;
        if (spins % 64 == 63 && tnrt_now_ns() > until) break;
        sched_yield();
      }
      pthread_mutex_lock(&g_mu);
    }
    while (g_job.generation == seen) pthread_cond_wait(&g_work, &g_mu);
    seen = g_job.generation;
    /* A worker that wakes after its job finished must not join it: the
     * owner may have returned (ctx is its stack) and the counters may soon
     * belong to the next job. */
    if (g_job.closed) continue;
    tnrt_range_fn fn = g_job.fn;
    void *ctx = g_job.ctx;
    int64_t n = g_job.n, chunk = g_job.chunk, chunks = g_job.chunks;
    g_job.active++;
    pthread_mutex_unlock(&g_mu);
    run_chunks(fn, ctx, n, chunk, chunks);
    pthread_mutex_lock(&g_mu);
    g_job.active--;
    pthread_cond_broadcast(&g_idle);
  }
  return NULL;
}

static void pool_init(void) {
  const char *v = getenv("TORCH_NEURONX_NUM_THREADS");
  int n = 0;
  if (v && *v) n = atoi(v);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0)
    for (int c = 0; c < CPU_SETSIZE && g_ncpus < 256; c++)
      if (CPU_ISSET(c, &cpus)) g_cpu_ids[g_ncpus++] = c;
  if (n <= 0) {
    n = g_ncpus;
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* ranks that torchrun started on this host share its cores */
    const char *lws = getenv("LOCAL_WORLD_SIZE");
    int share = lws && *lws ? atoi(lws) : 0;
    if (share > 1) n /= share;
    if (n <= 0) n = 1;
  }
  if (n > 256) n = 256;
  const char *pin = getenv("TORCH_NEURONX_PIN_THREADS");
  g_pin = n > 1 && n == g_ncpus && !(pin && strcmp(pin, "0") == 0);
  int started = 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 1; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, pool_worker, (void *)(intptr_t)i) == 0) started++;
  }
  pthread_attr_destroy(&attr);
  g_threads = started;
}

int tnrt_num_threads(void) {
  pthread_once(&g_once, pool_init);
  return g_threads;
}

void tnrt_parallel_for(int64_t n, int64_t grain, tnrt_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = tnrt_num_threads();
  if (threads == 1 || n <= grain || tnrt_in_bad_fork() || atomic_flag_test_and_set(&g_busy)) {
    fn(ctx, 0, n);
    return;
  }
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks > threads) chunks = threads;
  int64_t chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;
  pthread_mutex_lock(&g_mu);
  g_job.fn = fn;
  g_job.ctx = ctx;
  g_job.n = n;
  g_job.chunk = chunk;
  g_job.chunks = chunks;
  atomic_store(&g_job.next, 0);
  atomic_store(&g_job.remaining, chunks);
  g_job.closed = 0;
  g_job.generation++;
  atomic_store_explicit(&g_generation, g_job.generation, memory_order_release);
  pthread_cond_broadcast(&g_work);
  pthread_mutex_unlock(&g_mu);

  run_chunks(fn, ctx, n, chunk, chunks);
  while (atomic_load(&g_job.remaining) > 0) sched_yield();
  /* Workers that joined late must leave before the job can be reused. */
  pthread_mutex_lock(&g_mu);
  g_job.closed = 1;
  while (g_job.active) pthread_cond_wait(&g_idle, &g_mu);
  pthread_mutex_unlock(&g_mu);
  atomic_flag_clear(&g_busy);
}
