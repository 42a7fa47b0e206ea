// Native 1-D and 2-D convolution, regular and transposed (forward and
// backward), lowered to im2col / col2im (kernels/conv.c) and the batched GEMM;
// grouped convolutions run one GEMM per group. 3-D convolutions still run on
// the CPU through the counted fallback (fallback.cpp). Also 2-D pooling and
// bilinear upsampling (kernels/spatial.c).
#include "neuron.h"

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/GridSamplerUtils.h>
#include <ATen/native/Pool.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

void im2col_task(void* p) { tnk_im2col(static_cast<tnk_im2col_args_t*>(p)); }

// A convolution's geometry over three spatial dims (depth, height, width):
// a 1-D or 2-D convolution has unit leading dims (size, kernel, stride and
// dilation 1, padding 0), so one lowering serves conv1d/2d/3d.
struct ConvGeom {
  int64_t n = 0, c = 0, o = 0, groups = 1;
  int spatial = 2;  // 1, 2 or 3: how many trailing dims are real
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0},
          dil[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t taps() const { return k[0] * k[1] * k[2]; }
  int64_t pixels() const { return out[0] * out[1] * out[2]; }
  // {n, ch, <the real spatial dims of `v`>}
  std::vector<int64_t> shape(int64_t ch, const int64_t* v) const {
    std::vector<int64_t> r{n, ch};
    for (int i = 3 - spatial; i < 3; i++) r.push_back(v[i]);
    return r;
  }
};

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil) {
  return (in + 2 * p - dil * (k - 1) - 1) / s + 1;
}

// {1, ch, 1, ...}: a per-channel vector broadcast over the spatial dims.
std::vector<int64_t> per_channel(const ConvGeom& g) {
  std::vector<int64_t> r{1, g.c};
  r.resize(2 + g.spatial, 1);
  return r;
}

// One entry per real spatial dim from a parameter list of that many entries
// (or one, applied to all); the leading unit dims keep their defaults.
void set_params(ConvGeom& g, at::IntArrayRef stride, at::IntArrayRef padding,
                at::IntArrayRef dilation) {
  auto pick = [&](at::IntArrayRef v, int i, int64_t dflt) {
    return v.size() > static_cast<size_t>(i) ? v[i] : (v.empty() ? dflt : v[0]);
  };
  for (int i = 0; i < g.spatial; i++) {
    int slot = 3 - g.spatial + i;
    g.s[slot] = pick(stride, i, 1);
    g.p[slot] = pick(padding, i, 0);
    g.dil[slot] = pick(dilation, i, 1);
  }
}

bool conv_native(const at::Tensor& input, const at::Tensor& weight, bool transposed,
                 int64_t groups) {
  auto t = input.scalar_type();
  (void)transposed;  // both directions run natively
  return input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim() &&
         (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) &&
         weight.scalar_type() == t && weight.device() == input.device() && groups >= 1;
}

ConvGeom geometry(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                  at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  ConvGeom g;
  g.spatial = static_cast<int>(input.dim()) - 2;
  g.n = input.size(0);
  g.c = input.size(1);
  g.o = weight.size(0);
  g.groups = groups;
  set_params(g, stride, padding, dilation);
  for (int i = 0; i < g.spatial; i++) {
    int slot = 3 - g.spatial + i;
    g.in[slot] = input.size(2 + i);
    g.k[slot] = weight.size(2 + i);
    g.out[slot] = conv_out_size(g.in[slot], g.k[slot], g.s[slot], g.p[slot], g.dil[slot]);
  }
  return g;
}

// columns [n, c*taps, pixels] of x, or (col2im) x += columns.
void lower(const ConvGeom& g, const at::Tensor& im, const at::Tensor& col, bool col2im) {
  tnk_im2col_args_t a{};
  a.im = const_cast<void*>(im.const_data_ptr());
  a.col = const_cast<void*>(col.const_data_ptr());
  a.batch = g.n;
  a.c = g.c;
  a.d = g.in[0];
  a.h = g.in[1];
  a.w = g.in[2];
  a.kd = g.k[0];
  a.kh = g.k[1];
  a.kw = g.k[2];
  a.sd = g.s[0];
  a.sh = g.s[1];
  a.sw = g.s[2];
  a.pd = g.p[0];
  a.ph = g.p[1];
  a.pw = g.p[2];
  a.dd = g.dil[0];
  a.dh = g.dil[1];
  a.dw = g.dil[2];
  a.od = g.out[0];
  a.oh = g.out[1];
  a.ow = g.out[2];
  bool ok;
  a.dtype = to_tnk(im.scalar_type(), &ok);
  a.col2im = col2im;
  launch(im.device().index(), im2col_task, &a, sizeof a, col2im ? "aten::col2im" : "aten::im2col");
}

at::Tensor columns(const ConvGeom& g, const at::Tensor& x) {
  at::Tensor col = at::empty({g.n, g.c * g.taps(), g.pixels()}, x.options());
  lower(g, x, col, false);
  return col;
}

// The geometry of a transposed convolution as the regular convolution it is
// the adjoint of: the image is the transposed convolution's output
// [n, cout, OH, OW], the column grid its input's [h, w].
ConvGeom transposed_geometry(const at::Tensor& input, const at::Tensor& weight,
                             at::IntArrayRef stride, at::IntArrayRef padding,
                             at::IntArrayRef dilation, at::IntArrayRef out_pad,
                             int64_t groups) {
  ConvGeom g;
  g.spatial = static_cast<int>(input.dim()) - 2;
  g.n = input.size(0);
  g.o = input.size(1);
  g.c = weight.size(1) * groups;
  g.groups = groups;
  set_params(g, stride, padding, dilation);
  bool positive = true;
  for (int i = 0; i < g.spatial; i++) {
    int slot = 3 - g.spatial + i;
    int64_t op = out_pad.size() > static_cast<size_t>(i) ? out_pad[i]
                                                         : (out_pad.empty() ? 0 : out_pad[0]);
    g.k[slot] = weight.size(2 + i);
    g.out[slot] = input.size(2 + i);
    g.in[slot] = (g.out[slot] - 1) * g.s[slot] - 2 * g.p[slot] + g.dil[slot] * (g.k[slot] - 1) +
                 op + 1;
    positive = positive && g.in[slot] > 0;
  }
  TORCH_CHECK(positive, "Given transposed convolution input of shape ", input.sizes(),
              " and weight of shape ", weight.sizes(), ", the calculated output size is too small");
  return g;
}

