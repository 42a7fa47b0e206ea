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


_EXIT_CHILD = r"""
import atexit, contextvars, weakref
held = {}
def at_finalize():  # registered before torch: runs after torch_neuronx's handler
    import torch
    from torch_neuronx import _C
    torch.neuron.synchronize()
    launched = sum(_C._kernel_launch_counts(True).values())
    print("kernels launched at exit:", launched, flush=True)
    print("context alive at finalization:", held["ref"]() is not None, flush=True)
atexit.register(at_finalize)
import torch
import torch_neuronx._exit as E
class Marker: pass
var = contextvars.ContextVar("v")
m = Marker(); held["ref"] = weakref.ref(m); var.set(m); del m
a = torch.randn(64, 8, device="neuron:1", requires_grad=True)
b = torch.randn(64, 8, device="neuron", requires_grad=True)
(a * 2).sin().sum().backward()  # runs on pt_autograd_1
b.exp().sum().backward()  # runs on pt_autograd_0
var.set(None)  # now only the backward's stashed context holds the marker
assert torch.neuron.device_count() >= 2
threads = E.autograd_device_threads()
assert threads and 0 in threads and 1 in threads, threads
if {mode!r} == "settle":
    assert E.settle() == [i for i in threads if i < torch.neuron.device_count()]
    print("context alive after settle:", held["ref"]() is not None, flush=True)
print("grad", a.grad.device, b.grad.device, flush=True)
torch.neuron.synchronize()
from torch_neuronx import _C
_C._kernel_launch_counts(True)  # from here on: what runs at exit
"""


def _exit_child(mode):
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", _EXIT_CHILD.replace("{mode!r}", repr(mode))],
        env=dict(os.environ, TORCH_NEURONX_KERNEL_PROVIDER="counting"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_settle_leaves_no_graph_task_on_the_autograd_device_threads():
    """torch_neuronx._exit.settle() passes a backward through every autograd
    device thread; when it returns, none of them still holds the user's
    graph task (whose stashed contextvars context would take the GIL when
    released: during interpreter finalization that aborts the process)."""
    r = _exit_child("settle")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "context alive after settle: False" in r.stdout, r.stdout
    assert "grad neuron:1 neuron:0" in r.stdout, r.stdout


def test_exit_after_a_backward_finds_every_graph_task_released():
    """At exit torch_neuronx settles the device threads before the
    interpreter finalizes: a handler that runs after its own (atexit is
    last-in, first-out) sees the kernels the settling backward launched on
    both devices (counted by the counting kernel provider) and the user
    backward's context already released, and the process exits 0. (The
    race itself, a device thread still holding the graph task when
    finalization starts, cannot be forced from Python: the first test shows
    that settling releases it, this one that exit runs the settling.)"""
    r = _exit_child("exit")
    assert r.returncode == 0, r.stderr[-3000:]
    launched = int(r.stdout.split("kernels launched at exit:")[1].split()[0])
    assert launched >= 6, r.stdout  # zeros, ones and the backward's mul on each device
    assert "context alive at finalization: False" in r.stdout, r.stdout
