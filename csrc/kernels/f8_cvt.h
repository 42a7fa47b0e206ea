/* f32 to the 8-bit floats (torch's float8_e4m3fn and float8_e5m2 casts),
 * one element, in integer arithmetic only: written once, compiled by the
 * reference (lowp_gemm.c) and by each x86 variant's conversion loop, which
 * the compiler vectorises (a float operation under a select may trap, so
 * it would be left in a branch; integer selects become blends).
 *
 * MB mantissa bits, BIAS the exponent bias; OVER the first code past the
 * largest finite magnitude, SAT the code a magnitude at or past it becomes
 * (e4m3fn: 0x7E, +-448, as torch 2.13's CPU cast saturates, infinities
 * included; e5m2: 0x7C, infinity); NaN becomes 0x7F with its sign. Round to
 * nearest even. */
#ifndef TNK_F8_CVT_H
#define TNK_F8_CVT_H

#include <stdint.h>

static inline uint8_t tnk_f32_bits_to_f8(uint32_t u, int MB, int BIAS, int32_t OVER, int32_t SAT) {
  int32_t sign = (int32_t)((u >> 24) & 0x80);
  int32_t a = (int32_t)(u & 0x7FFFFFFFu);
  /* normal: drop 23 - MB mantissa bits (ties to even) and rebias; an
   * infinity lands past OVER */
  int32_t an = a < 0x7F800000 ? a : 0x7F800000; /* NaNs aside: no int32 overflow */
  int32_t cn =
      ((an + ((1 << (22 - MB)) - 1) + ((an >> (23 - MB)) & 1)) >> (23 - MB)) - ((127 - BIAS) << MB);
  /* below the smallest normal: the significand in units of the subnormal
   * step 2^(1 - BIAS - MB), a right shift of 151 - BIAS - MB - e (21 or more
   * here; from 31 on the result is 0) with the same rounding; a carry into
   * the smallest normal gives its code, 1 << MB */
  int32_t e = a >> 23;
  int32_t sig = (a & 0x7FFFFF) | (e ? 0x800000 : 0);
  int32_t sh = 151 - BIAS - MB - (e ? e : 1);
  sh = sh < 31 ? sh : 31;
  sh = sh > 1 ? sh : 1; /* normal magnitudes (not taken from cs) shift by 1 */
  int32_t cs = (sig + ((1 << (sh - 1)) - 1) + ((sig >> sh) & 1)) >> sh;
  int32_t c = a < ((127 - BIAS + 1) << 23) ? cs : cn;
  c = c >= OVER ? SAT : c;
  c = a > 0x7F800000 ? 0x7F : c;
  return (uint8_t)(sign | c);
}

/* n contiguous f32 to e4m3fn (e5m2 when e5m2 is set) */
static inline void tnk_f32_to_f8_loop(uint8_t *restrict d, const float *restrict s, int64_t n,
                                      int e5m2) {
  const uint32_t *u = (const uint32_t *)s;
  if (e5m2)
    for (int64_t i = 0; i < n; i++) d[i] = tnk_f32_bits_to_f8(u[i], 2, 15, 0x7C, 0x7C);
  else
    for (int64_t i = 0; i < n; i++) d[i] = tnk_f32_bits_to_f8(u[i], 3, 7, 0x7F, 0x7E);
}

#endif
