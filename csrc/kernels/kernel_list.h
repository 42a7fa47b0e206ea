/* The kernel library's one list of kernels: each launchable kernel's id,
 * entry point, descriptor type and support probe (an expression over the
 * query q, tnrt_kernel_query_t). Everything else is generated from it: the
 * id enum and names here, the host provider's run and supports tables
 * (provider.c), aten's typed launch (csrc/aten/neuron.h launch_kernel<K>).
 * Adding a kernel is one line here (docs/ARCHITECTURE.md, "A kernel").
 *
 *   X(ID, entry point, descriptor type, supported(q)) */
#ifndef TNK_KERNEL_LIST_H
#define TNK_KERNEL_LIST_H

#include "tnk.h"

#define TNK_KERNELS(X)                                                                             \
  X(UNARY, tnk_unary, tnk_unary_args_t, tnk_unary_supported(q->op, q->dtype))                      \
  X(COMPLEX_UNARY, tnk_complex_unary, tnk_unary_args_t,                                            \
    tnk_complex_unary_supported(q->op, q->dtype, q->dtype2))                                       \
  X(CLASSIFY, tnk_classify, tnk_unary_args_t, 1)                                                   \
  X(BITWISE_NOT, tnk_bitwise_not, tnk_unary_args_t, 1)                                             \
  X(BINARY, tnk_binary, tnk_binary_args_t, tnk_binary_supported(q->op, q->dtype))                  \
  X(TERNARY, tnk_ternary, tnk_ternary_args_t, tnk_ternary_supported(q->op, q->dtype))              \
  X(COPY, tnk_copy, tnk_copy_args_t, 1)                                                            \
  X(COPY_BATCH, tnk_copy_batch, tnk_copy_batch_args_t, 1)                                          \
  X(FILL, tnk_fill, tnk_fill_args_t, 1)                                                            \
  X(ARANGE, tnk_arange, tnk_arange_args_t, 1)                                                      \
  X(RANDOM, tnk_random, tnk_random_args_t, 1)                                                      \
  X(RANDPERM, tnk_randperm, tnk_randperm_args_t, 1)                                                \
  X(ASSERT, tnk_assert, tnk_assert_args_t, 1)                                                      \
  X(SOFTMAX, tnk_softmax, tnk_softmax_args_t, tnk_softmax_supported(q->dtype, q->dtype2))          \
  X(LAYER_NORM, tnk_layer_norm, tnk_layer_norm_args_t, tnk_layer_norm_supported(q->dtype))         \
  X(REDUCE, tnk_reduce, tnk_reduce_args_t, tnk_reduce_supported(q->op, q->dtype, q->dtype2))       \
  X(ARGREDUCE, tnk_argreduce, tnk_argreduce_args_t, tnk_argreduce_supported(q->dtype))             \
  X(SCAN, tnk_scan, tnk_scan_args_t, tnk_scan_supported(q->dtype, q->dtype2))                      \
  X(CUMEXT, tnk_cumext, tnk_cumext_args_t, tnk_cumext_supported(q->dtype))                         \
  X(WHERE, tnk_where, tnk_where_args_t, 1)                                                         \
  X(TRI, tnk_tri, tnk_tri_args_t, 1)                                                               \
  X(INDEX, tnk_index, tnk_index_args_t, tnk_index_supported(q->dtype, q->dtype2, q->mode))         \
  X(GATHER, tnk_gather, tnk_gather_args_t, tnk_gather_supported(q->mode, q->dtype))                \
  X(ISIN, tnk_isin, tnk_isin_args_t, tnk_isin_supported(q->dtype))                                 \
  X(COUNT_NONZERO, tnk_count_nonzero, tnk_nonzero_args_t, 1)                                       \
  X(NONZERO, tnk_nonzero, tnk_nonzero_args_t, 1)                                                   \
  X(NLL, tnk_nll, tnk_nll_args_t, tnk_nll_supported(q->dtype))                                     \
  X(CTC, tnk_ctc, tnk_ctc_args_t, tnk_ctc_supported(q->dtype))                                     \
  X(SORT, tnk_sort, tnk_sort_args_t, tnk_sort_supported(q->dtype))                                 \
  X(HISTC, tnk_histc, tnk_histc_args_t, tnk_histc_supported(q->dtype, q->dtype2))                  \
  X(SEARCHSORTED, tnk_searchsorted, tnk_searchsorted_args_t, tnk_searchsorted_supported(q->dtype)) \
  X(IM2COL, tnk_im2col, tnk_im2col_args_t, 1)                                                      \
  X(POOL, tnk_pool, tnk_pool_args_t, tnk_pool_supported(q->dtype))                                 \
  X(RESAMPLE, tnk_resample, tnk_resample_args_t, 1)                                                \
  /* grid sample: q->op is the padding mode */                                                     \
  X(GRID_SAMPLE, tnk_grid_sample, tnk_grid_sample_args_t,                                          \
    tnk_grid_sample_supported(q->dtype, q->mode, q->op))                                           \
  X(TRSM, tnk_trsm, tnk_trsm_args_t, tnk_trsm_supported(q->dtype))                                 \
  X(ADAM, tnk_adam, tnk_adam_args_t, tnk_adam_supported(q->dtype))                                 \
  X(RNN_CELL, tnk_rnn_cell, tnk_rnn_cell_args_t, tnk_rnn_cell_supported(q->dtype))                 \
  X(SDPA_FORWARD, tnk_sdpa_forward, tnk_sdpa_args_t, 1)                                            \
  X(SDPA_BACKWARD, tnk_sdpa_backward, tnk_sdpa_args_t, 1)                                          \
  X(GEMM, tnk_gemm, tnk_gemm_args_t, tnk_gemm_supported(q->dtype))                                 \
  X(GROUPED_GEMM, tnk_grouped_gemm, tnk_grouped_gemm_args_t, tnk_gemm_supported(q->dtype))         \
  /* low-precision GEMM: dtype, dtype2 the operands' formats, mode C's dtype */                    \
  X(LOWP_GEMM, tnk_lowp_gemm, tnk_lowp_gemm_args_t,                                                \
    tnk_lowp_gemm_supported(q->dtype, q->dtype2, q->mode))                                         \
  /* float <-> fp8 casts: dtype the destination's format, dtype2 the source's */                   \
  X(FP8_CONVERT, tnk_fp8_convert, tnk_fp8_convert_args_t,                                          \
    tnk_fp8_convert_supported(q->dtype, q->dtype2))                                                \
  /* weight-only int4: dtype A's, mode the packing layout */                                       \
  X(INT4_MM, tnk_int4_mm, tnk_int4_mm_args_t, tnk_int4_mm_supported(q->dtype, q->mode))            \
  X(INT4_PACK, tnk_int4_pack, tnk_int4_pack_args_t, tnk_int4_pack_supported(q->mode))

