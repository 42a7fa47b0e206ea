/* The element-wise op tables: one row per op, the one place an op of these
 * families is named. Each row generates
 *   - the op's constant TNK_<ID> (tnk.h: tnk_unary_op_t, tnk_binary_op_t),
 *   - its loops in every kernel variant and their rows of the loop table, by
 *     designated initializer (eltwise_loops.h, compiled per ISA), and
 *   - the C test's reference (csrc/tests/test_eltwise.c), which runs every
 *     row against it, so a row cannot be added without its oracle.
 * Adding an op: one row here, the aten registration that launches it
 * (docs/ARCHITECTURE.md, "An element-wise op").
 *
 * The kernel column is expanded only inside eltwise_loops.h, in its
 * precision macros (EXP, LOG, ... are expf, logf, ... for fp32 and the half
 * types, which compute in fp32 and round once, and exp, log, ... for fp64;
 * C the compute type). The reference column is expanded only in the C test,
 * in double; ref_* names are the test's helpers. Neither is evaluated
 * anywhere else: this header is safe to include from C++ (tnk.h does). */
#ifndef TNK_ELTWISE_OPS_H
#define TNK_ELTWISE_OPS_H

/* TNK_UNARY_OPS(X): X(ID, name, kernel, reference)
 *   kernel: the value from x and the op's parameters p0, p1, p2
 *   reference: the value from v and p0, p1, p2 in double */
