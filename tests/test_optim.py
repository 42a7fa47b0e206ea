"""Optimizers on neuron (csrc/aten/optim_ops.cpp): fused Adam/AdamW/SGD
kernels and the default (foreach) path, against the same optimizer on CPU,
with no CPU fallback; and their edge cases."""

import pytest
import torch
from conftest import assert_same
from op_util import gen, native

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


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


def test_adamw_step_matches_cpu_without_fallbacks_in_the_update():
    torch.manual_seed(0)
    p = torch.randn(10, 4, requires_grad=True)
    pn = p.detach().neuron().requires_grad_()
    oc, on = torch.optim.AdamW([p], lr=0.1), torch.optim.AdamW([pn], lr=0.1)
    for i in range(3):
        g = torch.randn(10, 4, generator=torch.Generator().manual_seed(i))
        p.grad, pn.grad = g.clone(), g.neuron()
        oc.step()
        on.step()
    assert_same(pn.detach(), p.detach(), rtol=1e-5, atol=1e-6)


# ---- edge cases (issue 16; tools/mutate.py checks that these tests catch
# planted bugs): Adam / AdamW (fused kernel, foreach, for-loop) and SGD (fused,
# foreach) with weight decay, amsgrad, maximize, momentum, dampening and
# nesterov; parameters of 1, 17 and 40007 elements (the fused kernel's
# parallel grain is 16384), fp32 and bf16; parameters and optimizer state
# compared after several steps ------------------------------------------------------

OPT_SIZES = [(1,), (17,), (40007,), (33, 5)]


def opt_run(device, cls, dtype, steps=5, **kw):
    params = [
        (torch.randn(*s, generator=gen(80 + i)) * (i + 1)).to(device, dtype).requires_grad_()
        for i, s in enumerate(OPT_SIZES)
    ]
    opt = cls(params, **kw)
    g = gen(90)
    for step in range(steps):
        for p in params:
            # gradients of changing scale and sign, some exactly zero
            gr = torch.randn(p.shape, generator=g) * (10.0 ** (step % 3 - 1))
            gr[::7] = 0.0 if step % 2 else gr[::7]
            p.grad = gr.to(device, dtype)
        opt.step()
    state = [
        {k: v.detach().cpu() for k, v in opt.state[p].items() if torch.is_tensor(v)} for p in params
    ]
    return [p.detach().cpu() for p in params], state


ADAM_CFGS = [
    dict(),
    dict(weight_decay=0.1),
    dict(amsgrad=True, weight_decay=0.01),
    dict(maximize=True, betas=(0.8, 0.95), eps=1e-6),
    dict(lr=0.01, amsgrad=True, maximize=True),
]


@pytest.mark.parametrize("impl", ["fused", "foreach", "forloop"])
@pytest.mark.parametrize("cfg", range(len(ADAM_CFGS)))
@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW])
def test_adam_family_matches_cpu(cls, cfg, impl):
    kw = dict(
        ADAM_CFGS[cfg],
        **{"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}[
            impl
        ],
    )
    pn, sn = opt_run("neuron", cls, torch.float32, **kw)
    pc, sc = opt_run("cpu", cls, torch.float32, **kw)
    for a, b in zip(pn, pc):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(sn, sc):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(
                a[k], b[k], rtol=1e-5, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}"
            )
    native()


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW])
def test_fused_adam_bf16(cls):
    """The fused kernel's generic (non-fp32) path against CPU's fused bf16."""
    kw = dict(fused=True, weight_decay=0.05, amsgrad=True)
    pn, sn = opt_run("neuron", cls, torch.bfloat16, **kw)
    pc, sc = opt_run("cpu", cls, torch.bfloat16, **kw)
    for a, b in zip(pn, pc):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    native()


SGD_CFGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, dampening=0.3, maximize=True),
    dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True, weight_decay=0.1),
]


@pytest.mark.parametrize("impl", ["fused", "foreach", "forloop"])
@pytest.mark.parametrize("cfg", range(len(SGD_CFGS)))
def test_sgd_matches_cpu(cfg, impl):
    kw = dict(
        SGD_CFGS[cfg],
        **{"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}[
            impl
        ],
    )
    pn, sn = opt_run("neuron", torch.optim.SGD, torch.float32, **kw)
    pc, sc = opt_run("cpu", torch.optim.SGD, torch.float32, **kw)
    for a, b in zip(pn, pc):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(sn, sc):
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)
    native()
