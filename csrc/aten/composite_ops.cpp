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
#include <limits>

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
  // fp16/bf16 accumulate in fp32, as CPU does (300^2 overflows fp16)
  if (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) x = x.to(at::kFloat);
  at::Tensor r;
  at::Tensor a = x.abs();
  if (p == 2.0) r = at::sum(x * x, dims, keepdim).sqrt_();
  else if (p == 1.0) r = at::sum(a, dims, keepdim);
  else if (std::isinf(p)) r = p > 0 ? at::amax(a, dims, keepdim) : at::amin(a, dims, keepdim);
  else if (p == 0.0) r = at::sum(x.ne(0).to(x.scalar_type()), dims, keepdim);
  else r = at::sum(a.pow(p), dims, keepdim).pow_(1.0 / p);
  return assign_result(out, r);
}

at::Tensor linalg_vector_norm(const at::Tensor& self, const c10::Scalar& ord,
                              at::OptionalIntArrayRef dim, bool keepdim,
                              std::optional<c10::ScalarType> dtype) {
  // real even for a complex dtype= (the norm of complex values)
  at::Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(
                                      dtype.value_or(self.scalar_type()))));
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
  TORCH_CHECK(x.is_contiguous(x.suggest_memory_format()),
              "Expected X.is_contiguous(memory_format) to be true, but got false.");
  int64_t D = C / group * HxW;
  // fp16/bf16: normalise, scale and shift in float32, one rounding at the end
  const at::ScalarType t = x.scalar_type();
  const bool low = at::isReducedFloatingType(t);
  auto wide = [&](const at::Tensor& v) { return low ? v.to(at::kFloat) : v; };
  at::Tensor x2 = wide(x.contiguous().view({N * group, D}));
  auto r = at::native_layer_norm(x2, {D}, std::nullopt, std::nullopt, eps);
  at::Tensor y = std::get<0>(r).view(x.sizes());
  std::vector<int64_t> cshape(x.dim(), 1);
  if (x.dim() > 1) cshape[1] = C;
  if (weight.has_value() && weight->defined()) y = y * wide(*weight).view(cshape);
  if (bias.has_value() && bias->defined()) y = y + wide(*bias).view(cshape);
  // mean and rstd in x's dtype, float32 when a parameter is (CPU's mixed type)
  bool mixed = false;
  for (const auto* p : {&weight, &bias})
    mixed = mixed || (p->has_value() && (*p)->defined() && (*p)->scalar_type() == at::kFloat);
  const at::ScalarType st = low && mixed ? at::kFloat : t;
  return {y.to(t).contiguous(), std::get<1>(r).view({N, group}).to(st),
          std::get<2>(r).view({N, group}).to(st)};
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
    at::Tensor xhat = ((x.contiguous().view({N, group, D}) - mean.view({N, group, 1})) *
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
  return assign_result(out, r);
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
  return assign_result(out, r);
}

at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                  const c10::Scalar& beta, const c10::Scalar& threshold,
                                  at::Tensor& grad_input) {
  double b = beta.toDouble(), t = threshold.toDouble();
  at::Tensor bx = self * b;
  at::Tensor r = at::where(bx > t, grad, grad * bx.sigmoid());
  return assign_result(grad_input, r);
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
  return assign_result(out, r);
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
  double a = start.toDouble(), b = end.toDouble();
  if (c10::isIntegralType(out.scalar_type(), true)) {  // as ATen: the ends in the
    a = static_cast<double>(start.toLong());          // integer type first
    b = static_cast<double>(end.toLong());
  }
  double step = (b - a) / (steps - 1);
  // As ATen: the first half counts up from start, the second down from end.
  int64_t half = steps / 2;
  at::Tensor i = at::arange(steps, out.options().dtype(at::kDouble));
  at::Tensor up = i * step + a, down = (i - (steps - 1)) * step + b;
  at::Tensor r = at::where(i < half, up, down);
  if (c10::isIntegralType(out.scalar_type(), true)) r = r.trunc();
  return out.copy_(r);
}

