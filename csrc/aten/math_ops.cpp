// Native arithmetic: elementwise binary ops (add, sub, mul, div, maximum,
// minimum) and matrix products (mm, addmm, bmm). Shapes, type promotion and
// argument checks follow ATen; the math is the C kernel library's. Cases the
// kernels do not take (bool/complex dtypes, integer matmul) go to the CPU
// fallback, counted like any other fallback.
#include "neuron.h"

#include <ATen/ops/addr_native.h>

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cstring>

namespace torch_neuronx {

#define FALLBACK_CALL(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

namespace {

// Task arguments: the kernel descriptor plus room for a scalar operand that
// travels inline (a CPU wrapped number such as the 2 in `x * 2`).
struct BinaryTask {
  tnk_binary_args_t args;
  int32_t scalar_slot;  // -1: none; 1: a; 2: b
  alignas(16) unsigned char scalar[16];
};

void binary_task(void* p) {
  auto* t = static_cast<BinaryTask*>(p);
  if (t->scalar_slot == 1) t->args.a.data = t->scalar;
  if (t->scalar_slot == 2) t->args.b.data = t->scalar;
  tnk_binary(&t->args);
}

// Strides of t aligned to an output of `ndim` dims, 0 where broadcast.
void broadcast_strides(const at::Tensor& t, at::IntArrayRef out_sizes,
                       int64_t* strides) {
  int64_t nd = out_sizes.size(), td = t.dim();
  for (int64_t d = 0; d < nd; d++) {
    int64_t td_i = d - (nd - td);
    strides[d] = (td_i < 0 || t.size(td_i) == 1) ? 0 : t.stride(td_i);
  }
}

bool is_cpu_scalar(const at::Tensor& t) { return t.is_cpu() && t.dim() == 0; }

void check_operand(const at::Tensor& t, c10::Device dev, const char* name) {
  if (is_cpu_scalar(t)) return;
  TORCH_CHECK(t.device() == dev,
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ", dev, " and ", t.device(),
              "! (when checking argument for ", name, ")");
}

// Computes out = op(a, b) into an output of the common dtype. `out` has the
// broadcast shape already. Returns false if the kernels cannot do it.
bool launch_binary(const at::Tensor& out, const at::Tensor& a0,
                   const at::Tensor& b0, tnk_binary_op_t op,
                   const c10::Scalar& alpha, const char* name,
                   std::optional<c10::ScalarType> compute = std::nullopt,
                   double beta = 0, double gamma = 0) {
  // The kernel's dtype: the output's, or the operands' for comparisons.
  c10::ScalarType common = compute.value_or(out.scalar_type());
  bool ok;
  tnk_dtype_t dt = to_tnk(common, &ok);
  if (!ok || !tnk_binary_supported(op, dt) || out.dim() > TNK_MAX_DIMS)
    return false;
  at::assert_no_internal_overlap(out);
  BinaryTask task{};
  task.scalar_slot = -1;
  // Converted operands must outlive the launch: freed earlier, their blocks
  // could be handed to the other operand's conversion, queued before us.
  at::Tensor keep[2];
  auto operand = [&](const at::Tensor& t, tnk_view_t* v, int slot) {
    v->dtype = dt;
    if (is_cpu_scalar(t)) {  // read now: host memory, no device work
      at::Tensor s = t.scalar_type() == common ? t : t.to(common);
      std::memcpy(task.scalar, s.const_data_ptr(), s.itemsize());
      task.scalar_slot = slot;
      // fp16/bf16 arithmetic takes the number at fp32, as CUDA's kernels
      // and the CPU's mul/div do (0.1 rounded to bf16 first is 0.4% off;
      // the CPU's add/sub round it, CUDA's do not); comparisons compare
      // with the number in the tensor's dtype, as both do.
      if (at::isReducedFloatingType(common) && !compute.has_value() && !t.is_complex()) {
        task.args.scalar_operand = slot;
        task.args.scalar = t.item<double>();
      }
      for (int d = 0; d < TNK_MAX_DIMS; d++) v->strides[d] = 0;
      return;
    }
    at::Tensor c = readable_input(out, t.scalar_type() == common ? t : t.to(common));
    v->data = c.numel() ? const_cast<void*>(c.const_data_ptr()) : nullptr;
    broadcast_strides(c, out.sizes(), v->strides);
    keep[slot - 1] = c;
  };
  // Only one CPU scalar can travel inline; two means both are scalars and
  // the caller never gets here (the op would not dispatch to neuron).
  operand(a0, &task.args.a, 1);
  operand(b0, &task.args.b, 2);
  task.args.shape.ndim = static_cast<int32_t>(out.dim());
  for (int64_t d = 0; d < out.dim(); d++) {
    task.args.shape.sizes[d] = out.size(d);
    task.args.out.strides[d] = out.stride(d);
  }
  task.args.out.data = out.numel() ? out.data_ptr() : nullptr;
  task.args.out.dtype = compute.has_value() ? TNK_BOOL : dt;
  task.args.op = op;
  task.args.dtype = dt;
  task.args.fault = {tnrt_stream_fault, current_native_stream(out.device().index()), name,
                     TNK_FAULT_ZERO_DIVISION, tnrt_thread_token()};
  if (c10::isIntegralType(common, true)) task.args.ialpha = alpha.toLong();
  else task.args.alpha = alpha.toDouble();
  task.args.beta = beta;
  task.args.gamma = gamma;
  if (out.numel() == 0) return true;
  launch(out.device().index(), binary_task, &task, sizeof task, name);
  return true;
}

c10::ScalarType promoted(const at::Tensor& a, const at::Tensor& b,
                         tnk_binary_op_t op) {
  c10::ScalarType t = at::result_type(a, b);
  if ((op == TNK_DIV || op == TNK_ATAN2 || op == TNK_XLOGY) && c10::isIntegralType(t, true))
    t = c10::typeMetaToScalarType(c10::get_default_dtype());
  return t;
}

c10::Device device_of_pair(const at::Tensor& a, const at::Tensor& b) {
  return a.is_privateuseone() ? a.device() : b.device();
}

}  // namespace

// The functional, in-place and out= forms of each binary op.
#define NEURON_BINARY(NAME, OP, ATEN_FN, ATEN_INPLACE, ATEN_OUT, ALPHA_ARG,        \
                      ALPHA_PARAM, ALPHA_VALUE)                                    \
  at::Tensor NAME(const at::Tensor& a, const at::Tensor& b ALPHA_PARAM) {          \
    c10::Device dev = device_of_pair(a, b);                                        \
    check_operand(a, dev, #NAME);                                                  \
    check_operand(b, dev, #NAME);                                                  \
    c10::ScalarType common = promoted(a, b, OP);                                   \
    if (OP == TNK_ADD || OP == TNK_SUB) at::native::alpha_check(common, ALPHA_VALUE); \
    auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());                   \
    at::Tensor out = at::empty(shape, a.options().device(dev).dtype(common));     \
    if (launch_binary(out, a, b, OP, ALPHA_VALUE, "aten::" #NAME)) return out;                     \
    return at::native::call_fallback_fn<&neuron_cpu_fallback,                      \
                                        ATEN_OP(ATEN_FN)>::call(a, b ALPHA_ARG);   \
  }                                                                                \
  at::Tensor& NAME##_(at::Tensor& self, const at::Tensor& b ALPHA_PARAM) {         \
    check_operand(b, self.device(), #NAME "_");                                    \
    c10::ScalarType common = promoted(self, b, OP);                                \
    TORCH_CHECK(at::canCast(common, self.scalar_type()), "result type ", common,   \
                " can't be cast to the desired output type ", self.scalar_type()); \
    if (OP == TNK_ADD || OP == TNK_SUB) at::native::alpha_check(common, ALPHA_VALUE); \
    auto shape = at::infer_size_dimvector(self.sizes(), b.sizes());                \
    TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "output with shape ",      \
                self.sizes(), " doesn't match the broadcast shape ",               \
                at::IntArrayRef(shape));                                           \
    if (common == self.scalar_type() && launch_binary(self, self, b, OP, ALPHA_VALUE, "aten::" #NAME "_")) \
      return self;                                                                 \
    return at::native::call_fallback_fn<&neuron_cpu_fallback,                      \
                                        ATEN_OP(ATEN_INPLACE)>::call(self, b ALPHA_ARG); \
  }                                                                                \
  at::Tensor& NAME##_out(const at::Tensor& a, const at::Tensor& b ALPHA_PARAM,     \
                         at::Tensor& out) {                                        \
    check_operand(a, out.device(), #NAME "_out");                                  \
    check_operand(b, out.device(), #NAME "_out");                                  \
    c10::ScalarType common = promoted(a, b, OP);                                   \
    TORCH_CHECK(at::canCast(common, out.scalar_type()), "result type ", common,    \
                " can't be cast to the desired output type ", out.scalar_type());  \
    if (OP == TNK_ADD || OP == TNK_SUB) at::native::alpha_check(common, ALPHA_VALUE); \
    auto shape = at::infer_size_dimvector(a.sizes(), b.sizes());                   \
    resize_elementwise_out(out, shape, {&a, &b});                                  \
    if (common == out.scalar_type() && launch_binary(out, a, b, OP, ALPHA_VALUE, "aten::" #NAME))  \
      return out;                                                                  \
    return at::native::call_fallback_fn<&neuron_cpu_fallback,                      \
                                        ATEN_OP(ATEN_OUT)>::call(a, b ALPHA_ARG, out); \
  }

#define WITH_ALPHA_PARAM , const c10::Scalar& alpha
#define WITH_ALPHA_ARG , alpha
#define NO_ALPHA
#define ONE c10::Scalar(1)

NEURON_BINARY(add, TNK_ADD, add_Tensor, add__Tensor, add_out, WITH_ALPHA_ARG,
              WITH_ALPHA_PARAM, alpha)
NEURON_BINARY(sub, TNK_SUB, sub_Tensor, sub__Tensor, sub_out, WITH_ALPHA_ARG,
              WITH_ALPHA_PARAM, alpha)
NEURON_BINARY(mul, TNK_MUL, mul_Tensor, mul__Tensor, mul_out, NO_ALPHA, NO_ALPHA,
              ONE)
NEURON_BINARY(div, TNK_DIV, div_Tensor, div__Tensor, div_out, NO_ALPHA, NO_ALPHA,
              ONE)
NEURON_BINARY(floor_divide, TNK_FLOORDIV, floor_divide, floor_divide__Tensor, floor_divide_out,
              NO_ALPHA, NO_ALPHA, ONE)
NEURON_BINARY(div_trunc, TNK_TRUNCDIV, div_Tensor, div__Tensor, div_out, NO_ALPHA, NO_ALPHA,
              ONE)
NEURON_BINARY(remainder, TNK_REMAINDER, remainder_Tensor, remainder__Tensor,
              remainder_Tensor_out, NO_ALPHA, NO_ALPHA, ONE)
NEURON_BINARY(atan2, TNK_ATAN2, atan2, atan2_, atan2_out, NO_ALPHA, NO_ALPHA, ONE)
NEURON_BINARY(xlogy, TNK_XLOGY, xlogy_Tensor, xlogy__Tensor, xlogy_OutTensor, NO_ALPHA,
              NO_ALPHA, ONE)
NEURON_BINARY(pow_tt, TNK_POW, pow_Tensor_Tensor, pow__Tensor, pow_Tensor_Tensor_out, NO_ALPHA,
              NO_ALPHA, ONE)

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

at::Tensor div_mode(const at::Tensor& a, const at::Tensor& b,
                    std::optional<c10::string_view> mode) {
  switch (rounding(mode)) {
    case 0: return torch_neuronx::div(a, b);
    case 1: return torch_neuronx::floor_divide(a, b);
    default: return torch_neuronx::div_trunc(a, b);
  }
}
at::Tensor& div__mode(at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  switch (rounding(mode)) {
    case 0: return torch_neuronx::div_(a, b);
    case 1: return torch_neuronx::floor_divide_(a, b);
    default: return torch_neuronx::div_trunc_(a, b);
  }
}
at::Tensor& div_out_mode(const at::Tensor& a, const at::Tensor& b,
                         std::optional<c10::string_view> mode, at::Tensor& out) {
  switch (rounding(mode)) {
    case 0: return torch_neuronx::div_out(a, b, out);
    case 1: return torch_neuronx::floor_divide_out(a, b, out);
    default: return torch_neuronx::div_trunc_out(a, b, out);
  }
}

// pow with a scalar base (2 ** t).
at::Tensor pow_scalar_base(const c10::Scalar& base, const at::Tensor& exp) {
  return torch_neuronx::pow_tt(at::native::wrapped_scalar_tensor(base), exp);
}
at::Tensor& pow_scalar_base_out(const c10::Scalar& base, const at::Tensor& exp, at::Tensor& out) {
  return torch_neuronx::pow_tt_out(at::native::wrapped_scalar_tensor(base), exp, out);
}

// clamp as maximum then minimum (NaN propagates as in ATen's clamp; with
// min > max the result is max, as ATen defines).
namespace {
at::Tensor& clamp_into(const at::Tensor& self, const at::Tensor* lo, const at::Tensor* hi,
                       at::Tensor& out, bool* done) {
  *done = false;
  TORCH_CHECK(lo || hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  c10::ScalarType common = self.scalar_type();
  if (lo) common = at::result_type(self, *lo);
  if (hi) common = c10::promoteTypes(common, at::result_type(self, *hi));
  TORCH_CHECK(at::canCast(common, out.scalar_type()), "result type ", common,
              " can't be cast to the desired output type ", out.scalar_type());
  if (common != out.scalar_type() || self.is_complex()) return out;
  auto shape = self.sizes().vec();
  for (const at::Tensor* t : {lo, hi})
    if (t) shape = at::infer_size(shape, t->sizes());
  resize_elementwise_out(out, shape, {&self, lo, hi});
  const at::Tensor* first = lo ? lo : hi;
  if (!launch_binary(out, self, *first, lo ? TNK_MAXIMUM : TNK_MINIMUM, 1, "aten::clamp"))
    return out;
  if (lo && hi) launch_binary(out, out, *hi, TNK_MINIMUM, 1, "aten::clamp");
  *done = true;
  return out;
}

at::Tensor scalar_operand(const std::optional<c10::Scalar>& s) {
  return s.has_value() ? at::native::wrapped_scalar_tensor(*s) : at::Tensor();
}
const at::Tensor* opt_ptr(const at::Tensor& t) { return t.defined() ? &t : nullptr; }

c10::ScalarType clamp_dtype(const at::Tensor& self, const at::Tensor& lo, const at::Tensor& hi) {
  c10::ScalarType t = self.scalar_type();
  if (lo.defined()) t = at::result_type(self, lo);
  if (hi.defined()) t = c10::promoteTypes(t, at::result_type(self, hi));
  return t;
}
}  // namespace

at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                      const std::optional<c10::Scalar>& max, at::Tensor& out) {
  for (const auto* s : {&min, &max})  // as CPU: a bound must fit the result dtype
    if (s->has_value()) check_scalar_fits(**s, out.scalar_type());
  at::Tensor lo = scalar_operand(min), hi = scalar_operand(max);
  bool done;
  clamp_into(self, opt_ptr(lo), opt_ptr(hi), out, &done);
  return done ? out : FALLBACK_CALL(clamp_out, self, min, max, out);
}
at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                 const std::optional<c10::Scalar>& max) {
  at::Tensor out = at::empty({0}, self.options().dtype(
                                      clamp_dtype(self, scalar_operand(min), scalar_operand(max))));
  return clamp_out(self, min, max, out);
}
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& min,
                   const std::optional<c10::Scalar>& max) {
  return clamp_out(self, min, max, self);
}
at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out) {
  at::Tensor lo = min.has_value() ? *min : at::Tensor(), hi = max.has_value() ? *max : at::Tensor();
  for (const at::Tensor* t : {&lo, &hi})
    if (t->defined()) check_operand(*t, self.device(), "clamp");
  bool done;
  clamp_into(self, opt_ptr(lo), opt_ptr(hi), out, &done);
  return done ? out : FALLBACK_CALL(clamp_Tensor_out, self, min, max, out);
}
at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                        const std::optional<at::Tensor>& max) {
  at::Tensor lo = min.has_value() ? *min : at::Tensor(), hi = max.has_value() ? *max : at::Tensor();
  at::Tensor out = at::empty({0}, self.options().dtype(clamp_dtype(self, lo, hi)));
  return clamp_tensor_out(self, min, max, out);
}
at::Tensor& clamp_min_out(const at::Tensor& self, const c10::Scalar& min, at::Tensor& out) {
  return clamp_out(self, min, std::nullopt, out);
}
at::Tensor& clamp_max_out(const at::Tensor& self, const c10::Scalar& max, at::Tensor& out) {
  return clamp_out(self, std::nullopt, max, out);
}
at::Tensor& clamp_min_tensor_out(const at::Tensor& self, const at::Tensor& min, at::Tensor& out) {
  return clamp_tensor_out(self, min, std::nullopt, out);
}
at::Tensor& clamp_max_tensor_out(const at::Tensor& self, const at::Tensor& max, at::Tensor& out) {
  return clamp_tensor_out(self, std::nullopt, max, out);
}

// logical and/or/xor/not: operands read as bool (nonzero), any out dtype.
namespace {
at::Tensor as_bool(const at::Tensor& t) {
  return t.scalar_type() == at::kBool ? t : t.ne(0);
}
at::Tensor& store_bool(const at::Tensor& r, at::Tensor& out) {
  return assign_result(out, r);
}
}  // namespace

#define NEURON_LOGICAL_BIN(NAME, OP)                                                      \
  at::Tensor& NAME##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {      \
    check_operand(a, out.device(), #NAME);                                                \
    check_operand(b, out.device(), #NAME);                                                \
    if (a.is_complex() || b.is_complex())                                                 \
      return FALLBACK_CALL(NAME##_out, a, b, out);                                        \
    at::Tensor x = as_bool(a), y = as_bool(b);                                            \
    auto shape = at::infer_size_dimvector(x.sizes(), y.sizes());                          \
    resize_elementwise_out(out, shape, {&a, &b});                                         \
    if (out.scalar_type() == at::kBool && !out.storage().is_alias_of(x.storage()) &&      \
        !out.storage().is_alias_of(y.storage())) {                                        \
      at::native::resize_output(out, shape);                                              \
      launch_binary(out, x, y, OP, 1, "aten::" #NAME);                                    \
      return out;                                                                         \
    }                                                                                     \
    at::Tensor r = at::empty(shape, out.options().dtype(at::kBool));                      \
    launch_binary(r, x, y, OP, 1, "aten::" #NAME);                                        \
    return store_bool(r, out);                                                            \
  }
NEURON_LOGICAL_BIN(logical_and, TNK_BITAND)
NEURON_LOGICAL_BIN(logical_or, TNK_BITOR)
NEURON_LOGICAL_BIN(logical_xor, TNK_BITXOR)
#undef NEURON_LOGICAL_BIN

at::Tensor& logical_not_out(const at::Tensor& a, at::Tensor& out) {
  if (a.is_complex()) return FALLBACK_CALL(logical_not_out, a, out);
  return store_bool(a.eq(0), out);
}

// maximum / minimum have no in-place form in ATen. Returns an undefined
// tensor when the kernels cannot take the dtype.
at::Tensor extremum(const at::Tensor& a, const at::Tensor& b, tnk_binary_op_t op,
                    const char* name) {
  c10::Device dev = device_of_pair(a, b);
  check_operand(a, dev, name);
  check_operand(b, dev, name);
  TORCH_CHECK(!a.is_complex() && !b.is_complex(), name,
              " not implemented for complex tensors.");
  at::Tensor out = at::empty(at::infer_size_dimvector(a.sizes(), b.sizes()),
                             a.options().device(dev).dtype(at::result_type(a, b)));
  return launch_binary(out, a, b, op, 1, name) ? out : at::Tensor();
}

at::Tensor maximum(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = extremum(a, b, TNK_MAXIMUM, "aten::maximum");
  return out.defined() ? out
                       : at::native::call_fallback_fn<&neuron_cpu_fallback,
                                                      ATEN_OP(maximum)>::call(a, b);
}

at::Tensor minimum(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = extremum(a, b, TNK_MINIMUM, "aten::minimum");
  return out.defined() ? out
                       : at::native::call_fallback_fn<&neuron_cpu_fallback,
                                                      ATEN_OP(minimum)>::call(a, b);
}

// ------------------------------------------------------------------ GEMM

namespace {

void gemm_task(void* p) { tnk_gemm(static_cast<tnk_gemm_args_t*>(p)); }

bool gemm_dtype_ok(const at::Tensor& t) {
  bool ok;
  tnk_dtype_t dt = to_tnk(t.scalar_type(), &ok);
  return ok && tnk_gemm_supported(dt);
}

// Products the GEMM kernel has no dtype for, from native kernels: complex as
// four real GEMMs of the parts, integers as sums of broadcast products in
// int64 (exact; wrapping to the dtype afterwards agrees with CPU's wrapping
// arithmetic), in chunks of k that bound the temporary.
bool other_product_ok(const at::Tensor& t) {
  auto st = t.scalar_type();
  return st == at::kComplexFloat || st == at::kComplexDouble ||
         (c10::isIntegralType(st, false) && st != at::kBool);
}

at::Tensor product3(const at::Tensor& a, const at::Tensor& b) {  // [B,M,K] @ [B,K,N]
  if (a.is_complex()) {
    at::Tensor ar = at::view_as_real(a.resolve_conj()), br = at::view_as_real(b.resolve_conj());
    at::Tensor are = ar.select(-1, 0), aim = ar.select(-1, 1);
    at::Tensor bre = br.select(-1, 0), bim = br.select(-1, 1);
    at::Tensor re = at::bmm(are, bre) - at::bmm(aim, bim);
    at::Tensor im = at::bmm(are, bim) + at::bmm(aim, bre);
    return at::complex(re, im);
  }
  int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  at::Tensor a64 = a.to(at::kLong), b64 = b.to(at::kLong);
  at::Tensor acc = at::zeros({B, M, N}, a64.options());
  int64_t per_k = std::max<int64_t>(1, B * M * N);
  int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / per_k);
  for (int64_t k0 = 0; k0 < K; k0 += chunk) {
    int64_t kc = std::min(chunk, K - k0);
    acc.add_((a64.narrow(2, k0, kc).unsqueeze(-1) * b64.narrow(1, k0, kc).unsqueeze(1)).sum(2));
  }
  return acc.to(a.scalar_type());
}

// beta * self + alpha * product, with self ignored when beta is 0 (as CPU:
// NaN or inf in it do not propagate)
at::Tensor scaled_sum(const at::Tensor& self, const at::Tensor& prod, const c10::Scalar& beta_,
                      const c10::Scalar& alpha_) {
  const c10::Scalar beta = scalar_as(beta_, prod.scalar_type());
  const c10::Scalar alpha = scalar_as(alpha_, prod.scalar_type());
  at::Tensor r = prod * alpha;
  if (beta.toComplexDouble() == 0.0) return r;
  return r + self * beta;
}

void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ", a.device(), " and ", b.device(),
              "! (when checking argument for ", op, ")");
}

// out[b] = beta * out[b] + alpha * a[b] @ m[b]; 3-D views (batch first).
void launch_gemm(const at::Tensor& out, const at::Tensor& a,
                 const at::Tensor& b, double alpha, double beta,
                 const char* name) {
  at::assert_no_internal_overlap(out);
  tnk_gemm_args_t g{};
  g.batch = out.size(0);
  g.m = out.size(1);
  g.n = out.size(2);
  g.k = a.size(2);
  g.c = out.data_ptr();
  g.a = a.const_data_ptr();
  g.b = b.const_data_ptr();
  g.sa_b = a.stride(0); g.sa_r = a.stride(1); g.sa_c = a.stride(2);
  g.sb_b = b.stride(0); g.sb_r = b.stride(1); g.sb_c = b.stride(2);
  g.sc_b = out.stride(0); g.sc_r = out.stride(1); g.sc_c = out.stride(2);
  bool ok;
  g.dtype = to_tnk(out.scalar_type(), &ok);
  g.alpha = alpha;
  g.beta = beta;
  if (out.numel() == 0) return;
  if (g.k == 0 && beta == 0.0) {  // empty sum: zeros, whatever C held
    out.zero_();
    return;
  }
  launch(out.device().index(), gemm_task, &g, sizeof g, name);
}

void check_mm(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
  check_same_device(a, b, op);
}

}  // namespace

namespace {
// The batch shapes of bmm and baddbmm, with ATen's messages.
void check_bmm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [",
              a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ",
              b.size(1), "].");
}

// out = beta * self (broadcast to shape) + alpha * a @ b for 3-D (batch
// first) views a and b; through a temporary when out aliases an operand.
void accumulate_product(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                        at::IntArrayRef shape, const c10::Scalar& beta,
                        const c10::Scalar& alpha, at::Tensor& out, bool batched,
                        const char* name) {
  double bv = beta.toDouble();
  bool in_place = out.is_same(self);
  at::native::resize_output(out, shape);
  at::Tensor o = out;
  if (o.storage().is_alias_of(a.storage()) || o.storage().is_alias_of(b.storage()))
    o = at::empty(shape, out.options());
  if (bv != 0.0 && !(in_place && o.is_same(out))) o.copy_(self.expand(shape));
  launch_gemm(batched ? o : o.unsqueeze(0), a, b, alpha.toDouble(), bv, name);
  if (!o.is_same(out)) out.copy_(o);
}
}  // namespace

at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  check_mm(a, b, "mm");
  check_same_device(a, out, "mm");
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), "Expected out tensor to have dtype ",
              a.scalar_type(), ", but got ", out.scalar_type(), " instead");
  if (!gemm_dtype_ok(a) && other_product_ok(a) && b.scalar_type() == a.scalar_type()) {
    at::Tensor r = product3(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
    return assign_result(out, r);
  }
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback,
                                        ATEN_OP(mm_out)>::call(a, b, out);
  at::native::resize_output(out, {a.size(0), b.size(1)});
  at::Tensor o = out;
  if (o.storage().is_alias_of(a.storage()) || o.storage().is_alias_of(b.storage()))
    o = at::empty_like(out);  // GEMM cannot write over its inputs
  launch_gemm(o.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 1.0, 0.0, "aten::mm");
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  check_mm(a, b, "mm");
  if (!gemm_dtype_ok(a) && other_product_ok(a) && b.scalar_type() == a.scalar_type())
    return product3(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback,
                                        ATEN_OP(mm)>::call(a, b);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  launch_gemm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 1.0, 0.0,
              "aten::mm");
  return out;
}

// addr as outer_sum: ATen's composite formula (beta 0 ignores self), with the CPU's
// scalar checks; fp16/bf16 are computed in fp32 and rounded once.
at::Tensor outer_sum(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2,
                const c10::Scalar& beta, const c10::Scalar& alpha) {
  const at::ScalarType t =
      c10::promoteTypes(c10::promoteTypes(self.scalar_type(), v1.scalar_type()), v2.scalar_type());
  for (auto [v, name] : {std::pair<const c10::Scalar*, const char*>{&beta, "beta"},
                         {&alpha, "alpha"}}) {
    TORCH_CHECK(!v->isBoolean() || t == at::kBool, "Boolean ", name,
                " only supported for Boolean results.");
    TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t) || v->isIntegral(true),
                "For integral input tensors, argument ", name,
                " must not be a floating point number.");
  }
  if (at::isReducedFloatingType(t))
    return at::native::math_addr(self.to(at::kFloat), v1.to(at::kFloat), v2.to(at::kFloat),
                                 beta, alpha).to(t);
  return at::native::math_addr(self, v1, v2, beta, alpha);
}

