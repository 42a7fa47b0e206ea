"""scaled_dot_product_attention on neuron (csrc/aten/attention_ops.cpp): the
flash-style fused kernel (forward and backward) against PyTorch CPU, the
cases that take the math path instead, and the fused kernel's edge cases."""

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import gen, native
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import torch_neuronx

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


def run(dev, q, k, v, dtype=torch.float32, **kw):
    q, k, v = (t.detach().to(dev, dtype).requires_grad_() for t in (q, k, v))
    kw = {a: (b.to(dev) if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    o = F.scaled_dot_product_attention(q, k, v, **kw)
    w = torch.linspace(-1, 1, o.numel()).view(o.shape).to(dev)
    (o.float() * w).sum().backward()
    return [t.detach().cpu().float() for t in (o, q.grad, k.grad, v.grad)]


def ops_run(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.key for e in p.key_averages()}


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "bool mask": dict(
        attn_mask=torch.rand(70, 130, generator=torch.Generator().manual_seed(3)) > 0.3
    ),
    "float mask": dict(
        attn_mask=torch.randn(2, 1, 70, 130, generator=torch.Generator().manual_seed(4))
    ),
    "scale": dict(scale=0.3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_attention_matches_cpu(case):
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 3, 70, 32, generator=g),
        torch.randn(2, 3, 130, 32, generator=g),
        torch.randn(2, 3, 130, 24, generator=g),
    )
    torch_neuronx.clear_op_tracking()
    got = {}
    names = ops_run(lambda: got.setdefault("n", run("neuron", q, k, v, **CASES[case])))
    assert FUSED in names and FUSED + "_backward" in names
    for a, b in zip(got["n"], run("cpu", q, k, v, **CASES[case])):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
    assert torch_neuronx.get_fallback_ops() == {}


def test_grouped_query_attention_and_decode():
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(1, 8, 33, 16, generator=g),
        torch.randn(1, 2, 33, 16, generator=g),
        torch.randn(1, 2, 33, 16, generator=g),
    )
    for a, b in zip(
        run("neuron", q, k, v, is_causal=True, enable_gqa=True),
        run("cpu", q, k, v, is_causal=True, enable_gqa=True),
    ):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
    q1 = q[:, :, -1:]  # decoding: one query against the whole cache
    for a, b in zip(
        run("neuron", q1, k, v, enable_gqa=True), run("cpu", q1, k, v, enable_gqa=True)
    ):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_half_precision_and_fully_masked_rows():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g) for _ in range(3))
    for a, b in zip(
        run("neuron", q, k, v, dtype=torch.bfloat16, is_causal=True),
        run("cpu", q, k, v, dtype=torch.bfloat16, is_causal=True),
    ):
        torch.testing.assert_close(a, b, atol=3e-2, rtol=3e-2)
    mask = torch.ones(40, 40, dtype=torch.bool)
    mask[5] = False  # a query that sees no key: zeros, as PyTorch's math path gives
    for a, b in zip(run("neuron", q, k, v, attn_mask=mask), run("cpu", q, k, v, attn_mask=mask)):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_dropout_and_mask_with_grad_take_the_math_path():
    q, k, v = (torch.randn(1, 2, 8, 4, device="neuron") for _ in range(3))
    names = ops_run(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    assert FUSED not in names
    bias = torch.zeros(8, 8, device="neuron", requires_grad=True)
    qr = q.clone().requires_grad_()
    names = ops_run(
        lambda: F.scaled_dot_product_attention(qr, k, v, attn_mask=bias).sum().backward()
    )
    assert FUSED not in names
    assert bias.grad is not None and bias.grad.shape == (8, 8)


def test_bad_shapes_raise_like_cpu():
    q = torch.randn(1, 3, 8, 4, device="neuron")
    k = torch.randn(1, 2, 8, 4, device="neuron")
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k)  # heads differ without enable_gqa
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, q[..., :3], q)  # head dims differ


# ---- edge cases (issue 16; tools/mutate.py checks that these tests catch
# planted bugs) of the fused kernel (kernels/attention.c: blocks of 128
# queries, tiles of 128 keys, online softmax) forward and backward: sequence
# lengths 1, 17, 65, 130 and 257 (one, two and three tiles with remainders),
# causal with equal and unequal lengths, boolean and float masks with -inf
# entries and fully masked rows, logits of about 1e3 whose maximum moves from
# tile to tile (the running rescale), q/k/v transposed from [B, L, H, E],
# bf16 ------------------------------------------------------------------------------


