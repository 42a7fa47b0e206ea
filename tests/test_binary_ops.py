"""Native element-wise binary ops (csrc/aten/binary_ops.cpp) against PyTorch
CPU: arithmetic with broadcasting, type promotion, scalars, in-place/out
forms, strides and errors; division modes, remainder, pow, clamp, logical,
bitwise and comparison ops, the other binary math (fmax/fmin, copysign,
logaddexp, hypot, heaviside, fmod, atan2, xlogy), complex arithmetic and
polar, addcmul/addcdiv/lerp; and the edge cases of the vector loops."""

import itertools
import re

import pytest
import torch
from conftest import assert_same
from op_util import (
    ELT_LENS,
    FLOATS,
    REALS,
    elt_input,
    gen,
    grad_check,
    half_tol,
    native,
    randn,
    rnd,
    sample,
)

import torch_neuronx

DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
]
OPS = [torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum]


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(1, 50, shape, generator=g, dtype=dtype)


def tol(dtype):
    return {"rtol": 1.6e-2, "atol": 1e-2} if dtype in (torch.bfloat16, torch.float16) else {}


pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


@pytest.mark.parametrize("op,dtype", list(itertools.product(OPS, DTYPES)))
def test_binary_matches_cpu(op, dtype):
    a, b = rand((4, 1, 5), dtype, 1), rand((3, 5), dtype, 2)
    assert_same(op(a.neuron(), b.neuron()), op(a, b), **tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_alpha_scalars_and_promotion(dtype):
    a, b = rand((3, 4), dtype, 1), rand((3, 4), dtype, 2)
    assert_same(torch.add(a.neuron(), b.neuron(), alpha=3), torch.add(a, b, alpha=3))
    assert_same(torch.sub(a.neuron(), b.neuron(), alpha=2), torch.sub(a, b, alpha=2))
    assert_same(a.neuron() * 2, a * 2)
    assert_same(a.neuron() + 2.5, a + 2.5)  # int + float scalar promotes
    assert_same(3 - a.neuron(), 3 - a)
    assert_same(a.neuron() / 4, a / 4)  # true division of integers
    assert_same(a.neuron() * torch.tensor(1.5), a * torch.tensor(1.5))
    assert_same(a.neuron().float() + b.neuron().double(), a.float() + b.double())
    assert_same(
        a.neuron().half() * b.neuron().bfloat16(), a.half() * b.bfloat16(), rtol=2e-2, atol=2e-2
    )
    assert torch_neuronx.get_fallback_ops() == {}


def test_inplace_out_and_strided():
    a, b = torch.randn(6, 8), torch.randn(8)
    n = a.neuron()
    ptr = n.data_ptr()
    n.add_(b.neuron(), alpha=0.5).mul_(2).div_(3).sub_(1)
    assert n.data_ptr() == ptr
    assert_same(n, ((a + 0.5 * b) * 2 / 3) - 1)
    out = torch.empty(0, device="neuron")
    torch.mul(a.neuron().t(), a.neuron().t(), out=out)  # transposed inputs, resized out
    assert_same(out, a.t() * a.t())
    v = a.neuron()[:, ::2]
    v.add_(1)
    ref = a.clone()
    ref[:, ::2] += 1
    assert torch.equal(v.cpu(), ref[:, ::2])
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.ones(3, dtype=torch.int64, device="neuron").add_(torch.ones(3, device="neuron") * 0.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(3, device="neuron").add_(torch.ones(2, 3, device="neuron"))
    with pytest.raises(RuntimeError, match="alpha"):
        torch.add(
            torch.ones(2, dtype=torch.int64, device="neuron"),
            torch.ones(2, dtype=torch.int64, device="neuron"),
            alpha=0.5,
        )


def test_overlapping_inplace():
    t = torch.arange(10.0)
    n = t.neuron()
    for x in (t, n):  # a partial overlap is refused, as CPU and CUDA refuse it
        with pytest.raises(RuntimeError, match="single memory location"):
            x[1:].add_(x[:-1])
    n[1:].add_(n[:-1].clone())
    t[1:] += t[:-1].clone()
    assert_same(n, t)
    m, c = n.view(2, 5), t.view(2, 5)  # the same memory in full: allowed
    assert_same(m.add_(m), c.add_(c))


def test_integer_wraparound_and_nan():
    a = torch.tensor([120, -128], dtype=torch.int8)
    b = torch.tensor([10, -1], dtype=torch.int8)
    assert_same(a.neuron() + b.neuron(), a + b)
    x = torch.tensor([1.0, float("nan"), 3.0])
    y = torch.tensor([float("nan"), 2.0, 1.0])
    assert_same(torch.maximum(x.neuron(), y.neuron()), torch.maximum(x, y), equal_nan=True)


def test_unsupported_dtypes_fall_back_correctly():
    a = torch.tensor([True, False, True])
    assert_same(a.neuron() + a.neuron(), a + a)
    z = torch.randn(3, dtype=torch.complex64)
    assert_same(z.neuron() * z.neuron(), z * z)  # complex arithmetic: native
    assert "aten::mul.Tensor" not in torch_neuronx.get_fallback_ops()
    assert_same(z.neuron().atan(), z.atan())  # complex atan: the CPU fallback
    assert "aten::atan" in torch_neuronx.get_fallback_ops()


# ---- floor/trunc division, remainder, pow, clamp, logical ----------------------

_DIV_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.int8]


def _div_operands(dtype):
    a = torch.tensor([[7, -7, 5, -5, 0, 9], [3, -3, 100, -100, 1, -1]]).to(dtype)
    b = torch.tensor([[2, 2, -3, -3, 4, 3], [-2, 5, 7, 7, -1, 1]]).to(dtype)
    if dtype.is_floating_point:
        a = a * 1.25
    return a, b


@pytest.mark.parametrize("dtype", _DIV_DTYPES)
def test_floor_trunc_div_remainder(dtype):
    torch_neuronx.clear_op_tracking()
    a, b = _div_operands(dtype)
    an, bn = a.neuron(), b.neuron()
    assert_same(torch.floor_divide(an, bn), torch.floor_divide(a, b))
    assert_same(torch.div(an, bn, rounding_mode="floor"), torch.div(a, b, rounding_mode="floor"))
    assert_same(torch.div(an, bn, rounding_mode="trunc"), torch.div(a, b, rounding_mode="trunc"))
    assert_same(torch.remainder(an, bn), torch.remainder(a, b))
    assert_same(an // 3, a // 3)
    assert_same(an % 3, a % 3)
    c = an.clone()
    c.div_(bn, rounding_mode="floor")
    assert_same(c, a.div(b, rounding_mode="floor"))
    assert torch_neuronx.get_fallback_ops() == {}


def test_integer_division_by_zero_raises_at_sync():
    a = torch.tensor([4, 5]).neuron()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.floor_divide(torch.tensor([4, 5]), torch.tensor([1, 0]))  # the CPU oracle
    r = torch.floor_divide(a, torch.tensor([1, 0]).neuron())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        r.cpu()
    f = torch.tensor([1.0, -1.0, 0.0]).neuron() // torch.zeros(3).neuron()  # floats: IEEE
    assert_same(f, torch.tensor([1.0, -1.0, 0.0]) // torch.zeros(3), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_pow_tensor_tensor_and_scalar_base(dtype):
    torch_neuronx.clear_op_tracking()
    a = torch.rand(3, 4).add(0.5).to(dtype)
    e = torch.randn(4).to(dtype)
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    assert_same(torch.pow(a.neuron(), e.neuron()), torch.pow(a, e), **tol)
    assert_same(torch.pow(2, e.neuron()), torch.pow(2, e), **tol)
    assert_same(2.5 ** e.neuron(), 2.5**e, **tol)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_clamp(dtype):
    torch_neuronx.clear_op_tracking()
    x = (torch.randn(4, 5) * 10).to(dtype)
    xn = x.neuron()
    assert_same(xn.clamp(-3, 4), x.clamp(-3, 4))
    assert_same(xn.clamp(min=-1), x.clamp(min=-1))
    assert_same(xn.clamp(max=2), x.clamp(max=2))
    assert_same(xn.clamp(5, 1), x.clamp(5, 1))  # min > max: max
    lo, hi = torch.full((5,), -2).to(dtype), torch.arange(5).to(dtype)
    assert_same(xn.clamp(lo.neuron(), hi.neuron()), x.clamp(lo, hi))
    assert_same(torch.clamp_min(xn, lo.neuron()), torch.clamp_min(x, lo))
    y = xn.clone()
    y.clamp_(0, 3)
    assert_same(y, x.clamp(0, 3))
    if not dtype.is_floating_point:
        assert_same(xn.clamp(-1.5, 2.5), x.clamp(-1.5, 2.5))  # promotes to float
    assert torch_neuronx.get_fallback_ops() == {}


def test_clamp_nan_and_errors():
    x = torch.tensor([float("nan"), 1.0, -5.0])
    assert_same(x.neuron().clamp(-1, 1), x.clamp(-1, 1), equal_nan=True)
    with pytest.raises(RuntimeError, match="At least one"):
        x.neuron().clamp()


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32])
def test_logical_ops(dtype):
    torch_neuronx.clear_op_tracking()
    a = torch.tensor([[0, 1, 2], [0, 0, -3]]).to(dtype)
    b = torch.tensor([1, 0, 5]).to(dtype)
    for f in (torch.logical_and, torch.logical_or, torch.logical_xor):
        assert_same(f(a.neuron(), b.neuron()), f(a, b))
    assert_same(torch.logical_not(a.neuron()), torch.logical_not(a))
    out = torch.empty(0, dtype=torch.float32, device="neuron")
    torch.logical_and(a.neuron(), b.neuron(), out=out)
    assert_same(out, torch.logical_and(a, b, out=torch.empty(0)))
    assert torch_neuronx.get_fallback_ops() == {}


# fmax/fmin/copysign/logaddexp/logaddexp2/hypot/heaviside/fmod: native
# kernels against the CPU, with the edge values each op defines (NaN on one
# side or both, infinities, signed zeros, zero divisors for fmod)
def _edge_operands(dtype):
    a = torch.tensor([[1.5, -2.0, 0.0, -0.0, 3.0, float("nan"), float("inf"), float("-inf")]] * 2)
    b = torch.tensor([[-0.5, 2.0, -0.0, 0.0, float("nan"), float("nan"), float("inf"), 1.0]] * 2)
    a[1] = a[1] * -3.25
    b[1] = b[1].flip(0) * 0.75
    if not dtype.is_floating_point:
        a = torch.nan_to_num(a, nan=0, posinf=7, neginf=-7).trunc()
        b = torch.nan_to_num(b, nan=2, posinf=5, neginf=-5).trunc()
        b[b == 0] = 3  # zero divisors are their own test
        if dtype == torch.uint8:
            a, b = a.abs(), b.abs()
    return a.to(dtype), b.to(dtype)


_NEW_BINARY = ["fmax", "fmin", "copysign", "logaddexp", "logaddexp2", "hypot", "heaviside", "fmod"]
_NEW_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64]
_NEW_DTYPES += [torch.int32, torch.uint8, torch.bool]


