/* C tests of kernel entry points the family tests (test_kernels.c) did not
 * reach: each against a direct loop written here, on strided or edge
 * inputs where the entry point takes them. */
#include "check.h"
#include "dtype.h"
#include "tnk.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* where: out = cond ? a : b, with a broadcast (stride 0) b and a
 * transposed a */
static void test_where(void) {
  enum { R = 5, C = 7 };
  float a[C][R], b[C], out[R][C];
  uint8_t cond[R][C];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      a[j][i] = (float)(i * 10 + j);
      cond[i][j] = (uint8_t)((i * 3 + j) % 4 == 0);
    }
  for (int j = 0; j < C; j++) b[j] = -(float)j;
  tnk_where_args_t w;
  memset(&w, 0, sizeof w);
  w.shape.ndim = 2;
  w.shape.sizes[0] = R;
  w.shape.sizes[1] = C;
  w.out = (tnk_view_t){out, TNK_F32, 0, {C, 1}};
  w.cond = (tnk_view_t){cond, TNK_BOOL, 0, {C, 1}};
  w.a = (tnk_view_t){a, TNK_F32, 0, {1, R}};
  w.b = (tnk_view_t){b, TNK_F32, 0, {0, 1}};
  tnk_where(&w);
  int ok = 1;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) ok &= out[i][j] == (cond[i][j] ? a[j][i] : b[j]);
  CHECK(ok);
}

/* tril / triu of a batch, every diagonal from below the matrix to above
 * it, int64 and in place */
static void test_tri(void) {
  enum { B = 2, R = 4, C = 5 };
  int64_t in[B * R * C], out[B * R * C];
  int ok = 1;
  for (int upper = 0; upper < 2; upper++)
    for (int64_t diag = -5; diag <= 6; diag++) {
      for (int i = 0; i < B * R * C; i++) in[i] = i + 1;
      tnk_tri_args_t t = {out, in, B, R, C, diag, TNK_I64, upper};
      tnk_tri(&t);
      for (int b = 0; b < B; b++)
        for (int i = 0; i < R; i++)
          for (int j = 0; j < C; j++) {
            int keep = upper ? j - i >= diag : j - i <= diag;
            int64_t v = in[(b * R + i) * C + j];
            ok &= out[(b * R + i) * C + j] == (keep ? v : 0);
          }
      t.out = in; /* in place */
      tnk_tri(&t);
      ok &= !memcmp(in, out, sizeof in);
    }
  CHECK(ok);
}

/* arange: integers exactly in int64 (a step that overflows int32), floats
 * as start + i * step in double, rounded once to the dtype */
static void test_arange(void) {
  int64_t iout[6];
  tnk_arange_args_t a = {iout, 6, -3000000000LL, 1500000000LL, 0, 0, TNK_I64, 1};
  tnk_arange(&a);
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= iout[i] == -3000000000LL + i * 1500000000LL;
  float f[7];
  tnk_arange_args_t b = {f, 7, 0, 0, 0.1, 0.3, TNK_F32, 0};
  tnk_arange(&b);
  for (int i = 0; i < 7; i++) ok &= f[i] == (float)(0.1 + i * 0.3);
  uint16_t h[5];
  tnk_arange_args_t c = {h, 5, 0, 0, -1.0, 0.7, TNK_BF16, 0};
  tnk_arange(&c);
  for (int i = 0; i < 5; i++) ok &= h[i] == tnk_f32_to_bf16((float)(-1.0 + i * 0.7));
  CHECK(ok);
}

static tnk_unary_args_t unary_1d(void *out, int odt, const void *in, int idt, int64_t n,
                                 int64_t in_stride) {
  tnk_unary_args_t u;
  memset(&u, 0, sizeof u);
  u.shape.ndim = 1;
  u.shape.sizes[0] = n;
  u.out = (tnk_view_t){out, odt, 0, {1}};
  u.in = (tnk_view_t){(void *)in, idt, 0, {in_stride}};
  u.dtype = idt;
  return u;
}

