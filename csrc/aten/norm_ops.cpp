// Normalisations: softmax/log_softmax (softmax.c), layer norm
// (layer_norm.c), and group norm and batch norm composed from them.
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {

// Group norm as layer norm over the (N * group) rows of C / group * HxW
// elements (the native layer-norm kernel), then the per-channel affine.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor &x, const std::optional<at::Tensor> &weight,
    const std::optional<at::Tensor> &bias, c10::SymInt N_, c10::SymInt C_, c10::SymInt HxW_,
    int64_t group, double eps) {
  int64_t N = N_.expect_int(), C = C_.expect_int(), HxW = HxW_.expect_int();
  TORCH_CHECK(group > 0 && C % group == 0,
              "Expected number of channels in input to be "
              "divisible by num_groups, but got input of shape ",
              x.sizes(), " and num_groups=", group);
  TORCH_CHECK(x.is_contiguous(x.suggest_memory_format()),
              "Expected X.is_contiguous(memory_format) to be true, but got false.");
  int64_t D = C / group * HxW;
  // fp16/bf16: normalise, scale and shift in float32, one rounding at the end
  const at::ScalarType t = x.scalar_type();
  const bool low = at::isReducedFloatingType(t);
  auto wide = [&](const at::Tensor &v) { return low ? v.to(at::kFloat) : v; };
  at::Tensor x2 = wide(x.contiguous().view({N * group, D}));
  auto r = at::native_layer_norm(x2, {D}, std::nullopt, std::nullopt, eps);
  at::Tensor y = std::get<0>(r).view(x.sizes());
  std::vector<int64_t> cshape(x.dim(), 1);
  if (x.dim() > 1) cshape[1] = C;
  if (weight.has_value() && weight->defined()) y = y * wide(*weight).view(cshape);
  if (bias.has_value() && bias->defined()) y = y + wide(*bias).view(cshape);
  // mean and rstd in x's dtype, float32 when a parameter is (CPU's mixed type)
  const at::ScalarType st = low && any_float32({&weight, &bias}) ? at::kFloat : t;
  return {y.to(t).contiguous(), std::get<1>(r).view({N, group}).to(st),
          std::get<2>(r).view({N, group}).to(st)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor &grad, const at::Tensor &x, const at::Tensor &mean, const at::Tensor &rstd,
    const std::optional<at::Tensor> &weight, c10::SymInt N_, c10::SymInt C_, c10::SymInt HxW_,
    int64_t group, std::array<bool, 3> mask) {
  int64_t N = N_.expect_int(), C = C_.expect_int(), HxW = HxW_.expect_int();
  int64_t D = C / group * HxW;
  std::vector<int64_t> cshape(x.dim(), 1);
  if (x.dim() > 1) cshape[1] = C;
  bool has_w = weight.has_value() && weight->defined();
  at::Tensor gx, gw, gb;
  if (mask[0]) {
    at::Tensor g = has_w ? grad * weight->view(cshape) : grad;
    auto r = at::native_layer_norm_backward(
        g.contiguous().view({N * group, D}), x.contiguous().view({N * group, D}), {D},
        mean.reshape({N * group, 1}), rstd.reshape({N * group, 1}), std::nullopt, std::nullopt,
        {true, false, false});
    gx = std::get<0>(r).view(x.sizes());
  }
  std::vector<int64_t> sum_dims{0};
  for (int64_t d = 2; d < x.dim(); d++) sum_dims.push_back(d);
  if (mask[1]) {
    at::Tensor xhat =
        ((x.contiguous().view({N, group, D}) - mean.view({N, group, 1})) * rstd.view({N, group, 1}))
            .view(x.sizes());
    gw = at::sum(grad * xhat, sum_dims);
  }
  if (mask[2]) gb = at::sum(grad, sum_dims);
  return {gx, gw, gb};
}

// Batch norm over every dim but 1, statistics in fp32 (fp64 for fp64), as
// CPU computes them; running statistics take the unbiased variance.
namespace {
at::ScalarType stat_type(const at::Tensor &x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}
std::vector<int64_t> bn_dims(const at::Tensor &x) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < x.dim(); i++)
    if (i != 1) d.push_back(i);
  return d;
}
std::vector<int64_t> bn_shape(const at::Tensor &x) {
  std::vector<int64_t> s(x.dim(), 1);
  s[1] = x.size(1);
  return s;
}
}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor &input, const std::optional<at::Tensor> &weight,
    const std::optional<at::Tensor> &bias, const std::optional<at::Tensor> &rmean,
    const std::optional<at::Tensor> &rvar, bool training, double momentum, double eps) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected input with at least 2 dims, got ",
              input.dim());
  at::ScalarType st = stat_type(input);
  at::Tensor x = input.to(st);
  auto dims = bn_dims(input);
  auto shape = bn_shape(input);
  int64_t n = input.numel() / std::max<int64_t>(1, input.size(1));
  at::Tensor mean, invstd, save_mean, save_invstd;
  if (training) {
    TORCH_CHECK(n > 1 || input.numel() == 0,
                "Expected more than 1 value per channel when training, got input size ",
                input.sizes());
    mean = at::mean(x, dims);
    at::Tensor dev = x - mean.view(shape);
    at::Tensor var = at::sum(dev * dev, dims).div_(std::max<int64_t>(1, n));
    invstd = at::rsqrt(var + eps);
    if (rmean.has_value() && rmean->defined())
      rmean->mul_(1 - momentum).add_(mean.to(rmean->scalar_type()), momentum);
    if (rvar.has_value() && rvar->defined()) {
      at::Tensor unbiased = var * (static_cast<double>(n) / std::max<int64_t>(1, n - 1));
      rvar->mul_(1 - momentum).add_(unbiased.to(rvar->scalar_type()), momentum);
    }
    save_mean = mean;
    save_invstd = invstd;
  } else {
    TORCH_CHECK(rmean.has_value() && rmean->defined() && rvar.has_value() && rvar->defined(),
                "running_mean and running_var must be defined in evaluation mode");
    mean = rmean->to(st);
    invstd = at::rsqrt(rvar->to(st) + eps);
    save_mean = at::empty({0}, input.options().dtype(st));
    save_invstd = at::empty({0}, input.options().dtype(st));
  }
  // The saved statistics, computed in float32, are kept in the input's dtype
  // unless a parameter or running statistic is float32 (CPU's mixed-type rule).
  const at::ScalarType saved = any_float32({&weight, &bias, &rmean, &rvar}) ||
                                       !at::isReducedFloatingType(input.scalar_type())
                                   ? st
                                   : input.scalar_type();
  save_mean = save_mean.to(saved);
  save_invstd = save_invstd.to(saved);
  at::Tensor y = (x - mean.view(shape)) * invstd.view(shape);
  if (weight.has_value() && weight->defined()) y = y * weight->to(st).view(shape);
  if (bias.has_value() && bias->defined()) y = y + bias->to(st).view(shape);
  return {y.to(input.scalar_type()).contiguous(input.suggest_memory_format()), save_mean,
          save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor &grad, const at::Tensor &input, const std::optional<at::Tensor> &weight,
    const std::optional<at::Tensor> &rmean, const std::optional<at::Tensor> &rvar,
    const std::optional<at::Tensor> &save_mean, const std::optional<at::Tensor> &save_invstd,
    bool train, double eps, std::array<bool, 3> mask) {
  at::ScalarType st = stat_type(input);
  at::Tensor x = input.to(st), g = grad.to(st);
  auto dims = bn_dims(input);
  auto shape = bn_shape(input);
  int64_t n = input.numel() / std::max<int64_t>(1, input.size(1));
  at::Tensor mean = train ? save_mean->to(st) : rmean->to(st);
  at::Tensor invstd = train ? save_invstd->to(st) : at::rsqrt(rvar->to(st) + eps);
  at::Tensor xhat = (x - mean.view(shape)) * invstd.view(shape);
  at::Tensor gb = at::sum(g, dims), gw = at::sum(g * xhat, dims);
  bool has_w = weight.has_value() && weight->defined();
  at::Tensor w = has_w ? weight->to(st) : at::ones({input.size(1)}, x.options());
  at::Tensor gx, rw, rb;
  if (mask[0]) {
    at::Tensor k = (w * invstd).view(shape);
    gx = train ? k * (g - gb.view(shape) / n - xhat * (gw.view(shape) / n)) : k * g;
    gx = gx.to(input.scalar_type()).contiguous(input.suggest_memory_format());
  }
  at::ScalarType wt = has_w ? weight->scalar_type() : input.scalar_type();
  if (mask[1]) rw = gw.to(wt);
  if (mask[2]) rb = gb.to(wt);
  return {gx, rw, rb};
}

