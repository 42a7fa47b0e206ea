// Indexing and selection (index.c, select.c): index_select, index_add,
// gather/scatter, masked_fill, isin, nonzero, advanced indexing and
// index_put, masked_select, where, tril/triu, embeddings (dense backward,
// max_norm renorm, embedding_bag), and the index-built composites (flip,
// roll, bincount, unfold_backward, reflection/replication padding).
// Over 1,000 lines on purpose: one integration point (ATen's own
// TensorAdvancedIndexing.cpp holds the same family), and every C++ unit
// that includes ATen's operator headers costs about a minute to compile on
// a two-core host, so the family stays one unit.
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {

namespace {

void check_same_device(const at::Tensor &a, const at::Tensor &b) {
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but found at least two "
              "devices, ",
              a.device(), " and ", b.device(), "!");
}
}  // namespace

namespace {
// A CPU scalar operand becomes a 0-dim device tensor (filled on the stream,
// no synchronisation), so the kernel never reads host memory later.
at::Tensor on_device(const at::Tensor &t, c10::Device dev, c10::ScalarType dt) {
  if (t.is_cpu() && t.dim() == 0)
    return at::full({}, t.item(), at::TensorOptions().device(dev).dtype(dt));
  return t.scalar_type() == dt ? t : t.to(dt);
}

}  // namespace

// flip: a reversed view (negative strides are not allowed in a tensor, so
// the index kernel gathers rows in reverse along each flipped dim).
at::Tensor flip(const at::Tensor &self, at::IntArrayRef dims) {
  at::Tensor r = self;
  auto flags = at::dim_list_to_bitset(dims, self.dim());
  for (int64_t d = 0; d < self.dim(); d++) {
    if (!flags[d] || self.size(d) < 2) continue;
    at::Tensor idx = at::arange(self.size(d) - 1, -1, -1, self.options().dtype(at::kLong));
    r = r.index_select(d, idx);
  }
  return r.is_same(self) ? self.clone() : r;
}

// roll: two slice copies per rolled dimension.
at::Tensor roll(const at::Tensor &self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1)
    return torch_neuronx::roll(self.flatten(), shifts, at::IntArrayRef{0}).view(self.sizes());
  TORCH_CHECK(shifts.size() == dims.size(),
              "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  at::Tensor r = self;
  for (size_t k = 0; k < dims.size(); k++) {
    int64_t d = at::maybe_wrap_dim(dims[k], self.dim());
    int64_t n = r.size(d);
    if (n == 0) continue;
    int64_t sft = ((shifts[k] % n) + n) % n;
    if (sft == 0) continue;
    r = at::cat({r.narrow(d, n - sft, sft), r.narrow(d, 0, n - sft)}, d);
  }
  return r.is_same(self) ? self.clone() : r;
}

// bincount: the output length needs the largest value (a sync, as on CPU).
at::Tensor bincount(const at::Tensor &self, const std::optional<at::Tensor> &weights,
                    int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && c10::isIntegralType(self.scalar_type(), false),
              "bincount only supports 1-d non-negative integral inputs.");
  bool has_w = weights.has_value() && weights->defined();
  if (has_w)
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  int64_t len = minlength;
  if (self.numel()) {
    TORCH_CHECK(self.min().item<int64_t>() >= 0,
                "bincount only supports 1-d non-negative integral inputs.");
    len = std::max(len, self.max().item<int64_t>() + 1);
  }
  at::ScalarType ot = !has_w                                 ? at::kLong
                      : weights->scalar_type() == at::kFloat ? at::kFloat
                                                             : at::kDouble;
  at::Tensor out = at::zeros({len}, self.options().dtype(ot));
  if (!self.numel()) return out;
  at::Tensor src = has_w ? weights->to(ot) : at::ones({self.size(0)}, out.options());
  return out.index_add_(0, self.to(at::kLong), src);
}

// unfold's backward: each window's gradient added back at its positions
// (one index_add over all windows; overlapping windows accumulate).
at::Tensor unfold_backward(const at::Tensor &grad, c10::SymIntArrayRef input_sizes, int64_t dim,
                           int64_t size, int64_t step) {
  std::vector<int64_t> sizes;
  for (const auto &v : input_sizes) sizes.push_back(v.expect_int());
  int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t d = nd ? at::maybe_wrap_dim(dim, nd) : 0;
  at::Tensor out = at::zeros(sizes, grad.options());
  if (grad.numel() == 0 || nd == 0) return nd ? out : grad.reshape(at::IntArrayRef{});
  int64_t windows = grad.size(d);
  std::vector<int64_t> idx;
  idx.reserve(windows * size);
  idx.resize(windows * size);
  tnk_unfold_index(windows, size, step, idx.data());
  at::Tensor index = at::tensor(idx, at::kLong).to(grad.device());
  // [..., windows, ..., size] -> [..., windows * size, ...]
  at::Tensor g = grad.movedim(-1, d + 1).flatten(d, d + 1);
  return out.index_add_(d, index, g);
}

// Reflection / replication padding as an index gather per padded dim (the
// index lists are shape metadata, built on the host); backward scatter-adds.
namespace {
at::Tensor pad_index(int64_t n, int64_t lo, int64_t hi, bool reflect, const at::Tensor &like) {
  std::vector<int64_t> idx;
  idx.reserve(n + lo + hi);
  idx.resize(n + lo + hi);
  tnk_pad_index(n, lo, hi, reflect, idx.data());
  return at::tensor(idx, at::kLong).to(like.device());
}

void check_pad(const at::Tensor &x, at::IntArrayRef pad, int64_t k, bool reflect,
               const char *name) {
  TORCH_CHECK(static_cast<int64_t>(pad.size()) == 2 * k, name, ": padding size is expected to be ",
              2 * k, ", but got: ", pad.size());
  TORCH_CHECK(x.dim() == k + 1 || x.dim() == k + 2, "Expected ", k + 1, "D or ", k + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions "
              "for input, but got: ",
              x.sizes());
  for (int64_t i = 0; i < k; i++) {
    int64_t d = x.dim() - 1 - i, n = x.size(d);
    int64_t lo = pad[2 * i], hi = pad[2 * i + 1];
    if (reflect)
      TORCH_CHECK(lo < n && hi < n, "Argument #", 4 + 2 * i,
                  ": Padding size should be less than the corresponding input dimension, but "
                  "got: padding (",
                  lo, ", ", hi, ") at dimension ", d, " of input ", x.sizes());
    TORCH_CHECK(n + lo + hi >= 1, "input (", x.sizes(), ") is too small. Calculated output ",
                "size: ", n + lo + hi);
  }
}

at::Tensor pad_forward(const at::Tensor &x, at::IntArrayRef pad, int64_t k, bool reflect,
                       const char *name) {
  check_pad(x, pad, k, reflect, name);
  at::Tensor r = x;
  for (int64_t i = 0; i < k; i++) {
    int64_t d = x.dim() - 1 - i;
    r = r.index_select(d, pad_index(x.size(d), pad[2 * i], pad[2 * i + 1], reflect, x));
  }
  return r;
}

at::Tensor pad_backward(const at::Tensor &g, const at::Tensor &x, at::IntArrayRef pad, int64_t k,
                        bool reflect) {
  at::Tensor r = g;
  for (int64_t i = k - 1; i >= 0; i--) {
    int64_t d = x.dim() - 1 - i;
    auto sizes = r.sizes().vec();
    sizes[d] = x.size(d);
    r = at::zeros(sizes, g.options())
            .index_add_(d, pad_index(x.size(d), pad[2 * i], pad[2 * i + 1], reflect, x), r);
  }
  return r;
}
}  // namespace

