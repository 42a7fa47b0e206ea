/* GEMM, TRSM and im2col (gemm.c, trsm.c, conv.c, the x86 GEMM variants
 * and AMX) against direct loops in double. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 3-D im2col against a direct gather, and col2im as its adjoint:
 * <col2im(y), x> == <y, im2col(x)> for any x, y. */
static void test_im2col_3d(void) {
  tnk_im2col_args_t a = {.batch = 2,
                         .c = 3,
                         .d = 4,
                         .h = 5,
                         .w = 6,
                         .kd = 2,
                         .kh = 3,
                         .kw = 2,
                         .sd = 1,
                         .sh = 2,
                         .sw = 1,
                         .pd = 1,
                         .ph = 1,
                         .pw = 0,
                         .dd = 2,
                         .dh = 1,
                         .dw = 2,
                         .dtype = TNK_F32};
  a.od = (a.d + 2 * a.pd - a.dd * (a.kd - 1) - 1) / a.sd + 1;
  a.oh = (a.h + 2 * a.ph - a.dh * (a.kh - 1) - 1) / a.sh + 1;
  a.ow = (a.w + 2 * a.pw - a.dw * (a.kw - 1) - 1) / a.sw + 1;
  int64_t planes = a.batch * a.c, vol = a.d * a.h * a.w, kk = a.kd * a.kh * a.kw;
  int64_t L = a.od * a.oh * a.ow, ncol = planes * kk * L;
  float *x = malloc(sizeof(float) * planes * vol), *col = malloc(sizeof(float) * ncol);
  float *y = malloc(sizeof(float) * ncol), *back = calloc(planes * vol, sizeof(float));
  for (int64_t i = 0; i < planes * vol; i++) x[i] = (float)((i * 37 % 101) - 50) / 25.0f;
  for (int64_t i = 0; i < ncol; i++) y[i] = (float)((i * 13 % 29) - 14) / 7.0f;
  a.im = x;
  a.col = col;
  tnk_im2col(&a);
  int bad = 0;
  for (int64_t r = 0; r < planes * kk; r++) {
    int64_t pl = r / kk, kz = r % kk / (a.kh * a.kw), ky = r % (a.kh * a.kw) / a.kw, kx = r % a.kw;
    for (int64_t oz = 0; oz < a.od; oz++)
      for (int64_t oy = 0; oy < a.oh; oy++)
        for (int64_t ox = 0; ox < a.ow; ox++) {
          int64_t iz = oz * a.sd - a.pd + kz * a.dd, iy = oy * a.sh - a.ph + ky * a.dh,
                  ix = ox * a.sw - a.pw + kx * a.dw;
          int inside = iz >= 0 && iz < a.d && iy >= 0 && iy < a.h && ix >= 0 && ix < a.w;
          float want = inside ? x[pl * vol + (iz * a.h + iy) * a.w + ix] : 0.0f;
          if (col[r * L + (oz * a.oh + oy) * a.ow + ox] != want) bad++;
        }
  }
  CHECK(bad == 0);
  a.col2im = 1;
  a.im = back;
  a.col = y;
  tnk_im2col(&a);
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < planes * vol; i++) lhs += (double)back[i] * x[i];
  for (int64_t i = 0; i < ncol; i++) rhs += (double)y[i] * col[i];
  CHECK(fabs(lhs - rhs) < 1e-3 * (1 + fabs(rhs)));
  free(x);
  free(col);
  free(y);
  free(back);
}

/* Every GEMM variant the CPU has against the reference, over shapes that
 * hit the small path, the packed path, edges and transposed operands. */
static void test_gemm_variants(void) {
  static const int64_t shapes[][3] = {
      {1, 1, 1},      {5, 7, 3},      {6, 16, 8},      {13, 33, 17}, {64, 64, 64},
      {100, 70, 300}, {130, 257, 40}, {1, 300, 260},   {3, 50, 37},  {4, 600, 64},
      {37, 45, 531},  {300, 700, 37}, {260, 530, 600}, /* column split */
      {23, 40, 50},   {10, 32, 9},    {66, 64, 33}};   /* 4-row tiles past the full ones */
  tnk_config_t cfg[4];
  int have[4];
  for (int v = 0; v < 3; v++) have[v] = tnk_config_for_isa(v, &cfg[v]) == 0;
  /* the widest variant with its blocking fitted to small caches (256 KiB
   * L2, 2 MiB L3): several A blocks and B panels on the larger shapes */
  cfg[3] = cfg[have[2] ? 2 : 1];
  have[3] = have[2] || have[1];
  tnk_fit_gemm_to_caches(&cfg[3].gemm, 256 << 10, 2 << 20);
  if (have[3]) CHECK(cfg[3].gemm.mc < cfg[have[2] ? 2 : 1].gemm.mc && cfg[3].gemm.nc <= 512);
  int bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    for (int trans = 0; trans < 4; trans++) {
      float *A = malloc(sizeof(float) * m * k), *B = malloc(sizeof(float) * k * n);
      float *C0 = malloc(sizeof(float) * m * n), *C1 = malloc(sizeof(float) * m * n);
      for (int64_t i = 0; i < m * k; i++) A[i] = (float)((i * 7 % 13) - 6) / 7.0f;
      for (int64_t i = 0; i < k * n; i++) B[i] = (float)((i * 5 % 11) - 5) / 5.0f;
      tnk_gemm_args_t g = {.batch = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = A,
                           .b = B,
                           .dtype = TNK_F32,
                           .alpha = 1.5,
                           .beta = 0.5,
                           .sc_r = n,
                           .sc_c = 1};
      /* alpha and beta per layout: the full tiles' direct paths (alpha 1
       * with beta 0 or 1) and scaled epilogues with beta 0 and 1 */
      static const double ab[4][2] = {{1.5, 0.5}, {1.0, 1.0}, {0.5, 0.0}, {0.5, 1.0}};
      g.alpha = ab[trans][0];
      g.beta = ab[trans][1];
      /* trans bit 0: A stored column-major; bit 1: B stored column-major */
      g.sa_r = trans & 1 ? 1 : k;
      g.sa_c = trans & 1 ? m : 1;
      g.sb_r = trans & 2 ? 1 : n;
      g.sb_c = trans & 2 ? k : 1;
      for (int64_t i = 0; i < m * n; i++) C0[i] = (float)(i % 3);
      memcpy(C1, C0, sizeof(float) * m * n);
      g.c = C0;
      tnk_gemm_with(&cfg[0], &g);
      for (int v = 1; v < 4; v++) {
        if (!have[v]) continue;
        float *Cv = malloc(sizeof(float) * m * n);
        memcpy(Cv, C1, sizeof(float) * m * n);
        g.c = Cv;
        tnk_gemm_with(&cfg[v], &g);
        for (int64_t i = 0; i < m * n; i++)
          if (fabsf(Cv[i] - C0[i]) > 1e-4f * (1.0f + fabsf(C0[i]))) bad++;
        free(Cv);
      }
      /* independent check of one element against a plain sum */
      double want = g.beta * (double)((((m - 1) * n + (n - 1)) % 3));
      double dot = 0;
      for (int64_t kk = 0; kk < k; kk++)
        dot += (double)A[(m - 1) * g.sa_r + kk * g.sa_c] * B[kk * g.sb_r + (n - 1) * g.sb_c];
      want += g.alpha * dot;
      if (fabs(C0[m * n - 1] - want) > 1e-3 * (1 + fabs(want))) bad++;
      free(A);
      free(B);
      free(C0);
      free(C1);
    }
  }
  CHECK(bad == 0);
  /* bf16 inputs accumulate in fp32; beta = 0 ignores NaN in C */
  uint16_t a2[4], b2[4], c2[4];
  for (int i = 0; i < 4; i++) {
    a2[i] = tnk_f32_to_bf16((float)(i + 1));
    b2[i] = tnk_f32_to_bf16((float)(4 - i));
    c2[i] = tnk_f32_to_bf16(NAN);
  }
  tnk_gemm_args_t h = {.batch = 1,
                       .m = 2,
                       .n = 2,
                       .k = 2,
                       .a = a2,
                       .b = b2,
                       .c = c2,
                       .sa_r = 2,
                       .sa_c = 1,
                       .sb_r = 2,
                       .sb_c = 1,
                       .sc_r = 2,
                       .sc_c = 1,
                       .dtype = TNK_BF16,
                       .alpha = 1,
                       .beta = 0};
  tnk_gemm(&h);
  /* [[1,2],[3,4]] @ [[4,3],[2,1]] = [[8,5],[20,13]] */
  CHECK(tnk_bf16_to_f32(c2[0]) == 8 && tnk_bf16_to_f32(c2[1]) == 5 &&
        tnk_bf16_to_f32(c2[2]) == 20 && tnk_bf16_to_f32(c2[3]) == 13);
}

