"""Distributed training on the "neuron" c10d backend, in real processes (one
per rank): FSDP2 (mixed precision, resharding, gradient accumulation,
activation checkpointing, gradient clipping, state dicts and distributed
checkpoints), 2-D FSDP2 + tensor parallelism, and pipeline parallelism. Every
run is compared with the same training on CPU in one process (the oracle):
the losses of every step and the parameters after the last one. No result
is checked against the backend's own output, except where a resumed run must
repeat an uninterrupted one bit for bit."""

import copy

import pytest
import torch
import torch.nn.functional as F
from distributed_util import run_ranks
from torch import nn

IN, HID, OUT = 16, 32, 5  # OUT = 5: the last weight's FSDP shards are uneven (3 + 2 rows)
WORLD = 2
LR = 0.1
# fp32: the ranks sum gradients in another order than one process does
FP32 = dict(rtol=1e-5, atol=1e-6)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(HID, HID)
        self.fc2 = nn.Linear(HID, HID)

    def forward(self, h):
        return h + self.fc2(F.gelu(self.fc1(h)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(IN, HID)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.out = nn.Linear(HID, OUT)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def _net(seed=0):
    torch.manual_seed(seed)
    return Net()


def _data(steps, batch, features=IN, targets=OUT):
    g = torch.Generator().manual_seed(7)
    return [
        (torch.randn(batch, features, generator=g), torch.randn(batch, targets, generator=g))
        for _ in range(steps)
    ]


def _dev():
    return torch.device("neuron", torch.neuron.current_device())


def _full(params):
    """CPU copies of parameters (or gradients): DTensors gathered whole."""
    from torch.distributed.tensor import DTensor

    return [
        (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu().clone() for p in params
    ]


def _step(model, opt, x, y, micro=1, clip=None, before_micro=None):
    """One optimizer step on (x, y) in `micro` micro-batches (gradients
    accumulated, each loss weighted 1 / micro). Returns the loss (the sum of
    the weighted micro-batch losses) and, with clip, the total norm."""
    opt.zero_grad()
    total = 0.0
    for i, (xm, ym) in enumerate(zip(x.chunk(micro), y.chunk(micro), strict=True)):
        if before_micro is not None:
            before_micro(i, i == micro - 1)
        loss = F.mse_loss(model(xm).float(), ym) / micro
        loss.backward()
        total += loss.item()
    norm = None
    if clip is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), **clip)
        norm = _full([norm])[0]
    opt.step()
    return total, norm


def _local(t, rank, world, micro=1):
    """Rank `rank`'s rows of a global batch made of `micro` micro-batches:
    its share of each micro-batch, so that chunk(micro) of the result is its
    part of every micro-batch."""
    return torch.cat([m.chunk(world)[rank] for m in t.chunk(micro)])


def _reference(steps, batch, micro=1, clip=None, optim="sgd"):
    """The same training in one process on CPU, the whole batch at once."""
    model = _net()
    opt = _optimizer(optim, model)
    losses, norms = [], []
    for x, y in _data(steps, batch):
        loss, norm = _step(model, opt, x, y, micro=micro, clip=clip)
        losses.append(loss)
        norms.append(norm)
    return losses, _full(model.parameters()), norms


def _optimizer(kind, model):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=LR)
    return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def _shard(model, mesh, **kw):
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block, mesh=mesh, **kw)
    fully_shard(model, mesh=mesh, **kw)
    return model


def assert_losses(actual, expected, what, **tol):
    torch.testing.assert_close(
        torch.tensor(actual, dtype=torch.float64),
        torch.tensor(expected, dtype=torch.float64),
        msg=lambda m: f"{what}: {m}",
        **(tol or FP32),
    )


def assert_params(actual, expected, what, **tol):
    assert len(actual) == len(expected), what
    for i, (p, q) in enumerate(zip(actual, expected, strict=True)):
        torch.testing.assert_close(p, q, msg=lambda m, i=i: f"{what} [{i}]: {m}", **(tol or FP32))


# ---------------------------------------------------------------- FSDP2 --


