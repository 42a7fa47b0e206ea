/* The host HAL: the software NeuronCore. Device memory is anonymous host
 * memory, each queue is a worker thread draining a fixed ring of task
 * slots, and the devices are modelled from the environment (host_model.c).
 *
 * TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1 (a debug mode) makes device memory
 * unreadable by the host except while a device task or one of this HAL's
 * transfers runs (mprotect, process-wide: memory is opened when the first of
 * them starts and closed when the last ends). The HAL then reports device
 * memory as not host addressable, so the layers above must move every byte
 * through it, as they would for a discrete device; a stray host access is a
 * segmentation fault at the culprit. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "neuroncore.h"

#include <pthread.h>
#include <stdatomic.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#define RING_SLOTS 1024u
/* How long an idle worker or a waiting host thread spins before sleeping.
 * Spinning keeps small-op latency near a function call; sleeping keeps idle
 * streams free. */
#define SPIN_NS 50000

typedef struct task_slot {
  tnrt_task_fn fn;
  const char *name;
  uint64_t seq;
  uint64_t size;
  _Alignas(16) unsigned char args[TNRT_TASK_ARGS_MAX];
} task_slot_t;

/* Producers (any thread) serialise on submit_mu; the worker never takes it.
 * Slots move between them through the atomic tail/head counters; mu and the
 * condition variables are used only to sleep and wake. Every sleeper
 * announces itself in an atomic flag or count before rechecking its
 * condition, and every waker updates the condition before reading that
 * announcement (both seq_cst), so no wake-up is lost. */
struct tnrt_hal_queue {
  int device, index;
  pthread_mutex_t submit_mu;
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full, done;
  task_slot_t *ring;
  _Atomic uint64_t head;      /* next slot to run */
  _Atomic uint64_t tail;      /* tasks submitted */
  _Atomic uint64_t completed; /* sequence number of the last finished task */
  _Atomic uint64_t busy_ns;   /* time spent running tasks */
  atomic_int worker_sleeping, full_waiters, done_waiters;
  /* The smallest task number a sleeping host thread waits for (UINT64_MAX:
   * none); the worker wakes waiters when it completes that one, not after
   * every task. */
  _Atomic uint64_t wake_at;
  atomic_int wstate; /* W_BUSY, W_IDLE or W_INLINE (below) */
  pthread_t thread;
};

/* The worker's state, for running a small task in place on the submitting
 * thread (host_queue_run_inline). W_BUSY: the worker owns the queue (it runs
 * a task or is about to). W_IDLE: it has nothing to run and is waiting; a
 * submitter may then take the queue by moving it to W_INLINE, run its task
 * and publish it as already done, and hand it back. The worker moves the
 * queue from W_IDLE to W_BUSY with a compare-and-swap before it touches a
 * slot, so the two never run tasks of one queue at once and order holds. */
enum { W_BUSY = 0, W_IDLE = 1, W_INLINE = 2 };

/* Tasks run in place are timed (busy_ns, the trace) only once busy time has
 * been read or while tracing: the two clock reads cost about 50 ns, 4% of a
 * one-element add. Busy time is read as differences (utilization's first
 * sample is its baseline), so nothing it reports is lost. The worker always
 * times its tasks; its clock reads are not on the caller's path. */
static atomic_int g_time_inline;

const tnrt_hal_support_t *tnc_rt;

void tnrt_hal_host_support(const tnrt_hal_support_t *support) { tnc_rt = support; }

static inline int64_t now_ns(void) { return tnc_rt->now_ns(); }

/* How a stream worker spins before it sleeps (waiting for work, or for
 * another stream). Alone on the host it pauses in place, for latency. When
 * ranks that torchrun started share the host's cores (LOCAL_WORLD_SIZE > 1)
 * there are more runnable threads than cores: a thread spinning in place
 * holds a core the thread it waits for needs (the peer's communication
 * stream, this rank's Python thread), so it yields the core at every turn
 * (2 ranks on 2 cores: an 8-byte all_reduce followed by a synchronisation
 * went from 317 to 48 us). */
