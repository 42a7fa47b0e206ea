"""The compiled model-zoo check (tools/model_zoo.py --compile) on two
architectures: forward, backward, an AdamW step and a second forward under
torch.compile, with the default backend and with backend="neuron", must
match the same steps run eagerly on the CPU. The whole sweep is
docs/model-coverage-compile.md."""

import os
import sys

import pytest
import torch
import torch._dynamo

import torch_neuronx

pytest.importorskip("transformers")  # installed by scripts/setup.sh

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
)
import model_zoo as zoo  # noqa: E402


@pytest.fixture(autouse=True)
def _silent_fallback():
    torch_neuronx.set_fallback_mode("silent")
    try:
        yield
    finally:
        torch_neuronx.set_fallback_mode("warn")
        torch._dynamo.reset()
        torch.neuron.synchronize()


@pytest.mark.parametrize("model_type", ["llama", "gpt2"])
def test_compiled_architecture_matches_cpu(model_type):
    row = zoo.check_compiled(model_type, limit=240)
    got = {n: (b["status"], b["detail"]) for n, b in row["backends"].items()}
    assert got == {"inductor": ("pass", ""), "neuron": ("pass", "")}
    for b in row["backends"].values():
        assert b["fallbacks"] == {}
        assert b["compile_s"] is not None and b["graphs"] >= 1


def test_merge_takes_rows_that_ran_over_earlier_files(tmp_path):
    import json

    def part(name, rows):
        path = tmp_path / name
        path.write_text(json.dumps({"rows": [{"model_type": t, "status": s} for t, s in rows]}))
        return str(path)

    a = part("a.json", [("llama", "pass"), ("gpt2", "mismatch"), ("opt", "not run")])
    b = part("b.json", [("gpt2", "pass"), ("opt", "not run"), ("llama", "not run")])
    rows = zoo.merge_compiled(["opt", "gpt2", "llama", "phi"], [a, b])
    assert [(r["model_type"], r["status"]) for r in rows] == [
        ("opt", "not run"),
        ("gpt2", "pass"),
        ("llama", "pass"),
        ("phi", "not run"),
    ]