/* bitwise_not of every integer width (strided input) and of bool (logical) */
static void test_bitwise_not(void) {
  int64_t i64[8], o64[4];
  int8_t i8[4], o8[4];
  uint8_t bl[4] = {0, 1, 1, 0}, ob[4];
  for (int i = 0; i < 8; i++) i64[i] = (int64_t)i * 0x1234567890LL - 7;
  for (int i = 0; i < 4; i++) i8[i] = (int8_t)(i * 77 - 100);
  tnk_unary_args_t u = unary_1d(o64, TNK_I64, i64, TNK_I64, 4, 2);
  tnk_bitwise_not(&u);
  int ok = 1;
  for (int i = 0; i < 4; i++) ok &= o64[i] == ~i64[2 * i];
  u = unary_1d(o8, TNK_I8, i8, TNK_I8, 4, 1);
  tnk_bitwise_not(&u);
  for (int i = 0; i < 4; i++) ok &= o8[i] == (int8_t)~i8[i];
  u = unary_1d(ob, TNK_BOOL, bl, TNK_BOOL, 4, 1);
  tnk_bitwise_not(&u);
  for (int i = 0; i < 4; i++) ok &= ob[i] == !bl[i];
  CHECK(ok);
}

/* count_nonzero and nonzero: the count, then the row-major coordinates in
 * order, for a 3-D float tensor with -0.0 (zero) and NaN (nonzero) */
static void test_nonzero(void) {
  enum { A = 3, B = 4, C = 5, N = A * B * C };
  float x[N];
  int64_t want = 0;
  for (int i = 0; i < N; i++) {
    x[i] = i % 3 == 0 ? 0.0f : i % 7 == 0 ? -0.0f : i % 11 == 0 ? NAN : (float)i;
    want += x[i] != 0.0f || isnan(x[i]);
  }
  int64_t count = -1, coords[N * 3];
  tnk_nonzero_args_t a;
  memset(&a, 0, sizeof a);
  a.in = x;
  a.out = coords;
  a.count = &count;
  a.numel = N;
  a.ndim = 3;
  a.sizes[0] = A;
  a.sizes[1] = B;
  a.sizes[2] = C;
  a.dtype = TNK_F32;
  tnk_count_nonzero(&a);
  CHECK(count == want);
  tnk_nonzero(&a);
  int ok = 1;
  int64_t k = 0;
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int l = 0; l < C; l++) {
        float v = x[(i * B + j) * C + l];
        if (!(v != 0.0f || isnan(v))) continue;
        ok &= k < count && coords[3 * k] == i && coords[3 * k + 1] == j && coords[3 * k + 2] == l;
        k++;
      }
  CHECK(ok && k == count);
}

/* isin and its invert, int32 with repeats in the test set, and fp32 where
 * NaN is in no set and -0.0 equals 0.0 */
static void test_isin(void) {
  int32_t e[9] = {5, -1, 7, 7, 0, 3, 100, -1, 2}, t[6] = {7, 2, 2, -1, 42, 0};
  uint8_t out[9];
  int ok = 1;
  for (int inv = 0; inv < 2; inv++) {
    tnk_isin_args_t a = {e, t, out, 9, 6, TNK_I32, inv};
    tnk_isin(&a);
    for (int i = 0; i < 9; i++) {
      int in = 0;
      for (int j = 0; j < 6; j++) in |= e[i] == t[j];
      ok &= out[i] == (in != inv);
    }
  }
  float fe[4] = {NAN, -0.0f, 1.0f, 2.5f}, ft[3] = {NAN, 0.0f, 2.5f};
  tnk_isin_args_t f = {fe, ft, out, 4, 3, TNK_F32, 0};
  tnk_isin(&f);
  ok &= out[0] == 0 && out[1] == 1 && out[2] == 0 && out[3] == 1;
  CHECK(ok);
  CHECK(tnk_isin_supported(TNK_I32) && tnk_isin_supported(TNK_F32));
}

