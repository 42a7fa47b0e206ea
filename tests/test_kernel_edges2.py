"""Kernel edge cases against PyTorch CPU (the oracle), part two (issue 16):
the families test_kernel_edges.py does not cover.

- layer_norm (kernels/layer_norm.c: the fp32 vector rows, the generic
  double rows, the column pass of the weight/bias gradients), rms_norm,
  group_norm (layer norm over N * groups rows) and batch_norm, forward and
  backward: row lengths 1, 7, 16, 17, 33, 100 and 40007 (over the parallel
  grain), enough rows to split over threads, rows of a 1e4 offset with a
  unit spread and of -30 with a 1e-3 spread (a one-pass E[x^2] - E[x]^2
  cancels to garbage), constant rows (variance 0: eps decides), tiny and
  huge rows; transposed, offset and stepped inputs and weights; weight/bias
  None and non-trivial;
- scaled_dot_product_attention (kernels/attention.c: blocks of 128 queries,
  tiles of 128 keys, online softmax) forward and backward: sequence lengths
  1, 17, 65, 130 and 257 (one, two and three tiles with remainders), causal
  with equal and unequal lengths, boolean and float masks with -inf entries
  and fully masked rows, logits of about 1e3 whose maximum moves from tile
  to tile (the running rescale), q/k/v transposed from [B, L, H, E], bf16;
- conv1d / conv2d / conv_transpose (im2col / col2im + GEMM): stride,
  padding, dilation, groups, bias, channels-last and transposed inputs,
  sizes over several GEMM tiles, bf16;
- max / avg / adaptive-avg pooling (kernels/spatial.c): ceil_mode, padding,
  dilation, windows of -inf and NaN, ties, non-contiguous inputs, indices;
- optimizers: Adam / AdamW (fused kernel, foreach, for-loop) and SGD (fused,
  foreach) with weight decay, amsgrad, maximize, momentum, dampening and
  nesterov; parameters of 1, 17 and 40007 elements (the fused kernel's
  parallel grain is 16384), fp32 and bf16; parameters and optimizer state
  compared after several steps.

test_isa_variants.py runs this file again under the reference and AVX2
variants."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import torch_neuronx


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


@pytest.fixture(autouse=True)
def _track():
    torch_neuronx.clear_op_tracking()
    yield


def native(*names):
    """None of the named ops fell back to CPU."""
    ops = torch_neuronx.get_fallback_ops()
    bad = [k for k in ops if any(n in k for n in names)] if names else list(ops)
    assert not bad, ops


def both(t, grad=True):
    """A CPU leaf and a neuron leaf with the same values (None stays None)."""
    if t is None:
        return None, None
    c, n = t.detach().clone(), t.detach().neuron()
    if grad:
        c.requires_grad_()
        n.requires_grad_()
    return c, n


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


# ---- layer norm / rms norm -------------------------------------------------------

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


# ---- group norm / batch norm -----------------------------------------------------


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


# ---- scaled dot product attention --------------------------------------------

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"


def sdpa_run(dev, q, k, v, dtype=torch.float32, layout="bhle", **kw):
    """Output and q/k/v gradients. layout "blhe": q/k/v stored [B, L, H, E]
    and transposed to [B, H, L, E] (the usual HF layout: non-contiguous)."""
    leaves = []
    args = []
    for t in (q, k, v):
        if layout == "blhe":
            leaf = t.transpose(1, 2).contiguous().to(dev, dtype, copy=True).requires_grad_()
            args.append(leaf.transpose(1, 2))
        else:
            leaf = t.to(dev, dtype, copy=True).requires_grad_()
            args.append(leaf)
        leaves.append(leaf)
    kw = {
        a: (
            b.to(dev, dtype)
            if torch.is_tensor(b) and b.is_floating_point()
            else b.to(dev)
            if torch.is_tensor(b)
            else b
        )
        for a, b in kw.items()
    }
    if dev == "cpu":
        o = F.scaled_dot_product_attention(*args, **kw)
    else:
        with sdpa_kernel(SDPBackend.OVERRIDEABLE):  # the fused kernel or an error
            o = F.scaled_dot_product_attention(*args, **kw)
    wgt = torch.linspace(-1, 1, o.numel()).view(o.shape).to(dev)
    (o.float() * wgt).sum().backward()
    return [t.detach().cpu().float() for t in (o, *(x.grad for x in leaves))]


def sdpa_compare(q, k, v, tol, f64=False, **kw):
    """The fused kernel against CPU; with f64, against CPU in float64 with
    an absolute tolerance of tol["atol"] times each result's largest
    magnitude (where CPU's fp32 is itself further off than the kernel)."""
    with profile(activities=[ProfilerActivity.CPU]) as p:
        got = sdpa_run("neuron", q, k, v, **kw)
    names = {e.key for e in p.key_averages()}
    assert FUSED in names and FUSED + "_backward" in names
    if f64:
        want = sdpa_run("cpu", q, k, v, **dict(kw, dtype=torch.float64))
    else:
        want = sdpa_run("cpu", q, k, v, **kw)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        t = dict(tol, atol=tol["atol"] * float(b.abs().max())) if f64 else tol
        torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}", **t)
    native()


