/* The shared-memory communicator (ccl.h). */
#define _GNU_SOURCE
#include "ccl.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/dtype.h"
#include "../runtime/internal.h" /* tnrt_set_error */
#include "../kernels/config.h"   /* tnk_config: copy_stream */
#include "../kernels/tnk.h"

#define LINE 64                      /* a cache line: every counter on its own */
#define SLOT_BYTES ((size_t)1 << 21) /* per round and slot: 2 MiB */
#define P2P_CHUNKS 4                 /* chunks in flight per (sender, receiver) pair */
#define P2P_CHUNK ((size_t)64 << 10) /* data per chunk: an outbox holds 256 KiB */
#define P2P_HEADERS 4096             /* the chunks' headers, before their data */
#define OUTBOX_BYTES (P2P_HEADERS + P2P_CHUNKS * P2P_CHUNK)
#define SPIN_NS 1000000     /* how long a wait spins (yielding) before it sleeps */
#define MAX_SLEEP_NS 100000 /* the longest sleep of a wait */
/* The direct path (ccl.h): collectives of at least DIRECT_MIN bytes whose
 * ranks' source buffers are all shared device memory read the peers'
 * buffers in place. Chosen by measurement (test_ccl --bandwidth 2 from 16
 * KiB to 1 MiB, a build with the direct path always taken against one
 * with it never, 2 ranks on 2 cores, median of batches): the direct path
 * costs about 7 us more per call (its announce round and its final
 * barrier) and saves the copies through the slots; all_reduce breaks even
 * at 64-128 KiB, all_gather and reduce_scatter (one round when staged) at
 * about 256 KiB, and from 512 KiB on direct is 1.3-2x faster. Below the
 * threshold the staged path's single round trip is kept. The threshold is
 * on the message as the descriptor fixes it (all_reduce and broadcast: the
 * buffer; all_gather: the output; reduce_scatter: the input; all_to_all_v:
 * what its busiest rank receives from its peers, from the count matrix
 * every rank has), so every rank decides the same. all_to_all_v's direct
 * path adds no round (its count round is the announce round) and measured
 * faster than staged down to 1 KiB per rank (2 ranks); it keeps the same
 * threshold for now. */
#ifdef TNCCL_DIRECT_MIN /* (a build for measuring it) */
#define DIRECT_MIN ((size_t)TNCCL_DIRECT_MIN)
#else
#define DIRECT_MIN ((size_t)256 << 10)
#endif
/* A direct reduction works through its share in pieces of this many bytes
 * per input, so that with 3 or more ranks the partial result stays in the
 * cache between the inputs' passes. Not tuned yet (an L2-sized guess);
 * build with -DTNCCL_DIRECT_PIECE=... and run test_ccl --bandwidth to. */
#ifdef TNCCL_DIRECT_PIECE
#define DIRECT_PIECE ((size_t)TNCCL_DIRECT_PIECE)
#else
#define DIRECT_PIECE ((size_t)256 << 10)
#endif
/* Peers' shared segments kept mapped per peer (least recently used one
 * unmapped beyond). */
#define MAP_CACHE 64

/* The collectives a descriptor names. */
typedef enum kind {
  K_ALL_REDUCE = 1,
  K_REDUCE_SCATTER,
  K_BROADCAST,
  K_ALL_GATHER,
  K_BARRIER,
  K_ALL_TO_ALL_V,
} kind_t;

/* What defines a collective call's shape, as its rank passed it: published
 * in the first round of every collective call, checked by every rank
 * against its own before any data moves. Fields a kind does not have are
 * -1 (0 for count), so two descriptors match when all fields are equal. */
typedef struct desc {
  uint64_t round;  /* the round it was published in (a check of the protocol) */
  int64_t count;   /* elements (all_reduce, reduce_scatter) or bytes (broadcast,
                      all_gather) */
  int32_t kind;    /* kind_t */
  int32_t dtype;   /* all_reduce, reduce_scatter */
  int32_t op;      /* all_reduce, reduce_scatter */
  int32_t root;    /* broadcast */
  int32_t invalid; /* the rank's own checks rejected its arguments */
  char pad[LINE - 2 * sizeof(uint64_t) - 5 * sizeof(int32_t)];
} desc_t;
_Static_assert(sizeof(desc_t) == LINE, "a descriptor fills a line");

/* A rank's source buffer for the direct path, published with the
 * descriptor of a call's announce round (double-buffered by round parity as
 * desc): valid when the buffer lies in shared device memory
 * (tnrt_mem_shared_handle), then the segment's handle, the buffer's offset
 * in it and the rank's generation of shared segments. */
typedef struct dsrc {
  tnrt_mem_handle_t handle;
  uint64_t offset, generation;
  int32_t valid;
  char pad[2 * LINE - sizeof(tnrt_mem_handle_t) - 2 * sizeof(uint64_t) - sizeof(int32_t)];
} dsrc_t;
_Static_assert(sizeof(dsrc_t) == 2 * LINE, "a source descriptor fills two lines");

/* The owner's counters, read by the peers: the last round it has posted its
 * data for, reduced its share of, and finished reading the peers' slots;
 * then the descriptor of its last collective call, double-buffered by round
 * parity: desc[k & 1] is written in round k, before posted = k, and read by
 * the peers between their wait for posted >= k and their done = k. The
 * owner writes that entry again in round k + 2 at the earliest, which it
 * starts only once every peer's done >= k: a peer never reads a newer
 * descriptor than the one of round k. */
typedef struct ctrl {
  _Atomic uint64_t posted;
  char pad0[56];
  _Atomic uint64_t reduced;
  char pad1[56];
  _Atomic uint64_t done;
  char pad2[56];
  desc_t desc[2];
  dsrc_t dsrc[2];
  /* the direct round in which the owner could not map a peer's buffer
   * (written before its done = that round) */
  _Atomic uint64_t failed;
  char pad3[56];
} ctrl_t;

/* After the ctrl_t, two lines per peer q: the chunks the owner has put in its
 * outbox for q (sent), and the chunks it has consumed from q's outbox for it
 * (used). */
typedef struct line {
  _Atomic uint64_t v;
  char pad[LINE - sizeof(uint64_t)];
} line_t;

/* A chunk's header, written by the sender before it publishes the chunk:
 * the size of the message the chunk belongs to, and where in it the chunk's
 * len bytes go. */
typedef struct chunk_hdr {
  uint64_t total, off, len;
  char pad[LINE - 3 * sizeof(uint64_t)];
} chunk_hdr_t;
_Static_assert(P2P_CHUNKS * sizeof(chunk_hdr_t) <= P2P_HEADERS, "the headers fit");

/* A segment: [ctrl_t | 2 * nranks lines, to a page] [slot 0] [slot 1]
 * [outbox for rank 0] ... [outbox for rank nranks - 1]. */
static size_t ctrl_bytes_for(int nranks) {
  size_t b = sizeof(ctrl_t) + 2 * (size_t)nranks * LINE;
  return (b + 4095) / 4096 * 4096;
}
static size_t seg_bytes_for(int nranks) {
  return ctrl_bytes_for(nranks) + 2 * SLOT_BYTES + (size_t)nranks * OUTBOX_BYTES;
}

struct tnccl_comm {
  int device, rank, nranks;
  int64_t timeout_ns;
  uint64_t round;    /* rounds this rank has run */
  size_t ctrl_bytes; /* the segment's layout (the same on every rank) */
  size_t seg_bytes;
  char *mine; /* this rank's segment */
  char **seg; /* every rank's segment as mapped here (seg[rank] = mine) */
  /* the direct path */
  int direct;             /* this rank offers its buffers (tnccl_comm_set_direct) */
  uint64_t direct_calls;  /* collectives that took it */
  struct peer_maps *maps; /* per rank: the peer's segments mapped here */
  uint64_t tick;          /* the maps' LRU clock */
  char **ptrs;            /* per rank: the call's source buffer as seen here */
  const char **srcs;      /* reduce_n's inputs */
  size_t stream_min;      /* direct copies of calls touching this many bytes stream */
};
static size_t last_level_cache(void);

/* A peer's shared segment mapped here, by its handle. */
typedef struct peer_map {
  tnrt_mem_handle_t handle;
  void *ptr;
  size_t bytes;
  uint64_t used; /* the comm's tick at its last use */
} peer_map_t;
typedef struct peer_maps {
  uint64_t generation; /* the peer's, when these were mapped */
  int n;
  peer_map_t e[MAP_CACHE];
} peer_maps_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ctrl_t *ctrl_of(const tnccl_comm_t *c, int r) { return (ctrl_t *)c->seg[r]; }
static char *slot_of(const tnccl_comm_t *c, int r, uint64_t round) {
  return c->seg[r] + c->ctrl_bytes + (round & 1) * SLOT_BYTES;
}
static line_t *lines_of(const tnccl_comm_t *c, int r) {
  return (line_t *)(c->seg[r] + sizeof(ctrl_t));
}
/* Chunks rank `owner` has published for rank q / consumed from rank q. */
static _Atomic uint64_t *sent_ctr(const tnccl_comm_t *c, int owner, int q) {
  return &lines_of(c, owner)[2 * q].v;
}
static _Atomic uint64_t *used_ctr(const tnccl_comm_t *c, int owner, int q) {
  return &lines_of(c, owner)[2 * q + 1].v;
}
/* Rank `owner`'s outbox for rank q. */
static char *outbox_of(const tnccl_comm_t *c, int owner, int q) {
  return c->seg[owner] + c->ctrl_bytes + 2 * SLOT_BYTES + (size_t)q * OUTBOX_BYTES;
}

