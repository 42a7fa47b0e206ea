/* Counter-based random numbers: element i of a call draws Philox4x32-10 with
 * counter (i, offset) and key seed, so results depend only on (seed, offset,
 * shape), never on the thread count or the memory layout. */
#include <stdatomic.h>

#include "dtype.h"
#include "iter.h"
#include "tnk.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void tnk_philox(uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

typedef struct rand_ctx {
  const tnk_random_args_t *a;
  _Atomic int bad; /* a probability outside [0, 1] */
} rand_ctx_t;

/* Uniform in [0, 1) with 24 (float) or 53 (double) random bits. */
static double u01(const uint32_t *w, int wide) {
  if (wide) return (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) * 0x1.0p-53;
  return (double)(w[0] >> 8) * 0x1.0p-24;
}

/* Returns 0 when a probability is outside [0, 1]. */
static int draw(const tnk_random_args_t *a, int wide, int64_t i, const char *prob, tnk_val_t *v) {
  uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)a->offset,
                     (uint32_t)(a->offset >> 32)};
  uint32_t key[2] = {(uint32_t)a->seed, (uint32_t)(a->seed >> 32)};
  uint32_t w[4];
  tnk_philox(ctr, key, w);
  *v = (tnk_val_t){0, 0, 0, 0};
  switch (a->kind) {
    case TNK_RAND_UNIFORM:
      v->re = a->lo + u01(w, wide) * (a->hi - a->lo);
      v->im = a->lo + u01(w + 2, wide) * (a->hi - a->lo); /* complex */
      break;
    case TNK_RAND_NORMAL: {
      /* Box-Muller; u1 in (0, 1] keeps log finite. */
      double u1 = 1.0 - u01(w, 0), u2 = (double)(w[2] >> 8) * 0x1.0p-24;
      if (wide) {
        u1 = 1.0 - u01(w, 1);
        u2 = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * 0x1.0p-53;
      }
      v->re = a->lo + a->hi * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
      break;
    }
    case TNK_RAND_EXPONENTIAL: {
      /* u in [0, 1): -log1p(-u) is finite and >= 0 */
      v->re = -log1p(-u01(w, wide)) / a->lo;
      break;
    }
    case TNK_RAND_BERNOULLI: {
      double p = a->lo;
      if (prob) {
        tnk_val_t pv;
        switch (a->prob.dtype) {
#define LOAD_CASE(E, N) \
  case E: pv = tnk_load_##N(prob); break;
          TNK_FOR_EACH_DTYPE(LOAD_CASE)
#undef LOAD_CASE
          default: pv = (tnk_val_t){0, 0, 0, 0};
        }
        p = pv.isint ? (double)pv.i : pv.re;
        if (!(p >= 0 && p <= 1)) {
          v->isint = 1;
          return 0;
        }
      }
      v->i = u01(w, 1) < p;
      v->re = (double)v->i;
      v->isint = 1;
      break;
    }
    case TNK_RAND_INT: {
      uint64_t x = ((uint64_t)w[0] << 32) | w[1];
      /* modular, as ATen: the full 2^64 range wraps from its start */
      v->i = (int64_t)((uint64_t)a->ilo + (a->irange ? x % a->irange : x));
      v->re = (double)v->i;
      v->isint = 1;
      break;
    }
  }
  return 1;
}

/* Element k of the run is element index + k of the shape: its counter. */
static void rand_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  rand_ctx_t *c = p;
  const tnk_random_args_t *a = c->a;
  int wide = a->dst.dtype == TNK_F64 || a->dst.dtype == TNK_C128;
  int bad = 0;
  for (int64_t k = 0; k < n; k++) {
    const char *prob = a->has_prob ? ptrs[1] + k * s[1] : 0;
    tnk_val_t v;
    bad |= !draw(a, wide, index + k, prob, &v);
    char *dst = ptrs[0] + k * s[0];
    tnk_store_any(dst, a->dst.dtype, v);
    /* Rounding to a narrow float may reach the open upper bound. */
    if (a->kind == TNK_RAND_UNIFORM &&
        (a->dst.dtype == TNK_BF16 || a->dst.dtype == TNK_F16 || a->dst.dtype == TNK_F32)) {
      tnk_val_t back = a->dst.dtype == TNK_BF16  ? tnk_load_bf16(dst)
                       : a->dst.dtype == TNK_F16 ? tnk_load_f16(dst)
                                                 : tnk_load_f32(dst);
      if (back.re >= a->hi && a->hi > a->lo) {
        v.re = a->lo;
        switch (a->dst.dtype) {
          case TNK_BF16: tnk_store_bf16(dst, v); break;
          case TNK_F16: tnk_store_f16(dst, v); break;
          default: tnk_store_f32(dst, v); break;
        }
      }
    }
  }
  if (bad) c->bad = 1;
}

void tnk_random(const tnk_random_args_t *a) {
  rand_ctx_t c = {.a = a};
  tnk_iter_t it;
  int nv = a->has_prob ? 2 : 1;
  if (!tnk_iter_init(&it, &a->shape, nv, (tnk_view_t[]){a->dst, a->prob},
                     (int64_t[]){(int64_t)tnk_dtype_size(a->dst.dtype),
                                 (int64_t)tnk_dtype_size(a->prob.dtype)}))
    return;
  tnk_iter_run(&it, 4096, rand_loop, &c);
  if (c.bad && a->fault.fn)
    a->fault.fn(a->fault.ctx, a->fault.kind, a->fault.what, 0, 0, a->fault.origin);
}

/* A uniformly random permutation of 0..n-1 (Fisher-Yates): step i draws
 * Philox with counter (i, 0, offset, 0x5045524d "PERM") so the result
 * depends only on (seed, offset, n). Serial: O(n), one pass. The shuffle
 * runs on int64 values in `scratch` (n elements; may be dst when dst is
 * int64), then stores in dst's dtype. */
void tnk_randperm(const tnk_randperm_args_t *a) {
  if (a->n <= 0) return;
  int64_t *v = a->scratch;
  for (int64_t i = 0; i < a->n; i++) v[i] = i;
  const uint32_t key[2] = {(uint32_t)a->seed, (uint32_t)(a->seed >> 32)};
  for (int64_t i = a->n - 1; i > 0; i--) {
    uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)a->offset,
                       0x5045524du ^ (uint32_t)(a->offset >> 32)},
             w[4];
    tnk_philox(ctr, key, w);
    uint64_t r = ((uint64_t)w[0] << 32) | w[1];
    int64_t j = (int64_t)(r % (uint64_t)(i + 1));
    int64_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
  if ((void *)v == a->dst && a->dtype == TNK_I64) return;
  size_t esz = tnk_dtype_size(a->dtype);
  for (int64_t i = 0; i < a->n; i++)
    tnk_store_any((char *)a->dst + (size_t)i * esz, a->dtype, (tnk_val_t){.i = v[i], .isint = 1});
}