at::Tensor& addr_out(const at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2,
                     const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = outer_sum(self, v1, v2, beta, alpha);
  return assign_result(out, r);
}

// addr_: ATen's composite form expands self, so it would accept (and
// resize) any self that broadcasts; CPU's and CUDA's in-place kernel writes
// self itself, which must be the 2-D outer-product shape.
at::Tensor& addr_(at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2,
                  const c10::Scalar& beta, const c10::Scalar& alpha) {
  at::Tensor r = outer_sum(self, v1, v2, beta, alpha);  // checks the vectors
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  TORCH_CHECK(self.sizes() == r.sizes(), "size mismatch, input: ", self.sizes(), ", v1: ",
              v1.sizes(), ", v2: ", v2.sizes());
  return self.copy_(r);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& a,
                      const at::Tensor& b, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  check_mm(a, b, "addmm");
  check_same_device(self, a, "addmm");
  TORCH_CHECK(self.scalar_type() == a.scalar_type() &&
                  out.scalar_type() == a.scalar_type(),
              "self and mat2 must have the same dtype, but got ",
              self.scalar_type(), " and ", a.scalar_type());
  std::vector<int64_t> shape{a.size(0), b.size(1)};
  if (!gemm_dtype_ok(a) && other_product_ok(a) && b.scalar_type() == a.scalar_type()) {
    at::expand_size(self, shape, "addmm");
    at::Tensor r = scaled_sum(self, product3(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0), beta, alpha);
    at::native::resize_output(out, shape);
    return out.copy_(r);
  }
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(addmm_out)>::call(
        self, a, b, beta, alpha, out);
  at::expand_size(self, shape, "addmm");  // checks that self broadcasts
  accumulate_product(self, a.unsqueeze(0), b.unsqueeze(0), shape, beta, alpha, out, false,
                     "aten::addmm");
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_mm(a, b, "addmm");
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  return addmm_out(self, a, b, beta, alpha, out);
}

