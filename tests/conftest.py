import os
import subprocess
import sys

import pytest
import torch

import torch_neuronx  # noqa: F401  (explicit: also works with autoload off)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, env_extra=None, timeout=120):
    """Runs code in a fresh interpreter (for environment-dependent setup)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture(autouse=True)
def _reset_device_state():
    torch.neuron.set_device(0)
    yield
    torch.neuron.synchronize(0)


@pytest.fixture
def no_fallback():
    """Runs the test with the CPU fallback turned into errors: what it
    exercises must be native."""
    mode = torch_neuronx.get_fallback_mode()
    torch_neuronx.set_fallback_mode("error")
    yield
    torch_neuronx.set_fallback_mode(mode)


def assert_same(neuron_result, cpu_result, **kw):
    """Compares a neuron result with the CPU oracle (dtype, shape, values)."""
    assert neuron_result.device.type == "neuron", neuron_result.device
    assert neuron_result.dtype == cpu_result.dtype
    torch.testing.assert_close(neuron_result.cpu(), cpu_result, **kw)


@pytest.fixture
def fresh_op_tracking():
    """Clears the CPU-fallback tracking (torch_neuronx.get_fallback_ops) first:
    what the test then finds there, it made itself. The per-op files use it
    for every test (pytestmark)."""
    torch_neuronx.clear_op_tracking()
    yield


@pytest.fixture
def all_native():
    """As fresh_op_tracking, and after the test nothing fell back to CPU (for
    ops composed from native kernels: none of the pieces may fall back)."""
    torch_neuronx.clear_op_tracking()
    yield
    assert torch_neuronx.get_fallback_ops() == {}