/* ---- waiting for peers ---- */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* One wait for something peers do; reset (= {0}) when progress is made. */
typedef struct waiter {
  int64_t start; /* clock at the first check after the busy spins, 0 before */
  int64_t sleep_ns;
  int spins;
} waiter_t;

/* One pause of a wait: busy spins first (a small message's latency), then
 * yields the core, and after SPIN_NS sleeps, each sleep twice the last up
 * to MAX_SLEEP_NS, so a long wait holds no core. 0 once the wait has lasted
 * the communicator's timeout. */
static int pause_wait(const tnccl_comm_t *c, waiter_t *w) {
  if (w->spins < 200) {
    w->spins++;
    cpu_relax();
    return 1;
  }
  int64_t t = now_ns();
  if (!w->start) w->start = t;
  int64_t waited = t - w->start;
  if (waited >= c->timeout_ns) return 0;
  if (waited < SPIN_NS) {
    sched_yield();
    return 1;
  }
  w->sleep_ns = w->sleep_ns ? w->sleep_ns * 2 : 1000;
  if (w->sleep_ns > MAX_SLEEP_NS) w->sleep_ns = MAX_SLEEP_NS;
  struct timespec ts = {0, (long)w->sleep_ns};
  nanosleep(&ts, NULL);
  return 1;
}

/* Waits until every peer's counter at `field` reaches `target`. */
static tnrt_status_t wait_all(tnccl_comm_t *c, size_t field, uint64_t target, const char *what) {
  waiter_t w = {0};
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    _Atomic uint64_t *v = (_Atomic uint64_t *)((char *)ctrl_of(c, r) + field);
    while (atomic_load_explicit(v, memory_order_acquire) < target)
      if (!pause_wait(c, &w))
        return tnrt_set_error(TNRT_ERR_NOT_READY,
                              "collective timed out waiting for rank %d (%s of round %llu): "
                              "has it exited or left the collective?",
                              r, what, (unsigned long long)target);
  }
  return TNRT_OK;
}

#define WAIT(c, f, t, w) wait_all((c), offsetof(ctrl_t, f), (t), (w))

tnrt_status_t tnccl_comm_init(int device, int rank, int nranks, int64_t timeout_ms,
                              tnccl_allgather_fn exchange, void *ctx, tnccl_comm_t **out) {
  if (nranks < 1 || rank < 0 || rank >= nranks || !exchange || !out)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "communicator rank %d of %d", rank, nranks);
  tnccl_comm_t *c = calloc(1, sizeof *c);
  tnrt_mem_handle_t *all = calloc((size_t)nranks, sizeof *all);
  char **seg = calloc((size_t)nranks, sizeof *seg);
  peer_maps_t *maps = calloc((size_t)nranks, sizeof *maps);
  char **ptrs = calloc((size_t)nranks, sizeof *ptrs);
  const char **srcs = calloc((size_t)nranks, sizeof *srcs);
  if (!c || !all || !seg || !maps || !ptrs || !srcs) {
    free(seg);
    free(c);
    free(all);
    free(maps);
    free(ptrs);
    free(srcs);
    return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "communicator");
  }
  const char *env = getenv("TORCH_NEURONX_CCL_DIRECT");
  *c = (tnccl_comm_t){.device = device,
                      .rank = rank,
                      .nranks = nranks,
                      .timeout_ns = timeout_ms * 1000000,
                      .ctrl_bytes = ctrl_bytes_for(nranks),
                      .seg_bytes = seg_bytes_for(nranks),
                      .seg = seg,
                      .direct = !(env && !strcmp(env, "0")),
                      .maps = maps,
                      .ptrs = ptrs,
                      .srcs = srcs,
                      .stream_min = last_level_cache()};
  tnrt_mem_handle_t h;
  void *mine;
  tnrt_status_t st = tnrt_mem_alloc_shared(device, c->seg_bytes, &mine, &h);
  if (st != TNRT_OK) goto fail;
  c->mine = mine;
  c->seg[rank] = mine;
  memset(mine, 0, c->ctrl_bytes); /* the counters start at round 0, no chunk sent */
  if (exchange(ctx, &h, all, sizeof h) != 0) {
    st = tnrt_set_error(TNRT_ERR_INTERNAL, "the bootstrap exchange failed");
    goto fail;
  }
  for (int r = 0; r < nranks; r++) {
    if (r == rank) continue;
    void *p;
    size_t bytes;
    st = tnrt_mem_import(device, &all[r], &p, &bytes);
    if (st != TNRT_OK) goto fail;
    if (bytes != c->seg_bytes) { /* its layout is for another rank count */
      tnrt_mem_unimport(device, p, bytes);
      st = tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "rank %d's communicator segment has %zu bytes where this rank's has "
                          "%zu: do all ranks pass the same nranks (%d here)?",
                          r, bytes, c->seg_bytes, nranks);
      goto fail;
    }
    c->seg[r] = p;
  }
  free(all);
  *out = c;
  return TNRT_OK;
fail:
  free(all);
  tnccl_comm_destroy(c);
  return st;
}

static void drop_maps(tnccl_comm_t *c, peer_maps_t *m) {
  for (int i = 0; i < m->n; i++) tnrt_mem_unimport(c->device, m->e[i].ptr, m->e[i].bytes);
  m->n = 0;
}

void tnccl_comm_destroy(tnccl_comm_t *c) {
  if (!c) return;
  for (int r = 0; r < c->nranks; r++) drop_maps(c, &c->maps[r]);
  free(c->maps);
  free(c->ptrs);
  free(c->srcs);
  for (int r = 0; r < c->nranks; r++) {
    if (!c->seg[r]) continue;
    if (r == c->rank)
      tnrt_mem_free_shared(c->device, c->seg[r], c->seg_bytes);
    else
      tnrt_mem_unimport(c->device, c->seg[r], c->seg_bytes);
  }
  free(c->seg);
  free(c);
}

void tnccl_comm_set_direct(tnccl_comm_t *c, int on) {
  if (c) c->direct = on != 0;
}
void tnccl_comm_set_stream_min(tnccl_comm_t *c, size_t bytes) {
  if (c) c->stream_min = bytes;
}

/* The host's last-level cache in bytes (32 MiB where the C library does
 * not say); the default of stream_min. */
static size_t last_level_cache(void) {
  long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
  l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 <= 0) l3 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return l3 > 0 ? (size_t)l3 : (size_t)32 << 20;
}

/* A direct path's copy into another buffer. When the call touches more
 * memory than the cache holds (stream), the destination is written with
 * the kernel library's streaming stores where its ISA has them
 * (copy_stream): a cached store first reads the line it overwrites (read
 * for ownership), 3 bytes of DRAM traffic per byte copied where streaming
 * moves 2. Measured on the development host (2 threads, 256 KiB pieces of
 * a 64 MiB copy each): 1.4x memcpy's bandwidth. copy_stream fences its
 * stores, so the release store that tells the peers the copy is done
 * follows them. */
static void direct_copy(void *dst, const void *src, size_t m, int stream) {
  void (*copy_stream)(void *, const void *, int64_t) = tnk_config()->vmath.copy_stream;
  if (stream && copy_stream)
    copy_stream(dst, src, (int64_t)m);
  else
    memcpy(dst, src, m);
}
uint64_t tnccl_comm_direct_calls(const tnccl_comm_t *c) { return c ? c->direct_calls : 0; }

int tnccl_comm_rank(const tnccl_comm_t *c) { return c->rank; }
int tnccl_comm_size(const tnccl_comm_t *c) { return c->nranks; }

/* ---- reduction of n inputs into out ---- */

static int is_half(int dt) { return dt == TNK_F16 || dt == TNK_BF16; }
static int is_float(int dt) { return dt == TNK_F32 || dt == TNK_F64 || is_half(dt); }

static int binary_op(tnccl_op_t op) {
  switch (op) {
    case TNCCL_SUM:
    case TNCCL_AVG: return TNK_ADD;
    case TNCCL_PRODUCT: return TNK_MUL;
    case TNCCL_MIN: return TNK_MINIMUM;
    case TNCCL_MAX: return TNK_MAXIMUM;
    case TNCCL_BAND: return TNK_BITAND;
    case TNCCL_BOR: return TNK_BITOR;
    case TNCCL_BXOR: return TNK_BITXOR;
  }
  return -1;
}

