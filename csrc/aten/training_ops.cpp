// Ops training code reaches that compose from native kernels: vector
// products (dot, vdot, addmv), nansum, torch.equal, the AMP grad scaler's
// ops, 2-D+ nll_loss (cross entropy over images and sequences) and
// embedding max_norm renormalisation. Checks and messages follow ATen's.
#include "neuron.h"

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

namespace torch_neuronx {
namespace {

#define FALLBACK(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

// ------------------------------------------------------------ vector products

void check_dot(const at::Tensor& a, const at::Tensor& b, const char* name) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ",
              b.dim(), "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name,
              " : expected both vectors to have same dtype, but found ", a.scalar_type(),
              " and ", b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(),
              "] to have the same number of elements, but got ", a.numel(), " and ", b.numel(),
              " elements respectively");
  TORCH_CHECK(a.device() == b.device(), "Expected all tensors to be on the same device, but "
              "found at least two devices, ", a.device(), " and ", b.device(), "!");
}

// The products accumulate in the dtype's accumulation type (fp32 for the
// half types), as CPU does, then round once.
at::Tensor sum_of_products(const at::Tensor& a, const at::Tensor& b) {
  auto st = a.scalar_type();
  if (a.is_complex()) {  // from the real parts (real reductions are native)
    at::Tensor x = at::view_as_real(a.resolve_conj()), y = at::view_as_real(b.resolve_conj());
    at::Tensor xr = x.select(-1, 0), xi = x.select(-1, 1), yr = y.select(-1, 0), yi = y.select(-1, 1);
    return at::complex((xr * yr - xi * yi).sum(), (xr * yi + xi * yr).sum());
  }
  bool half = st == at::kHalf || st == at::kBFloat16;
  at::Tensor x = half ? a.to(at::kFloat) : a, y = half ? b.to(at::kFloat) : b;
  at::Tensor r = (x * y).sum();
  return half || r.scalar_type() != st ? r.to(st) : r;
}

at::Tensor dot(const at::Tensor& a, const at::Tensor& b) {
  check_dot(a, b, "dot");
  if (a.scalar_type() == at::kBool) return FALLBACK(dot, a, b);
  return sum_of_products(a, b);
}

at::Tensor vdot(const at::Tensor& a, const at::Tensor& b) {
  check_dot(a, b, "vdot");
  if (a.scalar_type() == at::kBool) return FALLBACK(vdot, a, b);
  return sum_of_products(a.is_complex() ? a.conj().resolve_conj() : a, b);
}

// out = beta * self + alpha * (mat @ vec), as a one-column matrix product
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const c10::Scalar& beta_, const c10::Scalar& alpha_, at::Tensor& out) {
  const c10::Scalar beta = scalar_as(beta_, mat.scalar_type());
  const c10::Scalar alpha = scalar_as(alpha_, mat.scalar_type());
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1,
              "vector + matrix @ vector expected, got ", self.dim(), ", ", mat.dim(), ", ",
              vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "size mismatch, got input (", self.numel(), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  if (mat.scalar_type() != vec.scalar_type() || self.scalar_type() != mat.scalar_type() ||
      out.scalar_type() != mat.scalar_type() || mat.scalar_type() == at::kBool)
    return FALLBACK(addmv_out, self, mat, vec, beta, alpha, out);
  at::Tensor r = at::mm(mat, vec.unsqueeze(1)).squeeze(1);
  if (alpha.toComplexDouble() != 1.0) r = r * alpha;
  if (beta.toComplexDouble() != 0.0) r = r + self.expand({mat.size(0)}) * beta;  // beta 0: self ignored
  at::native::resize_output(out, {mat.size(0)});
  return out.copy_(r);
}

// --------------------------------------------------------------------- nansum

at::Tensor nansum_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK(!self.is_complex(), "nansum does not support complex inputs");
  at::Tensor x = c10::isFloatingType(self.scalar_type())
                     ? at::where(at::isnan(self), at::zeros({}, self.options()), self)
                     : self;
  return at::sum(x, dim, keepdim, dtype);
}

at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  at::Tensor r = nansum_dims(self, dim, keepdim, dtype);
  return assign_result(out, r);
}

// ---------------------------------------------------------------- torch.equal

bool equal(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), "Cannot compare two tensors on different devices. Got: ",
              a.device(), " and ", b.device());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "Expected object of scalar type ", a.scalar_type(), " but got scalar type ",
              b.scalar_type(), " for argument 'other'");
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return at::eq(a, b).all().item<bool>();  // NaN != NaN, as CPU
}

