"""The kernel-library benchmark suite (issue: native C kernel library): every
ratio the issue asks for, neuron vs PyTorch CPU eager, measured side by side
in one process on the same threads (interleaved rounds, medians), and
written as one results table.

Not a test: it reports ratios and never asserts on time.
    python benchmarks/run_all.py [--write FILE | --write-host] [--quick]
--write-host writes docs/benchmarks/hosts/<CPU model>.md: one file per CPU
model the project has run on (docs/benchmarks/results.md lists them).
"""

import argparse
import copy
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_neuronx import _C

HERE = os.path.dirname(os.path.abspath(__file__))


def sync(dev):
    if dev != "cpu":  # "neuron", "memcpy" and the neuron variants of compile_rows
        torch.neuron.synchronize()


# PyTorch CPU's OpenMP workers keep spinning for a few milliseconds after a
# parallel region; work started in that window (on neuron) finds its cores
# taken and measures up to 25% slow. Each timing starts after a settle pause
# (not timed), so neither side runs in the other's idle spin.
SETTLE_S = 0.03
# After a pause, PyTorch CPU's first parallel regions can stall: the kernel
# may wake its OpenMP worker on the CPU of the thread that woke it, and the
# two spin-wait there in turn until the load balancer separates them (on the
# 2-core hosts here: 512x512 mul_ at 200-1000 us per call for ~10 ms, against
# 15 us once settled; one warm-up call is not enough). So each side runs its
# callable, untimed, for WARM_S after the pause before the timed calls:
# both are measured warm, as a loop of back-to-back steps runs.
WARM_S = 0.02


def timeit(fn, dev, reps, settle=SETTLE_S):
    sync(dev)
    time.sleep(settle)
    t = time.perf_counter()
    while True:
        fn()
        sync(dev)
        if time.perf_counter() - t >= WARM_S:
            break
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    sync(dev)
    return (time.perf_counter() - t) / reps


def interleaved(fns, rounds=5, reps=3, warmup=1, settle=SETTLE_S):
    """Seconds per call of each callable in `fns` (device name or label ->
    callable), one sample per round; the rounds alternate between them."""
    for d, f in fns.items():
        if warmup:
            timeit(f, d, warmup, settle)  # warm-up: caches, lazy state
    samples = {d: [] for d in fns}
    for _ in range(rounds):
        for d, f in fns.items():
            samples[d].append(timeit(f, d, reps, settle))
    return samples


def side_by_side(make, rounds=5, reps=3, warmup=1):
    """Median seconds per call for each device; the rounds alternate."""
    samples = interleaved({d: make(d) for d in ("neuron", "cpu")}, rounds, reps, warmup)
    return {d: statistics.median(v) for d, v in samples.items()}


def _cpuinfo():
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                fields[k.strip()] = v.strip()
    except OSError:
        pass
    return fields


# the /proc/cpuinfo flags that decide which kernels run or how fast the peers are
_FLAGS_THAT_MATTER = (
    "avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 "
    "avx_vnni amx_tile amx_bf16 amx_int8 amx_fp16"
).split()


def cpu_name():
    """The CPU model as the host names it, with family/model/stepping (cloud
    hosts often report only "AMD EPYC" or "Intel Xeon Processor")."""
    info = _cpuinfo()
    name = info.get("model name") or platform.processor() or "unknown"
    if "cpu family" in info:
        name += (
            f" (family {info['cpu family']}, model {info.get('model', '?')}, "
            f"stepping {info.get('stepping', '?')})"
        )
    return name


def cpu_flags():
    """The flags of _FLAGS_THAT_MATTER this CPU has, in that order."""
    have = set(_cpuinfo().get("flags", "").split())
    return [f for f in _FLAGS_THAT_MATTER if f in have]


def host_slug():
    """A file name for this CPU model: vendor and model name, family and model."""
    info = _cpuinfo()
    words = (info.get("model name") or platform.processor() or "unknown").lower()
    slug = "-".join("".join(c if c.isalnum() else " " for c in words).split())
    if "cpu family" in info:
        slug += f"-f{info['cpu family']}-m{info.get('model', '0')}"
    return slug


