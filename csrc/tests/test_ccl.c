#define _GNU_SOURCE
/* Tests of the collective library (ccl/ccl.h): this binary launches N
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
  char *buf = malloc(n ? (size_t)n * esz : 1);
  for (int64_t i = 0; i < n; i++) put(buf, dtype, i, input_value(rank, i, dtype));
  if (tnccl_all_reduce(c, buf, n, dtype, op) != TNRT_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, tnrt_last_error());
    free(buf);
    return 1;
  }
  int bad = 0;
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
  free(buf);
  if (bad)
    fprintf(stderr, "rank %d: all_reduce of %lld dtype %d op %d: %d wrong\n", rank, (long long)n,
            dtype, (int)op, bad);
  return bad != 0;
}

static int check_all_gather(tnccl_comm_t *c, size_t bytes, int in_place) {
  int rank = tnccl_comm_rank(c), nr = tnccl_comm_size(c);
  unsigned char *out = malloc(bytes * (size_t)nr + 1),
                *in = in_place ? out + bytes * (size_t)rank : malloc(bytes + 1);
  for (size_t i = 0; i < bytes; i++) in[i] = (unsigned char)(i * 3 + (size_t)rank * 101);
  int bad = tnccl_all_gather(c, in, out, bytes) != TNRT_OK;
  for (int r = 0; r < nr && !bad; r++)
    for (size_t i = 0; i < bytes; i++)
      bad += out[(size_t)r * bytes + i] != (unsigned char)(i * 3 + (size_t)r * 101);
  if (!in_place) free(in);
  free(out);
  if (bad) fprintf(stderr, "rank %d: all_gather of %zu bytes: %d wrong\n", rank, bytes, bad);
  return bad != 0;
}

static int check_reduce_scatter(tnccl_comm_t *c, int64_t count, int dtype, tnccl_op_t op) {
  int rank = tnccl_comm_rank(c), nr = tnccl_comm_size(c);
  size_t esz = tnk_dtype_size(dtype);
  char *in = malloc((size_t)(count * nr) * esz + 1), *out = malloc((size_t)count * esz + 1);
  /* element i of block b on rank r: input_value(r, b * count + i) */
  for (int64_t i = 0; i < count * nr; i++) put(in, dtype, i, input_value(rank, i, dtype));
  int bad = tnccl_reduce_scatter(c, in, out, count, dtype, op) != TNRT_OK;
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
  free(in);
  free(out);
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
 * uneven with zeros, larger than a slot (ccl.c: 2 MiB) with zeros, or all
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

static int run_rank(int rank, int nranks, const char *dir, const char *mode) {
  boot_t b = {dir, rank, nranks};
  tnccl_comm_t *c;
  int dies = !strcmp(mode, "dies");
  if (tnccl_comm_init(0, rank, nranks, dies ? 1000 : 5000, file_exchange, &b, &c) != TNRT_OK) {
    fprintf(stderr, "rank %d init: %s\n", rank, tnrt_last_error());
    return 2;
  }
  int fails = 0;
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
  /* invalid: bitwise ops on floats */
  float f = 1;
  fails += tnccl_all_reduce(c, &f, 1, TNK_F32, TNCCL_BXOR) != TNRT_ERR_INVALID_ARGUMENT;
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
  fails += check_p2p_with_collectives(c);
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
  RUN(test_one_rank);
  RUN(test_two_ranks);
  RUN(test_three_ranks);
  RUN(test_four_ranks);
  RUN(test_dead_peer_times_out);
  return REPORT("test_ccl");
}
