// Ops composed from native neuron kernels (no dedicated kernel of their own
// yet): variance and standard deviation, vector norms, group norm, dropout,
// mse_loss, softplus, log_sigmoid, sign, flip, eye, linspace and nearest
// upsampling. Each runs as a few
// element-wise/reduction launches on the device, never on the CPU; fusing
// them into single kernels is a performance step, not a correctness one.
// Argument checks follow ATen's messages.
#include "neuron.h"

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

bool floating(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble ||
         t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

std::vector<int64_t> dims_or_all(const at::Tensor& t, at::OptionalIntArrayRef dim) {
  if (dim.has_value() && !dim->empty()) return dim->vec();
  std::vector<int64_t> all(t.dim());
  for (int64_t d = 0; d < t.dim(); d++) all[d] = d;
  return all;
}

int64_t reduced_count(const at::Tensor& t, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= t.dim() ? t.size(at::maybe_wrap_dim(d, t.dim())) : 1;
  return n;
}

// Two-pass variance: mean, then the sum of squared deviations (fp32/fp64
// accumulation as the reduction kernel does), divided by N - correction.
std::pair<at::Tensor, at::Tensor> var_and_mean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar>& correction,
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

at::Tensor var_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!floating(self)) return FALLBACK(var_correction, self, dim, correction, keepdim);
  return var_and_mean(self, dim, correction, keepdim).first;
}

at::Tensor std_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!floating(self)) return FALLBACK(std_correction, self, dim, correction, keepdim);
  return var_and_mean(self, dim, correction, keepdim).first.sqrt_();
}

std::tuple<at::Tensor, at::Tensor> var_mean_correction(const at::Tensor& self,
                                                       at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar>& correction,
                                                       bool keepdim) {
  if (!floating(self)) return FALLBACK(var_mean_correction, self, dim, correction, keepdim);
  auto r = var_and_mean(self, dim, correction, keepdim);
  return {r.first, r.second};
}

std::tuple<at::Tensor, at::Tensor> std_mean_correction(const at::Tensor& self,
                                                       at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar>& correction,
                                                       bool keepdim) {
  if (!floating(self)) return FALLBACK(std_mean_correction, self, dim, correction, keepdim);
  auto r = var_and_mean(self, dim, correction, keepdim);
  return {r.first.sqrt_(), r.second};
}

// ||x||_ord over dims: 2 (the default, gradient clipping), 1, inf, -inf, 0
// and any other p.
at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const c10::Scalar& ord,
                                   at::OptionalIntArrayRef dim, bool keepdim,
                                   std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  at::Tensor x = dtype.has_value() ? self.to(*dtype) : self;
  if (!floating(x) || x.is_complex())
    return FALLBACK(linalg_vector_norm_out, self, ord, dim, keepdim, dtype, out);
  double p = ord.toDouble();
  auto dims = dims_or_all(x, dim);
  if (x.numel() == 0 && std::isinf(p) && p > 0)
    TORCH_CHECK(false, "linalg.vector_norm cannot compute the inf norm on an empty tensor "
                "because the operation does not have an identity");
  at::Tensor r;
  at::Tensor a = x.abs();
  if (p == 2.0) r = at::sum(x * x, dims, keepdim).sqrt_();
  else if (p == 1.0) r = at::sum(a, dims, keepdim);
  else if (std::isinf(p)) r = p > 0 ? at::amax(a, dims, keepdim) : at::amin(a, dims, keepdim);
  else if (p == 0.0) r = at::sum(x.ne(0).to(x.scalar_type()), dims, keepdim);
  else r = at::sum(a.pow(p), dims, keepdim).pow_(1.0 / p);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor linalg_vector_norm(const at::Tensor& self, const c10::Scalar& ord,
                              at::OptionalIntArrayRef dim, bool keepdim,
                              std::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(dtype.value_or(
                                      c10::toRealValueType(self.scalar_type()))));
  return linalg_vector_norm_out(self, ord, dim, keepdim, dtype, out);
}

