/* The kernel configuration (internal to the library): one table per
 * process of the kernel variants this CPU runs, filled once from the named
 * reference kernels (kernels/ref/) and overridden per ISA by the per-ISA
 * directories (kernels/x86/avx2/, kernels/x86/avx512/), which are only
 * built where they apply. TORCH_NEURONX_ISA=reference|avx2|avx512 forces
 * every entry to one variant. XNNPACK's hardware config and BLIS's context
 * are the pattern: dispatch is a load from this table, never an ISA ladder
 * at the call site.
 *
 * Adding a variant: write the function in the ISA's directory, assign it
 * in that directory's config.c; the C tests (test_kernels.c, "variants")
 * iterate tnk_config_for_isa() and compare each entry with the reference. */
#ifndef TNK_CONFIG_H
#define TNK_CONFIG_H

#include <stdint.h>

#include "tnk.h"

/* Element-wise loops over n elements at byte strides (o: out, i/a/b: in);
 * p / al: the op's scalar parameters. A binary loop returns the count of
 * integer divisions by zero. */
typedef void (*tnk_uloop_fn)(char *o, const char *i, int64_t so, int64_t si, int64_t n,
                             const double *p);
typedef int64_t (*tnk_bloop_fn)(char *o, const char *a, const char *b, int64_t so, int64_t sa,
                                int64_t sb, int64_t n, const double *al, int64_t ial);

/* The loops GCC vectorises (unary.c, binary.c), compiled once per variant:
 * float ops over f16/bf16/f32/f64, and the integer neg/abs. */
typedef struct tnk_eltwise_loops {
  tnk_uloop_fn unary[TNK_UNARY_OP_COUNT][TNK_DTYPE_COUNT];
  tnk_uloop_fn int_neg[TNK_DTYPE_COUNT], int_abs[TNK_DTYPE_COUNT];
  tnk_bloop_fn binary[TNK_BINARY_OP_COUNT][TNK_DTYPE_COUNT];
  /* contiguous fp32 <-> bf16 conversion (autocast's casts), rounding as
   * tnk_f32_to_bf16: y[i] = convert(x[i]) for i < n */
  void (*f32_to_bf16)(uint16_t *y, const float *x, int64_t n);
  void (*bf16_to_f32)(float *y, const uint16_t *x, int64_t n);
  /* fp16 <-> fp32 (rounding as tnk_f32_to_f16) */
  void (*f16_to_f32)(float *y, const uint16_t *x, int64_t n);
  void (*f32_to_f16)(uint16_t *y, const float *x, int64_t n);
  /* contiguous fp32 addcmul / addcdiv / lerp (tnk_ternary_args_t's ops):
   * o[i] = op(a[i], b[i], c[i]) with value v, o possibly a */
  void (*ternary_f32)(int op, float *o, const float *a, const float *b, const float *c, float v,
                      int64_t n);
} tnk_eltwise_loops_t;

/* fp32 GEMM micro-kernel: T[mr][nr] = sum over k of A[r][k] * B[k][:], A[r][k]
 * at a[r * a_rs + k * a_cs], B row k at b + k * b_rs (nr contiguous floats);
 * c = T (accumulate 0) or c += T, row r at c + r * ldc. */
typedef void (*tnk_ukernel_f32_fn)(int64_t kc, const float *a, int64_t a_rs, int64_t a_cs,
                                   const float *b, int64_t b_rs, float *c, int64_t ldc,
                                   int accumulate);
/* bf16 micro-kernel on k-pairs (see gemm.c, "bf16 with dot products"):
 * mode 0: fp32 c = T, 1: fp32 c += T, 2: bf16 c = T rounded. */
typedef void (*tnk_ukernel_bf16_fn)(int64_t kp, const uint32_t *a, const uint32_t *b, void *c,
                                    int64_t ldc, int mode);
/* out[j] = sum_i x[i] * w[j * ldw + i] for j < n (skinny products). */
typedef void (*tnk_dot_rows_fn)(int64_t k, const float *x, const float *w, int64_t ldw, int64_t n,
                                float *out);