/* fp64 on each variant's micro-kernel against the portable reference:
 * every layout of A and B, alpha/beta (beta 0 ignores NaN in C), edge tiles,
 * several k blocks (k 600 > 256), batches, a strided C. */
static void test_gemm_f64_variants(void) {
  static const int64_t shapes[][3] = {{16, 16, 16}, {13, 33, 17},  {100, 70, 300}, {1, 300, 260},
                                      {4, 600, 64}, {97, 17, 600}, {200, 1600, 40}};
  tnk_config_t ref, cfg[2];
  CHECK(tnk_config_for_isa(0, &ref) == 0);
  int have[2] = {tnk_config_for_isa(1, &cfg[0]) == 0 && cfg[0].gemm.f64,
                 tnk_config_for_isa(2, &cfg[1]) == 0 && cfg[1].gemm.f64};
  int bad = 0, ran = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], batch = 2;
    double *A = malloc(sizeof(double) * batch * m * k), *B = malloc(sizeof(double) * batch * k * n);
    double *C0 = malloc(sizeof(double) * batch * m * n * 2),
           *C1 = malloc(sizeof(double) * batch * m * n * 2);
    for (int64_t i = 0; i < batch * m * k; i++) A[i] = sin((double)i * 0.37) + 0.1;
    for (int64_t i = 0; i < batch * k * n; i++) B[i] = cos((double)i * 0.61) - 0.2;
    for (int trans = 0; trans < 4; trans++) {
      static const double ab[4][2] = {{1.5, 0.5}, {1.0, 0.0}, {0.5, 1.0}, {-2.0, 0.0}};
      tnk_gemm_args_t g = {.batch = batch,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = A,
                           .b = B,
                           .dtype = TNK_F64,
                           .alpha = ab[trans][0],
                           .beta = ab[trans][1],
                           .sa_b = m * k,
                           .sb_b = k * n,
                           .sc_b = m * n * 2,
                           .sc_r = n * 2,
                           .sc_c = 2}; /* C: every other element */
      g.sa_r = trans & 1 ? 1 : k;
      g.sa_c = trans & 1 ? m : 1;
      g.sb_r = trans & 2 ? 1 : n;
      g.sb_c = trans & 2 ? k : 1;
      for (int64_t i = 0; i < batch * m * n * 2; i++) C0[i] = g.beta == 0 ? NAN : (double)(i % 5);
      memcpy(C1, C0, sizeof(double) * batch * m * n * 2);
      g.c = C0;
      CHECK(tnk_gemm_with(&ref, &g) == 0);
      for (int v = 0; v < 2; v++) {
        if (!have[v]) continue;
        ran++;
        double *Cv = malloc(sizeof(double) * batch * m * n * 2);
        memcpy(Cv, C1, sizeof(double) * batch * m * n * 2);
        g.c = Cv;
        CHECK(tnk_gemm_with(&cfg[v], &g) == 0);
        for (int64_t i = 0; i < batch * m * n * 2; i++) {
          int written = i % 2 == 0;
          if (written ? !(fabs(Cv[i] - C0[i]) <= 1e-12 * (1.0 + fabs(C0[i])) * (double)k)
                      : !(isnan(Cv[i]) ? isnan(C1[i]) : Cv[i] == C1[i]))
            bad++;
        }
        free(Cv);
      }
    }
    free(A);
    free(B);
    free(C0);
    free(C1);
  }
  CHECK(bad == 0);
  CHECK(ran > 0 || !(tnk_cpu_features() & TNK_ISA_AVX2));
}

/* The configurations the bf16 GEMM tests run against the reference: each
 * ISA's this CPU has, and the AVX-512 one again without AMX where AMX is
 * used, so that both bf16 kernels are checked there. */
static int bf16_gemm_variants(tnk_config_t out[3]) {
  int n = 0;
  for (int isa = TNK_ISA_AVX2; isa <= TNK_ISA_AVX512; isa++) {
    if (tnk_config_for_isa(isa, &out[n]) != 0) continue;
    if (out[n++].gemm.amx_bf16) {
      out[n] = out[n - 1];
      out[n].gemm.amx_bf16 = NULL;
      n++;
    }
  }
  return n;
}

/* The AVX-512 configuration runs bf16 GEMMs on AMX exactly when the
 * process decided AMX is usable (CPU, TORCH_NEURONX_AMX, the OS grant and
 * the tile self-test: config.c). */
static void test_amx_configured(void) {
  tnk_config_t c;
  if (tnk_config_for_isa(TNK_ISA_AVX512, &c) != 0) return;
  CHECK((c.gemm.amx_bf16 != NULL) == (tnk_amx_usable() && c.gemm.bf16 != NULL));
  printf("  AMX: %s; bf16 GEMM kernels checked: %s\n", tnk_amx_status(),
         c.gemm.amx_bf16 ? "AMX tiles and AVX512-BF16"
         : c.gemm.bf16   ? "AVX512-BF16"
                         : "fp32");
}

