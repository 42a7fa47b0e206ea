// Sparse COO tensors on the device, for the common training case:
// nn.Embedding(sparse=True) with SGD or SparseAdam (sparse gradients,
// their accumulation, coalescing, dense += sparse, sparse_mask). A sparse
// neuron tensor is ATen's SparseTensorImpl over two dense neuron tensors
// (indices, values); ATen's layout-generic functions manage it, and the
// arithmetic is composed from dense native kernels (sort, cumsum,
// index_add, index_put with accumulation, advanced indexing).
#include "neuron.h"

#include <ATen/SparseTensorImpl.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

// The index tensors of advanced indexing for the sparse dims of t.
c10::List<std::optional<at::Tensor>> index_list(const at::Tensor &indices) {
  c10::List<std::optional<at::Tensor>> list;
  for (int64_t d = 0; d < indices.size(0); d++) list.push_back(indices.select(0, d));
  return list;
}

at::Tensor make_sparse(const at::Tensor &like, const at::Tensor &indices, const at::Tensor &values,
                       bool coalesced) {
  at::Tensor r = at::_sparse_coo_tensor_unsafe(indices, values, like.sizes(),
                                               like.options().layout(at::kSparse));
  r._coalesced_(coalesced);
  return r;
}

// Duplicate indices summed, indices sorted: the linear position of each
// entry over the sparse dims, sorted; runs of equal positions become one
// entry (their values index_add-ed).
at::Tensor coalesce(const at::Tensor &self) {
  int64_t sd = self.sparse_dim(), nnz = self._nnz();
  at::Tensor idx = self._indices(), vals = self._values();
  if (nnz < 2) return make_sparse(self, idx.clone(), vals.clone(), true);
  at::Tensor lin = at::zeros({nnz}, idx.options());
  for (int64_t d = 0; d < sd; d++) lin = lin * self.size(d) + idx.select(0, d);
  auto [sorted, perm] = lin.sort(/*stable=*/true, 0, false);
  at::Tensor first = at::ones({nnz}, idx.options().dtype(at::kBool));
  first.narrow(0, 1, nnz - 1).copy_(sorted.narrow(0, 1, nnz - 1) != sorted.narrow(0, 0, nnz - 1));
  at::Tensor seg = first.cumsum(0) - 1;
  int64_t n = seg[nnz - 1].item<int64_t>() + 1;  // the output's size (a sync, as on CPU)
  std::vector<int64_t> vshape = vals.sizes().vec();
  vshape[0] = n;
  at::Tensor new_vals =
      at::zeros(vshape, vals.options()).index_add_(0, seg, vals.index_select(0, perm));
  at::Tensor pos = at::zeros({n}, idx.options()).scatter_(0, seg, sorted);
  at::Tensor new_idx = at::empty({sd, n}, idx.options());
  for (int64_t d = sd - 1; d >= 0; d--) {
    new_idx.select(0, d).copy_(pos.remainder(self.size(d)));
    pos = pos.div(self.size(d), "floor");
  }
  return make_sparse(self, new_idx, new_vals, true);
}

at::Tensor to_dense(const at::Tensor &self, std::optional<c10::ScalarType> dtype,
                    std::optional<bool> masked_grad) {
  at::Tensor out = at::zeros(
      self.sizes(), self.options().layout(at::kStrided).dtype(dtype.value_or(self.scalar_type())));
  if (self._nnz() == 0) return out;
  out.index_put_(index_list(self._indices()), self._values().to(out.scalar_type()),
                 /*accumulate=*/true);
  return out;
}

// self's values at mask's indices, as a sparse tensor with mask's indices.
at::Tensor sparse_mask(const at::Tensor &self, const at::Tensor &mask) {
  TORCH_CHECK(mask.sizes() == self.sizes(),
              "sparse_mask(): operands have incompatible sizes; "
              "self has size ",
              self.sizes(), " but mask has size ", mask.sizes());
  at::Tensor dense = self.layout() == at::kSparse ? self.to_dense() : self;
  at::Tensor idx = mask._indices();
  at::Tensor vals = mask._nnz() ? dense.index(index_list(idx))
                                : at::empty(mask._values().sizes(), dense.options());
  return make_sparse(mask, idx.clone(), vals, mask.is_coalesced());
}