class Peaks:
    """The machine's compute limits, measured by instruction throughput on the
    kernel threads (_C._measure_peak: 12 independent accumulator chains per
    thread, all threads at once): the best of three runs per instruction."""

    def __init__(self):
        isa = _C._isa()
        self.fp32_kind = {"avx512": "fp32-fma512", "avx2": "fp32-fma256"}.get(isa)
        # the bf16 dot kernel belongs to the avx512 variant (TORCH_NEURONX_ISA
        # may force another): it sets the bf16 peak only where it runs
        has_dot = isa == "avx512" and "avx512-bf16" in _C._cpu_features()
        self.bf16_kind = "bf16-dot512" if has_dot else None
        # where bf16 GEMMs run on AMX tiles, their peak is the tiles'
        if _C._bf16_gemm_kernel() == "amx":
            self.bf16_kind = "bf16-amx"
        self.fp32 = self._best(self.fp32_kind)
        # without a bf16 dot instruction bf16 GEMMs run on fp32 FMAs
        self.bf16 = self._best(self.bf16_kind) if self.bf16_kind else self.fp32

    @staticmethod
    def _best(kind):
        return max(_C._measure_peak(kind) for _ in range(3)) / 1e9 if kind else 0.0

    def pct(self, gflops, dtype):
        peak = self.fp32 if dtype == torch.float32 else self.bf16
        return f"{100 * gflops / peak:.0f}%" if peak else "n/a"

    def describe(self):
        lines = [
            f"- fp32 peak: {self.fp32:.0f} GFLOPS ({self.fp32_kind}: independent FMA chains, "
            "all threads at once)"
            if self.fp32_kind
            else "- fp32 peak: not measured (no vector FMA ISA)"
        ]
        if self.bf16_kind:
            what = (
                "AMX tile products" if self.bf16_kind == "bf16-amx" else "AVX512-BF16 dot-product"
            )
            lines.append(
                f"- bf16 peak: {self.bf16:.0f} GFLOPS ({self.bf16_kind}: independent {what} "
                f"chains, {self.bf16 / max(self.fp32, 1e-9):.2f}x the fp32 peak)"
            )
        else:
            lines.append("- bf16 peak: the fp32 peak (no bf16 dot-product instruction on this CPU)")
        amx = _C._amx_status()
        if amx == "in use":
            amx = "in use, bf16 GEMMs run on them"
            dot = self._best("bf16-dot512")
            if dot:  # the dot-product peak beside it: what the fallback path could reach
                amx += f"; the AVX512-BF16 dot-product peak beside them: {dot:.0f} GFLOPS"
        lines.append(f"- AMX bf16 tiles: {amx}")
        return lines


def openblas():
    """numpy's bundled OpenBLAS on the benchmark's thread count, or None
    (label, matmul function); the second GEMM anchor beside PyTorch CPU."""
    try:
        import ctypes
        import glob

        import numpy as np
    except ImportError:
        return None
    threads = torch.get_num_threads()
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*"))
    for path in libs:
        lib = ctypes.CDLL(path)  # the handle numpy already loaded
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, name):
                getattr(lib, name)(threads)
                return f"OpenBLAS (numpy {np.__version__}, {threads} threads)", np.matmul
    return None


GEMM_SHAPES = [  # m, k, n, label
    (2048, 2048, 2048, "square"),
    (512, 2048, 2048, "model: 512x2048 @ 2048x2048"),
    (2048, 512, 2048, "model: 2048x512 @ 512x2048"),
    (1024, 512, 1344, "model: Llama MLP up, 1024 tokens"),
    (1024, 1344, 512, "model: Llama MLP down, 1024 tokens"),
    (256, 512, 1536, "skinny: small-batch training, 256 tokens"),
]


