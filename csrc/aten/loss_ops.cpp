// Losses: nll_loss (loss.c's nll kernel) and its 2-D+ form, mse_loss,
// smooth_l1_loss, huber_loss, binary_cross_entropy.
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

// An element-wise loss reduced as asked (reduction: 0 none, 1 mean, 2 sum).
at::Tensor reduced_loss(const at::Tensor &l, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return l.mean();
  if (reduction == at::Reduction::Sum) return l.sum();
  return l;
}

// A gradient written into grad_input with the input's shape.
at::Tensor &assign_expanded(at::Tensor &gin, const at::Tensor &r, at::IntArrayRef shape) {
  at::native::resize_output(gin, shape);
  return gin.copy_(r.expand(shape));
}
}  // namespace

// mse_loss and its backward.
at::Tensor mse_loss(const at::Tensor &self, const at::Tensor &target, int64_t reduction) {
  at::Tensor d = self - target;
  return reduced_loss(d * d, reduction);
}

at::Tensor &mse_loss_out(const at::Tensor &self, const at::Tensor &target, int64_t reduction,
                         at::Tensor &out) {
  at::Tensor r = torch_neuronx::mse_loss(self, target, reduction);
  return assign_result(out, r);
}

at::Tensor mse_loss_backward(const at::Tensor &grad, const at::Tensor &self,
                             const at::Tensor &target, int64_t reduction) {
  double norm = reduction == 1 ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  return (self - target) * grad * norm;
}

// smooth L1 (Huber with 1/beta scaling): quadratic below beta.
at::Tensor smooth_l1(const at::Tensor &self, const at::Tensor &target, int64_t reduction,
                     double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  at::Tensor d = (self - target).abs();
  return reduced_loss(beta == 0 ? d : at::where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta),
                      reduction);
}

at::Tensor &smooth_l1_loss_out(const at::Tensor &self, const at::Tensor &target, int64_t reduction,
                               double beta, at::Tensor &out) {
  at::Tensor r = smooth_l1(self, target, reduction, beta);
  return assign_result(out, r);
}

at::Tensor &smooth_l1_loss_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                        const at::Tensor &target, int64_t reduction, double beta,
                                        at::Tensor &gin) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  at::Tensor x = self - target;
  at::Tensor g = beta == 0 ? at::sign(x) : at::clamp(x / beta, -1.0, 1.0);
  double norm = reduction == 1 ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  return assign_expanded(gin, g * grad * norm, self.sizes());
}

// huber_loss: quadratic below delta, linear above (smooth L1 times delta).
at::Tensor huber_loss(const at::Tensor &self, const at::Tensor &target, int64_t reduction,
                      double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  at::Tensor z = (self - target).abs();
  return reduced_loss(at::where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta), reduction);
}

at::Tensor &huber_loss_out(const at::Tensor &self, const at::Tensor &target, int64_t reduction,
                           double delta, at::Tensor &out) {
  return assign_result(out, torch_neuronx::huber_loss(self, target, reduction, delta));
}

at::Tensor &huber_loss_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                    const at::Tensor &target, int64_t reduction, double delta,
                                    at::Tensor &gin) {
  double norm = reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  at::Tensor x = self - target;
  return assign_expanded(gin, at::clamp(x, -delta, delta) * grad * norm, self.sizes());
}

// binary_cross_entropy, as CPU computes it: each log clamped at -100, inputs
// checked to lie in [0, 1] (one synchronisation, as CPU raises there too),
// input and target squeezed before they meet.
namespace {
void check_bce(const at::Tensor &input, const at::Tensor &target) {
  TORCH_CHECK(target.scalar_type() == input.scalar_type(), "Found dtype ", target.scalar_type(),
              " but expected ", input.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()),
                              "\"binary_cross_entropy\" not implemented for '", input.scalar_type(),
                              "'");
}

