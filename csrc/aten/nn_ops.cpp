// Native optimizer arithmetic (addcmul, addcdiv, lerp), softmax and
// log-softmax (forward and backward) and sum/mean reductions. Argument
// checking and output shapes follow ATen; unsupported dtypes or devices go
// to the CPU fallback.
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

#define FALLBACK(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

bool floating_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

void fill_strides(const at::Tensor& t, at::IntArrayRef shape, int64_t* strides) {
  int64_t nd = shape.size(), td = t.dim();
  for (int64_t d = 0; d < nd; d++) {
    int64_t i = d - (nd - td);
    strides[d] = (i < 0 || t.size(i) == 1) ? 0 : t.stride(i);
  }
}

// ---------------------------------------------------------------- ternary

void ternary_task(void* p) { tnk_ternary(static_cast<tnk_ternary_args_t*>(p)); }

bool ternary_ok(const at::Tensor& out, std::initializer_list<const at::Tensor*> ins) {
  if (!floating_dtype(out.scalar_type()) || out.dim() > TNK_MAX_DIMS) return false;
  for (const at::Tensor* t : ins)
    if (t->scalar_type() != out.scalar_type() || t->device() != out.device() ||
        t->dim() > TNK_MAX_DIMS)
      return false;
  return true;
}

void launch_ternary(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                    const at::Tensor& c, tnk_ternary_op_t op, double value,
                    const char* name) {
  if (out.numel() == 0) return;
  at::assert_no_internal_overlap(out);
  at::Tensor keep[3] = {readable_input(out, a), readable_input(out, b), readable_input(out, c)};
  tnk_ternary_args_t x{};
  x.shape.ndim = static_cast<int32_t>(out.dim());
  for (int64_t d = 0; d < out.dim(); d++) x.shape.sizes[d] = out.size(d);
  bool ok;
  x.dtype = to_tnk(out.scalar_type(), &ok);
  x.out = {out.data_ptr(), x.dtype, 0, {}};
  fill_strides(out, out.sizes(), x.out.strides);
  tnk_view_t* views[3] = {&x.a, &x.b, &x.c};
  for (int i = 0; i < 3; i++) {
    const at::Tensor& t = keep[i].defined() ? keep[i] : keep[1];
    *views[i] = {const_cast<void*>(t.const_data_ptr()), x.dtype, 0, {}};
    fill_strides(t, out.sizes(), views[i]->strides);
  }
  x.op = op;
  x.value = value;
  launch(out.device().index(), ternary_task, &x, sizeof x, name);
}

}  // namespace

#define NEURON_ADDC(NAME, OP)                                                        \
  at::Tensor NAME(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, \
                  const c10::Scalar& value) {                                        \
    auto shape = at::infer_size_dimvector(                                          \
        at::infer_size_dimvector(self.sizes(), t1.sizes()), t2.sizes());            \
    at::Tensor out = at::empty(shape, self.options());                               \
    if (!ternary_ok(out, {&self, &t1, &t2})) return FALLBACK(NAME, self, t1, t2, value); \
    launch_ternary(out, self, t1, t2, OP, value.toDouble(), "aten::" #NAME);         \
    return out;                                                                      \
  }                                                                                  \
  at::Tensor& NAME##_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,  \
                      const c10::Scalar& value) {                                    \
    auto shape = at::infer_size_dimvector(                                          \
        at::infer_size_dimvector(self.sizes(), t1.sizes()), t2.sizes());            \
    if (at::IntArrayRef(shape) != self.sizes() || !ternary_ok(self, {&t1, &t2}))     \
      return FALLBACK(NAME##_, self, t1, t2, value);                                 \
    launch_ternary(self, self, t1, t2, OP, value.toDouble(), "aten::" #NAME "_");    \
    return self;                                                                     \
  }                                                                                  \
  at::Tensor& NAME##_out(const at::Tensor& self, const at::Tensor& t1,               \
                         const at::Tensor& t2, const c10::Scalar& value,             \
                         at::Tensor& out) {                                          \
    if (!ternary_ok(out, {&self, &t1, &t2}))                                         \
      return FALLBACK(NAME##_out, self, t1, t2, value, out);                         \
    resize_elementwise_out(out, at::infer_size_dimvector(                            \
        at::infer_size_dimvector(self.sizes(), t1.sizes()), t2.sizes()),             \
        {&self, &t1, &t2});                                                          \
    launch_ternary(out, self, t1, t2, OP, value.toDouble(), "aten::" #NAME);         \
    return out;                                                                      \
  }

NEURON_ADDC(addcmul, TNK_ADDCMUL)
NEURON_ADDC(addcdiv, TNK_ADDCDIV)

at::Tensor lerp(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& w) {
  at::Tensor out = at::empty(at::infer_size_dimvector(self.sizes(), end.sizes()),
                             self.options());
  if (!ternary_ok(out, {&self, &end}) || w.isComplex())
    return FALLBACK(lerp_Scalar, self, end, w);
  launch_ternary(out, self, end, at::Tensor(), TNK_LERP, w.toDouble(), "aten::lerp");
  return out;
}

at::Tensor& lerp_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& w) {
  if (at::IntArrayRef(at::infer_size_dimvector(self.sizes(), end.sizes())) != self.sizes() ||
      !ternary_ok(self, {&end}) || w.isComplex())
    return FALLBACK(lerp__Scalar, self, end, w);
  launch_ternary(self, self, end, at::Tensor(), TNK_LERP, w.toDouble(), "aten::lerp_");
  return self;
}

// lerp with a weight tensor: self + weight * (end - self), in ATen's two
// halves (from self below 0.5, from end above)
at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& w,
                            at::Tensor& out) {
  auto shape = at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), end.sizes()),
                                        w.sizes());
  if (!ternary_ok(out, {&self, &end, &w}))
    return FALLBACK(lerp_Tensor_out, self, end, w, out);
  resize_elementwise_out(out, shape, {&self, &end, &w});
  launch_ternary(out, self, end, w, TNK_LERP_TENSOR, 0.0, "aten::lerp");
  return out;
}