#define NEURON_PAD(NAME, K, REFLECT)                                                             \
  at::Tensor &NAME##_out(const at::Tensor &x, at::IntArrayRef pad, at::Tensor &out) {            \
    at::Tensor r = pad_forward(x, pad, K, REFLECT, #NAME);                                       \
    return assign_result(out, r);                                                                \
  }                                                                                              \
  at::Tensor NAME(const at::Tensor &x, at::IntArrayRef pad) {                                    \
    return pad_forward(x, pad, K, REFLECT, #NAME);                                               \
  }                                                                                              \
  at::Tensor &NAME##_backward_out(const at::Tensor &g, const at::Tensor &x, at::IntArrayRef pad, \
                                  at::Tensor &gin) {                                             \
    at::Tensor r = pad_backward(g, x, pad, K, REFLECT);                                          \
    return assign_result(gin, r);                                                                \
  }                                                                                              \
  at::Tensor NAME##_backward(const at::Tensor &g, const at::Tensor &x, at::IntArrayRef pad) {    \
    return pad_backward(g, x, pad, K, REFLECT);                                                  \
  }
NEURON_PAD(reflection_pad1d, 1, true)
NEURON_PAD(reflection_pad2d, 2, true)
NEURON_PAD(replication_pad1d, 1, false)
NEURON_PAD(replication_pad2d, 2, false)

// ------------------------------------------------------------------ where

at::Tensor &where_out(const at::Tensor &cond, const at::Tensor &self, const at::Tensor &other,
                      at::Tensor &out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              cond.scalar_type());
  c10::Device dev = out.device();
  for (const at::Tensor *t : {&cond, &self, &other})
    TORCH_CHECK(t->device() == dev || (t->is_cpu() && t->dim() == 0),
                "Expected all tensors to be on the same device, but found at least two "
                "devices, ",
                dev, " and ", t->device(), "!");
  c10::ScalarType common = at::result_type(self, other);
  auto shape =
      at::infer_size_dimvector(at::infer_size_dimvector(cond.sizes(), self.sizes()), other.sizes());
  bool ok;
  to_tnk(common, &ok);
  if (!ok || out.scalar_type() != common || shape.size() > TNRT_MAX_DIMS)
    return FALLBACK(where_self_out, cond, self, other, out);
  resize_elementwise_out(out, shape, {&cond, &self, &other});
  if (out.numel() == 0) return out;
  at::Tensor c = on_device(cond, dev, at::kBool), a = on_device(self, dev, common),
             b = on_device(other, dev, common);
  at::assert_no_internal_overlap(out);
  for (at::Tensor *t : {&c, &a, &b}) *t = readable_input(out, *t);
  tnk_where_args_t w{};
  w.shape.ndim = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); d++) w.shape.sizes[d] = shape[d];
  w.out = {out.data_ptr(), to_tnk(common, &ok), 0, {}};
  fill_strides(out, shape, w.out.strides);
  w.cond = {const_cast<void *>(c.const_data_ptr()), TNK_BOOL, 0, {}};
  fill_strides(c, shape, w.cond.strides);
  w.a = {const_cast<void *>(a.const_data_ptr()), w.out.dtype, 0, {}};
  fill_strides(a, shape, w.a.strides);
  w.b = {const_cast<void *>(b.const_data_ptr()), w.out.dtype, 0, {}};
  fill_strides(b, shape, w.b.strides);
  launch_kernel<TNK_K_WHERE>(dev.index(), w, "aten::where", out.numel());
  return out;
}

at::Tensor where(const at::Tensor &cond, const at::Tensor &self, const at::Tensor &other) {
  c10::Device dev = cond.is_privateuseone()   ? cond.device()
                    : self.is_privateuseone() ? self.device()
                                              : other.device();
  at::Tensor out =
      at::empty({0}, at::TensorOptions().device(dev).dtype(at::result_type(self, other)));
  return where_out(cond, self, other, out);
}

// ------------------------------------------------------------ tril / triu

namespace {
at::Tensor &tri_into(at::Tensor &out, const at::Tensor &self, int64_t k, bool upper,
                     const char *name) {
  TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
  at::Tensor x = self.contiguous();
  at::native::resize_output(out, self.sizes());
  at::Tensor o = out.is_contiguous() && !(out.storage().is_alias_of(x.storage()) && !out.is_same(x))
                     ? out
                     : at::empty(self.sizes(), self.options());
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
    if (!ok)
      a.dtype = self.itemsize() == 1   ? TNK_U8
                : self.itemsize() == 2 ? TNK_I16
                : self.itemsize() == 4 ? TNK_I32
                                       : TNK_I64;
    launch_kernel<TNK_K_TRI>(self.device().index(), a, name);
  }
  if (!o.is_same(out)) out.copy_(o);
  return out;
}
}  // namespace

at::Tensor tril(const at::Tensor &self, int64_t k) {
  at::Tensor out = at::empty({0}, self.options());
  return tri_into(out, self, k, false, "aten::tril");
}
at::Tensor &tril_out(const at::Tensor &self, int64_t k, at::Tensor &out) {
  return tri_into(out, self, k, false, "aten::tril");
}
at::Tensor &tril_(at::Tensor &self, int64_t k) {
  return tri_into(self, self, k, false, "aten::tril_");
}
at::Tensor triu(const at::Tensor &self, int64_t k) {
  at::Tensor out = at::empty({0}, self.options());
  return tri_into(out, self, k, true, "aten::triu");
}
at::Tensor &triu_out(const at::Tensor &self, int64_t k, at::Tensor &out) {
  return tri_into(out, self, k, true, "aten::triu");
}
at::Tensor &triu_(at::Tensor &self, int64_t k) {
  return tri_into(self, self, k, true, "aten::triu_");
}

// ---------------------------------------------------------- index_select

