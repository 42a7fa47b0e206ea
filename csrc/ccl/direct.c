/* The shared-memory communicator: direct (ccl_internal.h lists the parts). */
#include "ccl_internal.h"

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
tnrt_status_t ccl_peer_buffer(tnccl_comm_t *c, int r, const dsrc_t *d, size_t need, char **out) {
  peer_maps_t *m = &c->maps[r];
  if (m->generation != d->generation) {
    ccl_drop_maps(c, m);
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
int ccl_direct_begin(tnccl_comm_t *c, const desc_t *d, const void *src, uint64_t *kout,
                     tnrt_status_t *st) {
  uint64_t k = ++c->round;
  ctrl_t *me = ctrl_of(c, c->rank);
  if ((*st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) return -1;
  ccl_post_desc(c, k, d);
  dsrc_t *mine = &me->dsrc[k & 1];
  size_t off = 0;
  uint64_t gen = 0;
  mine->valid =
      c->direct && src && tnrt_mem_shared_handle(src, &mine->handle, &off, &gen) == TNRT_OK;
  mine->offset = off;
  mine->generation = gen;
  atomic_store_explicit(&me->posted, k, memory_order_release);
  if ((*st = WAIT(c, posted, k, "the arguments")) != TNRT_OK) return -1;
  if ((*st = ccl_check_desc(c, k, d, "")) != TNRT_OK) return -1;
  int direct = 1;
  for (int r = 0; r < c->nranks; r++) direct &= ctrl_of(c, r)->dsrc[k & 1].valid != 0;
  if (!direct) {
    ccl_finish_round(c, k);
    return 0;
  }
  *kout = k;
  return 1;
}

/* c->ptrs[r] = rank r's source buffer of round k (need bytes), for the
 * ranks in [lo, hi) (own: own_src). On a failure to map one, this rank
 * marks round k failed and returns the error. */
tnrt_status_t ccl_map_sources(tnccl_comm_t *c, uint64_t k, int lo, int hi, const void *own_src,
                              size_t need) {
  for (int r = lo; r < hi; r++) {
    if (r == c->rank) {
      c->ptrs[r] = (char *)own_src;
      continue;
    }
    tnrt_status_t st = ccl_peer_buffer(c, r, &ctrl_of(c, r)->dsrc[k & 1], need, &c->ptrs[r]);
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
tnrt_status_t ccl_direct_end(tnccl_comm_t *c, uint64_t k, const char *name, tnrt_status_t mine) {
  ccl_finish_round(c, k);
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
void ccl_reduce_direct(tnccl_comm_t *c, char *out, int64_t at, int64_t n, int dtype, tnccl_op_t op,
                       int copies) {
  size_t esz = tnk_dtype_size(dtype);
  int64_t piece = (int64_t)(DIRECT_PIECE / esz);
  for (int64_t i = 0; i < n; i += piece) {
    int64_t m = n - i < piece ? n - i : piece;
    for (int j = 0; j < c->nranks; j++)
      c->srcs[j] = c->ptrs[(c->rank + j) % c->nranks] + (at + i) * (int64_t)esz;
    ccl_reduce_n(c, out + i * (int64_t)esz, c->srcs, m, dtype, op);
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
tnrt_status_t ccl_all_reduce_direct(tnccl_comm_t *c, uint64_t k, void *buf, int64_t count,
                                    int dtype, tnccl_op_t op) {
  int n = c->nranks, me = c->rank;
  size_t esz = tnk_dtype_size(dtype);
  int64_t line = (int64_t)(LINE / esz);
  int64_t share = ((count + n - 1) / n + line - 1) / line * line;
  tnrt_status_t mine = ccl_map_sources(c, k, 0, n, buf, (size_t)count * esz);
  int64_t lo = share * me, hi = lo + share < count ? lo + share : count;
  if (mine == TNRT_OK && lo < hi)
    ccl_reduce_direct(c, c->ptrs[me] + lo * (int64_t)esz, lo, hi - lo, dtype, op, 1);
  return ccl_direct_end(c, k, "all_reduce", mine);
}
