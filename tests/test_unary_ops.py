"""Native unary math and activation backward against PyTorch CPU."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same

import torch_neuronx

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
OPS = {
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "neg": torch.neg,
    "abs": torch.abs,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "reciprocal": torch.reciprocal,
    "silu": torch.nn.functional.silu,
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "pow2": lambda t: t.pow(2),
    "pow_half": lambda t: t**0.5,
    "ceil": torch.ceil,
    "floor": torch.floor,
    "trunc": torch.trunc,
    "round": torch.round,
    "atan": torch.atan,
    "asin": lambda t: torch.asin(t / 7),
    "acos": lambda t: torch.acos(t / 7),
    "tan": torch.tan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "asinh": torch.asinh,
    "acosh": lambda t: torch.acosh(t.abs() + 1),
    "atanh": lambda t: torch.atanh(t / 7),
    "exp2": torch.exp2,
    "log2": torch.log2,
    "log10": torch.log10,
    "frac": torch.frac,
    "erfinv": lambda t: torch.erfinv(t / 7),
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "hardtanh": lambda t: F.hardtanh(t, -0.5, 2.0),
    "relu6": F.relu6,
    "elu": F.elu,
    "celu": lambda t: F.celu(t, 0.7),
    "selu": F.selu,
    "logit": lambda t: torch.logit(torch.sigmoid(t)),
    "logit_eps": lambda t: torch.logit(torch.sigmoid(t), eps=0.1),
    "nan_to_num": lambda t: torch.nan_to_num(t.exp() * (t.round() - 0.5).sign() * 1e38),
    "nan_to_num_args": lambda t: torch.nan_to_num(t / 0, nan=1.5, posinf=7.0, neginf=-3.0),
    "erfc": torch.erfc,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    # poles and signed zeros: -inf/+inf at +0/-0, NaN at negative integers
    "digamma_poles": lambda t: torch.digamma(t.round() * (t.abs() > 1) + 0.0 * t.sign()),
    "lgamma_poles": lambda t: torch.lgamma(t.round()),
    "sinc": torch.sinc,
    "sinc_integers": lambda t: torch.sinc(t.round() * (t.abs() < 2)),  # 1 at 0, 0 elsewhere
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
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8])
def test_integer_inputs(dtype):
    """As on CPU: math functions promote integers to the default float dtype,
    neg/abs stay integer (wrapping), rounding is the identity."""
    lo = 0 if dtype == torch.uint8 else -128
    i = torch.arange(lo, lo + 256, dtype=torch.int64).to(dtype)
    n = i.neuron()
    for f in (torch.exp, torch.sin, torch.sqrt, torch.log2, torch.sigmoid, torch.atan, torch.sinc):
        assert_same(f(n), f(i), rtol=2e-6, atol=1e-6, equal_nan=True)
    assert_same(torch.logit(n), torch.logit(i), equal_nan=True)
    for f in (torch.neg, torch.abs, torch.floor, torch.round, torch.nan_to_num):
        assert_same(f(n), f(i))
    m = n.clone()
    m.abs_()
    assert_same(m, i.abs())
    assert_same(torch.sin(n, out=torch.empty(0, device="neuron")), torch.sin(i))
    assert torch_neuronx.get_fallback_ops() == {}
    assert_same(
        torch.exp(torch.tensor([True, False]).neuron()), torch.exp(torch.tensor([True, False]))
    )
    with pytest.raises(RuntimeError, match="can't be cast"):
        n.clone().sin_()  # float result into an integer tensor, as CPU refuses


@pytest.mark.parametrize(
    "act",
    [
        "gelu",
        "gelu_tanh",
        "silu",
        "sigmoid",
        "tanh",
        "relu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "leaky_relu",
        "hardtanh",
        "relu6",
        "elu",
        "celu",
        "selu",
        "logit",
        "logit_eps",
        "elu_inplace",
        "leaky_relu_inplace",
        "lgamma",
        "erfc",
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_activation_backward_matches_cpu(act, dtype):
    inplace = {
        "elu_inplace": lambda t: F.elu(t * 1, 0.8, inplace=True),
        "leaky_relu_inplace": lambda t: F.leaky_relu(t * 1, 0.1, inplace=True),
    }
    f = inplace.get(act) or OPS[act]
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(1)).to(dtype).requires_grad_()
    xn = x.detach().neuron().requires_grad_()
    g = torch.randn(6, 5, generator=torch.Generator().manual_seed(2)).to(dtype)
    f(x).backward(g)
    f(xn).backward(g.neuron())
    assert_same(xn.grad, x.grad, **tol(dtype))
    ops = torch_neuronx.get_fallback_ops()
    assert not any("backward" in k for k in ops), ops


def test_lgamma_erfc_backward_stay_on_device():
    x = (torch.rand(40, generator=torch.Generator().manual_seed(3)) * 8 - 4).requires_grad_()
    xn = x.detach().neuron().requires_grad_()
    (torch.lgamma(x) + torch.erfc(x)).sum().backward()
    (torch.lgamma(xn) + torch.erfc(xn)).sum().backward()
    assert_same(xn.grad, x.grad, rtol=1e-5, atol=1e-5)
    assert torch_neuronx.get_fallback_ops() == {}


def test_bad_gelu_approximation():
    with pytest.raises(RuntimeError, match="approximate"):
        torch.nn.functional.gelu(torch.ones(2, device="neuron"), approximate="fast")


@pytest.mark.parametrize("dtype", FLOATS)
def test_classification(dtype):
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -0.0, 3.5]).to(dtype)
    x = torch.cat([x, -x, x.neg().abs()])  # signbit: -0.0 and a NaN with its sign bit set
    funcs = (torch.isnan, torch.isinf, torch.isposinf, torch.isneginf, torch.isfinite)
    for f in funcs + (torch.signbit,):
        assert_same(f(x.neuron()), f(x))
        assert_same(f(x.neuron()[::2]), f(x[::2]))
    out = torch.empty(0, dtype=torch.bool).neuron()
    torch.signbit(x.neuron(), out=out)
    assert_same(out, torch.signbit(x))
    assert torch_neuronx.get_fallback_ops() == {}
    i = torch.tensor([1, 2])
    assert_same(torch.isnan(i.neuron()), torch.isnan(i))  # integers: never NaN
    for t in (torch.tensor([3, -4, 0, -1]), torch.tensor([0, 7], dtype=torch.uint8)):
        assert_same(torch.signbit(t.neuron()), torch.signbit(t))  # integers: x < 0
    assert_same(torch.signbit(torch.tensor([True]).neuron()), torch.signbit(torch.tensor([True])))


def test_inplace_activation_backward_with_negative_slope_raises():
    """CPU refuses to differentiate an in-place leaky ReLU / ELU whose slope
    is negative (the input's sign is lost); neuron raises the same error."""
    for dev in ("cpu", "neuron"):
        x = torch.randn(4, device=dev, requires_grad=True)
        y = F.leaky_relu(x * 1, -0.1, inplace=True)
        with pytest.raises(RuntimeError, match="negative slope"):
            y.sum().backward()


CPLX_OPS = {
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "neg": torch.neg,
    "reciprocal": torch.reciprocal,
    "abs": torch.abs,
    "angle": torch.angle,
    "conj_physical": torch.conj_physical,
    "exp_of_conj_view": lambda z: torch.exp(z.conj()),
}


@pytest.mark.parametrize("name", list(CPLX_OPS))
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_unary_matches_cpu(name, dtype):
    g = torch.Generator().manual_seed(4)
    z = torch.complex(torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)).to(dtype)
    z[0, 0] = complex(0.0, 0.0)
    z[0, 1] = complex(float("inf"), 1.0)
    z[0, 2] = complex(float("nan"), 0.5)
    z[0, 3] = complex(-2.0, 0.0)
    f = CPLX_OPS[name]
    tol = {"rtol": 2e-5 if dtype == torch.complex64 else 1e-12, "atol": 1e-6, "equal_nan": True}
    assert_same(f(z.neuron()), f(z), **tol)
    assert_same(f(z.neuron().t()), f(z.t()), **tol)  # strided
    assert torch_neuronx.get_fallback_ops() == {}


def test_complex_inplace_out_and_construction():
    g = torch.Generator().manual_seed(5)
    re, im = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    z = torch.complex(re, im)
    zn = torch.complex(re.neuron(), im.neuron())
    assert_same(zn, z)
    assert_same(torch.complex(re.neuron(), im.neuron()[:1]), torch.complex(re, im[:1]))  # bcast
    ptr = zn.data_ptr()
    zn.exp_().sqrt_()
    assert zn.data_ptr() == ptr
    assert_same(zn, z.exp().sqrt(), rtol=2e-5, atol=1e-6)
    out = torch.empty(0, device="neuron")
    torch.abs(zn, out=out)
    assert out.dtype == torch.float32
    assert_same(out, z.exp().sqrt().abs(), rtol=2e-5, atol=1e-6)
    w = zn.clone()
    w.conj_physical_()
    assert_same(w, z.exp().sqrt().conj_physical(), rtol=2e-5, atol=1e-6)
    assert_same(torch.angle(re.neuron()), torch.angle(re))  # real input: 0 or pi
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError, match="second argument"):
        torch.complex(re.neuron(), im.double().neuron())
    with pytest.raises(RuntimeError):
        torch.complex(re, im.double())  # as CPU
