// Elementwise ops of one operand (unary.c): math functions, activations with
// parameters, classification (isnan, isposinf...), bitwise_not, complex
// unary ops, and the activations composed from them (softplus, log_sigmoid,
// sign/sgn, glu, prelu).
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <c10/util/MathConstants.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {

// softplus(x) = log1p(exp(beta x)) / beta, linear above the threshold.
at::Tensor &softplus_out(const at::Tensor &self, const c10::Scalar &beta,
                         const c10::Scalar &threshold, at::Tensor &out) {
  double b = beta.toDouble(), t = threshold.toDouble();
  at::Tensor bx = self * b;
  at::Tensor r = at::where(bx > t, self, bx.exp().log1p() / b);
  return assign_result(out, r);
}

at::Tensor &softplus_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                  const c10::Scalar &beta, const c10::Scalar &threshold,
                                  at::Tensor &grad_input) {
  double b = beta.toDouble(), t = threshold.toDouble();
  at::Tensor bx = self * b;
  at::Tensor r = at::where(bx > t, grad, grad * bx.sigmoid());
  return assign_result(grad_input, r);
}

// log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)); the buffer is exp(-|x|).
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor &self) {
  at::Tensor buffer = self.abs().neg_().exp_();
  return {at::minimum(self, at::zeros_like(self)) - buffer.log1p(), buffer};
}

at::Tensor log_sigmoid_backward(const at::Tensor &grad, const at::Tensor &self,
                                const at::Tensor &buffer) {
  // d/dx = 1 - sigmoid(x) = sigmoid(-x)
  return grad * self.neg().sigmoid();
}

at::Tensor &sign_out(const at::Tensor &self, at::Tensor &out) {
  TORCH_CHECK(!self.is_complex(),
              "Unlike NumPy, torch.sign is not intended to support complex "
              "numbers. Please use torch.sgn instead.");
  if (self.scalar_type() == at::kBool) {
    resize_elementwise_out(out, self.sizes(), {&self});
    return out.copy_(self);
  }
  at::Tensor r = (self > 0).to(self.scalar_type()) - (self < 0).to(self.scalar_type());
  return assign_result(out, r);
}

// glu: first half times the sigmoid of the second, along `dim`.
at::Tensor &glu_out(const at::Tensor &self, int64_t dim, at::Tensor &out) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.size(d);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", n);
  at::Tensor r = self.narrow(d, 0, n / 2) * at::sigmoid(self.narrow(d, n / 2, n / 2));
  return assign_result(out, r);
}

at::Tensor glu_backward(const at::Tensor &grad, const at::Tensor &self, int64_t dim) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t h = self.size(d) / 2;
  at::Tensor a = self.narrow(d, 0, h), sb = at::sigmoid(self.narrow(d, h, h));
  at::Tensor ga = grad * sb;
  at::Tensor gb = ga * a * (1 - sb);
  return at::cat({ga, gb}, d);
}

at::Tensor &glu_backward_out(const at::Tensor &grad, const at::Tensor &self, int64_t dim,
                             at::Tensor &out) {
  at::Tensor r = torch_neuronx::glu_backward(grad, self, dim);
  return assign_result(out, r);
}

// PReLU's kernel: the weight arrives broadcastable to the input.
at::Tensor prelu_kernel(const at::Tensor &self, const at::Tensor &weight) {
  return at::where(self > 0, self, weight * self);
}

std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor &grad,
                                                         const at::Tensor &self,
                                                         const at::Tensor &weight) {
  at::Tensor pos = self > 0;
  at::Tensor gs = at::where(pos, grad, weight * grad);
  at::Tensor gw = at::where(pos, at::zeros_like(gs), self * grad);
  return {gs, gw};
}

