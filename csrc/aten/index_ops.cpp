// Native indexing: index_select / index_add / embedding backward,
// gather / scatter, nll_loss, max/min with indices, argmax/argmin,
// cumsum/cumprod, masked_fill and isin. Argument checks follow ATen's CPU
// messages; bad index values are found by the kernels and raised at the
// next synchronisation (see tnrt_stream_fault).
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {
namespace {

#define FALLBACK(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

void index_task(void* p) { tnk_index(static_cast<tnk_index_args_t*>(p)); }
void gather_task(void* p) { tnk_gather(static_cast<tnk_gather_args_t*>(p)); }
void nll_task(void* p) { tnk_nll(static_cast<tnk_nll_args_t*>(p)); }
void argreduce_task(void* p) { tnk_argreduce(static_cast<tnk_argreduce_args_t*>(p)); }
void scan_task(void* p) { tnk_scan(static_cast<tnk_scan_args_t*>(p)); }
void isin_task(void* p) { tnk_isin(static_cast<tnk_isin_args_t*>(p)); }
void where_task(void* p) { tnk_where(static_cast<tnk_where_args_t*>(p)); }

tnk_dtype_t tnk_of(const at::Tensor& t) {
  bool ok;
  tnk_dtype_t d = to_tnk(t.scalar_type(), &ok);
  return ok ? d : TNK_DTYPE_COUNT;
}

void check_same_device(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but found at least two "
              "devices, ", a.device(), " and ", b.device(), "!");
}

// Sizes of the dims before, at and after `dim` of a contiguous view.
void split_dims(at::IntArrayRef sizes, int64_t dim, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t d = 0; d < dim; d++) *outer *= sizes[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); d++) *inner *= sizes[d];
}

// Runs fn into out when out is contiguous, else into a contiguous temporary
// that is copied back (kernels write contiguous outputs).
template <typename F>
void into_contiguous(at::Tensor& out, F fn) {
  at::assert_no_internal_overlap(out);
  if (out.is_contiguous()) {
    fn(out);
  } else {
    at::Tensor tmp = out.contiguous();
    fn(tmp);
    out.copy_(tmp);
  }
}

}  // namespace

// ---------------------------------------------------------- index_select

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "index_select(): self and result must have the same scalar type");
  if (self.dim() == 0 || index.device() != self.device() || tnk_of(self) == TNK_DTYPE_COUNT)
    return FALLBACK(index_select_out, self, dim, index, out);
  dim = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> shape = self.sizes().vec();
  shape[dim] = index.numel();
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  TORCH_CHECK_INDEX(self.size(dim) > 0, "index out of range in self");
  at::Tensor x = self.contiguous();
  into_contiguous(out, [&](at::Tensor& o) {
    tnk_index_args_t a{};
    a.nindex = 1;
    a.indexed = const_cast<void*>(x.const_data_ptr());
    a.dense = o.data_ptr();
    a.index[0] = index.const_data_ptr();
    split_dims(self.sizes(), dim, &a.outer, &a.inner);
    a.size[0] = self.size(dim);
    a.n = index.numel();
    a.index_stride[0] = index.dim() ? index.stride(0) : 0;
    a.dtype = tnk_of(self);
    a.index_dtype = tnk_of(index);
    a.fault = fault_sink(self.device().index(), "index_select", true);
    launch(self.device().index(), index_task, &a, sizeof a, "aten::index_select");
  });
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

// -------------------------------------------------------------- index_add

namespace {
// out already holds self's values; adds alpha * source rows at index.
void index_add_into(at::Tensor& out, int64_t dim, const at::Tensor& index,
                    const at::Tensor& source, double alpha, const char* what) {
  if (index.numel() == 0 || out.numel() == 0) return;
  at::Tensor src = source.contiguous();
  into_contiguous(out, [&](at::Tensor& o) {
    tnk_index_args_t a{};
    a.nindex = 1;
    a.indexed = o.data_ptr();
    a.dense = const_cast<void*>(src.const_data_ptr());
    a.index[0] = index.const_data_ptr();
    split_dims(o.sizes(), dim, &a.outer, &a.inner);
    a.size[0] = o.dim() ? o.size(dim) : 1;
    a.n = index.numel();
    a.index_stride[0] = index.dim() ? index.stride(0) : 0;
    a.dtype = tnk_of(o);
    a.index_dtype = tnk_of(index);
    a.mode = TNK_INDEX_ADD;
    a.alpha = alpha;
    a.fault = fault_sink(o.device().index(), what, false);  // CPU: RuntimeError
    launch(o.device().index(), index_task, &a, sizeof a, "aten::index_add");
  });
}

bool index_add_native(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& source) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && tnk_index_supported(dt, tnk_of(index), TNK_INDEX_ADD) &&
         index.dim() <= 1 && source.scalar_type() == self.scalar_type() &&
         index.device() == self.device() && source.device() == self.device() &&
         self.dim() > 0 && source.dim() == self.dim();
}

void check_index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                     const at::Tensor& source) {
  TORCH_CHECK_INDEX(index.numel() == source.size(dim),
                    "index_add_(): Number of indices (", index.numel(),
                    ") should be equal to source.size(dim) (", source.size(dim), ")");
  for (int64_t d = 0; d < self.dim(); d++)
    if (d != dim)
      TORCH_CHECK(self.size(d) == source.size(d), "index_add_(): self (", self.sizes(),
                  ") and source (", source.sizes(), ") must have the same size in every "
                  "dimension except dim ", dim);
}
}  // namespace

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source, const c10::Scalar& alpha,
                          at::Tensor& out) {
  if (!index_add_native(self, dim, index, source) || out.scalar_type() != self.scalar_type())
    return FALLBACK(index_add_out, self, dim, index, source, alpha, out);
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_index_add(self, dim, index, source);
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  index_add_into(out, dim, index, source, alpha.toDouble(), "index_add");
  return out;
}

at::Tensor& index_add_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                       const at::Tensor& source, const c10::Scalar& alpha) {
  return index_add_out(self, dim, index, source, alpha, self);
}

