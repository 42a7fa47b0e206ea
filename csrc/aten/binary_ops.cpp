// Elementwise ops of two or three operands (binary.c, ternary.c): arithmetic
// with broadcasting and type promotion, div modes, pow, clamp, logical,
// maximum/minimum, bitwise, comparisons, activation backwards, addcmul /
// addcdiv / lerp, polar and rsub.
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/addr_native.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace torch_neuronx {

// polar(abs, angle) = abs * (cos angle + i sin angle), written through the
// real view of the complex result.
at::Tensor &polar_out(const at::Tensor &abs, const at::Tensor &angle, at::Tensor &out) {
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "Expected object of scalar type ",
              abs.scalar_type(), " but got scalar type ", angle.scalar_type(),
              " for second argument");
  TORCH_CHECK(abs.scalar_type() == at::kFloat || abs.scalar_type() == at::kDouble,
              "polar: expected abs and angle to be float or double, got ", abs.scalar_type());
  auto shape = at::infer_size(abs.sizes(), angle.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::Tensor ri = at::view_as_real(out);
  at::Tensor c = abs * at::cos(angle), sn = abs * at::sin(angle);
  ri.select(-1, 0).copy_(c);
  ri.select(-1, 1).copy_(sn);
  return out;
}

namespace {

// ---------------------------------------------------------------- ternary

bool ternary_ok(const at::Tensor &out, std::initializer_list<const at::Tensor *> ins) {
  if (!floating_dtype(out.scalar_type()) || out.dim() > TNRT_MAX_DIMS) return false;
  for (const at::Tensor *t : ins)
    if (t->scalar_type() != out.scalar_type() || t->device() != out.device() ||
        t->dim() > TNRT_MAX_DIMS)
      return false;
  return true;
}

void launch_ternary(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b,
                    const at::Tensor &c, tnk_ternary_op_t op, double value, const char *name) {
  if (out.numel() == 0) return;
  at::assert_no_internal_overlap(out);
  at::Tensor holders[3];
  const at::Tensor *keep[3] = {&readable_input(out, a, holders[0]),
                               &readable_input(out, b, holders[1]),
                               &readable_input(out, c, holders[2])};
  tnk_ternary_args_t x{};
  x.shape.ndim = static_cast<int32_t>(out.dim());
  for (int64_t d = 0; d < out.dim(); d++) x.shape.sizes[d] = out.size(d);
  bool ok;
  x.dtype = to_tnk(out.scalar_type(), &ok);
  x.out = {out.data_ptr(), x.dtype, 0, {}};
  fill_strides(out, out.sizes(), x.out.strides);
  tnk_view_t *views[3] = {&x.a, &x.b, &x.c};
  for (int i = 0; i < 3; i++) {
    const at::Tensor &t = keep[i]->defined() ? *keep[i] : *keep[1];
    *views[i] = {const_cast<void *>(t.const_data_ptr()), x.dtype, 0, {}};
    fill_strides(t, out.sizes(), views[i]->strides);
  }
  x.op = op;
  x.value = value;
  launch_kernel<TNK_K_TERNARY>(out.device().index(), x, name, out.numel());
}

}  // namespace

#define NEURON_ADDC(NAME, OP)                                                                     \
  at::Tensor NAME(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,             \
                  const c10::Scalar &value) {                                                     \
    auto shape =                                                                                  \
        at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), t1.sizes()), t2.sizes()); \
    at::Tensor out =                                                                              \
        empty_elementwise(shape, self.scalar_type(), self.device(), {&self, &t1, &t2});           \
    if (!ternary_ok(out, {&self, &t1, &t2})) return FALLBACK(NAME, self, t1, t2, value);          \
    launch_ternary(out, self, t1, t2, OP, value.toDouble(), "aten::" #NAME);                      \
    return out;                                                                                   \
  }                                                                                               \
  at::Tensor &NAME##_(at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,               \
                      const c10::Scalar &value) {                                                 \
    auto shape =                                                                                  \
        at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), t1.sizes()), t2.sizes()); \
    if (at::IntArrayRef(shape) != self.sizes() || !ternary_ok(self, {&t1, &t2}))                  \
      return FALLBACK(NAME##_, self, t1, t2, value);                                              \
    launch_ternary(self, self, t1, t2, OP, value.toDouble(), "aten::" #NAME "_");                 \
    return self;                                                                                  \
  }                                                                                               \
  at::Tensor &NAME##_out(const at::Tensor &self, const at::Tensor &t1, const at::Tensor &t2,      \
                         const c10::Scalar &value, at::Tensor &out) {                             \
    if (!ternary_ok(out, {&self, &t1, &t2}))                                                      \
      return FALLBACK(NAME##_out, self, t1, t2, value, out);                                      \
    resize_elementwise_out(                                                                       \
        out,                                                                                      \
        at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), t1.sizes()), t2.sizes()), \
        {&self, &t1, &t2});                                                                       \
    launch_ternary(out, self, t1, t2, OP, value.toDouble(), "aten::" #NAME);                      \
    return out;                                                                                   \
  }

NEURON_ADDC(addcmul, TNK_ADDCMUL)
NEURON_ADDC(addcdiv, TNK_ADDCDIV)

at::Tensor lerp(const at::Tensor &self, const at::Tensor &end, const c10::Scalar &w) {
  at::Tensor out = empty_elementwise(at::infer_size_dimvector(self.sizes(), end.sizes()),
                                     self.scalar_type(), self.device(), {&self, &end});
  if (!ternary_ok(out, {&self, &end}) || w.isComplex()) return FALLBACK(lerp_Scalar, self, end, w);
  launch_ternary(out, self, end, at::Tensor(), TNK_LERP, w.toDouble(), "aten::lerp");
  return out;
}

at::Tensor &lerp_(at::Tensor &self, const at::Tensor &end, const c10::Scalar &w) {
  if (at::IntArrayRef(at::infer_size_dimvector(self.sizes(), end.sizes())) != self.sizes() ||
      !ternary_ok(self, {&end}) || w.isComplex())
    return FALLBACK(lerp__Scalar, self, end, w);
  launch_ternary(self, self, end, at::Tensor(), TNK_LERP, w.toDouble(), "aten::lerp_");
  return self;
}

