"""Packed variable-length attention on neuron: torch.nn.attention.varlen's
varlen_attn and aten::_flash_attention_forward/_backward, against a float64
oracle that runs each sequence alone with an explicit mask (CPU has no
flash attention kernel to compare with). Causal masks and windows are aligned
to the end of each sequence's keys, as flash attention aligns them."""

import pytest
import torch
from torch.nn.attention.varlen import AuxRequest, varlen_attn

N = "neuron"


def cu(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def oracle(q, k, v, cu_q, cu_k, window=(-1, -1), scale=None, seqused=None):
    """Per sequence, float64: out [T, H, Dv] and lse [H, T] (+inf where a
    query sees no key, flash attention's value)."""
    q, k, v = q.double(), k.double(), v.double()
    H, Hkv = q.shape[1], k.shape[1]
    out = torch.zeros(q.shape[0], H, v.shape[-1], dtype=torch.float64)
    lse = torch.full((H, q.shape[0]), float("inf"), dtype=torch.float64)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if seqused is not None:
            k1 = k0 + int(seqused[b])
        lq, lk = q1 - q0, k1 - k0
        if lq == 0:
            continue
        qs = q[q0:q1].transpose(0, 1)  # [H, lq, D]
        ks = k[k0:k1].transpose(0, 1).repeat_interleave(H // Hkv, 0)
        vs = v[k0:k1].transpose(0, 1).repeat_interleave(H // Hkv, 0)
        s = qs @ ks.transpose(-1, -2) * scale
        i = torch.arange(lq).view(-1, 1) + (lk - lq)
        j = torch.arange(lk).view(1, -1)
        keep = torch.ones(lq, lk, dtype=torch.bool)
        if window[0] >= 0:
            keep &= j >= i - window[0]
        if window[1] >= 0:
            keep &= j <= i + window[1]
        s = s.masked_fill(~keep, float("-inf"))
        m = torch.logsumexp(s, -1)  # [H, lq]
        p = torch.exp(s - m.unsqueeze(-1)).nan_to_num(0.0)
        out[q0:q1] = (p @ vs).transpose(0, 1)
        lse[:, q0:q1] = torch.where(torch.isinf(m), float("inf"), m)
    return out, lse


def packed(lengths_q, lengths_k, H, Hkv, D, Dv=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    tq, tk = sum(lengths_q), sum(lengths_k)
    q = torch.randn(tq, H, D, generator=g).to(dtype)
    k = torch.randn(tk, Hkv, D, generator=g).to(dtype)
    v = torch.randn(tk, Hkv, Dv or D, generator=g).to(dtype)
    return q, k, v, cu(lengths_q), cu(lengths_k)


# odd lengths, an empty sequence, a single token, one longer than a tile
LENGTHS = [37, 0, 1, 200, 129]
WINDOWS = {"full": (-1, -1), "causal": (-1, 0), "sliding_left_16": (16, 0), "band_5_3": (5, 3)}


@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_varlen_forward_and_lse(window, no_fallback):
    w = WINDOWS[window]
    q, k, v, cq, ck = packed(LENGTHS, LENGTHS, 4, 4, 32)
    out, lse = varlen_attn(
        q.to(N), k.to(N), v.to(N), cq.to(N), ck.to(N), max(LENGTHS), max(LENGTHS),
        window_size=w, return_aux=AuxRequest(lse=True),
    )  # fmt: skip
    gold, gold_lse = oracle(q, k, v, cq, ck, w)
    torch.testing.assert_close(out.cpu().double(), gold, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(lse.cpu().double(), gold_lse, atol=2e-6, rtol=1e-5)


def test_varlen_cross_lengths_gqa_and_value_dim(no_fallback):
    """Queries shorter than keys (decode-like chunks), 8 query heads on 2
    key/value heads, a value head dim unlike the query's."""
    lq, lk = [5, 1, 64, 0], [90, 17, 64, 3]
    q, k, v, cq, ck = packed(lq, lk, 8, 2, 16, Dv=24)
    for w in ((-1, 0), (-1, -1), (7, 0)):
        out = varlen_attn(
            q.to(N), k.to(N), v.to(N), cq.to(N), ck.to(N), max(lq), max(lk),
            window_size=w, enable_gqa=True,
        )  # fmt: skip
        gold, _ = oracle(q, k, v, cq, ck, w)
        torch.testing.assert_close(out.cpu().double(), gold, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("window", ["causal", "full", "sliding_left_16"])
def test_varlen_backward_against_float64(window, no_fallback):
    w = WINDOWS[window]
    lengths = [37, 0, 1, 150]
    q, k, v, cq, ck = packed(lengths, lengths, 2, 2, 16)
    leaves = [t.to(N).requires_grad_() for t in (q, k, v)]
    out = varlen_attn(*leaves, cq.to(N), ck.to(N), 150, 150, window_size=w)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    out.backward(go.to(N))
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    gold, _ = oracle(*ref, cq, ck, w)
    gold.backward(go.double())
    for got, want in zip(leaves, ref):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=1e-5, rtol=1e-4)


def test_varlen_bf16_within_cpu_rounding(no_fallback):
    q, k, v, cq, ck = packed(LENGTHS, LENGTHS, 4, 4, 32, dtype=torch.bfloat16)
    out = varlen_attn(q.to(N), k.to(N), v.to(N), cq.to(N), ck.to(N), 200, 200, window_size=(-1, 0))
    assert out.dtype == torch.bfloat16
    gold, _ = oracle(q, k, v, cq, ck, (-1, 0))
    err = (out.cpu().double() - gold).abs().max().item()
    # a bf16 output carries at most half a bf16 step of rounding (2^-8 relative)
    assert err <= gold.abs().max().item() * 2**-8 + 1e-3, err


def test_flash_forward_padded_batch_matches_sdpa(no_fallback):
    """The 4-D form ([B, L, H, D], no cumulative lengths), equal lengths:
    causal is then SDPA's is_causal."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 70, 3, 16, generator=g) for _ in range(3))
    out, lse, *_ = torch.ops.aten._flash_attention_forward(
        q.to(N), k.to(N), v.to(N), None, None, 70, 70, 0.0, True, False
    )
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2).double() for t in (q, k, v)), is_causal=True
    ).transpose(1, 2)
    torch.testing.assert_close(out.cpu().double(), ref, atol=2e-6, rtol=1e-5)
    assert lse.shape == (2, 3, 70)


def test_seqused_k(no_fallback):
    """seqused_k: only the first n keys of each sequence's slot are read."""
    lq, lk = [3, 4], [20, 30]
    q, k, v, cq, ck = packed(lq, lk, 2, 2, 16)
    used = torch.tensor([11, 30], dtype=torch.int32)
    out, *_ = torch.ops.aten._flash_attention_forward(
        q.to(N), k.to(N), v.to(N), cq.to(N), ck.to(N), 4, 30, 0.0, True, False,
        seqused_k=used.to(N),
    )  # fmt: skip
    gold, _ = oracle(q, k, v, cq, ck, (-1, 0), seqused=used)
    torch.testing.assert_close(out.cpu().double(), gold, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ("decreasing", RuntimeError, "non-decreasing"),
        ("past_end", RuntimeError, "past the end"),
        ("int64", RuntimeError, "int32"),
        ("max_too_small", RuntimeError, "shorter than the longest"),
    ],
)
def test_bad_cumulative_lengths(bad, error, match):
    q, k, v, cq, ck = packed([5, 6], [5, 6], 2, 2, 8)
    mq = 6
    if bad == "decreasing":
        cq = torch.tensor([0, 7, 6], dtype=torch.int32)
    elif bad == "past_end":
        cq = torch.tensor([0, 5, 12], dtype=torch.int32)
    elif bad == "int64":
        cq = cq.long()
    elif bad == "max_too_small":
        mq = 3
    with pytest.raises(error, match=match):
        varlen_attn(q.to(N), k.to(N), v.to(N), cq.to(N), ck.to(N), mq, 6)


def test_dropout_is_not_implemented():
    q, k, v, cq, ck = packed([5], [5], 1, 1, 8)
    with pytest.raises(NotImplementedError, match="dropout"):
        torch.ops.aten._flash_attention_forward(
            q.to(N), k.to(N), v.to(N), cq.to(N), ck.to(N), 5, 5, 0.1, False, False
        )
