"""Native arithmetic and matrix products against PyTorch CPU: broadcasting,
type promotion, scalars, in-place/out forms, strides and errors."""

import itertools
import re

import pytest
import torch
from conftest import assert_same

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


@pytest.fixture(autouse=True)
def _no_fallback():
    torch_neuronx.clear_op_tracking()
    yield


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (7, 5, 3),
        (64, 64, 64),
        (130, 257, 40),
        (1, 300, 260),
        (300, 700, 37),
        (260, 530, 600),
    ],
)  # last two: column split
def test_mm_matches_cpu(dtype, shape):
    m, n, k = shape
    a, b = rand((m, k), torch.float32, 1).to(dtype), rand((k, n), torch.float32, 2).to(dtype)
    want = (a.double() @ b.double()).to(dtype)
    t = (
        {"rtol": 2e-2, "atol": 5e-2 * k**0.5}
        if dtype in (torch.bfloat16, torch.float16)
        else {"rtol": 1e-4, "atol": 1e-4}
    )
    assert_same(a.neuron() @ b.neuron(), want, **t)
    assert_same(a.neuron().t().contiguous().t() @ b.neuron().t().contiguous().t(), want, **t)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["rows", "weight"])
def test_narrow_mm_rounds_once_like_cpu(dtype, layout):
    # Depth 2048 spans several packed blocks of every kernel variant. CPU sums
    # in fp32 and rounds to bf16/fp16 once; rounding after each block (the
    # earlier fp32-converting path) left a fifth of this product one ulp off.
    # Only fp32 summation order may differ: at most 1% of elements by 1 ulp.
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(24, 2048, generator=g) * 0.5 + 0.25).to(dtype)
    b = (torch.rand(48, 2048, generator=g) * 0.01).to(dtype)
    b = b.t() if layout == "weight" else b.t().contiguous()  # x @ W^T, or row-major B
    want = a @ b
    got = (a.neuron() @ b.neuron()).cpu()
    bits = (got.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    assert bits.max().item() <= 1 and (bits != 0).sum().item() <= want.numel() // 100
    assert torch_neuronx.get_fallback_ops() == {}


def test_addmm_bmm_linear_matmul():
    x, w, bias = torch.randn(8, 16), torch.randn(4, 16), torch.randn(4)
    assert_same(
        torch.nn.functional.linear(x.neuron(), w.neuron(), bias.neuron()),
        torch.nn.functional.linear(x, w, bias),
        rtol=1e-5,
        atol=1e-5,
    )
    c = torch.randn(8, 4)
    assert_same(
        torch.addmm(c.neuron(), x.neuron(), w.neuron().t(), beta=0.5, alpha=2),
        torch.addmm(c, x, w.t(), beta=0.5, alpha=2),
        rtol=1e-5,
        atol=1e-5,
    )
    cn = c.neuron()
    cn.addmm_(x.neuron(), w.neuron().t())
    assert_same(cn, c.addmm(x, w.t()), rtol=1e-5, atol=1e-5)
    p, q = torch.randn(3, 5, 6), torch.randn(3, 6, 2)
    assert_same(torch.bmm(p.neuron(), q.neuron()), torch.bmm(p, q), rtol=1e-5, atol=1e-5)
    assert_same(p.neuron() @ q.neuron(), p @ q, rtol=1e-5, atol=1e-5)
    r = torch.randn(2, 3, 5, 6)
    assert_same(r.neuron() @ q.neuron()[0], r @ q[0], rtol=1e-5, atol=1e-5)
    assert torch_neuronx.get_fallback_ops() == {}


def test_mm_edge_cases_and_errors():
    e = torch.empty(3, 0)
    assert_same(e.neuron() @ torch.empty(0, 4).neuron(), e @ torch.empty(0, 4))
    nan_c = torch.full((2, 2), float("nan"))
    assert_same(
        torch.addmm(nan_c.neuron(), torch.ones(2, 3).neuron(), torch.ones(3, 2).neuron(), beta=0),
        torch.addmm(nan_c, torch.ones(2, 3), torch.ones(3, 2), beta=0),
    )
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    ):
        torch.ones(2, 3, device="neuron") @ torch.ones(4, 5, device="neuron")
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(
            torch.ones(2, 2, device="neuron"),
            torch.ones(2, 2, device="neuron", dtype=torch.float64),
        )
    i = torch.randint(0, 5, (3, 3))
    assert_same(i.neuron() @ i.neuron(), i @ i)  # integer matmul: CPU fallback


# ---- floor/trunc division, remainder, pow, clamp, logical, baddbmm ----------

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


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float32])
@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_every_form(name, dtype):
    """all/any over one dim, several, none and every one, with and without
    keepdim and out=: native, and equal to the CPU's (uint8 stays uint8)."""
    torch_neuronx.clear_op_tracking()
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(3, 4, 5, generator=g) > 0.3).to(dtype)
    x[1] = 1  # some slices all true
    xn = x.neuron()
    f = getattr(torch, name)
    for dim in (0, -1, (0, 2), (), None):
        for keepdim in (False, True):
            kw = {} if dim is None else {"dim": dim}
            assert_same(f(xn, keepdim=keepdim, **kw), f(x, keepdim=keepdim, **kw))
            out_n = torch.empty(0, dtype=torch.bool, device="neuron")
            out_c = torch.empty(0, dtype=torch.bool)
            if dim is None:
                f(xn, out=out_n), f(x, out=out_c)
            else:
                f(xn, dim, keepdim, out=out_n), f(x, dim, keepdim, out=out_c)
            assert_same(out_n, out_c)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_baddbmm(dtype):
    torch_neuronx.clear_op_tracking()
    s, a, b = torch.randn(3, 1, 5), torch.randn(3, 4, 6), torch.randn(3, 6, 5)
    s, a, b = s.to(dtype), a.to(dtype), b.to(dtype)
    tol = dict(atol=5e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    for beta, alpha in ((1.0, 1.0), (0.5, -2.0), (0.0, 1.0)):
        assert_same(
            torch.baddbmm(s.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha),
            torch.baddbmm(s, a, b, beta=beta, alpha=alpha),
            **tol,
        )
    t = torch.randn(3, 4, 5).to(dtype)
    tn = t.neuron()
    tn.baddbmm_(a.neuron(), b.neuron(), alpha=0.5)
    assert_same(tn, t.baddbmm(a, b, alpha=0.5), **tol)
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