at::Tensor &index_select_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                             at::Tensor &out) {
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
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_index_args_t a{};
    a.nindex = 1;
    a.indexed = const_cast<void *>(x.const_data_ptr());
    a.dense = o.data_ptr();
    a.index[0] = index.const_data_ptr();
    split_dims(self.sizes(), dim, &a.outer, &a.inner);
    a.size[0] = self.size(dim);
    a.n = index.numel();
    a.index_stride[0] = index.dim() ? index.stride(0) : 0;
    a.dtype = tnk_of(self);
    a.index_dtype = tnk_of(index);
    a.fault = fault_sink(self.device().index(), "index_select", true);
    launch_kernel<TNK_K_INDEX>(self.device().index(), a, "aten::index_select");
  });
  return out;
}

at::Tensor index_select(const at::Tensor &self, int64_t dim, const at::Tensor &index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

// -------------------------------------------------------------- index_add

namespace {
// out's rows at index along d (a 0-d out: its one element) combined with
// the contiguous src's, in index order, by mode: TNK_INDEX_PUT sets them,
// TNK_INDEX_ADD adds alpha times them. wrap: negative indices count from
// the end. A bad index is a fault raised at the next sync, as CPU's
// IndexError (index_error) or RuntimeError.
void index_rows(at::Tensor &out, int64_t d, const at::Tensor &index, const at::Tensor &src,
                int mode, double alpha, bool wrap, bool index_error, const char *what,
                const char *name) {
  bool scalar = out.dim() == 0;
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_index_args_t a{};
    a.nindex = 1;
    a.indexed = o.data_ptr();
    a.dense = const_cast<void *>(src.const_data_ptr());
    a.index[0] = index.const_data_ptr();
    split_dims(scalar ? at::IntArrayRef{1} : o.sizes(), d, &a.outer, &a.inner);
    a.size[0] = scalar ? 1 : o.size(d);
    a.n = index.numel();
    a.index_stride[0] = index.dim() ? index.stride(0) : 0;
    a.dtype = tnk_of(o);
    a.index_dtype = tnk_of(index);
    a.mode = mode;
    a.alpha = alpha;
    a.wrap = wrap;
    a.fault = fault_sink(o.device().index(), what, index_error);
    launch_kernel<TNK_K_INDEX>(o.device().index(), a, name);
  });
}

// out already holds self's values; adds alpha * source rows at index.
void index_add_into(at::Tensor &out, int64_t dim, const at::Tensor &index, const at::Tensor &source,
                    double alpha, const char *what) {
  if (index.numel() == 0 || out.numel() == 0) return;
  index_rows(out, dim, index, source.contiguous(), TNK_INDEX_ADD, alpha, false, false, what,
             "aten::index_add");  // CPU: RuntimeError
}

bool index_add_native(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                      const at::Tensor &source) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT &&
         kernel_supported(TNK_K_INDEX, kernel_query(-1, dt, tnk_of(index), TNK_INDEX_ADD)) &&
         index.dim() <= 1 && source.scalar_type() == self.scalar_type() &&
         index.device() == self.device() && source.device() == self.device() && self.dim() > 0 &&
         source.dim() == self.dim();
}

void check_index_add(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                     const at::Tensor &source) {
  TORCH_CHECK_INDEX(index.numel() == source.size(dim), "index_add_(): Number of indices (",
                    index.numel(), ") should be equal to source.size(dim) (", source.size(dim),
                    ")");
  for (int64_t d = 0; d < self.dim(); d++)
    if (d != dim)
      TORCH_CHECK(self.size(d) == source.size(d), "index_add_(): self (", self.sizes(),
                  ") and source (", source.sizes(),
                  ") must have the same size in every "
                  "dimension except dim ",
                  dim);
}
}  // namespace

at::Tensor &index_add_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                          const at::Tensor &source, const c10::Scalar &alpha, at::Tensor &out) {
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

at::Tensor &index_add_(at::Tensor &self, int64_t dim, const at::Tensor &index,
                       const at::Tensor &source, const c10::Scalar &alpha) {
  return index_add_out(self, dim, index, source, alpha, self);
}

at::Tensor index_add(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                     const at::Tensor &source, const c10::Scalar &alpha) {
  at::Tensor out = at::empty({0}, self.options());
  return index_add_out(self, dim, index, source, alpha, out);
}

// ------------------------------------------------------------- index_copy

// self's rows at index (along dim) set from source's, in index order (a row
// named twice gets the last, as on CPU): the index kernel's put mode, so a
// static KV cache's update stays on the device, without a host sync, and
// can be captured. An index out of range is a fault raised as CPU's
// IndexError at the next synchronisation (as CUDA's device-side assert).
// Anything CPU would reject before looking at the indices (not int64, not
// 1-d, other dtypes or shapes) goes to the CPU kernel, for its errors.
at::Tensor &index_copy_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                           const at::Tensor &source, at::Tensor &out) {
  int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/false) : 0;
  tnk_dtype_t dt = tnk_of(self);
  bool scalar = self.dim() == 0;  // (a 0-d self, source and 1-element index: one row)
  bool native = (!scalar || dim == 0 || dim == -1) && source.dim() == self.dim() &&
                index.dim() <= 1 && index.scalar_type() == at::kLong &&
                source.scalar_type() == self.scalar_type() &&
                out.scalar_type() == self.scalar_type() && index.device() == self.device() &&
                source.device() == self.device() && dt != TNK_DTYPE_COUNT &&
                kernel_supported(TNK_K_INDEX, kernel_query(-1, dt, TNK_I64, TNK_INDEX_PUT)) &&
                index.numel() == (scalar ? 1 : source.size(d));
  for (int64_t k = 0; native && k < self.dim(); k++)
    native = k == d || self.size(k) == source.size(k);
  if (!native) return FALLBACK(index_copy_out, self, dim, index, source, out);
  at::assert_no_internal_overlap(out);  // CPU's checks, in its order
  at::assert_no_overlap(out, index);
  at::assert_no_overlap(out, source);
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  if (index.numel() == 0 || out.numel() == 0) return out;
  index_rows(out, d, index, source.contiguous(), TNK_INDEX_PUT, 0, false, true, "index_copy_",
             "aten::index_copy");
  return out;
}

at::Tensor &index_copy_(at::Tensor &self, int64_t dim, const at::Tensor &index,
                        const at::Tensor &source) {
  return index_copy_out(self, dim, index, source, self);
}

at::Tensor index_copy(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                      const at::Tensor &source) {
  at::Tensor out = at::empty({0}, self.options());
  return index_copy_out(self, dim, index, source, out);
}

// ------------------------------------------------------------- index_fill

