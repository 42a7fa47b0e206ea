"""Native unary math and activations (csrc/aten/unary_ops.cpp) and the
activations' backward against PyTorch CPU; softplus, log_sigmoid, sign,
glu, prelu, threshold and the shrinks, round with decimals; and the edge
cases of the vector loops."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import ELT_LENS, FLOATS, X, elt_input, grad_check, native, randn, rnd

import torch_neuronx

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
    "i0": torch.i0,
    # both branches of the kernel (the power series to |x| = 40, the
    # asymptotic one beyond) and overflow to inf (fp32 near 89, fp64 713)
    "i0_large": lambda t: torch.i0(t * 30),
}


def tol(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return {"rtol": 1.6e-2, "atol": 2e-2, "equal_nan": True}
    return {"rtol": 2e-6 if dtype == torch.float32 else 1e-12, "atol": 1e-6, "equal_nan": True}


pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


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
    "sgn": torch.sgn,
    "sgn_with_zeros": lambda z: torch.sgn(z * (z.real > 0)),  # 0 at 0
    "sgn_of_conj_view": lambda z: torch.sgn(z.conj()),
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


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
def test_softplus_log_sigmoid_sign():
    x = X * 10
    grad_check(lambda t: F.softplus(t), x)
    grad_check(lambda t: F.softplus(t, beta=2, threshold=5), x)
    grad_check(lambda t: F.logsigmoid(t), x)
    assert_same(torch.sign(x.neuron()), torch.sign(x))
    assert_same(torch.sign(torch.tensor([-2, 0, 3]).neuron()), torch.sign(torch.tensor([-2, 0, 3])))


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("name", ["glu", "prelu", "prelu_c"])
def test_glu_prelu(name):
    x, y = rnd(3, 4, 6), rnd(3, 4, 6)
    fns = {
        "glu": lambda a, b: torch.cat([F.glu(a, -1).flatten(), F.glu(b, 1).flatten()]),
        "prelu": lambda a, b: F.prelu(a, b[0, :, 0].clone()),
        "prelu_c": lambda a, b: F.prelu(a, b[0, 0, :1].clone()),
    }
    grad_check(fns[name], x, y, tol={"rtol": 1e-5, "atol": 1e-5})


@pytest.mark.usefixtures("all_native")
def test_threshold_and_shrinks():
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(8))
    x[0, :2] = torch.tensor([0.5, -0.5])  # on the edges
    fns = (
        lambda v: F.threshold(v, 0.1, 2.0),
        lambda v: F.hardshrink(v, 0.5),
        lambda v: F.softshrink(v, 0.5),
        lambda v: F.relu6(v),
    )
    for fn in fns:
        grad_check(fn, x)
    # NaN passes through forward (CPU's own gradient at a NaN differs between
    # its scalar and vector loops, so only the forward is compared)
    x[0, 2] = float("nan")
    for fn in fns:
        assert_same(fn(x.neuron()), fn(x), equal_nan=True)
    ints = torch.arange(-4, 5)
    assert_same(F.threshold(ints.neuron(), 1.5, 7.9), F.threshold(ints, 1.5, 7.9))
    out = torch.empty(0, device="neuron")
    torch.ops.aten.softshrink.out(x.neuron(), 0.25, out=out)
    assert_same(out, F.softshrink(x, 0.25), equal_nan=True)
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(x.neuron(), -1.0)


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_round_with_decimals(dtype):
    x = (torch.randn(200, generator=torch.Generator().manual_seed(13)) * 50).to(dtype)
    x[:4] = torch.tensor([2.5, -0.125, 1234.5678, 0.0]).to(dtype)
    for d in (0, 1, 2, 3, -1, -2):
        assert_same(x.neuron().round(decimals=d), x.round(decimals=d), rtol=0, atol=0)


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64])
def test_integer_hardtanh_isnan_and_sums_to_float(dtype):
    x = torch.arange(-6, 10).to(dtype) if dtype != torch.uint8 else torch.arange(16).to(dtype)
    xn = x.neuron()
    assert_same(F.relu6(xn), F.relu6(x))
    if dtype == torch.uint8:
        with pytest.raises(RuntimeError, match="negative limits"):
            F.hardtanh(xn, -2, 3)
    else:
        assert_same(F.hardtanh(xn, -2, 3), F.hardtanh(x, -2, 3))
        assert_same(F.hardtanh(xn, -2.5, 3.7), F.hardtanh(x, -2.5, 3.7))  # no promotion
        assert_same(
            F.hardtanh(xn.clone(), -2, 3, inplace=True), F.hardtanh(x.clone(), -2, 3, inplace=True)
        )
    assert_same(torch.isnan(xn), torch.isnan(x))
    m = x.view(4, 4)
    for dt in (torch.float32, torch.float64):
        assert_same(m.neuron().sum(1, dtype=dt), m.sum(1, dtype=dt))
        assert_same(m.neuron().sum(dtype=dt), m.sum(dtype=dt))


@pytest.mark.usefixtures("all_native")
def test_complex_isnan():
    z = torch.tensor([1 + 1j, complex(float("nan"), 0), complex(0, float("nan")), 0j])
    assert_same(torch.isnan(z.neuron()), torch.isnan(z))


# ---- edge cases of the vector loops (issue 16: bugs planted in the kernels
# were caught only by the model sweep; tools/mutate.py checks that these tests
# catch them): the vector exp / sigmoid / silu / gelu bodies and their
# backward at lengths at each vector boundary (one element, one vector, vector
# + remainder, over the parallel grain), inf, nan, -0.0 and subnormals where
# CPU defines the result; neg and abs of every half-precision bit pattern ------

UNARY = {
    "exp": torch.exp,
    "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("n", ELT_LENS)
@pytest.mark.parametrize("op", list(UNARY))
def test_vector_unary_lengths_and_specials(op, n):
    f = UNARY[op]
    x = elt_input(n, seed=n)
    if op == "gelu":  # CPU's exact GELU of +inf is NaN (erf's vector form): no oracle
        x[x == float("inf")] = 50.0
    assert_same(f(x.neuron()), f(x), rtol=1e-5, atol=1e-6, equal_nan=True)
    # one offset element: unaligned vector loads, the remainder moves
    assert_same(f(x.neuron()[1:]), f(x[1:]), rtol=1e-5, atol=1e-6, equal_nan=True)
    native(op.split("_")[0])


@pytest.mark.parametrize("n", [7, 17, 33, 40007])
@pytest.mark.parametrize("op", ["sigmoid", "silu", "gelu", "gelu_tanh"])
def test_vector_unary_backward_lengths(op, n):
    f = UNARY[op]
    x = elt_input(n, seed=n + 1)
    x[~torch.isfinite(x)] = 0.5  # gradients of the specials are CPU's own conventions
    g = randn(n, seed=n + 2)
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    f(xc).backward(g)
    f(xn).backward(g.neuron())
    # atol: the derivatives cross zero (GELU's near x = -0.75), where
    # rounding differences are absolute
    assert_same(xn.grad, xc.grad, rtol=1e-5, atol=1e-5)
    native(op.split("_")[0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["neg", "abs"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_half_neg_abs_every_bit_pattern(dtype, op, layout):
    # all 65536 encodings: zeros, subnormals, normals, infinities, NaNs
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype).reshape(256, 256)
    xn = x.to("neuron")
    if layout == "strided":  # every other column: rows of 128 with stride 2
        x, xn = x[:, ::2], xn[:, ::2]
    f = getattr(torch, op)
    want, got = f(x), f(xn).cpu()
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    # bit for bit outside NaNs (signed zeros and subnormals included)
    assert torch.equal(got.view(torch.int16)[~nan], want.view(torch.int16)[~nan])
    # a NaN's sign follows the operation as it does on CPU's fp32 path
    if op == "abs":
        assert (got.view(torch.int16)[nan] >= 0).all()