// conv_transpose1d/2d/3d: per group, columns = W_g^T x_g (fp32), then col2im.
at::Tensor transposed_forward(const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation,
                              at::IntArrayRef out_pad, int64_t groups) {
  ConvGeom g = transposed_geometry(input, weight, stride, padding, dilation, out_pad, groups);
  int64_t cin_g = g.o / groups, kg = g.c / groups * g.taps(), L = g.pixels();
  at::Tensor xf = input.contiguous().view({g.n, g.o, L}).to(at::kFloat);
  at::Tensor wf = weight.contiguous().view({g.o, kg}).to(at::kFloat);
  at::Tensor col = at::empty({g.n, g.c * g.taps(), L}, xf.options());
  for (int64_t gi = 0; gi < groups; gi++) {
    at::Tensor c = col.narrow(1, gi * kg, kg);
    at::bmm_out(c, wf.narrow(0, gi * cin_g, cin_g).t().unsqueeze(0).expand({g.n, kg, cin_g}),
                xf.narrow(1, gi * cin_g, cin_g));
  }
  at::Tensor img = at::zeros(g.shape(g.c, g.in), xf.options());
  lower(g, img, col, true);
  // the bias joins in fp32: one rounding to a half-precision output
  if (bias.has_value() && bias->defined()) img.add_(bias->to(at::kFloat).view(per_channel(g)));
  return img.to(input.scalar_type());
}

}  // namespace

at::Tensor conv_native_forward(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                               at::IntArrayRef output_padding, int64_t groups) {
  if (!conv_native(input, weight, transposed, groups))
    return conv_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                    groups);
  if (transposed)
    return transposed_forward(input, weight, bias, stride, padding, dilation, output_padding,
                              groups);
  ConvGeom g = geometry(input, weight, stride, padding, dilation, groups);
  TORCH_CHECK(g.out[0] > 0 && g.out[1] > 0 && g.out[2] > 0, "Calculated output size is too "
              "small for the input of shape ", input.sizes(), " and kernel of shape ",
              weight.sizes());
  at::Tensor x = input.contiguous();
  at::Tensor col = columns(g, x);
  int64_t og = g.o / groups, kg = g.c / groups * g.taps(), L = g.pixels();
  at::Tensor w = weight.contiguous().view({g.o, kg});
  at::Tensor out = at::empty({g.n, g.o, L}, input.options());
  // With a bias, out starts as the bias and the products accumulate onto it
  // in the GEMM (fp32, one rounding for half-precision outputs, as the CPU).
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) out.copy_(bias->view({1, g.o, 1}).expand_as(out));
  for (int64_t gi = 0; gi < groups; gi++) {
    at::Tensor o = out.narrow(1, gi * og, og);
    at::Tensor wg = w.narrow(0, gi * og, og).unsqueeze(0).expand({g.n, og, kg});
    at::Tensor cg = col.narrow(1, gi * kg, kg);
    if (has_bias) at::baddbmm_out(o, o, wg, cg);
    else at::bmm_out(o, wg, cg);
  }
  return out.view(g.shape(g.o, g.out));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_native_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> mask) {
  if (!conv_native(input, weight, transposed, groups) ||
      grad_output.scalar_type() != input.scalar_type())
    return conv_cpu_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                             output_padding, groups, mask);
  if (transposed) {
    // The input gradient is the regular convolution of the output gradient;
    // the weight gradient pairs the input with the output gradient's columns.
    ConvGeom g = transposed_geometry(input, weight, stride, padding, dilation, output_padding,
                                     groups);
    at::Tensor gx, gw, gb;
    if (mask[0]) {
      gx = conv_native_forward(grad_output, weight, std::nullopt, stride, padding, dilation,
                               false, at::IntArrayRef{}, groups);
      // output_padding >= stride (legal while < dilation) leaves trailing
      // output rows no input position reaches: the convolution then yields
      // more positions than the input has
      for (int64_t d = 2; d < input.dim(); d++)
        if (gx.size(d) > input.size(d)) gx = gx.narrow(d, 0, input.size(d));
      gx = gx.contiguous();
    }
    if (mask[1]) {
      int64_t cin_g = g.o / groups, kg = g.c / groups * g.taps(), L = g.pixels();
      at::Tensor col = columns(g, grad_output.contiguous());
      at::Tensor x = input.contiguous().view({g.n, g.o, L});
      gw = at::empty({g.o, kg}, weight.options());
      for (int64_t gi = 0; gi < groups; gi++) {
        at::Tensor per_image = at::bmm(x.narrow(1, gi * cin_g, cin_g),
                                       col.narrow(1, gi * kg, kg).transpose(1, 2));
        gw.narrow(0, gi * cin_g, cin_g).copy_(per_image.sum(0));
      }
      gw = gw.view(weight.sizes());
    }
    if (mask[2]) gb = grad_output.flatten(2).sum({0, 2});
    return {gx, gw, gb};
  }
  ConvGeom g = geometry(input, weight, stride, padding, dilation, groups);
  int64_t og = g.o / groups, kg = g.c / groups * g.taps(), L = g.pixels();
  at::Tensor go = grad_output.contiguous().view({g.n, g.o, L});
  at::Tensor w = weight.contiguous().view({g.o, kg});
  at::Tensor gx, gw, gb;
  if (mask[0]) {
    // Columns of the input gradient in fp32 (col2im sums many terms), then
    // back to the input's dtype.
    at::Tensor gof = go.to(at::kFloat), wf = w.to(at::kFloat);
    at::Tensor gcol = at::empty({g.n, g.c * g.taps(), L}, go.options().dtype(at::kFloat));
    for (int64_t gi = 0; gi < groups; gi++) {
      at::Tensor c = gcol.narrow(1, gi * kg, kg);
      at::bmm_out(c, wf.narrow(0, gi * og, og).t().unsqueeze(0).expand({g.n, kg, og}),
                  gof.narrow(1, gi * og, og));
    }
    at::Tensor gxf = at::zeros(g.shape(g.c, g.in), go.options().dtype(at::kFloat));
    lower(g, gxf, gcol, true);
    gx = gxf.to(input.scalar_type()).view(input.sizes());
  }
  if (mask[1]) {
    at::Tensor col = columns(g, input.contiguous());
    gw = at::empty({g.o, kg}, weight.options());
    for (int64_t gi = 0; gi < groups; gi++) {
      at::Tensor per_image = at::bmm(go.narrow(1, gi * og, og),
                                     col.narrow(1, gi * kg, kg).transpose(1, 2));
      gw.narrow(0, gi * og, og).copy_(per_image.sum(0));
    }
    gw = gw.view(weight.sizes());
  }
  if (mask[2]) gb = go.sum({0, 2});
  return {gx, gw, gb};
}