#if defined(__x86_64__)
#include <signal.h>

#include "x86/x86.h"

/* The bytes LDTILECFG loads are the intended configuration: palette 1,
 * tiles 0-7 of 16 rows x 64 bytes, the rest zero. (GCC 12 once dropped
 * the colsb/rows stores of a stack configuration: 0-row tiles, SIGILL on
 * the first tile instruction of every AMX host.) */
static void test_amx_tile_config_bytes(void) {
  const uint8_t *cfg = tnk_amx_tile_config();
  CHECK(((uintptr_t)cfg & 63) == 0);
  CHECK(cfg[0] == 1); /* palette */
  CHECK(cfg[1] == 0); /* start_row */
  for (int i = 2; i < 16; i++) CHECK(cfg[i] == 0);
  for (int t = 0; t < 16; t++) {
    uint16_t colsb = (uint16_t)(cfg[16 + 2 * t] | cfg[16 + 2 * t + 1] << 8);
    CHECK(colsb == (t < 8 ? 64 : 0));
    CHECK(cfg[48 + t] == (t < 8 ? 16 : 0));
  }
}

static int g_prior_handler_ran;
static void prior_sigill_handler(int sig) { g_prior_handler_ran = sig; }

/* The self-test cannot take the process down: where tiles work (AMX-BF16
 * granted) it returns 0, the exact product; everywhere else the first tile
 * instruction raises SIGILL, which it catches and returns. Either way the
 * SIGILL handler the process had before is back afterwards. */
static void test_amx_self_test_guard(void) {
  struct sigaction mine, before, after;
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = prior_sigill_handler;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGILL, &mine, &before);
  int tiles = (tnk_cpu_features() & TNK_FEAT_AMX_BF16) && tnk_amx_request();
  int r = tnk_amx_self_test();
  CHECK(r == (tiles ? 0 : SIGILL));
  sigaction(SIGILL, NULL, &after);
  CHECK(after.sa_handler == prior_sigill_handler);
  raise(SIGILL); /* the handler restored is the one that runs */
  CHECK(g_prior_handler_ran == SIGILL);
  sigaction(SIGILL, &before, NULL);
  printf("  AMX tile self-test on this CPU: %s\n", r == 0        ? "exact product"
                                                   : r == SIGILL ? "SIGILL caught"
                                                                 : "unexpected");
}
#endif

/* A bf16/fp16 product deeper than one packed block is rounded once, as
 * CPU rounds it: every variant against the reference (fp32 sums, one
 * rounding); only the fp32 summation order may differ, by one ulp on at
 * most 1% of the elements. Rounding after each block put 17% one ulp off. */
static void test_gemm_narrow_rounds_once(void) {
  const int64_t m = 24, n = 48, k = 2048;
  int bad = 0;
  for (int dt = 0; dt < 2; dt++) {
    int dtype = dt ? TNK_F16 : TNK_BF16;
    uint16_t *A = malloc(2 * m * k), *B = malloc(2 * k * n), *C0 = malloc(2 * m * n),
             *C1 = malloc(2 * m * n);
    for (int64_t i = 0; i < m * k; i++) {
      float v = 0.25f + (float)(i * 7919 % 1000) / 2000.0f;
      A[i] = dt ? tnk_f32_to_f16(v) : tnk_f32_to_bf16(v);
    }
    for (int64_t i = 0; i < k * n; i++) {
      float v = (float)(i * 104729 % 1000) / 100000.0f;
      B[i] = dt ? tnk_f32_to_f16(v) : tnk_f32_to_bf16(v);
    }
    tnk_gemm_args_t g = {.batch = 1, .m = m, .n = n, .k = k, .a = A, .b = B, .c = C0};
    g.dtype = dtype;
    g.alpha = 1.0;
    g.sc_r = n;
    g.sc_c = 1;
    g.sa_r = k;
    g.sa_c = 1;
    tnk_config_t ref, cvs[3];
    tnk_config_for_isa(TNK_ISA_REFERENCE, &ref);
    int nv = bf16_gemm_variants(cvs);
    for (int trans = 0; trans < 2; trans++) { /* B row-major, or k-contiguous (a weight) */
      g.sb_r = trans ? 1 : n;
      g.sb_c = trans ? k : 1;
      g.c = C0;
      tnk_gemm_with(&ref, &g);
      for (int v = 0; v < nv; v++) {
        g.c = C1;
        tnk_gemm_with(&cvs[v], &g);
        int off = 0;
        for (int64_t i = 0; i < m * n; i++) {
          int d = abs((int)C0[i] - (int)C1[i]);
          if (d > 1) bad++;
          off += d != 0;
        }
        if (off > m * n / 100) bad++;
      }
    }
    free(A);
    free(B);
    free(C0);
    free(C1);
  }
  CHECK(bad == 0);
}

/* bf16 GEMM: the AVX512-BF16 dot-product kernel (when the CPU has it) and
 * the fp32-converting path (avx2) against the reference, odd depths, edge
 * tiles, transposed operands, alpha/beta and depths over one packed block. */
static void test_gemm_bf16_variants(void) {
  const int64_t shapes[][3] = {
      {13, 7, 33},    {25, 64, 70}, {12, 1101, 32}, {3, 5, 2},
      {40, 300, 64},  {36, 33, 96}, {270, 40, 530}, /* column split */
      {14, 2101, 40},  /* two packed blocks of depth (bf16 kc 2048), odd remainder */
      {65, 1031, 97}}; /* AMX: two depth blocks (1024), edge blocks in m and n */
  int bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int trans = 0; trans < 4; trans++) {
      int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
      uint16_t *A = malloc(2 * m * k), *B = malloc(2 * k * n), *C0 = malloc(2 * m * n),
               *C1 = malloc(2 * m * n);
      for (int64_t i = 0; i < m * k; i++) A[i] = tnk_f32_to_bf16((float)((i * 7 % 13) - 6) / 8.0f);
      for (int64_t i = 0; i < k * n; i++) B[i] = tnk_f32_to_bf16((float)((i * 5 % 11) - 5) / 4.0f);
      for (int64_t i = 0; i < m * n; i++) C0[i] = tnk_f32_to_bf16((float)(i % 3));
      memcpy(C1, C0, 2 * m * n);
      tnk_gemm_args_t g = {.batch = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = A,
                           .b = B,
                           .c = C0,
                           .dtype = TNK_BF16,
                           .alpha = 1.5,
                           .beta = 0.5,
                           .sc_r = n,
                           .sc_c = 1};
      if (trans == 0 || s == 1) { /* plain C = A B: full tiles round straight into C */
        g.alpha = 1.0;
        g.beta = 0.0;
      } else if (trans == 3) { /* C = alpha A B: the same tiles, scaled */
        g.alpha = 0.5;
        g.beta = 0.0;
      }
      g.sa_r = trans & 1 ? 1 : k;
      g.sa_c = trans & 1 ? m : 1;
      g.sb_r = trans & 2 ? 1 : n;
      g.sb_c = trans & 2 ? k : 1;
      tnk_config_t ref, cvs[3];
      tnk_config_for_isa(TNK_ISA_REFERENCE, &ref);
      tnk_gemm_with(&ref, &g);
      int nv = bf16_gemm_variants(cvs);
      for (int v = 0; v < nv; v++) {
        uint16_t *Cv = malloc(2 * m * n);
        memcpy(Cv, C1, 2 * m * n);
        g.c = Cv;
        tnk_gemm_with(&cvs[v], &g);
        for (int64_t i = 0; i < m * n; i++) {
          float got = tnk_bf16_to_f32(Cv[i]), want = tnk_bf16_to_f32(C0[i]);
          /* sums of up to 1101 terms of size ~2: a few bf16 ulps of the
           * partial sums (fp32 accumulation differs only in order) */
          if (fabsf(got - want) > 2e-2f * (1.0f + fabsf(want)) + 1e-3f * (float)k / 64) bad++;
        }
        free(Cv);
        g.c = C0;
      }
      free(A);
      free(B);
      free(C0);
      free(C1);
    }
  CHECK(bad == 0);
}

