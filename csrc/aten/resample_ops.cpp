// Resampling (resample.c): linear/bilinear/trilinear/bicubic upsampling,
// nearest and nearest-exact upsampling (as index_select), antialiased
// bilinear/bicubic (as two matmuls with filter matrices), grid_sample.
#include "neuron.h"

#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/GridSamplerUtils.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <ATen/native/im2col_shape_check.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_neuronx {

namespace {}  // namespace

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
  tnk_nearest_index(in, out, scale.has_value(), scale.value_or(0.0), exact, idx.data());
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(dev);
}

void check_nearest(int64_t dim, at::IntArrayRef osize, const char *name) {
  int64_t s = static_cast<int64_t>(osize.size());
  TORCH_CHECK(dim == s + 2, name, ": expected a ", s + 2, "-D input (batch, channels and ", s,
              " spatial dims), got a ", dim, "-D one");
  for (int64_t o : osize)
    TORCH_CHECK(o > 0, name, ": output sizes must be greater than 0, got ", osize);
}

at::Tensor nearest_forward(const at::Tensor &self, at::IntArrayRef osize, const Scales &scales,
                           bool exact, const char *name) {
  check_nearest(self.dim(), osize, name);
  at::Tensor r = self;
  for (size_t i = 0; i < osize.size(); i++)
    r = r.index_select(static_cast<int64_t>(2 + i),
                       nearest_index(self.size(2 + i), osize[i], scales[i], exact, self.device()));
  return r;
}

