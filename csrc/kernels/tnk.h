/* TorchNeuron kernel library (tnk): the math the software NeuronCore runs.
 * C11, no torch headers. Kernels take plain descriptors (pointers, sizes,
 * strides in elements, dtype) and are pure functions of them: they are safe
 * to call from any thread and own no memory. Parallelism goes through the
 * range function installed with tnk_set_parallel (serial by default). */
#ifndef TNK_H
#define TNK_H

#include <stddef.h>
#include <stdint.h>

#include "../runtime/tnrt.h" /* the limits and fault kinds (TNRT_MAX_DIMS, TNRT_FAULT_*) */
#include "eltwise_ops.h"     /* the element-wise op tables */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tnk_dtype {
  TNK_BOOL = 0,
  TNK_U8,
  TNK_I8,
  TNK_I16,
  TNK_I32,
  TNK_I64,
  TNK_F16,
  TNK_BF16,
  TNK_F32,
  TNK_F64,
  TNK_C64,
  TNK_C128,
  TNK_DTYPE_COUNT
} tnk_dtype_t;

size_t tnk_dtype_size(tnk_dtype_t dt);

/* ISA variants. tnk_cpu_features() is a mask of what the CPU has;
 * tnk_isa() the variant chosen for this process (TORCH_NEURONX_ISA forces
 * "reference", "avx2" or "avx512" when the CPU has it). */
enum { TNK_ISA_REFERENCE = 0, TNK_ISA_AVX2 = 1, TNK_ISA_AVX512 = 2 };
/* Extra feature bit of tnk_cpu_features(): AVX512-BF16 dot products (the
 * bf16 GEMM micro-kernel, used with the avx512 ISA). */
enum { TNK_FEAT_AVX512BF16 = 4 };
/* AMX with bf16 tiles (Intel Sapphire Rapids and later): the bf16 GEMM
 * runs on them when the OS grants the tile state and the tiles pass a
 * self-test (TORCH_NEURONX_AMX=0 turns that off). */
enum { TNK_FEAT_AMX_BF16 = 8 };
/* AVX512-VNNI (the int8 GEMM's dot product, with the avx512 ISA). */
enum { TNK_FEAT_AVX512VNNI = 16 };
/* Whether this process's bf16 GEMMs may use AMX tiles, decided once on the
 * first call: the CPU has AMX-BF16 (TORCH_NEURONX_AMX=force tries the tiles
 * even where CPUID says it has not, which exercises the guard), the
 * variable is not 0, the OS grants the tile state, and one small product on
 * tiles gives the exact answer without a fault. When the CPU reports AMX but
 * the self-test fails, one warning goes to stderr and the bf16 GEMM stays
 * on the dot-product path. */
typedef enum {
  TNK_AMX_IN_USE = 0,
  TNK_AMX_ABSENT,      /* the CPU has no AMX-BF16 */
  TNK_AMX_OFF,         /* TORCH_NEURONX_AMX=0 */
  TNK_AMX_NOT_GRANTED, /* arch_prctl(ARCH_REQ_XCOMP_PERM) refused */
  TNK_AMX_FAULTED,     /* the self-test raised a signal */
  TNK_AMX_WRONG,       /* the self-test's product was wrong */
  TNK_AMX_NOT_BUILT    /* not an x86-64 build */
} tnk_amx_state_t;
tnk_amx_state_t tnk_amx_state(void);
/* the state in words, with the signal when the self-test faulted */
const char *tnk_amx_status(void);
/* tnk_amx_state() == TNK_AMX_IN_USE */
int tnk_amx_usable(void);
int tnk_cpu_features(void);
int tnk_isa(void);
const char *tnk_isa_name(int isa);
/* What this process's bf16 GEMMs run on: "amx", "avx512-bf16" or "fp32". */
const char *tnk_bf16_gemm_kernel(void);
/* Peak arithmetic rate, measured by instruction throughput (benchmarks,
 * about 0.3 s): every kernel thread at once runs 12 independent
 * accumulator chains of one instruction; returns the threads' flops per
 * second summed, 0 where the CPU lacks the instruction. Call it from a
 * stream task so that it runs on the kernels' threads. */
enum {
  TNK_PEAK_F32_FMA256 = 0,
  TNK_PEAK_F32_FMA512 = 1,
  TNK_PEAK_BF16_DOT512 = 2,
  TNK_PEAK_BF16_AMX = 3,    /* TDPBF16PS on tiles: 16x16x32 multiply-adds */
  TNK_PEAK_I8_VNNI512 = 4,  /* VPDPBUSD: 64 int8 multiply-adds (ops: 2 per) */
  TNK_PEAK_I16_MADD512 = 5, /* VPMADDWD + VPADDD: 32 int16 multiply-adds */
  TNK_PEAK_I16_MADD256 = 6
};
double tnk_measure_peak(int kind);
/* Seconds one libc memcpy of `bytes` takes, split evenly over the kernel
 * threads as the kernels split their work: the memory-bandwidth anchor the
 * benchmarks compare memory-bound kernels with. */
double tnk_time_memcpy(void *dst, const void *src, int64_t bytes);

typedef void (*tnk_range_fn)(void *ctx, int64_t begin, int64_t end);
typedef void (*tnk_parallel_fn)(int64_t n, int64_t grain, tnk_range_fn fn, void *ctx);
/* Installs the thread pool used by every kernel. Call once at start-up. */
void tnk_set_parallel(tnk_parallel_fn fn);
/* How many threads the installed range function runs on (1 by default):
 * kernels size their work split with it. */
void tnk_set_num_threads(int n);
int tnk_num_threads(void);
void tnk_parallel_for(int64_t n, int64_t grain, tnk_range_fn fn, void *ctx);

/* A strided view: element (i0..in) lives at data + sum(ik * strides[k]) *
 * element size. Strides may be 0 (broadcast) or negative. */
typedef struct tnk_view {
  void *data;
  int32_t dtype;
  int32_t pad_;
  int64_t strides[TNRT_MAX_DIMS];
} tnk_view_t;

/* Shape shared by the views of one operation. */
typedef struct tnk_shape {
  int32_t ndim;
  int32_t pad_;
  int64_t sizes[TNRT_MAX_DIMS];
} tnk_shape_t;

/* Merges adjacent dimensions that are contiguous in every view, drops size-1
 * dimensions. Keeps numel; returns the new ndim. */
int tnk_coalesce(tnk_shape_t *shape, tnk_view_t *views, int nviews);
int64_t tnk_numel(const tnk_shape_t *shape);

/* ---- copy / cast / fill ------------------------------------------------ */

/* dst[i] = (dst dtype) src[i] for every index of shape. Views must not
 * partially overlap. */