// --------------------------------------------------------- AMP grad scaler ops

// Every tensor is multiplied by inv_scale in place; found_inf becomes 1 if any
// element of any of them is inf or NaN. All on the device: no host sync.
void amp_non_finite_check_and_unscale(at::TensorList self, at::Tensor& found_inf,
                                      const at::Tensor& inv_scale) {
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  for (const at::Tensor& t : self) {
    TORCH_CHECK(t.device() == found_inf.device(), "Expected all tensors to be on the same "
                "device, but found ", t.device(), " and ", found_inf.device());
    TORCH_CHECK(t.layout() == at::kStrided, "One of the tensors is not strided.");
    if (t.numel() == 0) continue;
    at::Tensor bad = at::logical_not(at::isfinite(t)).any().to(at::kFloat);
    found_inf.copy_(at::maximum(found_inf, bad.view(found_inf.sizes())));
    at::Tensor mutable_t = t;
    mutable_t.mul_(inv_scale.to(t.scalar_type()).reshape(at::IntArrayRef{}));
  }
}

// CUDA's rule: an inf/NaN step backs the scale off and resets the tracker;
// growth_interval clean steps in a row grow it (when the grown scale is
// finite) and reset the tracker.
at::Tensor& amp_update_scale(at::Tensor& scale, at::Tensor& tracker, const at::Tensor& found_inf,
                             double growth, double backoff, int64_t interval) {
  TORCH_CHECK(tracker.numel() == 1 && scale.numel() == 1 && found_inf.numel() == 1,
              "growth_tracker, current_scale and found_inf must be 1-element tensors.");
  TORCH_CHECK(scale.scalar_type() == at::kFloat && found_inf.scalar_type() == at::kFloat &&
                  tracker.scalar_type() == at::kInt,
              "current_scale and found_inf must be float tensors, growth_tracker an int tensor.");
  at::Tensor inf = found_inf > 0;
  at::Tensor next = tracker + 1;
  at::Tensor grow = at::logical_and(at::logical_not(inf), next == interval);
  at::Tensor grown = scale * growth;
  at::Tensor new_scale = at::where(
      inf, scale * backoff, at::where(at::logical_and(grow, at::isfinite(grown)), grown, scale));
  at::Tensor new_tracker = at::where(at::logical_or(inf, grow), at::zeros_like(next), next);
  scale.copy_(new_scale);
  tracker.copy_(new_tracker);
  return scale;
}

// ------------------------------------------------------ nll_loss over images

// [N, C, d1, ...] -> [N * d1 * ..., C] rows (class dim last) and targets
std::pair<at::Tensor, at::Tensor> as_rows(const at::Tensor& self, const at::Tensor& target) {
  TORCH_CHECK(self.dim() >= 3, "only batches of spatial inputs supported (4D tensors), but got "
              "input of size: ", self.sizes());
  TORCH_CHECK(target.dim() == self.dim() - 1, "only batches of spatial targets supported (3D "
              "tensors) but got targets of size: ", target.sizes());
  TORCH_CHECK(self.size(0) == target.size(0) && self.sizes().slice(2) == target.sizes().slice(1),
              "input and target batch or spatial sizes don't match: target ", target.sizes(),
              ", input ", self.sizes());
  at::Tensor rows = self.movedim(1, -1).reshape({-1, self.size(1)});
  return {rows, target.reshape({-1})};
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self,
                                                      const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight,
                                                      int64_t reduction, int64_t ignore_index) {
  auto [rows, t] = as_rows(self, target);
  auto [out, total] = at::nll_loss_forward(rows, t, weight, reduction, ignore_index);
  if (reduction == at::Reduction::None) {
    std::vector<int64_t> shape{self.size(0)};
    for (int64_t d = 2; d < self.dim(); d++) shape.push_back(self.size(d));
    out = out.reshape(shape);
  }
  return {out, total};
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  auto [rows, t] = as_rows(self, target);
  at::Tensor g = reduction == at::Reduction::None ? grad_output.reshape({-1}) : grad_output;
  at::Tensor gi = at::nll_loss_backward(g, rows, t, weight, reduction, ignore_index, total_weight);
  // rows [N * spatial, C] -> [N, spatial..., C] -> [N, C, spatial...]
  std::vector<int64_t> shape{self.size(0)};
  for (int64_t d = 2; d < self.dim(); d++) shape.push_back(self.size(d));
  shape.push_back(self.size(1));
  return gi.reshape(shape).movedim(-1, 1).contiguous();
}

