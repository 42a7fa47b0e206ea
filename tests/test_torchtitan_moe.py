"""TorchTitan's MoE recipes on neuron, unpatched (``torchrun -m
torchtitan.train``, every op native: TORCH_NEURONX_FALLBACK=error): the
debug flavors of deepseek_v3 and gpt_oss (FlexAttention with sinks) on 2
ranks with FSDP, and with FSDP plus expert parallelism 2 (uneven all_to_all,
TorchTitan's Triton permutation kernel through the neuron Triton backend);
qwen3's and llama4's MoE debug flavors on 1 rank. TorchTitan's CPU path has
no MoE (its router's histc has no int64 CPU kernel) and CPU flex_attention no
backward, so the reference of the expert-parallel job is the same job
without expert parallelism, from the same seed checkpoint and data."""

import pytest
from test_torchtitan import _load_assets_module, torchtitan_run

STEPS = 4


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("titan_moe")
    tokenizer, dataset = _load_assets_module().make_assets(str(tmp / "assets"))
    return tmp, tokenizer, dataset


def common(model, flavor, tokenizer, dataset):
    return [
        "--model.name", model,
        "--model.flavor", flavor,
        "--model.hf_assets_path", tokenizer,
        "--training.dataset", "c4_test",
        "--training.dataset_path", dataset,
        "--training.seq_len", "64",
        "--training.local_batch_size", "2",
        "--training.steps", str(STEPS),
        "--metrics.log_freq", "1",
        "--debug.seed", "42",
    ]  # fmt: skip


@pytest.mark.parametrize("model", ["deepseek_v3", "gpt_oss"])
def test_expert_parallel_matches_fsdp(assets, model):
    tmp, tokenizer, dataset = assets
    args = common(model, "debugmodel", tokenizer, dataset)
    out, _ = torchtitan_run(
        tmp / f"{model}_seed", *args, "--checkpoint.enable", "--checkpoint.create_seed_checkpoint",
        "--parallelism.data_parallel_shard_degree", "1", nproc=1,
    )  # fmt: skip
    assert "Created seed checkpoint" in out, out[-4000:]
    seed = str(tmp / f"{model}_seed" / "checkpoint" / "step-0")
    args += [
        "--checkpoint.enable",
        "--checkpoint.load_only",
        "--checkpoint.initial_load_path",
        seed,
    ]
    _, fsdp = torchtitan_run(
        tmp / f"{model}_fsdp", *args, "--parallelism.data_parallel_shard_degree", "2"
    )
    out, ep = torchtitan_run(
        tmp / f"{model}_ep", *args, "--parallelism.data_parallel_shard_degree", "2",
        "--parallelism.expert_parallel_degree", "2",
    )  # fmt: skip
    assert len(ep) == len(fsdp) == STEPS, (ep, fsdp, out[-4000:])
    assert ep[-1] < ep[0] - 0.5, ep  # it learns
    for a, b in zip(ep, fsdp):
        assert abs(a - b) < 2e-3, (ep, fsdp)


@pytest.mark.parametrize("model, flavor", [("qwen3", "debugmodel_moe"), ("llama4", "debugmodel")])
def test_moe_flavor_trains_on_one_rank(assets, model, flavor):
    tmp, tokenizer, dataset = assets
    args = common(model, flavor, tokenizer, dataset)
    out, losses = torchtitan_run(
        tmp / f"{model}_1", *args, "--parallelism.data_parallel_shard_degree", "1", nproc=1
    )
    assert len(losses) == STEPS, out[-4000:]
    assert losses[-1] < losses[0] - 0.2, losses