static pthread_once_t g_spin_once = PTHREAD_ONCE_INIT;
static int g_spin_yields;

static void read_spin(void) {
  const char *lws = getenv("LOCAL_WORLD_SIZE");
  g_spin_yields = lws && atoi(lws) > 1;
}

/* One turn of a spin loop; nonzero: check the clock now. */
static inline int spin_turn(int spins) {
  pthread_once(&g_spin_once, read_spin);
  if (g_spin_yields) {
    sched_yield();
    return 1;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  return spins % 64 == 0;
}

static void wake(tnrt_hal_queue_t *q, pthread_cond_t *cv, int broadcast) {
  pthread_mutex_lock(&q->mu);
  if (broadcast)
    pthread_cond_broadcast(cv);
  else
    pthread_cond_signal(cv);
  pthread_mutex_unlock(&q->mu);
}

/* After task `seq` completed (its number stored in q->completed): wakes
 * the host threads sleeping in host_queue_wait once the first of them can
 * go. Waking them after every task instead cost the worker a system call per
 * task and put the waiter on a CPU the pool's helper was using (262,144-
 * element adds back to back: a third of the stream's time lost). Every
 * waiter wakes and lowers wake_at again for what it still waits for. */
static void wake_done(tnrt_hal_queue_t *q, uint64_t seq) {
  if (!atomic_load(&q->done_waiters) || seq < atomic_load(&q->wake_at)) return;
  pthread_mutex_lock(&q->mu);
  atomic_store(&q->wake_at, UINT64_MAX);
  pthread_cond_broadcast(&q->done);
  pthread_mutex_unlock(&q->mu);
}

/* ---- device memory access (protect mode) ---- */

typedef struct segment {
  void *ptr;
  size_t bytes;
  struct segment *next;
} segment_t;

static pthread_once_t g_protect_once = PTHREAD_ONCE_INIT;
static int g_protect; /* TORCH_NEURONX_PROTECT_DEVICE_MEMORY */
static pthread_mutex_t g_access_mu = PTHREAD_MUTEX_INITIALIZER;
static segment_t *g_segments; /* every live segment (protect mode) */
static int g_open;            /* device tasks and transfers running */

static void read_protect(void) {
  const char *v = getenv("TORCH_NEURONX_PROTECT_DEVICE_MEMORY");
  g_protect = v && *v && strcmp(v, "0") != 0;
}

static int protecting(void) {
  pthread_once(&g_protect_once, read_protect);
  return g_protect;
}

static void set_access(int prot) {
  for (segment_t *s = g_segments; s; s = s->next)
    if (mprotect(s->ptr, s->bytes, prot) != 0) abort(); /* debug mode: no way on */
}

/* Brackets device work: device memory is readable from the first enter to
 * the last exit. */
static void device_enter(void) {
  if (!protecting()) return;
  pthread_mutex_lock(&g_access_mu);
  if (g_open++ == 0) set_access(PROT_READ | PROT_WRITE);
  pthread_mutex_unlock(&g_access_mu);
}

static void device_exit(void) {
  if (!protecting()) return;
  pthread_mutex_lock(&g_access_mu);
  if (--g_open == 0) set_access(PROT_NONE);
  pthread_mutex_unlock(&g_access_mu);
}

/* The worker waits until the queue holds a task that is not being run in
 * place: it spins, then sleeps. */
static void wait_for_work(tnrt_hal_queue_t *q) {
  int64_t spin_until = now_ns() + SPIN_NS;
  int spins = 0;
  for (;;) {
    if (atomic_load(&q->tail) != atomic_load(&q->head) && atomic_load(&q->wstate) == W_IDLE) return;
    if (spin_turn(++spins) && now_ns() > spin_until) break;
  }
  pthread_mutex_lock(&q->mu);
  atomic_store(&q->worker_sleeping, 1);
  while (atomic_load(&q->tail) == atomic_load(&q->head)) pthread_cond_wait(&q->not_empty, &q->mu);
  atomic_store(&q->worker_sleeping, 0);
  pthread_mutex_unlock(&q->mu);
}

static void *queue_worker(void *arg) {
  pthread_setname_np(pthread_self(), "neuron-queue"); /* a device stream's worker */
  tnc_rt->pin_queue_worker();
  tnrt_hal_queue_t *q = arg;
  uint64_t head = 0;
  for (;;) {
    if (atomic_load(&q->tail) == head) {
      atomic_store(&q->wstate, W_IDLE); /* submitters may now run tasks in place */
      for (;;) {
        wait_for_work(q);
        int idle = W_IDLE;
        if (!atomic_compare_exchange_strong(&q->wstate, &idle, W_BUSY)) continue;
        head = atomic_load(&q->head); /* tasks run in place moved it */
        if (atomic_load(&q->tail) != head) break;
        atomic_store(&q->wstate, W_IDLE);
      }
    }
    task_slot_t *slot = &q->ring[head % RING_SLOTS];
    int64_t t0 = now_ns();
    device_enter();
    slot->fn(slot->args);
    device_exit();
    int64_t t1 = now_ns();
    atomic_fetch_add_explicit(&q->busy_ns, (uint64_t)(t1 - t0), memory_order_relaxed);
    if (tnc_rt->trace_enabled()) {
      tnrt_trace_record_t rec = {slot->name, q->device, q->index, slot->seq, t0, t1};
      tnc_rt->trace_task(&rec);
    }
    uint64_t seq = slot->seq;
    head++;
    atomic_store(&q->head, head); /* the slot may now be reused */
    atomic_store(&q->completed, seq);
    /* Producers blocked on a full ring are woken once it is half empty, not
     * per task: a wake-up costs a system call on this thread. */
    if (atomic_load(&q->full_waiters) && atomic_load(&q->tail) - head <= RING_SLOTS / 2)
      wake(q, &q->not_full, 1);
    wake_done(q, seq);
  }
  return NULL;
}

static tnrt_status_t host_queue_create(void *ctx, int device, int index, tnrt_hal_queue_t **out) {
  (void)ctx;
  tnrt_hal_queue_t *q = calloc(1, sizeof(*q));
  if (!q) return tnc_rt->set_error(TNRT_ERR_OUT_OF_MEMORY, "queue allocation");
  q->ring = aligned_alloc(64, sizeof(task_slot_t) * RING_SLOTS);
  if (!q->ring) {
    free(q);
    return tnc_rt->set_error(TNRT_ERR_OUT_OF_MEMORY, "queue ring allocation");
  }
  q->device = device;
  q->index = index;
  atomic_init(&q->wake_at, UINT64_MAX);
  pthread_mutex_init(&q->submit_mu, NULL);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->not_empty, NULL);
  pthread_cond_init(&q->not_full, NULL);
  pthread_cond_init(&q->done, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&q->thread, &attr, queue_worker, q);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    free(q->ring);
    free(q);
    return tnc_rt->set_error(TNRT_ERR_INTERNAL, "cannot start stream worker: %s", strerror(rc));
  }
  *out = q; /* lives until process exit, like the stream that owns it */
  return TNRT_OK;
}

