"""Nested tensors on neuron against the same calls on CPU: the strided
layout (ATen's NestedTensorImpl: its device-generic kernels native, views
sharing the device buffer, the rest through the nested CPU fallback), the
jagged layout (a Python subclass over dense tensors) and
nn.TransformerEncoder's inference fast path, which packs a padded batch into
a nested tensor on the device."""

import copy
import warnings

import pytest
import torch
from conftest import assert_same

import torch_neuronx


def parts():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, generator=g), torch.randn(4, 3, generator=g)]


@pytest.fixture
def quiet_fallback():
    mode = torch_neuronx.get_fallback_mode()
    torch_neuronx.set_fallback_mode("silent")
    yield
    torch_neuronx.set_fallback_mode(mode)


def test_strided_nested_round_trip(no_fallback):
    nt = torch.nested.nested_tensor(parts(), device="neuron")
    assert nt.is_nested and nt.device.type == "neuron"
    back = nt.cpu()
    assert back.is_nested and back.device.type == "cpu"
    for got, want in zip(back.unbind(), parts()):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # clone, empty_like and copy_ stay on the device, with the same entry shapes
    c = nt.clone()
    e = torch.empty_like(nt)
    e.copy_(c)
    for t in (c, e):
        assert t.is_nested and t.device == nt.device
        torch.testing.assert_close(t.cpu().to_padded_tensor(0.0), back.to_padded_tensor(0.0))
    again = back.to("neuron")
    assert again.is_nested and again.device.type == "neuron"


def test_strided_nested_ops_match_cpu(no_fallback):
    res = {}
    for dev in ("cpu", "neuron"):
        nt = torch.nested.nested_tensor(parts(), device=dev)
        r = (nt * 2 + 1).softmax(-1)
        r.mul_(3)  # in place: written back into the device buffer
        res[dev] = (r.to_padded_tensor(-1.0), [t for t in r.unbind()])
    assert_same(res["neuron"][0], res["cpu"][0])
    for n, c in zip(res["neuron"][1], res["cpu"][1]):
        assert_same(n, c)


