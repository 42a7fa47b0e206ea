/* The kernel library as a whole: every variant of the kernel configuration
 * against the reference configuration (config.c), the kernel providers
 * (provider.c) and the random kernels (random.c). The families have their
 * own suites: test_eltwise, test_gemm, test_nn, test_index and
 * test_entry_points. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "tnk.h"
#include "kernel_list.h"
#include "provider.h"
#include "vmath.h"
#include "dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_philox_known_answers(void) {
  /* Known-answer vectors of Philox4x32-10 (Salmon et al., Random123). */
  uint32_t out[4];
  uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  tnk_philox(c0, k0, out);
  CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu &&
        out[3] == 0x9b00dbd8u);
  uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
           k1[2] = {0xffffffffu, 0xffffffffu};
  tnk_philox(c1, k1, out);
  CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u &&
        out[3] == 0x6d5451fdu);
  uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
           k2[2] = {0xa4093822u, 0x299f31d0u};
  tnk_philox(c2, k2, out);
  CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u &&
        out[3] == 0x24126ea1u);
}

/* A "pool" that splits ranges into odd-sized chunks, to show results do not
 * depend on how work is divided. */
static void odd_parallel(int64_t n, int64_t grain, tnk_range_fn fn, void *c) {
  for (int64_t b = 0; b < n; b += 7) fn(c, b, b + 7 < n ? b + 7 : n);
}

static void test_random(void) {
  enum { N = 200000 };
  static float x[N], y[N];
  tnk_random_args_t a = {.shape = {1, 0, {N}},
                         .dst = {x, TNK_F32, 0, {1}},
                         .kind = TNK_RAND_NORMAL,
                         .seed = 42,
                         .offset = 7,
                         .lo = 1.0,
                         .hi = 2.0};
  tnk_random(&a);
  tnk_set_parallel(odd_parallel);
  a.dst.data = y;
  tnk_random(&a);
  tnk_set_parallel(NULL);
  CHECK(memcmp(x, y, sizeof x) == 0);
  double mean = 0, var = 0;
  for (int i = 0; i < N; i++) mean += x[i];
  mean /= N;
  for (int i = 0; i < N; i++) var += (x[i] - mean) * (x[i] - mean);
  var /= N;
  CHECK(fabs(mean - 1.0) < 0.02 && fabs(sqrt(var) - 2.0) < 0.02);
  a.offset = 8; /* another offset: another stream of numbers */
  tnk_random(&a);
  CHECK(memcmp(x, y, sizeof x) != 0);
  /* uniform in [lo, hi) even after rounding to bf16 */
  static uint16_t b[N];
  tnk_random_args_t u = {.shape = {1, 0, {N}},
                         .dst = {b, TNK_BF16, 0, {1}},
                         .kind = TNK_RAND_UNIFORM,
                         .seed = 1,
                         .lo = 0,
                         .hi = 1};
  tnk_random(&u);
  int in_range = 1;
  for (int i = 0; i < N; i++) {
    float f = tnk_bf16_to_f32(b[i]);
    in_range &= f >= 0.0f && f < 1.0f;
  }
  CHECK(in_range);
  /* integers in [3, 10) hit every value */
  static int64_t r[N];
  tnk_random_args_t ri = {.shape = {1, 0, {N}},
                          .dst = {r, TNK_I64, 0, {1}},
                          .kind = TNK_RAND_INT,
                          .seed = 5,
                          .ilo = 3,
                          .irange = 7};
  tnk_random(&ri);
  int seen[7] = {0}, ok = 1;
  for (int i = 0; i < N; i++) {
    ok &= r[i] >= 3 && r[i] < 10;
    if (ok) seen[r[i] - 3] = 1;
  }
  for (int i = 0; i < 7; i++) ok &= seen[i];
  CHECK(ok);
  /* bernoulli with a per-element probability of 0 or 1 is exact */
  static float p[1000], out[1000];
  for (int i = 0; i < 1000; i++) p[i] = (float)(i % 2);
  tnk_random_args_t be = {.shape = {1, 0, {1000}},
                          .dst = {out, TNK_F32, 0, {1}},
                          .prob = {p, TNK_F32, 0, {1}},
                          .kind = TNK_RAND_BERNOULLI,
                          .has_prob = 1,
                          .seed = 3};
  tnk_random(&be);
  ok = 1;
  for (int i = 0; i < 1000; i++) ok &= out[i] == p[i];
  CHECK(ok);
}

