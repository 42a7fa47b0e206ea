#define _GNU_SOURCE
/* Over 1,000 lines as one file on purpose: the ranks are processes this
 * binary launches once per rank count, and every check below runs inside the
 * same rendezvous (run_rank); split files would each need the launcher and
 * the bootstrap again. The latency and bandwidth runs (--latency,
 * --bandwidth) are modes of the same launcher.
 *
 * Tests of the collective library (ccl/ccl.h): this binary launches N
 * copies of itself as ranks (fork + exec); the bootstrap exchange goes
 * through files in a fresh directory (the c10d store's stand-in). Every rank
 * knows every rank's inputs, so each checks its results against a plain
 * reduction computed here. */
#include "check.h"
#include "ccl.h"
#include "dtype.h"
#include "tnk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct boot {
  const char *dir;
  int rank, nranks;
} boot_t;

static int file_exchange(void *ctx, const void *mine, void *all, size_t bytes) {
  boot_t *b = ctx;
  char path[512], tmp[512];
  snprintf(tmp, sizeof tmp, "%s/.%d", b->dir, b->rank);
  snprintf(path, sizeof path, "%s/%d", b->dir, b->rank);
  FILE *f = fopen(tmp, "wb");
  if (!f || fwrite(mine, 1, bytes, f) != bytes || fclose(f) != 0) return -1;
  if (rename(tmp, path) != 0) return -1;
  for (int r = 0; r < b->nranks; r++) {
    snprintf(path, sizeof path, "%s/%d", b->dir, r);
    for (int tries = 0;; tries++) { /* bounded: 10 s */
      FILE *g = fopen(path, "rb");
      if (g) {
        size_t got = fread((char *)all + (size_t)r * bytes, 1, bytes, g);
        fclose(g);
        if (got == bytes) break;
      }
      if (tries > 10000) return -1;
      usleep(1000);
    }
  }
  return 0;
}

/* ---- where the checks' buffers live ----
 * MEM_HOST: malloc (private: the staged path); MEM_SHARED: the runtime's
 * caching allocator with shared segments on (the direct path above its
 * threshold, 256 KiB: ccl_internal.h's DIRECT_MIN); MEM_MIXED: shared on every rank
 * but the last, which has host memory (every rank must stay staged). */
enum { MEM_HOST, MEM_SHARED, MEM_MIXED };
static int g_mem, g_rank, g_nranks;
#define DIRECT_MIN_BYTES ((size_t)256 << 10)

typedef struct dev_buf {
  void *p;
  tnrt_block_t *b;
} dev_buf_t;
static dev_buf_t g_bufs[64];

static int shared_here(void) {
  return g_mem == MEM_SHARED || (g_mem == MEM_MIXED && g_rank != g_nranks - 1);
}

static void *xalloc(size_t bytes) {
  if (!shared_here()) return malloc(bytes ? bytes : 1);
  for (int i = 0; i < 64; i++)
    if (!g_bufs[i].p) {
      if (tnrt_malloc(0, bytes ? bytes : 1, NULL, &g_bufs[i].p, &g_bufs[i].b) != TNRT_OK) {
        fprintf(stderr, "rank %d: tnrt_malloc(%zu): %s\n", g_rank, bytes, tnrt_last_error());
        abort();
      }
      return g_bufs[i].p;
    }
  abort();
}

static void xfree(void *p) {
  for (int i = 0; i < 64 && p; i++)
    if (g_bufs[i].p == p) {
      tnrt_free(g_bufs[i].b);
      g_bufs[i].p = NULL;
      return;
    }
  free(p);
}

/* Whether a call of `bytes` (the message as the communicator measures it) must have
 * taken the direct path, against the communicator's count before it. */
static int direct_wrong(tnccl_comm_t *c, uint64_t before, size_t bytes, const char *what) {
  int want = g_mem == MEM_SHARED && g_nranks > 1 && bytes >= DIRECT_MIN_BYTES;
  uint64_t got = tnccl_comm_direct_calls(c) - before;
  if (got == (uint64_t)want) return 0;
  fprintf(stderr, "rank %d: %s of %zu bytes (memory %d) took the direct path %llu times, not %d\n",
          g_rank, what, bytes, g_mem, (unsigned long long)got, want);
  return 1;
}

static double input_value(int rank, int64_t i, int dtype) {
  if (dtype == TNK_BOOL) return (double)((i + rank) % 3 == 0);
  if (dtype == TNK_F32 || dtype == TNK_F64 || dtype == TNK_BF16 || dtype == TNK_F16)
    return (double)((i * 7 + rank * 13) % 17) * 0.25 - 2.0;
  return (double)((i * 7 + rank * 13) % 17) - 8;
}

static void put(char *buf, int dtype, int64_t i, double v) {
  tnk_val_t x = {v, 0.0, (int64_t)v, 1};
  x.isint = !(dtype == TNK_F32 || dtype == TNK_F64 || dtype == TNK_BF16 || dtype == TNK_F16);
  tnk_store_any(buf + i * (int64_t)tnk_dtype_size(dtype), dtype, x);
}

static double get(const char *buf, int dtype, int64_t i) {
  tnk_val_t x = tnk_load_any(buf + i * (int64_t)tnk_dtype_size(dtype), dtype);
  return x.isint ? (double)x.i : x.re;
}

static int check_all_reduce(tnccl_comm_t *c, int64_t n, int dtype, tnccl_op_t op) {
  int rank = tnccl_comm_rank(c), nr = tnccl_comm_size(c);
  size_t esz = tnk_dtype_size(dtype);
  char *buf = xalloc(n ? (size_t)n * esz : 1);
  for (int64_t i = 0; i < n; i++) put(buf, dtype, i, input_value(rank, i, dtype));
  uint64_t before = tnccl_comm_direct_calls(c);
  if (tnccl_all_reduce(c, buf, n, dtype, op) != TNRT_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, tnrt_last_error());
    xfree(buf);
    return 1;
  }
  int bad = direct_wrong(c, before, (size_t)n * esz, "all_reduce");
  for (int64_t i = 0; i < n; i++) {
    double want = input_value(0, i, dtype);
    for (int r = 1; r < nr; r++) {
      double v = input_value(r, i, dtype);
      switch (op) {
        case TNCCL_SUM:
        case TNCCL_AVG: want += v; break;
        case TNCCL_PRODUCT: want *= v; break;
        case TNCCL_MIN: want = v < want ? v : want; break;
        case TNCCL_MAX: want = v > want ? v : want; break;
        default: break;
      }
    }
    if (op == TNCCL_AVG) want /= nr;
    if (dtype == TNK_BOOL) want = want != 0;
    double got = get(buf, dtype, i);
    double tol = dtype == TNK_BF16  ? 0.02 * fabs(want) + 0.02
                 : dtype == TNK_F16 ? 2e-3 * fabs(want) + 2e-3
                                    : 1e-6 * fabs(want) + 1e-6;
    if (op == TNCCL_AVG && dtype != TNK_F32 && dtype != TNK_F64 && dtype != TNK_BF16 &&
        dtype != TNK_F16)
      tol = 1.0; /* integer average truncates */
    if (!(fabs(got - want) <= tol)) bad++;
  }
  xfree(buf);
  if (bad)
    fprintf(stderr, "rank %d: all_reduce of %lld dtype %d op %d: %d wrong\n", rank, (long long)n,
            dtype, (int)op, bad);
  return bad != 0;
}

static int check_all_gather(tnccl_comm_t *c, size_t bytes, int in_place) {
  int rank = tnccl_comm_rank(c), nr = tnccl_comm_size(c);
  unsigned char *out = xalloc(bytes * (size_t)nr + 1),
                *in = in_place ? out + bytes * (size_t)rank : xalloc(bytes + 1);
  for (size_t i = 0; i < bytes; i++) in[i] = (unsigned char)(i * 3 + (size_t)rank * 101);
  uint64_t before = tnccl_comm_direct_calls(c);
  int bad = tnccl_all_gather(c, in, out, bytes) != TNRT_OK;
  bad += !bad && direct_wrong(c, before, bytes * (size_t)nr, "all_gather");
  for (int r = 0; r < nr && !bad; r++)
    for (size_t i = 0; i < bytes; i++)
      bad += out[(size_t)r * bytes + i] != (unsigned char)(i * 3 + (size_t)r * 101);
  if (!in_place) xfree(in);
  xfree(out);
  if (bad) fprintf(stderr, "rank %d: all_gather of %zu bytes: %d wrong\n", rank, bytes, bad);
  return bad != 0;
}