def _fsdp(rank, world, runs, steps, batch):
    """Each (case, clip) of runs, one after the other in these processes
    (one spawn for several runs: starting the ranks costs most of the time)."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("neuron", (world,))
    return [_fsdp_run(rank, world, mesh, case, clip, steps, batch) for case, clip in runs]


def _fsdp_run(rank, world, mesh, case, clip, steps, batch):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from torch.distributed.tensor import DTensor

    dev = _dev()
    model = _net().to(dev)
    kw, micro, info = {}, 1, {}
    if case == "bf16":
        kw["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32
        )
    elif case in ("reshard", "no_reshard"):
        kw["reshard_after_forward"] = case == "reshard"
    elif case == "accumulate":
        micro = 2
    elif case == "checkpoint":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            checkpoint_wrapper,
        )

        calls = info["block forwards"] = [0, 0]
        for i, block in enumerate(model.blocks):
            block.register_forward_pre_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
            model.blocks[i] = checkpoint_wrapper(block)
    _shard(model, mesh, **kw)
    assert all(isinstance(p, DTensor) for p in model.parameters())
    opt = _optimizer("sgd", model)

    inner = model.blocks[0]
    if case in ("reshard", "no_reshard", "bf16"):
        # what a block holds between its forward and its backward: its
        # shards (resharded) or the whole parameters, in the compute dtype
        def after_forward(module, args, output):
            w = inner.fc1.weight
            local = w.to_local() if isinstance(w, DTensor) else w
            info.setdefault("after forward", []).append(
                (type(w).__name__, tuple(local.shape), w.dtype, output.dtype)
            )

        inner.register_forward_hook(after_forward)
    if case == "accumulate":
        # no reduce-scatter before the last micro-batch: no sharded gradient yet
        def before_micro(i, last):
            model.set_requires_gradient_sync(last)
            info.setdefault("grads before micro-batch", []).append(
                [p.grad is None for p in model.parameters()]
            )
    else:
        before_micro = None

    losses, norms = [], []
    for x, y in _data(steps, batch):
        xs, ys = _local(x, rank, world, micro).to(dev), _local(y, rank, world, micro).to(dev)
        loss, norm = _step(model, opt, xs, ys, micro=micro, clip=clip, before_micro=before_micro)
        losses.append(loss)
        norms.append(norm)
    return losses, _full(model.parameters()), norms, info


def _rank_mean(losses):
    """The global loss of each step from each rank's list of losses: their
    mean (the ranks hold equal shares of every batch)."""
    return [sum(step) / len(step) for step in zip(*losses, strict=True)]


def test_fsdp2_reshard_after_forward_true_and_false():
    steps, batch = 3, 8
    ref_losses, ref_params, _ = _reference(steps, batch)
    cases = ["reshard", "no_reshard"]
    out = run_ranks(_fsdp, WORLD, [(case, None) for case in cases], steps, batch)
    for i, case in enumerate(cases):
        results = [o[i] for o in out]
        assert_losses(_rank_mean([r[0] for r in results]), ref_losses, f"{case} losses")
        for rank, (_, params, _, info) in enumerate(results):
            assert_params(params, ref_params, f"{case} rank {rank} parameters")
            # block 0's fc1.weight (32 x 32) after its forward, every step:
            # this rank's 16 rows, or the whole
            held = ("DTensor", (16, 32)) if case == "reshard" else ("Parameter", (32, 32))
            assert {a[:2] for a in info["after forward"]} == {held}, (case, info)


def _reference_bf16(steps, batch, reduce_dtype=torch.float32):
    """FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype) in one
    process: each rank's forward and backward run on the bf16 cast of the fp32
    parameters (the all-gather of bf16-cast shards is the cast of the whole
    parameter), the bf16 gradients are averaged over the ranks in
    reduce_dtype and the fp32 parameters take the fp32 result."""
    model = _net()
    opt = _optimizer("sgd", model)
    losses = []
    for x, y in _data(steps, batch):
        grads, step_losses = [], []
        for r in range(WORLD):
            low = copy.deepcopy(model).to(torch.bfloat16)
            loss = F.mse_loss(low(x.chunk(WORLD)[r].to(torch.bfloat16)).float(), y.chunk(WORLD)[r])
            loss.backward()
            step_losses.append(loss.item())
            grads.append([p.grad.to(reduce_dtype) for p in low.parameters()])
        for p, *gs in zip(model.parameters(), *grads, strict=True):
            p.grad = (sum(gs) / WORLD).to(torch.float32)
        opt.step()
        opt.zero_grad()
        losses.append(step_losses)
    return losses, _full(model.parameters())


def test_fsdp2_mixed_precision_bf16_params_fp32_reduce():
    """The neuron bf16 kernels round as the CPU's do here, and the fp32
    average of two bf16 gradients is exact, so the emulation is held to
    fp32 tolerances; the tolerance separates it from fp32 training and from
    a bf16 reduction (both checked), so a policy not applied fails."""
    steps, batch = 3, 8
    ref_losses, ref_params = _reference_bf16(steps, batch)
    (results,) = zip(*run_ranks(_fsdp, WORLD, [("bf16", None)], steps, batch))
    for rank, (losses, params, _, info) in enumerate(results):
        assert_losses(losses, [s[rank] for s in ref_losses], f"rank {rank} losses")
        assert_params(params, ref_params, f"rank {rank} parameters")
        assert all(p.dtype == torch.float32 for p in params)
        # the block computed in bf16 from its whole bf16 parameters, resharded after
        assert {a[1:] for a in info["after forward"]} == {
            ((16, 32), torch.float32, torch.bfloat16)
        }, info["after forward"]
    # the oracle's power to tell: fp32 training, and a bf16 reduction, differ
    # from it by up to 1.4e-4 and 2.5e-4 (absolute), far outside FP32
    _, fp32_params, _ = _reference(steps, batch)
    _, bf16_reduce_params = _reference_bf16(steps, batch, reduce_dtype=torch.bfloat16)
    for other in (fp32_params, bf16_reduce_params):
        with pytest.raises(AssertionError):
            assert_params(results[0][1], other, "other oracle")


def test_fsdp2_gradient_accumulation_without_sync():
    steps, batch = 3, 8
    ref_losses, ref_params, _ = _reference(steps, batch, micro=2)
    (results,) = zip(*run_ranks(_fsdp, WORLD, [("accumulate", None)], steps, batch))
    assert_losses(_rank_mean([r[0] for r in results]), ref_losses, "losses")
    for rank, (_, params, _, info) in enumerate(results):
        assert_params(params, ref_params, f"rank {rank} parameters")
        # before each step's second micro-batch no parameter has a (sharded) gradient yet
        assert info["grads before micro-batch"] == [[True] * len(params)] * (2 * steps)


def test_fsdp2_activation_checkpointing():
    steps, batch = 3, 8
    ref_losses, ref_params, _ = _reference(steps, batch)
    (results,) = zip(*run_ranks(_fsdp, WORLD, [("checkpoint", None)], steps, batch))
    assert_losses(_rank_mean([r[0] for r in results]), ref_losses, "losses")
    for rank, (_, params, _, info) in enumerate(results):
        assert_params(params, ref_params, f"rank {rank} parameters")
        # each block ran twice a step: its forward, and its recomputation in backward
        assert info["block forwards"] == [2 * steps, 2 * steps]


def test_fsdp2_clip_grad_norm_on_dtensor_params():
    steps, batch = 3, 8
    clips = [dict(max_norm=0.5, norm_type=2.0), dict(max_norm=0.1, norm_type=float("inf"))]
    out = run_ranks(_fsdp, WORLD, [("clip", clip) for clip in clips], steps, batch)
    for i, clip in enumerate(clips):
        what = f"norm_type={clip['norm_type']}"
        ref_losses, ref_params, ref_norms = _reference(steps, batch, clip=clip)
        assert all(n > 2 * clip["max_norm"] for n in ref_norms)  # every step clips
        results = [o[i] for o in out]
        assert_losses(_rank_mean([r[0] for r in results]), ref_losses, f"{what} losses")
        for rank, (_, params, norms, _) in enumerate(results):
            assert_losses([n.item() for n in norms], [n.item() for n in ref_norms], what)
            assert_params(params, ref_params, f"{what} rank {rank} parameters")


def _names(model):
    return [name for name, _ in model.named_parameters()]


def _dcp_train(rank, world, path, before, after, load):
    """Without load: trains before + after steps and saves a distributed
    checkpoint after the first `before`. With load: a fresh model (another
    initialization) and optimizer load that checkpoint and train the last
    `after` steps."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
        get_state_dict,
        set_state_dict,
    )
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    dev = _dev()
    mesh = init_device_mesh("neuron", (world,))
    model = _shard(_net(seed=1 if load else 0).to(dev), mesh)
    opt = _optimizer("adamw", model)
    data = _data(before + after, 8)
    out = {}

    def train(batches):
        losses = []
        for x, y in batches:
            loss, _ = _step(
                model, opt, _local(x, rank, world).to(dev), _local(y, rank, world).to(dev)
            )
            losses.append(loss)
        return losses

    if load:
        out["fresh params"] = _full(model.parameters())
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        out["loaded params"] = _full(model.parameters())
        out["losses"] = train(data[before:])
    else:
        out["losses"] = train(data[:before])
        # the plain state dict holds this rank's shards, as DTensors
        sd = model.state_dict()
        assert list(sd) == _names(model)
        assert all(isinstance(v, DTensor) for v in sd.values())
        out["local rows"] = [v.to_local().shape[0] for v in sd.values()]
        # full state dicts, gathered on rank 0 only (cpu_offload); copied, as
        # they may share tensors (the CPU step counts) with the live state
        full = StateDictOptions(full_state_dict=True, cpu_offload=True)
        out["model sd"] = copy.deepcopy(get_model_state_dict(model, options=full))
        out["optim sd"] = copy.deepcopy(get_optimizer_state_dict(model, opt, options=full))
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
        out["saved params"] = _full(model.parameters())
        out["losses"] += train(data[before:])
    out["params"] = _full(model.parameters())
    return out


