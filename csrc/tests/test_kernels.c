/* Tests of the kernel library against independent references. */
#define _GNU_SOURCE
#include "check.h"
#include "tnk.h"
#include "dtype.h"

#include <math.h>
#include <stdlib.h>

static void test_philox_known_answers(void) {
  /* Known-answer vectors of Philox4x32-10 (Salmon et al., Random123). */
  uint32_t out[4];
  uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  tnk_philox(c0, k0, out);
  CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du &&
        out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
  uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
           k1[2] = {0xffffffffu, 0xffffffffu};
  tnk_philox(c1, k1, out);
  CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu &&
        out[2] == 0xa20bc7c6u && out[3] == 0x6d5451fdu);
  uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
           k2[2] = {0xa4093822u, 0x299f31d0u};
  tnk_philox(c2, k2, out);
  CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu &&
        out[2] == 0x5001e420u && out[3] == 0x24126ea1u);
}

static void test_half_conversions(void) {
  /* every finite half round-trips; compare with the compiler's _Float16 */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = tnk_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    if (tnk_f32_to_f16(f) != h) bad++;
#ifdef __FLT16_MAX__
    _Float16 ref;
    uint16_t hh = (uint16_t)h;
    memcpy(&ref, &hh, 2);
    if ((float)ref != f) bad++;
#endif
  }
  CHECK(bad == 0);
#ifdef __FLT16_MAX__
  /* rounding of arbitrary floats, including subnormals and overflow */
  srand(1);
  bad = 0;
  for (int i = 0; i < 200000; i++) {
    uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
    float f;
    memcpy(&f, &u, 4);
    if (isnan(f)) continue;
    _Float16 r = (_Float16)f;
    uint16_t want;
    memcpy(&want, &r, 2);
    if (tnk_f32_to_f16(f) != want) bad++;
  }
  CHECK(bad == 0);
#endif
  /* bf16: round to nearest even, NaN stays NaN */
  CHECK(tnk_f32_to_bf16(1.0f) == 0x3f80);
  float up;
  uint32_t u = 0x3f808000u; /* exactly halfway, even below: rounds down */
  memcpy(&up, &u, 4);
  CHECK(tnk_f32_to_bf16(up) == 0x3f80);
  u = 0x3f818000u; /* halfway, odd below: rounds up */
  memcpy(&up, &u, 4);
  CHECK(tnk_f32_to_bf16(up) == 0x3f82);
  CHECK(isnan(tnk_bf16_to_f32(tnk_f32_to_bf16(NAN))));
}

static void test_copy_strided_cast(void) {
  /* transpose a 3x5 int32 matrix into float64 */
  int32_t src[15];
  double dst[15];
  for (int i = 0; i < 15; i++) src[i] = i - 7;
  tnk_copy_args_t a = {.shape = {2, 0, {5, 3}},
                       .dst = {dst, TNK_F64, 0, {3, 1}},
                       .src = {src, TNK_I32, 0, {1, 5}}};
  tnk_copy(&a);
  int ok = 1;
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) ok &= dst[r * 3 + c] == (double)src[c * 5 + r];
  CHECK(ok);
  /* broadcast (stride 0) float -> bool */
  float one = 0.5f;
  unsigned char flags[6] = {0};
  tnk_copy_args_t b = {.shape = {1, 0, {6}},
                       .dst = {flags, TNK_BOOL, 0, {1}},
                       .src = {&one, TNK_F32, 0, {0}}};
  tnk_copy(&b);
  ok = 1;
  for (int i = 0; i < 6; i++) ok &= flags[i] == 1;
  CHECK(ok);
  /* int64 keeps all 64 bits through int64 -> int64 and truncates to int8 */
  int64_t big = (1LL << 62) + 3, out64 = 0;
  int8_t out8 = 0;
  tnk_copy_args_t c = {.shape = {0}, .dst = {&out64, TNK_I64, 0, {0}},
                       .src = {&big, TNK_I64, 0, {0}}};
  tnk_copy(&c);
  CHECK(out64 == big);
  c.dst = (tnk_view_t){&out8, TNK_I8, 0, {0}};
  tnk_copy(&c);
  CHECK(out8 == 3);
  /* NaN -> int does not trap */
  double nan_v = NAN;
  int32_t i32 = 0;
  c.src = (tnk_view_t){&nan_v, TNK_F64, 0, {0}};
  c.dst = (tnk_view_t){&i32, TNK_I32, 0, {0}};
  tnk_copy(&c);
  /* empty shapes touch nothing */
  tnk_copy_args_t e = {.shape = {2, 0, {0, 4}}, .dst = {NULL, TNK_F32, 0, {4, 1}},
                       .src = {NULL, TNK_F32, 0, {4, 1}}};
  tnk_copy(&e);
}