/* out = a op b over n contiguous elements of dtype (the kernel library's
 * loops, vectorised per ISA). */
static void combine(void *out, const void *a, const void *b, int64_t n, int dtype, int bop) {
  tnk_binary_args_t x = {.shape = {.ndim = 1, .sizes = {n}},
                         .out = {.data = out, .dtype = dtype, .strides = {1}},
                         .a = {.data = (void *)a, .dtype = dtype, .strides = {1}},
                         .b = {.data = (void *)b, .dtype = dtype, .strides = {1}},
                         .op = bop,
                         .dtype = dtype,
                         .alpha = 1.0,
                         .ialpha = 1};
  tnk_binary(&x);
}

/* buf /= divisor over n contiguous elements of f32 or f64: the kernel
 * library's vectorised division by a scalar operand held at the compute
 * precision (as PyTorch divides by a Python number). For f32 the result is
 * the same as the former (float)((double)x / divisor): a quotient of two
 * floats rounded to double and then to float is rounded correctly (53 >=
 * 2 * 24 + 2 bits). */
static void divide(void *buf, int64_t n, int dtype, int divisor) {
  double unused = 0; /* the scalar operand's (stride 0) view, never read */
  tnk_binary_args_t x = {.shape = {.ndim = 1, .sizes = {n}},
                         .out = {.data = buf, .dtype = dtype, .strides = {1}},
                         .a = {.data = buf, .dtype = dtype, .strides = {1}},
                         .b = {.data = &unused, .dtype = dtype, .strides = {0}},
                         .op = TNK_DIV,
                         .dtype = dtype,
                         .alpha = 1.0,
                         .ialpha = 1,
                         .scalar_operand = 2,
                         .scalar = (double)divisor};
  tnk_binary(&x);
}

/* Block conversions between the half types and fp32, round to nearest even:
 * contiguous loops over restrict pointers, which GCC vectorises (the kernel
 * library's tnk_copy converts element by element on run-time strides, and
 * its vectorised loops keep one dtype). bf16 uses dtype.h's converters,
 * which vectorise as they are; dtype.h's fp16 converters branch (a
 * normalising loop for subnormals), so fp16 has branch-free forms here that
 * select with masks, bit-identical to tnk_f16_to_f32 / tnk_f32_to_f16 for
 * every input (checked over all 2^16 and 2^32 inputs when written) and
 * independent of the FTZ / DAZ modes: a subnormal fp16 is a normal fp32,
 * converted from its integer mantissa, and fp32 inputs below 2^-14 round
 * with an fp32 addition of 0.5 whose result is normal. */
#define MASK(cond) ((uint32_t)0 - (uint32_t)(cond))
#define SELECT(m, a, b) (((a) & (m)) | ((b) & ~(m)))

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float f16_to_f32_sel(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t normal = ((e + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
  uint32_t sub = f32_bits((float)(int32_t)man * 0x1p-24f);
  uint32_t u = SELECT(MASK(e == 0), sub, normal) | (MASK(e == 0x1f) & 0x7f800000u);
  return bits_f32(sign | u);
}

static inline uint16_t f32_to_f16_sel(float f) {
  uint32_t u = f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
  int32_t sa = (int32_t)a; /* a < 2^31: signed compares, which SSE2 has */
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u; /* ulp of 0.5: 2^-24 */
  uint32_t r = SELECT(MASK(sa < 0x38800000), sub, normal);   /* below 2^-14 */
  r = SELECT(MASK(sa >= 0x477ff000), 0x7c00u, r);            /* rounds to inf */
  r = SELECT(MASK(sa > 0x7f800000), 0x7e00u, r);             /* NaN */
  return (uint16_t)(sign | r);
}

/* NAME_load: d = fp32 of s; NAME_add: d += fp32 of s; NAME_store: d = s
 * rounded. */
#define HALF_LOOPS(NAME, TO_F32, FROM_F32)                                             \
  static void NAME##_load(float *restrict d, const uint16_t *restrict s, int64_t n) {  \
    for (int64_t i = 0; i < n; i++) d[i] = TO_F32(s[i]);                               \
  }                                                                                    \
  static void NAME##_add(float *restrict d, const uint16_t *restrict s, int64_t n) {   \
    for (int64_t i = 0; i < n; i++) d[i] = d[i] + TO_F32(s[i]);                        \
  }                                                                                    \
  static void NAME##_store(uint16_t *restrict d, const float *restrict s, int64_t n) { \
    for (int64_t i = 0; i < n; i++) d[i] = FROM_F32(s[i]);                             \
  }
HALF_LOOPS(bf16, tnk_bf16_to_f32, tnk_f32_to_bf16)
HALF_LOOPS(f16, f16_to_f32_sel, f32_to_f16_sel)

/* out[i] = op over ranks of their inputs' element i, i < n; in[j] is rank
 * (rank + j) % nranks's input. Half types take the ranks in rank order,
 * accumulate in fp32 (AVG then divides in fp32) and round once, as PyTorch
 * reduces them on CPU; an element's result does not depend on which rank
 * reduces it. The other dtypes start from this rank's input. out may be
 * in[0] (and no other input). */
static void reduce_n(tnccl_comm_t *c, void *out, const char **in, int64_t n, int dtype,
                     tnccl_op_t op) {
  int bop = binary_op(op), nr = c->nranks;
  size_t esz = tnk_dtype_size(dtype);
  if (is_half(dtype)) {
    enum { B = 1024 };
    float acc[B], v[B];
    int bf = dtype == TNK_BF16, sum = op == TNCCL_SUM || op == TNCCL_AVG;
    for (int64_t i0 = 0; i0 < n; i0 += B) { /* the block is read from every input, then written */
      int64_t m = n - i0 < B ? n - i0 : B;
      for (int r = 0; r < nr; r++) {
        const uint16_t *x = (const uint16_t *)in[(r - c->rank + nr) % nr] + i0;
        if (r == 0)
          (bf ? bf16_load : f16_load)(acc, x, m);
        else if (sum) /* fused: the same fp32 additions as the kernel's */
          (bf ? bf16_add : f16_add)(acc, x, m);
        else {
          (bf ? bf16_load : f16_load)(v, x, m);
          combine(acc, acc, v, m, TNK_F32, bop);
        }
      }
      if (op == TNCCL_AVG) {
        float d = (float)nr;
        for (int64_t i = 0; i < m; i++) acc[i] = acc[i] / d;
      }
      (bf ? bf16_store : f16_store)((uint16_t *)out + i0, acc, m);
    }
    return;
  }
  if (nr == 1)
    memmove(out, in[0], (size_t)n * esz);
  else
    combine(out, in[0], in[1], n, dtype, bop);
  for (int r = 2; r < nr; r++) combine(out, out, in[r], n, dtype, bop);
  if (op != TNCCL_AVG || nr == 1) return;
  if (is_float(dtype)) {
    divide(out, n, dtype, nr);
    return;
  }
  for (int64_t i = 0; i < n; i++) { /* integers: truncating division */
    tnk_val_t v = tnk_load_any((char *)out + i * esz, dtype);
    v.i /= nr;
    v.re = (double)v.i;
    tnk_store_any((char *)out + i * esz, dtype, v);
  }
}

/* ---- the cross-rank check of a collective's arguments ----
 * The first round of every collective call carries the caller's descriptor
 * (desc_t): each rank writes it before its posted and, after its wait for
 * every peer's posted, compares all ranks' with its own. The ranks see the
 * same descriptors, so they all reach the same verdict: all go on, or all
 * finish that round without touching their buffers (finish_round) and
 * return TNRT_ERR_INVALID_ARGUMENT. Either way every rank has run the same
 * rounds, so the communicator stays in step. A descriptor fixes everything
 * the number of rounds and the slots' layout depend on; all_to_all_v's
 * counts are checked in the same round (in its slot). */

static const char *kind_name(int kind) {
  static const char *const names[] = {"?",          "all_reduce", "reduce_scatter", "broadcast",
                                      "all_gather", "barrier",    "all_to_all_v"};
  return kind > 0 && kind <= K_ALL_TO_ALL_V ? names[kind] : "?";
}

static const char *dtype_name(int dt, char *buf, size_t n) {
  static const char *const names[TNK_DTYPE_COUNT] = {
      [TNK_BOOL] = "bool",   [TNK_U8] = "uint8",      [TNK_I8] = "int8",
      [TNK_I16] = "int16",   [TNK_I32] = "int32",     [TNK_I64] = "int64",
      [TNK_F16] = "float16", [TNK_BF16] = "bfloat16", [TNK_F32] = "float32",
      [TNK_F64] = "float64", [TNK_C64] = "complex64", [TNK_C128] = "complex128"};
  if (dt >= 0 && dt < TNK_DTYPE_COUNT) return names[dt];
  snprintf(buf, n, "dtype %d", dt);
  return buf;
}

