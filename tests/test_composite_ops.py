"""Ops composed from native kernels (variance, norms, cdist, dropout, mse_loss,
softplus, log_sigmoid, sign, flip, eye, linspace, prod, binary_cross_entropy,
huber_loss, threshold and the shrinks, masked_scatter, take/put, count_nonzero,
repeat_interleave) against CPU, forward and backward, with no CPU fallback."""

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from conftest import assert_same

import torch_neuronx


@pytest.fixture(autouse=True)
def _no_fallback():
    torch_neuronx.clear_op_tracking()
    yield
    assert torch_neuronx.get_fallback_ops() == {}


def grad_check(fn, *inputs, tol=None):
    """fn on neuron and CPU: outputs and input gradients match."""
    tol = tol or {}
    cpu = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    neu = [x.neuron().requires_grad_(x.is_floating_point()) for x in inputs]
    oc, on = fn(*cpu), fn(*neu)
    assert_same(on, oc, **tol)
    w = torch.linspace(-1, 1, oc.numel()).view(oc.shape) if oc.dim() else torch.tensor(1.5)
    (oc * w).sum().backward()
    (on * w.neuron()).sum().backward()
    for a, b in zip(neu, cpu):
        if b.grad is not None:
            assert_same(a.grad, b.grad, **tol)


X = torch.randn(4, 6, 5, generator=torch.Generator().manual_seed(0))


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


def test_group_norm_and_batch_statistics():
    x = torch.randn(2, 6, 4, 4)
    gn = torch.nn.GroupNorm(3, 6)
    grad_check(
        lambda t: F.group_norm(
            t, 3, gn.weight.detach().to(t.device), gn.bias.detach().to(t.device)
        ),
        x,
    )


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


def test_dropout_mask_scale_and_backward():
    torch.manual_seed(0)
    x = torch.randn(200, 100).neuron().requires_grad_()
    y = F.dropout(x, p=0.3, training=True)
    kept = y != 0
    frac = kept.float().mean().item()
    assert 0.67 < frac < 0.73  # 20000 draws: 5 sigma is about 0.016
    torch.testing.assert_close(y[kept].cpu(), (x[kept] / 0.7).detach().cpu())
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), kept.float().cpu() / 0.7)
    torch.manual_seed(0)
    y2 = F.dropout(x.detach(), p=0.3, training=True)  # same seed, same mask (Philox)
    assert torch.equal((y2 != 0).cpu(), kept.cpu())
    assert_same(F.dropout(x.detach(), p=0.3, training=False), x.detach().cpu())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    t = torch.randn(4, 6, 5)
    grad_check(lambda a, b: F.mse_loss(a, b, reduction=reduction), X, t)


def test_softplus_log_sigmoid_sign():
    x = X * 10
    grad_check(lambda t: F.softplus(t), x)
    grad_check(lambda t: F.softplus(t, beta=2, threshold=5), x)
    grad_check(lambda t: F.logsigmoid(t), x)
    assert_same(torch.sign(x.neuron()), torch.sign(x))
    assert_same(torch.sign(torch.tensor([-2, 0, 3]).neuron()), torch.sign(torch.tensor([-2, 0, 3])))


def test_flip_eye_linspace_prod():
    for dims in ((0,), (1, 2), (-1,)):
        grad_check(lambda t, dims=dims: torch.flip(t, dims), X)
    assert_same(torch.eye(3, 5, device="neuron"), torch.eye(3, 5))
    assert_same(torch.eye(4, dtype=torch.int64, device="neuron"), torch.eye(4, dtype=torch.int64))
    for a, b, n in ((0, 1, 7), (-3.5, 2.0, 10), (5, 5, 1), (0, 10, 0)):
        assert_same(torch.linspace(a, b, n, device="neuron"), torch.linspace(a, b, n))
    assert_same(
        torch.linspace(0, 10, 6, dtype=torch.int64, device="neuron"),
        torch.linspace(0, 10, 6, dtype=torch.int64),
    )
    grad_check(lambda t: torch.prod(t, 1), X)
    assert_same(torch.prod(X.neuron()), torch.prod(X), rtol=1e-4, atol=1e-30)
    assert_same(
        torch.tensor([[2, 3], [4, 5]]).neuron().prod(0), torch.tensor([[2, 3], [4, 5]]).prod(0)
    )


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


R = torch.Generator().manual_seed(11)


def rnd(*shape):
    return torch.randn(*shape, generator=R)