static tnrt_status_t host_queue_submit(tnrt_hal_queue_t *q, tnrt_task_fn fn, const void *args,
                                       size_t size, const char *name, uint64_t *seq) {
  if (size > TNRT_TASK_ARGS_MAX)
    return tnc_rt->set_error(TNRT_ERR_INVALID_ARGUMENT, "task arguments of %zu bytes exceed %d",
                             size, TNRT_TASK_ARGS_MAX);
  pthread_mutex_lock(&q->submit_mu);
  uint64_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
  if (tail - atomic_load(&q->head) >= RING_SLOTS) {
    pthread_mutex_lock(&q->mu);
    atomic_fetch_add(&q->full_waiters, 1);
    while (tail - atomic_load(&q->head) > RING_SLOTS / 2) pthread_cond_wait(&q->not_full, &q->mu);
    atomic_fetch_sub(&q->full_waiters, 1);
    pthread_mutex_unlock(&q->mu);
  }
  task_slot_t *slot = &q->ring[tail % RING_SLOTS];
  slot->fn = fn;
  slot->name = name;
  slot->seq = tail + 1;
  slot->size = size;
  if (size) memcpy(slot->args, args, size);
  atomic_store(&q->tail, tail + 1); /* publishes the slot */
  pthread_mutex_unlock(&q->submit_mu);
  if (atomic_load(&q->worker_sleeping)) wake(q, &q->not_empty, 0);
  *seq = tail + 1;
  return TNRT_OK;
}