typedef struct tnk_copy_args {
  tnk_shape_t shape;
  tnk_view_t dst, src;
} tnk_copy_args_t;
void tnk_copy(const tnk_copy_args_t *a);
/* Up to three copies in one launch, in order (torch.cat's inputs into their
 * slices of the output: a decode step's KV-cache cat is one launch). */
typedef struct tnk_copy_batch_args {
  int32_t n;
  tnk_copy_args_t copy[3];
} tnk_copy_batch_args_t;
void tnk_copy_batch(const tnk_copy_batch_args_t *a);

/* A scalar in the widest form of each kind; the kernel converts once. */
typedef struct tnk_scalar {
  double f, fi; /* real and imaginary part */
  int64_t i;
  int32_t is_integral, is_bool;
} tnk_scalar_t;

typedef struct tnk_fill_args {
  tnk_shape_t shape;
  tnk_view_t dst;
  tnk_scalar_t value;
} tnk_fill_args_t;
void tnk_fill(const tnk_fill_args_t *a);

/* ---- random (Philox4x32-10, counter = (element index, offset)) --------- */

/* ---- faults ------------------------------------------------------------------ */

/* Bad data found while a kernel runs (an index out of range) is skipped and
 * reported through the sink, which may be empty (fn NULL). Kernels never
 * touch memory outside their views whatever the data. */
typedef void (*tnk_fault_fn)(void *ctx, int kind, const char *what, int64_t value, int64_t bound,
                             uint32_t origin);
typedef struct tnk_fault {
  tnk_fault_fn fn;
  void *ctx;
  const char *what; /* static string naming the op */
  int32_t kind;     /* TNRT_FAULT_*, passed to fn: how the caller reports it */
  uint32_t origin;  /* passed to fn: who launched the work (the runtime's
                       thread token) */
} tnk_fault_t;

typedef enum tnk_rand_kind {
  TNK_RAND_UNIFORM = 0, /* a in [lo, hi) */
  TNK_RAND_NORMAL,      /* mean a.lo, std a.hi */
  TNK_RAND_BERNOULLI,   /* p = a.lo, or per element from prob view */
  TNK_RAND_INT,         /* integer in [ilo, ilo + irange) */
  TNK_RAND_EXPONENTIAL, /* rate a.lo (> 0) */
} tnk_rand_kind_t;

typedef struct tnk_random_args {
  tnk_shape_t shape;
  tnk_view_t dst;
  tnk_view_t prob; /* TNK_RAND_BERNOULLI with has_prob: same shape as dst */
  int32_t kind, has_prob;
  uint64_t seed, offset;
  double lo, hi;
  int64_t ilo;
  uint64_t irange;
  /* a probability outside [0, 1] (or NaN) in prob: reported once, as
   * TNRT_FAULT_ASSERT (value and bound 0); that element gets 0 */
  tnk_fault_t fault;
} tnk_random_args_t;
void tnk_random(const tnk_random_args_t *a);
/* A random permutation of 0..n-1 into contiguous dst (any real dtype that
 * holds n), shuffled in `scratch` (n int64; may alias dst for int64). */