static int check_reduce_scatter(tnccl_comm_t *c, int64_t count, int dtype, tnccl_op_t op) {
  int rank = tnccl_comm_rank(c), nr = tnccl_comm_size(c);
  size_t esz = tnk_dtype_size(dtype);
  char *in = xalloc((size_t)(count * nr) * esz + 1), *out = xalloc((size_t)count * esz + 1);
  /* element i of block b on rank r: input_value(r, b * count + i) */
  for (int64_t i = 0; i < count * nr; i++) put(in, dtype, i, input_value(rank, i, dtype));
  uint64_t before = tnccl_comm_direct_calls(c);
  int bad = tnccl_reduce_scatter(c, in, out, count, dtype, op) != TNRT_OK;
  bad += !bad && direct_wrong(c, before, (size_t)(count * nr) * esz, "reduce_scatter");
  for (int64_t i = 0; i < count && !bad; i++) {
    int64_t g = (int64_t)rank * count + i;
    double want = input_value(0, g, dtype);
    for (int r = 1; r < nr; r++) {
      double v = input_value(r, g, dtype);
      want = op == TNCCL_MAX ? (v > want ? v : want) : want + v;
    }
    if (op == TNCCL_AVG) want /= nr;
    double got = get(out, dtype, i),
           tol = dtype == TNK_BF16 ? 0.02 * fabs(want) + 0.02 : 1e-6 * fabs(want) + 1e-6;
    bad += !(fabs(got - want) <= tol);
  }
  xfree(in);
  xfree(out);
  if (bad)
    fprintf(stderr, "rank %d: reduce_scatter of %lld dtype %d: %d wrong\n", rank, (long long)count,
            dtype, bad);
  return bad != 0;
}

/* ---- all_to_all_v and point-to-point: the bytes rank s sends rank d are
 * pattern(s, d, i), computed again by the receiver. ---- */

static unsigned char pattern(int s, int d, size_t i) {
  return (unsigned char)(i * 131 + (i >> 9) + (size_t)s * 37 + (size_t)d * 11 + 1);
}

/* The bytes rank s sends rank d in all_to_all_v's variant v: small and
 * uneven with zeros, larger than a slot (ccl_internal.h: 2 MiB) with zeros, or all
 * zero. */
#define SLOT ((size_t)2 << 20)
static size_t a2a_bytes(int s, int d, int v) {
  if (v == 0) return (s * 7 + d * 3) % 5 == 0 ? 0 : (size_t)(s * 131 + d * 17 + 1);
  if (v == 1) /* up to a slot and a bit: 4 or 5 data rounds */
    return (s + d) % 3 == 0   ? 0
           : (s + d) % 3 == 1 ? SLOT + (size_t)(s * 101 + d * 7)
                              : (size_t)700000 + (size_t)(s * 3 + d);
  return 0;
}

/* all_to_all_v of variant v with blocks at scattered offsets (send blocks in
 * reverse rank order, gaps everywhere); the gaps must stay untouched. */
static int check_all_to_all_v(tnccl_comm_t *c, int v) {
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c);
  size_t so[8], sb[8], ro[8], rb[8], in_bytes = 3, out_bytes = 5;
  for (int p = n - 1; p >= 0; p--) {
    so[p] = in_bytes;
    sb[p] = a2a_bytes(me, p, v);
    in_bytes += sb[p] + 3;
  }
  for (int p = 0; p < n; p++) {
    ro[p] = out_bytes;
    rb[p] = a2a_bytes(p, me, v);
    out_bytes += rb[p] + 5;
  }
  unsigned char *in = malloc(in_bytes), *out = malloc(out_bytes);
  memset(in, 0x5a, in_bytes);
  memset(out, 0xee, out_bytes);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < sb[p]; i++) in[so[p] + i] = pattern(me, p, i);
  int bad = 0;
  if (tnccl_all_to_all_v(c, in, so, sb, out, ro, rb) != TNRT_OK) {
    fprintf(stderr, "rank %d: all_to_all_v %d: %s\n", me, v, tnrt_last_error());
    bad = 1;
  }
  size_t pos = 0;
  for (int p = 0; p < n && !bad; p++) {
    for (; pos < ro[p]; pos++) bad += out[pos] != 0xee;
    for (size_t i = 0; i < rb[p]; i++, pos++) bad += out[pos] != pattern(p, me, i);
  }
  for (; pos < out_bytes && !bad; pos++) bad += out[pos] != 0xee;
  free(in);
  free(out);
  if (bad) fprintf(stderr, "rank %d: all_to_all_v variant %d: %d wrong\n", me, v, bad);
  return bad != 0;
}

/* Rank 0 sends rank 1 one byte more than rank 1 expects (mismatch) or
 * passes a NULL in (invalid): every rank gets TNRT_ERR_INVALID_ARGUMENT
 * naming the ranks concerned, and the communicator keeps working. */
static int check_all_to_all_v_error(tnccl_comm_t *c, int invalid) {
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c), fails = 0;
  size_t off[8] = {0}, sb[8], rb[8];
  char in[64] = {0}, out[64];
  for (int p = 0; p < n; p++) sb[p] = rb[p] = 8;
  if (me == 0 && !invalid) sb[1] = 9;
  tnrt_status_t st = tnccl_all_to_all_v(c, me == 0 && invalid ? NULL : in, off, sb, out, off, rb);
  const char *e = tnrt_last_error();
  fails += st != TNRT_ERR_INVALID_ARGUMENT;
  if (invalid)
    fails += !strstr(e, me == 0 ? "NULL in" : "rank 0 passed invalid arguments");
  else
    fails += !strstr(e, "rank 0 sends 9 bytes to rank 1, which expects 8");
  if (fails) fprintf(stderr, "rank %d: all_to_all_v error (%d): %d: %s\n", me, invalid, st, e);
  fails += check_all_reduce(c, 100, TNK_F32, TNCCL_SUM);
  return fails != 0;
}

static unsigned char *pattern_buf(int s, int d, size_t bytes) {
  unsigned char *b = malloc(bytes + 1);
  for (size_t i = 0; i < bytes; i++) b[i] = pattern(s, d, i);
  return b;
}

static int pattern_bad(const unsigned char *b, int s, int d, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    if (b[i] != pattern(s, d, i)) return 1;
  return 0;
}

static int report(int rank, const char *what, tnrt_status_t st) {
  if (st != TNRT_OK) fprintf(stderr, "rank %d: %s: %d: %s\n", rank, what, st, tnrt_last_error());
  return st != TNRT_OK;
}

/* Every rank sends to rank + 1 and receives from rank - 1 in one batch,
 * `bytes` more than an outbox holds. */
static int check_ring(tnccl_comm_t *c, size_t bytes) {
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c);
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  unsigned char *in = pattern_buf(me, next, bytes), *out = malloc(bytes + 1);
  tnccl_p2p_t ops[2] = {{next, 1, in, bytes}, {prev, 0, out, bytes}};
  int bad = report(me, "ring", tnccl_p2p_batch(c, ops, 2));
  bad = bad || pattern_bad(out, prev, me, bytes);
  free(in);
  free(out);
  return bad;
}

/* Pairs (0, 1), (2, 3) exchange different sizes in one batch, recv first; a
 * rank without a partner goes straight on. */
static int check_pair_exchange(tnccl_comm_t *c) {
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c), peer = me ^ 1;
  if (peer >= n) return 0;
  size_t mine = 700001 + (size_t)me * 1000, theirs = 700001 + (size_t)peer * 1000;
  unsigned char *in = pattern_buf(me, peer, mine), *out = malloc(theirs);
  tnccl_p2p_t ops[2] = {{peer, 0, out, theirs}, {peer, 1, in, mine}};
  int bad = report(me, "pair exchange", tnccl_p2p_batch(c, ops, 2));
  bad = bad || pattern_bad(out, peer, me, theirs);
  free(in);
  free(out);
  return bad;
}

/* Rank 0 sends the last rank messages of several sizes (zero, above an
 * outbox), one call each and then in one batch; they arrive in order. */
static int check_fifo(tnccl_comm_t *c) {
  static const size_t sizes[] = {0, 1, 100000, 300000, 7, 65536, 65537};
  enum { K = sizeof sizes / sizeof *sizes };
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c), last = n - 1, bad = 0;
  if (me != 0 && me != last) return 0;
  unsigned char *buf[K];
  tnccl_p2p_t ops[K];
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < K; k++) {
      /* message k's bytes: pattern(k, round, i) */
      buf[k] = me == 0 ? pattern_buf(k, round, sizes[k]) : calloc(1, sizes[k] + 1);
      ops[k] = (tnccl_p2p_t){me == 0 ? last : 0, me == 0, buf[k], sizes[k]};
      if (round == 0)
        bad += report(
            me, "fifo",
            me == 0 ? tnccl_send(c, buf[k], sizes[k], last) : tnccl_recv(c, buf[k], sizes[k], 0));
    }
    if (round == 1) bad += report(me, "fifo batch", tnccl_p2p_batch(c, ops, K));
    for (int k = 0; k < K; k++) {
      if (me == last && pattern_bad(buf[k], k, round, sizes[k])) {
        fprintf(stderr, "rank %d: fifo message %d of round %d wrong\n", me, k, round);
        bad++;
      }
      free(buf[k]);
    }
  }
  return bad != 0;
}

/* A send to self pairs with the recv from self of the same batch (here
 * along with a ring exchange); alone, or with another size, it is an
 * error that runs nothing. */
