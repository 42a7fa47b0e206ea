"""torch._grouped_mm on neuron (the MoE experts' product): its four forms,
forward and backward, uneven and empty groups, against CPU's _grouped_mm;
CPU's errors for what it rejects, and a device-side error for bad offsets
(CPU reads them unchecked)."""

import pytest
import torch

N = "neuron"


def _offs(sizes):
    return torch.tensor(sizes).cumsum(0).to(torch.int32)


def _rand(*shape, dtype, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# uneven, empty (first, middle, last) and one-row groups
SIZES = [0, 5, 17, 0, 1, 25, 0]
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def _forms(dtype):
    G, K, Nn = len(SIZES), 24, 16  # 16-byte row strides, as CPU requires
    M = sum(SIZES) + 3  # 3 rows past the last group in the 2-D x 3-D form
    return {
        "2d_3d": (_rand(M, K, dtype=dtype, seed=0), _rand(G, K, Nn, dtype=dtype, seed=1), SIZES),
        "3d_2d": (_rand(G, 9, K, dtype=dtype, seed=2), _rand(K, sum(SIZES), dtype=dtype, seed=3), SIZES),
        "2d_2d": (_rand(9, sum(SIZES), dtype=dtype, seed=4), _rand(sum(SIZES), Nn, dtype=dtype, seed=5), SIZES),
        "3d_3d": (_rand(G, 9, K, dtype=dtype, seed=6), _rand(G, K, Nn, dtype=dtype, seed=7), None),
    }  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("form", ["2d_3d", "3d_2d", "2d_2d", "3d_3d"])
def test_forward_and_backward_match_cpu(form, dtype, no_fallback):
    a, b, sizes = _forms(dtype)[form]
    offs = None if sizes is None else _offs(sizes)
    ref = torch._grouped_mm(a, b, offs)
    if form == "2d_3d":
        ref[sum(SIZES) :] = 0  # CPU leaves rows no group covers uninitialised; neuron zeroes them
    an, bn = a.to(N).requires_grad_(), b.to(N).requires_grad_()
    got = torch._grouped_mm(an, bn, None if offs is None else offs.to(N))
    assert got.dtype == ref.dtype and got.shape == ref.shape and got.stride() == ref.stride()
    tol = TOL[dtype]
    torch.testing.assert_close(got.cpu(), ref, atol=tol, rtol=tol)

    # backward: CPU's own _grouped_mm gradients (rows past the last group excluded)
    g = _rand(*ref.shape, dtype=dtype, seed=9)
    if form == "2d_3d":
        g[sum(SIZES) :] = 0
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch._grouped_mm(ac, bc, offs).backward(g)
    got.backward(g.to(N))
    rows = sum(SIZES) if form == "2d_3d" else None  # CPU's grad rows past the groups: uninitialised
    torch.testing.assert_close(an.grad.cpu()[:rows], ac.grad[:rows], atol=tol, rtol=tol)
    if form == "2d_3d":
        assert torch.all(an.grad.cpu()[rows:] == 0)
    torch.testing.assert_close(bn.grad.cpu(), bc.grad, atol=tol, rtol=tol)


def test_transposed_operands(no_fallback):
    """Strided views, as the backward passes them."""
    a = _rand(24, 40, dtype=torch.bfloat16, seed=0).t()  # [40, 24], column-major
    b = _rand(3, 20, 24, dtype=torch.bfloat16, seed=1).transpose(1, 2)
    offs = _offs([10, 0, 30])
    torch.testing.assert_close(
        torch._grouped_mm(a.to(N), b.to(N), offs.to(N)).cpu(),
        torch._grouped_mm(a, b, offs),
        atol=1e-2,
        rtol=1e-2,
    )


def test_many_small_groups_in_one_launch(no_fallback):
    """128 experts of 16 tokens: one kernel, not a GEMM launch per group."""
    a = _rand(2048, 64, dtype=torch.bfloat16, seed=0)
    b = _rand(128, 64, 32, dtype=torch.bfloat16, seed=1)
    offs = _offs([16] * 128)
    with torch.profiler.profile() as prof:
        got = torch._grouped_mm(a.to(N), b.to(N), offs.to(N))
        torch.neuron.synchronize()
    names = [e.name for e in prof.events()]
    assert "aten::_grouped_mm" in names
    assert not {"aten::mm", "aten::addmm", "aten::bmm"} & set(names), sorted(set(names))
    torch.testing.assert_close(got.cpu(), torch._grouped_mm(a, b, offs), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(
    "offs, match",
    [([10, 5, 40], "non-decreasing"), ([10, 20, 41], "past the end")],
)
def test_bad_offsets_are_a_runtime_error(offs, match):
    a = torch.randn(40, 8, device=N)
    b = torch.randn(3, 8, 4, device=N)
    with pytest.raises(RuntimeError, match=match):
        torch._grouped_mm(a, b, torch.tensor(offs, dtype=torch.int32, device=N))
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # the fault was reported once: the device works on
    assert torch.ones(2, device=N).sum().item() == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"offs_dtype": torch.int64}, "Offsets have to be int32"),
        ({"bias": True}, "Bias not supported yet"),
        ({"out_dtype": torch.float32}, "output dtype must match"),
        ({"dtype": torch.float64}, "Float32, BFloat16 or Float16"),
    ],
)
def test_rejected_as_on_cpu(kwargs, match):
    dtype = kwargs.get("dtype", torch.bfloat16)
    for dev in ("cpu", N):
        a = torch.randn(16, 16, dtype=dtype, device=dev)
        b = torch.randn(2, 16, 16, dtype=dtype, device=dev)
        offs = torch.tensor([8, 16], dtype=kwargs.get("offs_dtype", torch.int32), device=dev)
        extra = {}
        if kwargs.get("bias"):
            extra["bias"] = torch.randn(2, 16, dtype=dtype, device=dev)
        if "out_dtype" in kwargs:
            extra["out_dtype"] = kwargs["out_dtype"]
        with pytest.raises(RuntimeError, match=match):
            torch._grouped_mm(a, b, offs, **extra)
