"""``torch.neuron``: the device module, mirroring ``torch.cuda``."""

from typing import Any

import torch

from . import _C, amp, graphs, memory, random  # noqa: F401  (torch.neuron.amp, .graphs, .memory, .random)
from ._utils import _dev, _device_t, _get_device_index  # noqa: F401
from .graphs import NeuronGraph, graph, is_current_stream_capturing  # noqa: F401
from .memory import (  # noqa: F401  (torch.neuron.memory_allocated and the rest, as torch.cuda)
    MemPool,
    empty_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from .random import (  # noqa: F401  (torch.neuron.manual_seed and the rest, as torch.cuda)
    default_generator,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

# ------------------------------------------------------------------ devices


def is_available() -> bool:
    """True when at least one logical NeuronCore is visible."""
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def is_initialized() -> bool:
    return _C._is_initialized()


def _is_in_bad_fork() -> bool:
    return _C._in_bad_fork()


def init() -> None:
    _lazy_init()


def _lazy_init() -> None:
    _C._lazy_init()


def current_device() -> int:
    return _C._current_device()


def set_device(device: _device_t) -> None:
    idx = _get_device_index(device)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: Any):
        self.idx = _get_device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C._set_device(self.idx)

    def __exit__(self, *args):
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of a tensor current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_neuron else None)


class NeuronDeviceProperties:
    """Properties of one logical NeuronCore (like torch.cuda's)."""

    def __init__(self, d: dict):
        self.__dict__.update(d)
        self.type = "neuron"
        self.multi_processor_count = d["physical_cores"]

    def __repr__(self):
        return (
            f"NeuronDeviceProperties(name='{self.name}', "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"instance_model='{self.instance_model}', generation={self.generation}, "
            f"physical_cores={self.physical_cores}, chip={self.chip}, "
            f"global_core_id={self.global_core_id})"
        )


def get_device_properties(device: _device_t = None) -> NeuronDeviceProperties:
    return NeuronDeviceProperties(_C._get_device_properties(_get_device_index(device)))


def get_device_name(device: _device_t = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: _device_t = None) -> tuple:
    return (get_device_properties(device).generation, 0)


def get_arch_list() -> list:
    """The NeuronCore generations the runtime models ("trn2", "trn3"),
    as torch.cuda.get_arch_list names the architectures it was built for."""
    return ["trn2", "trn3"]


def can_device_access_peer(device: _device_t, peer_device: _device_t) -> bool:
    """Whether device can read peer_device's memory directly. Software
    NeuronCores share the host's memory: every pair of visible devices can
    (copies between them need no host round trip)."""
    a, b = _dev(device), _dev(peer_device)
    return a != b


OutOfMemoryError = torch.OutOfMemoryError


def synchronize(device: _device_t = None) -> None:
    """Waits for all work on every stream of the device."""
    _C._synchronize(_get_device_index(device))


def _sleep(cycles: int) -> None:
    """torch.cuda._sleep's analogue: queues on the current stream a task that
    spins for ``cycles`` nanoseconds (a nominal 1 GHz clock), to hold a
    stream busy in tests of stream order."""
    _lazy_init()
    _C._sleep(int(cycles))


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def is_fp16_supported() -> bool:
    return True


# ------------------------------------------------------------ streams/events


# PyTorch's C++ side checks for exactly torch.Stream / torch.Event (e.g.
# Event.elapsed_time), so these classes construct plain torch.Stream /
# torch.Event objects on the neuron device; isinstance() still works.


class _NeuronStreamMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Stream) and obj.device.type == "neuron"


class Stream(metaclass=_NeuronStreamMeta):
    """A neuron stream: an in-order queue of device work (like cuda.Stream).

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool;
    the object is a ``torch.Stream`` (query, synchronize, wait_event,
    wait_stream, record_event, and ``with stream:``)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:
            return torch.Stream(**kwargs)
        idx = _get_device_index(device)
        return torch.Stream(device=torch.device("neuron", idx), priority=priority)


class _NeuronEventMeta(type):
    def __instancecheck__(cls, obj):
        return (
            isinstance(obj, torch.Event) and obj.device is not None and obj.device.type == "neuron"
        )


class Event(metaclass=_NeuronEventMeta):
    """A neuron event (like cuda.Event); the object is a ``torch.Event``
    (record, wait, query, synchronize, elapsed_time)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(
            device=torch.device("neuron", current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device: _device_t = None) -> torch.Stream:
    sid, idx, dtype = _C._current_stream(_get_device_index(device))
    return torch.Stream(stream_id=sid, device_index=idx, device_type=dtype)


def default_stream(device: _device_t = None) -> torch.Stream:
    sid, idx, dtype = _C._current_stream(_get_device_index(device))
    return torch.Stream(stream_id=0, device_index=idx, device_type=dtype)


def set_stream(stream: torch.Stream) -> None:
    if stream is None:
        return
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Makes a stream current on its device for the duration of a block."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev = None
        self.prev_device = None

    def __enter__(self):
        if self.stream is None:
            return
        self.prev_device = current_device()
        if self.stream.device_index != self.prev_device:
            # as torch.cuda.stream: the stream's device becomes current too
            _C._set_device(self.stream.device_index)
        self.prev = current_stream(self.stream.device_index)
        set_stream(self.stream)

    def __exit__(self, *args):
        if self.stream is None:
            return False
        set_stream(self.prev)
        if self.prev_device != self.stream.device_index:
            _C._set_device(self.prev_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


# ---------------------------------------------------------------------- RNG


def __getattr__(name):
    if name == "_initialized":
        # read by torch.utils.checkpoint (and others) to decide whether the
        # device's RNG state must be saved: it follows the runtime itself
        return _C._is_initialized()
    if name == "default_generators":
        return tuple(_C._default_generator(i) for i in range(device_count()))
    raise AttributeError(f"module 'torch.neuron' has no attribute '{name}'")


# ------------------------------------------------------------------- memory


def device_memory_used(device: _device_t = None) -> int:
    """Device memory in use (bytes reserved by this process's allocator:
    the software device has no other tenants)."""
    return memory_reserved(device)


_busy_samples: dict = {}


def utilization(device: _device_t = None) -> int:
    """Percent of the time since the previous call during which the device's
    streams ran work, as torch.cuda.utilization reports the busy share of a
    sampling period. The first call for a device starts the period and
    returns 0. With several streams busy at once it is capped at 100."""
    import time

    idx = _dev(device)
    busy, now = _C._device_busy_ns(idx), time.monotonic_ns()
    prev = _busy_samples.get(idx)
    _busy_samples[idx] = (busy, now)
    if prev is None:
        return 0
    span = now - prev[1]
    return 0 if span <= 0 else min(100, round(100 * (busy - prev[0]) / span))


__all__ = [
    "MemPool",
    "NeuronGraph",
    "graph",
    "is_current_stream_capturing",
    "OutOfMemoryError",
    "amp",
    "memory",
    "memory_snapshot",
    "use_mem_pool",
    "can_device_access_peer",
    "device_memory_used",
    "get_arch_list",
    "get_per_process_memory_fraction",
    "host_memory_stats",
    "random",
    "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats",
    "set_per_process_memory_fraction",
    "utilization",
    "Event",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]
