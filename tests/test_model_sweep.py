"""The model sweep (tools/model_sweep.py) in the test command: a
deterministic sample of its cases, run and compared with the committed
expectations (docs/model-sweep-expected.csv); the float64 verdict it judges
by; and its answers to bad input."""

import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import model_sweep as ms  # noqa: E402

SAMPLE = int(os.environ.get("TORCH_NEURONX_SWEEP_SAMPLE", "32"))


def _tool(*args, timeout=1500):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "model_sweep.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_sample_matches_expectations():
    """Fails on a sampled case that was expected to pass and does not (or
    takes a new CPU-fallback op), and on an expected failure that now passes
    (the expectations file then needs its update)."""
    r = _tool("--sample", str(SAMPLE), "--check", "--no-progress")
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "pass=" in r.stdout


def test_sample_spreads_over_every_library():
    names = ms.sample_names(ms.read_expected(), 8)
    assert {n.split("/")[0] for n in names} == set(ms.LIBRARIES)
    assert names == ms.sample_names(ms.read_expected(), 8)  # deterministic


def _ref(n=4096, seed=0):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_verdict_passes_rounding_level_and_fails_a_real_loss_of_accuracy():
    ref = {"out": _ref()}
    cpu = {"out": ref["out"].float()}
    # rounding-level: another fp32 rounding of the same values, as far as CPU's
    same = {"out": (ref["out"] * (1 + 2e-8)).float()}
    assert ms.judge(same, cpu, ref, ms.FP32_MULT, ms.FP32_FLOOR) is None
    # 1000x CPU's rounding error fails, though it passes allclose(rtol=1e-3, atol=1e-3)
    cpu_err = ms._rmse(cpu["out"], ref["out"])
    bad = {"out": (ref["out"] + 1000 * cpu_err * _ref(seed=1)).float()}
    assert torch.allclose(bad["out"].double(), ref["out"], rtol=1e-3, atol=1e-3)
    name, err, allowed = ms.judge(bad, cpu, ref, ms.FP32_MULT, ms.FP32_FLOOR)
    assert name == "out" and err > 2 * allowed


def test_verdict_fails_nan_missing_and_misshapen_tensors():
    ref = {"a": _ref(), "b": _ref(seed=2)}
    cpu = {k: v.float() for k, v in ref.items()}
    nan = dict(cpu, a=torch.full_like(cpu["a"], float("nan")))
    assert ms.judge(nan, cpu, ref, ms.FP32_MULT, ms.FP32_FLOOR)[0] == "a"
    assert ms.judge({"a": cpu["a"]}, cpu, ref, ms.FP32_MULT, ms.FP32_FLOOR)[0] == "b"
    short = dict(cpu, b=cpu["b"][:10])
    assert ms.judge(short, cpu, ref, ms.FP32_MULT, ms.FP32_FLOOR)[0] == "b"


def test_compare_reports_regressions_new_fallbacks_and_improvements():
    expected = {
        "nn/a": {"status": "pass", "fallback_ops": ""},
        "nn/b": {"status": "fail_accuracy", "fallback_ops": ""},
        "nn/c": {"status": "pass", "fallback_ops": ""},
    }
    rows = [
        {"name": "nn/a", "status": "fail_accuracy", "detail": "x", "fallback_ops": []},
        {"name": "nn/b", "status": "pass", "detail": "", "fallback_ops": []},
        {"name": "nn/c", "status": "pass", "detail": "", "fallback_ops": ["aten::foo"]},
    ]
    regress, improve = ms.compare(rows, expected)
    assert len(regress) == 2 and any("aten::foo" in s for s in regress)
    assert improve == ["nn/b: expected fail_accuracy, now passes"]


def test_compare_accepts_either_verdict_only_for_host_dependent_cases():
    name = next(iter(ms.HOST_DEPENDENT))
    assert name in ms.EXPLAINED
    expected = {name: {"status": "pass", "fallback_ops": ""}}
    row = {"name": name, "detail": "x", "fallback_ops": []}
    for status in ("pass", "fail_accuracy"):
        assert ms.compare([dict(row, status=status)], expected) == ([], [])
    regress, _ = ms.compare([dict(row, status="error")], expected)
    assert len(regress) == 1
    regress, _ = ms.compare([dict(row, status="pass", fallback_ops=["aten::foo"])], expected)
    assert len(regress) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--only", "timm/resnet_does_not_exist"], "unknown timm model 'resnet_does_not_exist'"),
        (["--only", "nn/no_such_block"], "unknown case 'nn/no_such_block'"),
        (["--library", "keras"], "unknown library keras"),
        (["--only", "tensorflow/bert"], "unknown library in 'tensorflow/bert'"),
    ],
)
def test_bad_input_gets_a_message_not_a_traceback(args, message):
    r = _tool(*args, "--list", timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
