// Native where, tril/triu, arange and all/any. Argument checks follow ATen.
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

namespace torch_neuronx {
namespace {

#define FALLBACK(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

void fill_strides(const at::Tensor& t, at::IntArrayRef shape, int64_t* strides) {
  int64_t nd = shape.size(), td = t.dim();
  for (int64_t d = 0; d < nd; d++) {
    int64_t i = d - (nd - td);
    strides[d] = (i < 0 || t.size(i) == 1) ? 0 : t.stride(i);
  }
}

// A CPU scalar operand becomes a 0-dim device tensor (filled on the stream,
// no synchronisation), so the kernel never reads host memory later.
at::Tensor on_device(const at::Tensor& t, c10::Device dev, c10::ScalarType dt) {
  if (t.is_cpu() && t.dim() == 0)
    return at::full({}, t.item(), at::TensorOptions().device(dev).dtype(dt));
  return t.scalar_type() == dt ? t : t.to(dt);
}

void where_task(void* p) { tnk_where(static_cast<tnk_where_args_t*>(p)); }
void tri_task(void* p) { tnk_tri(static_cast<tnk_tri_args_t*>(p)); }
void arange_task(void* p) { tnk_arange(static_cast<tnk_arange_args_t*>(p)); }
void reduce_task(void* p) { tnk_reduce(static_cast<tnk_reduce_args_t*>(p)); }

}  // namespace

// ------------------------------------------------------------------ where

at::Tensor& where_out(const at::Tensor& cond, const at::Tensor& self,
                      const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              cond.scalar_type());
  c10::Device dev = out.device();
  for (const at::Tensor* t : {&cond, &self, &other})
    TORCH_CHECK(t->device() == dev || (t->is_cpu() && t->dim() == 0),
                "Expected all tensors to be on the same device, but found at least two "
                "devices, ", dev, " and ", t->device(), "!");
  c10::ScalarType common = at::result_type(self, other);
  auto shape = at::infer_size_dimvector(
      at::infer_size_dimvector(cond.sizes(), self.sizes()), other.sizes());
  bool ok;
  to_tnk(common, &ok);
  if (!ok || out.scalar_type() != common || shape.size() > TNK_MAX_DIMS)
    return FALLBACK(where_self_out, cond, self, other, out);
  resize_elementwise_out(out, shape, {&cond, &self, &other});
  if (out.numel() == 0) return out;
  at::Tensor c = on_device(cond, dev, at::kBool), a = on_device(self, dev, common),
             b = on_device(other, dev, common);
  at::assert_no_internal_overlap(out);
  for (at::Tensor* t : {&c, &a, &b}) *t = readable_input(out, *t);
  tnk_where_args_t w{};
  w.shape.ndim = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); d++) w.shape.sizes[d] = shape[d];
  w.out = {out.data_ptr(), to_tnk(common, &ok), 0, {}};
  fill_strides(out, shape, w.out.strides);
  w.cond = {const_cast<void*>(c.const_data_ptr()), TNK_BOOL, 0, {}};
  fill_strides(c, shape, w.cond.strides);
  w.a = {const_cast<void*>(a.const_data_ptr()), w.out.dtype, 0, {}};
  fill_strides(a, shape, w.a.strides);
  w.b = {const_cast<void*>(b.const_data_ptr()), w.out.dtype, 0, {}};
  fill_strides(b, shape, w.b.strides);
  launch(dev.index(), where_task, &w, sizeof w, "aten::where");
  return out;
}

at::Tensor where(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other) {
  c10::Device dev = cond.is_privateuseone() ? cond.device()
                    : self.is_privateuseone() ? self.device() : other.device();
  at::Tensor out = at::empty({0}, at::TensorOptions().device(dev).dtype(
                                      at::result_type(self, other)));
  return where_out(cond, self, other, out);
}

// ------------------------------------------------------------ tril / triu

namespace {
at::Tensor& tri_into(at::Tensor& out, const at::Tensor& self, int64_t k, bool upper,
                     const char* name) {
  TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
  at::Tensor x = self.contiguous();
  at::native::resize_output(out, self.sizes());
  at::Tensor o = out.is_contiguous() && !(out.storage().is_alias_of(x.storage()) &&
                                          !out.is_same(x))
                     ? out : at::empty(self.sizes(), self.options());
  if (o.numel()) {
    tnk_tri_args_t a{};
    a.out = o.data_ptr();
    a.in = x.const_data_ptr();
    a.rows = self.size(-2);
    a.cols = self.size(-1);
    a.batch = self.numel() / (a.rows * a.cols);
    a.diagonal = k;
    bool ok;
    a.dtype = to_tnk(self.scalar_type(), &ok);
    a.upper = upper;
    if (!ok) a.dtype = self.itemsize() == 1 ? TNK_U8 : self.itemsize() == 2 ? TNK_I16
                      : self.itemsize() == 4 ? TNK_I32 : TNK_I64;
    launch(self.device().index(), tri_task, &a, sizeof a, name);
  }
  if (!o.is_same(out)) out.copy_(o);
  return out;
}
}  // namespace