def sdpa_run(dev, q, k, v, dtype=torch.float32, layout="bhle", **kw):
    """Output and q/k/v gradients. layout "blhe": q/k/v stored [B, L, H, E]
    and transposed to [B, H, L, E] (the usual HF layout: non-contiguous)."""
    leaves = []
    args = []
    for t in (q, k, v):
        if layout == "blhe":
            leaf = t.transpose(1, 2).contiguous().to(dev, dtype, copy=True).requires_grad_()
            args.append(leaf.transpose(1, 2))
        else:
            leaf = t.to(dev, dtype, copy=True).requires_grad_()
            args.append(leaf)
        leaves.append(leaf)
    kw = {
        a: (
            b.to(dev, dtype)
            if torch.is_tensor(b) and b.is_floating_point()
            else b.to(dev)
            if torch.is_tensor(b)
            else b
        )
        for a, b in kw.items()
    }
    if dev == "cpu":
        o = F.scaled_dot_product_attention(*args, **kw)
    else:
        with sdpa_kernel(SDPBackend.OVERRIDEABLE):  # the fused kernel or an error
            o = F.scaled_dot_product_attention(*args, **kw)
    wgt = torch.linspace(-1, 1, o.numel()).view(o.shape).to(dev)
    (o.float() * wgt).sum().backward()
    return [t.detach().cpu().float() for t in (o, *(x.grad for x in leaves))]


def sdpa_compare(q, k, v, tol, f64=False, **kw):
    """The fused kernel against CPU; with f64, against CPU in float64 with
    an absolute tolerance of tol["atol"] times each result's largest
    magnitude (where CPU's fp32 is itself further off than the kernel)."""
    with profile(activities=[ProfilerActivity.CPU]) as p:
        got = sdpa_run("neuron", q, k, v, **kw)
    names = {e.key for e in p.key_averages()}
    assert FUSED in names and FUSED + "_backward" in names
    if f64:
        want = sdpa_run("cpu", q, k, v, **dict(kw, dtype=torch.float64))
    else:
        want = sdpa_run("cpu", q, k, v, **kw)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        t = dict(tol, atol=tol["atol"] * float(b.abs().max())) if f64 else tol
        torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}", **t)
    native()


def qkv(lq, lk, e=16, ev=None, heads=2, seed=0, scale=1.0):
    g = gen(seed)
    return (
        torch.randn(1, heads, lq, e, generator=g) * scale,
        torch.randn(1, heads, lk, e, generator=g),
        torch.randn(1, heads, lk, ev or e, generator=g),
    )


ATT_TOL = {"rtol": 1e-4, "atol": 5e-5}
SEQ = [1, 17, 65, 130, 257]


@pytest.mark.parametrize("lq", SEQ)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sdpa_lengths(lq, causal):
    """Square and (for the full case) unequal lengths: lk = 2 * lq + 3 puts
    the last key tile's remainder elsewhere."""
    q, k, v = qkv(lq, lq, e=24, ev=20, seed=lq)
    sdpa_compare(q, k, v, ATT_TOL, is_causal=causal)
    if not causal:
        q, k, v = qkv(lq, 2 * lq + 3, seed=lq + 1)
        sdpa_compare(q, k, v, ATT_TOL)


@pytest.mark.parametrize("lq,lk", [(130, 17), (17, 130), (1, 257), (257, 65)])
def test_sdpa_causal_unequal_lengths(lq, lk):
    """Causal with lq != lk: PyTorch's top-left alignment (query i sees keys
    0..i); queries past lk see every key."""
    q, k, v = qkv(lq, lk, seed=lq * 7 + lk)
    sdpa_compare(q, k, v, ATT_TOL, is_causal=True)


def test_sdpa_large_logits_max_moves_between_tiles():
    """Scores of ~1e3 whose row maximum grows from key tile to key tile: a
    kernel that skips the running rescale (or rescales the sum but not the
    accumulator) is off by factors of exp(hundreds)."""
    lq, lk = 65, 300
    q, k, v = qkv(lq, lk, e=8, seed=50)
    q = q.abs() + 1.0  # positive queries: scores grow with the key scale
    ramp = torch.linspace(0.5, 30.0, lk).view(1, 1, lk, 1)
    k = k.abs() * ramp + 0.1  # later keys score higher
    tol = {"rtol": 1e-4, "atol": 1e-4}  # of the largest magnitude; CPU's fp32 is 4x further off
    sdpa_compare(q, k, v, tol, f64=True)
    sdpa_compare(q * 3, k.flip(2), v, tol, f64=True)  # the max in the first tile


def test_sdpa_masks_with_minus_inf_rows():
    """Boolean and float masks with many masked entries, -inf in the float
    mask, and fully masked query rows (zeros, as the CPU math path gives),
    at two key tiles with a remainder; broadcast masks ([L, S] and a
    key-padding [B, 1, 1, S])."""
    lq, lk = 70, 150
    q, k, v = qkv(lq, lk, seed=51)
    g = gen(52)
    bmask = torch.rand(lq, lk, generator=g) > 0.7  # 70% masked
    bmask[3] = False  # a fully masked row
    bmask[4, :] = False
    bmask[4, 140] = True  # only a key in the last tile
    sdpa_compare(q, k, v, ATT_TOL, attn_mask=bmask)
    fmask = torch.randn(1, 2, lq, lk, generator=g) * 3
    fmask[..., ::3] = float("-inf")
    fmask[0, 1, 9] = float("-inf")  # fully masked (head 1, query 9)
    fmask[0, 0, 10, :128] = float("-inf")  # only the second tile is visible
    sdpa_compare(q, k, v, ATT_TOL, attn_mask=fmask)
    pad = torch.ones(1, 1, 1, lk, dtype=torch.bool)
    pad[..., 100:] = False  # key padding: the second tile entirely masked
    sdpa_compare(q, k, v, ATT_TOL, attn_mask=pad)