// Nearest-neighbour upsampling (1-D/2-D/3-D, "nearest" and "nearest-exact")
// as one index_select per spatial dim; the backward sums the gradient back
// with index_add, one dim at a time. Source indices as ATen computes them.
namespace {
using Scales = std::vector<std::optional<double>>;

// nearest floors dst * scale (equal and doubled sizes taken exactly),
// nearest-exact floors (dst + 0.5) * scale; the scale is a float, 1/scale
// when the caller gave one, else in/out; clamped to the last source.
at::Tensor nearest_index(int64_t in, int64_t out, std::optional<double> scale, bool exact,
                         c10::Device dev) {
  std::vector<int64_t> idx(out);
  float s = scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                            : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; i++) {
    int64_t v;
    if (exact)
      v = static_cast<int64_t>(std::floor((static_cast<float>(i) + 0.5f) * s));
    else
      v = out == in ? i : out == 2 * in ? i >> 1 : static_cast<int64_t>(std::floor(i * s));
    idx[i] = std::min(v, in - 1);
  }
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(dev);
}

void check_nearest(int64_t dim, at::IntArrayRef osize, const char* name) {
  int64_t s = static_cast<int64_t>(osize.size());
  TORCH_CHECK(dim == s + 2, name, ": expected a ", s + 2, "-D input (batch, channels and ", s,
              " spatial dims), got a ", dim, "-D one");
  for (int64_t o : osize)
    TORCH_CHECK(o > 0, name, ": output sizes must be greater than 0, got ", osize);
}

at::Tensor nearest_forward(const at::Tensor& self, at::IntArrayRef osize, const Scales& scales,
                           bool exact, const char* name) {
  check_nearest(self.dim(), osize, name);
  at::Tensor r = self;
  for (size_t i = 0; i < osize.size(); i++)
    r = r.index_select(static_cast<int64_t>(2 + i),
                       nearest_index(self.size(2 + i), osize[i], scales[i], exact,
                                     self.device()));
  return r;
}

at::Tensor nearest_backward(const at::Tensor& grad, at::IntArrayRef osize,
                            at::IntArrayRef isize, const Scales& scales, bool exact,
                            const char* name) {
  check_nearest(static_cast<int64_t>(isize.size()), osize, name);
  TORCH_CHECK(grad.dim() == static_cast<int64_t>(isize.size()), name,
              ": grad_output must have ", isize.size(), " dims, got ", grad.dim());
  at::Tensor g = grad.contiguous();
  for (size_t i = osize.size(); i-- > 0;) {
    int64_t d = static_cast<int64_t>(2 + i);
    std::vector<int64_t> shape = g.sizes().vec();
    shape[d] = isize[d];
    g = at::zeros(shape, grad.options())
            .index_add_(d, nearest_index(isize[d], osize[i], scales[i], exact, grad.device()), g);
  }
  return g;
}
}  // namespace