/* Triangular solves: A X = B for lower/upper, unit or not, checked by
 * multiplying back; strided (transposed) A. */
static void test_trsm(void) {
  enum { N = 7, K = 70 };
  static double A[N * N], X[N * K], B[N * K];
  int bad = 0;
  for (int upper = 0; upper < 2; upper++)
    for (int unit = 0; unit < 2; unit++)
      for (int dt = 0; dt < 2; dt++) {
        for (int i = 0; i < N; i++)
          for (int j = 0; j < N; j++)
            A[i * N + j] =
                ((upper ? j >= i : j <= i) ? (i == j ? 2.0 + i : 0.3 * ((i + 2 * j) % 5) - 0.6)
                                           : 0);
        for (int i = 0; i < N * K; i++) B[i] = (double)((i * 7) % 11) - 5;
        float Af[N * N], Xf[N * K];
        for (int i = 0; i < N * N; i++) Af[i] = (float)A[i];
        for (int i = 0; i < N * K; i++) {
          X[i] = B[i];
          Xf[i] = (float)B[i];
        }
        /* A read through its transpose's strides: (sa_r, sa_c) = (1, N) of A^T */
        double At[N * N];
        float Aft[N * N];
        for (int i = 0; i < N; i++)
          for (int j = 0; j < N; j++) {
            At[j * N + i] = A[i * N + j];
            Aft[j * N + i] = Af[i * N + j];
          }
        tnk_trsm_args_t t = {.batch = 1,
                             .n = N,
                             .k = K,
                             .a = dt ? (void *)At : (void *)Aft,
                             .x = dt ? (void *)X : (void *)Xf,
                             .sa_r = 1,
                             .sa_c = N,
                             .sx_r = K,
                             .sx_c = 1,
                             .dtype = dt ? TNK_F64 : TNK_F32,
                             .upper = upper,
                             .unit = unit};
        tnk_trsm(&t);
        for (int i = 0; i < N; i++)
          for (int c = 0; c < K; c++) {
            double s = 0;
            for (int j = 0; j < N; j++) {
              double a = i == j && unit ? 1.0 : A[i * N + j];
              s += a * (dt ? X[j * K + c] : Xf[j * K + c]);
            }
            if (fabs(s - B[i * K + c]) > (dt ? 1e-9 : 1e-3) * (1 + fabs(B[i * K + c]))) bad++;
          }
      }
  CHECK(bad == 0);
  CHECK(!tnk_trsm_supported(TNK_BF16));
}

/* A GEMM whose buffer cannot be allocated says so (return value and the
 * fault sink) instead of leaving C silently unwritten: an fp64 row of 2^58
 * columns needs a 2^61-byte accumulator. */
static int g_gemm_faults;
static const char *g_gemm_fault_what;
static void count_gemm_fault(void *ctx, int kind, const char *what, int64_t v, int64_t b,
                             uint32_t origin) {
  (void)ctx;
  (void)v;
  (void)b;
  (void)origin;
  g_gemm_faults += kind == TNRT_FAULT_MESSAGE;
  g_gemm_fault_what = what;
}

static void test_gemm_reports_allocation_failure(void) {
  double a = 1, b = 1, c = 0;
  tnk_gemm_args_t g = {.batch = 1,
                       .m = 1,
                       .n = (int64_t)1 << 58,
                       .k = 1,
                       .a = &a,
                       .b = &b,
                       .c = &c,
                       .sa_r = 1,
                       .sa_c = 1,
                       .sb_r = 1,
                       .sb_c = 1,
                       .sc_r = 1,
                       .sc_c = 1,
                       .dtype = TNK_F64,
                       .alpha = 1,
                       .beta = 0};
  g.fault.fn = count_gemm_fault;
  /* the portable reference (the ISA-less configuration): its row buffer is
   * n doubles, which cannot be allocated */
  tnk_config_t ref;
  CHECK(tnk_config_for_isa(0, &ref) == 0 && !ref.gemm.f64);
  CHECK(tnk_gemm_with(&ref, &g) == -1);
  CHECK(g_gemm_faults == 1 && g_gemm_fault_what && strstr(g_gemm_fault_what, "out of host memory"));
  g.n = 1; /* and a product that fits is computed, with no fault */
  CHECK(tnk_gemm(&g) == 0 && c == 1 && g_gemm_faults == 1);
}

/* Grouped GEMM, all four modes, fp32, against per-group double references:
 * uneven, empty and (mode 0) trailing uncovered groups; bad offsets are told
 * and leave zeros. */
static double g_gv(int i) { return (double)((i * 37 % 23) - 11) / 11.0; }

