#define _GNU_SOURCE
/* Tests of the runtime: device model, allocator, streams, events, pool.
 * Over 1,000 lines as one file on purpose: `make test` runs this binary in
 * seven modes (plain, --wrapped-hal through the test HAL library, plain and
 * protected, --protect, --config, launch-blocking, many threads, --bad-hal),
 * each a subset of these tests picked in main(); one binary keeps the modes
 * and their subsets in one place. */
#include "check.h"
#include "provider.h"
#include "tnrt.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

static void test_devices_default(void) {
  CHECK(tnrt_host_addressable());
  CHECK(!strcmp(tnrt_hal_name(), "host"));
  CHECK(tnrt_init() == TNRT_OK);
  CHECK(tnrt_device_count() == 4);
  tnrt_device_props_t p;
  CHECK(tnrt_device_properties(0, &p) == TNRT_OK);
  CHECK(p.modelled_memory == (24ull << 30));
  /* capped by what the host can back */
  CHECK(p.total_memory <= p.modelled_memory && p.total_memory > 0);
  CHECK(p.generation == 2);
  CHECK(strstr(p.name, "trn2") != NULL);
  CHECK(tnrt_device_properties(4, &p) == TNRT_ERR_INVALID_DEVICE);
  CHECK(strstr(tnrt_last_error(), "out of range") != NULL);
  CHECK(tnrt_device_properties(-1, &p) == TNRT_ERR_INVALID_DEVICE);
}

static void test_devices_config(void) { /* run with VISIBLE_CORES=1,3 trn3 */
  CHECK(tnrt_device_count() == 2);
  tnrt_device_props_t p;
  CHECK(tnrt_device_properties(1, &p) == TNRT_OK);
  CHECK(p.global_core_id == 3);
  CHECK(p.generation == 3);
  CHECK(p.modelled_memory == (36ull << 30));
  CHECK(p.total_memory <= p.modelled_memory);
}

static void test_alloc_basic(void) {
  void *p1, *p2;
  tnrt_block_t *b1, *b2;
  tnrt_memory_stats_t st;
  CHECK(tnrt_empty_cache(0) == TNRT_OK);
  CHECK(tnrt_reset_peak_stats(0) == TNRT_OK);
  CHECK(tnrt_malloc(0, 1000, NULL, &p1, &b1) == TNRT_OK);
  CHECK(p1 && ((uintptr_t)p1 % 64) == 0);
  memset(p1, 1, 1000);
  CHECK(tnrt_ptr_device(p1) == 0);
  CHECK(tnrt_ptr_device((char *)p1 + 999) == 0);
  int local;
  CHECK(tnrt_ptr_device(&local) == -1);
  tnrt_memory_stats(0, &st);
  CHECK(st.allocated_bytes[0].current == 1024);
  CHECK(st.requested_bytes[0].current == 1000);
  CHECK(st.reserved_bytes[0].current == (2 << 20));
  CHECK(st.allocation[TNRT_POOL_SMALL].current == 1);
  /* freed memory is cached and reused by the same stream */
  tnrt_free(b1);
  CHECK(tnrt_malloc(0, 1000, NULL, &p2, &b2) == TNRT_OK);
  CHECK(p2 == p1);
  tnrt_memory_stats(0, &st);
  CHECK(st.segment[0].current == 1);
  tnrt_free(b2);
  tnrt_memory_stats(0, &st);
  CHECK(st.allocated_bytes[0].current == 0);
  CHECK(st.allocated_bytes[0].peak == 1024);
  CHECK(st.reserved_bytes[0].current == (2 << 20));
  CHECK(tnrt_empty_cache(0) == TNRT_OK);
  tnrt_memory_stats(0, &st);
  CHECK(st.reserved_bytes[0].current == 0);
  CHECK(st.inactive_split[0].current == 0);
  /* zero bytes: no memory, no block */
  CHECK(tnrt_malloc(0, 0, NULL, &p1, &b1) == TNRT_OK && !p1 && !b1);
  tnrt_free(NULL);
}

static void test_alloc_split_merge(void) {
  tnrt_empty_cache(0);
  void *p[4];
  tnrt_block_t *b[4];
  for (int i = 0; i < 4; i++) CHECK(tnrt_malloc(0, 4096, NULL, &p[i], &b[i]) == TNRT_OK);
  /* four blocks carved from one 2 MiB segment, adjacent */
  CHECK((char *)p[1] == (char *)p[0] + 4096);
  tnrt_memory_stats_t st;
  tnrt_memory_stats(0, &st);
  CHECK(st.segment[0].current == 1);
  tnrt_free(b[1]);
  tnrt_free(b[2]);
  tnrt_memory_stats(0, &st);
  CHECK(st.inactive_split_bytes[0].current == 4096 * 2 + ((2 << 20) - 4 * 4096));
  void *q;
  tnrt_block_t *bq;
  CHECK(tnrt_malloc(0, 8192, NULL, &q, &bq) == TNRT_OK);
  CHECK(q == p[1]); /* merged neighbours serve a bigger request */
  tnrt_free(bq);
  tnrt_free(b[0]);
  tnrt_free(b[3]);
  tnrt_memory_stats(0, &st);
  CHECK(st.inactive_split[0].current == 0);
  CHECK(tnrt_empty_cache(0) == TNRT_OK);
  tnrt_memory_stats(0, &st);
  CHECK(st.reserved_bytes[0].current == 0);
}

static void test_alloc_large_and_oom(void) {
  tnrt_empty_cache(1);
  void *p, *q;
  tnrt_block_t *b, *bq;
  CHECK(tnrt_malloc(1, 5 << 20, NULL, &p, &b) == TNRT_OK);
  /* large segments start on a 2 MiB (huge page) boundary; all of it usable */
  CHECK(((uintptr_t)p & ((2u << 20) - 1)) == 0);
  memset(p, 0x5a, 5 << 20);
  tnrt_memory_stats_t st;
  tnrt_memory_stats(1, &st);
  CHECK(st.reserved_bytes[TNRT_POOL_LARGE].current == (20 << 20));
  uint64_t free_b, total;
  CHECK(tnrt_mem_get_info(1, &free_b, &total) == TNRT_OK);
  tnrt_device_props_t props;
  tnrt_device_properties(1, &props);
  CHECK(total == props.total_memory && free_b == total - (20 << 20));
  /* more than the modelled HBM: fails cleanly, nothing leaks */
  CHECK(tnrt_malloc(1, 25ull << 30, NULL, &q, &bq) == TNRT_ERR_OUT_OF_MEMORY);
  CHECK(strstr(tnrt_last_error(), "Tried to allocate 25.00 GiB") != NULL);
  CHECK(strstr(tnrt_last_error(), "neuron:1") != NULL);
  tnrt_memory_stats(1, &st);
  CHECK(st.num_ooms == 1);
  CHECK(st.num_alloc_retries == 1);
  CHECK(st.allocated_bytes[0].current == (5 << 20));
  tnrt_free(b);
  /* and the device keeps working */
  CHECK(tnrt_malloc(1, 1 << 20, NULL, &q, &bq) == TNRT_OK);
  tnrt_free(bq);
  tnrt_reset_accumulated_stats(1);
  tnrt_memory_stats(1, &st);
  CHECK(st.num_ooms == 0 && st.allocation[0].allocated == 0);
  tnrt_empty_cache(1);
}

static void sleep_task(void *a) { usleep(*(int *)a); }