/* Runs fn(args) at once on the calling thread when the queue is idle (no
 * task queued or running, the worker asleep), as task number *seq; returns 0, having run
 * nothing, when it is not. A small kernel costs less than handing it to the
 * worker on another core, and the queue's order is kept: no earlier task
 * is pending, and later submitters wait on submit_mu. */
static int host_queue_run_inline(tnrt_hal_queue_t *q, tnrt_task_fn fn, const void *args,
                                 const char *name, uint64_t *seq) {
  if (atomic_load_explicit(&q->wstate, memory_order_relaxed) != W_IDLE) return 0;
  /* Only while the worker sleeps. A spinning worker polls the queue's
   * counters, which running in place writes several times: each write moves
   * the cache line between cores, and in a decode loop of small ops mixed
   * with queued GEMMs that cost more than the hand-off it saves (HF
   * generate, d64 Llama: 1.29-1.39x PyTorch CPU's time before, 1.01-1.17x
   * after). A worker that is spinning takes a queued task at once anyway. */
  if (!atomic_load_explicit(&q->worker_sleeping, memory_order_relaxed)) return 0;
  pthread_mutex_lock(&q->submit_mu);
  int idle = W_IDLE;
  if (!atomic_compare_exchange_strong(&q->wstate, &idle, W_INLINE)) {
    pthread_mutex_unlock(&q->submit_mu);
    return 0;
  }
  uint64_t tail = atomic_load(&q->tail);
  if (atomic_load(&q->head) != tail) { /* queued work the worker has not taken yet */
    atomic_store(&q->wstate, W_IDLE);
    pthread_mutex_unlock(&q->submit_mu);
    return 0;
  }
  int tracing = tnc_rt->trace_enabled();
  int timed = tracing || atomic_load_explicit(&g_time_inline, memory_order_relaxed);
  int64_t t0 = timed ? now_ns() : 0;
  device_enter();
  fn((void *)args);
  device_exit();
  if (timed) {
    int64_t t1 = now_ns();
    atomic_fetch_add_explicit(&q->busy_ns, (uint64_t)(t1 - t0), memory_order_relaxed);
    if (tracing) {
      tnrt_trace_record_t rec = {name, q->device, q->index, tail + 1, t0, t1};
      tnc_rt->trace_task(&rec);
    }
  }
  atomic_store(&q->tail, tail + 1);
  atomic_store(&q->head, tail + 1);
  atomic_store(&q->completed, tail + 1);
  atomic_store(&q->wstate, W_IDLE);
  pthread_mutex_unlock(&q->submit_mu);
  wake_done(q, tail + 1);
  *seq = tail + 1;
  return 1;
}

static uint64_t host_queue_completed(tnrt_hal_queue_t *q) {
  return atomic_load_explicit(&q->completed, memory_order_acquire);
}

static uint64_t host_queue_busy_ns(tnrt_hal_queue_t *q) {
  if (!atomic_load_explicit(&g_time_inline, memory_order_relaxed))
    atomic_store_explicit(&g_time_inline, 1, memory_order_relaxed);
  return atomic_load_explicit(&q->busy_ns, memory_order_relaxed);
}

static uint64_t host_queue_submitted(tnrt_hal_queue_t *q) {
  return atomic_load_explicit(&q->tail, memory_order_acquire);
}

