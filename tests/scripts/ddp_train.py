"""Launched by torchrun or `accelerate launch` from tests/test_launchers.py:
data-parallel training of a small MLP on neuron, with nothing but the
launcher's environment to go on; rank 0 compares the parameters with the
same training done in one process on CPU and writes its RESULT (json) to $DDP_TRAIN_RESULTS/rank<RANK>.json."""

import json
import os
import sys

import torch
import torch.distributed as dist


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def batches(steps, batch):
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randn(batch, 8, generator=g), torch.randn(batch, 2, generator=g))
        for _ in range(steps)
    ]


def reference(steps, batch):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in batches(steps, batch):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
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
    rank, info, params = (with_accelerate if sys.argv[1] == "accelerate" else with_torchrun)(
        steps, batch
    )
    ref = reference(steps, batch)
    info["max_param_diff"] = max(
        float((p - q).abs().max()) for p, q in zip(params, ref, strict=True)
    )
    info["local_rank"] = int(os.environ["LOCAL_RANK"])
    out = os.environ.get("DDP_TRAIN_RESULTS")
    if out:  # one file per rank: the ranks' stdout lines can interleave
        with open(os.path.join(out, f"rank{os.environ['RANK']}.json"), "w") as f:
            json.dump(info, f)