at::Tensor tril(const at::Tensor& self, int64_t k) {
  at::Tensor out = at::empty({0}, self.options());
  return tri_into(out, self, k, false, "aten::tril");
}
at::Tensor& tril_out(const at::Tensor& self, int64_t k, at::Tensor& out) {
  return tri_into(out, self, k, false, "aten::tril");
}
at::Tensor& tril_(at::Tensor& self, int64_t k) {
  return tri_into(self, self, k, false, "aten::tril_");
}
at::Tensor triu(const at::Tensor& self, int64_t k) {
  at::Tensor out = at::empty({0}, self.options());
  return tri_into(out, self, k, true, "aten::triu");
}
at::Tensor& triu_out(const at::Tensor& self, int64_t k, at::Tensor& out) {
  return tri_into(out, self, k, true, "aten::triu");
}
at::Tensor& triu_(at::Tensor& self, int64_t k) {
  return tri_into(self, self, k, true, "aten::triu_");
}

// ----------------------------------------------------------------- arange

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end,
                       const c10::Scalar& step, at::Tensor& out) {
  bool ok;
  tnk_dtype_t dt = to_tnk(out.scalar_type(), &ok);
  if (!ok || out.is_complex()) return FALLBACK(arange_start_out, start, end, step, out);
  // CPU's rules: an integer dtype reads the bounds and step as int64
  // (truncating), a floating one as double; the length comes from the
  // int64 values for int64 but from the double ones for the other integer
  // types (arange(0., -8.5, -4., dtype=int32) has 3 elements, int64 2).
  bool integral = c10::isIntegralType(out.scalar_type(), true);
  double xs = start.toDouble(), xe = end.toDouble(), st = step.toDouble();
  int64_t is = 0, ie = 0, ist = 0;
  if (integral) {
    is = start.toLong();
    ie = end.toLong();
    ist = step.toLong();
    TORCH_CHECK(ist != 0, "step must be nonzero");
    TORCH_CHECK((ist > 0 && ie >= is) || (ist < 0 && ie <= is),
                "upper bound and larger bound inconsistent with step sign");
  } else {
    TORCH_CHECK(st != 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(xs) && std::isfinite(xe), "unsupported range: ", xs, " -> ", xe);
    TORCH_CHECK((st > 0 && xe >= xs) || (st < 0 && xe <= xs),
                "upper bound and larger bound inconsistent with step sign");
  }
  double size_d;
  if (out.scalar_type() == at::kLong) {
    const int64_t sgn = (ist > 0) - (ist < 0);
    size_d = static_cast<double>((ie - is + ist - sgn) / ist);
  } else {
    size_d = std::ceil((xe - xs) / st);
  }
  TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              "invalid size, possible overflow?");
  int64_t n = static_cast<int64_t>(size_d);
  if (out.numel() != n) out.resize_({n});
  if (!out.is_contiguous()) return FALLBACK(arange_start_out, start, end, step, out);
  tnk_arange_args_t a{};
  a.out = n ? out.data_ptr() : nullptr;
  a.n = n;
  a.integral = integral;
  if (integral) {
    a.istart = is;
    a.istep = ist;
  }
  a.start = xs;
  a.step = st;
  a.dtype = dt;
  if (n) launch(out.device().index(), arange_task, &a, sizeof a, "aten::arange");
  return out;
}

// ---------------------------------------------------------------- all/any

namespace {
at::Tensor& logical_reduce(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                           tnk_reduce_op_t op, at::Tensor& out, bool* done) {
  *done = false;
  bool ok;
  to_tnk(self.scalar_type(), &ok);
  if (!ok || out.scalar_type() != at::kBool || self.dim() > TNK_MAX_DIMS) return out;
  at::native::resize_output(out, reduced_shape(self, dims, keepdim));
  *done = true;
  if (out.numel() == 0) return out;
  tnk_reduce_args_t a{};
  fill_reduce_args(self, dims, keepdim, out, &a);
  a.op = op;
  launch(self.device().index(), reduce_task, &a, sizeof a,
         op == TNK_ALL ? "aten::all" : "aten::any");
  return out;
}

// all/any of a uint8 tensor are uint8 (CPU's and CUDA's legacy rule)
at::Tensor as_input_dtype(const at::Tensor& r, const at::Tensor& self) {
  return self.scalar_type() == at::kByte ? r.to(at::kByte) : r;
}
}  // namespace

