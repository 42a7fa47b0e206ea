"""FlexAttention on neuron: torch.nn.attention.flex_attention with block masks
and score_mods, forward against CPU's flex_attention and a float64 oracle
written with plain tensor ops (no flex machinery), backward against the
oracle's autograd (CPU's flex_attention has no eager backward)."""

import math

import pytest
import torch
from torch.nn.attention.flex_attention import (
    AuxRequest,
    create_block_mask,
    flex_attention,
)

import torch_neuronx

N = "neuron"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Eager flex_attention compiles its operator call with Dynamo; after
    several score_mods Dynamo recompiles with dynamic shapes, where a float
    captured by a score_mod (softcap's cap) becomes an unbacked symbol that
    torch 2.13's backward graph tracing rejects (PendingUnbackedSymbolNotFound,
    the same for any device). Each test starts from a fresh Dynamo."""
    torch._dynamo.reset()
    yield


def causal(b, h, q, kv):
    return q >= kv


def sliding(window):
    def mask(b, h, q, kv):
        return (q >= kv) & (q - kv < window)

    return mask


def prefix_lm(prefix):
    def mask(b, h, q, kv):
        return (kv < prefix) | (q >= kv)

    return mask


def document(doc):
    def mask(b, h, q, kv):
        return (doc[q] == doc[kv]) & (q >= kv)

    return mask


def late_rows(first):
    """Rows before `first` see nothing (fully masked rows)."""

    def mask(b, h, q, kv):
        return (q >= first) & (kv <= q)

    return mask


def alibi(slopes):
    def mod(score, b, h, q, kv):
        return score + slopes[h] * (kv - q)

    return mod


def softcap(cap):
    def mod(score, b, h, q, kv):
        return cap * torch.tanh(score / cap)

    return mod


def rel_bias(bias, length):
    def mod(score, b, h, q, kv):
        return score + bias[h, q - kv + length - 1]

    return mod


def oracle(q, k, v, score_mod=None, mask_mod=None, scale=None):
    """float64 attention with the mods applied to broadcast index tensors."""
    q, k, v = q.double(), k.double(), v.double()
    B, Hq, Lq, D = q.shape
    Hkv, Lkv = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, 1)
    v = v.repeat_interleave(Hq // Hkv, 1)
    scale = 1 / math.sqrt(D) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    bi = torch.arange(B).view(B, 1, 1, 1)
    hi = torch.arange(Hq).view(1, Hq, 1, 1)
    qi = torch.arange(Lq).view(1, 1, Lq, 1)
    ki = torch.arange(Lkv).view(1, 1, 1, Lkv)
    if score_mod is not None:
        s = score_mod(s, bi, hi, qi, ki)
    if mask_mod is not None:
        keep = mask_mod(bi, hi, qi, ki).expand_as(s)
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
    return p @ v, lse


CASES = {
    "causal": dict(mask=causal),
    "sliding_window": dict(mask=sliding(37)),
    "prefix_lm": dict(mask=prefix_lm(50)),
    "document": dict(mask="document"),
    "alibi_causal": dict(mask=causal, score="alibi"),
    "softcap": dict(score="softcap"),
    "fully_masked_rows": dict(mask=late_rows(70)),
    "no_mask": dict(),
}


def _inputs(B, Hq, Hkv, Lq, Lkv, D, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Lq, D, generator=g).to(dtype)
    k = torch.randn(B, Hkv, Lkv, D, generator=g).to(dtype)
    v = torch.randn(B, Hkv, Lkv, D, generator=g).to(dtype)
    return q, k, v


def _mods(case, H, L, device):
    spec = CASES[case]
    mask = spec.get("mask")
    if mask == "document":
        lengths = [1, 40, 0, 77, L - 118]  # an empty document and a 1-token one
        doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
        mask = document(doc.to(device))
        mask_cpu = document(doc)
    else:
        mask_cpu = mask
    score = spec.get("score")
    if score == "alibi":
        slopes = torch.tensor([2.0 ** (-8 * (i + 1) / H) for i in range(H)])
        return mask, mask_cpu, alibi(slopes.to(device)), alibi(slopes)
    if score == "softcap":
        return mask, mask_cpu, softcap(2.0), softcap(2.0)
    return mask, mask_cpu, None, None


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_forward_matches_cpu(case, dtype, no_fallback):
    B, H, L, D = 2, 2, 195, 32  # L not a multiple of the 128 block
    q, k, v = _inputs(B, H, H, L, L, D, dtype)
    mask_n, mask_c, score_n, score_c = _mods(case, H, L, N)
    bm_c = create_block_mask(mask_c, B, H, L, L, device="cpu") if mask_c else None
    bm_n = create_block_mask(mask_n, B, H, L, L, device=N) if mask_n else None
    ref = flex_attention(q, k, v, score_mod=score_c, block_mask=bm_c)
    out = flex_attention(q.to(N), k.to(N), v.to(N), score_mod=score_n, block_mask=bm_n)
    assert out.dtype == dtype and out.shape == ref.shape
    gold, _ = oracle(q, k, v, score_c, mask_c)
    err_n = (out.cpu().double() - gold).abs().max().item()
    err_c = (ref.double() - gold).abs().max().item()
    if dtype == torch.float32:
        torch.testing.assert_close(out.cpu(), ref, atol=2e-5, rtol=1e-5)
        assert err_n < 1e-5
    else:
        assert err_n <= 2 * err_c + 1e-3, (err_n, err_c)


def test_fully_masked_rows_are_zero_with_minus_inf_lse(no_fallback):
    q, k, v = _inputs(1, 2, 2, 150, 150, 16)
    mask = late_rows(70)
    bm = create_block_mask(mask, 1, 2, 150, 150, device=N)
    out, aux = flex_attention(
        q.to(N), k.to(N), v.to(N), block_mask=bm, return_aux=AuxRequest(lse=True)
    )
    out, lse = out.cpu(), aux.lse.cpu()
    assert torch.all(out[:, :, :70] == 0)
    assert torch.all(lse[:, :, :70] == float("-inf"))
    gold, gold_lse = oracle(q, k, v, None, mask)
    torch.testing.assert_close(out.double(), gold, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse[:, :, 70:].double(), gold_lse[:, :, 70:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "case", ["causal", "document", "alibi_causal", "softcap", "fully_masked_rows", "prefix_lm"]
)
def test_backward_against_float64(case, no_fallback):
    B, H, L, D = 1, 2, 161, 16
    q, k, v = _inputs(B, H, H, L, L, D)
    mask_n, mask_c, score_n, score_c = _mods(case, H, L, N)
    bm = create_block_mask(mask_n, B, H, L, L, device=N) if mask_n else None
    leaves = [t.to(N).requires_grad_() for t in (q, k, v)]
    out = flex_attention(*leaves, score_mod=score_n, block_mask=bm)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    out.backward(go.to(N))
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    gold, _ = oracle(*ref_leaves, score_c, mask_c)
    gold.backward(go.double())
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=2e-5, rtol=1e-4)


def test_gqa_odd_lengths_and_cross_attention(no_fallback):
    """4 query heads on 2 key/value heads, 37 queries over 259 keys."""
    q, k, v = _inputs(2, 4, 2, 37, 259, 16)

    def mask(b, h, qi, kv):
        return kv <= qi + 222

    bm = create_block_mask(mask, 2, 4, 37, 259, device=N)
    leaves = [t.to(N).requires_grad_() for t in (q, k, v)]
    out = flex_attention(*leaves, block_mask=bm, enable_gqa=True)
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    gold, _ = oracle(*ref_leaves, None, mask)
    torch.testing.assert_close(out.cpu().double(), gold, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    gold.sum().backward()
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=2e-5, rtol=1e-4)


def test_learned_bias_gradient(no_fallback):
    """A captured tensor that requires grad gets its gradient (a relative
    position bias, as T5-style models learn it)."""
    H, L = 2, 140
    q, k, v = _inputs(1, H, H, L, L, 16)
    bias = torch.randn(H, 2 * L - 1, generator=torch.Generator().manual_seed(3)) * 0.5
    bias_n = bias.to(N).requires_grad_()
    bm = create_block_mask(causal, 1, H, L, L, device=N)
    out = flex_attention(q.to(N), k.to(N), v.to(N), score_mod=rel_bias(bias_n, L), block_mask=bm)
    out.square().sum().backward()
    bias_d = bias.double().requires_grad_()
    gold, _ = oracle(q, k, v, rel_bias(bias_d, L), causal)
    gold.square().sum().backward()
    torch.testing.assert_close(out.cpu().double(), gold, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(bias_n.grad.cpu().double(), bias_d.grad, atol=1e-4, rtol=1e-4)


def test_sinks_through_lse_gradient(no_fallback):
    """GPT-OSS's attention sinks: a per-head logit joins the softmax through
    the returned log-sum-exp (out * sigmoid(lse - sink)); its gradient flows
    through lse."""
    H, L = 2, 133
    q, k, v = _inputs(1, H, H, L, L, 16)
    sink = torch.tensor([0.3, -1.2])

    def with_sinks(t_q, t_k, t_v, t_sink, device):
        bm = create_block_mask(sliding(64), 1, H, L, L, device=device)
        out, aux = flex_attention(t_q, t_k, t_v, block_mask=bm, return_aux=AuxRequest(lse=True))
        return out * torch.sigmoid(aux.lse - t_sink.view(1, H, 1)).unsqueeze(-1)

    leaves = [t.to(N).requires_grad_() for t in (q, k, v, sink)]
    out = with_sinks(*leaves, N)
    out.sum().backward()

    ref_leaves = [t.double().requires_grad_() for t in (q, k, v, sink)]
    gold, lse = oracle(*ref_leaves[:3], None, sliding(64))
    gold = gold * torch.sigmoid(lse - ref_leaves[3].view(1, H, 1)).unsqueeze(-1)
    gold.sum().backward()
    torch.testing.assert_close(out.detach().cpu().double(), gold.detach(), atol=1e-5, rtol=1e-5)
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=3e-5, rtol=1e-4)


def test_autocast_bf16(no_fallback):
    q, k, v = _inputs(1, 2, 2, 100, 100, 16)
    bm = create_block_mask(causal, 1, 2, 100, 100, device=N)
    with torch.autocast(N, dtype=torch.bfloat16):
        out = flex_attention(q.to(N), k.to(N), v.to(N), block_mask=bm)
    assert out.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bm_c = create_block_mask(causal, 1, 2, 100, 100, device="cpu")
        ref = flex_attention(q, k, v, block_mask=bm_c)
    gold, _ = oracle(q, k, v, None, causal)
    err_n = (out.cpu().double() - gold).abs().max().item()
    err_c = (ref.double() - gold).abs().max().item()
    assert err_n <= 2 * err_c + 1e-3, (err_n, err_c)


def test_work_scales_with_live_blocks(monkeypatch):
    """The score GEMMs cover the block mask's live blocks, not L x L."""
    from torch_neuronx import _flex_attention as fa

    L, D = 1024, 16
    q, k, v = (t.to(N) for t in _inputs(1, 1, 1, L, L, D))
    seen = []
    real = fa._Problem.attend

    def attend(self, qg, kg, *args):
        seen.append(qg.shape[0] * qg.shape[1] * kg.shape[1])
        return real(self, qg, kg, *args)

    monkeypatch.setattr(fa._Problem, "attend", attend)
    for mask, live_blocks in ((causal, 8 * 9 // 2), (sliding(128), 8 + 7), (None, 64)):
        seen.clear()
        bm = create_block_mask(mask, 1, 1, L, L, device=N) if mask else None
        flex_attention(q, k, v, block_mask=bm)
        assert sum(seen) == live_blocks * 128 * 128, (mask, sum(seen))


def test_block_mask_for_another_shape_is_a_value_error():
    q, k, v = (t.to(N) for t in _inputs(1, 1, 1, 256, 256, 16))
    bm = create_block_mask(causal, 1, 1, 512, 512, device=N)
    with pytest.raises(ValueError, match="block_mask was created for"):
        flex_attention(q, k, v, block_mask=bm)


def test_block_mask_on_another_device_is_a_runtime_error():
    q, k, v = (t.to(N) for t in _inputs(1, 1, 1, 128, 128, 16))
    bm = create_block_mask(causal, 1, 1, 128, 128, device="cpu")
    with pytest.raises(RuntimeError, match="same device"):
        flex_attention(q, k, v, block_mask=bm)


def test_torch_still_hard_codes_the_device_list():
    """torch 2.13's _validate_device rejects neuron; the runtime hook lets it
    through. When this fails, torch accepts other devices (the change in
    docs/upstream/flex-attention-devices.md landed) and the hook can go."""
    import torch.nn.attention.flex_attention as fa

    original = fa._validate_device._torch_original
    t = torch.empty(1, 1, 1, 1, device=N)
    with pytest.raises(ValueError, match="only supported on CUDA, CPU"):
        original(t, t, t)
    fa._validate_device(t, t, t)  # patched: accepted
    assert torch_neuronx is not None


# ---- torch.compile ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["neuron", "inductor"])
def test_compiled_forward_and_backward(backend, no_fallback):
    B, H, L, D = 1, 2, 161, 16
    q, k, v = _inputs(B, H, H, L, L, D)
    mask_n, mask_c, score_n, score_c = _mods("document", H, L, N)
    bm = create_block_mask(mask_n, B, H, L, L, device=N)
    fn = torch.compile(flex_attention, backend=backend, fullgraph=True)
    with torch.no_grad():
        out = fn(q.to(N), k.to(N), v.to(N), block_mask=bm)
    bm_c = create_block_mask(mask_c, B, H, L, L, device="cpu")
    torch.testing.assert_close(
        out.cpu(), flex_attention(q, k, v, block_mask=bm_c), atol=2e-5, rtol=1e-5
    )

    leaves = [t.to(N).requires_grad_() for t in (q, k, v)]
    out = fn(*leaves, block_mask=bm)
    out.square().sum().backward()
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    gold, _ = oracle(*ref_leaves, None, mask_c)
    gold.square().sum().backward()
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=3e-5, rtol=1e-4)


def test_compiled_learned_bias_and_sinks(no_fallback):
    """Under torch.compile: a captured bias's gradient and sinks through lse."""
    H, L = 2, 140
    q, k, v = _inputs(1, H, H, L, L, 16)
    bias = torch.randn(H, 2 * L - 1, generator=torch.Generator().manual_seed(3)) * 0.5
    sink = torch.tensor([0.3, -1.2])

    def layer(tq, tk, tv, tbias, tsink, bm):
        out, aux = flex_attention(
            tq, tk, tv, score_mod=rel_bias(tbias, L), block_mask=bm,
            return_aux=AuxRequest(lse=True),
        )  # fmt: skip
        return out * torch.sigmoid(aux.lse - tsink.view(1, H, 1)).unsqueeze(-1)

    bm = create_block_mask(causal, 1, H, L, L, device=N)
    leaves = [t.to(N).requires_grad_() for t in (q, k, v, bias, sink)]
    out = torch.compile(layer, backend="neuron")(*leaves, bm)
    out.sum().backward()
    ref = [t.double().requires_grad_() for t in (q, k, v, bias, sink)]
    gold, lse = oracle(*ref[:3], rel_bias(ref[3], L), causal)
    gold = gold * torch.sigmoid(lse - ref[4].view(1, H, 1)).unsqueeze(-1)
    gold.sum().backward()
    torch.testing.assert_close(out.detach().cpu().double(), gold.detach(), atol=1e-5, rtol=1e-5)
    for got, want in zip(leaves, ref):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, atol=1e-4, rtol=1e-4)


