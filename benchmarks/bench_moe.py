"""Mixture-of-experts speed on neuron: torch._grouped_mm against the dense
GEMM of the same total size (both on neuron, interleaved), balanced and
skewed routing, forward and forward + backward; then TorchTitan's MoE layer
(router, token reordering, grouped experts, combine), forward + backward,
with the share of device time each part takes (torch.profiler).

Not a test: it reports times and ratios and never asserts on them.
    python benchmarks/bench_moe.py [--write FILE]
"""

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

import torch

import torch_neuronx
from torch_neuronx import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_all  # noqa: E402

N = "neuron"


def sizes_for(kind, T, E):
    if kind == "balanced":
        return [T // E] * E
    if kind == "skewed (one expert half the tokens)":
        rest = T // 2 // (E - 1)
        return [T // 2] + [rest] * (E - 2) + [T - T // 2 - rest * (E - 2)]
    return [T // (E // 2) if i % 2 == 0 else 0 for i in range(E)]  # half the experts empty


def grouped_rows(rounds, reps):
    rows = []
    shapes = [(4096, 1024, 1024, 8), (8192, 1024, 512, 64), (2048, 512, 256, 128)]
    kinds = ["balanced", "skewed (one expert half the tokens)", "half the experts empty"]
    for T, K, Nn, E in shapes:
        for dtype in (torch.bfloat16, torch.float32):
            g = torch.Generator().manual_seed(0)
            x = torch.randn(T, K, generator=g).to(dtype).to(N).requires_grad_()
            w = torch.randn(E, K, Nn, generator=g).to(dtype).to(N).requires_grad_()
            wd = torch.randn(K, Nn, generator=g).to(dtype).to(N).requires_grad_()
            go = torch.randn(T, Nn, generator=g).to(dtype).to(N)
            for kind in kinds if E == 8 else kinds[:1]:
                offs = torch.tensor(sizes_for(kind, T, E)).cumsum(0).to(torch.int32).to(N)
                with torch.no_grad():
                    s = run_all.interleaved(
                        {
                            "grouped": lambda offs=offs, x=x, w=w: torch._grouped_mm(x, w, offs),
                            "dense": lambda x=x, wd=wd: x @ wd,
                        },
                        rounds,
                        reps,
                    )
                fb = run_all.interleaved(
                    {
                        "grouped": lambda offs=offs, x=x, w=w, go=go: torch._grouped_mm(
                            x, w, offs
                        ).backward(go),
                        "dense": lambda x=x, wd=wd, go=go: (x @ wd).backward(go),
                    },
                    rounds,
                    reps,
                )
                tg, td = statistics.median(s["grouped"]), statistics.median(s["dense"])
                bg, bd = statistics.median(fb["grouped"]), statistics.median(fb["dense"])
                flops = 2 * T * K * Nn
                rows.append(
                    f"| {T}x{K} @ {E}x{K}x{Nn} | {str(dtype)[6:]} | {kind} | {tg * 1e3:.2f} | "
                    f"{td * 1e3:.2f} | {td / tg:.2f} | {flops / tg / 1e9:.0f} | {bg * 1e3:.2f} | "
                    f"{bd * 1e3:.2f} | {bd / bg:.2f} |"
                )
                print(rows[-1], flush=True)
    return rows


# TorchTitan's MoE layer, by part: every op of the profile goes to the part
# of the layer whose module (record_function scope) ran it.
def moe_layer_rows():
    from torchtitan.models.moe.moe import MoE, MoEArgs

    dim, hidden, T = 512, 1024, 4096
    args = MoEArgs(num_experts=8, num_shared_experts=1, top_k=2, score_func="softmax")
    layer = MoE(args, dim=dim, hidden_dim=hidden)
    with torch.no_grad():
        layer.init_weights(0.02, torch.device("cpu"))
    layer = layer.to(N, torch.bfloat16)
    x = torch.randn(2, T // 2, dim).to(torch.bfloat16).to(N).requires_grad_()

    parts = {
        "router": layer.router,
        "token reordering": layer.reorderer,
        "routed experts": layer.experts,
        "shared expert": layer.shared_experts,
    }
    times = defaultdict(float)

    def enter(name):
        def hook(module, args):
            torch.neuron.synchronize()
            module._t0 = time.perf_counter()

        return hook

    def leave(name):
        def hook(module, args, out):
            torch.neuron.synchronize()
            times[name] += time.perf_counter() - module._t0

        return hook

    hooks = []
    for name, mod in parts.items():
        hooks.append(mod.register_forward_pre_hook(enter(name)))
        hooks.append(mod.register_forward_hook(leave(name)))

    def step():
        out = layer(x)
        torch.neuron.synchronize()
        t = time.perf_counter()
        out.float().square().mean().backward()
        torch.neuron.synchronize()
        times["backward (all parts)"] += time.perf_counter() - t

    for _ in range(2):
        step()
    times.clear()
    t0 = time.perf_counter()
    reps = 5
    for _ in range(reps):
        step()
    total = (time.perf_counter() - t0) / reps
    for h in hooks:
        h.remove()
    named = sum(times.values()) / reps
    times["the rest of forward (scores, combine)"] = max(0.0, total - named) * reps
    lines = [f"| {k} | {v / reps * 1e3:.2f} | {100 * v / reps / total:.0f}% |" for k, v in
             sorted(times.items(), key=lambda kv: -kv[1])]  # fmt: skip
    # device kernels by op (the kernel events, not the host ops around them)
    with torch.profiler.profile() as prof:
        step()
    ops, dev_total = defaultdict(float), 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            continue
        ops[e.name] += e.device_time_total
        dev_total += e.device_time_total
    top = [f"| {k} | {v / 1e3:.2f} | {100 * v / dev_total:.0f}% |" for k, v in
           sorted(ops.items(), key=lambda kv: -kv[1])[:10]]  # fmt: skip
    return total * 1e3, lines, top


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--write")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--layer-only", action="store_true", help="only TorchTitan's MoE layer")
    args = p.parse_args()
    torch.set_num_threads(_C._num_threads())
    torch_neuronx.set_fallback_mode("error")
    lines = [
        f"Host: {run_all.cpu_name()}; flags {' '.join(run_all.cpu_flags())}; "
        f"{os.cpu_count()} CPUs, {torch.get_num_threads()} threads; torch {torch.__version__}.",
        "",
        "torch._grouped_mm (2-D tokens x 3-D expert weights) against the dense GEMM of the same "
        "size (tokens x one weight), both on neuron, median of interleaved rounds:",
        "",
        "| shape | dtype | routing | grouped ms | dense ms | dense/grouped | grouped GFLOP/s "
        "| fwd+bwd grouped ms | fwd+bwd dense ms | dense/grouped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    if not args.layer_only:
        lines += grouped_rows(args.rounds, 2)
    total, parts, top = moe_layer_rows()
    lines += [
        "",
        f"TorchTitan MoE layer (8 experts, top-2, 1 shared expert, dim 512, hidden 1024, 4096 "
        f"tokens, bf16), forward + backward: {total:.1f} ms per step (each part timed with "
        "a synchronisation around it).",
        "",
        "| part | ms | share |",
        "|---|---|---|",
        *parts,
        "",
        "| device kernel (one step, profiler) | ms | share |",
        "|---|---|---|",
        *top,
    ]
    print("\n".join(lines))
    if args.write:
        with open(args.write, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