at::Tensor& addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 2 && self.size(0) == a.size(0) && self.size(1) == b.size(1),
              "addmm_: self must have the shape of the product, got ", self.sizes());
  return addmm_out(self, a, b, beta, alpha, self);
}

at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  check_bmm(a, b);
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected scalar type ", a.scalar_type(), " but found ", b.scalar_type());
  check_same_device(a, b, "bmm");
  if (!gemm_dtype_ok(a) && other_product_ok(a)) {
    at::Tensor r = product3(a, b);
    return assign_result(out, r);
  }
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback,
                                        ATEN_OP(bmm_out)>::call(a, b, out);
  at::native::resize_output(out, {a.size(0), a.size(1), b.size(2)});
  at::Tensor o = out;
  if (o.storage().is_alias_of(a.storage()) || o.storage().is_alias_of(b.storage()))
    o = at::empty_like(out);
  launch_gemm(o, a, b, 1.0, 0.0, "aten::bmm");
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({0}, a.options());
  return bmm_out(a, b, out);
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_bmm(a, b);
  TORCH_CHECK(self.scalar_type() == a.scalar_type() && a.scalar_type() == b.scalar_type() &&
                  out.scalar_type() == a.scalar_type(),
              "expected scalar type ", a.scalar_type(), " but found ",
              self.scalar_type() != a.scalar_type() ? self.scalar_type() : b.scalar_type());
  check_same_device(a, b, "baddbmm");
  check_same_device(self, a, "baddbmm");
  std::vector<int64_t> shape{a.size(0), a.size(1), b.size(2)};
  if (!gemm_dtype_ok(a) && other_product_ok(a)) {
    at::expand_size(self, shape, "baddbmm");
    at::Tensor r = scaled_sum(self, product3(a, b), beta, alpha);
    at::native::resize_output(out, shape);
    return out.copy_(r);
  }
  if (!gemm_dtype_ok(a))
    return FALLBACK_CALL(baddbmm_out, self, a, b, beta, alpha, out);
  at::expand_size(self, shape, "baddbmm");
  accumulate_product(self, a, b, shape, beta, alpha, out, true, "aten::baddbmm");
  return out;
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  at::Tensor out = at::empty({0}, a.options());
  return baddbmm_out(self, a, b, beta, alpha, out);
}

