"""Low-precision products on neuron, side by side with PyTorch CPU in one
process (interleaved rounds, same threads):

- weight-only int8 decode: torch._weight_int8pack_mm against the bf16
  product with the same [N, K] weight (both on neuron) and CPU's own
  _weight_int8pack_mm / bf16 linear, at batch 1-16; each row's effective
  bandwidth (the weight bytes it must stream) against a memcpy timed
  beside it (the streaming bound);
- torch._int_mm against CPU's, with the share of the measured int8 dot
  product peak (independent VNNI / multiply-add chains);
- torch._scaled_mm (fp8 e4m3, row-wise scales) against neuron's bf16 mm.

Not a test: it reports times and ratios and never asserts on them.
    python benchmarks/bench_lowp.py [--write FILE] [--quick]
"""

import argparse
import os
import statistics
import sys

import torch

import torch_neuronx  # noqa: F401
from torch_neuronx import _C

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_all  # noqa: E402

N = "neuron"


def med(s):
    return statistics.median(s)


def _cycle(fn, items):
    """A callable that calls fn on the next of `items` each time."""
    state = {"i": 0}

    def run():
        i = state["i"] = (state["i"] + 1) % len(items)
        return fn(*items[i])

    return run


def decode_rows(rows, rounds):
    """Weight-only int8 against bf16 at batch 1-16. Each side cycles
    through COPIES weights whose bytes together exceed the last-level
    cache, so every call streams its weight from memory, as a decode step
    does (one 16 MiB int8 weight called again and again is read from L3)."""
    K = Nn = 4096
    COPIES = 8  # 128 MiB of int8, 256 MiB of bf16
    g = torch.Generator().manual_seed(0)
    w8 = [torch.randint(-128, 128, (Nn, K), dtype=torch.int8, generator=g) for _ in range(COPIES)]
    s = [(torch.rand(Nn, generator=g) / 64).to(torch.bfloat16) for _ in range(COPIES)]
    wb = [(w.float() * sc.float()[:, None]).to(torch.bfloat16) for w, sc in zip(w8, s)]
    w8n, sn, wbn = [w.to(N) for w in w8], [x.to(N) for x in s], [w.to(N) for w in wb]
    memcpy = run_all.memcpy_anchor(K * Nn * 2)
    for m in (1, 2, 4, 8, 16):
        x = torch.randn(m, K, generator=g).to(torch.bfloat16)
        xn = x.to(N)
        fns = {
            "int8 neuron": _cycle(
                torch._weight_int8pack_mm, [(xn, w, sc) for w, sc in zip(w8n, sn)]
            ),
            "bf16 neuron": _cycle(torch.nn.functional.linear, [(xn, w) for w in wbn]),
            "int8 cpu": _cycle(torch._weight_int8pack_mm, [(x, w, sc) for w, sc in zip(w8, s)]),
            "bf16 cpu": _cycle(torch.nn.functional.linear, [(x, w) for w in wb]),
            "memcpy": memcpy,
        }
        devs = {"int8 cpu": "cpu", "bf16 cpu": "cpu"}
        samples = {k: [] for k in fns}
        for _ in range(rounds):
            for k, f in fns.items():
                samples[k].append(run_all.timeit(f, devs.get(k, N), COPIES))
        t = {k: med(v) for k, v in samples.items()}
        # memcpy moves 2 x 32 MiB (read + write) per call
        bw = 2 * K * Nn * 2 / t["memcpy"]
        i8_bw = K * Nn / t["int8 neuron"]
        b16_bw = 2 * K * Nn / t["bf16 neuron"]
        rows.append(
            (
                f"{Nn}x{K}, batch {m}",
                f"{t['int8 neuron'] * 1e3:.3f} ms",
                f"{t['bf16 neuron'] * 1e3:.3f} ms",
                f"{t['bf16 neuron'] / t['int8 neuron']:.2f}x",
                f"{t['int8 cpu'] * 1e3:.3f} ms ({t['int8 cpu'] / t['int8 neuron']:.2f}x)",
                f"{t['bf16 cpu'] * 1e3:.3f} ms",
                f"int8 {i8_bw / 1e9:.1f} GB/s ({100 * i8_bw / bw:.0f}%), bf16 "
                f"{b16_bw / 1e9:.1f} GB/s ({100 * b16_bw / bw:.0f}%); memcpy {bw / 1e9:.1f} GB/s",
            )
        )