static void host_queue_wait(tnrt_hal_queue_t *q, uint64_t seq) {
  if (host_queue_completed(q) >= seq) return;
  int64_t spin_until = now_ns() + SPIN_NS;
  int spins = 0;
  while (host_queue_completed(q) < seq)
    if (spin_turn(++spins) && now_ns() > spin_until) break;
  if (host_queue_completed(q) >= seq) return;
  pthread_mutex_lock(&q->mu);
  atomic_fetch_add(&q->done_waiters, 1);
  for (;;) {
    /* Lower wake_at before reading completed (both sequentially
     * consistent): either this thread sees the task done, or the worker
     * that completes it sees wake_at and wakes it (wake_done). */
    uint64_t at = atomic_load(&q->wake_at);
    while (seq < at && !atomic_compare_exchange_weak(&q->wake_at, &at, seq)) {
    }
    if (atomic_load(&q->completed) >= seq) break;
    pthread_cond_wait(&q->done, &q->mu);
  }
  atomic_fetch_sub(&q->done_waiters, 1);
  pthread_mutex_unlock(&q->mu);
}

/* Device memory of 2 MiB and more is 2 MiB aligned and asks for
 * transparent huge pages, as an accelerator maps its memory in large pages:
 * a streaming kernel over 64 MiB otherwise takes a TLB miss every 4 KiB. */
#define HUGE_PAGE ((size_t)2 << 20)

static tnrt_status_t map_segment(size_t bytes, void **out);

/* Protect mode: every mapping of device memory (allocated, shared or
 * imported) is listed and closed to the host outside device work. */
static tnrt_status_t track_segment(void *ptr, size_t bytes) {
  if (!protecting()) return TNRT_OK;
  segment_t *seg = malloc(sizeof *seg);
  if (!seg) return tnc_rt->set_error(TNRT_ERR_OUT_OF_MEMORY, "segment record");
  pthread_mutex_lock(&g_access_mu);
  *seg = (segment_t){ptr, bytes, g_segments};
  g_segments = seg;
  if (!g_open && mprotect(ptr, bytes, PROT_NONE) != 0) abort();
  pthread_mutex_unlock(&g_access_mu);
  return TNRT_OK;
}

static void untrack_segment(void *ptr) {
  if (!protecting()) return;
  pthread_mutex_lock(&g_access_mu);
  for (segment_t **s = &g_segments; *s; s = &(*s)->next)
    if ((*s)->ptr == ptr) {
      segment_t *dead = *s;
      *s = dead->next;
      free(dead);
      break;
    }
  pthread_mutex_unlock(&g_access_mu);
}

static tnrt_status_t host_mem_alloc(void *ctx, int device, size_t bytes, void **out) {
  (void)ctx;
  (void)device;
  tnrt_status_t st = map_segment(bytes, out);
  if (st == TNRT_OK && (st = track_segment(*out, bytes)) != TNRT_OK) munmap(*out, bytes);
  return st;
}

static tnrt_status_t map_segment(size_t bytes, void **out) {
  int huge = bytes >= HUGE_PAGE;
  size_t span = huge ? bytes + HUGE_PAGE : bytes;
  char *p =
      mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return tnc_rt->set_error(TNRT_ERR_OUT_OF_MEMORY,
                             "host memory backing the device is exhausted (%s)", strerror(errno));
  if (huge) { /* keep the aligned part; host_mem_free unmaps exactly it */
    char *start = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    size_t head = (size_t)(start - p), tail = span - head - bytes;
    if (head) munmap(p, head);
    if (tail) munmap(start + bytes, tail);
    p = start;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: 4 KiB pages still work */
#endif
  }
  *out = p;
  return TNRT_OK;
}

/* ---- memory other processes map: memfd segments ---- */

/* What a handle holds: the exporter's pid and descriptor, and the file's
 * identity, so a descriptor number reused for another file is refused. */
typedef struct host_handle {
  uint32_t magic;
  int32_t pid, fd;
  uint32_t pad_;
  uint64_t bytes, ino, dev;
} host_handle_t;
#define HANDLE_MAGIC 0x544e5348u /* "TNSH" */
_Static_assert(sizeof(host_handle_t) <= TNRT_MEM_HANDLE_BYTES, "handle fits");

