"""Native reductions and scans (csrc/aten/reduction_ops.cpp) against PyTorch
CPU: sum/mean, all/any, max/min/amax/amin/aminmax, argmax/argmin, trace,
var/std, vector and matrix norms, cumsum/cumprod/cummax/cummin and
logcumsumexp; and the edge cases of the row and contiguous reductions."""

import re

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import ELT_LENS, FLOATS, REALS, X, grad_check, half_tol, native, randn, sample

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")

# ---- sum / mean -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
def test_sum(dtype):
    x = (randn(3, 4, 5) * 10).to(dtype)
    xn = x.neuron()
    t = (
        {"rtol": 2e-2, "atol": 0.5}
        if dtype in (torch.bfloat16, torch.float16)
        else {"rtol": 1e-5, "atol": 1e-5}
    )
    assert_same(xn.sum(), x.sum(), **t)
    for dims, keep in (((1,), False), ((0, 2), True), ((-1,), False), ((), False)):
        assert_same(xn.sum(dims, keepdim=keep), x.sum(dims, keepdim=keep), **t)
    assert_same(xn.transpose(0, 2).sum(1), x.transpose(0, 2).sum(1), **t)
    if dtype.is_floating_point:
        assert_same(xn.sum(1, dtype=torch.float32), x.sum(1, dtype=torch.float32), **t)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean(dtype):
    x = randn(3, 4, 5, dtype=dtype)
    xn = x.neuron()
    assert_same(xn.mean(), x.mean(), **half_tol(dtype))
    assert_same(xn.mean((0, 2), keepdim=True), x.mean((0, 2), keepdim=True), **half_tol(dtype))
    assert_same(xn.mean(-1), x.mean(-1), **half_tol(dtype))
    e = torch.empty(0, 3)
    assert_same(e.neuron().mean(0), e.mean(0), equal_nan=True)
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError):
        torch.arange(4, device="neuron").mean()  # integers: as on CPU, an error


def test_sum_mean_over_leading_dims():
    """The column-block path (bias / norm-weight gradients): leading dims of
    a contiguous input, into contiguous and strided outputs."""
    x = torch.randn(3, 70, 300, generator=torch.Generator().manual_seed(10))
    n = x.neuron()
    for dims in ((0,), (0, 1)):
        assert_same(n.sum(dims), x.sum(dims), rtol=1e-5, atol=1e-5)
        assert_same(n.mean(dims, keepdim=True), x.mean(dims, keepdim=True), rtol=1e-5, atol=1e-6)
    out = torch.empty(300, 70, device="neuron").t()  # strided output
    torch.sum(n, (0,), out=out)
    assert_same(out, x.sum(0), rtol=1e-5, atol=1e-5)


# ---- all / any, max / min, trace ------------------------------------------------


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


@pytest.mark.parametrize("dtype", REALS)
def test_argmax_argmin_max_dim(dtype):
    x = randn(4, 7, 3, seed=6).to(dtype)
    x[1, 2, 0] = x[1, 5, 0]  # ties: the first wins
    for dim in (None, 0, 1, -1):
        for keep in (False, True):
            assert_same(x.neuron().argmax(dim, keep), x.argmax(dim, keep))
            assert_same(x.neuron().argmin(dim, keep), x.argmin(dim, keep))
    for dim in (0, 1, 2):
        vn, in_ = x.neuron().max(dim)
        vc, ic = x.max(dim)
        assert_same(vn, vc)
        assert_same(in_, ic)
        vn, in_ = x.neuron().transpose(0, 1).min(dim, keepdim=True)
        vc, ic = x.transpose(0, 1).min(dim, keepdim=True)
        assert_same(vn, vc)
        assert_same(in_, ic)
    native()


def test_argmax_nan_and_errors():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 1.0, 0.5, 7.0]])
    assert_same(x.neuron().argmax(1), x.argmax(1))
    assert_same(x.neuron().argmin(1), x.argmin(1))
    vn, in_ = x.neuron().max(1)
    assert_same(vn, x.max(1)[0], equal_nan=True)
    for dev in ("cpu", "neuron"):  # IndexError, as CPU
        with pytest.raises(IndexError, match="numel"):
            torch.empty(0, device=dev).argmax()
    with pytest.raises(IndexError, match="non-zero size"):
        torch.empty(2, 0, device="neuron").max(1)


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


# ---- scans ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
def test_cumsum_cumprod(dtype):
    x = randn(3, 5, 2, seed=7).mul(0.5).to(dtype)
    for dim in (0, 1, -1):
        assert_same(x.neuron().cumsum(dim), x.cumsum(dim))
        if dtype != torch.bool:
            tol = dict(atol=1e-2, rtol=1e-2) if dtype in (torch.bfloat16, torch.float16) else {}
            assert_same(x.neuron().cumprod(dim), x.cumprod(dim), **tol)
    assert_same(x.neuron().cumsum(1, dtype=torch.float64), x.cumsum(1, dtype=torch.float64))
    native()


