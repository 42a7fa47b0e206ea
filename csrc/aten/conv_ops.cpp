// Native 1-D and 2-D convolution (forward and backward) lowered to im2col /
// col2im (kernels/conv.c) and the batched GEMM; grouped convolutions run one
// GEMM per group. Transposed convolutions and other layouts still run on the
// CPU through the counted fallback (fallback.cpp).
#include "neuron.h"

#include <torch/library.h>

namespace torch_neuronx {
namespace {

void im2col_task(void* p) { tnk_im2col(static_cast<tnk_im2col_args_t*>(p)); }

struct ConvGeom {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, groups;
  bool one_d;
};

bool conv_native(const at::Tensor& input, const at::Tensor& weight, bool transposed,
                 int64_t groups) {
  auto t = input.scalar_type();
  return !transposed && (input.dim() == 3 || input.dim() == 4) && weight.dim() == input.dim() &&
         (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) &&
         weight.scalar_type() == t && weight.device() == input.device() && groups >= 1;
}

ConvGeom geometry(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                  at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  ConvGeom g{};
  g.one_d = input.dim() == 3;
  g.n = input.size(0);
  g.c = input.size(1);
  g.h = g.one_d ? 1 : input.size(2);
  g.w = input.size(-1);
  g.o = weight.size(0);
  g.kh = g.one_d ? 1 : weight.size(2);
  g.kw = weight.size(-1);
  auto at2 = [&](at::IntArrayRef v, int i, int64_t dflt) {
    if (g.one_d) return i == 0 ? dflt : (v.empty() ? dflt : v[0]);
    return v.size() > static_cast<size_t>(i) ? v[i] : (v.empty() ? dflt : v[0]);
  };
  g.sh = at2(stride, 0, 1);
  g.sw = at2(stride, 1, 1);
  g.ph = g.one_d ? 0 : at2(padding, 0, 0);
  g.pw = at2(padding, 1, 0);
  g.dh = g.one_d ? 1 : at2(dilation, 0, 1);
  g.dw = at2(dilation, 1, 1);
  g.groups = groups;
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  return g;
}

// columns [n, c*kh*kw, oh*ow] of x, or (col2im) x += columns.
void lower(const ConvGeom& g, const at::Tensor& im, const at::Tensor& col, bool col2im) {
  tnk_im2col_args_t a{};
  a.im = const_cast<void*>(im.const_data_ptr());
  a.col = const_cast<void*>(col.const_data_ptr());
  a.batch = g.n;
  a.c = g.c;
  a.h = g.h;
  a.w = g.w;
  a.kh = g.kh;
  a.kw = g.kw;
  a.sh = g.sh;
  a.sw = g.sw;
  a.ph = g.ph;
  a.pw = g.pw;
  a.dh = g.dh;
  a.dw = g.dw;
  a.oh = g.oh;
  a.ow = g.ow;
  bool ok;
  a.dtype = to_tnk(im.scalar_type(), &ok);
  a.col2im = col2im;
  launch(im.device().index(), im2col_task, &a, sizeof a, col2im ? "aten::col2im" : "aten::im2col");
}

at::Tensor columns(const ConvGeom& g, const at::Tensor& x) {
  at::Tensor col = at::empty({g.n, g.c * g.kh * g.kw, g.oh * g.ow}, x.options());
  lower(g, x, col, false);
  return col;
}

}  // namespace

at::Tensor conv_native_forward(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                               at::IntArrayRef output_padding, int64_t groups) {
  if (!conv_native(input, weight, transposed, groups))
    return conv_cpu(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                    groups);
  ConvGeom g = geometry(input, weight, stride, padding, dilation, groups);
  TORCH_CHECK(g.oh > 0 && g.ow > 0, "Calculated output size is too small for the input of "
              "shape ", input.sizes(), " and kernel of shape ", weight.sizes());
  at::Tensor x = input.contiguous();
  at::Tensor col = columns(g, x);
  int64_t og = g.o / groups, kg = g.c / groups * g.kh * g.kw, L = g.oh * g.ow;
  at::Tensor w = weight.contiguous().view({g.o, kg});
  at::Tensor out = at::empty({g.n, g.o, L}, input.options());
  for (int64_t gi = 0; gi < groups; gi++) {
    at::Tensor o = out.narrow(1, gi * og, og);
    at::bmm_out(o, w.narrow(0, gi * og, og).unsqueeze(0).expand({g.n, og, kg}),
                col.narrow(1, gi * kg, kg));
  }
  if (bias.has_value() && bias->defined()) out.add_(bias->view({1, g.o, 1}));
  return g.one_d ? out.view({g.n, g.o, g.ow}) : out.view({g.n, g.o, g.oh, g.ow});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_native_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> mask) {
  if (!conv_native(input, weight, transposed, groups) ||
      grad_output.scalar_type() != input.scalar_type())
    return conv_cpu_backward(grad_output, input, weight, stride, padding, dilation, transposed,
                             output_padding, groups, mask);
  ConvGeom g = geometry(input, weight, stride, padding, dilation, groups);
  int64_t og = g.o / groups, kg = g.c / groups * g.kh * g.kw, L = g.oh * g.ow;
  at::Tensor go = grad_output.contiguous().view({g.n, g.o, L});
  at::Tensor w = weight.contiguous().view({g.o, kg});
  at::Tensor gx, gw, gb;
  if (mask[0]) {
    // Columns of the input gradient in fp32 (col2im sums many terms), then
    // back to the input's dtype.
    at::Tensor gof = go.to(at::kFloat), wf = w.to(at::kFloat);
    at::Tensor gcol = at::empty({g.n, g.c * g.kh * g.kw, L}, go.options().dtype(at::kFloat));
    for (int64_t gi = 0; gi < groups; gi++) {
      at::Tensor c = gcol.narrow(1, gi * kg, kg);
      at::bmm_out(c, wf.narrow(0, gi * og, og).t().unsqueeze(0).expand({g.n, kg, og}),
                  gof.narrow(1, gi * og, og));
    }
    at::Tensor gxf = at::zeros({g.n, g.c, g.h, g.w}, go.options().dtype(at::kFloat));
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", conv_native_forward);
  m.impl("convolution_backward_overrideable", conv_native_backward);
}

}  // namespace torch_neuronx
