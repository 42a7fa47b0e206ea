/* A small SIMD mapping for the x86 variants (internal): one fp32 vector
 * type and the operations the vector algorithms use, for the ISA this
 * translation unit is compiled for (kernels/x86/avx2/ with -mavx2 -mfma,
 * kernels/x86/avx512/ with -mavx512f). An algorithm written once against
 * these names (x86/vmath_body.h) serves both widths; what differs by ISA
 * (exp's scaling, masks against blend vectors, partial loads) is here. */
#ifndef TNK_X86_SIMD_H
#define TNK_X86_SIMD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define VF_LANES 16
#define VF_SFX(name) name##_avx512
typedef __m512 vf;
typedef __mmask16 vm;
/* fp64 lanes (the fp64 GEMM micro-kernel) */
#define VD_LANES 8
typedef __m512d vd;
#define vd_set1 _mm512_set1_pd
#define vd_zero _mm512_setzero_pd
#define vd_load _mm512_loadu_pd
#define vd_fmadd _mm512_fmadd_pd
#define vf_set1 _mm512_set1_ps
#define vf_zero _mm512_setzero_ps
#define vf_load _mm512_loadu_ps
#define vf_store _mm512_storeu_ps
#define vf_add _mm512_add_ps
#define vf_sub _mm512_sub_ps
#define vf_mul _mm512_mul_ps
#define vf_div _mm512_div_ps
#define vf_min _mm512_min_ps
#define vf_max _mm512_max_ps
#define vf_fmadd _mm512_fmadd_ps
#define vf_fnmadd _mm512_fnmadd_ps
#define vf_fmsub _mm512_fmsub_ps
#define vf_abs _mm512_abs_ps
#define vf_stream _mm512_stream_ps
#define vf_hsum _mm512_reduce_add_ps
#define vf_as_int _mm512_castps_si512
#define vf_of_int _mm512_castsi512_ps
#define vi_shl32 _mm512_slli_epi32
static inline vm vf_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline vm vf_not_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }
/* m ? a : b, lane by lane */
static inline vf vf_select(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, b, a); }
/* m ? a : 0 */
static inline vf vf_keep(vm m, vf a) { return _mm512_maskz_mov_ps(m, a); }
/* the first n (< VF_LANES) lanes: loads read nothing past them (0 there) */
static inline vm vf_first(int64_t n) { return (vm)((1u << n) - 1); }
/* 16 / 8 bf16 values widened to fp32 (exact: the bits shifted up). */
static inline vf vf_load_bf16(const uint16_t *p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
static inline vf vf_load_part(const float *p, int64_t n) {
  return _mm512_maskz_loadu_ps(vf_first(n), p);
}
static inline void vf_store_part(float *p, vf v, int64_t n) {
  _mm512_mask_storeu_ps(p, vf_first(n), v);
}
#elif defined(__AVX2__)
#define VF_LANES 8
#define VF_SFX(name) name##_avx2
typedef __m256 vf;
typedef __m256 vm; /* all-ones / all-zeros lanes */
#define VD_LANES 4
typedef __m256d vd;
#define vd_set1 _mm256_set1_pd
#define vd_zero _mm256_setzero_pd
#define vd_load _mm256_loadu_pd
#define vd_fmadd _mm256_fmadd_pd
#define vf_set1 _mm256_set1_ps
#define vf_zero _mm256_setzero_ps
#define vf_load _mm256_loadu_ps
#define vf_store _mm256_storeu_ps
#define vf_add _mm256_add_ps
#define vf_sub _mm256_sub_ps
#define vf_mul _mm256_mul_ps
#define vf_div _mm256_div_ps
#define vf_min _mm256_min_ps
#define vf_max _mm256_max_ps
#define vf_fmadd _mm256_fmadd_ps
#define vf_fnmadd _mm256_fnmadd_ps
#define vf_fmsub _mm256_fmsub_ps
#define vf_stream _mm256_stream_ps
#define vf_as_int _mm256_castps_si256
#define vf_of_int _mm256_castsi256_ps
#define vi_shl32 _mm256_slli_epi32
static inline vf vf_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline float vf_hsum(vf s) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}
static inline vm vf_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline vm vf_not_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NLT_UQ); }
static inline vf vf_select(vm m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }
static inline vf vf_keep(vm m, vf a) { return _mm256_and_ps(m, a); }
static inline vm vf_first(int64_t n) {
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}
/* through a zero-padded lane block */
static inline vf vf_load_bf16(const uint16_t *p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static inline vf vf_load_part(const float *p, int64_t n) {
  float in[8] = {0};
  memcpy(in, p, sizeof(float) * (size_t)n);
  return _mm256_loadu_ps(in);
}
static inline void vf_store_part(float *p, vf v, int64_t n) {
  float out[8];
  _mm256_storeu_ps(out, v);
  memcpy(p, out, sizeof(float) * (size_t)n);
}
#else
#error "kernels/x86: compile with -mavx2 -mfma or -mavx512f (csrc/Makefile does)"
#endif

#endif