def qkv(lq, lk, e=16, ev=None, heads=2, seed=0, scale=1.0):
    g = gen(seed)
    return (
        torch.randn(1, heads, lq, e, generator=g) * scale,
        torch.randn(1, heads, lk, e, generator=g),
        torch.randn(1, heads, lk, ev or e, generator=g),
    )


ATT_TOL = {"rtol": 1e-4, "atol": 5e-5}
SEQ = [1, 17, 65, 130, 257]


@pytest.mark.parametrize("lq", SEQ)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sdpa_lengths(lq, causal):
    """Square and (for the full case) unequal lengths: lk = 2 * lq + 3 puts
    the last key tile's remainder elsewhere."""
    q, k, v = qkv(lq, lq, e=24, ev=20, seed=lq)
    sdpa_compare(q, k, v, ATT_TOL, is_causal=causal)
    if not causal:
        q, k, v = qkv(lq, 2 * lq + 3, seed=lq + 1)
        sdpa_compare(q, k, v, ATT_TOL)


@pytest.mark.parametrize("lq,lk", [(130, 17), (17, 130), (1, 257), (257, 65)])
def test_sdpa_causal_unequal_lengths(lq, lk):
    """Causal with lq != lk: PyTorch's top-left alignment (query i sees keys
    0..i); queries past lk see every key."""
    q, k, v = qkv(lq, lk, seed=lq * 7 + lk)
    sdpa_compare(q, k, v, ATT_TOL, is_causal=True)


def test_sdpa_large_logits_max_moves_between_tiles():
    """Scores of ~1e3 whose row maximum grows from key tile to key tile: a
    kernel that skips the running rescale (or rescales the sum but not the
    accumulator) is off by factors of exp(hundreds)."""
    lq, lk = 65, 300
    q, k, v = qkv(lq, lk, e=8, seed=50)
    q = q.abs() + 1.0  # positive queries: scores grow with the key scale
    ramp = torch.linspace(0.5, 30.0, lk).view(1, 1, lk, 1)
    k = k.abs() * ramp + 0.1  # later keys score higher
    tol = {"rtol": 1e-4, "atol": 1e-4}  # of the largest magnitude; CPU's fp32 is 4x further off
    sdpa_compare(q, k, v, tol, f64=True)
    sdpa_compare(q * 3, k.flip(2), v, tol, f64=True)  # the max in the first tile


def test_sdpa_masks_with_minus_inf_rows():
    """Boolean and float masks with many masked entries, -inf in the float
    mask, and fully masked query rows (zeros, as the CPU math path gives),
    at two key tiles with a remainder; broadcast masks ([L, S] and a
    key-padding [B, 1, 1, S])."""
    lq, lk = 70, 150
    q, k, v = qkv(lq, lk, seed=51)
    g = gen(52)
    bmask = torch.rand(lq, lk, generator=g) > 0.7  # 70% masked
    bmask[3] = False  # a fully masked row
    bmask[4, :] = False
    bmask[4, 140] = True  # only a key in the last tile
    sdpa_compare(q, k, v, ATT_TOL, attn_mask=bmask)
    fmask = torch.randn(1, 2, lq, lk, generator=g) * 3
    fmask[..., ::3] = float("-inf")
    fmask[0, 1, 9] = float("-inf")  # fully masked (head 1, query 9)
    fmask[0, 0, 10, :128] = float("-inf")  # only the second tile is visible
    sdpa_compare(q, k, v, ATT_TOL, attn_mask=fmask)
    pad = torch.ones(1, 1, 1, lk, dtype=torch.bool)
    pad[..., 100:] = False  # key padding: the second tile entirely masked
    sdpa_compare(q, k, v, ATT_TOL, attn_mask=pad)