at::Tensor index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                     const at::Tensor& source, const c10::Scalar& alpha) {
  at::Tensor out = at::empty({0}, self.options());
  return index_add_out(self, dim, index, source, alpha, out);
}

// ------------------------------------------------------------- embedding

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                    c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
  int64_t nw = num_weights.expect_int(), pad = padding_idx.expect_int();
  tnk_dtype_t dt = tnk_of(grad);
  if (scale_grad_by_freq || dt == TNK_DTYPE_COUNT || !tnk_index_supported(dt, tnk_of(indices), TNK_INDEX_ADD) ||
      !at::isFloatingType(grad.scalar_type()) || indices.device() != grad.device())
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback,
                                               ATEN_OP(embedding_dense_backward)>::call(
        grad, indices, num_weights, padding_idx, scale_grad_by_freq);
  int64_t d = grad.numel() / std::max<int64_t>(indices.numel(), 1);
  if (indices.numel() == 0) d = grad.size(-1);
  // Half-precision gradients accumulate in fp32 and round once.
  bool half = grad.scalar_type() == at::kBFloat16 || grad.scalar_type() == at::kHalf;
  at::Tensor acc = at::zeros({nw, d}, grad.options().dtype(half ? at::kFloat : grad.scalar_type()));
  at::Tensor g = grad.reshape({indices.numel(), d});
  if (half) g = g.to(at::kFloat);
  at::Tensor idx = indices.reshape({-1});
  if (indices.numel() && nw) {
    g = g.contiguous();
    tnk_index_args_t a{};
    a.nindex = 1;
    a.indexed = acc.data_ptr();
    a.dense = const_cast<void*>(g.const_data_ptr());
    a.index[0] = idx.const_data_ptr();
    a.outer = 1;
    a.size[0] = nw;
    a.n = idx.numel();
    a.inner = d;
    a.index_stride[0] = idx.stride(0);
    a.skip = pad;
    a.has_skip = pad != -1;
    a.dtype = tnk_of(acc);
    a.index_dtype = tnk_of(idx);
    a.mode = TNK_INDEX_ADD;
    a.alpha = 1.0;
    a.fault = fault_sink(grad.device().index(), "embedding_backward", true);
    launch(grad.device().index(), index_task, &a, sizeof a, "aten::embedding_dense_backward");
  }
  return half ? acc.to(grad.scalar_type()) : acc;
}

// --------------------------------------------------------- gather/scatter

namespace {
void fill_view(const at::Tensor& t, int64_t nd, tnk_view_t* v) {
  v->data = const_cast<void*>(t.const_data_ptr());
  v->dtype = tnk_of(t);
  for (int64_t d = 0; d < nd; d++) v->strides[d] = t.dim() ? t.stride(d) : 0;
}

// Launches one gather/scatter over index's shape. `indexed` is self for
// the scatters (written in place) and the source of gather.
void launch_gather(const at::Tensor& indexed, const at::Tensor& dense, const at::Tensor& index0,
                   int64_t dim, int mode, const c10::Scalar* value, const char* what) {
  if (index0.numel() == 0) return;
  // The kernel reads int64 indices; int32 ones (accepted, as on CPU) widen.
  at::Tensor index = index0.scalar_type() == at::kLong ? index0 : index0.to(at::kLong);
  tnk_gather_args_t a{};
  int64_t nd = std::max<int64_t>(index.dim(), 1);
  a.shape.ndim = static_cast<int32_t>(nd);
  for (int64_t d = 0; d < nd; d++) a.shape.sizes[d] = index.dim() ? index.size(d) : 1;
  fill_view(indexed, nd, &a.indexed);
  if (dense.defined()) fill_view(dense, nd, &a.dense);
  fill_view(index, nd, &a.index);
  a.dim = static_cast<int32_t>(dim);
  a.mode = mode;
  a.dim_size = indexed.dim() ? indexed.size(dim) : 1;
  if (value) {
    a.value.is_bool = value->isBoolean();
    a.value.is_integral = value->isIntegral(false);
    if (a.value.is_bool || a.value.is_integral) a.value.i = value->toLong();
    else a.value.f = value->toDouble();
  }
  a.fault = fault_sink(indexed.device().index(), what, false);
  launch(indexed.device().index(), gather_task, &a, sizeof a, what);
}

void check_gather_shapes(const char* name, const at::Tensor& self, int64_t dim,
                         const at::Tensor& index, const at::Tensor* src) {
  TORCH_CHECK(index.numel() == 0 || index.scalar_type() == at::kLong ||
                  index.scalar_type() == at::kInt,
              name, "(): Expected dtype int32/int64 for index");
  int64_t sd = std::max<int64_t>(self.dim(), 1), id = std::max<int64_t>(index.dim(), 1);
  TORCH_CHECK(index.numel() == 0 || sd == id, "Index tensor must have the same number of "
              "dimensions as ", src ? "self" : "input", " tensor");
  if (index.numel() == 0) return;
  for (int64_t d = 0; d < index.dim(); d++) {
    int64_t isz = index.size(d);
    if (d != dim)
      TORCH_CHECK(isz <= (self.dim() ? self.size(d) : 1), "Size does not match at dimension ",
                  d, " expected index ", index.sizes(), " to be no larger than self ",
                  self.sizes(), " apart from dimension ", dim);
    if (src)
      TORCH_CHECK(isz <= (src->dim() ? src->size(d) : 1), "Size does not match at dimension ",
                  d, " expected index ", index.sizes(), " to be no larger than src ",
                  src->sizes());
  }
}

bool gather_native(const at::Tensor& self, const at::Tensor& index, const at::Tensor* src,
                   int mode) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && tnk_gather_supported(mode, dt) &&
         index.device() == self.device() && index.dim() <= TNK_MAX_DIMS &&
         (!src || (src->device() == self.device() && src->scalar_type() == self.scalar_type()));
}
}  // namespace

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out) {
  if (!gather_native(self, index, nullptr, TNK_GATHER) || out.scalar_type() != self.scalar_type())
    return FALLBACK(gather_out, self, dim, index, sparse_grad, out);
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_gather_shapes("gather", self, dim, index, nullptr);
  at::native::resize_output(out, index.sizes());
  if (out.storage().is_alias_of(self.storage())) {
    at::Tensor tmp = at::empty(index.sizes(), self.options());
    launch_gather(self, tmp, index, dim, TNK_GATHER, nullptr, "gather");
    return out.copy_(tmp);
  }
  launch_gather(self, out, index, dim, TNK_GATHER, nullptr, "gather");
  return out;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  bool sparse_grad) {
  at::Tensor out = at::empty({0}, self.options());
  return gather_out(self, dim, index, sparse_grad, out);
}

