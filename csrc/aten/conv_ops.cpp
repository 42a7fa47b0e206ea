// Native 1-D, 2-D and 3-D convolution, regular and transposed (forward and
// backward), lowered to im2col / col2im (kernels/conv.c) and the batched GEMM;
// grouped convolutions run one GEMM per group. What the native path does not
// take (dtypes other than fp32/bf16/fp16, mixed dtypes or devices) runs as CPU
// convolutions on host views (conv_cpu), counted as fallbacks. Also im2col /
// col2im (unfold / fold).
#include "neuron.h"

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/DeviceGuard.h>
#include <ATen/native/GridSamplerUtils.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <ATen/native/im2col_shape_check.h>
#include <torch/library.h>

namespace torch_neuronx {

// Convolutions the native path does not take run as CPU convolutions on
// host views, counted as fallbacks (defined below).
at::Tensor conv_cpu(const at::Tensor &input, const at::Tensor &weight,
                    const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                    at::IntArrayRef output_padding, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_cpu_backward(
    const at::Tensor &grad_output, const at::Tensor &input, const at::Tensor &weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask);

namespace {

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
  std::vector<int64_t> shape(int64_t ch, const int64_t *v) const {
    std::vector<int64_t> r{n, ch};
    for (int i = 3 - spatial; i < 3; i++) r.push_back(v[i]);
    return r;
  }
};

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil) {
  return (in + 2 * p - dil * (k - 1) - 1) / s + 1;
}

// {1, ch, 1, ...}: a per-channel vector broadcast over the spatial dims.
std::vector<int64_t> per_channel(const ConvGeom &g) {
  std::vector<int64_t> r{1, g.c};
  r.resize(2 + g.spatial, 1);
  return r;
}

// One entry per real spatial dim from a parameter list of that many entries
// (or one, applied to all); the leading unit dims keep their defaults.
void set_params(ConvGeom &g, at::IntArrayRef stride, at::IntArrayRef padding,
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

bool conv_native(const at::Tensor &input, const at::Tensor &weight, bool transposed,
                 int64_t groups) {
  auto t = input.scalar_type();
  (void)transposed;  // both directions run natively
  return input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim() &&
         (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) && weight.scalar_type() == t &&
         weight.device() == input.device() && groups >= 1;
}

ConvGeom geometry(const at::Tensor &input, const at::Tensor &weight, at::IntArrayRef stride,
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
void lower(const ConvGeom &g, const at::Tensor &im, const at::Tensor &col, bool col2im) {
  tnk_im2col_args_t a{};
  a.im = const_cast<void *>(im.const_data_ptr());
  a.col = const_cast<void *>(col.const_data_ptr());
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
  launch_kernel<TNK_K_IM2COL>(im.device().index(), a, col2im ? "aten::col2im" : "aten::im2col");
}

at::Tensor columns(const ConvGeom &g, const at::Tensor &x) {
  at::Tensor col = at::empty({g.n, g.c * g.taps(), g.pixels()}, x.options());
  lower(g, x, col, false);
  return col;
}

// The geometry of a transposed convolution as the regular convolution it is
// the adjoint of: the image is the transposed convolution's output
// [n, cout, OH, OW], the column grid its input's [h, w].
ConvGeom transposed_geometry(const at::Tensor &input, const at::Tensor &weight,
                             at::IntArrayRef stride, at::IntArrayRef padding,
                             at::IntArrayRef dilation, at::IntArrayRef out_pad, int64_t groups) {
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
    int64_t op =
        out_pad.size() > static_cast<size_t>(i) ? out_pad[i] : (out_pad.empty() ? 0 : out_pad[0]);
    g.k[slot] = weight.size(2 + i);
    g.out[slot] = input.size(2 + i);
    g.in[slot] =
        (g.out[slot] - 1) * g.s[slot] - 2 * g.p[slot] + g.dil[slot] * (g.k[slot] - 1) + op + 1;
    positive = positive && g.in[slot] > 0;
  }
  TORCH_CHECK(positive, "Given transposed convolution input of shape ", input.sizes(),
              " and weight of shape ", weight.sizes(), ", the calculated output size is too small");
  return g;
}

// conv_transpose1d/2d/3d: per group, columns = W_g^T x_g (fp32), then col2im.
at::Tensor transposed_forward(const at::Tensor &input, const at::Tensor &weight,
                              const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
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

at::Tensor conv_native_forward(const at::Tensor &input, const at::Tensor &weight,
                               const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                               at::IntArrayRef output_padding, int64_t groups) {
  if (!conv_native(input, weight, transposed, groups))
    return conv_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                    groups);
  if (transposed)
    return transposed_forward(input, weight, bias, stride, padding, dilation, output_padding,
                              groups);
  ConvGeom g = geometry(input, weight, stride, padding, dilation, groups);
  TORCH_CHECK(g.out[0] > 0 && g.out[1] > 0 && g.out[2] > 0,
              "Calculated output size is too "
              "small for the input of shape ",
              input.sizes(), " and kernel of shape ", weight.sizes());
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
    if (has_bias)
      at::baddbmm_out(o, o, wg, cg);
    else
      at::bmm_out(o, wg, cg);
  }
  return out.view(g.shape(g.o, g.out));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_native_backward(
    const at::Tensor &grad_output, const at::Tensor &input, const at::Tensor &weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> mask) {
  if (!conv_native(input, weight, transposed, groups) ||
      grad_output.scalar_type() != input.scalar_type())
    return conv_cpu_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                             output_padding, groups, mask);
  if (transposed) {
    // The input gradient is the regular convolution of the output gradient;
    // the weight gradient pairs the input with the output gradient's columns.
    ConvGeom g =
        transposed_geometry(input, weight, stride, padding, dilation, output_padding, groups);
    at::Tensor gx, gw, gb;
    if (mask[0]) {
      gx = conv_native_forward(grad_output, weight, std::nullopt, stride, padding, dilation, false,
                               at::IntArrayRef{}, groups);
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
        at::Tensor per_image =
            at::bmm(x.narrow(1, gi * cin_g, cin_g), col.narrow(1, gi * kg, kg).transpose(1, 2));
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
      at::Tensor per_image =
          at::bmm(go.narrow(1, gi * og, og), col.narrow(1, gi * kg, kg).transpose(1, 2));
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
                 const char *name) {
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

at::Tensor &im2col_out(const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef d,
                       at::IntArrayRef p, at::IntArrayRef s, at::Tensor &out) {
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

at::Tensor im2col(const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                  at::IntArrayRef s) {
  at::Tensor out = at::empty({0}, self.options());
  return im2col_out(self, k, d, p, s, out);
}

at::Tensor &col2im_out(const at::Tensor &self, c10::SymIntArrayRef osize, at::IntArrayRef k,
                       at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s, at::Tensor &out) {
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
  at::Tensor accf =
      at::zeros({g.n, c, oh, ow},
                col.options().dtype(col.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  if (col.numel()) lower(g, accf, col.to(accf.scalar_type()), true);
  at::Tensor r = accf.to(self.scalar_type());
  if (!batched) r = r.squeeze(0);
  return assign_result(out, r);
}

at::Tensor col2im(const at::Tensor &self, c10::SymIntArrayRef osize, at::IntArrayRef k,
                  at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
  at::Tensor out = at::empty({0}, self.options());
  return col2im_out(self, osize, k, d, p, s, out);
}

// ------------------------------------------------------------- convolution
// The convolutions the native path (above) does not take run as CPU
// convolutions on host views, counted as fallbacks like any other.

namespace {

at::Tensor sync_alias(const at::Tensor &t, HostViews &host) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  check(tnrt_stream_synchronize(current_native_stream(t.device().index())), "stream synchronize");
  return host.view(t, false);
}

}  // namespace

at::Tensor conv_cpu(const at::Tensor &input, const at::Tensor &weight,
                    const std::optional<at::Tensor> &bias, at::IntArrayRef stride,
                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                    at::IntArrayRef output_padding, int64_t groups) {
  note_fallback("aten::convolution_overrideable");
  c10::DeviceGuard guard(input.device());
  HostViews host;
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = sync_alias(*bias, host);
  at::Tensor out = at::convolution(sync_alias(input, host), sync_alias(weight, host), b, stride,
                                   padding, dilation, transposed, output_padding, groups);
  return out.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_cpu_backward(
    const at::Tensor &grad_output, const at::Tensor &input, const at::Tensor &weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  note_fallback("aten::convolution_backward_overrideable");
  c10::DeviceGuard guard(input.device());
  int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::vector<int64_t> bias_sizes{out_channels};
  HostViews host;
  auto r = at::convolution_backward(sync_alias(grad_output, host), sync_alias(input, host),
                                    sync_alias(weight, host), at::OptionalIntArrayRef(bias_sizes),
                                    stride, padding, dilation, transposed, output_padding, groups,
                                    output_mask);
  auto dev = [&](const at::Tensor &t) { return t.defined() ? t.to(input.device()) : t; };
  return {dev(std::get<0>(r)), dev(std::get<1>(r)), dev(std::get<2>(r))};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", conv_native_forward);
  m.impl("convolution_backward_overrideable", conv_native_backward);
  m.impl("im2col", im2col);
  m.impl("im2col.out", im2col_out);
  m.impl("col2im", col2im);
  m.impl("col2im.out", col2im_out);
}

}  // namespace torch_neuronx
