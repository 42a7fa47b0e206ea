/* The shared-memory communicator: collectives (ccl_internal.h lists the parts). */
#include "ccl_internal.h"

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
             ccl_dtype_name(dtype, t, sizeof t));
  else if (ccl_binary_op(op) < 0)
    snprintf(why, n, "%s is not a reduction op", ccl_op_name(op, o, sizeof o));
  else if (ccl_is_float(dtype) && op >= TNCCL_BAND && op <= TNCCL_BXOR)
    snprintf(why, n, "op %s takes integer and bool dtypes, not %s", ccl_op_name(op, o, sizeof o),
             ccl_dtype_name(dtype, t, sizeof t));
  else if (count < 0)
    snprintf(why, n, "a negative count (%lld)", (long long)count);
  else if (count > INT64_MAX / blocks / (int64_t)esz)
    snprintf(why, n, "%lld elements of %s overflow the address space", (long long)count,
             ccl_dtype_name(dtype, t, sizeof t));
  else if (count && !have_buffers)
    snprintf(why, n, "a NULL buffer for %lld elements", (long long)count);
}

tnrt_status_t tnccl_all_reduce(tnccl_comm_t *c, void *buf, int64_t count, int dtype,
                               tnccl_op_t op) {
  if (!c) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_reduce without a communicator");
  desc_t d = {.kind = K_ALL_REDUCE, .count = count, .dtype = dtype, .op = (int32_t)op, .root = -1};
  char why[160];
  reduction_why(why, sizeof why, count, 1, dtype, op, buf != NULL);
  if (why[0]) return ccl_join_and_fail(c, &d, why);
  size_t esz = tnk_dtype_size(dtype);
  int n = c->nranks;
  tnrt_status_t st = TNRT_OK;
  if (n > 1 && (size_t)count * esz >= DIRECT_MIN) {
    uint64_t k;
    int r = ccl_direct_begin(c, &d, buf, &k, &st);
    if (r < 0) return st;
    if (r > 0) return ccl_all_reduce_direct(c, k, buf, count, dtype, op);
  }
  int64_t per_round = (int64_t)(SLOT_BYTES / esz) / n * n; /* a multiple of the rank count */
  const char **in = malloc(sizeof *in * (size_t)n);
  if (!in) return tnrt_set_error(TNRT_ERR_OUT_OF_MEMORY, "all_reduce");
  for (int64_t off = 0; off < count || (count == 0 && off == 0); off += per_round) {
    int64_t m = count - off < per_round ? count - off : per_round;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) ccl_post_desc(c, k, &d);
    char *data = (char *)buf + off * (int64_t)esz;
    if (m) memcpy(slot_of(c, c->rank, k), data, (size_t)m * esz);
    atomic_store_explicit(&ctrl_of(c, c->rank)->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (off == 0 && (st = ccl_check_desc(c, k, &d, "")) != TNRT_OK) break;
    /* my share: [lo, hi) of this round's m elements */
    int64_t share = (m + n - 1) / n, lo = share * c->rank, hi = lo + share < m ? lo + share : m;
    if (lo < hi) {
      /* this rank's own input first: the result overwrites it in place */
      for (int j = 0; j < n; j++) in[j] = slot_of(c, (c->rank + j) % n, k) + lo * (int64_t)esz;
      ccl_reduce_n(c, slot_of(c, c->rank, k) + lo * (int64_t)esz, in, hi - lo, dtype, op);
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
      if (r != root) ccl_direct_copy(c->ptrs[r] + at, c->ptrs[root] + at, m, stream);
  }
}

/* broadcast, and barrier (kind K_BARRIER: 0 bytes from rank 0). */
tnrt_status_t ccl_broadcast(tnccl_comm_t *c, void *buf, size_t bytes, int root, int kind) {
  if (!c)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "%s without a communicator",
                          ccl_kind_name(kind));
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
  if (why[0]) return ccl_join_and_fail(c, &d, why);
  tnrt_status_t st = TNRT_OK;
  ctrl_t *me = ctrl_of(c, c->rank);
  if (!barrier && c->nranks > 1 && bytes >= DIRECT_MIN) {
    uint64_t k;
    int r = ccl_direct_begin(c, &d, buf, &k, &st);
    if (r < 0) return st;
    if (r > 0) { /* every rank, the root too, copies a share of the root's buf */
      tnrt_status_t mine = ccl_map_sources(c, k, 0, c->nranks, buf, bytes);
      if (mine == TNRT_OK) broadcast_share(c, root, bytes);
      return ccl_direct_end(c, k, "broadcast", mine);
    }
  }
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += SLOT_BYTES) {
    size_t m = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) ccl_post_desc(c, k, &d);
    if (c->rank == root && m) memcpy(slot_of(c, root, k), (char *)buf + off, m);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the root's data")) != TNRT_OK) break;
    if (off == 0 && (st = ccl_check_desc(c, k, &d, "")) != TNRT_OK) break;
    if (c->rank != root && m) memcpy((char *)buf + off, slot_of(c, root, k), m);
    ccl_finish_round(c, k);
    if (bytes == 0) break;
  }
  return st;
}

tnrt_status_t tnccl_broadcast(tnccl_comm_t *c, void *buf, size_t bytes, int root) {
  return ccl_broadcast(c, buf, bytes, root, K_BROADCAST);
}

