"""Ops training code reaches, native on the device (no CPU fallback) and
equal to PyTorch on CPU: vector products, integer and complex matrix
products, cross entropy over sequences and images, embedding max_norm,
nansum, lerp with a weight tensor, torch.equal and the AMP grad scaler."""

import pytest
import torch
from conftest import assert_same

N = "neuron"


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.complex64]
)
def test_vector_products(no_fallback, dtype):
    torch.manual_seed(0)
    a = torch.randn(37).to(dtype) if not dtype.is_complex else torch.randn(37, dtype=dtype)
    b = torch.randn(37).to(dtype) if not dtype.is_complex else torch.randn(37, dtype=dtype)
    m = torch.randn(5, 37).to(dtype) if not dtype.is_complex else torch.randn(5, 37, dtype=dtype)
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    assert_same(torch.dot(a.to(N), b.to(N)), torch.dot(a, b), **tol)
    assert_same(torch.vdot(a.to(N), b.to(N)), torch.vdot(a, b), **tol)
    assert_same(torch.mv(m.to(N), a.to(N)), torch.mv(m, a), **tol)
    s = torch.ones(5).to(dtype)
    assert_same(
        torch.addmv(s.to(N), m.to(N), a.to(N), beta=2, alpha=3),
        torch.addmv(s, m, a, beta=2, alpha=3),
        **tol,
    )


def test_vector_product_errors_as_cpu():
    for dev in ("cpu", N):
        with pytest.raises(RuntimeError, match="1D tensors expected"):
            torch.dot(torch.ones(2, 2, device=dev), torch.ones(2, device=dev))
        with pytest.raises(RuntimeError, match="inconsistent tensor size"):
            torch.dot(torch.ones(3, device=dev), torch.ones(4, device=dev))


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.complex64, torch.complex128]
)
def test_integer_and_complex_matrix_products(no_fallback, dtype):
    torch.manual_seed(0)

    def make(*shape):
        if dtype.is_complex:
            return torch.randn(*shape, dtype=dtype)
        return torch.randint(-50 if dtype != torch.uint8 else 0, 50, shape).to(dtype)

    a, b, c = make(7, 9), make(9, 5), make(7, 5)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype.is_complex else {}
    assert_same(a.to(N) @ b.to(N), a @ b, **tol)
    out = torch.empty(7, 5, dtype=dtype, device=N)
    assert_same(torch.mm(a.to(N), b.to(N), out=out), torch.mm(a, b), **tol)
    assert_same(
        torch.addmm(c.to(N), a.to(N), b.to(N), beta=2, alpha=3),
        torch.addmm(c, a, b, beta=2, alpha=3),
        **tol,
    )
    ba, bb, bc = make(3, 4, 6), make(3, 6, 2), make(3, 4, 2)
    assert_same(torch.bmm(ba.to(N), bb.to(N)), torch.bmm(ba, bb), **tol)
    assert_same(
        torch.baddbmm(bc.to(N), ba.to(N), bb.to(N), alpha=2),
        torch.baddbmm(bc, ba, bb, alpha=2),
        **tol,
    )
    if dtype.is_complex:  # conjugate views resolve first
        assert_same(a.to(N).conj() @ b.to(N), a.conj() @ b, **tol)