// Group norm as layer norm over the (N * group) rows of C / group * HxW
// elements (the native layer-norm kernel), then the per-channel affine.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& x, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, c10::SymInt N_, c10::SymInt C_, c10::SymInt HxW_,
    int64_t group, double eps) {
  int64_t N = N_.expect_int(), C = C_.expect_int(), HxW = HxW_.expect_int();
  TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels in input to be "
              "divisible by num_groups, but got input of shape ", x.sizes(), " and num_groups=",
              group);
  int64_t D = C / group * HxW;
  at::Tensor x2 = x.contiguous().view({N * group, D});
  auto r = at::native_layer_norm(x2, {D}, std::nullopt, std::nullopt, eps);
  at::Tensor y = std::get<0>(r).view(x.sizes());
  std::vector<int64_t> cshape(x.dim(), 1);
  if (x.dim() > 1) cshape[1] = C;
  if (weight.has_value() && weight->defined()) y = y * weight->view(cshape);
  if (bias.has_value() && bias->defined()) y = y + bias->view(cshape);
  return {y.contiguous(), std::get<1>(r).view({N, group}), std::get<2>(r).view({N, group})};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad, const at::Tensor& x, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, c10::SymInt N_, c10::SymInt C_, c10::SymInt HxW_,
    int64_t group, std::array<bool, 3> mask) {
  int64_t N = N_.expect_int(), C = C_.expect_int(), HxW = HxW_.expect_int();
  int64_t D = C / group * HxW;
  std::vector<int64_t> cshape(x.dim(), 1);
  if (x.dim() > 1) cshape[1] = C;
  bool has_w = weight.has_value() && weight->defined();
  at::Tensor gx, gw, gb;
  if (mask[0]) {
    at::Tensor g = has_w ? grad * weight->view(cshape) : grad;
    auto r = at::native_layer_norm_backward(g.contiguous().view({N * group, D}),
                                            x.contiguous().view({N * group, D}), {D},
                                            mean.reshape({N * group, 1}),
                                            rstd.reshape({N * group, 1}), std::nullopt,
                                            std::nullopt, {true, false, false});
    gx = std::get<0>(r).view(x.sizes());
  }
  std::vector<int64_t> sum_dims{0};
  for (int64_t d = 2; d < x.dim(); d++) sum_dims.push_back(d);
  if (mask[1]) {
    at::Tensor xhat = ((x.contiguous().view({N, group, -1}) - mean.view({N, group, 1})) *
                       rstd.view({N, group, 1})).view(x.sizes());
    gw = at::sum(grad * xhat, sum_dims);
  }
  if (mask[2]) gb = at::sum(grad, sum_dims);
  return {gx, gw, gb};
}

// Dropout: a Bernoulli keep-mask from the device generator (Philox), scaled
// by 1 / (1 - p), as ATen's native_dropout.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1.0) return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool)).bernoulli_(1.0 - p);
  double scale = 1.0 / (1.0 - p);
  return {input * mask * scale, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  return grad * mask * scale;
}

// mse_loss and its backward (reduction: 0 none, 1 mean, 2 sum).
at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  at::Tensor d = self - target;
  at::Tensor l = d * d;
  if (reduction == 1) return l.mean();
  if (reduction == 2) return l.sum();
  return l;
}

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out) {
  at::Tensor r = torch_neuronx::mse_loss(self, target, reduction);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor mse_loss_backward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction) {
  double norm = reduction == 1 ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  return (self - target) * grad * norm;
}

// softplus(x) = log1p(exp(beta x)) / beta, linear above the threshold.
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta,
                         const c10::Scalar& threshold, at::Tensor& out) {
  double b = beta.toDouble(), t = threshold.toDouble();
  at::Tensor bx = self * b;
  at::Tensor r = at::where(bx > t, self, bx.exp().log1p() / b);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                  const c10::Scalar& beta, const c10::Scalar& threshold,
                                  at::Tensor& grad_input) {
  double b = beta.toDouble(), t = threshold.toDouble();
  at::Tensor bx = self * b;
  at::Tensor r = at::where(bx > t, grad, grad * bx.sigmoid());
  at::native::resize_output(grad_input, r.sizes());
  return grad_input.copy_(r);
}

// log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)); the buffer is exp(-|x|).
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor buffer = self.abs().neg_().exp_();
  return {at::minimum(self, at::zeros_like(self)) - buffer.log1p(), buffer};
}

at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& self,
                                const at::Tensor& buffer) {
  // d/dx = 1 - sigmoid(x) = sigmoid(-x)
  return grad * self.neg().sigmoid();
}

at::Tensor& sign_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(!self.is_complex(), "Unlike NumPy, torch.sign is not intended to support complex "
              "numbers. Please use torch.sgn instead.");
  if (self.scalar_type() == at::kBool) {
    at::native::resize_output(out, self.sizes());
    return out.copy_(self);
  }
  at::Tensor r = (self > 0).to(self.scalar_type()) - (self < 0).to(self.scalar_type());
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// sgn: sign for real tensors (abs's backward uses it).
at::Tensor& sgn_out(const at::Tensor& self, at::Tensor& out) {
  if (self.is_complex()) return FALLBACK(sgn_out, self, out);
  return sign_out(self, out);
}

