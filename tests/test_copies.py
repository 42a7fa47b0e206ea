"""Copies in every direction, casts, views, storage ops: against the CPU."""

import itertools
import warnings

import pytest
import torch
from conftest import assert_same

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


def sample(dtype, shape=(5, 7)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g) * 10
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_h2d_d2h(dtype):
    t = sample(dtype)
    n = t.to("neuron")
    assert n.dtype == dtype
    assert torch.equal(n.cpu(), t)


@pytest.mark.parametrize("src,dst", list(itertools.product(DTYPES, DTYPES)))
def test_casts_match_cpu(src, dst):
    t = sample(src)
    if src.is_floating_point:
        t = t.clamp(-100, 100)  # float -> int outside the range is undefined in C
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real discards the imaginary part
        want = t.to(dst)
        got = t.to("neuron").to(dst)
    assert got.device.type == "neuron" and got.dtype == dst
    assert torch.equal(got.cpu(), want)


def test_strided_and_broadcast_copies():
    base = torch.arange(60.0).reshape(3, 4, 5)
    n = base.to("neuron")
    assert torch.equal(n.transpose(0, 2).contiguous().cpu(), base.transpose(0, 2).contiguous())
    assert torch.equal(n[:, 1::2, ::3].cpu(), base[:, 1::2, ::3])
    dst = torch.zeros(3, 4, 5, device="neuron")
    dst.copy_(torch.arange(5.0))  # broadcast from CPU
    assert torch.equal(dst.cpu(), torch.arange(5.0).expand(3, 4, 5))
    dst[1].copy_(n[2])  # device to device into a view
    ref = torch.zeros(3, 4, 5)
    ref.copy_(torch.arange(5.0))
    ref[1].copy_(base[2])
    assert torch.equal(dst.cpu(), ref)
    cpu_out = torch.empty(5, 4, 3)
    cpu_out.copy_(n.permute(2, 1, 0))  # D2H into a contiguous CPU tensor
    assert torch.equal(cpu_out, base.permute(2, 1, 0))
    strided_cpu = torch.empty(10, 6)[:, ::2]
    strided_cpu.copy_(n.reshape(6, 10).t()[:, :3])  # D2H into a strided CPU view
    assert torch.equal(strided_cpu, base.reshape(6, 10).t()[:, :3])


def test_overlapping_copy_raises_as_cpu():
    t = torch.arange(10.0)
    n = t.to("neuron")
    for x in (t, n):  # partial overlap: CPU refuses, and so do we
        with pytest.raises(RuntimeError, match="single memory location"):
            x[1:].copy_(x[:-1])
    n[1:].copy_(n[:-1].clone())
    t[1:] = t[:-1].clone()
    assert torch.equal(n.cpu(), t)


def test_cross_device_copy():
    a = torch.randn(100, device="neuron:0")
    b = a.to("neuron:1")
    assert b.device.index == 1 and torch.equal(a.cpu(), b.cpu())


def test_views_share_memory():
    n = torch.zeros(4, 6, device="neuron")
    v = n.view(24)
    v[3] = 5.0
    assert n[0, 3].item() == 5.0
    t = n.t()
    assert t.data_ptr() == n.data_ptr() and t.stride() == (1, 6)
    s = n.as_strided((2, 2), (6, 1), 1)
    s.fill_(2.0)
    assert n[0, 1].item() == 2.0 and n[1, 2].item() == 2.0
    u = n.unfold(1, 2, 2)
    assert u.shape == (4, 3, 2) and u.data_ptr() == n.data_ptr()
    c = torch.zeros(3, 2, device="neuron")
    z = torch.view_as_complex(c)
    assert z.dtype == torch.complex64 and torch.view_as_real(z).data_ptr() == c.data_ptr()
    assert n.reshape(2, 12).data_ptr() == n.data_ptr()
    for part in n.split(2):
        assert part.untyped_storage().data_ptr() == n.untyped_storage().data_ptr()


def test_resize_and_set():
    n = torch.arange(6.0, device="neuron")
    n.resize_(2, 3)
    assert n.shape == (2, 3) and torch.equal(n.cpu(), torch.arange(6.0).reshape(2, 3))
    n.resize_(4, 4)  # grows the storage, keeps the first elements
    assert torch.equal(n.flatten()[:6].cpu(), torch.arange(6.0))
    m = torch.empty(0, device="neuron")
    m.set_(n.untyped_storage(), 2, (2, 2), (1, 2))
    assert torch.equal(m.cpu(), n.flatten()[2:].as_strided((2, 2), (1, 2)).cpu())
    k = torch.empty(0, device="neuron").set_(n)
    assert k.data_ptr() == n.data_ptr()
    e = torch.ones(3, device="neuron").set_()
    assert e.numel() == 0