// ------------------------------------------------------------ embedding max_norm

// Rows of self at indices whose norm exceeds max_norm are scaled to
// max_norm / (norm + 1e-7), in place (a row indexed twice is written twice
// with the same value).
at::Tensor& embedding_renorm(at::Tensor& self, const at::Tensor& indices, double max_norm,
                             double norm_type) {
  TORCH_CHECK(self.dim() == 2, "'embedding_renorm_' expects 'self' to be a 2-D tensor, but got ",
              self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_(): Expected dtype int32/int64 for indices");
  if (indices.numel() == 0) return self;
  at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  at::Tensor rows = self.index_select(0, idx);
  at::Tensor norms = at::linalg_vector_norm(rows, norm_type, {1}, true);
  at::Tensor scale = at::where(norms > max_norm, max_norm / (norms + 1e-7),
                               at::ones({}, norms.options()));
  c10::List<std::optional<at::Tensor>> where_{std::optional<at::Tensor>(idx)};
  self.index_put_(where_, rows * scale.to(rows.scalar_type()));
  return self;
}

// ------------------------------------------------------------- embedding_bag

// Bags in sum (0) and mean (1) mode from index_add over each index's bag id
// (offset2bag, as ATen defines it); max mode (2) goes to the CPU path.
struct Bags {
  at::Tensor idx, offset2bag, keep, bag_size;  // keep: 1 where idx != padding_idx
  int64_t n_bags;
};

Bags make_bags(const at::Tensor& indices, const at::Tensor& offsets, bool include_last_offset,
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
  b.keep = padding_idx >= 0 ? b.idx.ne(padding_idx) : at::ones({n}, b.idx.options().dtype(at::kBool));
  b.bag_size = at::zeros({b.n_bags}, b.idx.options());
  if (n) b.bag_size.index_add_(0, b.offset2bag, b.keep.to(at::kLong));
  return b;
}

// What the composition covers: sum/mean bags of a 2-D floating table, all
// on one device (max mode and the rest take the CPU path).
bool bag_native(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                int64_t mode) {
  return mode != 2 && c10::isFloatingType(weight.scalar_type()) && weight.dim() == 2 &&
         indices.device() == weight.device() && offsets.device() == weight.device();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
    bool scale_grad_by_freq, int64_t mode, bool sparse,
    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  bool psw = per_sample_weights.has_value() && per_sample_weights->defined();
  if (!bag_native(weight, indices, offsets, mode))
    return FALLBACK(_embedding_bag, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                    per_sample_weights, include_last_offset, padding_idx);
  TORCH_CHECK(!psw || mode == 0, "embedding_bag: per_sample_weights was not None. "
              "per_sample_weights is only supported for mode='sum' (got mode='",
              mode == 1 ? "mean" : "max", "'). Please open a feature request on GitHub.");
  Bags b = make_bags(indices, offsets, include_last_offset, padding_idx);
  int64_t D = weight.size(1);
  // fp16/bf16 bags sum in fp32 and round once, as the CPU
  const at::ScalarType acc = at::isReducedFloatingType(weight.scalar_type())
                                 ? at::kFloat : weight.scalar_type();
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
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
    bool scale_grad_by_freq, int64_t mode, bool sparse,
    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  if (!bag_native(weight, indices, offsets, mode))
    return FALLBACK(_embedding_bag_forward_only, weight, indices, offsets, scale_grad_by_freq,
                    mode, sparse, per_sample_weights, include_last_offset, padding_idx);
  return embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                       per_sample_weights, include_last_offset, padding_idx);
}

