"""FlexAttention on neuron (torch.nn.attention.flex_attention).

PyTorch runs FlexAttention through two higher-order operators,
``flex_attention`` and ``flex_attention_backward``. Their generic eager
implementations (``sdpa_dense``) build the whole L x L score matrix and apply
``mask_mod`` everywhere; CUDA's generated kernels instead visit only the
(query block, key block) pairs the ``BlockMask`` lists. This module gives the
two operators a neuron implementation (``DispatchKey.PrivateUse1``) that, like
CUDA's, does work only for the listed blocks:

- The block mask's partial and full key blocks of every query-block row
  (batch, head, query block) become a schedule: rows are sorted by how many
  key blocks they keep and processed in chunks of rows with similar counts, so
  the work is the number of live blocks (plus the padding of a chunk's rows to
  its longest), not L x L. The schedule is built on the host from the block
  mask's counts (one small copy), as CUDA's launch grid is.
- For a chunk, the query blocks of its rows and the key/value blocks they keep
  are gathered into dense [rows, Q_BLOCK, keys] problems: one batched GEMM for
  the scores, ``score_mod`` vmapped over (row, query, key) with the true batch,
  head and position indices, ``mask_mod`` applied to partial blocks only (full
  blocks skip it, as in CUDA's kernel), and positions past the sequence end
  masked. The softmax is exact per row (every kept block of a row is in the
  chunk), in float32 (float64 for float64 inputs), and the probabilities are
  rounded to the input dtype before the value GEMM, as PyTorch's reference
  does. Fully masked rows give 0 and a log-sum-exp of -inf.
- The backward recomputes each chunk under autograd with the gathered blocks
  (in the working precision) and the captured ``score_mod`` buffers as
  leaves, and adds the block gradients into float32 (float64) accumulators
  for dQ, dK, dV. Gradients of tensors captured by ``score_mod`` (a learned
  bias) are returned like the reference's.

``torch.nn.attention.flex_attention._validate_device`` rejects devices outside
a hard-coded set; :func:`_patch_validate_device` lets "neuron" through
(docs/upstream/flex-attention-devices.md has the change that removes it).
"""

from __future__ import annotations

import math
from typing import Any

import torch

_WORKING_ELEMENTS = 1 << 23  # scores per chunk: 32 MiB of float32
_LN2 = math.log(2.0)


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _vmap_rows(fn, prefix: tuple, n_buffers: int):
    """vmap ``fn(*prefix_args, b, h, q_idx, kv_idx, *buffers)`` over a
    [rows, queries, keys] grid: b and h are per row, q_idx per (row, query),
    kv_idx per (row, key)."""
    bufs = (None,) * n_buffers
    pre = (0,) * len(prefix)
    fn = torch.vmap(fn, in_dims=(*pre, None, None, None, 0, *bufs))  # keys
    fn = torch.vmap(fn, in_dims=(*pre, None, None, 0, None, *bufs))  # queries
    fn = torch.vmap(fn, in_dims=(*pre, 0, 0, 0, 0, *bufs))  # rows
    return fn


