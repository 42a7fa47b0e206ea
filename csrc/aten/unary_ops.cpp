// Native elementwise unary math (exp, log, tanh, sigmoid, gelu, silu, relu,
// sqrt, rsqrt, ...), functional, in-place and out= forms. Floating inputs run
// the C kernels; other dtypes go to the CPU fallback, as ATen would promote
// or refuse them there.
#include "neuron.h"

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

bool float_kernel_ok(const at::Tensor& t) {
  bool ok;
  tnk_dtype_t dt = to_tnk(t.scalar_type(), &ok);
  return ok && t.dim() <= TNK_MAX_DIMS &&
         (dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16);
}

void unary_task(void* p) { tnk_unary(static_cast<tnk_unary_args_t*>(p)); }

void launch_unary(const at::Tensor& out, const at::Tensor& in0, tnk_unary_op_t op,
                  double p0, const char* name) {
  if (out.numel() == 0) return;
  at::Tensor in = in0;
  if (!in.is_same(out) && in.storage().is_alias_of(out.storage()) &&
      in.const_data_ptr() != out.const_data_ptr())
    in = in.clone();  // partial overlap with the output: read a copy
  tnk_unary_args_t a{};
  a.shape.ndim = static_cast<int32_t>(out.dim());
  for (int64_t d = 0; d < out.dim(); d++) a.shape.sizes[d] = out.size(d);
  to_view(out, &a.out);
  to_view(in, &a.in);
  a.op = op;
  a.dtype = a.out.dtype;
  a.p0 = p0;
  launch(out.device().index(), unary_task, &a, sizeof a, name);
}

at::Tensor unary_functional(const at::Tensor& x, tnk_unary_op_t op, double p0,
                            const char* name) {
  at::Tensor out = at::empty_like(x);
  launch_unary(out, x, op, p0, name);
  return out;
}