at::Tensor nearest_backward(const at::Tensor &grad, at::IntArrayRef osize, at::IntArrayRef isize,
                            const Scales &scales, bool exact, const char *name) {
  check_nearest(static_cast<int64_t>(isize.size()), osize, name);
  TORCH_CHECK(grad.dim() == static_cast<int64_t>(isize.size()), name, ": grad_output must have ",
              isize.size(), " dims, got ", grad.dim());
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
#define NEURON_NEAREST(NAME, EXACT, SCALES, LIST)                                                  \
  at::Tensor &NAME##_out(const at::Tensor &self, at::IntArrayRef osize, SCALES, at::Tensor &out) { \
    return assign_result(out, nearest_forward(self, osize, Scales LIST, EXACT, #NAME));            \
  }                                                                                                \
  at::Tensor NAME(const at::Tensor &self, at::IntArrayRef osize, SCALES) {                         \
    return nearest_forward(self, osize, Scales LIST, EXACT, #NAME);                                \
  }                                                                                                \
  at::Tensor &NAME##_backward_out(const at::Tensor &grad, at::IntArrayRef osize,                   \
                                  at::IntArrayRef isize, SCALES, at::Tensor &gin) {                \
    return assign_result(                                                                          \
        gin, nearest_backward(grad, osize, isize, Scales LIST, EXACT, #NAME "_backward"));         \
  }                                                                                                \
  at::Tensor NAME##_backward(const at::Tensor &grad, at::IntArrayRef osize, at::IntArrayRef isize, \
                             SCALES) {                                                             \
    return nearest_backward(grad, osize, isize, Scales LIST, EXACT, #NAME "_backward");            \
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

// Linear (1-D/2-D/3-D) and bicubic upsampling: ATen's shape checks and
// scale rules, one separable kernel.
namespace {
using Scales = std::vector<std::optional<double>>;

// Resamples `in` (forward: the input; backward: the output gradient) into a
// new tensor shaped like `like` with the spatial sizes `out_sp` (forward) or
// `in_sp` (backward). `in_sp`/`out_sp` are the forward input/output sizes.
at::Tensor resample_run(const at::Tensor &in, const at::Tensor &like, int spatial, int mode,
                        at::IntArrayRef in_sp, at::IntArrayRef out_sp, bool align,
                        const Scales &scales, bool backward, const char *name) {
  at::MemoryFormat fmt = format_of(like);
  std::vector<int64_t> shape = {like.size(0), like.size(1)};
  for (int i = 0; i < spatial; i++) shape.push_back(backward ? in_sp[i] : out_sp[i]);
  auto [res, buf] = result_pair(shape, like.options(), fmt);
  if (buf.numel() && in.numel()) {
    at::Tensor x = in.contiguous();
    int64_t isz[3] = {1, 1, 1}, osz[3] = {1, 1, 1};
    double sc[3] = {1, 1, 1};
    for (int i = 0; i < spatial; i++) {
      int ax = 3 - spatial + i;
      isz[ax] = in_sp[i];
      osz[ax] = out_sp[i];
      sc[ax] = at::native::area_pixel_compute_scale<double>(in_sp[i], out_sp[i], align, scales[i]);
    }
    tnk_resample_args_t a{};
    a.in = x.const_data_ptr();
    a.out = buf.data_ptr();
    a.planes = like.size(0) * like.size(1);
    a.d = isz[0];
    a.h = isz[1];
    a.w = isz[2];
    a.od = osz[0];
    a.oh = osz[1];
    a.ow = osz[2];
    a.scale_d = sc[0];
    a.scale_h = sc[1];
    a.scale_w = sc[2];
    bool ok;
    a.dtype = to_tnk(like.scalar_type(), &ok);
    a.align_corners = align;
    a.backward = backward;
    a.mode = mode;
    launch_kernel<TNK_K_RESAMPLE>(like.device().index(), a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  } else if (buf.numel()) {
    res.zero_();
  }
  return res;
}

std::vector<int64_t> ints(c10::SymIntArrayRef v) {
  std::vector<int64_t> r;
  for (const auto &x : v) r.push_back(x.expect_int());
  return r;
}

at::Tensor resample_forward(const at::Tensor &self, c10::SymIntArrayRef osize, bool align,
                            const Scales &scales, int spatial, int mode, const char *name) {
  std::vector<int64_t> o = ints(osize), full;
  if (spatial == 1) {
    auto f = at::native::upsample_1d_common_check(self.sizes(), o);
    full.assign(f.begin(), f.end());
  } else if (spatial == 2) {
    auto f = at::native::upsample_2d_common_check(self.sizes(), o);
    full.assign(f.begin(), f.end());
  } else {
    auto f = at::native::upsample_3d_common_check(self.sizes(), o);
    full.assign(f.begin(), f.end());
  }
  std::vector<int64_t> in_sp(self.sizes().end() - spatial, self.sizes().end());
  std::vector<int64_t> out_sp(full.end() - spatial, full.end());
  return resample_run(self, self, spatial, mode, in_sp, out_sp, align, scales, false, name);
}

at::Tensor resample_backward(const at::Tensor &grad, c10::SymIntArrayRef osize,
                             c10::SymIntArrayRef isize, bool align, const Scales &scales,
                             int spatial, int mode, const char *name) {
  TORCH_CHECK(osize.size() == static_cast<size_t>(spatial),
              "It is expected output_size equals "
              "to ",
              spatial, ", but got size ", osize.size());
  TORCH_CHECK(isize.size() == static_cast<size_t>(spatial + 2),
              "It is expected input_size "
              "equals to ",
              spatial + 2, ", but got size ", isize.size());
  std::vector<int64_t> o = ints(osize), in_sizes = ints(isize);
  std::vector<int64_t> want = {in_sizes[0], in_sizes[1]};
  want.insert(want.end(), o.begin(), o.end());
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(want), "Expected grad_output to have the shape ",
              at::IntArrayRef(want), ", but got ", grad.sizes());
  at::Tensor like = at::empty(in_sizes, grad.options().memory_format(format_of(grad)));
  std::vector<int64_t> in_sp(in_sizes.end() - spatial, in_sizes.end());
  return resample_run(grad, like, spatial, mode, in_sp, o, align, scales, true, name);
}
}  // namespace

// The functional, out=, backward and backward out= forms of one variant.
#define NEURON_RESAMPLE(NAME, SP, MODE, SCALES, LIST)                                              \
  at::Tensor &NAME##_out(const at::Tensor &self, c10::SymIntArrayRef osize, bool align, SCALES,    \
                         at::Tensor &out) {                                                        \
    if (!spatial_ok(self, SP) || self.dim() != SP + 2 || out.scalar_type() != self.scalar_type())  \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(NAME##_out)>::call( \
          self, osize, align, UNPACK LIST, out);                                                   \
    return deliver(                                                                                \
        out, resample_forward(self, osize, align, Scales{UNPACK LIST}, SP, MODE, "aten::" #NAME),  \
        format_of(self));                                                                          \
  }                                                                                                \
  at::Tensor NAME(const at::Tensor &self, c10::SymIntArrayRef osize, bool align, SCALES) {         \
    if (!spatial_ok(self, SP) || self.dim() != SP + 2)                                             \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(NAME)>::call(       \
          self, osize, align, UNPACK LIST);                                                        \
    return resample_forward(self, osize, align, Scales{UNPACK LIST}, SP, MODE, "aten::" #NAME);    \
  }                                                                                                \
  at::Tensor &NAME##_backward_out(const at::Tensor &grad, c10::SymIntArrayRef osize,               \
                                  c10::SymIntArrayRef isize, bool align, SCALES,                   \
                                  at::Tensor &gin) {                                               \
    if (!spatial_ok(grad, SP) || grad.dim() != SP + 2 || gin.scalar_type() != grad.scalar_type())  \
      return at::native::call_fallback_fn_symint<                                                  \
          &neuron_cpu_fallback, ATEN_OP(NAME##_backward_grad_input)>::call(grad, osize, isize,     \
                                                                           align, UNPACK LIST,     \
                                                                           gin);                   \
    return deliver(gin,                                                                            \
                   resample_backward(grad, osize, isize, align, Scales{UNPACK LIST}, SP, MODE,     \
                                     "aten::" #NAME "_backward"),                                  \
                   format_of(grad));                                                               \
  }                                                                                                \
  at::Tensor NAME##_backward(const at::Tensor &grad, c10::SymIntArrayRef osize,                    \
                             c10::SymIntArrayRef isize, bool align, SCALES) {                      \
    at::Tensor gin = at::empty({0}, grad.options());                                               \
    return NAME##_backward_out(grad, osize, isize, align, UNPACK LIST, gin);                       \
  }

#define UNPACK(...) __VA_ARGS__
#define S1 std::optional<double> sw
#define S2 std::optional<double> sh, std::optional<double> sw
#define S3 std::optional<double> sd, std::optional<double> sh, std::optional<double> sw
NEURON_RESAMPLE(upsample_linear1d, 1, TNK_RESAMPLE_LINEAR, S1, (sw))
NEURON_RESAMPLE(upsample_bilinear2d, 2, TNK_RESAMPLE_LINEAR, S2, (sh, sw))
NEURON_RESAMPLE(upsample_trilinear3d, 3, TNK_RESAMPLE_LINEAR, S3, (sd, sh, sw))
NEURON_RESAMPLE(upsample_bicubic2d, 2, TNK_RESAMPLE_CUBIC, S2, (sh, sw))
#undef UNPACK
#undef S1
#undef S2
#undef S3

// ------------------------------------------- antialiased bilinear / bicubic
// interpolate(..., antialias=True): a separable filter whose support widens
// with the downscaling factor (PIL's resampling, as ATen computes it). Each
// axis is a dense [out, in] weight matrix built on the host (in double,
// then the input's type), so the resize is two matmuls on the device and
// its backward the two transposed ones.
namespace {

double aa_filter(double x, bool cubic) {
  x = std::fabs(x);
  if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;  // Keys' cubic, as antialiased bicubic uses
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

at::Tensor aa_weights(int64_t in, int64_t out, bool align, std::optional<double> scale_opt,
                      bool cubic, const at::TensorOptions &opts) {
  at::Tensor w = at::zeros({out, in}, at::kDouble);
  double *pw = w.data_ptr<double>();
  const double scale = at::native::area_pixel_compute_scale<double>(in, out, align, scale_opt);
  const double half = cubic ? 2.0 : 1.0;  // half the filter's width at scale 1
  const double support = scale >= 1.0 ? half * scale : half;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  for (int64_t i = 0; i < out; i++) {
    const double center = scale * (i + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0;
    for (int64_t j = lo; j < hi; j++)
      total += (pw[i * in + j] = aa_filter((j - center + 0.5) * invscale, cubic));
    if (total != 0)
      for (int64_t j = lo; j < hi; j++) pw[i * in + j] /= total;
  }
  return w.to(opts);
}

void check_aa(const at::Tensor &self, at::IntArrayRef osize, const char *name) {
  TORCH_CHECK(osize.size() == 2, "It is expected output_size equals to 2, but got size ",
              osize.size());
  TORCH_CHECK(self.dim() == 4 && self.size(1) > 0 && self.size(2) > 0 && self.size(3) > 0, name,
              ": non-empty 4D data tensor expected but got a tensor with sizes ", self.sizes());
  TORCH_CHECK(osize[0] > 0 && osize[1] > 0,
              "Input and output sizes should be greater than 0, but got input (H: ", self.size(2),
              ", W: ", self.size(3), ") output (H: ", osize[0], ", W: ", osize[1], ")");
}

at::Tensor upsample_aa(const at::Tensor &self, at::IntArrayRef osize, bool align,
                       std::optional<double> sh, std::optional<double> sw, bool cubic) {
  check_aa(self, osize, cubic ? "upsample_bicubic2d_aa" : "upsample_bilinear2d_aa");
  auto opts = self.options().dtype(
      at::isReducedFloatingType(self.scalar_type()) ? at::kFloat : self.scalar_type());
  at::Tensor wh = aa_weights(self.size(2), osize[0], align, sh, cubic, opts);
  at::Tensor ww = aa_weights(self.size(3), osize[1], align, sw, cubic, opts);
  at::Tensor y = at::matmul(wh, at::matmul(self.to(opts.dtype()), ww.t()));
  return y.to(self.scalar_type()).contiguous(format_of(self));
}

at::Tensor upsample_aa_backward(const at::Tensor &grad, at::IntArrayRef osize,
                                at::IntArrayRef isize, bool align, std::optional<double> sh,
                                std::optional<double> sw, bool cubic) {
  TORCH_CHECK(isize.size() == 4, "It is expected input_size equals to 4, but got size ",
              isize.size());
  TORCH_CHECK(grad.dim() == 4 && grad.size(2) == osize[0] && grad.size(3) == osize[1],
              "Expected grad_output to have the output size ", osize, ", but got ", grad.sizes());
  auto opts = grad.options().dtype(
      at::isReducedFloatingType(grad.scalar_type()) ? at::kFloat : grad.scalar_type());
  at::Tensor wh = aa_weights(isize[2], osize[0], align, sh, cubic, opts);
  at::Tensor ww = aa_weights(isize[3], osize[1], align, sw, cubic, opts);
  at::Tensor g = at::matmul(wh.t(), at::matmul(grad.to(opts.dtype()), ww));
  return g.to(grad.scalar_type()).contiguous(format_of(grad));
}

}  // namespace

#define NEURON_RESAMPLE_AA(NAME, CUBIC)                                                            \
  at::Tensor NAME(const at::Tensor &self, at::IntArrayRef osize, bool align,                       \
                  std::optional<double> sh, std::optional<double> sw) {                            \
    return upsample_aa(self, osize, align, sh, sw, CUBIC);                                         \
  }                                                                                                \
  at::Tensor &NAME##_out(const at::Tensor &self, at::IntArrayRef osize, bool align,                \
                         std::optional<double> sh, std::optional<double> sw, at::Tensor &out) {    \
    return assign_result(out, upsample_aa(self, osize, align, sh, sw, CUBIC));                     \
  }                                                                                                \
  at::Tensor NAME##_backward(const at::Tensor &grad, at::IntArrayRef osize, at::IntArrayRef isize, \
                             bool align, std::optional<double> sh, std::optional<double> sw) {     \
    return upsample_aa_backward(grad, osize, isize, align, sh, sw, CUBIC);                         \
  }                                                                                                \
  at::Tensor &NAME##_backward_out(const at::Tensor &grad, at::IntArrayRef osize,                   \
                                  at::IntArrayRef isize, bool align, std::optional<double> sh,     \
                                  std::optional<double> sw, at::Tensor &gin) {                     \
    return assign_result(gin, upsample_aa_backward(grad, osize, isize, align, sh, sw, CUBIC));     \
  }
NEURON_RESAMPLE_AA(_upsample_bilinear2d_aa, false)
NEURON_RESAMPLE_AA(_upsample_bicubic2d_aa, true)
#undef NEURON_RESAMPLE_AA

// ---------------------------------------------------------------- grid_sample
namespace {

bool grid_native(const at::Tensor &input, const at::Tensor &grid, int64_t mode, int64_t pad) {
  bool ok;
  tnk_dtype_t dt = to_tnk(input.scalar_type(), &ok);
  return ok && grid.scalar_type() == input.scalar_type() &&
         kernel_supported(TNK_K_GRID_SAMPLE,
                          kernel_query(static_cast<int>(pad), dt, -1, static_cast<int>(mode)));
}

// x [n, c, (d,) h, w] and grid [n, (od,) oh, ow, 2 or 3], both contiguous
tnk_grid_sample_args_t grid_args(const at::Tensor &x, const at::Tensor &grid, int64_t mode,
                                 int64_t pad, bool align) {
  tnk_grid_sample_args_t a{};
  const bool three = x.dim() == 5;
  a.three_d = three;
  a.n = x.size(0);
  a.c = x.size(1);
  a.d = three ? x.size(2) : 1;
  a.h = x.size(-2);
  a.w = x.size(-1);
  a.od = three ? grid.size(1) : 1;
  a.oh = grid.size(-3);
  a.ow = grid.size(-2);
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.mode = static_cast<int32_t>(mode);
  a.padding = static_cast<int32_t>(pad);
  a.align_corners = align;
  return a;
}

std::vector<int64_t> grid_out_sizes(const at::Tensor &x, const at::Tensor &g) {
  std::vector<int64_t> s{x.size(0), x.size(1)};
  for (int64_t i = 1; i < g.dim() - 1; i++) s.push_back(g.size(i));
  return s;
}

at::Tensor grid_forward(const at::Tensor &input, const at::Tensor &grid, int64_t mode, int64_t pad,
                        bool align, const char *name) {
  at::Tensor x = input.contiguous(), g = grid.contiguous();
  at::Tensor out = at::empty(grid_out_sizes(x, g), x.options());
  if (out.numel() == 0) return out;
  tnk_grid_sample_args_t a = grid_args(x, g, mode, pad, align);
  a.in = x.const_data_ptr();
  a.grid = g.const_data_ptr();
  a.out = out.data_ptr();
  launch_kernel<TNK_K_GRID_SAMPLE>(x.device().index(), a, name);
  return out;
}

std::tuple<at::Tensor, at::Tensor> grid_backward(const at::Tensor &grad, const at::Tensor &input,
                                                 const at::Tensor &grid, int64_t mode, int64_t pad,
                                                 bool align, bool input_grad, const char *name) {
  at::Tensor x = input.contiguous(), g = grid.contiguous(), go = grad.contiguous();
  TORCH_CHECK(go.sizes() == at::IntArrayRef(grid_out_sizes(x, g)), name, ": grad_output of shape ",
              grad.sizes(), " does not match the output of input ", input.sizes(), " and grid ",
              grid.sizes());
  at::Tensor gin = input_grad ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor ggrid = at::empty(g.sizes(), g.options());  // as CPU: always computed
  if (go.numel() == 0) {
    if (gin.defined()) gin.zero_();
    ggrid.zero_();
    return {gin, ggrid};
  }
  tnk_grid_sample_args_t a = grid_args(x, g, mode, pad, align);
  a.backward = 1;
  a.in = x.const_data_ptr();
  a.grid = g.const_data_ptr();
  a.gout = go.const_data_ptr();
  a.gin = gin.defined() ? gin.data_ptr() : nullptr;
  a.ggrid = ggrid.data_ptr();
  launch_kernel<TNK_K_GRID_SAMPLE>(x.device().index(), a, name);
  return {gin, ggrid};
}
}  // namespace

at::Tensor grid_sampler_2d(const at::Tensor &input, const at::Tensor &grid, int64_t mode,
                           int64_t pad, bool align) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_2d(input, grid);
  if (!grid_native(input, grid, mode, pad))  // integer dtypes: the CPU
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(grid_sampler_2d)>::call(
        input, grid, mode, pad, align);
  return grid_forward(input, grid, mode, pad, align, "aten::grid_sampler_2d");
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_2d_backward(const at::Tensor &grad,
                                                            const at::Tensor &input,
                                                            const at::Tensor &grid, int64_t mode,
                                                            int64_t pad, bool align,
                                                            std::array<bool, 2> mask) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_2d(input, grid);
  if (!grid_native(input, grid, mode, pad) || grad.scalar_type() != input.scalar_type())
    return at::native::call_fallback_fn<&neuron_cpu_fallback,
                                        ATEN_OP(grid_sampler_2d_backward)>::call(grad, input, grid,
                                                                                 mode, pad, align,
                                                                                 mask);
  return grid_backward(grad, input, grid, mode, pad, align, mask[0],
                       "aten::grid_sampler_2d_backward");
}

at::Tensor grid_sampler_3d(const at::Tensor &input, const at::Tensor &grid, int64_t mode,
                           int64_t pad, bool align) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_3d(input, grid, mode);
  if (!grid_native(input, grid, mode, pad))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(grid_sampler_3d)>::call(
        input, grid, mode, pad, align);
  return grid_forward(input, grid, mode, pad, align, "aten::grid_sampler_3d");
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_3d_backward(const at::Tensor &grad,
                                                            const at::Tensor &input,
                                                            const at::Tensor &grid, int64_t mode,
                                                            int64_t pad, bool align,
                                                            std::array<bool, 2> mask) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_3d(input, grid, mode);
  if (!grid_native(input, grid, mode, pad) || grad.scalar_type() != input.scalar_type())
    return at::native::call_fallback_fn<&neuron_cpu_fallback,
                                        ATEN_OP(grid_sampler_3d_backward)>::call(grad, input, grid,
                                                                                 mode, pad, align,
                                                                                 mask);
  return grid_backward(grad, input, grid, mode, pad, align, mask[0],
                       "aten::grid_sampler_3d_backward");
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_REGISTER_WITH_BACKWARD(upsample_nearest1d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_nearest2d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_nearest3d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_nearest_exact1d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_nearest_exact2d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_nearest_exact3d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_linear1d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_bilinear2d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_trilinear3d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_bicubic2d)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_bilinear2d_aa)
  NEURON_REGISTER_WITH_BACKWARD(_upsample_bicubic2d_aa)
  m.impl("grid_sampler_2d", grid_sampler_2d);
  m.impl("grid_sampler_2d_backward", grid_sampler_2d_backward);
  m.impl("grid_sampler_3d", grid_sampler_3d);
  m.impl("grid_sampler_3d_backward", grid_sampler_3d_backward);
}

}  // namespace torch_neuronx
