/* Reduction kernels, those of csrc/aten/reduction_ops.cpp: reductions over
 * any set of dimensions of a strided tensor (tnk_reduce: sum, mean, prod,
 * max/min, all/any), max/min with indices along one dim (tnk_argreduce),
 * cumulative sum / product / log-sum-exp (tnk_scan) and cummax / cummin
 * (tnk_cumext).
 * tnk_reduce: the outputs (the kept dims) are walked by the n-dimensional
 * iterator (iter.h); each output walks the reduced index space. fp32 and
 * half inputs accumulate in double and round once, fp64 in double, integers
 * in int64 (wrapping). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "iter.h"
#include "tnk.h"
#include "vmath.h"

/* ---- reductions over dimensions ------------------------------------------------ */

static int integral(int dt) {
  return dt == TNK_U8 || dt == TNK_I8 || dt == TNK_I16 || dt == TNK_I32 || dt == TNK_I64 ||
         dt == TNK_BOOL;
}

int tnk_reduce_supported(int op, int in_dtype, int out_dtype) {
  if (op == TNK_MAX || op == TNK_MIN)
    return in_dtype == out_dtype && in_dtype != TNK_C64 && in_dtype != TNK_C128 && in_dtype >= 0 &&
           in_dtype < TNK_DTYPE_COUNT;
  if (op == TNK_ALL || op == TNK_ANY)
    return in_dtype >= 0 && in_dtype < TNK_DTYPE_COUNT && out_dtype == TNK_BOOL;
  if (op == TNK_MEAN) return tnk_floating(in_dtype) && tnk_floating(out_dtype);
  if (op != TNK_SUM && op != TNK_PROD) return 0;
  return (tnk_floating(in_dtype) && tnk_floating(out_dtype)) ||
         (integral(in_dtype) && out_dtype == TNK_I64);
}

typedef struct red_ctx {
  const tnk_reduce_args_t *a;
  int nk, nr;
  int64_t ksize[TNRT_MAX_DIMS], kin[TNRT_MAX_DIMS], kout[TNRT_MAX_DIMS];
  int64_t rsize[TNRT_MAX_DIMS], rin[TNRT_MAX_DIMS];
  int64_t rcount, outputs;
  int out_f32_contig; /* fp32 output whose kept dims are row-major contiguous */
  size_t iesz, oesz;
} red_ctx_t;

/* n outputs: output k at ptrs[1] + k * s[1], its first input at ptrs[0] +
 * k * s[0], from where it walks the reduced index space. */
static void red_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  const red_ctx_t *c = p;
  const tnk_reduce_args_t *a = c->a;
  int idt = a->in.dtype;
  int is_int = integral(idt);
  for (int64_t o = 0; o < n; o++) {
    const char *in = ptrs[0] + o * s[0];
    char *out = ptrs[1] + o * s[1];
    int prod = a->op == TNK_PROD;
    double acc = prod ? 1.0 : 0.0;
    uint64_t iacc = prod ? 1 : 0;
    int logical = a->op == TNK_ALL || a->op == TNK_ANY;
    int extreme = a->op == TNK_MAX || a->op == TNK_MIN;
    tnk_val_t best = {0, 0, 0, 0};
    int have = 0;
    int flag = a->op == TNK_ALL;               /* all: true until a zero; any: false */
    int64_t idx[TNRT_MAX_DIMS] = {0}, off = 0; /* the reduced index, its offset */
    for (int64_t r = 0; r < c->rcount; r++) {
      if (r > 0) /* the next index, last dim fastest */
        for (int d = c->nr - 1; d >= 0; d--) {
          off += c->rin[d];
          if (++idx[d] < c->rsize[d]) break;
          off -= c->rin[d] * c->rsize[d];
          idx[d] = 0;
        }
      tnk_val_t v = tnk_load_any(in + off * (int64_t)c->iesz, idt);
      if (extreme) {
        int better;
        if (v.isint)
          better = a->op == TNK_MAX ? v.i > best.i : v.i < best.i;
        else if (v.re != v.re)
          better = best.re == best.re; /* NaN wins, once */
        else
          better = best.re == best.re && (a->op == TNK_MAX ? v.re > best.re : v.re < best.re);
        if (!have || better) best = v;
        have = 1;
        continue;
      }
      if (logical) {
        int nz = v.isint ? v.i != 0 : (v.re != 0.0 || v.im != 0.0);
        if (a->op == TNK_ALL && !nz) {
          flag = 0;
          break;
        }
        if (a->op == TNK_ANY && nz) {
          flag = 1;
          break;
        }
      } else if (is_int) {
        iacc = prod ? iacc * (uint64_t)v.i : iacc + (uint64_t)v.i;
      } else {
        acc = prod ? acc * v.re : acc + v.re;
      }
    }
    if (logical) {
      *(unsigned char *)out = (unsigned char)flag;
      continue;
    }
    if (extreme) {
      tnk_store_any(out, a->out.dtype, best);
      continue;
    }
    tnk_val_t res = {0, 0, 0, 0};
    if (is_int) {
      res.i = (int64_t)iacc;
      res.isint = 1;
    } else {
      res.re = a->op == TNK_MEAN ? acc / (double)c->rcount : acc;
    }
    tnk_store_any(out, a->out.dtype, res);
  }
}