at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& w) {
  at::Tensor out = at::empty({0}, self.options());
  return lerp_tensor_out(self, end, w, out);
}

at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& w) {
  auto shape = at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), end.sizes()),
                                        w.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  return lerp_tensor_out(self, end, w, self);
}

at::Tensor& lerp_out(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& w,
                     at::Tensor& out) {
  if (!ternary_ok(out, {&self, &end}) || w.isComplex())
    return FALLBACK(lerp_Scalar_out, self, end, w, out);
  resize_elementwise_out(out, at::infer_size_dimvector(self.sizes(), end.sizes()), {&self, &end});
  launch_ternary(out, self, end, at::Tensor(), TNK_LERP, w.toDouble(), "aten::lerp");
  return out;
}

// ---------------------------------------------------------------- softmax

namespace {

void softmax_task(void* p) { tnk_softmax(static_cast<tnk_softmax_args_t*>(p)); }

// out (contiguous, shape of in) = softmax of in along dim. Returns false if
// the kernels cannot take the dtypes.
bool launch_softmax(const at::Tensor& out, const at::Tensor& in0, const at::Tensor& grad0,
                    int64_t dim, bool log, const char* name) {
  bool ok1, ok2;
  tnk_dtype_t dt = to_tnk(in0.scalar_type(), &ok1);
  tnk_dtype_t odt = to_tnk(out.scalar_type(), &ok2);
  if (!ok1 || !ok2 || !tnk_softmax_supported(dt, odt)) return false;
  if (grad0.defined() && grad0.scalar_type() != in0.scalar_type()) return false;
  if (out.numel() == 0) return true;
  at::Tensor in = in0.contiguous(), grad = grad0.defined() ? grad0.contiguous() : grad0;
  int64_t d = c10::maybe_wrap_dim(dim, in.dim());
  tnk_softmax_args_t a{};
  a.outer = 1;
  a.inner = 1;
  for (int64_t i = 0; i < d; i++) a.outer *= in.size(i);
  a.len = in.dim() ? in.size(d) : 1;
  for (int64_t i = d + 1; i < in.dim(); i++) a.inner *= in.size(i);
  a.out = out.data_ptr();
  a.in = in.const_data_ptr();
  a.grad = grad.defined() ? grad.const_data_ptr() : nullptr;
  a.dtype = dt;
  a.out_dtype = odt;
  a.log = log;
  a.backward = grad.defined();
  launch(out.device().index(), softmax_task, &a, sizeof a, name);
  return true;
}

c10::ScalarType softmax_out_dtype(const at::Tensor& self, bool half_to_float) {
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half type only");
    return at::kFloat;
  }
  return self.scalar_type();
}

}  // namespace

