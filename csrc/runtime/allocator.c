/* The device caching allocator.
 *
 * Memory comes from the HAL in segments; segments are split into blocks and
 * blocks are cached on free, tagged with the stream they were allocated for,
 * so later work on that stream can reuse them without synchronising (stream-
 * ordered reuse, as in CUDA's caching allocator). Requests up to 1 MiB come
 * from 2 MiB segments (small pool), larger ones from 20 MiB segments or an
 * exact 2 MiB-rounded segment (large pool). The modelled HBM capacity is a
 * hard limit on reserved bytes. One mutex per device guards its state;
 * queue workers never call in here, so holding it while synchronising a
 * device cannot deadlock. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BLOCK 512u
#define SMALL_MAX (1u << 20)
#define SMALL_SEGMENT (2u << 20)
#define LARGE_SEGMENT (20u << 20)
#define MIN_LARGE_ALLOC (10u << 20)
#define ROUND_LARGE (2u << 20)
#define MAX_USES 8
#define NBINS (64 * 4)

struct tnrt_block {
  int device, pool;
  uint64_t mempool; /* 0: the default pool; else a MemPool's id */
  tnrt_stream_t *stream;
  void *ptr;
  size_t size, requested;
  size_t segment_size; /* for the first block of a segment */
  int shared;          /* the segment came from hal->mem_alloc_shared */
  int allocated, in_free_list;
  struct tnrt_block *prev, *next;   /* neighbours in the segment */
  struct tnrt_block *fprev, *fnext; /* free list of the bin */
  int bin;
  int n_uses, uses_overflow;
  tnrt_stream_t *uses[MAX_USES];
  uint64_t use_seq[MAX_USES];
  struct tnrt_block *pending_next;
};

typedef struct device_alloc {
  pthread_mutex_t mu;
  tnrt_block_t *bins[TNRT_POOL_COUNT][NBINS];
  uint64_t nonempty[TNRT_POOL_COUNT][NBINS / 64]; /* bit per bin with a free block */
  tnrt_block_t *pending; /* freed by client, waiting for recorded streams */
  uint64_t reserved;
  uint64_t limit; /* 0: the capacity; else set_per_process_memory_fraction's */
  double fraction;
  tnrt_memory_stats_t stats;
  /* block headers of merged blocks, reused by splits (linked by fnext):
   * an allocation that splits a cached block and its free used to cost a
   * calloc and a free each */
  tnrt_block_t *spare;
  int nspare;
} device_alloc_t;

enum { MAX_SPARE_HEADERS = 4096 };

/* A zeroed block header (a->mu held). */
static tnrt_block_t *header_get(device_alloc_t *a) {
  tnrt_block_t *h = a->spare;
  if (!h) return calloc(1, sizeof *h);
  a->spare = h->fnext;
  a->nspare--;
  memset(h, 0, sizeof *h);
  return h;
}

static void header_put(device_alloc_t *a, tnrt_block_t *h) {
  if (a->nspare >= MAX_SPARE_HEADERS) {
    free(h);
    return;
  }
  h->fnext = a->spare;
  a->spare = h;
  a->nspare++;
}

static device_alloc_t *g_alloc;
static int g_alloc_devices;

/* Segment registry for tnrt_ptr_device. */
typedef struct segment_rec {
  uintptr_t base;
  size_t size;
  int device;
  tnrt_block_t *head; /* the segment's first block (merges keep it) */
  int shared;         /* from hal->mem_alloc_shared: handle names it */
  tnrt_mem_handle_t handle;
} segment_rec_t;
static pthread_mutex_t g_seg_mu = PTHREAD_MUTEX_INITIALIZER;
static segment_rec_t *g_segs;
static size_t g_nsegs, g_seg_cap;

void tnrt_allocator_init(int device_count) {
  g_alloc = calloc((size_t)(device_count ? device_count : 1), sizeof *g_alloc);
  if (!g_alloc) return; /* tnrt_malloc then reports OOM */
  g_alloc_devices = device_count;
  for (int d = 0; d < device_count; d++) {
    pthread_mutex_init(&g_alloc[d].mu, NULL);
    g_alloc[d].stats.max_split_size = -1;
  }
}