/* Contiguous runs of a floating input (fp32, bf16, fp16) for sum, mean, max
 * and min: widened to fp32 a block at a time (by the variant's conversion
 * loops) and reduced by the variant's vector bodies. Sums accumulate in
 * double, as the generic walk; max and min return NaN when any element is
 * NaN, as PyTorch does. A long run's tasks are chunks of a fixed size, so
 * the result does not depend on the thread count. */
#define RUN_BLOCK 1024
#define RUN_CHUNK ((int64_t)1 << 16)

static int run_op(int op) {
  return op == TNK_SUM || op == TNK_MEAN || op == TNK_MAX || op == TNK_MIN;
}
static int run_dtype(int dt) { return dt == TNK_F32 || dt == TNK_BF16 || dt == TNK_F16; }

/* min over n floats, NaN when any is NaN (16 independent lanes: the loop
 * vectorises) */
static float run_min_f32(const float *x, int64_t n) {
  float m[16];
  int nan = 0;
  for (int j = 0; j < 16; j++) m[j] = INFINITY;
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int j = 0; j < 16; j++) {
      float v = x[k + j];
      nan |= v != v;
      m[j] = v < m[j] ? v : m[j];
    }
  for (; k < n; k++) {
    nan |= x[k] != x[k];
    m[0] = x[k] < m[0] ? x[k] : m[0];
  }
  if (nan) return NAN;
  float r = m[0];
  for (int j = 1; j < 16; j++) r = m[j] < r ? m[j] : r;
  return r;
}

typedef struct run_part {
  double sum;
  float ext; /* max or min so far */
  int have;
} run_part_t;

typedef void (*widen_fn)(float *y, const uint16_t *x, int64_t n);

/* The configuration's bf16 or fp16 -> fp32 conversion. */
static widen_fn widen_for(int dt) {
  return dt == TNK_BF16 ? tnk_config()->loops->bf16_to_f32 : tnk_config()->loops->f16_to_f32;
}

/* Merges b (the later part of the run) into a: a NaN stays, else the
 * larger (max) or smaller (min) extreme. */
static void run_merge(int op, run_part_t *a, const run_part_t *b) {
  a->sum += b->sum;
  if (!b->have) return;
  if (!a->have || b->ext != b->ext ||
      (a->ext == a->ext && (op == TNK_MAX ? b->ext > a->ext : b->ext < a->ext)))
    a->ext = b->ext;
  a->have = 1;
}

/* Folds n contiguous elements at x into *part, a block at a time. */
static void run_reduce(int op, int dt, const char *x, int64_t n, run_part_t *part) {
  float buf[RUN_BLOCK];
  for (int64_t k = 0; k < n; k += RUN_BLOCK) {
    int64_t w = n - k < RUN_BLOCK ? n - k : RUN_BLOCK;
    const float *f = buf;
    if (dt == TNK_F32)
      f = (const float *)(const void *)x + k;
    else
      widen_for(dt)(buf, (const uint16_t *)(const void *)x + k, w);
    if (op == TNK_SUM || op == TNK_MEAN) {
      part->sum += tnk_vsum_f32_f64(f, w);
      continue;
    }
    run_part_t block = {0, op == TNK_MAX ? tnk_vmax_f32(f, w) : run_min_f32(f, w), 1};
    run_merge(op, part, &block);
  }
}

