"""``torch.neuron.amp``: ``autocast`` and ``GradScaler`` bound to the neuron
device, as ``torch.cuda.amp`` offers them (``torch.amp.autocast("neuron")``
and ``torch.amp.GradScaler("neuron")`` are the device-generic spellings)."""

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast):
    """``torch.amp.autocast("neuron", ...)``."""

    def __init__(
        self, enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True
    ):
        super().__init__("neuron", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("neuron", ...)``."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        super().__init__(
            "neuron",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


def custom_fwd(fwd=None, *, cast_inputs=None):
    return torch.amp.custom_fwd(fwd, device_type="neuron", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return torch.amp.custom_bwd(bwd, device_type="neuron")