// ---------------------------------------------------------------- softmax

namespace {

// out (contiguous, shape of in) = softmax of in along dim. Returns false if
// the kernels cannot take the dtypes.
bool launch_softmax(const at::Tensor &out, const at::Tensor &in0, const at::Tensor &grad0,
                    int64_t dim, bool log, const char *name) {
  bool ok1, ok2;
  tnk_dtype_t dt = to_tnk(in0.scalar_type(), &ok1);
  tnk_dtype_t odt = to_tnk(out.scalar_type(), &ok2);
  if (!ok1 || !ok2 || !kernel_supported(TNK_K_SOFTMAX, kernel_query(-1, dt, odt, -1))) return false;
  if (grad0.defined() && grad0.scalar_type() != in0.scalar_type()) return false;
  if (out.numel() == 0) return true;
  at::Tensor in = in0.contiguous(), grad = grad0.defined() ? grad0.contiguous() : grad0;
  int64_t d = c10::maybe_wrap_dim(dim, in.dim());
  tnk_softmax_args_t a{};
  a.outer = 1;
  a.inner = 1;
  for (int64_t i = 0; i < d; i++) a.outer *= in.size(i);
  a.len = in.dim() ? in.size(d) : 1;
  for (int64_t i = d + 1; i < in.dim(); i++) a.inner *= in.size(i);
  a.out = out.data_ptr();
  a.in = in.const_data_ptr();
  a.grad = grad.defined() ? grad.const_data_ptr() : nullptr;
  a.dtype = dt;
  a.out_dtype = odt;
  a.log = log;
  a.backward = grad.defined();
  launch_kernel<TNK_K_SOFTMAX>(out.device().index(), a, name, out.numel());
  return true;
}

c10::ScalarType softmax_out_dtype(const at::Tensor &self, bool half_to_float) {
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half type only");
    return at::kFloat;
  }
  return self.scalar_type();
}

}  // namespace