static void run_store(const red_ctx_t *c, char *out, const run_part_t *part) {
  const tnk_reduce_args_t *a = c->a;
  double v = a->op == TNK_MAX || a->op == TNK_MIN ? (double)part->ext
             : a->op == TNK_MEAN                  ? part->sum / (double)c->rcount
                                                  : part->sum;
  tnk_store_any(out, a->out.dtype, (tnk_val_t){v, 0, 0, 0});
}

/* Each output one contiguous run of rcount elements (the reduced dims
 * trail). */
static void red_runs(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  const red_ctx_t *c = p;
  for (int64_t o = 0; o < n; o++) {
    run_part_t part = {0};
    run_reduce(c->a->op, c->a->in.dtype, ptrs[0] + o * s[0], c->rcount, &part);
    run_store(c, ptrs[1] + o * s[1], &part);
  }
}

/* One long run (a full reduction) in fixed chunks across the threads. */
typedef struct run_chunks {
  const red_ctx_t *c;
  run_part_t *parts;
} run_chunks_t;

static void red_run_chunks(void *p, int64_t begin, int64_t end) {
  const run_chunks_t *rc = p;
  const tnk_reduce_args_t *a = rc->c->a;
  for (int64_t t = begin; t < end; t++) {
    int64_t k = t * RUN_CHUNK, w = rc->c->rcount - k < RUN_CHUNK ? rc->c->rcount - k : RUN_CHUNK;
    rc->parts[t] = (run_part_t){0};
    run_reduce(a->op, a->in.dtype, (const char *)a->in.data + k * (int64_t)rc->c->iesz, w,
               &rc->parts[t]);
  }
}

/* fp32/bf16/fp16 sum/mean of a contiguous input over its leading dims (bias
 * and norm weight gradients): rows of `outputs` elements added into a block of
 * double accumulators, one block of columns per task. */
#define LEAD_COLS 256
static void red_lead(void *p, int64_t begin, int64_t end) {
  const red_ctx_t *c = p;
  const tnk_reduce_args_t *a = c->a;
  int64_t cols = c->outputs;
  double acc[LEAD_COLS];
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t j0 = blk * LEAD_COLS, w = cols - j0 < LEAD_COLS ? cols - j0 : LEAD_COLS;
    for (int64_t j = 0; j < w; j++) acc[j] = 0.0;
    if (a->in.dtype == TNK_F32) {
      const float *x = (const float *)a->in.data + j0;
      for (int64_t r = 0; r < c->rcount; r++, x += cols)
        for (int64_t j = 0; j < w; j++) acc[j] += x[j];
    } else { /* bf16 / fp16: each row's block widened first */
      float buf[LEAD_COLS];
      const uint16_t *x = (const uint16_t *)a->in.data + j0;
      widen_fn widen = widen_for(a->in.dtype);
      for (int64_t r = 0; r < c->rcount; r++, x += cols) {
        widen(buf, x, w);
        for (int64_t j = 0; j < w; j++) acc[j] += buf[j];
      }
    }
    if (c->out_f32_contig) {
      float *o = (float *)a->out.data + j0;
      for (int64_t j = 0; j < w; j++)
        o[j] = (float)(a->op == TNK_MEAN ? acc[j] / (double)c->rcount : acc[j]);
      continue;
    }
    for (int64_t j = 0; j < w; j++) {
      int64_t rem = j0 + j, out_off = 0;
      for (int d = c->nk - 1; d >= 0; d--) {
        out_off += (rem % c->ksize[d]) * c->kout[d];
        rem /= c->ksize[d];
      }
      double v = a->op == TNK_MEAN ? acc[j] / (double)c->rcount : acc[j];
      tnk_store_any((char *)a->out.data + out_off * (int64_t)c->oesz, a->out.dtype,
                    (tnk_val_t){v, 0, 0, 0});
    }
  }
}