@pytest.mark.parametrize("lq", [17, 130])
def test_sdpa_transposed_qkv_bf16_gqa(lq):
    """q/k/v transposed from [B, L, H, E] (strides of H * E between
    positions), in fp32 and bf16; grouped-query attention with a causal
    mask; an explicit scale."""
    q, k, v = qkv(lq, lq + 5, e=32, heads=4, seed=53)
    sdpa_compare(q, k, v, ATT_TOL, layout="blhe")
    sdpa_compare(q, k, v, ATT_TOL, layout="blhe", is_causal=True, scale=0.05)
    sdpa_compare(q, k, v, {"rtol": 3e-2, "atol": 3e-2}, dtype=torch.bfloat16, layout="blhe")
    kg, vg = k[:, :2], v[:, 2:]  # two kv heads for four query heads
    sdpa_compare(q, kg, vg, ATT_TOL, layout="blhe", is_causal=True, enable_gqa=True)


# ---- convolution ---------------------------------------------------------------

CONV_CASES = {
    # 1-D: stride, padding, dilation, groups together; long rows
    "1d_all": ((2, 6, 301), (9, 2, 5), dict(stride=3, padding=4, dilation=2, groups=3)),
    "1d_depthwise": ((3, 8, 40), (8, 1, 7), dict(padding=3, groups=8)),
    # 2-D over several GEMM tiles: 40 output channels, 72-deep columns,
    # ~500 pixels
    "2d_tiles": ((2, 8, 21, 25), (40, 8, 3, 3), dict(padding=1)),
    "2d_stride_dil": (
        (2, 4, 19, 23),
        (6, 2, 3, 2),
        dict(stride=(2, 3), padding=(2, 1), dilation=(2, 3), groups=2),
    ),
    "2d_one_pixel_out": ((3, 5, 4, 4), (7, 5, 4, 4), dict()),
    "2d_kernel_over_padding": ((1, 2, 3, 3), (3, 2, 5, 5), dict(padding=2)),
}


def conv_layout(x, layout):
    if layout == "channels_last" and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    if layout == "transposed":  # the last two dims swapped in storage
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "offset":
        big = torch.zeros(x.shape[0] + 1, *x.shape[1:])
        big[1:] = x
        return big[1:]
    return x


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "offset"])
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv_forward_backward(case, layout):
    shape, wshape, kw = CONV_CASES[case]
    x = conv_layout(randn(*shape, seed=60), layout)
    w = randn(*wshape, seed=61) * 0.3
    b = randn(wshape[0], seed=62)
    conv = F.conv1d if len(shape) == 3 else F.conv2d
    xc, xn = both(x)
    wc, wn = both(w)
    bc, bn = both(b)
    yc, yn = conv(xc, wc, bc, **kw), conv(xn, wn, bn, **kw)
    assert_same(yn, yc, rtol=1e-4, atol=1e-4)
    gy = randn(*yc.shape, seed=63)
    yc.backward(gy)
    yn.backward(gy.neuron())
    assert_same(xn.grad, xc.grad, rtol=1e-4, atol=1e-4)
    assert_same(wn.grad, wc.grad, rtol=1e-4, atol=2e-4 * (yc.numel() / wshape[0]) ** 0.5)
    assert_same(bn.grad, bc.grad, rtol=1e-4, atol=1e-4 * (yc.numel() / wshape[0]) ** 0.5)
    native("conv")


@pytest.mark.parametrize("dim", [1, 2])
def test_conv_transpose_and_bf16(dim):
    """Transposed convolution (col2im forward) with stride, padding,
    output_padding, dilation and groups; bf16 forward and backward."""
    if dim == 1:
        x, w = randn(2, 4, 23, seed=64), randn(4, 3, 5, seed=65)
        f, kw = (
            F.conv_transpose1d,
            dict(stride=3, padding=2, output_padding=1, groups=2, dilation=2),
        )
    else:
        x, w = randn(2, 4, 9, 11, seed=64), randn(4, 3, 3, 4, seed=65)
        f, kw = F.conv_transpose2d, dict(stride=(2, 3), padding=1, output_padding=(1, 2), groups=2)
    b = randn(6, seed=66)
    xc, xn = both(x)
    wc, wn = both(w)
    yc, yn = f(xc, wc, b, **kw), f(xn, wn, b.neuron(), **kw)
    assert_same(yn, yc, rtol=1e-4, atol=1e-4)
    gy = randn(*yc.shape, seed=67)
    yc.backward(gy)
    yn.backward(gy.neuron())
    assert_same(xn.grad, xc.grad, rtol=1e-4, atol=1e-4)
    assert_same(wn.grad, wc.grad, rtol=1e-4, atol=1e-3)
    conv = F.conv1d if dim == 1 else F.conv2d
    xb, wb = x.bfloat16(), w.transpose(0, 1).contiguous().bfloat16()
    xc, xn = both(xb)
    wc, wn = both(wb)
    yc = conv(xc, wc, None, padding=1, dilation=2)
    yn = conv(xn, wn, None, padding=1, dilation=2)
    assert_same(yn, yc, rtol=2e-2, atol=5e-2)
    gy = randn(*yc.shape, seed=68, dtype=torch.bfloat16)
    yc.backward(gy)
    yn.backward(gy.neuron())
    assert_same(xn.grad, xc.grad, rtol=2e-2, atol=5e-2)
    assert_same(wn.grad, wc.grad, rtol=3e-2, atol=0.3)
    native("conv")


