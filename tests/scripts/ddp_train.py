"""Launched by torchrun or `accelerate launch` from tests/test_launchers.py
and tests/test_multihost.py: data-parallel training of a small MLP on
neuron, with nothing but the launcher's environment to go on (`torchrun`:
DDP, `fsdp2`: fully_shard over all the ranks, `accelerate`); each rank
compares the parameters (and with fsdp2 each step's global loss) with the
same training done in one process on CPU and writes its RESULT (json) to
$DDP_TRAIN_RESULTS/rank<RANK>.json."""

import json
import os
import sys

import torch
import torch.distributed as dist

# a native crash in a rank (an abort, a segfault) prints every thread's stack
torch._C._set_print_stack_traces_on_fatal_signal(True)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def batches(steps, batch):
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randn(batch, 8, generator=g), torch.randn(batch, 2, generator=g))
        for _ in range(steps)
    ]


def reference(steps, batch, losses=None):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in batches(steps, batch):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if losses is not None:
            losses.append(loss.item())
    return [p.detach() for p in model.parameters()]


def with_torchrun(steps, batch):
    dist.init_process_group()  # nothing named: the accelerator's backend
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("neuron", torch.neuron.current_device())
    model = torch.nn.parallel.DistributedDataParallel(mlp().to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    per = batch // world
    for x, y in batches(steps, batch):
        opt.zero_grad()
        xs, ys = x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]
        torch.nn.functional.mse_loss(model(xs.to(dev)), ys.to(dev)).backward()
        opt.step()
    info = {"backend": dist.get_backend(), "device": str(dev), "world": world}
    params = [p.detach().cpu() for p in model.module.parameters()]
    dist.destroy_process_group()
    return rank, info, params


def with_fsdp2(steps, batch):
    """FSDP2 over every rank (across hosts too): each Linear its own unit, and
    the root; the last weight's 2 rows split 1, 1, 0, 0 over 4 ranks."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("neuron", torch.neuron.current_device())
    mesh = init_device_mesh("neuron", (world,))
    model = mlp().to(dev)
    fully_shard(model[0], mesh=mesh)
    fully_shard(model[2], mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    per = batch // world
    losses = []
    for x, y in batches(steps, batch):
        opt.zero_grad()
        xs, ys = x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]
        loss = torch.nn.functional.mse_loss(model(xs.to(dev)), ys.to(dev))
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)  # the global batch's loss
        losses.append(total.item())
    info = {
        "backend": dist.get_backend(),
        "device": str(dev),
        "world": world,
        "local_shapes": [list(p.to_local().shape) for p in model.parameters()],
        "shard_devices": sorted({str(p.to_local().device) for p in model.parameters()}),
        "dtensors": all(isinstance(p, DTensor) for p in model.parameters()),
        "losses": losses,
    }
    params = [p.full_tensor().detach().cpu() for p in model.parameters()]
    dist.destroy_process_group()
    return rank, info, params


def with_accelerate(steps, batch):
    from accelerate import Accelerator

    acc = Accelerator()
    world = acc.num_processes
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt = acc.prepare(model, opt)
    per = batch // world
    r = acc.process_index
    for x, y in batches(steps, batch):
        opt.zero_grad()
        xs, ys = x[r * per : (r + 1) * per], y[r * per : (r + 1) * per]
        acc.backward(torch.nn.functional.mse_loss(model(xs.to(acc.device)), ys.to(acc.device)))
        opt.step()
    info = {
        "backend": acc.state.backend,
        "device": str(acc.device),
        "world": world,
        "distributed_type": str(acc.distributed_type),
    }
    params = [p.detach().cpu() for p in acc.unwrap_model(model).parameters()]
    acc.wait_for_everyone()
    return r, info, params


if __name__ == "__main__":
    steps, batch = 3, 8
    run = {"accelerate": with_accelerate, "fsdp2": with_fsdp2}.get(sys.argv[1], with_torchrun)
    rank, info, params = run(steps, batch)
    ref_losses = []
    ref = reference(steps, batch, ref_losses)
    info["ref_losses"] = ref_losses
    info["max_param_diff"] = max(
        float((p - q).abs().max()) for p, q in zip(params, ref, strict=True)
    )
    info["local_rank"] = int(os.environ["LOCAL_RANK"])
    from torch_neuronx.distributed import host_id

    info["host"] = host_id()  # what the backend took for this rank's host
    out = os.environ.get("DDP_TRAIN_RESULTS")
    if out:  # one file per rank: the ranks' stdout lines can interleave
        with open(os.path.join(out, f"rank{os.environ['RANK']}.json"), "w") as f:
            json.dump(info, f)