@pytest.mark.parametrize("name", _NEW_BINARY)
@pytest.mark.parametrize("dtype", _NEW_DTYPES)
def test_more_binary_ops_match_cpu(name, dtype):
    f = getattr(torch, name)
    a, b = _edge_operands(dtype)
    try:
        want = f(a, b)
    except RuntimeError as e:  # the CPU refuses the dtype: neuron refuses it alike
        with pytest.raises(RuntimeError, match=re.escape(str(e)[:30])):
            f(a.neuron(), b.neuron()).cpu()
        return
    torch_neuronx.clear_op_tracking()
    an, bn = a.neuron(), b.neuron()
    assert_same(f(an, bn), want, equal_nan=True, **tol(dtype))
    assert_same(f(an, bn[0]), f(a, b[0]), equal_nan=True, **tol(dtype))  # broadcast
    assert_same(f(an.t(), bn.t()), f(a.t(), b.t()), equal_nan=True, **tol(dtype))  # strided
    out = torch.empty(0, dtype=want.dtype).neuron()
    f(an, bn, out=out)
    assert_same(out, want, equal_nan=True, **tol(dtype))
    if name not in ("fmax", "fmin", "logaddexp", "logaddexp2") and want.dtype == dtype:
        c = an.clone()
        getattr(c, name + "_")(bn)
        assert_same(c, want, equal_nan=True, **tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


def test_more_binary_ops_promotion_and_errors():
    torch_neuronx.clear_op_tracking()
    i, f = torch.tensor([3, -4, 0]), torch.tensor([-1.0, 2.0, -0.0])
    assert_same(torch.copysign(i.neuron(), f.neuron()), torch.copysign(i, f))  # int -> float
    assert_same(torch.copysign(i.neuron(), i.neuron()), torch.copysign(i, i))
    assert_same(torch.fmod(f.neuron(), 0.75), torch.fmod(f, 0.75))  # Scalar overload
    assert_same(torch.fmax(i.neuron(), f.neuron()), torch.fmax(i, f))
    assert torch_neuronx.get_fallback_ops() == {}
    msg = "heaviside is not yet implemented for tensors with different dtypes"
    with pytest.raises(RuntimeError, match=msg):
        torch.heaviside(f, i)
    with pytest.raises(RuntimeError, match=msg):
        torch.heaviside(f.neuron(), i.neuron())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.fmod(i, torch.tensor([1, 0, 2]))  # the CPU oracle
    r = torch.fmod(i.neuron(), torch.tensor([1, 0, 2]).neuron())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        r.cpu()
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.neuron().copysign_(f.neuron())


# ---- comparisons and bitwise ops ------------------------------------------------

CMP_DTYPES = REALS + [torch.bool]
CMPS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("op,dtype", list(itertools.product(CMPS, CMP_DTYPES)))
def test_comparisons(op, dtype):
    a, b = sample((3, 1, 4), dtype, 1), sample((2, 4), dtype, 2)
    assert_same(op(a.neuron(), b.neuron()), op(a, b))
    assert_same(op(a.neuron(), 2), op(a, 2))
    assert_same(op(a.neuron().float(), b.neuron()), op(a.float(), b))  # promotion
    out = torch.empty(0, dtype=torch.bool, device="neuron")
    op(a.neuron(), b.neuron(), out=out)
    assert_same(out, op(a, b))
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_equality(dtype):
    """eq / ne of complex tensors compare both parts (NaN parts unequal),
    natively; the orderings CPU refuses are refused alike."""
    nan = float("nan")
    a = torch.tensor([1 + 2j, 1 + 2j, 3 - 1j, complex(nan, 0), 0j, -0.0 + 0j], dtype=dtype)
    b = torch.tensor([1 + 2j, 1 - 2j, 3 + 0j, complex(nan, 0), -0.0 + 0j, 0j], dtype=dtype)
    torch_neuronx.clear_op_tracking()
    an, bn = a.neuron(), b.neuron()
    assert_same(an == bn, a == b)
    assert_same(an != bn, a != b)
    assert_same(an[:, None] == bn, a[:, None] == b)  # broadcast
    assert_same(an == (1 + 2j), a == (1 + 2j))  # a Python scalar
    assert_same(torch.eq(an, bn.real.to(dtype)), torch.eq(a, b.real.to(dtype)))
    out = torch.empty(0, dtype=torch.bool).neuron()
    torch.ne(an, bn, out=out)
    assert_same(out, a != b)
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError) as want:
        torch.lt(a, b)
    with pytest.raises(RuntimeError) as got:
        torch.lt(an, bn)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64])