#define NEURON_SOFTMAX(NAME, LOG)                                                   \
  at::Tensor NAME(const at::Tensor& self, int64_t dim, bool half_to_float) {        \
    c10::maybe_wrap_dim(dim, self.dim());                                          \
    at::Tensor out = at::empty(self.sizes(),                                        \
                               self.options().dtype(softmax_out_dtype(self, half_to_float))); \
    if (launch_softmax(out, self, at::Tensor(), dim, LOG, "aten::" #NAME)) return out; \
    return FALLBACK(NAME, self, dim, half_to_float);                               \
  }                                                                                 \
  at::Tensor& NAME##_out(const at::Tensor& self, int64_t dim, bool half_to_float,   \
                         at::Tensor& out) {                                         \
    c10::maybe_wrap_dim(dim, self.dim());                                          \
    at::native::resize_output(out, self.sizes());                                  \
    if (out.is_contiguous() && out.scalar_type() == softmax_out_dtype(self, half_to_float) && \
        launch_softmax(out, self, at::Tensor(), dim, LOG, "aten::" #NAME))          \
      return out;                                                                   \
    return FALLBACK(NAME##_out, self, dim, half_to_float, out);                     \
  }                                                                                 \
  at::Tensor NAME##_backward_data(const at::Tensor& grad, const at::Tensor& output, \
                                  int64_t dim, c10::ScalarType input_dtype) {       \
    at::Tensor out = at::empty(output.sizes(), output.options().dtype(input_dtype)); \
    if (grad.sizes() == output.sizes() &&                                           \
        launch_softmax(out, output, grad, dim, LOG, "aten::" #NAME "_backward_data")) \
      return out;                                                                   \
    return FALLBACK(NAME##_backward_data, grad, output, dim, input_dtype);          \
  }                                                                                 \
  at::Tensor& NAME##_backward_data_out(const at::Tensor& grad, const at::Tensor& output, \
                                       int64_t dim, c10::ScalarType input_dtype,    \
                                       at::Tensor& out) {                           \
    at::native::resize_output(out, output.sizes());                                \
    if (grad.sizes() == output.sizes() && out.is_contiguous() &&                    \
        out.scalar_type() == input_dtype &&                                         \
        launch_softmax(out, output, grad, dim, LOG, "aten::" #NAME "_backward_data")) \
      return out;                                                                   \
    return FALLBACK(NAME##_backward_data_out, grad, output, dim, input_dtype, out); \
  }

NEURON_SOFTMAX(_softmax, false)
NEURON_SOFTMAX(_log_softmax, true)

// ------------------------------------------------------------- sum / mean

namespace {

void reduce_task(void* p) { tnk_reduce(static_cast<tnk_reduce_args_t*>(p)); }

}  // namespace

std::vector<int64_t> reduced_shape(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                   bool keepdim) {
  auto mask = at::dim_list_to_bitset(dims.value_or(at::IntArrayRef{}), self.dim());
  bool all = !dims.has_value() || dims->empty();
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); d++) {
    if (all || mask[d]) {
      if (keepdim) shape.push_back(1);
    } else {
      shape.push_back(self.size(d));
    }
  }
  return shape;
}

void fill_reduce_args(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                      const at::Tensor& out, tnk_reduce_args_t* a) {
  auto mask = at::dim_list_to_bitset(dims.value_or(at::IntArrayRef{}), self.dim());
  bool all = !dims.has_value() || dims->empty();
  bool ok;
  a->shape.ndim = static_cast<int32_t>(self.dim());
  a->in = {self.numel() ? const_cast<void*>(self.const_data_ptr()) : nullptr,
           to_tnk(self.scalar_type(), &ok), 0, {}};
  a->out = {out.data_ptr(), to_tnk(out.scalar_type(), &ok), 0, {}};
  int64_t od = 0;
  for (int64_t d = 0; d < self.dim(); d++) {
    a->shape.sizes[d] = self.size(d);
    a->in.strides[d] = self.stride(d);
    a->reduced[d] = all || mask[d];
    if (a->reduced[d]) {
      if (keepdim) od++;
    } else {
      a->out.strides[d] = out.stride(od++);
    }
  }
}

namespace {


// Computes the reduction of self over `dims` into out (already shaped).
bool launch_reduce(const at::Tensor& out, const at::Tensor& self,
                   at::OptionalIntArrayRef dims, bool keepdim, tnk_reduce_op_t op,
                   const char* name) {
  bool ok1, ok2;
  tnk_dtype_t idt = to_tnk(self.scalar_type(), &ok1);
  tnk_dtype_t odt = to_tnk(out.scalar_type(), &ok2);
  if (!ok1 || !ok2 || !tnk_reduce_supported(op, idt, odt) || self.dim() > TNK_MAX_DIMS)
    return false;
  if (out.numel() == 0) return true;
  tnk_reduce_args_t a{};
  fill_reduce_args(self, dims, keepdim, out, &a);
  a.op = op;
  launch(out.device().index(), reduce_task, &a, sizeof a, name);
  return true;
}

c10::ScalarType sum_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
}

}  // namespace

at::Tensor complex_sum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                       c10::ScalarType out_type);

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  c10::ScalarType odt = sum_dtype(self, dtype);
  if (self.is_complex() && c10::isComplexType(odt) && out.scalar_type() == odt) {
    at::Tensor r = complex_sum(self, dims, keepdim, odt);
    return assign_result(out, r);
  }
  if (out.scalar_type() == odt) {
    at::native::resize_output(out, reduced_shape(self, dims, keepdim));
    if (launch_reduce(out, self, dims, keepdim, TNK_SUM, "aten::sum")) return out;
  }
  return FALLBACK(sum_IntList_out, self, dims, keepdim, dtype, out);
}

// A complex sum is the sum of the real and imaginary parts: the real
// reduction over the same dims of the (..., 2) real view.
at::Tensor complex_sum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                       c10::ScalarType out_type) {
  at::Tensor parts = at::view_as_real(self.resolve_conj().resolve_neg());
  std::vector<int64_t> d;
  if (dims.has_value() && !dims->empty()) {
    for (int64_t x : *dims) d.push_back(at::maybe_wrap_dim(x, self.dim()));
  } else {
    for (int64_t x = 0; x < self.dim(); x++) d.push_back(x);
  }
  at::Tensor r = self.dim() ? at::sum(parts, d, keepdim) : parts.clone();
  return at::view_as_complex(r.contiguous()).to(out_type);
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  if (self.is_complex() && (!dtype.has_value() || c10::isComplexType(*dtype)))
    return complex_sum(self, dims, keepdim, sum_dtype(self, dtype));
  at::Tensor out = at::empty(reduced_shape(self, dims, keepdim),
                             self.options().dtype(sum_dtype(self, dtype)));
  if (launch_reduce(out, self, dims, keepdim, TNK_SUM, "aten::sum")) return out;
  return FALLBACK(sum_dim_IntList, self, dims, keepdim, dtype);
}

at::Tensor sum_all(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return sum_dim(self, std::nullopt, false, dtype);
}

at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  c10::ScalarType odt = sum_dtype(self, dtype);
  if (out.scalar_type() == odt) {
    int64_t d = at::maybe_wrap_dim(dim, self.dim());
    at::native::resize_output(out, reduced_shape(self, at::IntArrayRef{d}, keepdim));
    if (launch_reduce(out, self, at::IntArrayRef{d}, keepdim, TNK_PROD, "aten::prod")) return out;
  }
  return FALLBACK(prod_int_out, self, dim, keepdim, dtype, out);
}

at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(sum_dtype(self, dtype)));
  return prod_out(self, dim, keepdim, dtype, out);
}