def gflops(x):
    """Whole GFLOPS, or two significant digits below 10 (not a bare 0)."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def gemm_rows(rows, peaks, quick):
    anchor = openblas()
    for dtype in (torch.float32, torch.bfloat16):
        name = "fp32" if dtype == torch.float32 else "bf16"
        for m, k, n, label in GEMM_SHAPES[:3] if quick else GEMM_SHAPES:
            g = torch.Generator().manual_seed(0)
            a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
            fns = {}
            for d in ("neuron", "cpu"):
                x, y = a.to(d, dtype), b.to(d, dtype)
                fns[d] = lambda x=x, y=y: x @ y
            if anchor and dtype == torch.float32:
                xa, ya = a.numpy(), b.numpy()
                fns["openblas"] = lambda x=xa, y=ya: anchor[1](x, y)
            # On a CPU without bf16 instructions PyTorch's bf16 GEMM runs at
            # 0.3-2 GFLOPS: one call of up to a minute. There one sample per
            # round and three rounds (the probe call is the warm-up) keep the
            # section in minutes; the rows stay interleaved.
            t0 = time.perf_counter()
            fns["cpu"]()
            slow = time.perf_counter() - t0 > 1.0
            if slow:  # the others' warm-up
                for d, f in fns.items():
                    if d != "cpu":
                        timeit(f, d, 1, 0.0)
            # OpenBLAS's idle workers spin far longer than OpenMP's (about
            # 2^28 cycles): a longer pause keeps them off the next timing
            t = interleaved(
                fns,
                rounds=3 if quick or slow else 5,
                reps=1 if slow else 3,
                warmup=0 if slow else 1,
                settle=0.3,
            )
            fl = 2.0 * m * n * k / 1e9
            gf = {d: fl / statistics.median(v) for d, v in t.items()}
            note = f"{peaks.pct(gf['neuron'], dtype)} of {name} peak"
            if "openblas" in gf:
                note += (
                    f"; OpenBLAS {gf['openblas']:.0f} GFLOPS ({gf['neuron'] / gf['openblas']:.2f}x)"
                )
            rows.append(
                (
                    f"{name} GEMM {m}x{k}x{n} ({label})",
                    f"{gflops(gf['neuron'])} GFLOPS",
                    f"{gflops(gf['cpu'])} GFLOPS",
                    f"{gf['neuron'] / gf['cpu']:.2f}x",
                    note,
                )
            )
    # decode: one token against a transposed weight, bound by streaming the weight
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 4096, generator=g), torch.randn(4096, 4096, generator=g)
    fns = {d: (lambda a=x.to(d), b=w.to(d): a @ b.t()) for d in ("neuron", "cpu")}
    fns["memcpy"] = memcpy_anchor(w.numel() * 4)
    t = {d: statistics.median(v) for d, v in interleaved(fns, rounds=5, reps=20).items()}
    mc = 2 * w.numel() * 4 / t["memcpy"] / 1e9  # read + write traffic
    gbs = {d: w.numel() * 4 / t[d] / 1e9 for d in ("neuron", "cpu")}
    rows.append(
        (
            "fp32 GEMV 1x4096 @ (4096x4096)^T (decode)",
            f"{gbs['neuron']:.1f} GB/s of weights",
            f"{gbs['cpu']:.1f} GB/s",
            f"{t['cpu'] / t['neuron']:.2f}x",
            f"{100 * gbs['neuron'] / mc:.0f}% of memcpy's {mc:.1f} GB/s (read + write traffic)",
        )
    )


def sdpa_rows(rows, quick):
    L = 512 if quick else 1024
    g = torch.Generator().manual_seed(2)
    qkv = [torch.randn(1, 8, L, 64, generator=g) for _ in range(3)]

    def step(d, backend=None):
        ts = [t.to(d).requires_grad_() for t in qkv]

        def run():
            if backend is None:
                o = F.scaled_dot_product_attention(*ts, is_causal=True)
            else:
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(*ts, is_causal=True)
            o.sum().backward()

        return run

    t = side_by_side(step, rounds=3, reps=1)
    t_math = timeit(step("neuron", SDPBackend.MATH), "neuron", 2)
    rows.append(
        (
            f"SDPA fwd+bwd causal, 8 heads, L={L}, E=64",
            f"{t['neuron'] * 1e3:.1f} ms",
            f"{t['cpu'] * 1e3:.1f} ms",
            f"{t['cpu'] / t['neuron']:.2f}x",
            f"{t_math / t['neuron']:.2f}x the unfused math path on neuron",
        )
    )


def memcpy_anchor(nbytes):
    """A plain libc memcpy of `nbytes` split over the kernel threads (no
    kernel of ours), run as a device task: the bandwidth the memory-bound
    rows are compared with.
    The buffers are device memory, so the anchor streams through the same
    2 MiB pages the kernels do (host buffers of 4 KiB pages copy ~30% slower
    here, which would flatter the kernels). Both are written first: an
    untouched source maps the shared zero page, which reads from cache."""
    src, dst = torch.ones(nbytes // 4, device="neuron"), torch.zeros(nbytes // 4, device="neuron")
    torch.neuron.synchronize()

    def run():  # on the current stream: the kernels' threads and CPUs; timed with a sync
        _C._memcpy_on_stream(dst.data_ptr(), src.data_ptr(), nbytes)

    return run


def memory_rows(rows):
    n = 16 * 1024 * 1024  # 64 MiB per fp32 tensor
    memcpy = memcpy_anchor(4 * n)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    cases = [
        ("add (a + b)", 3, lambda d: lambda a=x.to(d), b=y.to(d): a + b),
        ("copy (clone)", 2, lambda d: lambda a=x.to(d): a.clone()),
        (
            "layer_norm (4096 rows x 4096)",
            2,
            lambda d: lambda a=x.view(4096, 4096).to(d): F.layer_norm(a, (4096,)),
        ),
        (
            "softmax (4096 rows x 4096)",
            2,
            lambda d: lambda a=x.view(4096, 4096).to(d): a.softmax(-1),
        ),
    ]
    for name, streams, make in cases:
        samples = interleaved(
            {"neuron": make("neuron"), "cpu": make("cpu"), "memcpy": memcpy}, rounds=9, reps=3
        )
        t = {d: statistics.median(v) for d, v in samples.items()}
        gbs = streams * 4 * n / t["neuron"] / 1e9
        bw = 2 * 4 * n / t["memcpy"] / 1e9
        # The host's bandwidth drifts with its other tenants (memcpy alone
        # ranges 21-48 GB/s second to second here), so two shares: the best
        # round of each (the machine undisturbed), and the median over rounds
        # of the kernel against the memcpy timed next to it.
        best = streams * min(samples["memcpy"]) / (2 * min(samples["neuron"]))
        paired = statistics.median(
            streams * tm / (2 * tn) for tn, tm in zip(samples["neuron"], samples["memcpy"])
        )
        rows.append(
            (
                f"{name}, fp32 64 MiB",
                f"{gbs:.1f} GB/s",
                f"{streams * 4 * n / t['cpu'] / 1e9:.1f} GB/s",
                f"{t['cpu'] / t['neuron']:.2f}x",
                f"{100 * best:.0f}% of memcpy, best rounds ({100 * paired:.0f}% paired "
                f"median; memcpy median {bw:.1f} GB/s)",
            )
        )


def activation_rows(rows, quick):
    """The MLP activations of GPT-2/ViT (GELU, both forms, forward and
    backward) and a transcendental unary (tanh) on a 2048x4096 (32 MiB)
    activation. Outputs go to preallocated tensors (out=): a fresh 32 MiB CPU
    tensor per call would time the host's page faults, not the kernel."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(512 if quick else 2048, 4096, generator=g)
    gy = torch.randn(x.shape, generator=g)

    def gelu(approx):
        def run(a, b, o1, o2):
            torch._C._nn.gelu(a, approximate=approx, out=o1)
            torch.ops.aten.gelu_backward.grad_input(b, a, approximate=approx, grad_input=o2)

        return run

    cases = [
        ("GELU fwd+bwd (exact, erf)", gelu("none")),
        ("GELU fwd+bwd (tanh)", gelu("tanh")),
        ("tanh", lambda a, b, o1, o2: torch.tanh(a, out=o1)),
    ]
    for name, f in cases:

        def make(d, f=f):
            a, b = x.to(d), gy.to(d)
            o1, o2 = torch.empty_like(a), torch.empty_like(a)
            return lambda: f(a, b, o1, o2)

        t = side_by_side(make, rounds=5, reps=3)
        rows.append(
            (
                f"{name}, fp32 {x.shape[0]}x{x.shape[1]}",
                f"{t['neuron'] * 1e3:.2f} ms",
                f"{t['cpu'] * 1e3:.2f} ms",
                f"{t['cpu'] / t['neuron']:.2f}x",
                "speed ratio neuron/CPU (outputs preallocated)",
            )
        )


