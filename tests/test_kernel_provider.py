"""Kernels launch by id through the kernel provider in use (runtime/provider.h,
kernels/kernel_list.h). The counting provider, chosen at run time with
TORCH_NEURONX_KERNEL_PROVIDER=counting, is a second provider beside the host
one: ops give CPU's results under it, and its counts show which kernels each
op launched, so every native op is seen to reach the table."""

import os
import subprocess
import sys

import pytest

import torch_neuronx

_CHILD = r"""
import torch, torch.nn.functional as F
from torch_neuronx import _C
assert _C._kernel_provider() == "counting", _C._kernel_provider()
torch.manual_seed(0)
def launched(fn):
    torch.neuron.synchronize()
    _C._kernel_launch_counts(True)
    out = fn()
    torch.neuron.synchronize()
    return out, {k: v for k, v in _C._kernel_launch_counts(True).items() if v}
a, b = torch.randn(64, 48), torch.randn(64, 48)
an, bn = a.to("neuron"), b.to("neuron")
out, n = launched(lambda: an + bn)
assert n == {"binary": 1}, n
torch.testing.assert_close(out.cpu(), a + b)
out, n = launched(lambda: an * 2)  # the 2 travels in the descriptor
assert n == {"binary": 1}, n
torch.testing.assert_close(out.cpu(), a * 2)
out, n = launched(lambda: an @ bn.T)
assert n == {"gemm": 1}, n
torch.testing.assert_close(out.cpu(), a @ b.T)
out, n = launched(lambda: torch.cat([an, bn, an], dim=1))
assert n == {"copy_batch": 1}, n
torch.testing.assert_close(out.cpu(), torch.cat([a, b, a], dim=1))
out, n = launched(lambda: F.softmax(an, -1))
assert n == {"softmax": 1}, n
torch.testing.assert_close(out.cpu(), F.softmax(a, -1))
v, n = launched(lambda: an.sum().item())
assert n.get("reduce") == 1 and set(n) <= {"reduce", "copy"}, n
assert abs(v - a.sum().item()) < 1e-3
# a training step, every op through the table, against CPU
model = torch.nn.Sequential(torch.nn.Linear(48, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                            torch.nn.Linear(32, 10))
mn = __import__("copy").deepcopy(model).to("neuron")
y = torch.randint(0, 10, (64,))
for m, x, t in ((model, a, y), (mn, an, y.to("neuron"))):
    loss = F.cross_entropy(m(x), t)
    loss.backward()
torch.neuron.synchronize()  # the provider counts a kernel when it runs, not when it is queued
counts = {k: v for k, v in _C._kernel_launch_counts(True).items() if v}
for k in ("gemm", "layer_norm", "nll", "unary"):
    assert counts.get(k, 0) >= 1, (k, counts)
for p, q in zip(model.parameters(), mn.parameters()):
    torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5)
print("ok", sum(counts.values()))
"""


def _run(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_host_provider_is_the_default():
    assert torch_neuronx._C._kernel_provider() == "host"
    with pytest.raises(RuntimeError, match="TORCH_NEURONX_KERNEL_PROVIDER=counting"):
        torch_neuronx._C._kernel_launch_counts()


def test_counting_provider_runs_every_kernel_and_counts_them():
    r = _run(_CHILD, TORCH_NEURONX_KERNEL_PROVIDER="counting")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert r.stdout.startswith("ok"), r.stdout


def test_unknown_provider_is_a_runtime_error_naming_the_variable():
    code = (
        "import torch\n"
        "try:\n"
        "    torch.ones(3, device='neuron') + 1\n"
        "except RuntimeError as e:\n"
        "    print('raised', e)\n"
    )
    r = _run(code, TORCH_NEURONX_KERNEL_PROVIDER="gpu")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "raised" in r.stdout and "TORCH_NEURONX_KERNEL_PROVIDER='gpu'" in r.stdout, r.stdout
    assert "'host'" in r.stdout and "'counting'" in r.stdout and "'kernels-only'" in r.stdout


def test_a_provider_that_runs_no_host_code_refuses_host_tasks():
    """Under a provider that runs only its own kernels (as a device with its
    own kernel library would), kernels still give CPU's results and a host
    code task is refused with a RuntimeError naming the provider, not run."""
    code = (
        "import torch\n"
        "a = torch.randn(16, 8)\n"
        "torch.testing.assert_close((a.to('neuron') * 3).sum(0).cpu(), (a * 3).sum(0))\n"
        "try:\n"
        "    torch.neuron._sleep(10)\n"
        "except RuntimeError as e:\n"
        "    print('refused', e)\n"
    )
    r = _run(code, TORCH_NEURONX_KERNEL_PROVIDER="kernels-only")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "refused" in r.stdout and "'kernels-only' runs only its own kernels" in r.stdout, (
        r.stdout
    )


def test_collectives_are_host_code_and_refused_where_it_cannot_run():
    """ProcessGroupNeuron's collectives (the shared-memory ones of a host and
    the Gloo exchange between hosts, which reads device buffers in place
    inside the task) run as host-code tasks: a provider that runs no host
    code refuses them with the provider's name, before anything runs."""
    code = (
        "import datetime, torch, torch.distributed as dist\n"
        "import torch_neuronx\n"
        "dist.init_process_group('neuron', store=dist.HashStore(), rank=0, world_size=1,\n"
        "                        timeout=datetime.timedelta(seconds=30))\n"
        "t = torch.ones(4, device='neuron')\n"
        "try:\n"
        "    dist.all_reduce(t)\n"
        "    torch.neuron.synchronize()\n"
        "    print('ran', t.cpu().tolist())\n"
        "except RuntimeError as e:\n"
        "    print('refused', e)\n"
        "dist.destroy_process_group()\n"
    )
    r = _run(code, TORCH_NEURONX_KERNEL_PROVIDER="kernels-only")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("refused") and "neuron collectives" in r.stdout, r.stdout
    assert "'kernels-only' runs only its own kernels" in r.stdout, r.stdout
    r = _run(code)  # the host provider runs them
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ran [1.0, 1.0, 1.0, 1.0]"), r.stdout