def test_fill_zero_item_clone_contiguous_cat():
    for dtype in DTYPES:
        n = torch.empty(3, 4, dtype=dtype, device="neuron")
        n.fill_(1)
        assert torch.equal(n.cpu(), torch.ones(3, 4, dtype=dtype))
        n.zero_()
        assert torch.equal(n.cpu(), torch.zeros(3, 4, dtype=dtype))
    x = torch.randn(3, 4)
    n = x.to("neuron")
    assert n[1, 2].item() == x[1, 2].item()
    assert torch.equal(n.t().clone().cpu(), x.t().clone())
    assert n.t().contiguous().is_contiguous()
    a, b = torch.randn(2, 3), torch.randn(4, 3).to(torch.float64)
    assert_same(torch.cat([a.neuron(), b.neuron()]), torch.cat([a, b]))
    assert_same(torch.cat([a.neuron(), a.neuron()], dim=1), torch.cat([a, a], dim=1))
    assert_same(torch.stack([a.neuron(), a.neuron()]), torch.stack([a, a]))
    out = torch.empty(0, device="neuron")
    torch.cat([a.neuron(), a.neuron()], out=out)
    assert_same(out, torch.cat([a, a]))


def test_zero_size_and_scalars():
    e = torch.empty(0, 3, device="neuron")
    assert e.cpu().shape == (0, 3)
    s = torch.tensor(3.5, device="neuron")
    assert s.item() == 3.5 and s.dim() == 0
    assert torch.zeros((), device="neuron").cpu().shape == ()


def test_printing():
    x = torch.arange(4.0, device="neuron")
    assert "device='neuron:0'" in repr(x)


def test_non_blocking_from_pageable_memory_is_still_correct():
    src = torch.randn(300, 300)
    ref = src.clone()
    d = src.to("neuron", non_blocking=True)
    src.zero_()  # pageable: the copy had to finish before returning
    assert torch.equal(d.cpu(), ref)
    out = torch.empty(300, 300)
    out.copy_(d, non_blocking=True)  # to pageable memory: synchronous too
    assert torch.equal(out, ref)


def test_conjugate_and_negative_views_copy_without_recursion():
    # a crash found by the model sweep (llama4's complex rotary embeddings)
    z = torch.randn(5, dtype=torch.complex64)
    n = z.neuron()
    assert torch.equal(n.conj().cpu(), z.conj())
    assert torch.equal(n.conj().clone().cpu(), z.conj())
    c = torch.empty(5, dtype=torch.complex64, device="neuron")
    c.copy_(n.conj())
    assert torch.equal(c.cpu(), z.conj())
    assert torch.equal(torch._neg_view(n).clone().cpu(), -z)
    w = torch.randn(5, dtype=torch.complex64, requires_grad=True)
    wn = w.detach().neuron().requires_grad_()
    (w * w.conj()).real.sum().backward()
    (wn * wn.conj()).real.sum().backward()
    assert torch.allclose(wn.grad.cpu(), w.grad)


def test_large_copies_stream_exactly():
    """Copies over 16 MiB go out with streaming stores: unaligned starts,
    odd lengths, rows of a strided copy, and nothing written outside."""
    n = 4_300_003  # 17.2 MB of float32
    x = torch.randn(n, generator=torch.Generator().manual_seed(3))
    xn = x.neuron()
    assert torch.equal(xn.clone().cpu(), x)
    d = torch.zeros(n + 5, device="neuron")
    d[3 : 3 + n - 1].copy_(xn[1:])  # both ends off any 64-byte boundary
    want = torch.zeros(n + 5)
    want[3 : 3 + n - 1] = x[1:]
    assert torch.equal(d.cpu(), want)
    m = x[: 2098 * 2049].view(2098, 2049)
    assert torch.equal(m.neuron()[:, 1:].contiguous().cpu(), m[:, 1:].contiguous())
    assert torch.equal(m.neuron().t().contiguous().cpu(), m.t().contiguous())


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_layouts_and_formats_match_cpu(dim):
    """cat's output shape, dtype and memory format are computed in C++ for
    inputs of one rank and dtype (the KV-cache case) and by ATen's meta cat
    otherwise: both against CPU, for values and strides."""
    g = torch.Generator().manual_seed(dim + 10)
    base = torch.randn(2, 3, 4, 5, generator=g)
    cases = [
        [base, base * 2],  # contiguous
        [base.transpose(1, 2).contiguous().transpose(1, 2), base],  # one permuted input
        [
            base.contiguous(memory_format=torch.channels_last),
            (base + 1).contiguous(memory_format=torch.channels_last),
        ],
        [base.contiguous(memory_format=torch.channels_last), base],  # mixed formats
        [base[:, :, :, ::2].expand(2, 3, 4, 3), base[:, :, :, :3]],  # strided, expanded
        [base, base.to(torch.float64)],  # mixed dtypes: promotion (meta path)
        [base.to(torch.bfloat16), base.to(torch.bfloat16)],
        # legacy empty 1-D inputs (a KV cache's first cat): skipped, output contiguous
        [torch.empty(0), base.contiguous(memory_format=torch.channels_last), torch.empty(0)],
        [torch.empty(0, dtype=torch.float64), base],  # ... and they take part in promotion
    ]
    for inputs in cases:
        want = torch.cat(inputs, dim)
        got = torch.cat([t.to("neuron") for t in inputs], dim)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.stride() == want.stride()
        assert torch.equal(got.cpu(), want)
        out = torch.empty(0, dtype=want.dtype, device="neuron")
        torch.cat([t.to("neuron") for t in inputs], dim, out=out)
        assert torch.equal(out.cpu(), want)


