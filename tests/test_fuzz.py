"""Fuzz-style comparison with CPU: random shapes (zero-size included), strides
(transposed, sliced with steps, broadcast), dtypes and broadcasts thrown at
the element-wise, reduction, copy and GEMM paths. Seeds are fixed, so a
failure reproduces; each case prints what it was."""

import random

import pytest
import torch
from op_util import FLOATS, REALS

import torch_neuronx

DTYPES = REALS + [torch.bool]


def rand_tensor(rng, shape, dtype):
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    lo = 0 if dtype == torch.uint8 else -20
    return torch.randint(lo, 20, shape, generator=g).to(dtype)


def layout(rng, t):
    """A random way to view t's values through a non-trivial layout: returns a
    function applied alike to the CPU tensor and its neuron copy, so both
    sides compute on the same strides (transposed, stepped, broadcast)."""
    kind = rng.choice(["contiguous", "transpose", "step", "broadcast"])
    if kind == "transpose" and t.dim() >= 2:
        d0, d1 = rng.sample(range(t.dim()), 2)
        return (lambda x: x.transpose(d0, d1).contiguous().transpose(d0, d1)), kind
    if kind == "step" and t.dim() >= 1:
        d = rng.randrange(t.dim())
        step = (slice(None),) * d + (slice(None, None, 2),)
        # every other element of a doubled tensor: the values of t, stride 2
        return (lambda x: torch.repeat_interleave(x, 2, dim=d)[step]), kind
    if kind == "broadcast" and t.dim() >= 1 and t.size(0) > 0:
        return (lambda x: x[:1].expand(t.shape)), kind  # stride 0 along dim 0
    return (lambda x: x), "contiguous"


def random_shape(rng, max_dims=4):
    nd = rng.randint(0, max_dims)
    return [
        rng.choice([0, 1, 1, 2, 3, 5, 8]) if rng.random() < 0.1 else rng.randint(1, 7)
        for _ in range(nd)
    ]


def broadcast_partner(rng, shape):
    """A shape that broadcasts against `shape` (dims dropped or set to 1)."""
    out = [1 if rng.random() < 0.3 else s for s in shape]
    return out[rng.randint(0, len(out)) :] if out and rng.random() < 0.3 else out


def compare(neuron, cpu, what):
    assert neuron.device.type == "neuron", what
    assert neuron.dtype == cpu.dtype, what
    tol = {}
    if cpu.dtype in (torch.bfloat16, torch.float16):
        tol = dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(
        neuron.cpu(), cpu, equal_nan=True, msg=lambda m: f"{what}: {m}", **tol
    )


BINARY = [
    torch.add,
    torch.sub,
    torch.mul,
    torch.maximum,
    torch.minimum,
    torch.eq,
    torch.lt,
    torch.ge,
]


@pytest.mark.parametrize("seed", range(40))
def test_fuzz_elementwise(seed):
    rng = random.Random(seed)
    torch_neuronx.clear_op_tracking()
    for _ in range(6):
        shape = random_shape(rng)
        da, db = rng.choice(DTYPES), rng.choice(DTYPES)
        a = rand_tensor(rng, shape, da)
        b = rand_tensor(rng, broadcast_partner(rng, shape), db)
        view, ka = layout(rng, a)
        op = rng.choice(BINARY)
        if op is torch.sub and torch.bool in (da, db):
            continue  # CPU refuses bool subtraction; covered by error tests
        what = f"{op.__name__}({da}{list(a.shape)} {ka}, {db}{list(b.shape)})"
        compare(op(view(a.neuron()), b.neuron()), op(view(a), b), what)
        if da in FLOATS:
            un = rng.choice(
                [
                    torch.exp,
                    torch.tanh,
                    torch.sigmoid,
                    torch.abs,
                    torch.neg,
                    torch.nn.functional.silu,
                    torch.nn.functional.gelu,
                ]
            )
            compare(un(view(a.neuron())), un(view(a)), f"{un.__name__}({da}{list(a.shape)} {ka})")


