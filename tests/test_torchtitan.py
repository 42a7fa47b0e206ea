"""TorchTitan (torchtitan 0.2.2, the release that runs on torch 2.13) trains
its Llama 3 debug model on neuron with torchrun and no configuration
(``torchrun -m torchtitan.train``): FSDP2 on 2 ranks and tensor parallelism on
2 ranks. The losses fall and match the same job on CPU with Gloo
(tools/titan_neuron.py --cpu), both started from one seed checkpoint (the two
devices' RNGs differ). The tokenizer and the c4_test-style data set are made
locally (tools/titan_assets.py): nothing is downloaded."""

import importlib.util
import os
import re
import sys

import pytest
import torchtitan  # requirements-torchtitan.txt, installed by scripts/setup.sh
from distributed_util import launcher_env, run_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(ROOT, "tools", "titan_neuron.py")
STEPS = 8

# written for torchtitan 0.2.x: 0.3.0 does not run on torch 2.13 (docs/design/torchtitan.md)
assert torchtitan.__version__.startswith("0.2."), torchtitan.__version__


def _load_assets_module():
    spec = importlib.util.spec_from_file_location(
        "titan_assets", os.path.join(ROOT, "tools", "titan_assets.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def torchtitan_run(out_dir, *args, cpu=False, nproc=2, timeout=300):
    """Runs a TorchTitan job under torchrun; returns its output and the loss
    of each step."""
    env = launcher_env()  # as a user's shell has it
    env["HF_DATASETS_OFFLINE"] = env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_CACHE"] = os.path.join(os.path.dirname(out_dir), "hf_datasets_cache")
    if not cpu:
        env["TORCH_NEURONX_FALLBACK"] = "error"  # the whole step runs natively
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        # neuron: TorchTitan's own entry point, unchanged; CPU: the launcher
        *([LAUNCHER, "--cpu"] if cpu else ["-m", "torchtitan.train"]),
        "--job.dump_folder",
        str(out_dir),
        *args,
    ]
    out = run_command(cmd, timeout, env)
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    losses = {}
    for step, loss in re.findall(r"step:\s*(\d+)\s+loss:\s*([0-9.]+)", out):
        losses.setdefault(int(step), float(loss))  # every rank logs the same loss
    return out, [losses[s] for s in sorted(losses)]


@pytest.fixture(scope="module")
def titan_job(tmp_path_factory):
    """The common arguments, with a seed checkpoint made on CPU in one process."""
    tmp = tmp_path_factory.mktemp("titan")
    tokenizer, dataset = _load_assets_module().make_assets(str(tmp / "assets"))
    common = [
        "--model.name", "llama3",
        "--model.flavor", "debugmodel",
        "--model.hf_assets_path", tokenizer,
        "--training.dataset", "c4_test",
        "--training.dataset_path", dataset,
        "--training.seq_len", "64",
        "--training.local_batch_size", "2",
        "--training.steps", str(STEPS),
        "--lr_scheduler.warmup_steps", "2",
        "--lr_scheduler.decay_ratio", "0.8",
        "--metrics.log_freq", "1",
        "--debug.seed", "42",
    ]  # fmt: skip
    out, _ = torchtitan_run(
        tmp / "seed",
        *common,
        "--checkpoint.enable",
        "--checkpoint.create_seed_checkpoint",
        "--parallelism.data_parallel_shard_degree", "1",
        cpu=True,
        nproc=1,
    )  # fmt: skip
    assert "Created seed checkpoint" in out, out[-4000:]
    seed = str(tmp / "seed" / "checkpoint" / "step-0")
    return tmp, [
        *common,
        "--checkpoint.enable",
        "--checkpoint.load_only",
        "--checkpoint.initial_load_path", seed,
    ]  # fmt: skip


PARALLELISMS = {
    "fsdp": ["--parallelism.data_parallel_shard_degree", "2"],
    "tp": [
        "--parallelism.data_parallel_shard_degree", "1",
        "--parallelism.tensor_parallel_degree", "2",
    ],
}  # fmt: skip


@pytest.mark.parametrize("parallelism", sorted(PARALLELISMS))
def test_llama3_debugmodel_on_neuron_matches_cpu_gloo(titan_job, parallelism):
    tmp, args = titan_job
    args = [*args, *PARALLELISMS[parallelism]]
    out, neuron = torchtitan_run(tmp / f"neuron_{parallelism}", *args)
    assert "NEURON capacity" in out and "Loading the checkpoint" in out, out[-4000:]
    _, cpu = torchtitan_run(tmp / f"cpu_{parallelism}", *args, cpu=True)
    assert len(neuron) == len(cpu) == STEPS, (neuron, cpu)
    assert neuron[-1] < neuron[0] - 1.5, neuron  # it learns
    # FSDP trains with bfloat16 parameters (TorchTitan's default mixed
    # precision), TP in float32.
    for n, c in zip(neuron, cpu):
        assert abs(n - c) < 5e-3, (neuron, cpu)