namespace {
// The scatter family on a result that already holds self's values.
at::Tensor& scatter_core(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor* src, const c10::Scalar* value, int mode,
                         at::Tensor& out, const char* name) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_gather_shapes(name, self, dim, index, src);
  if (src)
    TORCH_CHECK(src->scalar_type() == self.scalar_type(), name,
                "(): Expected self.dtype to be equal to src.dtype");
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  at::assert_no_internal_overlap(out);
  at::Tensor s = src ? *src : at::Tensor();
  if (s.defined() && s.storage().is_alias_of(out.storage())) s = s.clone();
  launch_gather(out, s, index, dim, mode, value, name);
  return out;
}
}  // namespace

#define NEURON_SCATTER_SRC(FN, OPNAME, MODE, NAME)                                          \
  at::Tensor& FN##_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,        \
                       const at::Tensor& src, at::Tensor& out) {                            \
    if (!gather_native(self, index, &src, MODE) || out.scalar_type() != self.scalar_type()) \
      return FALLBACK(OPNAME, self, dim, index, src, out);                                  \
    return scatter_core(self, dim, index, &src, nullptr, MODE, out, NAME);                  \
  }                                                                                         \
  at::Tensor& FN##_(at::Tensor& self, int64_t dim, const at::Tensor& index,                 \
                    const at::Tensor& src) {                                                \
    return FN##_out(self, dim, index, src, self);                                           \
  }                                                                                         \
  at::Tensor FN(const at::Tensor& self, int64_t dim, const at::Tensor& index,               \
                const at::Tensor& src) {                                                    \
    at::Tensor out = at::empty({0}, self.options());                                        \
    return FN##_out(self, dim, index, src, out);                                            \
  }

NEURON_SCATTER_SRC(scatter_src, scatter_src_out, TNK_SCATTER, "scatter")
NEURON_SCATTER_SRC(scatter_add, scatter_add_out, TNK_SCATTER_ADD, "scatter_add")
#undef NEURON_SCATTER_SRC

// scatter_reduce: sum / prod / mean / amax / amin, with or without self's
// values. Without them, the scattered positions start from the reduction's
// identity; mean divides by the count of contributions (floor for integers).
namespace {
int scatter_reduce_mode(c10::string_view reduce) {
  if (reduce == "sum" || reduce == "mean") return TNK_SCATTER_ADD;
  if (reduce == "prod") return TNK_SCATTER_MUL;
  if (reduce == "amax" || reduce == "max") return TNK_SCATTER_AMAX;  // max/min: ATen's aliases
  if (reduce == "amin" || reduce == "min") return TNK_SCATTER_AMIN;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

c10::Scalar reduce_identity(int mode, at::ScalarType t) {
  if (mode == TNK_SCATTER_ADD) return 0;
  if (mode == TNK_SCATTER_MUL) return 1;
  bool hi = mode == TNK_SCATTER_AMIN;
  if (at::isFloatingType(t)) return hi ? INFINITY : -INFINITY;
  switch (t) {
    case at::kBool: return hi;
    case at::kByte: return hi ? 255 : 0;
    case at::kChar: return hi ? 127 : -128;
    case at::kShort: return hi ? 32767 : -32768;
    case at::kInt: return hi ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    default: return hi ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
}
}  // namespace

at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& src, c10::string_view reduce, bool include_self,
                               at::Tensor& out) {
  int mode = scatter_reduce_mode(reduce);
  if (!gather_native(self, index, &src, mode) || out.scalar_type() != self.scalar_type())
    return FALLBACK(scatter_reduce_two_out, self, dim, index, src, reduce, include_self, out);
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  if (!include_self && index.numel()) {
    c10::Scalar id = reduce_identity(mode, self.scalar_type());
    scatter_core(out, dim, index, nullptr, &id, TNK_SCATTER_VALUE, out, "scatter_reduce");
  }
  scatter_core(out, dim, index, &src, nullptr, mode, out, "scatter_reduce");
  if (reduce == "mean") {
    at::Tensor count = include_self ? at::ones_like(out) : at::zeros_like(out);
    count.scatter_add_(dim, index, at::ones_like(src));
    count.masked_fill_(count == 0, 1);
    if (at::isFloatingType(out.scalar_type())) out.div_(count);
    else out.div_(count, "floor");
  }
  return out;
}
at::Tensor& scatter_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, c10::string_view reduce, bool include_self) {
  return scatter_reduce_out(self, dim, index, src, reduce, include_self, self);
}
at::Tensor scatter_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& src, c10::string_view reduce, bool include_self) {
  at::Tensor out = at::empty({0}, self.options());
  return scatter_reduce_out(self, dim, index, src, reduce, include_self, out);
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const c10::Scalar& value, at::Tensor& out) {
  check_scalar_fits(value, self.scalar_type());
  if (!gather_native(self, index, nullptr, TNK_SCATTER_VALUE) ||
      out.scalar_type() != self.scalar_type())
    return FALLBACK(scatter_value_out, self, dim, index, value, out);
  return scatter_core(self, dim, index, nullptr, &value, TNK_SCATTER_VALUE, out, "scatter");
}
at::Tensor& scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const c10::Scalar& value) {
  return scatter_value_out(self, dim, index, value, self);
}
at::Tensor scatter_value(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const c10::Scalar& value) {
  at::Tensor out = at::empty({0}, self.options());
  return scatter_value_out(self, dim, index, value, out);
}

// ---------------------------------------------------------------- nll_loss

