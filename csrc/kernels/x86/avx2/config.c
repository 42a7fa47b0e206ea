/* The AVX2+FMA overrides of the kernel configuration (config.h). */
#include "../../config.h"
#include "../x86.h"

TNK_ELTWISE_BODIES(avx2)

void tnk_config_init_avx2(tnk_config_t *c) {
  tnk_vmath_config_t *v = &c->vmath;
  tnk_fill_eltwise_bodies_avx2(v);
  v->exp_sum = tnk_vexp_sum_f32_avx2;
  v->exp_bounded_sum = tnk_vexp_bounded_sum_f32_avx2;
  v->sigmoid = tnk_vsigmoid_f32_avx2;
  v->silu_bwd = tnk_vsilu_bwd_f32_avx2;
  v->gelu = tnk_vgelu_f32_avx2;
  v->gelu_bwd = tnk_vgelu_bwd_f32_avx2;
  v->sum_f64 = tnk_vsum_f32_f64_avx2;
  v->sum = tnk_vsum_f32_avx2;
  v->sumsqdev = tnk_vsumsqdev_f32_avx2;
  v->max = tnk_vmax_f32_avx2;
  v->normalize = tnk_vnormalize_f32_avx2;
  v->scale_stream = tnk_vscale_stream_f32_avx2;

  tnk_gemm_config_t *g = &c->gemm;
  g->f32 = tnk_ukernel_f32_avx2;
  g->f32_rows4 = tnk_ukernel4_f32_avx2;
  g->mr = 6;
  g->nr = 16;
  g->mc = 144;  /* rows of A per packed block (a multiple of mr) */
  g->kc = 512;  /* depth per packed block */
  g->nc = 2048; /* columns of B per packed panel */
  g->f64 = tnk_ukernel_f64_avx2;
  g->f64_mr = 6;
  g->f64_nr = 8;
  g->dot_rows = tnk_dot_rows_f32_avx2;
  g->dot_rows4 = tnk_dot_rows4_f32_avx2;
  g->dot_rows4_bf16 = tnk_dot_rows4_bf16_avx2;
  g->dot_rows_bf16 = tnk_dot_rows_bf16_avx2;
  g->i8 = tnk_ukernel_i8_madd_avx2;
  g->i8_mr = 6;
  g->i8_nr = 16;
  g->i8_group = 2;
  g->dot_rows_w8 = tnk_dot_rows_w8_avx2;
  g->f32_to_f8 = tnk_f32_to_f8_avx2;
  g->int4_unit = tnk_int4_unit_avx2;

  c->loops = &tnk_eltwise_loops_avx2;
}
