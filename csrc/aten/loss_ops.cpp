// Losses: nll_loss (loss.c's nll kernel) and its 2-D+ form, mse_loss,
// smooth_l1_loss, huber_loss, binary_cross_entropy, ctc_loss (loss.c's ctc
// kernel), and the multi-class margin losses (composed of native ops).
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

// ---------------------------------------------------------------- ctc_loss
// loss.c's ctc kernel, per sample in parallel. The lengths are host lists
// (the IntList overload, which ctc_loss reaches); they travel to the device
// with the targets' start offsets as one int64 tensor.

at::Tensor ctc_lengths(const at::Tensor &log_probs, const at::Tensor &targets,
                       at::IntArrayRef input_lengths, at::IntArrayRef target_lengths, int64_t blank,
                       int64_t *max_target) {
  TORCH_CHECK(log_probs.dim() == 3, "Expected 3-dimensional tensor, but got ", log_probs.dim(),
              "-dimensional tensor for argument #1 'log_probs' (while checking arguments for "
              "ctc_loss_cpu)");
  const int64_t T = log_probs.size(0), N = log_probs.size(1), C = log_probs.size(2);
  TORCH_CHECK(blank < C && C > 0 && blank >= 0, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == N,
              "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == N,
              "target_lengths must be of size batch_size");
  TORCH_CHECK(targets.scalar_type() == at::kLong || targets.scalar_type() == at::kInt,
              "Expected tensor for argument #2 'targets' to have one of the following scalar "
              "types: Int, Long; but got ",
              targets.scalar_type(), " instead (while checking arguments for ctc_loss_cpu)");
  at::Tensor lens = at::empty({3 * N}, at::kLong);
  int64_t *l = lens.data_ptr<int64_t>();
  int64_t pos = 0, mt = 0;
  for (int64_t n = 0; n < N; n++) {
    TORCH_CHECK(input_lengths[n] >= 0 && input_lengths[n] <= T,
                "Expected input_lengths to have value at most ", T, ", but got value ",
                input_lengths[n], " (while checking arguments for ctc_loss_cpu)");
    TORCH_CHECK(target_lengths[n] >= 0, "Expected target_lengths to be non-negative, got ",
                target_lengths[n]);
    l[n] = input_lengths[n];
    l[N + n] = target_lengths[n];
    mt = std::max(mt, target_lengths[n]);
    if (targets.dim() == 1) {
      l[2 * N + n] = pos;
      pos += target_lengths[n];
    } else {
      l[2 * N + n] = n * targets.size(1);
    }
  }
  if (targets.dim() == 1) {
    TORCH_CHECK(targets.size(0) >= pos, "Expected tensor to have size at least ", pos,
                " at dimension 0, but got size ", targets.size(0),
                " for argument #2 'targets' (while checking arguments for ctc_loss_cpu)");
  } else {
    TORCH_CHECK(targets.dim() == 2 && targets.size(0) == N,
                "Expected targets of shape [batch, max_target_length] or the concatenated "
                "targets, got ",
                targets.sizes());
    TORCH_CHECK(targets.size(1) >= mt, "Expected tensor to have size at least ", mt,
                " at dimension 1, but got size ", targets.size(1),
                " for argument #2 'targets' (while checking arguments for ctc_loss_cpu)");
  }
  *max_target = mt;
  return lens.to(log_probs.device());
}

// The descriptor fields forward and backward share (the tensors stay owned
// by the caller until the launch).
tnk_ctc_args_t ctc_args(const at::Tensor &lp, const at::Tensor &tg, const at::Tensor &lens,
                        int64_t L, int64_t blank) {
  tnk_ctc_args_t a{};
  a.log_probs = lp.const_data_ptr();
  a.targets = tg.const_data_ptr();
  a.lengths = lens.const_data_ptr();
  a.T = lp.size(0);
  a.N = lp.size(1);
  a.C = lp.size(2);
  a.L = L;
  a.blank = blank;
  a.dtype = tnk_of(lp);
  return a;
}

