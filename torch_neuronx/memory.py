"""``torch.neuron.memory``: memory statistics, history and snapshots, as
``torch.cuda.memory``. A snapshot has the layout of
``torch.cuda.memory._snapshot()``, so PyTorch's memory visualiser
(``torch.cuda._memory_viz``, or the file from ``_dump_snapshot`` dropped on
pytorch.org/memory_viz) reads it."""

import collections
import contextlib
import itertools
import pickle
import sys
import threading
from typing import Any, Literal

import torch

from . import _C
from ._utils import _dev, _device_t

# The numbers come from the same allocator torch.accelerator reads.


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


def empty_cache() -> None:
    if _C._is_initialized():
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
        f" neuron:{idx} memory summary ({_C._get_device_properties(idx)['name']})",
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


def _record_memory_history(
    enabled: Literal[None, "state", "all"] = "all",
    context: Literal[None, "state", "alloc", "all"] = "all",
    stacks: Literal["python", "all"] = "all",
    max_entries: int = sys.maxsize,
    device: "_device_t" = None,
) -> None:
    """Starts (or, with ``enabled=None``, stops) recording allocation
    history: ``"all"`` keeps a trace of every allocation and free (the last
    ``max_entries`` per device) with its Python stack, ``"state"`` only the
    stack of each live block. ``context="all"`` also records the stacks of
    frees; ``stacks="all"`` adds C++ frames. Covers every neuron device."""
    if isinstance(enabled, bool):  # the legacy spelling
        enabled = "all" if enabled else None
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    _C._record_memory_history(enabled or "none", context or "none", stacks, int(max_entries))


def _snapshot(device: "_device_t" = None) -> dict:
    """The allocator's state (``segments``, each with its ``blocks`` and the
    stack that allocated each live block) and the recorded history
    (``device_traces``, one list of events per device)."""
    return _C._memory_snapshot()


def memory_snapshot() -> list:
    """The allocator's segments, as ``torch.cuda.memory_snapshot()``."""
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Writes ``_snapshot()`` to a pickle file the memory visualiser opens."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


_pool_ids = itertools.count(1)
_current = threading.local()  # per thread: device -> stack of pool ids in use


class MemPool:
    """A pool of device memory in the caching allocator (torch.cuda.MemPool):
    allocations made inside ``use_mem_pool(pool)`` take segments of their
    own, and their blocks, once freed, serve only later allocations to the
    same pool. Its unused segments are released when the pool is deleted;
    while it lives, ``empty_cache`` and the allocator's retry after a failed
    allocation leave them alone (a graph replays into them), as CUDA's."""

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False):
        if allocator is not None:
            raise NotImplementedError("neuron: MemPool with a custom allocator is not supported")
        self._id = (0, next(_pool_ids))
        self._devices = set()

    @property
    def id(self) -> tuple:
        return self._id

    def snapshot(self) -> list:
        """The segments of this pool, as ``memory_snapshot()`` lists them."""
        return [s for s in memory_snapshot() if tuple(s["segment_pool_id"]) == self._id]

    def __del__(self):
        for d in getattr(self, "_devices", ()):
            try:
                _C._mempool_release(d, self._id[1])
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: "_device_t" = None):
    """Routes this thread's allocations on the device to ``pool``."""
    d = _dev(device)
    pool._devices.add(d)
    stacks = getattr(_current, "stacks", None)
    if stacks is None:
        stacks = _current.stacks = {}
    stack = stacks.setdefault(d, [])
    stack.append(pool.id[1])
    _C._mempool_use(d, pool.id[1])
    try:
        yield
    finally:
        stack.pop()
        _C._mempool_use(d, stack[-1] if stack else 0)


__all__ = [
    "MemPool",
    "use_mem_pool",
    "_record_memory_history",
    "_snapshot",
    "_dump_snapshot",
    "memory_snapshot",
    "memory_stats",
    "memory_allocated",
    "memory_reserved",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_summary",
    "empty_cache",
    "mem_get_info",
]