def test_bitwise(dtype):
    a = torch.randint(
        -100 if dtype.is_signed else 0, 100, (3, 4), generator=torch.Generator().manual_seed(4)
    ).to(dtype)
    b = torch.randint(
        -100 if dtype.is_signed else 0, 100, (4,), generator=torch.Generator().manual_seed(5)
    ).to(dtype)
    an, bn = a.neuron(), b.neuron()
    assert_same(an & bn, a & b)
    assert_same(an | bn, a | b)
    assert_same(an ^ bn, a ^ b)
    assert_same(~an, ~a)
    assert_same(~an.t(), ~a.t())
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError):
        torch.ones(2, device="neuron") & torch.ones(2, device="neuron")  # floats: as on CPU


# ---- addcmul / addcdiv / lerp --------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_addcmul_addcdiv_lerp(dtype):
    a, b, c = (
        randn(4, 5, dtype=dtype),
        randn(4, 5, dtype=dtype, seed=1),
        randn(5, dtype=dtype, seed=2).abs() + 0.5,
    )
    an, bn, cn = a.neuron(), b.neuron(), c.neuron()
    assert_same(
        torch.addcmul(an, bn, cn, value=0.3), torch.addcmul(a, b, c, value=0.3), **half_tol(dtype)
    )
    assert_same(
        torch.addcdiv(an, bn, cn, value=-2), torch.addcdiv(a, b, c, value=-2), **half_tol(dtype)
    )
    for w in (0.1, 0.9):
        assert_same(torch.lerp(an, bn, w), torch.lerp(a, b, w), **half_tol(dtype))
    x = an.clone()
    x.addcmul_(bn, bn, value=0.5).addcdiv_(bn, cn, value=0.1).lerp_(bn, 0.25)
    ref = a.clone().addcmul_(b, b, value=0.5).addcdiv_(b, c, value=0.1).lerp_(b, 0.25)
    assert_same(x, ref, **half_tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("name", ["atan2", "xlogy", "xlogy_zero"])
def test_atan2_xlogy(name):
    x, y = rnd(3, 4, 6), rnd(3, 4, 6)
    fns = {
        "atan2": lambda a, b: torch.atan2(a, b),
        "xlogy": lambda a, b: torch.xlogy(a, b.abs() + 0.1),
        "xlogy_zero": lambda a, b: torch.xlogy(a * (a > 0), b.abs() + 0.1),
    }
    grad_check(fns[name], x, y, tol={"rtol": 1e-5, "atol": 1e-5})


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_arithmetic_and_polar(dtype):
    """Complex add/sub/mul/div and polar run natively, and so does complex
    rotary embedding (Llama 4, DeepSeek-V2) forward and backward."""
    g = torch.Generator().manual_seed(8)
    a = torch.randn(3, 5, dtype=dtype, generator=g)
    b = torch.randn(3, 5, dtype=dtype, generator=g)
    b[0, 0] = complex(0.0, 1e-3)  # |imag| >> |real|: the other division branch
    for f in (
        lambda x, y: x + y,
        lambda x, y: x - y * 2,
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: x * y[:1],
    ):  # broadcast
        assert_same(f(a.neuron(), b.neuron()), f(a, b), rtol=1e-5, atol=1e-6)
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    m, ang = torch.rand(6, dtype=real, generator=g), torch.randn(6, dtype=real, generator=g)
    assert_same(torch.polar(m.neuron(), ang.neuron()), torch.polar(m, ang))

    def rope(x, freqs):
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs).flatten(-2)

    freqs = torch.polar(torch.ones(4, 4, dtype=real), torch.randn(4, 4, dtype=real, generator=g))
    x = torch.randn(2, 4, 8, dtype=real, generator=g)
    grad_check(lambda t, f: rope(t, f), x, freqs, tol={"rtol": 1e-5, "atol": 1e-6})