static void stat_update(tnrt_stat_t *s, int pool, int64_t delta) {
  int idx[2] = {TNRT_POOL_ALL, pool};
  for (int i = 0; i < 2; i++) {
    tnrt_stat_t *x = &s[idx[i]];
    x->current += delta;
    if (delta > 0)
      x->allocated += delta;
    else
      x->freed -= delta;
    if (x->current > x->peak) x->peak = x->current;
  }
}

static int size_bin(size_t size) {
  int e = 63 - __builtin_clzll((unsigned long long)size);
  int sub = e >= 2 ? (int)((size >> (e - 2)) & 3) : 0;
  int b = e * 4 + sub;
  return b < NBINS ? b : NBINS - 1;
}

static size_t round_size(size_t bytes) {
  if (bytes < MIN_BLOCK) return MIN_BLOCK;
  return (bytes + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

static size_t segment_size_for(size_t size) {
  if (size <= SMALL_MAX) return SMALL_SEGMENT;
  if (size < MIN_LARGE_ALLOC) return LARGE_SEGMENT;
  return (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

static int is_split(const tnrt_block_t *b) { return b->prev || b->next; }

static void free_list_insert(device_alloc_t *a, tnrt_block_t *b) {
  b->bin = size_bin(b->size);
  tnrt_block_t **head = &a->bins[b->pool][b->bin];
  b->fprev = NULL;
  b->fnext = *head;
  if (*head) (*head)->fprev = b;
  *head = b;
  a->nonempty[b->pool][b->bin / 64] |= 1ull << (b->bin % 64);
  b->in_free_list = 1;
  if (is_split(b)) {
    stat_update(a->stats.inactive_split, b->pool, 1);
    stat_update(a->stats.inactive_split_bytes, b->pool, (int64_t)b->size);
  }
}

static void free_list_remove(device_alloc_t *a, tnrt_block_t *b) {
  if (b->fprev)
    b->fprev->fnext = b->fnext;
  else if (!(a->bins[b->pool][b->bin] = b->fnext))
    a->nonempty[b->pool][b->bin / 64] &= ~(1ull << (b->bin % 64));
  if (b->fnext) b->fnext->fprev = b->fprev;
  b->fprev = b->fnext = NULL;
  b->in_free_list = 0;
  if (is_split(b)) {
    stat_update(a->stats.inactive_split, b->pool, -1);
    stat_update(a->stats.inactive_split_bytes, b->pool, -(int64_t)b->size);
  }
}

/* The memory pool the calling thread allocates from, per device
 * (tnrt_mempool_begin); 0 is the default pool. */
static _Thread_local uint64_t t_mempool[TNRT_MAX_DEVICES];

/* The first bin from `bin` on that holds a free block, NBINS if none. */
static int next_nonempty(const device_alloc_t *a, int pool, int bin) {
  for (int w = bin / 64; w < NBINS / 64 && bin < NBINS; w++, bin = w * 64) {
    uint64_t bits = a->nonempty[pool][w] & (~0ull << (bin % 64));
    if (bits) return w * 64 + __builtin_ctzll(bits);
  }
  return NBINS;
}

static tnrt_block_t *find_free(device_alloc_t *a, int pool, size_t size, tnrt_stream_t *s,
                               uint64_t mempool) {
  for (int bin = next_nonempty(a, pool, size_bin(size)); bin < NBINS;
       bin = next_nonempty(a, pool, bin + 1)) {
    tnrt_block_t *best = NULL;
    for (tnrt_block_t *b = a->bins[pool][bin]; b; b = b->fnext)
      if (b->stream == s && b->mempool == mempool && b->size >= size &&
          (!best || b->size < best->size))
        best = b;
    if (best) return best;
  }
  return NULL;
}

/* tnrt_set_shared_segments: new segments come from hal->mem_alloc_shared. */
static atomic_int g_shared_segments;
/* Bumped whenever a shared segment is released (tnrt_mem_shared_handle). */
static _Atomic uint64_t g_shared_generation;

void tnrt_set_shared_segments(int on) { atomic_store(&g_shared_segments, on != 0); }

static void seg_register(uintptr_t base, size_t size, int device, tnrt_block_t *head,
                         const tnrt_mem_handle_t *handle) {
  pthread_mutex_lock(&g_seg_mu);
  if (g_nsegs == g_seg_cap) {
    size_t cap = g_seg_cap ? g_seg_cap * 2 : 64;
    segment_rec_t *n = realloc(g_segs, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_seg_mu);
      return;
    }
    g_segs = n;
    g_seg_cap = cap;
  }
  g_segs[g_nsegs] = (segment_rec_t){base, size, device, head, handle != NULL, {{0}}};
  if (handle) g_segs[g_nsegs].handle = *handle;
  g_nsegs++;
  pthread_mutex_unlock(&g_seg_mu);
}

static void seg_unregister(uintptr_t base) {
  pthread_mutex_lock(&g_seg_mu);
  for (size_t i = 0; i < g_nsegs; i++)
    if (g_segs[i].base == base) {
      g_segs[i] = g_segs[--g_nsegs];
      break;
    }
  pthread_mutex_unlock(&g_seg_mu);
}

/* The registered segment holding p, or NULL; the caller holds g_seg_mu. A
 * linear scan (a process holds tens to a few hundred segments), no system
 * call. */
static const segment_rec_t *seg_find(uintptr_t p) {
  for (size_t i = 0; i < g_nsegs; i++)
    if (p >= g_segs[i].base && p < g_segs[i].base + g_segs[i].size) return &g_segs[i];
  return NULL;
}

tnrt_status_t tnrt_mem_shared_handle(const void *ptr, tnrt_mem_handle_t *handle, size_t *offset,
                                     uint64_t *generation) {
  tnrt_status_t st = TNRT_ERR_NOT_SUPPORTED;
  if (!ptr) return st;
  pthread_mutex_lock(&g_seg_mu);
  const segment_rec_t *r = seg_find((uintptr_t)ptr);
  if (r && r->shared) {
    if (handle) *handle = r->handle;
    if (offset) *offset = (size_t)((uintptr_t)ptr - r->base);
    /* release_segment bumps it before the HAL frees a segment, so a later
     * segment that reuses a freed one's name (its descriptor and inode) is
     * always reported with a newer generation */
    if (generation) *generation = atomic_load(&g_shared_generation);
    st = TNRT_OK;
  }
  pthread_mutex_unlock(&g_seg_mu);
  return st;
}

int tnrt_ptr_device(const void *ptr) {
  pthread_mutex_lock(&g_seg_mu);
  const segment_rec_t *r = seg_find((uintptr_t)ptr);
  int dev = r ? r->device : -1;
  pthread_mutex_unlock(&g_seg_mu);
  return dev;
}

/* Device memory reserved on all devices (host memory backs it all). */
static _Atomic uint64_t g_host_reserved;

static tnrt_status_t alloc_segment(device_alloc_t *a, int device, int pool, size_t seg,
                                   tnrt_stream_t *s, tnrt_block_t **out) {
  if (a->reserved + seg > g_rt.capacity[device] || (a->limit && a->reserved + seg > a->limit))
    return TNRT_ERR_OUT_OF_MEMORY;
  /* all devices share the host memory that backs them */
  uint64_t host = atomic_fetch_add(&g_host_reserved, seg) + seg;
  if (host > g_rt.host_budget) {
    atomic_fetch_sub(&g_host_reserved, seg);
    return TNRT_ERR_OUT_OF_MEMORY;
  }
  tnrt_block_t *b = calloc(1, sizeof *b);
  if (!b) return TNRT_ERR_OUT_OF_MEMORY;
  void *p;
  tnrt_mem_handle_t handle;
  int shared = atomic_load(&g_shared_segments) && g_rt.hal->mem_alloc_shared;
  tnrt_status_t st = shared
                         ? g_rt.hal->mem_alloc_shared(g_rt.hal->context, device, seg, &p, &handle)
                         : g_rt.hal->mem_alloc(g_rt.hal->context, device, seg, &p);
  if (st != TNRT_OK) {
    atomic_fetch_sub(&g_host_reserved, seg);
    free(b);
    return TNRT_ERR_OUT_OF_MEMORY;
  }
  b->device = device;
  b->pool = pool;
  b->stream = s;
  b->ptr = p;
  b->size = seg;
  b->segment_size = seg;
  b->shared = shared;
  a->reserved += seg;
  a->stats.num_device_alloc++;
  stat_update(a->stats.segment, pool, 1);
  stat_update(a->stats.reserved_bytes, pool, (int64_t)seg);
  seg_register((uintptr_t)p, seg, device, b, shared ? &handle : NULL);
  *out = b;
  return TNRT_OK;
}

static void release_segment(device_alloc_t *a, tnrt_block_t *b) {
  seg_unregister((uintptr_t)b->ptr);
  /* a shared segment's memfd is closed by mem_free (hal_host.c) */
  if (b->shared) atomic_fetch_add(&g_shared_generation, 1);
  g_rt.hal->mem_free(g_rt.hal->context, b->device, b->ptr, b->segment_size);
  a->reserved -= b->segment_size;
  atomic_fetch_sub(&g_host_reserved, b->segment_size);
  a->stats.num_device_free++;
  stat_update(a->stats.segment, b->pool, -1);
  stat_update(a->stats.reserved_bytes, b->pool, -(int64_t)b->segment_size);
  free(b);
}

/* Returns a client-freed block to the cache, merging with free neighbours. */
static void cache_block(device_alloc_t *a, tnrt_block_t *b) {
  stat_update(a->stats.active, b->pool, -1);
  stat_update(a->stats.active_bytes, b->pool, -(int64_t)b->size);
  b->n_uses = 0;
  b->uses_overflow = 0;
  tnrt_block_t *p = b->prev;
  if (p && !p->allocated && p->in_free_list) {
    free_list_remove(a, p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    header_put(a, b);
    b = p;
  }
  tnrt_block_t *n = b->next;
  if (n && !n->allocated && n->in_free_list) {
    free_list_remove(a, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    header_put(a, n);
  }
  free_list_insert(a, b);
}

static int uses_done(tnrt_block_t *b) {
  for (int i = 0; i < b->n_uses; i++)
    if (tnrt_stream_completed(b->uses[i]) < b->use_seq[i]) return 0;
  return 1;
}

static void process_pending(device_alloc_t *a) {
  tnrt_block_t **pp = &a->pending;
  while (*pp) {
    tnrt_block_t *b = *pp;
    if (uses_done(b)) {
      *pp = b->pending_next;
      b->pending_next = NULL;
      cache_block(a, b);
    } else {
      pp = &b->pending_next;
    }
  }
}

/* Releases every cached block that spans a whole segment: of the default
 * pool (all), or of one memory pool. A live pool's cached blocks are never
 * released by the default pool's flushes (empty_cache, the retry after a
 * failed allocation), as CUDA's allocator keeps a private pool's: a
 * captured graph replays into the blocks its capture allocated and freed,
 * and released segments are unmapped (a replay after empty_cache or an
 * allocation retry faulted in kernels/index.c). */
static void release_cached_of(device_alloc_t *a, int all, uint64_t mempool) {
  for (int pool = 1; pool < TNRT_POOL_COUNT; pool++)
    for (int bin = 0; bin < NBINS; bin++) {
      tnrt_block_t *b = a->bins[pool][bin];
      while (b) {
        tnrt_block_t *next = b->fnext;
        if (!is_split(b) && b->mempool == (all ? 0 : mempool)) {
          free_list_remove(a, b);
          release_segment(a, b);
        }
        b = next;
      }
    }
}

static void release_cached(device_alloc_t *a) { release_cached_of(a, 1, 0); }

static void format_size(char *buf, size_t n, uint64_t bytes) {
  if (bytes >= (1ull << 30))
    snprintf(buf, n, "%.2f GiB", bytes / 1073741824.0);
  else if (bytes >= (1ull << 20))
    snprintf(buf, n, "%.2f MiB", bytes / 1048576.0);
  else
    snprintf(buf, n, "%.2f KiB", bytes / 1024.0);
}

tnrt_status_t tnrt_malloc(int device, size_t bytes, tnrt_stream_t *s, void **ptr,
                          tnrt_block_t **block) {
  *ptr = NULL;
  *block = NULL;
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  if (tnrt_in_bad_fork())
    return tnrt_set_error(TNRT_ERR_FORKED,
                          "the neuron runtime cannot be used in a forked "
                          "subprocess");
  if (!g_alloc) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "allocator not initialised");
  if (bytes == 0) return TNRT_OK;
  if (!s) s = tnrt_stream_get(device, 0);
  if (bytes > (SIZE_MAX >> 2))
    return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY,
                          "tried to allocate %zu bytes on neuron:%d, more than "
                          "any device can hold",
                          bytes, device);
  device_alloc_t *a = &g_alloc[device];
  size_t size = round_size(bytes);
  int pool = size <= SMALL_MAX ? TNRT_POOL_SMALL : TNRT_POOL_LARGE;

  pthread_mutex_lock(&a->mu);
  process_pending(a);
  uint64_t mempool = t_mempool[device];
  tnrt_block_t *b = find_free(a, pool, size, s, mempool);
  if (b) {
    free_list_remove(a, b);
  } else {
    size_t seg = segment_size_for(size);
    st = alloc_segment(a, device, pool, seg, s, &b);
    if (st == TNRT_OK) b->mempool = mempool;
    if (st != TNRT_OK) {
      /* Flush the cache and retry once, as CUDA's allocator does. Workers
       * may still be using cached blocks: synchronise before releasing. */
      a->stats.num_alloc_retries++;
      tnrt_device_wait(device);
      process_pending(a);
      release_cached(a);
      st = alloc_segment(a, device, pool, seg, s, &b);
      if (st == TNRT_OK) b->mempool = mempool;
    }
    if (st != TNRT_OK) {
      a->stats.num_ooms++;
      char req[32], cap[32], fr[32], al[32], rs[32];
      uint64_t capacity = g_rt.capacity[device];
      int64_t allocated = a->stats.allocated_bytes[0].current;
      format_size(req, sizeof req, bytes);
      format_size(cap, sizeof cap, capacity);
      format_size(fr, sizeof fr, capacity - a->reserved);
      format_size(al, sizeof al, (uint64_t)allocated);
      format_size(rs, sizeof rs, a->reserved - (uint64_t)allocated);
      if (a->limit && a->reserved + seg > a->limit && a->reserved + seg <= capacity) {
        char lim[32];
        format_size(lim, sizeof lim, a->limit);
        pthread_mutex_unlock(&a->mu);
        return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY,
                              "Tried to allocate %s. neuron:%d has a total capacity of %s, of "
                              "which this process may use %s (set_per_process_memory_fraction"
                              "(%g)). Of the allocated memory %s is allocated by PyTorch, and "
                              "%s is reserved by PyTorch but unallocated.",
                              req, device, cap, lim, a->fraction, al, rs);
      }
      if (a->reserved + seg <= capacity) { /* the shared host budget ran out */
        char budget[32], used[32];
        format_size(budget, sizeof budget, g_rt.host_budget);
        format_size(used, sizeof used, atomic_load(&g_host_reserved));
        pthread_mutex_unlock(&a->mu);
        return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY,
                              "Tried to allocate %s on neuron:%d. The host memory that backs "
                              "all neuron devices (%s) is exhausted: %s is reserved across "
                              "devices. Of neuron:%d's memory %s is allocated by PyTorch, and "
                              "%s is reserved by PyTorch but unallocated (torch.neuron."
                              "empty_cache() releases it).",
                              req, device, budget, used, device, al, rs);
      }
      pthread_mutex_unlock(&a->mu);
      return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY,
                            "Tried to allocate %s. neuron:%d has a total capacity of %s of "
                            "which %s is free. Of the allocated memory %s is allocated by "
                            "PyTorch, and %s is reserved by PyTorch but unallocated.",
                            req, device, cap, fr, al, rs);
    }
  }
  size_t remaining = b->size - size;
  if ((pool == TNRT_POOL_SMALL && remaining >= MIN_BLOCK) ||
      (pool == TNRT_POOL_LARGE && remaining > SMALL_MAX)) {
    tnrt_block_t *r = header_get(a);
    if (r) {
      *r = (tnrt_block_t){.device = device,
                          .pool = pool,
                          .stream = b->stream,
                          .ptr = (char *)b->ptr + size,
                          .size = remaining,
                          .prev = b,
                          .next = b->next,
                          .mempool = b->mempool};
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      free_list_insert(a, r);
    }
  }
  b->allocated = 1;
  b->requested = bytes;
  stat_update(a->stats.allocation, pool, 1);
  stat_update(a->stats.allocated_bytes, pool, (int64_t)b->size);
  stat_update(a->stats.active, pool, 1);
  stat_update(a->stats.active_bytes, pool, (int64_t)b->size);
  stat_update(a->stats.requested_bytes, pool, (int64_t)bytes);
  pthread_mutex_unlock(&a->mu);
  *ptr = b->ptr;
  *block = b;
  return TNRT_OK;
}

