// Sorting (sort.c): sort, topk, histc, searchsorted/bucketize, and what is
// read off a sort: kthvalue, median, mode, unique.
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

// kthvalue / median along a dim from the stable sort: NaN sorts last, so
// kthvalue treats it as the largest value and median returns the first NaN
// of the row, as CPU does.
namespace {
std::tuple<at::Tensor, at::Tensor> pick_sorted(const at::Tensor &self, int64_t dim,
                                               const at::Tensor &pos, bool keepdim) {
  auto [v, i] = at::sort(self, /*stable=*/true, dim, /*descending=*/false);
  at::Tensor p = pos.unsqueeze(dim);
  at::Tensor rv = v.gather(dim, p), ri = i.gather(dim, p);
  if (!keepdim) {
    rv = rv.squeeze(dim);
    ri = ri.squeeze(dim);
  }
  return {rv, ri};
}
at::Tensor position(const at::Tensor &self, int64_t dim, int64_t k) {
  auto sizes = self.sizes().vec();
  if (self.dim() > 0) sizes.erase(sizes.begin() + dim);
  return at::full(sizes, k, self.options().dtype(at::kLong));
}
void deliver2(const std::tuple<at::Tensor, at::Tensor> &r, at::Tensor &v, at::Tensor &i) {
  at::native::resize_output(v, std::get<0>(r).sizes());
  at::native::resize_output(i, std::get<1>(r).sizes());
  v.copy_(std::get<0>(r));
  i.copy_(std::get<1>(r));
}
}  // namespace

std::tuple<at::Tensor &, at::Tensor &> kthvalue_out(const at::Tensor &self, int64_t k, int64_t dim,
                                                    bool keepdim, at::Tensor &values,
                                                    at::Tensor &indices) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.dim() ? self.size(d) : 1;
  TORCH_CHECK_INDEX(n > 0, "kthvalue(): Expected reduction dim ", d, " to have non-zero size.");
  TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", d);
  at::Tensor x = self.dim() ? self : self.reshape(at::IntArrayRef{1});
  auto r = pick_sorted(x, d, position(x, d, k - 1), keepdim || self.dim() == 0);
  if (self.dim() == 0)
    r = {std::get<0>(r).reshape(at::IntArrayRef{}), std::get<1>(r).reshape(at::IntArrayRef{})};
  deliver2(r, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor &, at::Tensor &> median_dim_out(const at::Tensor &self, int64_t dim,
                                                      bool keepdim, at::Tensor &values,
                                                      at::Tensor &indices) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor x = self.dim() ? self : self.reshape(at::IntArrayRef{1});
  int64_t n = x.size(d);
  TORCH_CHECK(n > 0, "median() cannot compute median for a dimension of size 0 because ",
              "the operation does not have an identity");
  at::Tensor pos = position(x, d, (n - 1) / 2);
  if (at::isFloatingType(self.scalar_type())) {
    at::Tensor nans = at::isnan(x).sum(d);
    pos = at::where(nans > 0, n - nans, pos);
  }
  auto r = pick_sorted(x, d, pos, keepdim || self.dim() == 0);
  if (self.dim() == 0)
    r = {std::get<0>(r).reshape(at::IntArrayRef{}), std::get<1>(r).reshape(at::IntArrayRef{})};
  deliver2(r, values, indices);
  return {values, indices};
}

at::Tensor median_all(const at::Tensor &self) {
  if (self.numel() == 0 && at::isFloatingType(self.scalar_type()))  // as CPU
    return at::full({}, std::numeric_limits<double>::quiet_NaN(), self.options());
  TORCH_CHECK(self.numel() > 0, "median() input tensor cannot be empty");
  at::Tensor v = at::empty({0}, self.options()),
             i = at::empty({0}, self.options().dtype(at::kLong));
  median_dim_out(self.reshape({-1}), 0, false, v, i);
  return v;
}