#define TNK_UNARY_OPS(X)                                                                        \
  X(EXP, exp, EXP(x), exp(v))                                                                   \
  X(LOG, log, LOG(x), log(v))                                                                   \
  X(LOG1P, log1p, LOG1P(x), log1p(v))                                                           \
  X(EXPM1, expm1, EXPM1(x), expm1(v))                                                           \
  X(TANH, tanh, TANH(x), tanh(v))                                                               \
  X(SIGMOID, sigmoid, SIGMOID(x), 1 / (1 + exp(-v)))                                            \
  X(GELU, gelu, (x) * (C)0.5 * (1 + ERF((x) * (C)0.7071067811865476)),                          \
    0.5 * v * erfc(-v / sqrt(2.0)))                                                             \
  X(GELU_TANH, gelu_tanh,                                                                       \
    (C)0.5 * (x) * (1 + TANH((C)0.7978845608028654 * ((x) + (C)0.044715 * (x) * (x) * (x)))),   \
    0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))))                          \
  X(SILU, silu, (x) * SIGMOID(x), v / (1 + exp(-v)))                                            \
  X(RELU, relu, (x) > 0 ? (x) : ((x) != (x) ? (x) : 0), fmax(v, 0))                             \
  X(RSQRT, rsqrt, 1 / SQRT(x), pow(v, -0.5))                                                    \
  X(SQRT, sqrt, SQRT(x), sqrt(v))                                                               \
  X(NEG, neg, -(x), -v)                                                                         \
  X(ABS, abs, FABS(x), fabs(v))                                                                 \
  X(SIN, sin, SIN(x), sin(v))                                                                   \
  X(COS, cos, COS(x), cos(v))                                                                   \
  X(ERF, erf, ERF(x), erf(v))                                                                   \
  X(RECIPROCAL, reciprocal, 1 / (x), 1 / v)                                                     \
  /* x ** p0 */                                                                                 \
  X(POW_SCALAR, pow_scalar,                                                                     \
    (p0 == 2.0   ? (x) * (x)                                                                    \
     : p0 == 0.5 ? SQRT(x)                                                                      \
     : p0 == 1.0 ? (x)                                                                          \
                 : POW(x, (C)p0)),                                                              \
    pow(v, p0))                                                                                 \
  X(CEIL, ceil, CEIL(x), ceil(v))                                                               \
  X(FLOOR, floor, FLOOR(x), floor(v))                                                           \
  X(TRUNC, trunc, TRUNC(x), trunc(v))                                                           \
  X(ROUND, round, NEARBYINT(x), ref_round_half_even(v))                                         \
  X(ATAN, atan, ATAN(x), atan(v))                                                               \
  X(ASIN, asin, ASIN(x), asin(v))                                                               \
  X(ACOS, acos, ACOS(x), acos(v))                                                               \
  X(TAN, tan, TAN(x), tan(v))                                                                   \
  X(SINH, sinh, SINH(x), sinh(v))                                                               \
  X(COSH, cosh, COSH(x), cosh(v))                                                               \
  X(ASINH, asinh, ASINH(x), asinh(v))                                                           \
  X(ACOSH, acosh, ACOSH(x), acosh(v))                                                           \
  X(ATANH, atanh, ATANH(x), atanh(v))                                                           \
  X(EXP2, exp2, EXP2(x), pow(2, v))                                                             \
  X(LOG2, log2, LOG2(x), log(v) / log(2))                                                       \
  X(LOG10, log10, LOG10(x), log(v) / log(10))                                                   \
  X(FRAC, frac, (x) - TRUNC(x), fmod(v, 1))                                                     \
  X(ERFINV, erfinv, (C)erfinv_d((double)(x)), ref_erfinv(v))                                    \
  X(MISH, mish, (x) * TANH(LOG1P(EXP(x))), v * tanh(log(1 + exp(v))))                           \
  X(HARDSWISH, hardswish, (x) * CLAMP06((x) + 3) / 6, v * fmin(fmax(v + 3, 0), 6) / 6)          \
  X(HARDSIGMOID, hardsigmoid, CLAMP06((x) + 3) / 6, fmin(fmax(v + 3, 0), 6) / 6)                \
  /* slope p0 */                                                                                \
  X(LEAKY_RELU, leaky_relu, (x) > 0 ? (x) : (x) * (C)p0, v > 0 ? v : p0 * v)                    \
  /* clamp to [p0, p1], NaN kept */                                                             \
  X(HARDTANH, hardtanh, (x) < (C)p0 ? (C)p0 : (x) > (C)p1 ? (C)p1 : (x), fmin(fmax(v, p0), p1)) \
  /* alpha p0, scale p1, input_scale p2 */                                                      \
  X(ELU, elu, ({ /* expm1 of min(x, 0) on every lane: a call outside the branch vectorises */   \
                 C em_ = EXPM1(((x) < 0 ? (x) : 0) * (C)p2);                                    \
                 (x) <= 0 ? em_ * ((C)p0 * (C)p1) : (x) * (C)p1;                                \
    }),                                                                                         \
    v > 0 ? p1 * v : p0 * p1 * (exp(p2 * v) - 1))                                               \
  /* eps p0 (< 0: no clamp) */                                                                  \
  X(LOGIT, logit, p0 < 0 ? LOG((x) / (1 - (x))) : LOG(LOGIT_CLAMP(x) / (1 - LOGIT_CLAMP(x))),   \
    ref_logit(v, p0))                                                                           \
  /* NaN -> p0, +inf -> p1, -inf -> p2 */                                                       \
  X(NAN_TO_NUM, nan_to_num,                                                                     \
    (x) != (x)            ? (C)p0                                                               \
    : (x) == (C)INFINITY  ? (C)p1                                                               \
    : (x) == -(C)INFINITY ? (C)p2                                                               \
                          : (x),                                                                \
    isnan(v)   ? p0                                                                             \
    : isinf(v) ? (v > 0 ? p1 : p2)                                                              \
               : v)                                                                             \
  X(ERFC, erfc, ERFC(x), 1 - erf(v))                                                            \
  /* log |gamma(x)| */                                                                          \
  X(LGAMMA, lgamma, LGAMMA(x), lgamma(v))                                                       \
  /* d/dx lgamma; -inf at +0, +inf at -0, NaN at negative integers */                           \
  X(DIGAMMA, digamma, (C)digamma_d((double)(x)), ref_digamma(v))                                \
  /* the modified Bessel function of the first kind, order 0 */                                 \
  X(I0, i0, (C)i0_d((double)(x)), ref_i0(v))                                                    \
  /* sin(pi x) / (pi x), 1 at 0 */                                                              \
  X(SINC, sinc,                                                                                 \
    (x) == 0 ? (C)1 : SIN((C)3.14159265358979323846 * (x)) / ((C)3.14159265358979323846 * (x)), \
    v == 0 ? 1 : sin(M_PI * v) / (M_PI * v))