void tnrt_free(tnrt_block_t *b) {
  if (!b) return;
  device_alloc_t *a = &g_alloc[b->device];
  if (b->uses_overflow) tnrt_device_wait(b->device);
  pthread_mutex_lock(&a->mu);
  b->allocated = 0;
  stat_update(a->stats.allocation, b->pool, -1);
  stat_update(a->stats.allocated_bytes, b->pool, -(int64_t)b->size);
  stat_update(a->stats.requested_bytes, b->pool, -(int64_t)b->requested);
  /* Snapshot how far each recorded stream must get before reuse. */
  int kept = 0;
  for (int i = 0; i < b->n_uses; i++) {
    uint64_t seq = tnrt_stream_submitted(b->uses[i]);
    if (tnrt_stream_completed(b->uses[i]) < seq) {
      b->uses[kept] = b->uses[i];
      b->use_seq[kept++] = seq;
    }
  }
  b->n_uses = kept;
  b->uses_overflow = 0;
  if (kept) {
    b->pending_next = a->pending;
    a->pending = b;
  } else {
    cache_block(a, b);
  }
  pthread_mutex_unlock(&a->mu);
}

tnrt_status_t tnrt_record_stream(tnrt_block_t *b, tnrt_stream_t *s) {
  if (!b || !s) return TNRT_OK;
  device_alloc_t *a = &g_alloc[b->device];
  pthread_mutex_lock(&a->mu);
  if (s != b->stream) {
    int known = 0;
    for (int i = 0; i < b->n_uses; i++) known |= b->uses[i] == s;
    if (!known) {
      if (b->n_uses < MAX_USES)
        b->uses[b->n_uses++] = s;
      else
        b->uses_overflow = 1; /* free then synchronises the device */
    }
  }
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

/* Returns unused segments (all, or those of one memory pool) to the HAL,
 * after the device's queued work: workers may still use cached blocks. */
static tnrt_status_t release_unused(int device, int all, uint64_t mempool) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  tnrt_device_wait(device);
  pthread_mutex_lock(&a->mu);
  process_pending(a);
  release_cached_of(a, all, mempool);
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

tnrt_status_t tnrt_empty_cache(int device) { return release_unused(device, 1, 0); }

tnrt_status_t tnrt_memory_stats(int device, tnrt_memory_stats_t *out) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
  *out = a->stats;
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

// clang-format off
#define FOR_EACH_STAT_ARRAY(s, X) \
  X(s.allocation) \
  X(s.segment) \
  X(s.active) \
  X(s.inactive_split) \
  X(s.allocated_bytes) \
  X(s.reserved_bytes) \
  X(s.active_bytes) \
  X(s.inactive_split_bytes) \
  X(s.requested_bytes)
// clang-format on

tnrt_status_t tnrt_reset_peak_stats(int device) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
#define RESET_PEAK(arr) \
  for (int i = 0; i < TNRT_POOL_COUNT; i++) arr[i].peak = arr[i].current;
  FOR_EACH_STAT_ARRAY(a->stats, RESET_PEAK)
#undef RESET_PEAK
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

tnrt_status_t tnrt_reset_accumulated_stats(int device) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
#define RESET_ACC(arr)                        \
  for (int i = 0; i < TNRT_POOL_COUNT; i++) { \
    arr[i].allocated = 0;                     \
    arr[i].freed = 0;                         \
  }
  FOR_EACH_STAT_ARRAY(a->stats, RESET_ACC)
#undef RESET_ACC
  a->stats.num_alloc_retries = a->stats.num_ooms = 0;
  a->stats.num_device_alloc = a->stats.num_device_free = 0;
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

tnrt_status_t tnrt_mem_get_info(int device, uint64_t *free_bytes, uint64_t *total_bytes) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
  *total_bytes = g_rt.capacity[device];
  *free_bytes = g_rt.capacity[device] - a->reserved;
  uint64_t host = atomic_load(&g_host_reserved);
  uint64_t host_free = host < g_rt.host_budget ? g_rt.host_budget - host : 0;
  if (host_free < *free_bytes) *free_bytes = host_free;
  if (a->limit) {
    uint64_t lim_free = a->limit > a->reserved ? a->limit - a->reserved : 0;
    if (lim_free < *free_bytes) *free_bytes = lim_free;
  }
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

tnrt_status_t tnrt_set_memory_fraction(int device, double fraction) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  if (!(fraction >= 0.0 && fraction <= 1.0))
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "Invalid fraction value: %g. Allowed range: 0~1", fraction);
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
  a->fraction = fraction;
  a->limit = fraction >= 1.0 ? 0 : (uint64_t)((double)g_rt.capacity[device] * fraction);
  if (fraction < 1.0 && a->limit == 0) a->limit = 1; /* 0.0: nothing at all */
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