def test_item_every_dtype_view_and_stream_order():
    """item() copies its element by a small task after the stream's earlier
    work: every dtype, an element of a strided view, conj and neg views, a
    value that queued work has just written, and torch.float8 (moved as a
    byte) against CPU."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(4, 6, generator=g) * 100
    for dtype in (
        torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
        torch.float16, torch.bfloat16, torch.float32, torch.float64,
        torch.complex64, torch.complex128, torch.float8_e4m3fn,
    ):  # fmt: skip
        x = base.to(dtype) if not dtype.is_complex else torch.complex(base, -base).to(dtype)
        n = x.to("neuron")
        for idx in ((0, 0), (3, 5), (2, 1)):
            got, want = n.t()[idx[1], idx[0]].item(), x.t()[idx[1], idx[0]].item()
            assert type(got) is type(want) and (got == want or got != got and want != want)
        if dtype.is_complex:
            assert n[1, 2].conj().item() == x[1, 2].conj().item()
            assert torch._neg_view(n[1, 2]).item() == torch._neg_view(x[1, 2]).item()
    # written by queued work just before: item waits for it
    big = torch.zeros(2048, 2048, device="neuron")
    for v in range(5):
        big.fill_(float(v))
        big.add_(1)
        assert big[-1, -1].item() == v + 1
    # more dimensions than a kernel descriptor holds (the general copy)
    deep = (base[1, 2] * 3).reshape([1] * 13)
    assert deep.to("neuron").item() == deep.item()
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2, device="neuron").item()


@pytest.mark.parametrize("n", [1, 3, 4, 7])
def test_cat_many_inputs_dtypes_and_fallbacks_match_cpu(n):
    """cat copies its inputs by tasks of up to three copies each: every input
    lands at its offset for any count, with empty inputs among them, for
    dtypes the kernels know and ones they move as bytes; inputs that share
    memory with out, or conj views, take the general copy."""
    g = torch.Generator().manual_seed(n)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64):
        parts = []
        for i in range(n):
            rows = 0 if i == 1 else i + 1  # one empty input when n > 1
            x = torch.randn(3, rows, 5, generator=g).to(dtype)
            parts.append(x.transpose(0, 2).contiguous().transpose(0, 2) if i % 2 else x)
        parts.append(torch.randn(5, 3, 2, generator=g).to(dtype).permute(1, 2, 0))  # strided
        want = torch.cat(parts, 1)
        got = torch.cat([t.to("neuron") for t in parts], 1)
        assert torch.equal(got.cpu(), want)
        assert torch.equal(torch.cat([t.to("neuron") for t in parts], -2).cpu(), want)
    # out shares memory with an input: the result is still CPU's
    buf = torch.arange(24.0).reshape(2, 12)
    nb = buf.to("neuron")
    torch.cat([nb[:, :2], nb[:, 2:4]], 1, out=nb[:, 6:10])
    torch.cat([buf[:, :2], buf[:, 2:4]], 1, out=buf[:, 6:10])
    assert torch.equal(nb.cpu(), buf)
    # an out whose elements share memory: CPU's error, not a silent result
    for d in ("cpu", "neuron"):
        parts = [torch.ones(2, device=d), torch.ones(2, device=d)]
        with pytest.raises(RuntimeError, match="more than one element"):
            torch.cat(parts, 0, out=torch.zeros(1, device=d).expand(4))
    c = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    got = torch.cat([c.to("neuron").conj(), c.to("neuron")], 0)
    assert torch.equal(got.cpu(), torch.cat([c.conj(), c], 0))


def test_cat_bad_input_raises_as_cpu():
    a, b = torch.ones(2, 3), torch.ones(2, 4)
    for inputs, dim in [([a, b], 0), ([a, torch.ones(2, 3, 1)], 0), ([a, a], 2)]:
        with pytest.raises(Exception) as cpu_err:
            torch.cat(inputs, dim)
        with pytest.raises(type(cpu_err.value)):
            torch.cat([t.to("neuron") for t in inputs], dim)
    # the legacy empty 1-D input is skipped, as on CPU
    legacy = [a, torch.empty(0), a]
    assert torch.equal(torch.cat([t.to("neuron") for t in legacy], 0).cpu(), torch.cat(legacy, 0))