// self's rows at index (along dim; negative indices count from the end) set
// to value: the put mode from a filled block of the rows' shape. Anything
// CPU refuses or warns about (index not int64 or not 1-d, an expanded self,
// a complex value into a real self) goes to the CPU kernel.
at::Tensor &index_fill_(at::Tensor &self, int64_t dim, const at::Tensor &index,
                        const c10::Scalar &value) {
  tnk_dtype_t dt = tnk_of(self);
  bool native = index.scalar_type() == at::kLong && index.dim() <= 1 &&
                index.device() == self.device() && dt != TNK_DTYPE_COUNT &&
                kernel_supported(TNK_K_INDEX, kernel_query(-1, dt, TNK_I64, TNK_INDEX_PUT)) &&
                (self.is_complex() || !value.isComplex()) &&
                at::has_internal_overlap(self) != at::MemOverlap::Yes;
  if (!native) return FALLBACK(index_fill__int_Scalar, self, dim, index, value);
  at::assert_no_overlap(self, index);
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (index.numel() == 0 || self.numel() == 0) return self;
  auto rows = self.dim() ? self.sizes().vec() : std::vector<int64_t>{1};
  rows[d] = index.numel();
  at::Tensor block = at::full(rows, value, self.options());
  index_rows(self, d, index, block, TNK_INDEX_PUT, 0, true, true, "index_fill_",
             "aten::index_fill_");
  return self;
}

at::Tensor &index_fill_tensor_(at::Tensor &self, int64_t dim, const at::Tensor &index,
                               const at::Tensor &value) {
  TORCH_CHECK(value.dim() == 0,
              "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return index_fill_(self, dim, index, value.item());
}

// ------------------------------------------------------------- embedding

at::Tensor embedding_dense_backward(const at::Tensor &grad, const at::Tensor &indices,
                                    c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
  int64_t nw = num_weights.expect_int(), pad = padding_idx.expect_int();
  tnk_dtype_t dt = tnk_of(grad);
  if (scale_grad_by_freq || dt == TNK_DTYPE_COUNT ||
      !kernel_supported(TNK_K_INDEX, kernel_query(-1, dt, tnk_of(indices), TNK_INDEX_ADD)) ||
      !at::isFloatingType(grad.scalar_type()) || indices.device() != grad.device())
    return at::native::call_fallback_fn_symint<
        &neuron_cpu_fallback, ATEN_OP(embedding_dense_backward)>::call(grad, indices, num_weights,
                                                                       padding_idx,
                                                                       scale_grad_by_freq);
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
    a.dense = const_cast<void *>(g.const_data_ptr());
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
    launch_kernel<TNK_K_INDEX>(grad.device().index(), a, "aten::embedding_dense_backward");
  }
  return half ? acc.to(grad.scalar_type()) : acc;
}

// --------------------------------------------------------- gather/scatter

namespace {
void fill_view(const at::Tensor &t, int64_t nd, tnk_view_t *v) {
  v->data = const_cast<void *>(t.const_data_ptr());
  v->dtype = tnk_of(t);
  for (int64_t d = 0; d < nd; d++) v->strides[d] = t.dim() ? t.stride(d) : 0;
}

// Launches one gather/scatter over index's shape. `indexed` is self for
// the scatters (written in place) and the source of gather.
void launch_gather(const at::Tensor &indexed, const at::Tensor &dense, const at::Tensor &index0,
                   int64_t dim, int mode, const c10::Scalar *value, const char *what) {
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
    if (a.value.is_bool || a.value.is_integral)
      a.value.i = value->toLong();
    else
      a.value.f = value->toDouble();
  }
  a.fault = fault_sink(indexed.device().index(), what, false);
  launch_kernel<TNK_K_GATHER>(indexed.device().index(), a, what);
}

void check_gather_shapes(const char *name, const at::Tensor &self, int64_t dim,
                         const at::Tensor &index, const at::Tensor *src) {
  TORCH_CHECK(
      index.numel() == 0 || index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
      name, "(): Expected dtype int32/int64 for index");
  int64_t sd = std::max<int64_t>(self.dim(), 1), id = std::max<int64_t>(index.dim(), 1);
  TORCH_CHECK(index.numel() == 0 || sd == id,
              "Index tensor must have the same number of "
              "dimensions as ",
              src ? "self" : "input", " tensor");
  if (index.numel() == 0) return;
  for (int64_t d = 0; d < index.dim(); d++) {
    int64_t isz = index.size(d);
    if (d != dim)
      TORCH_CHECK(isz <= (self.dim() ? self.size(d) : 1), "Size does not match at dimension ", d,
                  " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                  " apart from dimension ", dim);
    if (src)
      TORCH_CHECK(isz <= (src->dim() ? src->size(d) : 1), "Size does not match at dimension ", d,
                  " expected index ", index.sizes(), " to be no larger than src ", src->sizes());
  }
}

bool gather_native(const at::Tensor &self, const at::Tensor &index, const at::Tensor *src,
                   int mode) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_GATHER, kernel_query(-1, dt, -1, mode)) &&
         index.device() == self.device() && index.dim() <= TNRT_MAX_DIMS &&
         (!src || (src->device() == self.device() && src->scalar_type() == self.scalar_type()));
}
}  // namespace

at::Tensor &gather_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                       bool sparse_grad, at::Tensor &out) {
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

at::Tensor gather(const at::Tensor &self, int64_t dim, const at::Tensor &index, bool sparse_grad) {
  at::Tensor out = at::empty({0}, self.options());
  return gather_out(self, dim, index, sparse_grad, out);
}

namespace {
// The scatter family on a result that already holds self's values.
at::Tensor &scatter_core(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                         const at::Tensor *src, const c10::Scalar *value, int mode, at::Tensor &out,
                         const char *name) {
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
  at::Tensor &FN##_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,        \
                       const at::Tensor &src, at::Tensor &out) {                            \
    if (!gather_native(self, index, &src, MODE) || out.scalar_type() != self.scalar_type()) \
      return FALLBACK(OPNAME, self, dim, index, src, out);                                  \
    return scatter_core(self, dim, index, &src, nullptr, MODE, out, NAME);                  \
  }                                                                                         \
  at::Tensor &FN##_(at::Tensor &self, int64_t dim, const at::Tensor &index,                 \
                    const at::Tensor &src) {                                                \
    return FN##_out(self, dim, index, src, self);                                           \
  }                                                                                         \
  at::Tensor FN(const at::Tensor &self, int64_t dim, const at::Tensor &index,               \
                const at::Tensor &src) {                                                    \
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
    case at::kInt:
      return hi ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    default: return hi ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
}
}  // namespace

at::Tensor &scatter_reduce_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                               const at::Tensor &src, c10::string_view reduce, bool include_self,
                               at::Tensor &out) {
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
    if (at::isFloatingType(out.scalar_type()))
      out.div_(count);
    else
      out.div_(count, "floor");
  }
  return out;
}
at::Tensor &scatter_reduce_(at::Tensor &self, int64_t dim, const at::Tensor &index,
                            const at::Tensor &src, c10::string_view reduce, bool include_self) {
  return scatter_reduce_out(self, dim, index, src, reduce, include_self, self);
}
at::Tensor scatter_reduce(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                          const at::Tensor &src, c10::string_view reduce, bool include_self) {
  at::Tensor out = at::empty({0}, self.options());
  return scatter_reduce_out(self, dim, index, src, reduce, include_self, out);
}