typedef struct shared_seg {
  void *ptr;
  int fd;
  struct shared_seg *next;
} shared_seg_t;
static pthread_mutex_t g_shared_mu = PTHREAD_MUTEX_INITIALIZER;
static shared_seg_t *g_shared; /* this process's exported allocations */

static tnrt_status_t host_mem_alloc_shared(void *ctx, int device, size_t bytes, void **out,
                                           tnrt_mem_handle_t *handle) {
  (void)ctx;
  (void)device;
  shared_seg_t *rec = malloc(sizeof *rec);
  int fd = memfd_create("neuron-device-memory", MFD_CLOEXEC);
  struct stat sb;
  void *p = MAP_FAILED;
  if (rec && fd >= 0 && ftruncate(fd, (off_t)bytes) == 0 && fstat(fd, &sb) == 0)
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    if (fd >= 0) close(fd);
    free(rec);
    return tnc_rt->set_error(TNRT_ERR_OUT_OF_MEMORY,
                             "shared device memory of %zu bytes cannot be created (%s)", bytes,
                             strerror(err));
  }
  tnrt_status_t st = track_segment(p, bytes);
  if (st != TNRT_OK) {
    munmap(p, bytes);
    close(fd);
    free(rec);
    return st;
  }
  host_handle_t h = {HANDLE_MAGIC,        (int32_t)getpid(),  fd, 0, bytes,
                     (uint64_t)sb.st_ino, (uint64_t)sb.st_dev};
  memset(handle, 0, sizeof *handle);
  memcpy(handle->bytes, &h, sizeof h);
  pthread_mutex_lock(&g_shared_mu);
  *rec = (shared_seg_t){p, fd, g_shared};
  g_shared = rec;
  pthread_mutex_unlock(&g_shared_mu);
  *out = p;
  return TNRT_OK;
}

static tnrt_status_t host_mem_import(void *ctx, int device, const tnrt_mem_handle_t *handle,
                                     void **out, size_t *bytes) {
  (void)ctx;
  (void)device;
  host_handle_t h;
  memcpy(&h, handle->bytes, sizeof h);
  if (h.magic != HANDLE_MAGIC || h.pid <= 0 || h.fd < 0 || !h.bytes)
    return tnc_rt->set_error(TNRT_ERR_INVALID_ARGUMENT, "not a device memory handle");
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || (uint64_t)sb.st_ino != h.ino ||
      (uint64_t)sb.st_dev != h.dev || (uint64_t)sb.st_size < h.bytes) {
    if (fd >= 0) close(fd);
    return tnc_rt->set_error(TNRT_ERR_INVALID_ARGUMENT,
                             "the device memory of process %d cannot be mapped (has it "
                             "exited or freed the memory?)",
                             (int)h.pid);
  }
  void *p = mmap(NULL, (size_t)h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd); /* the mapping keeps the memory */
  if (p == MAP_FAILED)
    return tnc_rt->set_error(TNRT_ERR_OUT_OF_MEMORY, "mapping %llu bytes of process %d: %s",
                             (unsigned long long)h.bytes, (int)h.pid, strerror(err));
  tnrt_status_t st = track_segment(p, (size_t)h.bytes);
  if (st != TNRT_OK) {
    munmap(p, (size_t)h.bytes);
    return st;
  }
  *out = p;
  *bytes = (size_t)h.bytes;
  return TNRT_OK;
}

static void host_mem_unimport(void *ctx, int device, void *ptr, size_t bytes) {
  (void)ctx;
  (void)device;
  untrack_segment(ptr);
  munmap(ptr, bytes);
}

static void host_mem_free(void *ctx, int device, void *ptr, size_t bytes) {
  (void)ctx;
  (void)device;
  untrack_segment(ptr);
  munmap(ptr, bytes);
  pthread_mutex_lock(&g_shared_mu);
  for (shared_seg_t **s = &g_shared; *s; s = &(*s)->next)
    if ((*s)->ptr == ptr) {
      shared_seg_t *dead = *s;
      *s = dead->next;
      close(dead->fd);
      free(dead);
      break;
    }
  pthread_mutex_unlock(&g_shared_mu);
}

