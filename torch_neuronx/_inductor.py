"""Inductor for the neuron device.

Device memory of the software NeuronCore is host-addressable, so Inductor's
C++ code generation (``CppScheduling``) writes the device's fused kernels.
What differs from the CPU backend is where they run: a generated kernel is a
task on the current stream of its tensors' device (``_C._launch_compiled``),
in order with the eager work queued before it and after it, as a CUDA
kernel is. The host never waits for the device to launch one; extern calls
in the graph (``aten.mm``, attention, ...) dispatch to the neuron kernels
and queue on the same stream.

This module imports Inductor; ``torch_neuronx._compile`` registers the
backend when Inductor is first imported and imports this module only when
Inductor generates code for a neuron graph.
"""

from __future__ import annotations

import ast
import re

import torch
from torch._inductor.codecache import LambdaFuture
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

from ._packed import launcher, packed_entry

_PYBINDING = re.compile(r"\s*async_compile\.cpp_pybinding\((\[.*?\]), r'''(.*)'''\)\s*$", re.S)


def _launcher(fn, fmt: str, name: str):
    """The callable the wrapper calls: queues the kernel of fn's module."""
    module = fn.__self__  # the extension module Inductor built and imported
    return launcher(module.__file__, "neuron_packed_kernel", fmt, name)


def neuron_kernel(compiled, fmt: str, name: str):
    """Used by the generated wrapper: compiled is what
    ``async_compile.cpp_pybinding`` returned (a function, or a future of one
    when Inductor compiles in parallel)."""
    if isinstance(compiled, LambdaFuture) or hasattr(compiled, "result"):
        return LambdaFuture(lambda: _launcher(compiled.result(), fmt, name))
    return _launcher(compiled, fmt, name)


def _rewrite_kernel_definition(kernel_name: str, body: str) -> str:
    m = _PYBINDING.match(body)
    if m is None:
        raise NotImplementedError(
            f"torch_neuronx: unexpected form of the C++ kernel definition {kernel_name}"
        )
    argtypes = ast.literal_eval(m.group(1))
    fmt, entry = packed_entry(argtypes, "kernel", "neuron_packed_kernel", cxx=True)
    src = m.group(2) + entry
    return (
        f"neuron_kernel(async_compile.cpp_pybinding({argtypes!r}, r'''{src}'''), "
        f"{fmt!r}, {kernel_name!r})"
    )


class _NeuronKernelCalls:
    """Kernel definitions and calls of the neuron wrapper (mixed into the
    wrapper and subgraph wrapper codegen)."""

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        if (
            not gpu
            and "async_compile.cpp_pybinding(" in kernel_body
            and V.graph.get_current_device_or_throw().type == "neuron"
        ):
            kernel_body = _rewrite_kernel_definition(kernel_name, kernel_body)
        super().define_kernel(
            kernel_name, kernel_body, metadata=metadata, gpu=gpu, cpp_definition=cpp_definition
        )

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if device.type == "neuron" and not kwargs.get("triton", True):
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, **kwargs)


class NeuronSubgraphWrapperCodegen(_NeuronKernelCalls, SubgraphPythonWrapperCodegen):
    pass


class NeuronWrapperCodegen(_NeuronKernelCalls, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return NeuronSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return NeuronWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from torch_neuronx._inductor import neuron_kernel")


__all__ = ["NeuronWrapperCodegen", "neuron_kernel", "torch"]