at::Tensor &scatter_value_out(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                              const c10::Scalar &value, at::Tensor &out) {
  check_scalar_fits(value, self.scalar_type());
  if (!gather_native(self, index, nullptr, TNK_SCATTER_VALUE) ||
      out.scalar_type() != self.scalar_type())
    return FALLBACK(scatter_value_out, self, dim, index, value, out);
  return scatter_core(self, dim, index, nullptr, &value, TNK_SCATTER_VALUE, out, "scatter");
}
at::Tensor &scatter_value_(at::Tensor &self, int64_t dim, const at::Tensor &index,
                           const c10::Scalar &value) {
  return scatter_value_out(self, dim, index, value, self);
}
at::Tensor scatter_value(const at::Tensor &self, int64_t dim, const at::Tensor &index,
                         const c10::Scalar &value) {
  at::Tensor out = at::empty({0}, self.options());
  return scatter_value_out(self, dim, index, value, out);
}

// ------------------------------------------------------------- masked_fill

namespace {
at::Tensor &masked_fill_impl(at::Tensor &self, const at::Tensor &mask, const at::Tensor &value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "The size of the mask (",
              mask.sizes(), ") must be broadcastable to the size of self (", self.sizes(), ")");
  check_same_device(self, mask);
  if (self.numel() == 0) return self;
  at::Tensor v =
      value.is_cpu() ? at::full({}, value.item(), self.options()) : value.to(self.scalar_type());
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
  w.a = {const_cast<void *>(v.const_data_ptr()), dt, 0, {}};
  w.cond = {const_cast<void *>(m.const_data_ptr()), TNK_BOOL, 0, {}};
  for (int64_t d = 0; d < nd; d++) {
    w.out.strides[d] = w.b.strides[d] = self.stride(d);
    int64_t md = d - (nd - m.dim());
    w.cond.strides[d] = (md < 0 || m.size(md) == 1) ? 0 : m.stride(md);
  }
  launch_kernel<TNK_K_WHERE>(self.device().index(), w, "aten::masked_fill_", self.numel());
  return self;
}

bool masked_fill_native(const at::Tensor &self) {
  bool ok;
  to_tnk(self.scalar_type(), &ok);
  return ok && self.dim() <= TNRT_MAX_DIMS && at::has_internal_overlap(self) != at::MemOverlap::Yes;
}
}  // namespace

at::Tensor &masked_fill__scalar(at::Tensor &self, const at::Tensor &mask,
                                const c10::Scalar &value) {
  check_scalar_fits(value, self.scalar_type());
  if (!masked_fill_native(self))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(masked_fill_, Scalar)>::call(
        self, mask, value);
  return masked_fill_impl(
      self, mask, at::scalar_tensor(value, at::TensorOptions(at::kCPU).dtype(self.scalar_type())));
}

at::Tensor &masked_fill__tensor(at::Tensor &self, const at::Tensor &mask, const at::Tensor &value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, "
              "but got tensor with ",
              value.dim(), " dimension(s).");
  if (!masked_fill_native(self) || (!value.is_cpu() && value.device() != self.device()))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(masked_fill_, Tensor)>::call(
        self, mask, value);
  return masked_fill_impl(self, mask, value);
}

// ------------------------------------------------------------------- isin

at::Tensor &isin_out(const at::Tensor &elements, const at::Tensor &test, bool assume_unique,
                     bool invert, at::Tensor &out) {
  c10::ScalarType common = at::result_type(elements, test);
  bool ok;
  tnk_dtype_t dt = to_tnk(common, &ok);
  if (!ok || !kernel_supported(TNK_K_ISIN, kernel_query(-1, dt, -1, -1)) ||
      out.scalar_type() != at::kBool || test.device() != elements.device() ||
      elements.numel() * test.numel() > (int64_t{1} << 28))
    return FALLBACK(isin_Tensor_Tensor_out, elements, test, assume_unique, invert, out);
  at::native::resize_output(out, elements.sizes());
  if (elements.numel() == 0) return out;
  at::Tensor e = elements.to(common).contiguous(), t = test.to(common).contiguous();
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_isin_args_t a{};
    a.elements = e.const_data_ptr();
    a.test = t.const_data_ptr();
    a.out = o.data_ptr();
    a.n = e.numel();
    a.m = t.numel();
    a.dtype = dt;
    a.invert = invert;
    launch_kernel<TNK_K_ISIN>(elements.device().index(), a, "aten::isin");
  });
  return out;
}

at::Tensor isin(const at::Tensor &elements, const at::Tensor &test, bool assume_unique,
                bool invert) {
  at::Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  return isin_out(elements, test, assume_unique, invert, out);
}

// ------------------------------------------------------- nonzero, masked_select

namespace {}  // namespace

// Data-dependent size: counts on the device, synchronises (as CUDA does),
// then writes the coordinates.
at::Tensor &nonzero_out(const at::Tensor &self, at::Tensor &out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long "
              "but got scalar type",
              out.scalar_type());
  if (tnk_of(self) == TNK_DTYPE_COUNT || self.dim() > TNRT_MAX_DIMS)
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
  launch_kernel<TNK_K_COUNT_NONZERO>(self.device().index(), a, "aten::nonzero(count)");
  int64_t n = count.item<int64_t>();
  at::native::resize_output(out, {n, x.dim()});
  if (n == 0 || x.dim() == 0) return out;
  into_contiguous(out, [&](at::Tensor &o) {
    a.out = o.data_ptr();
    launch_kernel<TNK_K_NONZERO>(self.device().index(), a, "aten::nonzero");
  });
  return out;
}

// The functional form is column-major ([n, ndim] with strides (1, n)), as
// CPU's and the meta function's are; out= keeps the out tensor's layout.
at::Tensor nonzero(const at::Tensor &self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_out(self, out).t().contiguous().t();
}

// ------------------------------------------------------ advanced indexing