static void test_grouped_gemm(void) {
  enum { G = 4, M = 40, N = 24, K = 30 };
  static float a[G * M * K], b[G * K * N], c[G * M * N];
  for (int i = 0; i < G * M * K; i++) a[i] = (float)g_gv(i);
  for (int i = 0; i < G * K * N; i++) b[i] = (float)g_gv(i * 7 + 3);
  int bad = 0;
  for (int mode = 0; mode < 4; mode++) {
    int32_t offs[G];
    int64_t ext = mode == 0 ? M : mode == 1 ? N : K;
    /* ends: 7, 7 (empty), ext - 3, ext - 3 (3 uncovered in modes 0/1) */
    offs[0] = 7, offs[1] = 7, offs[2] = (int32_t)ext - 3, offs[3] = (int32_t)ext - 3;
    if (mode == 2) offs[3] = (int32_t)ext;
    tnk_grouped_gemm_args_t g = {.groups = G,
                                 .m = M,
                                 .n = N,
                                 .k = K,
                                 .c = c,
                                 .a = a,
                                 .b = b,
                                 .offs = mode == 3 ? NULL : offs,
                                 .mode = mode,
                                 .dtype = TNK_F32};
    /* A: [M, K] or [G, M, K]; B: [K, N] or [G, K, N]; C: [M, N] or [G, M, N] */
    int a3 = mode == 1 || mode == 3, b3 = mode == 0 || mode == 3, c3 = mode >= 2;
    int64_t sa[3] = {a3 ? M * K : 0, K, 1}, sb[3] = {b3 ? K * N : 0, N, 1},
            sc[3] = {c3 ? M * N : 0, N, 1};
    memcpy(g.sa, sa, sizeof sa);
    memcpy(g.sb, sb, sizeof sb);
    memcpy(g.sc, sc, sizeof sc);
    for (int i = 0; i < G * M * N; i++) c[i] = 12345.0f; /* C is fully written */
    tnk_grouped_gemm(&g);
    for (int grp = 0; grp < (c3 ? G : 1); grp++)
      for (int r = 0; r < M; r++)
        for (int x = 0; x < N; x++) {
          /* which group covers this element, and its k range */
          int gi = grp, k0 = 0, k1 = K, covered = 1;
          if (mode == 0 || mode == 1) {
            int pos = mode == 0 ? r : x;
            gi = -1;
            for (int j = G - 1; j >= 0; j--)
              if (pos < offs[j] && (j == 0 || pos >= offs[j - 1])) gi = j;
            covered = gi >= 0;
          } else if (mode == 2) {
            k0 = grp ? offs[grp - 1] : 0;
            k1 = offs[grp];
          }
          double want = 0;
          if (covered)
            for (int k = k0; k < k1; k++) {
              double av = a3 ? a[(gi * M + r) * K + k] : a[r * K + k];
              double bv = b3 ? b[(gi * K + k) * N + x] : b[k * N + x];
              want += av * bv;
            }
          float got = c[(grp * M + r) * N + x];
          bad += fabs(got - want) > 1e-4 * (1 + fabs(want));
        }
  }
  CHECK(bad == 0);
  /* decreasing offsets: told once, groups from the bad one on left zero */
  int32_t offs[G] = {10, 5, 20, 40};
  g_gemm_faults = 0;
  tnk_grouped_gemm_args_t g = {.groups = G,
                               .m = M,
                               .n = N,
                               .k = K,
                               .c = c,
                               .a = a,
                               .b = b,
                               .offs = offs,
                               .mode = 0,
                               .dtype = TNK_F32,
                               .sa = {0, K, 1},
                               .sb = {K * N, N, 1},
                               .sc = {0, N, 1}};
  g.fault.fn = count_gemm_fault;
  g.fault.kind = TNRT_FAULT_MESSAGE;
  tnk_grouped_gemm(&g);
  CHECK(g_gemm_faults == 1 && strstr(g_gemm_fault_what, "non-decreasing"));
  for (int i = 10 * N; i < M * N; i++) bad += c[i] != 0.0f;
  offs[1] = 50; /* past the end */
  tnk_grouped_gemm(&g);
  CHECK(g_gemm_faults == 2 && strstr(g_gemm_fault_what, "past the end"));
  CHECK(bad == 0);
}

/* ---- low-precision GEMM (lowp_gemm.c) ---- */

static void test_fp8_values(void) {
  CHECK(tnk_f8e4m3_to_f32(0x7E) == 448.0f); /* max normal */
  CHECK(tnk_f8e4m3_to_f32(0xFE) == -448.0f);
  CHECK(tnk_f8e4m3_to_f32(0x08) == ldexpf(1, -6)); /* min normal */
  CHECK(tnk_f8e4m3_to_f32(0x01) == ldexpf(1, -9)); /* min subnormal */
  CHECK(tnk_f8e4m3_to_f32(0x07) == 7 * ldexpf(1, -9));
  CHECK(tnk_f8e4m3_to_f32(0x38) == 1.0f);
  CHECK(tnk_f8e4m3_to_f32(0x3C) == 1.5f);
  CHECK(isnan(tnk_f8e4m3_to_f32(0x7F)) && isnan(tnk_f8e4m3_to_f32(0xFF)));
  CHECK(tnk_f8e4m3_to_f32(0x77) == 240.0f); /* e = 14 is a normal exponent */
  CHECK(tnk_f8e5m2_to_f32(0x7B) == 57344.0f);
  CHECK(isinf(tnk_f8e5m2_to_f32(0x7C)) && isnan(tnk_f8e5m2_to_f32(0x7D)));
  CHECK(tnk_f8e5m2_to_f32(0x01) == ldexpf(1, -16));
  CHECK(tnk_f8e5m2_to_f32(0x3C) == 1.0f);
  /* the narrowing casts: round to nearest even, e4m3fn saturating at 448
   * (torch 2.13's CPU cast), e5m2 overflow to infinity */
  CHECK(tnk_f32_to_f8e4m3(448.0f) == 0x7E && tnk_f32_to_f8e4m3(-448.0f) == 0xFE);
  CHECK(tnk_f32_to_f8e4m3(464.0f) == 0x7E); /* a tie: to the even 448 */
  CHECK(tnk_f32_to_f8e4m3(465.0f) == 0x7E); /* past it: saturated */
  CHECK(tnk_f32_to_f8e4m3(1e30f) == 0x7E && tnk_f32_to_f8e4m3(-INFINITY) == 0xFE);
  CHECK(tnk_f32_to_f8e4m3(NAN) == 0x7F && tnk_f32_to_f8e5m2(-NAN) == 0xFF);
  CHECK(tnk_f32_to_f8e4m3(ldexpf(1, -9)) == 0x01);
  CHECK(tnk_f32_to_f8e4m3(ldexpf(1, -10)) == 0x00);  /* a tie: to the even 0 */
  CHECK(tnk_f32_to_f8e4m3(ldexpf(3, -11)) == 0x01);  /* 0.75 of the step: up */
  CHECK(tnk_f32_to_f8e4m3(ldexpf(15, -10)) == 0x08); /* a tie: up to the min normal */
  CHECK(tnk_f32_to_f8e4m3(1.0625f) == 0x38 && tnk_f32_to_f8e4m3(1.1875f) == 0x3A);
  CHECK(tnk_f32_to_f8e5m2(57344.0f) == 0x7B && tnk_f32_to_f8e5m2(61440.0f) == 0x7C);
  CHECK(tnk_f32_to_f8e5m2(-INFINITY) == 0xFC && tnk_f32_to_f8e5m2(ldexpf(1, -16)) == 0x01);
  for (int v = 0; v < 256; v++) { /* every finite value round-trips */
    float a = tnk_f8e4m3_to_f32((uint8_t)v), b = tnk_f8e5m2_to_f32((uint8_t)v);
    if (!isnan(a)) CHECK(tnk_f32_to_f8e4m3(a) == v || (a == 0.0f && (v & 0x7F) == 0));
    if (!isnan(b)) CHECK(tnk_f32_to_f8e5m2(b) == v);
  }
}

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