/* faults the kernels report, recorded */
static int g_faults, g_fault_kind;
static int64_t g_fault_value;
static void record_fault(void *ctx, int kind, const char *what, int64_t value, int64_t bound,
                         uint32_t origin) {
  (void)ctx, (void)what, (void)bound, (void)origin;
  g_faults++;
  g_fault_kind = kind;
  g_fault_value = value;
}

/* argmax / argmin along the middle dim of [2, 5, 3], with ties (the first
 * wins) and a NaN (it is the extreme, the first one) */
static void test_argreduce(void) {
  enum { O = 2, L = 5, I = 3 };
  float x[O][L][I];
  for (int o = 0; o < O; o++)
    for (int l = 0; l < L; l++)
      for (int i = 0; i < I; i++) x[o][l][i] = (float)((o * 7 + l * 3 + i * 5) % 4);
  x[1][3][2] = NAN;
  x[1][4][2] = NAN;
  int ok = 1;
  for (int is_max = 0; is_max < 2; is_max++) {
    float vals[O][I];
    int64_t idx[O][I];
    tnk_argreduce_args_t a = {x, vals, idx, O, L, I, TNK_F32, is_max};
    tnk_argreduce(&a);
    for (int o = 0; o < O; o++)
      for (int i = 0; i < I; i++) {
        int best = 0;
        for (int l = 1; l < L; l++) {
          float v = x[o][l][i], b = x[o][best][i];
          if (isnan(b)) break;
          if (isnan(v) || (is_max ? v > b : v < b)) best = l;
        }
        ok &= idx[o][i] == best;
        float bv = x[o][best][i];
        ok &= isnan(bv) ? isnan(vals[o][i]) : vals[o][i] == bv;
      }
  }
  CHECK(ok);
}

/* _assert_async: a true flag reports nothing, a false one one fault of the
 * given kind */
static void test_assert(void) {
  uint8_t yes = 1, no = 0;
  g_faults = 0;
  tnk_assert_args_t a = {&yes, {record_fault, NULL, "assert", 3 /* TNRT_FAULT_MESSAGE */, 0}};
  tnk_assert(&a);
  CHECK(g_faults == 0);
  a.flag = &no;
  tnk_assert(&a);
  CHECK(g_faults == 1 && g_fault_kind == 3);
}

/* histc: bins over [lo, hi], hi in the last bin, outside values and NaN
 * ignored, into float and int64 counts */
static void test_histc(void) {
  const float x[] = {0.0f, 0.5f, 0.99f, 1.0f, 2.5f, 4.0f, -0.1f, 4.01f, NAN, 3.999f, 2.0f};
  enum { N = sizeof x / sizeof *x, BINS = 4 };
  float out[BINS];
  int64_t iout[BINS];
  double want[BINS] = {0};
  for (int i = 0; i < N; i++) {
    if (!(x[i] >= 0.0f && x[i] <= 4.0f)) continue;
    int b = (int)((x[i] - 0.0f) * BINS / (4.0f - 0.0f));
    want[b == BINS ? BINS - 1 : b] += 1;
  }
  tnk_histc_args_t h = {x, out, N, BINS, 0.0, 4.0, TNK_F32, TNK_F32};
  tnk_histc(&h);
  h.out = iout;
  h.out_dtype = TNK_I64;
  tnk_histc(&h);
  int ok = 1;
  for (int b = 0; b < BINS; b++) ok &= out[b] == (float)want[b] && iout[b] == (int64_t)want[b];
  CHECK(ok);
}

/* nll: forward with weights and an ignored target, each reduction, and the
 * backward of mean; a target out of range is a fault */
