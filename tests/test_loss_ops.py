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