namespace {
void check_nll(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1,
              "0D or 1D target tensor expected, multi-target not supported");
  int64_t n = self.dim() == 1 ? 1 : self.size(0);
  TORCH_CHECK(self.dim() == 1 ? target.numel() == 1 : target.size(0) == n,
              "Expected input batch_size (", n, ") to match target batch_size (",
              target.dim() ? target.size(0) : 1, ").");
  TORCH_CHECK(target.scalar_type() == at::kLong, "expected scalar type Long but found ",
              target.scalar_type());
  int64_t c = self.size(-1);
  TORCH_CHECK(!weight.defined() || (weight.dim() <= 1 && weight.numel() == c),
              "weight tensor should be defined either for all ", c,
              " classes or no classes but got weight tensor of shape: ", weight.sizes());
}

bool nll_native(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && tnk_nll_supported(dt) && target.device() == self.device() &&
         (!weight.defined() ||
          (weight.device() == self.device() && weight.scalar_type() == self.scalar_type()));
}
}  // namespace

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight_opt,
                                                    int64_t reduction, int64_t ignore_index) {
  at::Tensor weight = weight_opt.has_value() ? *weight_opt : at::Tensor();
  if (!nll_native(self, target, weight))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(nll_loss_forward)>::call(
        self, target, weight_opt, reduction, ignore_index);
  check_nll(self, target, weight);
  at::Tensor x = self.contiguous(), t = target.contiguous();
  at::Tensor w = weight.defined() ? weight.contiguous() : weight;
  int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
  at::Tensor out = reduction == 0 && self.dim() == 2 ? at::empty({n}, self.options())
                                                     : at::empty({}, self.options());
  at::Tensor tw = at::empty({}, self.options());
  tnk_nll_args_t a{};
  a.input = x.const_data_ptr();
  a.target = t.const_data_ptr();
  a.weight = w.defined() ? w.const_data_ptr() : nullptr;
  a.out = out.data_ptr();
  a.total_weight = tw.data_ptr();
  a.n = n;
  a.c = c;
  a.ignore_index = ignore_index;
  a.dtype = tnk_of(self);
  a.reduction = static_cast<int32_t>(reduction);
  a.fault = fault_sink(self.device().index(), "nll_loss (target)", true);
  launch(self.device().index(), nll_task, &a, sizeof a, "aten::nll_loss_forward");
  return {out, tw};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight_opt,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  at::Tensor weight = weight_opt.has_value() ? *weight_opt : at::Tensor();
  if (!nll_native(self, target, weight) || grad_output.scalar_type() != self.scalar_type() ||
      total_weight.scalar_type() != self.scalar_type() ||
      grad_output.device() != self.device() || total_weight.device() != self.device())
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(nll_loss_backward)>::call(
        grad_output, self, target, weight_opt, reduction, ignore_index, total_weight);
  check_nll(self, target, weight);
  int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
  TORCH_CHECK(reduction != 0 || self.dim() == 1 || grad_output.numel() == n,
              "Expected a tensor of dimension 1 and tensor.size[0] == ", n,
              " but got: dimension ", grad_output.dim(), " and tensor.size[0] == ",
              grad_output.dim() ? grad_output.size(0) : 1);
  TORCH_CHECK(reduction == 0 || grad_output.numel() == 1,
              "Expected a single element grad_output tensor, but got: ", grad_output.sizes());
  at::Tensor t = target.contiguous(), g = grad_output.contiguous();
  at::Tensor w = weight.defined() ? weight.contiguous() : weight;
  at::Tensor gi = at::empty(self.sizes(), self.options());
  tnk_nll_args_t a{};
  a.target = t.const_data_ptr();
  a.weight = w.defined() ? w.const_data_ptr() : nullptr;
  a.grad = g.const_data_ptr();
  a.out = gi.data_ptr();
  a.total_weight = const_cast<void*>(total_weight.const_data_ptr());
  a.n = n;
  a.c = c;
  a.ignore_index = ignore_index;
  a.dtype = tnk_of(self);
  a.reduction = static_cast<int32_t>(reduction);
  a.backward = 1;
  a.fault = fault_sink(self.device().index(), "nll_loss_backward (target)", true);
  launch(self.device().index(), nll_task, &a, sizeof a, "aten::nll_loss_backward");
  return gi;
}

// --------------------------------------- max/min with indices, argmax/argmin

namespace {
// Reduces self along dim (wrapped; the whole flattened tensor when
// flatten) into values (may be undefined) and indices.
void arg_reduce(const at::Tensor& self, int64_t dim, bool flatten, bool is_max,
                at::Tensor* values, at::Tensor& indices) {
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
  auto run = [&](at::Tensor& idx, at::Tensor* vals) {
    a.indices = idx.data_ptr();
    a.values = vals ? vals->data_ptr() : nullptr;
    launch(self.device().index(), argreduce_task, &a, sizeof a,
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

bool arg_native(const at::Tensor& self) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && tnk_argreduce_supported(dt);
}

at::Tensor& argmaxmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                          at::Tensor& out, bool is_max) {
  const char* name = is_max ? "argmax()" : "argmin()";
  if (dim.has_value()) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.numel() != 0 || (self.dim() && self.size(d) != 0), name,
                      ": Expected reduction dim ", d, " to have non-zero size.");
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, name, ": Expected reduction dim ",
                      d, " to have non-zero size.");
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

at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out) {
  if (!arg_native(self) || out.scalar_type() != at::kLong)
    return FALLBACK(argmax_out, self, dim, keepdim, out);
  return argmaxmin_out(self, dim, keepdim, out, true);
}
at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return argmax_out(self, dim, keepdim, out);
}
at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out) {
  if (!arg_native(self) || out.scalar_type() != at::kLong)
    return FALLBACK(argmin_out, self, dim, keepdim, out);
  return argmaxmin_out(self, dim, keepdim, out, false);
}
at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return argmin_out(self, dim, keepdim, out);
}

