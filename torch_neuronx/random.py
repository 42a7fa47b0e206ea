"""``torch.neuron.random``: the device RNG functions, as ``torch.cuda.random``
(``torch.neuron`` imports them from here)."""

import torch

from . import _C
from ._utils import _device_t, _get_device_index


def device_count() -> int:
    return _C._device_count()


def default_generator(device: _device_t = None) -> torch.Generator:
    return _C._default_generator(_get_device_index(device))


def manual_seed(seed: int) -> None:
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C._default_generator(i).manual_seed(int(seed))


def seed() -> None:
    default_generator().seed()


def seed_all() -> None:
    s = default_generator(0).seed() if device_count() else None
    for i in range(1, device_count()):
        _C._default_generator(i).manual_seed(s)


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device: _device_t = "neuron") -> torch.Tensor:
    return default_generator(device).get_state()


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _device_t = "neuron") -> None:
    default_generator(device).set_state(
        new_state.clone(memory_format=torch.contiguous_format).cpu()
    )


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


__all__ = [
    "default_generator",
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
]