// The functional, out=, backward and backward out= forms of one variant;
// SCALES is the op's parameter list of optional scales, LIST those names.
#define NEURON_NEAREST(NAME, EXACT, SCALES, LIST)                                              \
  at::Tensor& NAME##_out(const at::Tensor& self, at::IntArrayRef osize, SCALES,               \
                         at::Tensor& out) {                                                   \
    return assign_result(out, nearest_forward(self, osize, Scales LIST, EXACT, #NAME));       \
  }                                                                                           \
  at::Tensor NAME(const at::Tensor& self, at::IntArrayRef osize, SCALES) {                    \
    return nearest_forward(self, osize, Scales LIST, EXACT, #NAME);                           \
  }                                                                                           \
  at::Tensor& NAME##_backward_out(const at::Tensor& grad, at::IntArrayRef osize,              \
                                  at::IntArrayRef isize, SCALES, at::Tensor& gin) {           \
    return assign_result(gin, nearest_backward(grad, osize, isize, Scales LIST, EXACT,        \
                                               #NAME "_backward"));                           \
  }                                                                                           \
  at::Tensor NAME##_backward(const at::Tensor& grad, at::IntArrayRef osize,                   \
                             at::IntArrayRef isize, SCALES) {                                 \
    return nearest_backward(grad, osize, isize, Scales LIST, EXACT, #NAME "_backward");       \
  }

#define S1 std::optional<double> sw
#define S2 std::optional<double> sh, std::optional<double> sw
#define S3 std::optional<double> sd, std::optional<double> sh, std::optional<double> sw
NEURON_NEAREST(upsample_nearest1d, false, S1, ({sw}))
NEURON_NEAREST(upsample_nearest2d, false, S2, ({sh, sw}))
NEURON_NEAREST(upsample_nearest3d, false, S3, ({sd, sh, sw}))
NEURON_NEAREST(_upsample_nearest_exact1d, true, S1, ({sw}))
NEURON_NEAREST(_upsample_nearest_exact2d, true, S2, ({sh, sw}))
NEURON_NEAREST(_upsample_nearest_exact3d, true, S3, ({sd, sh, sw}))
#undef S1
#undef S2
#undef S3

// --------------------------------------------------------- more composites

// glu: first half times the sigmoid of the second, along `dim`.
at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.size(d);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", n);
  at::Tensor r = self.narrow(d, 0, n / 2) * at::sigmoid(self.narrow(d, n / 2, n / 2));
  return assign_result(out, r);
}

at::Tensor glu_backward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t h = self.size(d) / 2;
  at::Tensor a = self.narrow(d, 0, h), sb = at::sigmoid(self.narrow(d, h, h));
  at::Tensor ga = grad * sb;
  at::Tensor gb = ga * a * (1 - sb);
  return at::cat({ga, gb}, d);
}

at::Tensor& glu_backward_out(const at::Tensor& grad, const at::Tensor& self, int64_t dim,
                             at::Tensor& out) {
  at::Tensor r = torch_neuronx::glu_backward(grad, self, dim);
  return assign_result(out, r);
}

// PReLU's kernel: the weight arrives broadcastable to the input.
at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  return at::where(self > 0, self, weight * self);
}

std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad,
                                                         const at::Tensor& self,
                                                         const at::Tensor& weight) {
  at::Tensor pos = self > 0;
  at::Tensor gs = at::where(pos, grad, weight * grad);
  at::Tensor gw = at::where(pos, at::zeros_like(gs), self * grad);
  return {gs, gw};
}

// smooth L1 (Huber with 1/beta scaling): quadratic below beta.
at::Tensor smooth_l1(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                     double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  at::Tensor d = (self - target).abs();
  at::Tensor l = beta == 0 ? d : at::where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta);
  if (reduction == 1) return l.mean();
  if (reduction == 2) return l.sum();
  return l;
}

at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target,
                               int64_t reduction, double beta, at::Tensor& out) {
  at::Tensor r = smooth_l1(self, target, reduction, beta);
  return assign_result(out, r);
}

at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction,
                                        double beta, at::Tensor& gin) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  at::Tensor x = self - target;
  at::Tensor g = beta == 0 ? at::sign(x) : at::clamp(x / beta, -1.0, 1.0);
  double norm = reduction == 1 ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  at::Tensor r = g * grad * norm;
  at::native::resize_output(gin, self.sizes());
  return gin.copy_(r.expand(self.sizes()));
}

// roll: two slice copies per rolled dimension.
at::Tensor roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1)
    return torch_neuronx::roll(self.flatten(), shifts, at::IntArrayRef{0}).view(self.sizes());
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ",
              shifts.size(), ", dims:", dims.size());
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

