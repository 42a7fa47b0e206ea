"""nccl-tests-style table for the "neuron" c10d backend: for each collective
and message size, the time per call, algbw (bytes / time) and busbw (algbw
times nccl-tests' factor for the collective), neuron tensors on the neuron
backend next to CPU tensors on Gloo, in the same processes, measured in turn;
memcpy bandwidth of the same size (one thread, in every rank at once) is the
anchor. From 1 MiB a copy floor is measured beside them: in every rank at
once, the fewest bytes that collective must read and write, moved by the
fastest local copy (libc memcpy on CPU tensors or the kernel library's copy
on neuron tensors, whichever is faster at that size). A collective cannot
beat it by more than noise, so where a tenth of Gloo's time is below the
floor, 10x Gloo is beyond what this host's memory delivers.
A benchmark, not a test: it asserts nothing.

    python tools/bench_collectives.py --ranks 2 4 --max-mib 64 > table.md
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


BATCHES = 5


def busbw_factor(kind, n):
    return {
        "all_reduce": 2 * (n - 1) / n,
        "all_gather": (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "broadcast": 1.0,
    }[kind]


def _bench(rank, world, sizes, kinds):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # the memcpy anchor: one thread
    gloo = dist.new_group(backend="gloo")
    dev = torch.device("neuron", torch.neuron.current_device())
    rows = []

    def timed(fn, sync, nbytes, join=False):
        """join: the batch ends when every rank's has (a barrier), for local
        work that, unlike a collective, does not wait for the other ranks."""
        iters = max(3, min(200, int(2e8 // max(nbytes, 1))))
        for _ in range(min(iters, 5)):  # warm: mappings, buffers, the first calls' set-up
            fn()
        sync()
        times = []
        for _ in range(BATCHES):  # the median batch: one scheduler hiccup moves no row
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            if join:
                dist.barrier()
            times.append((time.perf_counter() - t0) / iters)
        return sorted(times)[len(times) // 2]

    def floor_jobs(kind, n, device):
        """The collective's compulsory traffic in one rank, as local copies
        over the same footprint: read `src` once, write every destination.
        all_reduce (in place): read and write N bytes in place; all_gather:
        read the rank's N/world input, write the N-byte output; all_to_all:
        read N, write N; broadcast: each rank writes its 1/world share of
        the (world-1) receivers' N bytes, read once. None for reduce_scatter
        (a reduction, not a copy)."""
        per = max(1, n // world)
        if kind == "all_reduce":
            t = torch.ones(n, device=device)
            return lambda: t.mul_(1.0)
        if kind in ("all_gather", "broadcast"):
            src = torch.ones(per, device=device)
            dsts = [torch.empty(per, device=device) for _ in range(world - (kind == "broadcast"))]

            def job():
                for d in dsts:
                    d.copy_(src)

            return job
        if kind == "all_to_all":
            src, dst = (
                torch.ones(per * world, device=device),
                torch.empty(per * world, device=device),
            )
            return lambda: dst.copy_(src)
        return None

    for kind in kinds:
        for nbytes in sizes:
            n = max(1, nbytes // 4)
            res = {}
            for backend, device, group, sync in (
                ("neuron", dev, None, torch.neuron.synchronize),
                ("gloo", torch.device("cpu"), gloo, lambda: None),
            ):
                if kind == "all_reduce":
                    t = torch.ones(n, device=device)
                    fn = lambda t=t, g=group: dist.all_reduce(t, group=g)  # noqa: E731
                elif kind == "broadcast":
                    t = torch.ones(n, device=device)
                    fn = lambda t=t, g=group: dist.broadcast(t, src=0, group=g)  # noqa: E731
                elif kind == "all_gather":
                    per = max(1, n // world)
                    i, o = torch.ones(per, device=device), torch.empty(per * world, device=device)
                    fn = lambda i=i, o=o, g=group: dist.all_gather_into_tensor(o, i, group=g)  # noqa: E731
                elif kind == "reduce_scatter":
                    per = max(1, n // world)
                    i, o = torch.ones(per * world, device=device), torch.empty(per, device=device)
                    fn = lambda i=i, o=o, g=group: dist.reduce_scatter_tensor(o, i, group=g)  # noqa: E731
                else:
                    per = max(1, n // world)
                    i, o = (
                        torch.ones(per * world, device=device),
                        torch.empty(per * world, device=device),
                    )
                    fn = lambda i=i, o=o, g=group: dist.all_to_all_single(o, i, group=g)  # noqa: E731
                res[backend] = timed(fn, sync, nbytes)
            a, b = torch.ones(n), torch.empty(n)
            memcpy = timed(lambda a=a, b=b: b.copy_(a), lambda: None, nbytes)
            floor = None
            if nbytes >= 1 << 20 and floor_jobs(kind, 1, "cpu") is not None:
                floor = min(
                    timed(floor_jobs(kind, n, d), sy, nbytes, join=True)
                    for d, sy in (("cpu", lambda: None), (dev, torch.neuron.synchronize))
                )
            rows.append((kind, n * 4, res["neuron"], res["gloo"], memcpy, floor))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument(
        "--kinds",
        nargs="+",
        default=["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"],
    )
    args = ap.parse_args()
    from distributed_util import run_ranks

    sizes = [8]
    s = 1024
    while s <= args.max_mib << 20:
        sizes.append(s)
        s *= 8 if s < (1 << 20) else 4
    import platform
    import subprocess

    cpu = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    flags = subprocess.run(
        [
            "sh",
            "-c",
            "grep -m1 '^flags' /proc/cpuinfo | grep -o 'avx512[a-z_0-9]*\\|avx2' | sort -u",
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    print(
        f"Machine: {cpu}, {os.cpu_count()} cores, {platform.machine()} ({' '.join(flags)}); "
        "torch 2.13.0 CPU; one process per rank (started as torchrun would: LOCAL_WORLD_SIZE "
        "set, so device memory is shared and large collectives read peers in place).\n\n"
        "Per call: a loop of back-to-back calls, then one synchronisation, as nccl-tests "
        "times them; the median of 5 such batches. busbw = algbw x nccl-tests' factor (all_reduce 2(n-1)/n, all_gather / "
        "reduce_scatter / all_to_all (n-1)/n, broadcast 1). gloo: the same collective on CPU "
        "tensors over PyTorch's Gloo, in the same processes, measured in turn. memcpy: "
        "`b.copy_(a)` of the same bytes in every rank at once, one thread (each rank's share "
        "of the host's memory bandwidth at that size; in cache below a few MiB). copy floor: "
        "from 1 MiB, in every rank at once, the bytes the collective must read and write "
        "(all_reduce: N read and written in place, as `t.mul_(1.0)`; all_gather: the rank's "
        "N/ranks input copied into each of the ranks output blocks; all_to_all: N copied once; "
        "broadcast: the rank's N/ranks share copied to each of the ranks-1 receivers' "
        "blocks), the faster of libc memcpy on CPU tensors and the kernel library's copy on "
        "neuron tensors. gloo/10 under the floor: 10x Gloo cannot be reached on this host's "
        "memory at that size.\n"
    )
    for world in args.ranks:
        rows = run_ranks(_bench, world, sizes, args.kinds, timeout=3000)[0]
        print(f"### {world} ranks\n")
        print(
            "| collective | bytes | neuron us | neuron algbw GB/s | neuron busbw GB/s | gloo us | gloo busbw GB/s | busbw neuron/gloo | neuron busbw / memcpy | copy floor us | gloo us / 10 | neuron / floor |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for kind, nbytes, tn, tg, tm, tf in rows:
            f = busbw_factor(kind, world)
            bn, bg, mc = nbytes / tn / 1e9 * f, nbytes / tg / 1e9 * f, nbytes / tm / 1e9
            fl = (
                f"{tf * 1e6:.1f} | {tg * 1e5:.1f}{' (under)' if tg / 10 < tf else ''} | {tn / tf:.2f}x"
                if tf
                else "| |"
            )
            print(
                f"| {kind} | {nbytes} | {tn * 1e6:.1f} | {nbytes / tn / 1e9:.2f} | {bn:.2f} | {tg * 1e6:.1f} | {bg:.2f} | {bn / bg:.1f}x | {bn / mc:.0%} | {fl} |"
            )
        print()


if __name__ == "__main__":
    main()