static const char *op_name(int op, char *buf, size_t n) {
  static const char *const names[] = {"SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG"};
  if (op >= TNCCL_SUM && op <= TNCCL_AVG) return names[op];
  snprintf(buf, n, "op %d", op);
  return buf;
}

/* "10 elements of float32 with op SUM", "100 bytes from root 1", ... ("" for
 * the kinds without arguments). */
static void describe(const desc_t *d, char *buf, size_t n) {
  char t[24], o[24];
  buf[0] = 0;
  if (d->kind == K_ALL_REDUCE || d->kind == K_REDUCE_SCATTER)
    snprintf(buf, n, "%lld elements of %s with op %s", (long long)d->count,
             dtype_name(d->dtype, t, sizeof t), op_name(d->op, o, sizeof o));
  else if (d->kind == K_BROADCAST)
    snprintf(buf, n, "%lld bytes from root %d", (long long)d->count, d->root);
  else if (d->kind == K_ALL_GATHER)
    snprintf(buf, n, "%lld bytes", (long long)d->count);
}

/* "all_gather (13 bytes)", "barrier" */
static void describe_call(const desc_t *d, char *buf, size_t n) {
  char a[112];
  describe(d, a, sizeof a);
  snprintf(buf, n, "%s%s%s%s", kind_name(d->kind), a[0] ? " (" : "", a, a[0] ? ")" : "");
}

static const char *shape_words(int kind) {
  switch (kind) {
    case K_ALL_REDUCE:
    case K_REDUCE_SCATTER: return "count, dtype and op";
    case K_BROADCAST: return "byte count and root";
    case K_ALL_GATHER: return "byte count";
  }
  return "arguments";
}

static int desc_equal(const desc_t *a, const desc_t *b) {
  return a->kind == b->kind && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
         a->root == b->root;
}

/* Publishes that this rank has finished with round k's slots. */
static void finish_round(tnccl_comm_t *c, uint64_t k) {
  atomic_store_explicit(&ctrl_of(c, c->rank)->reduced, k, memory_order_release);
  atomic_store_explicit(&ctrl_of(c, c->rank)->done, k, memory_order_release);
}

/* In round k, the first of a call, before this rank's posted = k. */
static void post_desc(tnccl_comm_t *c, uint64_t k, const desc_t *mine) {
  desc_t *d = &ctrl_of(c, c->rank)->desc[k & 1];
  *d = *mine;
  d->round = k;
}

/* In round k, the first of a call, once every peer's posted >= k: TNRT_OK
 * when every rank's descriptor equals this rank's `mine` and none is
 * invalid; otherwise this rank finishes round k and returns the error (why:
 * what this rank's own checks found wrong, "" if nothing). */
static tnrt_status_t check_desc(tnccl_comm_t *c, uint64_t k, const desc_t *mine, const char *why) {
  int invalid = -1, other = -1, stale = -1;
  desc_t d_invalid = {0}, d_other = {0};
  uint64_t stale_round = 0;
  for (int r = 0; r < c->nranks; r++) {
    desc_t d = r == c->rank ? *mine : ctrl_of(c, r)->desc[k & 1];
    if (r != c->rank && d.round != k) {
      if (stale < 0) stale = r, stale_round = d.round;
      continue;
    }
    if (d.invalid && invalid < 0) invalid = r, d_invalid = d;
    if (!desc_equal(&d, mine) && other < 0) other = r, d_other = d;
  }
  if (stale < 0 && !why[0] && invalid < 0 && other < 0) return TNRT_OK;
  finish_round(c, k);
  const char *name = kind_name(mine->kind);
  if (stale >= 0)
    return tnrt_set_error(TNRT_ERR_INTERNAL,
                          "%s: rank %d's arguments are those of round %llu where this rank is in "
                          "round %llu: the ranks are out of step (was the communicator used "
                          "after a timeout?)",
                          name, stale, (unsigned long long)stale_round, (unsigned long long)k);
  if (why[0])
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "%s: %s; no data was moved", name, why);
  if (invalid >= 0)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "%s: rank %d passed invalid arguments%s%s (its error says which); no "
                          "data was moved",
                          name, invalid, d_invalid.kind == mine->kind ? "" : " to ",
                          d_invalid.kind == mine->kind ? "" : kind_name(d_invalid.kind));
  char theirs[160], ours[160];
  if (d_other.kind == mine->kind) {
    describe(&d_other, theirs, sizeof theirs);
    describe(mine, ours, sizeof ours);
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "%s: rank %d passed %s, rank %d (this rank) passed %s; every rank must "
                          "call %s with the same %s; no data was moved",
                          name, other, theirs, c->rank, ours, name, shape_words(mine->kind));
  }
  describe_call(&d_other, theirs, sizeof theirs);
  describe_call(mine, ours, sizeof ours);
  return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                        "collective mismatch: rank %d called %s, rank %d (this rank) called %s; "
                        "every rank must call the same collectives in the same order; no data "
                        "was moved",
                        other, theirs, c->rank, ours);
}

/* A call whose arguments this rank's own checks reject (why) still runs
 * the check of a first round, marked invalid, so that every rank of the
 * collective fails with it rather than wait for it. */
static tnrt_status_t join_and_fail(tnccl_comm_t *c, const desc_t *mine, const char *why) {
  desc_t d = *mine;
  d.invalid = 1;
  uint64_t k = ++c->round;
  tnrt_status_t st;
  if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) return st;
  post_desc(c, k, &d);
  atomic_store_explicit(&ctrl_of(c, c->rank)->posted, k, memory_order_release);
  if ((st = WAIT(c, posted, k, "the arguments")) != TNRT_OK) return st;
  return check_desc(c, k, &d, why);
}

/* ---- the direct path ----
 * A call of at least DIRECT_MIN bytes opens with an announce round k: each
 * rank publishes its descriptor and its source buffer's dsrc (no data),
 * posts k and, once every peer has, checks the descriptors as a staged
 * call's first round does. Every rank then sees the same dsrcs, so all
 * take the same path: direct when every rank whose buffer is read or
 * written (all of them; all_to_all_v: see there) published a valid one,
 * which finishes in round k; otherwise round k ends there and the staged rounds follow. In
 * round k the direct work runs between posted and done, and every rank
 * waits for all ranks' done = k before it returns: no rank hands its
 * buffer back to its stream while a peer still reads or (all_reduce,
 * broadcast) writes it. */

/* Where rank r's published buffer (d, at least need bytes from its
 * offset) is mapped here: a cached mapping of its segment, or a new one.
 * A peer whose generation changed has released shared segments since: its
 * cached mappings go first. */
static tnrt_status_t peer_buffer(tnccl_comm_t *c, int r, const dsrc_t *d, size_t need, char **out) {
  peer_maps_t *m = &c->maps[r];
  if (m->generation != d->generation) {
    drop_maps(c, m);
    m->generation = d->generation;
  }
  peer_map_t *hit = NULL;
  for (int i = 0; i < m->n && !hit; i++)
    if (!memcmp(&m->e[i].handle, &d->handle, sizeof d->handle)) hit = &m->e[i];
  if (!hit) {
    if (m->n == MAP_CACHE) { /* unmap the least recently used */
      int lru = 0;
      for (int i = 1; i < m->n; i++)
        if (m->e[i].used < m->e[lru].used) lru = i;
      tnrt_mem_unimport(c->device, m->e[lru].ptr, m->e[lru].bytes);
      m->e[lru] = m->e[--m->n];
    }
    void *p;
    size_t bytes;
    tnrt_status_t st = tnrt_mem_import(c->device, &d->handle, &p, &bytes);
    if (st != TNRT_OK) return st;
    hit = &m->e[m->n++];
    *hit = (peer_map_t){.handle = d->handle, .ptr = p, .bytes = bytes};
  }
  hit->used = ++c->tick;
  if (d->offset > hit->bytes || need > hit->bytes - d->offset)
    return tnrt_set_error(TNRT_ERR_INTERNAL,
                          "rank %d's buffer (%zu bytes at offset %llu) lies outside its "
                          "shared segment of %zu bytes",
                          r, need, (unsigned long long)d->offset, hit->bytes);
  *out = (char *)hit->ptr + d->offset;
  return TNRT_OK;
}

/* The announce round (above) of a call whose buffer here is src (NULL:
 * none), read or written by peers: 1 when the call goes direct (every
 * rank's buffer shared; round k open, *kout = k), 0 when staged (round k
 * finished), -1 on an error (*st; the descriptors differed, or a
 * timeout). */