namespace {

bool float_kernel_ok(const at::Tensor &t) {
  bool ok;
  tnk_dtype_t dt = to_tnk(t.scalar_type(), &ok);
  return ok && t.dim() <= TNRT_MAX_DIMS &&
         (dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16);
}

// The descriptor of an element-wise map from `in` to `out` (same shape).
tnk_unary_args_t map_args(const at::Tensor &out, const at::Tensor &in, int op) {
  tnk_unary_args_t a{};
  a.shape.ndim = static_cast<int32_t>(out.dim());
  for (int64_t d = 0; d < out.dim(); d++) a.shape.sizes[d] = out.size(d);
  to_view(out, &a.out);
  to_view(in, &a.in);
  a.op = op;
  a.dtype = a.in.dtype;
  return a;
}

void launch_unary(const at::Tensor &out, const at::Tensor &in0, tnk_unary_op_t op, double p0,
                  const char *name, double p1 = 0, double p2 = 0) {
  if (out.numel() == 0) return;
  at::assert_no_internal_overlap(out);
  at::Tensor holder;
  const at::Tensor &in = readable_input(out, in0, holder);
  tnk_unary_args_t a = map_args(out, in, op);
  a.dtype = a.out.dtype;
  a.p0 = p0;
  a.p1 = p1;
  a.p2 = p2;
  launch_kernel<TNK_K_UNARY>(out.device().index(), a, name, out.numel());
}

at::Tensor unary_functional(const at::Tensor &x, tnk_unary_op_t op, double p0, const char *name,
                            double p1 = 0, double p2 = 0) {
  at::Tensor out =
      x.is_contiguous() ? empty_neuron(x.sizes(), x.scalar_type(), x.device()) : at::empty_like(x);
  launch_unary(out, x, op, p0, name, p1, p2);
  return out;
}

at::Tensor &unary_out(const at::Tensor &x, at::Tensor &out, tnk_unary_op_t op, double p0,
                      const char *name, double p1 = 0, double p2 = 0) {
  TORCH_CHECK(out.device() == x.device(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              x.device(), " and ", out.device(), "!");
  resize_elementwise_out(out, x.sizes(), {&x});
  launch_unary(out, x, op, p0, name, p1, p2);
  return out;
}

// Integer and bool inputs, as ATen treats them per op: math functions promote
// to the default floating dtype (sin(int) is float), neg/abs stay integer,
// rounding is the identity.
enum class IntRule { kFallback, kPromote, kKernel, kIdentity };

bool int_kernel_ok(const at::Tensor &t, bool allow_bool) {
  at::ScalarType s = t.scalar_type();
  return c10::isIntegralType(s, allow_bool) && t.dim() <= TNRT_MAX_DIMS && !is_wide_unsigned(s);
}

at::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

// The functional form for a non-floating input; undefined when it falls back.
at::Tensor unary_int_functional(const at::Tensor &x, tnk_unary_op_t op, IntRule rule,
                                const char *name) {
  switch (rule) {
    case IntRule::kPromote:
      if (int_kernel_ok(x, true)) return unary_functional(x.to(default_float()), op, 0, name);
      break;
    case IntRule::kKernel:
      if (int_kernel_ok(x, false)) return unary_functional(x, op, 0, name);
      break;
    case IntRule::kIdentity:
      if (int_kernel_ok(x, false)) return x.clone();
      break;
    default: break;
  }
  return at::Tensor();
}

// ---- complex inputs
// The complex kernel for a real-math op, or -1 where the op has none.
int complex_op(tnk_unary_op_t op) {
  switch (op) {
    case TNK_EXP: return TNK_CX_EXP;
    case TNK_LOG: return TNK_CX_LOG;
    case TNK_SQRT: return TNK_CX_SQRT;
    case TNK_RSQRT: return TNK_CX_RSQRT;
    case TNK_SIN: return TNK_CX_SIN;
    case TNK_COS: return TNK_CX_COS;
    case TNK_TANH: return TNK_CX_TANH;
    case TNK_SIGMOID: return TNK_CX_SIGMOID;
    case TNK_NEG: return TNK_CX_NEG;
    case TNK_RECIPROCAL: return TNK_CX_RECIPROCAL;
    case TNK_ABS: return TNK_CX_ABS;
    default: return -1;
  }
}

bool complex_ok(const at::Tensor &t) {
  return (t.scalar_type() == at::kComplexFloat || t.scalar_type() == at::kComplexDouble) &&
         t.dim() <= TNRT_MAX_DIMS;
}

// In place, the memory is the tensor: no lazy conjugate/negative bit on it.
bool complex_inplace_ok(const at::Tensor &t) {
  return complex_ok(t) && !t.is_conj() && !t.is_neg();
}

bool real_result(int op) { return tnk_complex_real_output(op) != 0; }

// out = op(x) (out may be x for in-place ops whose result stays complex).
void launch_complex(const at::Tensor &out, const at::Tensor &in0, int op, const char *name) {
  if (out.numel() == 0) return;
  at::assert_no_internal_overlap(out);
  at::Tensor holder;
  const at::Tensor &in = readable_input(out, in0, holder);
  tnk_unary_args_t a = map_args(out, in, op);
  launch_kernel<TNK_K_COMPLEX_UNARY>(out.device().index(), a, name);
}

at::ScalarType complex_result_type(const at::Tensor &x, int op) {
  return real_result(op) ? c10::toRealValueType(x.scalar_type()) : x.scalar_type();
}

at::Tensor complex_functional(const at::Tensor &x, int op, const char *name) {
  at::Tensor out = at::empty_like(x, x.options().dtype(complex_result_type(x, op)));
  launch_complex(out, x.resolve_conj().resolve_neg(), op, name);
  return out;
}

at::Tensor &complex_out(const at::Tensor &x, at::Tensor &out, int op, const char *name) {
  resize_elementwise_out(out, x.sizes(), {&x});
  launch_complex(out, x.resolve_conj().resolve_neg(), op, name);
  return out;
}

}  // namespace

// sgn: sign for real tensors (abs's backward uses it), z / |z| (0 at 0) for
// complex ones (the backward of abs of an stft or fft)
at::Tensor &sgn_out(const at::Tensor &self, at::Tensor &out) {
  if (!self.is_complex()) return sign_out(self, out);
  if (complex_ok(self) && out.scalar_type() == self.scalar_type() &&
      out.device() == self.device() && !out.is_conj() && !out.is_neg())
    return complex_out(self, out, TNK_CX_SGN, "aten::sgn");
  return FALLBACK(sgn_out, self, out);
}

#define NEURON_UNARY(NAME, OP, RULE)                                                            \
  at::Tensor NAME(const at::Tensor &x) {                                                        \
    if (float_kernel_ok(x)) return unary_functional(x, OP, 0, "aten::" #NAME);                  \
    if (complex_op(OP) >= 0 && complex_ok(x))                                                   \
      return complex_functional(x, complex_op(OP), "aten::" #NAME);                             \
    at::Tensor r = unary_int_functional(x, OP, IntRule::RULE, "aten::" #NAME);                  \
    return r.defined() ? r : FALLBACK(NAME, x);                                                 \
  }                                                                                             \
  at::Tensor &NAME##_(at::Tensor &x) {                                                          \
    bool int_ok = (IntRule::RULE == IntRule::kKernel || IntRule::RULE == IntRule::kIdentity) && \
                  int_kernel_ok(x, false);                                                      \
    if (complex_op(OP) >= 0 && !real_result(complex_op(OP)) && complex_inplace_ok(x)) {         \
      launch_complex(x, x, complex_op(OP), "aten::" #NAME "_");                                 \
      return x;                                                                                 \
    }                                                                                           \
    if (!float_kernel_ok(x) && !int_ok) return FALLBACK(NAME##_, x);                            \
    if (IntRule::RULE != IntRule::kIdentity || !int_ok)                                         \
      launch_unary(x, x, OP, 0, "aten::" #NAME "_");                                            \
    return x;                                                                                   \
  }                                                                                             \
  at::Tensor &NAME##_out(const at::Tensor &x, at::Tensor &out) {                                \
    if (out.scalar_type() == x.scalar_type() &&                                                 \
        (float_kernel_ok(x) || (IntRule::RULE == IntRule::kKernel && int_kernel_ok(x, false)))) \
      return unary_out(x, out, OP, 0, "aten::" #NAME);                                          \
    if (IntRule::RULE == IntRule::kPromote && int_kernel_ok(x, true) && float_kernel_ok(out) && \
        out.device() == x.device())                                                             \
      return unary_out(x.to(out.scalar_type()), out, OP, 0, "aten::" #NAME);                    \
    if (complex_op(OP) >= 0 && complex_ok(x) && out.device() == x.device() &&                   \
        out.scalar_type() == complex_result_type(x, complex_op(OP)) && !out.is_conj() &&        \
        !out.is_neg())                                                                          \
      return complex_out(x, out, complex_op(OP), "aten::" #NAME);                               \
    return FALLBACK(NAME##_out, x, out);                                                        \
  }

NEURON_UNARY(exp, TNK_EXP, kPromote)
NEURON_UNARY(log, TNK_LOG, kPromote)
NEURON_UNARY(log1p, TNK_LOG1P, kPromote)
NEURON_UNARY(expm1, TNK_EXPM1, kPromote)
NEURON_UNARY(tanh, TNK_TANH, kPromote)
NEURON_UNARY(sigmoid, TNK_SIGMOID, kPromote)
NEURON_UNARY(sqrt, TNK_SQRT, kPromote)
NEURON_UNARY(rsqrt, TNK_RSQRT, kPromote)
NEURON_UNARY(neg, TNK_NEG, kKernel)
NEURON_UNARY(abs, TNK_ABS, kKernel)
NEURON_UNARY(sin, TNK_SIN, kPromote)
NEURON_UNARY(cos, TNK_COS, kPromote)
NEURON_UNARY(erf, TNK_ERF, kPromote)
NEURON_UNARY(reciprocal, TNK_RECIPROCAL, kPromote)
NEURON_UNARY(silu, TNK_SILU, kFallback)
NEURON_UNARY(ceil, TNK_CEIL, kIdentity)
NEURON_UNARY(floor, TNK_FLOOR, kIdentity)
NEURON_UNARY(trunc, TNK_TRUNC, kIdentity)
NEURON_UNARY(round, TNK_ROUND, kIdentity)
NEURON_UNARY(atan, TNK_ATAN, kPromote)
NEURON_UNARY(asin, TNK_ASIN, kPromote)
NEURON_UNARY(acos, TNK_ACOS, kPromote)
NEURON_UNARY(tan, TNK_TAN, kPromote)
NEURON_UNARY(sinh, TNK_SINH, kPromote)
NEURON_UNARY(cosh, TNK_COSH, kPromote)
NEURON_UNARY(asinh, TNK_ASINH, kPromote)
NEURON_UNARY(acosh, TNK_ACOSH, kPromote)
NEURON_UNARY(atanh, TNK_ATANH, kPromote)
NEURON_UNARY(exp2, TNK_EXP2, kPromote)
NEURON_UNARY(log2, TNK_LOG2, kPromote)
NEURON_UNARY(log10, TNK_LOG10, kPromote)
NEURON_UNARY(erfinv, TNK_ERFINV, kPromote)
NEURON_UNARY(erfc, TNK_ERFC, kPromote)
NEURON_UNARY(lgamma, TNK_LGAMMA, kPromote)
NEURON_UNARY(digamma, TNK_DIGAMMA, kPromote)
NEURON_UNARY(sinc, TNK_SINC, kPromote)
NEURON_UNARY(i0, TNK_I0, kPromote)
NEURON_UNARY(frac, TNK_FRAC, kFallback)
NEURON_UNARY(mish, TNK_MISH, kFallback)
NEURON_UNARY(hardswish, TNK_HARDSWISH, kFallback)
NEURON_UNARY(hardsigmoid, TNK_HARDSIGMOID, kFallback)

// ------------------------------------------- activations with parameters
// Functional, in-place and out= forms share one body: `out` undefined means
// a new tensor, `out` == x in place.
namespace {
at::Tensor param_unary(const at::Tensor &x, at::Tensor *out, tnk_unary_op_t op, const char *name,
                       double p0, double p1 = 0, double p2 = 0) {
  if (out == nullptr) return unary_functional(x, op, p0, name, p1, p2);
  if (out->is_same(x)) {
    launch_unary(x, x, op, p0, name, p1, p2);
    return x;
  }
  return unary_out(x, *out, op, p0, name, p1, p2);
}
bool param_ok(const at::Tensor &x, const at::Tensor *out) {
  return float_kernel_ok(x) && (out == nullptr || out->scalar_type() == x.scalar_type());
}
}  // namespace

at::Tensor leaky_relu(const at::Tensor &x, const c10::Scalar &slope) {
  if (!param_ok(x, nullptr)) return FALLBACK(leaky_relu, x, slope);
  return param_unary(x, nullptr, TNK_LEAKY_RELU, "aten::leaky_relu", slope.toDouble());
}
at::Tensor &leaky_relu_(at::Tensor &x, const c10::Scalar &slope) {
  if (!param_ok(x, &x)) return FALLBACK(leaky_relu_, x, slope);
  param_unary(x, &x, TNK_LEAKY_RELU, "aten::leaky_relu_", slope.toDouble());
  return x;
}
at::Tensor &leaky_relu_out(const at::Tensor &x, const c10::Scalar &slope, at::Tensor &out) {
  if (!param_ok(x, &out)) return FALLBACK(leaky_relu_out, x, slope, out);
  param_unary(x, &out, TNK_LEAKY_RELU, "aten::leaky_relu", slope.toDouble());
  return out;
}

// hardtanh (relu6) of an integer tensor is a clamp to the limits truncated to
// integers (no type promotion), as ATen computes it
bool integer_clamp_ok(const at::Tensor &x) {
  return c10::isIntegralType(x.scalar_type(), false) && !is_wide_unsigned(x.scalar_type());
}
c10::Scalar int_limit(const at::Tensor &x, const c10::Scalar &v) {
  int64_t i = v.toLong();
  TORCH_CHECK(x.scalar_type() != at::kByte || i >= 0,
              "cannot do hardtanh on an unsigned type with negative limits");
  return c10::Scalar(i);
}

at::Tensor hardtanh(const at::Tensor &x, const c10::Scalar &lo, const c10::Scalar &hi) {
  if (integer_clamp_ok(x)) return at::clamp(x, int_limit(x, lo), int_limit(x, hi));
  if (!param_ok(x, nullptr)) return FALLBACK(hardtanh, x, lo, hi);
  return param_unary(x, nullptr, TNK_HARDTANH, "aten::hardtanh", lo.toDouble(), hi.toDouble());
}
at::Tensor &hardtanh_(at::Tensor &x, const c10::Scalar &lo, const c10::Scalar &hi) {
  if (integer_clamp_ok(x)) return at::clamp_(x, int_limit(x, lo), int_limit(x, hi));
  if (!param_ok(x, &x)) return FALLBACK(hardtanh_, x, lo, hi);
  param_unary(x, &x, TNK_HARDTANH, "aten::hardtanh_", lo.toDouble(), hi.toDouble());
  return x;
}
at::Tensor &hardtanh_out(const at::Tensor &x, const c10::Scalar &lo, const c10::Scalar &hi,
                         at::Tensor &out) {
  if (integer_clamp_ok(x) && out.scalar_type() == x.scalar_type())
    return at::clamp_out(out, x, int_limit(x, lo), int_limit(x, hi));
  if (!param_ok(x, &out)) return FALLBACK(hardtanh_out, x, lo, hi, out);
  param_unary(x, &out, TNK_HARDTANH, "aten::hardtanh", lo.toDouble(), hi.toDouble());
  return out;
}

#define ELU_ARGS const c10::Scalar &alpha, const c10::Scalar &scale, const c10::Scalar &iscale
#define ELU_PARAMS alpha.toDouble(), scale.toDouble(), iscale.toDouble()
at::Tensor elu(const at::Tensor &x, ELU_ARGS) {
  if (!param_ok(x, nullptr)) return FALLBACK(elu, x, alpha, scale, iscale);
  return param_unary(x, nullptr, TNK_ELU, "aten::elu", ELU_PARAMS);
}
at::Tensor &elu_(at::Tensor &x, ELU_ARGS) {
  if (!param_ok(x, &x)) return FALLBACK(elu_, x, alpha, scale, iscale);
  param_unary(x, &x, TNK_ELU, "aten::elu_", ELU_PARAMS);
  return x;
}
at::Tensor &elu_out(const at::Tensor &x, ELU_ARGS, at::Tensor &out) {
  if (!param_ok(x, &out)) return FALLBACK(elu_out, x, alpha, scale, iscale, out);
  param_unary(x, &out, TNK_ELU, "aten::elu", ELU_PARAMS);
  return out;
}

double logit_eps(std::optional<double> eps) { return eps.has_value() ? *eps : -1.0; }
at::Tensor logit(const at::Tensor &x, std::optional<double> eps) {
  if (!param_ok(x, nullptr)) {
    if (int_kernel_ok(x, true))  // logit(int) promotes like the math functions
      return param_unary(x.to(default_float()), nullptr, TNK_LOGIT, "aten::logit", logit_eps(eps));
    return FALLBACK(logit, x, eps);
  }
  return param_unary(x, nullptr, TNK_LOGIT, "aten::logit", logit_eps(eps));
}
at::Tensor &logit_(at::Tensor &x, std::optional<double> eps) {
  if (!param_ok(x, &x)) return FALLBACK(logit_, x, eps);
  param_unary(x, &x, TNK_LOGIT, "aten::logit_", logit_eps(eps));
  return x;
}
at::Tensor &logit_out(const at::Tensor &x, std::optional<double> eps, at::Tensor &out) {
  if (!param_ok(x, &out)) return FALLBACK(logit_out, x, eps, out);
  param_unary(x, &out, TNK_LOGIT, "aten::logit", logit_eps(eps));
  return out;
}

// nan_to_num: defaults are the dtype's largest finite values, as on CPU.
namespace {
void nan_to_num_params(const at::Tensor &x, std::optional<double> nan, std::optional<double> pinf,
                       std::optional<double> ninf, double *p) {
  double big = 0;
  switch (x.scalar_type()) {
    case at::kHalf: big = 65504.0; break;
    case at::kBFloat16: big = static_cast<double>(std::numeric_limits<c10::BFloat16>::max()); break;
    case at::kFloat: big = std::numeric_limits<float>::max(); break;
    default: big = std::numeric_limits<double>::max(); break;
  }
  p[0] = nan.value_or(0.0);
  p[1] = pinf.value_or(big);
  p[2] = ninf.value_or(-big);
}
}  // namespace
#define NTN_ARGS std::optional<double> nan, std::optional<double> pinf, std::optional<double> ninf
at::Tensor nan_to_num(const at::Tensor &x, NTN_ARGS) {
  if (int_kernel_ok(x, true)) return x.clone();  // integers have no NaN or inf
  if (!param_ok(x, nullptr)) return FALLBACK(nan_to_num, x, nan, pinf, ninf);
  double p[3];
  nan_to_num_params(x, nan, pinf, ninf, p);
  return param_unary(x, nullptr, TNK_NAN_TO_NUM, "aten::nan_to_num", p[0], p[1], p[2]);
}
at::Tensor &nan_to_num_(at::Tensor &x, NTN_ARGS) {
  if (int_kernel_ok(x, true)) return x;
  if (!param_ok(x, &x)) return FALLBACK(nan_to_num_, x, nan, pinf, ninf);
  double p[3];
  nan_to_num_params(x, nan, pinf, ninf, p);
  param_unary(x, &x, TNK_NAN_TO_NUM, "aten::nan_to_num_", p[0], p[1], p[2]);
  return x;
}
at::Tensor &nan_to_num_out(const at::Tensor &x, NTN_ARGS, at::Tensor &out) {
  if (!param_ok(x, &out)) return FALLBACK(nan_to_num_out, x, nan, pinf, ninf, out);
  double p[3];
  nan_to_num_params(x, nan, pinf, ninf, p);
  param_unary(x, &out, TNK_NAN_TO_NUM, "aten::nan_to_num", p[0], p[1], p[2]);
  return out;
}

tnk_unary_op_t gelu_op(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  return approximate == "tanh" ? TNK_GELU_TANH : TNK_GELU;
}

at::Tensor gelu(const at::Tensor &x, c10::string_view approximate) {
  tnk_unary_op_t op = gelu_op(approximate);
  if (!float_kernel_ok(x)) return FALLBACK(gelu, x, approximate);
  return unary_functional(x, op, 0, "aten::gelu");
}

at::Tensor &gelu_(at::Tensor &x, c10::string_view approximate) {
  tnk_unary_op_t op = gelu_op(approximate);
  if (!float_kernel_ok(x)) return FALLBACK(gelu_, x, approximate);
  launch_unary(x, x, op, 0, "aten::gelu_");
  return x;
}

at::Tensor &gelu_out(const at::Tensor &x, c10::string_view approximate, at::Tensor &out) {
  tnk_unary_op_t op = gelu_op(approximate);
  if (!float_kernel_ok(x) || out.scalar_type() != x.scalar_type())
    return FALLBACK(gelu_out, x, approximate, out);
  return unary_out(x, out, op, 0, "aten::gelu");
}

at::Tensor relu(const at::Tensor &x) {
  if (!float_kernel_ok(x)) return FALLBACK(relu, x);
  return unary_functional(x, TNK_RELU, 0, "aten::relu");
}

at::Tensor &relu_(at::Tensor &x) {
  if (!float_kernel_ok(x)) return FALLBACK(relu_, x);
  launch_unary(x, x, TNK_RELU, 0, "aten::relu_");
  return x;
}

// x ** p for floating x and a real scalar exponent (the result keeps x's
// dtype, as ATen's type promotion gives for a floating tensor).
bool pow_ok(const at::Tensor &x, const c10::Scalar &p) {
  return float_kernel_ok(x) && !p.isComplex() && !p.isBoolean();
}

at::Tensor pow_tensor_scalar(const at::Tensor &x, const c10::Scalar &p) {
  if (!pow_ok(x, p)) return FALLBACK(pow_Tensor_Scalar, x, p);
  return unary_functional(x, TNK_POW_SCALAR, p.toDouble(), "aten::pow");
}

at::Tensor &pow_tensor_scalar_out(const at::Tensor &x, const c10::Scalar &p, at::Tensor &out) {
  if (!pow_ok(x, p) || out.scalar_type() != x.scalar_type())
    return FALLBACK(pow_Tensor_Scalar_out, x, p, out);
  return unary_out(x, out, TNK_POW_SCALAR, p.toDouble(), "aten::pow");
}

at::Tensor &pow_scalar_(at::Tensor &x, const c10::Scalar &p) {
  if (!pow_ok(x, p)) return FALLBACK(pow__Scalar, x, p);
  launch_unary(x, x, TNK_POW_SCALAR, p.toDouble(), "aten::pow_");
  return x;
}

// ------------------------------------------------------ classification
// isnan / isinf / isposinf / isneginf of floating tensors into bool.

namespace {

at::Tensor &classify_into(at::Tensor &out, const at::Tensor &x, tnk_classify_op_t op,
                          const char *name) {
  resize_elementwise_out(out, x.sizes(), {&x});
  if (out.numel() == 0) return out;
  tnk_unary_args_t a = map_args(out, x, op);
  launch_kernel<TNK_K_CLASSIFY>(x.device().index(), a, name);
  return out;
}
}  // namespace

#define NEURON_CLASSIFY(NAME, OP)                                                            \
  at::Tensor NAME(const at::Tensor &x) {                                                     \
    if (!float_kernel_ok(x)) return FALLBACK(NAME, x);                                       \
    at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBool));                     \
    return classify_into(out, x, OP, "aten::" #NAME);                                        \
  }                                                                                          \
  at::Tensor &NAME##_out(const at::Tensor &x, at::Tensor &out) {                             \
    if (!float_kernel_ok(x) || out.scalar_type() != at::kBool || out.device() != x.device()) \
      return FALLBACK(NAME##_out, x, out);                                                   \
    return classify_into(out, x, OP, "aten::" #NAME);                                        \
  }

NEURON_CLASSIFY(isposinf, TNK_ISPOSINF)
NEURON_CLASSIFY(isneginf, TNK_ISNEGINF)

// signbit: floating tensors by the kernel, integers as x < 0 (bool: never)
at::Tensor &signbit_out(const at::Tensor &x, at::Tensor &out) {
  if (out.scalar_type() != at::kBool || out.device() != x.device() ||
      !(float_kernel_ok(x) || (c10::isIntegralType(x.scalar_type(), true) && !x.is_complex())))
    return FALLBACK(signbit_out, x, out);
  if (float_kernel_ok(x)) return classify_into(out, x, TNK_SIGNBIT, "aten::signbit");
  return at::lt_out(out, x, 0);
}

at::Tensor signbit(const at::Tensor &x) {
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBool));
  return signbit_out(x, out);
}

at::Tensor isnan(const at::Tensor &x) {
  // integers and bools are never NaN; a complex number is when either part is
  if (c10::isIntegralType(x.scalar_type(), true))
    return at::zeros(x.sizes(), x.options().dtype(at::kBool));
  if (x.is_complex()) return at::logical_or(at::isnan(at::real(x)), at::isnan(at::imag(x)));
  if (!float_kernel_ok(x)) return FALLBACK(isnan, x);
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBool));
  return classify_into(out, x, TNK_ISNAN, "aten::isnan");
}

// bitwise_not of integer and bool tensors
namespace {
bool int_or_bool(const at::Tensor &t) {
  return c10::isIntegralType(t.scalar_type(), true) && t.dim() <= TNRT_MAX_DIMS &&
         !is_wide_unsigned(t.scalar_type());
}
at::Tensor &not_into(at::Tensor &out, const at::Tensor &x0) {
  resize_elementwise_out(out, x0.sizes(), {&x0});
  if (out.numel() == 0) return out;
  at::Tensor x = x0;
  if (!x.is_same(out) && x.storage().is_alias_of(out.storage())) x = x.clone();
  tnk_unary_args_t a{};
  a.shape.ndim = static_cast<int32_t>(x.dim());
  for (int64_t d = 0; d < x.dim(); d++) a.shape.sizes[d] = x.size(d);
  to_view(out, &a.out);
  to_view(x, &a.in);
  a.dtype = a.in.dtype;
  launch_kernel<TNK_K_BITWISE_NOT>(x.device().index(), a, "aten::bitwise_not");
  return out;
}
}  // namespace

at::Tensor bitwise_not(const at::Tensor &x) {
  if (!int_or_bool(x)) return FALLBACK(bitwise_not, x);
  at::Tensor out = at::empty_like(x);
  return not_into(out, x);
}
at::Tensor &bitwise_not_(at::Tensor &x) {
  if (!int_or_bool(x)) return FALLBACK(bitwise_not_, x);
  return not_into(x, x);
}
at::Tensor &bitwise_not_out(const at::Tensor &x, at::Tensor &out) {
  if (!int_or_bool(x) || out.scalar_type() != x.scalar_type() || out.device() != x.device())
    return FALLBACK(bitwise_not_out, x, out);
  return not_into(out, x);
}

#define REGISTER_UNARY(m, NAME) \
  m.impl(#NAME, NAME);          \
  m.impl(#NAME "_", NAME##_);   \
  m.impl(#NAME ".out", NAME##_out);

// angle, conj_physical and complex(): complex kernels, real inputs composed.
at::Tensor angle(const at::Tensor &x) {
  if (complex_ok(x)) return complex_functional(x, TNK_CX_ANGLE, "aten::angle");
  if (float_kernel_ok(x))  // pi below zero, NaN kept, 0 elsewhere
    return at::where(x.isnan(), x, at::where(x.lt(0), c10::pi<double>, 0.0).to(x.scalar_type()));
  return FALLBACK(angle, x);
}

at::Tensor &angle_out(const at::Tensor &x, at::Tensor &out) {
  if (complex_ok(x) && out.device() == x.device() &&
      out.scalar_type() == c10::toRealValueType(x.scalar_type()) && !out.is_conj())
    return complex_out(x, out, TNK_CX_ANGLE, "aten::angle");
  if (float_kernel_ok(x) && out.scalar_type() == x.scalar_type() && out.device() == x.device()) {
    resize_elementwise_out(out, x.sizes(), {&x});
    return out.copy_(torch_neuronx::angle(x));
  }
  return FALLBACK(angle_out, x, out);
}

at::Tensor &conj_physical_out(const at::Tensor &x, at::Tensor &out) {
  if (out.device() != x.device() || out.scalar_type() != x.scalar_type() || out.is_conj())
    return FALLBACK(conj_physical_out, x, out);
  if (!x.is_complex()) {
    resize_elementwise_out(out, x.sizes(), {&x});
    return out.copy_(x);
  }
  if (!complex_ok(x)) return FALLBACK(conj_physical_out, x, out);
  return complex_out(x, out, TNK_CX_CONJ, "aten::conj_physical");
}

at::Tensor &conj_physical_(at::Tensor &x) {
  if (!x.is_complex()) return x;
  if (!complex_inplace_ok(x)) return FALLBACK(conj_physical_, x);
  launch_complex(x, x, TNK_CX_CONJ, "aten::conj_physical_");
  return x;
}

at::Tensor &complex_from_parts_out(const at::Tensor &re, const at::Tensor &im, at::Tensor &out) {
  bool ok = (re.scalar_type() == at::kFloat || re.scalar_type() == at::kDouble) &&
            re.device() == out.device() && im.device() == out.device();
  if (!ok) return FALLBACK(complex_out, re, im, out);
  TORCH_CHECK(re.scalar_type() == im.scalar_type(), "Expected object of scalar type ",
              re.scalar_type(), " but got scalar type ", im.scalar_type(), " for second argument");
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(re.scalar_type()),
              "Expected object of "
              "scalar type ",
              c10::toComplexType(re.scalar_type()), " but got scalar type ", out.scalar_type(),
              " for argument 'out'");
  resize_elementwise_out(out, at::infer_size(re.sizes(), im.sizes()), {&re, &im});
  at::Tensor parts = at::view_as_real(out);
  parts.select(-1, 0).copy_(re.expand(out.sizes()));
  parts.select(-1, 1).copy_(im.expand(out.sizes()));
  return out;
}

// threshold, hardshrink, softshrink: selections written as where() over the
// device's own element-wise kernels (NaN passes through each, as on CPU).
namespace {
at::Tensor same_dtype_scalar(const at::Scalar &v, const at::Tensor &like) {
  return at::scalar_tensor(v, like.options());
}

void check_shrink_lambda(const at::Tensor &self, const at::Scalar &lambd) {
  double l = lambd.toDouble();
  double hi = at::isFloatingType(self.scalar_type())
                  ? AT_DISPATCH_FLOATING_TYPES_AND2(
                        at::kBFloat16, at::kHalf, self.scalar_type(), "softshrink",
                        [] { return static_cast<double>(std::numeric_limits<scalar_t>::max()); })
                  : std::numeric_limits<double>::infinity();
  TORCH_CHECK(l >= 0 && l <= hi, "lambda must be in range [0, ", hi, "] for input dtype ",
              self.scalar_type(), ", but found ", l);
}
}  // namespace

at::Tensor &threshold_out(const at::Tensor &self, const at::Scalar &threshold,
                          const at::Scalar &value, at::Tensor &out) {
  at::Tensor r = at::where(self <= threshold, same_dtype_scalar(value, self), self);
  return assign_result(out, r.to(out.scalar_type()));
}

at::Tensor &hardshrink_out(const at::Tensor &self, const at::Scalar &lambd, at::Tensor &out) {
  double l = lambd.toDouble();
  at::Tensor r =
      at::where(at::logical_and(self >= -l, self <= l), same_dtype_scalar(0, self), self);
  return assign_result(out, r.to(out.scalar_type()));
}

at::Tensor &softshrink_out(const at::Tensor &self, const at::Scalar &lambd, at::Tensor &out) {
  check_shrink_lambda(self, lambd);
  double l = lambd.toDouble();
  at::Tensor r = at::where(self > l, self - l, at::where(self < -l, self + l, self * 0));
  return assign_result(out, r.to(out.scalar_type()));
}

// hardshrink's and softshrink's backward: the gradient where the input was
// outside [-lambda, lambda], zero inside.
at::Tensor &shrink_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                const at::Scalar &lambd, at::Tensor &gin) {
  double l = lambd.toDouble();
  at::Tensor r =
      at::where(at::logical_and(self >= -l, self <= l), same_dtype_scalar(0, grad), grad);
  return assign_result(gin, r.to(gin.scalar_type()));
}

// round(x, decimals): x scaled by 10^decimals, rounded half to even, scaled
// back (10^-decimals for negative), in x's dtype, in float32 for the half
// types with one rounding at the end, as CPU does it.
at::Tensor &round_decimals_out(const at::Tensor &self, int64_t decimals, at::Tensor &out) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"round\" not implemented for '", self.scalar_type(), "'");
  at::Tensor r;
  if (decimals == 0) {
    r = at::round(self);
  } else {
    double p = std::pow(10.0, static_cast<double>(std::abs(decimals)));
    at::Tensor x = at::isReducedFloatingType(self.scalar_type()) ? self.to(at::kFloat) : self;
    at::Tensor ten_pow = at::scalar_tensor(p, x.options());  // p in x's dtype, as CPU
    r = decimals > 0 ? at::round(x * ten_pow) / ten_pow : at::round(x / ten_pow) * ten_pow;
    r = r.to(self.scalar_type());
  }
  return assign_result(out, r);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("softplus.out", softplus_out);
  m.impl("round.decimals_out", round_decimals_out);
  m.impl("threshold.out", threshold_out);
  m.impl("hardshrink.out", hardshrink_out);
  m.impl("softshrink.out", softshrink_out);
  m.impl("hardshrink_backward.grad_input", shrink_backward_out);
  m.impl("softshrink_backward.grad_input", shrink_backward_out);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("sign.out", sign_out);
  m.impl("sgn.out", sgn_out);
  m.impl("glu.out", glu_out);
  m.impl("glu_backward", glu_backward);
  m.impl("glu_backward.grad_input", glu_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
  m.impl("angle", angle);
  m.impl("angle.out", angle_out);
  m.impl("conj_physical.out", conj_physical_out);
  m.impl("conj_physical_", conj_physical_);
  m.impl("complex.out", complex_from_parts_out);
  REGISTER_UNARY(m, exp)
  REGISTER_UNARY(m, log)
  REGISTER_UNARY(m, log1p)
  REGISTER_UNARY(m, expm1)
  REGISTER_UNARY(m, tanh)
  REGISTER_UNARY(m, sigmoid)
  REGISTER_UNARY(m, sqrt)
  REGISTER_UNARY(m, rsqrt)
  REGISTER_UNARY(m, neg)
  REGISTER_UNARY(m, abs)
  REGISTER_UNARY(m, sin)
  REGISTER_UNARY(m, cos)
  REGISTER_UNARY(m, erf)
  REGISTER_UNARY(m, reciprocal)
  REGISTER_UNARY(m, silu)
  REGISTER_UNARY(m, ceil)
  REGISTER_UNARY(m, floor)
  REGISTER_UNARY(m, trunc)
  REGISTER_UNARY(m, round)
  REGISTER_UNARY(m, atan)
  REGISTER_UNARY(m, asin)
  REGISTER_UNARY(m, acos)
  REGISTER_UNARY(m, tan)
  REGISTER_UNARY(m, sinh)
  REGISTER_UNARY(m, cosh)
  REGISTER_UNARY(m, asinh)
  REGISTER_UNARY(m, acosh)
  REGISTER_UNARY(m, atanh)
  REGISTER_UNARY(m, exp2)
  REGISTER_UNARY(m, log2)
  REGISTER_UNARY(m, log10)
  REGISTER_UNARY(m, erfinv)
  REGISTER_UNARY(m, erfc)
  REGISTER_UNARY(m, lgamma)
  REGISTER_UNARY(m, digamma)
  REGISTER_UNARY(m, i0)
  REGISTER_UNARY(m, sinc)
  m.impl("signbit", signbit);
  m.impl("signbit.out", signbit_out);
  REGISTER_UNARY(m, frac)
  REGISTER_UNARY(m, mish)
  REGISTER_UNARY(m, hardswish)
  REGISTER_UNARY(m, hardsigmoid)
  REGISTER_UNARY(m, leaky_relu)
  REGISTER_UNARY(m, hardtanh)
  REGISTER_UNARY(m, elu)
  REGISTER_UNARY(m, logit)
  REGISTER_UNARY(m, nan_to_num)
  m.impl("bitwise_not", bitwise_not);
  m.impl("bitwise_not_", bitwise_not_);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("gelu", gelu);
  m.impl("gelu_", gelu_);
  m.impl("gelu.out", gelu_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("pow.Tensor_Scalar", pow_tensor_scalar);
  m.impl("pow.Tensor_Scalar_out", pow_tensor_scalar_out);
  m.impl("pow_.Scalar", pow_scalar_);
  m.impl("isnan", isnan);
  m.impl("isposinf", isposinf);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isneginf", isneginf);
  m.impl("isneginf.out", isneginf_out);
}

}  // namespace torch_neuronx