// --------------------------------------------------- unfold / fold
// im2col (F.unfold) and col2im (F.fold) on the convolution lowering kernels.

namespace {
void check_pairs(at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s,
                 const char* name) {
  TORCH_CHECK(k.size() == 2, "It is expected kernel_size equals to 2, but got size ", k.size());
  TORCH_CHECK(d.size() == 2, "It is expected dilation equals to 2, but got size ", d.size());
  TORCH_CHECK(p.size() == 2, "It is expected padding equals to 2, but got size ", p.size());
  TORCH_CHECK(s.size() == 2, "It is expected stride equals to 2, but got size ", s.size());
  (void)name;
}
ConvGeom fold_geometry(int64_t n, int64_t c, int64_t h, int64_t w, at::IntArrayRef k,
                       at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
  ConvGeom g;
  g.n = n;
  g.c = c;
  set_params(g, s, p, d);
  g.in[1] = h;
  g.in[2] = w;
  for (int i = 1; i < 3; i++) {
    g.k[i] = k[i - 1];
    g.out[i] = conv_out_size(g.in[i], g.k[i], g.s[i], g.p[i], g.dil[i]);
  }
  return g;
}
}  // namespace

at::Tensor& im2col_out(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef d,
                       at::IntArrayRef p, at::IntArrayRef s, at::Tensor& out) {
  check_pairs(k, d, p, s, "im2col");
  at::native::im2col_shape_check(self, at::Tensor(), k[0], k[1], d[0], d[1], p[0], p[1], s[0],
                                 s[1]);
  bool batched = self.dim() == 4;
  at::Tensor x = (batched ? self : self.unsqueeze(0)).contiguous();
  ConvGeom g = fold_geometry(x.size(0), x.size(1), x.size(2), x.size(3), k, d, p, s);
  at::Tensor col = at::empty({g.n, g.c * g.taps(), g.pixels()}, x.options());
  if (col.numel()) lower(g, x, col, false);
  if (!batched) col = col.squeeze(0);
  at::native::resize_output(out, col.sizes());
  return out.copy_(col);
}

at::Tensor im2col(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef d,
                  at::IntArrayRef p, at::IntArrayRef s) {
  at::Tensor out = at::empty({0}, self.options());
  return im2col_out(self, k, d, p, s, out);
}