#define TNK_KERNEL_ENUM_(ID, FN, ARGS, SUPPORTED) TNK_K_##ID,
typedef enum tnk_kernel { TNK_KERNELS(TNK_KERNEL_ENUM_) TNK_KERNEL_COUNT } tnk_kernel_t;
#undef TNK_KERNEL_ENUM_

/* "UNARY", "BINARY", ...: the ids' names */
extern const char *const tnk_kernel_names[TNK_KERNEL_COUNT];

/* The providers of this library (provider.h's interface):
 * - "host": every kernel on the host cores (the tnk_* entry points, the
 *   configuration's ISA variants);
 * - "counting": the host provider, counting launches per kernel id, so that
 *   a test can see which kernels an op ran and how often;
 * - "kernels-only": the host provider saying it runs no host code, as a
 *   device with its own kernel library would (host-code tasks are refused). */
struct tnrt_kernel_provider;
const struct tnrt_kernel_provider *tnk_host_provider(void);
const struct tnrt_kernel_provider *tnk_counting_provider(void);
/* The provider of that name, or NULL. */
const struct tnrt_kernel_provider *tnk_provider_named(const char *name);
/* The counting provider's launches of each kernel so far (out has
 * TNK_KERNEL_COUNT entries); reset: set them to 0 after reading. */
void tnk_kernel_launch_counts(uint64_t *out, int reset);

#endif