// ------------------------------------------------------------ unique
// Sort, mark where each run of equal values starts, and read the values,
// group ids (inverse) and run lengths (counts) off those marks; every step a
// device kernel. The output size depends on the data, so reading it waits
// for the device, as on CUDA. Always sorted (sorted=False allows any order).
namespace {
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_runs(const at::Tensor &self, bool sort,
                                                           bool inverse, bool counts) {
  auto lopts = self.options().dtype(at::kLong);
  at::Tensor flat = self.reshape(-1);
  int64_t n = flat.numel();
  at::Tensor vals = flat, perm;
  if (sort && n > 0) std::tie(vals, perm) = at::sort(flat, /*stable=*/true, 0, false);
  at::Tensor starts = at::ones({n}, self.options().dtype(at::kBool));
  if (n > 1) starts.slice(0, 1).copy_(vals.slice(0, 1).ne(vals.slice(0, 0, n - 1)));
  at::Tensor uniq = vals.masked_select(starts);
  at::Tensor inv = at::empty({0}, lopts), cnt = at::empty({0}, lopts);
  if (inverse) {
    at::Tensor group = starts.to(at::kLong).cumsum(0).sub_(1);
    if (sort && n > 0) {
      inv = at::empty({n}, lopts);
      inv.scatter_(0, perm, group);
    } else {
      inv = group;
    }
    inv = inv.view(self.sizes());
  }
  if (counts) {
    at::Tensor pos = starts.nonzero().view(-1);
    at::Tensor ends = at::cat({pos.slice(0, 1), at::full({1}, n, lopts)});
    cnt = ends.sub(pos);
  }
  return {uniq, inv, cnt};
}
}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor &self, bool sorted,
                                                       bool return_inverse, bool return_counts) {
  // the wide unsigned types have no sort/select kernels anywhere but in the
  // CPU's own unique
  if (is_wide_unsigned(self.scalar_type()))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_unique2)>::call(
        self, sorted, return_inverse, return_counts);
  return unique_runs(self, true, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor &self,
                                                                  bool return_inverse,
                                                                  bool return_counts,
                                                                  std::optional<int64_t> dim) {
  if (dim.has_value() && self.dim() > 1)  // runs of equal slices: the CPU does those
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(unique_consecutive)>::call(
        self, return_inverse, return_counts, dim);
  return unique_runs(self, false, return_inverse, return_counts);
}

// mode(..., out=): ATen's out form refuses devices other than CPU, CUDA and
// XPU; the values come from mode itself, with ATen's out checks.
std::tuple<at::Tensor &, at::Tensor &> mode_out(const at::Tensor &self, int64_t dim, bool keepdim,
                                                at::Tensor &values, at::Tensor &indices) {
  TORCH_CHECK(self.device() == values.device(), "expected device '", self.device(), "' but got '",
              values.device(), "' for values output");
  TORCH_CHECK(self.device() == indices.device(), "expected device '", self.device(), "' but got '",
              indices.device(), "' for indices output");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "expected scalar type '",
              self.scalar_type(), "' but got '", values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type '", at::kLong,
              "' but got '", indices.scalar_type(), "' for indices output");
  auto [v, i] = at::mode(self, dim, keepdim);
  assign_result(values, v);
  assign_result(indices, i);
  return {values, indices};
}

// ------------------------------------------------------------ sort / topk

namespace {

// Sorts (k = size along dim) or selects the top k along dim into values and
// indices, resized to self's shape with dim of size k.
void sort_into(const at::Tensor &self, int64_t dim, int64_t k, bool descending, at::Tensor &values,
               at::Tensor &indices, const char *name) {
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
  launch_kernel<TNK_K_SORT>(self.device().index(), a, name);
  if (!direct) {
    values.copy_(last ? v : v.movedim(-1, dim));
    indices.copy_(last ? i : i.movedim(-1, dim));
  }
}

// sort's output strides, as its meta function sets them: the input's
// where it is non-overlapping and dense, else dense strides in the input's
// dimension order
std::vector<int64_t> sort_strides(const at::Tensor &self) {
  return self.is_non_overlapping_and_dense()
             ? self.strides().vec()
             : at::infer_dense_strides(self.sizes(), self.strides());
}

bool sort_native(const at::Tensor &self) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_SORT, kernel_query(-1, dt, -1, -1));
}
}  // namespace