at::Tensor& col2im_out(const at::Tensor& self, c10::SymIntArrayRef osize, at::IntArrayRef k,
                       at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s,
                       at::Tensor& out) {
  TORCH_CHECK(osize.size() == 2, "It is expected output_size equals to 2, but got size ",
              osize.size());
  check_pairs(k, d, p, s, "col2im");
  int64_t oh = osize[0].expect_int(), ow = osize[1].expect_int();
  at::native::col2im_shape_check(self, at::Tensor(), oh, ow, k[0], k[1], d[0], d[1], p[0], p[1],
                                 s[0], s[1]);
  auto st = self.scalar_type();
  if (st != at::kFloat && st != at::kDouble && st != at::kBFloat16 && st != at::kHalf)
    return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(col2im_out)>::call(
        self, osize, k, d, p, s, out);
  bool batched = self.dim() == 3;
  at::Tensor col = (batched ? self : self.unsqueeze(0)).contiguous();
  int64_t c = col.size(1) / (k[0] * k[1]);
  ConvGeom g = fold_geometry(col.size(0), c, oh, ow, k, d, p, s);
  at::Tensor accf = at::zeros({g.n, c, oh, ow}, col.options().dtype(
      col.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  if (col.numel()) lower(g, accf, col.to(accf.scalar_type()), true);
  at::Tensor r = accf.to(self.scalar_type());
  if (!batched) r = r.squeeze(0);
  return assign_result(out, r);
}

at::Tensor col2im(const at::Tensor& self, c10::SymIntArrayRef osize, at::IntArrayRef k,
                  at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
  at::Tensor out = at::empty({0}, self.options());
  return col2im_out(self, osize, k, d, p, s, out);
}

// ------------------------------------------------ pooling and resampling
// Inputs are [C, (D,) H, W] or [N, C, (D,) H, W]; the kernels read and write
// NC(D)HW planes, so other layouts go through a contiguous copy, and results
// land in the layout ATen gives the input (channels-last stays channels-last).

namespace {
void pool_task(void* p) { tnk_pool(static_cast<tnk_pool_args_t*>(p)); }
void resample_task(void* p) { tnk_resample(static_cast<tnk_resample_args_t*>(p)); }

bool pool_dtype_ok(const at::Tensor& t) {
  bool ok;
  tnk_dtype_t dt = to_tnk(t.scalar_type(), &ok);
  return ok && tnk_pool_supported(dt);
}

// A floating tensor of `spatial` spatial dims, with or without the batch dim.
bool spatial_ok(const at::Tensor& t, int spatial = 2) {
  return pool_dtype_ok(t) && (t.dim() == spatial + 1 || t.dim() == spatial + 2);
}

// Writes the NCHW result `r` into `out` (resized to r's shape in `fmt`).
at::Tensor& deliver(at::Tensor& out, const at::Tensor& r, at::MemoryFormat fmt) {
  if (out.is_same(r)) return out;
  if (at::native::resize_output(out, r.sizes()) && fmt != at::MemoryFormat::Contiguous)
    out.resize_(r.sizes(), fmt);  // a fresh output takes the input's layout
  out.copy_(r);
  return out;
}

at::MemoryFormat format_of(const at::Tensor& t) {
  return t.dim() >= 4 ? t.suggest_memory_format() : at::MemoryFormat::Contiguous;
}

// Result tensor of `shape` in `fmt`, and the NCHW buffer the kernel writes.
std::pair<at::Tensor, at::Tensor> result_pair(at::IntArrayRef shape, const at::TensorOptions& o,
                                             at::MemoryFormat fmt) {
  at::Tensor nchw = at::empty(shape, o);
  if (fmt == at::MemoryFormat::Contiguous) return {nchw, nchw};
  return {at::empty(shape, o.memory_format(fmt)), nchw};
}

// Pooling geometry over the last `spatial` (2 or 3) dims; arrays are
// (depth, height, width), depth unused in 2-D.
struct PoolGeom {
  int spatial = 2;
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t c = 0, planes = 0;
};

// The window parameters as the int32 ATen's shape checks take.
struct PoolInts {
  int32_t k[3], s[3], p[3], d[3];
};
PoolInts as_int32(const PoolGeom& g) {
  PoolInts r;
  for (int a = 0; a < 3; a++) {
    r.k[a] = static_cast<int32_t>(g.k[a]);
    r.s[a] = static_cast<int32_t>(g.s[a]);
    r.p[a] = static_cast<int32_t>(g.p[a]);
    r.d[a] = static_cast<int32_t>(g.dil[a]);
  }
  return r;
}

// One entry per spatial dim from a list of 1 or `spatial` entries.
int64_t pick(at::IntArrayRef v, int i, int64_t dflt) {
  if (v.empty()) return dflt;
  return v.size() > static_cast<size_t>(i) ? v[i] : v[0];
}

const char* kAxes[2] = {"two", "three"};

// Reads sizes, planes and (for windowed pools) the window parameters, ATen's
// argument checks first.
PoolGeom pool_geometry(const at::Tensor& x, int spatial, at::IntArrayRef k, at::IntArrayRef st,
                       at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode,
                       const char* name) {
  const char* n = kAxes[spatial - 2];
  auto ok = [&](at::IntArrayRef v) { return v.size() == 1 || v.size() == size_t(spatial); };
  TORCH_CHECK(ok(k), name, ": kernel_size must either be a single int, or a tuple of ", n,
              " ints");
  TORCH_CHECK(st.empty() || ok(st), name, ": stride must either be omitted, a single int, or "
              "a tuple of ", n, " ints");
  TORCH_CHECK(ok(pad), name, ": padding must either be a single int, or a tuple of ", n,
              " ints");
  TORCH_CHECK(ok(dil), name, ": dilation must be either a single int, or a tuple of ", n,
              " ints");
  PoolGeom g;
  g.spatial = spatial;
  for (int i = 0; i < spatial; i++) {
    int a = 3 - spatial + i;
    g.k[a] = pick(k, i, 1);
    g.s[a] = st.empty() ? g.k[a] : pick(st, i, 1);
    g.p[a] = pick(pad, i, 0);
    g.dil[a] = pick(dil, i, 1);
    TORCH_CHECK(g.s[a] != 0, "stride should not be zero");
  }
  TORCH_CHECK(x.dim() == spatial + 1 || x.dim() == spatial + 2, "Expected ", spatial + 1, "D or ",
              spatial + 2, "D (batch mode) tensor with optional 0 dim batch size for input, "
              "but got:", x.sizes());
  g.c = x.size(-spatial - 1);
  g.planes = x.dim() == spatial + 2 ? x.size(0) * g.c : g.c;
  for (int i = 0; i < spatial; i++) {
    int a = 3 - spatial + i;
    g.in[a] = x.size(x.dim() - spatial + i);
    g.out[a] = at::native::pooling_output_shape<int64_t>(g.in[a], g.k[a], g.p[a], g.s[a],
                                                         g.dil[a], ceil_mode);
  }
  PoolInts w = as_int32(g);
  const int32_t *K = w.k, *S = w.s, *P = w.p, *D = w.d;
  if (spatial == 2)
    at::native::pool2d_shape_check(x, K[1], K[2], S[1], S[2], P[1], P[2], D[1], D[2], g.c,
                                   g.in[1], g.in[2], g.out[1], g.out[2], format_of(x));
  else
    at::native::pool3d_shape_check(x, g.c, K[0], K[1], K[2], S[0], S[1], S[2], P[0], P[1], P[2],
                                   D[0], D[1], D[2], g.in[0], g.in[1], g.in[2], g.out[0],
                                   g.out[1], g.out[2], name);
  return g;
}

// x's shape with the spatial dims replaced by the pooled ones.
std::vector<int64_t> pooled_shape(const at::Tensor& x, const PoolGeom& g) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
  for (int i = 0; i < g.spatial; i++) s[s.size() - g.spatial + i] = g.out[3 - g.spatial + i];
  return s;
}

tnk_pool_args_t pool_args(const PoolGeom& g, int kind, const at::Tensor& x) {
  tnk_pool_args_t a{};
  a.planes = g.planes;
  a.h = g.in[1];
  a.w = g.in[2];
  a.oh = g.out[1];
  a.ow = g.out[2];
  a.kh = static_cast<int32_t>(g.k[1]);
  a.kw = static_cast<int32_t>(g.k[2]);
  a.sh = static_cast<int32_t>(g.s[1]);
  a.sw = static_cast<int32_t>(g.s[2]);
  a.ph = static_cast<int32_t>(g.p[1]);
  a.pw = static_cast<int32_t>(g.p[2]);
  a.dh = static_cast<int32_t>(g.dil[1]);
  a.dw = static_cast<int32_t>(g.dil[2]);
  if (g.spatial == 3) {
    a.d = g.in[0];
    a.od = g.out[0];
    a.kd = static_cast<int32_t>(g.k[0]);
    a.sd = static_cast<int32_t>(g.s[0]);
    a.pd = static_cast<int32_t>(g.p[0]);
    a.dd = static_cast<int32_t>(g.dil[0]);
  }
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.kind = kind;
  return a;
}

// ---- max pooling with indices
void max_pool_forward(const at::Tensor& self, int spatial, at::IntArrayRef k, at::IntArrayRef st,
                      at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, at::Tensor& out,
                      at::Tensor& indices, const char* name) {
  PoolGeom g = pool_geometry(self, spatial, k, st, pad, dil, ceil_mode, name);
  at::MemoryFormat fmt = format_of(self);
  auto shape = pooled_shape(self, g);
  auto [res, buf] = result_pair(shape, self.options(), fmt);
  auto [ires, ibuf] = result_pair(shape, self.options().dtype(at::kLong), fmt);
  if (buf.numel()) {
    at::Tensor x = self.contiguous();
    tnk_pool_args_t a = pool_args(g, TNK_POOL_MAX, self);
    a.in = x.const_data_ptr();
    a.out = buf.data_ptr();
    a.indices = ibuf.data_ptr<int64_t>();
    launch(self.device().index(), pool_task, &a, sizeof a, name);
    if (!res.is_same(buf)) {
      res.copy_(buf);
      ires.copy_(ibuf);
    }
  }
  deliver(out, res, fmt);
  deliver(indices, ires, fmt);
}

at::Tensor max_pool_backward(const at::Tensor& grad, const at::Tensor& self, int spatial,
                             at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,
                             at::IntArrayRef dil, bool ceil_mode, const at::Tensor& indices,
                             const char* name) {
  PoolGeom g = pool_geometry(self, spatial, k, st, pad, dil, ceil_mode, name);
  PoolInts w = as_int32(g);
  const int32_t *K = w.k, *S = w.s, *P = w.p, *D = w.d;
  if (spatial == 2)
    at::native::max_pool2d_backward_shape_check(self, grad, indices, K[1], K[2], S[1], S[2], P[1],
                                                P[2], D[1], D[2], g.c, g.in[1], g.in[2],
                                                g.out[1], g.out[2], format_of(self));
  else
    at::native::max_pool3d_backward_shape_check(self, grad, indices, g.c, K[0], K[1], K[2], S[0],
                                                S[1], S[2], P[0], P[1], P[2], D[0], D[1], D[2],
                                                g.in[0], g.in[1], g.in[2], g.out[0], g.out[1],
                                                g.out[2], name);
  at::MemoryFormat fmt = format_of(self);
  auto [res, buf] = result_pair(self.sizes(), self.options(), fmt);
  if (buf.numel()) {
    at::Tensor go = grad.contiguous(), ix = indices.contiguous();
    tnk_pool_args_t a = pool_args(g, TNK_POOL_MAX, self);
    a.backward = 1;
    a.in = go.const_data_ptr();
    a.out = buf.data_ptr();
    a.indices = const_cast<int64_t*>(ix.const_data_ptr<int64_t>());
    a.fault = fault_sink(self.device().index(),
                         spatial == 2 ? "max_pool2d_backward" : "max_pool3d_backward", false);
    launch(self.device().index(), pool_task, &a, sizeof a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  }
  return res;
}

bool max_backward_ok(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices,
                     int spatial) {
  return pool_dtype_ok(self) && grad.scalar_type() == self.scalar_type() &&
         indices.scalar_type() == at::kLong;
}

// ---- average pooling
// Result layout of the average pools, as CPU gives it: the input's, except
// that 3-D forward results are contiguous.
at::MemoryFormat avg_format(const at::Tensor& self, int spatial, bool backward) {
  return spatial == 3 && !backward ? at::MemoryFormat::Contiguous : format_of(self);
}

void check_divisor(std::optional<int64_t> d) {
  TORCH_CHECK(!d.has_value() || *d != 0, "divisor must be not zero");
}

// The average-pool forward or backward (grad defined) into a new tensor.
at::Tensor avg_pool_run(const at::Tensor& self, const at::Tensor* grad, int spatial,
                        at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,
                        bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor,
                        const char* name) {
  check_divisor(divisor);
  PoolGeom g = pool_geometry(self, spatial, k, st, pad, at::IntArrayRef{1}, ceil_mode, name);
  at::MemoryFormat fmt = avg_format(self, spatial, grad != nullptr);
  if (grad) {
    PoolInts w = as_int32(g);
    const int32_t *K = w.k, *S = w.s, *P = w.p;
    if (spatial == 2)
      at::native::avg_pool2d_backward_shape_check(
          self, *grad, self.dim() == 4 ? self.size(0) : 1, K[1], K[2], S[1], S[2], P[1], P[2],
          g.c, g.in[1], g.in[2], g.out[1], g.out[2], fmt);
    else
      at::native::avg_pool3d_backward_shape_check(self, *grad, g.c, K[0], K[1], K[2], S[0], S[1],
                                                  S[2], P[0], P[1], P[2], g.in[0], g.in[1],
                                                  g.in[2], g.out[0], g.out[1], g.out[2], name);
  }
  auto [res, buf] = result_pair(grad ? self.sizes().vec() : pooled_shape(self, g),
                                self.options(), fmt);
  if (buf.numel()) {
    at::Tensor in = grad ? grad->contiguous() : self.contiguous();
    tnk_pool_args_t a = pool_args(g, TNK_POOL_AVG, self);
    a.backward = grad != nullptr;
    a.count_include_pad = count_include_pad;
    a.divisor = divisor.value_or(0);
    a.in = in.const_data_ptr();
    a.out = buf.data_ptr();
    launch(self.device().index(), pool_task, &a, sizeof a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  }
  return res;
}

// ---- adaptive average pooling
at::Tensor adaptive_avg_run(const at::Tensor& self, const at::Tensor* grad, int spatial,
                            at::IntArrayRef osize, const char* name) {
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, name, "(): Expected ",
              spatial + 1, "D or ", spatial + 2, "D tensor, but got ", self.sizes());
  TORCH_CHECK(osize.size() == static_cast<size_t>(spatial), name, ": output_size must be ",
              spatial);
  for (int64_t i = 1; i < self.dim(); i++)
    TORCH_CHECK(self.size(i) > 0, name, "(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ", self.sizes(), " with dimension ", i,
                " being empty");
  for (int64_t o : osize)
    TORCH_CHECK(o >= 0, name, ": elements of output_size must be greater than or equal to 0 "
                "but received ", osize);
  PoolGeom g;
  g.spatial = spatial;
  for (int i = 0; i < spatial; i++) {
    int a = 3 - spatial + i;
    g.in[a] = self.size(self.dim() - spatial + i);
    g.out[a] = osize[i];
  }
  g.planes = self.dim() == spatial + 2 ? self.size(0) * self.size(1) : self.size(0);
  at::MemoryFormat fmt = avg_format(self, spatial, grad != nullptr);
  auto [res, buf] = result_pair(grad ? self.sizes().vec() : pooled_shape(self, g),
                                self.options(), fmt);
  if (buf.numel()) {
    at::Tensor in = grad ? grad->contiguous() : self.contiguous();
    tnk_pool_args_t a = pool_args(g, TNK_POOL_ADAPTIVE_AVG, self);
    a.backward = grad != nullptr;
    a.in = in.const_data_ptr();
    a.out = buf.data_ptr();
    launch(self.device().index(), pool_task, &a, sizeof a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  }
  return res;
}
}  // namespace

// The 2-D and 3-D entry points: ATen's schemas, the CPU fallback for what
// the kernels do not take (integer dtypes, mixed dtypes).
#define FALLBACK_CALL(OP, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OP)>::call(__VA_ARGS__)

#define NEURON_MAX_POOL(ND, SP)                                                                 \
  std::tuple<at::Tensor&, at::Tensor&> max_pool##ND##_with_indices_out(                         \
      const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,       \
      at::IntArrayRef dil, bool ceil_mode, at::Tensor& out, at::Tensor& indices) {              \
    if (!pool_dtype_ok(self))                                                                  \
      return FALLBACK_CALL(max_pool##ND##_with_indices_out, self, k, st, pad, dil, ceil_mode,   \
                           out, indices);                                                       \
    max_pool_forward(self, SP, k, st, pad, dil, ceil_mode, out, indices,                        \
                     "aten::max_pool" #ND "_with_indices");                                     \
    return {out, indices};                                                                      \
  }                                                                                             \
  std::tuple<at::Tensor, at::Tensor> max_pool##ND##_with_indices(                               \
      const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,       \
      at::IntArrayRef dil, bool ceil_mode) {                                                    \
    at::Tensor out = at::empty({0}, self.options());                                            \
    at::Tensor idx = at::empty({0}, self.options().dtype(at::kLong));                           \
    max_pool##ND##_with_indices_out(self, k, st, pad, dil, ceil_mode, out, idx);                \
    return {out, idx};                                                                          \
  }                                                                                             \
  at::Tensor& max_pool##ND##_with_indices_backward_out(                                         \
      const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st,    \
      at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, const at::Tensor& indices,      \
      at::Tensor& gin) {                                                                        \
    if (!max_backward_ok(grad, self, indices, SP))                                              \
      return FALLBACK_CALL(max_pool##ND##_with_indices_backward_grad_input, grad, self, k, st,  \
                           pad, dil, ceil_mode, indices, gin);                                  \
    return deliver(gin,                                                                         \
                   max_pool_backward(grad, self, SP, k, st, pad, dil, ceil_mode, indices,       \
                                     "aten::max_pool" #ND "_with_indices_backward"),            \
                   format_of(self));                                                            \
  }                                                                                             \
  at::Tensor max_pool##ND##_with_indices_backward(                                              \
      const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st,    \
      at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, const at::Tensor& indices) {    \
    if (!max_backward_ok(grad, self, indices, SP))                                              \
      return FALLBACK_CALL(max_pool##ND##_with_indices_backward, grad, self, k, st, pad, dil,   \
                           ceil_mode, indices);                                                 \
    return max_pool_backward(grad, self, SP, k, st, pad, dil, ceil_mode, indices,               \
                             "aten::max_pool" #ND "_with_indices_backward");                    \
  }

#define NEURON_AVG_POOL(ND, SP)                                                                 \
  at::Tensor avg_pool##ND(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st,        \
                          at::IntArrayRef pad, bool ceil_mode, bool cip,                        \
                          std::optional<int64_t> divisor) {                                     \
    if (!pool_dtype_ok(self))                                                                  \
      return FALLBACK_CALL(avg_pool##ND, self, k, st, pad, ceil_mode, cip, divisor);            \
    return avg_pool_run(self, nullptr, SP, k, st, pad, ceil_mode, cip, divisor,                 \
                        "aten::avg_pool" #ND);                                                  \
  }                                                                                             \
  at::Tensor& avg_pool##ND##_out(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st, \
                                 at::IntArrayRef pad, bool ceil_mode, bool cip,                 \
                                 std::optional<int64_t> divisor, at::Tensor& out) {             \
    if (!pool_dtype_ok(self) || out.scalar_type() != self.scalar_type())                       \
      return FALLBACK_CALL(avg_pool##ND##_out, self, k, st, pad, ceil_mode, cip, divisor, out); \
    return deliver(out,                                                                         \
                   avg_pool_run(self, nullptr, SP, k, st, pad, ceil_mode, cip, divisor,         \
                                "aten::avg_pool" #ND),                                          \
                   avg_format(self, SP, false));                                                \
  }                                                                                             \
  at::Tensor avg_pool##ND##_backward(const at::Tensor& grad, const at::Tensor& self,            \
                                     at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad, \
                                     bool ceil_mode, bool cip, std::optional<int64_t> divisor) { \
    if (!pool_dtype_ok(self) || grad.scalar_type() != self.scalar_type())                      \
      return FALLBACK_CALL(avg_pool##ND##_backward, grad, self, k, st, pad, ceil_mode, cip,     \
                           divisor);                                                            \
    return avg_pool_run(self, &grad, SP, k, st, pad, ceil_mode, cip, divisor,                   \
                        "aten::avg_pool" #ND "_backward");                                      \
  }                                                                                             \
  at::Tensor& avg_pool##ND##_backward_out(                                                      \
      const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef st,    \
      at::IntArrayRef pad, bool ceil_mode, bool cip, std::optional<int64_t> divisor,            \
      at::Tensor& gin) {                                                                        \
    if (!pool_dtype_ok(self) || grad.scalar_type() != self.scalar_type())                      \
      return FALLBACK_CALL(avg_pool##ND##_backward_grad_input, grad, self, k, st, pad,          \
                           ceil_mode, cip, divisor, gin);                                       \
    return deliver(gin,                                                                         \
                   avg_pool_run(self, &grad, SP, k, st, pad, ceil_mode, cip, divisor,           \
                                "aten::avg_pool" #ND "_backward"),                              \
                   format_of(self));                                                            \
  }

#define NEURON_ADAPTIVE_AVG(ND, SP)                                                             \
  at::Tensor adaptive_avg_pool##ND(const at::Tensor& self, c10::SymIntArrayRef size) {          \
    TORCH_CHECK(size.size() == SP, "adaptive_avg_pool" #ND ": output_size must be " #SP);       \
    TORCH_CHECK(self.dim() == SP + 1 || self.dim() == SP + 2, "adaptive_avg_pool" #ND           \
                "(): Expected ", SP + 1, "D or ", SP + 2, "D tensor, but got ", self.sizes());  \
    if (!pool_dtype_ok(self))                                                                  \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback,                         \
                                                 ATEN_OP(_adaptive_avg_pool##ND)>::call(self,   \
                                                                                        size);  \
    std::vector<int64_t> o;                                                                     \
    for (const auto& v : size) o.push_back(v.expect_int());                                     \
    return adaptive_avg_run(self, nullptr, SP, o, "aten::_adaptive_avg_pool" #ND);              \
  }                                                                                             \
  at::Tensor adaptive_avg_pool##ND##_backward(const at::Tensor& grad, const at::Tensor& self) { \
    if (!pool_dtype_ok(self) || grad.scalar_type() != self.scalar_type())                      \
      return FALLBACK_CALL(_adaptive_avg_pool##ND##_backward, grad, self);                      \
    TORCH_CHECK(grad.dim() == self.dim() && grad.dim() >= SP, "adaptive_avg_pool" #ND           \
                "_backward(): gradient and input ranks differ: ", grad.sizes(), " vs ",         \
                self.sizes());                                                                  \
    std::vector<int64_t> o(grad.sizes().end() - SP, grad.sizes().end());                        \
    return adaptive_avg_run(self, &grad, SP, o, "aten::_adaptive_avg_pool" #ND "_backward");    \
  }

NEURON_MAX_POOL(2d, 2)
NEURON_MAX_POOL(3d, 3)
NEURON_AVG_POOL(2d, 2)
NEURON_AVG_POOL(3d, 3)
NEURON_ADAPTIVE_AVG(2d, 2)
NEURON_ADAPTIVE_AVG(3d, 3)
#undef FALLBACK_CALL

// Linear (1-D/2-D/3-D) and bicubic upsampling: ATen's shape checks and
// scale rules, one separable kernel.
namespace {
using Scales = std::vector<std::optional<double>>;

// Resamples `in` (forward: the input; backward: the output gradient) into a
// new tensor shaped like `like` with the spatial sizes `out_sp` (forward) or
// `in_sp` (backward). `in_sp`/`out_sp` are the forward input/output sizes.
at::Tensor resample_run(const at::Tensor& in, const at::Tensor& like, int spatial, int mode,
                        at::IntArrayRef in_sp, at::IntArrayRef out_sp, bool align,
                        const Scales& scales, bool backward, const char* name) {
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
      sc[ax] = at::native::area_pixel_compute_scale<double>(in_sp[i], out_sp[i], align,
                                                            scales[i]);
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
    launch(like.device().index(), resample_task, &a, sizeof a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  } else if (buf.numel()) {
    res.zero_();
  }
  return res;
}

std::vector<int64_t> ints(c10::SymIntArrayRef v) {
  std::vector<int64_t> r;
  for (const auto& x : v) r.push_back(x.expect_int());
  return r;
}

at::Tensor resample_forward(const at::Tensor& self, c10::SymIntArrayRef osize, bool align,
                            const Scales& scales, int spatial, int mode, const char* name) {
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

at::Tensor resample_backward(const at::Tensor& grad, c10::SymIntArrayRef osize,
                             c10::SymIntArrayRef isize, bool align, const Scales& scales,
                             int spatial, int mode, const char* name) {
  TORCH_CHECK(osize.size() == static_cast<size_t>(spatial), "It is expected output_size equals "
              "to ", spatial, ", but got size ", osize.size());
  TORCH_CHECK(isize.size() == static_cast<size_t>(spatial + 2), "It is expected input_size "
              "equals to ", spatial + 2, ", but got size ", isize.size());
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
#define NEURON_RESAMPLE(NAME, SP, MODE, SCALES, LIST)                                         \
  at::Tensor& NAME##_out(const at::Tensor& self, c10::SymIntArrayRef osize, bool align,      \
                         SCALES, at::Tensor& out) {                                          \
    if (!spatial_ok(self, SP) || self.dim() != SP + 2 || out.scalar_type() != self.scalar_type()) \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(NAME##_out)>::  \
          call(self, osize, align, UNPACK LIST, out);                                        \
    return deliver(out,                                                                      \
                   resample_forward(self, osize, align, Scales{UNPACK LIST}, SP, MODE, "aten::" #NAME), \
                   format_of(self));                                                         \
  }                                                                                          \
  at::Tensor NAME(const at::Tensor& self, c10::SymIntArrayRef osize, bool align, SCALES) {   \
    if (!spatial_ok(self, SP) || self.dim() != SP + 2)                                        \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback, ATEN_OP(NAME)>::call(   \
          self, osize, align, UNPACK LIST);                                                  \
    return resample_forward(self, osize, align, Scales{UNPACK LIST}, SP, MODE, "aten::" #NAME);      \
  }                                                                                          \
  at::Tensor& NAME##_backward_out(const at::Tensor& grad, c10::SymIntArrayRef osize,         \
                                  c10::SymIntArrayRef isize, bool align, SCALES,             \
                                  at::Tensor& gin) {                                         \
    if (!spatial_ok(grad, SP) || grad.dim() != SP + 2 || gin.scalar_type() != grad.scalar_type()) \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback,                       \
                                                 ATEN_OP(NAME##_backward_grad_input)>::      \
          call(grad, osize, isize, align, UNPACK LIST, gin);                                 \
    return deliver(gin,                                                                      \
                   resample_backward(grad, osize, isize, align, Scales{UNPACK LIST}, SP, MODE,       \
                                     "aten::" #NAME "_backward"),                            \
                   format_of(grad));                                                         \
  }                                                                                          \
  at::Tensor NAME##_backward(const at::Tensor& grad, c10::SymIntArrayRef osize,              \
                             c10::SymIntArrayRef isize, bool align, SCALES) {                \
    at::Tensor gin = at::empty({0}, grad.options());                                         \
    return NAME##_backward_out(grad, osize, isize, align, UNPACK LIST, gin);                 \
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

// ---------------------------------------------------------------- grid_sample
namespace {
void grid_task(void* p) { tnk_grid_sample(static_cast<tnk_grid_sample_args_t*>(p)); }

bool grid_native(const at::Tensor& input, const at::Tensor& grid, int64_t mode, int64_t pad) {
  bool ok;
  tnk_dtype_t dt = to_tnk(input.scalar_type(), &ok);
  return ok && input.dim() == 4 && grid.dim() == 4 && grid.scalar_type() == input.scalar_type() &&
         tnk_grid_sample_supported(dt, static_cast<int>(mode), static_cast<int>(pad));
}

tnk_grid_sample_args_t grid_args(const at::Tensor& x, const at::Tensor& grid, int64_t mode,
                                 int64_t pad, bool align) {
  tnk_grid_sample_args_t a{};
  a.n = x.size(0);
  a.c = x.size(1);
  a.h = x.size(2);
  a.w = x.size(3);
  a.oh = grid.size(1);
  a.ow = grid.size(2);
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.mode = static_cast<int32_t>(mode);
  a.padding = static_cast<int32_t>(pad);
  a.align_corners = align;
  return a;
}
}  // namespace

at::Tensor grid_sampler_2d(const at::Tensor& input, const at::Tensor& grid, int64_t mode,
                           int64_t pad, bool align) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_2d(input, grid);
  if (!grid_native(input, grid, mode, pad))  // bicubic, integer dtypes: the CPU
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(grid_sampler_2d)>::call(
        input, grid, mode, pad, align);
  at::Tensor x = input.contiguous(), g = grid.contiguous();
  at::Tensor out = at::empty({x.size(0), x.size(1), g.size(1), g.size(2)}, x.options());
  if (out.numel() == 0) return out;
  tnk_grid_sample_args_t a = grid_args(x, g, mode, pad, align);
  a.in = x.const_data_ptr();
  a.grid = g.const_data_ptr();
  a.out = out.data_ptr();
  launch(x.device().index(), grid_task, &a, sizeof a, "aten::grid_sampler_2d");
  return out;
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_2d_backward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& grid, int64_t mode,
    int64_t pad, bool align, std::array<bool, 2> mask) {
  at::native::check_grid_sampler_common(input, grid);
  at::native::check_grid_sampler_2d(input, grid);
  if (!grid_native(input, grid, mode, pad) || grad.scalar_type() != input.scalar_type())
    return at::native::call_fallback_fn<&neuron_cpu_fallback,
                                        ATEN_OP(grid_sampler_2d_backward)>::call(
        grad, input, grid, mode, pad, align, mask);
  at::Tensor x = input.contiguous(), g = grid.contiguous(), go = grad.contiguous();
  TORCH_CHECK(go.sizes() == at::IntArrayRef({x.size(0), x.size(1), g.size(1), g.size(2)}),
              "grid_sampler_2d_backward: grad_output of shape ", grad.sizes(),
              " does not match the output of input ", input.sizes(), " and grid ", grid.sizes());
  at::Tensor gin = mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
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
  launch(x.device().index(), grid_task, &a, sizeof a, "aten::grid_sampler_2d_backward");
  return {gin, ggrid};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", conv_native_forward);
  m.impl("convolution_backward_overrideable", conv_native_backward);
  m.impl("im2col", im2col);
  m.impl("im2col.out", im2col_out);
  m.impl("col2im", col2im);
  m.impl("col2im.out", col2im_out);
#define REGISTER_POOLS(ND)                                                               \
  m.impl("max_pool" #ND "_with_indices", max_pool##ND##_with_indices);                   \
  m.impl("max_pool" #ND "_with_indices.out", max_pool##ND##_with_indices_out);           \
  m.impl("max_pool" #ND "_with_indices_backward", max_pool##ND##_with_indices_backward); \
  m.impl("max_pool" #ND "_with_indices_backward.grad_input",                             \
         max_pool##ND##_with_indices_backward_out);                                      \
  m.impl("avg_pool" #ND, avg_pool##ND);                                                  \
  m.impl("avg_pool" #ND ".out", avg_pool##ND##_out);                                     \
  m.impl("avg_pool" #ND "_backward", avg_pool##ND##_backward);                           \
  m.impl("avg_pool" #ND "_backward.grad_input", avg_pool##ND##_backward_out);            \
  m.impl("_adaptive_avg_pool" #ND, adaptive_avg_pool##ND);                               \
  m.impl("_adaptive_avg_pool" #ND "_backward", adaptive_avg_pool##ND##_backward);
  REGISTER_POOLS(2d)
  REGISTER_POOLS(3d)
#undef REGISTER_POOLS
  NEURON_REGISTER_WITH_BACKWARD(upsample_linear1d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_bilinear2d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_trilinear3d)
  NEURON_REGISTER_WITH_BACKWARD(upsample_bicubic2d)
  m.impl("grid_sampler_2d", grid_sampler_2d);
  m.impl("grid_sampler_2d_backward", grid_sampler_2d_backward);
}

}  // namespace torch_neuronx
