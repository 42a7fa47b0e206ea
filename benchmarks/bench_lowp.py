"""Low-precision products on neuron, side by side with PyTorch CPU in one
process (interleaved rounds, same threads):

- weight-only int8 decode: torch._weight_int8pack_mm against the bf16
  product with the same [N, K] weight (both on neuron) and CPU's own
  _weight_int8pack_mm / bf16 linear, at batch 1-16; each row's effective
  bandwidth (the weight bytes it must stream) against a memcpy timed
  beside it (the streaming bound);
- weight-only int4 decode: torch's _weight_int4pack_mm_for_cpu (CPU's
  packed format) against the bf16 product of the same weight dequantised
  and CPU's own int4 op, at batch 1-16, with the int4 bytes' bandwidth;
- torch._int_mm against CPU's, with the share of the measured int8 dot
  product peak (independent VNNI / multiply-add chains);
- torch._scaled_mm (fp8 e4m3, row-wise scales) against neuron's bf16 mm.

Not a test: it reports times and ratios and never asserts on them.
    python benchmarks/bench_lowp.py [--write FILE | --write-host] [--quick]
"""

import argparse
import os
import statistics
import sys
import time

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


def _medians(fns, rounds, reps):
    """Median time of each callable over interleaved rounds; a name ending
    in "cpu" is timed as PyTorch CPU, the others on neuron."""
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            samples[k].append(run_all.timeit(f, "cpu" if k.endswith("cpu") else N, reps))
    return {k: med(v) for k, v in samples.items()}


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
        t = _medians(fns, rounds, COPIES)
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