namespace {
// x[indices] decomposed for the row kernel: the indexed dims made adjacent
// (moved to the front when they are not, as ATen does), the indices
// broadcast to one shape and laid out contiguously.
struct AdvancedIndex {
  at::Tensor src;                // self, permuted when needed (a view)
  std::vector<at::Tensor> idx;   // contiguous, broadcast shape, one dtype
  int64_t first = 0, count = 0;  // indexed dims of src: [first, first + count)
  at::DimVector bshape;          // broadcast index shape
  at::DimVector result_shape;    // src[:first] + bshape + src[first + count:]
};

bool make_advanced_index(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &list,
                         AdvancedIndex *ai) {
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
  if (defined.empty() || defined.size() > TNK_MAX_INDICES || self.dim() > TNRT_MAX_DIMS)
    return false;
  at::DimVector shape(defined[0].sizes().begin(), defined[0].sizes().end());
  for (size_t k = 1; k < defined.size(); k++) {
    try {
      shape = at::infer_size_dimvector(shape, defined[k].sizes());
    } catch (const c10::Error &) {
      std::string shapes;
      for (auto &t : defined) shapes += (shapes.empty() ? "" : ", ") + c10::str(t.sizes());
      TORCH_CHECK_INDEX(false,
                        "shape mismatch: indexing tensors could not be broadcast "
                        "together with shapes ",
                        shapes);
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
  for (at::Tensor &t : defined) {
    if (mixed) t = t.to(at::kLong);
    ai->idx.push_back(t.sizes().equals(shape) ? t.contiguous() : t.expand(shape).contiguous());
  }
  for (int64_t d = 0; d < ai->first; d++) ai->result_shape.push_back(ai->src.size(d));
  for (int64_t s : shape) ai->result_shape.push_back(s);
  for (int64_t d = ai->first + ai->count; d < ai->src.dim(); d++)
    ai->result_shape.push_back(ai->src.size(d));
  return true;
}

void fill_advanced_args(const AdvancedIndex &ai, const at::Tensor &src_contig, void *dense,
                        int mode, tnk_index_args_t *a, const char *what) {
  a->indexed = const_cast<void *>(src_contig.const_data_ptr());
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

at::Tensor &index_out(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices,
                      at::Tensor &out) {
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
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_index_args_t a{};
    fill_advanced_args(ai, x, o.data_ptr(), TNK_INDEX_SELECT, &a, "index");
    launch_kernel<TNK_K_INDEX>(self.device().index(), a, "aten::index");
  });
  return out;
}

at::Tensor index(const at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices) {
  at::Tensor out = at::empty({0}, self.options());
  return index_out(self, indices, out);
}

at::Tensor &index_put_impl_(at::Tensor &self, const c10::List<std::optional<at::Tensor>> &indices,
                            const at::Tensor &values, bool accumulate, bool unsafe) {
  AdvancedIndex ai;
  int mode = accumulate ? TNK_INDEX_ADD : TNK_INDEX_PUT;
  tnk_dtype_t dt = tnk_of(self);
  // Into an expanded tensor ATen still writes, element by element, with a
  // deprecation warning: the CPU path gives its exact result.
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes || dt == TNK_DTYPE_COUNT ||
      !kernel_supported(TNK_K_INDEX, kernel_query(-1, dt, TNK_I64, mode)) ||
      values.device() != self.device() || !make_advanced_index(self, indices, &ai))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_index_put_impl_)>::call(
        self, indices, values, accumulate, unsafe);
  TORCH_CHECK(values.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(),
              " for the source.");
  TORCH_CHECK(at::is_expandable_to(values.sizes(), ai.result_shape),
              "shape mismatch: value "
              "tensor of shape ",
              values.sizes(),
              " cannot be broadcast to indexing result of "
              "shape ",
              at::IntArrayRef(ai.result_shape));
  int64_t n = 1;
  for (int64_t s : ai.result_shape) n *= s;
  if (n == 0) return self;
  at::Tensor v = values.expand(ai.result_shape).contiguous();
  if (v.storage().is_alias_of(self.storage())) v = v.clone();
  bool direct = ai.src.is_same(self) && self.is_contiguous();
  at::Tensor x = direct ? self : ai.src.contiguous();
  tnk_index_args_t a{};
  fill_advanced_args(ai, x, v.data_ptr(), mode, &a, "index_put");
  launch_kernel<TNK_K_INDEX>(self.device().index(), a, "aten::index_put_");
  if (!direct) ai.src.copy_(x);
  return self;
}

at::Tensor &masked_select_out(const at::Tensor &self, const at::Tensor &mask, at::Tensor &out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  check_same_device(self, mask);
  auto shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  at::Tensor s = self.expand(shape), m = mask.expand(shape);
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(m.dim() ? std::optional<at::Tensor>(m) : std::nullopt);
  if (m.dim() == 0 || tnk_of(self) == TNK_DTYPE_COUNT)
    return FALLBACK(masked_select_out, self, mask, out);
  return index_out(s, idx, out);
}