tnrt_status_t tnccl_barrier(tnccl_comm_t *c) { return ccl_broadcast(c, NULL, 0, 0, K_BARRIER); }

tnrt_status_t tnccl_all_gather(tnccl_comm_t *c, const void *in, void *out, size_t bytes) {
  if (!c) return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "all_gather without a communicator");
  desc_t d = {.kind = K_ALL_GATHER, .count = (int64_t)bytes, .dtype = -1, .op = -1, .root = -1};
  char why[160] = "";
  if (bytes > INT64_MAX / (size_t)c->nranks)
    snprintf(why, sizeof why, "%zu bytes from each of %d ranks overflow", bytes, c->nranks);
  else if (bytes && (!in || !out))
    snprintf(why, sizeof why, "a NULL %s for %zu bytes", in ? "out" : "in", bytes);
  if (why[0]) return ccl_join_and_fail(c, &d, why);
  tnrt_status_t st = TNRT_OK;
  ctrl_t *me = ctrl_of(c, c->rank);
  int n = c->nranks;
  if (n > 1 && bytes * (size_t)n >= DIRECT_MIN) {
    uint64_t k;
    int r = ccl_direct_begin(c, &d, in, &k, &st);
    if (r < 0) return st;
    if (r > 0) { /* every rank's in, read in place: a peer in place writes
                    only the other blocks of its out */
      tnrt_status_t mine = ccl_map_sources(c, k, 0, n, in, bytes);
      int stream = bytes * (size_t)n * (size_t)(n + 1) >= c->stream_min; /* ins and outs */
      for (int q = 0; q < n && mine == TNRT_OK; q++) {
        char *to = (char *)out + (size_t)q * bytes;
        if (to == c->ptrs[q]) continue;
        uintptr_t t = (uintptr_t)to, f = (uintptr_t)c->ptrs[q];
        if (t + bytes <= f || f + bytes <= t)
          ccl_direct_copy(to, c->ptrs[q], bytes, stream);
        else /* (this rank's in inside its out, elsewhere than its block) */
          memmove(to, c->ptrs[q], bytes);
      }
      return ccl_direct_end(c, k, "all_gather", mine);
    }
  }
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += SLOT_BYTES) {
    size_t m = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    uint64_t k = ++c->round;
    if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) break;
    if (off == 0) ccl_post_desc(c, k, &d);
    if (m) memcpy(slot_of(c, c->rank, k), (const char *)in + off, m);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (off == 0 && (st = ccl_check_desc(c, k, &d, "")) != TNRT_OK) break;
    for (int r = 0; r < c->nranks && m; r++)
      memcpy((char *)out + (size_t)r * bytes + off, slot_of(c, r, k), m);
    ccl_finish_round(c, k);
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
  if (why[0]) return ccl_join_and_fail(c, &d, why);
  size_t esz = tnk_dtype_size(dtype);
  int n = c->nranks;
  tnrt_status_t st = TNRT_OK;
  if (n > 1 && (size_t)count * esz * (size_t)n >= DIRECT_MIN) {
    uint64_t k;
    int r = ccl_direct_begin(c, &d, in, &k, &st);
    if (r < 0) return st;
    if (r > 0) { /* block `rank` of every rank's in, reduced into out */
      tnrt_status_t mine = ccl_map_sources(c, k, 0, n, in, (size_t)count * esz * (size_t)n);
      if (mine == TNRT_OK) ccl_reduce_direct(c, out, (int64_t)c->rank * count, count, dtype, op, 0);
      return ccl_direct_end(c, k, "reduce_scatter", mine);
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
    if (off == 0) ccl_post_desc(c, k, &d);
    char *slot = slot_of(c, c->rank, k);
    for (int r = 0; r < n && m; r++) /* block r's chunk at region r of the slot */
      memcpy(slot + (size_t)r * (size_t)per_round * esz,
             (const char *)in + ((int64_t)r * count + off) * (int64_t)esz, (size_t)m * esz);
    atomic_store_explicit(&me->posted, k, memory_order_release);
    if ((st = WAIT(c, posted, k, "the inputs")) != TNRT_OK) break;
    if (off == 0 && (st = ccl_check_desc(c, k, &d, "")) != TNRT_OK) break;
    if (m) {
      for (int j = 0; j < n; j++)
        src[j] = slot_of(c, (c->rank + j) % n, k) + (size_t)c->rank * (size_t)per_round * esz;
      ccl_reduce_n(c, (char *)out + off * (int64_t)esz, src, m, dtype, op);
    }
    ccl_finish_round(c, k);
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
  ccl_post_desc(c, k, &desc);
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
  if ((st = ccl_check_desc(c, k, &desc, why)) != TNRT_OK) return st;
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
    ccl_finish_round(c, k);
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
    ccl_direct_copy((char *)out + recv_off[me], (const char *)in + send_off[me], send_bytes[me],
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
        mine =
            ccl_peer_buffer(c, q, &ctrl_of(c, q)->dsrc[k & 1], (size_t)at + recv_bytes[q], &from);
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
      ccl_direct_copy((char *)out + recv_off[q], from + at, recv_bytes[q], stream);
    }
    return ccl_direct_end(c, k, "all_to_all_v", mine);
  }
  ccl_finish_round(c, k);
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
    ccl_finish_round(c, k);
  }
  return TNRT_OK;
}
