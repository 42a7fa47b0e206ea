"""Autograd on neuron against the same computation on CPU."""

import copy

import torch
from conftest import assert_same


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    )


def test_gradients_match_cpu():
    x = torch.randn(5, 8, requires_grad=True)
    xn = x.detach().neuron().requires_grad_()
    y = (x.sin() * x.exp()).sum()
    yn = (xn.sin() * xn.exp()).sum()
    y.backward()
    yn.backward()
    assert xn.grad.device.type == "neuron"
    assert_same(xn.grad, x.grad)


def test_training_loop_matches_cpu():
    cpu_model = make_model()
    dev_model = copy.deepcopy(cpu_model).neuron()
    opt_c = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    opt_n = torch.optim.AdamW(dev_model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        x = torch.randn(16, 8, generator=g)
        target = torch.randint(0, 3, (16,), generator=g)
        loss_c = torch.nn.functional.cross_entropy(cpu_model(x), target)
        loss_n = torch.nn.functional.cross_entropy(dev_model(x.neuron()), target.neuron())
        opt_c.zero_grad()
        opt_n.zero_grad()
        loss_c.backward()
        loss_n.backward()
        for pc, pn in zip(cpu_model.parameters(), dev_model.parameters()):
            assert_same(pn.grad, pc.grad, rtol=1e-5, atol=1e-6)
        opt_c.step()
        opt_n.step()
        torch.testing.assert_close(loss_n.item(), loss_c.item(), rtol=1e-5, atol=1e-6)
    for pc, pn in zip(cpu_model.parameters(), dev_model.parameters()):
        assert_same(pn.detach(), pc.detach(), rtol=1e-5, atol=1e-6)


def test_grad_through_views_and_inplace():
    x = torch.randn(4, 4, requires_grad=True)
    xn = x.detach().neuron().requires_grad_()

    def f(t):
        y = t.clone()
        y[1:, :2].mul_(2)
        return (y.t() @ y).diagonal().sum()

    f(x).backward()
    f(xn).backward()
    assert_same(xn.grad, x.grad, rtol=1e-5, atol=1e-5)


def test_no_grad_and_detach():
    p = torch.ones(3, device="neuron", requires_grad=True)
    with torch.no_grad():
        q = p * 2
    assert not q.requires_grad
    assert p.detach().requires_grad is False