bool ctc_native(const at::Tensor &log_probs, const at::Tensor &targets) {
  tnk_dtype_t dt = tnk_of(log_probs);
  return dt != TNK_DTYPE_COUNT && kernel_supported(TNK_K_CTC, kernel_query(-1, dt, -1, -1)) &&
         targets.device() == log_probs.device();
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor &log_probs, const at::Tensor &targets,
                                            at::IntArrayRef input_lengths,
                                            at::IntArrayRef target_lengths, int64_t blank,
                                            bool zero_infinity) {
  if (!ctc_native(log_probs, targets))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_ctc_loss)>::call(
        log_probs, targets, input_lengths, target_lengths, blank, zero_infinity);
  int64_t mt = 0;
  at::Tensor lens = ctc_lengths(log_probs, targets, input_lengths, target_lengths, blank, &mt);
  const int64_t T = log_probs.size(0), N = log_probs.size(1);
  at::Tensor lp = log_probs.contiguous(), tg = targets.to(at::kLong).contiguous();
  at::Tensor nll = at::empty({N}, log_probs.options());
  at::Tensor alpha = at::empty({N, T, 2 * mt + 1}, log_probs.options());
  if (N == 0) return {nll, alpha};
  tnk_ctc_args_t a = ctc_args(lp, tg, lens, 2 * mt + 1, blank);
  a.log_alpha = alpha.data_ptr();
  a.out = nll.data_ptr();
  a.fault = fault_sink(log_probs.device().index(), "ctc_loss (target)", true);
  launch_kernel<TNK_K_CTC>(log_probs.device().index(), a, "aten::_ctc_loss");
  return {nll, alpha};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor &log_probs,
                                                   const at::Tensor &targets,
                                                   const at::Tensor &input_lengths,
                                                   const at::Tensor &target_lengths, int64_t blank,
                                                   bool zero_infinity) {
  at::Tensor il = input_lengths.to(at::kCPU, at::kLong).contiguous();
  at::Tensor tl = target_lengths.to(at::kCPU, at::kLong).contiguous();
  return at::_ctc_loss(log_probs, targets, at::IntArrayRef(il.data_ptr<int64_t>(), il.numel()),
                       at::IntArrayRef(tl.data_ptr<int64_t>(), tl.numel()), blank, zero_infinity);
}

at::Tensor ctc_loss_backward(const at::Tensor &grad, const at::Tensor &log_probs,
                             const at::Tensor &targets, at::IntArrayRef input_lengths,
                             at::IntArrayRef target_lengths, const at::Tensor &nll,
                             const at::Tensor &log_alpha, int64_t blank, bool zero_infinity) {
  if (!ctc_native(log_probs, targets) || grad.scalar_type() != log_probs.scalar_type() ||
      nll.scalar_type() != log_probs.scalar_type() ||
      log_alpha.scalar_type() != log_probs.scalar_type() || grad.device() != log_probs.device())
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_ctc_loss_backward)>::call(
        grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank,
        zero_infinity);
  int64_t mt = 0;
  at::Tensor lens = ctc_lengths(log_probs, targets, input_lengths, target_lengths, blank, &mt);
  const int64_t T = log_probs.size(0), N = log_probs.size(1);
  TORCH_CHECK(log_alpha.dim() == 3 && log_alpha.size(0) == N && log_alpha.size(1) == T &&
                  log_alpha.size(2) >= 2 * mt + 1,
              "_ctc_loss_backward: log_alpha of shape ", log_alpha.sizes(),
              " does not come from this input's forward");
  at::Tensor lp = log_probs.contiguous(), tg = targets.to(at::kLong).contiguous();
  at::Tensor la = log_alpha.contiguous(), g = grad.expand({N}).contiguous();
  at::Tensor nl = nll.contiguous();
  at::Tensor beta = at::empty(la.sizes(), la.options());
  at::Tensor out = at::empty(log_probs.sizes(), log_probs.options());
  if (N == 0 || T == 0) return out.zero_();
  tnk_ctc_args_t a = ctc_args(lp, tg, lens, la.size(2), blank);
  a.grad = g.const_data_ptr();
  a.nll = nl.const_data_ptr();
  a.log_alpha = la.data_ptr();
  a.log_beta = beta.data_ptr();
  a.out = out.data_ptr();
  a.backward = 1;
  a.zero_infinity = zero_infinity;
  a.fault = fault_sink(log_probs.device().index(), "ctc_loss_backward (target)", true);
  launch_kernel<TNK_K_CTC>(log_probs.device().index(), a, "aten::_ctc_loss_backward");
  return out;
}

