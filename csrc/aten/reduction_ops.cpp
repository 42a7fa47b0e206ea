// Reductions (reduce.c: its reductions, arg-reductions and scans): sum,
// mean, prod, all/any, max/min/amax/amin, argmax/argmin, max/min with
// indices, cumsum/cumprod/logcumsumexp, nansum, torch.equal, and the
// composites over them (var/std, linalg_vector_norm).
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {

namespace {}  // namespace

namespace {

std::vector<int64_t> dims_or_all(const at::Tensor &t, at::OptionalIntArrayRef dim) {
  if (dim.has_value() && !dim->empty()) return dim->vec();
  std::vector<int64_t> all(t.dim());
  for (int64_t d = 0; d < t.dim(); d++) all[d] = d;
  return all;
}

int64_t reduced_count(const at::Tensor &t, const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= t.dim() ? t.size(at::maybe_wrap_dim(d, t.dim())) : 1;
  return n;
}

// Two-pass variance: mean, then the sum of squared deviations (fp32/fp64
// accumulation as the reduction kernel does), divided by N - correction.
std::pair<at::Tensor, at::Tensor> var_and_mean(const at::Tensor &self, at::OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar> &correction,
                                               bool keepdim) {
  auto dims = dims_or_all(self, dim);
  double corr = correction.has_value() ? correction->toDouble() : 1.0;
  int64_t n = reduced_count(self, dims);
  at::Tensor mean = at::mean(self, dims, /*keepdim=*/true);
  at::Tensor dev = self - mean;
  at::Tensor var = at::sum(dev * dev, dims, keepdim).div_(std::max(0.0, n - corr));
  if (!keepdim) mean = mean.squeeze(dims);
  return {var, mean};
}

}  // namespace

at::Tensor var_correction(const at::Tensor &self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar> &correction, bool keepdim) {
  if (!floating_dtype(self.scalar_type()))
    return FALLBACK(var_correction, self, dim, correction, keepdim);
  return var_and_mean(self, dim, correction, keepdim).first;
}

at::Tensor std_correction(const at::Tensor &self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar> &correction, bool keepdim) {
  if (!floating_dtype(self.scalar_type()))
    return FALLBACK(std_correction, self, dim, correction, keepdim);
  return var_and_mean(self, dim, correction, keepdim).first.sqrt_();
}

std::tuple<at::Tensor, at::Tensor> var_mean_correction(const at::Tensor &self,
                                                       at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar> &correction,
                                                       bool keepdim) {
  if (!floating_dtype(self.scalar_type()))
    return FALLBACK(var_mean_correction, self, dim, correction, keepdim);
  auto r = var_and_mean(self, dim, correction, keepdim);
  return {r.first, r.second};
}

std::tuple<at::Tensor, at::Tensor> std_mean_correction(const at::Tensor &self,
                                                       at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar> &correction,
                                                       bool keepdim) {
  if (!floating_dtype(self.scalar_type()))
    return FALLBACK(std_mean_correction, self, dim, correction, keepdim);
  auto r = var_and_mean(self, dim, correction, keepdim);
  return {r.first.sqrt_(), r.second};
}

// ||x||_ord over dims: 2 (the default, gradient clipping), 1, inf, -inf, 0
// and any other p.
at::Tensor &linalg_vector_norm_out(const at::Tensor &self, const c10::Scalar &ord,
                                   at::OptionalIntArrayRef dim, bool keepdim,
                                   std::optional<c10::ScalarType> dtype, at::Tensor &out) {
  at::Tensor x = dtype.has_value() ? self.to(*dtype) : self;
  if (!floating_dtype(x.scalar_type()) || x.is_complex())
    return FALLBACK(linalg_vector_norm_out, self, ord, dim, keepdim, dtype, out);
  double p = ord.toDouble();
  auto dims = dims_or_all(x, dim);
  if (x.numel() == 0 && std::isinf(p) && p > 0)
    TORCH_CHECK(false,
                "linalg.vector_norm cannot compute the inf norm on an empty tensor "
                "because the operation does not have an identity");
  // fp16/bf16 accumulate in fp32, as CPU does (300^2 overflows fp16)
  if (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) x = x.to(at::kFloat);
  at::Tensor r;
  at::Tensor a = x.abs();
  if (p == 2.0)
    r = at::sum(x * x, dims, keepdim).sqrt_();
  else if (p == 1.0)
    r = at::sum(a, dims, keepdim);
  else if (std::isinf(p))
    r = p > 0 ? at::amax(a, dims, keepdim) : at::amin(a, dims, keepdim);
  else if (p == 0.0)
    r = at::sum(x.ne(0).to(x.scalar_type()), dims, keepdim);
  else
    r = at::sum(a.pow(p), dims, keepdim).pow_(1.0 / p);
  return assign_result(out, r);
}

at::Tensor linalg_vector_norm(const at::Tensor &self, const c10::Scalar &ord,
                              at::OptionalIntArrayRef dim, bool keepdim,
                              std::optional<c10::ScalarType> dtype) {
  // real even for a complex dtype= (the norm of complex values)
  at::Tensor out = at::empty(
      {0}, self.options().dtype(c10::toRealValueType(dtype.value_or(self.scalar_type()))));
  return linalg_vector_norm_out(self, ord, dim, keepdim, dtype, out);
}

// torch.norm's real forms (pairwise_distance, triplet losses): the vector
// norm, p = 2 when none is given.
at::Tensor &norm_dim_out(const at::Tensor &self, const std::optional<c10::Scalar> &p,
                         at::IntArrayRef dim, bool keepdim, at::Tensor &out) {
  return linalg_vector_norm_out(self, p.value_or(2), dim, keepdim, std::nullopt, out);
}
at::Tensor &norm_dim_dtype_out(const at::Tensor &self, const std::optional<c10::Scalar> &p,
                               at::IntArrayRef dim, bool keepdim, c10::ScalarType dtype,
                               at::Tensor &out) {
  return linalg_vector_norm_out(self, p.value_or(2), dim, keepdim, dtype, out);
}
at::Tensor &norm_all_out(const at::Tensor &self, const c10::Scalar &p, at::Tensor &out) {
  return linalg_vector_norm_out(self, p, std::nullopt, false, std::nullopt, out);
}
at::Tensor &norm_all_dtype_out(const at::Tensor &self, const std::optional<c10::Scalar> &p,
                               c10::ScalarType dtype, at::Tensor &out) {
  return linalg_vector_norm_out(self, p.value_or(2), std::nullopt, false, dtype, out);
}

// ------------------------------------------------------------- sum / mean

namespace {}  // namespace

std::vector<int64_t> reduced_shape(const at::Tensor &self, at::OptionalIntArrayRef dims,
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

void fill_reduce_args(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                      const at::Tensor &out, tnk_reduce_args_t *a) {
  auto mask = at::dim_list_to_bitset(dims.value_or(at::IntArrayRef{}), self.dim());
  bool all = !dims.has_value() || dims->empty();
  bool ok;
  a->shape.ndim = static_cast<int32_t>(self.dim());
  a->in = {self.numel() ? const_cast<void *>(self.const_data_ptr()) : nullptr,
           to_tnk(self.scalar_type(), &ok),
           0,
           {}};
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
bool launch_reduce(const at::Tensor &out, const at::Tensor &self, at::OptionalIntArrayRef dims,
                   bool keepdim, tnk_reduce_op_t op, const char *name) {
  bool ok1, ok2;
  tnk_dtype_t idt = to_tnk(self.scalar_type(), &ok1);
  tnk_dtype_t odt = to_tnk(out.scalar_type(), &ok2);
  if (!ok1 || !ok2 || !kernel_supported(TNK_K_REDUCE, kernel_query(op, idt, odt, -1)) ||
      self.dim() > TNRT_MAX_DIMS)
    return false;
  if (out.numel() == 0) return true;
  tnk_reduce_args_t a{};
  fill_reduce_args(self, dims, keepdim, out, &a);
  a.op = op;
  launch_kernel<TNK_K_REDUCE>(out.device().index(), a, name, self.numel());
  return true;
}

c10::ScalarType sum_dtype(const at::Tensor &self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
}

}  // namespace

at::Tensor complex_sum(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                       c10::ScalarType out_type);

at::Tensor &sum_out(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor &out) {
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
at::Tensor complex_sum(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
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

at::Tensor sum_dim(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  if (self.is_complex() && (!dtype.has_value() || c10::isComplexType(*dtype)))
    return complex_sum(self, dims, keepdim, sum_dtype(self, dtype));
  at::Tensor out =
      at::empty(reduced_shape(self, dims, keepdim), self.options().dtype(sum_dtype(self, dtype)));
  if (launch_reduce(out, self, dims, keepdim, TNK_SUM, "aten::sum")) return out;
  // a dtype the kernel does not reach from self's (integers summed as floats):
  // ATen casts each element to it first
  if (dtype.has_value() && *dtype != self.scalar_type() && !self.is_complex() &&
      !c10::isComplexType(*dtype) &&
      launch_reduce(out, self.to(*dtype), dims, keepdim, TNK_SUM, "aten::sum"))
    return out;
  return FALLBACK(sum_dim_IntList, self, dims, keepdim, dtype);
}

at::Tensor sum_all(const at::Tensor &self, std::optional<c10::ScalarType> dtype) {
  return sum_dim(self, std::nullopt, false, dtype);
}

at::Tensor &prod_out(const at::Tensor &self, int64_t dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor &out) {
  c10::ScalarType odt = sum_dtype(self, dtype);
  if (out.scalar_type() == odt) {
    int64_t d = at::maybe_wrap_dim(dim, self.dim());
    at::native::resize_output(out, reduced_shape(self, at::IntArrayRef{d}, keepdim));
    if (launch_reduce(out, self, at::IntArrayRef{d}, keepdim, TNK_PROD, "aten::prod")) return out;
  }
  return FALLBACK(prod_int_out, self, dim, keepdim, dtype, out);
}

at::Tensor prod_dim(const at::Tensor &self, int64_t dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(sum_dtype(self, dtype)));
  return prod_out(self, dim, keepdim, dtype, out);
}

at::Tensor prod_all(const at::Tensor &self, std::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({}, self.options().dtype(sum_dtype(self, dtype)));
  if (launch_reduce(out, self, std::nullopt, false, TNK_PROD, "aten::prod")) return out;
  return FALLBACK(prod, self, dtype);
}

at::Tensor &mean_out(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor &out) {
  c10::ScalarType odt = dtype.value_or(self.scalar_type());
  if (out.scalar_type() == odt && floating_dtype(self.scalar_type())) {
    at::native::resize_output(out, reduced_shape(self, dims, keepdim));
    if (launch_reduce(out, self, dims, keepdim, TNK_MEAN, "aten::mean")) return out;
  }
  return FALLBACK(mean_out, self, dims, keepdim, dtype, out);
}

at::Tensor mean_dim(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  c10::ScalarType odt = dtype.value_or(self.scalar_type());
  if (floating_dtype(self.scalar_type()) && floating_dtype(odt)) {
    at::Tensor out = at::empty(reduced_shape(self, dims, keepdim), self.options().dtype(odt));
    if (launch_reduce(out, self, dims, keepdim, TNK_MEAN, "aten::mean")) return out;
  }
  return FALLBACK(mean_dim, self, dims, keepdim, dtype);
}

// ---------------------------------------------------------------- all/any

namespace {
at::Tensor &logical_reduce(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                           tnk_reduce_op_t op, at::Tensor &out, bool *done) {
  *done = false;
  bool ok;
  to_tnk(self.scalar_type(), &ok);
  if (!ok || out.scalar_type() != at::kBool || self.dim() > TNRT_MAX_DIMS) return out;
  *done = true;
  if (dims.has_value() && dims->empty()) {
    // an empty dim list reduces nothing (unlike sum's): each element's truth
    at::native::resize_output(out, self.sizes());
    return at::ne_out(out, self, 0);
  }
  at::native::resize_output(out, reduced_shape(self, dims, keepdim));
  if (out.numel() == 0) return out;
  tnk_reduce_args_t a{};
  fill_reduce_args(self, dims, keepdim, out, &a);
  a.op = op;
  launch_kernel<TNK_K_REDUCE>(self.device().index(), a, op == TNK_ALL ? "aten::all" : "aten::any",
                              self.numel());
  return out;
}

// One dim (a 0-dim tensor reduces over everything).
at::Tensor &logical_reduce_dim(const at::Tensor &self, int64_t dim, bool keepdim,
                               tnk_reduce_op_t op, at::Tensor &out, bool *done) {
  int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  return logical_reduce(self,
                        self.dim() ? at::OptionalIntArrayRef(at::IntArrayRef(d))
                                   : at::OptionalIntArrayRef(std::nullopt),
                        keepdim, op, out, done);
}

// all/any of a uint8 tensor are uint8 (CPU's and CUDA's legacy rule)
at::Tensor as_input_dtype(const at::Tensor &r, const at::Tensor &self) {
  return self.scalar_type() == at::kByte ? r.to(at::kByte) : r;
}
}  // namespace

#define NEURON_LOGICAL(NAME, OP)                                                                   \
  at::Tensor NAME##_all(const at::Tensor &self) {                                                  \
    at::Tensor out = at::empty({}, self.options().dtype(at::kBool));                               \
    bool done;                                                                                     \
    logical_reduce(self, std::nullopt, false, OP, out, &done);                                     \
    return done ? as_input_dtype(out, self) : FALLBACK(NAME, self);                                \
  }                                                                                                \
  at::Tensor &NAME##_all_out(const at::Tensor &self, at::Tensor &out) {                            \
    bool done;                                                                                     \
    logical_reduce(self, std::nullopt, false, OP, out, &done);                                     \
    return done ? out : FALLBACK(NAME##_all_out, self, out);                                       \
  }                                                                                                \
  at::Tensor NAME##_dim(const at::Tensor &self, int64_t dim, bool keepdim) {                       \
    at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));                              \
    bool done;                                                                                     \
    logical_reduce_dim(self, dim, keepdim, OP, out, &done);                                        \
    return done ? as_input_dtype(out, self) : FALLBACK(NAME##_dim, self, dim, keepdim);            \
  }                                                                                                \
  at::Tensor &NAME##_dim_out(const at::Tensor &self, int64_t dim, bool keepdim, at::Tensor &out) { \
    bool done;                                                                                     \
    logical_reduce_dim(self, dim, keepdim, OP, out, &done);                                        \
    return done ? out : FALLBACK(NAME##_out, self, dim, keepdim, out);                             \
  }                                                                                                \
  at::Tensor NAME##_dims(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim) {     \
    at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));                              \
    bool done;                                                                                     \
    logical_reduce(self, dims, keepdim, OP, out, &done);                                           \
    return done ? as_input_dtype(out, self) : FALLBACK(NAME##_dims, self, dims, keepdim);          \
  }                                                                                                \
  at::Tensor &NAME##_dims_out(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,  \
                              at::Tensor &out) {                                                   \
    bool done;                                                                                     \
    logical_reduce(self, dims, keepdim, OP, out, &done);                                           \
    return done ? out : FALLBACK(NAME##_dims_out, self, dims, keepdim, out);                       \
  }

NEURON_LOGICAL(all, TNK_ALL)
NEURON_LOGICAL(any, TNK_ANY)

// ---------------------------------------------------------- max/min, amax

namespace {
// Reduces self to its max/min over dims into out; false if the kernels
// cannot (dtype, or an empty reduction, which must raise as on CPU).
bool extreme_into(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                  tnk_reduce_op_t op, at::Tensor &out) {
  bool ok;
  tnk_dtype_t dt = to_tnk(self.scalar_type(), &ok);
  if (!ok || !kernel_supported(TNK_K_REDUCE, kernel_query(op, dt, dt, -1)) ||
      out.scalar_type() != self.scalar_type() || self.dim() > TNRT_MAX_DIMS ||
      out.device() != self.device())
    return false;
  auto mask = at::dim_list_to_bitset(dims.value_or(at::IntArrayRef{}), self.dim());
  bool all = !dims.has_value() || dims->empty();
  for (int64_t d = 0; d < self.dim(); d++)
    if ((all || mask[d]) && self.size(d) == 0) return false;
  at::native::resize_output(out, reduced_shape(self, dims, keepdim));
  if (out.numel() == 0) return true;
  tnk_reduce_args_t a{};
  fill_reduce_args(self, dims, keepdim, out, &a);
  a.op = op;
  launch_kernel<TNK_K_REDUCE>(self.device().index(), a, op == TNK_MAX ? "aten::max" : "aten::min",
                              self.numel());
  return true;
}
}  // namespace

#define NEURON_EXTREME(NAME, ANAME, OP)                                                       \
  at::Tensor NAME##_all(const at::Tensor &self) {                                             \
    at::Tensor out = at::empty({}, self.options());                                           \
    return extreme_into(self, std::nullopt, false, OP, out) ? out : FALLBACK(NAME, self);     \
  }                                                                                           \
  at::Tensor ANAME(const at::Tensor &self, at::IntArrayRef dims, bool keepdim) {              \
    at::Tensor out = at::empty({0}, self.options());                                          \
    return extreme_into(self, dims, keepdim, OP, out) ? out                                   \
                                                      : FALLBACK(ANAME, self, dims, keepdim); \
  }                                                                                           \
  at::Tensor &ANAME##_out(const at::Tensor &self, at::IntArrayRef dims, bool keepdim,         \
                          at::Tensor &out) {                                                  \
    return extreme_into(self, dims, keepdim, OP, out)                                         \
               ? out                                                                          \
               : FALLBACK(ANAME##_out, self, dims, keepdim, out);                             \
  }

NEURON_EXTREME(max, amax, TNK_MAX)
NEURON_EXTREME(min, amin, TNK_MIN)

// aminmax: the two reductions (a 0-d self, other dtypes and empty
// reductions, which must raise CPU's error, go to the CPU kernel)
std::tuple<at::Tensor &, at::Tensor &> aminmax_out(const at::Tensor &self,
                                                   std::optional<int64_t> dim, bool keepdim,
                                                   at::Tensor &min, at::Tensor &max) {
  int64_t d = dim.has_value() && self.dim() ? at::maybe_wrap_dim(*dim, self.dim()) : 0;
  at::OptionalIntArrayRef dims =
      dim.has_value() ? at::OptionalIntArrayRef(at::IntArrayRef(&d, 1)) : std::nullopt;
  if (self.dim() == 0 || !extreme_into(self, dims, keepdim, TNK_MIN, min) ||
      !extreme_into(self, dims, keepdim, TNK_MAX, max))
    return FALLBACK(aminmax_out, self, dim, keepdim, min, max);
  return {min, max};
}

std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor &self, std::optional<int64_t> dim,
                                           bool keepdim) {
  at::Tensor min = at::empty({0}, self.options()), max = at::empty({0}, self.options());
  aminmax_out(self, dim, keepdim, min, max);
  return {min, max};
}

