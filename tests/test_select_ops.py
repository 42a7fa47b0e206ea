"""Native comparisons, where, tril/triu, arange and all/any against CPU."""

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
    torch.int8,
    torch.uint8,
    torch.bool,
]
CMPS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


def sample(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 4, shape, generator=g).to(dtype)  # ties included


@pytest.fixture(autouse=True)
def _track():
    torch_neuronx.clear_op_tracking()
    yield


@pytest.mark.parametrize("op,dtype", list(itertools.product(CMPS, DTYPES)))
def test_comparisons(op, dtype):
    a, b = sample((3, 1, 4), dtype, 1), sample((2, 4), dtype, 2)
    assert_same(op(a.neuron(), b.neuron()), op(a, b))
    assert_same(op(a.neuron(), 2), op(a, 2))
    assert_same(op(a.neuron().float(), b.neuron()), op(a.float(), b))  # promotion
    out = torch.empty(0, dtype=torch.bool, device="neuron")
    op(a.neuron(), b.neuron(), out=out)
    assert_same(out, op(a, b))
    assert torch_neuronx.get_fallback_ops() == {}


def test_where():
    c = torch.tensor([[True, False, True]])
    x, y = torch.randn(2, 3), torch.randn(2, 1, dtype=torch.float64)
    assert_same(torch.where(c.neuron(), x.neuron(), y.neuron()), torch.where(c, x, y))
    assert_same(torch.where(c.neuron(), x.neuron(), 0.0), torch.where(c, x, 0.0))
    assert_same(x.neuron().masked_fill(~c.neuron(), -1.5), x.masked_fill(~c, -1.5))
    out = torch.empty(0, device="neuron")
    torch.where(c.neuron(), x.neuron(), x.neuron() * 2, out=out)
    assert_same(out, torch.where(c, x, x * 2))
    with pytest.raises(RuntimeError, match="boolean"):
        torch.where(
            torch.ones(3, device="neuron"),
            torch.ones(3, device="neuron"),
            torch.zeros(3, device="neuron"),
        )


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu(k):
    x = torch.randn(2, 4, 5)
    for f in (torch.tril, torch.triu):
        assert_same(f(x.neuron(), k), f(x, k))
        assert_same(f(x.neuron().transpose(1, 2), k), f(x.transpose(1, 2), k))
    n = x.neuron()
    n.tril_(k)
    assert_same(n, x.tril(k))
    m = torch.ones(6, 6, dtype=torch.bool)
    assert_same(torch.ones(6, 6, dtype=torch.bool, device="neuron").tril(), m.tril())
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.tril(torch.ones(3, device="neuron"))
    assert torch_neuronx.get_fallback_ops() == {}


def test_arange():
    for args, kw in [
        ((10,), {}),
        ((2, 11, 3), {}),
        ((5, -3, -2), {}),
        ((0, 1, 0.1), {}),
        ((0, 5), {"dtype": torch.float32}),
        ((3,), {"dtype": torch.bfloat16}),
        ((0, 2**40, 2**37), {}),
    ]:
        assert_same(torch.arange(*args, device="neuron", **kw), torch.arange(*args, **kw))
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 5, 0, device="neuron")
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torch.arange(5, 0, 1, device="neuron")


def test_all_any():
    x = torch.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, 5.0]])
    n = x.neuron()
    for f in (torch.all, torch.any):
        assert_same(f(n), f(x))
        assert_same(f(n, dim=1), f(x, dim=1))
        assert_same(f(n, dim=0, keepdim=True), f(x, dim=0, keepdim=True))
        assert_same(f(n.bool()), f(x.bool()))
        e = torch.empty(0, 3)
        assert_same(f(e.neuron()), f(e))
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.float64,
        torch.bfloat16,
        torch.float16,
        torch.int64,
        torch.int8,
        torch.uint8,
        torch.bool,
    ],
)
def test_max_min_amax_amin(dtype):
    x = sample((3, 4, 5), dtype, 3)
    n = x.neuron()
    for f in (torch.max, torch.min):
        assert_same(f(n), f(x))
    for f in (torch.amax, torch.amin):
        assert_same(f(n, 1), f(x, 1))
        assert_same(f(n, (0, 2), keepdim=True), f(x, (0, 2), keepdim=True))
        assert_same(f(n.transpose(0, 2), -1), f(x.transpose(0, 2), -1))
    for kw in ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"keepdim": True}):
        for got, want in zip(torch.aminmax(n, **kw), torch.aminmax(x, **kw)):
            assert_same(got, want)
    mn, mx = torch.empty(0, dtype=dtype).neuron(), torch.empty(0, dtype=dtype).neuron()
    torch.aminmax(n.transpose(0, 2), dim=0, out=(mn, mx))
    for got, want in zip((mn, mx), torch.aminmax(x.transpose(0, 2), dim=0)):
        assert_same(got, want)
    assert torch_neuronx.get_fallback_ops() == {}


def test_max_propagates_nan_and_rejects_empty():
    x = torch.tensor([1.0, float("nan"), 3.0])
    assert_same(x.neuron().max(), x.max(), equal_nan=True)
    assert_same(torch.amin(x.neuron(), 0), torch.amin(x, 0), equal_nan=True)
    with pytest.raises(RuntimeError):
        torch.empty(0, device="neuron").max()
    for got, want in zip(torch.aminmax(x.neuron()), torch.aminmax(x)):
        assert_same(got, want, equal_nan=True)
    for shape, kw in (((2, 0), {"dim": 1}), ((2, 0), {}), ((0,), {})):  # CPU's errors
        with pytest.raises(Exception) as want:
            torch.aminmax(torch.empty(shape), **kw)
        with pytest.raises(want.type, match=re.escape(str(want.value))):
            torch.aminmax(torch.empty(shape, device="neuron"), **kw)


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


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.uint8]
)
def test_trace(dtype):
    """trace on the device: the diagonal's sum, integers summed into int64,
    tall, wide, transposed and empty matrices; CPU's errors for bad input."""
    torch_neuronx.clear_op_tracking()
    for shape in ((5, 5), (3, 7), (7, 3), (0, 4)):
        x = sample(shape, dtype, 5)
        assert_same(torch.trace(x.neuron()), torch.trace(x))
        assert_same(torch.trace(x.neuron().t()), torch.trace(x.t()))
    assert torch_neuronx.get_fallback_ops() == {}
    for bad in (torch.ones(2, 2, 2, dtype=dtype), torch.ones(3, dtype=dtype)):
        with pytest.raises(Exception) as want:
            torch.trace(bad)
        with pytest.raises(want.type, match=re.escape(str(want.value))):
            torch.trace(bad.neuron())
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        torch.trace(torch.ones(2, 2, dtype=torch.bool).neuron())