namespace {
std::tuple<at::Tensor, at::Tensor> maxmin_dim(const at::Tensor& self, int64_t dim, bool keepdim,
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

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (!arg_native(self))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(max, dim)>::call(
        self, dim, keepdim);
  return maxmin_dim(self, dim, keepdim, true);
}
std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (!arg_native(self))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(min, dim)>::call(
        self, dim, keepdim);
  return maxmin_dim(self, dim, keepdim, false);
}

// ---------------------------------------------------------- cumsum/cumprod

namespace {
at::Tensor& scan_out(const at::Tensor& self, int64_t dim, at::Tensor& out, int op) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  at::Tensor x = self.contiguous();
  bool ok;
  if (!tnk_scan_supported(tnk_of(x), to_tnk(out.scalar_type(), &ok)))
    x = x.to(out.scalar_type());  // e.g. integers summed as float64: cast first, as CPU
  if (x.storage().is_alias_of(out.storage()) && !x.is_same(out)) x = x.clone();
  into_contiguous(out, [&](at::Tensor& o) {
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
    launch(self.device().index(), scan_task, &a, sizeof a,
           op == TNK_SCAN_PROD ? "aten::cumprod"
           : op == TNK_SCAN_SUM ? "aten::cumsum" : "aten::_logcumsumexp");
  });
  return out;
}

c10::ScalarType scan_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
}

bool scan_native(const at::Tensor& self, c10::ScalarType out) {
  bool ok;
  tnk_dtype_t o = to_tnk(out, &ok);
  tnk_dtype_t i = tnk_of(self);
  return ok && i != TNK_DTYPE_COUNT && self.dim() <= TNK_MAX_DIMS &&
         (tnk_scan_supported(i, o) || tnk_scan_supported(o, o));
}
}  // namespace

#define NEURON_SCAN(NAME, OP)                                                                \
  at::Tensor& NAME##_out(const at::Tensor& self, int64_t dim,                                \
                         std::optional<c10::ScalarType> dtype, at::Tensor& out) {            \
    if (!scan_native(self, out.scalar_type()) ||                                             \
        (dtype.has_value() && *dtype != out.scalar_type()))                                  \
      return FALLBACK(NAME##_out, self, dim, dtype, out);                                    \
    return scan_out(self, dim, out, OP);                                                     \
  }                                                                                          \
  at::Tensor NAME(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) { \
    at::Tensor out = at::empty({0}, self.options().dtype(scan_dtype(self, dtype)));         \
    return NAME##_out(self, dim, dtype, out);                                                \
  }                                                                                          \
  at::Tensor& NAME##_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) { \
    return NAME##_out(self, dim, dtype, self);                                               \
  }

NEURON_SCAN(cumsum, TNK_SCAN_SUM)
NEURON_SCAN(cumprod, TNK_SCAN_PROD)
#undef NEURON_SCAN

// logcumsumexp: floating inputs, result in the input's dtype (as CPU).
at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  bool ok;
  tnk_dtype_t dt = to_tnk(self.scalar_type(), &ok);
  bool fl = dt == TNK_F32 || dt == TNK_F64 || dt == TNK_BF16 || dt == TNK_F16;
  if (!ok || !fl || out.scalar_type() != self.scalar_type() || self.dim() > TNK_MAX_DIMS)
    return FALLBACK(_logcumsumexp_out, self, dim, out);
  return scan_out(self, dim, out, TNK_SCAN_LOGSUMEXP);
}

at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return logcumsumexp_out(self, dim, out);
}

// ------------------------------------------------------------- masked_fill

namespace {
at::Tensor& masked_fill_impl(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "The size of the mask (",
              mask.sizes(), ") must be broadcastable to the size of self (", self.sizes(), ")");
  check_same_device(self, mask);
  if (self.numel() == 0) return self;
  at::Tensor v = value.is_cpu() ? at::full({}, value.item(), self.options())
                                : value.to(self.scalar_type());
  at::Tensor m = mask.storage().is_alias_of(self.storage()) ? mask.clone() : mask;
  int64_t nd = self.dim();
  tnk_where_args_t w{};
  w.shape.ndim = static_cast<int32_t>(std::max<int64_t>(nd, 1));
  w.shape.sizes[0] = 1;
  for (int64_t d = 0; d < nd; d++) w.shape.sizes[d] = self.size(d);
  bool ok;
  tnk_dtype_t dt = to_tnk(self.scalar_type(), &ok);
  w.out = {self.data_ptr(), dt, 0, {}};
  w.b = {self.data_ptr(), dt, 0, {}};
  w.a = {const_cast<void*>(v.const_data_ptr()), dt, 0, {}};
  w.cond = {const_cast<void*>(m.const_data_ptr()), TNK_BOOL, 0, {}};
  for (int64_t d = 0; d < nd; d++) {
    w.out.strides[d] = w.b.strides[d] = self.stride(d);
    int64_t md = d - (nd - m.dim());
    w.cond.strides[d] = (md < 0 || m.size(md) == 1) ? 0 : m.stride(md);
  }
  launch(self.device().index(), where_task, &w, sizeof w, "aten::masked_fill_");
  return self;
}

bool masked_fill_native(const at::Tensor& self) {
  bool ok;
  to_tnk(self.scalar_type(), &ok);
  return ok && self.dim() <= TNK_MAX_DIMS &&
         at::has_internal_overlap(self) != at::MemOverlap::Yes;
}
}  // namespace

at::Tensor& masked_fill__scalar(at::Tensor& self, const at::Tensor& mask,
                                const c10::Scalar& value) {
  check_scalar_fits(value, self.scalar_type());
  if (!masked_fill_native(self))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(masked_fill_, Scalar)>::call(
        self, mask, value);
  return masked_fill_impl(self, mask,
                          at::scalar_tensor(value, at::TensorOptions(at::kCPU).dtype(self.scalar_type())));
}

at::Tensor& masked_fill__tensor(at::Tensor& self, const at::Tensor& mask,
                                const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, "
              "but got tensor with ", value.dim(), " dimension(s).");
  if (!masked_fill_native(self) || (!value.is_cpu() && value.device() != self.device()))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(masked_fill_, Tensor)>::call(
        self, mask, value);
  return masked_fill_impl(self, mask, value);
}