static void test_nll(void) {
  enum { N = 4, C = 3 };
  double in[N][C] = {
      {-0.1, -2.0, -3.0}, {-1.5, -0.2, -4.0}, {-0.7, -0.8, -0.9}, {-2.2, -0.3, -1.1}};
  int64_t t[N] = {0, 2, -100, 1};
  double w[C] = {1.0, 2.0, 0.5}, out[N], tw = 0, grad[N][C], g = 1.0;
  int ok = 1;
  double sum = 0, wsum = 0;
  for (int i = 0; i < N; i++)
    if (t[i] != -100) {
      sum += -w[t[i]] * in[i][t[i]];
      wsum += w[t[i]];
    }
  for (int red = 0; red < 3; red++) {
    tnk_nll_args_t a;
    memset(&a, 0, sizeof a);
    a.input = in;
    a.target = t;
    a.weight = w;
    a.out = out;
    a.total_weight = &tw;
    a.n = N;
    a.c = C;
    a.ignore_index = -100;
    a.dtype = TNK_F64;
    a.reduction = red;
    a.fault = (tnk_fault_t){record_fault, NULL, "nll", 0, 0};
    tnk_nll(&a);
    if (red == 0)
      for (int i = 0; i < N; i++)
        ok &= fabs(out[i] - (t[i] == -100 ? 0.0 : -w[t[i]] * in[i][t[i]])) < 1e-12;
    else
      ok &= fabs(out[0] - (red == 1 ? sum / wsum : sum)) < 1e-12;
    ok &= fabs(tw - (red == 0 ? 0.0 : wsum)) < 1e-12; /* ATen: 0 for reduction none */
  }
  tnk_nll_args_t b;
  memset(&b, 0, sizeof b);
  b.input = in;
  b.target = t;
  b.weight = w;
  b.grad = &g;
  b.out = grad;
  b.total_weight = &tw;
  b.n = N;
  b.c = C;
  b.ignore_index = -100;
  b.dtype = TNK_F64;
  b.reduction = 1;
  b.backward = 1;
  b.fault = (tnk_fault_t){record_fault, NULL, "nll", 0, 0};
  tnk_nll(&b);
  for (int i = 0; i < N; i++)
    for (int c = 0; c < C; c++) {
      double want = (t[i] != -100 && c == t[i]) ? -w[c] * g / wsum : 0.0;
      ok &= fabs(grad[i][c] - want) < 1e-12;
    }
  CHECK(ok);
  g_faults = 0;
  int64_t bad[N] = {0, 3, 1, 1};
  b.target = bad;
  b.backward = 0;
  b.out = out;
  tnk_nll(&b);
  CHECK(g_faults >= 1 && g_fault_value == 3);
}

/* ctc: the likelihood against a brute-force sum over every path of
 * length T (collapse repeats, drop blanks, compare with the target), and
 * the gradient against central differences of that brute force; 1-D
 * (concatenated) targets with a repeated label, blank 2, an empty target,
 * a short input; a label outside [0, C) is a fault. */
static double ctc_brute(const double *lp, int T, int N, int C, int n, int len_in,
                        const int64_t *tgt, int len_tgt, int blank) {
  double total = 0;
  int path[8];
  long count = 1;
  for (int t = 0; t < len_in; t++) count *= C;
  for (long p = 0; p < count; p++) {
    long q = p;
    double lprob = 0;
    for (int t = 0; t < len_in; t++) {
      path[t] = (int)(q % C);
      q /= C;
      lprob += lp[(t * N + n) * C + path[t]];
    }
    int64_t out[8];
    int m = 0, prev = -1;
    for (int t = 0; t < len_in; t++) {
      if (path[t] != prev && path[t] != blank) out[m++] = path[t];
      prev = path[t];
    }
    int same = m == len_tgt;
    for (int i = 0; same && i < m; i++) same = out[i] == tgt[i];
    if (same) total += exp(lprob);
  }
  (void)T;
  return -log(total);
}