// Batch norm over every dim but 1, statistics in fp32 (fp64 for fp64), as
// CPU computes them; running statistics take the unbiased variance.
namespace {
at::ScalarType stat_type(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}
std::vector<int64_t> bn_dims(const at::Tensor& x) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < x.dim(); i++)
    if (i != 1) d.push_back(i);
  return d;
}
std::vector<int64_t> bn_shape(const at::Tensor& x) {
  std::vector<int64_t> s(x.dim(), 1);
  s[1] = x.size(1);
  return s;
}
}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& rmean,
    const std::optional<at::Tensor>& rvar, bool training, double momentum, double eps) {
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
  bool mixed = false;
  for (const auto* p : {&weight, &bias, &rmean, &rvar})
    mixed = mixed || (p->has_value() && (*p)->defined() && (*p)->scalar_type() == at::kFloat);
  const at::ScalarType saved = mixed || !at::isReducedFloatingType(input.scalar_type())
                                   ? st : input.scalar_type();
  save_mean = save_mean.to(saved);
  save_invstd = save_invstd.to(saved);
  at::Tensor y = (x - mean.view(shape)) * invstd.view(shape);
  if (weight.has_value() && weight->defined()) y = y * weight->to(st).view(shape);
  if (bias.has_value() && bias->defined()) y = y + bias->to(st).view(shape);
  return {y.to(input.scalar_type()).contiguous(input.suggest_memory_format()), save_mean,
          save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& rmean, const std::optional<at::Tensor>& rvar,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
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

// kthvalue / median along a dim from the stable sort: NaN sorts last, so
// kthvalue treats it as the largest value and median returns the first NaN
// of the row, as CPU does.
namespace {
std::tuple<at::Tensor, at::Tensor> pick_sorted(const at::Tensor& self, int64_t dim,
                                               const at::Tensor& pos, bool keepdim) {
  auto [v, i] = at::sort(self, /*stable=*/true, dim, /*descending=*/false);
  at::Tensor p = pos.unsqueeze(dim);
  at::Tensor rv = v.gather(dim, p), ri = i.gather(dim, p);
  if (!keepdim) {
    rv = rv.squeeze(dim);
    ri = ri.squeeze(dim);
  }
  return {rv, ri};
}
at::Tensor position(const at::Tensor& self, int64_t dim, int64_t k) {
  auto sizes = self.sizes().vec();
  if (self.dim() > 0) sizes.erase(sizes.begin() + dim);
  return at::full(sizes, k, self.options().dtype(at::kLong));
}
void deliver2(const std::tuple<at::Tensor, at::Tensor>& r, at::Tensor& v, at::Tensor& i) {
  at::native::resize_output(v, std::get<0>(r).sizes());
  at::native::resize_output(i, std::get<1>(r).sizes());
  v.copy_(std::get<0>(r));
  i.copy_(std::get<1>(r));
}
}  // namespace

std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim,
                                                  bool keepdim, at::Tensor& values,
                                                  at::Tensor& indices) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t n = self.dim() ? self.size(d) : 1;
  TORCH_CHECK_INDEX(n > 0, "kthvalue(): Expected reduction dim ", d, " to have non-zero size.");
  TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", d);
  at::Tensor x = self.dim() ? self : self.reshape(at::IntArrayRef{1});
  auto r = pick_sorted(x, d, position(x, d, k - 1), keepdim || self.dim() == 0);
  if (self.dim() == 0) r = {std::get<0>(r).reshape(at::IntArrayRef{}), std::get<1>(r).reshape(at::IntArrayRef{})};
  deliver2(r, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> median_dim_out(const at::Tensor& self, int64_t dim,
                                                    bool keepdim, at::Tensor& values,
                                                    at::Tensor& indices) {
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
  if (self.dim() == 0) r = {std::get<0>(r).reshape(at::IntArrayRef{}), std::get<1>(r).reshape(at::IntArrayRef{})};
  deliver2(r, values, indices);
  return {values, indices};
}

at::Tensor median_all(const at::Tensor& self) {
  if (self.numel() == 0 && at::isFloatingType(self.scalar_type()))  // as CPU
    return at::full({}, std::numeric_limits<double>::quiet_NaN(), self.options());
  TORCH_CHECK(self.numel() > 0, "median() input tensor cannot be empty");
  at::Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));
  median_dim_out(self.reshape({-1}), 0, false, v, i);
  return v;
}