// ------------------------------------------------------------------- isin

at::Tensor& isin_out(const at::Tensor& elements, const at::Tensor& test, bool assume_unique,
                     bool invert, at::Tensor& out) {
  c10::ScalarType common = at::result_type(elements, test);
  bool ok;
  tnk_dtype_t dt = to_tnk(common, &ok);
  if (!ok || !tnk_isin_supported(dt) || out.scalar_type() != at::kBool ||
      test.device() != elements.device() || elements.numel() * test.numel() > (int64_t{1} << 28))
    return FALLBACK(isin_Tensor_Tensor_out, elements, test, assume_unique, invert, out);
  at::native::resize_output(out, elements.sizes());
  if (elements.numel() == 0) return out;
  at::Tensor e = elements.to(common).contiguous(), t = test.to(common).contiguous();
  into_contiguous(out, [&](at::Tensor& o) {
    tnk_isin_args_t a{};
    a.elements = e.const_data_ptr();
    a.test = t.const_data_ptr();
    a.out = o.data_ptr();
    a.n = e.numel();
    a.m = t.numel();
    a.dtype = dt;
    a.invert = invert;
    launch(elements.device().index(), isin_task, &a, sizeof a, "aten::isin");
  });
  return out;
}

at::Tensor isin(const at::Tensor& elements, const at::Tensor& test, bool assume_unique,
                bool invert) {
  at::Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  return isin_out(elements, test, assume_unique, invert, out);
}

// ------------------------------------------------------- nonzero, masked_select

namespace {
void nonzero_count_task(void* p) { tnk_count_nonzero(static_cast<tnk_nonzero_args_t*>(p)); }
void nonzero_task(void* p) { tnk_nonzero(static_cast<tnk_nonzero_args_t*>(p)); }
}  // namespace

// Data-dependent size: counts on the device, synchronises (as CUDA does),
// then writes the coordinates.
at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long "
              "but got scalar type", out.scalar_type());
  if (tnk_of(self) == TNK_DTYPE_COUNT || self.dim() > TNK_MAX_DIMS)
    return FALLBACK(nonzero_out, self, out);
  at::Tensor x = self.contiguous();
  at::Tensor count = at::empty({}, self.options().dtype(at::kLong));
  tnk_nonzero_args_t a{};
  a.in = x.const_data_ptr();
  a.numel = x.numel();
  a.ndim = static_cast<int32_t>(x.dim());
  for (int64_t d = 0; d < x.dim(); d++) a.sizes[d] = x.size(d);
  a.dtype = tnk_of(x);
  a.count = count.data_ptr<int64_t>();
  launch(self.device().index(), nonzero_count_task, &a, sizeof a, "aten::nonzero(count)");
  int64_t n = count.item<int64_t>();
  at::native::resize_output(out, {n, x.dim()});
  if (n == 0 || x.dim() == 0) return out;
  into_contiguous(out, [&](at::Tensor& o) {
    a.out = o.data_ptr();
    launch(self.device().index(), nonzero_task, &a, sizeof a, "aten::nonzero");
  });
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_out(self, out);
}

// ------------------------------------------------------ advanced indexing

