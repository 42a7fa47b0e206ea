"""Native unary math and activation backward against PyTorch CPU."""
import pytest
import torch

import torch_neuronx
from conftest import assert_same

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
OPS = {
    "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "expm1": torch.expm1,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "neg": torch.neg, "abs": torch.abs, "sin": torch.sin, "cos": torch.cos, "erf": torch.erf,
    "reciprocal": torch.reciprocal, "silu": torch.nn.functional.silu,
    "relu": torch.relu, "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "pow2": lambda t: t.pow(2), "pow_half": lambda t: t ** 0.5,
    "ceil": torch.ceil, "floor": torch.floor, "trunc": torch.trunc, "round": torch.round,
}


def tol(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return {"rtol": 1.6e-2, "atol": 2e-2, "equal_nan": True}
    return {"rtol": 2e-6 if dtype == torch.float32 else 1e-12, "atol": 1e-6, "equal_nan": True}


@pytest.fixture(autouse=True)
def _track():
    torch_neuronx.clear_op_tracking()
    yield


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_matches_cpu(name, dtype):
    x = (torch.randn(5, 7, generator=torch.Generator().manual_seed(0)) * 2).to(dtype)
    x[0, 0] = float("nan")
    f = OPS[name]
    assert_same(f(x.neuron()), f(x), **tol(dtype))
    assert_same(f(x.neuron().t()), f(x.t()), **tol(dtype))  # strided input
    assert torch_neuronx.get_fallback_ops() == {}


def test_inplace_out_and_integer_inputs():
    x = torch.rand(4, 6) + 0.1
    n = x.neuron()
    ptr = n.data_ptr()
    n.sqrt_().exp_().neg_()
    assert n.data_ptr() == ptr
    assert_same(n, x.sqrt().exp().neg(), rtol=1e-6, atol=1e-6)
    out = torch.empty(0, device="neuron")
    torch.tanh(x.neuron(), out=out)
    assert_same(out, torch.tanh(x))
    v = x.neuron()
    v[:, 1:].sigmoid_()
    ref = x.clone()
    ref[:, 1:].sigmoid_()
    assert_same(v, ref)
    i = torch.tensor([-3, 0, 2])
    assert_same(i.neuron().abs(), i.abs())  # integer: CPU fallback, exact
    assert_same(torch.exp(i.neuron()), torch.exp(i))  # int -> float promotion
    assert torch_neuronx.get_fallback_ops()


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "relu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_activation_backward_matches_cpu(act, dtype):
    f = OPS[act]
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(1)).to(dtype).requires_grad_()
    xn = x.detach().neuron().requires_grad_()
    g = torch.randn(6, 5, generator=torch.Generator().manual_seed(2)).to(dtype)
    f(x).backward(g)
    f(xn).backward(g.neuron())
    assert_same(xn.grad, x.grad, **tol(dtype))
    ops = torch_neuronx.get_fallback_ops()
    assert not any("backward" in k for k in ops), ops


def test_bad_gelu_approximation():
    with pytest.raises(RuntimeError, match="approximate"):
        torch.nn.functional.gelu(torch.ones(2, device="neuron"), approximate="fast")


@pytest.mark.parametrize("dtype", FLOATS)
def test_classification(dtype):
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -0.0, 3.5]).to(dtype)
    for f in (torch.isnan, torch.isinf, torch.isposinf, torch.isneginf, torch.isfinite):
        assert_same(f(x.neuron()), f(x))
        assert_same(f(x.neuron()[::2]), f(x[::2]))
    assert torch_neuronx.get_fallback_ops() == {}
    i = torch.tensor([1, 2])
    assert_same(torch.isnan(i.neuron()), torch.isnan(i))  # integers: never NaN