/* The input is row-major contiguous and every reduced dim comes before every
 * kept one. */
static int leading_contiguous(const tnk_reduce_args_t *a) {
  int64_t expect = 1;
  int seen_reduced = 0;
  for (int d = a->shape.ndim - 1; d >= 0; d--) {
    if (a->shape.sizes[d] != 1 && a->in.strides[d] != expect) return 0;
    expect *= a->shape.sizes[d];
    if (a->reduced[d])
      seen_reduced = 1;
    else if (seen_reduced && a->shape.sizes[d] != 1)
      return 0;
  }
  return 1;
}

/* The input is row-major contiguous and every reduced dim comes after every
 * kept one. */
static int trailing_contiguous(const tnk_reduce_args_t *a) {
  int64_t expect = 1;
  int seen_kept = 0;
  for (int d = a->shape.ndim - 1; d >= 0; d--) {
    if (a->shape.sizes[d] != 1 && a->in.strides[d] != expect) return 0;
    expect *= a->shape.sizes[d];
    if (!a->reduced[d])
      seen_kept = 1;
    else if (seen_kept && a->shape.sizes[d] != 1)
      return 0;
  }
  return 1;
}

/* The dimensions in the input's memory order, outermost first, dimensions
 * of size 1 ahead of all (as TensorIterator orders a reduction's): a
 * transposed or permuted dense input then reads as the contiguous one does,
 * through the run paths below. Stable: equal strides keep their order. */
static void order_by_input(tnk_reduce_args_t *r) {
  int nd = r->shape.ndim, perm[TNRT_MAX_DIMS], n = 0;
  for (int d = 0; d < nd; d++)
    if (r->shape.sizes[d] == 1) perm[n++] = d;
  int first = n;
  for (int d = 0; d < nd; d++)
    if (r->shape.sizes[d] != 1) perm[n++] = d;
  for (int i = first + 1; i < nd; i++)
    for (int j = i; j > first && llabs(r->in.strides[perm[j]]) > llabs(r->in.strides[perm[j - 1]]);
         j--) {
      int t = perm[j];
      perm[j] = perm[j - 1], perm[j - 1] = t;
    }
  tnk_reduce_args_t o = *r;
  for (int d = 0; d < nd; d++) {
    o.shape.sizes[d] = r->shape.sizes[perm[d]];
    o.in.strides[d] = r->in.strides[perm[d]];
    o.out.strides[d] = r->out.strides[perm[d]];
    o.reduced[d] = r->reduced[perm[d]];
  }
  *r = o;
}