static void test_ctc(void) {
  enum { T = 5, N = 3, C = 3, L = 5 };
  static double lp[T * N * C], nll[N], alpha[N * T * L], beta[N * T * L], grad[T * N * C];
  uint64_t s = 11;
  for (int i = 0; i < T * N; i++) { /* log-softmax rows */
    double z = 0, v[C];
    for (int k = 0; k < C; k++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      v[k] = (double)(s >> 40) / (double)(1 << 24) * 3 - 1.5;
      z += exp(v[k]);
    }
    for (int k = 0; k < C; k++) lp[i * C + k] = v[k] - log(z);
  }
  /* targets: [1, 1] (repeat), [0], [] ; input lengths 5, 4, 2; blank 2 */
  int64_t targets[3] = {1, 1, 0};
  int64_t lengths[3 * N] = {5, 4, 2, 2, 1, 0, 0, 2, 3};
  double gout[N] = {1.0, -0.5, 2.0};
  tnk_ctc_args_t a;
  memset(&a, 0, sizeof a);
  a.log_probs = lp;
  a.targets = targets;
  a.lengths = lengths;
  a.log_alpha = alpha;
  a.log_beta = beta;
  a.out = nll;
  a.T = T;
  a.N = N;
  a.C = C;
  a.L = L;
  a.blank = 2;
  a.dtype = TNK_F64;
  a.fault = (tnk_fault_t){record_fault, NULL, "ctc", 0, 0};
  tnk_ctc(&a);
  int ok = 1;
  for (int n = 0; n < N; n++) {
    double want = ctc_brute(lp, T, N, C, n, (int)lengths[n], targets + lengths[2 * N + n],
                            (int)lengths[N + n], 2);
    ok &= fabs(nll[n] - want) < 1e-10;
  }
  CHECK(ok);
  a.backward = 1;
  a.grad = gout;
  a.nll = nll;
  a.out = grad;
  tnk_ctc(&a);
  ok = 1;
  const double h = 1e-6;
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++)
      for (int k = 0; k < C; k++) {
        /* the kernel's gradient is of the nll with respect to the
         * unnormalised log-probabilities (log_softmax's input): perturb
         * one logit and renormalise its row */
        double num = 0;
        for (int sgn = -1; sgn <= 1; sgn += 2) {
          static double q[T * N * C];
          memcpy(q, lp, sizeof q);
          double *row = q + (t * N + n) * C, z = 0;
          row[k] += sgn * h;
          for (int j = 0; j < C; j++) z += exp(row[j]);
          for (int j = 0; j < C; j++) row[j] -= log(z);
          double f = ctc_brute(q, T, N, C, n, (int)lengths[n], targets + lengths[2 * N + n],
                               (int)lengths[N + n], 2);
          num += sgn * f;
        }
        num = num / (2 * h) * gout[n];
        double got = t < lengths[n] ? grad[(t * N + n) * C + k] : 0;
        ok &= fabs(got - num) < 1e-6 && (t < lengths[n] || grad[(t * N + n) * C + k] == 0);
      }
  CHECK(ok);
  g_faults = 0;
  targets[0] = 3; /* outside [0, C) */
  a.backward = 0;
  a.out = nll;
  tnk_ctc(&a);
  CHECK(g_faults >= 1 && g_fault_value == 3);
}

/* randperm: a permutation of 0..n-1, the same for the same seed and
 * offset, another for another offset; int32 output */
static void test_randperm(void) {
  enum { N = 1000 };
  static int64_t s1[N], s2[N];
  static int32_t p1[N], p2[N];
  tnk_randperm_args_t a = {p1, s1, N, TNK_I32, 0, 1234, 0};
  tnk_randperm(&a);
  tnk_randperm_args_t b = {p2, s2, N, TNK_I32, 0, 1234, 0};
  tnk_randperm(&b);
  static uint8_t seen[N];
  memset(seen, 0, sizeof seen);
  int ok = 1, moved = 0;
  for (int i = 0; i < N; i++) {
    ok &= p1[i] >= 0 && p1[i] < N && !seen[p1[i]];
    if (p1[i] >= 0 && p1[i] < N) seen[p1[i]] = 1;
    moved += p1[i] != i;
  }
  CHECK(ok && moved > N / 2);
  CHECK(!memcmp(p1, p2, sizeof p1));
  b.offset = 4;
  tnk_randperm(&b);
  CHECK(memcmp(p1, p2, sizeof p1) != 0);
}

/* sort (stable, NaN above every number) and top-k, ascending and
 * descending, against an insertion sort of (value, index) pairs */
static int before(float a, int ia, float b, int ib, int desc) {
  /* strict order of the stable sort: NaN is the largest value */
  int an = isnan(a), bn = isnan(b);
  if (an || bn) {
    if (an && bn) return ia < ib;
    return desc ? an : bn;
  }
  if (a != b) return desc ? a > b : a < b;
  return ia < ib;
}

