/* The shared-memory communicator: comm (ccl_internal.h lists the parts). */
#include "ccl_internal.h"

/* ---- waiting for peers (ccl_internal.h: waiter_t, WAIT) ---- */

/* One pause of a wait: busy spins first (a small message's latency), then
 * yields the core, and after SPIN_NS sleeps, each sleep twice the last up
 * to MAX_SLEEP_NS, so a long wait holds no core. 0 once the wait has lasted
 * the communicator's timeout. */
int ccl_pause_wait(const tnccl_comm_t *c, waiter_t *w) {
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
tnrt_status_t ccl_wait_all(tnccl_comm_t *c, size_t field, uint64_t target, const char *what) {
  waiter_t w = {0};
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    _Atomic uint64_t *v = (_Atomic uint64_t *)((char *)ctrl_of(c, r) + field);
    while (atomic_load_explicit(v, memory_order_acquire) < target)
      if (!ccl_pause_wait(c, &w))
        return tnrt_set_error(TNRT_ERR_NOT_READY,
                              "collective timed out waiting for rank %d (%s of round %llu): "
                              "has it exited or left the collective?",
                              r, what, (unsigned long long)target);
  }
  return TNRT_OK;
}

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
                      .stream_min = ccl_last_level_cache()};
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

void ccl_drop_maps(tnccl_comm_t *c, peer_maps_t *m) {
  for (int i = 0; i < m->n; i++) tnrt_mem_unimport(c->device, m->e[i].ptr, m->e[i].bytes);
  m->n = 0;
}

void tnccl_comm_destroy(tnccl_comm_t *c) {
  if (!c) return;
  for (int r = 0; r < c->nranks; r++) ccl_drop_maps(c, &c->maps[r]);
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
size_t ccl_last_level_cache(void) {
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
void ccl_direct_copy(void *dst, const void *src, size_t m, int stream) {
  void (*copy_stream)(void *, const void *, int64_t) = tnk_config()->vmath.copy_stream;
  if (stream && copy_stream)
    copy_stream(dst, src, (int64_t)m);
  else
    memcpy(dst, src, m);
}
uint64_t tnccl_comm_direct_calls(const tnccl_comm_t *c) { return c ? c->direct_calls : 0; }

int tnccl_comm_rank(const tnccl_comm_t *c) { return c->rank; }
int tnccl_comm_size(const tnccl_comm_t *c) { return c->nranks; }