#define NEURON_SOFTMAX(NAME, LOG)                                                                \
  at::Tensor NAME(const at::Tensor &self, int64_t dim, bool half_to_float) {                     \
    c10::maybe_wrap_dim(dim, self.dim());                                                        \
    at::Tensor out =                                                                             \
        at::empty(self.sizes(), self.options().dtype(softmax_out_dtype(self, half_to_float)));   \
    if (launch_softmax(out, self, at::Tensor(), dim, LOG, "aten::" #NAME)) return out;           \
    return FALLBACK(NAME, self, dim, half_to_float);                                             \
  }                                                                                              \
  at::Tensor &NAME##_out(const at::Tensor &self, int64_t dim, bool half_to_float,                \
                         at::Tensor &out) {                                                      \
    c10::maybe_wrap_dim(dim, self.dim());                                                        \
    at::native::resize_output(out, self.sizes());                                                \
    if (out.is_contiguous() && out.scalar_type() == softmax_out_dtype(self, half_to_float) &&    \
        launch_softmax(out, self, at::Tensor(), dim, LOG, "aten::" #NAME))                       \
      return out;                                                                                \
    return FALLBACK(NAME##_out, self, dim, half_to_float, out);                                  \
  }                                                                                              \
  at::Tensor NAME##_backward_data(const at::Tensor &grad, const at::Tensor &output, int64_t dim, \
                                  c10::ScalarType input_dtype) {                                 \
    at::Tensor out = at::empty(output.sizes(), output.options().dtype(input_dtype));             \
    if (grad.sizes() == output.sizes() &&                                                        \
        launch_softmax(out, output, grad, dim, LOG, "aten::" #NAME "_backward_data"))            \
      return out;                                                                                \
    return FALLBACK(NAME##_backward_data, grad, output, dim, input_dtype);                       \
  }                                                                                              \
  at::Tensor &NAME##_backward_data_out(const at::Tensor &grad, const at::Tensor &output,         \
                                       int64_t dim, c10::ScalarType input_dtype,                 \
                                       at::Tensor &out) {                                        \
    at::native::resize_output(out, output.sizes());                                              \
    if (grad.sizes() == output.sizes() && out.is_contiguous() &&                                 \
        out.scalar_type() == input_dtype &&                                                      \
        launch_softmax(out, output, grad, dim, LOG, "aten::" #NAME "_backward_data"))            \
      return out;                                                                                \
    return FALLBACK(NAME##_backward_data_out, grad, output, dim, input_dtype, out);              \
  }

NEURON_SOFTMAX(_softmax, false)
NEURON_SOFTMAX(_log_softmax, true)

// ------------------------------------------------------------- layer norm

namespace {

bool same_float(const at::Tensor &ref, const std::optional<at::Tensor> &t) {
  return !t.has_value() || !t->defined() ||
         (t->scalar_type() == ref.scalar_type() && t->device() == ref.device());
}

const void *ptr_or_null(const at::Tensor &t) { return t.defined() ? t.const_data_ptr() : nullptr; }

at::Tensor defined_contiguous(const std::optional<at::Tensor> &t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor &input, at::IntArrayRef normalized_shape,
    const std::optional<at::Tensor> &weight, const std::optional<at::Tensor> &bias, double eps) {
  auto mn = at::native::_check_layer_norm_inputs(
      input, normalized_shape, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()));
  if (!floating_dtype(input.scalar_type()) || !same_float(input, weight) ||
      !same_float(input, bias))
    return FALLBACK(native_layer_norm, input, normalized_shape, weight, bias, eps);
  at::Tensor x = input.contiguous(), w = defined_contiguous(weight), b = defined_contiguous(bias);
  at::Tensor y = at::empty(x.sizes(), x.options());
  std::vector<int64_t> stat_shape(input.sizes().begin(),
                                  input.sizes().end() - normalized_shape.size());
  stat_shape.insert(stat_shape.end(), normalized_shape.size(), 1);
  at::Tensor mean = at::empty(stat_shape, x.options()), rstd = at::empty(stat_shape, x.options());
  tnk_layer_norm_args_t a{};
  a.rows = mn.first;
  a.n = mn.second;
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.eps = eps;
  a.x = ptr_or_null(x);
  a.w = ptr_or_null(w);
  a.b = ptr_or_null(b);
  a.y = y.numel() ? y.data_ptr() : nullptr;
  a.mean = mean.numel() ? mean.data_ptr() : nullptr;
  a.rstd = rstd.numel() ? rstd.data_ptr() : nullptr;
  if (y.numel()) launch_kernel<TNK_K_LAYER_NORM>(x.device().index(), a, "aten::native_layer_norm");
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor &grad_out, const at::Tensor &input, at::IntArrayRef normalized_shape,
    const at::Tensor &mean, const at::Tensor &rstd, const std::optional<at::Tensor> &weight,
    const std::optional<at::Tensor> &bias, std::array<bool, 3> mask) {
  auto mn = at::native::_check_layer_norm_inputs(
      input, normalized_shape, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()));
  if (!floating_dtype(input.scalar_type()) || !same_float(input, weight) ||
      !same_float(input, bias) || grad_out.scalar_type() != input.scalar_type() ||
      mean.scalar_type() != input.scalar_type() || rstd.scalar_type() != input.scalar_type())
    return FALLBACK(native_layer_norm_backward, grad_out, input, normalized_shape, mean, rstd,
                    weight, bias, mask);
  at::Tensor x = input.contiguous(), g = grad_out.contiguous(), w = defined_contiguous(weight);
  at::Tensor mu = mean.contiguous(), rs = rstd.contiguous();
  at::Tensor gx = mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor gw = mask[1] && w.defined() ? at::empty(w.sizes(), w.options()) : at::Tensor();
  bool has_bias = bias.has_value() && bias->defined();
  at::Tensor gb = mask[2] && has_bias ? at::empty(bias->sizes(), x.options()) : at::Tensor();
  tnk_layer_norm_args_t a{};
  a.rows = mn.first;
  a.n = mn.second;
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.backward = 1;
  a.x = ptr_or_null(x);
  a.w = ptr_or_null(w);
  a.g = ptr_or_null(g);
  a.mean = mu.numel() ? const_cast<void *>(mu.const_data_ptr()) : nullptr;
  a.rstd = rs.numel() ? const_cast<void *>(rs.const_data_ptr()) : nullptr;
  a.gx = gx.defined() && gx.numel() ? gx.data_ptr() : nullptr;
  a.gw = gw.defined() && gw.numel() ? gw.data_ptr() : nullptr;
  a.gb = gb.defined() && gb.numel() ? gb.data_ptr() : nullptr;
  if (a.n > 0 && (a.gx || a.gw || a.gb))
    launch_kernel<TNK_K_LAYER_NORM>(x.device().index(), a, "aten::native_layer_norm_backward");
  return {gx, gw, gb};
}

// ----------------------------------------------------------- weight norm
// torch.nn.utils.weight_norm / parametrizations.weight_norm's fused form
// (dim 0 or the last: the only dims _weight_norm hands it), composed from
// native ops as the CPU kernel computes it: the norm over every other dim at
// the accumulation type (fp32 for the 16-bit floats), w = v * (g / norm)
// rounded once; the norm is returned in g's shape, fp32 where g is bf16 (as
// CPU and CUDA keep it). The backward is ATen's own differentiable formula.
std::tuple<at::Tensor, at::Tensor> weight_norm_interface(const at::Tensor &v, const at::Tensor &g,
                                                         int64_t dim) {
  TORCH_CHECK(v.device() == g.device(), "weight_norm: v and g must be on the same device, got ",
              v.device(), " and ", g.device());
  c10::ScalarType acc = at::toOpMathType(v.scalar_type());
  at::Tensor vv = v.scalar_type() == acc ? v : v.to(acc);
  at::Tensor norm = at::_ops::norm_except_dim::call(vv, 2, dim);
  at::Tensor w = vv.mul(g.to(acc).div(norm)).to(v.scalar_type());
  c10::ScalarType norm_dtype = g.scalar_type() == at::kBFloat16 ? at::kFloat : g.scalar_type();
  return {w.contiguous(), norm.reshape(g.sizes()).to(norm_dtype)};
}

std::tuple<at::Tensor, at::Tensor> weight_norm_interface_backward(const at::Tensor &grad_w,
                                                                  const at::Tensor &saved_v,
                                                                  const at::Tensor &saved_g,
                                                                  const at::Tensor &saved_norms,
                                                                  int64_t dim) {
  TORCH_CHECK(saved_v.is_contiguous(), "saved_v must be contiguous");
  TORCH_CHECK(saved_g.is_contiguous(), "saved_g must be contiguous");
  TORCH_CHECK(saved_norms.is_contiguous(), "saved_norms must be contiguous");
  TORCH_CHECK(dim == 0 || dim == saved_v.dim() - 1,
              "fused kernels can only be applied for first or last dim");
  c10::ScalarType acc = at::toOpMathType(saved_v.scalar_type());
  auto [gv, gg] = at::_ops::_weight_norm_differentiable_backward::call(
      grad_w.to(acc), saved_v.to(acc), saved_g.to(acc), saved_norms.to(acc), dim);
  return {gv.to(saved_v.scalar_type()), gg.to(saved_g.scalar_type())};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_norm_interface", weight_norm_interface);
  m.impl("_weight_norm_interface_backward", weight_norm_interface_backward);
  m.impl("native_group_norm", native_group_norm);
  m.impl("native_group_norm_backward", native_group_norm_backward);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("_softmax", _softmax);
  m.impl("_softmax.out", _softmax_out);
  m.impl("_log_softmax", _log_softmax);
  m.impl("_log_softmax.out", _log_softmax_out);
  m.impl("_softmax_backward_data", _softmax_backward_data);
  m.impl("_softmax_backward_data.out", _softmax_backward_data_out);
  m.impl("_log_softmax_backward_data", _log_softmax_backward_data);
  m.impl("_log_softmax_backward_data.out", _log_softmax_backward_data_out);
}

}  // namespace torch_neuronx
