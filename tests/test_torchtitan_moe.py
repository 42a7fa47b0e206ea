"""TorchTitan's MoE recipes on neuron, unpatched (``torchrun -m
torchtitan.train``, every op native: TORCH_NEURONX_FALLBACK=error): the
deepseek_v3 debug flavor on 2 ranks with FSDP, and with FSDP plus expert
parallelism 2 (uneven all_to_all, TorchTitan's Triton permutation kernel
through the neuron Triton backend), with tensor parallelism 2 against 1
rank, and on 1 rank eager against ``--compile.enable``; qwen3's, llama4's and gpt_oss's MoE debug flavors on 1
rank. TorchTitan's CPU path has no MoE (its router's histc has no int64 CPU
kernel) and CPU flex_attention no backward, so the references are the same
job without expert parallelism or without compilation, from one seed
checkpoint and the same data.

gpt_oss is not in the comparisons: TorchTitan 0.2.2 never initialises its
router's gate bias (``init_weights`` leaves ``moe.router.gate.bias`` as
``torch.empty`` made it), so its seed checkpoint holds whatever memory the
process had, and a run can start from NaN (on any device).
``test_gpt_oss_router_bias_is_left_uninitialised`` fails once that is
fixed."""

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


def _seed(tmp, args, model):
    out, _ = torchtitan_run(
        tmp / f"{model}_seed", *args, "--checkpoint.enable", "--checkpoint.create_seed_checkpoint",
        "--parallelism.data_parallel_shard_degree", "1", nproc=1,
    )  # fmt: skip
    assert "Created seed checkpoint" in out, out[-4000:]
    seed = str(tmp / f"{model}_seed" / "checkpoint" / "step-0")
    return ["--checkpoint.enable", "--checkpoint.load_only", "--checkpoint.initial_load_path", seed]


def test_compiled_matches_eager(assets):
    tmp, tokenizer, dataset = assets
    args = common("deepseek_v3", "debugmodel", tokenizer, dataset)
    args += ["--parallelism.data_parallel_shard_degree", "1"]
    args += _seed(tmp, args, "deepseek_v3_c")
    _, eager = torchtitan_run(tmp / "ds_eager", *args, nproc=1)
    out, compiled = torchtitan_run(tmp / "ds_compiled", *args, "--compile.enable", nproc=1)
    assert "Compiling each" in out or "torch.compile" in out, out[-4000:]
    assert len(eager) == len(compiled) == STEPS, (eager, compiled)
    for a, b in zip(eager, compiled):
        assert abs(a - b) < 2e-3, (eager, compiled)


@pytest.mark.parametrize("model", ["deepseek_v3"])
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


@pytest.mark.parametrize(
    "model, flavor",
    [("qwen3", "debugmodel_moe"), ("llama4", "debugmodel"), ("gpt_oss", "debugmodel")],
)
def test_moe_flavor_trains_on_one_rank(assets, model, flavor):
    tmp, tokenizer, dataset = assets
    args = common(model, flavor, tokenizer, dataset)
    out, losses = torchtitan_run(
        tmp / f"{model}_1", *args, "--parallelism.data_parallel_shard_degree", "1", nproc=1
    )
    if model == "gpt_oss" and not losses and "loss: nan" in out.lower():
        pytest.xfail("TorchTitan's uninitialised gpt_oss router bias was NaN in this process")
    assert len(losses) == STEPS, out[-4000:]
    assert losses[-1] < losses[0] - 0.2, losses


def test_gpt_oss_router_bias_is_left_uninitialised():
    """The upstream bug the gpt_oss comparisons are left out for: after
    TorchTitan's init_weights, the router's gate bias still holds what the
    memory held (poisoned with NaN here). Fails once TorchTitan fixes it."""
    import torch
    from torchtitan.models.gpt_oss import gptoss_configs
    from torchtitan.models.gpt_oss.model.model import GptOssModel

    args = gptoss_configs["debugmodel"]
    with torch.device("meta"):
        model = GptOssModel(args)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.fill_(float("nan"))
        model.init_weights(buffer_device=torch.device("cpu"))
    left = sorted(
        n for n, t in [*model.named_parameters(), *model.named_buffers()]
        if t.is_floating_point() and bool(t.isnan().any())
    )  # fmt: skip
    assert left and all(n.endswith("moe.router.gate.bias") for n in left), left


def test_tensor_parallel_matches_one_rank(assets):
    """deepseek_v3 with tensor parallelism 2 (attention, dense and expert
    weights sharded; both ranks see the same batch) against the same job on
    one rank."""
    tmp, tokenizer, dataset = assets
    args = common("deepseek_v3", "debugmodel", tokenizer, dataset)
    args += _seed(tmp, args, "deepseek_v3_tp")
    one_rank = ["--parallelism.data_parallel_shard_degree", "1"]
    _, one = torchtitan_run(tmp / "ds_one", *args, *one_rank, nproc=1)
    out, tp = torchtitan_run(
        tmp / "ds_tp", *args, *one_rank, "--parallelism.tensor_parallel_degree", "2"
    )
    assert len(one) == len(tp) == STEPS, (one, tp, out[-4000:])
    for a, b in zip(one, tp):
        assert abs(a - b) < 2e-3, (one, tp)