/* Every entry of every variant's configuration against the reference
 * configuration's entry (config.h): the element-wise loops of every
 * (op, dtype) contiguous and strided, on values in [-4, 4] and the special
 * values; the vector row math; GEMM is test_gemm_variants. Tolerance: the
 * vector libm (libmvec) is within 4 ulp of libm, and a half type may round
 * that difference to one of its own ulps. */
static int close_enough(double got, double want, int dtype) {
  if (got != got || want != want) return (got != got) == (want != want);
  if (got == want) return 1;
  double rel = dtype == TNK_F64    ? 1e-13
               : dtype == TNK_F32  ? 4e-6
               : dtype == TNK_BF16 ? 1.6e-2
                                   : 2e-3;
  /* absolute at the scale of 1: ops like GELU's backward cancel terms of
   * size ~1, where a last-ulp difference of erff is not relative to the result */
  return fabs(got - want) <= rel * (fabs(want) + (dtype == TNK_F64 ? 1e-3 : 1.0));
}

enum { VN = 53 };
static void variant_inputs(int dtype, char *buf, int64_t stride, int seed) {
  static const double specials[] = {0.0,   -0.0, INFINITY, -INFINITY, NAN,
                                    1e-30, 60.0, -60.0,    1.0,       -1.0};
  for (int i = 0; i < VN; i++) {
    double v = i < 10 ? specials[(i + seed) % 10] : ((i * 37 + seed * 11) % 97) / 12.0 - 4.0;
    tnk_stf(buf + i * stride, dtype, 0, v);
  }
}

static int compare_outputs(const char *got, const char *want, int64_t stride, int dtype,
                           int out_dtype) {
  int bad = 0;
  for (int i = 0; i < VN; i++) {
    double g = tnk_ldf(got + i * stride, out_dtype, 0),
           w = tnk_ldf(want + i * stride, out_dtype, 0);
    if (!close_enough(g, w, dtype)) bad++;
  }
  return bad;
}