def test_fsdp2_state_dict_and_distributed_checkpoint_resume(tmp_path):
    before, after = 3, 2
    path = str(tmp_path / "ckpt")
    # the oracle: one uninterrupted CPU run, and its state at the checkpoint
    ref_losses, ref_params, _ = _reference(before + after, 8, optim="adamw")
    cpu = _net()
    cpu_opt = _optimizer("adamw", cpu)
    for x, y in _data(before, 8):
        _step(cpu, cpu_opt, x, y)
    names = _names(cpu)

    saved = run_ranks(_dcp_train, WORLD, path, before, after, False)
    assert_losses(_rank_mean([o["losses"] for o in saved]), ref_losses, "losses, uninterrupted")
    for rank, out in enumerate(saved):
        assert_params(
            out["saved params"], _full(cpu.parameters()), f"rank {rank} at the checkpoint"
        )
        assert_params(out["params"], ref_params, f"rank {rank} parameters, uninterrupted")
        # 32 rows split 16 + 16; the last weight's and bias's 5 split 3 + 2
        assert out["local rows"][-2:] == ([3, 3] if rank == 0 else [2, 2])
    # rank 0's full state dicts: by name, the CPU model's and optimizer's
    msd, osd = saved[0]["model sd"], saved[0]["optim sd"]
    assert saved[1]["model sd"] == {} and list(msd) == names
    assert_params(list(msd.values()), list(cpu.state_dict().values()), "full model state dict")
    cpu_state = cpu_opt.state_dict()["state"]
    for i, name in enumerate(names):
        for key in ("step", "exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(
                osd["state"][name][key].cpu(),
                cpu_state[i][key],
                **FP32,
                msg=lambda m, k=f"{name} {key}": f"{k}: {m}",
            )

    resumed = run_ranks(_dcp_train, WORLD, path, before, after, True)
    for rank, out in enumerate(resumed):
        # the fresh model started elsewhere, and the checkpoint brought it back exactly
        assert not torch.equal(out["fresh params"][0], saved[rank]["saved params"][0])
        assert_params(out["loaded params"], saved[rank]["saved params"], "loaded", rtol=0, atol=0)
        # the resumed steps are the uninterrupted run's, bit for bit (model and
        # optimizer state restored), and the CPU oracle's
        assert out["losses"] == saved[rank]["losses"][before:]
        assert_params(out["params"], saved[rank]["params"], "resumed", rtol=0, atol=0)
        assert_params(out["params"], ref_params, f"rank {rank} parameters, resumed")
    losses = _rank_mean([o["losses"] for o in resumed])
    assert_losses(losses, ref_losses[before:], "losses, resumed")


