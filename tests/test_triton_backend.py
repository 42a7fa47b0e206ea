"""Triton kernels launched on neuron tensors, unchanged: Triton discovers the
neuron backend (entry point "triton.backends"), compiles the kernel with its
front end and runs it with the interpreter's semantics. Each kernel is
checked against the same kernel on CPU tensors under Triton's interpreter
(TRITON_INTERPRET=1, in a child process, as the mode is fixed at decoration)
or against eager PyTorch."""

import sys
import textwrap

import pytest
import torch

pytest.importorskip("triton")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

N = "neuron"


@triton.jit
def _twice(x):
    return x * 2.0


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, alpha * _twice(x) + y, mask=m)


@triton.jit
def _row_softmax_kernel(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=m)


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N_, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):  # fmt: skip
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(
            a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K)
        )
        b = tl.load(
            b_ptr + rk[:, None] * N_ + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N_)
        )
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(
        c_ptr + rm[:, None] * N_ + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N_)
    )


def test_the_active_driver_is_neuron():
    from triton.runtime import driver

    assert "neuron" in triton.backends.backends
    assert driver.active.get_current_target().backend == "neuron"
    assert driver.active.get_active_torch_device() == torch.device(N, 0)


def test_elementwise_with_a_nested_jit_function(no_fallback):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    out = torch.empty(1000, device=N)
    _axpy_kernel[(triton.cdiv(1000, 128),)](x.to(N), y.to(N), out, 1000, 0.5, BLOCK=128)
    torch.testing.assert_close(out.cpu(), 0.5 * (2.0 * x) + y)


def test_reduction_and_dot_against_torch(no_fallback):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 50, generator=g)
    out = torch.empty(7, 50, device=N)
    _row_softmax_kernel[(7,)](x.to(N), out, 50, 50, BLOCK=64)
    torch.testing.assert_close(out.cpu(), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)

    a, b = torch.randn(33, 20, generator=g), torch.randn(20, 17, generator=g)
    c = torch.empty(33, 17, device=N)
    _matmul_kernel[(3, 2)](a.to(N), b.to(N), c, 33, 17, 20, BM=16, BN=16, BK=16)
    torch.testing.assert_close(c.cpu(), a @ b, atol=1e-5, rtol=1e-5)


def test_stream_order_with_eager_work(no_fallback):
    """The kernel sees eager results queued before it, and eager work queued
    after it sees the kernel's output."""
    x = torch.arange(4096, dtype=torch.float32, device=N)
    y = x * 3  # queued
    out = torch.empty_like(x)
    _axpy_kernel[(32,)](y, x, out, 4096, 1.0, BLOCK=128)
    z = out + 1  # queued after
    ref = torch.arange(4096, dtype=torch.float32)
    torch.testing.assert_close(z.cpu(), 2 * (3 * ref) + ref + 1)


def test_torchtitan_moe_permutation_kernel_matches_the_interpreter_on_cpu(tmp_path):
    """TorchTitan's _fill_indices_kernel (through generate_permute_indices),
    unchanged, on neuron against the same kernel on CPU tensors under
    TRITON_INTERPRET=1 and against TorchTitan's CPU implementation."""
    pytest.importorskip("torchtitan")
    from conftest import run_python
    from torchtitan.models.moe.kernels import generate_permute_indices

    g = torch.Generator().manual_seed(3)
    # 2 ranks x 4 experts, an empty expert included
    counts = torch.randint(0, 9, (8,), generator=g, dtype=torch.int32)
    counts[5] = 0
    args = (4, 2, 128, 8)
    got = generate_permute_indices(counts.to(N), *args)
    want_cpu = generate_permute_indices(counts, *args, use_cpu=True)
    for a, b in zip(got, want_cpu):
        assert torch.equal(a.cpu().to(b.dtype), b)

    code = textwrap.dedent(f"""
        import torch
        from torchtitan.models.moe.kernels import generate_permute_indices
        counts = torch.tensor({counts.tolist()}, dtype=torch.int32)
        idx, sizes, offs = generate_permute_indices(counts, *{args})
        print("RESULT", idx.tolist(), sizes.tolist(), offs.tolist())
    """)
    r = run_python(code, {"TRITON_INTERPRET": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert line, r.stderr[-2000:]
    assert (
        line[0] == f"RESULT {got[0].cpu().tolist()} {got[1].cpu().tolist()} {got[2].cpu().tolist()}"
    )


def test_a_kernel_error_is_an_exception():
    x = torch.ones(10, device=N)

    @triton.jit
    def bad(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + undefined_name)  # noqa: F821

    with pytest.raises(Exception, match="undefined_name"):
        bad[(1,)](x, BLOCK=16)


def test_python_is_where_the_interpreter_runs():
    assert sys.version_info >= (3, 9)


# ---- Liger-Kernel (a pip package of Triton kernels), unchanged --------------


def test_liger_rms_norm_swiglu_cross_entropy_against_torch(no_fallback):
    """Liger's fused RMSNorm (it calls libdevice's rsqrt), SwiGLU and cross
    entropy, forward and backward, against the same math in eager torch.
    (Triton's own interpreter cannot run the RMSNorm on CPU: it lacks the
    device library, which the neuron backend maps to triton.language math.)"""
    pytest.importorskip("liger_kernel")
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    from liger_kernel.transformers.cross_entropy import LigerCrossEntropyLoss
    from liger_kernel.transformers.rms_norm import LigerRMSNorm

    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 64, generator=g)
    w = torch.rand(64, generator=g) + 0.5

    norm = LigerRMSNorm(64, eps=1e-6).to(N)
    with torch.no_grad():
        norm.weight.copy_(w)
    xn = x.to(N).requires_grad_()
    out = norm(xn)
    out.square().sum().backward()
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr
    ref.square().sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(xn.grad.cpu(), xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm.weight.grad.cpu(), wr.grad, atol=1e-4, rtol=1e-4)

    a, b = torch.randn(6, 64, generator=g), torch.randn(6, 64, generator=g)
    an, bn = a.to(N).requires_grad_(), b.to(N).requires_grad_()
    out = LigerSiLUMulFunction.apply(an, bn)
    out.sum().backward()
    ar, br = a.clone().requires_grad_(), b.clone().requires_grad_()
    ref = torch.nn.functional.silu(ar) * br
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(an.grad.cpu(), ar.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(bn.grad.cpu(), br.grad, atol=1e-5, rtol=1e-5)

    logits = torch.randn(7, 50, generator=g)
    target = torch.randint(0, 50, (7,), generator=g)
    target[3] = -100  # ignored
    ln = logits.to(N).requires_grad_()
    loss = LigerCrossEntropyLoss()(ln, target.to(N))
    loss.backward()
    lr = logits.clone().requires_grad_()
    ref = torch.nn.functional.cross_entropy(lr, target)
    ref.backward()
    torch.testing.assert_close(loss.detach().cpu(), ref.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ln.grad.cpu(), lr.grad, atol=1e-5, rtol=1e-5)
