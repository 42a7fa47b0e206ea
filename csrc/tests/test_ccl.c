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

static int run_rank(int rank, int nranks, const char *dir, const char *mode) {
  boot_t b = {dir, rank, nranks};
  tnccl_comm_t *c;
  if (tnccl_comm_init(0, rank, nranks, 5000, file_exchange, &b, &c) != TNRT_OK) {
    fprintf(stderr, "rank %d init: %s\n", rank, tnrt_last_error());
    return 2;
  }
  int fails = 0;
  if (!strcmp(mode, "dies")) { /* rank 1 leaves; rank 0's collective must time out */
    if (tnccl_barrier(c) != TNRT_OK) return 3; /* both mapped each other */
    if (rank == 1) _exit(0);
    int64_t t0 = (int64_t)time(NULL);
    float x = 1;
    tnrt_status_t st = tnccl_all_reduce(c, &x, 1, TNK_F32, TNCCL_SUM);
    fails += st != TNRT_ERR_NOT_READY || !strstr(tnrt_last_error(), "timed out");
    fails += (int64_t)time(NULL) - t0 > 30;
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

static void test_two_ranks(void) { CHECK(launch(2, "all")); }
static void test_three_ranks(void) { CHECK(launch(3, "all")); }
static void test_four_ranks(void) { CHECK(launch(4, "all")); }
static void test_dead_peer_times_out(void) { CHECK(launch(2, "dies")); }

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--rank"))
    return run_rank(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5]);
  RUN(test_two_ranks);
  RUN(test_three_ranks);
  RUN(test_four_ranks);
  RUN(test_dead_peer_times_out);
  return REPORT("test_ccl");
}