# ----------------------------------------------------------- 2-D: FSDP2 + TP --


def _tp_net():
    torch.manual_seed(0)
    pair = lambda i, o: nn.Sequential(nn.Linear(i, 2 * HID), nn.GELU(), nn.Linear(2 * HID, o))  # noqa: E731
    return nn.Sequential(pair(IN, HID), nn.Tanh(), pair(HID, OUT + 1))


def _reference_tp(steps, batch):
    model = _tp_net()
    opt = _optimizer("sgd", model)
    losses = [_step(model, opt, x, y)[0] for x, y in _data(steps, batch, targets=OUT + 1)]
    return losses, _full(model.parameters())


def _fsdp_tp(rank, world, steps, batch):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    dev = _dev()
    mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
    model = _tp_net().to(dev)
    plan = {}
    for pair in ("0", "2"):
        plan[f"{pair}.0"] = ColwiseParallel()
        plan[f"{pair}.2"] = RowwiseParallel()
    parallelize_module(model, mesh["tp"], plan)
    fully_shard(model[0], mesh=mesh["dp"])
    fully_shard(model[2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    w = model[0][0].weight  # 64 x 16: tp splits the rows (32 each), dp those again (16)
    assert w.device_mesh.ndim == 2 and w.to_local().shape == (16, IN), (w, w.placements)
    assert not any(p.is_replicate() for p in w.placements), w.placements
    opt = _optimizer("sgd", model)
    losses = []
    for x, y in _data(steps, batch, targets=OUT + 1):
        loss, _ = _step(model, opt, x.chunk(2)[dp].to(dev), y.chunk(2)[dp].to(dev))
        losses.append(loss)
    return (dp, tp), losses, _full(model.parameters())


def test_fsdp2_with_tensor_parallel_2d_mesh():
    steps, batch = 3, 8
    ref_losses, ref_params = _reference_tp(steps, batch)
    results = run_ranks(_fsdp_tp, 4, steps, batch, timeout=300)
    assert [r[0] for r in results] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # the tp peers computed the same loss; the dp groups each half of the batch
    for a, b in ((0, 1), (2, 3)):
        assert_losses(results[a][1], results[b][1], "tp peers")
    assert_losses(_rank_mean([results[0][1], results[2][1]]), ref_losses, "losses")
    for rank, (_, _, params) in enumerate(results):
        assert_params(params, ref_params, f"rank {rank} parameters")


# ------------------------------------------------------- pipeline parallel --

MICRO = 4


def _pp_net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(IN, HID),
        nn.GELU(),
        nn.Linear(HID, HID),
        nn.Tanh(),  # stage 0 ends here
        nn.Linear(HID, HID),
        nn.GELU(),
        nn.Linear(HID, OUT),
    )


def _reference_pp(steps, batch):
    """One process, the whole model: the loss of each micro-batch, the
    gradients of the first step (of the mean of those losses) and the
    parameters after the last."""
    model = _pp_net()
    opt = _optimizer("sgd", model)
    losses, grads = [], None
    for x, y in _data(steps, batch):
        opt.zero_grad()
        micro = [F.mse_loss(model(xm), ym) for xm, ym in zip(x.chunk(MICRO), y.chunk(MICRO))]
        (sum(micro) / MICRO).backward()
        losses.append([m.item() for m in micro])
        grads = grads or _full(p.grad for p in model.parameters())
        opt.step()
    return losses, grads, _full(model.parameters())


def _pipeline(rank, world, schedules, steps, batch):
    return [_pipeline_run(rank, world, s, steps, batch) for s in schedules]


def _pipeline_run(rank, world, schedule, steps, batch):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    dev = _dev()
    full = _pp_net()
    stage_mod = (full[:4] if rank == 0 else full[4:]).to(dev)
    stage = PipelineStage(stage_mod, stage_index=rank, num_stages=world, device=dev)
    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    sched = kind(stage, n_microbatches=MICRO, loss_fn=F.mse_loss)
    opt = _optimizer("sgd", stage_mod)
    losses, grads = [], None
    for x, y in _data(steps, batch):
        opt.zero_grad()
        if rank == 0:
            sched.step(x.to(dev))
        else:
            micro = []
            sched.step(target=y.to(dev), losses=micro)
            losses.append([m.item() for m in micro])
        grads = grads or _full(p.grad for p in stage_mod.parameters())
        opt.step()
    return losses, grads, _full(stage_mod.parameters())


def test_pipeline_parallel_two_stages_gpipe_and_1f1b():
    steps, batch = 3, 8
    ref_losses, ref_grads, ref_params = _reference_pp(steps, batch)
    schedules = ["gpipe", "1f1b"]
    out = run_ranks(_pipeline, WORLD, schedules, steps, batch)
    for (_, g0, p0), (losses, g1, p1), schedule in zip(*out, schedules, strict=True):
        assert_losses(losses, ref_losses, f"{schedule} micro-batch losses")
        # stage 0 holds the first two Linear layers (4 tensors), stage 1 the rest
        assert_params(g0 + g1, ref_grads, f"{schedule} gradients of the first step")
        assert_params(p0 + p1, ref_params, f"{schedule} parameters")
