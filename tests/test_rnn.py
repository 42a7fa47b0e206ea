"""Recurrent layers on neuron against the same layers on CPU.

ATen runs LSTM and GRU cells on PrivateUse1 devices through the fused cell
ops (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward ops),
which PyTorch implements for CUDA only; CPU runs the unfused cells, so it is
an independent oracle for the values and gradients here."""

import copy

import pytest
import torch
from conftest import assert_same
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
    torch.float16: dict(atol=3e-3, rtol=3e-3),
}


def run_both(module, *inputs, dtype=torch.float32):
    """Forward and backward of module on CPU and on neuron from the same
    weights and inputs; returns the outputs and the gradients of the inputs
    and of every parameter, (cpu, neuron) pairs."""
    torch.manual_seed(0)
    results = []
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(module).to(dev, dtype)
        xs = [x.to(dev, dtype).detach().requires_grad_() for x in inputs]
        out = m(*xs)
        flat = [t for t in torch.utils._pytree.tree_leaves(out) if torch.is_tensor(t)]
        # a loss that weighs every output element differently (the weights
        # made on CPU, so both sides use the same ones)
        loss = sum(
            (
                t.double()
                * torch.linspace(-1, 1, t.numel(), dtype=torch.float64).to(dev).view(t.shape)
            ).sum()
            for t in flat
        )
        loss.backward()
        grads = [x.grad for x in xs] + [p.grad for p in m.parameters()]
        results.append((flat, grads))
    return results


def check(module, *inputs, dtype=torch.float32):
    (cpu_out, cpu_g), (n_out, n_g) = run_both(module, *inputs, dtype=dtype)
    assert len(cpu_out) == len(n_out)
    for n, c in zip(n_out, cpu_out):
        assert_same(n, c, **TOL[dtype])
    for n, c in zip(n_g, cpu_g):
        assert (n is None) == (c is None)
        if c is not None:
            assert_same(n, c, **TOL[dtype])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize(
    "kw",
    [
        dict(num_layers=1),
        dict(num_layers=2, batch_first=True),
        dict(num_layers=2, bidirectional=True),
        dict(num_layers=1, bias=False),
    ],
    ids=["1layer", "2layers-batch-first", "bidirectional", "no-bias"],
)
def test_rnn_layers_match_cpu(kind, kw, no_fallback):
    torch.manual_seed(1)
    layer = getattr(torch.nn, kind)(6, 9, **kw)
    x = torch.randn(5, 3, 6)  # (seq, batch, feature) or (batch=5, seq=3) with batch_first
    check(layer, x)


def test_lstm_with_projection_and_initial_state(no_fallback):
    torch.manual_seed(2)
    layer = torch.nn.LSTM(4, 8, num_layers=2, proj_size=3)
    x, h0, c0 = torch.randn(6, 2, 4), torch.randn(2, 2, 3), torch.randn(2, 2, 8)
    check(_WithState(layer), x, h0, c0)