static int check_self(tnccl_comm_t *c) {
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c), fails = 0;
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  size_t bytes = 100003;
  unsigned char *a = pattern_buf(me, me, bytes), *b = malloc(bytes), *x = pattern_buf(me, next, 5),
                *y = malloc(5), *z = malloc(bytes);
  tnccl_p2p_t ops[4] = {{prev, 0, y, 5}, {me, 0, b, bytes}, {next, 1, x, 5}, {me, 1, a, bytes}};
  fails += report(me, "self", tnccl_p2p_batch(c, ops, 4));
  fails += pattern_bad(b, me, me, bytes) || pattern_bad(y, prev, me, 5);
  fails += tnccl_send(c, a, bytes, me) != TNRT_ERR_INVALID_ARGUMENT ||
           !strstr(tnrt_last_error(), "no recv from itself");
  fails += tnccl_recv(c, b, bytes, me) != TNRT_ERR_INVALID_ARGUMENT;
  tnccl_p2p_t sizes[2] = {{me, 1, a, bytes}, {me, 0, z, bytes - 1}};
  fails += tnccl_p2p_batch(c, sizes, 2) != TNRT_ERR_INVALID_ARGUMENT;
  fails += tnccl_send(c, a, 1, n) != TNRT_ERR_INVALID_ARGUMENT;
  fails += tnccl_recv(c, NULL, 1, prev) != TNRT_ERR_INVALID_ARGUMENT;
  free(a);
  free(b);
  free(x);
  free(y);
  free(z);
  if (fails) fprintf(stderr, "rank %d: send to self: %d failed\n", me, fails);
  return fails != 0;
}

/* Rank 1 expects other sizes than rank 0 sends, once within an outbox and
 * once beyond: its recv fails naming both sizes, rank 0's sends complete,
 * and the next message between them arrives intact. */
static int check_p2p_mismatch(tnccl_comm_t *c) {
  int me = tnccl_comm_rank(c), fails = 0;
  if (me > 1) return 0;
  static const size_t sent[2] = {1000, 600000}, expected[2] = {999, 100};
  for (int k = 0; k < 2; k++) {
    unsigned char *b = me == 0 ? pattern_buf(0, k, sent[k]) : malloc(expected[k]);
    if (me == 0)
      fails += report(me, "mismatched send", tnccl_send(c, b, sent[k], 1));
    else {
      char want[96];
      snprintf(want, sizeof want, "recv of %zu bytes from rank 0 got a message of %zu bytes",
               expected[k], sent[k]);
      fails += tnccl_recv(c, b, expected[k], 0) != TNRT_ERR_INVALID_ARGUMENT;
      fails += !strstr(tnrt_last_error(), want);
    }
    free(b);
  }
  unsigned char *b = me == 0 ? pattern_buf(0, 1, 77777) : malloc(77777);
  fails += report(me, "after a mismatch",
                  me == 0 ? tnccl_send(c, b, 77777, 1) : tnccl_recv(c, b, 77777, 0));
  if (me == 1) fails += pattern_bad(b, 0, 1, 77777);
  free(b);
  if (fails) fprintf(stderr, "rank %d: p2p mismatch: %d failed\n", me, fails);
  return fails != 0;
}

/* Sends still in flight (in the outboxes) across all_reduces. */
static int check_p2p_with_collectives(tnccl_comm_t *c) {
  int me = tnccl_comm_rank(c), n = tnccl_comm_size(c), fails = 0;
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int k = 0; k < 3; k++) {
    size_t bytes = 1000 + (size_t)k * 60000;
    unsigned char *in = pattern_buf(me, k, bytes), *out = malloc(bytes);
    if (n > 1) fails += report(me, "send before all_reduce", tnccl_send(c, in, bytes, next));
    fails += check_all_reduce(c, 5000, TNK_F32, TNCCL_SUM);
    if (n > 1) {
      fails += report(me, "recv after all_reduce", tnccl_recv(c, out, bytes, prev));
      fails += pattern_bad(out, prev, k, bytes);
    }
    free(in);
    free(out);
  }
  return fails != 0;
}

/* ---- half types against an oracle: fp32 accumulation in rank order,
 * rounded once (dtype.h's scalar converters, not the library's block
 * ones) ---- */

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static float half_f32(uint16_t h, int dtype) {
  return dtype == TNK_BF16 ? tnk_bf16_to_f32(h) : tnk_f16_to_f32(h);
}
static uint16_t f32_half(float f, int dtype) {
  return dtype == TNK_BF16 ? tnk_f32_to_bf16(f) : tnk_f32_to_f16(f);
}

/* Rank r's element i. Elements 0 and 1 are made so that rounding after
 * every addition, or accumulating exactly, would give another result than
 * fp32 accumulation rounded once:
 * 0: 1 on rank 0, half an ulp of 1 on the others: each partial sum rounded
 *    to the half type would be a tie that goes back to 1;
 * 1: 1 + ulp, half an ulp, then tiny negatives (from 3 ranks on): fp32
 *    rounds the sum back to the tie 1 + 1.5 ulp, which goes to even
 *    (1 + 2 ulp), where the exact sum is below the tie (1 + ulp).
 * The others: random signs and mantissas, exponents over a range wider than
 * fp32's precision (bf16: 2^-30 to 2^9; fp16: every exponent, subnormals
 * and sums that overflow to inf included). */
static uint16_t half_input(int rank, int64_t i, int dtype) {
  int bf = dtype == TNK_BF16;
  uint16_t one = bf ? 0x3f80 : 0x3c00, half_ulp = bf ? 0x3b80 : 0x1000 /* 2^-8, 2^-11 */;
  uint16_t tiny_neg = bf ? 0xab80 : 0x8001; /* -2^-40; -2^-24, fp16's smallest */
  if (i == 0) return rank == 0 ? one : half_ulp;
  if (i == 1) return rank == 0 ? (uint16_t)(one + 1) : rank == 1 ? half_ulp : tiny_neg;
  uint32_t h = mix32((uint32_t)i * 2654435761u ^ (uint32_t)rank * 0x9e3779b9u ^ (uint32_t)dtype);
  uint32_t sign = (h >> 8) & 0x8000;
  if (bf) return (uint16_t)(sign | ((97 + h % 40) << 7) | ((h >> 12) & 0x7f));
  return (uint16_t)(sign | ((h % 31) << 10) | ((h >> 13) & 0x3ff));
}

/* The oracle, and two wrong models to show that the data tell them apart:
 * rounding to the half type after every step, and (AVG) rounding the sum
 * before dividing. */
static uint16_t half_expected(int nr, int64_t i, int dtype, tnccl_op_t op, uint16_t *per_step,
                              uint16_t *sum_first) {
  volatile float acc = half_f32(half_input(0, i, dtype), dtype); /* no excess precision */
  uint16_t step = half_input(0, i, dtype);
  for (int r = 1; r < nr; r++) {
    float x = half_f32(half_input(r, i, dtype), dtype), s = half_f32(step, dtype);
    switch (op) {
      case TNCCL_PRODUCT:
        acc = acc * x;
        step = f32_half(s * x, dtype);
        break;
      case TNCCL_MAX:
        acc = acc > x ? acc : x; /* the kernel's maximum, NaN aside */
        step = f32_half(s > x ? s : x, dtype);
        break;
      default:
        acc = acc + x;
        step = f32_half(s + x, dtype);
        break;
    }
  }
  *sum_first = f32_half(acc, dtype);
  if (op == TNCCL_AVG) {
    *sum_first = f32_half(half_f32(*sum_first, dtype) / (float)nr, dtype);
    step = f32_half(half_f32(step, dtype) / (float)nr, dtype);
    acc = acc / (float)nr;
  }
  *per_step = step;
  return f32_half(acc, dtype);
}

/* all_reduce (or reduce_scatter: n elements per rank) of n half-type
 * elements: every bit as the oracle's. */