// trace: the diagonal's sum (integers to int64, as sum and CPU's trace do;
// bool, which CPU's trace refuses, goes to the CPU kernel for its error)
at::Tensor trace(const at::Tensor &self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  if (self.scalar_type() == at::kBool) return FALLBACK(trace, self);
  return at::sum(self.diagonal());
}

// --------------------------------------- max/min with indices, argmax/argmin

namespace {
// Reduces self along dim (wrapped; the whole flattened tensor when
// flatten) into values (may be undefined) and indices.
void arg_reduce(const at::Tensor &self, int64_t dim, bool flatten, bool is_max, at::Tensor *values,
                at::Tensor &indices) {
  at::Tensor x = flatten ? self.reshape({-1}).contiguous() : self.contiguous();
  tnk_argreduce_args_t a{};
  a.in = x.const_data_ptr();
  if (flatten || x.dim() == 0) {
    a.outer = a.inner = 1;
    a.len = x.numel();
  } else {
    split_dims(x.sizes(), dim, &a.outer, &a.inner);
    a.len = x.size(dim);
  }
  if (a.outer * a.inner == 0) return;
  a.dtype = tnk_of(self);
  a.is_max = is_max;
  auto run = [&](at::Tensor &idx, at::Tensor *vals) {
    a.indices = idx.data_ptr();
    a.values = vals ? vals->data_ptr() : nullptr;
    launch_kernel<TNK_K_ARGREDUCE>(self.device().index(), a,
                                   is_max ? "aten::argmax" : "aten::argmin");
  };
  if (indices.is_contiguous() && (!values || values->is_contiguous())) {
    run(indices, values);
  } else {
    at::Tensor ti = at::empty(indices.sizes(), indices.options());
    at::Tensor tv = values ? at::empty(values->sizes(), values->options()) : at::Tensor();
    run(ti, values ? &tv : nullptr);
    indices.copy_(ti);
    if (values) values->copy_(tv);
  }
}

bool arg_native(const at::Tensor &self) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_ARGREDUCE, kernel_query(-1, dt, -1, -1));
}

