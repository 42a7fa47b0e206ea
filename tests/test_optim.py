"""Optimizers on neuron: fused Adam/AdamW kernels and the default (foreach)
path, against the same optimizer on CPU, with no CPU fallback."""

import pytest
import torch

import torch_neuronx


def make_params(seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(37, 5, generator=g).to(dtype), torch.randn(300, generator=g).to(dtype)]


def train(device, opt_cls, dtype=torch.float32, steps=4, **kw):
    params = [p.to(device).requires_grad_() for p in make_params(0, dtype)]
    opt = opt_cls(params, **kw)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(device, dtype)
        opt.step()
    return [p.detach().cpu() for p in params], opt


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(weight_decay=0.1),
        dict(amsgrad=True),
        dict(maximize=True, weight_decay=0.05),
        dict(lr=torch.tensor(0.01)),
    ],
)
def test_fused_adam_matches_cpu(opt_cls, kw):
    torch_neuronx.clear_op_tracking()
    neuron, opt = train("neuron", opt_cls, fused=True, **kw)
    cpu, _ = train("cpu", opt_cls, fused=True, **kw)
    for a, b in zip(neuron, cpu):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert torch_neuronx.get_fallback_ops() == {}
    state = opt.state[opt.param_groups[0]["params"][0]]
    assert state["exp_avg"].device.type == "neuron" and float(state["step"]) == 4.0


def test_fused_adamw_bf16_params():
    neuron, _ = train("neuron", torch.optim.AdamW, dtype=torch.bfloat16, fused=True)
    cpu, _ = train("cpu", torch.optim.AdamW, dtype=torch.bfloat16, fused=True)
    for a, b in zip(neuron, cpu):
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    "opt_cls,kw",
    [
        (torch.optim.AdamW, {}),
        (torch.optim.Adam, {}),
        (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    ],
)
def test_default_optimizer_path_runs_natively(opt_cls, kw):
    torch_neuronx.clear_op_tracking()
    neuron, _ = train("neuron", opt_cls, **kw)
    cpu, _ = train("cpu", opt_cls, **kw)
    for a, b in zip(neuron, cpu):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert torch_neuronx.get_fallback_ops() == {}


def test_fused_adamw_skips_step_when_found_inf():
    p = torch.ones(10, device="neuron")
    g, m, v = torch.ones_like(p), torch.zeros_like(p), torch.zeros_like(p)
    step = torch.ones((), device="neuron")
    torch._fused_adamw_(
        [p],
        [g],
        [m],
        [v],
        [],
        [step],
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.0,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        found_inf=torch.ones((), device="neuron"),
    )
    assert torch.equal(p.cpu(), torch.ones(10))
    torch._fused_adamw_(
        [p],
        [g],
        [m],
        [v],
        [],
        [step],
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.0,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        grad_scale=torch.full((), 2.0, device="neuron"),
        found_inf=torch.zeros((), device="neuron"),
    )
    ref = torch.ones(10)
    torch._fused_adamw_(
        [ref],
        [torch.ones(10)],
        [torch.zeros(10)],
        [torch.zeros(10)],
        [],
        [torch.ones(())],
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.0,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        grad_scale=torch.full((), 2.0),
        found_inf=torch.zeros(()),
    )
    torch.testing.assert_close(p.cpu(), ref)


def test_fused_adam_rejects_mismatched_lists():
    p = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="same length"):
        torch._fused_adamw_(
            [p],
            [],
            [p],
            [p],
            [],
            [p],
            lr=0.1,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.0,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
        )


@pytest.mark.parametrize(
    "cfg",
    [
        dict(momentum=0.9),
        dict(momentum=0.9, nesterov=True, weight_decay=0.1),
        dict(momentum=0.8, dampening=0.3, maximize=True),
        dict(),
        dict(momentum=0.9, lr_tensor=True),
    ],
)
def test_fused_sgd_matches_cpu(cfg):
    """torch.optim.SGD(fused=True): ATen's _fused_sgd_ on neuron, step for
    step as the CPU fused kernel, without a CPU fallback."""
    cfg = dict(cfg)
    lr = torch.tensor(0.05) if cfg.pop("lr_tensor", False) else 0.05
    g = torch.Generator().manual_seed(3)
    w0 = [torch.randn(7, 5, generator=g), torch.randn(11, generator=g)]
    grads = [[torch.randn(w.shape, generator=g) for w in w0] for _ in range(3)]
    torch_neuronx.clear_op_tracking()
    results = {}
    for dev in ("cpu", "neuron"):
        ps = [torch.nn.Parameter(w.clone().to(dev)) for w in w0]
        opt = torch.optim.SGD(ps, lr=lr, fused=True, **cfg)
        for step in grads:
            for p, gr in zip(ps, step):
                p.grad = gr.to(dev)
            opt.step()
        results[dev] = [p.detach().cpu() for p in ps]
    for a, b in zip(results["neuron"], results["cpu"]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert torch_neuronx.get_fallback_ops() == {}


def test_fused_sgd_grad_scale_and_found_inf():
    for found in (0.0, 1.0):
        outs = {}
        for dev in ("cpu", "neuron"):
            p = torch.ones(4, device=dev)
            gr = torch.full((4,), 8.0, device=dev)
            buf = torch.full((4,), 0.5, device=dev)
            torch._fused_sgd_(
                [p],
                [gr],
                [buf],
                weight_decay=0.0,
                momentum=0.9,
                lr=0.1,
                dampening=0.0,
                nesterov=False,
                maximize=False,
                is_first_step=False,
                grad_scale=torch.tensor(4.0, device=dev),
                found_inf=torch.tensor(found, device=dev),
            )
            outs[dev] = (p.cpu(), gr.cpu(), buf.cpu())
        for a, b in zip(outs["neuron"], outs["cpu"]):
            torch.testing.assert_close(a, b)