static int check_half(tnccl_comm_t *c, int64_t n, int dtype, tnccl_op_t op, int scatter) {
  int rank = tnccl_comm_rank(c), nr = tnccl_comm_size(c);
  int64_t total = scatter ? n * nr : n, first = scatter ? (int64_t)rank * n : 0;
  uint16_t *in = xalloc((size_t)total * 2 + 2), *out = scatter ? xalloc((size_t)n * 2 + 2) : in;
  for (int64_t i = 0; i < total; i++) in[i] = half_input(rank, i, dtype);
  uint64_t before = tnccl_comm_direct_calls(c);
  tnrt_status_t st = scatter ? tnccl_reduce_scatter(c, in, out, n, dtype, op)
                             : tnccl_all_reduce(c, in, n, dtype, op);
  int bad = report(rank, scatter ? "half reduce_scatter" : "half all_reduce", st);
  bad += !bad && direct_wrong(c, before, (size_t)total * 2, "half");
  int64_t wrong = 0, step_differs = 0, sum_first_differs = 0;
  for (int64_t i = 0; i < n && !bad; i++) {
    uint16_t per_step, sum_first,
        want = half_expected(nr, first + i, dtype, op, &per_step, &sum_first);
    step_differs += per_step != want;
    sum_first_differs += sum_first != want;
    if (out[i] != want && wrong++ < 3)
      fprintf(stderr, "rank %d: %s of %lld dtype %d op %d: element %lld is %04x, not %04x\n", rank,
              scatter ? "reduce_scatter" : "all_reduce", (long long)n, dtype, (int)op,
              (long long)(first + i), out[i], want);
  }
  bad += wrong != 0;
  /* the made-up elements against values worked out by hand */
  if (!bad && !scatter && op == TNCCL_SUM && n >= 2) {
    uint16_t one = dtype == TNK_BF16 ? 0x3f80 : 0x3c00;
    uint16_t want0 = (uint16_t)(one + (nr == 3 ? 1 : nr == 4 ? 2 : 0)); /* 1 + (nr-1)/2 ulp, even */
    uint16_t want1 = (uint16_t)(one + (nr == 1 ? 1 : 2));               /* 1 + 1.5 ulp, even */
    if (out[0] != want0 || out[1] != want1) {
      fprintf(stderr, "rank %d: dtype %d: made-up sums %04x %04x, not %04x %04x\n", rank, dtype,
              out[0], out[1], want0, want1);
      bad++;
    }
  }
  /* the data tell the wrong models apart where they can: rounding every
   * step differs from 3 ranks on, rounding before AVG's division by 3 */
  if (!bad && n > 1000 && nr >= 3 && (op == TNCCL_SUM || op == TNCCL_AVG) && !step_differs) {
    fprintf(stderr, "rank %d: no element where rounding each step differs\n", rank);
    bad++;
  }
  if (!bad && n > 1000 && nr == 3 && op == TNCCL_AVG && !sum_first_differs) {
    fprintf(stderr, "rank %d: no element where rounding the sum first differs\n", rank);
    bad++;
  }
  if (scatter) xfree(out);
  xfree(in);
  return bad != 0;
}

/* Every bf16 / fp16 bit pattern, the same on every rank: MAX gives it back
 * unchanged (a NaN as a NaN), and so does SUM where it is exact
 * (summed with zeros from the other ranks). */
static int check_half_roundtrip(tnccl_comm_t *c, int dtype) {
  int rank = tnccl_comm_rank(c), bad = 0;
  uint16_t *buf = malloc(65536 * 2);
  for (int pass = 0; pass < 2 && !bad; pass++) {
    for (uint32_t h = 0; h < 65536; h++) buf[h] = pass == 1 && rank ? 0 : (uint16_t)h;
    bad += report(rank, "half roundtrip",
                  tnccl_all_reduce(c, buf, 65536, dtype, pass ? TNCCL_SUM : TNCCL_MAX));
    for (uint32_t h = 0; h < 65536 && !bad; h++) {
      float want = half_f32((uint16_t)h, dtype), got = half_f32(buf[h], dtype);
      if (want != want ? got == got : buf[h] != h && !(pass == 1 && h == 0x8000 && buf[h] == 0)) {
        fprintf(stderr, "rank %d: dtype %d pass %d: %04x came back as %04x\n", rank, dtype, pass, h,
                buf[h]);
        bad++;
      }
    }
  }
  free(buf);
  return bad != 0;
}

/* ---- mismatched arguments: every rank fails with the error, no buffer is
 * touched, and the communicator keeps working ---- */

typedef struct call {
  int kind; /* 0 all_reduce, 1 reduce_scatter, 2 broadcast, 3 all_gather, 4 barrier, 5 a2a */
  int64_t count;
  int dtype;
  tnccl_op_t op;
  int root;
} call_t;

/* Runs one call over buffers filled with 0x5a; 1 if any buffer changed. */
static tnrt_status_t run_call(tnccl_comm_t *c, call_t k, int *touched) {
  int nr = tnccl_comm_size(c);
  size_t esz = k.kind <= 1 ? tnk_dtype_size(k.dtype) : 1;
  size_t bytes = (size_t)(k.count > 0 ? k.count : 0) * (esz ? esz : 1);
  size_t in_bytes = k.kind == 1 ? bytes * (size_t)nr : bytes, out_bytes = bytes * (size_t)nr + 64;
  unsigned char *in = malloc(in_bytes + 64), *out = malloc(out_bytes);
  memset(in, 0x5a, in_bytes + 64);
  memset(out, 0x5a, out_bytes);
  size_t zero[8] = {0}, eight[8] = {8, 8, 8, 8, 8, 8, 8, 8};
  tnrt_status_t st = TNRT_ERR_INTERNAL;
  switch (k.kind) {
    case 0: st = tnccl_all_reduce(c, in, k.count, k.dtype, k.op); break;
    case 1: st = tnccl_reduce_scatter(c, in, out, k.count, k.dtype, k.op); break;
    case 2: st = tnccl_broadcast(c, in, bytes, k.root); break;
    case 3: st = tnccl_all_gather(c, in, out, bytes); break;
    case 4: st = tnccl_barrier(c); break;
    case 5: st = tnccl_all_to_all_v(c, in, zero, eight, out, zero, eight); break;
  }
  *touched = 0;
  for (size_t i = 0; i < in_bytes + 64; i++) *touched |= in[i] != 0x5a;
  for (size_t i = 0; i < out_bytes; i++) *touched |= out[i] != 0x5a;
  free(in);
  free(out);
  return st;
}

/* The ranks in `odd` (a bit mask) make call b, the others call a: every
 * rank gets TNRT_ERR_INVALID_ARGUMENT, its message containing want_odd or
 * want_even (NULL: anything) and "no data was moved", and its buffers are
 * untouched; then a correct all_reduce runs. */
static int check_mismatch(tnccl_comm_t *c, const char *what, unsigned odd, call_t a, call_t b,
                          const char *want_even, const char *want_odd) {
  int me = tnccl_comm_rank(c), touched, fails = 0;
  int is_odd = (odd >> me) & 1;
  tnrt_status_t st = run_call(c, is_odd ? b : a, &touched);
  const char *e = tnrt_last_error(), *want = is_odd ? want_odd : want_even;
  fails += st != TNRT_ERR_INVALID_ARGUMENT;
  fails += touched;
  fails += want && !strstr(e, want);
  fails += !strstr(e, "no data was moved");
  if (fails)
    fprintf(stderr, "rank %d: mismatch %s: status %d, touched %d: %s (wanted \"%s\")\n", me, what,
            st, touched, e, want ? want : "");
  fails += check_all_reduce(c, 1000, TNK_F32, TNCCL_SUM);
  return fails != 0;
}