at::Tensor squeezed_like(const at::Tensor &r, const at::Tensor &input) {
  at::Tensor out = at::empty_like(input);
  at::Tensor sq = out.squeeze();
  TORCH_CHECK(r.sizes() == sq.sizes(), "output with shape ", sq.sizes(),
              " doesn't match the broadcast shape ", r.sizes());
  sq.copy_(r);
  return out;
}
}  // namespace

at::Tensor binary_cross_entropy(const at::Tensor &input, const at::Tensor &target,
                                const std::optional<at::Tensor> &weight, int64_t reduction) {
  check_bce(input, target);
  if (input.numel() > 0)
    TORCH_CHECK(at::logical_and(input >= 0, input <= 1).all().item<bool>(),
                "all elements of input should be between 0 and 1");
  at::Tensor x = input.squeeze(), t = target.squeeze();
  at::Tensor r = (t - 1) * at::clamp_min(at::log1p(-x), -100) - t * at::clamp_min(at::log(x), -100);
  at::Tensor loss = squeezed_like(r, input);
  if (weight.has_value() && weight->defined()) loss.mul_(*weight);
  return reduced_loss(loss, reduction);
}

at::Tensor &binary_cross_entropy_out(const at::Tensor &input, const at::Tensor &target,
                                     const std::optional<at::Tensor> &weight, int64_t reduction,
                                     at::Tensor &out) {
  return assign_result(out, torch_neuronx::binary_cross_entropy(input, target, weight, reduction));
}

at::Tensor binary_cross_entropy_backward(const at::Tensor &grad, const at::Tensor &input,
                                         const at::Tensor &target,
                                         const std::optional<at::Tensor> &weight,
                                         int64_t reduction) {
  check_bce(input, target);
  at::Tensor x = input.squeeze(), t = target.squeeze();
  at::Tensor r = grad.squeeze() * (x - t) / at::clamp_min((1 - x) * x, 1e-12);
  at::Tensor gi = squeezed_like(r, input);
  if (weight.has_value() && weight->defined()) gi.mul_(*weight);
  if (reduction == at::Reduction::Mean) gi.div_(static_cast<double>(input.numel()));
  return gi;
}

at::Tensor &binary_cross_entropy_backward_out(const at::Tensor &grad, const at::Tensor &input,
                                              const at::Tensor &target,
                                              const std::optional<at::Tensor> &weight,
                                              int64_t reduction, at::Tensor &gin) {
  return assign_result(
      gin, torch_neuronx::binary_cross_entropy_backward(grad, input, target, weight, reduction));
}

// ---------------------------------------------------------------- nll_loss

namespace {
void check_nll(const at::Tensor &self, const at::Tensor &target, const at::Tensor &weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
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

bool nll_native(const at::Tensor &self, const at::Tensor &target, const at::Tensor &weight) {
  tnk_dtype_t dt = tnk_of(self);
  return dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_NLL, kernel_query(-1, dt, -1, -1)) &&
         target.device() == self.device() &&
         (!weight.defined() ||
          (weight.device() == self.device() && weight.scalar_type() == self.scalar_type()));
}
}  // namespace

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor &self,
                                                    const at::Tensor &target,
                                                    const std::optional<at::Tensor> &weight_opt,
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
  launch_kernel<TNK_K_NLL>(self.device().index(), a, "aten::nll_loss_forward");
  return {out, tw};
}

