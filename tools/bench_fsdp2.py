"""FSDP2 training step on 1, 2 and 4 ranks of one host with the same global
batch: time per step, and the share of it the communication stream spent in
collectives (torch.profiler's PrivateUse1 activities: the device time of the
tasks on the process group's stream, over the step time). A benchmark, not a
test: it asserts nothing.

    python tools/bench_fsdp2.py --ranks 1 2 4 > table.md

On a host with fewer cores than ranks the ranks share cores (each rank's
thread pool gets its share, LOCAL_WORLD_SIZE), so the step time cannot fall
with more ranks there; the table shows what the communication costs.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce", "broadcast", "barrier")


def _step_bench(rank, world, dim, layers, global_batch, steps):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.profiler import ProfilerActivity, profile

    dev = torch.device("neuron", torch.neuron.current_device())
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[
            torch.nn.Sequential(
                torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)
            )
            for _ in range(layers)
        ]
    ).to(dev)
    for block in model:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = global_batch // world
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(batch, 64, dim, generator=g).to(dev)

    def step():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()

    for _ in range(3):
        step()
    torch.neuron.synchronize()
    times = []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        torch.neuron.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    step_s = times[len(times) // 2]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            step()
        torch.neuron.synchronize()
    comm_us = 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.PrivateUse1 and any(
            c in e.name for c in COLLECTIVES
        ):
            comm_us += e.device_time
    params = sum(p.numel() for p in model.parameters())  # the sharded count on this rank
    return {"step_s": step_s, "comm_s": comm_us / 1e6 / 3, "params": params}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    from distributed_util import run_ranks

    cpu = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(" :\t")
    params = args.layers * (8 * args.dim * args.dim + 5 * args.dim)
    print(
        f"FSDP2 step, {args.layers} blocks of Linear({args.dim}, {4 * args.dim}) + GELU + "
        f"Linear({4 * args.dim}, {args.dim}) ({params / 1e6:.1f} M fp32 parameters), global "
        f"batch {args.global_batch} x 64 tokens, AdamW; median of {args.steps} steps.\n"
        f"Machine: {cpu}, {os.cpu_count()} cores.\n"
    )
    print("| ranks | batch per rank | step ms | communication ms per step (share) |")
    print("|---:|---:|---:|---:|")
    for world in args.ranks:
        res = run_ranks(
            _step_bench,
            world,
            args.dim,
            args.layers,
            args.global_batch,
            args.steps,
            timeout=600,
        )
        step = max(r["step_s"] for r in res)
        comm = max(r["comm_s"] for r in res)
        print(
            f"| {world} | {args.global_batch // world} | {step * 1e3:.1f} | "
            f"{comm * 1e3:.1f} ({100 * comm / step:.0f}%) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