def int_mm_rows(rows, rounds, peak):
    g = torch.Generator().manual_seed(1)
    for m, k, n in ((1024, 1024, 1024), (2048, 4096, 1024), (64, 4096, 4096)):
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g).t()
        fns = {
            N: _cycle(torch._int_mm, [(a.to(N), b.to(N))]),
            "cpu": _cycle(torch._int_mm, [(a, b)]),
        }
        samples = run_all.interleaved(fns, rounds, 3)
        t = {d: med(v) for d, v in samples.items()}
        gops = 2 * m * n * k / t[N] / 1e9
        rows.append(
            (
                f"_int_mm {m}x{k}x{n}",
                f"{t[N] * 1e3:.2f} ms",
                f"{t['cpu'] * 1e3:.2f} ms",
                f"{t['cpu'] / t[N]:.2f}x",
                f"{gops:.0f} GOPS, {100 * gops / peak:.0f}% of the int8 peak"
                if peak
                else f"{gops:.0f} GOPS",
            )
        )


def scaled_mm_rows(rows, rounds):
    g = torch.Generator().manual_seed(2)
    for m, k, n in ((1024, 1024, 1024), (2048, 4096, 1024)):
        a = torch.randn(m, k, generator=g)
        b = torch.randn(n, k, generator=g)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
        sa, sb = torch.ones(m, 1), torch.ones(1, n)
        ab, bb = a.to(torch.bfloat16).to(N), b.to(torch.bfloat16).to(N).t()
        fns = {
            N: _cycle(
                torch._scaled_mm,
                [(a8.to(N), b8.to(N), sa.to(N), sb.to(N), None, None, torch.bfloat16)],
            ),
            "bf16": _cycle(torch.mm, [(ab, bb)]),
            "cpu": _cycle(torch._scaled_mm, [(a8, b8, sa, sb, None, None, torch.bfloat16)]),
        }
        samples = run_all.interleaved(fns, rounds, 3)
        t = {d: med(v) for d, v in samples.items()}
        rows.append(
            (
                f"_scaled_mm fp8 e4m3 row-wise {m}x{k}x{n} -> bf16",
                f"{t[N] * 1e3:.2f} ms",
                f"{t['cpu'] * 1e3:.2f} ms ({t['cpu'] / t[N]:.2f}x)",
                f"{t['bf16'] * 1e3:.2f} ms ({t['bf16'] / t[N]:.2f}x)",
            )
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 3 if args.quick else 7
    torch.set_num_threads(_C._num_threads())
    # the int8 instruction this process's int8 GEMM runs on
    isa = _C._isa()
    if isa == "avx512":
        kind = "int8-vnni512" if "avx512-vnni" in _C._cpu_features() else "int16-madd512"
    else:
        kind = "int16-madd256" if isa == "avx2" else None
    peak = max(_C._measure_peak(kind) for _ in range(3)) / 1e9 if kind else 0.0
    lines = [
        f"# Low-precision products: {run_all.cpu_name()}",
        "",
        f"{_C._num_threads()} threads; flags: {' '.join(run_all.cpu_flags())}; int8 peak "
        f"({kind}: independent chains, all threads): {peak:.0f} GOPS",
        "",
    ]
    rows = []
    decode_rows(rows, rounds)
    lines += [
        "Weight-only int8 decode (torch._weight_int8pack_mm, bf16 activations) against the",
        "bf16 linear with the same weight, each call streaming its weight from memory:",
        "",
        "| weight, batch | int8 neuron | bf16 neuron | int8 speed-up | int8 CPU (CPU / neuron) | bf16 CPU | weight bytes streamed (share of memcpy) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    rows = []
    int_mm_rows(rows, rounds, peak)
    lines += ["", "| case | neuron | CPU | CPU / neuron | rate |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    rows = []
    scaled_mm_rows(rows, rounds)
    lines += [
        "",
        "| case | neuron | CPU (CPU / neuron) | bf16 mm on neuron (bf16 / fp8) |",
        "|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
