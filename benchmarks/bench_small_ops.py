"""Small-op latency: neuron vs PyTorch CPU eager, interleaved in one process
on the same threads, and neuron asynchronous vs NEURON_LAUNCH_BLOCKING=1
(measured in a child process, since the mode is fixed at start-up).

Not a test: it reports ratios and never asserts on time.
    python benchmarks/bench_small_ops.py [--write docs/benchmarks/small_ops.md]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

import torch_neuronx
from torch_neuronx import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_all  # noqa: E402  (the suite's settle and warm-up times, beside this file)

CASES = {
    "add (1-element tensors)": lambda d: (lambda a, b: lambda: a + b)(
        torch.ones(1, device=d), torch.ones(1, device=d)
    ),
    "view (reshape of 1 element)": lambda d: (lambda a: lambda: a.view(1, 1))(
        torch.ones(1, device=d)
    ),
    "matmul 64x64x64 fp32": lambda d: (lambda m: lambda: m @ m)(
        torch.randn(64, 64, generator=torch.Generator().manual_seed(0)).to(d)
    ),
}


def sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


# Before each timed round, run_all.py's pause (the other side's spinning
# threads, PyTorch CPU's OpenMP workers or the kernel pool's helpers, go to
# sleep) and its untimed calls, so both sides are timed warm rather than one
# right after the other's burst. Unlike run_all.timeit the warm calls are not
# synchronised one by one: a sync leaves the stream's worker spinning, and
# back-to-back small ops can then queue behind it instead of running in place
# (with run_all.timeit, one run of three put the add at 1.49x CPU's time; the
# mechanism is our reading, not yet shown by a trace).
SETTLE_S, WARM_S = run_all.SETTLE_S, run_all.WARM_S


def time_per_op(fn, device, iters):
    """Seconds per op over `iters` back-to-back calls, ending with a sync:
    for an asynchronous device this is the sustained issue-and-run rate."""
    sync(device)
    time.sleep(SETTLE_S)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARM_S:
        fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / iters


def measure(devices, rounds, iters):
    out = {}
    for name, make in CASES.items():
        fns = {d: make(d) for d in devices}
        for d in devices:  # warm up: allocator caches, worker threads
            time_per_op(fns[d], d, 200)
        samples = {d: [] for d in devices}
        for _ in range(rounds):  # interleaved rounds: drift hits both alike
            for d in devices:
                samples[d].append(time_per_op(fns[d], d, iters))
        out[name] = {d: statistics.median(v) * 1e6 for d, v in samples.items()}
    return out


def machine():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} CPUs, features {', '.join(_C._cpu_features()) or 'baseline'}, "
        f"kernel ISA {_C._isa()}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=3000)
    p.add_argument("--write", help="also write the results table (markdown) to this file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()

    torch.set_num_threads(_C._num_threads())  # the same threads for both
    torch_neuronx.set_fallback_mode("silent")
    if args.child:
        print(json.dumps(measure(["neuron"], args.rounds, args.iters)))
        return 0

    res = measure(["neuron", "cpu"], args.rounds, args.iters)
    env = dict(os.environ, NEURON_LAUNCH_BLOCKING="1")
    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--rounds",
            str(args.rounds),
            "--iters",
            str(args.iters),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    blocking = json.loads(child.stdout.strip().splitlines()[-1])

    lines = [
        f"Machine: {machine()}",
        "",
        "| op | neuron async (us) | PyTorch CPU (us) | neuron / CPU | neuron NEURON_LAUNCH_BLOCKING=1 (us) | blocking / async |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in res.items():
        b = blocking[name]["neuron"]
        lines.append(
            f"| {name} | {r['neuron']:.2f} | {r['cpu']:.2f} | {r['neuron'] / r['cpu']:.2f}x "
            f"| {b:.2f} | {b / r['neuron']:.2f}x |"
        )
    lines += [
        "",
        f"Median of {args.rounds} interleaved rounds of {args.iters} back-to-back ops, "
        "each round ending with a device synchronize (so queued work is counted), "
        f"and starting after a {SETTLE_S * 1e3:.0f} ms pause and {WARM_S * 1e3:.0f} ms of "
        "untimed calls.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        os.makedirs(os.path.dirname(args.write) or ".", exist_ok=True)
        with open(args.write, "w") as f:
            f.write(
                "# Small-op latency\n\nGenerated by `python benchmarks/bench_small_ops.py "
                f"--write {args.write}` on {time.strftime('%Y-%m-%d')}.\n\n{text}\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
