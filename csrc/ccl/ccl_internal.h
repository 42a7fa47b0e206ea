/* The communicator's private declarations (ccl.h is the interface): the
 * shared segment's layout and counters, the communicator, and what the
 * parts share. The parts, by concern:
 *   comm.c        the segments, waiting for peers, init/destroy, settings
 *   reduce.c      the reduction of n inputs into one
 *   checks.c      the cross-rank check of every call's arguments
 *   direct.c      the direct path (peers' buffers read in place)
 *   collectives.c all_reduce, broadcast, barrier, all_gather,
 *                 reduce_scatter, all_to_all_v
 *   p2p.c         point-to-point batches, send, recv */
#ifndef TNCCL_INTERNAL_H
#define TNCCL_INTERNAL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ccl.h"

#include <sched.h>
#include <stddef.h>
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

/* The collectives a descriptor names: one list, giving the enum (from 1;
 * 0 is no collective) and the names the errors use. */
#define TNCCL_KINDS(X)                \
  X(ALL_REDUCE, "all_reduce")         \
  X(REDUCE_SCATTER, "reduce_scatter") \
  X(BROADCAST, "broadcast")           \
  X(ALL_GATHER, "all_gather")         \
  X(BARRIER, "barrier")               \
  X(ALL_TO_ALL_V, "all_to_all_v")
#define TNCCL_KIND_ENUM_(ID, NAME) K_##ID,
typedef enum kind { K_NONE = 0, TNCCL_KINDS(TNCCL_KIND_ENUM_) K_COUNT } kind_t;
#undef TNCCL_KIND_ENUM_

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
static inline size_t ctrl_bytes_for(int nranks) {
  size_t b = sizeof(ctrl_t) + 2 * (size_t)nranks * LINE;
  return (b + 4095) / 4096 * 4096;
}
static inline size_t seg_bytes_for(int nranks) {
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

static inline int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline ctrl_t *ctrl_of(const tnccl_comm_t *c, int r) { return (ctrl_t *)c->seg[r]; }
static inline char *slot_of(const tnccl_comm_t *c, int r, uint64_t round) {
  return c->seg[r] + c->ctrl_bytes + (round & 1) * SLOT_BYTES;
}
static inline line_t *lines_of(const tnccl_comm_t *c, int r) {
  return (line_t *)(c->seg[r] + sizeof(ctrl_t));
}
/* Chunks rank `owner` has published for rank q / consumed from rank q. */
static inline _Atomic uint64_t *sent_ctr(const tnccl_comm_t *c, int owner, int q) {
  return &lines_of(c, owner)[2 * q].v;
}
static inline _Atomic uint64_t *used_ctr(const tnccl_comm_t *c, int owner, int q) {
  return &lines_of(c, owner)[2 * q + 1].v;
}
/* Rank `owner`'s outbox for rank q. */
static inline char *outbox_of(const tnccl_comm_t *c, int owner, int q) {
  return c->seg[owner] + c->ctrl_bytes + 2 * SLOT_BYTES + (size_t)q * OUTBOX_BYTES;
}

/* ---- waiting for peers (comm.c) ---- */

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

/* Waits until every peer's counter at `field` of its ctrl_t reaches
 * `target`; NOT_READY naming the rank after the communicator's timeout. */
tnrt_status_t ccl_wait_all(tnccl_comm_t *c, size_t field, uint64_t target, const char *what);
#define WAIT(c, f, t, w) ccl_wait_all((c), offsetof(ctrl_t, f), (t), (w))

/* shared between the parts */
int ccl_pause_wait(const tnccl_comm_t *c, waiter_t *w);
void ccl_drop_maps(tnccl_comm_t *c, peer_maps_t *m);
void ccl_direct_copy(void *dst, const void *src, size_t m, int stream);
int ccl_is_float(int dt);
int ccl_binary_op(tnccl_op_t op);
void ccl_reduce_n(tnccl_comm_t *c, void *out, const char **in, int64_t n, int dtype, tnccl_op_t op);
const char *ccl_kind_name(int kind);
const char *ccl_dtype_name(int dt, char *buf, size_t n);
const char *ccl_op_name(int op, char *buf, size_t n);
void ccl_finish_round(tnccl_comm_t *c, uint64_t k);
void ccl_post_desc(tnccl_comm_t *c, uint64_t k, const desc_t *mine);
tnrt_status_t ccl_check_desc(tnccl_comm_t *c, uint64_t k, const desc_t *mine, const char *why);
tnrt_status_t ccl_join_and_fail(tnccl_comm_t *c, const desc_t *mine, const char *why);
tnrt_status_t ccl_peer_buffer(tnccl_comm_t *c, int r, const dsrc_t *d, size_t need, char **out);
int ccl_direct_begin(tnccl_comm_t *c, const desc_t *d, const void *src, uint64_t *kout,
                     tnrt_status_t *st);
tnrt_status_t ccl_map_sources(tnccl_comm_t *c, uint64_t k, int lo, int hi, const void *own_src,
                              size_t need);
tnrt_status_t ccl_direct_end(tnccl_comm_t *c, uint64_t k, const char *name, tnrt_status_t mine);
void ccl_reduce_direct(tnccl_comm_t *c, char *out, int64_t at, int64_t n, int dtype, tnccl_op_t op,
                       int copies);
tnrt_status_t ccl_all_reduce_direct(tnccl_comm_t *c, uint64_t k, void *buf, int64_t count,
                                    int dtype, tnccl_op_t op);
tnrt_status_t ccl_broadcast(tnccl_comm_t *c, void *buf, size_t bytes, int root, int kind);
size_t ccl_last_level_cache(void);
chunk_hdr_t *ccl_chunk_hdr(char *box, uint64_t i);

#endif