def int4_decode_rows(rows, rounds):
    """Weight-only int4 (CPU's packed format, groups of 128, bf16 scales and
    zeros) against bf16 at batch 1-16, each side cycling through weights
    that together exceed the last-level cache, as decode_rows."""
    K = Nn = 4096
    GROUP, COPIES = 128, 8  # 64 MiB of int4, 256 MiB of bf16
    pack = torch.ops.aten._convert_weight_to_int4pack_for_cpu
    mm4 = torch.ops.aten._weight_int4pack_mm_for_cpu
    g = torch.Generator().manual_seed(2)
    q = [torch.randint(0, 16, (Nn, K), dtype=torch.int32, generator=g) for _ in range(COPIES)]
    sz = []
    for _ in range(COPIES):
        scale = torch.rand(K // GROUP, Nn, generator=g) / 64 + 1e-3
        zero = torch.randn(K // GROUP, Nn, generator=g) / 64
        sz.append(torch.stack([scale, zero], -1).to(torch.bfloat16))
    p4 = [pack(w, 2) for w in q]
    wb = []  # the same weights dequantised, as the bf16 baseline
    for w, s in zip(q, sz):
        sc = s[..., 0].float().repeat_interleave(GROUP, 0).t()
        ze = s[..., 1].float().repeat_interleave(GROUP, 0).t()
        wb.append(((w.float() - 8) * sc + ze).to(torch.bfloat16))
    p4n, szn, wbn = [x.to(N) for x in p4], [x.to(N) for x in sz], [x.to(N) for x in wb]
    memcpy = run_all.memcpy_anchor(K * Nn * 2)
    streamed = K * Nn / 2 + sz[0].numel() * 2  # nibbles plus scales and zeros
    for m in (1, 2, 4, 8, 16):
        x = torch.randn(m, K, generator=g).to(torch.bfloat16)
        xn = x.to(N)
        fns = {
            "int4 neuron": _cycle(mm4, [(xn, w, GROUP, s) for w, s in zip(p4n, szn)]),
            "bf16 neuron": _cycle(torch.nn.functional.linear, [(xn, w) for w in wbn]),
            "int4 cpu": _cycle(mm4, [(x, w, GROUP, s) for w, s in zip(p4, sz)]),
            "memcpy": memcpy,
        }
        t = _medians(fns, rounds, COPIES)
        bw = 2 * K * Nn * 2 / t["memcpy"]
        i4_bw = streamed / t["int4 neuron"]
        rows.append(
            (
                f"{Nn}x{K}, group {GROUP}, batch {m}",
                f"{t['int4 neuron'] * 1e3:.3f} ms",
                f"{t['bf16 neuron'] * 1e3:.3f} ms",
                f"{t['bf16 neuron'] / t['int4 neuron']:.2f}x",
                f"{t['int4 cpu'] * 1e3:.3f} ms ({t['int4 cpu'] / t['int4 neuron']:.2f}x)",
                f"{i4_bw / 1e9:.1f} GB/s ({100 * i4_bw / bw:.0f}% of memcpy's {bw / 1e9:.1f} GB/s)",
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


def model_decode_rows(rows, rounds):
    """Greedy decoding of a Llama-style model (random weights, about 150M
    parameters) in bf16 and quantized with TorchAO's Int8WeightOnlyConfig
    (what Transformers' TorchAoConfig applies), on neuron and on CPU;
    tokens/s and the weight bytes a token streams against memcpy."""
    import copy

    from torchao.quantization import Int8WeightOnlyConfig, quantize_
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=8,
        num_attention_heads=16,
        num_key_value_heads=8,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    base = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    params = sum(p.numel() for p in base.parameters())
    prompt = torch.randint(0, cfg.vocab_size, (1, 32), generator=torch.Generator().manual_seed(1))
    tok = 32
    memcpy = run_all.memcpy_anchor(256 << 20)  # past any last-level cache
    fns, bytes_per_token = {}, {}
    for kind in ("bf16", "int8"):
        for dev in (N, "cpu"):
            m = copy.deepcopy(base).to(dev)
            if kind == "int8":
                quantize_(m, Int8WeightOnlyConfig())
            streamed = run_all.streamed_weight_bytes(m) if kind == "bf16" else None
            if kind == "int8":  # int8 linear weights (1 byte) + everything else in bf16
                streamed = 0
                emb = m.get_input_embeddings().weight
                for p in m.parameters():
                    if p is emb:
                        continue
                    q = getattr(p, "qdata", None)
                    streamed += q.numel() if q is not None else p.numel() * p.element_size()
            bytes_per_token[kind] = streamed
            fns[f"{kind} {dev}"] = run_all.captured_decode(m, prompt, tok, dev)
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            samples[k].append(run_all.timeit(f, "cpu" if k.endswith("cpu") else N, 1))
    mc = [run_all.timeit(memcpy, N, 3) for _ in range(rounds)]
    bw = 2 * (256 << 20) / med(mc)
    t = {k: med(v) / (tok - 1) for k, v in samples.items()}  # seconds per decoded token
    for k in fns:
        kind = k.split()[0]
        gbs = bytes_per_token[kind] / t[k]
        rows.append(
            (
                f"Llama {params / 1e6:.0f}M, {k}",
                f"{1 / t[k]:.1f} tokens/s",
                f"{bytes_per_token[kind] / 2**20:.0f} MiB",
                f"{gbs / 1e9:.1f} GB/s ({100 * gbs / bw:.0f}% of memcpy {bw / 1e9:.1f} GB/s)",
            )
        )
    same = torch.equal(fns["int8 neuron"].tokens.cpu(), fns["int8 cpu"].tokens.cpu())
    rows.append(("int8 tokens: neuron equal to CPU", str(same), "", ""))


def float8_train_rows(rows, rounds):
    """One training step (forward, backward, AdamW) of a 2-layer MLP, bf16
    against TorchAO float8 training (tensorwise and rowwise recipes), on
    neuron; the same float8 step on CPU beside it."""
    import copy

    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    d, h, tokens = 1024, 4096, 2048
    torch.manual_seed(0)
    base = torch.nn.Sequential(
        torch.nn.Linear(d, h, bias=False), torch.nn.GELU(), torch.nn.Linear(h, d, bias=False)
    ).to(torch.bfloat16)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(tokens, d, generator=g).to(torch.bfloat16)

    def step_fn(model, dev):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        xd = x.to(dev)

        def step():
            opt.zero_grad(set_to_none=True)
            model(xd).float().pow(2).mean().backward()
            opt.step()

        return step

    fns, devs = {}, {}
    for name, recipe in (
        ("bf16", None),
        ("float8 tensorwise", "tensorwise"),
        ("float8 rowwise", "rowwise"),
    ):
        for dev in (N, "cpu"):
            if recipe is None and dev == "cpu":
                continue
            m = copy.deepcopy(base).to(dev)
            if recipe:
                m = convert_to_float8_training(
                    m, config=Float8LinearConfig.from_recipe_name(recipe)
                )
            fns[f"{name} {dev}"] = step_fn(m, dev)
            devs[f"{name} {dev}"] = dev
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            samples[k].append(run_all.timeit(f, devs[k], 2))
    t = {k: med(v) for k, v in samples.items()}
    for k in fns:
        rows.append(
            (
                f"MLP {d}-{h}-{d}, {tokens} tokens, {k}",
                f"{t[k] * 1e3:.1f} ms",
                f"{t['bf16 neuron'] / t[k]:.2f}x" if k.endswith(N) else "",
            )
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write")
    ap.add_argument(
        "--write-host",
        action="store_true",
        help="write docs/benchmarks/hosts/<CPU model>-lowp.md (results per CPU model)",
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--sections",
        default="int8,int4,int_mm,scaled_mm,float8_train,model_decode",
        help="comma-separated subset of the tables to run",
    )
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
        f"Generated by `python benchmarks/bench_lowp.py {' '.join(sys.argv[1:])}` "
        f"on {time.strftime('%Y-%m-%d', time.gmtime())}. Neuron and PyTorch CPU run side by side "
        "in one process on the same threads, in alternating rounds (medians); not a test.",
        "",
        f"{_C._num_threads()} threads; flags: {' '.join(run_all.cpu_flags())}; int8 peak "
        f"({kind}: independent chains, all threads): {peak:.0f} GOPS",
        "",
    ]
    sections = [
        (
            "int8",
            lambda rows: decode_rows(rows, rounds),
            "Weight-only int8 decode (torch._weight_int8pack_mm, bf16 activations) against the\n"
            "bf16 linear with the same weight, each call streaming its weight from memory:",
            "weight, batch | int8 neuron | bf16 neuron | int8 speed-up | int8 CPU (CPU / neuron) "
            "| bf16 CPU | weight bytes streamed (share of memcpy)",
        ),
        (
            "int4",
            lambda rows: int4_decode_rows(rows, rounds),
            "Weight-only int4 decode (torch._weight_int4pack_mm_for_cpu in CPU's packed format, "
            "bf16\nactivations, scales and zeros) against the bf16 linear with the same "
            "(dequantised) weight:",
            "weight, batch | int4 neuron | bf16 neuron | int4 speed-up | int4 CPU (CPU / neuron) "
            "| int4 bytes streamed (share of memcpy)",
        ),
        (
            "int_mm",
            lambda rows: int_mm_rows(rows, rounds, peak),
            "",
            "case | neuron | CPU | CPU / neuron | rate",
        ),
        (
            "scaled_mm",
            lambda rows: scaled_mm_rows(rows, rounds),
            "",
            "case | neuron | CPU (CPU / neuron) | bf16 mm on neuron (bf16 / fp8)",
        ),
        (
            "float8_train",
            lambda rows: float8_train_rows(rows, rounds),
            "Training step (forward, backward, AdamW):",
            "case | step | bf16 neuron / this (neuron)",
        ),
        (
            "model_decode",
            lambda rows: model_decode_rows(rows, rounds),
            "Greedy decoding, 32 tokens after a 32-token prompt, static KV cache (neuron: one\n"
            "NeuronGraph replay per token):",
            "model, weights, device | decode | weight bytes per token | streamed",
        ),
    ]
    wanted = args.sections.split(",")
    unknown = sorted(set(wanted) - {name for name, *_ in sections})
    if unknown:
        ap.error(
            f"unknown section(s) {', '.join(unknown)}; known: {', '.join(n for n, *_ in sections)}"
        )
    for name, fill, intro, header in sections:
        if name not in wanted:
            continue
        rows = []
        fill(rows)
        if intro:
            lines += intro.split("\n") + [""]
        columns = header.count("|") + 1
        lines += ["| " + header + " |", "|" + "---|" * columns]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_host:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        args.write = os.path.join(
            root, "docs", "benchmarks", "hosts", run_all.host_slug() + "-lowp.md"
        )
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