// bincount: the output length needs the largest value (a sync, as on CPU).
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights,
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
  at::ScalarType ot = !has_w ? at::kLong
                      : weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  at::Tensor out = at::zeros({len}, self.options().dtype(ot));
  if (!self.numel()) return out;
  at::Tensor src = has_w ? weights->to(ot) : at::ones({self.size(0)}, out.options());
  return out.index_add_(0, self.to(at::kLong), src);
}

// polar(abs, angle) = abs * (cos angle + i sin angle), written through the
// real view of the complex result.
at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "Expected object of scalar type ",
              abs.scalar_type(), " but got scalar type ", angle.scalar_type(),
              " for second argument");
  TORCH_CHECK(abs.scalar_type() == at::kFloat || abs.scalar_type() == at::kDouble,
              "polar: expected abs and angle to be float or double, got ", abs.scalar_type());
  auto shape = at::infer_size(abs.sizes(), angle.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::Tensor ri = at::view_as_real(out);
  at::Tensor c = abs * at::cos(angle), sn = abs * at::sin(angle);
  ri.select(-1, 0).copy_(c);
  ri.select(-1, 1).copy_(sn);
  return out;
}

// Fused SGD (torch.optim.SGD(fused=True)), step for step as ATen's CPU
// kernel: grads are unscaled in place by grad_scale, a nonzero found_inf
// leaves everything untouched (decided on the device, without a sync).
namespace {
void fused_sgd_impl(at::TensorList params, at::TensorList grads, at::TensorList bufs, double wd,
                    double mom, const at::Tensor& lr, double damp, bool nesterov, bool maximize,
                    bool first, const std::optional<at::Tensor>& grad_scale,
                    const std::optional<at::Tensor>& found_inf) {
  TORCH_CHECK(params.size() == grads.size(), "_fused_sgd_: expected as many grads as params");
  TORCH_CHECK(mom == 0.0 || bufs.size() == params.size(),
              "_fused_sgd_: expected as many momentum buffers as params");
  for (size_t i = 0; i < params.size(); i++) {
    at::Tensor p = params[i], g = grads[i];
    at::Tensor skip;
    if (found_inf.has_value() && found_inf->defined())
      skip = found_inf->to(p.device()).ne(0).reshape({});
    auto keep_or = [&](const at::Tensor& old, const at::Tensor& upd) {
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
               const std::optional<at::Tensor>& grad_scale,
               const std::optional<at::Tensor>& found_inf) {
  if (params.empty()) return;
  fused_sgd_impl(params, grads, bufs, wd, mom, at::scalar_tensor(lr, at::kDouble), damp,
                 nesterov, maximize, first, grad_scale, found_inf);
}

void fused_sgd_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList bufs,
                         double wd, double mom, const at::Tensor& lr, double damp, bool nesterov,
                         bool maximize, bool first, const std::optional<at::Tensor>& grad_scale,
                         const std::optional<at::Tensor>& found_inf) {
  if (params.empty()) return;
  fused_sgd_impl(params, grads, bufs, wd, mom, lr, damp, nesterov, maximize, first, grad_scale,
                 found_inf);
}

// linalg.solve_triangular: A X = B (left) by substitution on the device;
// X A = B is the transposed problem A^T X^T = B^T.
namespace {
void trsm_task(void* p) { tnk_trsm(static_cast<tnk_trsm_args_t*>(p)); }

at::Tensor solve_triangular_left(const at::Tensor& A, const at::Tensor& B, bool upper, bool unit) {
  int64_t n = A.size(-1), k = B.size(-1);
  TORCH_CHECK(B.size(-2) == n, "Incompatible shapes of A and B for the equation AX = B (", A.size(-2),
              "x", n, " and ", B.size(-2), "x", k, ")");
  auto batch = at::infer_size(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  std::vector<int64_t> as(batch), bs(batch);
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {n, k});
  at::Tensor a = A.expand(as).reshape({-1, n, n});
  at::Tensor x = B.expand(bs).reshape({-1, n, k}).clone(at::MemoryFormat::Contiguous);
  if (x.numel()) {
    tnk_trsm_args_t t{};
    t.batch = x.size(0);
    t.n = n;
    t.k = k;
    t.a = a.const_data_ptr();
    t.x = x.data_ptr();
    t.sa_b = a.stride(0);
    t.sa_r = a.stride(1);
    t.sa_c = a.stride(2);
    t.sx_b = x.stride(0);
    t.sx_r = x.stride(1);
    t.sx_c = x.stride(2);
    t.dtype = A.scalar_type() == at::kDouble ? TNK_F64 : TNK_F32;
    t.upper = upper;
    t.unit = unit;
    launch(A.device().index(), trsm_task, &t, sizeof t, "aten::linalg_solve_triangular");
  }
  return x.view(bs);
}
}  // namespace

at::Tensor& linalg_solve_triangular_out(const at::Tensor& A, const at::Tensor& B, bool upper,
                                        bool left, bool unit, at::Tensor& out) {
  auto t = A.scalar_type();
  if ((t != at::kFloat && t != at::kDouble) || B.scalar_type() != t || out.scalar_type() != t ||
      B.device() != A.device())
    return FALLBACK(linalg_solve_triangular_out, A, B, upper, left, unit, out);
  TORCH_CHECK(A.dim() >= 2, "linalg.solve_triangular: The input tensor A must have at least 2 "
              "dimensions.");
  TORCH_CHECK(B.dim() >= 2, "linalg.solve_triangular: The input tensor B must have at least 2 "
              "dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.solve_triangular: A must be batches of square "
              "matrices, but they are ", A.size(-2), " by ", A.size(-1), " matrices");
  if (A.numel() == 0 || B.numel() == 0) {  // empty systems (backward of cholesky, qr...)
    auto batch = at::infer_size(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
    batch.push_back(B.size(-2));
    batch.push_back(B.size(-1));
    at::native::resize_output(out, batch);
    return out;
  }
  at::Tensor r = left ? solve_triangular_left(A, B, upper, unit)
                      : solve_triangular_left(A.mT(), B.mT(), !upper, unit).mT();
  return assign_result(out, r);
}

at::Tensor linalg_solve_triangular(const at::Tensor& A, const at::Tensor& B, bool upper,
                                   bool left, bool unit) {
  at::Tensor out = at::empty({0}, A.options());
  if (A.scalar_type() != B.scalar_type() ||
      (A.scalar_type() != at::kFloat && A.scalar_type() != at::kDouble))
    return FALLBACK(linalg_solve_triangular, A, B, upper, left, unit);
  return linalg_solve_triangular_out(A, B, upper, left, unit, out);
}

// unfold's backward: each window's gradient added back at its positions
// (one index_add over all windows; overlapping windows accumulate).
at::Tensor unfold_backward(const at::Tensor& grad, c10::SymIntArrayRef input_sizes, int64_t dim,
                           int64_t size, int64_t step) {
  std::vector<int64_t> sizes;
  for (const auto& v : input_sizes) sizes.push_back(v.expect_int());
  int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t d = nd ? at::maybe_wrap_dim(dim, nd) : 0;
  at::Tensor out = at::zeros(sizes, grad.options());
  if (grad.numel() == 0 || nd == 0) return nd ? out : grad.reshape(at::IntArrayRef{});
  int64_t windows = grad.size(d);
  std::vector<int64_t> idx;
  idx.reserve(windows * size);
  for (int64_t w = 0; w < windows; w++)
    for (int64_t j = 0; j < size; j++) idx.push_back(w * step + j);
  at::Tensor index = at::tensor(idx, at::kLong).to(grad.device());
  // [..., windows, ..., size] -> [..., windows * size, ...]
  at::Tensor g = grad.movedim(-1, d + 1).flatten(d, d + 1);
  return out.index_add_(d, index, g);
}

// Reflection / replication padding as an index gather per padded dim (the
// index lists are shape metadata, built on the host); backward scatter-adds.
namespace {
at::Tensor pad_index(int64_t n, int64_t lo, int64_t hi, bool reflect, const at::Tensor& like) {
  std::vector<int64_t> idx;
  idx.reserve(n + lo + hi);
  for (int64_t o = -lo; o < n + hi; o++) {
    int64_t j = o;
    if (reflect) {
      int64_t period = 2 * (n - 1);
      j = period ? ((o % period) + period) % period : 0;
      if (j >= n) j = period - j;
    } else {
      j = o < 0 ? 0 : o >= n ? n - 1 : o;
    }
    idx.push_back(j);
  }
  return at::tensor(idx, at::kLong).to(like.device());
}

void check_pad(const at::Tensor& x, at::IntArrayRef pad, int64_t k, bool reflect, const char* name) {
  TORCH_CHECK(static_cast<int64_t>(pad.size()) == 2 * k, name, ": padding size is expected to be ",
              2 * k, ", but got: ", pad.size());
  TORCH_CHECK(x.dim() == k + 1 || x.dim() == k + 2, "Expected ", k + 1, "D or ", k + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions "
              "for input, but got: ", x.sizes());
  for (int64_t i = 0; i < k; i++) {
    int64_t d = x.dim() - 1 - i, n = x.size(d);
    int64_t lo = pad[2 * i], hi = pad[2 * i + 1];
    if (reflect)
      TORCH_CHECK(lo < n && hi < n, "Argument #", 4 + 2 * i,
                  ": Padding size should be less than the corresponding input dimension, but "
                  "got: padding (", lo, ", ", hi, ") at dimension ", d, " of input ", x.sizes());
    TORCH_CHECK(n + lo + hi >= 1, "input (", x.sizes(), ") is too small. Calculated output ",
                "size: ", n + lo + hi);
  }
}

at::Tensor pad_forward(const at::Tensor& x, at::IntArrayRef pad, int64_t k, bool reflect,
                       const char* name) {
  check_pad(x, pad, k, reflect, name);
  at::Tensor r = x;
  for (int64_t i = 0; i < k; i++) {
    int64_t d = x.dim() - 1 - i;
    r = r.index_select(d, pad_index(x.size(d), pad[2 * i], pad[2 * i + 1], reflect, x));
  }
  return r;
}

at::Tensor pad_backward(const at::Tensor& g, const at::Tensor& x, at::IntArrayRef pad, int64_t k,
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

#define NEURON_PAD(NAME, K, REFLECT)                                                        \
  at::Tensor& NAME##_out(const at::Tensor& x, at::IntArrayRef pad, at::Tensor& out) {      \
    at::Tensor r = pad_forward(x, pad, K, REFLECT, #NAME);                                  \
    return assign_result(out, r);                                                           \
  }                                                                                         \
  at::Tensor NAME(const at::Tensor& x, at::IntArrayRef pad) {                               \
    return pad_forward(x, pad, K, REFLECT, #NAME);                                          \
  }                                                                                         \
  at::Tensor& NAME##_backward_out(const at::Tensor& g, const at::Tensor& x,                 \
                                  at::IntArrayRef pad, at::Tensor& gin) {                   \
    at::Tensor r = pad_backward(g, x, pad, K, REFLECT);                                     \
    return assign_result(gin, r);                                                           \
  }                                                                                         \
  at::Tensor NAME##_backward(const at::Tensor& g, const at::Tensor& x, at::IntArrayRef pad) { \
    return pad_backward(g, x, pad, K, REFLECT);                                             \
  }
NEURON_PAD(reflection_pad1d, 1, true)
NEURON_PAD(reflection_pad2d, 2, true)
NEURON_PAD(replication_pad1d, 1, false)
NEURON_PAD(replication_pad2d, 2, false)

// ------------------------------------------------------------ unique
// Sort, mark where each run of equal values starts, and read the values,
// group ids (inverse) and run lengths (counts) off those marks; every step a
// device kernel. The output size depends on the data, so reading it waits
// for the device, as on CUDA. Always sorted (sorted=False allows any order).
namespace {
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_runs(const at::Tensor& self, bool sort,
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

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted,
                                                       bool return_inverse, bool return_counts) {
  // the wide unsigned types have no sort/select kernels anywhere but in the
  // CPU's own unique
  if (self.scalar_type() == at::kUInt16 || self.scalar_type() == at::kUInt32 ||
      self.scalar_type() == at::kUInt64)
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_unique2)>::call(
        self, sorted, return_inverse, return_counts);
  return unique_runs(self, true, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(
    const at::Tensor& self, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  if (dim.has_value() && self.dim() > 1)  // runs of equal slices: the CPU does those
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(unique_consecutive)>::call(
        self, return_inverse, return_counts, dim);
  return unique_runs(self, false, return_inverse, return_counts);
}

// mode(..., out=): ATen's out form refuses devices other than CPU, CUDA and
// XPU; the values come from mode itself, with ATen's out checks.
std::tuple<at::Tensor&, at::Tensor&> mode_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                              at::Tensor& values, at::Tensor& indices) {
  TORCH_CHECK(self.device() == values.device(), "expected device '", self.device(),
              "' but got '", values.device(), "' for values output");
  TORCH_CHECK(self.device() == indices.device(), "expected device '", self.device(),
              "' but got '", indices.device(), "' for indices output");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "expected scalar type '",
              self.scalar_type(), "' but got '", values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type '", at::kLong,
              "' but got '", indices.scalar_type(), "' for indices output");
  auto [v, i] = at::mode(self, dim, keepdim);
  assign_result(values, v);
  assign_result(indices, i);
  return {values, indices};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode.values", mode_out);
  m.impl("_unique2", unique2);
  m.impl("unique_consecutive", unique_consecutive);
  NEURON_REGISTER_WITH_BACKWARD(upsample_nearest1d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_nearest2d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_nearest3d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_nearest_exact1d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_nearest_exact2d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_nearest_exact3d)
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
  m.impl("glu.out", glu_out);
  m.impl("glu_backward", glu_backward);
  m.impl("glu_backward.grad_input", glu_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
  m.impl("smooth_l1_loss.out", smooth_l1_loss_out);
  m.impl("smooth_l1_loss_backward.grad_input", smooth_l1_loss_backward_out);
  m.impl("roll", roll);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("median.dim_values", median_dim_out);
  m.impl("median", median_all);
  m.impl("bincount", bincount);
  m.impl("unfold_backward", unfold_backward);
  m.impl("linalg_solve_triangular", linalg_solve_triangular);
  m.impl("_fused_sgd_", fused_sgd);
  m.impl("polar.out", polar_out);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr);
  m.impl("linalg_solve_triangular.out", linalg_solve_triangular_out);
  NEURON_REGISTER_WITH_BACKWARD(reflection_pad1d)
  NEURON_REGISTER_WITH_BACKWARD(reflection_pad2d)
  NEURON_REGISTER_WITH_BACKWARD(replication_pad1d)
  NEURON_REGISTER_WITH_BACKWARD(replication_pad2d)
}

}  // namespace torch_neuronx