at::Tensor &argmaxmin_out(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim,
                          at::Tensor &out, bool is_max) {
  const char *name = is_max ? "argmax()" : "argmin()";
  if (dim.has_value()) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.numel() != 0 || (self.dim() && self.size(d) != 0), name,
                      ": Expected reduction dim ", d, " to have non-zero size.");
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, name, ": Expected reduction dim ", d,
                      " to have non-zero size.");
    at::native::resize_output(out, reduced_shape(self, at::IntArrayRef{d}, keepdim));
    arg_reduce(self, d, false, is_max, nullptr, out);
  } else {
    TORCH_CHECK_INDEX(self.numel() != 0, name,
                      ": Expected reduction dim to be specified for input.numel() == 0.");
    at::native::resize_output(out, reduced_shape(self, std::nullopt, keepdim));
    arg_reduce(self, 0, true, is_max, nullptr, out);
  }
  return out;
}
}  // namespace

at::Tensor &argmax_out(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor &out) {
  if (!arg_native(self) || out.scalar_type() != at::kLong)
    return FALLBACK(argmax_out, self, dim, keepdim, out);
  return argmaxmin_out(self, dim, keepdim, out, true);
}
at::Tensor argmax(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return argmax_out(self, dim, keepdim, out);
}
at::Tensor &argmin_out(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor &out) {
  if (!arg_native(self) || out.scalar_type() != at::kLong)
    return FALLBACK(argmin_out, self, dim, keepdim, out);
  return argmaxmin_out(self, dim, keepdim, out, false);
}
at::Tensor argmin(const at::Tensor &self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return argmin_out(self, dim, keepdim, out);
}