def test_nested_fallback_is_tracked():
    torch_neuronx.clear_op_tracking()
    nt = torch.nested.nested_tensor(parts(), device="neuron")
    mode = torch_neuronx.get_fallback_mode()
    torch_neuronx.set_fallback_mode("error")
    try:
        with pytest.raises(NotImplementedError, match="sum"):
            nt.sum(-1, keepdim=True)
    finally:
        torch_neuronx.set_fallback_mode(mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_neuronx.set_fallback_mode("silent")
        try:
            got = nt.sum(-1, keepdim=True)
        finally:
            torch_neuronx.set_fallback_mode(mode)
    assert "aten::sum.dim_IntList" in torch_neuronx.get_fallback_ops()
    want = torch.nested.nested_tensor(parts()).sum(-1, keepdim=True)
    assert got.is_nested and got.device == nt.device
    assert_same(got.to_padded_tensor(0.0), want.to_padded_tensor(0.0))


def test_jagged_nested_matches_cpu(quiet_fallback):
    res = {}
    for dev in ("cpu", "neuron"):
        nj = torch.nested.nested_tensor(parts(), layout=torch.jagged, device=dev)
        res[dev] = (nj.softmax(-1) * 2).to_padded_tensor(0.0)
    assert_same(res["neuron"], res["cpu"])


@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_transformer_encoder_fast_path_with_padding_mask(grad_mode, quiet_fallback):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(3, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    ctx = torch.no_grad if grad_mode == "no_grad" else torch.inference_mode
    out = {}
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(enc).to(dev)
        with ctx():
            out[dev] = m(x.to(dev), src_key_padding_mask=mask.to(dev))
    # padded positions come back as zeros from the nested tensor, on both
    assert_same(out["neuron"], out["cpu"], atol=2e-5, rtol=2e-5)


# Each writes through a view of a nested tensor, then reads the nested tensor:
# on CPU the write shows, and it must on neuron too (a view that came back as
# a copy would silently drop it).
VIEW_WRITES = {
    "unbind": lambda nt: nt.unbind()[1].mul_(-2),
    "select": lambda nt: nt[0].add_(100),
    "select_neg": lambda nt: nt.select(0, -1).fill_(7),
    "unsqueeze": lambda nt: nt.unsqueeze(1).mul_(3),
    "squeeze": lambda nt: nt.unsqueeze(2).squeeze(2).mul_(-1),
    "view": lambda nt: nt.view(2, -1, 3).mul_(5),
    "values": lambda nt: nt.values().add_(1),
    "narrow": lambda nt: nt.narrow(0, 1, 1).unbind()[0].mul_(0.5),
    "chunk": lambda nt: nt.chunk(3, -1)[0].unbind()[1].zero_(),
    "split": lambda nt: nt.split([1, 2], -1)[1].unbind()[0].neg_(),
    "detach": lambda nt: nt.detach().add_(4),
    "transpose_then_back": lambda nt: nt.transpose(1, 2).transpose(1, 2).mul_(2),
}


@pytest.mark.parametrize("name", sorted(VIEW_WRITES))
def test_nested_views_share_the_buffer(name, no_fallback):
    out = {}
    for dev in ("cpu", "neuron"):
        nt = torch.nested.nested_tensor(parts(), device=dev)
        view = VIEW_WRITES[name](nt)
        out[dev] = (nt.cpu().to_padded_tensor(0.0), view)
    torch.testing.assert_close(out["neuron"][0], out["cpu"][0], rtol=0, atol=0)
    got, want = out["neuron"][1], out["cpu"][1]
    assert got.device.type == "neuron" and got.is_nested == want.is_nested
    if want.is_nested:
        got, want = got.cpu().to_padded_tensor(0.0), want.to_padded_tensor(0.0)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def entries(t):
    """t's entries (or t itself) on the CPU. Not to_padded_tensor: ATen's
    nested all.dim leaves a buffer that its own to_padded_tensor rejects,
    on CPU too."""
    return [e.cpu() for e in t.unbind()] if t.is_nested else t.cpu()


def nested_ops(dev):
    """Nested results of the kernels registered natively, from the same
    inputs on dev (every result moved to the CPU, padded with zeros)."""
    g = torch.Generator().manual_seed(1)
    a = [torch.randn(2, 4, generator=g), torch.randn(3, 4, generator=g)]
    b = [torch.randn(2, 4, generator=g), torch.randn(3, 4, generator=g)]
    w = torch.randn(5, 4, generator=g).to(dev)
    bias = torch.randn(5, generator=g).to(dev)
    x = torch.nested.nested_tensor(a, device=dev)
    y = torch.nested.nested_tensor(b, device=dev)
    xt = torch.nested.nested_tensor([t.T.contiguous() for t in a], device=dev)
    idx = torch.nested.nested_tensor([torch.tensor([0, 3]), torch.tensor([4, 1, 2])], device=dev)
    out = {
        "add": x + y,
        "sub": x - y,
        "mul": x * y,
        "div": x / (y.abs() + 1),
        "scalar": (x * 3 + 1) / 2,
        "eq": x.masked_fill(x.gt(0), 0.0).eq(0),
        "eq_tensor": x.masked_fill(x.gt(0), 1.0).eq(torch.tensor(1.0, device=dev)),
        "gt": x.gt(0),
        "ge": x.ge(0.5),
        "where": torch.where(x.gt(0), torch.tensor(0.25, device=dev), y),
        "masked_fill": x.masked_fill(x.gt(0), -1.0),
        "unary": (x.abs().sqrt() + x.sin() + x.cos() + x.tanh() + x.neg() + x.sgn()),
        "activations": torch.nn.functional.gelu(x) + torch.relu(x) + torch.nn.functional.silu(x),
        "isnan": x.isnan().logical_not(),
        "softmax": x.softmax(-1),
        "bmm": torch.bmm(x, xt),
        "matmul": torch.matmul(x, xt),
        "linear": torch.nn.functional.linear(x, w, bias),
        "embedding": torch.nn.functional.embedding(idx, w),
        "cat": torch.cat([x, y], 0),
        "ones_like": torch.ones_like(x),
        "zero_": x.clone().zero_(),
        "fill_": x.clone().fill_(2.5),
        "all": torch.ops.aten.all.dim(x.gt(-10), -1),
        "same_size": torch.tensor(x.is_same_size(y)),
        "sizes": x._nested_tensor_size(),
    }
    return {k: entries(v) for k, v in out.items()}


def test_nested_native_kernels_match_cpu(no_fallback):
    got, want = nested_ops("neuron"), nested_ops("cpu")
    assert got.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(
            got[k], want[k], rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"{k}: {m}"
        )


def nested_grads(dev):
    g = torch.Generator().manual_seed(2)
    a = [torch.randn(2, 4, generator=g), torch.randn(3, 4, generator=g)]
    w = torch.randn(6, 4, generator=g).to(dev).requires_grad_()
    x = torch.nested.nested_tensor(a, device=dev, requires_grad=True)
    h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w))
    h = torch.relu(h) + torch.nn.functional.silu(h)
    p = h.softmax(-1)
    first = p.unbind()[0]  # select's backward
    loss = p.to_padded_tensor(0.0).square().sum() + first.sum()
    loss.backward()
    return loss.detach().cpu(), w.grad.cpu(), entries(x.grad)


def test_nested_autograd_matches_cpu(no_fallback):
    got, want = nested_grads("neuron"), nested_grads("cpu")
    for n, c in zip(got, want):
        torch.testing.assert_close(n, c, rtol=1e-5, atol=1e-6)


def test_nested_dropout_keeps_or_zeroes_entries(no_fallback):
    torch.manual_seed(0)
    x = torch.nested.nested_tensor(parts(), device="neuron")
    y = torch.nn.functional.dropout(x, p=0.5, training=True)
    for got, src in zip(y.unbind(), parts()):
        got = got.cpu()
        kept = got != 0
        torch.testing.assert_close(got[kept], src[kept] * 2)
        assert 0 < kept.sum() < got.numel()


def test_as_nested_tensor_views_the_dense_tensor(no_fallback):
    """torch.nested.as_nested_tensor of a tensor is a view of it (as on CPU),
    and gradients flow back to it."""
    out = {}
    for dev in ("cpu", "neuron"):
        d = torch.arange(24.0).reshape(2, 3, 4).to(dev)
        nt = torch.nested.as_nested_tensor(d)
        assert nt.is_nested and nt.device == d.device
        nt.unbind()[1].mul_(-1)
        x = torch.linspace(-1, 1, 24).reshape(2, 3, 4).to(dev).requires_grad_()
        (torch.nested.as_nested_tensor(x).to_padded_tensor(0.0).square() * 3).sum().backward()
        out[dev] = (d.cpu(), x.grad.cpu())
    for n, c in zip(out["neuron"], out["cpu"]):
        torch.testing.assert_close(n, c, rtol=0, atol=0)


def test_nested_save_load_round_trip(tmp_path, no_fallback):
    nt = torch.nested.nested_tensor(parts(), device="neuron")
    torch.save(nt, tmp_path / "nt.pt")
    back = torch.load(tmp_path / "nt.pt")
    assert back.is_nested and back.device == nt.device
    for got, want in zip(back.unbind(), parts()):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