void tnk_reduce(const tnk_reduce_args_t *args) {
  if (!tnk_reduce_supported(args->op, args->in.dtype, args->out.dtype)) return;
  tnk_reduce_args_t ordered = *args;
  order_by_input(&ordered);
  const tnk_reduce_args_t *a = &ordered;
  red_ctx_t c = {.a = a, .rcount = 1};
  int64_t outputs = 1;
  for (int d = 0; d < a->shape.ndim; d++) {
    if (a->reduced[d]) {
      c.rsize[c.nr] = a->shape.sizes[d];
      c.rin[c.nr++] = a->in.strides[d];
      c.rcount *= a->shape.sizes[d];
    } else {
      c.ksize[c.nk] = a->shape.sizes[d];
      c.kin[c.nk] = a->in.strides[d];
      c.kout[c.nk++] = a->out.strides[d];
      outputs *= a->shape.sizes[d];
    }
  }
  if (outputs == 0) return;
  c.iesz = tnk_dtype_size(a->in.dtype);
  c.oesz = tnk_dtype_size(a->out.dtype);
  int64_t grain = c.rcount >= 4096 ? 1 : 4096 / (c.rcount ? c.rcount : 1);
  /* the outputs: the kept dims of the input and of the output */
  tnk_shape_t kept = {.ndim = c.nk};
  tnk_view_t kv[2] = {{.data = a->in.data}, {.data = a->out.data}};
  for (int d = 0; d < c.nk; d++) {
    kept.sizes[d] = c.ksize[d];
    kv[0].strides[d] = c.kin[d];
    kv[1].strides[d] = c.kout[d];
  }
  tnk_iter_t it;
  tnk_iter_init(&it, &kept, 2, kv, (int64_t[]){(int64_t)c.iesz, (int64_t)c.oesz});
  if (run_op(a->op) && run_dtype(a->in.dtype) && c.rcount > 0 && trailing_contiguous(a)) {
    int64_t chunks = (c.rcount + RUN_CHUNK - 1) / RUN_CHUNK;
    if (outputs == 1 && chunks > 1) {
      run_part_t local[16];
      run_chunks_t rc = {&c, chunks <= 16 ? local : malloc(sizeof(run_part_t) * (size_t)chunks)};
      if (rc.parts) { /* (without memory: one task, below) */
        tnk_parallel_for(chunks, 1, red_run_chunks, &rc);
        for (int64_t t = 1; t < chunks; t++) run_merge(a->op, &rc.parts[0], &rc.parts[t]);
        run_store(&c, a->out.data, &rc.parts[0]);
        if (rc.parts != local) free(rc.parts);
        return;
      }
    }
    tnk_iter_run(&it, grain, red_runs, &c);
    return;
  }
  if ((a->op == TNK_SUM || a->op == TNK_MEAN) && run_dtype(a->in.dtype) && c.rcount > 1 &&
      leading_contiguous(a)) {
    c.outputs = outputs;
    c.out_f32_contig = a->out.dtype == TNK_F32;
    int64_t expect = 1;
    for (int d = c.nk - 1; d >= 0; expect *= c.ksize[d], d--)
      if (c.ksize[d] != 1 && c.kout[d] != expect) c.out_f32_contig = 0;
    int64_t blocks = (outputs + LEAD_COLS - 1) / LEAD_COLS;
    int64_t work = c.rcount * LEAD_COLS;
    tnk_parallel_for(blocks, work >= 65536 ? 1 : 65536 / work + 1, red_lead, &c);
    return;
  }
  tnk_iter_run(&it, grain, red_loop, &c);
}

/* ---- max/min with indices ------------------------------------------------------ */

int tnk_argreduce_supported(int dtype) { return tnk_real_dtype(dtype); }

static void argred_range(void *p, int64_t begin, int64_t end) {
  const tnk_argreduce_args_t *a = p;
  int dt = a->dtype;
  size_t esz = tnk_dtype_size(dt);
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / a->inner, i = r % a->inner;
    const char *base = (const char *)a->in + (size_t)(o * a->len * a->inner + i) * esz;
    int64_t best = 0;
    if (tnk_floating(dt)) {
      double bv = tnk_ldf(base, dt, 0);
      for (int64_t k = 1; k < a->len && !isnan(bv); k++) {
        double v = tnk_ldf(base, dt, k * a->inner);
        if (isnan(v) || (a->is_max ? v > bv : v < bv)) {
          bv = v;
          best = k;
        }
      }
    } else {
      int64_t bv = tnk_load_any(base, dt).i;
      for (int64_t k = 1; k < a->len; k++) {
        int64_t v = tnk_load_any(base + k * a->inner * (int64_t)esz, dt).i;
        if (a->is_max ? v > bv : v < bv) {
          bv = v;
          best = k;
        }
      }
    }
    ((int64_t *)a->indices)[r] = best;
    if (a->values)
      memcpy((char *)a->values + r * (int64_t)esz, base + best * a->inner * (int64_t)esz, esz);
  }
}

void tnk_argreduce(const tnk_argreduce_args_t *a) {
  int64_t len = a->len > 0 ? a->len : 1;
  tnk_parallel_for(a->outer * a->inner, 16384 / len > 1 ? 16384 / len : 1, argred_range, (void *)a);
}

/* ---- cumulative sum / product ---------------------------------------------------- */

int tnk_scan_supported(int in_dtype, int out_dtype) {
  if (tnk_floating(in_dtype)) return tnk_floating(out_dtype);
  return tnk_real_dtype(in_dtype) && (out_dtype == TNK_I64 || out_dtype == in_dtype);
}