static void test_config_variants(void) {
  tnk_config_t ref, v;
  CHECK(tnk_config_for_isa(TNK_ISA_REFERENCE, &ref) == 0);
  CHECK(tnk_config()->isa == tnk_isa());
  static const int fdt[] = {TNK_F16, TNK_BF16, TNK_F32, TNK_F64};
  const double p[3] = {0.5, 1.5, 2.0}, al[5] = {1.5, 0.5, 1.0, 0, 0};
  int checked = 0;
  for (int isa = TNK_ISA_AVX2; isa <= TNK_ISA_AVX512; isa++) {
    if (tnk_config_for_isa(isa, &v) != 0) continue;
    CHECK(v.isa == isa && v.loops != ref.loops);
    int bad = 0;
    for (int strided = 0; strided < 2; strided++)
      for (int d = 0; d < 4; d++) {
        int dt = fdt[d];
        int64_t esz = (int64_t)tnk_dtype_size(dt), st = strided ? 3 * esz : esz;
        char *a = calloc(VN, (size_t)st), *b = calloc(VN, (size_t)st);
        char *o1 = calloc(VN, (size_t)st), *o2 = calloc(VN, (size_t)st);
        variant_inputs(dt, a, st, 0);
        variant_inputs(dt, b, st, 3);
        for (int op = 0; op < TNK_UNARY_OP_COUNT; op++) {
          tnk_uloop_fn fr = ref.loops->unary[op][dt], fv = v.loops->unary[op][dt];
          CHECK((fr == NULL) == (fv == NULL));
          if (!fr || !fv) continue;
          fr(o1, a, st, st, VN, p);
          fv(o2, a, st, st, VN, p);
          int nb = compare_outputs(o2, o1, st, dt, dt);
          if (nb)
            fprintf(stderr, "  %s unary op %d dtype %d strided %d: %d differ\n", tnk_isa_name(isa),
                    op, dt, strided, nb);
          bad += nb;
          checked++;
        }
        for (int op = 0; op < TNK_BINARY_OP_COUNT; op++) {
          tnk_bloop_fn fr = ref.loops->binary[op][dt], fv = v.loops->binary[op][dt];
          CHECK((fr == NULL) == (fv == NULL));
          if (!fr || !fv) continue;
          fr(o1, a, b, st, st, st, VN, al, 1);
          fv(o2, a, b, st, st, st, VN, al, 1);
          int nb = compare_outputs(o2, o1, st, dt, dt);
          if (nb)
            fprintf(stderr, "  %s binary op %d dtype %d strided %d: %d differ\n", tnk_isa_name(isa),
                    op, dt, strided, nb);
          bad += nb;
          checked++;
        }
        /* contiguous fp32 addcmul / addcdiv / lerp, out of place and in place
         * (c = b: addcdiv divides by b's zeros too) */
        for (int op = 0; op < TNK_TERNARY_OP_COUNT && dt == TNK_F32 && !strided; op++)
          for (int inplace = 0; inplace < 2; inplace++) {
            float *fa = (float *)(void *)a, *fb = (float *)(void *)b;
            float *r1 = inplace ? (float *)(void *)o1 : fa,
                  *r2 = inplace ? (float *)(void *)o2 : fa;
            if (inplace) {
              memcpy(o1, a, VN * sizeof(float));
              memcpy(o2, a, VN * sizeof(float));
            }
            ref.loops->ternary_f32(op, (float *)(void *)o1, r1, fb, fb, 0.75f, VN);
            v.loops->ternary_f32(op, (float *)(void *)o2, r2, fb, fb, 0.75f, VN);
            int nb = compare_outputs(o2, o1, st, dt, dt);
            if (nb)
              fprintf(stderr, "  %s ternary op %d in place %d: %d differ\n", tnk_isa_name(isa), op,
                      inplace, nb);
            bad += nb;
            checked++;
          }
        free(a);
        free(b);
        free(o1);
        free(o2);
      }
    /* the vector row math, every length class around the vector widths */
    float x[VN + 40], g[VN + 40], y1[VN + 40], y2[VN + 40], w[VN + 40], bb[VN + 40];
    for (int i = 0; i < VN + 40; i++) {
      x[i] = (float)((i * 29 % 83) / 10.0 - 4.0);
      g[i] = (float)((i * 13 % 17) / 8.0 - 1.0);
      w[i] = 0.5f + (float)(i % 5) * 0.25f;
      bb[i] = (float)(i % 3) - 1.0f;
    }
    for (int n = 0; n <= VN + 40; n += 7) {
      const tnk_vmath_config_t *R = &ref.vmath, *V = &v.vmath;
      float s1 = R->exp_sum(x, 1.0f, y1, n), s2 = V->exp_sum(x, 1.0f, y2, n);
      bad += !close_enough(s2, s1, TNK_F32);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      s1 = R->exp_bounded_sum(x, 4.0f, y1, n);
      s2 = V->exp_bounded_sum(x, 4.0f, y2, n);
      bad += !close_enough(s2, s1, TNK_F32);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      for (int form = 0; form < 2; form++) {
        R->sigmoid(x, y1, n, form);
        V->sigmoid(x, y2, n, form);
        for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
        R->gelu(x, y1, n, form);
        V->gelu(x, y2, n, form);
        for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
        R->gelu_bwd(g, x, y1, n, form);
        V->gelu_bwd(g, x, y2, n, form);
        for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      }
      R->silu_bwd(g, x, y1, n);
      V->silu_bwd(g, x, y2, n);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      bad += !close_enough(V->sum_f64(x, n), R->sum_f64(x, n), TNK_F64);
      bad += fabsf(V->sum(x, n) - R->sum(x, n)) > 1e-5f * (float)(n + 1);
      bad += fabsf(V->sumsqdev(x, n, 0.25f) - R->sumsqdev(x, n, 0.25f)) > 1e-4f * (float)(n + 1);
      bad += V->max(x, n) != R->max(x, n);
      R->normalize(x, y1, n, 0.5f, 1.25f, w, bb);
      V->normalize(x, y2, n, 0.5f, 1.25f, w, bb);
      for (int k = 0; k < n; k++) bad += !close_enough(y2[k], y1[k], TNK_F32);
      R->scale_stream(x, 0.75f, y1, n);
      V->scale_stream(x, 0.75f, y2, n);
      for (int k = 0; k < n; k++) bad += y2[k] != y1[k];
      checked++;
    }
    CHECK(bad == 0);
  }
  if (tnk_cpu_features() & TNK_ISA_AVX2) CHECK(checked > 0);
}