namespace {
std::tuple<at::Tensor, at::Tensor> maxmin_dim(const at::Tensor &self, int64_t dim, bool keepdim,
                                              bool is_max) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, is_max ? "max" : "min",
                    "(): Expected reduction dim ", d, " to have non-zero size.");
  auto shape = reduced_shape(self, at::IntArrayRef{d}, keepdim);
  at::Tensor values = at::empty(shape, self.options());
  at::Tensor indices = at::empty(shape, self.options().dtype(at::kLong));
  arg_reduce(self, d, false, is_max, &values, indices);
  return {values, indices};
}
}  // namespace

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor &self, int64_t dim, bool keepdim) {
  if (!arg_native(self))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(max, dim)>::call(self, dim,
                                                                                        keepdim);
  return maxmin_dim(self, dim, keepdim, true);
}
std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor &self, int64_t dim, bool keepdim) {
  if (!arg_native(self))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(min, dim)>::call(self, dim,
                                                                                        keepdim);
  return maxmin_dim(self, dim, keepdim, false);
}

// ---------------------------------------------------------- cumsum/cumprod

namespace {
at::Tensor &scan_out(const at::Tensor &self, int64_t dim, at::Tensor &out, int op) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  at::Tensor x = self.contiguous();
  bool ok;
  if (!kernel_supported(TNK_K_SCAN,
                        kernel_query(-1, tnk_of(x), to_tnk(out.scalar_type(), &ok), -1)))
    x = x.to(out.scalar_type());  // e.g. integers summed as float64: cast first, as CPU
  if (x.storage().is_alias_of(out.storage()) && !x.is_same(out)) x = x.clone();
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_scan_args_t a{};
    a.in = x.const_data_ptr();
    a.out = o.data_ptr();
    if (x.dim() == 0) {
      a.outer = a.inner = a.len = 1;
    } else {
      split_dims(x.sizes(), dim, &a.outer, &a.inner);
      a.len = x.size(dim);
    }
    a.in_dtype = tnk_of(x);
    a.out_dtype = tnk_of(o);
    a.op = op;
    launch_kernel<TNK_K_SCAN>(self.device().index(), a,
                              op == TNK_SCAN_PROD  ? "aten::cumprod"
                              : op == TNK_SCAN_SUM ? "aten::cumsum"
                                                   : "aten::_logcumsumexp");
  });
  return out;
}