@pytest.mark.parametrize(
    "name",
    [
        "atan2",
        "xlogy",
        "xlogy_zero",
        "glu",
        "prelu",
        "prelu_c",
        "smooth_l1",
        "smooth_l1_b0",
        "huber_sum",
        "roll",
        "roll_flat",
        "reflect1d",
        "reflect2d",
        "replicate1d",
        "replicate2d",
        "kl_div",
    ],
)
def test_more_composites(name):
    x, y = rnd(3, 4, 6), rnd(3, 4, 6)
    fns = {
        "atan2": lambda a, b: torch.atan2(a, b),
        "xlogy": lambda a, b: torch.xlogy(a, b.abs() + 0.1),
        "xlogy_zero": lambda a, b: torch.xlogy(a * (a > 0), b.abs() + 0.1),
        "glu": lambda a, b: torch.cat([F.glu(a, -1).flatten(), F.glu(b, 1).flatten()]),
        "prelu": lambda a, b: F.prelu(a, b[0, :, 0].clone()),
        "prelu_c": lambda a, b: F.prelu(a, b[0, 0, :1].clone()),
        "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, beta=0.7),
        "smooth_l1_b0": lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, reduction="sum"),
        "huber_sum": lambda a, b: F.smooth_l1_loss(a, b, reduction="none"),
        "roll": lambda a, b: a.roll((2, -1), (1, 2)) + b,
        "roll_flat": lambda a, b: a.roll(5) * b,
        "reflect1d": lambda a, b: F.pad(a, (2, 3), mode="reflect"),
        "reflect2d": lambda a, b: F.pad(a, (2, 3, 1, 2), mode="reflect"),
        "replicate1d": lambda a, b: F.pad(a, (3, 1), mode="replicate"),
        "replicate2d": lambda a, b: F.pad(a[None], (1, 4, 2, 0), mode="replicate"),
        "kl_div": lambda a, b: F.kl_div(
            F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean"
        ),
    }
    grad_check(fns[name], x, y, tol={"rtol": 1e-5, "atol": 1e-5})


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


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin", "max"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    g = torch.Generator().manual_seed(5)
    self_ = torch.randn(4, 6, generator=g)
    src = torch.randn(4, 5, generator=g)
    src[1, 2] = float("nan") if reduce in ("amax", "amin", "max") else src[1, 2]
    index = torch.randint(0, 6, (4, 5), generator=g)
    ref = self_.scatter_reduce(1, index, src, reduce, include_self=include_self)
    got = self_.neuron().scatter_reduce(
        1, index.neuron(), src.neuron(), reduce, include_self=include_self
    )
    assert_same(got, ref, rtol=1e-5, atol=1e-6, equal_nan=True)
    iself = torch.randint(-5, 5, (3, 4), generator=g)
    isrc = torch.randint(-5, 5, (3, 4), generator=g)
    iidx = torch.randint(0, 4, (3, 4), generator=g)
    assert_same(
        iself.neuron().scatter_reduce(
            0, iidx.neuron() % 3, isrc.neuron(), reduce, include_self=include_self
        ),
        iself.scatter_reduce(0, iidx % 3, isrc, reduce, include_self=include_self),
    )


def test_scatter_reduce_backward_unfold_backward_and_integer_pow():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 9, generator=g)
    idx = torch.randint(0, 3, (2, 9), generator=g)
    grad_check(
        lambda t: torch.zeros(2, 3, device=t.device).scatter_reduce(
            1, idx.to(t.device), t, "amax", include_self=False
        ),
        x,
    )
    grad_check(lambda t: t.unfold(1, 4, 2).pow(2).sum(-1), x)  # overlapping windows
    grad_check(lambda t: t.unfold(0, 2, 1), x)
    a = torch.randint(-4, 5, (20,), generator=g)
    b = torch.randint(-2, 6, (20,), generator=g)
    assert_same(a.neuron() ** b.neuron(), a**b)
    assert_same(
        a.to(torch.int8).neuron() ** b.to(torch.int8).neuron(), a.to(torch.int8) ** b.to(torch.int8)
    )
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="reduce argument must be"):
            torch.zeros(3, device=dev).scatter_reduce(
                0, torch.zeros(3, dtype=torch.long, device=dev), torch.ones(3, device=dev), "foo"
            )


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit):
    """As the gated delta-rule layers (Qwen3-Next) call it: batched, unit
    diagonal, broadcast batch dims; forward and both gradients."""
    g = torch.Generator().manual_seed(7)
    A = torch.randn(2, 3, 8, 8, generator=g) * 0.3 + torch.eye(8) * 2
    A = A.triu() if upper else A.tril()
    B = torch.randn(3, 8, 5, generator=g) if left else torch.randn(3, 5, 8, generator=g)
    grad_check(
        lambda a, b: torch.linalg.solve_triangular(
            a, b, upper=upper, left=left, unitriangular=unit
        ),
        A,
        B,
        tol={"rtol": 1e-4, "atol": 1e-5},
    )


