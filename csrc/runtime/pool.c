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
  int one;    /* a team: each thread runs at most one chunk (one member) */
} g_job;

static void run_chunks(tnrt_range_fn fn, void *ctx, int64_t n, int64_t chunk, int64_t chunks,
                       int one) {
  for (;;) {
    int64_t c = atomic_fetch_add(&g_job.next, 1);
    if (c >= chunks) return;
    int64_t b = c * chunk, e = b + chunk < n ? b + chunk : n;
    fn(ctx, b, e);
    atomic_fetch_sub(&g_job.remaining, 1);
    if (one) return;
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
static long g_online; /* online CPUs (what os.cpu_count() says) */
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
    int one = g_job.one;
    g_job.active++;
    pthread_mutex_unlock(&g_mu);
    run_chunks(fn, ctx, n, chunk, chunks, one);
    pthread_mutex_lock(&g_mu);
    g_job.active--;
    pthread_cond_broadcast(&g_idle);
  }
  return NULL;
}

static void pool_init(void) {
  g_online = sysconf(_SC_NPROCESSORS_ONLN);
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

/* Posts a job (the caller holds g_busy); chunks from `first` on are the
 * helpers' to take. */
static void post_job(tnrt_range_fn fn, void *ctx, int64_t n, int64_t chunk, int64_t chunks,
                     int64_t first, int one) {
  pthread_mutex_lock(&g_mu);
  g_job.fn = fn;
  g_job.ctx = ctx;
  g_job.n = n;
  g_job.chunk = chunk;
  g_job.chunks = chunks;
  g_job.one = one;
  atomic_store(&g_job.next, first);
  atomic_store(&g_job.remaining, chunks);
  g_job.closed = 0;
  g_job.generation++;
  atomic_store_explicit(&g_generation, g_job.generation, memory_order_release);
  pthread_cond_broadcast(&g_work);
  pthread_mutex_unlock(&g_mu);
}

/* Waits for every chunk, then for workers that joined late to leave, so the
 * job can be reused; releases g_busy. */
static void finish_job(void) {
  while (atomic_load(&g_job.remaining) > 0) sched_yield();
  pthread_mutex_lock(&g_mu);
  g_job.closed = 1;
  while (g_job.active) pthread_cond_wait(&g_idle, &g_mu);
  pthread_mutex_unlock(&g_mu);
  atomic_flag_clear(&g_busy);
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
  post_job(fn, ctx, n, chunk, chunks, 0, 0);
  run_chunks(fn, ctx, n, chunk, chunks, 0);
  finish_job();
}

/* ---- teams ----------------------------------------------------------------
 * A team is a job of one chunk per member in which a thread runs at most one
 * chunk, so its members run at once and can meet at barriers: the caller
 * runs member 0, and the pool has a helper for each other member because a
 * team is never larger than the pool and the caller holds the pool. */

typedef struct team {
  void (*fn)(void *);
  void *data;
  int n;
  atomic_int arrived;
  atomic_uint phase;   /* barriers passed */
  atomic_uint singles; /* single constructs taken */
} team_t;

static _Thread_local team_t *tl_team;
static _Thread_local int tl_num;
static _Thread_local unsigned tl_singles;

static void run_member(team_t *t, int num) {
  team_t *outer = tl_team;
  int outer_num = tl_num;
  unsigned outer_singles = tl_singles;
  tl_team = t;
  tl_num = num;
  tl_singles = 0;
  t->fn(t->data);
  tl_team = outer;
  tl_num = outer_num;
  tl_singles = outer_singles;
}

static void team_members(void *ctx, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) run_member(ctx, (int)i);
}

int tnrt_team_max_threads(void) {
  int n = tnrt_num_threads(); /* sets g_online (sysconf reads a file: 7 us) */
  return g_online > 0 && n > g_online ? (int)g_online : n;
}

void tnrt_team_run(void (*fn)(void *), void *data, unsigned nthreads) {
  int pool = tnrt_num_threads();
  int n = nthreads ? (nthreads < (unsigned)pool ? (int)nthreads : pool) : tnrt_team_max_threads();
  team_t t = {.fn = fn, .data = data, .n = n};
  if (n <= 1 || tl_team || tnrt_in_bad_fork() || atomic_flag_test_and_set(&g_busy)) {
    t.n = 1;
    run_member(&t, 0);
    return;
  }
  post_job(team_members, &t, n, 1, n, 1, 1);
  run_member(&t, 0);
  atomic_fetch_sub(&g_job.remaining, 1);
  finish_job();
}

void tnrt_team_barrier(void) {
  team_t *t = tl_team;
  if (!t || t->n <= 1) return;
  unsigned phase = atomic_load_explicit(&t->phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == t->n - 1) {
    atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->phase, 1, memory_order_release);
    return;
  }
  /* Members run on distinct CPUs: spin briefly, then yield (a member may
   * have been preempted by another process). */
  for (int spins = 0; atomic_load_explicit(&t->phase, memory_order_acquire) == phase; spins++) {
    if (spins >= 1024) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else
      __builtin_ia32_pause();
#endif
  }
}

int tnrt_team_single_start(void) {
  team_t *t = tl_team;
  if (!t || t->n <= 1) return 1;
  /* Every member meets the team's single constructs in the same order: the
   * k-th one goes to the first member to move the count from k - 1 to k. */
  unsigned mine = ++tl_singles, expected = mine - 1;
  return atomic_compare_exchange_strong(&t->singles, &expected, mine);
}

int tnrt_team_thread_num(void) { return tl_team ? tl_num : 0; }

int tnrt_team_num_threads(void) { return tl_team ? tl_team->n : 1; }

static const tnrt_team_ops_t g_team_ops = {
    .size = sizeof(tnrt_team_ops_t),
    .run = tnrt_team_run,
    .barrier = tnrt_team_barrier,
    .single_start = tnrt_team_single_start,
    .thread_num = tnrt_team_thread_num,
    .num_threads = tnrt_team_num_threads,
    .max_threads = tnrt_team_max_threads,
};

const tnrt_team_ops_t *tnrt_team_ops(void) { return &g_team_ops; }