// cummax / cummin: ATen's cummax/cummin size the outputs and call these
// helpers with a wrapped dim and a non-empty input.
namespace {

void cumext_helper(const at::Tensor &self, at::Tensor &values, at::Tensor &indices, int64_t dim,
                   bool is_max) {
  at::Tensor x = self.contiguous();
  bool direct = values.is_contiguous() && indices.is_contiguous();
  at::Tensor v = direct ? values : at::empty(x.sizes(), values.options());
  at::Tensor i = direct ? indices : at::empty(x.sizes(), indices.options());
  tnk_cumext_args_t a{};
  a.in = x.const_data_ptr();
  a.values = v.data_ptr();
  a.indices = i.data_ptr<int64_t>();
  split_dims(x.sizes(), dim, &a.outer, &a.inner);
  a.len = x.size(dim);
  a.dtype = tnk_of(x);
  a.is_max = is_max;
  launch_kernel<TNK_K_CUMEXT>(self.device().index(), a,
                              is_max ? "aten::_cummax_helper" : "aten::_cummin_helper", x.numel());
  if (!direct) {
    values.copy_(v);
    indices.copy_(i);
  }
}

bool cumext_native(const at::Tensor &self, const at::Tensor &values, const at::Tensor &indices) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_CUMEXT, kernel_query(-1, dt, -1, -1)) &&
         self.dim() <= TNRT_MAX_DIMS && values.scalar_type() == self.scalar_type() &&
         indices.scalar_type() == at::kLong;
}
}  // namespace