@pytest.mark.parametrize("seed", range(30))
def test_fuzz_reductions(seed):
    rng = random.Random(1000 + seed)
    for _ in range(5):
        shape = random_shape(rng)
        dt = rng.choice(FLOATS + [torch.int64, torch.int32])
        x = rand_tensor(rng, shape, dt)
        view, kind = layout(rng, x)
        xv, xn = view(x), view(x.neuron())
        nd = max(xv.dim(), 1)
        dims = sorted(rng.sample(range(nd), rng.randint(1, nd))) if xv.dim() else None
        keep = rng.random() < 0.5
        what = f"{dt}{list(x.shape)} {kind} dims={dims} keepdim={keep}"
        compare(
            torch.sum(xn, dims, keepdim=keep) if dims else xn.sum(),
            torch.sum(xv, dims, keepdim=keep) if dims else xv.sum(),
            "sum " + what,
        )
        if dt in FLOATS and xv.numel():
            compare(
                torch.mean(xn, dims, keepdim=keep) if dims else xn.mean(),
                torch.mean(xv, dims, keepdim=keep) if dims else xv.mean(),
                "mean " + what,
            )
        if xv.numel() and dims:
            compare(
                torch.amax(xn, dims, keepdim=keep),
                torch.amax(xv, dims, keepdim=keep),
                "amax " + what,
            )


@pytest.mark.parametrize("seed", range(30))
def test_fuzz_copies_and_casts(seed):
    rng = random.Random(2000 + seed)
    for _ in range(6):
        shape = random_shape(rng)
        src_dt, dst_dt = rng.choice(DTYPES), rng.choice(DTYPES)
        x = rand_tensor(rng, shape, src_dt)
        view, kind = layout(rng, x)
        xv, xn = view(x), view(x.neuron())
        what = f"{src_dt}->{dst_dt} {list(x.shape)} {kind}"
        compare(xn.to(dst_dt), xv.to(dst_dt), "cast " + what)
        compare(xn.contiguous(), xv.contiguous(), "contiguous " + what)
        if xv.dim() >= 2:
            d0, d1 = rng.sample(range(xv.dim()), 2)
            out = torch.empty(xv.transpose(d0, d1).shape, dtype=dst_dt, device="neuron")
            out.copy_(xn.transpose(d0, d1))
            compare(out, xv.transpose(d0, d1).to(dst_dt), "copy_ transposed " + what)


@pytest.mark.parametrize("seed", range(30))
def test_fuzz_gemm(seed):
    rng = random.Random(3000 + seed)
    for _ in range(4):
        m, k, n = (rng.choice([1, 2, 3, 7, 12, 13, 31, 64, 65, 130]) for _ in range(3))
        dt = rng.choice([torch.float32, torch.float32, torch.bfloat16, torch.float64])
        a = rand_tensor(rng, [m, k], dt)
        b = rand_tensor(rng, [k, n], dt)
        if rng.random() < 0.5:
            a = a.t().contiguous().t()
        if rng.random() < 0.5:
            b = b.t().contiguous().t()
        what = f"mm {dt} {m}x{k}x{n} a{a.stride()} b{b.stride()}"
        ref = (a.double() @ b.double()).to(dt)
        tol = dict(rtol=2e-2, atol=1e-1) if dt == torch.bfloat16 else dict(rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(
            (a.neuron() @ b.neuron()).cpu(), ref, **tol, msg=lambda s, what=what: f"{what}: {s}"
        )
        batch = rng.randint(1, 3)
        A, B = rand_tensor(rng, [batch, m, k], dt), rand_tensor(rng, [batch, k, n], dt)
        torch.testing.assert_close(
            torch.bmm(A.neuron(), B.neuron()).cpu(),
            torch.bmm(A.double(), B.double()).to(dt),
            **tol,
            msg=lambda s, what=what: f"b{what}: {s}",
        )
