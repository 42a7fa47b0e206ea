"""torchrun and `accelerate launch` start neuron training with no
configuration: the launcher's environment alone picks the backend and one
device per rank; parameters after training equal the same training in one
process on CPU."""

import json
import os
import subprocess
import sys

import pytest

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
    import tempfile

    results_dir = tempfile.mkdtemp(prefix="tn-launch-")
    env = dict(os.environ)
    env["DDP_TRAIN_RESULTS"] = results_dir
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # as a user's shell has it
    env["OMP_NUM_THREADS"] = "1"
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)  # the launcher's session: itself and the ranks it started
        out, _ = p.communicate()
        pytest.fail(f"{cmd} did not finish in {timeout} s:\n{out[-4000:]}")
    assert p.returncode == 0, out[-6000:]
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


def test_transformers_trainer_under_torchrun_matches_cpu(tmp_path):
    """Trainer with no device or backend settings: torchrun gives it two
    neuron ranks and DDP; the parameters after 3 steps equal the same global
    batch trained in one process on CPU."""
    import torch

    script = os.path.join(ROOT, "tests", "scripts", "hf_trainer.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    ref = str(tmp_path / "cpu.pt")
    r = subprocess.run([sys.executable, script, "cpu", ref], capture_output=True, text=True,
                       env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    got = str(tmp_path / "neuron.pt")
    launch([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            script, "neuron", got], timeout=400)  # fmt: skip
    a, b = torch.load(got), torch.load(ref)
    assert a["info"]["device"] == "neuron:0" and a["info"]["world"] == 2, a["info"]
    assert "DISTRIBUTED" in a["info"]["parallel_mode"], a["info"]
    assert b["info"]["device"] == "cpu", b["info"]
    assert a["params"].keys() == b["params"].keys()
    for k in a["params"]:
        torch.testing.assert_close(a["params"][k], b["params"][k], rtol=1e-4, atol=1e-5, msg=k)
