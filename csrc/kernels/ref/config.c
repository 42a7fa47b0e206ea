/* The reference configuration: every entry a portable kernel (GEMM's
 * blocked path off: the reference GEMM in gemm.c runs). */
#include "config.h"
#include "ref.h"

TNK_ELTWISE_BODIES(ref)

void tnk_config_init_ref(tnk_config_t *c) {
  tnk_vmath_config_t *v = &c->vmath;
  tnk_fill_eltwise_bodies_ref(v);
  v->exp_sum = tnk_vexp_sum_f32_ref;
  v->exp_bounded_sum = tnk_vexp_sum_f32_ref; /* exact exp serves the bounded contract */
  v->sigmoid = tnk_vsigmoid_f32_ref;
  v->silu_bwd = tnk_vsilu_bwd_f32_ref;
  v->gelu = tnk_vgelu_f32_ref;
  v->gelu_bwd = tnk_vgelu_bwd_f32_ref;
  v->sum_f64 = tnk_vsum_f32_f64_ref;
  v->sum = tnk_vsum_f32_ref;
  v->sumsqdev = tnk_vsumsqdev_f32_ref;
  v->max = tnk_vmax_f32_ref;
  v->normalize = tnk_vnormalize_f32_ref;
  v->scale_stream = tnk_vscale_stream_f32_ref;
  c->loops = &tnk_eltwise_loops_ref;
}