/* out[r * ldo + j] = x row r . w row j (rows ldx and ldw apart) for r < 4
 * and j < n, fp32, and bf16 with fp32 sums (x86/gemm_body.h) */
typedef void (*tnk_dot_rows4_fn)(int64_t k, const float *x, int64_t ldx, const float *w,
                                 int64_t ldw, int64_t n, float *out, int64_t ldo);
typedef void (*tnk_dot_rows4_bf16_fn)(int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w,
                                      int64_t ldw, int64_t n, float *out, int64_t ldo);
typedef void (*tnk_dot_rows_bf16_fn)(int64_t k, const uint16_t *x, const uint16_t *w, int64_t ldw,
                                     int64_t n, float *out);

#define TNK_UKERNEL_MAX_TILE (12 * 32) /* the largest mr * nr of any variant */

/* int8 GEMM micro-kernel (lowp_gemm.c): the int32 tile T[mr][nr] over kq
 * packed k-groups; A packed as kq groups of mr 32-bit words, B as kq groups
 * of nr words; each word holds i8_group consecutive k values: 4 bytes
 * (A as unsigned, a + 128; B signed) for the VNNI dot product, or 2
 * int16 for the widening multiply-add. c = T (accumulate 0) or c += T,
 * row r at c + r * ldc. */
typedef void (*tnk_ukernel_i8_fn)(int64_t kq, const uint32_t *a, const uint32_t *b, int32_t *c,
                                  int64_t ldc, int accumulate);
/* out[r * ldo + j] = x row r . w row j for r < m and j < n: fp32 x (rows
 * ldx apart) against int8 weight rows (ldw apart) widened exactly, fp32
 * sums (weight-only quantized products, batch-1 decode). */
typedef void (*tnk_dot_rows_w8_fn)(int64_t k, const float *x, int64_t ldx, int64_t m,
                                   const int8_t *w, int64_t ldw, int64_t n, float *out,
                                   int64_t ldo);

/* fp64 micro-kernel: the dense f64_mr x f64_nr tile t = A . B over kc, A
 * packed as kc columns of f64_mr values, B as kc rows of f64_nr */
typedef void (*tnk_ukernel_f64_fn)(int64_t kc, const double *a, const double *b, double *t);

typedef struct tnk_gemm_config {
  tnk_ukernel_f32_fn f32;       /* NULL: the reference GEMM runs */
  int mr, nr;                   /* its tile */
  tnk_ukernel_f32_fn f32_rows4; /* the same for 4 x nr tiles; NULL: none */
  int64_t mc, kc, nc;           /* blocking: rows of A, depth, columns of B per panel */
  tnk_ukernel_bf16_fn bf16;     /* NULL: bf16 converts to fp32 while packing */
  int bf16_mr, bf16_nr;
  int64_t bf16_kc;
  /* bf16 on AMX tiles (NULL: no AMX, or the OS did not grant the tile
   * state): the fp32 32x32 block at c (row stride ldc) = A (32 rows of kp
   * k-pairs, row r at a + r * lda) times a packed 32-column panel b (kp rows
   * of 32 pairs), or += when accumulate; kp a multiple of 16. amx_begin /
   * amx_end load and release the tile configuration on the calling thread
   * around its blocks; amx_kc is the depth of a packed block. */
  void (*amx_bf16)(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                   int64_t ldc, int accumulate);
  void (*amx_begin)(void);
  void (*amx_end)(void);
  int64_t amx_kc;
  tnk_dot_rows_fn dot_rows;             /* NULL: skinny products take the blocked path */
  tnk_dot_rows_bf16_fn dot_rows_bf16;   /* the same over bf16 (fp32 sums) */
  tnk_dot_rows4_fn dot_rows4;           /* four rows at once (NULL: small-m products are blocked) */
  tnk_dot_rows4_bf16_fn dot_rows4_bf16; /* the same over bf16 */
  tnk_ukernel_f64_fn f64;               /* NULL: fp64 runs the reference GEMM */
  int f64_mr, f64_nr;
  tnk_ukernel_i8_fn i8;           /* NULL: int8 products run the reference */
  int i8_mr, i8_nr, i8_group;     /* its tile; k values per packed word (4 VNNI, 2 int16) */
  tnk_dot_rows_w8_fn dot_rows_w8; /* NULL: weight-only int8 decode takes the blocked path */
  /* the same with bf16 x rows on bf16 dot products (m <= 16; NULL: none) */
  void (*dot_rows_w8_bf16)(int64_t k, const uint16_t *x, int64_t ldx, int64_t m, const int8_t *w,
                           int64_t ldw, int64_t n, float *out, int64_t ldo);
  /* n f32 to float8 e4m3fn (e5m2 if e5m2), f8_cvt.h (NULL: the reference) */
  void (*f32_to_f8)(uint8_t *d, const float *s, int64_t n, int e5m2);
  /* One unit of a packed int4 weight (int4_gemm.c): 16 bytes of each k
   * row (8 when half), rows ldw bytes apart; unit column c < 16 is the low
   * nibble of byte c, c >= 16 the high nibble of byte c - 16 (int4_gemm.c
   * maps unit columns to the matrix's). out[r * 32 + c] = sum over k in
   * order (one fp32 FMA per step) of x[r * ldx + k] * fma(q, s[c], z[c]),
   * q the nibble, s and z at sz + (k / group) * 64 + c and + 32 + c; r < m
   * (any m); when half, only columns whose c % 16 < 8 are read.
   * NULL: the scalar unit. */
  void (*int4_unit)(int64_t k, int64_t group, const float *x, int64_t ldx, int64_t m,
                    const uint8_t *w, int64_t ldw, int half, const float *sz, float *out);
} tnk_gemm_config_t;