#define NEURON_LOGICAL(NAME, OP)                                                        \
  at::Tensor NAME##_all(const at::Tensor& self) {                                       \
    at::Tensor out = at::empty({}, self.options().dtype(at::kBool));                    \
    bool done;                                                                          \
    logical_reduce(self, std::nullopt, false, OP, out, &done);                          \
    return done ? as_input_dtype(out, self) : FALLBACK(NAME, self);                      \
  }                                                                                     \
  at::Tensor& NAME##_all_out(const at::Tensor& self, at::Tensor& out) {                 \
    bool done;                                                                          \
    logical_reduce(self, std::nullopt, false, OP, out, &done);                          \
    return done ? out : FALLBACK(NAME##_all_out, self, out);                            \
  }                                                                                     \
  at::Tensor NAME##_dim(const at::Tensor& self, int64_t dim, bool keepdim) {            \
    at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));                   \
    bool done;                                                                          \
    int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));             \
    logical_reduce(self, self.dim() ? at::OptionalIntArrayRef(at::IntArrayRef(d))       \
                                    : at::OptionalIntArrayRef(std::nullopt),            \
                   keepdim, OP, out, &done);                                            \
    return done ? as_input_dtype(out, self) : FALLBACK(NAME##_dim, self, dim, keepdim);  \
  }

NEURON_LOGICAL(all, TNK_ALL)
NEURON_LOGICAL(any, TNK_ANY)

// ---------------------------------------------------------- max/min, amax

namespace {
// Reduces self to its max/min over dims into out; false if the kernels
// cannot (dtype, or an empty reduction, which must raise as on CPU).
bool extreme_into(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                  tnk_reduce_op_t op, at::Tensor& out) {
  bool ok;
  tnk_dtype_t dt = to_tnk(self.scalar_type(), &ok);
  if (!ok || !tnk_reduce_supported(op, dt, dt) || out.scalar_type() != self.scalar_type() ||
      self.dim() > TNK_MAX_DIMS || out.device() != self.device())
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
  launch(self.device().index(), reduce_task, &a, sizeof a,
         op == TNK_MAX ? "aten::max" : "aten::min");
  return true;
}
}  // namespace

#define NEURON_EXTREME(NAME, ANAME, OP)                                              \
  at::Tensor NAME##_all(const at::Tensor& self) {                                    \
    at::Tensor out = at::empty({}, self.options());                                  \
    return extreme_into(self, std::nullopt, false, OP, out) ? out : FALLBACK(NAME, self); \
  }                                                                                  \
  at::Tensor ANAME(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {     \
    at::Tensor out = at::empty({0}, self.options());                                 \
    return extreme_into(self, dims, keepdim, OP, out) ? out                          \
                                                      : FALLBACK(ANAME, self, dims, keepdim); \
  }                                                                                  \
  at::Tensor& ANAME##_out(const at::Tensor& self, at::IntArrayRef dims, bool keepdim, \
                          at::Tensor& out) {                                         \
    return extreme_into(self, dims, keepdim, OP, out)                                \
               ? out : FALLBACK(ANAME##_out, self, dims, keepdim, out);             \
  }

NEURON_EXTREME(max, amax, TNK_MAX)
NEURON_EXTREME(min, amin, TNK_MIN)

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("amax", amax);
  m.impl("amax.out", amax_out);
  m.impl("amin", amin);
  m.impl("amin.out", amin_out);
  m.impl("where.self", where);
  m.impl("where.self_out", where_out);
  m.impl("tril", tril);
  m.impl("tril.out", tril_out);
  m.impl("tril_", tril_);
  m.impl("triu", triu);
  m.impl("triu.out", triu_out);
  m.impl("triu_", triu_);
  m.impl("arange.start_out", arange_out);
  m.impl("all", all_all);
  m.impl("all.all_out", all_all_out);
  m.impl("all.dim", all_dim);
  m.impl("any", any_all);
  m.impl("any.all_out", any_all_out);
  m.impl("any.dim", any_dim);
}

}  // namespace torch_neuronx