// d weight: each index's row receives its bag's gradient (scaled as in the
// forward; divided by the index's frequency with scale_grad_by_freq).
at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                        const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                        const at::Tensor& maximum_indices, int64_t num_weights,
                                        bool scale_grad_by_freq, int64_t mode,
                                        const std::optional<at::Tensor>& per_sample_weights,
                                        int64_t padding_idx) {
  if (mode == 2)
    return FALLBACK(_embedding_bag_dense_backward, grad, indices, offset2bag, bag_size,
                    maximum_indices, num_weights, scale_grad_by_freq, mode, per_sample_weights,
                    padding_idx);
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor gw = at::zeros({num_weights, grad.size(1)}, grad.options());
  if (idx.numel() == 0) return gw;
  at::Tensor g = grad.index_select(0, offset2bag);
  at::Tensor w = padding_idx >= 0 ? idx.ne(padding_idx).to(grad.scalar_type())
                                  : at::ones({idx.numel()}, grad.options());
  if (per_sample_weights.has_value() && per_sample_weights->defined())
    w = w * per_sample_weights->to(grad.scalar_type());
  if (mode == 1)
    w = w / bag_size.index_select(0, offset2bag).clamp_min(1).to(grad.scalar_type());
  if (scale_grad_by_freq) {
    at::Tensor counts = at::zeros({num_weights}, idx.options()).index_add_(0, idx, at::ones_like(idx));
    w = w / counts.index_select(0, idx).to(grad.scalar_type());
  }
  return gw.index_add_(0, idx, g * w.unsqueeze(1));
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices,
                                  const at::Tensor& offsets, const at::Tensor& offset2bag,
                                  const at::Tensor& bag_size, const at::Tensor& maximum_indices,
                                  int64_t num_weights, bool scale_grad_by_freq, int64_t mode,
                                  bool sparse, const std::optional<at::Tensor>& per_sample_weights,
                                  int64_t padding_idx) {
  if (sparse || mode == 2)
    return FALLBACK(_embedding_bag_backward, grad, indices, offsets, offset2bag, bag_size,
                    maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
                    per_sample_weights, padding_idx);
  return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                      num_weights, scale_grad_by_freq, mode, per_sample_weights,
                                      padding_idx);
}

// d per_sample_weights[i] = <grad of i's bag, weight row of i> (0 at padding)
at::Tensor embedding_bag_per_sample_weights_backward(const at::Tensor& grad,
                                                     const at::Tensor& weight,
                                                     const at::Tensor& indices,
                                                     const at::Tensor& offsets,
                                                     const at::Tensor& offset2bag, int64_t mode,
                                                     int64_t padding_idx) {
  TORCH_CHECK(mode == 0, "embedding_bag_backward: per_sample_weights only supported for "
              "mode='sum'");
  at::Tensor idx = indices.to(at::kLong);
  if (idx.numel() == 0) return at::zeros({0}, grad.options());
  at::Tensor r = (grad.index_select(0, offset2bag) * weight.index_select(0, idx)).sum(1);
  if (padding_idx >= 0) r = r * idx.ne(padding_idx).to(r.scalar_type());
  return r;
}

// ------------------------------------------------------------------- spectral

// Discrete Fourier transforms as products with the DFT matrix
// W[j][k] = exp(-+2 pi i j k / n), built on the host in double and applied
// with the device's complex matrix product in complex128 (the O(n) error
// growth of a direct sum stays far below float32's resolution). O(n^2) per
// transformed row: lengths above kMaxDftLength run on the CPU path.
constexpr int64_t kMaxDftLength = 2048;

bool dft_ok(const at::Tensor& x, at::IntArrayRef dim) {
  for (int64_t d : dim)
    if (x.size(d) > kMaxDftLength) return false;
  return true;
}

at::Tensor dft_matrix(int64_t n, bool forward, c10::Device device) {
  std::vector<double> w(static_cast<size_t>(2 * n * n));
  double sign = forward ? -1.0 : 1.0;
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = 0; k < n; k++) {
      int64_t r = (j * k) % n;  // exact phase index: no large-argument cos/sin
      double a = sign * 2.0 * M_PI * static_cast<double>(r) / static_cast<double>(n);
      w[2 * (j * n + k)] = std::cos(a);
      w[2 * (j * n + k) + 1] = std::sin(a);
    }
  at::Tensor t = at::from_blob(w.data(), {n, n, 2}, at::TensorOptions().dtype(at::kDouble));
  return at::view_as_complex(t.to(device));  // copies before w goes
}

// unnormalised transform of complex x along each of dims
at::Tensor dft(const at::Tensor& x, at::IntArrayRef dims, bool forward) {
  at::Tensor y = x.to(at::kComplexDouble);
  for (int64_t d : dims) {
    int64_t n = y.size(d);
    if (n <= 1) continue;
    at::Tensor moved = y.movedim(d, -1);
    auto shape = moved.sizes().vec();
    at::Tensor rows = moved.reshape({-1, n});
    at::Tensor r = at::mm(rows, dft_matrix(n, forward, x.device()));
    y = r.reshape(shape).movedim(-1, d);
  }
  return y;
}

at::Tensor normalized(const at::Tensor& y, const at::Tensor& x, at::IntArrayRef dims,
                      int64_t normalization, c10::ScalarType out) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.size(d));
  at::Tensor r = y;
  if (normalization == 1) r = r / std::sqrt(n);  // by_root_n
  else if (normalization == 2) r = r / n;        // by_n
  return r.to(out);
}