typedef struct tnk_randperm_args {
  void *dst;
  int64_t *scratch;
  int64_t n;
  int32_t dtype, pad_;
  uint64_t seed, offset;
} tnk_randperm_args_t;
void tnk_randperm(const tnk_randperm_args_t *args);
/* One Philox4x32-10 block; exposed for tests. */
void tnk_philox(uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Reports fault (kind and what as given, value and bound 0) when the bool
 * at flag is false: an asynchronous device-side assertion. */
typedef struct tnk_assert_args {
  const void *flag;
  tnk_fault_t fault;
} tnk_assert_args_t;
void tnk_assert(const tnk_assert_args_t *a);

/* ---- elementwise binary ------------------------------------------------ */

/* The ops and their loops and references: eltwise_ops.h, one row each. */
#define TNK_BINARY_ENUM_(ID, name, kind, kernel, ref) TNK_##ID,
typedef enum tnk_binary_op { TNK_BINARY_OPS(TNK_BINARY_ENUM_) TNK_BINARY_OP_COUNT } tnk_binary_op_t;

/* out = op(a, b) elementwise; all three views have dtype `dtype` (the caller
 * promotes and casts); broadcast inputs have stride 0. Supported dtypes:
 * u8, i8, i16, i32, i64 (wrapping arithmetic, no TNK_DIV), f16, bf16, f32,
 * f64; half types compute in fp32 and round once. An unsupported (op, dtype)
 * pair (tnk_binary_supported) writes nothing. */
typedef struct tnk_binary_args {
  tnk_shape_t shape;
  tnk_view_t out, a, b;
  int32_t op, dtype;
  double alpha;       /* for floating dtypes */
  int64_t ialpha;     /* for integer dtypes */
  double beta, gamma; /* more parameters of activation backward ops */
  tnk_fault_t fault;  /* integer division by zero (value and bound 0) */
  /* 1 (a) or 2 (b): that operand is the scalar `scalar`, read at the compute
   * precision instead of from its (stride 0) view, so that a half-type op
   * with a Python number (x * 0.1) does not round the number to the
   * storage type first; 0: none. Floating arithmetic only (not comparisons). */
  int32_t scalar_operand;
  double scalar;
  /* 1 (a) or 2 (b): that operand is one element held in `inline_value`
   * (a CPU scalar's bytes in `dtype`, copied into the descriptor at launch,
   * its view's strides 0 and data ignored); 0: none. The descriptor is all
   * the kernel reads besides the views' memory, wherever it was copied. */
  int32_t inline_operand;
  unsigned char inline_value[16] __attribute__((aligned(16)));
} tnk_binary_args_t;
int tnk_binary_supported(int op, int dtype);
void tnk_binary(const tnk_binary_args_t *args);

/* ---- elementwise unary ------------------------------------------------- */

#define TNK_UNARY_ENUM_(ID, name, kernel, ref) TNK_##ID,
typedef enum tnk_unary_op { TNK_UNARY_OPS(TNK_UNARY_ENUM_) TNK_UNARY_OP_COUNT } tnk_unary_op_t;

/* out = op(in) elementwise, same floating dtype (f16, bf16, f32, f64) for
 * both; half types compute in fp32 and round once. TNK_NEG and TNK_ABS also
 * take integer dtypes (wrapping). */
typedef struct tnk_unary_args {
  tnk_shape_t shape;
  tnk_view_t out, in;
  int32_t op, dtype;
  double p0, p1, p2; /* op parameters */
} tnk_unary_args_t;
/* Bitwise not of an integer or bool view (same layout as tnk_unary). */
void tnk_bitwise_not(const tnk_unary_args_t *args);
int tnk_unary_supported(int op, int dtype);
void tnk_unary(const tnk_unary_args_t *args);

/* Complex elementwise math on interleaved (re, im) c64/c128 views, as C99
 * <complex.h> computes it (which is what std::complex uses on the CPU).
 * The output has the input's dtype, except abs and angle: the real dtype of
 * the same precision. Same layout rules as tnk_unary; args->dtype is the
 * input's. */
#define TNK_COMPLEX_ENUM_(ID, name, out, kernel, ref) TNK_CX_##ID,
typedef enum tnk_complex_op { TNK_COMPLEX_OPS(TNK_COMPLEX_ENUM_) TNK_CX_OP_COUNT } tnk_complex_op_t;
/* Whether op's output is real (abs, angle: the REAL rows of the table). */
#define TNK_CX_REAL_CASE_(ID, name, out, kernel, ref) TNK_CX_REAL_##out##_(TNK_CX_##ID)
#define TNK_CX_REAL_REAL_(OP) \
  case OP: return 1;
#define TNK_CX_REAL_SAME_(OP)
static inline int tnk_complex_real_output(int op) {
  switch (op) { TNK_COMPLEX_OPS(TNK_CX_REAL_CASE_) default : return 0; }
}
int tnk_complex_unary_supported(int op, int dtype, int out_dtype);
void tnk_complex_unary(const tnk_unary_args_t *args);

/* Floating-point classification into a bool output: out = pred(in). */
#define TNK_CLASSIFY_ENUM_(ID, name, kernel, ref) TNK_##ID,
typedef enum tnk_classify_op {
  TNK_CLASSIFY_OPS(TNK_CLASSIFY_ENUM_) TNK_CLASSIFY_OP_COUNT
} tnk_classify_op_t;
/* Same layout as tnk_unary_args_t; out.dtype is TNK_BOOL, dtype the input's
 * floating dtype. */
void tnk_classify(const tnk_unary_args_t *args);

/* ---- elementwise ternary (optimizer arithmetic) ------------------------- */

typedef enum tnk_ternary_op {
  TNK_ADDCMUL = 0, /* a + value * b * c */
  TNK_ADDCDIV,     /* a + value * b / c */
  TNK_LERP,        /* a + value * (b - a) (c unused) */
  TNK_LERP_TENSOR, /* a + c * (b - a): the weight per element */
  TNK_TERNARY_OP_COUNT
} tnk_ternary_op_t;

/* Floating dtypes only, all views of `dtype`, broadcast by stride 0. */
typedef struct tnk_ternary_args {
  tnk_shape_t shape;
  tnk_view_t out, a, b, c;
  int32_t op, dtype;
  double value;
} tnk_ternary_args_t;
int tnk_ternary_supported(int op, int dtype);
void tnk_ternary(const tnk_ternary_args_t *args);

/* ---- softmax --------------------------------------------------------------- */

/* Softmax over one dimension of a contiguous-or-strided tensor: rows of
 * length `len` whose elements are `stride` apart; row r starts at element
 * offset `row_offset(r)` computed from outer (dims before) and inner (dims
 * after) sizes: offset = (r / inner) * len * inner + r % inner when the
 * tensor is contiguous, which is the only layout supported (the caller
 * passes contiguous tensors). Computes in fp32 (fp64 for f64). */
typedef struct tnk_softmax_args {
  void *out;
  const void *in;   /* forward: input; backward: output of forward */
  const void *grad; /* backward only: grad of the output */
  int64_t outer, len, inner;
  int32_t dtype, out_dtype; /* out_dtype may be f32 for half inputs */
  int32_t log, backward;
} tnk_softmax_args_t;
int tnk_softmax_supported(int dtype, int out_dtype);
void tnk_softmax(const tnk_softmax_args_t *args);

/* ---- layer norm ------------------------------------------------------------ */

/* Over `rows` contiguous rows of length n, all of one floating dtype:
 * forward y = (x - mean) * rstd * w + b, saving mean and rstd per row;
 * backward gx, gw, gb (each NULL when not wanted). w/b may be NULL. */
typedef struct tnk_layer_norm_args {
  int64_t rows, n;
  int32_t dtype, backward;
  double eps;
  const void *x, *w, *b, *g; /* g: grad of y (backward) */
  void *y, *mean, *rstd;     /* forward outputs; mean/rstd inputs backward */
  void *gx, *gw, *gb;        /* backward outputs */
} tnk_layer_norm_args_t;
int tnk_layer_norm_supported(int dtype);
void tnk_layer_norm(const tnk_layer_norm_args_t *args);

/* ---- reductions -------------------------------------------------------------- */

typedef enum tnk_reduce_op {
  TNK_SUM = 0,
  TNK_MEAN,
  TNK_ALL,
  TNK_ANY, /* any input dtype, bool output */
  TNK_MAX,
  TNK_MIN,  /* real dtypes, output dtype = input dtype; NaN wins */
  TNK_PROD, /* as TNK_SUM, multiplying */
  TNK_REDUCE_OP_COUNT
} tnk_reduce_op_t;

/* out[i] = reduce over the dims with reduced[d] = 1 of in, where out has
 * the input's shape with reduced dims of size 1 (strides of out for those
 * dims are ignored). Accumulates in fp32 (fp64 for f64, int64 for integers);
 * out may have another dtype than in (e.g. sum of bf16 into f32). */
typedef struct tnk_reduce_args {
  tnk_shape_t shape; /* input shape */
  tnk_view_t out, in;
  uint8_t reduced[TNRT_MAX_DIMS];
  int32_t op;
} tnk_reduce_args_t;
int tnk_reduce_supported(int op, int in_dtype, int out_dtype);
void tnk_reduce(const tnk_reduce_args_t *args);

/* ---- selection and index-free data movement -------------------------------- */

/* out = cond ? a : b elementwise; cond is bool; a, b, out share a dtype of
 * any size (moved as bytes); broadcast by stride 0. */
typedef struct tnk_where_args {
  tnk_shape_t shape;
  tnk_view_t out, cond, a, b;
} tnk_where_args_t;
void tnk_where(const tnk_where_args_t *args);

/* Lower (tril) or upper (triu) triangle of the last two dims of a
 * contiguous batch of rows x cols matrices; the rest is zero. out may be in. */
typedef struct tnk_tri_args {
  void *out;
  const void *in;
  int64_t batch, rows, cols, diagonal;
  int32_t dtype, upper;
} tnk_tri_args_t;
void tnk_tri(const tnk_tri_args_t *args);

/* out[i] = start + i * step for i < n, into a contiguous tensor of dtype
 * (integers computed exactly in int64, floats in double). */
typedef struct tnk_arange_args {
  void *out;
  int64_t n, istart, istep;
  double start, step;
  int32_t dtype, integral;
} tnk_arange_args_t;
void tnk_arange(const tnk_arange_args_t *args);

/* ---- indexing ------------------------------------------------------------------ */

/* Row indexing with up to TNK_MAX_INDICES index tensors. The indexed
 * tensor is contiguous [outer, size[0], ..., size[nindex-1], inner]; the
 * dense one is contiguous [outer, n, inner]; index k holds n entries (i32 or
 * i64, index_stride[k] apart, 0 to broadcast). Entry j addresses the row
 * (index[0][j], ..., index[nindex-1][j]). An index must lie in [0, size)
 * ([-size, size) with wrap, negatives counting from the end) or it is a
 * fault. Modes:
 *   TNK_INDEX_SELECT (index_select, advanced indexing): dense[o, j, i] =
 *     indexed[o, row j, i]; a faulting row is zero-filled. Any dtype.
 *   TNK_INDEX_ADD (index_add, index_put with accumulate, embedding
 *     backward): indexed[o, row j, i] += alpha * dense[o, j, i] in index order
 *     (deterministic), skipping index == skip when has_skip. Real dtypes.
 *   TNK_INDEX_PUT (index_put): indexed[o, row j, i] = dense[o, j, i]; for a
 *     row given twice the last wins. Any dtype. */
#define TNK_MAX_INDICES 8
enum { TNK_INDEX_SELECT = 0, TNK_INDEX_ADD, TNK_INDEX_PUT };
typedef struct tnk_index_args {
  void *indexed, *dense;
  const void *index[TNK_MAX_INDICES];
  int64_t size[TNK_MAX_INDICES], index_stride[TNK_MAX_INDICES];
  int64_t outer, n, inner, skip;
  int32_t nindex, dtype, index_dtype, mode, has_skip, wrap;
  double alpha;
  tnk_fault_t fault;
} tnk_index_args_t;
int tnk_index_supported(int dtype, int index_dtype, int mode);
void tnk_index(const tnk_index_args_t *args);

/* gather / scatter along `dim` over the index tensor's shape (int64 index):
 *   TNK_GATHER:        out[p] = src[p with p[dim] = index[p]]
 *   TNK_SCATTER:       out[p with p[dim] = index[p]] = src[p]
 *   TNK_SCATTER_ADD:   out[p with p[dim] = index[p]] += src[p]
 *   TNK_SCATTER_VALUE: out[p with p[dim] = index[p]] = value
 *   TNK_SCATTER_MUL / _AMAX / _AMIN: out[...] = out[...] * / max / min src[p]
 *     (real dtypes; max and min propagate NaN)
 * `indexed` is src for gather and out for the scatters; dim_size is the size
 * of its dimension dim. Views give per-dimension element strides over the
 * index shape (the indexed view's stride at dim is its stride along dim).
 * Writes along one dim happen in index order (last write wins). */
enum {
  TNK_GATHER = 0,
  TNK_SCATTER,
  TNK_SCATTER_ADD,
  TNK_SCATTER_VALUE,
  TNK_SCATTER_MUL,
  TNK_SCATTER_AMAX,
  TNK_SCATTER_AMIN
};
typedef struct tnk_gather_args {
  tnk_shape_t shape;
  tnk_view_t indexed, dense, index;
  int32_t dim, mode;
  int64_t dim_size;
  tnk_scalar_t value;
  tnk_fault_t fault;
} tnk_gather_args_t;
int tnk_gather_supported(int mode, int dtype);
void tnk_gather(const tnk_gather_args_t *args);

/* Negative log likelihood over contiguous input [n, c] (log-probabilities)
 * and int64 target [n], optional weight [c]; targets equal to ignore_index
 * count zero. reduction 0 none, 1 mean, 2 sum.
 * forward: out = per-sample losses [n] (none) or one scalar; total_weight =
 *   the sum of weights of counted targets (a scalar of dtype).
 * backward: grad_input [n, c] = -weight[t] * g (g = grad[i] for none,
 *   grad[0] / total_weight for mean, grad[0] for sum) at column t, else 0.
 * A target outside [0, c) is a fault. Floating dtypes, accumulation in
 * double. */
typedef struct tnk_nll_args {
  const void *input, *target, *weight, *grad;
  void *out, *total_weight;
  int64_t n, c, ignore_index;
  int32_t dtype, reduction, backward, pad_;
  tnk_fault_t fault;
} tnk_nll_args_t;
int tnk_nll_supported(int dtype);
void tnk_nll(const tnk_nll_args_t *args);

/* Connectionist temporal classification (Graves et al. 2006) over
 * log-probabilities [T, N, C] (contiguous, f32 or f64). lengths holds three
 * int64 rows of N: input lengths (<= T), target lengths, and where each
 * sample's targets start in targets (int64). Sample n's extended label
 * sequence has L_n = 2 * target_length + 1 entries (blank, t0, blank, t1,
 * ..., blank); log_alpha and log_beta are [N, T, L] with L >= every L_n,
 * -inf where unused. Recursions run in double.
 * forward: log_alpha, and out = the negative log-likelihood [N] (inf when
 *   no alignment exists; 0 for an empty input with an empty target).
 * backward: log_beta (scratch), and out = grad [T, N, C] of the loss
 *   weighted by grad [N] (given the forward's nll and log_alpha): exp(lp)
 *   - exp(log sum over s with label c of alpha+beta + nll - lp), 0 for
 *   t >= the input length; for a sample whose nll is inf, all 0 when
 *   zero_infinity, else NaN below its input length (as CPU's). A target
 *   outside [0, C) is a fault (that sample is skipped). */
typedef struct tnk_ctc_args {
  const void *log_probs, *targets, *lengths, *grad, *nll;
  void *log_alpha, *log_beta, *out;
  int64_t T, N, C, L, blank;
  int32_t dtype, backward, zero_infinity, pad_;
  tnk_fault_t fault;
} tnk_ctc_args_t;
int tnk_ctc_supported(int dtype);
void tnk_ctc(const tnk_ctc_args_t *args);

/* max/min with indices along one dim of a contiguous [outer, len, inner]
 * tensor: indices (int64) and, when values is not NULL, values of dtype,
 * both contiguous [outer, inner]. The first extreme wins; NaN is the
 * extreme (the first NaN). Real dtypes; len > 0. */
typedef struct tnk_argreduce_args {
  const void *in;
  void *values, *indices;
  int64_t outer, len, inner;
  int32_t dtype, is_max;
} tnk_argreduce_args_t;
int tnk_argreduce_supported(int dtype);
void tnk_argreduce(const tnk_argreduce_args_t *args);

/* Inclusive cumulative sum, product or log-sum-exp along one dim of
 * contiguous [outer, len, inner] tensors; out dtype may differ (integers into
 * int64). Floating dtypes accumulate in double, integers in int64; log-sum-exp
 * (floating only) adds in log space, log(e^a + e^b) = max + log1p(e^(min-max)). */
enum { TNK_SCAN_SUM = 0, TNK_SCAN_PROD = 1, TNK_SCAN_LOGSUMEXP = 2 };
typedef struct tnk_scan_args {
  const void *in;
  void *out;
  int64_t outer, len, inner;
  int32_t in_dtype, out_dtype, op, pad_;
} tnk_scan_args_t;
int tnk_scan_supported(int in_dtype, int out_dtype);
void tnk_scan(const tnk_scan_args_t *args);

/* Running maximum (is_max) or minimum with its index along one dim of a
 * contiguous [outer, len, inner] tensor into contiguous values (same dtype)
 * and int64 indices, as PyTorch's CPU kernel: a later equal element takes
 * over (its index is reported), a NaN takes over and holds until the next
 * NaN. Real dtypes. */
typedef struct tnk_cumext_args {
  const void *in;
  void *values;
  int64_t *indices;
  int64_t outer, len, inner;
  int32_t dtype, is_max;
} tnk_cumext_args_t;
int tnk_cumext_supported(int dtype);
void tnk_cumext(const tnk_cumext_args_t *args);

/* out[i] = (elements[i] in test[0..m)) != invert, contiguous, one real
 * dtype; bool out. */
typedef struct tnk_isin_args {
  const void *elements, *test;
  void *out;
  int64_t n, m;
  int32_t dtype, invert;
} tnk_isin_args_t;
int tnk_isin_supported(int dtype);
void tnk_isin(const tnk_isin_args_t *args);

/* Positions of the nonzero elements of a contiguous tensor of any dtype
 * with shape sizes[0..ndim): tnk_count_nonzero writes the count (int64) to
 * *count; tnk_nonzero writes the row-major coordinates, [count, ndim] int64,
 * in order (count must be the value counted). */
typedef struct tnk_nonzero_args {
  const void *in;
  void *out;
  int64_t *count;
  int64_t numel, sizes[TNRT_MAX_DIMS];
  int32_t ndim, dtype;
} tnk_nonzero_args_t;
void tnk_count_nonzero(const tnk_nonzero_args_t *args);
void tnk_nonzero(const tnk_nonzero_args_t *args);

/* Sort or top-k of contiguous rows [rows, len] into contiguous values
 * (dtype) and int64 indices, [rows, k] each. The order is stable (equal
 * elements keep their input order); NaN sorts above every number, as in
 * PyTorch. descending selects the largest k (topk largest=True) or sorts
 * high to low. Real dtypes. */
typedef struct tnk_sort_args {
  const void *in;
  void *values, *indices;
  int64_t rows, len, k;
  int32_t dtype, descending;
} tnk_sort_args_t;
int tnk_sort_supported(int dtype);
void tnk_sort(const tnk_sort_args_t *args);

/* Histogram of n contiguous elements into `bins` equal bins over
 * [lo, hi]: bin = (int)((x - lo) * bins / (hi - lo)) computed in the input's
 * precision (fp32 for half types), x == hi counted in the last bin; values
 * outside the range and NaN are ignored. out (contiguous, bins elements) is
 * of out_dtype and overwritten. Real dtypes. */
typedef struct tnk_histc_args {
  const void *in;
  void *out;
  int64_t n, bins;
  double lo, hi;
  int32_t dtype, out_dtype;
} tnk_histc_args_t;
int tnk_histc_supported(int dtype, int out_dtype);
void tnk_histc(const tnk_histc_args_t *args);

/* torch.searchsorted / bucketize: for each of n contiguous values, in rows
 * of per_row, its insertion position in its row of the boundaries
 * (contiguous rows of len; bd_rows == 1: one row for every value), read
 * through sorter when it is not NULL (int64 [bd_rows, len], positions
 * within the row). right: the upper bound (boundaries <= v counted), else the
 * lower bound. The comparisons are those of PyTorch's CPU kernel, so NaN and
 * unsorted boundaries give its positions. out: int32 (out_int32) or int64.
 * Real dtypes but bool; values and boundaries of one dtype. */
typedef struct tnk_searchsorted_args {
  const void *boundaries, *values;
  const int64_t *sorter;
  void *out;
  int64_t n, per_row, len, bd_rows;
  int32_t dtype, right, out_int32, pad_;
  tnk_fault_t fault; /* a sorter entry outside [0, len): every position 0 */
} tnk_searchsorted_args_t;
int tnk_searchsorted_supported(int dtype);
void tnk_searchsorted(const tnk_searchsorted_args_t *args);

/* ---- convolution lowering ---------------------------------------------------- */

/* im2col: image [batch, c, d, h, w] (contiguous) to columns [batch,
 * c*kd*kh*kw, od*oh*ow] (contiguous), zero where the window reads padding;
 * any dtype. col2im (col2im = 1): the adjoint, image += columns summed back
 * into their pixels; the caller zeroes the image first; floating dtypes.
 * The depth fields (d, kd, sd, pd, dd, od) are for 3-D convolutions: kd = 0
 * means a 2-D image (depth 1, kernel depth 1, no depth padding). */
typedef struct tnk_im2col_args {
  void *im, *col;
  int64_t batch, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  int32_t dtype, col2im;
  int64_t d, kd, sd, pd, dd, od;
} tnk_im2col_args_t;
void tnk_im2col(const tnk_im2col_args_t *args);

/* ---- pooling and resampling (kernels/pooling.c, kernels/resample.c) --------- */

/* 2-D and 3-D pooling over `planes` contiguous [d, h, w] volumes (N*C of
 * an NC(D)HW tensor) into [od, oh, ow]; floating dtypes, fp64 accumulation.
 * kd = 0 means 2-D (d = od = kd = sd = dd = 1, pd = 0). Windows follow
 * ATen: start o*s - p, dilation (max only); average: divisor_override when
 * nonzero, else the window size with (count_include_pad) or without the
 * padding; adaptive average and adaptive max: window
 * [floor(o*in/out), ceil((o+1)*in/out)).
 * Max keeps the first maximum, NaN wins; indices are flat offsets
 * (z*h + y)*w + x in the input volume.
 * Backward: `in` is the output gradient, `out` the input gradient (written
 * whole); max reads `indices` and reports an index outside the volume as a
 * fault (skipped). */
enum { TNK_POOL_MAX = 0, TNK_POOL_AVG, TNK_POOL_ADAPTIVE_AVG, TNK_POOL_ADAPTIVE_MAX };
typedef struct tnk_pool_args {
  const void *in;
  void *out;
  int64_t *indices;
  int64_t planes, h, w, oh, ow, divisor;
  int32_t kh, kw, sh, sw, ph, pw, dh, dw;
  int32_t dtype, kind, backward, count_include_pad;
  tnk_fault_t fault;
  int64_t d, od;
  int32_t kd, sd, pd, dd;
} tnk_pool_args_t;
int tnk_pool_supported(int dtype);
void tnk_pool(const tnk_pool_args_t *args);

/* Separable resampling of `planes` contiguous [d, h, w] volumes to
 * [od, oh, ow] (d = od = 1 for images, and h = oh = 1 too for 1-D), as
 * ATen's upsample_{linear1d,bilinear2d,trilinear3d,bicubic2d}: per axis the
 * source coordinate is scale * dst with align_corners, else
 * scale * (dst + 0.5) - 0.5 (clamped at 0 for linear); scale_* are ATen's
 * area_pixel_compute_scale. Linear reads the two neighbours, cubic the four
 * around floor(src) (clamped to the edge) with Keys' A = -0.75 weights.
 * Backward (in = output gradient, out = input gradient, written whole)
 * scatters each gradient to its taps. */
enum { TNK_RESAMPLE_LINEAR = 0, TNK_RESAMPLE_CUBIC };
typedef struct tnk_resample_args {
  const void *in;
  void *out;
  int64_t planes, d, h, w, od, oh, ow;
  double scale_d, scale_h, scale_w;
  int32_t dtype, align_corners, backward, mode;
} tnk_resample_args_t;
void tnk_resample(const tnk_resample_args_t *args);

/* grid_sample (ATen's grid_sampler_2d and grid_sampler_3d): input
 * [n, c, h, w] and grid [n, oh, ow, 2] (x then y, in [-1, 1]), or with
 * `three_d` input [n, c, d, h, w] and grid [n, od, oh, ow, 3] (x, y, z),
 * contiguous; output [n, c, (od,) oh, ow]. Bilinear (trilinear in 3-D),
 * nearest (half to even) or, in 2-D only, bicubic (Keys, A = -0.75; the
 * padding applies to each of its 16 taps) interpolation; zeros, border or
 * reflection padding; align_corners as ATen. Coordinates are computed in the
 * tensor's precision (fp32 for half types). Backward: `gout` the output
 * gradient; `gin` (input gradient, written whole) and `ggrid` (grid
 * gradient, written whole; zero for nearest) when non-null. */
enum { TNK_GRID_BILINEAR = 0, TNK_GRID_NEAREST = 1, TNK_GRID_BICUBIC = 2 };
enum { TNK_GRID_PAD_ZEROS = 0, TNK_GRID_PAD_BORDER = 1, TNK_GRID_PAD_REFLECTION = 2 };
typedef struct tnk_grid_sample_args {
  const void *in, *grid, *gout;
  void *out, *gin, *ggrid;
  int64_t n, c, h, w, oh, ow;
  int64_t d, od; /* three_d only */
  int32_t dtype, mode, padding, align_corners, backward, three_d;
} tnk_grid_sample_args_t;
int tnk_grid_sample_supported(int dtype, int mode, int padding);
void tnk_grid_sample(const tnk_grid_sample_args_t *args);

/* ---- triangular solve ---------------------------------------------------------- */

/* Solves A X = B in place (x holds B on entry) for `batch` triangular n x n
 * matrices A (lower, or upper when `upper`; unit diagonal assumed when
 * `unit`) and n x k right-hand sides, by substitution; fp32 (fp32
 * accumulation) or fp64. Strides in elements. */
typedef struct tnk_trsm_args {
  int64_t batch, n, k;
  const void *a;
  void *x;
  int64_t sa_b, sa_r, sa_c, sx_b, sx_r, sx_c;
  int32_t dtype, upper, unit, pad_;
} tnk_trsm_args_t;
int tnk_trsm_supported(int dtype);
void tnk_trsm(const tnk_trsm_args_t *args);

/* ---- fused optimizers -------------------------------------------------------- */

/* One Adam/AdamW step over n contiguous elements of one parameter, in one
 * pass: param, grad, exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad)
 * share a floating dtype and are updated in place, computing in fp32 (fp64
 * for fp64). step, lr (when lr_ptr is set), grad_scale and found_inf are
 * read when the kernel runs (device scalars written by earlier work on the
 * stream): step is the already incremented step count; a nonzero found_inf
 * skips the update; grads are divided by grad_scale. adamw selects
 * decoupled weight decay. */
typedef struct tnk_adam_args {
  void *param, *grad, *exp_avg, *exp_avg_sq, *max_exp_avg_sq;
  const float *step, *lr_ptr, *grad_scale, *found_inf;
  int64_t n;
  double lr, beta1, beta2, weight_decay, eps;
  int32_t dtype, adamw, amsgrad, maximize;
} tnk_adam_args_t;
int tnk_adam_supported(int dtype);
void tnk_adam(const tnk_adam_args_t *args);

/* ---- recurrent cells --------------------------------------------------------- */

/* The fused LSTM and GRU cells in ATen's layouts (_thnn_fused_lstm_cell,
 * _thnn_fused_gru_cell and their backward ops), one pass per element of the
 * [b, h] state, computing in fp32. Every tensor is contiguous, of dtype f32,
 * bf16 or f16 (tnk_rnn_cell_supported); gates are [b, k * h] blocks (LSTM
 * k = 4: input, forget, cell, output; GRU k = 3: reset, update, new).
 * LSTM forward: ig, hg (+ b1, b2 [4h], or NULL), prev = cx -> out0 = hy,
 *   out1 = cy, ws [b, 4h] = the activated gates.
 * LSTM backward: ghy and / or gcy (the other NULL), prev = cx, cy, ws ->
 *   gx0 = grad of the gates [b, 4h], gprev = grad of cx.
 * GRU forward: ig, hg (+ b1, b2 [3h]), prev = hx -> out0 = hy, ws [b, 5h]
 *   = reset, update, new, hx, and the hidden new-gate input with its bias.
 * GRU backward: ghy, ws -> gx0 = grad of the input gates, gx1 = of the
 *   hidden gates (both [b, 3h]), gprev = grad of hx. */
typedef struct tnk_rnn_cell_args {
  const void *ig, *hg, *b1, *b2, *prev, *ghy, *gcy, *cy;
  void *out0, *out1, *ws, *gx0, *gx1, *gprev;
  int64_t b, h;
  int32_t dtype, gru, backward, pad_;
} tnk_rnn_cell_args_t;
int tnk_rnn_cell_supported(int dtype);
void tnk_rnn_cell(const tnk_rnn_cell_args_t *args);

/* ---- attention ------------------------------------------------------------ */

/* Scaled dot product attention, flash style: queries in blocks of 128 rows,
 * keys in tiles of 128 with an online softmax, so no score matrix larger
 * than 128 x 128 exists. fp32 throughout. Tensors are [batch, heads, len,
 * dim] with the last dim contiguous and (b, h, l) strides given; kv_heads
 * may divide heads (grouped-query attention: head h reads kv head
 * h / (heads / kv_heads)). causal keeps key j for query i when j <= i + d
 * (d = 0, top left, as PyTorch; see bottom_right). mask_kind 1: bool mask, true keeps; 2: float mask
 * added to the scores; strides (b, h, i, j), 0 to broadcast. A query row
 * whose keys are all masked gives zeros (lse -inf).
 * forward: o and lse ([batch, heads, lq] contiguous) are written.
 * backward: go (grad of o), o and lse from the forward; gq, gk, gv (same
 * layouts as q, k, v) are written. */
typedef struct tnk_sdpa_args {
  int64_t batch, heads, kv_heads, lq, lk, e, ev;
  const float *q, *k, *v, *go;
  float *o, *lse, *gq, *gk, *gv;
  int64_t sq[3], sk[3], sv[3], so[3], sgo[3], sgq[3], sgk[3], sgv[3];
  const void *mask;
  int64_t sm[4];
  int32_t mask_kind, causal;
  float scale;
  /* Flash attention's forms (aten::_flash_attention_forward/_backward):
   * bottom_right: causality and windows are aligned to the end of the
   * keys, d = lk - lq (flash attention's convention), not the start (d = 0,
   * PyTorch's is_causal). windowed: key j is visible to query i when
   * j >= i + d - wl (wl >= 0) and j <= i + d + wr (wr >= 0); causal is wr
   * = 0. Varlen (cu_q set): batch b's queries are rows [cu_q[b],
   * cu_q[b + 1]) of dim 2 of packed tensors (batch strides unused), its
   * keys rows [cu_k[b], cu_k[b] + n) with n = seqused_k[b] when given, else
   * cu_k[b + 1] - cu_k[b]; lq and lk are then the longest, and lse is
   * [heads, lse_total] (row h * lse_total + cu_q[b] + i). A query row with
   * no visible key gives zeros and lse -inf. */
  int32_t bottom_right, windowed;
  int64_t wl, wr, lse_total;
  const int32_t *cu_q, *cu_k, *seqused_k;
} tnk_sdpa_args_t;
void tnk_sdpa_forward(const tnk_sdpa_args_t *args);
void tnk_sdpa_backward(const tnk_sdpa_args_t *args);

/* ---- GEMM ------------------------------------------------------------------ */

/* C[b] = beta * C[b] + alpha * A[b] @ B[b] for b in [0, batch): A is m x k,
 * B is k x n, C is m x n, each with arbitrary element strides (row, col) and
 * a batch stride. dtype f32, f64, bf16 or f16 for all three; accumulation is
 * in fp32 (fp64 for f64). beta == 0 ignores C's old contents (NaN included).
 * C must not overlap A or B. An unsupported dtype (tnk_gemm_supported)
 * writes nothing. */
typedef struct tnk_gemm_args {
  int64_t batch, m, n, k;
  void *c;
  const void *a, *b;
  int64_t sa_b, sa_r, sa_c; /* A strides: batch, row, column */
  int64_t sb_b, sb_r, sb_c;
  int64_t sc_b, sc_r, sc_c;
  int32_t dtype, pad_;
  double alpha, beta;
  /* told (TNRT_FAULT_MESSAGE) when the packing buffers cannot be allocated;
   * C is then incomplete */
  tnk_fault_t fault;
} tnk_gemm_args_t;
int tnk_gemm_supported(int dtype);
/* 0, or -1 when a buffer could not be allocated (fault told, C incomplete). */
int tnk_gemm(const tnk_gemm_args_t *args);
/* Same with a given kernel configuration (config.h, tnk_config_for_isa):
 * for the tests, which run every variant against the reference. */
struct tnk_config;
int tnk_gemm_with(const struct tnk_config *cfg, const tnk_gemm_args_t *args);

/* Grouped GEMM (torch._grouped_mm): G products in one launch. mode 0:
 * A [M, K] (rows grouped) x B [G, K, N] -> C [M, N]; 1: A [G, M, K] x
 * B [K, N] (columns grouped) -> C [M, N]; 2: A [M, K] x B [K, N] (K
 * grouped) -> C [G, M, N]; 3: A [G, M, K] x B [G, K, N] -> C [G, M, N]
 * (no offsets). offs (int32, G entries, modes 0-2) are the groups' ends
 * along the grouped dimension, read when the kernel runs: they must be
 * non-decreasing and at most its size, else the fault is told and the bad
 * groups (and what follows) are left zero. Rows (mode 0) or columns (mode
 * 1) past the last end are zero. Strides are (group, row, column) per
 * operand (the group stride is unused for a 2-D operand); m, n, k are the
 * full extents. Accumulation as tnk_gemm; C is fully written. */
typedef struct tnk_grouped_gemm_args {
  int64_t groups, m, n, k;
  void *c;
  const void *a, *b;
  const int32_t *offs;
  int64_t sa[3], sb[3], sc[3];
  int32_t mode, dtype;
  tnk_fault_t fault;
} tnk_grouped_gemm_args_t;
void tnk_grouped_gemm(const tnk_grouped_gemm_args_t *args);

/* ---- Low-precision GEMM (lowp_gemm.c) ---------------------------------------
 * C = epilogue(A @ B), A m x k, B k x n, C m x n, each with element strides
 * (row, column). Two kinds:
 *  - int8 x int8 -> int32 (a_fmt = b_fmt = TNK_I8, c_dtype TNK_I32): exact
 *    integer sums, no scales or bias (torch._int_mm).
 *  - any of f32, bf16, f16, i8, TNK_F8E4M3, TNK_F8E5M2 for A and for B,
 *    widened exactly to fp32 while packing, fp32 sums; C (f32, bf16 or f16)
 *    = sum * scale_a * scale_b + bias[j]. A scale is none, one value
 *    (TENSOR: read when the kernel runs), one per row of A / column of B
 *    (VECTOR: s[i * ld]) or one per row / column and block of `block` k
 *    (BLOCK: s[i * ld + k / block], applied to the operand while packing;
 *    block a multiple of 4; BLOCK_MX below). Scales and bias are f32,
 *    bf16 or f16 (scales also TNK_E8M0).
 * C must not overlap the inputs. 0, or -1 when a buffer could not be
 * allocated (fault told, C incomplete). */
enum { TNK_F8E4M3 = 64, TNK_F8E5M2 = 65 }; /* operand formats beyond tnk_dtype_t */
enum {
  TNK_SCALE_NONE = 0,
  TNK_SCALE_TENSOR,
  TNK_SCALE_VECTOR,
  TNK_SCALE_BLOCK,
  TNK_SCALE_BLOCK_MX
};
/* TNK_SCALE_BLOCK_MX: the block scales of MX formats in the swizzled layout
 * cuBLAS and torch._scaled_mm use: tiles of 128 rows x 4 blocks, tile (t,
 * c) at (t * ld + c) * 512, and in a tile row r and block b at (r % 32) *
 * 16 + (r / 32) * 4 + b; ld is the tiles per row (blocks / 4, rounded
 * up). Scale dtype TNK_E8M0 (float8_e8m0fnu: 2^(e - 127), 0xFF NaN) or
 * any float. */
enum { TNK_E8M0 = 66 };
typedef struct tnk_lowp_gemm_args {
  int64_t m, n, k;
  void *c;
  const void *a, *b;
  int64_t sa_r, sa_c, sb_r, sb_c, sc_r, sc_c;
  int32_t a_fmt, b_fmt, c_dtype;
  int32_t sa_mode, sb_mode, sa_dtype, sb_dtype;
  int64_t sa_ld, sb_ld, block;
  const void *sa, *sb;
  const void *bias; /* NULL: none; n values, contiguous */
  int32_t bias_dtype, pad_;
  tnk_fault_t fault;
} tnk_lowp_gemm_args_t;
int tnk_lowp_gemm_supported(int a_fmt, int b_fmt, int c_dtype);
int tnk_lowp_gemm(const tnk_lowp_gemm_args_t *args);
int tnk_lowp_gemm_with(const struct tnk_config *cfg, const tnk_lowp_gemm_args_t *args);
/* Conversions between f32 / bf16 / f16 and the 8-bit floats (torch's casts
 * to and from float8_e4m3fn and float8_e5m2), n contiguous elements. To 8
 * bits: round to nearest even; as torch 2.13's CPU casts, e4m3fn (no
 * infinity) saturates to +-448, infinities included, and e5m2 overflows to
 * infinity; NaN stays NaN. From 8 bits: exact. */
typedef struct tnk_fp8_convert_args {
  int64_t n;
  void *dst;
  const void *src;
  int32_t dst_fmt, src_fmt;
} tnk_fp8_convert_args_t;
int tnk_fp8_convert_supported(int dst_fmt, int src_fmt);
void tnk_fp8_convert(const tnk_fp8_convert_args_t *args);

/* ---- Weight-only int4 (int4_gemm.c) ------------------------------------------
 * torch's CPU int4 packing (_convert_weight_to_int4pack_for_cpu) and product
 * (_weight_int4pack_mm_for_cpu). The packed weight is [n, k / 2] bytes in
 * column blocks of block_n (the last block may be smaller: n is a multiple
 * of 16): block b holds k rows of (its width / 2) bytes at b * block_n * k / 2.
 * How a row's bytes hold its columns depends on the layout, which is the one
 * CPU uses for the ISA ATen runs (so a weight packed on either device is
 * read right by the other):
 *  - TNK_INT4_PAIRS (block_n 32; also every block narrower than block_n):
 *    byte d holds column 2d (low nibble) and 2d + 1 (high);
 *  - TNK_INT4_HALVES32 (block_n 32, CPU's AVX2): byte d holds column d (low)
 *    and d + 16 (high);
 *  - TNK_INT4_LANES64 (block_n 64, CPU's AVX-512): byte d < 16 holds column d
 *    (low) and d + 32 (high); byte 16 + d holds 16 + d and 48 + d.
 * The product: C[i][j] = sum over k of A[i][k] * ((q - 8) * s + z), q the
 * nibble of (k, j), s and z sz[(k / group) * n * 2 + j * 2 + {0, 1}]; A, C and
 * sz one float dtype (f32, bf16, f16); fp32 sums. A rows lda apart, C rows
 * ldc apart (unit column stride both). -1 when a buffer could not be
 * allocated (fault told). */
enum { TNK_INT4_PAIRS = 0, TNK_INT4_HALVES32 = 1, TNK_INT4_LANES64 = 2 };
typedef struct tnk_int4_mm_args {
  int64_t m, n, k, group, lda, ldc;
  void *c;
  const void *a, *sz;
  const uint8_t *b;
  int32_t layout, dtype;
  tnk_fault_t fault;
} tnk_int4_mm_args_t;
int tnk_int4_mm_supported(int dtype, int layout);
int tnk_int4_mm(const tnk_int4_mm_args_t *args);
int tnk_int4_mm_with(const struct tnk_config *cfg, const tnk_int4_mm_args_t *args);
/* w: n x k int32 (row-major) -> out: the packed [n, k / 2] bytes; each byte
 * is (uint8)(hi << 4) | (uint8)lo of the two values it holds, as CPU forms
 * it (values outside 0-15 give CPU's bytes too). */
typedef struct tnk_int4_pack_args {
  int64_t n, k;
  const int32_t *w;
  uint8_t *out;
  int32_t layout, pad_;
} tnk_int4_pack_args_t;
int tnk_int4_pack_supported(int layout);
void tnk_int4_pack(const tnk_int4_pack_args_t *args);
/* the column block of a layout (32 or 64) */
int tnk_int4_block_n(int layout);
uint8_t tnk_f32_to_f8e4m3(float v);
uint8_t tnk_f32_to_f8e5m2(float v);
/* 8-bit float values widened (exact; e4m3fn has no infinities, its
 * S.1111.111 is NaN; e5m2 is the upper byte of an fp16) */
float tnk_f8e4m3_to_f32(uint8_t v);
float tnk_f8e5m2_to_f32(uint8_t v);

/* ==================================================================== */
/* Source-index lists (index_lists.c) of the ops csrc/aten builds from   */
/* index gathers: idx[o] is the input position output position o reads.  */

/* Nearest ("nearest": floor(o * s)) and nearest-exact (floor((o + 0.5) *
 * s)) upsampling, s = 1 / scale when has_scale and scale > 0, else in / out
 * (in float, as ATen); equal and doubled sizes exact; clamped to in - 1.
 * idx has out entries. */
void tnk_nearest_index(int64_t in, int64_t out, int has_scale, double scale, int exact,
                       int64_t *idx);
/* Reflection (reflect != 0) or replication padding of a dim of n by lo
 * before and hi after; idx has n + lo + hi entries. */
void tnk_pad_index(int64_t n, int64_t lo, int64_t hi, int reflect, int64_t *idx);
/* unfold's windows: window w's element j at w * step + j; idx has
 * windows * size entries. */
void tnk_unfold_index(int64_t windows, int64_t size, int64_t step, int64_t *idx);

#ifdef __cplusplus
}
#endif
#endif
