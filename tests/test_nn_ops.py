"""Native optimizer arithmetic, softmax family and sum/mean against CPU."""

import copy

import pytest
import torch
from conftest import assert_same

import torch_neuronx

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def tol(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return {"rtol": 2e-2, "atol": 2e-2}
    return {"rtol": 1e-5, "atol": 1e-6}


def rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture(autouse=True)
def _track():
    torch_neuronx.clear_op_tracking()
    yield


@pytest.mark.parametrize("dtype", FLOATS)
def test_addcmul_addcdiv_lerp(dtype):
    a, b, c = (
        rand(4, 5, dtype=dtype),
        rand(4, 5, dtype=dtype, seed=1),
        rand(5, dtype=dtype, seed=2).abs() + 0.5,
    )
    an, bn, cn = a.neuron(), b.neuron(), c.neuron()
    assert_same(
        torch.addcmul(an, bn, cn, value=0.3), torch.addcmul(a, b, c, value=0.3), **tol(dtype)
    )
    assert_same(torch.addcdiv(an, bn, cn, value=-2), torch.addcdiv(a, b, c, value=-2), **tol(dtype))
    for w in (0.1, 0.9):
        assert_same(torch.lerp(an, bn, w), torch.lerp(a, b, w), **tol(dtype))
    x = an.clone()
    x.addcmul_(bn, bn, value=0.5).addcdiv_(bn, cn, value=0.1).lerp_(bn, 0.25)
    ref = a.clone().addcmul_(b, b, value=0.5).addcdiv_(b, c, value=0.1).lerp_(b, 0.25)
    assert_same(x, ref, **tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_family(dtype, dim):
    x = rand(3, 6, 5, dtype=dtype) * 3
    xn = x.neuron()
    for f in (torch.softmax, torch.log_softmax):
        assert_same(f(xn, dim), f(x, dim), **tol(dtype))
        assert_same(f(xn.transpose(0, 2), dim), f(x.transpose(0, 2), dim), **tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_softmax_backward_and_cross_entropy(dtype):
    x = rand(4, 7, dtype=dtype).requires_grad_()
    xn = x.detach().neuron().requires_grad_()
    g = rand(4, 7, dtype=dtype, seed=3)
    for f in (torch.softmax, torch.log_softmax):
        x.grad = xn.grad = None
        f(x, -1).backward(g)
        f(xn, -1).backward(g.neuron())
        assert_same(xn.grad, x.grad, **tol(dtype))
    ops = torch_neuronx.get_fallback_ops()
    assert not any("softmax" in k for k in ops), ops


def test_half_to_float_softmax():
    x = rand(3, 4, dtype=torch.float16)
    got = torch._softmax(x.neuron(), -1, True)
    assert_same(got, torch._softmax(x.float(), -1, False), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
def test_sum(dtype):
    x = (rand(3, 4, 5) * 10).to(dtype)
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
    x = rand(3, 4, 5, dtype=dtype)
    xn = x.neuron()
    assert_same(xn.mean(), x.mean(), **tol(dtype))
    assert_same(xn.mean((0, 2), keepdim=True), x.mean((0, 2), keepdim=True), **tol(dtype))
    assert_same(xn.mean(-1), x.mean(-1), **tol(dtype))
    e = torch.empty(0, 3)
    assert_same(e.neuron().mean(0), e.mean(0), equal_nan=True)
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError):
        torch.arange(4, device="neuron").mean()  # integers: as on CPU, an error


def test_adamw_step_matches_cpu_without_fallbacks_in_the_update():
    torch.manual_seed(0)
    p = torch.randn(10, 4, requires_grad=True)
    pn = p.detach().neuron().requires_grad_()
    oc, on = torch.optim.AdamW([p], lr=0.1), torch.optim.AdamW([pn], lr=0.1)
    for i in range(3):
        g = torch.randn(10, 4, generator=torch.Generator().manual_seed(i))
        p.grad, pn.grad = g.clone(), g.neuron()
        oc.step()
        on.step()
    assert_same(pn.detach(), p.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward(dtype, affine):
    x = rand(3, 4, 8, dtype=dtype).requires_grad_()
    ln = torch.nn.LayerNorm(8, elementwise_affine=affine).to(dtype)
    if affine:
        with torch.no_grad():
            ln.weight.copy_(rand(8, dtype=dtype, seed=5))
            ln.bias.copy_(rand(8, dtype=dtype, seed=6))
    lnn = copy.deepcopy(ln).neuron()
    xn = x.detach().neuron().requires_grad_()
    g = rand(3, 4, 8, dtype=dtype, seed=7)
    y, yn = ln(x), lnn(xn)
    assert_same(yn, y, **tol(dtype))
    y.backward(g)
    yn.backward(g.neuron())
    assert_same(xn.grad, x.grad, **tol(dtype))
    if affine:
        assert_same(lnn.weight.grad, ln.weight.grad, **tol(dtype))
        assert_same(lnn.bias.grad, ln.bias.grad, **tol(dtype))
    out, mean, rstd = torch.native_layer_norm(xn.detach(), [4, 8], None, None, 1e-5)
    ro, rm, rr = torch.native_layer_norm(x.detach(), [4, 8], None, None, 1e-5)
    assert_same(mean, rm, **tol(dtype))
    assert_same(rstd, rr, **tol(dtype))
    ops = torch_neuronx.get_fallback_ops()
    assert not any("norm" in k for k in ops), ops


def test_layer_norm_bad_shape():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        torch.nn.functional.layer_norm(torch.ones(2, 3, device="neuron"), (4,))


def test_large_softmax_streams_its_output():
    """Outputs over 16 MiB leave through streaming stores; values as CPU's,
    also for a row length that is not a multiple of the vector width."""
    torch_neuronx.clear_op_tracking()
    for cols in (4096, 4099):  # 4096: the pipelined AVX-512 form
        x = torch.randn(1100, cols, generator=torch.Generator().manual_seed(cols))
        x[3, 7] = float("nan")  # a NaN row: all NaN
        x[550] = float("-inf")  # a row of -inf: NaN, as CPU's
        x[551, ::3] = float("-inf")  # -inf entries: exact zeros
        x[1099, 5] = 1e30  # one dominant entry in the last row
        x[549, 0] = 90.0  # the row before a thread boundary
        assert_same(x.neuron().softmax(-1), x.softmax(-1), rtol=1e-5, atol=1e-7, equal_nan=True)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("cols", [4099, 4096])  # 4096: the pipelined AVX-512 form
@pytest.mark.parametrize("affine", [True, False])
def test_large_layer_norm_streams_its_output(cols, affine):
    torch_neuronx.clear_op_tracking()
    g = torch.Generator().manual_seed(9)
    x = torch.randn(1100, cols, generator=g) * 3 + 1
    x[5, 3] = float("nan")  # a NaN row stays NaN, its neighbours untouched
    w, b = (
        (torch.randn(cols, generator=g), torch.randn(cols, generator=g)) if affine else (None, None)
    )
    wn, bn = (w.neuron(), b.neuron()) if affine else (None, None)
    y, mean, rstd = torch.native_layer_norm(x.neuron(), (cols,), wn, bn, 1e-5)
    yc, meanc, rstdc = torch.native_layer_norm(x, (cols,), w, b, 1e-5)
    assert_same(y, yc, rtol=1e-4, atol=1e-4, equal_nan=True)
    assert_same(mean, meanc, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert_same(rstd, rstdc, rtol=1e-4, atol=1e-5, equal_nan=True)
    assert torch_neuronx.get_fallback_ops() == {}


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