static void test_fill(void) {
  uint16_t h[10] = {0};
  tnk_fill_args_t a = {.shape = {2, 0, {5, 2}}, .dst = {h, TNK_BF16, 0, {2, 1}},
                       .value = {.f = 1.5}};
  tnk_fill(&a);
  int ok = 1;
  for (int i = 0; i < 10; i++) ok &= tnk_bf16_to_f32(h[i]) == 1.5f;
  CHECK(ok);
  static float big[100003];
  tnk_fill_args_t b = {.shape = {1, 0, {100003}},
                       .dst = {big, TNK_F32, 0, {1}}, .value = {.f = -2.0}};
  tnk_fill(&b);
  ok = 1;
  for (int i = 0; i < 100003; i++) ok &= big[i] == -2.0f;
  CHECK(ok);
  int64_t ints[3];
  tnk_fill_args_t c = {.shape = {1, 0, {3}}, .dst = {ints, TNK_I64, 0, {1}},
                       .value = {.i = (1LL << 60) + 1, .is_integral = 1}};
  tnk_fill(&c);
  CHECK(ints[2] == (1LL << 60) + 1);
}

/* A "pool" that splits ranges into odd-sized chunks, to show results do not
 * depend on how work is divided. */
static void odd_parallel(int64_t n, int64_t grain, tnk_range_fn fn, void *c) {
  for (int64_t b = 0; b < n; b += 7) fn(c, b, b + 7 < n ? b + 7 : n);
}

static void test_random(void) {
  enum { N = 200000 };
  static float x[N], y[N];
  tnk_random_args_t a = {.shape = {1, 0, {N}}, .dst = {x, TNK_F32, 0, {1}},
                         .kind = TNK_RAND_NORMAL, .seed = 42, .offset = 7,
                         .lo = 1.0, .hi = 2.0};
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
  tnk_random_args_t u = {.shape = {1, 0, {N}}, .dst = {b, TNK_BF16, 0, {1}},
                         .kind = TNK_RAND_UNIFORM, .seed = 1, .lo = 0, .hi = 1};
  tnk_random(&u);
  int in_range = 1;
  for (int i = 0; i < N; i++) {
    float f = tnk_bf16_to_f32(b[i]);
    in_range &= f >= 0.0f && f < 1.0f;
  }
  CHECK(in_range);
  /* integers in [3, 10) hit every value */
  static int64_t r[N];
  tnk_random_args_t ri = {.shape = {1, 0, {N}}, .dst = {r, TNK_I64, 0, {1}},
                          .kind = TNK_RAND_INT, .seed = 5, .ilo = 3, .irange = 7};
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
                          .kind = TNK_RAND_BERNOULLI, .has_prob = 1, .seed = 3};
  tnk_random(&be);
  ok = 1;
  for (int i = 0; i < 1000; i++) ok &= out[i] == p[i];
  CHECK(ok);
}

int main(void) {
  RUN(test_philox_known_answers);
  RUN(test_half_conversions);
  RUN(test_copy_strided_cast);
  RUN(test_fill);
  RUN(test_random);
  return REPORT("test_kernels");
}