# ---- edge cases of the vector loops (issue 16: bugs planted in the kernels
# were caught only by the model sweep; tools/mutate.py checks that these
# tests catch them): the optimizers' addcmul / addcdiv / lerp and the fp16
# element-wise blocks at lengths around each vector boundary, with inf, nan,
# -0.0 and subnormals -------------------------------------------------------------

# name -> (op, its arguments after self given b and c, keyword arguments)
TERNARY = {
    "addcmul": ("addcmul", lambda b, c: (b, c), {"value": -0.3}),
    "addcdiv": ("addcdiv", lambda b, c: (b, c), {"value": 0.7}),
    "lerp_low": ("lerp", lambda b, c: (b, 0.25), {}),
    "lerp_high": ("lerp", lambda b, c: (b, 0.75), {}),
    "lerp_tensor": ("lerp", lambda b, c: (b, c), {}),
}


@pytest.mark.parametrize("n", ELT_LENS)
@pytest.mark.parametrize("op", list(TERNARY))
def test_vector_ternary_lengths_and_specials(op, n):
    """The optimizers' addcmul / addcdiv / lerp on contiguous fp32 (the
    per-ISA loops), out of place, in place and one element off, with the
    special values in the vector bodies and the remainders."""
    name, args, kw = TERNARY[op]
    a, b = elt_input(n, seed=n), elt_input(n, seed=n + 1).flip(0)
    c = torch.rand(n, generator=gen(n + 2)) * 1.5 - 0.25  # weights on both sides of 0.5
    if op == "addcdiv":
        c[::5] = 0.0  # division by zero: inf / nan as on CPU
    an, bn, cn = a.neuron(), b.neuron(), c.neuron()
    tol = dict(rtol=1.3e-6, atol=1e-6, equal_nan=True)
    f = getattr(torch, name)
    assert_same(f(an, *args(bn, cn), **kw), f(a, *args(b, c), **kw), **tol)
    assert_same(f(an[1:], *args(bn[1:], cn[1:]), **kw), f(a[1:], *args(b[1:], c[1:]), **kw), **tol)
    inplace = getattr(an.clone(), name + "_")(*args(bn, cn), **kw)
    assert_same(inplace, getattr(a.clone(), name + "_")(*args(b, c), **kw), **tol)
    native(name)


