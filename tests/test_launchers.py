"""torchrun and `accelerate launch` start neuron training with no
configuration: the launcher's environment alone picks the backend and one
device per rank; parameters after training equal the same training in one
process on CPU."""

import json
import os
import sys

import pytest
from distributed_util import launcher_env, run_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "ddp_train.py")


def read_results(folder):
    """The ranks' RESULT files (tests/scripts/ddp_train.py)."""
    results = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            results.append(json.load(f))
    return sorted(results, key=lambda r: r["local_rank"])


def launch(cmd, timeout=240):
    """Runs the launcher command; returns the ranks' results."""
    import tempfile

    results_dir = tempfile.mkdtemp(prefix="tn-launch-")
    run_command(cmd, timeout, launcher_env(DDP_TRAIN_RESULTS=results_dir))
    return read_results(results_dir)


def check(results, world):
    assert len(results) == world
    for i, r in enumerate(results):
        assert r["device"] == f"neuron:{i}", r
        assert r["world"] == world and r["max_param_diff"] < 1e-5, r


def test_torchrun_picks_the_neuron_backend_and_a_device_per_rank():
    res = launch(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            SCRIPT,
            "torchrun",
        ]
    )
    check(res, 2)
    assert {r["backend"] for r in res} == {"undefined"} or {r["backend"] for r in res} == {"neuron"}


def test_accelerate_launch_picks_neuron_with_no_configuration(tmp_path):
    env_cfg = tmp_path / "none.yaml"  # no accelerate config on this machine: defaults
    res = launch(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            "0",
            SCRIPT,
            "accelerate",
        ]
    )
    del env_cfg
    check(res, 2)
    for r in res:
        assert (
            r["backend"] == "neuron" and r["distributed_type"] == "DistributedType.MULTI_NEURON"
        ), r


HF_TRAINER = os.path.join(ROOT, "tests", "scripts", "hf_trainer.py")


@pytest.fixture(scope="module")
def hf_trainer_cpu(tmp_path_factory):
    """The oracle: the same Trainer run (3 steps, global batch 4) in one
    process on CPU."""
    import torch

    ref = str(tmp_path_factory.mktemp("hf_cpu") / "cpu.pt")
    run_command([sys.executable, HF_TRAINER, "cpu", ref], timeout=300)
    b = torch.load(ref)
    assert b["info"]["device"] == "cpu" and b["info"]["world"] == 1, b["info"]
    assert b["info"]["fsdp_units"] == [] and b["info"]["sharded"] == {}, b["info"]
    return b


def hf_trainer_torchrun(mode, out, **env):
    import torch

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           HF_TRAINER, mode, out]  # fmt: skip
    run_command(cmd, timeout=400, env=launcher_env(**env))
    a = torch.load(out)
    assert a["info"]["device"] == "neuron:0" and a["info"]["world"] == 2, a["info"]
    assert "DISTRIBUTED" in a["info"]["parallel_mode"], a["info"]
    return a


def assert_same_training(a, b):
    """Parameters after the last step, and each step's loss and gradient
    norm (AdamW's step hardly depends on the gradient's scale: the norms
    check it), those of the CPU oracle."""
    import torch

    assert a["params"].keys() == b["params"].keys()
    for k in a["params"]:
        torch.testing.assert_close(a["params"][k], b["params"][k], rtol=1e-4, atol=1e-5, msg=k)
    for what in ("losses", "grad_norms"):
        assert len(a[what]) == len(b[what]) == 3, (what, a[what], b[what])
        torch.testing.assert_close(
            torch.tensor(a[what]), torch.tensor(b[what]), rtol=1e-5, atol=1e-6, msg=what
        )


def test_transformers_trainer_under_torchrun_matches_cpu(tmp_path, hf_trainer_cpu):
    """Trainer with no device or backend settings: torchrun gives it two
    neuron ranks and DDP; the parameters after 3 steps equal the same global
    batch trained in one process on CPU."""
    a = hf_trainer_torchrun("neuron", str(tmp_path / "neuron.pt"))
    assert a["info"]["model"] == "DistributedDataParallel", a["info"]
    assert a["info"]["sharded"] == {}, a["info"]
    assert_same_training(a, hf_trainer_cpu)


def test_transformers_trainer_fsdp2_under_torchrun_matches_cpu(tmp_path, hf_trainer_cpu):
    """Trainer's FSDP2 configuration (fsdp=True, fsdp_config version 2,
    LlamaDecoderLayer units) under torchrun, no device settings: accelerate
    shards every parameter across the two neuron ranks (fully_shard), every
    op runs on neuron (TORCH_NEURONX_FALLBACK=error); the losses, gradient
    norms and gathered parameters after 3 steps equal the same global batch
    trained in one process on CPU."""
    a = hf_trainer_torchrun("fsdp2", str(tmp_path / "fsdp2.pt"), TORCH_NEURONX_FALLBACK="error")
    info = a["info"]
    assert info["model"].startswith("FSDP"), info  # fully_shard's class, FSDPLlamaForCausalLM
    for unit in ("", "model.layers.0", "model.layers.1", "model.embed_tokens", "lm_head"):
        assert unit in info["fsdp_units"], info["fsdp_units"]
    # every parameter a DTensor: rank 0 holds the first half of dim 0, on its device
    assert info["sharded"].keys() == a["params"].keys(), info["sharded"]
    for k, (shape, device, placements) in info["sharded"].items():
        full = a["params"][k].shape
        assert shape == ((full[0] + 1) // 2, *full[1:]), (k, shape, full)
        assert device == "neuron:0" and placements == "(Shard(dim=0),)", (k, device, placements)
    assert_same_training(a, hf_trainer_cpu)
