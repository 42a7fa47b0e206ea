"""scaled_dot_product_attention on neuron: the flash-style fused kernel
(forward and backward) against PyTorch CPU, and the cases that take the math
path instead."""

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import torch_neuronx

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"


def run(dev, q, k, v, dtype=torch.float32, **kw):
    q, k, v = (t.detach().to(dev, dtype).requires_grad_() for t in (q, k, v))
    kw = {a: (b.to(dev) if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    o = F.scaled_dot_product_attention(q, k, v, **kw)
    w = torch.linspace(-1, 1, o.numel()).view(o.shape).to(dev)
    (o.float() * w).sum().backward()
    return [t.detach().cpu().float() for t in (o, q.grad, k.grad, v.grad)]


def ops_run(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.key for e in p.key_averages()}


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "bool mask": dict(
        attn_mask=torch.rand(70, 130, generator=torch.Generator().manual_seed(3)) > 0.3
    ),
    "float mask": dict(
        attn_mask=torch.randn(2, 1, 70, 130, generator=torch.Generator().manual_seed(4))
    ),
    "scale": dict(scale=0.3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_attention_matches_cpu(case):
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 3, 70, 32, generator=g),
        torch.randn(2, 3, 130, 32, generator=g),
        torch.randn(2, 3, 130, 24, generator=g),
    )
    torch_neuronx.clear_op_tracking()
    got = {}
    names = ops_run(lambda: got.setdefault("n", run("neuron", q, k, v, **CASES[case])))
    assert FUSED in names and FUSED + "_backward" in names
    for a, b in zip(got["n"], run("cpu", q, k, v, **CASES[case])):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
    assert torch_neuronx.get_fallback_ops() == {}


def test_grouped_query_attention_and_decode():
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(1, 8, 33, 16, generator=g),
        torch.randn(1, 2, 33, 16, generator=g),
        torch.randn(1, 2, 33, 16, generator=g),
    )
    for a, b in zip(
        run("neuron", q, k, v, is_causal=True, enable_gqa=True),
        run("cpu", q, k, v, is_causal=True, enable_gqa=True),
    ):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
    q1 = q[:, :, -1:]  # decoding: one query against the whole cache
    for a, b in zip(
        run("neuron", q1, k, v, enable_gqa=True), run("cpu", q1, k, v, enable_gqa=True)
    ):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_half_precision_and_fully_masked_rows():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g) for _ in range(3))
    for a, b in zip(
        run("neuron", q, k, v, dtype=torch.bfloat16, is_causal=True),
        run("cpu", q, k, v, dtype=torch.bfloat16, is_causal=True),
    ):
        torch.testing.assert_close(a, b, atol=3e-2, rtol=3e-2)
    mask = torch.ones(40, 40, dtype=torch.bool)
    mask[5] = False  # a query that sees no key: zeros, as PyTorch's math path gives
    for a, b in zip(run("neuron", q, k, v, attn_mask=mask), run("cpu", q, k, v, attn_mask=mask)):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_dropout_and_mask_with_grad_take_the_math_path():
    q, k, v = (torch.randn(1, 2, 8, 4, device="neuron") for _ in range(3))
    names = ops_run(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    assert FUSED not in names
    bias = torch.zeros(8, 8, device="neuron", requires_grad=True)
    qr = q.clone().requires_grad_()
    names = ops_run(
        lambda: F.scaled_dot_product_attention(qr, k, v, attn_mask=bias).sum().backward()
    )
    assert FUSED not in names
    assert bias.grad is not None and bias.grad.shape == (8, 8)


def test_bad_shapes_raise_like_cpu():
    q = torch.randn(1, 3, 8, 4, device="neuron")
    k = torch.randn(1, 2, 8, 4, device="neuron")
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k)  # heads differ without enable_gqa
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, q[..., :3], q)  # head dims differ