// out = self + alpha * other, for a sparse operand on either side: dense
// results accumulate the sparse values with index_put; sparse + sparse
// concatenates entries (uncoalesced, as ATen's result may be).
at::Tensor &add_out(const at::Tensor &self, const at::Tensor &other, const c10::Scalar &alpha,
                    at::Tensor &out) {
  TORCH_CHECK(self.sizes() == other.sizes(),
              "add: expected 'self' and 'other' to have same "
              "size, but self has size ",
              self.sizes(), " while other has size ", other.sizes(),
              " (FYI: dense-sparse addition does not currently support broadcasting)");
  bool sparse_self = self.layout() == at::kSparse, sparse_other = other.layout() == at::kSparse;
  if (sparse_self && sparse_other) {
    TORCH_CHECK(out.layout() == at::kSparse,
                "add: expected a sparse output for two sparse operands");
    at::Tensor idx = at::cat({self._indices(), other._indices()}, 1);
    at::Tensor vals = at::cat({self._values(), other._values() * alpha}, 0);
    at::Tensor r = make_sparse(self, idx, vals, false);
    {
      out.sparse_resize_(self.sizes(), self.sparse_dim(), self.dense_dim());
      at::sparse::get_sparse_impl(out)->set_indices_and_values_unsafe(r._indices(), r._values());
      out._coalesced_(false);
    }
    return out;
  }
  TORCH_CHECK(out.layout() == at::kStrided,
              "add: expected a dense output when an operand is dense");
  const at::Tensor &dense = sparse_self ? other : self;
  const at::Tensor &sparse = sparse_self ? self : other;
  at::Tensor base = sparse_self ? dense * alpha : dense;  // self + alpha*other either way
  if (!out.is_same(self)) {
    at::native::resize_output(out, dense.sizes());
    out.copy_(base);
  } else if (sparse_self) {
    TORCH_CHECK(false, "add_: a sparse tensor cannot be updated in place with a dense one");
  }
  if (sparse._nnz() == 0) return out;
  at::Tensor vals = sparse._values();
  if (!sparse_self) vals = vals * alpha;
  out.index_put_(index_list(sparse._indices()), vals.to(out.scalar_type()), /*accumulate=*/true);
  return out;
}

at::Tensor mul_scalar(const at::Tensor &self, const c10::Scalar &s) {
  return make_sparse(self, self._indices().clone(), self._values() * s, self.is_coalesced());
}

at::Tensor &mul_scalar_(at::Tensor &self, const c10::Scalar &s) {
  self._values().mul_(s);
  return self;
}

// sparse * (a 0-d tensor or Python number): the values scaled
at::Tensor mul_tensor(const at::Tensor &self, const at::Tensor &other) {
  bool self_sparse = self.layout() == at::kSparse;
  const at::Tensor &sp = self_sparse ? self : other;
  const at::Tensor &s = self_sparse ? other : self;
  TORCH_CHECK_NOT_IMPLEMENTED(s.layout() == at::kStrided && s.dim() == 0,
                              "neuron: sparse * tensor is implemented for 0-d tensors and "
                              "numbers only, got a tensor of shape ",
                              s.sizes());
  at::Tensor v = sp._values() * (s.is_cpu() ? s : s.to(sp.device()));
  return make_sparse(sp, sp._indices().clone(), v, sp.is_coalesced());
}

at::Tensor &mul_tensor_(at::Tensor &self, const at::Tensor &other) {
  TORCH_CHECK_NOT_IMPLEMENTED(other.layout() == at::kStrided && other.dim() == 0,
                              "neuron: sparse *= tensor is implemented for 0-d tensors and "
                              "numbers only, got a tensor of shape ",
                              other.sizes());
  self._values().mul_(other);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         at::native::new_with_dims_and_tensor_sparse_symint);
  m.impl("_sparse_coo_tensor_with_dims", at::native::new_with_dims_sparse);
  m.impl("empty.memory_format", at::native::empty_sparse_symint);
  m.impl("_indices", at::native::_indices_sparse);
  m.impl("_values", at::native::_values_sparse);
  m.impl("indices", at::native::indices_sparse);
  m.impl("values", at::native::values_sparse);
  m.impl("_nnz", at::native::_nnz_sparse);
  m.impl("sparse_dim", at::native::sparse_dim_sparse);
  m.impl("dense_dim", at::native::dense_dim_sparse);
  m.impl("is_coalesced", at::native::is_coalesced_sparse);
  m.impl("_coalesced_", at::native::_coalesced_sparse_);
  m.impl("sparse_resize_", at::native::sparse_resize_);
  m.impl("sparse_resize_and_clear_", at::native::sparse_resize_and_clear_);
  m.impl("zero_", at::native::zero_sparse_);
  m.impl("clone", at::native::clone_sparse);
  m.impl("copy_", at::native::copy_sparse_wrapper_);
  m.impl("_coalesce", coalesce);
  m.impl("_to_dense", to_dense);
  m.impl("sparse_mask", sparse_mask);
  m.impl("add.out", add_out);
  m.impl("add.Tensor", at::native::add_sparse);
  m.impl("add_.Tensor", at::native::add_sparse_);
  m.impl("mul.Scalar", mul_scalar);
  m.impl("mul_.Scalar", mul_scalar_);
  m.impl("mul.Tensor", mul_tensor);
  m.impl("mul_.Tensor", mul_tensor_);
}

}  // namespace torch_neuronx