@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_layout_matches_cpu_and_compiled_graphs(left):
    """The result is batches of column-major matrices, as on CPU and as the
    meta function says: a compiled graph checks it (olmo_hybrid's gated
    delta rule failed on 'expected stride' before)."""
    g = torch.Generator().manual_seed(3)
    A = torch.randn(2, 1, 6, 6, generator=g).tril() + 3 * torch.eye(6)
    B = torch.randn(3, 6, 4, generator=g) if left else torch.randn(3, 4, 6, generator=g)
    kw = {"upper": False, "left": left}
    cpu = torch.linalg.solve_triangular(A, B, **kw)
    got = torch.linalg.solve_triangular(A.neuron(), B.neuron(), **kw)
    assert got.stride() == cpu.stride()
    torch.testing.assert_close(got.cpu(), cpu, rtol=1e-5, atol=1e-5)
    for out_shape in ((0,), cpu.shape):  # resized by the op / kept as given
        out_cpu, out = torch.empty(out_shape), torch.empty(out_shape, device="neuron")
        torch.linalg.solve_triangular(A, B, **kw, out=out_cpu)
        r = torch.linalg.solve_triangular(A.neuron(), B.neuron(), **kw, out=out)
        assert r is out and out.stride() == out_cpu.stride()
        torch.testing.assert_close(out.cpu(), cpu, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: torch.linalg.solve_triangular(a, b, **kw) * 2, fullgraph=True)
    torch.testing.assert_close(f(A.neuron(), B.neuron()).cpu(), cpu * 2, rtol=1e-5, atol=1e-5)


def test_solve_triangular_errors_and_float64():
    A = torch.randn(4, 4, dtype=torch.float64).tril() + 3 * torch.eye(4, dtype=torch.float64)
    B = torch.randn(4, 2, dtype=torch.float64)
    assert_same(
        torch.linalg.solve_triangular(A.neuron(), B.neuron(), upper=False),
        torch.linalg.solve_triangular(A, B, upper=False),
    )
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="square"):
            torch.linalg.solve_triangular(
                torch.zeros(3, 4, device=dev), torch.zeros(3, 2, device=dev), upper=True
            )
        with pytest.raises(RuntimeError, match="Incompatible shapes"):
            torch.linalg.solve_triangular(
                torch.eye(3, device=dev), torch.zeros(4, 2, device=dev), upper=True
            )


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_arithmetic_and_polar(dtype):
    """Complex add/sub/mul/div and polar run natively, and so does complex
    rotary embedding (Llama 4, DeepSeek-V2) forward and backward."""
    g = torch.Generator().manual_seed(8)
    a = torch.randn(3, 5, dtype=dtype, generator=g)
    b = torch.randn(3, 5, dtype=dtype, generator=g)
    b[0, 0] = complex(0.0, 1e-3)  # |imag| >> |real|: the other division branch
    for f in (
        lambda x, y: x + y,
        lambda x, y: x - y * 2,
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: x * y[:1],
    ):  # broadcast
        assert_same(f(a.neuron(), b.neuron()), f(a, b), rtol=1e-5, atol=1e-6)
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    m, ang = torch.rand(6, dtype=real, generator=g), torch.randn(6, dtype=real, generator=g)
    assert_same(torch.polar(m.neuron(), ang.neuron()), torch.polar(m, ang))

    def rope(x, freqs):
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs).flatten(-2)

    freqs = torch.polar(torch.ones(4, 4, dtype=real), torch.randn(4, 4, dtype=real, generator=g))
    x = torch.randn(2, 4, 8, dtype=real, generator=g)
    grad_check(lambda t, f: rope(t, f), x, freqs, tol={"rtol": 1e-5, "atol": 1e-6})


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


