"""torch.compile(mode="reduce-overhead") on neuron: compiled inference
graphs replayed from a NeuronGraph capture, the part of CUDA graph trees a
single stream needs.

Per distinct value of the graph's non-tensor inputs (its symbolic sizes;
with static shapes there are none) the first call runs the compiled graph
normally, then captures it on static copies of its inputs; later calls copy
the new inputs into the copies, replay the capture (one launch) and return
clones of the captured outputs, so an output a caller keeps is never
overwritten by the next call (CUDA graph trees detect that case and raise;
the clone makes it impossible). Inputs that must keep their address
(parameters and buffers Inductor marks static, inputs the graph mutates,
such as a static KV cache) are not copied: when one moves, the graph is
captured again. Dynamo's guards fix every other property of the inputs a
compiled graph depends on (shapes given the integers, strides, dtypes,
devices), so, as CUDA graph trees do, only the non-tensor inputs key the
captures: a key over every tensor's shape and strides cost about 160 us a
call on a 4-layer Llama decode step (55 inputs), more than the replay it
keys. A capture that fails (random numbers, a host read of device data, an
op through the CPU fallback) leaves the graph running without capture, with
a warning. Graphs with CPU tensor inputs are not captured. Training graphs
are not captured (their forward and backward would have to be captured
together).
"""

from __future__ import annotations

import warnings

import torch

from .graphs import NeuronGraph

# Captures kept per compiled graph (one per value of its non-tensor inputs).
MAX_CAPTURES = 8

_warned: set[str] = set()


def warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(
            f"torch.compile graph capture on neuron (mode='reduce-overhead'): {reason}; "
            "running without capture",
            UserWarning,
            stacklevel=3,
        )


_side_streams: dict[int, torch.Stream] = {}


def _side_stream(device: int) -> torch.Stream:
    if device not in _side_streams:
        _side_streams[device] = torch.neuron.Stream(device)
    return _side_streams[device]


class _Capture:
    __slots__ = ("graph", "static_inputs", "static_outputs", "copy_idxs", "kept_idxs", "kept_ptrs")


class NeuronGraphRunner:
    """Replaces a CompiledFxGraph's current_callable (a callable taking the
    list of inputs, which it clears)."""

    def __init__(self, fn, keep_address_idxs):
        self.fn = fn
        self.keep_address = frozenset(keep_address_idxs)
        self.captures: dict[tuple, _Capture] = {}
        self.disabled = False
        self.scalar_idxs: list[int] | None = None  # where the non-tensor inputs are

    def __call__(self, inputs):
        if self.disabled:
            return self.fn(inputs)
        if self.scalar_idxs is None:
            self.scalar_idxs = [i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)]
        key = tuple([inputs[i] for i in self.scalar_idxs])
        c = self.captures.get(key)
        if c is not None and [inputs[i].data_ptr() for i in c.kept_idxs] != c.kept_ptrs:
            del self.captures[key]  # a parameter or mutated input moved: capture again
            c = None
        if c is None:
            if len(self.captures) >= MAX_CAPTURES:
                warn_once(f"more than {MAX_CAPTURES} input sizes for one graph")
                return self.fn(inputs)
            return self._capture(key, inputs)
        for i in c.copy_idxs:
            c.static_inputs[i].copy_(inputs[i])
        inputs.clear()
        c.graph.replay()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in c.static_outputs]

    def _capture(self, key, inputs):
        c = _Capture()
        c.copy_idxs = [
            i
            for i, x in enumerate(inputs)
            if isinstance(x, torch.Tensor) and i not in self.keep_address
        ]
        c.kept_idxs = [
            i
            for i, x in enumerate(inputs)
            if isinstance(x, torch.Tensor) and i in self.keep_address
        ]
        c.kept_ptrs = [inputs[i].data_ptr() for i in c.kept_idxs]
        c.static_inputs = list(inputs)
        for i in c.copy_idxs:
            x = inputs[i]
            c.static_inputs[i] = torch.empty_strided(
                x.shape, x.stride(), dtype=x.dtype, device=x.device
            ).copy_(x)
        outputs = self.fn(list(inputs))  # this call's result, run as usual
        inputs.clear()
        # Captured on a side stream that first waits for the current one (no
        # device synchronize, no gc.collect: torch.neuron.graph's set-up costs
        # more than a capture here, and inputs change address per generate()).
        c.graph = NeuronGraph()
        current = torch.neuron.current_stream()
        side = _side_stream(current.device_index)
        side.wait_stream(current)
        try:
            with torch.neuron.stream(side):
                c.graph.capture_begin()
                try:
                    static_outputs = self.fn(list(c.static_inputs))
                finally:
                    c.graph.capture_end()
        except RuntimeError as e:
            self.disabled = True
            self.captures.clear()
            warn_once(f"the graph cannot be captured ({str(e).splitlines()[0]})")
            return outputs
        c.static_outputs = list(static_outputs)
        self.captures[key] = c
        return outputs


def wrap(compiled_graph, graph_kwargs) -> None:
    """Called after Inductor's post_compile of a neuron graph compiled with
    cudagraphs on (mode="reduce-overhead" or "max-autotune")."""
    if graph_kwargs.get("is_backward") or not compiled_graph.fx_kwargs.get("is_inference"):
        warn_once("training graphs are not captured yet (inference graphs are)")
        return
    if "cpu" in compiled_graph.device_types:
        warn_once("the graph also computes on the CPU")
        return
    keep = set(compiled_graph.fx_kwargs.get("static_input_idxs") or ())
    keep |= set(compiled_graph.mutated_input_idxs or ())
    compiled_graph.current_callable = NeuronGraphRunner(compiled_graph.current_callable, keep)
