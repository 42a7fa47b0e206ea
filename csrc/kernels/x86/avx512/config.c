/* The AVX-512 overrides of the kernel configuration (config.h), applied
 * on top of the AVX2 ones: the row statistics stay AVX2's. */
#include "../../config.h"
#include "../x86.h"

TNK_ELTWISE_BODIES(avx512)

void tnk_config_init_avx512(tnk_config_t *c) {
  tnk_vmath_config_t *v = &c->vmath;
  tnk_fill_eltwise_bodies_avx512(v);
  v->exp_sum = tnk_vexp_sum_f32_avx512;
  v->exp_bounded_sum = tnk_vexp_bounded_sum_f32_avx512;
  v->sigmoid = tnk_vsigmoid_f32_avx512;
  v->silu_bwd = tnk_vsilu_bwd_f32_avx512;
  v->gelu = tnk_vgelu_f32_avx512;
  v->gelu_bwd = tnk_vgelu_bwd_f32_avx512;
  v->scale_stream = tnk_vscale_stream_f32_avx512;
  v->rows_stream_multiple = 16;
  v->softmax_rows_stream = tnk_vsoftmax_rows_stream_f32_avx512;
  v->layer_norm_rows_stream = tnk_vlayer_norm_rows_stream_f32_avx512;
  v->copy_stream = tnk_vcopy_stream_avx512;

  tnk_gemm_config_t *g = &c->gemm;
  g->f32 = tnk_ukernel_f32_avx512;
  g->f32_rows4 = tnk_ukernel4_f32_avx512;
  g->mr = 12;
  g->nr = 32;
  g->mc = 144;
  g->kc = 512;
  g->nc = 2048;
  g->f64 = tnk_ukernel_f64_avx512;
  g->f64_mr = 12;
  g->f64_nr = 16;
  g->dot_rows = tnk_dot_rows_f32_avx512;
  g->dot_rows4 = tnk_dot_rows4_f32_avx512;
  g->dot_rows4_bf16 = tnk_dot_rows4_bf16_avx512;
  g->dot_rows_bf16 = tnk_dot_rows_bf16_avx512;
  g->i8 = tnk_ukernel_i8_madd_avx512;
  g->i8_mr = 12;
  g->i8_nr = 32;
  g->i8_group = 2;
  g->dot_rows_w8 = tnk_dot_rows_w8_avx512;
  g->f32_to_f8 = tnk_f32_to_f8_avx512;
  g->int4_unit = tnk_int4_unit_avx512;
  if (c->features & TNK_FEAT_AVX512VNNI) {
    g->i8 = tnk_ukernel_i8_vnni_avx512;
    g->i8_group = 4;
  }
  if (c->features & TNK_FEAT_AVX512BF16) {
    g->bf16 = tnk_ukernel_bf16_avx512;
    g->bf16_mr = 12;
    g->bf16_nr = 32;
    g->bf16_kc = 2048; /* bf16 panels are half the bytes */
    g->dot_rows4_bf16 = tnk_dot_rows4_bf16dp_avx512;
    g->dot_rows_w8_bf16 = tnk_dot_rows_w8_bf16dp_avx512;
  }
  if (g->bf16 && tnk_amx_usable()) { /* AMX-BF16, granted, self-tested (config.c) */
    g->amx_bf16 = tnk_amx_bf16_32x32;
    g->amx_begin = tnk_amx_begin;
    g->amx_end = tnk_amx_end;
    g->amx_kc = 1024;
  }

  c->loops = &tnk_eltwise_loops_avx512;
}