static int host_addressable(void *ctx) {
  (void)ctx;
  return !protecting();
}

/* Transfers: the host's CPUs move the bytes, inside the device bracket. */
static tnrt_status_t host_copy(void *dst, const void *src, size_t bytes) {
  device_enter();
  memmove(dst, src, bytes);
  device_exit();
  return TNRT_OK;
}

static tnrt_status_t host_memcpy_h2d(void *ctx, int device, void *dst, const void *src,
                                     size_t bytes) {
  (void)ctx;
  (void)device;
  return host_copy(dst, src, bytes);
}

static tnrt_status_t host_memcpy_d2h(void *ctx, int device, void *dst, const void *src,
                                     size_t bytes) {
  (void)ctx;
  (void)device;
  return host_copy(dst, src, bytes);
}

static tnrt_status_t host_memcpy_d2d(void *ctx, int device, void *dst, const void *src,
                                     size_t bytes) {
  (void)ctx;
  (void)device;
  return host_copy(dst, src, bytes);
}

static tnrt_status_t host_memset(void *ctx, int device, void *dst, int value, size_t bytes) {
  (void)ctx;
  (void)device;
  device_enter();
  memset(dst, value, bytes);
  device_exit();
  return TNRT_OK;
}

/* ---- devices: the environment's model, read once ---- */

static pthread_once_t g_model_once = PTHREAD_ONCE_INIT;
static tnc_host_model_t g_model;
static tnrt_status_t g_model_status;
static char g_model_error[256];

static void read_model(void) {
  g_model_status = tnc_host_model(&g_model);
  if (g_model_status != TNRT_OK)
    snprintf(g_model_error, sizeof g_model_error, "%s", tnc_host_model_error());
}

static tnrt_status_t model(void) {
  pthread_once(&g_model_once, read_model);
  if (g_model_status != TNRT_OK) return tnc_rt->set_error(g_model_status, "%s", g_model_error);
  return TNRT_OK;
}

static tnrt_status_t host_device_count(void *ctx, int *count) {
  (void)ctx;
  tnrt_status_t st = model();
  *count = st == TNRT_OK ? g_model.count : 0;
  return st;
}

static tnrt_status_t host_get_properties(void *ctx, int device, tnrt_device_props_t *out) {
  (void)ctx;
  tnrt_status_t st = model();
  if (st != TNRT_OK) return st;
  if (device < 0 || device >= g_model.count)
    return tnc_rt->set_error(TNRT_ERR_INVALID_DEVICE, "no host device %d", device);
  *out = g_model.props[device];
  return TNRT_OK;
}

static uint64_t host_budget(void *ctx) {
  (void)ctx;
  return model() == TNRT_OK ? g_model.budget : 0;
}

static const tnrt_hal_t k_host_hal = {
    .api_version = TNRT_HAL_API_VERSION,
    .name = "host",
    .context = NULL,
    .device_count = host_device_count,
    .get_properties = host_get_properties,
    .memory_budget = host_budget,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .mem_alloc_shared = host_mem_alloc_shared,
    .mem_import = host_mem_import,
    .mem_unimport = host_mem_unimport,
    .host_addressable = host_addressable,
    .memcpy_h2d = host_memcpy_h2d,
    .memcpy_d2h = host_memcpy_d2h,
    .memcpy_d2d = host_memcpy_d2d,
    .memset_d = host_memset,
    .queue_create = host_queue_create,
    .queue_submit = host_queue_submit,
    .queue_run_inline = host_queue_run_inline,
    .queue_completed = host_queue_completed,
    .queue_submitted = host_queue_submitted,
    .queue_wait = host_queue_wait,
    .queue_busy_ns = host_queue_busy_ns,
};

const tnrt_hal_t *tnrt_hal_host(void) { return &k_host_hal; }