static int check_mismatches(tnccl_comm_t *c) {
  int me = tnccl_comm_rank(c), nr = tnccl_comm_size(c), fails = 0, last = nr - 1;
  unsigned odd = 1u << last; /* the last rank differs */
  char w0[400], w1[400];
  call_t ar = {0, 10, TNK_F32, TNCCL_SUM, 0};
  call_t ar20 = ar, ar_i32 = ar, ar_max = ar, ar0 = ar, ar_big = ar, ar_bxor = ar;
  ar20.count = 20;
  ar_i32.dtype = TNK_I32;
  ar_max.op = TNCCL_MAX;
  ar0.count = 0;
  ar_big.count = 1 << 20; /* 4 MiB of f32: two rounds */
  ar_bxor.op = TNCCL_BXOR;
  call_t rs = {1, 10, TNK_F32, TNCCL_SUM, 0}, rs7 = rs;
  rs7.count = 7;
  call_t bc = {2, 100, 0, 0, 0}, bc_root = bc, bc101 = bc, bc0 = bc, bc_bad_root = bc;
  bc_root.root = last;
  bc101.count = 101;
  bc0.count = 0;
  bc_bad_root.root = nr;
  call_t ag = {3, 13, 0, 0, 0}, ag14 = ag, ag0 = ag, barrier = {4, 0, 0, 0, 0},
         a2a = {5, 0, 0, 0, 0};
  ag14.count = 14;
  ag0.count = 0;

  /* the count, both sides' messages in full */
  snprintf(w0, sizeof w0,
           "all_reduce: rank %d passed 20 elements of float32 with op SUM, rank %d (this rank) "
           "passed 10 elements of float32 with op SUM; every rank must call all_reduce with the "
           "same count, dtype and op; no data was moved",
           last, me);
  snprintf(w1, sizeof w1,
           "all_reduce: rank 0 passed 10 elements of float32 with op SUM, rank %d (this rank) "
           "passed 20 elements of float32 with op SUM; every rank must call all_reduce with the "
           "same count, dtype and op; no data was moved",
           me);
  fails += check_mismatch(c, "count", odd, ar, ar20, w0, w1);
  fails += check_mismatch(c, "dtype", odd, ar, ar_i32, "elements of int32 with op SUM",
                          "elements of float32 with op SUM");
  /* rank 0 the odd one, with the op */
  fails +=
      check_mismatch(c, "op", 1, ar, ar_max, "rank 0 passed 10 elements of float32 with op MAX",
                     "with op SUM, rank 0 (this rank) passed 10 elements of float32 with op MAX");
  fails += check_mismatch(c, "zero count", odd, ar, ar0, "passed 0 elements", "passed 10 elements");
  fails += check_mismatch(c, "count over two rounds", odd, ar_big, ar, "passed 10 elements",
                          "passed 1048576 elements");
  fails +=
      check_mismatch(c, "reduce_scatter count", odd, rs, rs7, "every rank must call reduce_scatter",
                     "every rank must call reduce_scatter");
  fails += check_mismatch(c, "root", odd, bc, bc_root, "100 bytes from root",
                          "same byte count and root");
  fails += check_mismatch(c, "broadcast bytes", odd, bc, bc101, "passed 101 bytes from root 0",
                          "passed 100 bytes from root 0");
  fails +=
      check_mismatch(c, "all_gather bytes", odd, ag, ag14, "passed 14 bytes", "passed 13 bytes");
  fails +=
      check_mismatch(c, "all_gather zero bytes", odd, ag, ag0, "passed 0 bytes", "passed 13 bytes");
  /* different collectives */
  snprintf(w0, sizeof w0,
           "collective mismatch: rank %d called all_gather (13 bytes), rank %d (this rank) called "
           "all_reduce (10 elements of float32 with op SUM); every rank must call the same "
           "collectives in the same order; no data was moved",
           last, me);
  snprintf(w1, sizeof w1,
           "collective mismatch: rank 0 called all_reduce (10 elements of float32 with op SUM), "
           "rank %d (this rank) called all_gather (13 bytes); every rank must call the same "
           "collectives in the same order; no data was moved",
           me);
  fails += check_mismatch(c, "all_reduce / all_gather", odd, ar, ag, w0, w1);
  fails += check_mismatch(c, "broadcast / barrier", odd, bc0, barrier, "called barrier, rank",
                          "(this rank) called barrier;");
  fails += check_mismatch(c, "all_reduce / reduce_scatter", odd, ar, rs,
                          "called reduce_scatter (10 elements of float32 with op SUM)",
                          "called all_reduce (10 elements of float32 with op SUM), rank");
  fails += check_mismatch(c, "all_to_all_v / all_reduce", odd, a2a, ar,
                          "called all_reduce (10 elements", "called all_to_all_v,");
  /* a rank whose own checks reject its arguments: the others fail with it */
  snprintf(w0, sizeof w0, "all_reduce: rank %d passed invalid arguments (its error says which)",
           last);
  fails += check_mismatch(c, "invalid op", odd, ar, ar_bxor, w0,
                          "all_reduce: op BXOR takes integer and bool dtypes, not float32");
  snprintf(w0, sizeof w0, "broadcast: rank %d passed invalid arguments (its error", last);
  fails += check_mismatch(c, "invalid root", odd, bc, bc_bad_root, w0,
                          "is not a rank of the communicator");
  snprintf(w0, sizeof w0, "barrier: rank %d passed invalid arguments to broadcast", last);
  fails += check_mismatch(c, "invalid root, other collective", odd, barrier, bc_bad_root, w0,
                          "is not a rank of the communicator");
  /* half the ranks against the other half (3, 4 ranks) */
  if (nr > 2) fails += check_mismatch(c, "halves", (1u << (nr / 2)) - 1, ar, ar20, NULL, NULL);
  return fails != 0;
}

/* Back-to-back calls, matched and mismatched, with ranks running ahead of
 * each other: a rank writing its next call's descriptor never confuses a
 * slower peer. */
static int check_mismatch_stress(tnccl_comm_t *c) {
  int me = tnccl_comm_rank(c), nr = tnccl_comm_size(c), fails = 0;
  for (int it = 0; it < 200; it++) {
    uint32_t h = mix32((uint32_t)it * 7919u + (uint32_t)me);
    if (h % 4 == 0) usleep(h % 300);
    int mismatch = it % 3 == 1;
    int64_t count = 1 + it % 5 + (mismatch && me == it % nr);
    int32_t x[8];
    for (int i = 0; i < 8; i++) x[i] = me + it + i;
    tnrt_status_t st = tnccl_all_reduce(c, x, count, TNK_I32, TNCCL_SUM);
    if (mismatch) {
      fails += st != TNRT_ERR_INVALID_ARGUMENT;
      for (int i = 0; i < 8; i++) fails += x[i] != me + it + i;
    } else {
      fails += st != TNRT_OK;
      for (int i = 0; i < count; i++) fails += x[i] != nr * (it + i) + nr * (nr - 1) / 2;
    }
    if (fails) {
      fprintf(stderr, "rank %d: stress iteration %d: status %d: %s\n", me, it, st,
              tnrt_last_error());
      return 1;
    }
  }
  return 0;
}

/* ---- the direct path: the checks above over buffers from the runtime's
 * allocator, at sizes above the threshold with remainders (no multiple of
 * the rank count, a cache line or a vector) ---- */

static int check_broadcast(tnccl_comm_t *c, size_t bytes, int root) {
  unsigned char *bc = xalloc(bytes);
  int fails = 0;
  for (size_t i = 0; i < bytes; i++) bc[i] = g_rank == root ? (unsigned char)(i * 31 + 7) : 0;
  uint64_t before = tnccl_comm_direct_calls(c);
  fails += report(g_rank, "broadcast", tnccl_broadcast(c, bc, bytes, root));
  fails += !fails && direct_wrong(c, before, bytes, "broadcast"); /* every rank writes peers' */
  for (size_t i = 0; i < bytes && !fails; i++) fails += bc[i] != (unsigned char)(i * 31 + 7);
  if (fails)
    fprintf(stderr, "rank %d: broadcast of %zu bytes from %d wrong\n", g_rank, bytes, root);
  xfree(bc);
  return fails != 0;
}

static int check_a2a_large(tnccl_comm_t *c); /* (below) */

static int check_large(tnccl_comm_t *c) {
  int fails = 0, nr = g_nranks;
  static const int64_t sizes[] = {65536 + 3, 100003,
                                  (1 << 20) + 7}; /* f32: 256 KiB + 12 B .. 4 MiB */
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    fails += check_all_reduce(c, sizes[s], TNK_F32, TNCCL_SUM);
    fails += check_all_reduce(c, sizes[s], TNK_I32, TNCCL_SUM);
  }
  fails += check_all_reduce(c, 100003, TNK_F32, TNCCL_MAX) +
           check_all_reduce(c, 100003, TNK_F32, TNCCL_MIN) +
           check_all_reduce(c, 100003, TNK_F32, TNCCL_AVG) +
           check_all_reduce(c, 100003, TNK_I32, TNCCL_AVG) +
           check_all_reduce(c, 100003, TNK_I64, TNCCL_PRODUCT) +
           check_all_reduce(c, 100003, TNK_F64, TNCCL_MAX) +
           check_all_reduce(c, 100003, TNK_BOOL, TNCCL_MAX) +
           check_all_reduce(c, 65535, TNK_F32, TNCCL_SUM); /* just under: staged */
  for (int h = 0; h < 2; h++) {
    int dtype = h ? TNK_F16 : TNK_BF16;
    fails +=
        check_half(c, 140001, dtype, TNCCL_SUM, 0) + check_half(c, 140001, dtype, TNCCL_AVG, 0) +
        check_half(c, 140001, dtype, TNCCL_MAX, 0) + check_half(c, 140003, dtype, TNCCL_SUM, 1) +
        check_half(c, 140003, dtype, TNCCL_AVG, 1);
  }
  fails += check_half(c, (1 << 20) + 5, TNK_BF16, TNCCL_SUM, 0); /* several pieces */
  fails += check_all_gather(c, 300007, 0) + check_all_gather(c, 300007, 1) +
           check_all_gather(c, 262144 / (size_t)nr + 1, 1) +
           check_all_gather(c, (size_t)3 << 20, 0);
  fails += check_reduce_scatter(c, 70001, TNK_F32, TNCCL_SUM) +
           check_reduce_scatter(c, 70001, TNK_I32, TNCCL_SUM) +
           check_reduce_scatter(c, 70001, TNK_F32, TNCCL_AVG) +
           check_reduce_scatter(c, 70001, TNK_F64, TNCCL_MAX) +
           check_reduce_scatter(c, 70001, TNK_BF16, TNCCL_SUM) +
           check_reduce_scatter(c, 700001, TNK_F32, TNCCL_SUM);
  fails += check_broadcast(c, ((size_t)5 << 20) + 7, nr - 1) + check_broadcast(c, 262145, 0);
  fails += check_a2a_large(c);
  return fails;
}

/* all_to_all_v over the runtime's buffers: the bytes rank s sends rank d in
 * variant v (above the threshold with remainders, zeros, uneven). */