static int direct_begin(tnccl_comm_t *c, const desc_t *d, const void *src, uint64_t *kout,
                        tnrt_status_t *st) {
  uint64_t k = ++c->round;
  ctrl_t *me = ctrl_of(c, c->rank);
  if ((*st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) return -1;
  post_desc(c, k, d);
  dsrc_t *mine = &me->dsrc[k & 1];
  size_t off = 0;
  uint64_t gen = 0;
  mine->valid =
      c->direct && src && tnrt_mem_shared_handle(src, &mine->handle, &off, &gen) == TNRT_OK;
  mine->offset = off;
  mine->generation = gen;
  atomic_store_explicit(&me->posted, k, memory_order_release);
  if ((*st = WAIT(c, posted, k, "the arguments")) != TNRT_OK) return -1;
  if ((*st = check_desc(c, k, d, "")) != TNRT_OK) return -1;
  int direct = 1;
  for (int r = 0; r < c->nranks; r++) direct &= ctrl_of(c, r)->dsrc[k & 1].valid != 0;
  if (!direct) {
    finish_round(c, k);
    return 0;
  }
  *kout = k;
  return 1;
}

/* c->ptrs[r] = rank r's source buffer of round k (need bytes), for the
 * ranks in [lo, hi) (own: own_src). On a failure to map one, this rank
 * marks round k failed and returns the error. */
static tnrt_status_t map_sources(tnccl_comm_t *c, uint64_t k, int lo, int hi, const void *own_src,
                                 size_t need) {
  for (int r = lo; r < hi; r++) {
    if (r == c->rank) {
      c->ptrs[r] = (char *)own_src;
      continue;
    }
    tnrt_status_t st = peer_buffer(c, r, &ctrl_of(c, r)->dsrc[k & 1], need, &c->ptrs[r]);
    if (st != TNRT_OK) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", tnrt_last_error());
      atomic_store_explicit(&ctrl_of(c, c->rank)->failed, k, memory_order_relaxed);
      return tnrt_set_error(st,
                            "rank %d's device memory cannot be mapped here (%s); the direct "
                            "collective failed on every rank, its output is unspecified",
                            r, msg);
    }
  }
  return TNRT_OK;
}

/* Ends direct round k: publishes done and waits for every rank's, so no
 * rank returns while a peer still reads its buffer; then the error of a
 * rank that could not map a peer's buffer, on every rank (mine: this
 * rank's own, already set). */
static tnrt_status_t direct_end(tnccl_comm_t *c, uint64_t k, const char *name, tnrt_status_t mine) {
  finish_round(c, k);
  tnrt_status_t st = WAIT(c, done, k, "the end of a direct collective");
  if (st != TNRT_OK) return st;
  if (mine != TNRT_OK) return mine;
  for (int r = 0; r < c->nranks; r++)
    if (r != c->rank && atomic_load_explicit(&ctrl_of(c, r)->failed, memory_order_relaxed) == k)
      return tnrt_set_error(TNRT_ERR_INTERNAL,
                            "%s: rank %d could not map a peer's device memory (its error says "
                            "why); the direct collective failed on every rank, its output is "
                            "unspecified",
                            name, r);
  c->direct_calls++;
  return TNRT_OK;
}

/* out = op over ranks of c->ptrs[r] + at elements, n of them, in pieces
 * (c->srcs). out may be c->ptrs[rank] + at. With copies, each piece is
 * then copied from out (still in the cache) to the same place in every
 * other rank's buffer. */
static void reduce_direct(tnccl_comm_t *c, char *out, int64_t at, int64_t n, int dtype,
                          tnccl_op_t op, int copies) {
  size_t esz = tnk_dtype_size(dtype);
  int64_t piece = (int64_t)(DIRECT_PIECE / esz);
  for (int64_t i = 0; i < n; i += piece) {
    int64_t m = n - i < piece ? n - i : piece;
    for (int j = 0; j < c->nranks; j++)
      c->srcs[j] = c->ptrs[(c->rank + j) % c->nranks] + (at + i) * (int64_t)esz;
    reduce_n(c, out + i * (int64_t)esz, c->srcs, m, dtype, op);
    for (int j = 1; copies && j < c->nranks; j++)
      memcpy(c->ptrs[(c->rank + j) % c->nranks] + (at + i) * (int64_t)esz, out + i * (int64_t)esz,
             (size_t)m * esz); /* (cached stores: the reduction just read these lines) */
  }
}

/* One pass: rank r reduces share r of every rank's buf, a piece at a time,
 * into its own buf and copies each reduced piece into share r of every
 * peer's buf. Share r of any buf is read and written by rank r only, so
 * no barrier is needed before the end (direct_end's, after which no rank
 * writes another's buf). Each rank reads and writes its share n times: 2N
 * bytes of memory traffic for 2 ranks and N bytes, where reducing and then
 * gathering the shares in a second pass took 2.5N. Shares are whole cache
 * lines but the last. */
static tnrt_status_t all_reduce_direct(tnccl_comm_t *c, uint64_t k, void *buf, int64_t count,
                                       int dtype, tnccl_op_t op) {
  int n = c->nranks, me = c->rank;
  size_t esz = tnk_dtype_size(dtype);
  int64_t line = (int64_t)(LINE / esz);
  int64_t share = ((count + n - 1) / n + line - 1) / line * line;
  tnrt_status_t mine = map_sources(c, k, 0, n, buf, (size_t)count * esz);
  int64_t lo = share * me, hi = lo + share < count ? lo + share : count;
  if (mine == TNRT_OK && lo < hi)
    reduce_direct(c, c->ptrs[me] + lo * (int64_t)esz, lo, hi - lo, dtype, op, 1);
  return direct_end(c, k, "all_reduce", mine);
}

/* ---- collectives ---- */

/* Why a reduction's arguments are invalid ("" if they are not): real dtypes,
 * bitwise ops on integers only, blocks * count elements addressable, and
 * buffers unless count is 0. */
static void reduction_why(char *why, size_t n, int64_t count, int64_t blocks, int dtype,
                          tnccl_op_t op, int have_buffers) {
  char t[24], o[24];
  size_t esz = tnk_dtype_size(dtype);
  why[0] = 0;
  if (!esz || dtype >= TNK_C64)
    snprintf(why, n, "%s is not a dtype the collectives reduce (real and bool dtypes are)",
             dtype_name(dtype, t, sizeof t));
  else if (binary_op(op) < 0)
    snprintf(why, n, "%s is not a reduction op", op_name(op, o, sizeof o));
  else if (is_float(dtype) && op >= TNCCL_BAND && op <= TNCCL_BXOR)
    snprintf(why, n, "op %s takes integer and bool dtypes, not %s", op_name(op, o, sizeof o),
             dtype_name(dtype, t, sizeof t));
  else if (count < 0)
    snprintf(why, n, "a negative count (%lld)", (long long)count);
  else if (count > INT64_MAX / blocks / (int64_t)esz)
    snprintf(why, n, "%lld elements of %s overflow the address space", (long long)count,
             dtype_name(dtype, t, sizeof t));
  else if (count && !have_buffers)
    snprintf(why, n, "a NULL buffer for %lld elements", (long long)count);
}

tnrt_status_t tnccl_all_reduce(tnccl_comm_t *c, void *buf, int64_t count, int dtype,
                               tnccl_op_t op) {
  if (!c) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_reduce without a communicator");
  desc_t d = {.kind = K_ALL_REDUCE, .count = count, .dtype = dtype, .op = (int32_t)op, .root = -1};
  char why[160];
  reduction_why(why, sizeof why, count, 1, dtype, op, buf != NULL);
  if (why[0]) return join_and_fail(c, &d, why);
  size_t esz = tnk_dtype_size(dtype);
  int n = c->nranks;
  tnrt_status_t st = TNRT_OK;
  if (n > 1 && (size_t)count * esz >= DIRECT_MIN) {
    uint64_t k;
    int r = direct_begin(c, &d, buf, &k, &st);
    if (r < 0) return st;
    if (r > 0) return all_reduce_direct(c, k, buf, count, dtype, op);
  }
  int64_t per_round = (int64_t)(SLOT_BYTES / esz) / n * n; /* a multiple of the rank count */
  const char **in = malloc(sizeof *in * (size_t)n);
  if (!in) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "all_reduce");
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += per_round) {
    int64_t m = count - off < per_round ? count - off : per_round;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) post_desc(c, k, &d);
    char *data = (char *)buf + off * (int64_t)esz;
    if (m) memcpy(slot_of(c, c->rank, k), data, (size_t)m * esz);
    atomic_store_explicit(&ctrl_of(c, c->rank)->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (off == 0 && (st = check_desc(c, k, &d, "")) != TNRT_OK) break;
    /* my share: [lo, hi) of this round's m elements */
    int64_t share = (m + n - 1) / n, lo = share * c->rank, hi = lo + share < m ? lo + share : m;
    if (lo < hi) {
      /* this rank's own input first: the result overwrites it in place */
      for (int j = 0; j < n; j++) in[j] = slot_of(c, (c->rank + j) % n, k) + lo * (int64_t)esz;
      reduce_n(c, slot_of(c, c->rank, k) + lo * (int64_t)esz, in, hi - lo, dtype, op);
    }
    atomic_store_explicit(&ctrl_of(c, c->rank)->reduced, k, memory_order_release);
    if ((st = WAIT(c, reduced, k, "the reduced shares")) != TNRT_OK) break;
    for (int r = 0; r < n; r++) {
      int64_t a = share * r, b = a + share < m ? a + share : m;
      if (a < b)
        memcpy(data + a * (int64_t)esz, slot_of(c, r, k) + a * (int64_t)esz, (size_t)(b - a) * esz);
    }
    atomic_store_explicit(&ctrl_of(c, c->rank)->done, k, memory_order_release);
    if (count == 0) break;
  }
  free(in);
  return st;
}