at::Tensor masked_select(const at::Tensor &self, const at::Tensor &mask) {
  at::Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

namespace {

// ------------------------------------------------------------ embedding max_norm

// Rows of self at indices whose norm exceeds max_norm are scaled to
// max_norm / (norm + 1e-7), in place (a row indexed twice is written twice
// with the same value).
at::Tensor &embedding_renorm(at::Tensor &self, const at::Tensor &indices, double max_norm,
                             double norm_type) {
  TORCH_CHECK(self.dim() == 2, "'embedding_renorm_' expects 'self' to be a 2-D tensor, but got ",
              self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_(): Expected dtype int32/int64 for indices");
  if (indices.numel() == 0) return self;
  at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  at::Tensor rows = self.index_select(0, idx);
  at::Tensor norms = at::linalg_vector_norm(rows, norm_type, {1}, true);
  at::Tensor scale =
      at::where(norms > max_norm, max_norm / (norms + 1e-7), at::ones({}, norms.options()));
  c10::List<std::optional<at::Tensor>> where_{std::optional<at::Tensor>(idx)};
  self.index_put_(where_, rows * scale.to(rows.scalar_type()));
  return self;
}

// ------------------------------------------------------------- embedding_bag

// Bags in sum (0) and mean (1) mode from index_add over each index's bag id
// (offset2bag, as ATen defines it); max mode (2) from scatter_reduce amax,
// with the first index holding each column's maximum (CPU's tie rule).
struct Bags {
  at::Tensor idx, offset2bag, keep, bag_size;  // keep: 1 where idx != padding_idx
  int64_t n_bags;
};

Bags make_bags(const at::Tensor &indices, const at::Tensor &offsets, bool include_last_offset,
               int64_t padding_idx) {
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ",
              indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ",
              offsets.dim());
  Bags b;
  b.idx = indices.to(at::kLong);
  int64_t n = b.idx.numel();
  b.n_bags = offsets.numel() - (include_last_offset ? 1 : 0);
  TORCH_CHECK(b.n_bags >= 0, "include_last_offset: number of offsets should be at least 1");
  at::Tensor off = offsets.to(at::kLong).narrow(0, 0, b.n_bags);
  at::Tensor marks = at::zeros({n + 1}, b.idx.options());
  if (b.n_bags) marks.index_add_(0, off.clamp(0, n), at::ones_like(off));
  b.offset2bag = (marks.cumsum(0) - 1).narrow(0, 0, n).clamp_min(0);
  b.keep =
      padding_idx >= 0 ? b.idx.ne(padding_idx) : at::ones({n}, b.idx.options().dtype(at::kBool));
  b.bag_size = at::zeros({b.n_bags}, b.idx.options());
  if (n) b.bag_size.index_add_(0, b.offset2bag, b.keep.to(at::kLong));
  return b;
}

// What the composition covers: bags of a 2-D floating table, all on one
// device (the rest takes the CPU path).
bool bag_native(const at::Tensor &weight, const at::Tensor &indices, const at::Tensor &offsets,
                int64_t mode) {
  return mode >= 0 && mode <= 2 && c10::isFloatingType(weight.scalar_type()) && weight.dim() == 2 &&
         indices.device() == weight.device() && offsets.device() == weight.device();
}

// max mode: out[b, d] = max over the bag's non-padding rows; max_indices
// [b, d] = the first index holding it; an empty bag gives 0 and index 0.
std::tuple<at::Tensor, at::Tensor> bag_max(const at::Tensor &weight, const Bags &b) {
  const int64_t n = b.idx.numel(), D = weight.size(1);
  at::Tensor out = at::zeros({b.n_bags, D}, weight.options());
  at::Tensor maxi = at::zeros({b.n_bags, D}, b.idx.options());
  if (n == 0 || b.n_bags == 0) return {out, maxi};
  const double neg_inf = -std::numeric_limits<double>::infinity();
  at::Tensor keep = b.keep.unsqueeze(1).expand({n, D});
  at::Tensor rows = weight.index_select(0, b.idx).masked_fill(keep.logical_not(), neg_inf);
  at::Tensor bag = b.offset2bag.unsqueeze(1).expand({n, D});
  at::Tensor best = at::full({b.n_bags, D}, neg_inf, weight.options())
                        .scatter_reduce(0, bag, rows, "amax", /*include_self=*/true);
  at::Tensor hit = rows.eq(best.index_select(0, b.offset2bag)).logical_and_(keep);
  at::Tensor pos = at::arange(n, b.idx.options()).unsqueeze(1).expand({n, D});
  at::Tensor first = at::full({b.n_bags, D}, n, b.idx.options())
                         .scatter_reduce(0, bag, pos.masked_fill(hit.logical_not(), n), "amin",
                                         /*include_self=*/true);
  at::Tensor none = first.ge(n);
  maxi = b.idx.index_select(0, first.clamp_max(n - 1).reshape({-1}))
             .reshape({b.n_bags, D})
             .masked_fill_(none, 0);
  return {best.masked_fill_(none, 0), maxi};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor &weight, const at::Tensor &indices, const at::Tensor &offsets,
    bool scale_grad_by_freq, int64_t mode, bool sparse,
    const std::optional<at::Tensor> &per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  bool psw = per_sample_weights.has_value() && per_sample_weights->defined();
  if (!bag_native(weight, indices, offsets, mode))
    return FALLBACK(_embedding_bag, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                    per_sample_weights, include_last_offset, padding_idx);
  TORCH_CHECK(!psw || mode == 0,
              "embedding_bag: per_sample_weights was not None. "
              "per_sample_weights is only supported for mode='sum' (got mode='",
              mode == 1 ? "mean" : "max", "'). Please open a feature request on GitHub.");
  Bags b = make_bags(indices, offsets, include_last_offset, padding_idx);
  if (mode == 2) {
    auto [out, maxi] = bag_max(weight, b);
    return {out, b.offset2bag, b.bag_size, maxi};
  }
  int64_t D = weight.size(1);
  // fp16/bf16 bags sum in fp32 and round once, as the CPU
  const at::ScalarType acc =
      at::isReducedFloatingType(weight.scalar_type()) ? at::kFloat : weight.scalar_type();
  at::Tensor out = at::zeros({b.n_bags, D}, weight.options().dtype(acc));
  if (b.idx.numel()) {
    at::Tensor rows = weight.index_select(0, b.idx).to(acc);  // checks the index range
    at::Tensor w = b.keep.to(acc);
    if (psw) w = w * per_sample_weights->to(acc);
    out.index_add_(0, b.offset2bag, rows * w.unsqueeze(1));
    if (mode == 1) out = out / b.bag_size.clamp_min(1).to(acc).unsqueeze(1);
  }
  at::Tensor max_indices = at::zeros({b.n_bags}, b.idx.options());  // unused outside max mode
  return {out.to(weight.scalar_type()), b.offset2bag, b.bag_size, max_indices};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_forward_only(
    const at::Tensor &weight, const at::Tensor &indices, const at::Tensor &offsets,
    bool scale_grad_by_freq, int64_t mode, bool sparse,
    const std::optional<at::Tensor> &per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  if (!bag_native(weight, indices, offsets, mode))
    return FALLBACK(_embedding_bag_forward_only, weight, indices, offsets, scale_grad_by_freq, mode,
                    sparse, per_sample_weights, include_last_offset, padding_idx);
  return embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                       per_sample_weights, include_last_offset, padding_idx);
}

// d weight: each index's row receives its bag's gradient (scaled as in the
// forward; divided by the index's frequency with scale_grad_by_freq).
at::Tensor embedding_bag_dense_backward(const at::Tensor &grad, const at::Tensor &indices,
                                        const at::Tensor &offset2bag, const at::Tensor &bag_size,
                                        const at::Tensor &maximum_indices, int64_t num_weights,
                                        bool scale_grad_by_freq, int64_t mode,
                                        const std::optional<at::Tensor> &per_sample_weights,
                                        int64_t padding_idx) {
  if (mode == 2) {
    // each column's gradient goes to the row that held its maximum; empty
    // bags (index 0 by convention) give nothing; scale_grad_by_freq does
    // not apply to max mode (as on CPU)
    at::Tensor gw = at::zeros({num_weights, grad.size(1)}, grad.options());
    if (maximum_indices.numel() == 0) return gw;
    at::Tensor live = bag_size.gt(0).unsqueeze(1).expand(grad.sizes());
    at::Tensor g = grad.masked_fill(live.logical_not(), 0);
    return gw.scatter_add_(0, maximum_indices.to(at::kLong), g);
  }
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor gw = at::zeros({num_weights, grad.size(1)}, grad.options());
  if (idx.numel() == 0) return gw;
  at::Tensor g = grad.index_select(0, offset2bag);
  at::Tensor w = padding_idx >= 0 ? idx.ne(padding_idx).to(grad.scalar_type())
                                  : at::ones({idx.numel()}, grad.options());
  if (per_sample_weights.has_value() && per_sample_weights->defined())
    w = w * per_sample_weights->to(grad.scalar_type());
  if (mode == 1) w = w / bag_size.index_select(0, offset2bag).clamp_min(1).to(grad.scalar_type());
  if (scale_grad_by_freq) {
    at::Tensor counts =
        at::zeros({num_weights}, idx.options()).index_add_(0, idx, at::ones_like(idx));
    w = w / counts.index_select(0, idx).to(grad.scalar_type());
  }
  return gw.index_add_(0, idx, g * w.unsqueeze(1));
}

at::Tensor embedding_bag_backward(const at::Tensor &grad, const at::Tensor &indices,
                                  const at::Tensor &offsets, const at::Tensor &offset2bag,
                                  const at::Tensor &bag_size, const at::Tensor &maximum_indices,
                                  int64_t num_weights, bool scale_grad_by_freq, int64_t mode,
                                  bool sparse, const std::optional<at::Tensor> &per_sample_weights,
                                  int64_t padding_idx) {
  if (sparse)
    return FALLBACK(_embedding_bag_backward, grad, indices, offsets, offset2bag, bag_size,
                    maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
                    per_sample_weights, padding_idx);
  return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                      num_weights, scale_grad_by_freq, mode, per_sample_weights,
                                      padding_idx);
}

// d per_sample_weights[i] = <grad of i's bag, weight row of i> (0 at padding)
at::Tensor embedding_bag_per_sample_weights_backward(
    const at::Tensor &grad, const at::Tensor &weight, const at::Tensor &indices,
    const at::Tensor &offsets, const at::Tensor &offset2bag, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == 0,
              "embedding_bag_backward: per_sample_weights only supported for "
              "mode='sum'");
  at::Tensor idx = indices.to(at::kLong);
  if (idx.numel() == 0) return at::zeros({0}, grad.options());
  at::Tensor r = (grad.index_select(0, offset2bag) * weight.index_select(0, idx)).sum(1);
  if (padding_idx >= 0) r = r * idx.ne(padding_idx).to(r.scalar_type());
  return r;
}

}  // namespace