static void test_stream_ordered_reuse(void) {
  tnrt_stream_t *s0 = tnrt_stream_get(0, 0), *s1 = tnrt_stream_get(0, 1);
  tnrt_empty_cache(0);
  void *p, *q;
  tnrt_block_t *b, *bq;
  CHECK(tnrt_malloc(0, 4096, s0, &p, &b) == TNRT_OK);
  tnrt_free(b);
  /* another stream does not get the block cached for s0 */
  CHECK(tnrt_malloc(0, 4096, s1, &q, &bq) == TNRT_OK);
  CHECK(q != p);
  tnrt_free(bq);
  /* record_stream: reuse waits until the recorded stream passes */
  CHECK(tnrt_malloc(0, 4096, s0, &p, &b) == TNRT_OK);
  int us = 100000;
  tnrt_launch(s1, sleep_task, &us, sizeof us, "sleep");
  tnrt_record_stream(b, s1);
  tnrt_free(b);
  tnrt_memory_stats_t st;
  tnrt_memory_stats(0, &st);
  int blocking = tnrt_launch_blocking();        /* then s1 has already finished */
  CHECK(blocking || st.active[0].current >= 1); /* active while s1 runs */
  CHECK(tnrt_malloc(0, 4096, s0, &q, &bq) == TNRT_OK);
  CHECK(blocking || q != p);
  tnrt_free(bq);
  tnrt_stream_synchronize(s1);
  CHECK(tnrt_malloc(0, 4096, s0, &q, &bq) == TNRT_OK);
  CHECK(q == p); /* s1 has passed: the deferred block is reused */
  tnrt_free(bq);
  tnrt_empty_cache(0);
  tnrt_memory_stats(0, &st);
  CHECK(st.active[0].current == 0);
}

typedef struct append_args {
  int *log, *n, value;
} append_args_t;
static void append_task(void *p) {
  append_args_t *a = p;
  a->log[(*a->n)++] = a->value;
}

static void test_stream_order_and_sync(void) {
  tnrt_stream_t *s = tnrt_stream_get(2, 0);
  static int log[3000];
  static int n;
  n = 0;
  int us = 20000;
  tnrt_launch(s, sleep_task, &us, sizeof us, "sleep");
  for (int i = 0; i < 3000; i++) { /* more than the ring holds */
    append_args_t a = {log, &n, i};
    CHECK(tnrt_launch(s, append_task, &a, sizeof a, "append") == TNRT_OK);
  }
  if (!tnrt_launch_blocking()) CHECK(!tnrt_stream_query(s) || n == 3000);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(tnrt_stream_query(s));
  CHECK(n == 3000);
  int ordered = 1;
  for (int i = 0; i < 3000; i++) ordered &= log[i] == i;
  CHECK(ordered);
  char big[TNRT_TASK_ARGS_MAX + 1];
  memset(big, 0, sizeof big);
  CHECK(tnrt_launch(s, sleep_task, big, sizeof big, "x") == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(tnrt_stream_get(0, TNRT_STREAMS_PER_DEVICE) == NULL);
  CHECK(tnrt_stream_get(99, 0) == NULL);
}

static void set_flag_task(void *p) { **(volatile int **)p = 1; }

/* Host threads sleeping on different points of one stream: each returns
 * once its own point is done, not before, and none is left asleep (the
 * worker wakes sleepers only when the first of them can go; the others
 * then wait again for their own points). */
enum { WAITERS = 6 };
typedef struct {
  tnrt_event_t *e;
  atomic_int *done_tasks;
  int need, seen;
} waiter_t;
static void count_sleep_task(void *p) {
  usleep(8000); /* longer than a waiter spins before it sleeps */
  atomic_fetch_add(*(atomic_int **)p, 1);
}
static void *waiter(void *p) {
  waiter_t *w = p;
  if (tnrt_event_synchronize(w->e) != TNRT_OK) return (void *)1;
  w->seen = atomic_load(w->done_tasks);
  return NULL;
}
static void test_waiters_on_one_stream(void) {
  tnrt_stream_t *s = tnrt_stream_get(1, 3);
  static atomic_int done_tasks;
  atomic_store(&done_tasks, 0);
  atomic_int *dp = &done_tasks;
  waiter_t w[WAITERS];
  pthread_t t[WAITERS];
  for (int i = 0; i < WAITERS; i++) {
    CHECK(tnrt_launch(s, count_sleep_task, &dp, sizeof dp, "sleep") == TNRT_OK);
    w[i] = (waiter_t){tnrt_event_create(TNRT_EVENT_DEFAULT), &done_tasks, i + 1, -1};
    CHECK(tnrt_event_record(w[i].e, s) == TNRT_OK);
  }
  /* started last first, so later points are waited on before earlier ones */
  for (int i = WAITERS - 1; i >= 0; i--) CHECK(pthread_create(&t[i], NULL, waiter, &w[i]) == 0);
  for (int i = 0; i < WAITERS; i++) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    void *ret = (void *)1;
    int rc = pthread_timedjoin_np(t[i], &ret, &until); /* a lost wake-up fails, not hangs */
    CHECK(rc == 0 && ret == NULL);
    if (rc != 0) continue; /* (the process fails; the thread is left) */
    CHECK(w[i].seen >= w[i].need);
    tnrt_event_destroy(w[i].e);
  }
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(atomic_load(&done_tasks) == WAITERS);
}

