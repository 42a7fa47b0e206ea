"""The kernel library's ISA variants against PyTorch CPU: the per-op suites
of the element-wise, reduction, softmax/norm, loss, GEMM, index, copy,
attention, convolution, pooling and optimizer kernels, their edge cases
included, run again in fresh interpreters with TORCH_NEURONX_ISA forcing the
portable reference and AVX2 (the default run covers the best ISA the CPU
has). The C suite compares the GEMM and vector-math variants with the
reference directly."""

import os
import subprocess
import sys

import pytest
from suite_runner import run_suites

import torch_neuronx

SUITES = [
    "test_fuzz.py",
    "test_unary_ops.py",
    "test_binary_ops.py",
    "test_reduction_ops.py",
    "test_norm_ops.py",
    "test_loss_ops.py",
    "test_linalg_ops.py",
    "test_index_ops.py",
    "test_tensor_ops.py",
    "test_attention.py",
    "test_conv.py",
    "test_pooling.py",
    "test_optim.py",
    "test_lowp_ops.py",
]


@pytest.mark.parametrize("isa", ["reference", "avx2"])
def test_suites_under_forced_isa(isa):
    if isa != "reference" and isa not in " ".join(torch_neuronx._C._cpu_features()):
        pytest.skip(f"this CPU has no {isa}")  # a machine fact, not a failure
    env = dict(os.environ, TORCH_NEURONX_ISA=isa)
    probe = subprocess.run(
        [sys.executable, "-m", "torch_neuronx.info"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert f"kernel ISA selected: {isa}" in probe.stdout, probe.stdout
    r = run_suites(SUITES, env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_measured_peak_follows_the_cpu_features():
    """The benchmarks' compute anchor: a rate for each instruction the CPU
    has, 0 for one it lacks, and a ValueError naming the kinds for a typo."""
    features = torch_neuronx._C._cpu_features()
    have = {
        "fp32-fma256": "avx2+fma" in features,
        "fp32-fma512": "avx512" in features,
        "bf16-dot512": "avx512-bf16" in features,
        "bf16-amx": "amx-bf16" in features,
        "int8-vnni512": "avx512-vnni" in features,
        "int16-madd512": "avx512" in features,
        "int16-madd256": "avx2+fma" in features,
    }
    for kind, present in have.items():
        rate = torch_neuronx._C._measure_peak(kind)
        if kind == "bf16-amx" and present and rate == 0.0:
            # the OS did not grant the tile state (Linux before 5.16): then
            # the GEMM does not use AMX either
            assert torch_neuronx._C._bf16_gemm_kernel() != "amx"
            continue
        # any x86 core sustains well over 1 GFLOPS with a vector FMA unit
        assert (rate > 1e9) if present else (rate == 0.0), (kind, rate)
    with pytest.raises(
        ValueError, match="fp32-fma256, fp32-fma512, bf16-dot512, bf16-amx, int8-vnni512"
    ):
        torch_neuronx._C._measure_peak("fp32")


def test_bf16_gemm_kernel_follows_the_cpu_features():
    """bf16 GEMMs run on AMX tiles only where the CPU has them, else on the
    AVX512-BF16 dot product where the avx512 variant runs, else on fp32."""
    features, kernel = torch_neuronx._C._cpu_features(), torch_neuronx._C._bf16_gemm_kernel()
    if "amx-bf16" not in features:
        assert kernel != "amx"
    if torch_neuronx._C._isa() == "avx512" and "avx512-bf16" in features:
        assert kernel in ("amx", "avx512-bf16")
    else:
        assert kernel == "fp32"


_AMX_CHILD = """
import torch
from torch_neuronx import _C
torch.manual_seed(0)
a, b = torch.randn(96, 200), torch.randn(200, 72)
ab, bb = a.bfloat16(), b.bfloat16()
out = (ab.to("neuron") @ bb.to("neuron")).cpu()
torch.testing.assert_close(out, ab @ bb, rtol=1.6e-2, atol=1e-2)
lin = torch.nn.Linear(200, 72)
x = torch.randn(16, 200)
with torch.autocast("cpu", dtype=torch.bfloat16):
    want = lin(x)
lin_n = lin.to("neuron")
with torch.autocast("neuron", dtype=torch.bfloat16):
    got = lin_n(x.to("neuron"))
torch.testing.assert_close(got.cpu(), want, rtol=1.6e-2, atol=1e-2)
print("kernel", _C._bf16_gemm_kernel())
print("amx", _C._amx_status())
"""


def test_amx_guard_never_takes_the_process_down():
    """TORCH_NEURONX_AMX=force runs the tile self-test even where CPUID has no
    AMX. Where tiles work (an AMX host with the OS grant) bf16 GEMMs then run
    on them and match CPU; everywhere else the self-test's SIGILL is caught,
    one warning says why, and bf16 GEMMs match CPU on the dot-product path.
    Before the guard (and the fixed tile configuration) the first bf16
    matmul on an AMX host killed the process with SIGILL."""
    env = dict(os.environ, TORCH_NEURONX_AMX="force")
    r = subprocess.run(
        [sys.executable, "-c", _AMX_CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    features = torch_neuronx._C._cpu_features()
    if "amx-bf16" in features and torch_neuronx._C._amx_status() == "in use":
        assert "kernel amx" in r.stdout and "amx in use" in r.stdout, r.stdout
        assert "AMX not used" not in r.stderr
    else:
        assert "kernel amx" not in r.stdout, r.stdout
        assert "amx not used: the tile self-test raised SIGILL" in r.stdout, r.stdout
        warning = "torch_neuronx warning: AMX not used: the tile self-test raised SIGILL"
        assert r.stderr.count(warning) == 1, r.stderr[-3000:]


def test_amx_status_matches_the_gemm_kernel():
    """The AMX state in words agrees with what bf16 GEMMs run on, and info
    shows it beside the measured peaks."""
    status, kernel = torch_neuronx._C._amx_status(), torch_neuronx._C._bf16_gemm_kernel()
    assert (status == "in use") == (kernel == "amx"), (status, kernel)
    if "amx-bf16" not in torch_neuronx._C._cpu_features():
        assert status == "absent" or (
            os.environ.get("TORCH_NEURONX_AMX") in ("0", "force") and status != "in use"
        )
    r = subprocess.run(
        [sys.executable, "-m", "torch_neuronx.info"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"AMX tiles: {status}" in r.stdout, r.stdout
    assert "measured peaks, GFLOPS" in r.stdout, r.stdout