def probabilities(shape, seed):
    """Values in [0, 1], with exact 0s and 1s (where each log clamps at -100)."""
    p = torch.rand(shape, generator=torch.Generator().manual_seed(seed))
    p.view(-1)[:2] = torch.tensor([0.0, 1.0])
    return p


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


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0])
def test_huber_loss(reduction, delta):
    a = torch.randn(5, 7, generator=torch.Generator().manual_seed(6)) * 2
    b = torch.randn(5, 7, generator=torch.Generator().manual_seed(7))
    grad_check(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=delta), a, b)
    with pytest.raises(RuntimeError, match="non-positive"):
        F.huber_loss(a.neuron(), b.neuron(), delta=0.0)


def test_threshold_and_shrinks():
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(8))
    x[0, :2] = torch.tensor([0.5, -0.5])  # on the edges
    fns = (
        lambda v: F.threshold(v, 0.1, 2.0),
        lambda v: F.hardshrink(v, 0.5),
        lambda v: F.softshrink(v, 0.5),
        lambda v: F.relu6(v),
    )
    for fn in fns:
        grad_check(fn, x)
    # NaN passes through forward (CPU's own gradient at a NaN differs between
    # its scalar and vector loops, so only the forward is compared)
    x[0, 2] = float("nan")
    for fn in fns:
        assert_same(fn(x.neuron()), fn(x), equal_nan=True)
    ints = torch.arange(-4, 5)
    assert_same(F.threshold(ints.neuron(), 1.5, 7.9), F.threshold(ints, 1.5, 7.9))
    out = torch.empty(0, device="neuron")
    torch.ops.aten.softshrink.out(x.neuron(), 0.25, out=out)
    assert_same(out, F.softshrink(x, 0.25), equal_nan=True)
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(x.neuron(), -1.0)


def test_masked_scatter():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(4, 6, generator=g)
    mask = torch.rand(4, 6, generator=g) > 0.4
    src = torch.randn(30, generator=g)
    grad_check(lambda a, s: a.masked_scatter(mask.to(a.device), s), x, src)
    # a mask broadcast over rows, a strided self written in place
    row = torch.rand(6, generator=g) > 0.5
    xn, xc = x.neuron().t(), x.clone().t()
    xn.masked_scatter_(row[:4].neuron(), src[:30].neuron())
    xc.masked_scatter_(row[:4], src[:30])
    assert_same(xn, xc)
    assert_same(xn.masked_scatter_(torch.zeros_like(xn, dtype=torch.bool), src.neuron()), xc)
    with pytest.raises(RuntimeError, match="Number of elements of source"):
        x.neuron().masked_scatter_(torch.ones(4, 6, dtype=torch.bool).neuron(), src[:5].neuron())
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.neuron().masked_scatter_(mask.int().neuron(), src.neuron())
    with pytest.raises(RuntimeError, match="same dtypes"):
        x.neuron().masked_scatter_(mask.neuron(), src.double().neuron())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64])
def test_count_nonzero(dtype):
    x = (torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(10)) > 0.3).to(dtype) * 1
    x = x.to(dtype)
    for dim in (None, 0, -1, (0, 2), ()):
        kw = {} if dim is None else {"dim": dim}
        assert_same(torch.count_nonzero(x.neuron(), **kw), torch.count_nonzero(x, **kw))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_with_tensor_repeats(dtype):
    reps = torch.tensor([2, 0, 3, 1, 0], dtype=dtype)
    assert_same(torch.repeat_interleave(reps.neuron()), torch.repeat_interleave(reps))
    assert_same(
        torch.repeat_interleave(reps.neuron(), output_size=6),
        torch.repeat_interleave(reps, output_size=6),
    )
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(11))
    grad_check(lambda a: torch.repeat_interleave(a, reps.to(a.device), dim=0), x)
    empty = torch.empty(0, dtype=dtype)
    assert_same(torch.repeat_interleave(empty.neuron()), torch.repeat_interleave(empty))
    with pytest.raises(RuntimeError, match="can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], dtype=dtype).neuron())
    with pytest.raises(RuntimeError, match="1D"):
        torch.repeat_interleave(reps.view(1, -1).neuron())
    with pytest.raises(RuntimeError, match="does not match"):
        torch.repeat_interleave(reps.neuron(), output_size=5)
    with pytest.raises(NotImplementedError, match="Float"):
        torch.repeat_interleave(reps.float().neuron())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_round_with_decimals(dtype):
    x = (torch.randn(200, generator=torch.Generator().manual_seed(13)) * 50).to(dtype)
    x[:4] = torch.tensor([2.5, -0.125, 1234.5678, 0.0]).to(dtype)
    for d in (0, 1, 2, 3, -1, -2):
        assert_same(x.neuron().round(decimals=d), x.round(decimals=d), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64])