static size_t a2a_big_bytes(int s, int d, int v) {
  int n = g_nranks;
  switch (v) {
    case 0: /* uneven, about a third zero */
      return (s + 2 * d) % 3 == 0 ? 0 : (size_t)300000 + (size_t)(s * 1001 + d * 7);
    case 1: /* one large pair per rank (to the next), the rest small or zero */
      return d == (s + 1) % n ? DIRECT_MIN_BYTES + 13 + (size_t)s
             : (s + d) % 2    ? 0
                              : 1000 + (size_t)d;
    case 2: /* every pair below the threshold: direct only when a column sums above it */
      return (size_t)140000 + (size_t)(s * 3 + d);
    case 3: /* only rank 0 receives much: every rank must still decide alike */
      return d == 0 ? (size_t)300001 + (size_t)s : s == d ? 77 : (size_t)(s + d) % 2 * 999;
    case 4: /* the last rank sends its peers nothing: its in is never read */
      return s == n - 1 && d != s ? 0 : (size_t)270000 + (size_t)(s * 5 + d * 3);
  }
  return 0;
}

/* Whether rank r's buffers are shared (xalloc's rule on rank r). */
static int shared_rank(int r) {
  return g_mem == MEM_SHARED || (g_mem == MEM_MIXED && r != g_nranks - 1);
}

/* Variant v with send blocks in reverse rank order and gaps (left
 * untouched); out private (malloc) when private_out; mismatch: the last
 * rank sends rank 0 one byte more than rank 0 expects, so every rank must
 * fail with no data moved and without taking the direct path. */
static int check_a2a_direct(tnccl_comm_t *c, int v, int private_out, int mismatch) {
  int me = g_rank, n = g_nranks, bump = mismatch && me == n - 1;
  size_t so[8], sb[8], ro[8], rb[8], in_bytes = 3, out_bytes = 5;
  for (int p = n - 1; p >= 0; p--) {
    so[p] = in_bytes;
    sb[p] = a2a_big_bytes(me, p, v);
    in_bytes += sb[p] + 3;
  }
  for (int p = 0; p < n; p++) {
    ro[p] = out_bytes;
    rb[p] = a2a_big_bytes(p, me, v);
    out_bytes += rb[p] + 5;
  }
  if (bump) sb[(me + 1) % n]++, in_bytes++;
  unsigned char *in = xalloc(in_bytes), *out = private_out ? malloc(out_bytes) : xalloc(out_bytes);
  memset(in, 0x5a, in_bytes);
  memset(out, 0xee, out_bytes);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < sb[p]; i++) in[so[p] + i] = pattern(me, p, i);
  /* the path every rank must take: some rank receives the threshold from
   * its peers and every rank sending to a peer has shared memory */
  size_t busiest = 0;
  int senders_shared = 1;
  for (int d = 0; d < n; d++) {
    size_t into = 0;
    for (int s = 0; s < n; s++)
      if (s != d) {
        into += a2a_big_bytes(s, d, v);
        if (a2a_big_bytes(s, d, v) && !shared_rank(s)) senders_shared = 0;
      }
    if (into > busiest) busiest = into;
  }
  int want = !mismatch && n > 1 && senders_shared && busiest >= DIRECT_MIN_BYTES;
  uint64_t before = tnccl_comm_direct_calls(c);
  tnrt_status_t st = tnccl_all_to_all_v(c, in, so, sb, out, ro, rb);
  int bad = 0;
  /* once the call has returned the caller may overwrite in (its stream
   * does): no peer may still be reading it */
  if (!mismatch) memset(in, 0xa5, in_bytes);
  if (mismatch) {
    int touched = 0;
    for (size_t i = 0; i < out_bytes; i++) touched |= out[i] != 0xee;
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < sb[p]; i++) touched |= in[so[p] + i] != pattern(me, p, i);
    if (st != TNRT_ERR_INVALID_ARGUMENT || touched ||
        !strstr(tnrt_last_error(), "no data was moved")) {
      fprintf(stderr, "rank %d: all_to_all_v direct mismatch: status %d touched %d: %s\n", me, st,
              touched, tnrt_last_error());
      bad = 1;
    }
  } else if (st != TNRT_OK) {
    fprintf(stderr, "rank %d: all_to_all_v direct %d: %s\n", me, v, tnrt_last_error());
    bad = 1;
  }
  uint64_t got = tnccl_comm_direct_calls(c) - before;
  if (got != (uint64_t)want) {
    fprintf(stderr,
            "rank %d: all_to_all_v variant %d (memory %d, busiest %zu) took the direct "
            "path %llu times, not %d\n",
            me, v, g_mem, busiest, (unsigned long long)got, want);
    bad = 1;
  }
  size_t pos = 0;
  for (int p = 0; p < n && !bad && !mismatch; p++) {
    for (; pos < ro[p]; pos++) bad += out[pos] != 0xee;
    for (size_t i = 0; i < rb[p]; i++, pos++) bad += out[pos] != pattern(p, me, i);
  }
  for (; pos < out_bytes && !bad && !mismatch; pos++) bad += out[pos] != 0xee;
  xfree(in);
  if (private_out)
    free(out);
  else
    xfree(out);
  if (bad) fprintf(stderr, "rank %d: all_to_all_v direct variant %d: %d wrong\n", me, v, bad);
  return bad != 0;
}

static int check_a2a_large(tnccl_comm_t *c) {
  int fails = 0;
  for (int v = 0; v < 5; v++) fails += check_a2a_direct(c, v, 0, 0);
  fails += check_a2a_direct(c, 0, 1, 0) + check_a2a_direct(c, 3, 1, 0); /* out private */
  return fails;
}

/* A mismatch on the direct path: every rank fails, no buffer is touched,
 * and the next (direct) call works. */
static int check_direct_mismatch(tnccl_comm_t *c) {
  int fails = 0, last = g_nranks - 1;
  size_t n = 100000, bytes = (n + 1) * 4;
  for (int variant = 0; variant < 2; variant++) {
    unsigned char *in = xalloc(bytes * (size_t)g_nranks), *out = xalloc(bytes * (size_t)g_nranks);
    memset(in, 0x5a, bytes * (size_t)g_nranks);
    memset(out, 0x5a, bytes * (size_t)g_nranks);
    tnrt_status_t st;
    if (g_rank != last)
      st = tnccl_all_reduce(c, in, (int64_t)n, TNK_F32, TNCCL_SUM);
    else if (variant == 0) /* the count */
      st = tnccl_all_reduce(c, in, (int64_t)n + 1, TNK_F32, TNCCL_SUM);
    else /* another collective, small (staged) */
      st = tnccl_all_gather(c, in, out, 100);
    int touched = 0;
    for (size_t i = 0; i < bytes * (size_t)g_nranks; i++)
      touched |= in[i] != 0x5a || out[i] != 0x5a;
    if (st != TNRT_ERR_INVALID_ARGUMENT || touched ||
        !strstr(tnrt_last_error(), "no data was moved")) {
      fprintf(stderr, "rank %d: direct mismatch %d: status %d touched %d: %s\n", g_rank, variant,
              st, touched, tnrt_last_error());
      fails++;
    }
    xfree(in);
    xfree(out);
    fails += check_all_reduce(c, 100003, TNK_F32, TNCCL_SUM);
  }
  /* all_to_all_v: one rank's send count differs from its receiver's */
  fails += check_a2a_direct(c, 0, 0, 1);
  fails += check_a2a_direct(c, 0, 0, 0);
  return fails;
}

/* More peer segments than the map cache holds (64 per peer: the oldest
 * are unmapped and mapped again), and segments released and allocated
 * again (the peers' generations change: stale mappings are dropped). */
static int check_direct_maps(tnccl_comm_t *c) {
  enum { SEGS = 70 };
  int fails = 0;
  float *bufs[SEGS];
  tnrt_block_t *blocks[SEGS];
  int64_t n = 65536 + 5;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < SEGS; i++) {
      if (pass == 0) { /* each in its own segment: its own memory pool */
        tnrt_mempool_begin(0, (uint64_t)i + 1);
        if (tnrt_malloc(0, (size_t)n * 4, NULL, (void **)&bufs[i], &blocks[i]) != TNRT_OK) abort();
        tnrt_mempool_end(0);
      }
      for (int64_t j = 0; j < n; j++) bufs[i][j] = (float)(g_rank + i + j % 7);
      uint64_t before = tnccl_comm_direct_calls(c);
      fails += report(g_rank, "all_reduce over many segments",
                      tnccl_all_reduce(c, bufs[i], n, TNK_F32, TNCCL_SUM));
      fails += direct_wrong(c, before, (size_t)n * 4, "all_reduce over many segments");
      for (int64_t j = 0; j < n && !fails; j++)
        fails += bufs[i][j] != (float)(g_nranks * (i + j % 7) + g_nranks * (g_nranks - 1) / 2);
      if (fails) return fails;
    }
  for (int i = 0; i < SEGS; i++) {
    tnrt_free(blocks[i]);
    tnrt_mempool_release(0, (uint64_t)i + 1);
  }
  for (int it = 0; it < 6 && !fails; it++) { /* new segments, maybe of the same names */
    tnrt_empty_cache(0);
    fails += check_all_reduce(c, 100003 + it, TNK_F32, TNCCL_SUM);
    fails += check_all_gather(c, 50001, 1);
  }
  return fails;
}

