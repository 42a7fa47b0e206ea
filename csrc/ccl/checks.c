/* The shared-memory communicator: checks (ccl_internal.h lists the parts). */
#include "ccl_internal.h"

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

#define KIND_NAME_(ID, NAME) [K_##ID] = NAME,
const char *ccl_kind_name(int kind) {
  static const char *const names[K_COUNT] = {[K_NONE] = "?", TNCCL_KINDS(KIND_NAME_)};
  return kind > 0 && kind < K_COUNT ? names[kind] : "?";
}
#undef KIND_NAME_

const char *ccl_dtype_name(int dt, char *buf, size_t n) {
  static const char *const names[TNK_DTYPE_COUNT] = {
      [TNK_BOOL] = "bool",   [TNK_U8] = "uint8",      [TNK_I8] = "int8",
      [TNK_I16] = "int16",   [TNK_I32] = "int32",     [TNK_I64] = "int64",
      [TNK_F16] = "float16", [TNK_BF16] = "bfloat16", [TNK_F32] = "float32",
      [TNK_F64] = "float64", [TNK_C64] = "complex64", [TNK_C128] = "complex128"};
  if (dt >= 0 && dt < TNK_DTYPE_COUNT) return names[dt];
  snprintf(buf, n, "dtype %d", dt);
  return buf;
}

const char *ccl_op_name(int op, char *buf, size_t n) {
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
             ccl_dtype_name(d->dtype, t, sizeof t), ccl_op_name(d->op, o, sizeof o));
  else if (d->kind == K_BROADCAST)
    snprintf(buf, n, "%lld bytes from root %d", (long long)d->count, d->root);
  else if (d->kind == K_ALL_GATHER)
    snprintf(buf, n, "%lld bytes", (long long)d->count);
}

/* "all_gather (13 bytes)", "barrier" */
static void describe_call(const desc_t *d, char *buf, size_t n) {
  char a[112];
  describe(d, a, sizeof a);
  snprintf(buf, n, "%s%s%s%s", ccl_kind_name(d->kind), a[0] ? " (" : "", a, a[0] ? ")" : "");
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
void ccl_finish_round(tnccl_comm_t *c, uint64_t k) {
  atomic_store_explicit(&ctrl_of(c, c->rank)->reduced, k, memory_order_release);
  atomic_store_explicit(&ctrl_of(c, c->rank)->done, k, memory_order_release);
}

/* In round k, the first of a call, before this rank's posted = k. */
void ccl_post_desc(tnccl_comm_t *c, uint64_t k, const desc_t *mine) {
  desc_t *d = &ctrl_of(c, c->rank)->desc[k & 1];
  *d = *mine;
  d->round = k;
}

/* In round k, the first of a call, once every peer's posted >= k: TNRT_OK
 * when every rank's descriptor equals this rank's `mine` and none is
 * invalid; otherwise this rank finishes round k and returns the error (why:
 * what this rank's own checks found wrong, "" if nothing). */
tnrt_status_t ccl_check_desc(tnccl_comm_t *c, uint64_t k, const desc_t *mine, const char *why) {
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
  ccl_finish_round(c, k);
  const char *name = ccl_kind_name(mine->kind);
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
                          d_invalid.kind == mine->kind ? "" : ccl_kind_name(d_invalid.kind));
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
tnrt_status_t ccl_join_and_fail(tnccl_comm_t *c, const desc_t *mine, const char *why) {
  desc_t d = *mine;
  d.invalid = 1;
  uint64_t k = ++c->round;
  tnrt_status_t st;
  if ((st = WAIT(c, done, k >= 2 ? k - 2 : 0, "reuse of a slot")) != TNRT_OK) return st;
  ccl_post_desc(c, k, &d);
  atomic_store_explicit(&ctrl_of(c, c->rank)->posted, k, memory_order_release);
  if ((st = WAIT(c, posted, k, "the arguments")) != TNRT_OK) return st;
  return ccl_check_desc(c, k, &d, why);
}
