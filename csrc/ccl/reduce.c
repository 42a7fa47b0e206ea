/* The shared-memory communicator: reduce (ccl_internal.h lists the parts). */
#include "ccl_internal.h"

/* ---- reduction of n inputs into out ---- */

static int is_half(int dt) { return dt == TNK_F16 || dt == TNK_BF16; }
int ccl_is_float(int dt) { return dt == TNK_F32 || dt == TNK_F64 || is_half(dt); }

int ccl_binary_op(tnccl_op_t op) {
  switch (op) {
    case TNCCL_SUM:
    case TNCCL_AVG: return TNK_ADD;
    case TNCCL_PRODUCT: return TNK_MUL;
    case TNCCL_MIN: return TNK_MINIMUM;
    case TNCCL_MAX: return TNK_MAXIMUM;
    case TNCCL_BAND: return TNK_BITAND;
    case TNCCL_BOR: return TNK_BITOR;
    case TNCCL_BXOR: return TNK_BITXOR;
  }
  return -1;
}

/* out = a op b over n contiguous elements of dtype (the kernel library's
 * loops, vectorised per ISA). */
static void combine(void *out, const void *a, const void *b, int64_t n, int dtype, int bop) {
  tnk_binary_args_t x = {.shape = {.ndim = 1, .sizes = {n}},
                         .out = {.data = out, .dtype = dtype, .strides = {1}},
                         .a = {.data = (void *)a, .dtype = dtype, .strides = {1}},
                         .b = {.data = (void *)b, .dtype = dtype, .strides = {1}},
                         .op = bop,
                         .dtype = dtype,
                         .alpha = 1.0,
                         .ialpha = 1};
  tnk_binary(&x);
}

/* buf /= divisor over n contiguous elements of f32 or f64: the kernel
 * library's vectorised division by a scalar operand held at the compute
 * precision (as PyTorch divides by a Python number). For f32 the result is
 * the same as the former (float)((double)x / divisor): a quotient of two
 * floats rounded to double and then to float is rounded correctly (53 >=
 * 2 * 24 + 2 bits). */
static void divide(void *buf, int64_t n, int dtype, int divisor) {
  double unused = 0; /* the scalar operand's (stride 0) view, never read */
  tnk_binary_args_t x = {.shape = {.ndim = 1, .sizes = {n}},
                         .out = {.data = buf, .dtype = dtype, .strides = {1}},
                         .a = {.data = buf, .dtype = dtype, .strides = {1}},
                         .b = {.data = &unused, .dtype = dtype, .strides = {0}},
                         .op = TNK_DIV,
                         .dtype = dtype,
                         .alpha = 1.0,
                         .ialpha = 1,
                         .scalar_operand = 2,
                         .scalar = (double)divisor};
  tnk_binary(&x);
}

/* Block conversions between the half types and fp32, round to nearest even:
 * contiguous loops over restrict pointers, which GCC vectorises (the kernel
 * library's tnk_copy converts element by element on run-time strides, and
 * its vectorised loops keep one dtype), over dtype.h's converters (this
 * file is built without F16C: their branch-free portable forms). */
/* NAME_load: d = fp32 of s; NAME_add: d += fp32 of s; NAME_store: d = s
 * rounded. */
#define HALF_LOOPS(NAME, TO_F32, FROM_F32)                                             \
  static void NAME##_load(float *restrict d, const uint16_t *restrict s, int64_t n) {  \
    for (int64_t i = 0; i < n; i++) d[i] = TO_F32(s[i]);                               \
  }                                                                                    \
  static void NAME##_add(float *restrict d, const uint16_t *restrict s, int64_t n) {   \
    for (int64_t i = 0; i < n; i++) d[i] = d[i] + TO_F32(s[i]);                        \
  }                                                                                    \
  static void NAME##_store(uint16_t *restrict d, const float *restrict s, int64_t n) { \
    for (int64_t i = 0; i < n; i++) d[i] = FROM_F32(s[i]);                             \
  }
HALF_LOOPS(bf16, tnk_bf16_to_f32, tnk_f32_to_bf16)
HALF_LOOPS(f16, tnk_f16_to_f32, tnk_f32_to_f16)

/* out[i] = op over ranks of their inputs' element i, i < n; in[j] is rank
 * (rank + j) % nranks's input. Half types take the ranks in rank order,
 * accumulate in fp32 (AVG then divides in fp32) and round once, as PyTorch
 * reduces them on CPU; an element's result does not depend on which rank
 * reduces it. The other dtypes start from this rank's input. out may be
 * in[0] (and no other input). */
void ccl_reduce_n(tnccl_comm_t *c, void *out, const char **in, int64_t n, int dtype,
                  tnccl_op_t op) {
  int bop = ccl_binary_op(op), nr = c->nranks;
  size_t esz = tnk_dtype_size(dtype);
  if (is_half(dtype)) {
    enum { B = 1024 };
    float acc[B], v[B];
    int bf = dtype == TNK_BF16, sum = op == TNCCL_SUM || op == TNCCL_AVG;
    for (int64_t i0 = 0; i0 < n; i0 += B) { /* the block is read from every input, then written */
      int64_t m = n - i0 < B ? n - i0 : B;
      for (int r = 0; r < nr; r++) {
        const uint16_t *x = (const uint16_t *)in[(r - c->rank + nr) % nr] + i0;
        if (r == 0)
          (bf ? bf16_load : f16_load)(acc, x, m);
        else if (sum) /* fused: the same fp32 additions as the kernel's */
          (bf ? bf16_add : f16_add)(acc, x, m);
        else {
          (bf ? bf16_load : f16_load)(v, x, m);
          combine(acc, acc, v, m, TNK_F32, bop);
        }
      }
      if (op == TNCCL_AVG) {
        float d = (float)nr;
        for (int64_t i = 0; i < m; i++) acc[i] = acc[i] / d;
      }
      (bf ? bf16_store : f16_store)((uint16_t *)out + i0, acc, m);
    }
    return;
  }
  if (nr == 1)
    memmove(out, in[0], (size_t)n * esz);
  else
    combine(out, in[0], in[1], n, dtype, bop);
  for (int r = 2; r < nr; r++) combine(out, out, in[r], n, dtype, bop);
  if (op != TNCCL_AVG || nr == 1) return;
  if (ccl_is_float(dtype)) {
    divide(out, n, dtype, nr);
    return;
  }
  for (int64_t i = 0; i < n; i++) { /* integers: truncating division */
    tnk_val_t v = tnk_load_any((char *)out + i * esz, dtype);
    v.i /= nr;
    v.re = (double)v.i;
    tnk_store_any((char *)out + i * esz, dtype, v);
  }
}