namespace {
// x[indices] decomposed for the row kernel: the indexed dims made adjacent
// (moved to the front when they are not, as ATen does), the indices
// broadcast to one shape and laid out contiguously.
struct AdvancedIndex {
  at::Tensor src;                  // self, permuted when needed (a view)
  std::vector<at::Tensor> idx;     // contiguous, broadcast shape, one dtype
  int64_t first = 0, count = 0;    // indexed dims of src: [first, first + count)
  at::DimVector bshape;            // broadcast index shape
  at::DimVector result_shape;      // src[:first] + bshape + src[first + count:]
};

bool make_advanced_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& list,
                         AdvancedIndex* ai) {
  std::vector<at::Tensor> expanded;  // one entry per self dim consumed (undefined: slice)
  for (size_t i = 0; i < list.size(); i++) {
    std::optional<at::Tensor> o = list.get(i);
    if (!o.has_value() || !o->defined()) {
      expanded.emplace_back();
      continue;
    }
    at::Tensor t = *o;
    TORCH_CHECK_INDEX(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt ||
                          t.scalar_type() == at::kByte || t.scalar_type() == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
    if (t.scalar_type() == at::kByte || t.scalar_type() == at::kBool) {
      if (t.dim() == 0) return false;  // x[True]: a new dim; left to the fallback
      int64_t at_dim = static_cast<int64_t>(expanded.size());
      for (int64_t j = 0; j < t.dim(); j++) {
        TORCH_CHECK_INDEX(at_dim + j < self.dim() && t.size(j) == self.size(at_dim + j),
                          "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", at_dim + j);
      }
      at::Tensor nz = at::nonzero(t.device() == self.device() ? t : t.to(self.device()));
      for (int64_t j = 0; j < t.dim(); j++) expanded.push_back(nz.select(1, j));
    } else {
      expanded.push_back(t.device() == self.device() ? t : t.to(self.device()));
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(expanded.size()) <= self.dim(),
                    "too many indices for tensor of dimension ", self.dim(), " (got ",
                    expanded.size(), ")");
  std::vector<int64_t> dims;
  std::vector<at::Tensor> defined;
  bool mixed = false;
  for (size_t d = 0; d < expanded.size(); d++) {
    if (!expanded[d].defined()) continue;
    dims.push_back(static_cast<int64_t>(d));
    if (!defined.empty() && defined[0].scalar_type() != expanded[d].scalar_type()) mixed = true;
    defined.push_back(expanded[d]);
  }
  if (defined.empty() || defined.size() > TNK_MAX_INDICES || self.dim() > TNK_MAX_DIMS)
    return false;
  at::DimVector shape(defined[0].sizes().begin(), defined[0].sizes().end());
  for (size_t k = 1; k < defined.size(); k++) {
    try {
      shape = at::infer_size_dimvector(shape, defined[k].sizes());
    } catch (const c10::Error&) {
      std::string shapes;
      for (auto& t : defined) shapes += (shapes.empty() ? "" : ", ") + c10::str(t.sizes());
      TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast "
                        "together with shapes ", shapes);
    }
  }
  bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  ai->src = self;
  ai->first = dims.front();
  if (!adjacent) {  // indexed dims first, the others after in order
    std::vector<int64_t> perm(dims);
    for (int64_t d = 0; d < self.dim(); d++)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
    ai->src = self.permute(perm);
    ai->first = 0;
  }
  ai->count = static_cast<int64_t>(dims.size());
  ai->bshape = shape;
  for (at::Tensor& t : defined) {
    if (mixed) t = t.to(at::kLong);
    ai->idx.push_back(t.sizes().equals(shape) ? t.contiguous() : t.expand(shape).contiguous());
  }
  for (int64_t d = 0; d < ai->first; d++) ai->result_shape.push_back(ai->src.size(d));
  for (int64_t s : shape) ai->result_shape.push_back(s);
  for (int64_t d = ai->first + ai->count; d < ai->src.dim(); d++)
    ai->result_shape.push_back(ai->src.size(d));
  return true;
}

void fill_advanced_args(const AdvancedIndex& ai, const at::Tensor& src_contig, void* dense,
                        int mode, tnk_index_args_t* a, const char* what) {
  a->indexed = const_cast<void*>(src_contig.const_data_ptr());
  a->dense = dense;
  a->nindex = static_cast<int32_t>(ai.count);
  for (int64_t k = 0; k < ai.count; k++) {
    a->index[k] = ai.idx[k].const_data_ptr();
    a->size[k] = ai.src.size(ai.first + k);
    a->index_stride[k] = 1;
  }
  a->outer = 1;
  for (int64_t d = 0; d < ai.first; d++) a->outer *= ai.src.size(d);
  a->inner = 1;
  for (int64_t d = ai.first + ai.count; d < ai.src.dim(); d++) a->inner *= ai.src.size(d);
  a->n = 1;
  for (int64_t s : ai.bshape) a->n *= s;
  a->dtype = tnk_of(ai.src);
  a->index_dtype = tnk_of(ai.idx[0]);
  a->mode = mode;
  a->wrap = 1;
  a->alpha = 1.0;
  // CPU raises IndexError for an advanced index out of range.
  a->fault = fault_sink(ai.src.device().index(), what, true);
}
}  // namespace

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      at::Tensor& out) {
  AdvancedIndex ai;
  if (tnk_of(self) == TNK_DTYPE_COUNT || out.scalar_type() != self.scalar_type() ||
      !make_advanced_index(self, indices, &ai))
    return FALLBACK(index_Tensor_out, self, indices, out);
  at::native::resize_output(out, ai.result_shape);
  if (out.numel() == 0) return out;
  for (int64_t k = 0; k < ai.count; k++)  // indexing an empty dim with any index
    TORCH_CHECK_INDEX(ai.src.size(ai.first + k) > 0, "index is out of bounds for dimension ",
                      "with size 0");
  at::Tensor x = ai.src.contiguous();
  into_contiguous(out, [&](at::Tensor& o) {
    tnk_index_args_t a{};
    fill_advanced_args(ai, x, o.data_ptr(), TNK_INDEX_SELECT, &a, "index");
    launch(self.device().index(), index_task, &a, sizeof a, "aten::index");
  });
  return out;
}

at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::Tensor out = at::empty({0}, self.options());
  return index_out(self, indices, out);
}

at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe) {
  AdvancedIndex ai;
  int mode = accumulate ? TNK_INDEX_ADD : TNK_INDEX_PUT;
  tnk_dtype_t dt = tnk_of(self);
  // Into an expanded tensor ATen still writes, element by element, with a
  // deprecation warning: the CPU path gives its exact result.
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes ||
      dt == TNK_DTYPE_COUNT || !tnk_index_supported(dt, TNK_I64, mode) ||
      values.device() != self.device() || !make_advanced_index(self, indices, &ai))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_index_put_impl_)>::call(
        self, indices, values, accumulate, unsafe);
  TORCH_CHECK(values.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(),
              " for the source.");
  TORCH_CHECK(at::is_expandable_to(values.sizes(), ai.result_shape), "shape mismatch: value "
              "tensor of shape ", values.sizes(), " cannot be broadcast to indexing result of "
              "shape ", at::IntArrayRef(ai.result_shape));
  int64_t n = 1;
  for (int64_t s : ai.result_shape) n *= s;
  if (n == 0) return self;
  at::Tensor v = values.expand(ai.result_shape).contiguous();
  if (v.storage().is_alias_of(self.storage())) v = v.clone();
  bool direct = ai.src.is_same(self) && self.is_contiguous();
  at::Tensor x = direct ? self : ai.src.contiguous();
  tnk_index_args_t a{};
  fill_advanced_args(ai, x, v.data_ptr(), mode, &a, "index_put");
  launch(self.device().index(), index_task, &a, sizeof a, "aten::index_put_");
  if (!direct) ai.src.copy_(x);
  return self;
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_select: expected BoolTensor for mask");
  check_same_device(self, mask);
  auto shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  at::Tensor s = self.expand(shape), m = mask.expand(shape);
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(m.dim() ? std::optional<at::Tensor>(m) : std::nullopt);
  if (m.dim() == 0 || tnk_of(self) == TNK_DTYPE_COUNT)
    return FALLBACK(masked_select_out, self, mask, out);
  return index_out(s, idx, out);
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

// ------------------------------------------------------------ sort / topk