at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                     const c10::Scalar& beta, const c10::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 3 && self.size(0) == a.size(0) && self.size(1) == a.size(1) &&
                  self.size(2) == b.size(2),
              "baddbmm_: self must have the shape of the product, got ", self.sizes());
  return baddbmm_out(self, a, b, beta, alpha, self);
}

// addbmm: beta * self + alpha * sum_b batch1[b] @ batch2[b], one matrix
// product of the batches laid side by side: [n, B*k] @ [B*k, m]
at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  const int64_t batches = b2.size(0), k = b2.size(1), m = b2.size(2);  // IndexError as CPU
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == batches, "batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", batches);
  TORCH_CHECK(b1.size(2) == k, "Incompatible matrix sizes for bmm (", b1.size(1), "x",
              b1.size(2), " and ", k, "x", m, ")");
  at::Tensor side = b1.transpose(0, 1).reshape({b1.size(1), batches * k});
  at::Tensor r = at::addmm(self, side, b2.reshape({batches * k, m}), beta, alpha);
  return assign_result(out, r);  // out may be self (addbmm_)
}

at::Tensor addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                  const c10::Scalar& beta, const c10::Scalar& alpha) {
  at::Tensor out = at::empty({0}, self.options().dtype(b1.scalar_type()));
  return addbmm_out(self, b1, b2, beta, alpha, out);
}

