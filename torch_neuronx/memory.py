"""``torch.neuron.memory``: memory statistics, history and snapshots, as
``torch.cuda.memory``. A snapshot has the layout of
``torch.cuda.memory._snapshot()``, so PyTorch's memory visualiser
(``torch.cuda._memory_viz``, or the file from ``_dump_snapshot`` dropped on
pytorch.org/memory_viz) reads it."""

import contextlib
import itertools
import pickle
import sys
import threading
from typing import Literal

from . import _C
from .neuron import (  # noqa: F401  (the statistics, under their torch.cuda.memory names)
    _dev,
    _device_t,
    empty_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)


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
    same pool. Its unused segments are released when the pool is deleted
    (and by ``empty_cache``)."""

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