/* A direct broadcast's work for this rank: its share (cache-line aligned)
 * of the root's buffer, copied into every other rank's, a piece at a time so
 * that the copies after the first read it from the cache. All ranks work at
 * once, where the receivers alone used to copy the whole buffer (2 ranks:
 * the root idle while its peer copied everything). */
static void broadcast_share(tnccl_comm_t *c, int root, size_t bytes) {
  size_t n = (size_t)c->nranks, share = ((bytes + n - 1) / n + 63) & ~(size_t)63;
  size_t lo = share * (size_t)c->rank, hi = lo + share < bytes ? lo + share : bytes;
  int stream = bytes * n >= c->stream_min;
  for (size_t at = lo; at < hi; at += DIRECT_PIECE) {
    size_t m = hi - at < DIRECT_PIECE ? hi - at : DIRECT_PIECE;
    for (int r = 0; r < c->nranks; r++)
      if (r != root) direct_copy(c->ptrs[r] + at, c->ptrs[root] + at, m, stream);
  }
}

/* broadcast, and barrier (kind K_BARRIER: 0 bytes from rank 0). */
static tnrt_status_t broadcast(tnccl_comm_t *c, void *buf, size_t bytes, int root, int kind) {
  if (!c)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "%s without a communicator", kind_name(kind));
  int barrier = kind == K_BARRIER;
  desc_t d = {.kind = kind,
              .count = barrier ? 0 : (int64_t)bytes,
              .dtype = -1,
              .op = -1,
              .root = barrier ? -1 : root};
  char why[160] = "";
  if (root < 0 || root >= c->nranks)
    snprintf(why, sizeof why, "root %d is not a rank of the communicator (0 to %d)", root,
             c->nranks - 1);
  else if (bytes > INT64_MAX)
    snprintf(why, sizeof why, "%zu bytes overflow", bytes);
  else if (bytes && !buf)
    snprintf(why, sizeof why, "a NULL buffer for %zu bytes", bytes);
  if (why[0]) return join_and_fail(c, &d, why);
  tnrt_status_t st = TNRT_OK;
  ctrl_t *me = ctrl_of(c, c->rank);
  if (!barrier && c->nranks > 1 && bytes >= DIRECT_MIN) {
    uint64_t k;
    int r = direct_begin(c, &d, buf, &k, &st);
    if (r < 0) return st;
    if (r > 0) { /* every rank, the root too, copies a share of the root's buf */
      tnrt_status_t mine = map_sources(c, k, 0, c->nranks, buf, bytes);
      if (mine == TNRT_OK) broadcast_share(c, root, bytes);
      return direct_end(c, k, "broadcast", mine);
    }
  }
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += SLOT_BYTES) {
    size_t m = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) post_desc(c, k, &d);
    if (c->rank == root && m) memcpy(slot_of(c, root, k), (char *)buf + off, m);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the root's data")) != TNRT_OK) break;
    if (off == 0 && (st = check_desc(c, k, &d, "")) != TNRT_OK) break;
    if (c->rank != root && m) memcpy((char *)buf + off, slot_of(c, root, k), m);
    finish_round(c, k);
    if (bytes == 0) break;
  }
  return st;
}

tnrt_status_t tnccl_broadcast(tnccl_comm_t *c, void *buf, size_t bytes, int root) {
  return broadcast(c, buf, bytes, root, K_BROADCAST);
}

tnrt_status_t tnccl_barrier(tnccl_comm_t *c) { return broadcast(c, NULL, 0, 0, K_BARRIER); }

tnrt_status_t tnccl_all_gather(tnccl_comm_t *c, const void *in, void *out, size_t bytes) {
  if (!c) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_gather without a communicator");
  desc_t d = {.kind = K_ALL_GATHER, .count = (int64_t)bytes, .dtype = -1, .op = -1, .root = -1};
  char why[160] = "";
  if (bytes > INT64_MAX / (size_t)c->nranks)
    snprintf(why, sizeof why, "%zu bytes from each of %d ranks overflow", bytes, c->nranks);
  else if (bytes && (!in || !out))
    snprintf(why, sizeof why, "a NULL %s for %zu bytes", in ? "out" : "in", bytes);
  if (why[0]) return join_and_fail(c, &d, why);
  tnrt_status_t st = TNRT_OK;
  ctrl_t *me = ctrl_of(c, c->rank);
  int n = c->nranks;
  if (n > 1 && bytes * (size_t)n >= DIRECT_MIN) {
    uint64_t k;
    int r = direct_begin(c, &d, in, &k, &st);
    if (r < 0) return st;
    if (r > 0) { /* every rank's in, read in place: a peer in place writes
                    only the other blocks of its out */
      tnrt_status_t mine = map_sources(c, k, 0, n, in, bytes);
      int stream = bytes * (size_t)n * (size_t)(n + 1) >= c->stream_min; /* ins and outs */
      for (int q = 0; q < n && mine == TNRT_OK; q++) {
        char *to = (char *)out + (size_t)q * bytes;
        if (to == c->ptrs[q]) continue;
        uintptr_t t = (uintptr_t)to, f = (uintptr_t)c->ptrs[q];
        if (t + bytes <= f || f + bytes <= t)
          direct_copy(to, c->ptrs[q], bytes, stream);
        else /* (this rank's in inside its out, elsewhere than its block) */
          memmove(to, c->ptrs[q], bytes);
      }
      return direct_end(c, k, "all_gather", mine);
    }
  }
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += SLOT_BYTES) {
    size_t m = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) post_desc(c, k, &d);
    if (m) memcpy(slot_of(c, c->rank, k), (const char *)in + off, m);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (off == 0 && (st = check_desc(c, k, &d, "")) != TNRT_OK) break;
    for (int r = 0; r < c->nranks && m; r++)
      memcpy((char *)out + (size_t)r * bytes + off, slot_of(c, r, k), m);
    finish_round(c, k);
    if (bytes == 0) break;
  }
  return st;
}

tnrt_status_t tnccl_reduce_scatter(tnccl_comm_t *c, const void *in, void *out, int64_t count,
                                   int dtype, tnccl_op_t op) {
  if (!c) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "reduce_scatter without a communicator");
  desc_t d = {
      .kind = K_REDUCE_SCATTER, .count = count, .dtype = dtype, .op = (int32_t)op, .root = -1};
  char why[160];
  reduction_why(why, sizeof why, count, c->nranks, dtype, op, in && out);
  if (why[0]) return join_and_fail(c, &d, why);
  size_t esz = tnk_dtype_size(dtype);
  int n = c->nranks;
  tnrt_status_t st = TNRT_OK;
  if (n > 1 && (size_t)count * esz * (size_t)n >= DIRECT_MIN) {
    uint64_t k;
    int r = direct_begin(c, &d, in, &k, &st);
    if (r < 0) return st;
    if (r > 0) { /* block `rank` of every rank's in, reduced into out */
      tnrt_status_t mine = map_sources(c, k, 0, n, in, (size_t)count * esz * (size_t)n);
      if (mine == TNRT_OK) reduce_direct(c, out, (int64_t)c->rank * count, count, dtype, op, 0);
      return direct_end(c, k, "reduce_scatter", mine);
    }
  }
  int64_t per_round = (int64_t)(SLOT_BYTES / esz) / n; /* elements of each block per round */
  const char **src = malloc(sizeof *src * (size_t)n);
  if (!src) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "reduce_scatter");
  ctrl_t *me = ctrl_of(c, c->rank);
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += per_round) {
    int64_t m = count - off < per_round ? count - off : per_round;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) post_desc(c, k, &d);
    char *slot = slot_of(c, c->rank, k);
    for (int r = 0; r < n && m; r++) /* block r's chunk at region r of the slot */
      memcpy(slot + (size_t)r * (size_t)per_round * esz,
             (const char *)in + ((int64_t)r * count + off) * (int64_t)esz, (size_t)m * esz);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (off == 0 && (st = check_desc(c, k, &d, "")) != TNRT_OK) break;
    if (m) {
      for (int j = 0; j < n; j++)
        src[j] = slot_of(c, (c->rank + j) % n, k) + (size_t)c->rank * (size_t)per_round * esz;
      reduce_n(c, (char *)out + off * (int64_t)esz, src, m, dtype, op);
    }
    finish_round(c, k);
    if (count == 0) break;
  }
  free(src);
  return st;
}