c10::ScalarType complex_of(c10::ScalarType t) {
  return t == at::kDouble || t == at::kComplexDouble ? at::kComplexDouble : at::kComplexFloat;
}

at::Tensor fft_c2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                   bool forward) {
  if (!dft_ok(self, dim) || (self.scalar_type() != at::kComplexFloat &&
                             self.scalar_type() != at::kComplexDouble))
    return FALLBACK(_fft_c2c, self, dim, normalization, forward);
  return normalized(dft(self, dim, forward), self, dim, normalization, self.scalar_type());
}

at::Tensor fft_r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                   bool onesided) {
  if (!dft_ok(self, dim) || (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble))
    return FALLBACK(_fft_r2c, self, dim, normalization, onesided);
  at::Tensor y = normalized(dft(self, dim, true), self, dim, normalization,
                            complex_of(self.scalar_type()));
  if (onesided && !dim.empty()) {
    int64_t last = dim.back();
    y = y.narrow(last, 0, self.size(last) / 2 + 1).contiguous();
  }
  return y;
}

// Inverse of a onesided spectrum: the complex inverse over the other dims
// first; then each row along the last dim is the spectrum of a real signal,
// whose missing half follows from Hermitian symmetry (X[n-k] = conj X[k]);
// the real part of its inverse is the signal (the imaginary parts of X[0]
// and X[n/2] drop out, as in pocketfft).
at::Tensor fft_c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                   int64_t last_dim_size) {
  if (dim.empty() || last_dim_size > kMaxDftLength || !dft_ok(self, dim) ||
      (self.scalar_type() != at::kComplexFloat && self.scalar_type() != at::kComplexDouble))
    return FALLBACK(_fft_c2r, self, dim, normalization, last_dim_size);
  int64_t last = dim.back(), n = last_dim_size;
  int64_t have = n / 2 + 1;
  at::Tensor half = self.narrow(last, 0, std::min(self.size(last), have)).to(at::kComplexDouble);
  if (half.size(last) < have) {  // a shorter input is zero-padded
    auto pad = half.sizes().vec();
    pad[last] = have - half.size(last);
    half = at::cat({half, at::zeros(pad, half.options())}, last);
  }
  if (dim.size() > 1) half = dft(half, dim.slice(0, dim.size() - 1), false);
  int64_t missing = n - have;
  at::Tensor full = half;
  if (missing > 0) {
    // X[n-k] for k = missing..1 -> conj of X[missing]..X[1], in that order
    at::Tensor mirror = half.narrow(last, 1, missing).flip({last}).conj().resolve_conj();
    full = at::cat({half, mirror}, last);
  }
  at::Tensor y = at::real(dft(full, at::IntArrayRef{last}, false)).contiguous();
  c10::ScalarType out = self.scalar_type() == at::kComplexDouble ? at::kDouble : at::kFloat;
  double count = 1;
  for (int64_t d : dim) count *= static_cast<double>(d == last ? n : self.size(d));
  if (normalization == 1) y = y / std::sqrt(count);
  else if (normalization == 2) y = y / count;
  return y.to(out);
}

// rsub: other - alpha * self (HF attention masks: 1.0 - mask)
at::Tensor rsub_tensor(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rsub.Tensor", rsub_tensor);
  m.impl("_fft_c2c", fft_c2c);
  m.impl("_fft_r2c", fft_r2c);
  m.impl("_fft_c2r", fft_c2r);
  m.impl("_embedding_bag", embedding_bag);
  m.impl("_embedding_bag_forward_only", embedding_bag_forward_only);
  m.impl("_embedding_bag_dense_backward", embedding_bag_dense_backward);
  m.impl("_embedding_bag_backward", embedding_bag_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward);
  m.impl("dot", dot);
  m.impl("vdot", vdot);
  m.impl("addmv.out", addmv_out);
  m.impl("nansum", nansum_dims);
  m.impl("nansum.out", nansum_out);
  m.impl("equal", equal);
  m.impl("_amp_foreach_non_finite_check_and_unscale_", amp_non_finite_check_and_unscale);
  m.impl("_amp_update_scale_", amp_update_scale);
  m.impl("nll_loss2d_forward", nll_loss2d_forward);
  m.impl("nll_loss2d_backward", nll_loss2d_backward);
  m.impl("embedding_renorm_", embedding_renorm);
}

}  // namespace torch_neuronx