at::Tensor nll_loss_backward(const at::Tensor &grad_output, const at::Tensor &self,
                             const at::Tensor &target, const std::optional<at::Tensor> &weight_opt,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor &total_weight) {
  at::Tensor weight = weight_opt.has_value() ? *weight_opt : at::Tensor();
  if (!nll_native(self, target, weight) || grad_output.scalar_type() != self.scalar_type() ||
      total_weight.scalar_type() != self.scalar_type() || grad_output.device() != self.device() ||
      total_weight.device() != self.device())
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(nll_loss_backward)>::call(
        grad_output, self, target, weight_opt, reduction, ignore_index, total_weight);
  check_nll(self, target, weight);
  int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
  TORCH_CHECK(reduction != 0 || self.dim() == 1 || grad_output.numel() == n,
              "Expected a tensor of dimension 1 and tensor.size[0] == ", n, " but got: dimension ",
              grad_output.dim(),
              " and tensor.size[0] == ", grad_output.dim() ? grad_output.size(0) : 1);
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
  a.total_weight = const_cast<void *>(total_weight.const_data_ptr());
  a.n = n;
  a.c = c;
  a.ignore_index = ignore_index;
  a.dtype = tnk_of(self);
  a.reduction = static_cast<int32_t>(reduction);
  a.backward = 1;
  a.fault = fault_sink(self.device().index(), "nll_loss_backward (target)", true);
  launch_kernel<TNK_K_NLL>(self.device().index(), a, "aten::nll_loss_backward");
  return gi;
}

namespace {

// ------------------------------------------------------ nll_loss over images

// [N, C, d1, ...] -> [N * d1 * ..., C] rows (class dim last) and targets
std::pair<at::Tensor, at::Tensor> as_rows(const at::Tensor &self, const at::Tensor &target) {
  TORCH_CHECK(self.dim() >= 3,
              "only batches of spatial inputs supported (4D tensors), but got "
              "input of size: ",
              self.sizes());
  TORCH_CHECK(target.dim() == self.dim() - 1,
              "only batches of spatial targets supported (3D "
              "tensors) but got targets of size: ",
              target.sizes());
  TORCH_CHECK(self.size(0) == target.size(0) && self.sizes().slice(2) == target.sizes().slice(1),
              "input and target batch or spatial sizes don't match: target ", target.sizes(),
              ", input ", self.sizes());
  at::Tensor rows = self.movedim(1, -1).reshape({-1, self.size(1)});
  return {rows, target.reshape({-1})};
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor &self,
                                                      const at::Tensor &target,
                                                      const std::optional<at::Tensor> &weight,
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

at::Tensor nll_loss2d_backward(const at::Tensor &grad_output, const at::Tensor &self,
                               const at::Tensor &target, const std::optional<at::Tensor> &weight,
                               int64_t reduction, int64_t ignore_index,
                               const at::Tensor &total_weight) {
  auto [rows, t] = as_rows(self, target);
  at::Tensor g = reduction == at::Reduction::None ? grad_output.reshape({-1}) : grad_output;
  at::Tensor gi = at::nll_loss_backward(g, rows, t, weight, reduction, ignore_index, total_weight);
  // rows [N * spatial, C] -> [N, spatial..., C] -> [N, C, spatial...]
  std::vector<int64_t> shape{self.size(0)};
  for (int64_t d = 2; d < self.dim(); d++) shape.push_back(self.size(d));
  shape.push_back(self.size(1));
  return gi.reshape(shape).movedim(-1, 1).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", mse_loss);
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward", mse_loss_backward);
  m.impl("smooth_l1_loss.out", smooth_l1_loss_out);
  m.impl("smooth_l1_loss_backward.grad_input", smooth_l1_loss_backward_out);
  m.impl("huber_loss", huber_loss);
  m.impl("huber_loss.out", huber_loss_out);
  m.impl("huber_loss_backward.out", huber_loss_backward_out);
  m.impl("binary_cross_entropy", binary_cross_entropy);
  m.impl("binary_cross_entropy.out", binary_cross_entropy_out);
  m.impl("binary_cross_entropy_backward", binary_cross_entropy_backward);
  m.impl("binary_cross_entropy_backward.grad_input", binary_cross_entropy_backward_out);
  m.impl("nll_loss_forward", nll_loss_forward);
  m.impl("nll_loss_backward", nll_loss_backward);
  m.impl("nll_loss2d_forward", nll_loss2d_forward);
  m.impl("nll_loss2d_backward", nll_loss2d_backward);
}

}  // namespace torch_neuronx