def _is_identity(score_mod) -> bool:
    if score_mod is None:
        return True
    from torch.nn.attention.flex_attention import _identity

    if score_mod is _identity:
        return True
    graph = getattr(score_mod, "graph", None)
    if isinstance(graph, torch.fx.Graph):
        nodes = list(graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        outputs = [n for n in nodes if n.op == "output"]
        if len(outputs) == 1 and placeholders and len(nodes) == len(placeholders) + 1:
            ret = outputs[0].args[0]
            if isinstance(ret, (tuple, list)) and len(ret) == 1:
                ret = ret[0]
            return ret is placeholders[0]
    return False


class _Schedule:
    """The live (query block, key block) pairs of a block mask, per
    query-block row of the [B, Hq, n_q_blocks] grid, cut into chunks whose
    index tensors (rows, b, h, positions, key-block rows, masks) are built
    on the host and copied to the device at once."""

    def __init__(self, block_mask, B, Hq, Hkv, Bkv, Lq, Lkv, device):
        kv_num, kv_idx, full_num, full_idx = block_mask[2:6]
        self.QB, self.KB = int(block_mask[-3]), int(block_mask[-2])
        self.nQB = -(-Lq // self.QB)
        self.nKB = -(-Lkv // self.KB)
        # a mask without blocks (block_mask=None) has one block wider than
        # the sequence: it is the sequence
        if self.nQB == 1:
            self.QB = max(Lq, 1)
        if self.nKB == 1:
            self.KB = max(Lkv, 1)
        kv_num = kv_num.to("cpu", torch.int64)
        kv_idx = kv_idx.to("cpu", torch.int64)
        Bm, Hm, nq = kv_num.shape
        if nq != self.nQB or Bm not in (1, B) or Hm not in (1, Hq):
            raise ValueError(
                f"flex_attention: block mask of shape (B={Bm}, H={Hm}, Q_BLOCKS={nq}) does not "
                f"fit query of batch {B}, {Hq} heads and {Lq} positions in blocks of {self.QB}"
            )
        parts = [(kv_num, kv_idx, False)]
        if full_num is not None:
            parts.append((full_num.to("cpu", torch.int64), full_idx.to("cpu", torch.int64), True))
        idx, valid, full = [], [], []
        for num, ind, is_full in parts:
            slots = torch.arange(ind.shape[-1])
            idx.append(ind)
            valid.append(slots < num.unsqueeze(-1))
            full.append(torch.full(ind.shape, is_full, dtype=torch.bool))
        idx = torch.cat(idx, -1)
        valid = torch.cat(valid, -1)
        full = torch.cat(full, -1)
        # live slots first, in their order
        order = torch.sort((~valid).to(torch.int8), dim=-1, stable=True).indices
        idx = idx.gather(-1, order)
        valid = valid.gather(-1, order)
        full = full.gather(-1, order)
        bad = valid & ((idx < 0) | (idx >= self.nKB))
        if bool(bad.any()):
            raise ValueError(
                f"flex_attention: block mask names key block {int(idx[bad][0])}, but the keys "
                f"have {self.nKB} blocks of {self.KB}"
            )
        S = idx.shape[-1]
        shape = (B, Hq, self.nQB, S)
        idx = idx.expand(shape).reshape(-1, S)
        valid = valid.expand(shape).reshape(-1, S)
        full = full.expand(shape).reshape(-1, S)
        counts = valid.sum(-1)
        order = torch.sort(counts, descending=True, stable=True).indices
        rows = order[counts[order] > 0]
        counts = counts[rows]
        self.R = B * Hq * self.nQB

        ints, bools, metas = [], [], []
        start, per_row = 0, self.QB * self.KB
        while start < rows.numel():
            kmax = int(counts[start])
            rc = max(1, _WORKING_ELEMENTS // (kmax * per_row))
            # rows padded to the chunk's longest waste at most 1/8 of it
            rc = int((counts[start : start + rc] * 8 > kmax * 7).sum())
            r = rows[start : start + rc]
            kvb, ok, fl = idx[r, :kmax], valid[r, :kmax], full[r, :kmax]
            qb = r % self.nQB
            h = (r // self.nQB) % Hq
            b = r // (self.nQB * Hq)
            bk = b if Bkv > 1 else torch.zeros_like(b)
            kv_rows = ((bk * Hkv + h // (Hq // Hkv)) * self.nKB).unsqueeze(-1) + kvb
            kv_rows = torch.where(ok, kv_rows, 0)
            q_pos = (qb.unsqueeze(-1) * self.QB + torch.arange(self.QB)).clamp(max=Lq - 1)
            kv_pos = (kvb.unsqueeze(-1) * self.KB + torch.arange(self.KB)).reshape(rc, -1)
            keep = ok.repeat_interleave(self.KB, -1) & (kv_pos < Lkv)
            # slots past a row's count hold whatever kv_indices holds there:
            # positions kept in range (masked by keep) for the mods' indexing
            ints += [r, b, h, q_pos, kv_pos.clamp(0, Lkv - 1), kv_rows.reshape(-1)]
            bools += [keep, fl.repeat_interleave(self.KB, -1)]
            metas.append(bool((ok & ~fl).any()))
            start += rc
        self.chunks = []
        if not metas:
            return
        int_dev = torch.cat([t.reshape(-1) for t in ints]).to(device)
        bool_dev = torch.cat([t.reshape(-1) for t in bools]).to(device)
        int_parts = int_dev.split([t.numel() for t in ints])
        bool_parts = bool_dev.split([t.numel() for t in bools])
        names = ("rows", "b", "h", "q_pos", "kv_pos", "kv_rows")
        for i, any_partial in enumerate(metas):
            ix = {n: int_parts[6 * i + j].view(ints[6 * i + j].shape) for j, n in enumerate(names)}
            ix["keep"] = bool_parts[2 * i].view(bools[2 * i].shape)
            ix["full"] = bool_parts[2 * i + 1].view(bools[2 * i + 1].shape)
            ix["any_partial"] = any_partial
            self.chunks.append(ix)


_schedules: dict[tuple, tuple] = {}


def _schedule(block_mask, B, Hq, Hkv, Bkv, Lq, Lkv, device) -> _Schedule:
    """The block mask's schedule, built once per block mask: a model's layers
    (and a training loop's steps) share one. Kept while the mask's tensors
    live and are not changed in place."""
    import weakref

    tensors = [t for t in block_mask[2:6] if isinstance(t, torch.Tensor)]
    sig = (B, Hq, Hkv, Bkv, Lq, Lkv, str(device), int(block_mask[-3]), int(block_mask[-2]))
    key = (tuple(id(t) for t in tensors), sig)
    hit = _schedules.get(key)
    versions = tuple(t._version for t in tensors)
    if hit is not None:
        refs, vers, sched = hit
        if all(r() is t for r, t in zip(refs, tensors)) and vers == versions:
            return sched
    sched = _Schedule(block_mask, B, Hq, Hkv, Bkv, Lq, Lkv, device)
    if not tensors:
        return sched
    for k in [k for k, (refs, _, _) in _schedules.items() if any(r() is None for r in refs)]:
        del _schedules[k]
    _schedules[key] = (tuple(weakref.ref(t) for t in tensors), versions, sched)
    return sched


def _blocks(t: torch.Tensor, length: int, n_blocks: int, block: int) -> torch.Tensor:
    """[B, H, L, D] -> [B * H * n_blocks, block, D], zero-padded at the end."""
    B, H, _, D = t.shape
    pad = n_blocks * block - length
    if pad:
        t = torch.nn.functional.pad(t, (0, 0, 0, pad))
    return t.reshape(B * H * n_blocks, block, D)


class _Problem:
    """Shapes, blocked inputs and the schedule of one flex_attention call."""

    def __init__(self, query, key, value, block_mask, scale):
        B, Hq, Lq, D = query.shape
        Bkv, Hkv, Lkv, _ = key.shape
        if Bkv not in (1, B):
            raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={B} and Bkv={Bkv}")
        if Hq % Hkv:
            raise ValueError(
                f"flex_attention: the number of query heads ({Hq}) must be a multiple of the "
                f"number of key/value heads ({Hkv})"
            )
        self.B, self.Hq, self.Lq, self.D = B, Hq, Lq, D
        self.Bkv, self.Hkv, self.Lkv = Bkv, Hkv, Lkv
        self.Dv = value.shape[-1]
        self.G = Hq // Hkv
        self.scale = scale
        self.dtype = query.dtype
        self.wdtype = _working_dtype(query.dtype)
        self.device = query.device
        self.sched = _schedule(block_mask, B, Hq, Hkv, Bkv, Lq, Lkv, query.device)
        self.mask_mod = block_mask[-1]
        s = self.sched
        self.q = _blocks(query, Lq, s.nQB, s.QB)
        self.k = _blocks(key, Lkv, s.nKB, s.KB)
        self.v = _blocks(value, Lkv, s.nKB, s.KB)

    def attend(self, qg, kg, vg, ix, score_mod, score_bufs, mask_bufs, identity):
        """Attention of one chunk. qg [rc, QB, D], kg [rc, N, D], vg [rc, N, Dv]
        in any dtype. Returns (out in the input dtype, natural log-sum-exp,
        row max), differentiable in qg, kg, vg and the score_mod buffers."""
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

        w = self.wdtype
        s = torch.bmm(qg.to(w), kg.to(w).transpose(1, 2)) * self.scale
        with TransformGetItemToIndex():
            if not identity:
                mod = _vmap_rows(score_mod, (0,), len(score_bufs))
                s = mod(s, ix["b"], ix["h"], ix["q_pos"], ix["kv_pos"], *score_bufs).to(w)
            keep = ix["keep"].unsqueeze(1)
            if ix["any_partial"]:
                mask_mod = _vmap_rows(self.mask_mod, (), len(mask_bufs))
                allowed = mask_mod(ix["b"], ix["h"], ix["q_pos"], ix["kv_pos"], *mask_bufs)
                keep = keep & (ix["full"].unsqueeze(1) | allowed)
        s = torch.where(keep, s, float("-inf"))
        m = s.detach().amax(-1, keepdim=True)
        m_safe = torch.where(m == float("-inf"), 0.0, m)
        p = torch.exp(s - m_safe)
        denom = p.sum(-1, keepdim=True)
        live = denom > 0
        denom_safe = torch.where(live, denom, 1.0)
        probs = (p / denom_safe).to(self.dtype)
        out = torch.bmm(probs, vg.to(self.dtype))
        lse = torch.where(live, m_safe + torch.log(denom_safe), float("-inf")).squeeze(-1)
        return out, lse, m.squeeze(-1)

    def gather(self, ix, dtype=None):
        rc = ix["rows"].numel()
        qg = self.q.index_select(0, ix["rows"])
        kg = self.k.index_select(0, ix["kv_rows"]).reshape(rc, -1, self.D)
        vg = self.v.index_select(0, ix["kv_rows"]).reshape(rc, -1, self.Dv)
        if dtype is not None:
            qg, kg, vg = qg.to(dtype), kg.to(dtype), vg.to(dtype)
        return qg, kg, vg

    def unblock(self, flat: torch.Tensor, length: int, heads: int, batch: int) -> torch.Tensor:
        per = flat.shape[0] // (batch * heads)
        t = flat.reshape(batch, heads, per * flat.shape[1], *flat.shape[2:])
        return t[:, :, :length]


def neuron_flex_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    score_mod,
    block_mask: tuple,
    scale: float,
    kernel_options: dict[str, Any],
    score_mod_other_buffers: tuple = (),
    mask_mod_other_buffers: tuple = (),
):
    from torch._higher_order_ops.flex_attention import _permute_strides

    pb = _Problem(query, key, value, block_mask, scale)
    s = pb.sched
    w = pb.wdtype
    out = torch.zeros((s.R, s.QB, pb.Dv), dtype=query.dtype, device=query.device)
    lse = torch.full((s.R, s.QB), float("-inf"), dtype=w, device=query.device)
    mx = torch.full((s.R, s.QB), float("-inf"), dtype=w, device=query.device)
    identity = _is_identity(score_mod)
    with torch.no_grad():
        for ix in s.chunks:
            qg, kg, vg = pb.gather(ix)
            o, lse_c, m = pb.attend(
                qg, kg, vg, ix, score_mod, score_mod_other_buffers, mask_mod_other_buffers, identity
            )
            out.index_copy_(0, ix["rows"], o)
            lse.index_copy_(0, ix["rows"], lse_c)
            mx.index_copy_(0, ix["rows"], m)
    out = _permute_strides(pb.unblock(out, pb.Lq, pb.Hq, pb.B), query.stride())
    lse = pb.unblock(lse, pb.Lq, pb.Hq, pb.B).contiguous()
    mx = pb.unblock(mx, pb.Lq, pb.Hq, pb.B).contiguous()
    return out, lse / _LN2, mx / _LN2


def _autograd_on():
    """The backward operator runs below the Autograd key (the HOP dispatcher
    excludes it); its recomputation needs autograd back on."""
    from torch._C import DispatchKey as K
    from torch._C import DispatchKeySet as S

    exclude = torch._C._dispatch_tls_local_exclude_set()
    for key in (K.AutogradFunctionality, K.AutogradOther, K.AutogradNestedTensor):
        exclude = exclude - S(key)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), exclude)


def neuron_flex_attention_backward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    logsumexp: torch.Tensor,
    grad_out: torch.Tensor | None,
    grad_logsumexp: torch.Tensor | None,
    fw_graph,
    joint_graph,
    block_mask: tuple,
    scale: float,
    kernel_options: dict[str, Any],
    score_mod_other_buffers: tuple,
    mask_mod_other_buffers: tuple,
):
    from torch._higher_order_ops.flex_attention import _permute_strides

    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise ValueError(
            "Backward pass with mixed query, key, and value dtype is not supported, "
            f"got query.dtype={query.dtype}, key.dtype={key.dtype}, "
            f"and value.dtype={value.dtype}"
        )
    pb = _Problem(query, key, value, block_mask, scale)
    s = pb.sched
    w = pb.wdtype
    dev = query.device
    dq = torch.zeros((s.R, s.QB, pb.D), dtype=w, device=dev)
    dk = torch.zeros((pb.Bkv * pb.Hkv * s.nKB, s.KB, pb.D), dtype=w, device=dev)
    dv = torch.zeros((pb.Bkv * pb.Hkv * s.nKB, s.KB, pb.Dv), dtype=w, device=dev)
    go = None if grad_out is None else _blocks(grad_out, pb.Lq, s.nQB, s.QB)
    gl = None
    if grad_logsumexp is not None:
        gl = _blocks(grad_logsumexp.unsqueeze(-1), pb.Lq, s.nQB, s.QB).squeeze(-1)
    bufs = [
        b.detach().requires_grad_() if isinstance(b, torch.Tensor) and b.requires_grad else b
        for b in score_mod_other_buffers
    ]
    buf_leaves = [b for b in bufs if isinstance(b, torch.Tensor) and b.requires_grad]
    buf_grads = [torch.zeros_like(b) for b in buf_leaves]
    identity = _is_identity(fw_graph) and not buf_leaves
    for ix in s.chunks:
        with torch.no_grad():
            leaves = [t.requires_grad_() for t in pb.gather(ix, w)]
        with torch.enable_grad(), _autograd_on():
            o, lse_c, _ = pb.attend(*leaves, ix, fw_graph, bufs, mask_mod_other_buffers, identity)
            outs, grads = [], []
            if go is not None:
                outs.append(o)
                grads.append(go.index_select(0, ix["rows"]))
            if gl is not None:
                outs.append(lse_c / _LN2)
                grads.append(gl.index_select(0, ix["rows"]).to(lse_c.dtype))
            if not outs:
                continue
            g = torch.autograd.grad(outs, leaves + buf_leaves, grads, allow_unused=True)
        dq.index_copy_(0, ix["rows"], g[0])
        dk.index_add_(0, ix["kv_rows"], g[1].reshape(-1, s.KB, pb.D))
        dv.index_add_(0, ix["kv_rows"], g[2].reshape(-1, s.KB, pb.Dv))
        for acc, gb in zip(buf_grads, g[3:]):
            if gb is not None:
                acc.add_(gb)
    dq = _permute_strides(pb.unblock(dq, pb.Lq, pb.Hq, pb.B).to(query.dtype), query.stride())
    dk = _permute_strides(pb.unblock(dk, pb.Lkv, pb.Hkv, pb.Bkv).to(key.dtype), key.stride())
    dv = _permute_strides(pb.unblock(dv, pb.Lkv, pb.Hkv, pb.Bkv).to(value.dtype), value.stride())
    it = iter(buf_grads)
    buffer_grads = tuple(
        next(it) if isinstance(b, torch.Tensor) and b.requires_grad else None for b in bufs
    )
    return dq, dk, dv, buffer_grads


def _autocast_forward(query, key, value, *args):
    from torch._higher_order_ops.flex_attention import flex_attention

    dtype = torch.get_autocast_dtype(query.device.type)

    def cast(t):
        return t.to(dtype) if t.is_floating_point() and t.dtype != torch.float64 else t

    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
    with torch._C._ExcludeDispatchKeyGuard(keys):
        return flex_attention(cast(query), cast(key), cast(value), *args)


def _autocast_backward(*args):
    from torch._higher_order_ops.flex_attention import flex_attention_backward

    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
    with torch._C._ExcludeDispatchKeyGuard(keys):
        return flex_attention_backward(*args)


# ---- torch.compile: Inductor has no lowering for neuron (its flex_attention
# lowering generates Triton for devices other than CPU and MPS). The neuron
# post-grad pass replaces the two operators in a neuron graph by custom ops
# that Inductor calls as extern kernels; the ops run the kernels above. The
# score_mod / mask_mod graphs travel as pickled GraphModules in string
# arguments, so code from Inductor's FX graph cache runs in a new process.

_graph_cache: dict[str, Any] = {}


def _encode_graph(gm) -> str:
    import base64
    import pickle

    return base64.b64encode(pickle.dumps(gm)).decode("ascii")


def _decode_graph(text: str):
    gm = _graph_cache.get(text)
    if gm is None:
        import base64
        import pickle

        gm = pickle.loads(base64.b64decode(text))  # noqa: S301 (our own graph)
        if len(_graph_cache) > 256:
            _graph_cache.clear()
        _graph_cache[text] = gm
    return gm


def _mask_tuple(kv_num, kv_idx, full_num, full_idx, q_block, kv_block, mask_mod):
    return (None, None, kv_num, kv_idx, full_num, full_idx, q_block, kv_block, mask_mod)


def _fwd_op(
    q, k, v, kv_num, kv_idx, full_num, full_idx, q_block, kv_block, scale, score_bufs,
    mask_bufs, score_mod, mask_mod,
):  # fmt: skip
    bm = _mask_tuple(kv_num, kv_idx, full_num, full_idx, q_block, kv_block, _decode_graph(mask_mod))
    return neuron_flex_attention(
        q, k, v, _decode_graph(score_mod), bm, scale, {}, tuple(score_bufs), tuple(mask_bufs)
    )


def _fwd_fake(
    q, k, v, kv_num, kv_idx, full_num, full_idx, q_block, kv_block, scale, score_bufs,
    mask_bufs, score_mod, mask_mod,
):  # fmt: skip
    from torch._higher_order_ops.flex_attention import _permute_strides

    B, H, L, _ = q.shape
    out = _permute_strides(q.new_empty((B, H, L, v.shape[-1])), q.stride())
    w = _working_dtype(q.dtype)
    return out, q.new_empty((B, H, L), dtype=w), q.new_empty((B, H, L), dtype=w)


def _bwd_op(
    q, k, v, out, lse, grad_out, grad_lse, kv_num, kv_idx, full_num, full_idx, q_block,
    kv_block, scale, score_bufs, mask_bufs, score_mod, mask_mod, grad_buffers,
):  # fmt: skip
    bm = _mask_tuple(kv_num, kv_idx, full_num, full_idx, q_block, kv_block, _decode_graph(mask_mod))
    bufs = [
        b.detach().requires_grad_(i in grad_buffers) if b.is_floating_point() else b
        for i, b in enumerate(score_bufs)
    ]
    dq, dk, dv, bg = neuron_flex_attention_backward(
        q, k, v, out, lse, grad_out, grad_lse, _decode_graph(score_mod), None, bm, scale, {},
        tuple(bufs), tuple(mask_bufs),
    )  # fmt: skip
    return dq, dk, dv, [bg[i] for i in grad_buffers]


def _bwd_fake(
    q, k, v, out, lse, grad_out, grad_lse, kv_num, kv_idx, full_num, full_idx, q_block,
    kv_block, scale, score_bufs, mask_bufs, score_mod, mask_mod, grad_buffers,
):  # fmt: skip
    from torch._higher_order_ops.flex_attention import _permute_strides

    def like(t):
        return _permute_strides(t.new_empty(t.shape), t.stride())

    return like(q), like(k), like(v), [torch.empty_like(score_bufs[i]) for i in grad_buffers]


_ops: dict[str, Any] = {}


def _with_plain_dispatch(fn):
    """A backend kernel runs with every dispatch key above its own excluded
    (functorch's included); the kernels vmap the mods and recompute under
    autograd, so they run with the dispatch state of plain eager code."""
    from torch._C import DispatchKey as K
    from torch._C import DispatchKeySet as S

    autocast = S(K.AutocastCPU)
    for name in dir(K):
        if name.startswith("Autocast"):
            autocast = autocast | S(getattr(K, name))

    def kernel(*args):
        with torch._C._ForceDispatchKeyGuard(S(K.BackendSelect) | S(K.ADInplaceOrView), autocast):
            return fn(*args)

    return kernel


def _register_ops() -> None:
    if _ops:
        return
    lib = torch.library.Library("neuron_flex", "DEF")  # noqa: TOR901
    lib.define(
        "attention(Tensor q, Tensor k, Tensor v, Tensor kv_num_blocks, Tensor kv_indices, "
        "Tensor? full_kv_num_blocks, Tensor? full_kv_indices, SymInt q_block, SymInt kv_block, "
        "float scale, Tensor[] score_bufs, Tensor[] mask_bufs, str score_mod, str mask_mod) "
        "-> (Tensor, Tensor, Tensor)"
    )
    lib.define(
        "attention_backward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
        "Tensor? grad_out, Tensor? grad_lse, Tensor kv_num_blocks, Tensor kv_indices, "
        "Tensor? full_kv_num_blocks, Tensor? full_kv_indices, SymInt q_block, SymInt kv_block, "
        "float scale, Tensor[] score_bufs, Tensor[] mask_bufs, str score_mod, str mask_mod, "
        "int[] grad_buffers) -> (Tensor, Tensor, Tensor, Tensor[])"
    )
    lib.impl("attention", _with_plain_dispatch(_fwd_op), "PrivateUse1")
    lib.impl("attention_backward", _with_plain_dispatch(_bwd_op), "PrivateUse1")
    lib._register_fake("attention", _fwd_fake)
    lib._register_fake("attention_backward", _bwd_fake)
    _ops["lib"] = lib
    _ops["fwd"] = torch.ops.neuron_flex.attention.default
    _ops["bwd"] = torch.ops.neuron_flex.attention_backward.default


def _on_neuron(node) -> bool:
    val = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
    return isinstance(val, torch.Tensor) and val.device.type == "neuron"


def rewrite_flex_attention(gm: torch.fx.GraphModule) -> None:
    """The neuron post-grad pass's part: flex_attention and
    flex_attention_backward on neuron become neuron_flex ops."""
    import operator

    hops = torch.ops.higher_order
    targets = (
        getattr(hops, "flex_attention", None),
        getattr(hops, "flex_attention_backward", None),
    )
    nodes = [
        n
        for n in gm.graph.nodes
        if n.op == "call_function" and n.target in targets and _on_neuron(n)
    ]
    if not nodes:
        return
    _register_ops()

    def sub(node):
        return _encode_graph(getattr(gm, node.target))

    for node in nodes:
        if node.target is targets[0]:
            q, k, v, score, bm, scale, _opts, sbufs, mbufs = node.args
            args = (q, k, v, *bm[2:6], bm[-3], bm[-2], scale, list(sbufs), list(mbufs))
            with gm.graph.inserting_before(node):
                new = gm.graph.call_function(_ops["fwd"], (*args, sub(score), sub(bm[-1])))
            new.meta.update(node.meta)
            node.replace_all_uses_with(new)
        else:
            q, k, v, out, lse, gout, glse, fw, _joint, bm, scale, _opts, sbufs, mbufs = node.args
            val = node.meta["val"]
            grad_buffers = [i for i, g in enumerate(val[3]) if g is not None]
            args = (q, k, v, out, lse, gout, glse, *bm[2:6], bm[-3], bm[-2], scale)
            args += (list(sbufs), list(mbufs), sub(fw), sub(bm[-1]), grad_buffers)
            with gm.graph.inserting_before(node):
                new = gm.graph.call_function(_ops["bwd"], args)
            new.meta.update(node.meta)
            new.meta["val"] = (*val[:3], [val[3][i] for i in grad_buffers])
            position = {b: j for j, b in enumerate(grad_buffers)}
            for user in list(node.users):
                if user.target is operator.getitem and user.args[1] == 3:
                    for inner in list(user.users):
                        if inner.target is operator.getitem:
                            inner.args = (inner.args[0], position[inner.args[1]])
                    user.meta["val"] = new.meta["val"][3]
            node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()


def _register_kernels(module) -> None:
    from torch._C import DispatchKey

    fwd, bwd = module.flex_attention, module.flex_attention_backward
    if DispatchKey.PrivateUse1 in fwd.py_kernels:
        return
    _register_ops()
    fwd.py_impl(DispatchKey.PrivateUse1)(neuron_flex_attention)
    fwd.py_impl(DispatchKey.AutocastPrivateUse1)(_autocast_forward)
    bwd.py_impl(DispatchKey.PrivateUse1)(neuron_flex_attention_backward)
    bwd.py_impl(DispatchKey.AutocastPrivateUse1)(_autocast_backward)


def _patch_validate_device(module) -> None:
    """torch 2.13's flex_attention accepts only {"cuda", "cpu", "xpu",
    "hpu", "mps"} (``_validate_device``). Neuron tensors pass; every other
    device keeps torch's check and message."""
    original = module._validate_device
    if getattr(original, "_neuron_patch", False):
        return

    def _validate_device(query, key, value):
        if query.device.type == "neuron":
            return
        original(query, key, value)

    _validate_device._neuron_patch = True
    _validate_device._torch_original = original
    module._validate_device = _validate_device


def install(hooks) -> None:
    hooks.add("torch._higher_order_ops.flex_attention", _register_kernels)
    hooks.add("torch.nn.attention.flex_attention", _patch_validate_device)