/* The host provider (kernels/provider.c, generated from kernel_list.h):
 * every id has a name and runs its entry point; its support answers are the
 * library's own probes; the counting provider counts each run per id. */
static void test_host_provider(void) {
  const tnrt_kernel_provider_t *host = tnk_host_provider(), *counting = tnk_counting_provider();
  CHECK(host->api_version == TNRT_PROVIDER_API_VERSION && host->kernel_count == TNK_KERNEL_COUNT);
  CHECK(host->runs_host_code == 1 && counting->kernel_count == TNK_KERNEL_COUNT);
  CHECK(tnk_provider_named("host") == host && tnk_provider_named("counting") == counting);
  CHECK(tnk_provider_named("gpu") == NULL && tnk_provider_named(NULL) == NULL);
  CHECK(tnk_provider_named("kernels-only")->runs_host_code == 0);
  for (int k = 0; k < TNK_KERNEL_COUNT; k++) CHECK(tnk_kernel_names[k] && *tnk_kernel_names[k]);
  CHECK(!strcmp(tnk_kernel_names[TNK_K_GEMM], "GEMM"));
  /* supports: the probes, through the table */
  int agree = 1;
  for (int dt = 0; dt < TNK_DTYPE_COUNT; dt++) {
    for (int op = 0; op < TNK_UNARY_OP_COUNT; op++) {
      tnrt_kernel_query_t q = {op, dt, -1, -1};
      agree &= host->supports(NULL, TNK_K_UNARY, &q) == (tnk_unary_supported(op, dt) != 0);
    }
    for (int op = 0; op < TNK_BINARY_OP_COUNT; op++) {
      tnrt_kernel_query_t q = {op, dt, -1, -1};
      agree &= host->supports(NULL, TNK_K_BINARY, &q) == (tnk_binary_supported(op, dt) != 0);
    }
    tnrt_kernel_query_t q = {-1, dt, -1, -1};
    agree &= host->supports(NULL, TNK_K_GEMM, &q) == (tnk_gemm_supported(dt) != 0);
    for (int odt = 0; odt < TNK_DTYPE_COUNT; odt++) {
      tnrt_kernel_query_t q2 = {-1, dt, odt, -1};
      agree &= host->supports(NULL, TNK_K_SOFTMAX, &q2) == (tnk_softmax_supported(dt, odt) != 0);
    }
  }
  CHECK(agree);
  /* run: a copy and a batch of two through the table, counted */
  uint64_t c0[TNK_KERNEL_COUNT], c1[TNK_KERNEL_COUNT];
  tnk_kernel_launch_counts(c0, 1);
  float src[6] = {1, 2, 3, 4, 5, 6}, dst[6] = {0};
  tnk_copy_args_t a = {0};
  a.shape.ndim = 1;
  a.shape.sizes[0] = 6;
  a.dst = (tnk_view_t){dst, TNK_F32, 0, {1}};
  a.src = (tnk_view_t){src, TNK_F32, 0, {1}};
  counting->run(counting->ctx, TNK_K_COPY, &a);
  for (int i = 0; i < 6; i++) CHECK(dst[i] == src[i]);
  tnk_copy_batch_args_t b = {0};
  b.n = 2;
  b.copy[0] = a;
  b.copy[0].shape.sizes[0] = 3;
  b.copy[0].dst.data = dst + 3;
  b.copy[1] = a;
  b.copy[1].shape.sizes[0] = 3;
  b.copy[1].src.data = src + 3;
  counting->run(counting->ctx, TNK_K_COPY_BATCH, &b);
  CHECK(dst[3] == 1 && dst[4] == 2 && dst[5] == 3 && dst[0] == 4 && dst[1] == 5 && dst[2] == 6);
  host->run(host->ctx, TNK_K_COPY, &a); /* the host provider counts nothing */
  tnk_kernel_launch_counts(c1, 0);
  CHECK(c1[TNK_K_COPY] == 1 && c1[TNK_K_COPY_BATCH] == 1 && c1[TNK_K_GEMM] == 0);
  tnk_kernel_launch_counts(c1, 1);
  tnk_kernel_launch_counts(c1, 0);
  CHECK(c1[TNK_K_COPY] == 0);
}

int main(void) {
  RUN(test_philox_known_answers);
  RUN(test_random);
  RUN(test_config_variants);
  RUN(test_host_provider);
  return REPORT("test_kernels");
}