tnrt_status_t tnrt_get_memory_fraction(int device, double *fraction) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
  *fraction = a->limit ? a->fraction : 1.0;
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

size_t tnrt_block_size(const tnrt_block_t *block) { return block ? block->size : 0; }
int tnrt_block_device(const tnrt_block_t *block) { return block ? block->device : -1; }
void *tnrt_block_ptr(const tnrt_block_t *block) { return block ? block->ptr : NULL; }

tnrt_status_t tnrt_memory_walk(int device, tnrt_segment_fn on_segment, tnrt_block_fn on_block,
                               void *ctx) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
  pthread_mutex_lock(&g_seg_mu);
  for (size_t i = 0; i < g_nsegs; i++) {
    if (g_segs[i].device != device || !g_segs[i].head) continue;
    tnrt_block_t *h = g_segs[i].head;
    tnrt_segment_info_t si = {g_segs[i].base, g_segs[i].size, h->pool,
                              h->stream ? tnrt_stream_index(h->stream) : 0, h->mempool};
    on_segment(ctx, &si);
    for (tnrt_block_t *b = h; b; b = b->next) {
      tnrt_block_info_t bi = {(uintptr_t)b->ptr, b->size, b->requested, b->allocated};
      on_block(ctx, &bi);
    }
  }
  pthread_mutex_unlock(&g_seg_mu);
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}

tnrt_status_t tnrt_mempool_begin(int device, uint64_t mempool) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  t_mempool[device] = mempool;
  return TNRT_OK;
}

tnrt_status_t tnrt_mempool_end(int device) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  t_mempool[device] = 0;
  return TNRT_OK;
}

/* A deleted pool: its unused segments are released, and the blocks of the
 * segments still in use join the default pool (freed, they are reused and
 * released as its own). */
tnrt_status_t tnrt_mempool_release(int device, uint64_t mempool) {
  tnrt_status_t st = release_unused(device, 0, mempool);
  if (st != TNRT_OK || mempool == 0) return st;
  device_alloc_t *a = &g_alloc[device];
  pthread_mutex_lock(&a->mu);
  pthread_mutex_lock(&g_seg_mu);
  for (size_t i = 0; i < g_nsegs; i++) {
    tnrt_block_t *h = g_segs[i].head;
    if (g_segs[i].device != device || !h || h->mempool != mempool) continue;
    for (tnrt_block_t *b = h; b; b = b->next) b->mempool = 0;
  }
  pthread_mutex_unlock(&g_seg_mu);
  pthread_mutex_unlock(&a->mu);
  return TNRT_OK;
}