# ---- pooling -------------------------------------------------------------------


def pool_input(shape, seed, specials=True):
    x = randn(*shape, seed=seed)
    if specials:
        flat = x.view(-1)
        flat[5] = float("nan")
        flat[40:52] = float("-inf")  # whole windows of -inf
        flat[70] = float("inf")
        flat[90:94] = 1.25  # ties: the first one wins
    return x


POOL1D = {
    "max_ceil_pad": lambda t: F.max_pool1d(t, 3, 2, 1, ceil_mode=True),
    "max_dil": lambda t: F.max_pool1d(t, 4, 3, 2, dilation=2, ceil_mode=True),
    "max_idx": lambda t: F.max_pool1d(t, 3, 2, 1, return_indices=True)[1].float(),
    "avg_ceil_pad": lambda t: F.avg_pool1d(t, 3, 2, 1, ceil_mode=True),
    "avg_nopad_count": lambda t: F.avg_pool1d(t, 4, 3, 2, ceil_mode=True, count_include_pad=False),
}

POOL2D = {
    "max_ceil_pad": lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True),
    "max_dil": lambda t: F.max_pool2d(t, (2, 3), (3, 2), (1, 1), dilation=(2, 2), ceil_mode=True),
    "max_idx": lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True)[1].float(),
    "avg_ceil_pad": lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True),
    "avg_nopad_count": lambda t: F.avg_pool2d(
        t, (3, 2), 2, 1, ceil_mode=True, count_include_pad=False
    ),
    "avg_divisor": lambda t: F.avg_pool2d(t, 3, 2, 1, divisor_override=4),
    "adaptive_odd": lambda t: F.adaptive_avg_pool2d(t, (5, 7)),
}


def pool_check(f, x, dtype=torch.float32):
    x = x.to(dtype)
    xc, xn = both(x)
    yc, yn = f(xc), f(xn)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    assert_same(yn, yc, equal_nan=True, **tol)
    if yc.requires_grad:
        gy = randn(*yc.shape, seed=70, dtype=dtype)
        yc.backward(gy)
        yn.backward(gy.neuron())
        assert_same(xn.grad, xc.grad, equal_nan=True, **tol)
    native("pool")


@pytest.mark.parametrize("name", list(POOL1D))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_pool1d_specials_layouts(name, layout):
    x = pool_input((2, 3, 37), seed=71)
    if layout == "transposed":  # channels innermost in storage
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    pool_check(POOL1D[name], x)


@pytest.mark.parametrize("name", list(POOL2D))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "stepped"])
def test_pool2d_specials_layouts(name, layout):
    x = pool_input((2, 3, 13, 17), seed=72)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "stepped":
        big = torch.zeros(2, 3, 13, 34)
        big[..., ::2] = x
        x = big[..., ::2]
    pool_check(POOL2D[name], x)


@pytest.mark.parametrize("name", ["max_ceil_pad", "avg_ceil_pad", "adaptive_odd"])
def test_pool2d_bf16_and_many_planes(name):
    """bf16, and enough planes and rows that the forward and the per-plane
    backward split over threads."""
    pool_check(POOL2D[name], pool_input((4, 16, 30, 31), seed=73), dtype=torch.bfloat16)
    pool_check(POOL2D[name], pool_input((4, 16, 30, 31), seed=74, specials=False))


# ---- optimizers ----------------------------------------------------------------

OPT_SIZES = [(1,), (17,), (40007,), (33, 5)]