static void test_sort(void) {
  enum { R = 3, L = 9 };
  float x[R][L];
  for (int r = 0; r < R; r++)
    for (int l = 0; l < L; l++) x[r][l] = (float)((r * 5 + l * 7) % 5) - 2.0f;
  x[1][2] = NAN;
  x[2][0] = NAN;
  x[2][5] = -0.0f;
  int ok = 1;
  for (int desc = 0; desc < 2; desc++)
    for (int k = L; k >= 3; k -= 6) {
      float vals[R][L];
      int64_t idx[R][L];
      tnk_sort_args_t s = {x, vals, idx, R, L, k, TNK_F32, desc};
      tnk_sort(&s);
      for (int r = 0; r < R; r++) {
        int order[L];
        for (int i = 0; i < L; i++) order[i] = i;
        for (int i = 1; i < L; i++)
          for (int j = i;
               j > 0 && before(x[r][order[j]], order[j], x[r][order[j - 1]], order[j - 1], desc);
               j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
          }
        for (int i = 0; i < k; i++) {
          float *row = (float *)vals + r * k;
          int64_t *irow = (int64_t *)idx + r * k;
          ok &= irow[i] == order[i];
          float want = x[r][order[i]];
          ok &= isnan(want) ? isnan(row[i]) : row[i] == want;
        }
      }
    }
  CHECK(ok);
}

/* Adam and AdamW, with and without amsgrad, fp32, against the update
 * written out in double */
static void test_adam(void) {
  enum { N = 37 };
  int ok = 1;
  for (int variant = 0; variant < 4; variant++) {
    int adamw = variant & 1, ams = variant >> 1;
    float p[N], g[N], m[N], v[N], vmax[N];
    double pd[N], md[N], vd[N], vmd[N];
    for (int i = 0; i < N; i++) {
      p[i] = (float)(0.1 * (i - 18)), g[i] = (float)(0.05 * ((i * 7) % 11 - 5));
      m[i] = (float)(0.01 * (i % 3)), v[i] = (float)(0.001 * (i % 5)), vmax[i] = v[i] + 0.002f;
      pd[i] = p[i], md[i] = m[i], vd[i] = v[i], vmd[i] = vmax[i];
    }
    const float step = 3.0f;
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, wd = 0.1, eps = 1e-8;
    tnk_adam_args_t a = {p,  g,  m,  v,   ams ? vmax : NULL, &step, NULL, NULL, NULL, N, lr,
                         b1, b2, wd, eps, TNK_F32,           adamw, ams,  0};
    tnk_adam(&a);
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    for (int i = 0; i < N; i++) {
      double gr = g[i];
      if (adamw)
        pd[i] *= 1 - lr * wd;
      else
        gr += wd * pd[i];
      md[i] = b1 * md[i] + (1 - b1) * gr;
      vd[i] = b2 * vd[i] + (1 - b2) * gr * gr;
      double denom_v = vd[i];
      if (ams) {
        vmd[i] = vmd[i] > vd[i] ? vmd[i] : vd[i];
        denom_v = vmd[i];
      }
      pd[i] -= lr / bc1 * md[i] / (sqrt(denom_v) / sqrt(bc2) + eps);
      ok &= fabs(p[i] - pd[i]) <= 1e-5 * fabs(pd[i]) + 1e-6;
      ok &= fabs(m[i] - md[i]) <= 1e-6 && fabs(v[i] - vd[i]) <= 1e-7;
    }
  }
  CHECK(ok);
}

int main(void) {
  RUN(test_where);
  RUN(test_tri);
  RUN(test_arange);
  RUN(test_bitwise_not);
  RUN(test_nonzero);
  RUN(test_isin);
  RUN(test_argreduce);
  RUN(test_assert);
  RUN(test_histc);
  RUN(test_nll);
  RUN(test_ctc);
  RUN(test_randperm);
  RUN(test_sort);
  RUN(test_adam);
  return REPORT("test_entry_points");
}