// flip: a reversed view (negative strides are not allowed in a tensor, so
// the index kernel gathers rows in reverse along each flipped dim).
at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  at::Tensor r = self;
  auto flags = at::dim_list_to_bitset(dims, self.dim());
  for (int64_t d = 0; d < self.dim(); d++) {
    if (!flags[d] || self.size(d) < 2) continue;
    at::Tensor idx = at::arange(self.size(d) - 1, -1, -1, self.options().dtype(at::kLong));
    r = r.index_select(d, idx);
  }
  return r.is_same(self) ? self.clone() : r;
}

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  at::native::resize_output(out, {n, m});
  out.zero_();
  int64_t k = std::min(n, m);
  if (k > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                         at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  if (steps == 1) return out.fill_(start);
  double a = start.toDouble(), b = end.toDouble(), step = (b - a) / (steps - 1);
  // As ATen: the first half counts up from start, the second down from end.
  int64_t half = steps / 2;
  at::Tensor i = at::arange(steps, out.options().dtype(at::kDouble));
  at::Tensor up = i * step + a, down = (i - (steps - 1)) * step + b;
  at::Tensor r = at::where(i < half, up, down);
  if (c10::isIntegralType(out.scalar_type(), true)) r = r.trunc();
  return out.copy_(r);
}

// Nearest-neighbour 2-D upsampling as two row gathers (index_select); the
// backward sums the gradient back with index_add. Source indices as ATen
// computes them (float scale, floor, clamped).
namespace {
at::Tensor nearest_index(int64_t in, int64_t out, std::optional<double> scale,
                         c10::Device dev) {
  std::vector<int64_t> idx(out);
  float s = scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                            : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; i++) {
    int64_t v = out == in ? i : out == 2 * in ? i >> 1
                                              : static_cast<int64_t>(std::floor(i * s));
    idx[i] = std::min(v, in - 1);
  }
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(dev);
}
}  // namespace

at::Tensor& upsample_nearest2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                   std::optional<double> scales_h, std::optional<double> scales_w,
                                   at::Tensor& out) {
  TORCH_CHECK(self.dim() == 4 && output_size.size() == 2,
              "upsample_nearest2d expects a 4-D input and 2 output sizes");
  at::Tensor ih = nearest_index(self.size(2), output_size[0], scales_h, self.device());
  at::Tensor iw = nearest_index(self.size(3), output_size[1], scales_w, self.device());
  at::Tensor r = self.index_select(2, ih).index_select(3, iw);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor upsample_nearest2d(const at::Tensor& self, at::IntArrayRef output_size,
                              std::optional<double> scales_h, std::optional<double> scales_w) {
  at::Tensor out = at::empty({0}, self.options());
  return upsample_nearest2d_out(self, output_size, scales_h, scales_w, out);
}

at::Tensor& upsample_nearest2d_backward_out(const at::Tensor& grad, at::IntArrayRef output_size,
                                            at::IntArrayRef input_size,
                                            std::optional<double> scales_h,
                                            std::optional<double> scales_w,
                                            at::Tensor& grad_input) {
  at::Tensor ih = nearest_index(input_size[2], output_size[0], scales_h, grad.device());
  at::Tensor iw = nearest_index(input_size[3], output_size[1], scales_w, grad.device());
  at::Tensor g = grad.contiguous();
  at::Tensor rows = at::zeros({input_size[0], input_size[1], output_size[0], input_size[3]},
                              grad.options()).index_add_(3, iw, g);
  at::Tensor r = at::zeros(input_size, grad.options()).index_add_(2, ih, rows);
  at::native::resize_output(grad_input, r.sizes());
  return grad_input.copy_(r);
}

at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, at::IntArrayRef output_size,
                                       at::IntArrayRef input_size,
                                       std::optional<double> scales_h,
                                       std::optional<double> scales_w) {
  at::Tensor out = at::empty({0}, grad.options());
  return upsample_nearest2d_backward_out(grad, output_size, input_size, scales_h, scales_w, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest2d", upsample_nearest2d);
  m.impl("upsample_nearest2d.out", upsample_nearest2d_out);
  m.impl("upsample_nearest2d_backward", upsample_nearest2d_backward);
  m.impl("upsample_nearest2d_backward.grad_input", upsample_nearest2d_backward_out);
  m.impl("var.correction", var_correction);
  m.impl("std.correction", std_correction);
  m.impl("var_mean.correction", var_mean_correction);
  m.impl("std_mean.correction", std_mean_correction);
  m.impl("linalg_vector_norm", linalg_vector_norm);
  m.impl("linalg_vector_norm.out", linalg_vector_norm_out);
  m.impl("native_group_norm", native_group_norm);
  m.impl("native_group_norm_backward", native_group_norm_backward);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
  m.impl("mse_loss", mse_loss);
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward", mse_loss_backward);
  m.impl("softplus.out", softplus_out);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("sign.out", sign_out);
  m.impl("sgn.out", sgn_out);
  m.impl("flip", flip);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
  m.impl("linspace.out", linspace_out);
}

}  // namespace torch_neuronx
