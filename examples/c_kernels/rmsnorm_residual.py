"""A C kernel as a PyTorch op: ``neuron_examples::rmsnorm_residual``.

    y, h = torch.ops.neuron_examples.rmsnorm_residual(x, residual, weight, eps)

h = x + residual and y = RMSNorm(h) * weight. On neuron tensors it runs the C
kernel in rmsnorm_residual.c on the current stream; on the CPU (and as the
reference) it runs PyTorch ops. A fake implementation lets
torch.compile(fullgraph=True) trace it, and register_autograd gives its
backward (PyTorch ops, which run on the neuron device like any other).
"""

from pathlib import Path

import torch

import torch_neuronx.c_kernels

_lib = None


def kernels():
    global _lib
    if _lib is None:
        _lib = torch_neuronx.c_kernels.load(
            "rmsnorm_residual",
            [Path(__file__).with_suffix(".c")],
            functions={
                "rmsnorm_residual": [
                    "const float*",  # x
                    "const float*",  # residual
                    "const float*",  # weight
                    "float*",  # y
                    "float*",  # h
                    "int64_t",  # rows
                    "int64_t",  # cols
                    "float",  # eps
                ]
            },
        )
    return _lib


def reference(x, residual, weight, eps):
    h = x + residual
    hf = h.float()
    y = hf * torch.rsqrt(hf.square().mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype), h


@torch.library.custom_op("neuron_examples::rmsnorm_residual", mutates_args=())
def rmsnorm_residual(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return reference(x, residual, weight, eps)  # CPU and any other device


@rmsnorm_residual.register_kernel("neuron")
def _neuron(x, residual, weight, eps):
    torch._check(
        x.shape == residual.shape and weight.shape == x.shape[-1:],
        lambda: (
            f"rmsnorm_residual: x {tuple(x.shape)}, residual {tuple(residual.shape)} "
            f"and weight {tuple(weight.shape)} do not match"
        ),
    )
    if x.dtype != torch.float32:  # the kernel is fp32: compute there, return x's dtype
        y, h = _neuron(x.float(), residual.float(), weight.float(), eps)
        return y.to(x.dtype), h.to(x.dtype)
    xc, rc, wc = x.contiguous(), residual.contiguous(), weight.contiguous().float()
    y, h = torch.empty_like(xc), torch.empty_like(xc)
    cols = x.shape[-1]
    kernels().rmsnorm_residual(xc, rc, wc, y, h, x.numel() // max(cols, 1), cols, eps)
    return y, h


@rmsnorm_residual.register_fake
def _fake(x, residual, weight, eps):
    return torch.empty_like(x), torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    x, residual, weight, eps = inputs
    ctx.save_for_backward(output[1], weight)
    ctx.eps = eps


def _backward(ctx, gy, gh):
    h, weight = ctx.saved_tensors
    hf = h.float()
    rstd = torch.rsqrt(hf.square().mean(-1, keepdim=True) + ctx.eps)
    n = hf.shape[-1]
    gw = gy.float() * weight.float()
    dh = rstd * gw - hf * rstd.pow(3) * (gw * hf).sum(-1, keepdim=True) / n
    if gh is not None:
        dh = dh + gh.float()
    dh = dh.to(h.dtype)
    dweight = (gy.float() * hf * rstd).reshape(-1, n).sum(0).to(weight.dtype)
    return dh, dh, dweight, None


rmsnorm_residual.register_autograd(_backward, setup_context=_setup_context)