at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                    const c10::Scalar& beta, const c10::Scalar& alpha) {
  return addbmm_out(self, b1, b2, beta, alpha, self);
}

// ---------------------------------------------------- activation backward
// grad_input = f'(saved) * grad_output, with the saved tensor the input or
// the output as ATen's derivative formulas give it.

namespace {
at::Tensor& activation_backward_into(at::Tensor& out, const at::Tensor& grad,
                                     const at::Tensor& saved, tnk_binary_op_t op,
                                     double alpha, const char* name, double beta = 0,
                                     double gamma = 0) {
  resize_elementwise_out(out, at::infer_size_dimvector(grad.sizes(), saved.sizes()),
                         {&grad, &saved});
  launch_binary(out, grad, saved, op, c10::Scalar(alpha), name, std::nullopt, beta, gamma);
  return out;
}

bool activation_ok(const at::Tensor& grad, const at::Tensor& saved) {
  bool ok;
  tnk_dtype_t dt = to_tnk(grad.scalar_type(), &ok);
  return ok && grad.scalar_type() == saved.scalar_type() &&
         grad.device() == saved.device() && tnk_binary_supported(TNK_GELU_BWD, dt);
}
}  // namespace

#define NEURON_ACT_BWD(NAME, ATEN_FN, ATEN_OUT, OPEXPR, EXTRA_PARAM, EXTRA_ARG, ALPHA, BETA) \
  at::Tensor NAME(const at::Tensor& grad, const at::Tensor& saved EXTRA_PARAM) {      \
    if (!activation_ok(grad, saved))                                                  \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_FN)>::call( \
          grad, saved EXTRA_ARG);                                                     \
    at::Tensor out = at::empty_like(grad);                                            \
    return activation_backward_into(out, grad, saved, OPEXPR, ALPHA, "aten::" #NAME, BETA); \
  }                                                                                   \
  at::Tensor& NAME##_out(const at::Tensor& grad, const at::Tensor& saved EXTRA_PARAM, \
                         at::Tensor& out) {                                           \
    if (!activation_ok(grad, saved) || out.scalar_type() != grad.scalar_type())       \
      return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(ATEN_OUT)>::call( \
          grad, saved EXTRA_ARG, out);                                                \
    return activation_backward_into(out, grad, saved, OPEXPR, ALPHA, "aten::" #NAME, BETA); \
  }

#define NO_EXTRA
#define GELU_PARAM , c10::string_view approximate
#define GELU_ARG , approximate
#define THRESH_PARAM , const c10::Scalar& threshold
#define THRESH_ARG , threshold

NEURON_ACT_BWD(gelu_backward, gelu_backward, gelu_backward_grad_input,
               (approximate == "tanh" ? TNK_GELU_TANH_BWD : TNK_GELU_BWD), GELU_PARAM,
               GELU_ARG, 0.0, 0.0)
NEURON_ACT_BWD(silu_backward, silu_backward, silu_backward_grad_input, TNK_SILU_BWD,
               NO_EXTRA, NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(sigmoid_backward, sigmoid_backward, sigmoid_backward_grad_input,
               TNK_SIGMOID_BWD, NO_EXTRA, NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(tanh_backward, tanh_backward, tanh_backward_grad_input, TNK_TANH_BWD,
               NO_EXTRA, NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(threshold_backward, threshold_backward, threshold_backward_grad_input,
               TNK_THRESHOLD_BWD, THRESH_PARAM, THRESH_ARG, threshold.toDouble(), 0.0)
NEURON_ACT_BWD(hardsigmoid_backward, hardsigmoid_backward, hardsigmoid_backward_grad_input,
               TNK_HARDSIGMOID_BWD, NO_EXTRA, NO_EXTRA, 0.0, 0.0)
NEURON_ACT_BWD(hardswish_backward, hardswish_backward, hardswish_backward_out,
               TNK_HARDSWISH_BWD, NO_EXTRA, NO_EXTRA, 0.0, 0.0)
#define HT_PARAM , const c10::Scalar &lo, const c10::Scalar &hi
#define HT_ARG , lo, hi
NEURON_ACT_BWD(hardtanh_backward, hardtanh_backward, hardtanh_backward_grad_input,
               TNK_HARDTANH_BWD, HT_PARAM, HT_ARG, lo.toDouble(), hi.toDouble())
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
              "In-place leakyReLu backward calculation is triggered with a negative "   \
              "slope which is not supported. This is caused by calling in-place "       \
              "forward function with a negative slope, please call out-of-place "       \
              "version instead. File an issue at https://github.com/pytorch/pytorch if " \
              "you do require supporting in-place leakRelu backward calculation with "  \
              "negative slope")
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self LRELU_PARAM) {
  LRELU_CHECK;
  if (!activation_ok(grad, self))
    return FALLBACK_CALL(leaky_relu_backward, grad, self LRELU_ARG);
  at::Tensor out = at::empty_like(grad);
  return activation_backward_into(out, grad, self, TNK_LEAKY_RELU_BWD, slope.toDouble(),
                                  "aten::leaky_relu_backward");
}
at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self LRELU_PARAM,
                                    at::Tensor& out) {
  LRELU_CHECK;
  if (!activation_ok(grad, self) || out.scalar_type() != grad.scalar_type())
    return FALLBACK_CALL(leaky_relu_backward_grad_input, grad, self LRELU_ARG, out);
  return activation_backward_into(out, grad, self, TNK_LEAKY_RELU_BWD, slope.toDouble(),
                                  "aten::leaky_relu_backward");
}

#define ELU_BWD_PARAM                                                                   \
  const c10::Scalar &alpha, const c10::Scalar &scale, const c10::Scalar &iscale,        \
      bool is_result, const at::Tensor &saved
#define ELU_BWD_ARG alpha, scale, iscale, is_result, saved
#define ELU_BWD_CHECK                                                                   \
  TORCH_CHECK(!is_result || alpha.toDouble() >= 0.0,                                    \
              "In-place elu backward calculation is triggered with a negative slope "  \
              "which is not supported. This is caused by calling in-place forward "    \
              "function with a negative slope, please call out-of-place version "      \
              "instead.")
at::Tensor elu_backward(const at::Tensor& grad, ELU_BWD_PARAM) {
  ELU_BWD_CHECK;
  if (!activation_ok(grad, saved)) return FALLBACK_CALL(elu_backward, grad, ELU_BWD_ARG);
  at::Tensor out = at::empty_like(grad);
  return activation_backward_into(out, grad, saved,
                                  is_result ? TNK_ELU_RESULT_BWD : TNK_ELU_BWD,
                                  alpha.toDouble(), "aten::elu_backward", scale.toDouble(),
                                  iscale.toDouble());
}
at::Tensor& elu_backward_out(const at::Tensor& grad, ELU_BWD_PARAM, at::Tensor& out) {
  ELU_BWD_CHECK;
  if (!activation_ok(grad, saved) || out.scalar_type() != grad.scalar_type())
    return FALLBACK_CALL(elu_backward_grad_input, grad, ELU_BWD_ARG, out);
  return activation_backward_into(out, grad, saved,
                                  is_result ? TNK_ELU_RESULT_BWD : TNK_ELU_BWD,
                                  alpha.toDouble(), "aten::elu_backward", scale.toDouble(),
                                  iscale.toDouble());
}

at::Tensor mish_backward(const at::Tensor& grad, const at::Tensor& self) {
  if (!activation_ok(grad, self)) return FALLBACK_CALL(mish_backward, grad, self);
  at::Tensor out = at::empty_like(grad);
  return activation_backward_into(out, grad, self, TNK_MISH_BWD, 0.0, "aten::mish_backward");
}

// ---------------------------------------------------------------- bitwise
// and/or/xor of integer and bool tensors (floating ones raise on CPU).

#define NEURON_BITWISE(NAME, OP)                                                      \
  at::Tensor& NAME##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {  \
    c10::Device dev = out.device();                                                   \
    check_operand(a, dev, #NAME);                                                     \
    check_operand(b, dev, #NAME);                                                     \
    c10::ScalarType common = at::result_type(a, b);                                   \
    if (c10::isIntegralType(common, true) && out.scalar_type() == common) {           \
      resize_elementwise_out(out, at::infer_size_dimvector(a.sizes(), b.sizes()), {&a, &b}); \
      if (launch_binary(out, a, b, OP, 1, "aten::" #NAME)) return out;                \
    }                                                                                 \
    return at::native::call_fallback_fn<&neuron_cpu_fallback,                         \
                                        ATEN_OP2(NAME, Tensor_out)>::call(a, b, out); \
  }

NEURON_BITWISE(bitwise_and, TNK_BITAND)
NEURON_BITWISE(bitwise_or, TNK_BITOR)
NEURON_BITWISE(bitwise_xor, TNK_BITXOR)

// ------------------------------------------------------------ comparisons

namespace {
at::Tensor& compare_into(at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                         tnk_binary_op_t op, const char* name, bool* done) {
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

#define NEURON_COMPARE(NAME, OP)                                                         \
  at::Tensor NAME##_tensor(const at::Tensor& a, const at::Tensor& b) {                   \
    at::Tensor out = at::empty({0}, a.options().device(device_of_pair(a, b)).dtype(at::kBool)); \
    bool done;                                                                           \
    compare_into(out, a, b, OP, "aten::" #NAME, &done);                                  \
    return done ? out : at::native::call_fallback_fn<&neuron_cpu_fallback,               \
                                                      ATEN_OP2(NAME, Tensor)>::call(a, b); \
  }                                                                                      \
  at::Tensor& NAME##_tensor_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { \
    bool done;                                                                           \
    compare_into(out, a, b, OP, "aten::" #NAME, &done);                                  \
    return done ? out : at::native::call_fallback_fn<&neuron_cpu_fallback,               \
                                                      ATEN_OP2(NAME, Tensor_out)>::call(a, b, out); \
  }                                                                                      \
  at::Tensor NAME##_scalar(const at::Tensor& a, const c10::Scalar& s) {                  \
    return NAME##_tensor(a, at::native::wrapped_scalar_tensor(s));                       \
  }                                                                                      \
  at::Tensor& NAME##_scalar_out(const at::Tensor& a, const c10::Scalar& s, at::Tensor& out) { \
    return NAME##_tensor_out(a, at::native::wrapped_scalar_tensor(s), out);              \
  }

NEURON_COMPARE(eq, TNK_EQ)
NEURON_COMPARE(ne, TNK_NE)
NEURON_COMPARE(lt, TNK_LT)
NEURON_COMPARE(le, TNK_LE)
NEURON_COMPARE(gt, TNK_GT)
NEURON_COMPARE(ge, TNK_GE)

#define REGISTER_COMPARE(m, NAME)                      \
  m.impl(#NAME ".Tensor", NAME##_tensor);              \
  m.impl(#NAME ".Tensor_out", NAME##_tensor_out);      \
  m.impl(#NAME ".Scalar", NAME##_scalar);              \
  m.impl(#NAME ".Scalar_out", NAME##_scalar_out);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
  m.impl("mm", mm);
  m.impl("mm.out", mm_out);
  m.impl("addmm", addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("addmm_", addmm_);
  m.impl("addr_", addr_);
  m.impl("addr", outer_sum);
  m.impl("addr.out", addr_out);
  m.impl("addbmm", addbmm);
  m.impl("addbmm.out", addbmm_out);
  m.impl("addbmm_", addbmm_);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmm_out);
  m.impl("baddbmm", baddbmm);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("baddbmm_", baddbmm_);
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
}

}  // namespace torch_neuronx
