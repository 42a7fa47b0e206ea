// The fused LSTM and GRU cells. ATen's LSTMCell and GRUCell (RNN.cpp) call
// _thnn_fused_lstm_cell / _thnn_fused_gru_cell for CUDA, XPU and PrivateUse1
// tensors, and their autograd formulas call the _backward ops below; PyTorch
// has no CPU kernel for any of them, so without these nn.LSTM, nn.GRU,
// nn.LSTMCell and nn.GRUCell failed on neuron. fp32, bf16 and fp16 run the
// kernel library's fused cell (tnk_rnn_cell: one launch per cell and step);
// fp64 is composed of the device's element-wise kernels. Both compute half
// types in fp32 and round once at the end, as CUDA's fused kernels do.
//
// Layouts, shared with the autograd formulas: gates are [batch, k * hidden]
// blocks (LSTM k = 4: input, forget, cell, output; GRU k = 3: reset, update,
// new). The LSTM workspace holds the four activated gates; the GRU workspace
// [batch, 5 * hidden] holds reset, update, new, hx and the hidden new-gate
// input with its bias.
#include "neuron.h"

#include <ATen/Operators.h>
#include <torch/library.h>

namespace torch_neuronx {

namespace {

at::ScalarType compute_type(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t;
}

// CUDA's checks for the forward ops (RuntimeError, as checkDim and friends).
void check_cell(const char *op, const at::Tensor &ig, const at::Tensor &hg,
                const std::optional<at::Tensor> &ib, const std::optional<at::Tensor> &hb,
                const at::Tensor &prev, int64_t k) {
  TORCH_CHECK(at::isFloatingType(ig.scalar_type()), op, ": expected floating point gates, got ",
              ig.scalar_type());
  TORCH_CHECK(ig.dim() == 2, op, ": expected input_gates to be 2-D, got ", ig.dim(), "-D");
  TORCH_CHECK(hg.sizes() == ig.sizes(), op, ": input_gates ", ig.sizes(), " and hidden_gates ",
              hg.sizes(), " must have the same size");
  TORCH_CHECK(ig.size(1) % k == 0, op, ": the gates' second dimension (", ig.size(1),
              ") must be a multiple of ", k);
  bool bi = ib.has_value() && ib->defined(), bh = hb.has_value() && hb->defined();
  TORCH_CHECK(bi == bh, op, ": input_bias and hidden_bias must be given together");
  if (bi) {
    TORCH_CHECK(ib->dim() == 1 && ib->numel() == ig.size(1), op,
                ": expected input_bias to be 1-D with ", ig.size(1), " elements, got ",
                ib->sizes());
    TORCH_CHECK(hb->sizes() == ib->sizes(), op, ": input_bias ", ib->sizes(), " and hidden_bias ",
                hb->sizes(), " must have the same size");
  }
  TORCH_CHECK(prev.dim() == 2 && prev.numel() == ig.size(0) * ig.size(1) / k, op,
              ": expected the previous state to be 2-D with ", ig.size(0) * ig.size(1) / k,
              " elements, got ", prev.sizes());
  std::vector<const at::Tensor *> others{&hg, &prev};
  if (bi) others.insert(others.end(), {&*ib, &*hb});
  for (const at::Tensor *t : others)
    TORCH_CHECK(t->device() == ig.device() && t->scalar_type() == ig.scalar_type(), op,
                ": every tensor must be on ", ig.device(), " with dtype ", ig.scalar_type(),
                ", got one on ", t->device(), " with ", t->scalar_type());
}

// input_gates + hidden_gates (+ both biases), in the compute type.
at::Tensor sum_gates(const at::Tensor &ig, const at::Tensor &hg,
                     const std::optional<at::Tensor> &ib, const std::optional<at::Tensor> &hb,
                     at::ScalarType ct) {
  at::Tensor g = ig.to(ct) + hg.to(ct);
  if (ib.has_value() && ib->defined()) g = g + (ib->to(ct) + hb->to(ct));
  return g;
}

bool fused_kernel(const at::Tensor &t) {
  return kernel_supported(TNK_K_RNN_CELL, kernel_query(-1, tnk_of(t), -1, -1)) != 0;
}

const void *cptr(const at::Tensor &t) { return t.defined() ? t.const_data_ptr() : nullptr; }

at::Tensor contig(const std::optional<at::Tensor> &t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

// The kernel's arguments for gates ig, hg [b, k * h] and state prev [b, h].
tnk_rnn_cell_args_t cell_args(const at::Tensor &prev, int64_t b, int gru, int backward) {
  tnk_rnn_cell_args_t a{};
  a.b = b;
  a.h = prev.numel() / std::max<int64_t>(b, 1);
  a.dtype = tnk_of(prev);
  a.gru = gru;
  a.backward = backward;
  return a;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor &ig, const at::Tensor &hg, const at::Tensor &cx,
    const std::optional<at::Tensor> &ib, const std::optional<at::Tensor> &hb) {
  check_cell("_thnn_fused_lstm_cell", ig, hg, ib, hb, cx, 4);
  if (fused_kernel(ig)) {
    at::Tensor igc = ig.contiguous(), hgc = hg.contiguous(), cxc = cx.contiguous();
    at::Tensor b1 = contig(ib), b2 = contig(hb);
    at::Tensor hy = at::empty(cx.sizes(), cx.options()), cy = at::empty(cx.sizes(), cx.options());
    at::Tensor ws = at::empty(ig.sizes(), ig.options());
    tnk_rnn_cell_args_t a = cell_args(cxc, ig.size(0), 0, 0);
    a.ig = cptr(igc), a.hg = cptr(hgc), a.b1 = cptr(b1), a.b2 = cptr(b2), a.prev = cptr(cxc);
    a.out0 = hy.data_ptr(), a.out1 = cy.data_ptr(), a.ws = ws.data_ptr();
    launch_kernel<TNK_K_RNN_CELL>(ig.device().index(), a, "aten::_thnn_fused_lstm_cell");
    return {hy, cy, ws};
  }
  at::ScalarType t = ig.scalar_type(), ct = compute_type(t);
  auto g = sum_gates(ig, hg, ib, hb, ct).chunk(4, 1);
  at::Tensor i = g[0].sigmoid(), f = g[1].sigmoid(), c = g[2].tanh(), o = g[3].sigmoid();
  at::Tensor cy = f * cx.reshape(i.sizes()).to(ct) + i * c;
  at::Tensor hy = o * cy.tanh();
  return {hy.to(t).reshape(cx.sizes()), cy.to(t).reshape(cx.sizes()),
          at::cat({i, f, c, o}, 1).to(t)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor> &grad_hy, const std::optional<at::Tensor> &grad_cy,
    const at::Tensor &cx, const at::Tensor &cy, const at::Tensor &ws, bool has_bias) {
  bool gh = grad_hy.has_value() && grad_hy->defined();
  bool gc = grad_cy.has_value() && grad_cy->defined();
  if (!gh && !gc) return {};
  TORCH_CHECK(ws.dim() == 2 && ws.size(1) % 4 == 0 && cy.numel() * 4 == ws.numel() &&
                  cx.numel() == cy.numel(),
              "_thnn_fused_lstm_cell_backward: workspace ", ws.sizes(), ", cx ", cx.sizes(),
              " and cy ", cy.sizes(), " do not match");
  std::vector<const at::Tensor *> all{&cx, &cy};
  if (gh) all.push_back(&*grad_hy);
  if (gc) all.push_back(&*grad_cy);
  for (const at::Tensor *x : all)
    TORCH_CHECK(x->device() == ws.device() && x->scalar_type() == ws.scalar_type(),
                "_thnn_fused_lstm_cell_backward: every tensor must be on ", ws.device(),
                " with dtype ", ws.scalar_type());
  if (fused_kernel(ws)) {
    at::Tensor g1 = gh ? grad_hy->contiguous() : at::Tensor();
    at::Tensor g2 = gc ? grad_cy->contiguous() : at::Tensor();
    at::Tensor cxc = cx.contiguous(), cyc = cy.contiguous(), wsc = ws.contiguous();
    TORCH_CHECK((!gh || g1.numel() == cx.numel()) && (!gc || g2.numel() == cx.numel()),
                "_thnn_fused_lstm_cell_backward: the gradients must match cx ", cx.sizes());
    at::Tensor grad_gates = at::empty(ws.sizes(), ws.options());
    at::Tensor grad_cx = at::empty(cx.sizes(), cx.options());
    tnk_rnn_cell_args_t a = cell_args(cxc, ws.size(0), 0, 1);
    a.ghy = cptr(g1), a.gcy = cptr(g2), a.prev = cptr(cxc), a.cy = cptr(cyc),
    a.ws = const_cast<void *>(cptr(wsc));  // read only
    a.gx0 = grad_gates.data_ptr(), a.gprev = grad_cx.data_ptr();
    launch_kernel<TNK_K_RNN_CELL>(ws.device().index(), a, "aten::_thnn_fused_lstm_cell_backward");
    return {grad_gates, grad_cx, has_bias ? grad_gates.sum(0) : at::Tensor()};
  }
  at::ScalarType t = ws.scalar_type(), ct = compute_type(t);
  auto w = ws.to(ct).chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &c = w[2], &o = w[3];
  auto shape = i.sizes();
  at::Tensor tc = cy.reshape(shape).to(ct).tanh();
  at::Tensor ghy = gh ? grad_hy->reshape(shape).to(ct) : at::zeros_like(tc);
  // the loss's gradient with respect to cy: through hy, and directly
  at::Tensor gcy = ghy * o * (1 - tc * tc);
  if (gc) gcy = gcy + grad_cy->reshape(shape).to(ct);
  at::Tensor gi = gcy * c * i * (1 - i);
  at::Tensor gf = gcy * cx.reshape(shape).to(ct) * f * (1 - f);
  at::Tensor gg = gcy * i * (1 - c * c);
  at::Tensor go = ghy * tc * o * (1 - o);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1).to(t);
  at::Tensor grad_cx = (gcy * f).to(t).reshape(cx.sizes());
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor &ig, const at::Tensor &hg,
                                                  const at::Tensor &hx,
                                                  const std::optional<at::Tensor> &ib,
                                                  const std::optional<at::Tensor> &hb) {
  check_cell("_thnn_fused_gru_cell", ig, hg, ib, hb, hx, 3);
  if (fused_kernel(ig)) {
    at::Tensor igc = ig.contiguous(), hgc = hg.contiguous(), hxc = hx.contiguous();
    at::Tensor b1 = contig(ib), b2 = contig(hb);
    at::Tensor hy = at::empty(hx.sizes(), hx.options());
    at::Tensor ws = at::empty({ig.size(0), ig.size(1) / 3 * 5}, ig.options());
    tnk_rnn_cell_args_t a = cell_args(hxc, ig.size(0), 1, 0);
    a.ig = cptr(igc), a.hg = cptr(hgc), a.b1 = cptr(b1), a.b2 = cptr(b2), a.prev = cptr(hxc);
    a.out0 = hy.data_ptr(), a.ws = ws.data_ptr();
    launch_kernel<TNK_K_RNN_CELL>(ig.device().index(), a, "aten::_thnn_fused_gru_cell");
    return {hy, ws};
  }
  at::ScalarType t = ig.scalar_type(), ct = compute_type(t);
  bool bias = ib.has_value() && ib->defined();
  auto gi = ig.to(ct).chunk(3, 1), gh = hg.to(ct).chunk(3, 1);
  std::vector<at::Tensor> bi, bh;
  if (bias) bi = ib->to(ct).chunk(3), bh = hb->to(ct).chunk(3);
  auto plus = [&](at::Tensor x, const std::vector<at::Tensor> &b, int j) {
    return bias ? x + b[j] : x;
  };
  at::Tensor r = plus(plus(gi[0] + gh[0], bi, 0), bh, 0).sigmoid();
  at::Tensor z = plus(plus(gi[1] + gh[1], bi, 1), bh, 1).sigmoid();
  at::Tensor hn = plus(gh[2], bh, 2);  // the hidden new-gate input, with its bias
  at::Tensor n = (plus(gi[2], bi, 2) + r * hn).tanh();
  at::Tensor h = hx.reshape(r.sizes()).to(ct);
  at::Tensor hy = n + z * (h - n);
  return {hy.to(t).reshape(hx.sizes()), at::cat({r, z, n, h, hn}, 1).to(t)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor &grad_hy, const at::Tensor &ws, bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2 && ws.dim() == 2 && ws.size(0) == grad_hy.size(0) &&
                  ws.size(1) == 5 * grad_hy.size(1),
              "_thnn_fused_gru_cell_backward: expected a workspace of [", grad_hy.size(0), ", ",
              5 * grad_hy.size(1), "] for grad_hy ", grad_hy.sizes(), ", got ", ws.sizes());
  TORCH_CHECK(grad_hy.device() == ws.device() && grad_hy.scalar_type() == ws.scalar_type(),
              "_thnn_fused_gru_cell_backward: grad_hy and the workspace must be on one device "
              "with one dtype");
  if (fused_kernel(ws)) {
    at::Tensor g = grad_hy.contiguous(), wsc = ws.contiguous();
    int64_t b = ws.size(0), h3 = ws.size(1) / 5 * 3;
    at::Tensor gi = at::empty({b, h3}, ws.options()), gh = at::empty({b, h3}, ws.options());
    at::Tensor ghx = at::empty(grad_hy.sizes(), grad_hy.options());
    tnk_rnn_cell_args_t a = cell_args(g, b, 1, 1);
    a.ghy = cptr(g), a.ws = const_cast<void *>(cptr(wsc));  // read only
    a.gx0 = gi.data_ptr(), a.gx1 = gh.data_ptr(), a.gprev = ghx.data_ptr();
    launch_kernel<TNK_K_RNN_CELL>(ws.device().index(), a, "aten::_thnn_fused_gru_cell_backward");
    at::Tensor bi, bh;
    if (has_bias) bi = gi.sum(0), bh = gh.sum(0);
    return {gi, gh, ghx, bi, bh};
  }
  at::ScalarType t = ws.scalar_type(), ct = compute_type(t);
  auto w = ws.to(ct).chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &h = w[3], &hn = w[4];
  at::Tensor go = grad_hy.to(ct);
  at::Tensor gz = go * (h - n) * z * (1 - z);
  at::Tensor gn = go * (1 - z) * (1 - n * n);  // with respect to the new gate's tanh input
  at::Tensor gr = gn * hn * r * (1 - r);
  at::Tensor grad_input = at::cat({gr, gz, gn}, 1).to(t);
  at::Tensor grad_hidden = at::cat({gr, gz, gn * r}, 1).to(t);
  at::Tensor grad_hx = (go * z).to(t);
  at::Tensor bi, bh;
  if (has_bias) bi = grad_input.sum(0), bh = grad_hidden.sum(0);
  return {grad_input, grad_hidden, grad_hx, bi, bh};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", fused_lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", fused_lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", fused_gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", fused_gru_cell_backward);
}

}  // namespace torch_neuronx