namespace {
void sort_task(void* p) { tnk_sort(static_cast<tnk_sort_args_t*>(p)); }
void histc_task(void* p) { tnk_histc(static_cast<tnk_histc_args_t*>(p)); }

// Sorts (k = size along dim) or selects the top k along dim into values and
// indices, resized to self's shape with dim of size k.
void sort_into(const at::Tensor& self, int64_t dim, int64_t k, bool descending,
               at::Tensor& values, at::Tensor& indices, const char* name) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim()) shape[dim] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  int64_t len = self.dim() ? self.size(dim) : 1;
  if (values.numel() == 0 || len == 0) return;
  bool last = self.dim() == 0 || dim == self.dim() - 1;
  at::Tensor x = last ? self.contiguous() : self.movedim(dim, -1).contiguous();
  std::vector<int64_t> moved = x.sizes().vec();
  if (!moved.empty()) moved.back() = k;
  bool direct = last && values.is_contiguous() && indices.is_contiguous() &&
                !values.storage().is_alias_of(x.storage());
  at::Tensor v = direct ? values : at::empty(moved, values.options());
  at::Tensor i = direct ? indices : at::empty(moved, indices.options());
  tnk_sort_args_t a{};
  a.in = x.const_data_ptr();
  a.values = v.data_ptr();
  a.indices = i.data_ptr();
  a.len = len;
  a.rows = x.numel() / len;
  a.k = k;
  a.dtype = tnk_of(self);
  a.descending = descending;
  launch(self.device().index(), sort_task, &a, sizeof a, name);
  if (!direct) {
    values.copy_(last ? v : v.movedim(-1, dim));
    indices.copy_(last ? i : i.movedim(-1, dim));
  }
}

bool sort_native(const at::Tensor& self) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && tnk_sort_supported(dt);
}
}  // namespace

std::tuple<at::Tensor&, at::Tensor&> sort_values_stable(const at::Tensor& self,
                                                        std::optional<bool> stable, int64_t dim,
                                                        bool descending, at::Tensor& values,
                                                        at::Tensor& indices) {
  if (!sort_native(self) || values.scalar_type() != self.scalar_type() ||
      indices.scalar_type() != at::kLong)
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(sort, values_stable)>::call(
        self, stable, dim, descending, values, indices);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  sort_into(self, d, self.dim() ? self.size(d) : 1, descending, values, indices, "aten::sort");
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor& self, std::optional<bool> stable,
                                               int64_t dim, bool descending) {
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  sort_values_stable(self, stable, dim, descending, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k_sym,
                                                 int64_t dim, bool largest, bool sorted,
                                                 at::Tensor& values, at::Tensor& indices) {
  int64_t k = k_sym.expect_int();
  int64_t d = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  int64_t len = self.dim() ? self.size(d) : 1;
  TORCH_CHECK(k >= 0 && k <= len, "selected index k out of range");
  if (!sort_native(self) || values.scalar_type() != self.scalar_type() ||
      indices.scalar_type() != at::kLong)
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP2(topk, values)>::call(
        self, k_sym, dim, largest, sorted, values, indices);
  sort_into(self, d, k, largest, values, indices, "aten::topk");
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                        bool largest, bool sorted) {
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  topk_values(self, k, dim, largest, sorted, values, indices);
  return {values, indices};
}

// histc: floating inputs as on CPU; integer inputs as CUDA takes them
// (MoE routers count tokens per expert with torch.histc on int ids), with
// counts in the input's dtype.
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const c10::Scalar& min,
                      const c10::Scalar& max, at::Tensor& out) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  tnk_dtype_t dt = tnk_of(self);
  bool ok;
  tnk_dtype_t odt = to_tnk(out.scalar_type(), &ok);
  if (dt == TNK_DTYPE_COUNT || !ok || !tnk_histc_supported(dt, odt) ||
      out.scalar_type() != self.scalar_type())
    return FALLBACK(histc_out, self, bins, min, max, out);
  double lo = min.toDouble(), hi = max.toDouble();
  if (lo == hi && self.numel() > 0) {  // the data's range (synchronises, as CPU and CUDA do)
    lo = at::min(self).item<double>();
    hi = at::max(self).item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  at::native::resize_output(out, {bins});
  at::Tensor x = self.contiguous();
  into_contiguous(out, [&](at::Tensor& o) {
    tnk_histc_args_t a{};
    a.in = x.numel() ? x.const_data_ptr() : nullptr;
    a.out = o.data_ptr();
    a.n = x.numel();
    a.bins = bins;
    a.lo = lo;
    a.hi = hi;
    a.dtype = dt;
    a.out_dtype = odt;
    launch(self.device().index(), histc_task, &a, sizeof a, "aten::histc");
  });
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min,
                 const c10::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
  m.impl("index_add", index_add);
  m.impl("index_add_", index_add_);
  m.impl("index_add.out", index_add_out);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("gather", gather);
  m.impl("gather.out", gather_out);
  m.impl("scatter.src", scatter_src);
  m.impl("scatter_.src", scatter_src_);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value", scatter_value);
  m.impl("scatter_.value", scatter_value_);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter_add", scatter_add);
  m.impl("scatter_add_", scatter_add_);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two", scatter_reduce);
  m.impl("scatter_reduce_.two", scatter_reduce_);
  m.impl("scatter_reduce.two_out", scatter_reduce_out);
  m.impl("nll_loss_forward", nll_loss_forward);
  m.impl("nll_loss_backward", nll_loss_backward);
  m.impl("argmax", argmax);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin", argmin);
  m.impl("argmin.out", argmin_out);
  m.impl("max.dim", max_dim);
  m.impl("min.dim", min_dim);
  m.impl("_logcumsumexp", logcumsumexp);
  m.impl("_logcumsumexp.out", logcumsumexp_out);
  m.impl("cumsum", cumsum);
  m.impl("cumsum.out", cumsum_out);
  m.impl("cumsum_", cumsum_);
  m.impl("cumprod", cumprod);
  m.impl("cumprod.out", cumprod_out);
  m.impl("cumprod_", cumprod_);
  m.impl("masked_fill_.Scalar", masked_fill__scalar);
  m.impl("masked_fill_.Tensor", masked_fill__tensor);
  m.impl("isin.Tensor_Tensor", isin);
  m.impl("isin.Tensor_Tensor_out", isin_out);
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzero_out);
  m.impl("index.Tensor", index);
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put_impl_);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("sort.stable", sort_stable);
  m.impl("sort.values_stable", sort_values_stable);
  m.impl("topk", topk);
  m.impl("topk.values", topk_values);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
}

}  // namespace torch_neuronx
