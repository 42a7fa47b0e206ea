// Optimizer steps: fused Adam/AdamW (optim.c), fused SGD, and the AMP grad
// scaler's ops (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_).
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {

// Fused SGD (torch.optim.SGD(fused=True)), step for step as ATen's CPU
// kernel: grads are unscaled in place by grad_scale, a nonzero found_inf
// leaves everything untouched (decided on the device, without a sync).
namespace {
void fused_sgd_impl(at::TensorList params, at::TensorList grads, at::TensorList bufs, double wd,
                    double mom, const at::Tensor &lr, double damp, bool nesterov, bool maximize,
                    bool first, const std::optional<at::Tensor> &grad_scale,
                    const std::optional<at::Tensor> &found_inf) {
  TORCH_CHECK(params.size() == grads.size(), "_fused_sgd_: expected as many grads as params");
  TORCH_CHECK(mom == 0.0 || bufs.size() == params.size(),
              "_fused_sgd_: expected as many momentum buffers as params");
  for (size_t i = 0; i < params.size(); i++) {
    at::Tensor p = params[i], g = grads[i];
    at::Tensor skip;
    if (found_inf.has_value() && found_inf->defined())
      skip = found_inf->to(p.device()).ne(0).reshape({});
    auto keep_or = [&](const at::Tensor &old, const at::Tensor &upd) {
      return skip.defined() ? at::where(skip, old, upd) : upd;
    };
    if (grad_scale.has_value() && grad_scale->defined())
      g.copy_(keep_or(g, g / grad_scale->to(p.device())));
    at::Tensor d = maximize ? g.neg() : g;
    if (wd != 0.0) d = d + p * wd;
    if (mom != 0.0) {
      at::Tensor buf = bufs[i];
      at::Tensor nb = first ? d : buf * mom + d * (1.0 - damp);
      buf.copy_(keep_or(buf, nb));
      d = nesterov ? d + nb * mom : nb;
    }
    p.copy_(keep_or(p, p - lr * d));
  }
}
}  // namespace

void fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList bufs, double wd,
               double mom, double lr, double damp, bool nesterov, bool maximize, bool first,
               const std::optional<at::Tensor> &grad_scale,
               const std::optional<at::Tensor> &found_inf) {
  if (params.empty()) return;
  fused_sgd_impl(params, grads, bufs, wd, mom, at::scalar_tensor(lr, at::kDouble), damp, nesterov,
                 maximize, first, grad_scale, found_inf);
}

void fused_sgd_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList bufs,
                         double wd, double mom, const at::Tensor &lr, double damp, bool nesterov,
                         bool maximize, bool first, const std::optional<at::Tensor> &grad_scale,
                         const std::optional<at::Tensor> &found_inf) {
  if (params.empty()) return;
  fused_sgd_impl(params, grads, bufs, wd, mom, lr, damp, nesterov, maximize, first, grad_scale,
                 found_inf);
}

// ---------------------------------------------------------- fused Adam/AdamW

namespace {

const float *device_scalar(const std::optional<at::Tensor> &t, c10::Device dev,
                           std::vector<at::Tensor> &keep) {
  if (!t.has_value() || !t->defined()) return nullptr;
  at::Tensor x = t->to(dev, at::kFloat);
  keep.push_back(x);
  return x.const_data_ptr<float>();
}

void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                at::TensorList state_steps, double lr, const at::Tensor *lr_tensor, double beta1,
                double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<at::Tensor> &grad_scale,
                const std::optional<at::Tensor> &found_inf, bool adamw) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n &&
                  state_steps.size() == n && (!amsgrad || max_exp_avg_sqs.size() == n),
              "fused Adam: all tensor lists must have the same length");
  for (size_t i = 0; i < n; i++) {
    const at::Tensor &p = params[i];
    c10::Device dev = p.device();
    std::vector<at::Tensor> keep;  // device scalars live until the launch is queued
    bool ok;
    tnk_dtype_t dt = to_tnk(p.scalar_type(), &ok);
    std::vector<at::Tensor> ts{p, grads[i], exp_avgs[i], exp_avg_sqs[i]};
    if (amsgrad) ts.push_back(max_exp_avg_sqs[i]);
    for (const at::Tensor &t : ts) {
      TORCH_CHECK(t.device() == dev && t.scalar_type() == p.scalar_type() && t.sizes() == p.sizes(),
                  "fused Adam: param, grad and state tensors must match in device, dtype "
                  "and shape");
      TORCH_CHECK(t.is_contiguous(), "fused Adam on neuron expects contiguous tensors");
    }
    TORCH_CHECK(ok && kernel_supported(TNK_K_ADAM, kernel_query(-1, dt, -1, -1)),
                "fused Adam supports floating parameters, got ", p.scalar_type());
    tnk_adam_args_t a{};
    a.param = p.data_ptr();
    a.grad = const_cast<void *>(grads[i].const_data_ptr());
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
    launch_kernel<TNK_K_ADAM>(dev.index(), a, adamw ? "aten::_fused_adamw_" : "aten::_fused_adam_");
  }
}
}  // namespace

#define NEURON_FUSED_ADAM(NAME, ADAMW)                                                             \
  void NAME(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,                    \
            at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,                            \
            at::TensorList state_steps, double lr, double beta1, double beta2,                     \
            double weight_decay, double eps, bool amsgrad, bool maximize,                          \
            const std::optional<at::Tensor> &grad_scale,                                           \
            const std::optional<at::Tensor> &found_inf) {                                          \
    fused_adam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, nullptr,      \
               beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, ADAMW);  \
  }                                                                                                \
  void NAME##tensor_lr(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,         \
                       at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,                 \
                       at::TensorList state_steps, const at::Tensor &lr, double beta1,             \
                       double beta2, double weight_decay, double eps, bool amsgrad, bool maximize, \
                       const std::optional<at::Tensor> &grad_scale,                                \
                       const std::optional<at::Tensor> &found_inf) {                               \
    fused_adam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, 0.0, &lr, beta1,  \
               beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, ADAMW);         \
  }
NEURON_FUSED_ADAM(fused_adamw_, true)
NEURON_FUSED_ADAM(fused_adam_, false)
#undef NEURON_FUSED_ADAM

namespace {

// --------------------------------------------------------- AMP grad scaler ops

// Every tensor is multiplied by inv_scale in place; found_inf becomes 1 if any
// element of any of them is inf or NaN. All on the device: no host sync.
void amp_non_finite_check_and_unscale(at::TensorList self, at::Tensor &found_inf,
                                      const at::Tensor &inv_scale) {
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  for (const at::Tensor &t : self) {
    TORCH_CHECK(t.device() == found_inf.device(),
                "Expected all tensors to be on the same "
                "device, but found ",
                t.device(), " and ", found_inf.device());
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
at::Tensor &amp_update_scale(at::Tensor &scale, at::Tensor &tracker, const at::Tensor &found_inf,
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sgd_", fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr);
  m.impl("_fused_adamw_", fused_adamw_);
  m.impl("_fused_adamw_.tensor_lr", fused_adamw_tensor_lr);
  m.impl("_fused_adam_", fused_adam_);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr);
  m.impl("_amp_foreach_non_finite_check_and_unscale_", amp_non_finite_check_and_unscale);
  m.impl("_amp_update_scale_", amp_update_scale);
}

}  // namespace torch_neuronx