std::tuple<at::Tensor &, at::Tensor &> sort_values_stable(const at::Tensor &self,
                                                          std::optional<bool> stable, int64_t dim,
                                                          bool descending, at::Tensor &values,
                                                          at::Tensor &indices) {
  if (!sort_native(self) || values.scalar_type() != self.scalar_type() ||
      indices.scalar_type() != at::kLong)
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(sort, values_stable)>::call(
        self, stable, dim, descending, values, indices);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  // outputs that must be resized take the input's layout, as the structured
  // CPU kernel's (sort_strides); sort_into writes any layout
  if (values.sizes() != self.sizes() || indices.sizes() != self.sizes()) {
    std::vector<int64_t> strides = sort_strides(self);
    for (at::Tensor *t : {&values, &indices})
      if (t->sizes() != self.sizes()) {
        at::native::resize_output(*t, self.sizes());
        t->as_strided_(self.sizes(), strides);
      }
  }
  sort_into(self, d, self.dim() ? self.size(d) : 1, descending, values, indices, "aten::sort");
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor &self, std::optional<bool> stable,
                                               int64_t dim, bool descending) {
  // the input's strides where it is dense, else dense ones in its dimension
  // order (the meta function's rule, so a compiled graph's stride
  // assertions hold)
  std::vector<int64_t> strides = sort_strides(self);
  at::Tensor values = at::empty_strided(self.sizes(), strides, self.options());
  at::Tensor indices = at::empty_strided(self.sizes(), strides, self.options().dtype(at::kLong));
  sort_values_stable(self, stable, dim, descending, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor &, at::Tensor &> topk_values(const at::Tensor &self, c10::SymInt k_sym,
                                                   int64_t dim, bool largest, bool sorted,
                                                   at::Tensor &values, at::Tensor &indices) {
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

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor &self, c10::SymInt k, int64_t dim,
                                        bool largest, bool sorted) {
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  topk_values(self, k, dim, largest, sorted, values, indices);
  return {values, indices};
}

// histc: floating inputs as on CPU; integer inputs as CUDA takes them
// (MoE routers count tokens per expert with torch.histc on int ids), with
// counts in the input's dtype.
at::Tensor &histc_out(const at::Tensor &self, int64_t bins, const c10::Scalar &min,
                      const c10::Scalar &max, at::Tensor &out) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  tnk_dtype_t dt = tnk_of(self);
  bool ok;
  tnk_dtype_t odt = to_tnk(out.scalar_type(), &ok);
  if (dt == TNK_DTYPE_COUNT || !ok ||
      !kernel_supported(TNK_K_HISTC, kernel_query(-1, dt, odt, -1)) ||
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
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_histc_args_t a{};
    a.in = x.numel() ? x.const_data_ptr() : nullptr;
    a.out = o.data_ptr();
    a.n = x.numel();
    a.bins = bins;
    a.lo = lo;
    a.hi = hi;
    a.dtype = dt;
    a.out_dtype = odt;
    launch_kernel<TNK_K_HISTC>(self.device().index(), a, "aten::histc");
  });
  return out;
}

at::Tensor histc(const at::Tensor &self, int64_t bins, const c10::Scalar &min,
                 const c10::Scalar &max) {
  at::Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
}