/* The nearest 8-bit float by search over every finite code (ties to the
 * even code), in double: the oracle of the narrowing casts. Past the
 * largest finite value: e4m3fn saturates at 448 (torch 2.13's CPU cast),
 * e5m2 becomes infinity from the midpoint to 2^16 on. */
static uint8_t f8_by_search(float v, int e5m2) {
  uint32_t u;
  memcpy(&u, &v, 4);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80);
  if (isnan(v)) return sign | 0x7F;
  double m = fabs((double)v);
  int top = e5m2 ? 0x7B : 0x7E;
  if (!e5m2 && m >= 448.0) return sign | 0x7E;
  if (e5m2 && m >= 61440.0) return sign | 0x7C;
  int best = 0;
  double bd = INFINITY;
  for (int c = 0; c <= top; c++) {
    double d =
        fabs((double)(e5m2 ? tnk_f8e5m2_to_f32((uint8_t)c) : tnk_f8e4m3_to_f32((uint8_t)c)) - m);
    if (d < bd || (d == bd && (c & 1) == 0)) bd = d, best = c;
  }
  return sign | (uint8_t)best;
}

/* The narrowing casts of every variant against the search, over f32 bit
 * patterns from every exponent (random mantissas, and each code's value,
 * the midpoints between codes and their neighbours), lengths that leave
 * vector tails. */
static void test_f32_to_f8_variants(void) {
  enum { N = 1 << 16 };
  float *x = malloc(N * sizeof(float));
  uint8_t *want[2] = {malloc(N), malloc(N)}, *got = malloc(N);
  uint32_t seed = 7;
  int n = 0;
  for (int c = 0; c < 256; c++)
    for (int f = 0; f < 2; f++) {
      float a = f ? tnk_f8e5m2_to_f32((uint8_t)c) : tnk_f8e4m3_to_f32((uint8_t)c);
      float b = f ? tnk_f8e5m2_to_f32((uint8_t)(c + 1)) : tnk_f8e4m3_to_f32((uint8_t)(c + 1));
      float mid = (float)(((double)a + (double)b) / 2);
      x[n++] = a, x[n++] = mid, x[n++] = nextafterf(mid, 0), x[n++] = nextafterf(mid, INFINITY);
    }
  x[n++] = INFINITY, x[n++] = -INFINITY, x[n++] = NAN, x[n++] = -0.0f, x[n++] = 1e-45f;
  while (n < N) {
    uint32_t u = lcg(&seed);
    memcpy(&x[n++], &u, 4);
  }
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < N; i++) want[f][i] = f8_by_search(x[i], f);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    bad += tnk_f32_to_f8e4m3(x[i]) != want[0][i];
    bad += tnk_f32_to_f8e5m2(x[i]) != want[1][i];
  }
  CHECK(bad == 0);
  for (int isa = 0; isa < 3; isa++) {
    tnk_config_t cfg;
    if (tnk_config_for_isa(isa, &cfg) != 0 || !cfg.gemm.f32_to_f8) continue;
    for (int f = 0; f < 2; f++) {
      int lens[] = {N - 1, N - 14, 7};
      for (int l = 0; l < 3; l++) {
        memset(got, 0xAA, N);
        cfg.gemm.f32_to_f8(got, x + 1, lens[l], f);
        int badv = 0;
        for (int i = 0; i < lens[l]; i++) badv += got[i] != want[f][i + 1];
        for (int i = lens[l]; i < N; i++) badv += got[i] != 0xAA; /* nothing past the end */
        CHECK(badv == 0);
      }
    }
  }
  free(x), free(want[0]), free(want[1]), free(got);
}

/* int8 x int8 -> int32 in every variant (the reference, AVX2's int16
 * multiply-add, AVX-512's VNNI or multiply-add) against an int64 loop, in
 * the four layouts, with the extremes -128 and 127 and k past one block. */
static void test_int8_gemm_variants(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},       {5, 7, 3},      {13, 33, 17},
                                      {12, 32, 4},     {64, 64, 64},   {37, 45, 531},
                                      {150, 70, 1030}, {3, 200, 2049}, {17, 1, 5}};
  tnk_config_t cfg[3];
  int have[3];
  for (int v = 0; v < 3; v++) have[v] = tnk_config_for_isa(v, &cfg[v]) == 0;
  uint32_t seed = 7;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    int8_t *A = malloc((size_t)(m * k)), *B = malloc((size_t)(k * n));
    int32_t *C = malloc(sizeof(int32_t) * (size_t)(m * n));
    for (int64_t i = 0; i < m * k; i++) A[i] = (int8_t)(lcg(&seed) >> 24);
    for (int64_t i = 0; i < k * n; i++) B[i] = (int8_t)(lcg(&seed) >> 24);
    if (s == 4) { /* the extremes: every product -128 * -128 or 127 * -128 */
      for (int64_t i = 0; i < m * k; i++) A[i] = i % 2 ? 127 : -128;
      for (int64_t i = 0; i < k * n; i++) B[i] = -128;
    }
    for (int trans = 0; trans < 4; trans++)
      for (int v = 0; v < 3; v++) {
        if (!have[v]) continue;
        tnk_lowp_gemm_args_t g = {.m = m,
                                  .n = n,
                                  .k = k,
                                  .a = A,
                                  .b = B,
                                  .c = C,
                                  .a_fmt = TNK_I8,
                                  .b_fmt = TNK_I8,
                                  .c_dtype = TNK_I32,
                                  .sc_r = n,
                                  .sc_c = 1};
        g.sa_r = trans & 1 ? 1 : k;
        g.sa_c = trans & 1 ? m : 1;
        g.sb_r = trans & 2 ? 1 : n;
        g.sb_c = trans & 2 ? k : 1;
        memset(C, 0x55, sizeof(int32_t) * (size_t)(m * n));
        CHECK(tnk_lowp_gemm_with(&cfg[v], &g) == 0);
        int bad = 0;
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            int64_t ref = 0;
            for (int64_t t = 0; t < k; t++)
              ref += (int64_t)A[i * g.sa_r + t * g.sa_c] * B[t * g.sb_r + j * g.sb_c];
            bad += C[i * n + j] != (int32_t)ref;
          }
        if (bad)
          fprintf(stderr, "  int8 %lldx%lldx%lld trans %d variant %d: %d wrong\n", (long long)m,
                  (long long)n, (long long)k, trans, v, bad);
        CHECK(bad == 0);
      }
    free(A);
    free(B);
    free(C);
  }
}