at::Tensor& unary_out(const at::Tensor& x, at::Tensor& out, tnk_unary_op_t op,
                      double p0, const char* name) {
  TORCH_CHECK(out.device() == x.device(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ", x.device(), " and ", out.device(), "!");
  at::native::resize_output(out, x.sizes());
  launch_unary(out, x, op, p0, name);
  return out;
}

}  // namespace

#define FALLBACK(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

#define NEURON_UNARY(NAME, OP)                                                    \
  at::Tensor NAME(const at::Tensor& x) {                                          \
    if (!float_kernel_ok(x)) return FALLBACK(NAME, x);                            \
    return unary_functional(x, OP, 0, "aten::" #NAME);                            \
  }                                                                               \
  at::Tensor& NAME##_(at::Tensor& x) {                                            \
    if (!float_kernel_ok(x)) return FALLBACK(NAME##_, x);                         \
    launch_unary(x, x, OP, 0, "aten::" #NAME "_");                                \
    return x;                                                                     \
  }                                                                               \
  at::Tensor& NAME##_out(const at::Tensor& x, at::Tensor& out) {                  \
    if (!float_kernel_ok(x) || out.scalar_type() != x.scalar_type())              \
      return FALLBACK(NAME##_out, x, out);                                        \
    return unary_out(x, out, OP, 0, "aten::" #NAME);                              \
  }

NEURON_UNARY(exp, TNK_EXP)
NEURON_UNARY(log, TNK_LOG)
NEURON_UNARY(log1p, TNK_LOG1P)
NEURON_UNARY(expm1, TNK_EXPM1)
NEURON_UNARY(tanh, TNK_TANH)
NEURON_UNARY(sigmoid, TNK_SIGMOID)
NEURON_UNARY(sqrt, TNK_SQRT)
NEURON_UNARY(rsqrt, TNK_RSQRT)
NEURON_UNARY(neg, TNK_NEG)
NEURON_UNARY(abs, TNK_ABS)
NEURON_UNARY(sin, TNK_SIN)
NEURON_UNARY(cos, TNK_COS)
NEURON_UNARY(erf, TNK_ERF)
NEURON_UNARY(reciprocal, TNK_RECIPROCAL)
NEURON_UNARY(silu, TNK_SILU)
NEURON_UNARY(ceil, TNK_CEIL)
NEURON_UNARY(floor, TNK_FLOOR)
NEURON_UNARY(trunc, TNK_TRUNC)
NEURON_UNARY(round, TNK_ROUND)

tnk_unary_op_t gelu_op(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  return approximate == "tanh" ? TNK_GELU_TANH : TNK_GELU;
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  tnk_unary_op_t op = gelu_op(approximate);
  if (!float_kernel_ok(x)) return FALLBACK(gelu, x, approximate);
  return unary_functional(x, op, 0, "aten::gelu");
}

at::Tensor& gelu_(at::Tensor& x, c10::string_view approximate) {
  tnk_unary_op_t op = gelu_op(approximate);
  if (!float_kernel_ok(x)) return FALLBACK(gelu_, x, approximate);
  launch_unary(x, x, op, 0, "aten::gelu_");
  return x;
}

at::Tensor& gelu_out(const at::Tensor& x, c10::string_view approximate,
                     at::Tensor& out) {
  tnk_unary_op_t op = gelu_op(approximate);
  if (!float_kernel_ok(x) || out.scalar_type() != x.scalar_type())
    return FALLBACK(gelu_out, x, approximate, out);
  return unary_out(x, out, op, 0, "aten::gelu");
}

at::Tensor relu(const at::Tensor& x) {
  if (!float_kernel_ok(x)) return FALLBACK(relu, x);
  return unary_functional(x, TNK_RELU, 0, "aten::relu");
}

at::Tensor& relu_(at::Tensor& x) {
  if (!float_kernel_ok(x)) return FALLBACK(relu_, x);
  launch_unary(x, x, TNK_RELU, 0, "aten::relu_");
  return x;
}

// x ** p for floating x and a real scalar exponent (the result keeps x's
// dtype, as ATen's type promotion gives for a floating tensor).
bool pow_ok(const at::Tensor& x, const c10::Scalar& p) {
  return float_kernel_ok(x) && !p.isComplex() && !p.isBoolean();
}

at::Tensor pow_tensor_scalar(const at::Tensor& x, const c10::Scalar& p) {
  if (!pow_ok(x, p)) return FALLBACK(pow_Tensor_Scalar, x, p);
  return unary_functional(x, TNK_POW_SCALAR, p.toDouble(), "aten::pow");
}

at::Tensor& pow_tensor_scalar_out(const at::Tensor& x, const c10::Scalar& p,
                                  at::Tensor& out) {
  if (!pow_ok(x, p) || out.scalar_type() != x.scalar_type())
    return FALLBACK(pow_Tensor_Scalar_out, x, p, out);
  return unary_out(x, out, TNK_POW_SCALAR, p.toDouble(), "aten::pow");
}

at::Tensor& pow_scalar_(at::Tensor& x, const c10::Scalar& p) {
  if (!pow_ok(x, p)) return FALLBACK(pow__Scalar, x, p);
  launch_unary(x, x, TNK_POW_SCALAR, p.toDouble(), "aten::pow_");
  return x;
}

// ------------------------------------------------------ classification
// isnan / isinf / isposinf / isneginf of floating tensors into bool.

namespace {
void classify_task(void* p) { tnk_classify(static_cast<tnk_unary_args_t*>(p)); }

at::Tensor& classify_into(at::Tensor& out, const at::Tensor& x, tnk_classify_op_t op,
                          const char* name) {
  at::native::resize_output(out, x.sizes());
  if (out.numel() == 0) return out;
  tnk_unary_args_t a{};
  a.shape.ndim = static_cast<int32_t>(x.dim());
  for (int64_t d = 0; d < x.dim(); d++) a.shape.sizes[d] = x.size(d);
  to_view(out, &a.out);
  to_view(x, &a.in);
  a.op = op;
  a.dtype = a.in.dtype;
  launch(x.device().index(), classify_task, &a, sizeof a, name);
  return out;
}
}  // namespace

#define NEURON_CLASSIFY(NAME, OP)                                                    \
  at::Tensor NAME(const at::Tensor& x) {                                             \
    if (!float_kernel_ok(x)) return FALLBACK(NAME, x);                               \
    at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBool));             \
    return classify_into(out, x, OP, "aten::" #NAME);                                \
  }                                                                                  \
  at::Tensor& NAME##_out(const at::Tensor& x, at::Tensor& out) {                     \
    if (!float_kernel_ok(x) || out.scalar_type() != at::kBool ||                     \
        out.device() != x.device())                                                  \
      return FALLBACK(NAME##_out, x, out);                                           \
    return classify_into(out, x, OP, "aten::" #NAME);                                \
  }

NEURON_CLASSIFY(isposinf, TNK_ISPOSINF)
NEURON_CLASSIFY(isneginf, TNK_ISNEGINF)

at::Tensor isnan(const at::Tensor& x) {
  if (!float_kernel_ok(x)) return FALLBACK(isnan, x);
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBool));
  return classify_into(out, x, TNK_ISNAN, "aten::isnan");
}

// bitwise_not of integer and bool tensors
namespace {
bool int_or_bool(const at::Tensor& t) {
  return (c10::isIntegralType(t.scalar_type(), true)) && t.dim() <= TNK_MAX_DIMS &&
         t.scalar_type() != at::kUInt16 && t.scalar_type() != at::kUInt32 &&
         t.scalar_type() != at::kUInt64;
}
void not_task(void* p) { tnk_bitwise_not(static_cast<tnk_unary_args_t*>(p)); }
at::Tensor& not_into(at::Tensor& out, const at::Tensor& x0) {
  at::native::resize_output(out, x0.sizes());
  if (out.numel() == 0) return out;
  at::Tensor x = x0;
  if (!x.is_same(out) && x.storage().is_alias_of(out.storage())) x = x.clone();
  tnk_unary_args_t a{};
  a.shape.ndim = static_cast<int32_t>(x.dim());
  for (int64_t d = 0; d < x.dim(); d++) a.shape.sizes[d] = x.size(d);
  to_view(out, &a.out);
  to_view(x, &a.in);
  a.dtype = a.in.dtype;
  launch(x.device().index(), not_task, &a, sizeof a, "aten::bitwise_not");
  return out;
}
}  // namespace

at::Tensor bitwise_not(const at::Tensor& x) {
  if (!int_or_bool(x)) return FALLBACK(bitwise_not, x);
  at::Tensor out = at::empty_like(x);
  return not_into(out, x);
}
at::Tensor& bitwise_not_(at::Tensor& x) {
  if (!int_or_bool(x)) return FALLBACK(bitwise_not_, x);
  return not_into(x, x);
}
at::Tensor& bitwise_not_out(const at::Tensor& x, at::Tensor& out) {
  if (!int_or_bool(x) || out.scalar_type() != x.scalar_type() || out.device() != x.device())
    return FALLBACK(bitwise_not_out, x, out);
  return not_into(out, x);
}

#define REGISTER_UNARY(m, NAME)            \
  m.impl(#NAME, NAME);                     \
  m.impl(#NAME "_", NAME##_);              \
  m.impl(#NAME ".out", NAME##_out);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