def opt_run(device, cls, dtype, steps=5, **kw):
    params = [
        (torch.randn(*s, generator=gen(80 + i)) * (i + 1)).to(device, dtype).requires_grad_()
        for i, s in enumerate(OPT_SIZES)
    ]
    opt = cls(params, **kw)
    g = gen(90)
    for step in range(steps):
        for p in params:
            # gradients of changing scale and sign, some exactly zero
            gr = torch.randn(p.shape, generator=g) * (10.0 ** (step % 3 - 1))
            gr[::7] = 0.0 if step % 2 else gr[::7]
            p.grad = gr.to(device, dtype)
        opt.step()
    state = [
        {k: v.detach().cpu() for k, v in opt.state[p].items() if torch.is_tensor(v)} for p in params
    ]
    return [p.detach().cpu() for p in params], state


ADAM_CFGS = [
    dict(),
    dict(weight_decay=0.1),
    dict(amsgrad=True, weight_decay=0.01),
    dict(maximize=True, betas=(0.8, 0.95), eps=1e-6),
    dict(lr=0.01, amsgrad=True, maximize=True),
]


@pytest.mark.parametrize("impl", ["fused", "foreach", "forloop"])
@pytest.mark.parametrize("cfg", range(len(ADAM_CFGS)))
@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW])
def test_adam_family_matches_cpu(cls, cfg, impl):
    kw = dict(
        ADAM_CFGS[cfg],
        **{"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}[
            impl
        ],
    )
    pn, sn = opt_run("neuron", cls, torch.float32, **kw)
    pc, sc = opt_run("cpu", cls, torch.float32, **kw)
    for a, b in zip(pn, pc):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(sn, sc):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(
                a[k], b[k], rtol=1e-5, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}"
            )
    native()


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW])
def test_fused_adam_bf16(cls):
    """The fused kernel's generic (non-fp32) path against CPU's fused bf16."""
    kw = dict(fused=True, weight_decay=0.05, amsgrad=True)
    pn, sn = opt_run("neuron", cls, torch.bfloat16, **kw)
    pc, sc = opt_run("cpu", cls, torch.bfloat16, **kw)
    for a, b in zip(pn, pc):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    native()


SGD_CFGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, dampening=0.3, maximize=True),
    dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True, weight_decay=0.1),
]


@pytest.mark.parametrize("impl", ["fused", "foreach", "forloop"])
@pytest.mark.parametrize("cfg", range(len(SGD_CFGS)))
def test_sgd_matches_cpu(cfg, impl):
    kw = dict(
        SGD_CFGS[cfg],
        **{"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}[
            impl
        ],
    )
    pn, sn = opt_run("neuron", torch.optim.SGD, torch.float32, **kw)
    pc, sc = opt_run("cpu", torch.optim.SGD, torch.float32, **kw)
    for a, b in zip(pn, pc):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(sn, sc):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)
    native()


# ---- fp32 <-> bf16 casts (kernels/copy.c: the configuration's vectorised
# contiguous loops, the generic table for strided views) ----------------------


def _cast_inputs(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g) * 10.0 ** torch.randint(-45, 39, (n,), generator=g)
    special = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -3e-39, 3.4e38, -3.4e38]
    )
    bits = torch.tensor(  # exact ties: round to the even bf16 (down, then up)
        [0x3F808000, 0x3F818000, 0x7F7F8000, 0x00008000, 0x00018000], dtype=torch.int32
    ).view(torch.float32)
    extra = torch.cat([special, bits])
    x[: min(n, extra.numel())] = extra[:n]
    return x


def _same_bits(got, want):
    """Bitwise equal, except that NaN only has to stay NaN (PyTorch CPU
    writes one canonical NaN; the sign and payload are not specified)."""
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    int_t = torch.int16 if want.dtype == torch.bfloat16 else torch.int32
    assert torch.equal(got[~nan].view(int_t), want[~nan].view(int_t))


@pytest.mark.parametrize("n", [1, 9, 15, 16, 17, 31, 33, 64, 65, 1000, 70001])
def test_f32_bf16_casts_bitwise_as_cpu(n):
    x = _cast_inputs(n)
    _same_bits(x.to("neuron").to(torch.bfloat16).cpu(), x.to(torch.bfloat16))
    b = x.to(torch.bfloat16)
    _same_bits(b.to("neuron").to(torch.float32).cpu(), b.to(torch.float32))
    # offset start (not vector aligned) and a strided view take other paths
    _same_bits(x.to("neuron")[1:].to(torch.bfloat16).cpu(), x[1:].to(torch.bfloat16))
    _same_bits(x.to("neuron")[::3].to(torch.bfloat16).cpu(), x[::3].to(torch.bfloat16))