def test_cumsum_backward_and_inplace():
    x = torch.randn(4, 6)
    xn = x.neuron().requires_grad_()
    xc = x.clone().requires_grad_()
    (xn.cumsum(1) ** 2).sum().backward()
    (xc.cumsum(1) ** 2).sum().backward()
    assert_same(xn.grad, xc.grad)
    y = x.neuron()
    y.cumsum_(0)
    assert_same(y, x.cumsum(0))


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin(dtype, name):
    g = torch.Generator().manual_seed(18)
    x = torch.randint(-3, 4, (4, 6, 5), generator=g).to(dtype)  # many ties
    if dtype.is_floating_point:
        x[0, 2, 1] = x[1, 4, 3] = x[1, 1, 3] = float("nan")
    f = getattr(torch, name)
    for dim in (0, 1, -1):
        vn, in_ = f(x.neuron(), dim)
        vc, ic = f(x, dim)
        assert_same(vn, vc, equal_nan=True)
        assert_same(in_, ic)
    # out= into strided outputs, a 0-dim input
    v = torch.empty(5, 6, 4, dtype=dtype, device="neuron").transpose(0, 2)
    i = torch.empty(5, 6, 4, dtype=torch.long, device="neuron").transpose(0, 2)
    f(x.neuron(), 1, out=(v, i))
    assert_same(v, f(x, 1).values, equal_nan=True)
    assert_same(i, f(x, 1).indices)
    assert_same(f(x[0, 0, 0].neuron(), 0).values, f(x[0, 0, 0], 0).values)
    native()


def test_cummax_backward():
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(19))
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    (torch.cummax(xc, 1).values * torch.arange(7.0)).sum().backward()
    (torch.cummax(xn, 1).values * torch.arange(7.0).neuron()).sum().backward()
    assert_same(xn.grad, xc.grad)
    native()


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std(dim, correction, keepdim):
    grad_check(lambda x: torch.var(x, dim=dim, correction=correction, keepdim=keepdim), X)
    grad_check(lambda x: torch.std(x, dim=dim, correction=correction, keepdim=keepdim), X)
    v, m = torch.var_mean(X.neuron(), dim=dim, correction=correction, keepdim=keepdim)
    vc, mc = torch.var_mean(X, dim=dim, correction=correction, keepdim=keepdim)
    assert_same(v, vc)
    assert_same(m, mc)


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 0, 3.0])
def test_vector_norm(ord):
    fn = (
        (lambda x: torch.linalg.vector_norm(x, ord=ord, dim=1))
        if ord != 0
        else (lambda x: torch.linalg.vector_norm(x.detach(), ord=0, dim=1))
    )
    if ord == 0:
        assert_same(fn(X.neuron()), fn(X))
    else:
        grad_check(fn, X)


@pytest.mark.usefixtures("all_native")
def test_clip_grad_norm_runs_on_device():
    lin_c = torch.nn.Linear(5, 3)
    lin_n = torch.nn.Linear(5, 3).neuron()
    lin_n.load_state_dict(lin_c.state_dict())
    x = torch.randn(8, 5) * 10
    lin_c(x).pow(2).sum().backward()
    lin_n(x.neuron()).pow(2).sum().backward()
    nc = torch.nn.utils.clip_grad_norm_(lin_c.parameters(), 1.0)
    nn_ = torch.nn.utils.clip_grad_norm_(lin_n.parameters(), 1.0)
    assert_same(nn_, nc, rtol=1e-5, atol=1e-5)
    assert_same(lin_n.weight.grad, lin_c.weight.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("all_native")
def test_norm_forms_and_distance_losses():
    g = torch.Generator().manual_seed(14)
    a, p, n = (torch.randn(6, 5, generator=g) for _ in range(3))
    for fn in (
        lambda x: torch.norm(x, dim=1),
        lambda x: torch.norm(x, p=1, dim=0, keepdim=True),
        lambda x: torch.norm(x, p=3),
        lambda x: torch.norm(x, float("inf"), dim=1, dtype=torch.float64),
        lambda x: F.pairwise_distance(x, x.flip(0)),
    ):
        grad_check(fn, a, tol={"rtol": 1e-5, "atol": 1e-6})
    grad_check(
        lambda x, y, z: F.triplet_margin_loss(x, y, z, margin=0.5),
        a,
        p,
        n,
        tol={"rtol": 1e-5, "atol": 1e-6},
    )


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_matches_cpu(dtype, dim):
    g = torch.Generator().manual_seed(21)
    x = (torch.randn(7, 9, generator=g) * 30).to(dtype)  # wide range: needs the stable form
    x[2, 3] = float("-inf")
    x[4, :3] = float("-inf")
    x[5, 5] = float("inf")
    x[6, 1] = float("nan")
    torch_neuronx.clear_op_tracking()
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-6, "atol": 1e-6}
    assert_same(
        torch.logcumsumexp(x.neuron(), dim), torch.logcumsumexp(x, dim), equal_nan=True, **tol
    )
    y = torch.randn(5, 6, generator=g).to(dtype)
    yc, yn = y.clone().requires_grad_(), y.neuron().requires_grad_()
    torch.logcumsumexp(yc, dim).sum().backward()
    torch.logcumsumexp(yn, dim).sum().backward()
    assert_same(
        yn.grad, yc.grad, **(tol if dtype != torch.bfloat16 else {"rtol": 5e-2, "atol": 5e-2})
    )
    assert torch_neuronx.get_fallback_ops() == {}