/* The first round, besides the descriptors, exchanges every rank's counts
 * and send offsets: [send_bytes (n)][recv_bytes (n)][send_off (n)] as
 * uint64 in its slot, and its in's dsrc (the announce round of the direct
 * path). Each rank checks the whole matrix, so all reach the same verdict
 * (run or fail), the same path and the same number of data rounds; a rank
 * with invalid arguments still takes part.
 *
 * Direct when some rank receives at least DIRECT_MIN bytes from its peers
 * (the largest column sum of the matrix without its diagonal) and every
 * rank that sends a peer any bytes published a valid dsrc. The column sum
 * rather than the largest pair: the direct path saves a copy of every
 * byte a rank receives (the staged path copies each block into the
 * sender's slot and out of it), and the call lasts as long as its busiest
 * receiver; it adds no round here (the count round is the announce round),
 * only the final barrier, and the largest pair would keep staged e.g. 8
 * ranks each receiving 7 x 100 KiB. Every rank computes it from the same
 * matrix, so all decide alike. Rank p copies recv_bytes[q] from rank q's in
 * + (q's send_off[p]) into out + recv_off[q], within round k, and the round
 * ends with direct_end's barrier: no rank returns while a peer still reads
 * its in (the slots holding the offsets are not reused before either).
 *
 * Staged: each data round moves `region` bytes of every (source,
 * destination) pair: the source's slot holds one region per destination. */
tnrt_status_t tnccl_all_to_all_v(tnccl_comm_t *c, const void *in, const size_t *send_off,
                                 const size_t *send_bytes, void *out, const size_t *recv_off,
                                 const size_t *recv_bytes) {
  if (!c) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_to_all_v without a communicator");
  int n = c->nranks, me = c->rank;
  size_t region = SLOT_BYTES / (size_t)n / LINE * LINE;
  if (region == 0 || 3 * (size_t)n * sizeof(uint64_t) > SLOT_BYTES)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "all_to_all_v supports at most %d ranks; this communicator has %d",
                          (int)(SLOT_BYTES / LINE), n);
  char why[160] = "";
  if (!send_off || !send_bytes || !recv_off || !recv_bytes)
    snprintf(why, sizeof why, "an offset or count array is NULL");
  for (int p = 0; p < n && !why[0]; p++) {
    if (send_bytes[p] && (!in || send_off[p] > SIZE_MAX - send_bytes[p]))
      snprintf(why, sizeof why, "the send to rank %d (%zu bytes at offset %zu of %s)", p,
               send_bytes[p], send_off[p], in ? "in) overflows" : "a NULL in)");
    else if (recv_bytes[p] && (!out || recv_off[p] > SIZE_MAX - recv_bytes[p]))
      snprintf(why, sizeof why, "the recv from rank %d (%zu bytes at offset %zu of %s)", p,
               recv_bytes[p], recv_off[p], out ? "out) overflows" : "a NULL out)");
  }
  desc_t desc = {.kind = K_ALL_TO_ALL_V, .dtype = -1, .op = -1, .root = -1, .invalid = why[0] != 0};
  tnrt_status_t st;
  uint64_t k = ++c->round;
  if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) return st;
  post_desc(c, k, &desc);
  uint64_t *counts = (uint64_t *)slot_of(c, me, k);
  for (int p = 0; p < n; p++) {
    counts[p] = why[0] ? 0 : send_bytes[p];
    counts[n + p] = why[0] ? 0 : recv_bytes[p];
    counts[2 * n + p] = why[0] ? 0 : send_off[p];
  }
  dsrc_t *src = &ctrl_of(c, me)->dsrc[k & 1];
  size_t src_off = 0;
  uint64_t gen = 0;
  src->valid = !why[0] && n > 1 && c->direct && in &&
               tnrt_mem_shared_handle(in, &src->handle, &src_off, &gen) == TNRT_OK;
  src->offset = src_off;
  src->generation = gen;
  atomic_store_explicit(&ctrl_of(c, me)->posted, k, memory_order_release);
  if ((st = WAIT(c, posted, k, "the counts")) != TNRT_OK) return st;
  if ((st = check_desc(c, k, &desc, why)) != TNRT_OK) return st;
  /* every rank is in all_to_all_v with valid arguments: the first
   * mismatch, one of this rank's if any */
  int ms = -1, md = -1, direct = n > 1;
  uint64_t most = 0, ms_sent = 0, ms_want = 0, busiest = 0;
  for (int d = 0; d < n; d++) {
    uint64_t into = 0; /* what d receives from its peers */
    for (int s = 0; s < n; s++) {
      uint64_t sent = ((const uint64_t *)slot_of(c, s, k))[d],
               want = ((const uint64_t *)slot_of(c, d, k))[n + s];
      if (s != d && sent > most) most = sent;
      if (s != d) into = into + sent < into ? UINT64_MAX : into + sent;
      if (s != d && sent && !ctrl_of(c, s)->dsrc[k & 1].valid) direct = 0;
      if (sent != want && (ms < 0 || ((s == me || d == me) && ms != me && md != me)))
        ms = s, md = d, ms_sent = sent, ms_want = want;
    }
    if (into > busiest) busiest = into;
  }
  if (ms >= 0) {
    finish_round(c, k);
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                          "all_to_all_v: rank %d sends %llu bytes to rank %d, which expects "
                          "%llu bytes from it (send_bytes[%d] on rank %d must equal "
                          "recv_bytes[%d] on rank %d); no data was moved",
                          ms, (unsigned long long)ms_sent, md, (unsigned long long)ms_want, md, ms,
                          ms, md);
  }
  int go_direct = direct && busiest >= DIRECT_MIN;
  /* about every in and out: large enough to stream past the cache */
  int stream = go_direct && busiest * 2 * (size_t)n >= c->stream_min;
  if (send_bytes[me])
    direct_copy((char *)out + recv_off[me], (const char *)in + send_off[me], send_bytes[me],
                stream);
  if (go_direct) { /* round k stays open until direct_end */
    tnrt_status_t mine = TNRT_OK;
    for (int q = 0; q < n && mine == TNRT_OK; q++) {
      if (q == me || !recv_bytes[q]) continue;
      uint64_t at = ((const uint64_t *)slot_of(c, q, k))[2 * n + me]; /* q's send_off[me] */
      char *from = NULL;
      if (at > SIZE_MAX - recv_bytes[q])
        mine = tnrt_set_error(TNRT_ERR_INTERNAL, "rank %d's send offset %llu to rank %d overflows",
                              q, (unsigned long long)at, me);
      else
        mine = peer_buffer(c, q, &ctrl_of(c, q)->dsrc[k & 1], (size_t)at + recv_bytes[q], &from);
      if (mine != TNRT_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", tnrt_last_error());
        atomic_store_explicit(&ctrl_of(c, me)->failed, k, memory_order_relaxed);
        mine = tnrt_set_error(mine,
                              "rank %d's device memory cannot be mapped here (%s); the direct "
                              "collective failed on every rank, its output is unspecified",
                              q, msg);
        break;
      }
      direct_copy((char *)out + recv_off[q], from + at, recv_bytes[q], stream);
    }
    return direct_end(c, k, "all_to_all_v", mine);
  }
  finish_round(c, k);
  uint64_t rounds = most / region + (most % region != 0);
  for (uint64_t j = 0; j < rounds; j++) {
    size_t off = (size_t)j * region;
    k = ++c->round;
    if ((st = WAIT(c, done, k - 2, "reuse of a slot")) != TNRT_OK) return st;
    char *slot = slot_of(c, me, k);
    for (int d = 0; d < n; d++)
      if (d != me && send_bytes[d] > off) {
        size_t m = send_bytes[d] - off < region ? send_bytes[d] - off : region;
        memcpy(slot + (size_t)d * region, (const char *)in + send_off[d] + off, m);
      }
    atomic_store_explicit(&ctrl_of(c, me)->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) return st;
    for (int s = 0; s < n; s++)
      if (s != me && recv_bytes[s] > off) {
        size_t m = recv_bytes[s] - off < region ? recv_bytes[s] - off : region;
        memcpy((char *)out + recv_off[s] + off, slot_of(c, s, k) + (size_t)me * region, m);
      }
    finish_round(c, k);
  }
  return TNRT_OK;
}

/* ---- point-to-point ----
 * The messages from rank s to rank q go through s's outbox for q, a ring of
 * P2P_CHUNKS chunks: s writes chunk i (header and data) into entry i %
 * P2P_CHUNKS once q has consumed chunk i - P2P_CHUNKS, then publishes
 * sent = i + 1; q reads it once sent > i, then publishes used = i + 1. Each
 * message is at least one chunk (a 0-byte one too). */

typedef struct p2p_state {
  size_t off;     /* bytes sent / received so far */
  uint64_t total; /* recv: the size of the message arriving (its first chunk's) */
  int prev;       /* the op before this one with the same peer and direction, or -1 */
  int started, done, mismatch;
} p2p_state_t;