// lerp with a weight tensor: self + weight * (end - self), in ATen's two
// halves (from self below 0.5, from end above)
at::Tensor &lerp_tensor_out(const at::Tensor &self, const at::Tensor &end, const at::Tensor &w,
                            at::Tensor &out) {
  auto shape =
      at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), end.sizes()), w.sizes());
  if (!ternary_ok(out, {&self, &end, &w})) return FALLBACK(lerp_Tensor_out, self, end, w, out);
  resize_elementwise_out(out, shape, {&self, &end, &w});
  launch_ternary(out, self, end, w, TNK_LERP_TENSOR, 0.0, "aten::lerp");
  return out;
}

at::Tensor lerp_tensor(const at::Tensor &self, const at::Tensor &end, const at::Tensor &w) {
  at::Tensor out = at::empty({0}, self.options());
  return lerp_tensor_out(self, end, w, out);
}

at::Tensor &lerp_tensor_(at::Tensor &self, const at::Tensor &end, const at::Tensor &w) {
  auto shape =
      at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), end.sizes()), w.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  return lerp_tensor_out(self, end, w, self);
}

at::Tensor &lerp_out(const at::Tensor &self, const at::Tensor &end, const c10::Scalar &w,
                     at::Tensor &out) {
  if (!ternary_ok(out, {&self, &end}) || w.isComplex())
    return FALLBACK(lerp_Scalar_out, self, end, w, out);
  resize_elementwise_out(out, at::infer_size_dimvector(self.sizes(), end.sizes()), {&self, &end});
  launch_ternary(out, self, end, at::Tensor(), TNK_LERP, w.toDouble(), "aten::lerp");
  return out;
}

namespace {

// Strides of t aligned to an output of `ndim` dims, 0 where broadcast.
void broadcast_strides(const at::Tensor &t, at::IntArrayRef out_sizes, int64_t *strides) {
  int64_t nd = out_sizes.size(), td = t.dim();
  for (int64_t d = 0; d < nd; d++) {
    int64_t td_i = d - (nd - td);
    strides[d] = (td_i < 0 || t.size(td_i) == 1) ? 0 : t.stride(td_i);
  }
}

bool is_cpu_scalar(const at::Tensor &t) { return t.is_cpu() && t.dim() == 0; }

void check_operand(const at::Tensor &t, c10::Device dev, const char *name) {
  if (is_cpu_scalar(t)) return;
  TORCH_CHECK(t.device() == dev,
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              dev, " and ", t.device(), "! (when checking argument for ", name, ")");
}

// Computes out = op(a, b) into an output of the common dtype. `out` has the
// broadcast shape already. Returns false if the kernels cannot do it.
bool launch_binary(const at::Tensor &out, const at::Tensor &a0, const at::Tensor &b0,
                   tnk_binary_op_t op, const c10::Scalar &alpha, const char *name,
                   std::optional<c10::ScalarType> compute = std::nullopt, double beta = 0,
                   double gamma = 0) {
  // The kernel's dtype: the output's, or the operands' for comparisons.
  c10::ScalarType common = compute.value_or(out.scalar_type());
  bool ok;
  tnk_dtype_t dt = to_tnk(common, &ok);
  if (!ok || !kernel_supported(TNK_K_BINARY, kernel_query(op, dt, -1, -1)) ||
      out.dim() > TNRT_MAX_DIMS)
    return false;
  at::assert_no_internal_overlap(out);
  // a CPU scalar operand travels in the descriptor (inline_operand)
  tnk_binary_args_t args{};
  // Converted operands must outlive the launch: freed earlier, their blocks
  // could be handed to the other operand's conversion, queued before us.
  at::Tensor keep[2], converted[2];
  auto operand = [&](const at::Tensor &t, tnk_view_t *v, int slot) {
    v->dtype = dt;
    if (is_cpu_scalar(t)) {  // read now: host memory, no device work
      at::Tensor s = t.scalar_type() == common ? t : t.to(common);
      std::memcpy(args.inline_value, s.const_data_ptr(), s.itemsize());
      args.inline_operand = slot;
      // fp16/bf16 arithmetic takes the number at fp32, as CUDA's kernels
      // and the CPU's mul/div do (0.1 rounded to bf16 first is 0.4% off;
      // the CPU's add/sub round it, CUDA's do not); comparisons compare
      // with the number in the tensor's dtype, as both do.
      if (at::isReducedFloatingType(common) && !compute.has_value() && !t.is_complex()) {
        args.scalar_operand = slot;
        args.scalar = t.item<double>();
      }
      for (int d = 0; d < TNRT_MAX_DIMS; d++) v->strides[d] = 0;
      return;
    }
    const at::Tensor *src = &t;
    if (t.scalar_type() != common) {
      converted[slot - 1] = t.to(common);
      src = &converted[slot - 1];
    }
    const at::Tensor &c = readable_input(out, *src, keep[slot - 1]);
    v->data = c.numel() ? const_cast<void *>(c.const_data_ptr()) : nullptr;
    broadcast_strides(c, out.sizes(), v->strides);
  };
  // Only one CPU scalar can travel inline; two means both are scalars and
  // the caller never gets here (the op would not dispatch to neuron).
  operand(a0, &args.a, 1);
  operand(b0, &args.b, 2);
  args.shape.ndim = static_cast<int32_t>(out.dim());
  for (int64_t d = 0; d < out.dim(); d++) {
    args.shape.sizes[d] = out.size(d);
    args.out.strides[d] = out.stride(d);
  }
  args.out.data = out.numel() ? out.data_ptr() : nullptr;
  args.out.dtype = compute.has_value() ? TNK_BOOL : dt;
  args.op = op;
  args.dtype = dt;
  args.fault = {tnrt_stream_fault, current_native_stream(out.device().index()), name,
                TNRT_FAULT_ZERO_DIVISION, tnrt_thread_token()};
  if (c10::isIntegralType(common, true))
    args.ialpha = alpha.toLong();
  else
    args.alpha = alpha.toDouble();
  args.beta = beta;
  args.gamma = gamma;
  if (out.numel() == 0) return true;
  launch_kernel<TNK_K_BINARY>(out.device().index(), args, name, out.numel());
  return true;
}

c10::ScalarType promoted(const at::Tensor &a, const at::Tensor &b, tnk_binary_op_t op) {
  // One dtype promotes to itself whatever the operands' ranks: skip the
  // result_type operator's dispatch (a tenth of a small add's host time).
  c10::ScalarType t = a.scalar_type() == b.scalar_type() ? a.scalar_type() : at::result_type(a, b);
  TORCH_CHECK(op != TNK_HEAVISIDE || a.scalar_type() == b.scalar_type(),
              "heaviside is not yet implemented for tensors with different dtypes.");
  if ((op == TNK_DIV || op == TNK_ATAN2 || op == TNK_XLOGY || op == TNK_COPYSIGN) &&
      c10::isIntegralType(t, true))
    t = c10::typeMetaToScalarType(c10::get_default_dtype());
  return t;
}

// out = op(a, b) where the result type `common` is wider than out's dtype
// (a bf16 tensor += an fp32 one, as autocast's mixed-precision models do):
// computed at `common`, then rounded once into out, which is what the CPU's
// iterator does element by element. False if the kernels cannot.
bool binary_then_cast(at::Tensor &out, const at::Tensor &a, const at::Tensor &b, tnk_binary_op_t op,
                      const c10::Scalar &alpha, c10::ScalarType common, const char *name) {
  at::Tensor tmp = empty_neuron(out.sizes(), common, out.device());
  if (!launch_binary(tmp, a, b, op, alpha, name)) return false;
  out.copy_(tmp);
  return true;
}

c10::Device device_of_pair(const at::Tensor &a, const at::Tensor &b) {
  return a.is_privateuseone() ? a.device() : b.device();
}

}  // namespace