static void test_events(void) {
  tnrt_stream_t *a = tnrt_stream_get(0, 2), *b = tnrt_stream_get(0, 3);
  tnrt_event_t *start = tnrt_event_create(TNRT_EVENT_TIMING);
  tnrt_event_t *end = tnrt_event_create(TNRT_EVENT_TIMING);
  CHECK(tnrt_event_query(start)); /* never recorded: complete */
  CHECK(tnrt_event_record(start, a) == TNRT_OK);
  int us = 30000;
  tnrt_launch(a, sleep_task, &us, sizeof us, "sleep");
  CHECK(tnrt_event_record(end, a) == TNRT_OK);
  if (!tnrt_launch_blocking()) CHECK(!tnrt_event_query(end));
  /* b waits for a's event: the flag is set only after the sleep */
  static volatile int flag;
  flag = 0;
  CHECK(tnrt_stream_wait_event(b, end) == TNRT_OK);
  volatile int *fp = &flag;
  tnrt_launch(b, set_flag_task, &fp, sizeof fp, "flag");
  tnrt_stream_synchronize(b);
  CHECK(flag == 1);
  CHECK(tnrt_event_query(end));
  double ms = 0;
  CHECK(tnrt_event_elapsed_ms(start, end, &ms) == TNRT_OK);
  CHECK(ms >= 25.0 && ms < 5000.0);
  tnrt_event_t *plain = tnrt_event_create(TNRT_EVENT_DEFAULT);
  CHECK(tnrt_event_elapsed_ms(start, plain, &ms) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(tnrt_event_device(end) == 0);
  tnrt_event_destroy(plain);
  tnrt_event_destroy(start);
  tnrt_event_destroy(end);
}

/* Small tasks (tnrt_launch_small): on an idle stream they run at once on
 * the caller's thread; behind queued work they wait their turn; several
 * host threads launching small and ordinary tasks on one stream keep each
 * thread's order and never run two of its tasks at once. */
typedef struct {
  pthread_t *who;
  atomic_int *running, *overlap;
  int *log, *n, value;
} small_args_t;
static void small_task(void *p) {
  small_args_t *a = p;
  if (atomic_fetch_add(a->running, 1) != 0) atomic_store(a->overlap, 1);
  if (a->who) *a->who = pthread_self();
  if (a->log) a->log[(*a->n)++] = a->value;
  atomic_fetch_sub(a->running, 1);
}
static void gate_task(void *p) { /* holds the stream until the gate opens (bounded) */
  atomic_int *gate = *(atomic_int **)p;
  int64_t until = tnrt_now_ns() + 10000000000LL;
  while (!atomic_load(gate) && tnrt_now_ns() < until) usleep(100);
}
typedef struct {
  tnrt_stream_t *s;
  int id, count;
  atomic_int *running, *overlap;
  int *log, *n;
} small_thread_t;
static void *small_launcher(void *p) {
  small_thread_t *t = p;
  for (int i = 0; i < t->count; i++) {
    small_args_t a = {NULL, t->running, t->overlap, t->log, t->n, t->id * 100000 + i};
    tnrt_status_t st = i % 3 ? tnrt_launch_small(t->s, small_task, &a, sizeof a, "small", NULL)
                             : tnrt_launch(t->s, small_task, &a, sizeof a, "ordinary");
    if (st != TNRT_OK) return (void *)1;
  }
  return NULL;
}

static void test_small_tasks(void) {
  tnrt_stream_t *s = tnrt_stream_get(3, 1);
  static atomic_int running, overlap;
  pthread_t who = 0, me = pthread_self();
  /* idle stream: runs in place, done on return (the worker may still be
   * settling after its last task: retry, bounded) */
  int inline_runs = 0;
  for (int tries = 0; tries < 2000 && !inline_runs; tries++) {
    CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
    usleep(50);
    small_args_t a = {&who, &running, &overlap, NULL, NULL, 0};
    uint64_t seq = 0;
    who = 0;
    CHECK(tnrt_launch_small(s, small_task, &a, sizeof a, "small", &seq) == TNRT_OK);
    CHECK(seq == tnrt_stream_submitted(s));
    if (pthread_equal(who, me)) {
      inline_runs++;
      CHECK(tnrt_stream_completed(s) >= seq && tnrt_stream_query(s));
    }
  }
  if (!tnrt_launch_blocking()) CHECK(inline_runs == 1);
  /* behind queued work: never in place, order kept */
  static atomic_int gate;
  atomic_store(&gate, 0);
  atomic_int *gp = &gate;
  CHECK(tnrt_launch(s, gate_task, &gp, sizeof gp, "gate") == TNRT_OK);
  static int log[30000];
  static int n;
  static pthread_t whos[50];
  n = 0;
  for (int i = 0; i < 50; i++) {
    small_args_t a = {&whos[i], &running, &overlap, log, &n, i};
    whos[i] = 0;
    if (tnrt_launch_blocking()) break;
    CHECK(tnrt_launch_small(s, small_task, &a, sizeof a, "small", NULL) == TNRT_OK);
  }
  atomic_store(&gate, 1);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  if (!tnrt_launch_blocking()) {
    int queued = n == 50;
    for (int i = 0; i < 50; i++) queued &= log[i] == i && !pthread_equal(whos[i], me);
    CHECK(queued);
  }
  /* concurrent launchers, small and ordinary tasks mixed */
  n = 0;
  enum { THREADS = 3, EACH = 5000 };
  small_thread_t t[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    t[i] = (small_thread_t){s, i, EACH, &running, &overlap, log, &n};
    CHECK(pthread_create(&th[i], NULL, small_launcher, &t[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(th[i], &r);
    CHECK(r == NULL);
  }
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(n == THREADS * EACH && !atomic_load(&overlap));
  int next[THREADS] = {0}, ordered = 1;
  for (int i = 0; i < n; i++) {
    int id = log[i] / 100000, k = log[i] % 100000;
    ordered &= id >= 0 && id < THREADS && k == next[id];
    if (id >= 0 && id < THREADS) next[id]++;
  }
  CHECK(ordered);
}

/* Busy time (utilization) counts small tasks run in place once it has been
 * read: the first read is the baseline, and an in-place task that runs for
 * 3 ms adds at least that much. */
typedef struct {
  pthread_t *who;
  int64_t ns;
} timed_args_t;
static void timed_task(void *p) {
  timed_args_t *a = p;
  *a->who = pthread_self();
  int64_t until = tnrt_now_ns() + a->ns;
  while (tnrt_now_ns() < until) {
  }
}

static void test_busy_time_in_place(void) {
  if (tnrt_launch_blocking()) return; /* nothing runs in place then */
  tnrt_stream_t *s = tnrt_stream_get(3, 2);
  pthread_t who = 0, me = pthread_self();
  uint64_t b0 = 0, b1 = 0;
  CHECK(tnrt_device_busy_ns(3, &b0) == TNRT_OK);
  int inline_runs = 0;
  for (int tries = 0; tries < 2000 && !inline_runs; tries++) {
    CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
    usleep(50);
    CHECK(tnrt_device_busy_ns(3, &b0) == TNRT_OK);
    timed_args_t a = {&who, 3000000};
    who = 0;
    CHECK(tnrt_launch_small(s, timed_task, &a, sizeof a, "timed", NULL) == TNRT_OK);
    CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
    if (pthread_equal(who, me)) inline_runs++;
  }
  CHECK(inline_runs == 1);
  CHECK(tnrt_device_busy_ns(3, &b1) == TNRT_OK);
  CHECK(b1 - b0 >= 3000000);
}

/* Two streams handing work back and forth (a collective on a communication
 * stream, the caller's stream waiting for it): a stream that has only waited
 * on b since its last work is not waited on again by b; real work after
 * such waits still is. */
static void test_wait_on_a_waiting_stream(void) {
  tnrt_stream_t *a = tnrt_stream_get(0, 4), *b = tnrt_stream_get(0, 5);
  int us = 30000;
  static volatile int flag;
  volatile int *fp = &flag;
  tnrt_event_t *e = tnrt_event_create(TNRT_EVENT_DEFAULT);
  for (int with_work = 0; with_work < 2; with_work++) {
    flag = 0;
    CHECK(tnrt_stream_synchronize(a) == TNRT_OK && tnrt_stream_synchronize(b) == TNRT_OK);
    CHECK(tnrt_launch(b, sleep_task, &us, sizeof us, "sleep") == TNRT_OK);
    CHECK(tnrt_event_record_last(e, b) == TNRT_OK);
    CHECK(tnrt_stream_wait_event(a, e) == TNRT_OK); /* a waits for b's sleep */
    if (with_work) CHECK(tnrt_launch(a, set_flag_task, &fp, sizeof fp, "flag") == TNRT_OK);
    CHECK(tnrt_event_record_last(e, a) == TNRT_OK);
    uint64_t before = tnrt_stream_submitted(b);
    CHECK(tnrt_stream_wait_event(b, e) == TNRT_OK);
    /* nothing of a's but its wait on b: no wait task on b; a's flag task:
     * one (unless it already ran, under launch blocking) */
    if (!with_work || !tnrt_launch_blocking())
      CHECK(tnrt_stream_submitted(b) == before + (uint64_t)with_work);
    tnrt_stream_synchronize(b);
    CHECK(flag == with_work); /* b's wait covered a's work */
  }
  CHECK(tnrt_stream_synchronize(a) == TNRT_OK);
  tnrt_event_destroy(e);
}

/* A task that consumes its arguments (as the compiled-kernel launcher
 * rewrites its slots): a replay must hand it the captured values again. */
static void consume_task(void *p) {
  append_args_t *a = p;
  a->log[(*a->n)++] = a->value;
  a->value = -1;
}

static void test_graph_capture_and_replay(void) {
  tnrt_stream_t *s = tnrt_stream_get(1, 3), *other = tnrt_stream_get(1, 4);
  tnrt_stream_t *elsewhere = tnrt_stream_get(0, 3);
  static int log[64];
  static int n;
  n = 0;
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  uint64_t before = tnrt_stream_submitted(s);
  CHECK(tnrt_stream_begin_capture(s) == TNRT_OK);
  CHECK(tnrt_stream_is_capturing(s) && tnrt_device_is_capturing(1) && !tnrt_device_is_capturing(0));
  CHECK(tnrt_stream_begin_capture(s) == TNRT_ERR_INVALID_ARGUMENT); /* already */
  for (int i = 0; i < 5; i++) {
    append_args_t a = {log, &n, i};
    CHECK((i == 3 ? tnrt_launch_small(s, append_task, &a, sizeof a, "append", NULL)
                  : tnrt_launch(s, i == 2 ? consume_task : append_task, &a, sizeof a, "append")) ==
          TNRT_OK);
  }
  /* recorded, not run; what cannot be captured fails */
  CHECK(tnrt_stream_submitted(s) == before && n == 0);
  CHECK(tnrt_stream_synchronize(s) == TNRT_ERR_NOT_SUPPORTED);
  CHECK(tnrt_device_synchronize(1) == TNRT_ERR_NOT_SUPPORTED);
  CHECK(tnrt_device_synchronize(0) == TNRT_OK);
  tnrt_event_t *e = tnrt_event_create(TNRT_EVENT_DEFAULT);
  CHECK(tnrt_event_record(e, s) == TNRT_ERR_NOT_SUPPORTED);
  int us = 20000;
  CHECK(tnrt_launch(other, sleep_task, &us, sizeof us, "sleep") ==
        TNRT_OK); /* other: not captured */
  CHECK(tnrt_event_record(e, other) == TNRT_OK);
  if (!tnrt_launch_blocking()) /* the sleep is still pending elsewhere */
    CHECK(tnrt_stream_wait_event(s, e) == TNRT_ERR_NOT_SUPPORTED);
  tnrt_graph_t *g = NULL;
  CHECK(tnrt_stream_end_capture(s, &g) == TNRT_OK && g);
  CHECK(!tnrt_stream_is_capturing(s));
  CHECK(tnrt_stream_end_capture(s, &g) == TNRT_ERR_INVALID_ARGUMENT); /* not capturing */
  CHECK(tnrt_graph_task_count(g) == 5);
  CHECK(tnrt_stream_synchronize(other) == TNRT_OK);
  /* two replays, one on another stream of the device, queued behind a sleep */
  CHECK(tnrt_launch(s, sleep_task, &us, sizeof us, "sleep") == TNRT_OK);
  CHECK(tnrt_graph_launch(g, s) == TNRT_OK);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(tnrt_graph_launch(g, other) == TNRT_OK);
  CHECK(tnrt_stream_synchronize(other) == TNRT_OK);
  CHECK(n == 10);
  int ordered = 1;
  for (int i = 0; i < 10; i++) ordered &= log[i] == i % 5;
  CHECK(ordered);
  CHECK(tnrt_graph_launch(g, elsewhere) == TNRT_ERR_INVALID_ARGUMENT); /* other device */
  /* destroy waits for a replay still queued */
  CHECK(tnrt_launch(s, sleep_task, &us, sizeof us, "sleep") == TNRT_OK);
  CHECK(tnrt_graph_launch(g, s) == TNRT_OK);
  tnrt_graph_destroy(g);
  CHECK(n == 15);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  tnrt_event_destroy(e);
}

typedef struct sum_ctx {
  long long *partial;
} sum_ctx_t;
static void sum_range(void *p, int64_t b, int64_t e) {
  long long s = 0;
  for (int64_t i = b; i < e; i++) s += i;
  __atomic_add_fetch(((sum_ctx_t *)p)->partial, s, __ATOMIC_RELAXED);
}

static void test_pool(void) {
  CHECK(tnrt_num_threads() >= 1);
  for (int rep = 0; rep < 200; rep++) {
    long long total = 0;
    sum_ctx_t c = {&total};
    tnrt_parallel_for(100000, 100, sum_range, &c);
    CHECK(total == 100000LL * 99999 / 2);
  }
}

/* Two threads hammer the pool with jobs whose context lives on their stacks:
 * a worker joining a finished job late would run the next job's chunks with
 * a dead context (a crash the model sweep found). */
static void *hammer(void *arg) {
  int *bad = arg;
  for (int rep = 0; rep < 3000; rep++) {
    long long total = 0;
    sum_ctx_t c = {&total};
    int64_t n = 64 + rep % 7;
    tnrt_parallel_for(n, 32, sum_range, &c);
    if (total != (long long)n * (n - 1) / 2) (*bad)++;
  }
  return NULL;
}

static void test_pool_concurrent_callers(void) {
  pthread_t t[2];
  int bad[2] = {0, 0};
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, hammer, &bad[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(bad[0] == 0 && bad[1] == 0);
}

/* Teams (the parallel regions of compiled kernels): members run at once,
 * meet at barriers, take each single construct once, and nest as teams of
 * one. */
typedef struct team_check {
  int seen[256];
  atomic_int count, singles, bad, rounds;
} team_check_t;

static void team_inner(void *p) {
  team_check_t *c = p;
  if (tnrt_team_num_threads() != 1 || tnrt_team_thread_num() != 0) atomic_fetch_add(&c->bad, 1);
  tnrt_team_barrier(); /* a team of one passes at once */
}

static void team_body(void *p) {
  team_check_t *c = p;
  int me = tnrt_team_thread_num(), n = tnrt_team_num_threads();
  if (me < 0 || me >= n || n > 256) {
    atomic_fetch_add(&c->bad, 1);
    return;
  }
  c->seen[me]++;
  for (int k = 0; k < atomic_load(&c->rounds); k++) {
    atomic_fetch_add(&c->count, 1);
    tnrt_team_barrier();
    /* every member added before anyone passed */
    if (atomic_load(&c->count) != n * (k + 1)) atomic_fetch_add(&c->bad, 1);
    if (tnrt_team_single_start()) atomic_fetch_add(&c->singles, 1);
    tnrt_team_barrier();
  }
  tnrt_team_run(team_inner, c, 4);
  if (tnrt_team_thread_num() != me || tnrt_team_num_threads() != n) atomic_fetch_add(&c->bad, 1);
}

static int run_team(unsigned want, int rounds) {
  team_check_t c;
  memset(&c, 0, sizeof c);
  atomic_store(&c.rounds, rounds);
  tnrt_team_run(team_body, &c, want);
  int n = 0;
  while (n < 256 && c.seen[n] == 1) n++;
  for (int i = n; i < 256; i++) CHECK(c.seen[i] == 0);
  CHECK(atomic_load(&c.bad) == 0);
  CHECK(atomic_load(&c.count) == n * rounds);
  CHECK(atomic_load(&c.singles) == rounds);
  return n;
}

static void test_team(void) {
  CHECK(tnrt_team_thread_num() == 0 && tnrt_team_num_threads() == 1);
  CHECK(tnrt_team_single_start() == 1);
  tnrt_team_barrier(); /* outside a team: nothing to wait for */
  int pool = tnrt_num_threads(), def = tnrt_team_max_threads();
  CHECK(def >= 1 && def <= pool);
  CHECK(run_team(0, 200) == def);
  CHECK(run_team(1, 50) == 1);
  CHECK(run_team(2, 50) == (pool < 2 ? pool : 2));
  CHECK(run_team(1000, 50) == pool); /* never more than the pool */
  const tnrt_team_ops_t *ops = tnrt_team_ops();
  CHECK(ops->size == sizeof(tnrt_team_ops_t) && ops->run == tnrt_team_run &&
        ops->max_threads() == def);
}

/* A team and parallel_for callers at once: one holds the pool, the others
 * run serially, every result is right. */
static void *team_hammer(void *arg) {
  int *bad = arg;
  for (int rep = 0; rep < 300; rep++) {
    team_check_t c;
    memset(&c, 0, sizeof c);
    atomic_store(&c.rounds, 3);
    tnrt_team_run(team_body, &c, 0);
    if (atomic_load(&c.bad) || atomic_load(&c.singles) != 3) (*bad)++;
    long long total = 0;
    sum_ctx_t s = {&total};
    tnrt_parallel_for(1000, 100, sum_range, &s);
    if (total != 1000LL * 999 / 2) (*bad)++;
  }
  return NULL;
}

static void test_team_concurrent_callers(void) {
  pthread_t t[3];
  int bad[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, team_hammer, &bad[i]);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  CHECK(bad[0] == 0 && bad[1] == 0 && bad[2] == 0);
}

static void test_pinned(void) {
  char *p = tnrt_host_alloc(1000);
  CHECK(p != NULL);
  CHECK(tnrt_host_is_pinned(p) && tnrt_host_is_pinned(p + 999));
  int local;
  CHECK(!tnrt_host_is_pinned(&local));
  tnrt_stream_t *s = tnrt_stream_get(0, 0);
  int us = 20000;
  tnrt_launch(s, sleep_task, &us, sizeof us, "sleep");
  tnrt_host_record_stream(p, s);
  tnrt_host_free(p); /* deferred while s runs; must not crash */
  CHECK(!tnrt_host_is_pinned(p));
  tnrt_stream_synchronize(s);
  tnrt_host_free(tnrt_host_alloc(10)); /* reaps */
}

static void test_trace(void) {
  tnrt_stream_t *s = tnrt_stream_get(0, 0);
  tnrt_trace_start();
  int us = 1000;
  tnrt_launch(s, sleep_task, &us, sizeof us, "traced_sleep");
  tnrt_stream_synchronize(s);
  tnrt_trace_record_t recs[16];
  size_t n = tnrt_trace_stop(recs, 16);
  CHECK(n == 1);
  if (n == 1) {
    CHECK(strcmp(recs[0].name, "traced_sleep") == 0);
    CHECK(recs[0].end_ns - recs[0].start_ns >= 900000);
  }
}

typedef struct fault_args {
  tnrt_stream_t *s;
  int64_t value;
  uint32_t origin;
} fault_args_t;

static void faulting_task(void *p) {
  fault_args_t *a = p;
  tnrt_stream_fault(a->s, TNRT_FAULT_INDEX, "test_op", a->value, 3, a->origin);
}

static void *sync_other_thread(void *p) {
  static tnrt_status_t st;
  st = tnrt_stream_synchronize(p);
  return &st;
}

static void test_device_faults(void) {
  tnrt_stream_t *s = tnrt_stream_get(1, 2);
  fault_args_t a = {s, 7, tnrt_thread_token()};
  CHECK(a.origin != 0);
  if (tnrt_launch_blocking()) { /* the launch itself reports it */
    CHECK(tnrt_launch(s, faulting_task, &a, sizeof a, "fault") == TNRT_ERR_DEVICE_INDEX);
    CHECK(strstr(tnrt_last_error(), "test_op: index 7 is out of bounds for size 3"));
    CHECK(tnrt_device_synchronize(1) == TNRT_OK);
    return;
  }
  CHECK(tnrt_launch(s, faulting_task, &a, sizeof a, "fault") == TNRT_OK);
  a.value = 8; /* a second fault before the sync is dropped: the first wins */
  CHECK(tnrt_launch(s, faulting_task, &a, sizeof a, "fault") == TNRT_OK);
  CHECK(tnrt_device_wait(1) == TNRT_OK); /* internal waits leave it pending */
  /* another stream's synchronisation does not cover the faulting task */
  CHECK(tnrt_stream_synchronize(tnrt_stream_get(1, 0)) == TNRT_OK);
  /* another thread synchronising the stream sees it, and it stays pending */
  pthread_t th;
  void *res;
  pthread_create(&th, NULL, sync_other_thread, s);
  pthread_join(th, &res);
  CHECK(*(tnrt_status_t *)res == TNRT_ERR_DEVICE_INDEX);
  int idle = 0;
  CHECK(tnrt_stream_query_status(s, &idle) == TNRT_ERR_DEVICE_INDEX);
  CHECK(idle == 1);
  CHECK(strstr(tnrt_last_error(), "test_op: index 7 is out of bounds for size 3"));
  /* raised in the launching thread: cleared */
  CHECK(tnrt_device_synchronize(1) == TNRT_OK);
  CHECK(tnrt_stream_query_status(s, &idle) == TNRT_OK);
  CHECK(tnrt_device_synchronize(0) == TNRT_OK); /* other devices unaffected */

  /* an event recorded after the fault reports it; one recorded before not */
  tnrt_event_t *before = tnrt_event_create(0), *e = tnrt_event_create(0);
  CHECK(tnrt_event_record(before, s) == TNRT_OK);
  CHECK(tnrt_launch(s, faulting_task, &a, sizeof a, "fault") == TNRT_OK);
  CHECK(tnrt_event_record(e, s) == TNRT_OK);
  CHECK(tnrt_event_synchronize(before) == TNRT_OK);
  /* a stream that waits for the faulted work inherits the fault */
  tnrt_stream_t *t = tnrt_stream_get(1, 3);
  CHECK(tnrt_stream_wait_event(t, e) == TNRT_OK);
  CHECK(tnrt_stream_synchronize(t) == TNRT_ERR_DEVICE_INDEX);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK); /* one fault, raised once */
  CHECK(tnrt_event_synchronize(e) == TNRT_OK);
  tnrt_event_destroy(before);
  tnrt_event_destroy(e);
}

static void test_fork_child_refuses(void) {
  pid_t pid = fork();
  if (pid == 0) {
    void *p;
    tnrt_block_t *b;
    int ok = tnrt_in_bad_fork() && tnrt_init() == TNRT_ERR_FORKED &&
             tnrt_malloc(0, 16, NULL, &p, &b) == TNRT_ERR_FORKED &&
             tnrt_launch(tnrt_stream_get(0, 0), sleep_task, &ok, sizeof ok, "x") != TNRT_OK;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* --protect (run with TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1): device memory
 * is reachable only through the HAL's transfers and device tasks. */
typedef struct fill_args {
  unsigned char *p;
  size_t n;
  unsigned char v;
} fill_args_t;

static void fill_task(void *a) {
  fill_args_t *f = a;
  for (size_t i = 0; i < f->n; i++) f->p[i] = (unsigned char)(f->v + i);
}

static void test_protected_device_memory(void) {
  CHECK(!tnrt_host_addressable());
  void *p;
  tnrt_block_t *b;
  CHECK(tnrt_malloc(0, 5000, NULL, &p, &b) == TNRT_OK);
  unsigned char in[5000], out[5000];
  for (int i = 0; i < 5000; i++) in[i] = (unsigned char)(i * 7);
  CHECK(tnrt_memcpy_h2d(0, p, in, sizeof in) == TNRT_OK);
  CHECK(tnrt_memcpy_d2h(0, out, p, sizeof out) == TNRT_OK);
  CHECK(!memcmp(in, out, sizeof in));
  tnrt_stream_t *s = tnrt_stream_get(0, 0);
  fill_args_t f = {p, 100, 3};
  CHECK(tnrt_launch(s, fill_task, &f, sizeof f, "fill") == TNRT_OK);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(tnrt_memcpy_d2h(0, out, p, 100) == TNRT_OK);
  CHECK(out[0] == 3 && out[99] == 102);
  /* the host itself may not touch it: a child that tries dies of SIGSEGV */
  pid_t pid = fork();
  if (pid == 0) {
    volatile unsigned char *q = p;
    q[10] = 1;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
  tnrt_free(b);
}

/* --bad-hal (run with TORCH_NEURONX_HAL=/nonexistent.so): the runtime
 * reports the driver library it could not load, and has no devices. */
static void test_hal_library_that_cannot_load(void) {
  CHECK(tnrt_init() == TNRT_ERR_CONFIG);
  CHECK(strstr(tnrt_last_error(), "TORCH_NEURONX_HAL=/nonexistent.so cannot be loaded"));
  CHECK(tnrt_device_count() == 0);
}

/* Device memory another process maps (tnrt_mem_alloc_shared / import):
 * a second mapping in this process and one in a fresh process (this test
 * binary re-executed with --import <handle>) see the same bytes, the other
 * process's writes come back, and a handle of freed memory or garbage is
 * refused. Only HAL transfers touch the memory, so it runs under --protect. */
enum { SHARED_BYTES = 1 << 20 };

static void to_hex(const tnrt_mem_handle_t *h, char *out) {
  for (int i = 0; i < TNRT_MEM_HANDLE_BYTES; i++) sprintf(out + 2 * i, "%02x", h->bytes[i]);
}

/* The handle written by to_hex; 0 on success. */
static int from_hex(const char *hex, tnrt_mem_handle_t *h) {
  if (strlen(hex) != 2 * TNRT_MEM_HANDLE_BYTES) return -1;
  for (int i = 0; i < TNRT_MEM_HANDLE_BYTES; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
    h->bytes[i] = (unsigned char)v;
  }
  return 0;
}

/* Runs this test binary again in a child process with argv (argv[0] its
 * name, NULL-terminated) and waits for it: the child's exit status, or -1
 * when it could not start or did not exit normally (a signal). */
static int run_child(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status = -1;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

static int import_child(const char *hex) { /* the --import mode: exit status 0 on success */
  tnrt_mem_handle_t h;
  if (from_hex(hex, &h)) return 2;
  void *q;
  size_t n;
  if (tnrt_mem_import(0, &h, &q, &n) != TNRT_OK || n != SHARED_BYTES) return 3;
  static unsigned char buf[4096];
  if (tnrt_memcpy_d2h(0, buf, q, sizeof buf) != TNRT_OK) return 4;
  for (int i = 0; i < 4096; i++)
    if (buf[i] != (unsigned char)(i * 7)) return 5;
  for (int i = 0; i < 4096; i++) buf[i] = (unsigned char)(i * 3 + 1);
  if (tnrt_memcpy_h2d(0, q, buf, sizeof buf) != TNRT_OK) return 6;
  tnrt_mem_unimport(0, q, n);
  return 0;
}

static void test_shared_memory(void) {
  void *p, *q;
  size_t n = 0;
  tnrt_mem_handle_t h;
  CHECK(tnrt_mem_alloc_shared(0, SHARED_BYTES, &p, &h) == TNRT_OK);
  static unsigned char in[4096], out[4096];
  for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 7);
  CHECK(tnrt_memcpy_h2d(0, p, in, sizeof in) == TNRT_OK);
  /* a second mapping in this process */
  CHECK(tnrt_mem_import(0, &h, &q, &n) == TNRT_OK);
  CHECK(n == SHARED_BYTES && q != p);
  CHECK(tnrt_memcpy_d2h(0, out, q, sizeof out) == TNRT_OK && !memcmp(in, out, sizeof in));
  tnrt_mem_unimport(0, q, n);
  /* another process */
  char hex[2 * TNRT_MEM_HANDLE_BYTES + 1];
  to_hex(&h, hex);
  CHECK(run_child((char *[]){"test_runtime", "--import", hex, NULL}) == 0);
  CHECK(tnrt_memcpy_d2h(0, out, p, sizeof out) == TNRT_OK);
  int bad = 0;
  for (int i = 0; i < 4096; i++) bad += out[i] != (unsigned char)(i * 3 + 1);
  CHECK(bad == 0);
  tnrt_mem_free_shared(0, p, SHARED_BYTES);
  /* freed memory and garbage are refused */
  CHECK(tnrt_mem_import(0, &h, &q, &n) == TNRT_ERR_INVALID_ARGUMENT);
  tnrt_mem_handle_t junk;
  memset(&junk, 0x5a, sizeof junk);
  CHECK(tnrt_mem_import(0, &junk, &q, &n) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(tnrt_mem_alloc_shared(0, 0, &p, &h) == TNRT_ERR_INVALID_ARGUMENT);
}

/* Allocator segments from shared memory (tnrt_set_shared_segments): a
 * tensor-sized block inside one reports the segment's handle and its
 * offset, another process maps the handle and sees the bytes there (and
 * its writes come back); private segments and host memory report
 * TNRT_ERR_NOT_SUPPORTED; releasing a shared segment bumps the generation.
 * Only HAL transfers touch the memory, so it runs under --protect too. */
static int import_at_child(const char *hex, const char *off_s, const char *bytes_s) {
  tnrt_mem_handle_t h;
  if (from_hex(hex, &h)) return 2;
  size_t off = (size_t)strtoull(off_s, NULL, 10), want = (size_t)strtoull(bytes_s, NULL, 10), n;
  void *q;
  if (tnrt_mem_import(0, &h, &q, &n) != TNRT_OK || n != want || off + 4096 > n) return 3;
  static unsigned char buf[4096];
  if (tnrt_memcpy_d2h(0, buf, (char *)q + off, sizeof buf) != TNRT_OK) return 4;
  for (int i = 0; i < 4096; i++)
    if (buf[i] != (unsigned char)(i * 5 + 3)) return 5;
  for (int i = 0; i < 4096; i++) buf[i] = (unsigned char)(i * 11 + 2);
  if (tnrt_memcpy_h2d(0, (char *)q + off, buf, sizeof buf) != TNRT_OK) return 6;
  tnrt_mem_unimport(0, q, n);
  return 0;
}

static void test_shared_segments(void) {
  void *p, *p2, *p3;
  tnrt_block_t *b, *b2, *b3;
  tnrt_mem_handle_t h;
  size_t off = 1;
  uint64_t gen = 0, gen2 = 0;
  int x = 0;
  CHECK(tnrt_empty_cache(0) == TNRT_OK);
  /* off (the default): private segments */
  CHECK(tnrt_malloc(0, (size_t)3 << 20, NULL, &p, &b) == TNRT_OK);
  CHECK(tnrt_mem_shared_handle(p, &h, &off, &gen) == TNRT_ERR_NOT_SUPPORTED);
  CHECK(tnrt_mem_shared_handle(&x, &h, &off, &gen) == TNRT_ERR_NOT_SUPPORTED);
  CHECK(tnrt_mem_shared_handle(NULL, &h, &off, &gen) == TNRT_ERR_NOT_SUPPORTED);
  tnrt_free(b);
  CHECK(tnrt_empty_cache(0) == TNRT_OK);
  /* on: two blocks of one new 20 MiB segment; the second at an offset */
  tnrt_set_shared_segments(1);
  CHECK(tnrt_malloc(0, (size_t)3 << 20, NULL, &p, &b) == TNRT_OK);
  CHECK(tnrt_malloc(0, (size_t)3 << 20, NULL, &p2, &b2) == TNRT_OK);
  CHECK(tnrt_mem_shared_handle(p, &h, &off, &gen) == TNRT_OK && off == 0);
  char *at = (char *)p2 + 1000;
  CHECK(tnrt_mem_shared_handle(at, &h, &off, &gen) == TNRT_OK);
  CHECK(off == (size_t)((char *)at - (char *)p));
  static unsigned char in[4096], out[4096];
  for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 5 + 3);
  CHECK(tnrt_memcpy_h2d(0, at, in, sizeof in) == TNRT_OK);
  char hex[2 * TNRT_MEM_HANDLE_BYTES + 1], offs[32], bytes[32];
  to_hex(&h, hex);
  snprintf(offs, sizeof offs, "%zu", off);
  snprintf(bytes, sizeof bytes, "%zu", (size_t)20 << 20); /* the large pool's segment */
  CHECK(run_child((char *[]){"test_runtime", "--import-at", hex, offs, bytes, NULL}) == 0);
  CHECK(tnrt_memcpy_d2h(0, out, at, sizeof out) == TNRT_OK);
  int bad = 0;
  for (int i = 0; i < 4096; i++) bad += out[i] != (unsigned char)(i * 11 + 2);
  CHECK(bad == 0);
  /* off again: a new segment is private, the shared one stays shared */
  tnrt_set_shared_segments(0);
  CHECK(tnrt_malloc(0, (size_t)30 << 20, NULL, &p3, &b3) == TNRT_OK);
  CHECK(tnrt_mem_shared_handle(p3, &h, &off, &gen2) == TNRT_ERR_NOT_SUPPORTED);
  CHECK(tnrt_mem_shared_handle(p2, &h, &off, &gen2) == TNRT_OK && gen2 == gen);
  tnrt_free(b3);
  CHECK(tnrt_empty_cache(0) == TNRT_OK); /* a private segment: the generation stays */
  CHECK(tnrt_mem_shared_handle(p2, &h, &off, &gen2) == TNRT_OK && gen2 == gen);
  tnrt_free(b);
  tnrt_free(b2);
  CHECK(tnrt_empty_cache(0) == TNRT_OK); /* releases the shared segment */
  CHECK(tnrt_mem_shared_handle(p2, &h, &off, &gen2) == TNRT_ERR_NOT_SUPPORTED);
  tnrt_set_shared_segments(1);
  CHECK(tnrt_malloc(0, 5000, NULL, &p, &b) == TNRT_OK); /* a small-pool segment */
  CHECK(tnrt_mem_shared_handle(p, &h, &off, &gen2) == TNRT_OK && gen2 > gen);
  tnrt_free(b);
  CHECK(tnrt_empty_cache(0) == TNRT_OK);
  tnrt_set_shared_segments(0);
}

/* ---- the kernel-provider interface (provider.h) -------------------------
 * A provider of three kernels that records what it ran, in order: launches
 * reach run() with their id and a copy of the descriptor, in stream order,
 * with the provider they were launched with; bad providers, ids and
 * descriptor sizes are refused with a message. */
typedef struct fake_provider_log {
  int n;
  int32_t kernel[16];
  int64_t value[16];
  int which[16];    /* 1: the first provider, 2: the second */
  int in_place[16]; /* run on the launching thread */
  const void *where[16];
} fake_log_t;
static pthread_t g_launcher;
static fake_log_t g_fake_log;

static int fake_supports(void *ctx, int32_t kernel, const tnrt_kernel_query_t *q) {
  (void)ctx;
  return kernel == 1 && q->dtype == 7; /* kernel 1 only, dtype 7 only */
}
static void fake_run(void *ctx, int32_t kernel, void *args) {
  int i = g_fake_log.n++;
  if (i >= 16) return;
  g_fake_log.kernel[i] = kernel;
  memcpy(&g_fake_log.value[i], args, sizeof(int64_t));
  g_fake_log.which[i] = (int)(intptr_t)ctx;
  g_fake_log.in_place[i] = pthread_equal(pthread_self(), g_launcher);
  g_fake_log.where[i] = args;
}

static void test_kernel_provider(void) {
  const tnrt_kernel_provider_t *before = tnrt_kernel_provider();
  static const tnrt_kernel_provider_t one = {
      TNRT_PROVIDER_API_VERSION, "fake-one", 3, 0, fake_supports, fake_run, (void *)1};
  static const tnrt_kernel_provider_t two = {
      TNRT_PROVIDER_API_VERSION, "fake-two", 3, 0, fake_supports, fake_run, (void *)2};
  tnrt_kernel_provider_t bad = one;
  bad.api_version = 99;
  CHECK(tnrt_set_kernel_provider(&bad) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(tnrt_last_error(), "api_version 99") != NULL);
  bad = one;
  bad.run = NULL;
  CHECK(tnrt_set_kernel_provider(&bad) == TNRT_ERR_INVALID_ARGUMENT);
  bad = one;
  bad.kernel_count = 0;
  CHECK(tnrt_set_kernel_provider(&bad) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(tnrt_set_kernel_provider(NULL) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(tnrt_kernel_provider() == before); /* refusals change nothing */
  if (!before) {
    int64_t x = 0;
    CHECK(tnrt_launch_kernel(tnrt_stream_get(0, 0), 0, &x, sizeof x, "none", 0, NULL) ==
          TNRT_ERR_NOT_SUPPORTED);
    CHECK(strstr(tnrt_last_error(), "no kernel provider") != NULL);
  }

  CHECK(tnrt_set_kernel_provider(&one) == TNRT_OK);
  CHECK(tnrt_kernel_provider() == &one);
  tnrt_kernel_query_t q = {-1, 7, -1, -1};
  CHECK(tnrt_kernel_supported(1, &q));
  CHECK(!tnrt_kernel_supported(0, &q));
  CHECK(!tnrt_kernel_supported(3, &q)); /* outside the provider's ids */
  CHECK(!tnrt_kernel_supported(-1, &q));
  q.dtype = 6;
  CHECK(!tnrt_kernel_supported(1, &q));

  memset(&g_fake_log, 0, sizeof g_fake_log);
  g_launcher = pthread_self();
  tnrt_stream_t *s = tnrt_stream_get(0, 0);
  int64_t v = 10;
  CHECK(tnrt_launch_kernel(s, 2, &v, sizeof v, "k2", 0, NULL) == TNRT_OK);
  v = 11; /* the launch copied the descriptor */
  uint64_t seq = 0;
  CHECK(tnrt_launch_kernel(s, 0, &v, sizeof v, "k0", 0, &seq) == TNRT_OK);
  CHECK(seq > 0);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK); /* a task runs with the provider of its run */
  CHECK(tnrt_set_kernel_provider(&two) == TNRT_OK);
  v = 12;
  CHECK(tnrt_launch_kernel(s, 1, &v, sizeof v, "k1", 1, NULL) == TNRT_OK);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(g_fake_log.n == 3);
  CHECK(g_fake_log.kernel[0] == 2 && g_fake_log.value[0] == 10 && g_fake_log.which[0] == 1);
  CHECK(g_fake_log.kernel[1] == 0 && g_fake_log.value[1] == 11 && g_fake_log.which[1] == 1);
  CHECK(g_fake_log.kernel[2] == 1 && g_fake_log.value[2] == 12 && g_fake_log.which[2] == 2);

  /* refusals: an id the provider lacks, a descriptor over the limit */
  CHECK(tnrt_launch_kernel(s, 3, &v, sizeof v, "k3", 0, NULL) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(tnrt_last_error(), "kernel id 3") != NULL);
  CHECK(tnrt_launch_kernel(s, -1, &v, sizeof v, "k-1", 0, NULL) == TNRT_ERR_INVALID_ARGUMENT);
  static unsigned char big[TNRT_KERNEL_ARGS_MAX + 1];
  CHECK(tnrt_launch_kernel(s, 0, big, sizeof big, "big", 0, NULL) == TNRT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(tnrt_last_error(), "descriptor") != NULL);
  CHECK(tnrt_launch_kernel(s, 0, big, TNRT_KERNEL_ARGS_MAX, "max", 0, NULL) == TNRT_OK);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(g_fake_log.n == 4);
  CHECK(!g_fake_log.in_place[3] && g_fake_log.where[3] != big); /* queued: a copy */
  bad = one;
  bad.kernel_count = TNRT_MAX_KERNELS + 1;
  CHECK(tnrt_set_kernel_provider(&bad) == TNRT_ERR_INVALID_ARGUMENT);

  /* small on an idle stream: run in place over the launcher's own
   * descriptor, nothing copied (retry while the worker settles, bounded) */
  int in_place = 0;
  for (int tries = 0; tries < 2000 && !in_place && !tnrt_launch_blocking(); tries++) {
    CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
    usleep(50);
    g_fake_log.n = 0;
    v = 40 + tries % 8;
    CHECK(tnrt_launch_kernel(s, 2, &v, sizeof v, "small", 1, NULL) == TNRT_OK);
    CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
    int i = 0;
    CHECK(g_fake_log.n == 1);
    CHECK(g_fake_log.kernel[i] == 2 && g_fake_log.value[i] == v && g_fake_log.which[i] == 2);
    if (g_fake_log.in_place[i]) {
      in_place = 1;
      CHECK(g_fake_log.where[i] == &v);
    }
  }
  if (!tnrt_launch_blocking()) CHECK(in_place);
  if (before) CHECK(tnrt_set_kernel_provider(before) == TNRT_OK);
}

/* The software NeuronCore loaded as a driver would be: its sources built
 * into a HAL library of their own (tests/hal_wrapped.c), selected with
 * TORCH_NEURONX_HAL, reporting its memory as not host addressable. Bytes
 * move through its transfers and tasks; the trace records its worker
 * writes reach the runtime through the support table. */
static void test_wrapped_hal(void) {
  CHECK(tnrt_init() == TNRT_OK);
  CHECK(!strcmp(tnrt_hal_name(), "wrapped-host"));
  CHECK(!tnrt_host_addressable());
  CHECK(tnrt_device_count() == 4);
  void *p;
  tnrt_block_t *b;
  CHECK(tnrt_malloc(1, 4096, NULL, &p, &b) == TNRT_OK);
  unsigned char in[4096], out[4096];
  for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 13);
  CHECK(tnrt_memcpy_h2d(1, p, in, sizeof in) == TNRT_OK);
  tnrt_stream_t *s = tnrt_stream_get(1, 0);
  fill_args_t f = {p, 64, 5};
  CHECK(tnrt_launch(s, fill_task, &f, sizeof f, "fill") == TNRT_OK);
  CHECK(tnrt_stream_synchronize(s) == TNRT_OK);
  CHECK(tnrt_memcpy_d2h(1, out, p, sizeof out) == TNRT_OK);
  CHECK(out[0] == 5 && out[63] == 68 && out[64] == in[64] && out[4095] == in[4095]);
  tnrt_free(b);
  /* a bad device is reported through the library's set_error */
  tnrt_device_props_t props;
  CHECK(tnrt_device_properties(7, &props) == TNRT_ERR_INVALID_DEVICE);
  CHECK(strlen(tnrt_last_error()) > 0);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--bad-hal")) {
    RUN(test_hal_library_that_cannot_load);
    return REPORT("test_runtime --bad-hal");
  }
  if (argc > 2 && !strcmp(argv[1], "--import")) return import_child(argv[2]);
  if (argc > 4 && !strcmp(argv[1], "--import-at"))
    return import_at_child(argv[2], argv[3], argv[4]);
  if (argc > 1 && !strcmp(argv[1], "--protect")) {
    RUN(test_protected_device_memory);
    RUN(test_shared_memory);
    RUN(test_shared_segments);
    return REPORT("test_runtime --protect");
  }
  if (argc > 1 && !strcmp(argv[1], "--wrapped-hal")) {
    const char *protect = getenv("TORCH_NEURONX_PROTECT_DEVICE_MEMORY");
    RUN(test_wrapped_hal);
    if (protect && !strcmp(protect, "1")) RUN(test_protected_device_memory);
    RUN(test_stream_order_and_sync);
    RUN(test_events);
    RUN(test_small_tasks);
    RUN(test_trace);
    RUN(test_kernel_provider);
    RUN(test_device_faults);
    return REPORT(protect && !strcmp(protect, "1") ? "test_runtime --wrapped-hal (protected)"
                                                   : "test_runtime --wrapped-hal");
  }
  if (argc > 1 && !strcmp(argv[1], "--config")) {
    RUN(test_devices_config);
    return REPORT("test_runtime --config");
  }
  RUN(test_devices_default);
  RUN(test_alloc_basic);
  RUN(test_alloc_split_merge);
  RUN(test_alloc_large_and_oom);
  RUN(test_stream_ordered_reuse);
  RUN(test_stream_order_and_sync);
  RUN(test_events);
  RUN(test_waiters_on_one_stream);
  RUN(test_small_tasks);
  RUN(test_busy_time_in_place);
  RUN(test_wait_on_a_waiting_stream);
  RUN(test_graph_capture_and_replay);
  RUN(test_pool);
  RUN(test_pool_concurrent_callers);
  RUN(test_team);
  RUN(test_team_concurrent_callers);
  RUN(test_pinned);
  RUN(test_trace);
  RUN(test_kernel_provider);
  RUN(test_device_faults);
  RUN(test_fork_child_refuses);
  RUN(test_shared_memory);
  RUN(test_shared_segments);
  return REPORT(tnrt_launch_blocking() ? "test_runtime (launch blocking)" : "test_runtime");
}
