/* The shared-memory communicator: p2p (ccl_internal.h lists the parts). */
#include "ccl_internal.h"

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

chunk_hdr_t *ccl_chunk_hdr(char *box, uint64_t i) { return (chunk_hdr_t *)box + i % P2P_CHUNKS; }
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
    chunk_hdr_t *h = ccl_chunk_hdr(box, i);
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
    const chunk_hdr_t *h = ccl_chunk_hdr(box, i);
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
    if (!ccl_pause_wait(c, &w)) {
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