def test_integer_hardtanh_isnan_and_sums_to_float(dtype):
    x = torch.arange(-6, 10).to(dtype) if dtype != torch.uint8 else torch.arange(16).to(dtype)
    xn = x.neuron()
    assert_same(F.relu6(xn), F.relu6(x))
    if dtype == torch.uint8:
        with pytest.raises(RuntimeError, match="negative limits"):
            F.hardtanh(xn, -2, 3)
    else:
        assert_same(F.hardtanh(xn, -2, 3), F.hardtanh(x, -2, 3))
        assert_same(F.hardtanh(xn, -2.5, 3.7), F.hardtanh(x, -2.5, 3.7))  # no promotion
        assert_same(
            F.hardtanh(xn.clone(), -2, 3, inplace=True), F.hardtanh(x.clone(), -2, 3, inplace=True)
        )
    assert_same(torch.isnan(xn), torch.isnan(x))
    m = x.view(4, 4)
    for dt in (torch.float32, torch.float64):
        assert_same(m.neuron().sum(1, dtype=dt), m.sum(1, dtype=dt))
        assert_same(m.neuron().sum(dtype=dt), m.sum(dtype=dt))


def test_complex_isnan():
    z = torch.tensor([1 + 1j, complex(float("nan"), 0), complex(0, float("nan")), 0j])
    assert_same(torch.isnan(z.neuron()), torch.isnan(z))


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


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_direct_and_backward(p):
    g = torch.Generator().manual_seed(15)
    a = torch.randn(2, 1, 5, 4, generator=g)
    b = torch.randn(3, 7, 4, generator=g)
    b[0, 0] = a[0, 0, 0]  # a zero distance
    tol = {"rtol": 1e-4, "atol": 1e-5}
    grad_check(lambda x, y: torch.cdist(x, y, p=p), a, b, tol=tol)
    grad_check(lambda x, y: torch.cdist(x, y, p=p), a[0, 0].double(), b[0].double(), tol=tol)


def test_cdist_matrix_product_form_and_errors():
    g = torch.Generator().manual_seed(16)
    a, b = torch.randn(30, 6, generator=g), torch.randn(40, 6, generator=g)
    grad_check(lambda x, y: torch.cdist(x, y), a, b, tol={"rtol": 1e-4, "atol": 1e-4})
    grad_check(
        lambda x, y: torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist"),
        a[:5],
        b[:5],
        tol={"rtol": 1e-4, "atol": 1e-4},
    )
    an, bn = a.neuron(), b.neuron()
    with pytest.raises(RuntimeError, match="same number of columns"):
        torch.cdist(an, bn[:, :5])
    with pytest.raises(RuntimeError, match="non-negative p"):
        torch.cdist(an, bn, p=-1.0)
    with pytest.raises(NotImplementedError, match="BFloat16"):
        torch.cdist(an[:4].bfloat16(), bn[:4].bfloat16(), p=1.0)


def test_take_and_put():
    g = torch.Generator().manual_seed(17)
    x = torch.randn(4, 5, generator=g)
    idx = torch.tensor([[0, 19, -1], [-20, 7, 7]])
    grad_check(lambda a: torch.take(a, idx.to(a.device)), x)
    distinct = torch.tensor([0, 19, -2, 7, 11, -9])  # no two name one element
    for accumulate, where in ((False, distinct), (True, idx)):
        src = torch.randn(6, generator=g)
        for base in (x, x.t()):  # contiguous and strided destinations
            want = base.clone().put_(where, src, accumulate)
            got = base.neuron().clone().put_(where.neuron(), src.neuron(), accumulate)
            assert_same(got, want)
    grad_check(
        lambda a, s: a.put(idx.to(a.device), s, accumulate=True), x, torch.randn(2, 3, generator=g)
    )
    xn = x.neuron()
    with pytest.raises(RuntimeError, match="long tensor"):
        xn.take(idx.int().neuron())
    with pytest.raises(IndexError, match="same number of elements"):
        xn.clone().put_(idx.neuron(), torch.ones(2, device="neuron"))
    with pytest.raises(RuntimeError, match="same dtype"):
        xn.clone().put_(idx.neuron(), torch.ones(6, dtype=torch.float64, device="neuron"))
    with pytest.raises(IndexError):
        xn.take(torch.tensor([20]).neuron())
        torch.neuron.synchronize()