at::Tensor prod_all(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({}, self.options().dtype(sum_dtype(self, dtype)));
  if (launch_reduce(out, self, std::nullopt, false, TNK_PROD, "aten::prod")) return out;
  return FALLBACK(prod, self, dtype);
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  c10::ScalarType odt = dtype.value_or(self.scalar_type());
  if (out.scalar_type() == odt && floating_dtype(self.scalar_type())) {
    at::native::resize_output(out, reduced_shape(self, dims, keepdim));
    if (launch_reduce(out, self, dims, keepdim, TNK_MEAN, "aten::mean")) return out;
  }
  return FALLBACK(mean_out, self, dims, keepdim, dtype, out);
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  c10::ScalarType odt = dtype.value_or(self.scalar_type());
  if (floating_dtype(self.scalar_type()) && floating_dtype(odt)) {
    at::Tensor out = at::empty(reduced_shape(self, dims, keepdim), self.options().dtype(odt));
    if (launch_reduce(out, self, dims, keepdim, TNK_MEAN, "aten::mean")) return out;
  }
  return FALLBACK(mean_dim, self, dims, keepdim, dtype);
}

// ------------------------------------------------------------- layer norm

namespace {

void layer_norm_task(void* p) {
  tnk_layer_norm(static_cast<tnk_layer_norm_args_t*>(p));
}

bool same_float(const at::Tensor& ref, const std::optional<at::Tensor>& t) {
  return !t.has_value() || !t->defined() ||
         (t->scalar_type() == ref.scalar_type() && t->device() == ref.device());
}

const void* ptr_or_null(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr() : nullptr;
}

at::Tensor defined_contiguous(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, at::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    double eps) {
  auto mn = at::native::_check_layer_norm_inputs(input, normalized_shape,
                                                 weight.value_or(at::Tensor()),
                                                 bias.value_or(at::Tensor()));
  if (!floating_dtype(input.scalar_type()) || !same_float(input, weight) ||
      !same_float(input, bias))
    return FALLBACK(native_layer_norm, input, normalized_shape, weight, bias, eps);
  at::Tensor x = input.contiguous(), w = defined_contiguous(weight),
             b = defined_contiguous(bias);
  at::Tensor y = at::empty(x.sizes(), x.options());
  std::vector<int64_t> stat_shape(input.sizes().begin(),
                                  input.sizes().end() - normalized_shape.size());
  stat_shape.insert(stat_shape.end(), normalized_shape.size(), 1);
  at::Tensor mean = at::empty(stat_shape, x.options()), rstd = at::empty(stat_shape, x.options());
  tnk_layer_norm_args_t a{};
  a.rows = mn.first;
  a.n = mn.second;
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.eps = eps;
  a.x = ptr_or_null(x);
  a.w = ptr_or_null(w);
  a.b = ptr_or_null(b);
  a.y = y.numel() ? y.data_ptr() : nullptr;
  a.mean = mean.numel() ? mean.data_ptr() : nullptr;
  a.rstd = rstd.numel() ? rstd.data_ptr() : nullptr;
  if (y.numel()) launch(x.device().index(), layer_norm_task, &a, sizeof a, "aten::native_layer_norm");
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  auto mn = at::native::_check_layer_norm_inputs(input, normalized_shape,
                                                 weight.value_or(at::Tensor()),
                                                 bias.value_or(at::Tensor()));
  if (!floating_dtype(input.scalar_type()) || !same_float(input, weight) ||
      !same_float(input, bias) || grad_out.scalar_type() != input.scalar_type() ||
      mean.scalar_type() != input.scalar_type() || rstd.scalar_type() != input.scalar_type())
    return FALLBACK(native_layer_norm_backward, grad_out, input, normalized_shape, mean,
                    rstd, weight, bias, mask);
  at::Tensor x = input.contiguous(), g = grad_out.contiguous(), w = defined_contiguous(weight);
  at::Tensor mu = mean.contiguous(), rs = rstd.contiguous();
  at::Tensor gx = mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor gw = mask[1] && w.defined() ? at::empty(w.sizes(), w.options()) : at::Tensor();
  bool has_bias = bias.has_value() && bias->defined();
  at::Tensor gb = mask[2] && has_bias ? at::empty(bias->sizes(), x.options()) : at::Tensor();
  tnk_layer_norm_args_t a{};
  a.rows = mn.first;
  a.n = mn.second;
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.backward = 1;
  a.x = ptr_or_null(x);
  a.w = ptr_or_null(w);
  a.g = ptr_or_null(g);
  a.mean = mu.numel() ? const_cast<void*>(mu.const_data_ptr()) : nullptr;
  a.rstd = rs.numel() ? const_cast<void*>(rs.const_data_ptr()) : nullptr;
  a.gx = gx.defined() && gx.numel() ? gx.data_ptr() : nullptr;
  a.gw = gw.defined() && gw.numel() ? gw.data_ptr() : nullptr;
  a.gb = gb.defined() && gb.numel() ? gb.data_ptr() : nullptr;
  if (a.n > 0 && (a.gx || a.gw || a.gb))
    launch(x.device().index(), layer_norm_task, &a, sizeof a,
           "aten::native_layer_norm_backward");
  return {gx, gw, gb};
}


// ---------------------------------------------------------- fused Adam/AdamW

namespace {
void adam_task(void* p) { tnk_adam(static_cast<tnk_adam_args_t*>(p)); }

const float* device_scalar(const std::optional<at::Tensor>& t, c10::Device dev,
                           std::vector<at::Tensor>& keep) {
  if (!t.has_value() || !t->defined()) return nullptr;
  at::Tensor x = t->to(dev, at::kFloat);
  keep.push_back(x);
  return x.const_data_ptr<float>();
}

void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                at::TensorList state_steps, double lr, const at::Tensor* lr_tensor, double beta1,
                double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf, bool adamw) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n &&
                  state_steps.size() == n && (!amsgrad || max_exp_avg_sqs.size() == n),
              "fused Adam: all tensor lists must have the same length");
  for (size_t i = 0; i < n; i++) {
    const at::Tensor& p = params[i];
    c10::Device dev = p.device();
    std::vector<at::Tensor> keep;  // device scalars live until the launch is queued
    bool ok;
    tnk_dtype_t dt = to_tnk(p.scalar_type(), &ok);
    std::vector<at::Tensor> ts{p, grads[i], exp_avgs[i], exp_avg_sqs[i]};
    if (amsgrad) ts.push_back(max_exp_avg_sqs[i]);
    for (const at::Tensor& t : ts) {
      TORCH_CHECK(t.device() == dev && t.scalar_type() == p.scalar_type() &&
                      t.sizes() == p.sizes(),
                  "fused Adam: param, grad and state tensors must match in device, dtype "
                  "and shape");
      TORCH_CHECK(t.is_contiguous(), "fused Adam on neuron expects contiguous tensors");
    }
    TORCH_CHECK(ok && tnk_adam_supported(dt), "fused Adam supports floating parameters, got ",
                p.scalar_type());
    tnk_adam_args_t a{};
    a.param = p.data_ptr();
    a.grad = const_cast<void*>(grads[i].const_data_ptr());
    a.exp_avg = exp_avgs[i].data_ptr();
    a.exp_avg_sq = exp_avg_sqs[i].data_ptr();
    a.max_exp_avg_sq = amsgrad ? max_exp_avg_sqs[i].data_ptr() : nullptr;
    a.step = device_scalar(state_steps[i], dev, keep);
    a.lr_ptr = lr_tensor ? device_scalar(*lr_tensor, dev, keep) : nullptr;
    a.grad_scale = device_scalar(grad_scale, dev, keep);
    a.found_inf = device_scalar(found_inf, dev, keep);
    a.n = p.numel();
    a.lr = lr;
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.weight_decay = weight_decay;
    a.eps = eps;
    a.dtype = dt;
    a.adamw = adamw;
    a.amsgrad = amsgrad;
    a.maximize = maximize;
    launch(dev.index(), adam_task, &a, sizeof a, adamw ? "aten::_fused_adamw_" : "aten::_fused_adam_");
  }
}
}  // namespace