void cummax_helper(const at::Tensor &self, at::Tensor &values, at::Tensor &indices, int64_t dim) {
  if (!cumext_native(self, values, indices))
    return FALLBACK(_cummax_helper, self, values, indices, dim);
  cumext_helper(self, values, indices, dim, true);
}

void cummin_helper(const at::Tensor &self, at::Tensor &values, at::Tensor &indices, int64_t dim) {
  if (!cumext_native(self, values, indices))
    return FALLBACK(_cummin_helper, self, values, indices, dim);
  cumext_helper(self, values, indices, dim, false);
}

c10::ScalarType scan_dtype(const at::Tensor &self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
}

bool scan_native(const at::Tensor &self, c10::ScalarType out) {
  bool ok;
  tnk_dtype_t o = to_tnk(out, &ok);
  tnk_dtype_t i = tnk_of(self);
  return ok && i != TNK_DTYPE_COUNT && self.dim() <= TNRT_MAX_DIMS &&
         (kernel_supported(TNK_K_SCAN, kernel_query(-1, i, o, -1)) ||
          kernel_supported(TNK_K_SCAN, kernel_query(-1, o, o, -1)));
}
}  // namespace

#define NEURON_SCAN(NAME, OP)                                                                  \
  at::Tensor &NAME##_out(const at::Tensor &self, int64_t dim,                                  \
                         std::optional<c10::ScalarType> dtype, at::Tensor &out) {              \
    if (!scan_native(self, out.scalar_type()) ||                                               \
        (dtype.has_value() && *dtype != out.scalar_type()))                                    \
      return FALLBACK(NAME##_out, self, dim, dtype, out);                                      \
    return scan_out(self, dim, out, OP);                                                       \
  }                                                                                            \
  at::Tensor NAME(const at::Tensor &self, int64_t dim, std::optional<c10::ScalarType> dtype) { \
    at::Tensor out = at::empty({0}, self.options().dtype(scan_dtype(self, dtype)));            \
    return NAME##_out(self, dim, dtype, out);                                                  \
  }                                                                                            \
  at::Tensor &NAME##_(at::Tensor &self, int64_t dim, std::optional<c10::ScalarType> dtype) {   \
    return NAME##_out(self, dim, dtype, self);                                                 \
  }

