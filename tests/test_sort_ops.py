"""Sorting and selection (csrc/aten/sort_ops.cpp) against PyTorch CPU: sort,
argsort, topk, median, kthvalue, unique, unique_consecutive, histc,
searchsorted and bucketize."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import REALS, native, rnd

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dtype, descending):
    x = torch.randint(0, 5, (3, 40, 4)).to(dtype)  # many ties: stability matters
    for dim in (1, -1, 0):
        vn, in_ = torch.sort(x.neuron(), dim=dim, descending=descending, stable=True)
        vc, ic = torch.sort(x, dim=dim, descending=descending, stable=True)
        assert_same(vn, vc)
        assert_same(in_, ic)
    assert_same(torch.argsort(x.neuron(), dim=1, stable=True), torch.argsort(x, dim=1, stable=True))
    native()


# sort's outputs keep the input's strides where it is dense (else dense
# strides in its dimension order), as CPU's and the meta function's: a
# compiled graph asserts them (Transformers' tests hit it on aten.sort.stable)
LAYOUTS = {
    "permuted": lambda t: t.permute(2, 0, 1),
    "transposed": lambda t: t.transpose(0, 2),
    "sliced": lambda t: t[:, ::2],
    "expanded": lambda t: t[:, :1].expand(-1, 4, -1),
    "contiguous": lambda t: t,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_output_strides_match_cpu_and_meta(layout, dim):
    x = LAYOUTS[layout](torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(1)))
    want = torch.sort(x, dim=dim, stable=True)
    meta = torch.sort(x.to("meta"), dim=dim, stable=True)
    got = torch.sort(x.neuron(), dim=dim, stable=True)
    for g, w, m in zip(got, want, meta):
        assert g.stride() == w.stride() == m.stride(), (g.stride(), w.stride(), m.stride())
        assert_same(g, w)
    for f in (torch.argsort, torch.msort):
        args = {"dim": dim, "stable": True} if f is torch.argsort else {}
        if f is torch.msort and dim != 0:
            continue
        g, w = f(x.neuron(), **args), f(x, **args)
        assert g.stride() == w.stride()
        assert_same(g, w)
    # out= into empty tensors: resized to the same layout as CPU's
    ov, oi = torch.empty(0, device="neuron"), torch.empty(0, dtype=torch.long, device="neuron")
    cv, ci = torch.empty(0), torch.empty(0, dtype=torch.long)
    torch.sort(x.neuron(), dim=dim, stable=True, out=(ov, oi))
    torch.sort(x, dim=dim, stable=True, out=(cv, ci))
    assert ov.stride() == cv.stride() and oi.stride() == ci.stride()
    assert_same(ov, cv)
    assert_same(oi, ci)
    native("sort")


def test_sort_nan_and_signed_zero():
    x = torch.tensor([3.0, float("nan"), -0.0, 0.0, -float("inf"), 1.0, float("nan")])
    for desc in (False, True):
        vn, in_ = x.neuron().sort(descending=desc, stable=True)
        vc, ic = x.sort(descending=desc, stable=True)
        assert_same(vn, vc, equal_nan=True)
        assert_same(in_, ic)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("k", [1, 2, 7, 50])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, k, largest):
    x = torch.randn(6, 50).mul(100).to(dtype)  # distinct enough that indices are unique
    vn, in_ = torch.topk(x.neuron(), k, dim=1, largest=largest)
    vc, ic = torch.topk(x, k, dim=1, largest=largest)
    assert_same(vn, vc)
    # ties may order differently: the indices must pick the same values, on
    # CPU (not through neuron's own gather), and be distinct per row
    picked = x.gather(1, in_.cpu())
    assert torch.equal(picked, vc)
    assert all(len(set(row.tolist())) == k for row in in_.cpu())
    vn0, in0 = torch.topk(x.neuron().t(), min(k, 6), dim=0, largest=largest)
    vc0, _ = torch.topk(x.t(), min(k, 6), dim=0, largest=largest)
    assert_same(vn0, vc0)
    assert torch.equal(x.t().gather(0, in0.cpu()), vc0)
    native()
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(x.neuron(), 51)


def test_moe_router_pattern():
    """The Mixtral/Qwen-MoE routing step: softmax, topk, one-hot counts, histc."""
    logits = torch.randn(16, 8)

    def route(lg):
        w = lg.softmax(-1)
        top_w, top_i = torch.topk(w, 2, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        counts = torch.histc(top_i.flatten().float(), bins=8, min=0, max=7)
        counts_int = (
            torch.histc(top_i.flatten(), bins=8, min=0, max=7) if lg.device.type != "cpu" else None
        )
        order = top_i.flatten().argsort(stable=True)
        return top_w, top_i, counts, counts_int, order

    n = route(logits.neuron())
    c = route(logits)
    for a, b in zip(n[:3] + n[4:], c[:3] + c[4:]):
        assert_same(a, b)
    assert_same(n[3], c[2].long())  # integer histc, as CUDA computes it
    native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histc(dtype):
    x = torch.randn(1000).to(dtype)
    for bins, lo, hi in ((10, -2, 2), (7, 0, 0), (3, -0.5, 0.5)):
        assert_same(torch.histc(x.neuron(), bins, lo, hi), torch.histc(x, bins, lo, hi))
    same = torch.full((5,), 2.0, dtype=dtype)
    assert_same(torch.histc(same.neuron(), 4), torch.histc(same, 4))
    with pytest.raises(RuntimeError, match="max must be larger"):
        torch.histc(x.neuron(), 4, 3, 1)
    native()


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(dtype, right):
    g = torch.Generator().manual_seed(12)
    bd = torch.randint(-20, 40, (9,), generator=g).sort().values.to(dtype)
    bd[3] = bd[4]  # a repeated boundary
    vals = torch.randint(-30, 50, (4, 7), generator=g).to(dtype)
    vals[0, :3] = bd[:3]  # values on boundaries
    for out_int32 in (False, True):
        kw = {"right": right, "out_int32": out_int32}
        assert_same(
            torch.searchsorted(bd.neuron(), vals.neuron(), **kw), torch.searchsorted(bd, vals, **kw)
        )
        assert_same(
            torch.bucketize(vals.neuron(), bd.neuron(), **kw), torch.bucketize(vals, bd, **kw)
        )
    side = "right" if right else "left"
    # rows of boundaries, one per row of values; a sorter; scalars; out=
    rows = torch.randint(-20, 40, (4, 5), generator=g).sort(-1).values.to(dtype)
    assert_same(
        torch.searchsorted(rows.neuron(), vals.neuron(), side=side),
        torch.searchsorted(rows, vals, side=side),
    )
    perm = torch.randperm(9, generator=g)
    shuffled, sorter = bd[perm], perm.argsort()
    assert_same(
        torch.searchsorted(shuffled.neuron(), vals.neuron(), right=right, sorter=sorter.neuron()),
        torch.searchsorted(shuffled, vals, right=right, sorter=sorter),
    )
    assert_same(
        torch.searchsorted(bd.neuron(), 7, right=right), torch.searchsorted(bd, 7, right=right)
    )
    assert_same(torch.bucketize(7, bd.neuron(), right=right), torch.bucketize(7, bd, right=right))
    out = torch.empty(0, dtype=torch.long, device="neuron").t()
    torch.searchsorted(bd.neuron(), vals.neuron().t(), right=right, out=out)
    assert_same(out, torch.searchsorted(bd, vals.t(), right=right))
    native()


def test_searchsorted_nan_promotion_empty_and_errors():
    bd = torch.tensor([1.0, 2.0, 2.0, 3.0, float("nan")])
    v = torch.tensor([2.0, float("nan"), 0.0, 5.0, -float("inf")])
    for right in (False, True):  # NaN: CPU's own comparisons, positions and all
        assert_same(
            torch.searchsorted(bd.neuron(), v.neuron(), right=right),
            torch.searchsorted(bd, v, right=right),
        )
    ints = torch.tensor([[1, 5], [2, 9]])
    assert_same(torch.searchsorted(bd.neuron(), ints.neuron()), torch.searchsorted(bd, ints))
    assert_same(torch.searchsorted(ints[0].neuron(), 2.5), torch.searchsorted(ints[0], 2.5))
    empty = torch.tensor([])
    assert_same(torch.searchsorted(empty.neuron(), v.neuron()), torch.searchsorted(empty, v))
    assert_same(torch.searchsorted(bd.neuron(), empty.neuron()), torch.searchsorted(bd, empty))
    native()
    b, x = bd.neuron(), v.neuron()
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        torch.searchsorted(b, x, side="left", right=True)
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        torch.searchsorted(b, x, side="middle")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        torch.searchsorted(torch.ones(2, 2, device="neuron"), torch.ones(1, 2, device="neuron"))
    with pytest.raises(RuntimeError, match="same size"):
        torch.searchsorted(b, x, sorter=torch.tensor([0, 1], device="neuron"))
    with pytest.raises(RuntimeError, match="must be 1 dimension"):
        torch.bucketize(x, torch.ones(1, 3, device="neuron"))
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.searchsorted(torch.tensor([False, True]).neuron(), torch.tensor([True]).neuron())
    with pytest.raises(RuntimeError, match="sorter"):
        torch.searchsorted(b, x, sorter=torch.tensor([0, 1, 2, 3, 9], device="neuron"))
        torch.neuron.synchronize()


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
def test_median_kthvalue_bincount():
    x = rnd(4, 7)
    x[1, 3] = float("nan")
    xn = x.neuron()
    for f in (
        lambda t: t.median(1),
        lambda t: t.median(0, keepdim=True),
        lambda t: t.kthvalue(3, 1),
        lambda t: t.kthvalue(2, 0, keepdim=True),
    ):
        vc, ic = f(x)
        vn, in_ = f(xn)
        assert_same(vn, vc, equal_nan=True)
        # indices of the selected values (ties aside, random data has none)
        assert torch.equal(in_.cpu(), ic)
    assert_same(x[0].neuron().median(), x[0].median())
    assert_same(xn.median(), x.median(), equal_nan=True)
    i = torch.tensor([0, 3, 3, 1, 7])
    w = torch.rand(5)
    assert_same(torch.bincount(i.neuron()), torch.bincount(i))
    assert_same(
        torch.bincount(i.neuron(), w.neuron(), minlength=10), torch.bincount(i, w, minlength=10)
    )
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="non-negative"):
            torch.bincount(torch.tensor([1, -1], device=dev))
        with pytest.raises(RuntimeError, match="out of range"):
            torch.zeros(3, 4, device=dev).kthvalue(5, 1)
        with pytest.raises(RuntimeError, match="Halving dimension must be even"):
            F.glu(torch.zeros(3, 5, device=dev))
        with pytest.raises(RuntimeError, match="Padding size should be less"):
            F.pad(torch.zeros(1, 2, 3, device=dev), (3, 0), mode="reflect")
        with pytest.raises(RuntimeError, match="negative values for beta"):
            F.smooth_l1_loss(torch.zeros(3, device=dev), torch.zeros(3, device=dev), beta=-1.0)


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.float32, torch.bfloat16, torch.bool, torch.uint8]
)
def test_unique_matches_cpu(dtype):
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 7, (5, 9), generator=g).to(dtype)
    torch_neuronx.clear_op_tracking()
    for kw in (
        dict(),
        dict(return_inverse=True),
        dict(return_counts=True),
        dict(return_inverse=True, return_counts=True),
        dict(sorted=False),
    ):
        got, want = torch.unique(x.neuron(), **kw), torch.unique(x, **kw)
        for a, b in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            assert_same(a, b)
    for kw in (dict(), dict(return_inverse=True, return_counts=True)):
        got = torch.unique_consecutive(x.neuron().flatten(), **kw)
        want = torch.unique_consecutive(x.flatten(), **kw)
        for a, b in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            assert_same(a, b)
    assert torch_neuronx.get_fallback_ops() == {}
    e = torch.empty(0, 3, dtype=dtype)
    for a, b in zip(
        torch.unique(e.neuron(), return_inverse=True, return_counts=True),
        torch.unique(e, return_inverse=True, return_counts=True),
    ):
        assert a.shape == b.shape and a.dtype == b.dtype