def cpu_step_peak_bytes(model, opt, ids):
    """Peak bytes the CPU step allocates above its start, from the profiler's
    allocation events (CPU has no allocator statistics)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    cur = peak = 0
    events = [
        e
        for e in p.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    ]
    for e in sorted(events, key=lambda e: e.start_ns()):
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def streamed_weight_bytes(model):
    """Bytes of the weights one decoded token reads: every parameter but the
    input embedding's table (one row of it is read), unless the output
    layer shares it."""
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings()
    tied = out is not None and out.weight.data_ptr() == emb.data_ptr()
    return sum(p.numel() * p.element_size() for p in model.parameters() if tied or p is not emb)


def captured_decode(model, prompt, tok, device):
    """A callable greedy-decoding `tok` tokens after `prompt` with a static
    KV cache; on neuron each token after the first is one replay of a
    NeuronGraph holding the forward, the argmax and the cache update (the
    graph is captured on the first call). The prompt is prefilled once,
    here; each call restores the cache as the prefill left it (a copy of
    under 1 MiB) and decodes, so the time is the decoding's. `.tokens`
    holds the last result."""
    from transformers import StaticCache

    n = prompt.shape[1]
    cache = StaticCache(config=model.config, max_cache_len=n + tok)
    with torch.no_grad():
        logits = model(
            input_ids=prompt.to(device),
            past_key_values=cache,
            cache_position=torch.arange(n, device=device),
        ).logits
    first = logits[:, -1].argmax(-1, keepdim=True)
    state = [
        t for layer in cache.layers for t in (layer.keys, layer.values, layer.cumulative_length)
    ]
    saved = [t.clone() for t in state]
    last = torch.zeros(1, 1, dtype=torch.long, device=device)
    pos = torch.zeros(1, dtype=torch.long, device=device)
    i = torch.zeros(1, dtype=torch.long, device=device)
    out = torch.zeros(tok, dtype=torch.long, device=device)
    graph = [None]

    @torch.no_grad()
    def step():
        logits = model(input_ids=last, past_key_values=cache, cache_position=pos).logits
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        out.index_copy_(0, i, nxt.view(1))
        last.copy_(nxt)
        pos.add_(1)
        i.add_(1)

    @torch.no_grad()
    def run():
        for t, s in zip(state, saved):
            t.copy_(s)
        last.copy_(first)
        out[:1] = first.view(1)
        pos.fill_(n)
        i.fill_(1)
        if device != "neuron":
            for _ in range(tok - 1):
                step()
            return
        todo = tok - 1
        if graph[0] is None:  # one step eagerly (warm-up), then capture it
            step()
            todo -= 1
            g = torch.neuron.NeuronGraph()
            with torch.neuron.graph(g):
                step()  # (recorded, not run)
            graph[0] = g
        for _ in range(todo):
            graph[0].replay()

    run.tokens = out
    return run


def model_rows(rows, quick):
    sys.path.insert(0, HERE)
    import bench_train_step as bts

    args = argparse.Namespace(layers=4, d_model=512, seq=128 if quick else 256, batch=4, vocab=8000)
    base = bts.build(args)
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1)
    )
    models = {d: copy.deepcopy(base).to(d) for d in ("neuron", "cpu")}
    opts = {d: torch.optim.AdamW(models[d].parameters(), lr=1e-4) for d in models}
    # two warm-up steps: the first allocates the optimizer state
    t = side_by_side(
        lambda d: lambda: bts.train_step(models[d], opts[d], ids.to(d)),
        rounds=2 if quick else 5,
        reps=1,
        warmup=2,
    )
    rows.append(
        (
            f"train step, Llama-style 4 layers d512 seq {args.seq} batch 4 (fwd+bwd+AdamW)",
            f"{t['neuron'] * 1e3:.0f} ms",
            f"{t['cpu'] * 1e3:.0f} ms",
            f"{t['cpu'] / t['neuron']:.2f}x",
            "speed ratio neuron/CPU",
        )
    )

    # the same step under bf16 autocast (fp32 master weights and AdamW state)
    def autocast_step(d):
        def run():
            with torch.autocast(d, dtype=torch.bfloat16):
                bts.train_step(models[d], opts[d], ids.to(d))

        return run

    t16 = side_by_side(autocast_step, rounds=2 if quick else 5, reps=1, warmup=1)
    rows.append(
        (
            "train step, same model, bf16 autocast",
            f"{t16['neuron'] * 1e3:.0f} ms",
            f"{t16['cpu'] * 1e3:.0f} ms",
            f"{t16['cpu'] / t16['neuron']:.2f}x",
            f"{t['neuron'] / t16['neuron']:.2f}x neuron's fp32 step",
        )
    )
    # peak memory of the step above its starting point
    torch.neuron.synchronize()
    start = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    bts.train_step(models["neuron"], opts["neuron"], ids.to("neuron"))
    torch.neuron.synchronize()
    neuron_peak = torch.neuron.max_memory_allocated() - start
    cpu_peak = cpu_step_peak_bytes(models["cpu"], opts["cpu"], ids)
    rows.append(
        (
            "train step peak memory above its start",
            f"{neuron_peak / 2**20:.0f} MiB",
            f"{cpu_peak / 2**20:.0f} MiB",
            f"{neuron_peak / max(cpu_peak, 1):.2f}x",
            "memory ratio neuron/CPU (lower is better)",
        )
    )
    prompt = ids[:1, :16]
    tok = 16 if quick else 32

    def gen(d):
        m = models[d].eval()
        return lambda: m.generate(
            prompt.to(d), max_new_tokens=tok, min_new_tokens=tok, do_sample=False
        )

    fns = {d: gen(d) for d in ("neuron", "cpu")}
    wbytes = streamed_weight_bytes(base)
    fns["memcpy"] = memcpy_anchor(wbytes // 4 * 4)
    t = {d: statistics.median(v) for d, v in interleaved(fns, 2 if quick else 3, 1).items()}
    # every token streams every weight once (but the input embedding's, of
    # which it reads one row): the bound is those weights at memcpy's
    # bandwidth (read + write traffic), per token
    bound = t["memcpy"] / 2
    rows.append(
        (
            "greedy decode, same model, batch 1",
            f"{tok / t['neuron']:.1f} tok/s",
            f"{tok / t['cpu']:.1f} tok/s",
            f"{t['cpu'] / t['neuron']:.2f}x",
            f"{1e3 * t['neuron'] / tok:.2f} ms/token; {100 * bound * tok / t['neuron']:.0f}% of "
            f"the weight-streaming bound ({wbytes / 2**20:.0f} MiB at memcpy speed: "
            f"{1e3 * bound:.2f} ms)",
        )
    )

    # The same model decoding with one NeuronGraph replay per token (as
    # gpt-fast does with CUDA graphs): a static KV cache, and the forward,
    # the argmax and the cache update captured once, so no Python, dispatch
    # or host sync runs between tokens. PyTorch CPU runs the same loop
    # eagerly (it has no graphs). Timed: the decoding after a prefill done
    # once (captured_decode). fp32 weights, then bf16 ones (the model cast,
    # as for bf16 serving; its bound is half the bytes). fp32 tokens must
    # equal CPU's; bf16 ones part where the two round differently near a
    # tie (the note says where).
    memcpy = fns["memcpy"]
    for dtype in (torch.float32, torch.bfloat16):
        dev_models = {
            d: models[d] if dtype == torch.float32 else copy.deepcopy(models[d]).to(dtype)
            for d in models
        }
        fns = {d: captured_decode(dev_models[d], prompt, tok, d) for d in dev_models}
        fns["memcpy"] = memcpy if dtype == torch.float32 else memcpy_anchor(wbytes // 8 * 4)
        t = {d: statistics.median(v) for d, v in interleaved(fns, 2 if quick else 3, 1).items()}
        got, want = fns["neuron"].tokens.cpu(), fns["cpu"].tokens
        same = int((got != want).nonzero()[0, 0]) if (got != want).any() else tok
        if dtype == torch.float32 and same < tok:
            raise RuntimeError("captured fp32 decoding on neuron made other tokens than CPU")
        bound = t["memcpy"] / 2
        rows.append(
            (
                f"greedy decode, same model, {str(dtype)[6:]} weights, batch 1, "
                "one NeuronGraph replay per token",
                f"{tok / t['neuron']:.1f} tok/s",
                f"{tok / t['cpu']:.1f} tok/s (eager loop)",
                f"{t['cpu'] / t['neuron']:.2f}x",
                f"{1e3 * t['neuron'] / tok:.2f} ms/token; "
                f"{100 * bound * tok / t['neuron']:.0f}% of the weight-streaming bound "
                f"({1e3 * bound:.2f} ms, measured beside it); the first {same} of {tok} "
                "tokens equal CPU's",
            )
        )

    # the same loop on a d64 model, whose kernels take next to nothing: what
    # it measures is the host path of HF generate's ~900 ops per token
    tiny_args = argparse.Namespace(layers=4, d_model=64, seq=256, batch=1, vocab=128)
    tiny = bts.build(tiny_args).eval()
    tiny_models = {d: copy.deepcopy(tiny).to(d) for d in ("neuron", "cpu")}
    tiny_prompt = prompt % tiny_args.vocab

    def gen_tiny(d):
        return lambda: tiny_models[d].generate(
            tiny_prompt.to(d), max_new_tokens=tok, min_new_tokens=tok, do_sample=False
        )

    samples = interleaved({d: gen_tiny(d) for d in tiny_models}, 3 if quick else 9, 1)
    ratio = statistics.median(a / b for a, b in zip(samples["cpu"], samples["neuron"]))
    t = {d: statistics.median(v) for d, v in samples.items()}
    rows.append(
        (
            "greedy decode, d64 Llama (4 layers, vocab 128), batch 1: host-bound",
            f"{1e3 * t['neuron'] / tok:.2f} ms/token",
            f"{1e3 * t['cpu'] / tok:.2f} ms/token",
            f"{ratio:.2f}x",
            "speed ratio neuron/CPU, median of per-round ratios (dispatch and launch cost per op)",
        )
    )


def compile_rows(rows, quick):
    """torch.compile (Inductor) of the Llama-style model: the training step
    and greedy decoding compiled on neuron next to compiled on the CPU, and
    compiled next to eager on neuron. Compile times are cold (the FX graph
    cache is off for these rows)."""
    import torch._dynamo
    import torch._inductor.config as inductor_config

    sys.path.insert(0, HERE)
    import bench_train_step as bts

    args = argparse.Namespace(layers=4, d_model=512, seq=128 if quick else 256, batch=4, vocab=8000)
    base = bts.build(args)
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1)
    )
    torch._dynamo.reset()
    with inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False):
        models, opts, compiled, compile_s = {}, {}, {}, {}
        for d in ("neuron", "cpu"):
            models[d] = copy.deepcopy(base).to(d)
            opts[d] = torch.optim.AdamW(models[d].parameters(), lr=1e-4)
            compiled[d] = torch.compile(models[d])
            sync(d)
            t0 = time.perf_counter()
            bts.train_step(compiled[d], opts[d], ids.to(d))  # compiles forward and backward
            sync(d)
            compile_s[d] = time.perf_counter() - t0
        eager = {"neuron": models["neuron"]}
        samples = interleaved(
            {
                "neuron": lambda: bts.train_step(
                    compiled["neuron"], opts["neuron"], ids.to("neuron")
                ),
                "cpu": lambda: bts.train_step(compiled["cpu"], opts["cpu"], ids),
                "eager": lambda: bts.train_step(eager["neuron"], opts["neuron"], ids.to("neuron")),
            },
            rounds=2 if quick else 5,
            reps=1,
            warmup=1,
        )
    t = {d: statistics.median(v) for d, v in samples.items()}
    name = f"Llama-style 4 layers d512 seq {args.seq} batch 4"
    rows.append(
        (
            f"train step compiled ({name}; fwd+bwd compiled, AdamW eager)",
            f"{t['neuron'] * 1e3:.0f} ms",
            f"{t['cpu'] * 1e3:.0f} ms (Inductor)",
            f"{t['cpu'] / t['neuron']:.2f}x",
            "speed ratio neuron/CPU, both compiled",
        )
    )
    rows.append(
        (
            "train step: compiled vs eager on neuron",
            f"{t['neuron'] * 1e3:.0f} ms compiled",
            f"{t['eager'] * 1e3:.0f} ms eager (neuron)",
            f"{t['eager'] / t['neuron']:.2f}x",
            "speed ratio compiled/eager on neuron",
        )
    )
    rows.append(
        (
            "compile time of the train step (first step, cold)",
            f"{compile_s['neuron']:.1f} s",
            f"{compile_s['cpu']:.1f} s",
            f"{compile_s['cpu'] / compile_s['neuron']:.2f}x",
            "CPU Inductor's time / neuron's",
        )
    )
    # Greedy decoding at batch 1, compiled as Transformers recommends: a
    # static KV cache (fixed shapes; the dynamic cache grows every token and
    # recompiles until Dynamo's limit) and the forward compiled. Eager uses
    # the default dynamic cache.
    prompt = ids[:1, :16]
    tok = 16 if quick else 32
    torch._dynamo.reset()
    gens = {}
    for label, d, mode in (
        ("neuron", "neuron", None),
        ("cpu", "cpu", None),
        ("eager", "neuron", "eager"),
        ("reduce-overhead", "neuron", "reduce-overhead"),
    ):
        m = copy.deepcopy(base).to(d).eval()
        extra = {}
        if mode != "eager":
            m.forward = torch.compile(m.forward, mode=mode)
            extra = {"cache_implementation": "static"}

        def gen(m=m, d=d, extra=extra):
            return m.generate(
                prompt.to(d), max_new_tokens=tok, min_new_tokens=tok, do_sample=False, **extra
            )

        gens[label] = gen
    with inductor_config.patch(fx_graph_cache=False):
        samples = interleaved(gens, rounds=2 if quick else 3, reps=1, warmup=1)
    t = {d: statistics.median(v) for d, v in samples.items()}
    rows.append(
        (
            "greedy decode compiled (forward, static KV cache), batch 1",
            f"{tok / t['neuron']:.1f} tok/s",
            f"{tok / t['cpu']:.1f} tok/s (Inductor)",
            f"{t['cpu'] / t['neuron']:.2f}x",
            "speed ratio neuron/CPU, both compiled",
        )
    )
    rows.append(
        (
            "greedy decode: compiled and reduce-overhead vs eager on neuron",
            f"{tok / t['neuron']:.1f} / {tok / t['reduce-overhead']:.1f} tok/s",
            f"{tok / t['eager']:.1f} tok/s eager (neuron)",
            f"{t['eager'] / t['neuron']:.2f}x / {t['eager'] / t['reduce-overhead']:.2f}x",
            "speed ratio compiled/eager, reduce-overhead/eager (neuron)",
        )
    )


def graph_rows(rows, quick):
    """Launch overhead at batch 1: a chain of small ops (8 x Linear 256 +
    GELU) eager, compiled, and replayed from a NeuronGraph capture, next to
    PyTorch CPU eager and compiled."""
    import torch._dynamo

    torch.manual_seed(0)
    base = torch.nn.Sequential(
        *[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU()) for _ in range(8)]
    ).eval()
    x = torch.randn(1, 256)
    m = {d: copy.deepcopy(base).to(d) for d in ("neuron", "cpu")}
    xs = {d: x.to(d) for d in m}
    torch._dynamo.reset()
    compiled = {d: torch.compile(m[d]) for d in m}
    with torch.no_grad():
        for d in m:
            compiled[d](xs[d])
        m["neuron"](xs["neuron"])
        g = torch.neuron.NeuronGraph()
        with torch.neuron.graph(g):
            m["neuron"](xs["neuron"])
        reps = 50 if quick else 200
        samples = interleaved(
            {
                "neuron": lambda: m["neuron"](xs["neuron"]),
                "compiled": lambda: compiled["neuron"](xs["neuron"]),
                "graph": g.replay,
                "cpu": lambda: m["cpu"](xs["cpu"]),
                "cpu-compiled": lambda: compiled["cpu"](xs["cpu"]),
            },
            rounds=3 if quick else 5,
            reps=reps,
        )
    t = {d: statistics.median(v) for d, v in samples.items()}
    us = {d: f"{v * 1e6:.0f} us" for d, v in t.items()}
    rows.append(
        (
            "8 x (Linear 256 + GELU), batch 1: eager / compiled / NeuronGraph replay",
            f"{us['neuron']} / {us['compiled']} / {us['graph']}",
            f"{us['cpu']} / {us['cpu-compiled']} (eager / compiled)",
            f"{t['cpu'] / t['graph']:.2f}x",
            "CPU eager / neuron replay; replay is "
            f"{t['neuron'] / t['graph']:.1f}x neuron eager, {t['compiled'] / t['graph']:.1f}x compiled",
        )
    )


def reduction_rows(rows, quick):
    """Reductions (kernels/reduce.c: contiguous runs, chunked full
    reductions, column sums) and fp16 element-wise (F16C blocks) on
    4M elements; element-wise outputs preallocated (out=, copy_) as in
    activation_rows. 40 calls a timing: calls of 0.2-1 ms back to back, as
    in a training step (with 5, PyTorch CPU's wake-up after the settle
    pause dominated its time: up to 10x slower per call)."""
    n = (1 << 20) if quick else (1 << 22)
    g = torch.Generator().manual_seed(7)
    base, other = torch.randn(n, generator=g), torch.randn(n, generator=g)
    side = 1 << (n.bit_length() // 2)  # a square of n elements
    cases = []
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        name = str(dt).replace("torch.", "")
        cases += [
            (f"sum (all {n >> 20}M), {name}", dt, lambda a, b, o, o32: a.sum()),
            (f"amax (all {n >> 20}M), {name}", dt, lambda a, b, o, o32: a.amax()),
            (
                f"sum(-1) [{side}, {side}], {name}",
                dt,
                lambda a, b, o, o32: a.view(side, -1).sum(-1),
            ),
            (f"sum(0) [{side}, {side}], {name}", dt, lambda a, b, o, o32: a.view(side, -1).sum(0)),
        ]
    cases += [
        (f"add {n >> 20}M, float16", torch.float16, lambda a, b, o, o32: torch.add(a, b, out=o)),
        (
            f"GELU (tanh) {n >> 20}M, float16",
            torch.float16,
            lambda a, b, o, o32: torch._C._nn.gelu(a, approximate="tanh", out=o),
        ),
        (f"cast fp16 -> fp32 {n >> 20}M", torch.float16, lambda a, b, o, o32: o32.copy_(a)),
    ]
    for name, dt, f in cases:

        def make(d, f=f, dt=dt):
            a, b = base.to(dt).to(d), other.to(dt).to(d)
            o, o32 = torch.empty_like(a), torch.empty(a.shape, device=d)
            return lambda: f(a, b, o, o32)

        t = side_by_side(make, rounds=5, reps=40)
        rows.append(
            (
                name,
                f"{t['neuron'] * 1e3:.3f} ms",
                f"{t['cpu'] * 1e3:.3f} ms",
                f"{t['cpu'] / t['neuron']:.2f}x",
                "speed ratio neuron/CPU",
            )
        )


SECTIONS = {
    "gemm": None,  # filled in main (needs the peak)
    "sdpa": sdpa_rows,
    "memory": lambda rows, quick: memory_rows(rows),
    "activation": activation_rows,
    "reduce": reduction_rows,
    "model": model_rows,
    "compile": compile_rows,
    "graph": graph_rows,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--write", help="markdown file for the results table")
    p.add_argument(
        "--write-host",
        action="store_true",
        help="write the table to docs/benchmarks/hosts/<this CPU model>.md",
    )
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    p.add_argument(
        "--sections",
        default="gemm,sdpa,memory,activation,model",
        help=f"comma-separated, of {','.join(SECTIONS)} (compile: torch.compile rows)",
    )
    args = p.parse_args()
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    peaks = Peaks()
    isa = _C._isa()
    rows = []
    for section in args.sections.split(","):
        if section not in SECTIONS:
            p.error(f"unknown section {section!r}; choose from {', '.join(SECTIONS)}")
        if section == "gemm":
            gemm_rows(rows, peaks, args.quick)
        else:
            SECTIONS[section](rows, args.quick)
    lines = [
        "# Kernel-library benchmarks: neuron vs PyTorch CPU",
        "",
        f"Generated by `python benchmarks/run_all.py --sections {args.sections} --write FILE`. Neuron and",
        "PyTorch CPU eager run side by side in one process on the same threads, in",
        "alternating rounds (medians). Ratios above 1.00x mean neuron is faster. Each",
        f"timing starts after a {SETTLE_S * 1e3:.0f} ms pause: PyTorch CPU's OpenMP workers spin for a few ms",
        "after their last parallel region and would otherwise slow whatever runs next.",
        f"Then each side runs the callable untimed for {WARM_S * 1e3:.0f} ms, so both are timed warm.",
        "memcpy bandwidth: libc memcpy between two written 64 MiB device buffers (2 MiB pages),",
        "split over the same threads, timed in the same alternating rounds as the row it anchors",
        "(same pause). The host's bandwidth drifts with its other tenants, so % of memcpy is given",
        "twice: best round against best round, and the median over rounds of each round's kernel",
        "bandwidth over the memcpy bandwidth measured beside it. GB/s columns are medians.",
        "",
        f"- Machine: {cpu_name()}, {os.cpu_count()} cores visible, {threads} threads used; "
        f"torch {torch.__version__}; kernel ISA chosen: {isa}",
        f"- CPU flags that matter here: {' '.join(cpu_flags()) or 'none'}; kernel features "
        f"detected: {', '.join(_C._cpu_features())}",
        f"- Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        *peaks.describe(),
        "",
        "| benchmark | neuron | PyTorch CPU | neuron/CPU | note |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_host:
        args.write = os.path.join(HERE, "..", "docs", "benchmarks", "hosts", host_slug() + ".md")
        os.makedirs(os.path.dirname(args.write), exist_ok=True)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
        print(f"written: {os.path.normpath(args.write)}")


if __name__ == "__main__":
    main()
