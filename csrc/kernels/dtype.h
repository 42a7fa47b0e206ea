/* Element access for every dtype: loads widen to tnk_val_t, stores narrow
 * from it. bf16 is converted in software (round to nearest even), fp16 in
 * software or with F16C (below): the kernels need no compiler support for
 * half types. Also the kernels' shared dtype classes (tnk_floating,
 * tnk_real_dtype) and their bad-index report (tnk_report_fault). */
#ifndef TNK_DTYPE_H
#define TNK_DTYPE_H

#include "tnk.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

typedef struct tnk_val {
  double re, im;
  int64_t i;
  int isint;
} tnk_val_t;

static inline float tnk_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t tnk_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* fp16 <-> fp32, exact one way and rounding to nearest even the other. The
 * x86 variants are compiled with F16C (its instructions: one each way); the
 * portable code converts in software, with the same results but for the
 * bits of a NaN's payload. */
#ifdef __F16C__
static inline float tnk_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
static inline uint16_t tnk_f32_to_f16(float f) {
  return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#else
/* Branch-free (masks select the cases), so that loops over them vectorise
 * (the collectives' fp16 reduction, ccl/reduce.c), and independent of the
 * FTZ / DAZ modes: a subnormal fp16 is a normal fp32, converted from its
 * integer mantissa, and fp32 inputs below 2^-14 round with an fp32 addition
 * of 0.5 whose result is normal. Checked against a branching reference and
 * F16C over all 2^16 and 2^32 inputs (the same bits, NaN payloads aside). */
static inline uint32_t tnk_mask_(int cond) { return (uint32_t)0 - (uint32_t)(cond != 0); }
static inline uint32_t tnk_select_(uint32_t m, uint32_t a, uint32_t b) {
  return (a & m) | (b & ~m);
}
static inline uint32_t tnk_f32_bits_(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float tnk_bits_f32_(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float tnk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t normal = ((e + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
  uint32_t sub = tnk_f32_bits_((float)(int32_t)man * 0x1p-24f);
  uint32_t u = tnk_select_(tnk_mask_(e == 0), sub, normal) | (tnk_mask_(e == 0x1f) & 0x7f800000u);
  return tnk_bits_f32_(sign | u);
}
static inline uint16_t tnk_f32_to_f16(float f) {
  uint32_t u = tnk_f32_bits_(f), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
  int32_t sa = (int32_t)a; /* a < 2^31: signed compares, which SSE2 has */
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  uint32_t sub = tnk_f32_bits_(tnk_bits_f32_(a) + 0.5f) - 0x3f000000u; /* ulp of 0.5: 2^-24 */
  uint32_t r = tnk_select_(tnk_mask_(sa < 0x38800000), sub, normal);   /* below 2^-14 */
  r = tnk_select_(tnk_mask_(sa >= 0x477ff000), 0x7c00u, r);            /* rounds to inf */
  r = tnk_select_(tnk_mask_(sa > 0x7f800000), 0x7e00u, r);             /* NaN */
  return (uint16_t)(sign | r);
}
#endif

/* float -> int64 without undefined behaviour: NaN and out-of-range values
 * give INT64_MIN, as x86's cvttsd2si does. */
static inline int64_t tnk_f2i(double x) {
  if (!(x > -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)x;
}

#define TNK_LOAD_INT(T)                                 \
  static inline tnk_val_t tnk_load_##T(const char *p) { \
    T v;                                                \
    memcpy(&v, p, sizeof v);                            \
    return (tnk_val_t){(double)v, 0.0, (int64_t)v, 1};  \
  }
typedef uint8_t tnk_u8;
typedef int8_t tnk_i8;
typedef int16_t tnk_i16;
typedef int32_t tnk_i32;
typedef int64_t tnk_i64;
TNK_LOAD_INT(tnk_u8)
TNK_LOAD_INT(tnk_i8)
TNK_LOAD_INT(tnk_i16)
TNK_LOAD_INT(tnk_i32)
TNK_LOAD_INT(tnk_i64)

static inline tnk_val_t tnk_load_bool(const char *p) {
  return (tnk_val_t){*p ? 1.0 : 0.0, 0.0, *p ? 1 : 0, 1};
}
static inline tnk_val_t tnk_load_f16(const char *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return (tnk_val_t){tnk_f16_to_f32(h), 0.0, 0, 0};
}
static inline tnk_val_t tnk_load_bf16(const char *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return (tnk_val_t){tnk_bf16_to_f32(h), 0.0, 0, 0};
}
static inline tnk_val_t tnk_load_f32(const char *p) {
  float v;
  memcpy(&v, p, 4);
  return (tnk_val_t){v, 0.0, 0, 0};
}
static inline tnk_val_t tnk_load_f64(const char *p) {
  double v;
  memcpy(&v, p, 8);
  return (tnk_val_t){v, 0.0, 0, 0};
}
static inline tnk_val_t tnk_load_c64(const char *p) {
  float v[2];
  memcpy(v, p, 8);
  return (tnk_val_t){v[0], v[1], 0, 0};
}
static inline tnk_val_t tnk_load_c128(const char *p) {
  double v[2];
  memcpy(v, p, 16);
  return (tnk_val_t){v[0], v[1], 0, 0};
}

static inline int64_t tnk_val_int(tnk_val_t v) { return v.isint ? v.i : tnk_f2i(v.re); }

#define TNK_STORE_INT(T)                                   \
  static inline void tnk_store_##T(char *p, tnk_val_t v) { \
    T x = (T)(uint64_t)tnk_val_int(v);                     \
    memcpy(p, &x, sizeof x);                               \
  }
TNK_STORE_INT(tnk_u8)
TNK_STORE_INT(tnk_i8)
TNK_STORE_INT(tnk_i16)
TNK_STORE_INT(tnk_i32)
TNK_STORE_INT(tnk_i64)

static inline void tnk_store_bool(char *p, tnk_val_t v) {
  *p = v.isint ? (v.i != 0) : (v.re != 0.0 || v.im != 0.0);
}
static inline float tnk_val_f32(tnk_val_t v) { return v.isint ? (float)v.i : (float)v.re; }
static inline double tnk_val_f64(tnk_val_t v) { return v.isint ? (double)v.i : v.re; }
static inline void tnk_store_f16(char *p, tnk_val_t v) {
  uint16_t h = tnk_f32_to_f16(tnk_val_f32(v));
  memcpy(p, &h, 2);
}
static inline void tnk_store_bf16(char *p, tnk_val_t v) {
  uint16_t h = tnk_f32_to_bf16(tnk_val_f32(v));
  memcpy(p, &h, 2);
}
static inline void tnk_store_f32(char *p, tnk_val_t v) {
  float x = tnk_val_f32(v);
  memcpy(p, &x, 4);
}
static inline void tnk_store_f64(char *p, tnk_val_t v) {
  double x = tnk_val_f64(v);
  memcpy(p, &x, 8);
}
static inline void tnk_store_c64(char *p, tnk_val_t v) {
  float x[2] = {tnk_val_f32(v), (float)v.im};
  memcpy(p, x, 8);
}
static inline void tnk_store_c128(char *p, tnk_val_t v) {
  double x[2] = {tnk_val_f64(v), v.im};
  memcpy(p, x, 16);
}

/* Floating element i of a buffer of a floating dtype, widened to double,
 * and the narrowing store: the shared accessors of the kernels that are
 * written once for all floating dtypes. */
static inline double tnk_ldf(const void *base, int dt, int64_t i) {
  switch (dt) {
    case TNK_F32: return ((const float *)base)[i];
    case TNK_F64: return ((const double *)base)[i];
    case TNK_BF16: return tnk_bf16_to_f32(((const uint16_t *)base)[i]);
    default: return tnk_f16_to_f32(((const uint16_t *)base)[i]);
  }
}

static inline void tnk_stf(void *base, int dt, int64_t i, double v) {
  switch (dt) {
    case TNK_F32: ((float *)base)[i] = (float)v; break;
    case TNK_F64: ((double *)base)[i] = v; break;
    case TNK_BF16: ((uint16_t *)base)[i] = tnk_f32_to_bf16((float)v); break;
    default: ((uint16_t *)base)[i] = tnk_f32_to_f16((float)v); break;
  }
}

/* Dtype classes: the floating dtypes (f16, bf16, f32, f64) and the real
 * ones (every dtype but the complex ones). */
static inline int tnk_floating(int dt) {
  return dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
}
static inline int tnk_real_dtype(int dt) { return dt >= TNK_BOOL && dt <= TNK_F64; }

/* Reports a bad index (value, outside [0, bound)) through a kernel's fault
 * sink, when it has one; `what` defaults to "index". */
static inline void tnk_report_fault(const tnk_fault_t *f, int64_t value, int64_t bound) {
  if (f->fn) f->fn(f->ctx, f->kind, f->what ? f->what : "index", value, bound, f->origin);
}

/* X-macro over dtypes: (enum, suffix of load/store). */
// clang-format off
#define TNK_FOR_EACH_DTYPE(X) \
  X(TNK_BOOL, bool) \
  X(TNK_U8, tnk_u8) \
  X(TNK_I8, tnk_i8) \
  X(TNK_I16, tnk_i16) \
  X(TNK_I32, tnk_i32) \
  X(TNK_I64, tnk_i64) \
  X(TNK_F16, f16) \
  X(TNK_BF16, bf16) \
  X(TNK_F32, f32) \
  X(TNK_F64, f64) \
  X(TNK_C64, c64) \
  X(TNK_C128, c128)
// clang-format on

/* Load/store of any dtype, chosen at run time. */
static inline tnk_val_t tnk_load_any(const char *p, int dt) {
  switch (dt) {
#define TNK_L_(E, N) \
  case E: return tnk_load_##N(p);
    TNK_FOR_EACH_DTYPE(TNK_L_)
#undef TNK_L_
    default: return (tnk_val_t){0, 0, 0, 0};
  }
}

static inline void tnk_store_any(char *p, int dt, tnk_val_t v) {
  switch (dt) {
#define TNK_S_(E, N) \
  case E: tnk_store_##N(p, v); break;
    TNK_FOR_EACH_DTYPE(TNK_S_)
#undef TNK_S_
    default: break;
  }
}

#endif