/* log(e^a + e^b) without overflow; equal infinities stay themselves, NaN
 * propagates (a comparison with NaN picks it as the maximum). */
static double log_add_exp(double a, double b) {
  double mx = a > b ? a : b, mn = a > b ? b : a;
  if (mn == -INFINITY || (mn == mx && isinf(mx))) return mx;
  return mx + log1p(exp(mn - mx));
}

static void scan_range(void *p, int64_t begin, int64_t end) {
  const tnk_scan_args_t *a = p;
  int fl = tnk_floating(a->in_dtype), prod = a->op == TNK_SCAN_PROD;
  size_t isz = tnk_dtype_size(a->in_dtype), osz = tnk_dtype_size(a->out_dtype);
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / a->inner, i = r % a->inner;
    int64_t off = o * a->len * a->inner + i;
    double acc = a->op == TNK_SCAN_LOGSUMEXP ? -INFINITY : prod ? 1.0 : 0.0;
    int64_t iacc = prod ? 1 : 0;
    for (int64_t k = 0; k < a->len; k++, off += a->inner) {
      if (fl) {
        double v = tnk_ldf(a->in, a->in_dtype, off);
        acc = a->op == TNK_SCAN_LOGSUMEXP ? log_add_exp(acc, v) : prod ? acc * v : acc + v;
        tnk_stf(a->out, a->out_dtype, off, acc);
      } else {
        int64_t v = tnk_load_any((const char *)a->in + off * (int64_t)isz, a->in_dtype).i;
        iacc = prod ? (int64_t)((uint64_t)iacc * (uint64_t)v)
                    : (int64_t)((uint64_t)iacc + (uint64_t)v);
        tnk_store_any((char *)a->out + off * (int64_t)osz, a->out_dtype,
                      (tnk_val_t){(double)iacc, 0, iacc, 1});
      }
    }
  }
}

void tnk_scan(const tnk_scan_args_t *a) {
  if (!tnk_scan_supported(a->in_dtype, a->out_dtype) || a->op < TNK_SCAN_SUM ||
      a->op > TNK_SCAN_LOGSUMEXP || (a->op == TNK_SCAN_LOGSUMEXP && !tnk_floating(a->in_dtype)))
    return;
  int64_t len = a->len > 0 ? a->len : 1;
  tnk_parallel_for(a->outer * a->inner, 16384 / len > 1 ? 16384 / len : 1, scan_range, (void *)a);
}

/* ---- cummax / cummin --------------------------------------------------------------- */

int tnk_cumext_supported(int dtype) { return tnk_real_dtype(dtype); }

static void cumext_range(void *p, int64_t begin, int64_t end) {
  const tnk_cumext_args_t *a = p;
  const int fl = tnk_floating(a->dtype);
  const size_t esz = tnk_dtype_size(a->dtype);
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / a->inner, i = r % a->inner;
    int64_t off = o * a->len * a->inner + i, idx = 0;
    const char *best = (const char *)a->in + off * (int64_t)esz;
    double bf = fl ? tnk_ldf(a->in, a->dtype, off) : 0;
    int64_t bi = fl ? 0 : tnk_load_any(best, a->dtype).i;
    for (int64_t k = 0; k < a->len; k++, off += a->inner) {
      const char *x = (const char *)a->in + off * (int64_t)esz;
      int take;
      if (fl) {
        double v = tnk_ldf(a->in, a->dtype, off);
        take = isnan(v) || (!isnan(bf) && (a->is_max ? v >= bf : v <= bf));
        if (take) bf = v;
      } else {
        int64_t v = tnk_load_any(x, a->dtype).i;
        take = a->is_max ? v >= bi : v <= bi;
        if (take) bi = v;
      }
      if (take) {
        best = x;
        idx = k;
      }
      memcpy((char *)a->values + off * (int64_t)esz, best, esz);
      a->indices[off] = idx;
    }
  }
}

void tnk_cumext(const tnk_cumext_args_t *a) {
  if (!tnk_cumext_supported(a->dtype) || a->len <= 0) return;
  tnk_parallel_for(a->outer * a->inner, 16384 / a->len > 1 ? 16384 / a->len : 1, cumext_range,
                   (void *)a);
}