/* TNK_CLASSIFY_OPS(X): X(ID, name, kernel, reference): a bool from x (the
 * input widened to double) in the kernel (unary.c), from v in the test. */
#define TNK_CLASSIFY_OPS(X)                                   \
  X(ISNAN, isnan, x != x, !(v == v))                          \
  X(ISINF, isinf, isinf(x) != 0, fabs(v) > DBL_MAX)           \
  X(ISPOSINF, isposinf, x == INFINITY, v > DBL_MAX)           \
  X(ISNEGINF, isneginf, x == -INFINITY, v < -DBL_MAX)         \
  X(ISFINITE, isfinite, isfinite(x) != 0, fabs(v) <= DBL_MAX) \
  X(SIGNBIT, signbit, signbit(x) != 0, copysign(1.0, v) < 0)

/* TNK_COMPLEX_OPS(X): X(ID, name, out, kernel, reference) over complex64 /
 *   complex128 (unary.c)
 *   out: SAME (complex) or REAL (the real dtype of the same precision)
 *   kernel: from z, with CX_FN(f, z) the complex libm function f at z's
 *     precision (cexpf or cexp ...)
 *   reference: the test's ref_cx_t from re and im, in real arithmetic */
#define TNK_COMPLEX_OPS(X)                                                              \
  X(EXP, exp, SAME, CX_FN(cexp, z), ref_cx(exp(re) * cos(im), exp(re) * sin(im)))       \
  X(LOG, log, SAME, CX_FN(clog, z), ref_cx(log(hypot(re, im)), atan2(im, re)))          \
  X(SQRT, sqrt, SAME, CX_FN(csqrt, z), ref_csqrt(re, im))                               \
  X(RSQRT, rsqrt, SAME, 1 / CX_FN(csqrt, z), ref_cinv(ref_csqrt(re, im)))               \
  X(SIN, sin, SAME, CX_FN(csin, z), ref_cx(sin(re) * cosh(im), cos(re) * sinh(im)))     \
  X(COS, cos, SAME, CX_FN(ccos, z), ref_cx(cos(re) * cosh(im), -sin(re) * sinh(im)))    \
  X(TANH, tanh, SAME, CX_FN(ctanh, z),                                                  \
    ref_cx(sinh(2 * re) / (cosh(2 * re) + cos(2 * im)),                                 \
           sin(2 * im) / (cosh(2 * re) + cos(2 * im))))                                 \
  X(SIGMOID, sigmoid, SAME, 1 / (1 + CX_FN(cexp, -z)),                                  \
    ref_cinv(ref_cx(1 + exp(-re) * cos(im), -exp(-re) * sin(im))))                      \
  X(NEG, neg, SAME, -z, ref_cx(-re, -im))                                               \
  X(CONJ, conj, SAME, CX_FN(conj, z), ref_cx(re, -im))                                  \
  X(RECIPROCAL, reciprocal, SAME, 1 / z, ref_cinv(ref_cx(re, im)))                      \
  /* z / |z|, 0 at 0 (torch.sgn) */                                                     \
  X(SGN, sgn, SAME, z == 0 ? 0 : z / CX_FN(cabs, z),                                    \
    hypot(re, im) == 0 ? ref_cx(0, 0) : ref_cx(re / hypot(re, im), im / hypot(re, im))) \
  X(ABS, abs, REAL, CX_FN(cabs, z), ref_cx(hypot(re, im), 0))                           \
  X(ANGLE, angle, REAL, CX_FN(carg, z), ref_cx(atan2(im, re), 0))

