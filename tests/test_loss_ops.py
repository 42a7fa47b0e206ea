"""Losses (csrc/aten/loss_ops.cpp) against PyTorch CPU, forward and backward:
nll_loss / cross_entropy, mse_loss, binary_cross_entropy, huber and smooth
L1, kl_div; and the edge cases of cross_entropy."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import FLOATS, X, gen, grad_check, native, randn, rnd, softmax_rows

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(dtype, reduction):
    logits = torch.randn(6, 11).to(dtype)
    target = torch.tensor([1, 10, 0, -100, 3, 3])
    weight = torch.rand(11).to(dtype)
    for w in (None, weight):
        ln = logits.neuron().requires_grad_()
        lc = logits.clone().requires_grad_()
        wn = None if w is None else w.neuron()
        loss_n = F.cross_entropy(ln, target.neuron(), weight=wn, reduction=reduction)
        loss_c = F.cross_entropy(lc, target, weight=w, reduction=reduction)
        tol = dict(atol=2e-2, rtol=2e-2) if dtype in (torch.bfloat16, torch.float16) else {}
        assert_same(loss_n, loss_c, **tol)
        loss_n.float().sum().backward()
        loss_c.float().sum().backward()
        assert_same(ln.grad, lc.grad, **tol)
    native()


def test_nll_loss_1d_input_and_checks():
    x = torch.randn(5).log_softmax(0)
    t = torch.tensor(3)
    assert_same(F.nll_loss(x.neuron(), t.neuron()), F.nll_loss(x, t))
    with pytest.raises(ValueError, match="batch_size|Expected"):
        F.nll_loss(
            torch.randn(3, 4, device="neuron"), torch.zeros(2, dtype=torch.long, device="neuron")
        )
    with pytest.raises(RuntimeError, match="Long"):
        F.nll_loss(
            torch.randn(3, 4, device="neuron"), torch.zeros(3, dtype=torch.int32, device="neuron")
        )


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    t = torch.randn(4, 6, 5)
    grad_check(lambda a, b: F.mse_loss(a, b, reduction=reduction), X, t)


def probabilities(shape, seed):
    """Values in [0, 1], with exact 0s and 1s (where each log clamps at -100)."""
    p = torch.rand(shape, generator=torch.Generator().manual_seed(seed))
    p.view(-1)[:2] = torch.tensor([0.0, 1.0])
    return p


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    x, t = probabilities((6, 5), 1), probabilities((6, 5), 2)
    w = torch.rand(5, generator=torch.Generator().manual_seed(3)) if weighted else None
    x.view(-1)[2:4] = torch.tensor([1.0, 0.0])  # log(0) where the target is 1 and 0
    grad_check(
        lambda a, b: F.binary_cross_entropy(
            a, b, weight=None if w is None else w.to(a.device), reduction=reduction
        ),
        x,
        t,
        tol={"rtol": 1e-5, "atol": 1e-5},
    )


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_binary_cross_entropy_dtypes_and_errors(dtype):
    x, t = probabilities((7, 3), 4).to(dtype), probabilities((7, 3), 5).to(dtype)
    assert_same(
        F.binary_cross_entropy(x.neuron(), t.neuron()),
        F.binary_cross_entropy(x, t),
        **({"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}),
    )
    bad = x.clone()
    bad[0, 0] = 1.5
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(bad.neuron(), t.neuron())
    bad[0, 0] = float("nan")
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(bad.neuron(), t.neuron())
    with pytest.raises(RuntimeError, match="expected"):
        torch.ops.aten.binary_cross_entropy(
            x.neuron(), t.float().neuron() if dtype != torch.float32 else t.double().neuron()
        )
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.ops.aten.binary_cross_entropy(x.long().neuron(), t.long().neuron())


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0])
def test_huber_loss(reduction, delta):
    a = torch.randn(5, 7, generator=torch.Generator().manual_seed(6)) * 2
    b = torch.randn(5, 7, generator=torch.Generator().manual_seed(7))
    grad_check(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=delta), a, b)
    with pytest.raises(RuntimeError, match="non-positive"):
        F.huber_loss(a.neuron(), b.neuron(), delta=0.0)


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("name", ["smooth_l1", "smooth_l1_b0", "huber_sum", "kl_div"])
def test_smooth_l1_huber_kl_div(name):
    x, y = rnd(3, 4, 6), rnd(3, 4, 6)
    fns = {
        "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, beta=0.7),
        "smooth_l1_b0": lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, reduction="sum"),
        "huber_sum": lambda a, b: F.smooth_l1_loss(a, b, reduction="none"),
        "kl_div": lambda a, b: F.kl_div(
            F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean"
        ),
    }
    grad_check(fns[name], x, y, tol={"rtol": 1e-5, "atol": 1e-5})


# ---- edge cases of cross_entropy (issue 16; tools/mutate.py checks that these
# tests catch planted softmax bugs): the softmax edge-case rows as logits,
# with weights and label smoothing; -inf logits (a masked vocabulary) ---------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_numeric_range(reduction):
    logits = softmax_rows(33, seed=11)[[0, 1, 2, 3, 4, 5, 6, 9, 10]]
    target = torch.randint(0, 33, (9,), generator=gen(12))
    weight = torch.rand(33, generator=gen(13)) + 0.5
    lc = logits.clone().requires_grad_()
    ln = logits.neuron().requires_grad_()
    for kw in ({}, {"weight": weight}, {"label_smoothing": 0.1}):
        kn = {k: (v.neuron() if torch.is_tensor(v) else v) for k, v in kw.items()}
        lc.grad = ln.grad = None
        want = torch.nn.functional.cross_entropy(lc, target, reduction=reduction, **kw)
        got = torch.nn.functional.cross_entropy(ln, target.neuron(), reduction=reduction, **kn)
        # losses of 1e4-scale logits: fp32 keeps ~1e-3 absolute
        assert_same(got, want, rtol=1e-5, atol=2e-3)
        want.sum().backward()
        got.sum().backward()
        assert_same(ln.grad, lc.grad, rtol=1e-4, atol=1e-5)
    native("softmax", "nll_loss")


def test_cross_entropy_masked_logits():
    """-inf logits (a masked vocabulary) away from the target: finite loss."""
    logits = randn(6, 40, seed=14) * 30
    logits[:, 20:] = float("-inf")
    target = torch.randint(0, 20, (6,), generator=gen(15))
    ce = torch.nn.functional.cross_entropy
    assert_same(ce(logits.neuron(), target.neuron()), ce(logits, target), rtol=1e-5, atol=1e-5)
    native("softmax", "nll_loss")


# ------------------------------------------------------------------ ctc_loss


def _ctc_inputs(T, N, C, S, seed, dtype, concat):
    g = gen(seed)
    lp = torch.randn(T, N, C, generator=g, dtype=torch.float64).log_softmax(-1).to(dtype)
    tl = torch.randint(0, S + 1, (N,), generator=g)
    il = torch.randint(max(1, T // 2), T + 1, (N,), generator=g)
    tgt = torch.randint(1, C, (N, S), generator=g)
    if concat:
        tgt = torch.cat([tgt[n, : tl[n]] for n in range(N)])
    return lp, tgt, il, tl


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss_matches_cpu_forward_and_backward(dtype, concat, reduction):
    lp, tgt, il, tl = _ctc_inputs(12, 5, 7, 4, 1, dtype, concat)
    lp_c, lp_n = lp.clone().requires_grad_(), lp.neuron().requires_grad_()
    args = dict(reduction=reduction, zero_infinity=False)
    lc = F.ctc_loss(lp_c, tgt, il, tl, **args)
    ln = F.ctc_loss(lp_n, tgt.neuron(), il, tl, **args)
    assert_same(ln, lc)
    w = torch.linspace(-1, 2, lc.numel(), dtype=dtype).view(lc.shape)
    (lc * w).sum().backward()
    (ln * w.neuron()).sum().backward()
    assert_same(lp_n.grad, lp_c.grad)
    native("ctc")


def test_ctc_loss_repeats_blank_and_impossible_alignments():
    # repeated labels need a blank between them: T=3 cannot align [1, 1, 1]
    T, C = 3, 4
    lp = torch.randn(T, 3, C, generator=gen(2), dtype=torch.float64).log_softmax(-1)
    tgt = torch.tensor([[1, 1, 1], [2, 2, 0], [3, 1, 2]])
    il, tl = torch.tensor([3, 3, 3]), torch.tensor([3, 2, 0])
    for zero_inf in (False, True):
        lc_, ln_ = lp.clone().requires_grad_(), lp.neuron().requires_grad_()
        lc = F.ctc_loss(lc_, tgt, il, tl, blank=0, reduction="none", zero_infinity=zero_inf)
        ln = F.ctc_loss(
            ln_, tgt.neuron(), il, tl, blank=0, reduction="none", zero_infinity=zero_inf
        )
        assert_same(ln, lc)  # inf for the impossible one unless zero_infinity
        lc.masked_fill(lc.isinf(), 0).sum().backward()
        ln.masked_fill(ln.isinf(), 0).sum().backward()
        # the impossible sample's gradient: NaN on CPU, unless zero_infinity
        assert_same(ln_.grad, lc_.grad, equal_nan=True)
        assert ln_.grad[:, 0].isnan().all() != zero_inf
    # a blank other than 0, against a float64 CPU run
    lp = torch.randn(6, 2, 5, generator=gen(3), dtype=torch.float64).log_softmax(-1)
    tgt = torch.tensor([[0, 1], [2, 3]])
    args = (torch.tensor([6, 5]), torch.tensor([2, 1]))
    assert_same(
        F.ctc_loss(lp.neuron(), tgt.neuron(), *args, blank=4), F.ctc_loss(lp, tgt, *args, blank=4)
    )
    native("ctc")


def test_ctc_loss_bad_input_raises_like_cpu():
    lp, tgt, il, tl = _ctc_inputs(6, 2, 5, 3, 4, torch.float32, False)
    for kw, bad in [
        (dict(blank=5), "blank must be in label range"),
        (
            dict(input_lengths=torch.tensor([7, 3])),
            "Expected input_lengths to have value at most 6",
        ),
        (dict(input_lengths=torch.tensor([6])), "input_lengths must be of size batch_size"),
        (dict(target_lengths=torch.tensor([4, 1])), "Expected tensor to have size at least 4"),
    ]:
        args = dict(input_lengths=il, target_lengths=tl) | kw
        for dev in ("cpu", "neuron"):
            with pytest.raises(RuntimeError, match=bad):
                F.ctc_loss(lp.to(dev), tgt.to(dev), **args)
    with pytest.raises(IndexError, match="ctc_loss \\(target\\)"):  # a label outside [0, C)
        F.ctc_loss(lp.neuron(), torch.full((2, 3), 9, device="neuron"), il, tl).item()


# ------------------------------------------------------ multi-class margins


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin_loss(p, reduction, weighted):
    x = randn(6, 5, seed=5, dtype=torch.float64)
    t = torch.randint(0, 5, (6,), generator=gen(6))
    w = torch.rand(5, generator=gen(7), dtype=torch.float64) if weighted else None
    wn = w.neuron() if weighted else None
    grad_check(
        lambda a: F.multi_margin_loss(
            a, t.to(a.device), p=p, margin=0.7, weight=wn if a.is_neuron else w, reduction=reduction
        ),
        x,
    )
    grad_check(lambda a: F.multi_margin_loss(a, t[:1].to(a.device), p=p, reduction=reduction), x[0])
    native("multi_margin")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction):
    x = randn(4, 5, seed=8, dtype=torch.float64)
    # class lists ended by -1; a duplicate label counts twice, as on CPU
    t = torch.tensor([[3, 0, -1, 1, 1], [1, 2, 3, 4, 0], [-1, 0, 0, 0, 0], [2, 2, -1, 0, 0]])
    grad_check(lambda a: F.multilabel_margin_loss(a, t.to(a.device), reduction=reduction), x)
    grad_check(lambda a: F.multilabel_margin_loss(a, t[0].to(a.device), reduction=reduction), x[0])
    native("multilabel_margin")