// ------------------------------------------------- multi-class margin losses
// Composed of native ops (gather, clamp, scatter, reductions): the
// per-sample work is a few [N, C] (or [N, S, C]) element-wise passes.

struct MultiMargin {
  at::Tensor x, t, z, w;  // x [N, C], t [N, 1], z = margin terms (0 at the target)
  int64_t c;
};

MultiMargin multi_margin_terms(const at::Tensor &self, const at::Tensor &target,
                               const at::Scalar &margin, const std::optional<at::Tensor> &weight) {
  TORCH_CHECK(self.dim() <= 2 && self.numel() > 0,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
              self.sizes());
  at::Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  const int64_t n = x.size(0), c = x.size(1);
  TORCH_CHECK(target.numel() == n && target.dim() <= 1, "inconsistent target size, expected ", n,
              " but got ", target.sizes());
  TORCH_CHECK(
      !weight.has_value() || !weight->defined() || (weight->dim() <= 1 && weight->numel() == c),
      "inconsistent weight size, expected ", c, " but got ",
      weight.has_value() && weight->defined() ? weight->sizes() : at::IntArrayRef());
  at::Tensor t = target.reshape({n, 1}).to(at::kLong);
  at::Tensor xy = x.gather(1, t);
  at::Tensor z = (x - xy).add_(margin).clamp_min_(0).scatter_(1, t, 0);
  at::Tensor w;
  if (weight.has_value() && weight->defined())
    w = weight->reshape({-1}).index_select(0, t.view({-1})).unsqueeze(1);
  return {x, t, z, w, c};
}

at::Tensor nx_multi_margin_loss(const at::Tensor &self, const at::Tensor &target,
                                const at::Scalar &p, const at::Scalar &margin,
                                const std::optional<at::Tensor> &weight, int64_t reduction) {
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  MultiMargin m = multi_margin_terms(self, target, margin, weight);
  at::Tensor h = p.toLong() == 1 ? m.z : m.z * m.z;
  if (m.w.defined()) h = h * m.w;
  // a 1-D input's unreduced loss keeps its batch of 1 (CPU's shape)
  return reduced_loss(h.sum(1).div_(static_cast<double>(m.c)), reduction);
}

at::Tensor &nx_multi_margin_loss_out(const at::Tensor &self, const at::Tensor &target,
                                     const at::Scalar &p, const at::Scalar &margin,
                                     const std::optional<at::Tensor> &weight, int64_t reduction,
                                     at::Tensor &out) {
  return assign_result(out, nx_multi_margin_loss(self, target, p, margin, weight, reduction));
}

at::Tensor nx_multi_margin_loss_backward(const at::Tensor &grad, const at::Tensor &self,
                                         const at::Tensor &target, const at::Scalar &p,
                                         const at::Scalar &margin,
                                         const std::optional<at::Tensor> &weight,
                                         int64_t reduction) {
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  MultiMargin m = multi_margin_terms(self, target, margin, weight);
  const int64_t n = m.x.size(0);
  // d loss_i / d x_j = dh(z_ij) w_i / C for j != y_i, and minus their sum at y_i
  at::Tensor dz = p.toLong() == 1 ? m.z.gt(0).to(self.scalar_type()) : m.z * 2;
  if (m.w.defined()) dz = dz * m.w;
  at::Tensor g = reduction == at::Reduction::None ? grad.reshape({-1, 1}).expand({n, 1})
                                                  : grad.reshape({1, 1});
  double scale = 1.0 / static_cast<double>(m.c);
  if (reduction == at::Reduction::Mean) scale /= static_cast<double>(n);
  dz = dz * g * scale;
  at::Tensor gi = dz.scatter_add(1, m.t, -dz.sum(1, true));
  return gi.reshape(self.sizes());
}