# ---- edge cases of the row reductions (issue 16; tools/mutate.py checks
# that these tests catch planted bugs): sum / mean / amax / amin at lengths at
# each vector boundary (one element, one vector, vector + remainder, over the
# parallel grain), inf, nan, -0.0 and subnormals where CPU defines the result ----


@pytest.mark.parametrize("n", ELT_LENS)
def test_row_sum_mean_lengths(n):
    """Sums over the last dimension (the vector row sum) of rows of every
    length class; rows holding inf, -inf, nan, or both infinities."""
    x = randn(5, n, seed=n) * 3
    assert_same(x.neuron().sum(-1), x.sum(-1), rtol=1e-5, atol=1e-5)
    assert_same(x.neuron().mean(-1), x.mean(-1), rtol=1e-5, atol=1e-6)
    assert_same(x.neuron()[:, 1:].sum(-1), x[:, 1:].sum(-1), rtol=1e-5, atol=1e-5)
    x[1, n - 1] = float("inf")
    x[2, n // 2] = float("nan")
    x[3, 0] = float("-inf")
    x[4, 0], x[4, n - 1] = float("inf"), float("-inf")
    assert_same(x.neuron().sum(-1), x.sum(-1), rtol=1e-5, atol=1e-5, equal_nan=True)
    # leading dimensions (column sums): the same values, reduced over dim 0
    t = x.t().contiguous()
    assert_same(t.neuron().sum(0), t.sum(0), rtol=1e-5, atol=1e-5, equal_nan=True)
    native("sum", "mean")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [1, 1023, 1025, 65536, 3 * 65536 + 123])
def test_contiguous_sum_mean_amax_amin(dtype, n):
    """Sum, mean, amax and amin over contiguous runs (kernels/reduce.c): a
    whole tensor (over 2^16 elements: fixed chunks across the threads,
    merged in order) and rows; lengths around the 1024-element widening
    block; bf16/fp16 widened by the variant's conversion; NaN in the last
    chunk (amax/amin are NaN, as on CPU) and infinities; column sums of
    the rows (the leading-dims path, half types widened row by row)."""
    x = (randn(n, seed=n) * 3).to(dtype)
    # sums: double accumulation rounded once vs CPU's fp32 accumulation
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=8e-3, atol=8e-3)
    for t in (
        x,
        x.reshape(1, n).expand(3, n).contiguous() * torch.tensor([[1.0], [-2.0], [0.5]]).to(dtype),
    ):
        tn, dim = t.neuron(), -1 if t.dim() == 2 else None
        kw = {} if dim is None else {"dim": dim}
        assert_same(tn.sum(**kw).float(), t.float().sum(**kw), **tol)
        assert_same(tn.mean(**kw).float(), t.float().mean(**kw), **tol)
        if dim is not None:  # over the leading dim (column sums): 3 rows of n
            assert_same(tn.sum(0).float(), t.float().sum(0), **tol)
            assert_same(tn.mean(0).float(), t.float().mean(0), **tol)
        for f in (torch.amax, torch.amin):  # exact: no rounding
            assert_same(
                f(tn, **({} if dim is None else {"dim": dim})),
                f(t, **({} if dim is None else {"dim": dim})),
                rtol=0,
                atol=0,
            )
    if n > 8:
        x[n - 5] = float("nan")
        x[n // 3] = float("inf")
        xn = x.neuron()
        for f in (torch.amax, torch.amin, torch.sum):
            assert_same(f(xn).float(), f(x.float()), rtol=0, atol=0, equal_nan=True)
        x[n - 5] = float("-inf")
        assert torch.isnan(x.neuron().sum().cpu()), "inf + -inf is NaN"
        assert_same(torch.amin(x.neuron()), torch.amin(x), rtol=0, atol=0)
    native("sum", "mean", "amax", "amin")


def test_row_sum_cancellation_and_subnormals():
    """Subnormal inputs sum to subnormals (not flushed), -0.0 rows to zero,
    large equal magnitudes of both signs cancel exactly."""
    x = torch.tensor([[1e-40] * 36, [-1e-40] * 35 + [0.0], [-0.0] * 36, [3e37, -3e37] * 18])
    assert_same(x.neuron().sum(-1), x.sum(-1), rtol=0, atol=0)
    assert_same(x.neuron().mean(-1), x.mean(-1), rtol=1e-6, atol=0)
    native("sum", "mean")