static double f8_value(int fmt, uint8_t v) {
  return fmt == TNK_F8E4M3 ? tnk_f8e4m3_to_f32(v) : tnk_f8e5m2_to_f32(v);
}

/* fp8 and int8 operands with tensor, row/column and block scales and a
 * bias, C in f32 and bf16, every variant, against a double loop; and the
 * weight-only int8 decode path (few rows against int8 weight rows). */
static void test_scaled_gemm_variants(void) {
  static const int64_t shapes[][3] = {{1, 1, 32},    {5, 7, 64},    {13, 33, 96},  {16, 130, 256},
                                      {1, 300, 544}, {70, 45, 640}, {200, 90, 32}, {3, 64, 4096}};
  tnk_config_t cfg[3];
  int have[3];
  for (int v = 0; v < 3; v++) have[v] = tnk_config_for_isa(v, &cfg[v]) == 0;
  uint32_t seed = 11;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int kind = 0; kind < 5; kind++) {
      int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
      /* kind 0: e4m3 x e4m3, tensor scales, bf16 C; 1: e5m2 x e4m3, row and
       * column scales, bias, f32 C; 2: e4m3 x e4m3, block scales of 32
       * (powers of two); 3: f32 x int8 weight rows, column scales, bias
       * (the decode path for small m); 4: bf16 x int8 weight rows. */
      int fa = kind == 1 ? TNK_F8E5M2 : kind == 3 ? TNK_F32 : kind == 4 ? TNK_BF16 : TNK_F8E4M3;
      int fb = kind >= 3 ? TNK_I8 : TNK_F8E4M3;
      int cd = kind == 1 || kind == 3 ? TNK_F32 : TNK_BF16;
      int64_t nb = k / 32;
      uint8_t *A = malloc((size_t)(m * k) * 4), *B = malloc((size_t)(k * n));
      float *sa = malloc(sizeof(float) * (size_t)(m * nb + 1));
      float *sb = malloc(sizeof(float) * (size_t)(n * nb + 1));
      float *bias = malloc(sizeof(float) * (size_t)n);
      float *C = malloc(sizeof(float) * (size_t)(m * n));
      for (int64_t i = 0; i < m * k; i++) {
        uint8_t v = (uint8_t)(lcg(&seed) >> 24);
        if ((v & 0x7F) == 0x7F) v ^= 1; /* no NaN here (the aten tests cover it) */
        if (fa == TNK_F8E5M2 && (v & 0x7C) == 0x7C) v &= 0xBB;
        if (fa == TNK_F32)
          ((float *)A)[i] = (float)((int)(v % 17) - 8) / 8.0f;
        else if (fa == TNK_BF16)
          ((uint16_t *)A)[i] = tnk_f32_to_bf16((float)((int)(v % 17) - 8) / 8.0f);
        else
          A[i] = v;
      }
      for (int64_t i = 0; i < k * n; i++) {
        uint8_t v = (uint8_t)(lcg(&seed) >> 24);
        if (fb == TNK_F8E4M3 && (v & 0x7F) == 0x7F) v ^= 1;
        B[i] = v;
      }
      for (int64_t i = 0; i < m * nb + 1; i++) sa[i] = ldexpf(1, (int)(lcg(&seed) >> 29) - 4);
      for (int64_t i = 0; i < n * nb + 1; i++) sb[i] = ldexpf(1, (int)(lcg(&seed) >> 29) - 4);
      for (int64_t j = 0; j < n; j++) bias[j] = (float)j / 8.0f - 3.0f;
      for (int v = 0; v < 3; v++) {
        if (!have[v]) continue;
        tnk_lowp_gemm_args_t g = {.m = m,
                                  .n = n,
                                  .k = k,
                                  .a = A,
                                  .b = B,
                                  .c = C,
                                  .a_fmt = fa,
                                  .b_fmt = fb,
                                  .c_dtype = cd,
                                  .sa_r = k,
                                  .sa_c = 1,
                                  .sc_r = n,
                                  .sc_c = 1,
                                  .sa = sa,
                                  .sb = sb,
                                  .sa_dtype = TNK_F32,
                                  .sb_dtype = TNK_F32};
        /* B column-major (CUDA's layout for _scaled_mm; int8 weights are
         * rows of [n, k]) */
        g.sb_r = 1;
        g.sb_c = k;
        if (kind == 0) g.sa_mode = g.sb_mode = TNK_SCALE_TENSOR;
        if (kind == 1 || kind == 3 || kind == 4) {
          g.sa_mode = kind == 1 ? TNK_SCALE_VECTOR : TNK_SCALE_NONE;
          g.sb_mode = TNK_SCALE_VECTOR;
          g.sa_ld = g.sb_ld = 1;
          g.bias = bias;
          g.bias_dtype = TNK_F32;
        }
        if (kind == 2) {
          g.sa_mode = g.sb_mode = TNK_SCALE_BLOCK;
          g.block = 32;
          g.sa_ld = g.sb_ld = nb;
        }
        for (int64_t i = 0; i < m * n; i++) C[i] = NAN;
        CHECK(tnk_lowp_gemm_with(&cfg[v], &g) == 0);
        int bad = 0;
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int64_t t = 0; t < k; t++) {
              double a = fa == TNK_F32    ? ((float *)A)[i * k + t]
                         : fa == TNK_BF16 ? tnk_bf16_to_f32(((uint16_t *)A)[i * k + t])
                                          : f8_value(fa, A[i * k + t]);
              double b = fb == TNK_I8 ? (double)(int8_t)B[j * k + t] : f8_value(fb, B[j * k + t]);
              if (kind == 2) a *= sa[i * nb + t / 32], b *= sb[j * nb + t / 32];
              ref += a * b;
              mag += fabs(a * b);
            }
            if (kind == 0) ref *= (double)sa[0] * sb[0], mag *= (double)sa[0] * sb[0];
            if (kind == 1) ref *= (double)sa[i] * sb[j], mag *= (double)sa[i] * sb[j];
            if (kind >= 3) ref *= sb[j], mag *= sb[j];
            if (kind == 1 || kind >= 3) ref += bias[j], mag += fabs(bias[j]);
            double got = cd == TNK_F32 ? C[i * n + j] : tnk_bf16_to_f32(((uint16_t *)C)[i * n + j]);
            double tol = (cd == TNK_F32 ? 1e-5 : 8e-3) * mag + 1e-30;
            bad += !(fabs(got - ref) <= tol);
          }
        if (bad)
          fprintf(stderr, "  scaled %lldx%lldx%lld kind %d variant %d: %d wrong\n", (long long)m,
                  (long long)n, (long long)k, kind, v, bad);
        CHECK(bad == 0);
      }
      free(A);
      free(B);
      free(sa);
      free(sb);
      free(bias);
      free(C);
    }
}