/* Vectorised fp32 row math; the contracts are in vmath.h. The streaming
 * row kernels are NULL where the variant has none. */
typedef struct tnk_vmath_config {
  float (*exp_sum)(const float *x, float sub, float *y, int64_t n);
  float (*exp_bounded_sum)(const float *x, float sub, float *y, int64_t n);
  void (*sigmoid)(const float *x, float *y, int64_t n, int silu);
  void (*silu_bwd)(const float *g, const float *x, float *out, int64_t n);
  void (*gelu)(const float *x, float *y, int64_t n, int tanh_form);
  void (*gelu_bwd)(const float *g, const float *x, float *out, int64_t n, int tanh_form);
  double (*sum_f64)(const float *x, int64_t n);
  float (*sum)(const float *x, int64_t n);
  float (*sumsqdev)(const float *x, int64_t n, float mean);
  float (*max)(const float *x, int64_t n);
  void (*normalize)(const float *x, float *y, int64_t n, float mean, float rstd, const float *w,
                    const float *b);
  void (*scale_stream)(const float *x, float s, float *y, int64_t n);
  /* rows of n floats, n % rows_stream_multiple == 0, rows 64-byte aligned */
  int rows_stream_multiple;
  void (*softmax_rows_stream)(const float *x, float *y, int64_t rows, int64_t n, float *scratch);
  void (*layer_norm_rows_stream)(const float *x, float *y, int64_t rows, int64_t n, float eps,
                                 const float *w, const float *b, float *mean, float *rstd);
  void (*copy_stream)(void *dst, const void *src, int64_t bytes);
  /* The contiguous fp32 bodies of the element-wise ops that take these
   * vector algorithms instead of their loop-table row (NULL: the row):
   * y[k] = op(x[k]), and out[k] = op(a[k], b[k]) for the backward ops
   * (a the gradient), for k < n. Filled by TNK_ELTWISE_BODIES below. */
  void (*unary_f32[TNK_UNARY_OP_COUNT])(const float *x, float *y, int64_t n);
  void (*binary_f32[TNK_BINARY_OP_COUNT])(const float *a, const float *b, float *out, int64_t n);
} tnk_vmath_config_t;

/* Defines tnk_fill_eltwise_bodies_<SFX>(v), which points v's element-wise
 * bodies at one variant's vmath functions (suffix SFX: ref, avx2, avx512):
 * sigmoid, SiLU, exp and GELU (both forms), and the SiLU and GELU
 * backward. Each variant's config.c expands it once and calls it. */