at::Tensor &nx_multi_margin_loss_backward_out(const at::Tensor &grad, const at::Tensor &self,
                                              const at::Tensor &target, const at::Scalar &p,
                                              const at::Scalar &margin,
                                              const std::optional<at::Tensor> &weight,
                                              int64_t reduction, at::Tensor &gi) {
  return assign_result(
      gi, nx_multi_margin_loss_backward(grad, self, target, p, margin, weight, reduction));
}

// multilabel_margin_loss: target rows list class indices, ended by the first
// -1; each listed class j against each unlisted k: max(0, 1 - (x_j - x_k)).
struct MultiLabel {
  at::Tensor x, idx, valid, is_target, mask;  // mask [N, S, C]: terms > 0
  at::Tensor z;
};

MultiLabel multilabel_terms(const at::Tensor &self, const at::Tensor &target) {
  at::Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  TORCH_CHECK(self.dim() <= 2 && target.sizes() == self.sizes(),
              "inconsistent target size: ", target.sizes(), " for input of size: ", self.sizes());
  at::Tensor t = target.reshape(x.sizes()).to(at::kLong);
  at::Tensor valid = t.lt(0).cumsum(1).eq(0);  // before the first -1
  at::Tensor idx = t.clamp_min(0).masked_fill(valid.logical_not(), 0);
  at::Tensor vf = valid.to(x.scalar_type());
  at::Tensor is_target = at::zeros_like(x).scatter_add_(1, idx, vf).clamp_max_(1);
  at::Tensor xt = x.gather(1, idx);  // [N, S]
  at::Tensor z = (x.unsqueeze(1) - xt.unsqueeze(2)).add_(1).clamp_min_(0);
  z = z * vf.unsqueeze(2) * (1 - is_target).unsqueeze(1);  // [N, S, C]
  return {x, idx, valid, is_target, z.gt(0), z};
}

std::tuple<at::Tensor, at::Tensor> nx_multilabel_margin_loss_forward(const at::Tensor &self,
                                                                     const at::Tensor &target,
                                                                     int64_t reduction) {
  MultiLabel m = multilabel_terms(self, target);
  at::Tensor per = m.z.sum({1, 2}).div_(static_cast<double>(m.x.size(1)));
  if (self.dim() <= 1 && reduction == at::Reduction::None) per = per.reshape({});
  return {reduced_loss(per, reduction), m.is_target.reshape(self.sizes())};
}

at::Tensor nx_multilabel_margin_loss_backward(const at::Tensor &grad, const at::Tensor &self,
                                              const at::Tensor &target, int64_t reduction,
                                              const at::Tensor & /*is_target*/) {
  MultiLabel m = multilabel_terms(self, target);
  const int64_t n = m.x.size(0);
  at::Tensor on = m.mask.to(self.scalar_type());                // [N, S, C]
  at::Tensor gi = on.sum(1).scatter_add(1, m.idx, -on.sum(2));  // +1 at k, -1 at j
  double scale = 1.0 / static_cast<double>(m.x.size(1));
  if (reduction == at::Reduction::Mean) scale /= static_cast<double>(n);
  at::Tensor g = reduction == at::Reduction::None ? grad.reshape({-1, 1}) : grad.reshape({1, 1});
  return (gi * g * scale).reshape(self.sizes());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multi_margin_loss", nx_multi_margin_loss);
  m.impl("multi_margin_loss.out", nx_multi_margin_loss_out);
  m.impl("multi_margin_loss_backward", nx_multi_margin_loss_backward);
  m.impl("multi_margin_loss_backward.grad_input", nx_multi_margin_loss_backward_out);
  m.impl("multilabel_margin_loss_forward", nx_multilabel_margin_loss_forward);
  m.impl("multilabel_margin_loss_backward", nx_multilabel_margin_loss_backward);
  m.impl("_ctc_loss", ctc_loss);
  m.impl("_ctc_loss.Tensor", ctc_loss_tensor);
  m.impl("_ctc_loss_backward", ctc_loss_backward);
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