@pytest.mark.parametrize("lq", [17, 130])
def test_sdpa_transposed_qkv_bf16_gqa(lq):
    """q/k/v transposed from [B, L, H, E] (strides of H * E between
    positions), in fp32 and bf16; grouped-query attention with a causal
    mask; an explicit scale."""
    q, k, v = qkv(lq, lq + 5, e=32, heads=4, seed=53)
    sdpa_compare(q, k, v, ATT_TOL, layout="blhe")
    sdpa_compare(q, k, v, ATT_TOL, layout="blhe", is_causal=True, scale=0.05)
    sdpa_compare(q, k, v, {"rtol": 3e-2, "atol": 3e-2}, dtype=torch.bfloat16, layout="blhe")
    kg, vg = k[:, :2], v[:, 2:]  # two kv heads for four query heads
    sdpa_compare(q, kg, vg, ATT_TOL, layout="blhe", is_causal=True, enable_gqa=True)


# ------------------------- nn.MultiheadAttention / TransformerEncoder fast path


@pytest.fixture
def executed():
    torch_neuronx.enable_op_tracking()
    yield
    torch_neuronx.disable_op_tracking()


def _fast_path_masks(B, T, seed):
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[0, -2:] = True  # the first sample's last two keys are padding
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    return pad, causal


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", ["none", "padding", "causal"])
def test_transformer_encoder_fast_path_matches_cpu(norm_first, activation, masks, executed):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(3, 6, 16)
    pad, causal = _fast_path_masks(3, 6, 1)
    kw = {"none": {}, "padding": {"src_key_padding_mask": pad}, "causal": {"mask": causal}}[masks]
    with torch.no_grad():
        want = enc(x, **kw)
        enc_n = copy.deepcopy(enc).neuron()
        got = enc_n(x.neuron(), **{k: v.neuron() for k, v in kw.items()})
    assert_same(got, want, atol=2e-6, rtol=2e-5)
    assert "aten::_transformer_encoder_layer_fwd" in torch_neuronx.get_executed_ops()
    native()


@pytest.mark.parametrize("need_weights, average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("kind", ["self", "kv", "qkv"])
def test_multihead_attention_fast_path_matches_cpu(need_weights, average, kind, executed):
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    q = torch.randn(2, 5, 16)
    k = q if kind == "self" else torch.randn(2, 5, 16)
    v = k if kind in ("self", "kv") else torch.randn(2, 5, 16)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    # self-attention takes the fast path (a sample with every key masked:
    # NaN rows, as on CPU); the others take the SDPA path
    pad[1, 0 if kind == "self" else 3 :] = True
    args = dict(key_padding_mask=pad, need_weights=need_weights, average_attn_weights=average)
    with torch.no_grad():
        want = mha(q, k, v, **args)
        mn = copy.deepcopy(mha).neuron()
        qn = q.neuron()
        kn = qn if kind == "self" else k.neuron()
        vn = kn if kind in ("self", "kv") else v.neuron()
        got = mn(qn, kn, vn, **dict(args, key_padding_mask=pad.neuron()))
    assert_same(got[0], want[0], atol=2e-6, rtol=2e-5, equal_nan=True)
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        assert_same(got[1], want[1], atol=2e-6, rtol=2e-5, equal_nan=True)
    ops = torch_neuronx.get_executed_ops()
    assert ("aten::_native_multi_head_attention" in ops) == (kind == "self"), ops
    native()


def test_masked_softmax_and_backward_match_cpu():
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    for mask, mtype in [
        (torch.rand(4, 4, generator=torch.Generator().manual_seed(0)) > 0.6, 0),
        (torch.tensor([[False, False, True, True], [True, True, True, True]]), 1),
        (torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(1)) > 0.5, 2),
    ]:
        want = torch._masked_softmax(x, mask, 3, mtype)
        got = torch._masked_softmax(x.neuron(), mask.neuron(), 3, mtype)
        assert_same(got, want, equal_nan=True)  # a fully masked row is NaN
    full = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(2)) > 0.5
    out = torch._masked_softmax(x, full, 3, 2)
    g = torch.randn_like(x)
    want = torch.ops.aten._masked_softmax_backward(g, out, full, 3)
    got = torch.ops.aten._masked_softmax_backward(g.neuron(), out.neuron(), full.neuron(), 3)
    assert_same(got, want)
    with pytest.raises(RuntimeError, match="Mask should be a boolean tensor"):
        torch._masked_softmax(x.neuron(), full.neuron().float(), 3, 2)
    native()
