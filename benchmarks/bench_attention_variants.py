"""FlexAttention (and, beside it, SDPA) on neuron against PyTorch CPU,
interleaved in one process on the same threads.

CPU's eager flex_attention is PyTorch's dense reference (the L x L scores,
mask_mod everywhere); its compiled flex_attention is Inductor's C++ template
(inference only). Neuron's flex_attention visits the block mask's live blocks
only, so its time should follow the number of live blocks: the "live blocks"
column says how many of the n x n there are.

Not a test: it reports times and ratios and never asserts on them.
    python benchmarks/bench_attention_variants.py [--quick] [--write FILE]
"""

import argparse
import os
import statistics
import sys

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_neuronx
from torch_neuronx import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_all  # noqa: E402


def causal(b, h, q, kv):
    return q >= kv


def window(w):
    def mask(b, h, q, kv):
        return (q >= kv) & (q - kv < w)

    return mask


def documents(L, n, device):
    doc = (torch.arange(L, device=device) * n) // L

    def mask(b, h, q, kv):
        return (doc[q] == doc[kv]) & (q >= kv)

    return mask


def softcap(score, b, h, q, kv):
    return 20.0 * torch.tanh(score / 20.0)


def masks(L, device):
    return {
        "full (no mask)": None,
        "causal": causal,
        "sliding window 256": window(256),
        "8 documents, causal": documents(L, 8, device),
    }


def live_blocks(bm, L):
    n = -(-L // 128)
    if bm is None:
        return n * n, n * n
    live = bm.kv_num_blocks.sum().item()
    if bm.full_kv_num_blocks is not None:
        live += bm.full_kv_num_blocks.sum().item()
    return live // bm.kv_num_blocks.shape[1], n * n


def forward_rows(B, H, L, D, dtype, rounds, reps):
    rows = []
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, L, D, generator=g).to(dtype) for _ in range(3))
    qn, kn, vn = (t.to("neuron") for t in (q, k, v))
    flex_cpu_compiled = torch.compile(flex_attention, backend="inductor")
    for name, mask in masks(L, "cpu").items():
        mask_n = masks(L, "neuron")[name]
        bm_c = create_block_mask(mask, 1, 1, L, L, device="cpu") if mask else None
        bm_n = create_block_mask(mask_n, 1, 1, L, L, device="neuron") if mask_n else None
        fns = {
            "neuron": lambda bm_n=bm_n: flex_attention(qn, kn, vn, block_mask=bm_n),
            "cpu": lambda bm_c=bm_c: flex_attention(q, k, v, block_mask=bm_c),
        }
        with torch.no_grad():
            fns_c = {"cpu": lambda bm_c=bm_c: flex_cpu_compiled(q, k, v, block_mask=bm_c)}
            s = run_all.interleaved({**fns}, rounds, reps)
            try:
                sc = run_all.interleaved(fns_c, rounds, reps)["cpu"]
            except Exception as e:  # CPU's template needs AVX2; report, do not stop
                sc = None
                print(f"# CPU compiled flex_attention failed: {type(e).__name__}: {e}")
        t_n, t_c = statistics.median(s["neuron"]), statistics.median(s["cpu"])
        t_cc = statistics.median(sc) if sc else float("nan")
        live, total = live_blocks(bm_n, L)
        rows.append((f"{name}", str(dtype).split(".")[-1], live, total, t_n, t_c, t_cc))
    return rows


def backward_rows(B, H, L, D, dtype, rounds, reps):
    """Forward + backward: neuron flex (causal block mask) against SDPA
    is_causal on neuron and on CPU (CPU's flex_attention has no backward)."""
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(B, H, L, D, generator=g).to(dtype) for _ in range(3)]
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def make(device, use_flex):
        ts = [t.to(device).requires_grad_() for t in base]
        bm = create_block_mask(causal, 1, 1, L, L, device=device) if use_flex else None

        def step():
            if use_flex:
                out = flex_attention(*ts, block_mask=bm)
            else:
                out = sdpa(*ts, is_causal=True)
            out.sum().backward()
            for t in ts:
                t.grad = None

        return step

    s = run_all.interleaved(
        {"neuron": make("neuron", True), "cpu": make("cpu", False)}, rounds, reps
    )
    s2 = run_all.interleaved({"neuron": make("neuron", False)}, rounds, reps)
    return (
        statistics.median(s["neuron"]),
        statistics.median(s2["neuron"]),
        statistics.median(s["cpu"]),
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write")
    args = p.parse_args()
    torch.set_num_threads(_C._num_threads())
    torch_neuronx.set_fallback_mode("error")
    rounds, reps = (3, 1) if args.quick else (5, 2)
    B, H, L, D = 1, 8, 1024 if args.quick else 2048, 64
    lines = [
        f"Host: {run_all.cpu_name()}; flags {' '.join(run_all.cpu_flags())}; "
        f"{os.cpu_count()} CPUs, {torch.get_num_threads()} threads; torch {torch.__version__}.",
        "",
        f"Forward, B={B}, H={H}, L={L}, D={D}, block 128 (median of {rounds} interleaved rounds):",
        "",
        "| mask | dtype | live blocks | neuron flex ms | CPU flex eager ms | CPU flex compiled ms "
        "| CPU eager / neuron | CPU compiled / neuron |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dtype in (torch.float32, torch.bfloat16):
        for name, dt, live, total, t_n, t_c, t_cc in forward_rows(B, H, L, D, dtype, rounds, reps):
            lines.append(
                f"| {name} | {dt} | {live}/{total} | {t_n * 1e3:.1f} | {t_c * 1e3:.1f} | "
                f"{t_cc * 1e3:.1f} | {t_c / t_n:.2f} | {t_cc / t_n:.2f} |"
            )
            print(lines[-1], flush=True)
    lines += [
        "",
        f"Forward + backward, causal, float32, B={B}, H={H}, L={L}, D={D}:",
        "",
        "| neuron flex ms | neuron SDPA is_causal ms | CPU SDPA is_causal ms |",
        "|---|---|---|",
    ]
    t_f, t_s, t_c = backward_rows(B, H, L, D, torch.float32, rounds, reps)
    lines.append(f"| {t_f * 1e3:.1f} | {t_s * 1e3:.1f} | {t_c * 1e3:.1f} |")
    print("\n".join(lines))
    if args.write:
        with open(args.write, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