static int run_direct(tnccl_comm_t *c) {
  int fails = 0;
  tnrt_set_shared_segments(1);
  g_mem = MEM_SHARED;
  fails += check_large(c);
  /* every direct copy with streaming stores (by default only calls larger
     than the cache stream): unaligned offsets and odd tails */
  tnccl_comm_set_stream_min(c, 0);
  fails += check_large(c);
  if (g_nranks > 1) fails += check_direct_mismatch(c) + check_direct_maps(c);
  /* a rank without shared memory: every rank stays staged, right results */
  g_mem = MEM_MIXED;
  fails += check_large(c);
  /* a rank that turns the direct path off: the same */
  g_mem = MEM_SHARED;
  tnccl_comm_set_direct(c, g_rank != 0);
  int saved = g_mem;
  g_mem = MEM_MIXED; /* (what direct_wrong expects: staged) */
  fails += check_all_reduce(c, 100003, TNK_F32, TNCCL_SUM) + check_all_gather(c, 300007, 1);
  g_mem = saved;
  tnccl_comm_set_direct(c, 1);
  g_mem = MEM_HOST;
  tnrt_empty_cache(0);
  return fails != 0;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- test_ccl --bandwidth N [from to]: f32 all_reduce, all_gather,
 * reduce_scatter and all_to_all_v of `from` to `to` bytes (x4 steps;
 * default 1 MiB to 256 MiB; the size is the message: all_reduce's buffer,
 * all_gather's output, reduce_scatter's input, all_to_all_v's in and out,
 * size / N to every rank) and broadcast (from rank 0) over shared device buffers, staged (every rank
 * with the direct path off) and direct, and memcpy of the same size in the
 * same process; rank 0 prints time and bus bandwidth (all_reduce: size /
 * time * 2(n-1)/n, broadcast 1, the others (n-1)/n). TNCCL_BW_OPS=a,b,..:
 * only those (0 all_reduce .. 3 all_to_all_v, 4 broadcast). ---- */
static size_t g_bw_from = (size_t)1 << 20, g_bw_to = (size_t)256 << 20;

static void *bw_alloc(size_t bytes, tnrt_block_t **b) {
  void *p;
  if (tnrt_malloc(0, bytes, NULL, &p, b) != TNRT_OK) {
    fprintf(stderr, "rank %d: tnrt_malloc(%zu): %s\n", g_rank, bytes, tnrt_last_error());
    abort();
  }
  memset(p, 1, bytes); /* touched: no first-touch faults in the timing */
  return p;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double bw_time(tnccl_comm_t *c, int op, size_t size, int direct, int iters, void *a,
                      void *b) {
  int n = g_nranks;
  enum { BATCHES = 5 };
  int per = iters / BATCHES > 0 ? iters / BATCHES : 1;
  double t[BATCHES];
  size_t off[8], cnt[8];
  for (int p = 0; p < n && p < 8; p++) cnt[p] = size / (size_t)n, off[p] = (size_t)p * cnt[p];
  tnccl_comm_set_direct(c, direct);
  for (int it = -1; it < BATCHES; it++) { /* one warm-up batch */
    if (tnccl_barrier(c) != TNRT_OK) abort();
    double t0 = wall_seconds();
    for (int j = 0; j < per; j++) {
      tnrt_status_t st = op == 0   ? tnccl_all_reduce(c, a, (int64_t)(size / 4), TNK_F32, TNCCL_SUM)
                         : op == 1 ? tnccl_all_gather(c, a, b, size / (size_t)n)
                         : op == 2 ? tnccl_reduce_scatter(c, a, b, (int64_t)(size / 4 / (size_t)n),
                                                          TNK_F32, TNCCL_SUM)
                         : op == 3 ? tnccl_all_to_all_v(c, a, off, cnt, b, off, cnt)
                                   : tnccl_broadcast(c, a, size, 0);
      if (st != TNRT_OK) {
        fprintf(stderr, "rank %d: %s\n", g_rank, tnrt_last_error());
        abort();
      }
    }
    if (tnccl_barrier(c) != TNRT_OK) abort(); /* the batch ends when every rank's has */
    if (it >= 0) t[it] = (wall_seconds() - t0) / per;
  }
  tnccl_comm_set_direct(c, 1);
  qsort(t, BATCHES, sizeof *t, cmp_double);
  return t[BATCHES / 2]; /* the median batch: the machine is noisy (2 shared cores) */
}

static int run_bandwidth(tnccl_comm_t *c) {
  int n = g_nranks;
  static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all_v",
                                      "broadcast"};
  const char *ops = getenv("TNCCL_BW_OPS");
  tnrt_set_shared_segments(1);
  if (g_rank == 0)
    printf(
        "%d ranks, f32; busbw in GB/s (1e9 B/s); time in us per call (median of 5 batches of "
        "back-to-back calls, barrier-bounded)\n"
        "%-14s %10s | %10s %7s | %10s %7s | %10s %7s\n",
        n, "collective", "size", "staged", "busbw", "direct", "busbw", "memcpy", "GB/s");
  size_t step = getenv("TNCCL_BW_STEP") ? (size_t)atoi(getenv("TNCCL_BW_STEP")) : 4;
  for (size_t size = g_bw_from; size <= g_bw_to; size *= step) {
    int iters = (int)((size_t)(1024u << 20) / size);
    if (iters < 3) iters = 3;
    if (iters > 300) iters = 300;
    for (int op = 0; op < 5; op++) {
      if (ops && !strchr(ops, '0' + op)) continue;
      tnrt_block_t *ba, *bb = NULL;
      size_t in_bytes = op == 1 ? size / (size_t)n : size,
             out_bytes = op == 2 ? size / (size_t)n : size;
      void *a = bw_alloc(in_bytes, &ba), *b = op % 4 ? bw_alloc(out_bytes, &bb) : NULL;
      double staged = bw_time(c, op, size, 0, iters, a, b);
      double direct = bw_time(c, op, size, 1, iters, a, b);
      tnrt_free(ba);
      tnrt_free(bb);
      tnrt_empty_cache(0);
      double mc = 0;
      if (g_rank == 0) { /* the others wait in the barrier */
        char *x = malloc(size), *y = malloc(size);
        memset(x, 1, size);
        memset(y, 2, size);
        memcpy(y, x, size);
        double t0 = wall_seconds();
        for (int it = 0; it < iters; it++) {
          memcpy(it & 1 ? x : y, it & 1 ? y : x, size);
          __asm__ __volatile__("" ::: "memory");
        }
        mc = (wall_seconds() - t0) / iters;
        free(x);
        free(y);
      }
      if (tnccl_barrier(c) != TNRT_OK) abort();
      double f = op == 0 ? 2.0 * (n - 1) / n : op == 4 ? 1.0 : (double)(n - 1) / n;
      if (g_rank == 0) {
        char sz[32];
        if (size >= (1u << 20))
          snprintf(sz, sizeof sz, "%zu MiB", size >> 20);
        else
          snprintf(sz, sizeof sz, "%zu KiB", size >> 10);
        printf("%-14s %10s | %10.1f %7.2f | %10.1f %7.2f | %10.1f %7.2f\n", names[op], sz,
               staged * 1e6, size / staged * f / 1e9, direct * 1e6, size / direct * f / 1e9,
               mc * 1e6, size / mc / 1e9);
        fflush(stdout);
      }
    }
  }
  return 0;
}

static int run_rank(int rank, int nranks, const char *dir, const char *mode) {
  boot_t b = {dir, rank, nranks};
  tnccl_comm_t *c;
  g_rank = rank;
  g_nranks = nranks;
  if (getenv("TNCCL_BW_FROM")) g_bw_from = (size_t)strtoull(getenv("TNCCL_BW_FROM"), NULL, 0);
  if (getenv("TNCCL_BW_TO")) g_bw_to = (size_t)strtoull(getenv("TNCCL_BW_TO"), NULL, 0);
  int dies = !strcmp(mode, "dies");
  if (tnccl_comm_init(0, rank, nranks, dies ? 1000 : 5000, file_exchange, &b, &c) != TNRT_OK) {
    fprintf(stderr, "rank %d init: %s\n", rank, tnrt_last_error());
    return 2;
  }
  if (!strcmp(mode, "bandwidth")) {
    int r = run_bandwidth(c);
    tnccl_comm_destroy(c);
    return r;
  }
  int fails = 0;
  if (!strcmp(mode, "latency")) { /* a benchmark, not a test: prints, asserts nothing */
    float x[2] = {1, 2};
    for (int i = 0; i < 1000; i++) tnccl_all_reduce(c, x, 2, TNK_F32, TNCCL_SUM);
    int iters = 20000;
    double t0 = wall_seconds();
    for (int i = 0; i < iters; i++) tnccl_all_reduce(c, x, 2, TNK_F32, TNCCL_SUM);
    double t = (wall_seconds() - t0) / iters;
    t0 = wall_seconds();
    for (int i = 0; i < iters; i++) tnccl_barrier(c);
    double tb = (wall_seconds() - t0) / iters;
    if (rank == 0)
      printf("%d ranks: 8-byte all_reduce %.2f us, barrier %.2f us\n", nranks, t * 1e6, tb * 1e6);
    tnccl_comm_destroy(c);
    return 0;
  }
  if (dies) { /* rank 1 leaves; rank 0's collective and p2p must time out */
    if (tnccl_barrier(c) != TNRT_OK) return 3; /* both mapped each other */
    if (rank == 1) _exit(0);
    double t0 = wall_seconds(), cpu0 = cpu_seconds();
    float x = 1;
    tnrt_status_t st = tnccl_all_reduce(c, &x, 1, TNK_F32, TNCCL_SUM);
    fails += st != TNRT_ERR_NOT_READY || !strstr(tnrt_last_error(), "timed out");
    double wall = wall_seconds() - t0, cpu = cpu_seconds() - cpu0;
    fails += wall < 0.9 || wall > 30;
    if (cpu > 0.5 * wall) { /* the wait sleeps rather than spins */
      fprintf(stderr, "rank 0: waiting %.2f s for a dead peer took %.2f s of CPU\n", wall, cpu);
      fails++;
    }
    fails += tnccl_recv(c, &x, sizeof x, 1) != TNRT_ERR_NOT_READY ||
             !strstr(tnrt_last_error(), "recv of 4 bytes from rank 1 timed out");
    /* a send within an outbox completes without the peer; beyond, it times out */
    fails += tnccl_send(c, &x, sizeof x, 1) != TNRT_OK;
    size_t big = (size_t)1 << 20;
    char *buf = calloc(1, big);
    fails += tnccl_send(c, buf, big, 1) != TNRT_ERR_NOT_READY ||
             !strstr(tnrt_last_error(), "send of 1048576 bytes to rank 1 timed out");
    free(buf);
    tnccl_comm_destroy(c);
    return fails;
  }
  static const int64_t sizes[] = {0, 1, 7, 1000, 1 << 20}; /* 4 MiB of f32: several rounds */
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    fails += check_all_reduce(c, sizes[s], TNK_F32, TNCCL_SUM);
    fails += check_all_reduce(c, sizes[s], TNK_I32, TNCCL_SUM);
  }
  fails += check_all_reduce(c, 777, TNK_F64, TNCCL_MAX);
  fails += check_all_reduce(c, 777, TNK_F32, TNCCL_MIN);
  fails += check_all_reduce(c, 777, TNK_I64, TNCCL_PRODUCT);
  fails += check_all_reduce(c, 777, TNK_F32, TNCCL_AVG);
  fails += check_all_reduce(c, 777, TNK_I32, TNCCL_AVG);
  fails += check_all_reduce(c, 3000, TNK_BF16, TNCCL_SUM);
  fails += check_all_reduce(c, 3000, TNK_F16, TNCCL_SUM);
  fails += check_all_reduce(c, 100, TNK_BOOL, TNCCL_MAX);
  /* bf16 / fp16 bit for bit against the oracle: sizes that are no multiple
   * of a vector, of the library's blocks (1024) or of the rank count */
  static const int64_t half_sizes[] = {1, 3, 7, 17, 1023, 1025, 4099};
  for (int h = 0; h < 2; h++) {
    int dtype = h ? TNK_F16 : TNK_BF16;
    for (size_t s = 0; s < sizeof half_sizes / sizeof *half_sizes; s++)
      fails += check_half(c, half_sizes[s], dtype, TNCCL_SUM, 0) +
               check_half(c, half_sizes[s], dtype, TNCCL_AVG, 0);
    fails +=
        check_half(c, 1025, dtype, TNCCL_MAX, 0) + check_half(c, 1025, dtype, TNCCL_PRODUCT, 0);
    fails += check_half(c, 1, dtype, TNCCL_AVG, 1) + check_half(c, 2053, dtype, TNCCL_SUM, 1) +
             check_half(c, 2053, dtype, TNCCL_AVG, 1);
    fails += check_half_roundtrip(c, dtype);
  }
  fails += check_half(c, (1 << 20) + 5, TNK_BF16, TNCCL_AVG, 0); /* two rounds */
  /* invalid on every rank: bitwise ops on floats */
  float f = 1;
  fails += tnccl_all_reduce(c, &f, 1, TNK_F32, TNCCL_BXOR) != TNRT_ERR_INVALID_ARGUMENT ||
           !strstr(tnrt_last_error(), "op BXOR takes integer and bool dtypes, not float32") ||
           f != 1;
  /* broadcast from the last rank, larger than a slot */
  size_t bytes = (size_t)5 << 20;
  unsigned char *bc = malloc(bytes);
  for (size_t i = 0; i < bytes; i++) bc[i] = rank == nranks - 1 ? (unsigned char)(i * 31) : 0;
  fails += tnccl_broadcast(c, bc, bytes, nranks - 1) != TNRT_OK;
  for (size_t i = 0; i < bytes; i++) fails += bc[i] != (unsigned char)(i * 31) && !fails;
  free(bc);
  fails += check_all_gather(c, 0, 0) + check_all_gather(c, 13, 0) + check_all_gather(c, 13, 1);
  fails += check_all_gather(c, (size_t)3 << 20, 1); /* more than a slot */
  fails += check_reduce_scatter(c, 1, TNK_F32, TNCCL_SUM) +
           check_reduce_scatter(c, 1000, TNK_I32, TNCCL_SUM);
  fails += check_reduce_scatter(c, 700000, TNK_F32, TNCCL_SUM); /* several rounds */
  fails += check_reduce_scatter(c, 999, TNK_BF16, TNCCL_SUM) +
           check_reduce_scatter(c, 999, TNK_F64, TNCCL_MAX);
  fails += check_reduce_scatter(c, 999, TNK_F32, TNCCL_AVG);
  for (int v = 0; v < 3; v++) fails += check_all_to_all_v(c, v);
  if (nranks > 1) fails += check_all_to_all_v_error(c, 0) + check_all_to_all_v_error(c, 1);
  fails += check_ring(c, (size_t)3 << 20) + check_pair_exchange(c) + check_self(c);
  if (nranks > 1) fails += check_fifo(c) + check_p2p_mismatch(c);
  if (nranks > 1) fails += check_mismatches(c) + check_mismatch_stress(c);
  fails += check_p2p_with_collectives(c);
  fails += run_direct(c);
  fails += tnccl_barrier(c) != TNRT_OK;
  tnccl_comm_destroy(c);
  return fails != 0;
}

