"""EXPERIMENTAL, for torchtitan 0.3.0 only (not the recommended 0.2.2): what
it takes to train TorchTitan 0.3.0's Llama 3 debug model on torch 2.13.0, on
neuron or on CPU/Gloo. Activated as a TorchTitan override, its documented
extension point for hardware vendors::

    torchrun --standalone --nproc-per-node 2 tools/titan_neuron.py [--cpu] \\
        --module llama3 --config llama3_debugmodel \\
        --override.imports titan_neuron_030.document_sdpa \\
        --parallelism.spmd_backend partial_dtensor ...

(``tools/`` is on ``sys.path`` because the launcher script lives there.)

Why each piece is needed:

* ``document_sdpa`` replaces the language models' ``FlexAttention`` (the only
  default) with :class:`DocumentSDPA`. FlexAttention cannot run: TorchTitan
  wraps ``flex_attention`` and ``create_block_mask`` in ``torch.compile``
  (Inductor has no neuron backend), and torch 2.13's ``flex_attention``
  itself rejects devices outside cuda/cpu/xpu/hpu/mps and has no CPU
  backward. The other backend, VarlenAttention, needs CUDA FlashAttention.
* ``torch.distributed.set_timeout``: torchtitan 0.3.0 calls it after the
  first step (``distributed/utils.py`` ``set_pg_timeouts``); torch 2.13 has it
  only as ``distributed_c10d._set_pg_timeout``. Importing this module adds the
  alias (a compatibility shim for a newer torch API, not a TorchTitan patch).
* ``--parallelism.spmd_backend partial_dtensor``: the default "spmd_types"
  needs a ``fully_shard`` that reads spmd_types annotations (torch 2.13
  raises "When dp_mesh_dims is provided, all parameters must be DTensors");
  "full_dtensor" trains but logs twice the loss (on CPU and neuron alike).
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torchtitan.config import override
from torchtitan.config.override import derive
from torchtitan.models.common.attention import (
    FlexAttention,
    VarlenAttention,
    VarlenMetadata,
)
from torchtitan.protocols.module import Module

if not hasattr(dist, "set_timeout"):  # torch 2.13 (see the module docstring)
    dist.set_timeout = dist.distributed_c10d._set_pg_timeout


def _document_ids(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """Document index of each of the ``total`` packed tokens, from the
    cumulative document offsets (``cu_seqlens[0] == 0``,
    ``cu_seqlens[-1] == total``): the number of document starts at or before
    the token, less one."""
    tokens = torch.arange(total, device=cu_seqlens.device, dtype=cu_seqlens.dtype)
    return (cu_seqlens[None, :-1] <= tokens[:, None]).sum(dim=1) - 1


class DocumentSDPA(VarlenAttention):
    """Causal attention within each packed document (what TorchTitan's
    FlexAttention and VarlenAttention compute for its language models), as
    ``scaled_dot_product_attention`` with a ``(B, 1, L, L)`` boolean mask built
    from the ``VarlenMetadata`` document offsets. The config subclasses
    ``VarlenAttention.Config`` so that the trainer builds that metadata. It
    materialises the scores: for small sequence lengths."""

    @dataclass(kw_only=True, slots=True)
    class Config(VarlenAttention.Config):
        pass

    def __init__(self, config: Config) -> None:
        Module.__init__(self)  # not VarlenAttention's: no FlashAttention setup
        self.window_size = config.window_size

    def forward(
        self,
        q_BLNH: torch.Tensor,
        k_BLNH: torch.Tensor,
        v_BLNH: torch.Tensor,
        *,
        attention_masks: VarlenMetadata,
        scale: float | None = None,
        enable_gqa: bool = False,
        out_transform=None,
        **kwargs,
    ) -> torch.Tensor:
        if out_transform is not None:
            raise NotImplementedError("DocumentSDPA does not return the LSE")
        assert isinstance(attention_masks, VarlenMetadata), type(attention_masks)
        B, L = q_BLNH.shape[:2]
        doc = _document_ids(attention_masks.cu_seq_q, B * L).view(B, L)
        idx = torch.arange(L, device=q_BLNH.device)
        mask = doc[:, :, None] == doc[:, None, :]
        left, right = self.window_size
        if right >= 0:  # at most `right` tokens ahead (0: causal)
            mask = mask & (idx[None, None, :] <= idx[None, :, None] + right)
        if left >= 0:  # at most `left` tokens behind
            mask = mask & (idx[None, None, :] >= idx[None, :, None] - left)
        out_BNLH = F.scaled_dot_product_attention(
            q_BLNH.transpose(1, 2),
            k_BLNH.transpose(1, 2),
            v_BLNH.transpose(1, 2),
            attn_mask=mask[:, None],
            scale=scale,
            enable_gqa=enable_gqa,
        )
        return out_BNLH.transpose(1, 2)


@override(
    target=FlexAttention.Config,
    description="Document-causal attention with SDPA (no torch.compile, any device).",
)
def document_sdpa(cfg: FlexAttention.Config) -> DocumentSDPA.Config:
    # derive() keeps param_init and the sharding (TP local_map) configuration.
    return derive(cfg, DocumentSDPA.Config)