NEURON_SCAN(cumsum, TNK_SCAN_SUM)
NEURON_SCAN(cumprod, TNK_SCAN_PROD)
#undef NEURON_SCAN

// logcumsumexp: floating inputs, result in the input's dtype (as CPU).
at::Tensor &logcumsumexp_out(const at::Tensor &self, int64_t dim, at::Tensor &out) {
  bool ok;
  tnk_dtype_t dt = to_tnk(self.scalar_type(), &ok);
  bool fl = dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
  if (!ok || !fl || out.scalar_type() != self.scalar_type() || self.dim() > TNRT_MAX_DIMS)
    return FALLBACK(_logcumsumexp_out, self, dim, out);
  return scan_out(self, dim, out, TNK_SCAN_LOGSUMEXP);
}

at::Tensor logcumsumexp(const at::Tensor &self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return logcumsumexp_out(self, dim, out);
}

namespace {

// --------------------------------------------------------------------- nansum

at::Tensor nansum_dims(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK(!self.is_complex(), "nansum does not support complex inputs");
  at::Tensor x = c10::isFloatingType(self.scalar_type())
                     ? at::where(at::isnan(self), at::zeros({}, self.options()), self)
                     : self;
  return at::sum(x, dim, keepdim, dtype);
}

at::Tensor &nansum_out(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<c10::ScalarType> dtype, at::Tensor &out) {
  at::Tensor r = nansum_dims(self, dim, keepdim, dtype);
  return assign_result(out, r);
}

// ---------------------------------------------------------------- torch.equal

bool equal(const at::Tensor &a, const at::Tensor &b) {
  TORCH_CHECK(a.device() == b.device(),
              "Cannot compare two tensors on different devices. Got: ", a.device(), " and ",
              b.device());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected object of scalar type ",
              a.scalar_type(), " but got scalar type ", b.scalar_type(), " for argument 'other'");
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return at::eq(a, b).all().item<bool>();  // NaN != NaN, as CPU
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("var.correction", var_correction);
  m.impl("std.correction", std_correction);
  m.impl("var_mean.correction", var_mean_correction);
  m.impl("std_mean.correction", std_mean_correction);
  m.impl("linalg_vector_norm", linalg_vector_norm);
  m.impl("linalg_vector_norm.out", linalg_vector_norm_out);
  m.impl("norm.out", norm_dim_out);
  m.impl("norm.dtype_out", norm_dim_dtype_out);
  m.impl("norm.Scalar_out", norm_all_out);
  m.impl("norm.ScalarOpt_dtype_out", norm_all_dtype_out);
  m.impl("sum.IntList_out", sum_out);
  m.impl("sum.dim_IntList", sum_dim);
  m.impl("sum", sum_all);
  m.impl("prod", prod_all);
  m.impl("prod.dim_int", prod_dim);
  m.impl("prod.int_out", prod_out);
  m.impl("mean.out", mean_out);
  m.impl("mean.dim", mean_dim);
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("amax", amax);
  m.impl("amax.out", amax_out);
  m.impl("amin", amin);
  m.impl("amin.out", amin_out);
  m.impl("aminmax", aminmax);
  m.impl("aminmax.out", aminmax_out);
  m.impl("trace", trace);
  m.impl("all", all_all);
  m.impl("all.all_out", all_all_out);
  m.impl("all.dim", all_dim);
  m.impl("all.out", all_dim_out);
  m.impl("all.dims", all_dims);
  m.impl("all.dims_out", all_dims_out);
  m.impl("any", any_all);
  m.impl("any.all_out", any_all_out);
  m.impl("any.dim", any_dim);
  m.impl("any.out", any_dim_out);
  m.impl("any.dims", any_dims);
  m.impl("any.dims_out", any_dims_out);
  m.impl("argmax", argmax);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin", argmin);
  m.impl("argmin.out", argmin_out);
  m.impl("max.dim", max_dim);
  m.impl("min.dim", min_dim);
  m.impl("_logcumsumexp", logcumsumexp);
  m.impl("_cummax_helper", cummax_helper);
  m.impl("_cummin_helper", cummin_helper);
  m.impl("_logcumsumexp.out", logcumsumexp_out);
  m.impl("cumsum", cumsum);
  m.impl("cumsum.out", cumsum_out);
  m.impl("cumsum_", cumsum_);
  m.impl("cumprod", cumprod);
  m.impl("cumprod.out", cumprod_out);
  m.impl("cumprod_", cumprod_);
  m.impl("nansum", nansum_dims);
  m.impl("nansum.out", nansum_out);
  m.impl("equal", equal);
}

}  // namespace torch_neuronx