/* Launches nranks copies of this binary in `mode`; 1 when every rank exited 0. */
static int launch(int nranks, const char *mode) {
  char dir[] = "/tmp/tnccl-test-XXXXXX";
  if (!mkdtemp(dir)) return 0;
  pid_t pids[8];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      char rs[16], ns[16];
      snprintf(rs, sizeof rs, "%d", r);
      snprintf(ns, sizeof ns, "%d", nranks);
      execl("/proc/self/exe", "test_ccl", "--rank", rs, ns, dir, mode, (char *)NULL);
      _exit(127);
    }
  }
  int ok = 1;
  for (int r = 0; r < nranks; r++) {
    int status = -1;
    if (pids[r] <= 0 || waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      fprintf(stderr, "  rank %d of %d (%s) failed: status %d\n", r, nranks, mode, status);
      ok = 0;
    }
  }
  char path[600];
  for (int r = 0; r < nranks; r++) {
    snprintf(path, sizeof path, "%s/%d", dir, r);
    unlink(path);
  }
  rmdir(dir);
  return ok;
}

static void test_one_rank(void) { CHECK(launch(1, "all")); } /* self copies only */
static void test_two_ranks(void) { CHECK(launch(2, "all")); }
static void test_three_ranks(void) { CHECK(launch(3, "all")); }
static void test_four_ranks(void) { CHECK(launch(4, "all")); }
static void test_dead_peer_times_out(void) { CHECK(launch(2, "dies")); }

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--rank"))
    return run_rank(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5]);
  if (argc == 3 && !strcmp(argv[1], "--latency")) return !launch(atoi(argv[2]), "latency");
  if (argc >= 3 && !strcmp(argv[1], "--bandwidth")) {
    if (argc >= 5) {
      setenv("TNCCL_BW_FROM", argv[3], 1);
      setenv("TNCCL_BW_TO", argv[4], 1);
    }
    return launch(atoi(argv[2]), "bandwidth") ? 0 : 1;
  }
  RUN(test_one_rank);
  RUN(test_two_ranks);
  RUN(test_three_ranks);
  RUN(test_four_ranks);
  RUN(test_dead_peer_times_out);
  return REPORT("test_ccl");
}
