"""Nested tensors on neuron against the same calls on CPU: the strided
layout (ATen's NestedTensorImpl: copies, empty_like, clone and alias native,
every other op through the nested CPU fallback), the jagged layout (a
Python subclass over dense tensors) and nn.TransformerEncoder's inference
fast path, which packs a padded batch into a nested tensor on the device."""

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


def test_strided_nested_ops_match_cpu(quiet_fallback):
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
        with pytest.raises(NotImplementedError, match="to_padded_tensor"):
            nt.to_padded_tensor(0.0)
    finally:
        torch_neuronx.set_fallback_mode(mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_neuronx.set_fallback_mode("silent")
        try:
            nt.to_padded_tensor(0.0)
        finally:
            torch_neuronx.set_fallback_mode(mode)
    assert "aten::to_padded_tensor" in torch_neuronx.get_fallback_ops()


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
