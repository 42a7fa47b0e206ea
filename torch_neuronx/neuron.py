"""``torch.neuron``: the device module, mirroring ``torch.cuda``."""

import collections
from typing import Any

import torch

from . import _C

_device_t = torch.device | str | int | None

# ------------------------------------------------------------------ devices


def _get_device_index(device: _device_t, optional: bool = True) -> int:
    if device is None:
        if not optional:
            raise ValueError("Expected a neuron device, but got None")
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise ValueError(f"Expected a neuron device or index, but got: {device!r}")


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


def default_generator(device: _device_t = None) -> torch.Generator:
    return _C._default_generator(_get_device_index(device))


def __getattr__(name):
    if name == "_initialized":
        # read by torch.utils.checkpoint (and others) to decide whether the
        # device's RNG state must be saved: it follows the runtime itself
        return _C._is_initialized()
    if name == "default_generators":
        return tuple(_C._default_generator(i) for i in range(device_count()))
    raise AttributeError(f"module 'torch.neuron' has no attribute '{name}'")


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


# ------------------------------------------------------------------- memory
# The numbers come from the same allocator torch.accelerator reads.


def _dev(device):
    idx = _get_device_index(device)
    n = device_count()
    if not 0 <= idx < n:  # also before the runtime starts (it would read 0)
        raise RuntimeError(
            f"neuron error: invalid device ordinal: device index {idx} is out of range; "
            f"{n} neuron device(s) are visible (set NEURON_RT_VISIBLE_CORES to choose them)"
        )
    return idx


def memory_stats(device: _device_t = None) -> "collections.OrderedDict[str, Any]":
    return torch.accelerator.memory_stats(_dev(device))


def memory_stats_as_nested_dict(device: _device_t = None) -> dict:
    _C._lazy_init()
    return torch._C._accelerator_getDeviceStats(_dev(device))


def memory_allocated(device: _device_t = None) -> int:
    return torch.accelerator.memory_allocated(_dev(device))


def max_memory_allocated(device: _device_t = None) -> int:
    return torch.accelerator.max_memory_allocated(_dev(device))


def memory_reserved(device: _device_t = None) -> int:
    return torch.accelerator.memory_reserved(_dev(device))


def max_memory_reserved(device: _device_t = None) -> int:
    return torch.accelerator.max_memory_reserved(_dev(device))


def reset_peak_memory_stats(device: _device_t = None) -> None:
    _C._lazy_init()
    torch.accelerator.reset_peak_memory_stats(_dev(device))


def reset_accumulated_memory_stats(device: _device_t = None) -> None:
    _C._lazy_init()
    torch.accelerator.reset_accumulated_memory_stats(_dev(device))


def reset_max_memory_allocated(device: _device_t = None) -> None:
    reset_peak_memory_stats(device)


def set_per_process_memory_fraction(fraction: float, device: _device_t = None) -> None:
    """Limits this process to fraction (0..1) of the device's memory; an
    allocation past it raises torch.OutOfMemoryError (as torch.cuda's)."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, _dev(device))


def get_per_process_memory_fraction(device: _device_t = None) -> float:
    return _C._get_memory_fraction(_dev(device))


def host_memory_stats() -> "collections.OrderedDict[str, Any]":
    """Statistics of the pinned host memory allocator (torch.cuda's keys)."""
    return collections.OrderedDict(sorted(_C._host_memory_stats().items()))


def reset_peak_host_memory_stats() -> None:
    _C._reset_host_memory_stats(True)


def reset_accumulated_host_memory_stats() -> None:
    _C._reset_host_memory_stats(False)


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


def empty_cache() -> None:
    if is_initialized():
        torch._C._accelerator_emptyCache()


def mem_get_info(device: _device_t = None) -> tuple:
    """(free, total) bytes of the device's modelled HBM."""
    _C._lazy_init()
    return torch.accelerator.get_memory_info(_dev(device))


def memory_summary(device: _device_t = None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator's statistics."""
    idx = _dev(device)
    stats = memory_stats(idx)

    def fmt(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    rows = [
        ("Allocated memory", "allocated_bytes", fmt),
        ("Active memory", "active_bytes", fmt),
        ("Requested memory", "requested_bytes", fmt),
        ("Reserved memory", "reserved_bytes", fmt),
        ("Non-releasable memory", "inactive_split_bytes", fmt),
        ("Allocations", "allocation", str),
        ("Active allocs", "active", str),
        ("Reserved segments", "segment", str),
    ]
    free, total = mem_get_info(idx)
    lines = [
        "=" * 75,
        f" neuron:{idx} memory summary ({get_device_name(idx)})",
        f" capacity {fmt(total)}, free {fmt(free)}",
        "-" * 75,
        f" {'Metric':<24}{'Cur Usage':>12}{'Peak Usage':>12}{'Tot Alloc':>13}{'Tot Freed':>13}",
        "-" * 75,
    ]
    for title, key, f in rows:
        g = lambda k, key=key: stats.get(f"{key}.all.{k}", 0)  # noqa: E731
        lines.append(
            f" {title:<24}{f(g('current')):>12}{f(g('peak')):>12}"
            f"{f(g('allocated')):>13}{f(g('freed')):>13}"
        )
    lines += [
        "-" * 75,
        f" OOMs: {stats.get('num_ooms', 0)}   alloc retries: {stats.get('num_alloc_retries', 0)}",
        "=" * 75,
    ]
    return "\n".join(lines) + "\n"


from . import (  # noqa: E402  (torch.neuron.amp / torch.neuron.random)
    amp,
    memory,  # noqa: E402  (torch.neuron.memory)
    random,
)
from .graphs import NeuronGraph, graph, is_current_stream_capturing  # noqa: E402,F401
from .memory import MemPool, memory_snapshot, use_mem_pool  # noqa: E402,F401

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