@pytest.mark.parametrize("shape", [(4, 5, 7), (2, 5, 3, 4), (2, 5, 2, 3, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_over_sequences_and_images(no_fallback, shape, reduction):
    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    t = torch.randint(0, shape[1], (shape[0],) + shape[2:])
    t[0].view(-1)[0] = -100  # ignored
    w = torch.rand(shape[1])
    loss = torch.nn.functional.cross_entropy(x, t, weight=w, reduction=reduction)
    xn = x.detach().to(N).requires_grad_()
    ln = torch.nn.functional.cross_entropy(xn, t.to(N), weight=w.to(N), reduction=reduction)
    assert_same(ln, loss.detach(), atol=1e-5, rtol=1e-5)
    g = torch.randn(loss.shape)
    loss.backward(g)
    ln.backward(g.to(N))
    assert_same(xn.grad, x.grad, atol=1e-5, rtol=1e-5)


def test_embedding_max_norm(no_fallback):
    torch.manual_seed(0)
    w = torch.randn(10, 4) * 3
    idx = torch.tensor([[1, 2, 2], [7, 1, 0]])
    wn = w.to(N)
    out_cpu = torch.nn.functional.embedding(idx, w, max_norm=1.5)
    out_n = torch.nn.functional.embedding(idx.to(N), wn, max_norm=1.5)
    assert_same(out_n, out_cpu, atol=1e-6, rtol=1e-5)
    assert_same(wn, w, atol=1e-6, rtol=1e-5)  # the weight itself is renormalised in place


def test_nansum_lerp_and_equal(no_fallback):
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    x[1, 2] = float("nan")
    assert_same(torch.nansum(x.to(N)), torch.nansum(x))
    assert_same(torch.nansum(x.to(N), 1, keepdim=True), torch.nansum(x, 1, keepdim=True))
    assert_same(
        torch.nansum(x.to(N), 0, dtype=torch.float64), torch.nansum(x, 0, dtype=torch.float64)
    )
    a, b, w = torch.randn(4, 6), torch.randn(4, 6), torch.rand(6) * 1.2 - 0.1
    assert_same(torch.lerp(a.to(N), b.to(N), w.to(N)), torch.lerp(a, b, w))
    a2 = a.to(N)
    a2.lerp_(b.to(N), w.to(N))
    assert_same(a2, torch.lerp(a, b, w))
    y = torch.randn(3, 3)
    assert torch.equal(y.to(N), y.to(N).clone())
    assert not torch.equal(y.to(N), (y + 1).to(N))
    assert not torch.equal(y.to(N), y[:2].to(N))
    nan = torch.tensor([float("nan")])
    assert torch.equal(nan.to(N), nan.to(N)) == torch.equal(nan, nan)


def test_grad_scaler_ops_match_cpu(no_fallback):
    for found in (False, True):
        grads_cpu = [torch.randn(5) * 1024, torch.randn(3, 2) * 1024]
        if found:
            grads_cpu[1][1, 1] = float("inf")
        grads_n = [g.to(N) for g in grads_cpu]
        fi_c, fi_n = torch.zeros(1), torch.zeros(1, device=N)
        inv = torch.full((1,), 1 / 1024)
        torch._amp_foreach_non_finite_check_and_unscale_(grads_cpu, fi_c, inv)
        torch._amp_foreach_non_finite_check_and_unscale_(grads_n, fi_n, inv.to(N))
        assert_same(fi_n, fi_c)
        for gn, gc in zip(grads_n, grads_cpu):
            assert_same(gn, gc)
    for found, tracker, interval in ((0.0, 0, 3), (0.0, 2, 3), (1.0, 2, 3), (0.0, 5, 6)):
        s_c, t_c = torch.full((1,), 8.0), torch.full((1,), tracker, dtype=torch.int32)
        s_n, t_n = s_c.to(N), t_c.to(N)
        torch._amp_update_scale_(s_c, t_c, torch.full((1,), found), 2.0, 0.5, interval)
        torch._amp_update_scale_(s_n, t_n, torch.full((1,), found, device=N), 2.0, 0.5, interval)
        assert_same(s_n, s_c)
        assert_same(t_n, t_c)


def test_fp16_training_step_with_grad_scaler(no_fallback):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(N)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=2.0**10)
    x = torch.randn(16, 8, device=N)
    for _ in range(3):
        with torch.autocast("neuron", dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 2.0**10
    assert torch.isfinite(model.weight).all()


def _bags_from_embedding(idx, w, off, mode, ps, pad, scale):
    """embedding_bag from F.embedding: the oracle for scale_grad_by_freq,
    where CPU's embedding_bag scales some rows by the wrong frequency
    (embedding([1,2,4,5,4,3,2,9]) gives every row 1/count; CPU's
    embedding_bag gives index 3 one half and index 4 two)."""
    rows = torch.nn.functional.embedding(idx, w, scale_grad_by_freq=scale)
    if ps is not None:
        rows = rows * ps[:, None]
    bounds = off.tolist() + [len(idx)]
    out = []
    for b in range(len(off)):
        seg, ids = rows[bounds[b] : bounds[b + 1]], idx[bounds[b] : bounds[b + 1]]
        if pad is not None:
            seg = seg[ids != pad]
        s = seg.sum(0)
        out.append(s / max(len(seg), 1) if mode == "mean" else s)
    return torch.stack(out)


@pytest.mark.parametrize(
    "mode,psw,pad",
    [
        ("sum", False, None),
        ("sum", True, None),
        ("sum", True, 2),
        ("mean", False, None),
        ("mean", False, 2),
    ],
)
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_bag_forward_and_backward(no_fallback, mode, psw, pad, scale):
    torch.manual_seed(0)
    w = torch.randn(10, 3, requires_grad=True)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    off = torch.tensor([0, 3, 3, 6])  # bag 1 is empty
    ps = torch.rand(8, requires_grad=True) if psw else None
    kw = dict(mode=mode, padding_idx=pad, scale_grad_by_freq=scale)
    if scale:
        r = _bags_from_embedding(idx, w, off, mode, ps, pad, scale)
    else:
        r = torch.nn.functional.embedding_bag(idx, w, off, per_sample_weights=ps, **kw)
    r.pow(2).sum().backward()
    wn = w.detach().to(N).requires_grad_()
    psn = ps.detach().to(N).requires_grad_() if psw else None
    rn = torch.nn.functional.embedding_bag(idx.to(N), wn, off.to(N), per_sample_weights=psn, **kw)
    rn.pow(2).sum().backward()
    assert_same(rn, r.detach(), atol=1e-6, rtol=1e-5)
    assert_same(wn.grad, w.grad, atol=1e-6, rtol=1e-5)
    if psw:
        assert_same(psn.grad, ps.grad, atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # the inference path
        assert_same(
            torch.nn.functional.embedding_bag(idx.to(N), wn, off.to(N), **kw),
            torch.nn.functional.embedding_bag(idx, w, off, **kw),
            atol=1e-6,
            rtol=1e-5,
        )


@pytest.mark.parametrize("pad", [None, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding_bag_max_forward_and_backward(no_fallback, pad, dtype):
    """max mode: per column the maximum of the bag's non-padding rows and
    the first index holding it (ties in the table: CPU takes the first);
    an empty bag gives 0 and index 0 and receives no gradient."""
    w = torch.tensor([[1.0, 5.0, 0.5], [3.0, 5.0, -1.0], [3.0, 0.0, 2.0], [-1.0, -2.0, 2.0]] * 3)
    w = w.to(dtype).requires_grad_()
    idx = torch.tensor([0, 1, 2, 3, 1, 2, 0, 2, 2, 7])
    off = torch.tensor([0, 3, 3, 5, 7, 9])  # bag 1 empty; bag 4 is only index 2
    scale = False  # F.embedding_bag refuses max mode with scale_grad_by_freq
    kw = dict(mode="max", padding_idx=pad)
    outs = {}
    for dev, weight in (("cpu", w), (N, w.detach().to(N).requires_grad_())):
        r = torch.ops.aten._embedding_bag(
            weight,
            idx.to(dev),
            off.to(dev),
            scale,
            2,
            False,
            None,
            False,
            -1 if pad is None else pad,
        )
        rr = torch.nn.functional.embedding_bag(idx.to(dev), weight, off.to(dev), **kw)
        g = torch.linspace(-1, 1, rr.numel()).view(rr.shape).to(dev, dtype)
        (rr * g).sum().backward()
        outs[dev] = (r, rr, weight.grad)
    (rc, outc, gc), (rn, outn, gn) = outs["cpu"], outs[N]
    assert_same(outn, outc)
    assert_same(rn[3], rc[3])  # max_indices
    assert_same(rn[2], rc[2])  # bag sizes
    assert_same(gn, gc)


def test_embedding_bag_module_2d_input_and_last_offset(no_fallback):
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(20, 4, mode="mean")
    x = torch.randint(0, 20, (5, 3))
    bn = torch.nn.EmbeddingBag(20, 4, mode="mean").to(N)
    bn.load_state_dict(bag.state_dict())
    assert_same(bn(x.to(N)), bag(x), atol=1e-6, rtol=1e-5)
    idx, off = torch.tensor([0, 5, 7, 7, 19]), torch.tensor([0, 2, 5])
    f = torch.nn.functional.embedding_bag
    assert_same(
        f(idx.to(N), bn.weight, off.to(N), include_last_offset=True),
        f(idx, bag.weight, off, include_last_offset=True),
        atol=1e-6,
        rtol=1e-5,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_family(no_fallback, dtype, norm):
    torch.manual_seed(0)
    x = torch.randn(3, 10, 12, dtype=dtype)
    z = torch.randn(3, 10, 7, dtype=torch.complex64 if dtype == torch.float32 else torch.complex128)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-10)
    cases = [
        lambda t, c: torch.fft.fft(c, norm=norm),
        lambda t, c: torch.fft.ifft(c, n=9, norm=norm),
        lambda t, c: torch.fft.rfft(t, norm=norm),
        lambda t, c: torch.fft.rfft(t, n=7, dim=1, norm=norm),
        lambda t, c: torch.fft.irfft(c, norm=norm),
        lambda t, c: torch.fft.irfft(c, n=15, norm=norm),
        lambda t, c: torch.fft.fft2(c, norm=norm),
        lambda t, c: torch.fft.rfftn(t, norm=norm),
        lambda t, c: torch.fft.irfftn(c, s=(10, 12), norm=norm),
        lambda t, c: torch.fft.hfft(c, norm=norm),
    ]
    for f in cases:
        assert_same(f(x.to(N), z.to(N)), f(x, z), **tol)


@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_fft_output_layout_matches_the_meta_function(perm):
    """The strides of every FFT's output are those PyTorch's meta function
    gives (batch dims by the input's strides, then the transformed dims):
    FakeTensor and compiled graphs assume them (Inductor asserts them), and
    the matrix-product DFT leaves another layout. Values against the CPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    g = torch.Generator().manual_seed(0)
    real = torch.randn(4, 6, 5, generator=g).permute(*perm)
    cplx = torch.complex(real, real * 0.5)
    cases = [
        (torch.fft.fft, cplx, dict(dim=1)),
        (torch.fft.ifft, cplx, dict(dim=0, n=7)),
        (torch.fft.fftn, cplx, dict(dim=(2, 0))),
        (torch.fft.fft, cplx, dict(dim=1, n=2100)),  # longer than the DFT takes: CPU's
        (torch.fft.rfft, real, dict(dim=1)),
        (torch.fft.rfftn, real, dict(dim=(0, 2))),
        (torch.fft.ihfft, real, dict(dim=0)),
        (torch.fft.irfft, cplx, dict(dim=1)),
        (torch.fft.irfftn, cplx, dict(dim=(2, 0))),
        (torch.fft.hfft, cplx, dict(dim=0)),
    ]
    for f, x, kw in cases:
        xn = x.to(N)
        got = f(xn, **kw)
        with FakeTensorMode() as mode:
            meta = f(mode.from_tensor(xn), **kw)
        assert got.stride() == meta.stride(), (f.__name__, kw, got.stride(), meta.stride())
        assert_same(got, f(x, **kw), atol=1e-4, rtol=1e-4)


def test_fft_gradient(no_fallback):
    x = torch.randn(4, 16, requires_grad=True)
    loss = lambda t: (torch.fft.rfft(t).real.pow(2) + torch.fft.rfft(t).imag).sum()  # noqa: E731
    loss(x).backward()
    xn = x.detach().to(N).requires_grad_()
    loss(xn).backward()
    assert_same(xn.grad, x.grad, atol=1e-5, rtol=1e-5)


def test_complex_sum_and_rsub(no_fallback):
    torch.manual_seed(0)
    z = torch.randn(3, 4, dtype=torch.complex64)
    for f in (
        lambda t: t.sum(),
        lambda t: t.sum(1),
        lambda t: t.sum((0, 1), keepdim=True),
        lambda t: t.conj().sum(0),
        lambda t: t[0, 0].sum(),
    ):
        assert_same(f(z.to(N)), f(z), atol=1e-6, rtol=1e-6)
    out = torch.empty(4, dtype=torch.complex64, device=N)
    assert_same(torch.sum(z.to(N), 0, out=out), z.sum(0), atol=1e-6, rtol=1e-6)
    x, y = torch.randn(5), torch.randn(5)
    assert_same(torch.rsub(x.to(N), y.to(N), alpha=2), torch.rsub(x, y, alpha=2))
    assert_same(1.0 - x.to(N), 1.0 - x)