// ------------------------------------------------- searchsorted, bucketize
// Checked as CPU checks them (its messages); values and boundaries of
// different dtypes meet in their promoted dtype, as on CPU.
namespace {

bool side_right(bool right, std::optional<c10::string_view> side) {
  if (!side.has_value()) return right;
  TORCH_CHECK(*side == "left" || *side == "right",
              "torch.searchsorted(): side can only be 'left' or 'right' but got ", *side);
  TORCH_CHECK(!(*side == "left" && right),
              "torch.searchsorted(): side and right can't be set to opposites, got side of ", *side,
              " while right was True");
  return *side == "right";
}

void check_searchsorted(const at::Tensor &boundaries, const at::Tensor &input,
                        const at::Tensor &sorter, bool out_int32, const at::Tensor &out) {
  TORCH_CHECK(boundaries.device() == input.device(),
              "torch.searchsorted(): boundaries and input value tensors should have same device "
              "type, but got boundaries tensor device type ",
              boundaries.device(), " and input value tensor device type ", input.device());
  if (sorter.defined()) {
    TORCH_CHECK(sorter.device() == boundaries.device(),
                "torch.searchsorted(): sorter and boundary tensors should have same device type, "
                "but got sorter tensor device type ",
                sorter.device(), " and input value tensor device type ", boundaries.device());
    TORCH_CHECK(sorter.sizes() == boundaries.sizes(),
                "torch.searchsorted(): boundary and sorter must have the same size, but got "
                "boundary tensor ",
                boundaries.sizes(), "and got sorter tensor ", sorter.sizes());
    TORCH_CHECK(sorter.scalar_type() == at::kLong,
                "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype ",
                sorter.scalar_type());
  }
  TORCH_CHECK(input.dim() > 0 || (input.numel() == 1 && boundaries.dim() == 1),
              "torch.searchsorted(): input value can be a scalar only when boundaries tensor "
              "dimension is 1, but we got boundaries tensor dim(",
              boundaries.dim(), ") and input value's dim(", input.dim(), ") numel(", input.numel(),
              ")");
  TORCH_CHECK(boundaries.dim() != 0,
              "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
              "dimension");
  bool leading_match = boundaries.dim() == input.dim();
  for (int64_t d = 0; leading_match && d + 1 < boundaries.dim(); d++)
    leading_match = boundaries.size(d) == input.size(d);
  TORCH_CHECK(boundaries.dim() == 1 || leading_match,
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
              "dimensions of boundaries tensor and input value tensor must match, but we got "
              "boundaries tensor ",
              boundaries.sizes(), " and input value tensor ", input.sizes());
  at::ScalarType want = out_int32 ? at::kInt : at::kLong;
  TORCH_CHECK(out.scalar_type() == want,
              "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or "
              "Long(int64) depending on whether out_int32 flag is True, but we got output "
              "tensor's dtype ",
              out.scalar_type(), " and out_int32 flag is ", (out_int32 ? "True" : "False"));
}
}  // namespace

at::Tensor &searchsorted_out(const at::Tensor &sorted_sequence, const at::Tensor &self,
                             bool out_int32, bool right, std::optional<c10::string_view> side,
                             const std::optional<at::Tensor> &sorter_opt, at::Tensor &out) {
  at::Tensor sorter = sorter_opt.has_value() ? *sorter_opt : at::Tensor();
  check_searchsorted(sorted_sequence, self, sorter, out_int32, out);
  bool is_right = side_right(right, side);
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  at::ScalarType common = at::result_type(sorted_sequence, self);
  TORCH_CHECK_NOT_IMPLEMENTED(common != at::kBool && !at::isComplexType(common),
                              "\"searchsorted\" not implemented for '", common, "'");
  at::Tensor bd = sorted_sequence.to(common).contiguous(), v = self.to(common).contiguous();
  tnk_dtype_t dt = tnk_of(bd);
  TORCH_CHECK_NOT_IMPLEMENTED(
      dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_SEARCHSORTED, kernel_query(-1, dt, -1, -1)),
      "\"searchsorted\" not implemented for '", common, "'");
  at::Tensor so = sorter.defined() ? sorter.contiguous() : sorter;
  into_contiguous(out, [&](at::Tensor &o) {
    tnk_searchsorted_args_t a{};
    a.boundaries = bd.const_data_ptr();
    a.values = v.const_data_ptr();
    a.sorter = so.defined() ? so.const_data_ptr<int64_t>() : nullptr;
    a.out = o.data_ptr();
    a.n = v.numel();
    a.len = bd.size(-1);
    a.bd_rows = bd.dim() == 1 ? 1 : bd.numel() / std::max<int64_t>(a.len, 1);
    a.per_row = bd.dim() == 1 ? a.n : v.size(-1);
    a.dtype = dt;
    a.right = is_right;
    a.out_int32 = out_int32;
    a.fault =
        fault_sink(self.device().index(), "torch.searchsorted(): sorter index out of range", false);
    launch_kernel<TNK_K_SEARCHSORTED>(self.device().index(), a, "aten::searchsorted", self.numel());
  });
  return out;
}

