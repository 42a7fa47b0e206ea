/* The shared-memory communicator (ccl.h). */
#define _GNU_SOURCE
#include "ccl.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/dtype.h"
#include "../runtime/internal.h" /* tnrt_set_error */
#include "../kernels/tnk.h"

#define CTRL_BYTES 4096
#define SLOT_BYTES ((size_t)1 << 21) /* per round and slot: 2 MiB */
#define SEG_BYTES (CTRL_BYTES + 2 * SLOT_BYTES)

/* The owner's counters, read by the peers: the last round it has posted its
 * data for, reduced its share of, and finished reading the peers' slots. */
typedef struct ctrl {
  _Atomic uint64_t posted;
  char pad0[56];
  _Atomic uint64_t reduced;
  char pad1[56];
  _Atomic uint64_t done;
  char pad2[56];
} ctrl_t;

struct tnccl_comm {
  int device, rank, nranks;
  int64_t timeout_ns;
  uint64_t round; /* rounds this rank has run */
  char *mine;     /* this rank's segment */
  char **seg;     /* every rank's segment as mapped here (seg[rank] = mine) */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ctrl_t *ctrl_of(const tnccl_comm_t *c, int r) { return (ctrl_t *)c->seg[r]; }
static char *slot_of(const tnccl_comm_t *c, int r, uint64_t round) {
  return c->seg[r] + CTRL_BYTES + (round & 1) * SLOT_BYTES;
}

/* Waits until every peer's counter at `field` reaches `target`. */
static tnrt_status_t wait_all(tnccl_comm_t *c, size_t field, uint64_t target, const char *what) {
  int64_t deadline = now_ns() + c->timeout_ns;
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    _Atomic uint64_t *v = (_Atomic uint64_t *)((char *)ctrl_of(c, r) + field);
    for (int spins = 0; atomic_load_explicit(v, memory_order_acquire) < target; spins++) {
      if (spins > 1000) {
        if (now_ns() > deadline)
          return tnrt_set_error(TNRT_ERR_NOT_READY,
                                "collective timed out waiting for rank %d (%s of round %llu): "
                                "has it exited or left the collective?",
                                r, what, (unsigned long long)target);
        sched_yield();
      }
    }
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
  if (c) c->seg = calloc((size_t)nranks, sizeof *c->seg);
  if (!c || !all || !c->seg) {
    if (c) free(c->seg);
    free(c);
    free(all);
    return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "communicator");
  }
  *c = (tnccl_comm_t){device, rank, nranks, timeout_ms * 1000000, 0, NULL, c->seg};
  tnrt_mem_handle_t h;
  void *mine;
  tnrt_status_t st = tnrt_mem_alloc_shared(device, SEG_BYTES, &mine, &h);
  if (st != TNRT_OK) goto fail;
  c->mine = mine;
  c->seg[rank] = mine;
  memset(mine, 0, CTRL_BYTES); /* the counters start at round 0 */
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

void tnccl_comm_destroy(tnccl_comm_t *c) {
  if (!c) return;
  for (int r = 0; r < c->nranks; r++) {
    if (!c->seg[r]) continue;
    if (r == c->rank)
      tnrt_mem_free_shared(c->device, c->seg[r], SEG_BYTES);
    else
      tnrt_mem_unimport(c->device, c->seg[r], SEG_BYTES);
  }
  free(c->seg);
  free(c);
}

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

/* out[i] = op over ranks of in[r][i], i < n; half types accumulate in fp32
 * and round once. AVG divides the sum by the rank count. out may be in[0]
 * (and no other input). */
static void reduce_n(tnccl_comm_t *c, void *out, const char **in, int64_t n, int dtype,
                     tnccl_op_t op) {
  int bop = binary_op(op);
  size_t esz = tnk_dtype_size(dtype);
  if (is_half(dtype)) {
    enum { B = 1024 };
    float acc[B], v[B];
    for (int64_t i0 = 0; i0 < n; i0 += B) {
      int64_t m = n - i0 < B ? n - i0 : B;
      for (int64_t i = 0; i < m; i++) acc[i] = (float)tnk_ldf(in[0], dtype, i0 + i);
      for (int r = 1; r < c->nranks; r++) {
        for (int64_t i = 0; i < m; i++) v[i] = (float)tnk_ldf(in[r], dtype, i0 + i);
        combine(acc, acc, v, m, TNK_F32, bop);
      }
      for (int64_t i = 0; i < m; i++) {
        double x = acc[i];
        if (op == TNCCL_AVG) x = (float)(x / c->nranks);
        tnk_stf(out, dtype, i0 + i, x);
      }
    }
    return;
  }
  if (c->nranks == 1)
    memmove(out, in[0], (size_t)n * esz);
  else
    combine(out, in[0], in[1], n, dtype, bop);
  for (int r = 2; r < c->nranks; r++) combine(out, out, in[r], n, dtype, bop);
  if (op == TNCCL_AVG) {
    for (int64_t i = 0; i < n; i++) {
      if (is_float(dtype))
        tnk_stf(out, dtype, i, tnk_ldf(out, dtype, i) / c->nranks);
      else {
        tnk_val_t v = tnk_load_any((char *)out + i * esz, dtype);
        v.i /= c->nranks;
        v.re = (double)v.i;
        tnk_store_any((char *)out + i * esz, dtype, v);
      }
    }
  }
}

/* ---- collectives ---- */

/* A reduction the library takes: real dtypes, bitwise ops on integers only. */
static int reduction_ok(const tnccl_comm_t *c, int64_t count, int dtype, tnccl_op_t op) {
  return c && count >= 0 && tnk_dtype_size(dtype) && dtype < TNK_C64 && binary_op(op) >= 0 &&
         !(is_float(dtype) && op >= TNCCL_BAND && op <= TNCCL_BXOR);
}

tnrt_status_t tnccl_all_reduce(tnccl_comm_t *c, void *buf, int64_t count, int dtype,
                               tnccl_op_t op) {
  size_t esz = tnk_dtype_size(dtype);
  if (!reduction_ok(c, count, dtype, op))
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_reduce of dtype %d with op %d", dtype,
                          (int)op);
  int n = c->nranks;
  int64_t per_round = (int64_t)(SLOT_BYTES / esz) / n * n; /* a multiple of the rank count */
  const char **in = malloc(sizeof *in * (size_t)n);
  if (!in) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "all_reduce");
  tnrt_status_t st = TNRT_OK;
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += per_round) {
    int64_t m = count - off < per_round ? count - off : per_round;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    char *data = (char *)buf + off * (int64_t)esz;
    if (m) memcpy(slot_of(c, c->rank, k), data, (size_t)m * esz);
    atomic_store_explicit(&ctrl_of(c, c->rank)->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
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

tnrt_status_t tnccl_broadcast(tnccl_comm_t *c, void *buf, size_t bytes, int root) {
  if (!c || root < 0 || root >= c->nranks)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "broadcast from root %d", root);
  tnrt_status_t st = TNRT_OK;
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += SLOT_BYTES) {
    size_t m = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    uint64_t k = ++c->round;
    ctrl_t *me = ctrl_of(c, c->rank);
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (c->rank == root && m) memcpy(slot_of(c, root, k), (char *)buf + off, m);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the root's data")) != TNRT_OK) break;
    if (c->rank != root && m) memcpy((char *)buf + off, slot_of(c, root, k), m);
    atomic_store_explicit(&me->reduced, k, memory_order_release);
    atomic_store_explicit(&me->done, k, memory_order_release);
    if (bytes == 0) break;
  }
  return st;
}

