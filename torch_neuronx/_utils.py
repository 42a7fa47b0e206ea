"""Helpers the device module's parts share (``torch.cuda._utils``' role):
device arguments to indices."""

import torch

from . import _C

_device_t = torch.device | str | int | None


def _get_device_index(device: _device_t, optional: bool = True) -> int:
    if device is None:
        if not optional:
            raise ValueError("Expected a neuron device, but got None")
        return _C._current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return _C._current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise ValueError(f"Expected a neuron device or index, but got: {device!r}")


def _dev(device):
    idx = _get_device_index(device)
    n = _C._device_count()
    if not 0 <= idx < n:  # also before the runtime starts (it would read 0)
        raise RuntimeError(
            f"neuron error: invalid device ordinal: device index {idx} is out of range; "
            f"{n} neuron device(s) are visible (set NEURON_RT_VISIBLE_CORES to choose them)"
        )
    return idx
