"""End-to-end: one training step (forward, backward, AdamW) of a small
Llama-style model, and greedy decoding, neuron vs PyTorch CPU eager, on the
same threads in one process (rounds interleaved).

Not a test: it reports ratios and never asserts on time.
    python benchmarks/bench_train_step.py [--layers 4 --d-model 512 --seq 256 --batch 4]
"""

import argparse
import copy
import statistics
import time

import torch

import torch_neuronx


def build(args):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.d_model,
        intermediate_size=int(args.d_model * 8 / 3) // 64 * 64,
        num_hidden_layers=args.layers,
        num_attention_heads=args.d_model // 64,
        num_key_value_heads=args.d_model // 64,
        max_position_embeddings=args.seq,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg)


def sync(device):
    if device == "neuron":
        torch.neuron.synchronize()


def train_step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def timed(fn, device):
    sync(device)
    time.sleep(0.03)  # settle: CPU's OpenMP workers spin a few ms after their last region
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--gen-tokens", type=int, default=32)
    args = p.parse_args()

    base = build(args)
    ids = torch.randint(
        0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1)
    )
    models, opts, inputs = {}, {}, {}
    for d in ("neuron", "cpu"):
        models[d] = copy.deepcopy(base).to(d)
        opts[d] = torch.optim.AdamW(models[d].parameters(), lr=1e-4)
        inputs[d] = ids.to(d)
    step = {d: [] for d in models}
    losses = {d: [] for d in models}
    for r in range(args.rounds + 1):  # round 0 warms up (allocator, lazy state)
        for d in models:
            t, loss = timed(lambda d=d: train_step(models[d], opts[d], inputs[d]), d)
            if r:
                step[d].append(t)
            losses[d].append(loss.item())
    torch_neuronx.clear_op_tracking()
    train_step(models["neuron"], opts["neuron"], inputs["neuron"])
    fallbacks = torch_neuronx.get_fallback_ops()

    gen = {d: [] for d in models}
    prompt = ids[:1, :16]
    for r in range(args.rounds + 1):
        for d in models:
            m = models[d].eval()
            t, _ = timed(
                lambda m=m, d=d: m.generate(
                    prompt.to(d),
                    max_new_tokens=args.gen_tokens,
                    min_new_tokens=args.gen_tokens,
                    do_sample=False,
                ),
                d,
            )
            if r:
                gen[d].append(args.gen_tokens / t)

    med = {d: statistics.median(v) for d, v in step.items()}
    tps = {d: statistics.median(v) for d, v in gen.items()}
    print(
        f"model: Llama-style, {args.layers} layers, d_model {args.d_model}, seq {args.seq}, "
        f"batch {args.batch}, vocab {args.vocab}; threads {torch.get_num_threads()}"
    )
    print(
        f"train step: neuron {med['neuron'] * 1e3:.0f} ms, cpu {med['cpu'] * 1e3:.0f} ms, "
        f"speed ratio neuron/cpu {med['cpu'] / med['neuron']:.2f}x"
    )
    print(
        f"greedy decode: neuron {tps['neuron']:.1f} tok/s, cpu {tps['cpu']:.1f} tok/s, "
        f"ratio {tps['neuron'] / tps['cpu']:.2f}x"
    )
    print(f"losses (per step) neuron {[round(x, 4) for x in losses['neuron']]}")
    print(f"losses (per step) cpu    {[round(x, 4) for x in losses['cpu']]}")
    print(f"fallback ops in one neuron step: {fallbacks}")


if __name__ == "__main__":
    main()