tnrt_status_t tnccl_barrier(tnccl_comm_t *c) { return tnccl_broadcast(c, NULL, 0, 0); }

tnrt_status_t tnccl_all_gather(tnccl_comm_t *c, const void *in, void *out, size_t bytes) {
  if (!c || (bytes && (!in || !out)))
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_gather of %zu bytes", bytes);
  tnrt_status_t st = TNRT_OK;
  ctrl_t *me = ctrl_of(c, c->rank);
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += SLOT_BYTES) {
    size_t m = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (m) memcpy(slot_of(c, c->rank, k), (const char *)in + off, m);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    for (int r = 0; r < c->nranks && m; r++)
      memcpy((char *)out + (size_t)r * bytes + off, slot_of(c, r, k), m);
    atomic_store_explicit(&me->reduced, k, memory_order_release);
    atomic_store_explicit(&me->done, k, memory_order_release);
    if (bytes == 0) break;
  }
  return st;
}

tnrt_status_t tnccl_reduce_scatter(tnccl_comm_t *c, const void *in, void *out, int64_t count,
                                   int dtype, tnccl_op_t op) {
  size_t esz = tnk_dtype_size(dtype);
  if (!reduction_ok(c, count, dtype, op))
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "reduce_scatter of dtype %d with op %d", dtype,
                          (int)op);
  int n = c->nranks;
  int64_t per_round = (int64_t)(SLOT_BYTES / esz) / n; /* elements of each block per round */
  const char **src = malloc(sizeof *src * (size_t)n);
  if (!src) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "reduce_scatter");
  tnrt_status_t st = TNRT_OK;
  ctrl_t *me = ctrl_of(c, c->rank);
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += per_round) {
    int64_t m = count - off < per_round ? count - off : per_round;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    char *slot = slot_of(c, c->rank, k);
    for (int r = 0; r < n && m; r++) /* block r's chunk at region r of the slot */
      memcpy(slot + (size_t)r * (size_t)per_round * esz,
             (const char *)in + ((int64_t)r * count + off) * (int64_t)esz, (size_t)m * esz);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (m) {
      for (int j = 0; j < n; j++)
        src[j] = slot_of(c, (c->rank + j) % n, k) + (size_t)c->rank * (size_t)per_round * esz;
      reduce_n(c, (char *)out + off * (int64_t)esz, src, m, dtype, op);
    }
    atomic_store_explicit(&me->reduced, k, memory_order_release);
    atomic_store_explicit(&me->done, k, memory_order_release);
    if (count == 0) break;
  }
  free(src);
  return st;
}