// The functional, in-place and out= forms of each binary op (_FN_OUT: the
// ops ATen gives no in-place form).
#define NEURON_BINARY_FN_OUT(NAME, OP, ATEN_FN, ATEN_OUT, KIND)                                    \
  at::Tensor NAME(const at::Tensor &a, const at::Tensor &b PARAM_##KIND) {                         \
    c10::Device dev = device_of_pair(a, b);                                                        \
    check_operand(a, dev, #NAME);                                                                  \
    check_operand(b, dev, #NAME);                                                                  \
    c10::ScalarType common = promoted(a, b, OP);                                                   \
    if (OP == TNK_ADD || OP == TNK_SUB) at::native::alpha_check(common, VALUE_##KIND);             \
    auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());                                   \
    at::Tensor out = empty_elementwise(shape, common, dev, {&a, &b});                              \
    if (launch_binary(out, a, b, OP, VALUE_##KIND, "aten::" #NAME)) return out;                    \
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_FN)>::call(             \
        a, b ARG_##KIND);                                                                          \
  }                                                                                                \
  at::Tensor &NAME##_out(const at::Tensor &a, const at::Tensor &b PARAM_##KIND, at::Tensor &out) { \
    check_operand(a, out.device(), #NAME "_out");                                                  \
    check_operand(b, out.device(), #NAME "_out");                                                  \
    c10::ScalarType common = promoted(a, b, OP);                                                   \
    TORCH_CHECK(at::canCast(common, out.scalar_type()), "result type ", common,                    \
                " can't be cast to the desired output type ", out.scalar_type());                  \
    if (OP == TNK_ADD || OP == TNK_SUB) at::native::alpha_check(common, VALUE_##KIND);             \
    auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());                                   \
    resize_elementwise_out(out, shape, {&a, &b});                                                  \
    if (common == out.scalar_type()                                                                \
            ? launch_binary(out, a, b, OP, VALUE_##KIND, "aten::" #NAME)                           \
            : binary_then_cast(out, a, b, OP, VALUE_##KIND, common, "aten::" #NAME))               \
      return out;                                                                                  \
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_OUT)>::call(            \
        a, b ARG_##KIND, out);                                                                     \
  }
#define NEURON_BINARY(NAME, OP, ATEN_FN, ATEN_INPLACE, ATEN_OUT, KIND)                       \
  NEURON_BINARY_FN_OUT(NAME, OP, ATEN_FN, ATEN_OUT, KIND)                                    \
  at::Tensor &NAME##_(at::Tensor &self, const at::Tensor &b PARAM_##KIND) {                  \
    check_operand(b, self.device(), #NAME "_");                                              \
    c10::ScalarType common = promoted(self, b, OP);                                          \
    TORCH_CHECK(at::canCast(common, self.scalar_type()), "result type ", common,             \
                " can't be cast to the desired output type ", self.scalar_type());           \
    if (OP == TNK_ADD || OP == TNK_SUB) at::native::alpha_check(common, VALUE_##KIND);       \
    auto shape = at::infer_size_dimvector(self.sizes(), b.sizes());                          \
    TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),  \
                " doesn't match the broadcast shape ", at::IntArrayRef(shape));              \
    if (common == self.scalar_type()                                                         \
            ? launch_binary(self, self, b, OP, VALUE_##KIND, "aten::" #NAME "_")             \
            : binary_then_cast(self, self, b, OP, VALUE_##KIND, common, "aten::" #NAME "_")) \
      return self;                                                                           \
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_INPLACE)>::call(  \
        self, b ARG_##KIND);                                                                 \
  }

// KIND: ALPHA for the ops with an alpha argument (add, sub), else NOALPHA
#define PARAM_ALPHA , const c10::Scalar &alpha
#define ARG_ALPHA , alpha
#define VALUE_ALPHA alpha
#define PARAM_NOALPHA
#define ARG_NOALPHA
#define VALUE_NOALPHA c10::Scalar(1)

NEURON_BINARY(add, TNK_ADD, add_Tensor, add__Tensor, add_out, ALPHA)
NEURON_BINARY(sub, TNK_SUB, sub_Tensor, sub__Tensor, sub_out, ALPHA)
NEURON_BINARY(mul, TNK_MUL, mul_Tensor, mul__Tensor, mul_out, NOALPHA)
NEURON_BINARY(div, TNK_DIV, div_Tensor, div__Tensor, div_out, NOALPHA)
NEURON_BINARY(floor_divide, TNK_FLOORDIV, floor_divide, floor_divide__Tensor, floor_divide_out,
              NOALPHA)
NEURON_BINARY(div_trunc, TNK_TRUNCDIV, div_Tensor, div__Tensor, div_out, NOALPHA)
NEURON_BINARY(remainder, TNK_REMAINDER, remainder_Tensor, remainder__Tensor, remainder_Tensor_out,
              NOALPHA)
NEURON_BINARY(atan2, TNK_ATAN2, atan2, atan2_, atan2_out, NOALPHA)
NEURON_BINARY(xlogy, TNK_XLOGY, xlogy_Tensor, xlogy__Tensor, xlogy_OutTensor, NOALPHA)
NEURON_BINARY(pow_tt, TNK_POW, pow_Tensor_Tensor, pow__Tensor, pow_Tensor_Tensor_out, NOALPHA)
NEURON_BINARY(copysign, TNK_COPYSIGN, copysign_Tensor, copysign__Tensor, copysign_out, NOALPHA)
NEURON_BINARY(hypot, TNK_HYPOT, hypot, hypot_, hypot_out, NOALPHA)
NEURON_BINARY(heaviside, TNK_HEAVISIDE, heaviside, heaviside_, heaviside_out, NOALPHA)
NEURON_BINARY(fmod, TNK_FMOD, fmod_Tensor, fmod__Tensor, fmod_Tensor_out, NOALPHA)
NEURON_BINARY_FN_OUT(fmax, TNK_FMAX, fmax, fmax_out, NOALPHA)
NEURON_BINARY_FN_OUT(fmin, TNK_FMIN, fmin, fmin_out, NOALPHA)
NEURON_BINARY_FN_OUT(logaddexp, TNK_LOGADDEXP, logaddexp, logaddexp_out, NOALPHA)
NEURON_BINARY_FN_OUT(logaddexp2, TNK_LOGADDEXP2, logaddexp2, logaddexp2_out, NOALPHA)

// div with rounding_mode: None is true division, "floor" and "trunc" round.
namespace {
int rounding(std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return 0;
  TORCH_CHECK(*mode == "floor" || *mode == "trunc",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
  return *mode == "floor" ? 1 : 2;
}
}  // namespace

at::Tensor div_mode(const at::Tensor &a, const at::Tensor &b,
                    std::optional<c10::string_view> mode) {
  switch (rounding(mode)) {
    case 0: return torch_neuronx::div(a, b);
    case 1: return torch_neuronx::floor_divide(a, b);
    default: return torch_neuronx::div_trunc(a, b);
  }
}
at::Tensor &div__mode(at::Tensor &a, const at::Tensor &b, std::optional<c10::string_view> mode) {
  switch (rounding(mode)) {
    case 0: return torch_neuronx::div_(a, b);
    case 1: return torch_neuronx::floor_divide_(a, b);
    default: return torch_neuronx::div_trunc_(a, b);
  }
}
at::Tensor &div_out_mode(const at::Tensor &a, const at::Tensor &b,
                         std::optional<c10::string_view> mode, at::Tensor &out) {
  switch (rounding(mode)) {
    case 0: return torch_neuronx::div_out(a, b, out);
    case 1: return torch_neuronx::floor_divide_out(a, b, out);
    default: return torch_neuronx::div_trunc_out(a, b, out);
  }
}

// pow with a scalar base (2 ** t).
at::Tensor pow_scalar_base(const c10::Scalar &base, const at::Tensor &exp) {
  return torch_neuronx::pow_tt(at::native::wrapped_scalar_tensor(base), exp);
}
at::Tensor &pow_scalar_base_out(const c10::Scalar &base, const at::Tensor &exp, at::Tensor &out) {
  return torch_neuronx::pow_tt_out(at::native::wrapped_scalar_tensor(base), exp, out);
}

// clamp as maximum then minimum (NaN propagates as in ATen's clamp; with
// min > max the result is max, as ATen defines).
namespace {
at::Tensor &clamp_into(const at::Tensor &self, const at::Tensor *lo, const at::Tensor *hi,
                       at::Tensor &out, bool *done) {
  *done = false;
  TORCH_CHECK(lo || hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  c10::ScalarType common = self.scalar_type();
  if (lo) common = at::result_type(self, *lo);
  if (hi) common = c10::promoteTypes(common, at::result_type(self, *hi));
  TORCH_CHECK(at::canCast(common, out.scalar_type()), "result type ", common,
              " can't be cast to the desired output type ", out.scalar_type());
  if (common != out.scalar_type() || self.is_complex()) return out;
  auto shape = self.sizes().vec();
  for (const at::Tensor *t : {lo, hi})
    if (t) shape = at::infer_size(shape, t->sizes());
  resize_elementwise_out(out, shape, {&self, lo, hi});
  const at::Tensor *first = lo ? lo : hi;
  if (!launch_binary(out, self, *first, lo ? TNK_MAXIMUM : TNK_MINIMUM, 1, "aten::clamp"))
    return out;
  if (lo && hi) launch_binary(out, out, *hi, TNK_MINIMUM, 1, "aten::clamp");
  *done = true;
  return out;
}

at::Tensor scalar_operand(const std::optional<c10::Scalar> &s) {
  return s.has_value() ? at::native::wrapped_scalar_tensor(*s) : at::Tensor();
}
const at::Tensor *opt_ptr(const at::Tensor &t) { return t.defined() ? &t : nullptr; }

c10::ScalarType clamp_dtype(const at::Tensor &self, const at::Tensor &lo, const at::Tensor &hi) {
  c10::ScalarType t = self.scalar_type();
  if (lo.defined()) t = at::result_type(self, lo);
  if (hi.defined()) t = c10::promoteTypes(t, at::result_type(self, hi));
  return t;
}
}  // namespace

at::Tensor &clamp_out(const at::Tensor &self, const std::optional<c10::Scalar> &min,
                      const std::optional<c10::Scalar> &max, at::Tensor &out) {
  for (const auto *s : {&min, &max})  // as CPU: a bound must fit the result dtype
    if (s->has_value()) check_scalar_fits(**s, out.scalar_type());
  at::Tensor lo = scalar_operand(min), hi = scalar_operand(max);
  bool done;
  clamp_into(self, opt_ptr(lo), opt_ptr(hi), out, &done);
  return done ? out : FALLBACK(clamp_out, self, min, max, out);
}
at::Tensor clamp(const at::Tensor &self, const std::optional<c10::Scalar> &min,
                 const std::optional<c10::Scalar> &max) {
  at::Tensor out = at::empty(
      {0}, self.options().dtype(clamp_dtype(self, scalar_operand(min), scalar_operand(max))));
  return clamp_out(self, min, max, out);
}
at::Tensor &clamp_(at::Tensor &self, const std::optional<c10::Scalar> &min,
                   const std::optional<c10::Scalar> &max) {
  return clamp_out(self, min, max, self);
}
at::Tensor &clamp_tensor_out(const at::Tensor &self, const std::optional<at::Tensor> &min,
                             const std::optional<at::Tensor> &max, at::Tensor &out) {
  at::Tensor lo = min.has_value() ? *min : at::Tensor(), hi = max.has_value() ? *max : at::Tensor();
  for (const at::Tensor *t : {&lo, &hi})
    if (t->defined()) check_operand(*t, self.device(), "clamp");
  bool done;
  clamp_into(self, opt_ptr(lo), opt_ptr(hi), out, &done);
  return done ? out : FALLBACK(clamp_Tensor_out, self, min, max, out);
}
at::Tensor clamp_tensor(const at::Tensor &self, const std::optional<at::Tensor> &min,
                        const std::optional<at::Tensor> &max) {
  at::Tensor lo = min.has_value() ? *min : at::Tensor(), hi = max.has_value() ? *max : at::Tensor();
  at::Tensor out = at::empty({0}, self.options().dtype(clamp_dtype(self, lo, hi)));
  return clamp_tensor_out(self, min, max, out);
}
at::Tensor &clamp_min_out(const at::Tensor &self, const c10::Scalar &min, at::Tensor &out) {
  return clamp_out(self, min, std::nullopt, out);
}
at::Tensor &clamp_max_out(const at::Tensor &self, const c10::Scalar &max, at::Tensor &out) {
  return clamp_out(self, std::nullopt, max, out);
}
at::Tensor &clamp_min_tensor_out(const at::Tensor &self, const at::Tensor &min, at::Tensor &out) {
  return clamp_tensor_out(self, min, std::nullopt, out);
}
at::Tensor &clamp_max_tensor_out(const at::Tensor &self, const at::Tensor &max, at::Tensor &out) {
  return clamp_tensor_out(self, std::nullopt, max, out);
}

// logical and/or/xor/not: operands read as bool (nonzero), any out dtype.
namespace {
at::Tensor as_bool(const at::Tensor &t) { return t.scalar_type() == at::kBool ? t : t.ne(0); }
at::Tensor &store_bool(const at::Tensor &r, at::Tensor &out) { return assign_result(out, r); }
}  // namespace

#define NEURON_LOGICAL_BIN(NAME, OP)                                                  \
  at::Tensor &NAME##_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) { \
    check_operand(a, out.device(), #NAME);                                            \
    check_operand(b, out.device(), #NAME);                                            \
    if (a.is_complex() || b.is_complex()) return FALLBACK(NAME##_out, a, b, out);     \
    at::Tensor x = as_bool(a), y = as_bool(b);                                        \
    auto shape = at::infer_size_dimvector(x.sizes(), y.sizes());                      \
    resize_elementwise_out(out, shape, {&a, &b});                                     \
    if (out.scalar_type() == at::kBool && !out.storage().is_alias_of(x.storage()) &&  \
        !out.storage().is_alias_of(y.storage())) {                                    \
      at::native::resize_output(out, shape);                                          \
      launch_binary(out, x, y, OP, 1, "aten::" #NAME);                                \
      return out;                                                                     \
    }                                                                                 \
    at::Tensor r = at::empty(shape, out.options().dtype(at::kBool));                  \
    launch_binary(r, x, y, OP, 1, "aten::" #NAME);                                    \
    return store_bool(r, out);                                                        \
  }
NEURON_LOGICAL_BIN(logical_and, TNK_BITAND)
NEURON_LOGICAL_BIN(logical_or, TNK_BITOR)
NEURON_LOGICAL_BIN(logical_xor, TNK_BITXOR)
#undef NEURON_LOGICAL_BIN

at::Tensor &logical_not_out(const at::Tensor &a, at::Tensor &out) {
  if (a.is_complex()) return FALLBACK(logical_not_out, a, out);
  return store_bool(a.eq(0), out);
}

// maximum / minimum have no in-place form in ATen. Returns an undefined
// tensor when the kernels cannot take the dtype.
at::Tensor extremum(const at::Tensor &a, const at::Tensor &b, tnk_binary_op_t op,
                    const char *name) {
  c10::Device dev = device_of_pair(a, b);
  check_operand(a, dev, name);
  check_operand(b, dev, name);
  TORCH_CHECK(!a.is_complex() && !b.is_complex(), name, " not implemented for complex tensors.");
  at::Tensor out = empty_elementwise(at::infer_size_dimvector(a.sizes(), b.sizes()),
                                     at::result_type(a, b), dev, {&a, &b});
  return launch_binary(out, a, b, op, 1, name) ? out : at::Tensor();
}

at::Tensor maximum(const at::Tensor &a, const at::Tensor &b) {
  at::Tensor out = extremum(a, b, TNK_MAXIMUM, "aten::maximum");
  return out.defined()
             ? out
             : at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(maximum)>::call(a, b);
}

at::Tensor minimum(const at::Tensor &a, const at::Tensor &b) {
  at::Tensor out = extremum(a, b, TNK_MINIMUM, "aten::minimum");
  return out.defined()
             ? out
             : at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(minimum)>::call(a, b);
}

// maximum.out / minimum.out (the for-loop Adam's amsgrad writes
// torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)): the
// result first, so an out that aliases an operand reads no partial update.
#define NEURON_EXTREMUM_OUT(NAME)                                                                 \
  at::Tensor &NAME##_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {             \
    at::Tensor r = torch_neuronx::NAME(a, b);                                                     \
    TORCH_CHECK(out.device() == r.device(),                                                       \
                "Expected all tensors to be on the same device, "                                 \
                "but found at least two devices, ",                                               \
                r.device(), " and ", out.device(), "!");                                          \
    TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "result type ", r.scalar_type(), \
                " can't be cast to the desired output type ", out.scalar_type());                 \
    resize_elementwise_out(out, r.sizes(), {&a, &b});                                             \
    return out.copy_(r);                                                                          \
  }
NEURON_EXTREMUM_OUT(maximum)
NEURON_EXTREMUM_OUT(minimum)
#undef NEURON_EXTREMUM_OUT

// ---------------------------------------------------- activation backward
// grad_input = f'(saved) * grad_output, with the saved tensor the input or
// the output as ATen's derivative formulas give it.

namespace {
at::Tensor &activation_backward_into(at::Tensor &out, const at::Tensor &grad,
                                     const at::Tensor &saved, tnk_binary_op_t op, double alpha,
                                     const char *name, double beta = 0, double gamma = 0) {
  resize_elementwise_out(out, at::infer_size_dimvector(grad.sizes(), saved.sizes()),
                         {&grad, &saved});
  launch_binary(out, grad, saved, op, c10::Scalar(alpha), name, std::nullopt, beta, gamma);
  return out;
}

bool activation_ok(const at::Tensor &grad, const at::Tensor &saved) {
  bool ok;
  tnk_dtype_t dt = to_tnk(grad.scalar_type(), &ok);
  return ok && grad.scalar_type() == saved.scalar_type() && grad.device() == saved.device() &&
         kernel_supported(TNK_K_BINARY, kernel_query(TNK_GELU_BWD, dt, -1, -1));
}
}  // namespace

#define NEURON_ACT_BWD(NAME, ATEN_FN, ATEN_OUT, OPEXPR, EXTRA_PARAM, EXTRA_ARG, ALPHA, BETA) \
  at::Tensor NAME(const at::Tensor &grad, const at::Tensor &saved EXTRA_PARAM) {             \
    if (!activation_ok(grad, saved))                                                         \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_FN)>::call(     \
          grad, saved EXTRA_ARG);                                                            \
    at::Tensor out = at::empty_like(grad);                                                   \
    return activation_backward_into(out, grad, saved, OPEXPR, ALPHA, "aten::" #NAME, BETA);  \
  }                                                                                          \
  at::Tensor &NAME##_out(const at::Tensor &grad, const at::Tensor &saved EXTRA_PARAM,        \
                         at::Tensor &out) {                                                  \
    if (!activation_ok(grad, saved) || out.scalar_type() != grad.scalar_type())              \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_OUT)>::call(    \
          grad, saved EXTRA_ARG, out);                                                       \
    return activation_backward_into(out, grad, saved, OPEXPR, ALPHA, "aten::" #NAME, BETA);  \
  }

#define NO_EXTRA
#define GELU_PARAM , c10::string_view approximate
#define GELU_ARG , approximate
#define THRESH_PARAM , const c10::Scalar &threshold
#define THRESH_ARG , threshold

NEURON_ACT_BWD(gelu_backward, gelu_backward, gelu_backward_grad_input,
               (approximate == "tanh" ? TNK_GELU_TANH_BWD : TNK_GELU_BWD), GELU_PARAM, GELU_ARG,
               0.0, 0.0)
NEURON_ACT_BWD(silu_backward, silu_backward, silu_backward_grad_input, TNK_SILU_BWD, NO_EXTRA,
               NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(sigmoid_backward, sigmoid_backward, sigmoid_backward_grad_input, TNK_SIGMOID_BWD,
               NO_EXTRA, NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(tanh_backward, tanh_backward, tanh_backward_grad_input, TNK_TANH_BWD, NO_EXTRA,
               NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(threshold_backward, threshold_backward, threshold_backward_grad_input,
               TNK_THRESHOLD_BWD, THRESH_PARAM, THRESH_ARG, threshold.toDouble(), 0.0)
NEURON_ACT_BWD(hardsigmoid_backward, hardsigmoid_backward, hardsigmoid_backward_grad_input,
               TNK_HARDSIGMOID_BWD, NO_EXTRA, NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(hardswish_backward, hardswish_backward, hardswish_backward_out, TNK_HARDSWISH_BWD,
               NO_EXTRA, NO_EXTRA, 0.0, 0.0)
#define HT_PARAM , const c10::Scalar &lo, const c10::Scalar &hi
#define HT_ARG , lo, hi
NEURON_ACT_BWD(hardtanh_backward, hardtanh_backward, hardtanh_backward_grad_input, TNK_HARDTANH_BWD,
               HT_PARAM, HT_ARG, lo.toDouble(), hi.toDouble())
#define LOGIT_PARAM , std::optional<double> eps
#define LOGIT_ARG , eps
NEURON_ACT_BWD(logit_backward, logit_backward, logit_backward_grad_input, TNK_LOGIT_BWD,
               LOGIT_PARAM, LOGIT_ARG, eps.has_value() ? *eps : -1.0, 0.0)

#define LRELU_PARAM , const c10::Scalar &slope, bool self_is_result
#define LRELU_ARG , slope, self_is_result
// As on CPU: an in-place leaky ReLU cannot be differentiated for a negative
// slope (the sign of the input is lost).
#define LRELU_CHECK                                                                      \
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,                                \
              "In-place leakyReLu backward calculation is triggered with a negative "    \
              "slope which is not supported. This is caused by calling in-place "        \
              "forward function with a negative slope, please call out-of-place "        \
              "version instead. File an issue at https://github.com/pytorch/pytorch if " \
              "you do require supporting in-place leakRelu backward calculation with "   \
              "negative slope")
at::Tensor leaky_relu_backward(const at::Tensor &grad, const at::Tensor &self LRELU_PARAM) {
  LRELU_CHECK;
  if (!activation_ok(grad, self)) return FALLBACK(leaky_relu_backward, grad, self LRELU_ARG);
  at::Tensor out = at::empty_like(grad);
  return activation_backward_into(out, grad, self, TNK_LEAKY_RELU_BWD, slope.toDouble(),
                                  "aten::leaky_relu_backward");
}
at::Tensor &leaky_relu_backward_out(const at::Tensor &grad, const at::Tensor &self LRELU_PARAM,
                                    at::Tensor &out) {
  LRELU_CHECK;
  if (!activation_ok(grad, self) || out.scalar_type() != grad.scalar_type())
    return FALLBACK(leaky_relu_backward_grad_input, grad, self LRELU_ARG, out);
  return activation_backward_into(out, grad, self, TNK_LEAKY_RELU_BWD, slope.toDouble(),
                                  "aten::leaky_relu_backward");
}

#define ELU_BWD_PARAM                                                                            \
  const c10::Scalar &alpha, const c10::Scalar &scale, const c10::Scalar &iscale, bool is_result, \
      const at::Tensor &saved
#define ELU_BWD_ARG alpha, scale, iscale, is_result, saved
#define ELU_BWD_CHECK                                                                 \
  TORCH_CHECK(!is_result || alpha.toDouble() >= 0.0,                                  \
              "In-place elu backward calculation is triggered with a negative slope " \
              "which is not supported. This is caused by calling in-place forward "   \
              "function with a negative slope, please call out-of-place version "     \
              "instead.")
at::Tensor elu_backward(const at::Tensor &grad, ELU_BWD_PARAM) {
  ELU_BWD_CHECK;
  if (!activation_ok(grad, saved)) return FALLBACK(elu_backward, grad, ELU_BWD_ARG);
  at::Tensor out = at::empty_like(grad);
  return activation_backward_into(out, grad, saved, is_result ? TNK_ELU_RESULT_BWD : TNK_ELU_BWD,
                                  alpha.toDouble(), "aten::elu_backward", scale.toDouble(),
                                  iscale.toDouble());
}
at::Tensor &elu_backward_out(const at::Tensor &grad, ELU_BWD_PARAM, at::Tensor &out) {
  ELU_BWD_CHECK;
  if (!activation_ok(grad, saved) || out.scalar_type() != grad.scalar_type())
    return FALLBACK(elu_backward_grad_input, grad, ELU_BWD_ARG, out);
  return activation_backward_into(out, grad, saved, is_result ? TNK_ELU_RESULT_BWD : TNK_ELU_BWD,
                                  alpha.toDouble(), "aten::elu_backward", scale.toDouble(),
                                  iscale.toDouble());
}

at::Tensor mish_backward(const at::Tensor &grad, const at::Tensor &self) {
  if (!activation_ok(grad, self)) return FALLBACK(mish_backward, grad, self);
  at::Tensor out = at::empty_like(grad);
  return activation_backward_into(out, grad, self, TNK_MISH_BWD, 0.0, "aten::mish_backward");
}

// ---------------------------------------------------------------- bitwise
// and/or/xor of integer and bool tensors (floating ones raise on CPU).

#define NEURON_BITWISE(NAME, OP)                                                                 \
  at::Tensor &NAME##_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {            \
    c10::Device dev = out.device();                                                              \
    check_operand(a, dev, #NAME);                                                                \
    check_operand(b, dev, #NAME);                                                                \
    c10::ScalarType common = at::result_type(a, b);                                              \
    if (c10::isIntegralType(common, true) && out.scalar_type() == common) {                      \
      resize_elementwise_out(out, at::infer_size_dimvector(a.sizes(), b.sizes()), {&a, &b});     \
      if (launch_binary(out, a, b, OP, 1, "aten::" #NAME)) return out;                           \
    }                                                                                            \
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(NAME, Tensor_out)>::call( \
        a, b, out);                                                                              \
  }

NEURON_BITWISE(bitwise_and, TNK_BITAND)
NEURON_BITWISE(bitwise_or, TNK_BITOR)
NEURON_BITWISE(bitwise_xor, TNK_BITXOR)

// ------------------------------------------------------------ comparisons

namespace {
at::Tensor &compare_into(at::Tensor &out, const at::Tensor &a, const at::Tensor &b,
                         tnk_binary_op_t op, const char *name, bool *done) {
  *done = false;
  c10::Device dev = device_of_pair(a, b);
  check_operand(a, dev, name);
  check_operand(b, dev, name);
  if (out.scalar_type() != at::kBool) return out;
  c10::ScalarType common = at::result_type(a, b);
  resize_elementwise_out(out, at::infer_size_dimvector(a.sizes(), b.sizes()), {&a, &b});
  *done = launch_binary(out, a, b, op, 1, name, common);
  return out;
}
}  // namespace

#define NEURON_COMPARE(NAME, OP)                                                                   \
  at::Tensor NAME##_tensor(const at::Tensor &a, const at::Tensor &b) {                             \
    at::Tensor out = at::empty({0}, a.options().device(device_of_pair(a, b)).dtype(at::kBool));    \
    bool done;                                                                                     \
    compare_into(out, a, b, OP, "aten::" #NAME, &done);                                            \
    return done                                                                                    \
               ? out                                                                               \
               : at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(NAME, Tensor)>::call( \
                     a, b);                                                                        \
  }                                                                                                \
  at::Tensor &NAME##_tensor_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {       \
    bool done;                                                                                     \
    compare_into(out, a, b, OP, "aten::" #NAME, &done);                                            \
    return done ? out                                                                              \
                : at::native::call_fallback_fn<&neuron_cpu_fallback,                               \
                                               ATEN_OP2(NAME, Tensor_out)>::call(a, b, out);       \
  }                                                                                                \
  at::Tensor NAME##_scalar(const at::Tensor &a, const c10::Scalar &s) {                            \
    return NAME##_tensor(a, at::native::wrapped_scalar_tensor(s));                                 \
  }                                                                                                \
  at::Tensor &NAME##_scalar_out(const at::Tensor &a, const c10::Scalar &s, at::Tensor &out) {      \
    return NAME##_tensor_out(a, at::native::wrapped_scalar_tensor(s), out);                        \
  }

NEURON_COMPARE(eq, TNK_EQ)
NEURON_COMPARE(ne, TNK_NE)
NEURON_COMPARE(lt, TNK_LT)
NEURON_COMPARE(le, TNK_LE)
NEURON_COMPARE(gt, TNK_GT)
NEURON_COMPARE(ge, TNK_GE)

#define REGISTER_COMPARE(m, NAME)                 \
  m.impl(#NAME ".Tensor", NAME##_tensor);         \
  m.impl(#NAME ".Tensor_out", NAME##_tensor_out); \
  m.impl(#NAME ".Scalar", NAME##_scalar);         \
  m.impl(#NAME ".Scalar_out", NAME##_scalar_out);

namespace {

// rsub: other - alpha * self (HF attention masks: 1.0 - mask)
at::Tensor rsub_tensor(const at::Tensor &self, const at::Tensor &other, const c10::Scalar &alpha) {
  return at::sub(other, self, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("polar.out", polar_out);
  m.impl("addcmul", addcmul);
  m.impl("addcmul_", addcmul_);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv", addcdiv);
  m.impl("addcdiv_", addcdiv_);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar", lerp);
  m.impl("lerp_.Scalar", lerp_);
  m.impl("lerp.Scalar_out", lerp_out);
  m.impl("lerp.Tensor", lerp_tensor);
  m.impl("lerp_.Tensor", lerp_tensor_);
  m.impl("lerp.Tensor_out", lerp_tensor_out);
  m.impl("bitwise_and.Tensor_out", bitwise_and_out);
  m.impl("bitwise_or.Tensor_out", bitwise_or_out);
  m.impl("bitwise_xor.Tensor_out", bitwise_xor_out);
  REGISTER_COMPARE(m, eq)
  REGISTER_COMPARE(m, ne)
  REGISTER_COMPARE(m, lt)
  REGISTER_COMPARE(m, le)
  REGISTER_COMPARE(m, gt)
  REGISTER_COMPARE(m, ge)
  m.impl("gelu_backward", gelu_backward);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("silu_backward", silu_backward);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("sigmoid_backward", sigmoid_backward);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward", tanh_backward);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("threshold_backward", threshold_backward);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("hardsigmoid_backward", hardsigmoid_backward);
  m.impl("hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  m.impl("hardswish_backward", hardswish_backward);
  m.impl("hardswish_backward.out", hardswish_backward_out);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("logit_backward", logit_backward);
  m.impl("logit_backward.grad_input", logit_backward_out);
  m.impl("leaky_relu_backward", leaky_relu_backward);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("elu_backward", elu_backward);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("mish_backward", mish_backward);
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("add.out", add_out);
  m.impl("sub.Tensor", sub);
  m.impl("sub_.Tensor", sub_);
  m.impl("sub.out", sub_out);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("mul.out", mul_out);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("div.out", div_out);
  m.impl("maximum", maximum);
  m.impl("minimum", minimum);
  m.impl("maximum.out", maximum_out);
  m.impl("minimum.out", minimum_out);
  m.impl("floor_divide", floor_divide);
  m.impl("floor_divide_.Tensor", floor_divide_);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("div.Tensor_mode", div_mode);
  m.impl("div_.Tensor_mode", div__mode);
  m.impl("div.out_mode", div_out_mode);
  m.impl("atan2", atan2);
  m.impl("atan2_", atan2_);
  m.impl("atan2.out", atan2_out);
  m.impl("xlogy.Tensor", xlogy);
  m.impl("xlogy_.Tensor", xlogy_);
  m.impl("xlogy.OutTensor", xlogy_out);
  m.impl("remainder.Tensor", remainder);
  m.impl("remainder_.Tensor", remainder_);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("copysign.Tensor", copysign);
  m.impl("copysign_.Tensor", copysign_);
  m.impl("copysign.out", copysign_out);
  m.impl("hypot", hypot);
  m.impl("hypot_", hypot_);
  m.impl("hypot.out", hypot_out);
  m.impl("heaviside", heaviside);
  m.impl("heaviside_", heaviside_);
  m.impl("heaviside.out", heaviside_out);
  m.impl("fmod.Tensor", fmod);
  m.impl("fmod_.Tensor", fmod_);
  m.impl("fmod.Tensor_out", fmod_out);
  m.impl("fmax", fmax);
  m.impl("fmax.out", fmax_out);
  m.impl("fmin", fmin);
  m.impl("fmin.out", fmin_out);
  m.impl("logaddexp", logaddexp);
  m.impl("logaddexp.out", logaddexp_out);
  m.impl("logaddexp2", logaddexp2);
  m.impl("logaddexp2.out", logaddexp2_out);
  m.impl("pow.Tensor_Tensor", pow_tt);
  m.impl("pow_.Tensor", pow_tt_);
  m.impl("pow.Tensor_Tensor_out", pow_tt_out);
  m.impl("pow.Scalar", pow_scalar_base);
  m.impl("pow.Scalar_out", pow_scalar_base_out);
  m.impl("clamp", clamp);
  m.impl("clamp_", clamp_);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp.Tensor", clamp_tensor);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("logical_and.out", logical_and_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("rsub.Tensor", rsub_tensor);
}

}  // namespace torch_neuronx