def test_compiled_code_from_the_fx_graph_cache_runs_in_a_new_process(tmp_path):
    """The mods travel inside the compiled code: a second process that loads
    the graph from Inductor's cache (no compilation) gets the same result."""
    from conftest import run_python

    code = """
import torch, torch_neuronx
from torch._dynamo.utils import counters
from torch.nn.attention.flex_attention import flex_attention, create_block_mask
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, 150, 16, generator=g) for _ in range(3))
def window(b, h, qi, kv):
    return (qi >= kv) & (qi - kv < 40)
bm = create_block_mask(window, 1, 2, 150, 150, device="neuron")
out = torch.compile(flex_attention, backend="neuron")(q.to("neuron"), k.to("neuron"), v.to("neuron"), block_mask=bm)
bm_c = create_block_mask(window, 1, 2, 150, 150, device="cpu")
err = (out.cpu() - flex_attention(q, k, v, block_mask=bm_c)).abs().max().item()
print("RESULT", err, counters["inductor"]["fxgraph_cache_hit"])
"""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}
    results = []
    for _ in range(2):
        r = run_python(code, env, timeout=300)
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
        assert line, r.stderr[-3000:]
        results.append(line[0].split())
    assert float(results[0][1]) < 1e-5 and float(results[1][1]) < 1e-5
    assert results[0][2] == "0" and int(results[1][2]) >= 1  # the second run hit the cache