// ------------------------------------------ masked_scatter_, take, put_,
// count_nonzero, repeat_interleave: composites of native ops. masked_scatter_ and
// repeat_interleave need a count on the host first (one synchronisation, as
// their output or source extent depends on the data; CUDA syncs there too).

at::Tensor &masked_scatter_(at::Tensor &self, const at::Tensor &mask, const at::Tensor &source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter: expected self and source to have same dtypes but got",
              self.scalar_type(), " and ", source.scalar_type());
  at::assert_no_internal_overlap(self);
  at::Tensor m = *at::expand_inplace(self, mask, "masked_scatter_");
  int64_t count = m.numel() ? m.sum().item<int64_t>() : 0;
  TORCH_CHECK(count <= source.numel(), "Number of elements of source < number of ones in mask");
  if (count == 0) return self;
  return self.index_put_({m}, source.reshape({-1}).narrow(0, 0, count));
}

// take / put_: the tensor seen as one flat row, indexed with wrap-around of
// negative indices; advanced indexing checks the range (IndexError, at the
// next synchronisation as for every device-side index check).
at::Tensor take(const at::Tensor &self, const at::Tensor &index) {
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "take(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0,
                    "take(): tried to take from an empty tensor");
  at::Tensor flat = self.reshape({-1});
  return flat.index({index.reshape({-1})}).view(index.sizes());
}

at::Tensor &take_out(const at::Tensor &self, const at::Tensor &index, at::Tensor &out) {
  return assign_result(out, torch_neuronx::take(self, index));
}

at::Tensor &put_(at::Tensor &self, const at::Tensor &index, const at::Tensor &source,
                 bool accumulate) {
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "put_(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to have the same dtype, but got self.dtype = ",
              self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(source.numel() == index.numel(),
                    "put_(): Expected source and index to have the same number of elements, but "
                    "got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0,
                    "put_(): Tried to put elements into an empty tensor");
  at::assert_no_internal_overlap(self);
  if (index.numel() == 0) return self;
  at::Tensor work = self.is_contiguous() ? self : self.contiguous();
  work.view({-1}).index_put_({index.reshape({-1})}, source.reshape({-1}), accumulate);
  if (!work.is_same(self)) self.copy_(work);
  return self;
}

at::Tensor count_nonzero_dims(const at::Tensor &self, at::IntArrayRef dims) {
  return at::ne(self, 0).sum(dims);
}

at::Tensor repeat_interleave_counts(const at::Tensor &repeats,
                                    std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK_NOT_IMPLEMENTED(
      repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
      "\"repeat_interleave\" not implemented for '", repeats.scalar_type(), "'");
  if (repeats.numel() == 0) {
    TORCH_CHECK(!output_size.has_value() || *output_size == 0,
                "allocated size does not match required size");
    return at::empty({0}, repeats.options());
  }
  at::Tensor ends = repeats.cumsum(0, at::kLong);
  // the smallest repeat and the total in one copy to the host
  at::Tensor host = at::stack({repeats.min().to(at::kLong), ends[-1]}).cpu();
  TORCH_CHECK(host[0].item<int64_t>() >= 0, "repeats can not be negative");
  int64_t total = host[1].item<int64_t>();
  TORCH_CHECK(!output_size.has_value() || *output_size == total,
              "allocated size does not match required size");
  // entry j of the result counts the ends at or before j
  at::Tensor marks = at::zeros({total + 1}, ends.options());
  marks.index_add_(0, ends, at::ones_like(ends));
  return marks.cumsum(0).narrow(0, 0, total).to(repeats.scalar_type());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", flip);
  m.impl("masked_scatter_", masked_scatter_);
  m.impl("take", take);
  m.impl("take.out", take_out);
  m.impl("put_", put_);
  m.impl("count_nonzero.dim_IntList", count_nonzero_dims);
  m.impl("repeat_interleave.Tensor", repeat_interleave_counts);
  m.impl("roll", roll);
  m.impl("bincount", bincount);
  m.impl("unfold_backward", unfold_backward);
  NEURON_REGISTER_WITH_BACKWARD(reflection_pad1d)
  NEURON_REGISTER_WITH_BACKWARD(reflection_pad2d)
  NEURON_REGISTER_WITH_BACKWARD(replication_pad1d)
  NEURON_REGISTER_WITH_BACKWARD(replication_pad2d)
  m.impl("where.self", where);
  m.impl("where.self_out", where_out);
  m.impl("tril", tril);
  m.impl("tril.out", tril_out);
  m.impl("tril_", tril_);
  m.impl("triu", triu);
  m.impl("triu.out", triu_out);
  m.impl("triu_", triu_);
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
  m.impl("index_add", index_add);
  m.impl("index_add_", index_add_);
  m.impl("index_add.out", index_add_out);
  m.impl("index_copy", index_copy);
  m.impl("index_copy_", index_copy_);
  m.impl("index_copy.out", index_copy_out);
  m.impl("index_fill_.int_Scalar", index_fill_);
  m.impl("index_fill_.int_Tensor", index_fill_tensor_);
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
  m.impl("_embedding_bag", embedding_bag);
  m.impl("_embedding_bag_forward_only", embedding_bag_forward_only);
  m.impl("_embedding_bag_dense_backward", embedding_bag_dense_backward);
  m.impl("_embedding_bag_backward", embedding_bag_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward);
  m.impl("embedding_renorm_", embedding_renorm);
}

}  // namespace torch_neuronx