static chunk_hdr_t *chunk_hdr(char *box, uint64_t i) { return (chunk_hdr_t *)box + i % P2P_CHUNKS; }
static char *chunk_data(char *box, uint64_t i) {
  return box + P2P_HEADERS + (size_t)(i % P2P_CHUNKS) * P2P_CHUNK;
}

/* Puts as many of op's chunks in the outbox as the ring has room for; 1 if
 * any. */
static int send_step(tnccl_comm_t *c, const tnccl_p2p_t *op, p2p_state_t *s) {
  _Atomic uint64_t *sent = sent_ctr(c, c->rank, op->peer);
  uint64_t i = atomic_load_explicit(sent, memory_order_relaxed);
  uint64_t room =
      atomic_load_explicit(used_ctr(c, op->peer, c->rank), memory_order_acquire) + P2P_CHUNKS;
  char *box = outbox_of(c, c->rank, op->peer);
  int moved = 0;
  while (i < room && !s->done) {
    size_t len = op->bytes - s->off < P2P_CHUNK ? op->bytes - s->off : P2P_CHUNK;
    chunk_hdr_t *h = chunk_hdr(box, i);
    h->total = op->bytes;
    h->off = s->off;
    h->len = len;
    if (len) memcpy(chunk_data(box, i), (const char *)op->buf + s->off, len);
    s->off += len;
    s->done = s->off == op->bytes;
    atomic_store_explicit(sent, ++i, memory_order_release);
    moved = 1;
  }
  return moved;
}

/* Consumes the chunks of op's message that have arrived; 1 if any, -1 (error
 * set) when the channel is out of step. A message of another size than op
 * expects is consumed and discarded (s->mismatch). */
static int recv_step(tnccl_comm_t *c, const tnccl_p2p_t *op, p2p_state_t *s) {
  _Atomic uint64_t *used = used_ctr(c, c->rank, op->peer);
  uint64_t i = atomic_load_explicit(used, memory_order_relaxed);
  uint64_t avail = atomic_load_explicit(sent_ctr(c, op->peer, c->rank), memory_order_acquire);
  char *box = outbox_of(c, op->peer, c->rank);
  int moved = 0;
  while (i < avail && !s->done) {
    const chunk_hdr_t *h = chunk_hdr(box, i);
    uint64_t total = h->total, off = h->off, len = h->len;
    if (!s->started) {
      s->started = 1;
      s->total = total;
      s->mismatch = total != op->bytes;
    }
    if (total != s->total || off != s->off || len > P2P_CHUNK || len > total - off ||
        (len == 0 && total != 0)) {
      tnrt_set_error(TNRT_ERR_INTERNAL,
                     "the messages from rank %d are out of step (a chunk of %llu bytes at "
                     "offset %llu of %llu where offset %zu of %llu was due): was the "
                     "communicator used after a timeout?",
                     op->peer, (unsigned long long)len, (unsigned long long)off,
                     (unsigned long long)total, s->off, (unsigned long long)s->total);
      return -1;
    }
    if (len && !s->mismatch) memcpy((char *)op->buf + off, chunk_data(box, i), len);
    s->off += len;
    s->done = s->off == s->total;
    atomic_store_explicit(used, ++i, memory_order_release);
    moved = 1;
  }
  return moved;
}

/* Checks the ops and pairs each send to self with its recv (copied at once).
 * st[i].prev links the ops of one (peer, direction) in batch order. */
static tnrt_status_t p2p_prepare(tnccl_comm_t *c, const tnccl_p2p_t *ops, int n, p2p_state_t *st,
                                 int *last) {
  for (int i = 0; i < n; i++) {
    const tnccl_p2p_t *o = &ops[i];
    if (o->peer < 0 || o->peer >= c->nranks || (o->bytes && !o->buf))
      return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                            "p2p op %d: %s of %zu bytes %s rank %d of %d%s", i,
                            o->is_send ? "send" : "recv", o->bytes, o->is_send ? "to" : "from",
                            o->peer, c->nranks, o->buf ? "" : " with a NULL buffer");
  }
  for (int i = 0; i < 2 * c->nranks; i++) last[i] = -1;
  int next_recv = 0; /* the recv from self the next send to self pairs with */
  for (int i = 0; i < n; i++) {
    int *l = &last[2 * ops[i].peer + (ops[i].is_send != 0)];
    st[i] = (p2p_state_t){.prev = *l};
    *l = i;
    if (ops[i].peer != c->rank || !ops[i].is_send) continue;
    while (next_recv < n && (ops[next_recv].peer != c->rank || ops[next_recv].is_send)) next_recv++;
    if (next_recv == n)
      return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                            "p2p op %d: a send of %zu bytes to this rank itself (%d) has no recv "
                            "from itself in the batch (a send to self is a copy to such a recv)",
                            i, ops[i].bytes, c->rank);
    if (ops[next_recv].bytes != ops[i].bytes)
      return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                            "p2p op %d: a send of %zu bytes to this rank itself (%d) pairs with "
                            "op %d, a recv of %zu bytes",
                            i, ops[i].bytes, c->rank, next_recv, ops[next_recv].bytes);
    next_recv++;
  }
  for (int i = next_recv; i < n; i++)
    if (ops[i].peer == c->rank && !ops[i].is_send)
      return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                            "p2p op %d: a recv of %zu bytes from this rank itself (%d) has no "
                            "send to itself in the batch",
                            i, ops[i].bytes, c->rank);
  /* the copies, in pairs */
  for (int i = 0, j = 0; i < n; i++) {
    if (ops[i].peer != c->rank || !ops[i].is_send) continue;
    while (ops[j].peer != c->rank || ops[j].is_send) j++;
    if (ops[i].bytes) memmove(ops[j].buf, ops[i].buf, ops[i].bytes);
    st[i].done = st[j].done = 1;
    j++;
  }
  return TNRT_OK;
}

tnrt_status_t tnccl_p2p_batch(tnccl_comm_t *c, const tnccl_p2p_t *ops, int n) {
  if (!c || n < 0 || (n && !ops))
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "p2p batch of %d ops", n);
  if (n == 0) return TNRT_OK;
  p2p_state_t *st = malloc(sizeof *st * (size_t)n);
  int *last = malloc(sizeof *last * 2 * (size_t)c->nranks);
  if (!st || !last) {
    free(st);
    free(last);
    return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "p2p batch of %d ops", n);
  }
  /* A recv of the wrong size is an error once the batch has run; an
   * out-of-step channel or a timeout ends it. */
  tnrt_status_t status = p2p_prepare(c, ops, n, st, last);
  int running = status == TNRT_OK;
  waiter_t w = {0};
  while (running) {
    int waiting = -1, moved = 0;
    running = 0;
    for (int i = 0; i < n; i++) {
      p2p_state_t *s = &st[i];
      if (s->done) continue;
      running = 1;
      if (s->prev >= 0 && !st[s->prev].done) continue; /* behind an op with the same peer */
      int r = ops[i].is_send ? send_step(c, &ops[i], s) : recv_step(c, &ops[i], s);
      if (r < 0) {
        status = TNRT_ERR_INTERNAL;
        running = 0;
        break;
      }
      moved |= r;
      if (s->done && s->mismatch && status == TNRT_OK)
        status = tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT,
                                "p2p op %d: a recv of %zu bytes from rank %d got a message of "
                                "%llu bytes (a send and its recv must have the same size); the "
                                "message was discarded",
                                i, ops[i].bytes, ops[i].peer, (unsigned long long)s->total);
      if (!s->done && waiting < 0) waiting = i;
    }
    if (!running || moved) {
      w = (waiter_t){0};
      continue;
    }
    if (!pause_wait(c, &w)) {
      const tnccl_p2p_t *o = &ops[waiting];
      status = tnrt_set_error(TNRT_ERR_NOT_READY,
                              "p2p %s of %zu bytes %s rank %d timed out after %zu bytes: has "
                              "rank %d exited, or not posted the matching %s?",
                              o->is_send ? "send" : "recv", o->bytes, o->is_send ? "to" : "from",
                              o->peer, st[waiting].off, o->peer, o->is_send ? "recv" : "send");
      break;
    }
  }
  free(st);
  free(last);
  return status;
}

tnrt_status_t tnccl_send(tnccl_comm_t *c, const void *buf, size_t bytes, int peer) {
  tnccl_p2p_t op = {.peer = peer, .is_send = 1, .buf = (void *)buf, .bytes = bytes};
  return tnccl_p2p_batch(c, &op, 1);
}

tnrt_status_t tnccl_recv(tnccl_comm_t *c, void *buf, size_t bytes, int peer) {
  tnccl_p2p_t op = {.peer = peer, .is_send = 0, .buf = buf, .bytes = bytes};
  return tnccl_p2p_batch(c, &op, 1);
}