/* TNK_BINARY_OPS(X): X(ID, name, kind, kernel, reference)
 *   kind: ARITH (floating loops from the kernel column, in every variant's
 *     table; integer, bool and complex loops in binary.c where the op has
 *     them), CMP (comparison: out is bool, loops in binary.c), BITS
 *     (integer and bool only, loops in binary.c)
 *   kernel: the macro of eltwise_loops.h computing the value from x, y and
 *     the parameters alpha (al), beta, gamma; - for CMP and BITS
 *   reference: the value from a, b, al, be, ga in double (BITS: in int64_t) */
#define TNK_BINARY_OPS(X)                                                                      \
  X(ADD, add, ARITH, OP_ADD, a + al * b)                                                       \
  X(SUB, sub, ARITH, OP_SUB, a - al * b)                                                       \
  X(MUL, mul, ARITH, OP_MUL, a *b)                                                             \
  /* true division (floating dtypes only) */                                                   \
  X(DIV, div, ARITH, OP_DIV, a / b)                                                            \
  X(MAXIMUM, maximum, ARITH, OP_MAXIMUM, isnan(a) || isnan(b) ? NAN : fmax(a, b))              \
  X(MINIMUM, minimum, ARITH, OP_MINIMUM, isnan(a) || isnan(b) ? NAN : fmin(a, b))              \
  /* activation backward: a = grad_output, b = the saved tensor (floating) */                  \
  /* b = input, exact (erf) GELU */                                                            \
  X(GELU_BWD, gelu_bwd, ARITH, OP_GELU_BWD,                                                    \
    a * (0.5 * erfc(-b / sqrt(2.0)) + b * exp(-b * b / 2) / sqrt(2 * M_PI)))                   \
  /* b = input, tanh approximation */                                                          \
  X(GELU_TANH_BWD, gelu_tanh_bwd, ARITH, OP_GELU_TANH_BWD, ref_gelu_tanh_bwd(a, b))            \
  X(SILU_BWD, silu_bwd, ARITH, OP_SILU_BWD, a * (1 + (1 + b) * exp(-b)) / pow(1 + exp(-b), 2)) \
  /* b = output */                                                                             \
  X(SIGMOID_BWD, sigmoid_bwd, ARITH, OP_SIGMOID_BWD, a * b * (1 - b))                          \
  /* b = output */                                                                             \
  X(TANH_BWD, tanh_bwd, ARITH, OP_TANH_BWD, a * (1 - b) * (1 + b))                             \
  /* b = input; 0 where b <= alpha (ReLU's backward) */                                        \
  X(THRESHOLD_BWD, threshold_bwd, ARITH, OP_THRESHOLD_BWD, b > al ? a : 0)                     \
  /* comparisons: inputs of `dtype`, out is bool (any real dtype) */                           \
  X(EQ, eq, CMP, -, a == b)                                                                    \
  X(NE, ne, CMP, -, a != b)                                                                    \
  X(LT, lt, CMP, -, a < b)                                                                     \
  X(LE, le, CMP, -, a <= b)                                                                    \
  X(GT, gt, CMP, -, a > b)                                                                     \
  X(GE, ge, CMP, -, a >= b)                                                                    \
  X(BITAND, bitand, BITS, -, a &b)                                                             \
  X(BITOR, bitor, BITS, -, a | b)                                                              \
  X(BITXOR, bitxor, BITS, -, a ^ b)                                                            \
  /* Python semantics; integer dtypes count a zero divisor as a fault       \
   * (result 0); floats follow IEEE */                  \
  X(FLOORDIV, floordiv, ARITH, floor_div_f, floor(a / b))                                      \
  X(TRUNCDIV, truncdiv, ARITH, trunc_div_f, trunc(a / b))                                      \
  X(REMAINDER, remainder, ARITH, remainder_f, a - b * floor(a / b))                            \
  /* integers: by squaring, wrapping */                                                        \
  X(POW, pow, ARITH, pow_f, pow(a, b))                                                         \
  /* more activation backward (a = grad_output, b = the input unless noted) */                 \
  /* slope alpha */                                                                            \
  X(LEAKY_RELU_BWD, leaky_relu_bwd, ARITH, OP_LEAKY_RELU_BWD, b > 0 ? a : a * al)              \
  /* 0 outside (alpha, beta) = (min, max) */                                                   \
  X(HARDTANH_BWD, hardtanh_bwd, ARITH, OP_HARDTANH_BWD, b > al && b < be ? a : 0)              \
  X(HARDSWISH_BWD, hardswish_bwd, ARITH, OP_HARDSWISH_BWD,                                     \
    b < -3  ? 0                                                                                \
    : b > 3 ? a                                                                                \
            : a * (2 * b + 3) / 6)                                                             \
  X(HARDSIGMOID_BWD, hardsigmoid_bwd, ARITH, OP_HARDSIGMOID_BWD, fabs(b) < 3 ? a / 6 : 0)      \
  X(MISH_BWD, mish_bwd, ARITH, OP_MISH_BWD, ref_mish_bwd(a, b))                                \
  /* alpha, beta = scale, gamma = input_scale */                                               \
  X(ELU_BWD, elu_bwd, ARITH, OP_ELU_BWD, b > 0 ? a * be : a * al * be * ga * exp(ga * b))      \
  /* as ELU_BWD with b = the output */                                                         \
  X(ELU_RESULT_BWD, elu_result_bwd, ARITH, OP_ELU_RESULT_BWD,                                  \
    b > 0 ? a * be : a * ga * (b + al * be))                                                   \
  /* eps alpha (< 0: none) */                                                                  \
  X(LOGIT_BWD, logit_bwd, ARITH, OP_LOGIT_BWD, ref_logit_bwd(a, b, al))                        \
  X(ATAN2, atan2, ARITH, OP_ATAN2, atan2(a, b))                                                \
  /* floating dtypes; xlogy(0, y) = 0 unless y is NaN */                                       \
  X(XLOGY, xlogy, ARITH, OP_XLOGY, isnan(b) ? NAN : a == 0 ? 0 : a * log(b))                   \
  /* maximum ignoring a NaN operand (integers: maximum) */                                     \
  X(FMAX, fmax, ARITH, OP_FMAX, fmax(a, b))                                                    \
  X(FMIN, fmin, ARITH, OP_FMIN, fmin(a, b))                                                    \
  /* floating dtypes */                                                                        \
  X(COPYSIGN, copysign, ARITH, OP_COPYSIGN, copysign(a, b))                                    \
  /* floating dtypes: log(exp(a) + exp(b)) */                                                  \
  X(LOGADDEXP, logaddexp, ARITH, OP_LOGADDEXP, log(exp(a) + exp(b)))                           \
  /* floating dtypes: log2(2^a + 2^b) */                                                       \
  X(LOGADDEXP2, logaddexp2, ARITH, OP_LOGADDEXP2, log2(exp2(a) + exp2(b)))                     \
  /* floating dtypes */                                                                        \
  X(HYPOT, hypot, ARITH, OP_HYPOT, sqrt(a *a + b * b))                                         \
  /* b where a is 0, else a > 0 (real dtypes) */                                               \
  X(HEAVISIDE, heaviside, ARITH, OP_HEAVISIDE, a == 0 ? b : a > 0)                             \
  /* C's fmod; integers truncate, a zero divisor is a fault */                                 \
  X(FMOD, fmod, ARITH, OP_FMOD, a - b * trunc(a / b))

#endif
