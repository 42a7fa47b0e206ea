"""The software NeuronCore loaded as a driver's HAL would be: its sources
built into a shared library of their own (csrc/tests/hal_wrapped.c, made
with the C libraries as build/c/libtnrt_hal_wrapped.so), selected with
TORCH_NEURONX_HAL, reporting device memory as not host addressable and,
with TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1, closing it to the host outside
its tasks and transfers. Suites of the Python tests run through it and
must give their usual (CPU-checked) results."""

import os
import subprocess
import sys

from suite_runner import run_suites

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "..", "build", "c", "libtnrt_hal_wrapped.so")
SUITES = ["test_streams.py", "test_memory.py", "test_copies.py", "test_training_ops.py"]


def _env():
    assert os.path.exists(LIB), f"{LIB} is built by `make -C csrc` (scripts/setup.sh runs it)"
    return dict(
        os.environ, TORCH_NEURONX_HAL=os.path.abspath(LIB), TORCH_NEURONX_PROTECT_DEVICE_MEMORY="1"
    )


def test_info_names_the_library_hal():
    r = subprocess.run(
        [sys.executable, "-m", "torch_neuronx.info"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "HAL 'wrapped-host' (device memory not host addressable)" in r.stdout, r.stdout


def test_suites_run_through_the_library_hal():
    r = run_suites(SUITES, _env())
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " skipped" not in r.stdout, r.stdout[-2000:]
