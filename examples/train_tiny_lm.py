"""The demo: a small transformer language model trained for a few steps on
device "neuron", then the same run on CPU, and whether the losses agree.

The model is a character-level GPT (token + position embeddings, causal
self-attention through scaled_dot_product_attention, MLP, LayerNorm), trained
with AdamW on examples/data/tiny_corpus.txt. Both runs start from the same
weights and see the same batches, so their losses must match to fp32
rounding. The only change between them is the device string.
"""

import argparse
import copy
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, d=64, heads=4, layers=2, ctx=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def batches(data, steps, batch, ctx, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
        x = torch.stack([data[s : s + ctx] for s in starts])
        y = torch.stack([data[s + 1 : s + ctx + 1] for s in starts])
        yield x, y


def train(model, device, data, args):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    losses = []
    for step, (x, y) in enumerate(batches(data, args.steps, args.batch, args.ctx, seed=1)):
        t0 = time.perf_counter()
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()  # synchronises the device
        dt = time.perf_counter() - t0
        losses.append(value)
        if step % args.log_every == 0 or step == args.steps - 1:
            print(f"  [{device}] step {step:3d}  loss {value:.4f}  step time {dt * 1e3:7.1f} ms")
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--log-every", type=int, default=5)
    args = p.parse_args()

    text = open(os.path.join(HERE, "data", "tiny_corpus.txt")).read()
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    torch.manual_seed(0)
    model = TinyGPT(len(chars), ctx=args.ctx)
    print(
        f"TinyGPT: {sum(p.numel() for p in model.parameters()):,} parameters, vocab {len(chars)}, "
        f"{len(data):,} characters; device {torch.neuron.get_device_name(0)}"
    )

    import torch_neuronx

    torch_neuronx.set_fallback_mode("silent")  # the kernel library is still growing
    # PyTorch imports its compiler stack (about a second) the first time any
    # optimizer is built, on any device: pay that once, outside the timings.
    torch.optim.AdamW(torch.nn.Linear(1, 1).parameters())
    t0 = time.perf_counter()
    neuron_losses = train(copy.deepcopy(model), "neuron", data, args)
    t_neuron = time.perf_counter() - t0
    fallbacks = torch_neuronx.get_fallback_ops()
    t0 = time.perf_counter()
    cpu_losses = train(copy.deepcopy(model), "cpu", data, args)
    t_cpu = time.perf_counter() - t0

    diff = max(abs(a - b) for a, b in zip(neuron_losses, cpu_losses))
    agree = all(
        math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4) for a, b in zip(neuron_losses, cpu_losses)
    )
    print(f"neuron: {t_neuron:.2f} s, cpu: {t_cpu:.2f} s for {args.steps} steps")
    print(
        f"loss {neuron_losses[0]:.4f} -> {neuron_losses[-1]:.4f} on neuron, "
        f"{cpu_losses[0]:.4f} -> {cpu_losses[-1]:.4f} on cpu"
    )
    print(
        f"ops that ran through the CPU fallback: {len(fallbacks)} kinds, "
        f"{sum(fallbacks.values())} calls"
    )
    print(f"losses agree with CPU: {'yes' if agree else 'NO'} (max |diff| = {diff:.2e})")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