#define TNK_ELTWISE_BODIES(SFX)                                                                    \
  static void exp_##SFX(const float *x, float *y, int64_t n) {                                     \
    (void)tnk_vexp_sum_f32_##SFX(x, 0.0f, y, n);                                                   \
  }                                                                                                \
  static void sigmoid_##SFX(const float *x, float *y, int64_t n) {                                 \
    tnk_vsigmoid_f32_##SFX(x, y, n, 0);                                                            \
  }                                                                                                \
  static void silu_##SFX(const float *x, float *y, int64_t n) {                                    \
    tnk_vsigmoid_f32_##SFX(x, y, n, 1);                                                            \
  }                                                                                                \
  static void gelu_##SFX(const float *x, float *y, int64_t n) { tnk_vgelu_f32_##SFX(x, y, n, 0); } \
  static void gelu_tanh_##SFX(const float *x, float *y, int64_t n) {                               \
    tnk_vgelu_f32_##SFX(x, y, n, 1);                                                               \
  }                                                                                                \
  static void gelu_bwd_##SFX(const float *g, const float *x, float *out, int64_t n) {              \
    tnk_vgelu_bwd_f32_##SFX(g, x, out, n, 0);                                                      \
  }                                                                                                \
  static void gelu_tanh_bwd_##SFX(const float *g, const float *x, float *out, int64_t n) {         \
    tnk_vgelu_bwd_f32_##SFX(g, x, out, n, 1);                                                      \
  }                                                                                                \
  static void tnk_fill_eltwise_bodies_##SFX(tnk_vmath_config_t *v) {                               \
    v->unary_f32[TNK_EXP] = exp_##SFX;                                                             \
    v->unary_f32[TNK_SIGMOID] = sigmoid_##SFX;                                                     \
    v->unary_f32[TNK_SILU] = silu_##SFX;                                                           \
    v->unary_f32[TNK_GELU] = gelu_##SFX;                                                           \
    v->unary_f32[TNK_GELU_TANH] = gelu_tanh_##SFX;                                                 \
    v->binary_f32[TNK_SILU_BWD] = tnk_vsilu_bwd_f32_##SFX;                                         \
    v->binary_f32[TNK_GELU_BWD] = gelu_bwd_##SFX;                                                  \
    v->binary_f32[TNK_GELU_TANH_BWD] = gelu_tanh_bwd_##SFX;                                        \
  }

typedef struct tnk_config {
  int isa;      /* TNK_ISA_*: the variant every entry comes from */
  int features; /* what the CPU has (tnk_cpu_features()) */
  /* L2 and L3 data cache sizes in bytes (0: not reported); the GEMM
   * blocking is capped to them (tnk_fit_gemm_to_caches) */
  int64_t cache_l2, cache_l3;
  tnk_vmath_config_t vmath;
  tnk_gemm_config_t gemm;
  const tnk_eltwise_loops_t *loops;
} tnk_config_t;

/* This process's configuration (filled on first use, thread-safe). */
const tnk_config_t *tnk_config(void);
/* The configuration of one variant, for tests and benchmarks: 0 and *out
 * filled, or -1 when this CPU (or build) cannot run it. */
int tnk_config_for_isa(int isa, tnk_config_t *out);

/* Caps the GEMM blocking of g to the given cache sizes (0: unknown, no
 * cap): a packed fp32 A block (mc x kc) fills at most half of L2 and a
 * bf16 one (mc x bf16_kc) three quarters, a packed B panel (kc x nc) at
 * most half of L3. The variants' sizes were tuned on 1 MiB L2 parts; the
 * caps shrink them on CPUs with smaller caches and never grow them. */
void tnk_fit_gemm_to_caches(tnk_gemm_config_t *g, int64_t l2, int64_t l3);

/* Fillers: the reference, then each ISA's overrides on top. */
void tnk_config_init_ref(tnk_config_t *c);
void tnk_config_init_avx2(tnk_config_t *c);
void tnk_config_init_avx512(tnk_config_t *c);

extern const tnk_eltwise_loops_t tnk_eltwise_loops_ref, tnk_eltwise_loops_avx2,
    tnk_eltwise_loops_avx512;

#endif