F16_SPECIAL = [
    0.0,
    -0.0,
    6e-8,
    -6e-8,
    6.1e-5,
    65504.0,
    -65504.0,
    1.0,
    -2.5,
    float("inf"),
    float("-inf"),
    float("nan"),
]


@pytest.mark.parametrize("n", [1, 7, 8, 9, 255, 256, 257, 1000])
def test_fp16_elementwise_blocks(n):
    """fp16 element-wise through the F16C blocks (kernels/eltwise_loops.h:
    256-element blocks converted with vector instructions, the fp32 loop
    between): lengths around the 8-wide conversion and the block; zeros of
    both signs, subnormals, the largest finite value (a product overflows
    to inf), infinities and NaN; a scalar operand, in place, a cast each
    way with values that round at the fp16 boundaries. Exact against CPU."""
    vals = torch.tensor(F16_SPECIAL)
    a = (randn(n, seed=n) * 300).to(torch.float16)
    b = (randn(n, seed=n + 1) * 300).to(torch.float16)
    a[: min(n, len(vals))] = vals[: min(n, len(vals))].half()
    b[-min(n, len(vals)) :] = vals[: min(n, len(vals))].half()
    an, bn = a.neuron(), b.neuron()
    exact = dict(rtol=0, atol=0, equal_nan=True)
    for f in (torch.add, torch.mul, torch.sub, torch.maximum):
        assert_same(f(an, bn), f(a, b), **exact)
        assert_same(f(an, bn[:1].expand(n)), f(a, b[:1].expand(n)), **exact)  # a scalar operand
    assert_same(an * 0.5, a * 0.5, **exact)
    assert_same(torch.relu(an), torch.relu(a), **exact)
    assert_same(
        torch.nn.functional.gelu(an),
        torch.nn.functional.gelu(a),
        rtol=1e-3,
        atol=1e-3,
        equal_nan=True,
    )
    assert_same(an.clone().add_(bn), a.clone().add_(b), **exact)
    assert_same(an.float(), a.float(), **exact)
    # fp32 -> fp16: ties to even, the overflow boundary, subnormal rounding
    f = torch.tensor(
        [65519.0, 65520.0, 1 + 2**-11, 1 + 3 * 2**-11, 2**-25, 3 * 2**-26, -1e-9, 1e5]
        * (n // 8 + 1)
    )[:n]
    assert_same(f.neuron().half(), f.half(), **exact)
    native("add", "mul", "sub", "maximum", "relu", "gelu", "copy")


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float32),
        (torch.float32, torch.float64),
    ],
)
def test_inplace_and_out_with_a_wider_operand(op, dtypes):
    """bf16 self op= an fp32 tensor (autocast models' residual adds): computed
    at fp32 and rounded once into self, as CPU; no fallback."""
    narrow, wide = dtypes
    a, b = randn(4, 6, seed=1).to(narrow), randn(4, 6, seed=2).to(wide)
    got, want = getattr(a.neuron(), op)(b.neuron()), getattr(a.clone(), op)(b)
    assert got.dtype == narrow
    assert_same(got, want, rtol=0, atol=0)
    out_n, out_c = torch.empty(4, 6, dtype=narrow, device="neuron"), torch.empty(4, 6, dtype=narrow)
    fn = getattr(torch, op[:-1])
    assert_same(fn(a.neuron(), b.neuron(), out=out_n), fn(a, b, out=out_c), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(torch.ones(3, dtype=torch.int64, device="neuron"), op)(
            torch.ones(3, device="neuron")
        )
    native()