class _WithState(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        return self.rnn(x, state if len(state) > 1 else state[0])


def test_gru_with_initial_state(no_fallback):
    torch.manual_seed(3)
    check(_WithState(torch.nn.GRU(4, 5, num_layers=2)), torch.randn(7, 3, 4), torch.randn(2, 3, 5))


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_cells_match_cpu(kind, dtype, no_fallback):
    torch.manual_seed(4)
    cell = getattr(torch.nn, kind)(7, 10)
    x = torch.randn(4, 7)
    check(cell, x, dtype=dtype)


def test_packed_sequences(no_fallback):
    torch.manual_seed(5)
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    x = torch.randn(3, 5, 3)
    lengths = torch.tensor([5, 3, 2])
    outs = []
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(lstm).to(dev)
        xi = x.to(dev).detach().requires_grad_()
        packed = pack_padded_sequence(xi, lengths, batch_first=True)
        out, (h, c) = m(packed)
        padded, _ = pad_packed_sequence(out, batch_first=True)
        (padded.sum() + h.pow(2).sum() + c.sum()).backward()
        outs.append([padded, h, c, xi.grad] + [p.grad for p in m.parameters()])
    for n, c in zip(outs[1], outs[0]):
        assert_same(n, c, **TOL[torch.float32])


def test_lstm_cell_double_backward(no_fallback):
    """Gradients of gradients (create_graph): autograd then takes the
    differentiable form of the fused cell's backward."""
    torch.manual_seed(6)
    cell = torch.nn.LSTMCell(3, 4).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    res = []
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(cell).to(dev)
        xi = x.to(dev).detach().requires_grad_()
        h, c = m(xi)
        (g,) = torch.autograd.grad((h * h).sum() + c.sum(), xi, create_graph=True)
        (gg,) = torch.autograd.grad(g.pow(2).sum(), xi)
        res.append((g, gg))
    for n, c in zip(res[1], res[0]):
        assert_same(n, c, **TOL[torch.float64])


def test_only_one_gradient_given(no_fallback):
    """The LSTM cell's backward with only grad_hy or only grad_cy."""
    torch.manual_seed(7)
    x = torch.randn(3, 5)
    for which in (0, 1):
        res = []
        for dev in ("cpu", "neuron"):
            torch.manual_seed(8)
            m = torch.nn.LSTMCell(5, 6).to(dev)
            xi = x.to(dev).detach().requires_grad_()
            out = m(xi)[which]
            out.sum().backward()
            res.append([xi.grad] + [p.grad for p in m.parameters()])
        for n, c in zip(res[1], res[0]):
            assert_same(n, c, **TOL[torch.float32])


def test_fused_cell_bad_input_raises_as_cuda_does():
    g = torch.randn(2, 8, device="neuron")
    cx = torch.randn(2, 2, device="neuron")
    with pytest.raises(RuntimeError, match="same size"):
        torch.ops.aten._thnn_fused_lstm_cell(g, torch.randn(2, 4, device="neuron"), cx)
    with pytest.raises(RuntimeError, match="previous state"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(3, 2, device="neuron"))
    with pytest.raises(RuntimeError, match="multiple of 3"):
        torch.ops.aten._thnn_fused_gru_cell(g, g, cx)
    with pytest.raises(RuntimeError, match="together"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, cx, torch.randn(8, device="neuron"))
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ops.aten._thnn_fused_lstm_cell(g.long(), g.long(), cx.long())


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_rnn_under_autocast_matches_cpu_autocast(kind, no_fallback):
    """bf16 autocast: the fused cells are on the lower-precision list every
    accelerator backend shares (CUDA's too), so the layer's output is bf16;
    CPU's own list leaves GRU's cell in fp32. Values within bf16 precision
    of CPU's autocast run."""
    torch.manual_seed(9)
    layer = getattr(torch.nn, kind)(16, 8, num_layers=2)
    x = torch.randn(5, 3, 16)
    out = {}
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(layer).to(dev)
        # CPU's oneDNN LSTM has no bf16 primitive on hosts without AVX-512
        # ("could not create a primitive descriptor"): the CPU reference
        # takes ATen's own kernels, under the same autocast lists
        with torch.backends.mkldnn.flags(enabled=False), torch.autocast(dev, dtype=torch.bfloat16):
            out[dev] = m(x.to(dev))[0]
    assert out["neuron"].dtype == torch.bfloat16
    assert_same(out["neuron"], out["cpu"].to(torch.bfloat16), atol=3e-2, rtol=3e-2)


def test_fused_cell_backward_rejects_mixed_dtypes():
    """The backward ops read every tensor as the workspace's dtype: a
    gradient of another dtype raises instead of being misread."""
    ws = torch.rand(2, 8, device="neuron")
    cx, cy = torch.randn(2, 2, device="neuron"), torch.randn(2, 2, device="neuron")
    with pytest.raises(RuntimeError, match="dtype"):
        torch.ops.aten._thnn_fused_lstm_cell_backward_impl(cx.double(), None, cx, cy, ws, True)
    with pytest.raises(RuntimeError, match="dtype"):
        torch.ops.aten._thnn_fused_gru_cell_backward(
            torch.randn(2, 2, device="neuron", dtype=torch.float64),
            torch.rand(2, 10, device="neuron"),
            True,
        )