/* The nibble of (k, column j) in a packed int4 weight, by the layout rules
 * tnk.h states (CPU's), written out independently of int4_gemm.c. */
static int int4_nibble(const uint8_t *p, int64_t n, int64_t k, int layout, int64_t kk, int64_t j) {
  int64_t bn = layout == TNK_INT4_LANES64 ? 64 : 32, c0 = j / bn * bn;
  int64_t w = n - c0 < bn ? n - c0 : bn, c = j - c0;
  const uint8_t *row = p + c0 * k / 2 + kk * (w / 2);
  int64_t byte;
  int high;
  if (w == 64 && layout == TNK_INT4_LANES64) {
    byte = (c / 16 % 2) * 16 + c % 16;
    high = c >= 32;
  } else if (w == 32 && layout == TNK_INT4_HALVES32) {
    byte = c % 16;
    high = c >= 16;
  } else {
    byte = c / 2;
    high = c % 2;
  }
  return high ? row[byte] >> 4 : row[byte] & 15;
}

/* int4 packing puts every value where the layout says, and the product of
 * every variant (and the scalar unit) matches a double sum of the
 * dequantised weight, for 1-16 rows (register sums and the L1 panel),
 * partial blocks (n % 64, n % 32), a depth that is not a multiple of the
 * group and each float dtype. One row's result does not depend on how many
 * rows ran with it. */
static void test_int4_variants(void) {
  static const int64_t shapes[][4] = {{1, 64, 64, 32},  {2, 48, 96, 64},   {3, 112, 256, 128},
                                      {5, 80, 130, 32}, {7, 16, 512, 256}, {16, 96, 200, 64},
                                      {4, 176, 64, 32}};
  static const int dts[] = {TNK_F32, TNK_BF16, TNK_F16};
  tnk_config_t cfg[3];
  int have[3];
  for (int v = 0; v < 3; v++) have[v] = tnk_config_for_isa(v, &cfg[v]) == 0;
  uint32_t seed = 11;
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2], group = shapes[si][3];
    int64_t groups = (k + group - 1) / group;
    int32_t *W = malloc(sizeof(int32_t) * (size_t)(n * k));
    uint8_t *P = malloc((size_t)(n * k / 2));
    for (int64_t i = 0; i < n * k; i++) W[i] = (int32_t)(lcg(&seed) >> 28);
    for (int layout = 0; layout < 3; layout++) {
      tnk_int4_pack_args_t pa = {.n = n, .k = k, .w = W, .out = P, .layout = layout};
      memset(P, 0xEE, (size_t)(n * k / 2));
      tnk_int4_pack(&pa);
      int misplaced = 0;
      for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < k; t++)
          misplaced += int4_nibble(P, n, k, layout, t, j) != W[j * k + t];
      CHECK(misplaced == 0);
      for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
        int dt = dts[di];
        size_t es = tnk_dtype_size(dt);
        char *A = malloc(es * (size_t)(m * k)), *SZ = malloc(es * (size_t)(groups * n * 2));
        char *C = malloc(es * (size_t)(m * n)), *C1 = malloc(es * (size_t)n);
        for (int64_t i = 0; i < m * k; i++)
          tnk_stf(A, dt, i, (double)((int32_t)lcg(&seed) >> 8) / (1 << 23));
        for (int64_t i = 0; i < groups * n; i++) {
          tnk_stf(SZ, dt, 2 * i, 0.01 + (double)(lcg(&seed) >> 8) / (1 << 24) * 0.1);
          tnk_stf(SZ, dt, 2 * i + 1, (double)((int32_t)lcg(&seed) >> 8) / (1 << 23) * 0.5);
        }
        for (int v = 0; v < 3; v++) {
          if (!have[v]) continue;
          tnk_int4_mm_args_t g = {.m = m,
                                  .n = n,
                                  .k = k,
                                  .group = group,
                                  .lda = k,
                                  .ldc = n,
                                  .c = C,
                                  .a = A,
                                  .sz = SZ,
                                  .b = P,
                                  .layout = layout,
                                  .dtype = dt};
          memset(C, 0x55, es * (size_t)(m * n));
          CHECK(tnk_int4_mm_with(&cfg[v], &g) == 0);
          int bad = 0;
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
              double ref = 0, mag = 0;
              for (int64_t t = 0; t < k; t++) {
                double s = tnk_ldf(SZ, dt, ((t / group) * n + j) * 2);
                double z = tnk_ldf(SZ, dt, ((t / group) * n + j) * 2 + 1);
                double term = tnk_ldf(A, dt, i * k + t) * ((W[j * k + t] - 8) * s + z);
                ref += term;
                mag += fabs(term);
              }
              double got = tnk_ldf(C, dt, i * n + j);
              double tol = 4e-6 * mag + (dt == TNK_F32 ? 0 : 8e-3 * fabs(ref)) + 1e-30;
              bad += !(fabs(got - ref) <= tol);
            }
          if (bad)
            fprintf(stderr, "  int4 %lldx%lldx%lld g%lld layout %d dtype %d variant %d: %d wrong\n",
                    (long long)m, (long long)n, (long long)k, (long long)group, layout, dt, v, bad);
          CHECK(bad == 0);
          /* row 0 alone equals row 0 among m rows, bit for bit */
          tnk_int4_mm_args_t g1 = g;
          g1.m = 1, g1.c = C1;
          CHECK(tnk_int4_mm_with(&cfg[v], &g1) == 0);
          CHECK(memcmp(C1, C, es * (size_t)n) == 0);
        }
        free(A);
        free(SZ);
        free(C);
        free(C1);
      }
    }
    free(W);
    free(P);
  }
}

int main(void) {
  RUN(test_im2col_3d);
  RUN(test_gemm_variants);
  RUN(test_gemm_f64_variants);
  RUN(test_amx_configured);
#if defined(__x86_64__)
  RUN(test_amx_tile_config_bytes);
#endif
#if defined(__x86_64__)
  RUN(test_amx_self_test_guard);
#endif
  RUN(test_gemm_narrow_rounds_once);
  RUN(test_gemm_bf16_variants);
  RUN(test_trsm);
  RUN(test_gemm_reports_allocation_failure);
  RUN(test_grouped_gemm);
  RUN(test_fp8_values);
  RUN(test_f32_to_f8_variants);
  RUN(test_int8_gemm_variants);
  RUN(test_scaled_gemm_variants);
  RUN(test_int4_variants);
  return REPORT("test_gemm");
}
