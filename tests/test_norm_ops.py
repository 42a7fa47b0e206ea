"""Softmax and normalization (csrc/aten/norm_ops.cpp) against PyTorch CPU:
softmax / log_softmax and their backward, layer_norm, rms_norm, group_norm
and batch_norm, forward and backward; and their edge cases."""

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import FLOATS, both, gen, grad_check, half_tol, native, randn, rnd, softmax_rows

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")

# ---- softmax --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_family(dtype, dim):
    x = randn(3, 6, 5, dtype=dtype) * 3
    xn = x.neuron()
    for f in (torch.softmax, torch.log_softmax):
        assert_same(f(xn, dim), f(x, dim), **half_tol(dtype))
        assert_same(f(xn.transpose(0, 2), dim), f(x.transpose(0, 2), dim), **half_tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_softmax_backward_and_cross_entropy(dtype):
    x = randn(4, 7, dtype=dtype).requires_grad_()
    xn = x.detach().neuron().requires_grad_()
    g = randn(4, 7, dtype=dtype, seed=3)
    for f in (torch.softmax, torch.log_softmax):
        x.grad = xn.grad = None
        f(x, -1).backward(g)
        f(xn, -1).backward(g.neuron())
        assert_same(xn.grad, x.grad, **half_tol(dtype))
    ops = torch_neuronx.get_fallback_ops()
    assert not any("softmax" in k for k in ops), ops


def test_half_to_float_softmax():
    x = randn(3, 4, dtype=torch.float16)
    got = torch._softmax(x.neuron(), -1, True)
    assert_same(got, torch._softmax(x.float(), -1, False), rtol=1e-3, atol=1e-3)


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


# ---- layer norm -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward(dtype, affine):
    x = randn(3, 4, 8, dtype=dtype).requires_grad_()
    ln = torch.nn.LayerNorm(8, elementwise_affine=affine).to(dtype)
    if affine:
        with torch.no_grad():
            ln.weight.copy_(randn(8, dtype=dtype, seed=5))
            ln.bias.copy_(randn(8, dtype=dtype, seed=6))
    lnn = copy.deepcopy(ln).neuron()
    xn = x.detach().neuron().requires_grad_()
    g = randn(3, 4, 8, dtype=dtype, seed=7)
    y, yn = ln(x), lnn(xn)
    assert_same(yn, y, **half_tol(dtype))
    y.backward(g)
    yn.backward(g.neuron())
    assert_same(xn.grad, x.grad, **half_tol(dtype))
    if affine:
        assert_same(lnn.weight.grad, ln.weight.grad, **half_tol(dtype))
        assert_same(lnn.bias.grad, ln.bias.grad, **half_tol(dtype))
    out, mean, rstd = torch.native_layer_norm(xn.detach(), [4, 8], None, None, 1e-5)
    ro, rm, rr = torch.native_layer_norm(x.detach(), [4, 8], None, None, 1e-5)
    assert_same(mean, rm, **half_tol(dtype))
    assert_same(rstd, rr, **half_tol(dtype))
    ops = torch_neuronx.get_fallback_ops()
    assert not any("norm" in k for k in ops), ops


def test_layer_norm_bad_shape():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        torch.nn.functional.layer_norm(torch.ones(2, 3, device="neuron"), (4,))


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


# ---- group norm / batch norm (composites: nothing falls back) -------------------


@pytest.mark.usefixtures("all_native")
def test_group_norm_and_batch_statistics():
    x = torch.randn(2, 6, 4, 4)
    gn = torch.nn.GroupNorm(3, 6)
    grad_check(
        lambda t: F.group_norm(
            t, 3, gn.weight.detach().to(t.device), gn.bias.detach().to(t.device)
        ),
        x,
    )


@pytest.mark.usefixtures("all_native")
def test_group_norm_module_parameter_grads():
    gc = torch.nn.GroupNorm(2, 4)
    with torch.no_grad():
        gc.weight.uniform_(0.5, 1.5)
        gc.bias.uniform_(-1, 1)
    gn = torch.nn.GroupNorm(2, 4).neuron()
    gn.load_state_dict(gc.state_dict())
    x = torch.randn(3, 4, 5, 5)
    w = torch.randn(3, 4, 5, 5)
    (gc(x) * w).sum().backward()
    (gn(x.neuron()) * w.neuron()).sum().backward()
    assert_same(gn.weight.grad, gc.weight.grad, rtol=1e-4, atol=1e-5)
    assert_same(gn.bias.grad, gc.bias.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm(train, dtype):
    m = torch.nn.BatchNorm2d(4)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
        m.running_mean.uniform_(-0.1, 0.1)
        m.running_var.uniform_(0.8, 1.2)
    mn = torch.nn.BatchNorm2d(4)
    mn.load_state_dict(m.state_dict())
    mn = mn.neuron()
    m.train(train)
    mn.train(train)
    x = (rnd(3, 4, 5, 5) * 2 + 1).to(dtype)
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    with torch.autocast("cpu", enabled=False):
        yc = m.to(dtype)(xc) if dtype != torch.float32 else m(xc)
    yn = mn.to(dtype)(xn) if dtype != torch.float32 else mn(xn)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}
    assert_same(yn, yc, **tol)
    gy = rnd(*yc.shape).to(dtype)
    yc.backward(gy)
    yn.backward(gy.neuron())
    assert_same(xn.grad, xc.grad, **tol)
    assert_same(mn.weight.grad, m.weight.grad, **tol)
    assert_same(mn.bias.grad, m.bias.grad, **tol)
    assert_same(mn.running_mean, m.running_mean, **tol)
    assert_same(mn.running_var, m.running_var, **tol)


# ---- edge cases of softmax (issue 16: bugs planted in the kernels were caught
# only by the model sweep; tools/mutate.py checks that these tests catch them):
# numeric range (rows around 1e4, rows whose exponentials overflow fp32 without
# the max subtraction, tiny and mixed-magnitude rows, -inf entries as in masked
# attention), at row lengths around the vector widths, along the last
# dimension (the fp32 row kernel) and an inner one (the strided path) -----------

# Row lengths: one element, under one AVX2 vector, one AVX-512 vector,
# vector + 1, two vectors (the unrolled body) + remainder, and longer.
SOFTMAX_LENS = [1, 7, 16, 17, 33, 100]


@pytest.mark.parametrize("n", SOFTMAX_LENS)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_numeric_range_last_dim(n, log):
    x = softmax_rows(n, seed=n)
    f = torch.log_softmax if log else torch.softmax
    assert_same(f(x.neuron(), -1), f(x, -1), rtol=1e-5, atol=1e-6, equal_nan=True)
    native("softmax")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_numeric_range_inner_dim(dtype, log):
    """Along dim 0 (inner stride > 1: the generic path), every dtype."""
    x = softmax_rows(17, seed=3).to(dtype)
    t = x.t().contiguous()  # (17, 10): softmax over the 17
    f = torch.log_softmax if log else torch.softmax
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    if dtype == torch.bfloat16 and log:  # log-softmax of 1e4-scale logits: bf16 ulps are ~64
        tol = {"rtol": 1e-2, "atol": 1.0}
    assert_same(f(t.neuron(), 0), f(t, 0), equal_nan=True, **tol)
    # a three-dimensional view, softmax over the middle dimension
    y = x[:8].reshape(2, 4, -1).transpose(1, 2).contiguous()
    assert_same(f(y.neuron(), 1), f(y, 1), equal_nan=True, **tol)
    native("softmax")


def test_softmax_masked_attention_rows():
    """A causal mask of -inf over large scores, as in attention: row i keeps
    the first i + 1 entries; the masked ones are exact zeros."""
    s = randn(4, 37, 37, seed=1) * 60
    mask = torch.ones(37, 37, dtype=torch.bool).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    got = s.neuron().softmax(-1)
    assert_same(got, s.softmax(-1), rtol=1e-5, atol=1e-6)
    assert (got.cpu()[:, mask] == 0).all()
    native("softmax")


@pytest.mark.parametrize("n", [7, 33])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_backward_numeric_range(n, log):
    x = softmax_rows(n, seed=7)[[0, 1, 2, 3, 5, 6, 9, 10]]  # finite rows: finite gradients
    g = randn(*x.shape, seed=8)
    f = torch.log_softmax if log else torch.softmax
    xc = x.clone().requires_grad_()
    xn = x.neuron().requires_grad_()
    f(xc, -1).backward(g)
    f(xn, -1).backward(g.neuron())
    assert_same(xn.grad, xc.grad, rtol=1e-4, atol=1e-5)
    # along an inner dimension (the generic backward)
    xc2 = x.t().contiguous().requires_grad_()
    xn2 = x.t().contiguous().neuron().requires_grad_()
    f(xc2, 0).backward(g.t())
    f(xn2, 0).backward(g.t().neuron())
    assert_same(xn2.grad, xc2.grad, rtol=1e-4, atol=1e-5)
    native("softmax")


# ---- edge cases of layer_norm (kernels/layer_norm.c: the fp32 vector rows,
# the generic double rows, the column pass of the weight/bias gradients),
# rms_norm, group_norm (layer norm over N * groups rows) and batch_norm,
# forward and backward: row lengths 1, 7, 16, 17, 33, 100 and 40007 (over the
# parallel grain), enough rows to split over threads, rows of a 1e4 offset
# with a unit spread and of -30 with a 1e-3 spread (a one-pass E[x^2] - E[x]^2
# cancels to garbage), constant rows (variance 0: eps decides), tiny and huge
# rows; transposed, offset and stepped inputs and weights; weight/bias None
# and non-trivial -----------------------------------------------------------------


def close_rows(got, want, tight, loose, loose_rows):
    """Rows in loose_rows (the ill-conditioned ones, whose fp32 result is only
    good to the rounding of a 1e4-scale mean) get an absolute tolerance of
    `loose` times the largest magnitude there; the rest `tight`."""
    got, want = got.cpu().float(), want.float()
    mask = torch.zeros(got.shape[0], dtype=torch.bool)
    mask[loose_rows] = True
    torch.testing.assert_close(got[~mask], want[~mask], equal_nan=True, **tight)
    if mask.any():
        w = want[mask]
        scale = float(w[w.isfinite()].abs().max()) if w.isfinite().any() else 1.0
        torch.testing.assert_close(
            got[mask], w, rtol=0, atol=loose * max(scale, 1.0), equal_nan=True
        )


# One element, under one AVX2 vector, one AVX-512 vector, vector + 1, the
# unrolled body (16 floats) + remainder, longer, over the parallel grain.
NORM_LENS = [1, 7, 16, 17, 33, 100, 40007]

# Row regimes (the row index picks one); CANCEL are the rows whose fp32
# statistics need the two-pass form.
REGIMES = 8
CANCEL = [1, 2]


def norm_rows(n, rows, seed=0):
    """rows x n: REGIMES regimes repeated (rows >= REGIMES)."""
    b = torch.randn(REGIMES, n, generator=gen(seed))
    r = [
        b[0] * 3 + 0.5,  # ordinary
        b[1] + 1e4,  # a 1e4 offset, unit spread: E[x^2] = 1e8, one ulp = 8
        b[2] * 1e-3 - 30.0,  # a small spread around -30
        torch.full((n,), 2.5),  # constant: variance 0, rstd = 1/sqrt(eps)
        b[4] * 1e-20,  # tiny: the variance is under eps
        b[5] * 1e15,  # huge (its square sums stay finite in fp32)
        torch.where(torch.arange(n) % 5 == 0, b[6] * 100, b[6] * 1e-2),  # mixed
        b[7] - 7.0,
    ]
    base = torch.stack(r)
    reps = (rows + REGIMES - 1) // REGIMES
    return base.repeat(reps, 1)[:rows]


def norm_rowcount(n):
    """Enough rows that the forward (grain 4096 / n rows) splits over two
    threads, at least one of each regime."""
    return max(REGIMES, min(2 * (4096 // n + 1) + 3, 1200))


def cancel_rows(rows):
    return [i for i in range(rows) if i % REGIMES in CANCEL]


F32_TIGHT = {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("n", NORM_LENS)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_rows_fp32(n, affine):
    rows = norm_rowcount(n)
    x = norm_rows(n, rows, seed=n)
    w = randn(n, seed=1) if affine != "none" else None
    b = randn(n, seed=2) if affine == "both" else None
    gy = randn(rows, n, seed=3)
    xc, xn = both(x)
    wc, wn = both(w)
    bc, bn = both(b)
    yc = F.layer_norm(xc, (n,), wc, bc, 1e-5)
    yn = F.layer_norm(xn, (n,), wn, bn, 1e-5)
    loose = cancel_rows(rows)
    close_rows(yn.detach(), yc.detach(), F32_TIGHT, 3e-2, loose)
    yc.backward(gy)
    yn.backward(gy.neuron())
    # n = 1: the exact gradient is 0; CPU's fp32 leaves rounding of terms
    # scaled by 1/sqrt(eps), so the oracle there is the exact value
    want = xc.grad if n > 1 else torch.zeros_like(xc.grad)
    close_rows(xn.grad, want, {"rtol": 1e-3, "atol": 1e-3}, 3e-2, loose)
    # the column pass sums over every row: compare the well-conditioned rows only
    keep = [i for i in range(rows) if i not in loose]
    if w is not None or b is not None:
        xk = x[keep]
        xc2, xn2 = both(xk)
        wc2, wn2 = both(w)
        bc2, bn2 = both(b)
        F.layer_norm(xc2, (n,), wc2, bc2, 1e-5).backward(gy[keep])
        F.layer_norm(xn2, (n,), wn2, bn2, 1e-5).backward(gy[keep].neuron())
        tol = {"rtol": 1e-4, "atol": 1e-3 * len(keep) ** 0.5}
        if w is not None:  # n = 1: xhat and so this gradient are exactly 0
            assert_same(wn2.grad, wc2.grad if n > 1 else torch.zeros_like(wc2.grad), **tol)
        if b is not None:
            assert_same(bn2.grad, bc2.grad, **tol)
    # the saved statistics
    _, mc, rc = torch.native_layer_norm(x, (n,), w, b, 1e-5)
    _, mn, rn = torch.native_layer_norm(x.neuron(), (n,), wn, bn, 1e-5)
    assert_same(mn, mc, rtol=1e-5, atol=1e-5)
    close_rows(rn, rc, {"rtol": 1e-4, "atol": 0}, 3e-2, loose)
    native("layer_norm")


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [7, 33, 100])
def test_layer_norm_rows_generic_dtypes(dtype, n):
    """The generic (double accumulation) rows, forward and backward."""
    rows = 40
    x = norm_rows(n, rows, seed=n)
    keep = [i for i in range(rows) if i % REGIMES in (0, 3, 4, 6, 7)]
    if dtype == torch.float64:
        keep = list(range(rows))  # every regime is well within fp64
    x = x[keep].to(dtype)
    w, b = randn(n, seed=4, dtype=dtype), randn(n, seed=5, dtype=dtype)
    gy = randn(len(keep), n, seed=6, dtype=dtype)
    xc, xn = both(x)
    wc, wn = both(w)
    bc, bn = both(b)
    yc = F.layer_norm(xc, (n,), wc, bc)
    yn = F.layer_norm(xn, (n,), wn, bn)
    tol = {"rtol": 1e-7, "atol": 1e-7} if dtype == torch.float64 else {"rtol": 2e-2, "atol": 3e-2}
    assert_same(yn, yc, **tol)
    yc.backward(gy)
    yn.backward(gy.neuron())
    if dtype == torch.float64:
        tol = {"rtol": 1e-6, "atol": 1e-4}  # the constant rows: gradients of 1/sqrt(eps)
    else:
        tol = {"rtol": 5e-2, "atol": 0.5}  # bf16 rounding of the ~300-magnitude eps rows
    assert_same(xn.grad, xc.grad, **tol)
    assert_same(wn.grad, wc.grad, **tol)
    assert_same(bn.grad, bc.grad, **tol)
    native("layer_norm")


def layer_norm_layouts(x):
    """x (rows, n) in other layouts with the same values."""
    rows, n = x.shape
    big = torch.zeros(rows + 3, n + 9)
    big[3:, 5 : 5 + n] = x
    return {
        "transposed": x.t().contiguous().t(),
        "offset": big[3:, 5 : 5 + n],
        "stepped": torch.stack([x, torch.zeros_like(x)], 1).view(2 * rows, n)[::2],
    }


@pytest.mark.parametrize("layout", ["transposed", "offset", "stepped"])
@pytest.mark.parametrize("n", [17, 100])
def test_layer_norm_noncontiguous(layout, n):
    x = norm_rows(n, 24, seed=8)[[0, 3, 4, 6, 7, 8, 11, 12, 14, 15]]
    wbig, bbig = randn(2 * n, seed=9), randn(n + 4, seed=10)
    w, b = wbig[::2], bbig[4:]  # a stepped weight, an offset bias
    xin = layer_norm_layouts(x)[layout]
    gy = randn(n, x.shape[0], seed=11).t()  # a transposed output gradient
    xc, xn = both(xin)
    wc, wn = both(w)
    bc, bn = both(b)
    yc, yn = F.layer_norm(xc, (n,), wc, bc), F.layer_norm(xn, (n,), wn, bn)
    assert_same(yn, yc, **F32_TIGHT)
    yc.backward(gy)
    yn.backward(gy.neuron())
    for a, c in ((xn, xc), (wn, wc), (bn, bc)):
        assert_same(a.grad, c.grad, rtol=1e-4, atol=1e-4)
    native("layer_norm")


def test_layer_norm_over_two_dims_and_streamed_offset_rows():
    """normalized_shape of two dims (rows of 4 x 25); and outputs over the
    16 MiB streaming threshold (the pipelined AVX-512 form for 4096) whose
    rows carry a 1e4 offset."""
    x = norm_rows(100, 30, seed=12)[[0, 3, 6, 7, 8, 11]].view(6, 4, 25)
    w, b = randn(4, 25, seed=13), randn(4, 25, seed=14)
    assert_same(
        F.layer_norm(x.neuron(), (4, 25), w.neuron(), b.neuron()),
        F.layer_norm(x, (4, 25), w, b),
        **F32_TIGHT,
    )
    for cols in (4096, 4099):
        big = torch.randn(1030, cols, generator=gen(cols)) + 1e4
        big[::2] = big[::2] * 1e-3 - 30.0  # alternate rows: small spread around -30
        y = F.layer_norm(big.neuron(), (cols,))
        want = F.layer_norm(big.double(), (cols,)).float()
        cpu = F.layer_norm(big, (cols,))
        # no worse than fp32 on the CPU, within a small factor
        err, cerr = (y.cpu() - want).abs().max(), (cpu - want).abs().max()
        assert err <= 4 * cerr + 1e-4, (float(err), float(cerr))
    native("layer_norm")


@pytest.mark.parametrize("n", [1, 7, 17, 33, 40007])
@pytest.mark.parametrize("weight", [False, True])
def test_rms_norm(n, weight):
    rows = min(norm_rowcount(n), 300)
    x = norm_rows(n, rows, seed=20 + n)
    x[1::REGIMES] *= 1e-3  # 10-scale offset rows: fine for rms
    w = randn(n, seed=21) if weight else None
    big = torch.zeros(rows, n + 3)
    big[:, 3:] = x
    xin = big[:, 3:]  # offset rows of stride n + 3
    gy = randn(rows, n, seed=22)
    xc, xn = both(xin)
    wc, wn = both(w)
    yc = F.rms_norm(xc, (n,), wc, 1e-6)
    yn = F.rms_norm(xn, (n,), wn, 1e-6)
    assert_same(yn, yc, rtol=1e-4, atol=1e-5)
    yc.backward(gy)
    yn.backward(gy.neuron())
    # rows of 1e15 have gradients of ~1e-15: relative comparison
    assert_same(xn.grad, xc.grad, rtol=1e-3, atol=1e-5)
    if weight:
        assert_same(wn.grad, wc.grad, rtol=1e-4, atol=1e-3 * rows**0.5)
    native()


GN_CASES = [
    # (N, C, spatial, groups)
    (3, 6, (), 3),  # HxW = 1
    (2, 6, (17,), 1),
    (2, 6, (17,), 6),
    (2, 8, (7, 7), 4),
    (1, 4, (101, 100), 2),  # rows of 20200 elements
]


@pytest.mark.parametrize("case", range(len(GN_CASES)))
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm(case, affine):
    N, C, sp, G = GN_CASES[case]
    x = randn(N, C, *sp, seed=30 + case) * 2 + 0.5
    x[0, : C // G] += 1e4  # group 0 of sample 0: a 1e4 offset
    w = randn(C, seed=31) if affine else None
    b = randn(C, seed=32) if affine else None
    gy = randn(*x.shape, seed=33)
    xc, xn = both(x)
    wc, wn = both(w)
    bc, bn = both(b)
    yc, yn = F.group_norm(xc, G, wc, bc), F.group_norm(xn, G, wn, bn)
    # the offset group's fp32 mean is good to ~1e-3 of the unit spread
    assert_same(yn, yc, rtol=1e-4, atol=3e-3)
    yc.backward(gy)
    yn.backward(gy.neuron())
    assert_same(xn.grad, xc.grad, rtol=1e-3, atol=3e-3)
    if affine:
        red = x.numel() // C
        assert_same(wn.grad, wc.grad, rtol=1e-3, atol=3e-3 * red**0.5)
        assert_same(bn.grad, bc.grad, rtol=1e-4, atol=1e-4 * red**0.5)
    native("norm")


def test_group_norm_channels_last_and_bf16():
    x = randn(2, 8, 5, 6, seed=34) - 3
    w, b = randn(8, seed=35), randn(8, seed=36)
    xl = x.contiguous(memory_format=torch.channels_last)
    assert_same(
        F.group_norm(xl.neuron(), 4, w.neuron(), b.neuron()),
        F.group_norm(xl, 4, w, b),
        **F32_TIGHT,
    )
    xb, wb, bb = x.bfloat16(), w.bfloat16(), b.bfloat16()
    assert_same(
        F.group_norm(xb.neuron(), 2, wb.neuron(), bb.neuron()),
        F.group_norm(xb, 2, wb, bb),
        rtol=2e-2,
        atol=3e-2,
    )
    native("norm")


def _against_float64(fn, inputs, gy):
    """fn's output and input gradients on CPU float64, CPU fp32 and neuron
    fp32: for each, (neuron's rms error, CPU fp32's rms error) against
    float64."""
    runs = {}
    for key, dev, dt in (
        ("ref", "cpu", torch.float64),
        ("cpu", "cpu", None),
        ("neu", "neuron", None),
    ):
        xs = [t.detach().to(dt or t.dtype).to(dev).requires_grad_() for t in inputs]
        y = fn(*xs)
        y.backward(gy.to(dt or gy.dtype).to(dev))
        runs[key] = [y.detach().cpu().double()] + [x.grad.cpu().double() for x in xs]

    def rmse(a, b):
        return float((a - b).pow(2).mean().sqrt())

    return [
        (rmse(n, r), rmse(c, r))
        for r, c, n in zip(runs["ref"], runs["cpu"], runs["neu"], strict=True)
    ]


def test_group_norm_1x1_maps_against_float64():
    # BiT's late stages (the model sweep's BitModel): GroupNorm over 1x1 maps
    # at batch 2, 16 values per group, activations of size ~20
    x = randn(2, 512, 1, 1, seed=50) * 20 - 0.2
    w, b, gy = randn(512, seed=51), randn(512, seed=52), randn(2, 512, 1, 1, seed=53) * 1e-3
    errs = _against_float64(lambda x, w, b: F.group_norm(x, 32, w, b), [x, w, b], gy)
    for got, cpu in errs:  # output, dx, dweight, dbias
        assert got <= 2 * cpu + 1e-12, errs
    native("norm")


def test_batch_norm_two_values_per_channel_against_float64():
    # HGNetV2's stage 3 at batch 2: 2 values per channel whose variance is
    # below eps (1e-8 .. 1e-4), so the normalised output is far from +-1
    x = randn(2, 384, 1, 1, seed=54) * torch.logspace(-4, -2, 384).view(1, -1, 1, 1)
    w, b, gy = randn(384, seed=55), randn(384, seed=56), randn(2, 384, 1, 1, seed=57)
    errs = _against_float64(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-5), [x, w, b], gy
    )
    for got, cpu in errs:
        assert got <= 2 * cpu + 1e-12, errs
    native("norm")


BN_SHAPES = [(5, 3), (4, 3, 17), (2, 3, 7, 5), (1, 3, 40007)]


@pytest.mark.parametrize("shape", BN_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_train(shape, affine):
    x = randn(*shape, seed=40 + len(shape))
    x[:, 1] = x[:, 1] + 1e4  # channel 1: a 1e4 offset with a unit spread
    x[:, 2] = x[:, 2] * 1e-3 - 30.0  # channel 2: a small spread around -30
    w = randn(3, seed=41) if affine else None
    b = randn(3, seed=42) if affine else None
    gy = randn(*shape, seed=43)
    xc, xn = both(x)
    wc, wn = both(w)
    bc, bn = both(b)
    rm = torch.tensor([0.5, 9000.0, -29.0])
    rv = torch.tensor([2.0, 3.0, 1e-4])
    rmc, rmn = both(rm, grad=False)
    rvc, rvn = both(rv, grad=False)
    for _ in range(2):  # the running statistics update twice
        yc = F.batch_norm(xc, rmc, rvc, wc, bc, training=True, momentum=0.3, eps=1e-5)
        yn = F.batch_norm(xn, rmn, rvn, wn, bn, training=True, momentum=0.3, eps=1e-5)
    # channel 1's fp32 mean is good to ~1e-3 of its unit spread
    assert_same(yn, yc, rtol=1e-4, atol=5e-3)
    assert_same(rmn, rmc, rtol=1e-6, atol=1e-5)
    assert_same(rvn, rvc, rtol=1e-3, atol=1e-6)
    yc.backward(gy)
    yn.backward(gy.neuron())
    red = x.numel() // 3
    # channel 2's gradients are ~300x the others (rstd ~ 1/sqrt(eps)): per
    # channel, relative to its largest
    for c in range(3):
        want = xc.grad[:, c]
        tol = 1e-4 * float(want.abs().max()) + 1e-5
        torch.testing.assert_close(xn.grad[:, c].cpu(), want, rtol=1e-3, atol=tol)
    if affine:
        assert_same(wn.grad, wc.grad, rtol=1e-3, atol=5e-3 * red**0.5)
        assert_same(bn.grad, bc.grad, rtol=1e-4, atol=1e-4 * red**0.5)
    native("norm")


@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
def test_batch_norm_eval_and_layouts(layout):
    x = randn(3, 4, 6, 5, seed=44) * 2 + 1
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    else:
        x = x.transpose(2, 3).contiguous().transpose(2, 3)
    w, b = randn(4, seed=45), randn(4, seed=46)
    rm, rv = randn(4, seed=47), torch.rand(4, generator=gen(48)) + 0.5
    gy = randn(3, 4, 6, 5, seed=49)
    for training in (False, True):
        xc, xn = both(x)
        wc, wn = both(w)
        rmc, rmn = both(rm, grad=False)
        rvc, rvn = both(rv, grad=False)
        yc = F.batch_norm(xc, rmc, rvc, wc, b, training=training)
        yn = F.batch_norm(xn, rmn, rvn, wn, b.neuron(), training=training)
        assert_same(yn, yc, **F32_TIGHT)
        yc.backward(gy)
        yn.backward(gy.neuron())
        assert_same(xn.grad, xc.grad, **F32_TIGHT)
        assert_same(wn.grad, wc.grad, rtol=1e-4, atol=1e-3)
        assert_same(rmn, rmc)
        assert_same(rvn, rvc)
    xb = x.bfloat16()
    yb = F.batch_norm(xb.neuron(), None, None, w.bfloat16().neuron(), None, training=True)
    assert_same(
        yb, F.batch_norm(xb, None, None, w.bfloat16(), None, training=True), rtol=2e-2, atol=3e-2
    )
    native("norm")


# ---- weight norm (the fused _weight_norm_interface) -------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 2, -1])
def test_weight_norm_interface_forward_backward(dtype, dim):
    """torch._weight_norm takes the fused interface for the first and last
    dim (wav2vec2's positional conv is weight-normed over dim 2 of a 3-D
    weight: the last), the composite for the rest and dim=None (-1)."""
    v = randn(8, 4, 3, seed=1, dtype=dtype)
    g_shape = [1, 1, 1]
    if dim != -1:
        g_shape[dim] = v.shape[dim]
    g = randn(*g_shape, seed=2, dtype=dtype).abs() + 0.5
    tol = half_tol(dtype) if dtype == torch.bfloat16 else {}
    grad_check(lambda a, b: torch._weight_norm(a, b, dim), v, g, tol=tol)
    if dim in (0, 2):
        w, n = torch._weight_norm_interface(v.neuron(), g.neuron(), dim)
        wc, nc = torch._weight_norm_interface(v, g, dim)
        assert n.dtype == nc.dtype and n.shape == nc.shape
        assert_same(w, wc, **tol)
        assert_same(n, nc, **tol)
    native("weight_norm")


def test_weight_norm_module_trains_like_cpu():
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(8, 8, 5, padding=2), dim=2)
    x = randn(2, 8, 16, seed=3)
    cn = copy.deepcopy(conv).neuron()
    yc, yn = conv(x), cn(x.neuron())
    assert_same(yn, yc, rtol=1e-5, atol=1e-6)
    yc.square().sum().backward()
    yn.square().sum().backward()
    for (name, pc), pn in zip(conv.named_parameters(), cn.parameters()):
        assert_same(pn.grad, pc.grad, rtol=1e-4, atol=1e-5), name
    native()