at::Tensor searchsorted(const at::Tensor &sorted_sequence, const at::Tensor &self, bool out_int32,
                        bool right, std::optional<c10::string_view> side,
                        const std::optional<at::Tensor> &sorter) {
  at::Tensor out = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsorted_out(sorted_sequence, self, out_int32, right, side, sorter, out);
}

namespace {
// A Python number as CPU wraps it: a 0-dim tensor that promotes like a scalar.
at::Tensor wrapped_scalar(const c10::Scalar &v, const at::Tensor &like) {
  at::Tensor t = c10::scalar_to_tensor(v, like.device());
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}
}  // namespace

at::Tensor &searchsorted_scalar_out(const at::Tensor &sorted_sequence, const c10::Scalar &self,
                                    bool out_int32, bool right,
                                    std::optional<c10::string_view> side,
                                    const std::optional<at::Tensor> &sorter, at::Tensor &out) {
  return searchsorted_out(sorted_sequence, wrapped_scalar(self, sorted_sequence), out_int32, right,
                          side, sorter, out);
}

at::Tensor searchsorted_scalar(const at::Tensor &sorted_sequence, const c10::Scalar &self,
                               bool out_int32, bool right, std::optional<c10::string_view> side,
                               const std::optional<at::Tensor> &sorter) {
  return torch_neuronx::searchsorted(sorted_sequence, wrapped_scalar(self, sorted_sequence),
                                     out_int32, right, side, sorter);
}

at::Tensor &bucketize_out(const at::Tensor &self, const at::Tensor &boundaries, bool out_int32,
                          bool right, at::Tensor &out) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  return searchsorted_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}

at::Tensor bucketize(const at::Tensor &self, const at::Tensor &boundaries, bool out_int32,
                     bool right) {
  at::Tensor out = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return bucketize_out(self, boundaries, out_int32, right, out);
}

at::Tensor bucketize_scalar(const c10::Scalar &self, const at::Tensor &boundaries, bool out_int32,
                            bool right) {
  return torch_neuronx::bucketize(wrapped_scalar(self, boundaries), boundaries, out_int32, right);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode.values", mode_out);
  m.impl("_unique2", unique2);
  m.impl("unique_consecutive", unique_consecutive);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("median.dim_values", median_dim_out);
  m.impl("median", median_all);
  m.impl("sort.stable", sort_stable);
  m.impl("sort.values_stable", sort_values_stable);
  m.impl("topk", topk);
  m.impl("topk.values", topk_values);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
  m.impl("searchsorted.Tensor", searchsorted);
  m.impl("searchsorted.Tensor_out", searchsorted_out);
  m.impl("searchsorted.Scalar", searchsorted_scalar);
  m.impl("searchsorted.Scalar_out", searchsorted_scalar_out);
  m.impl("bucketize.Tensor", bucketize);
  m.impl("bucketize.Tensor_out", bucketize_out);
  m.impl("bucketize.Scalar", bucketize_scalar);
}

}  // namespace torch_neuronx
