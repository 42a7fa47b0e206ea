"""Graph capture and replay on the software NeuronCore: torch.neuron.NeuronGraph
and torch.neuron.graph, as torch.cuda.CUDAGraph and torch.cuda.graph.

While a stream captures, every kernel launched on it (eager ops, compiled
kernels, users' C kernels) is recorded instead of run; ``replay()`` queues
the recording on the current stream as one task that runs the kernels in
order. A replay skips Python, the dispatcher and each op's launch, so a
sequence of small ops (batch-1 decoding) costs one launch. As with CUDA
graphs, a replay reads and writes the memory the capture used: refill the
captured input tensors in place, read the captured outputs; tensors
allocated during the capture come from a private memory pool that lives as
long as the graph (``pool()`` shares it with another capture).

Not permitted while capturing (RuntimeError, as on CUDA): synchronising the
stream or the device, anything that reads device data on the host (.item(),
.cpu(), ops whose output size depends on data), recording events on the
capturing stream, making it wait on another stream's pending work, and
random number generation (each replay would repeat the captured numbers).
"""

from __future__ import annotations

import gc

import torch

from . import _C
from .memory import MemPool, use_mem_pool


def is_current_stream_capturing() -> bool:
    s = torch.neuron.current_stream()
    return _C._stream_is_capturing(s.device_index, s.stream_id)


class NeuronGraph:
    """A captured sequence of device work (torch.cuda.CUDAGraph's API)."""

    def __init__(self, keep_graph: bool = False):
        self._graph = 0
        self._pool: MemPool | None = None
        self._capture = None  # (device, stream id, use_mem_pool context) while capturing

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        if self._capture is not None:
            raise RuntimeError("NeuronGraph: capture_begin called twice")
        self.reset()
        if pool is not None and not isinstance(pool, MemPool):
            raise TypeError(
                f"NeuronGraph: pool must be a MemPool or another graph's pool(), got {pool!r}"
            )
        self._pool = pool if pool is not None else MemPool()
        s = torch.neuron.current_stream()
        ctx = use_mem_pool(self._pool, s.device_index)
        ctx.__enter__()
        try:
            _C._graph_capture_begin(s.device_index, s.stream_id)
        except BaseException:
            ctx.__exit__(None, None, None)
            raise
        self._capture = (s.device_index, s.stream_id, ctx)

    def capture_end(self) -> None:
        if self._capture is None:
            raise RuntimeError("NeuronGraph: capture_end without capture_begin")
        device, stream, ctx = self._capture
        self._capture = None
        try:
            self._graph = _C._graph_capture_end(device, stream)
            self._device = device
        finally:
            ctx.__exit__(None, None, None)

    def instantiate(self) -> None:
        pass  # a capture is ready to replay as soon as it ends

    def replay(self) -> None:
        if not self._graph:
            raise RuntimeError("NeuronGraph: replay before a capture (or after reset)")
        s = torch.neuron.current_stream(self._device)
        _C._graph_launch(self._graph, self._device, s.stream_id)

    def reset(self) -> None:
        if self._graph:
            _C._graph_destroy(self._graph)
            self._graph = 0
        self._pool = None

    def pool(self) -> MemPool:
        """The memory pool of this graph, to share with another capture."""
        if self._pool is None:
            raise RuntimeError("NeuronGraph: no pool before capture_begin")
        return self._pool

    def num_tasks(self) -> int:
        """How many kernels and copies the capture recorded."""
        return _C._graph_task_count(self._graph) if self._graph else 0

    def __del__(self):
        try:
            self.reset()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class graph:
    """``with torch.neuron.graph(g):`` captures the block into g, on a side
    stream by default (torch.cuda.graph)."""

    default_capture_stream = None

    def __init__(
        self, neuron_graph: NeuronGraph, pool=None, stream=None, capture_error_mode="global"
    ):
        if stream is None:
            if graph.default_capture_stream is None:
                graph.default_capture_stream = torch.neuron.Stream()
            stream = graph.default_capture_stream
        self.neuron_graph = neuron_graph
        self.pool = pool
        self.capture_stream = stream
        self.stream_ctx = torch.neuron.stream(stream)

    def __enter__(self):
        torch.neuron.synchronize()
        gc.collect()
        torch.neuron.empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.neuron_graph.capture_begin(self.pool)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            self.neuron_graph.capture_end()
            if exc[0] is not None:
                self.neuron_graph.reset()  # a failed capture leaves nothing to replay
        finally:
            self.stream_ctx.__exit__(*exc)
        return False


__all__ = ["NeuronGraph", "graph", "is_current_stream_capturing"]