#define NEURON_FUSED_ADAM(NAME, ADAMW)                                                          \
  void NAME(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,                \
            at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,                        \
            at::TensorList state_steps, double lr, double beta1, double beta2,                 \
            double weight_decay, double eps, bool amsgrad, bool maximize,                      \
            const std::optional<at::Tensor>& grad_scale,                                       \
            const std::optional<at::Tensor>& found_inf) {                                      \
    fused_adam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, nullptr, \
               beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf,      \
               ADAMW);                                                                         \
  }                                                                                            \
  void NAME##tensor_lr(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,     \
                       at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,             \
                       at::TensorList state_steps, const at::Tensor& lr, double beta1,         \
                       double beta2, double weight_decay, double eps, bool amsgrad,            \
                       bool maximize, const std::optional<at::Tensor>& grad_scale,             \
                       const std::optional<at::Tensor>& found_inf) {                           \
    fused_adam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, 0.0, &lr,    \
               beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf,      \
               ADAMW);                                                                         \
  }
NEURON_FUSED_ADAM(fused_adamw_, true)
NEURON_FUSED_ADAM(fused_adam_, false)
#undef NEURON_FUSED_ADAM

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("_fused_adamw_", fused_adamw_);
  m.impl("_fused_adamw_.tensor_lr", fused_adamw_tensor_lr);
  m.impl("_fused_adam_", fused_adam_);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
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
  m.impl("_softmax", _softmax);
  m.impl("_softmax.out", _softmax_out);
  m.impl("_log_softmax", _log_softmax);
  m.impl("_log_softmax.out", _log_softmax_out);
  m.impl("_softmax_backward_data", _softmax_backward_data);
  m.impl("_softmax_backward_data.out", _softmax_backward_data_out);
  m.impl("_log_softmax_backward_data", _log_softmax_backward_data);
  m.impl("_log_softmax_backward_data.out", _log_softmax_backward_data_out);
  m.impl("sum.IntList_out", sum_out);
  m.impl("sum.dim_IntList", sum_dim);
  m.impl("sum", sum_all);
  m.impl("prod", prod_all);
  m.impl("prod.dim_int", prod_dim);
  m.impl("prod.int_out", prod_out);
  m.impl("mean.out", mean_out);
  m.impl("mean.dim", mean_dim);
}

}  // namespace torch_neuronx
