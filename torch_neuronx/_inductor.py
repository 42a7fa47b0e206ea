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
import ctypes
import functools
import re

import torch
from torch._inductor.codecache import LambdaFuture
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

from . import _C

_PYBINDING = re.compile(r"\s*async_compile\.cpp_pybinding\((\[.*?\]), r'''(.*)'''\)\s*$", re.S)

# C++ argument type of a generated kernel -> (slot kind for _launch_compiled,
# expression that turns the 64-bit slot a[i] back into the argument).
_INT_TYPES = {"int64_t": "i", "long": "i", "int": "i", "bool": "i", "uintptr_t": "u"}


def _slot(ctype: str, i: int) -> tuple[str, str]:
    t = ctype.strip()
    if t.endswith("*"):
        return "p", f"reinterpret_cast<{t}>(static_cast<uintptr_t>(a[{i}]))"
    base = t.removeprefix("const ").strip()
    if base in _INT_TYPES:
        return _INT_TYPES[base], f"static_cast<{base}>(a[{i}])"
    if base in ("float", "double"):
        return "f", f"static_cast<{base}>(neuron_slot_float(a[{i}]))"
    raise NotImplementedError(
        f"torch_neuronx: a generated kernel takes an argument of C++ type {ctype!r}, "
        "which the neuron launcher cannot pass yet"
    )


def _packed_entry(argtypes: list[str]) -> tuple[str, str]:
    """The launcher format and the C++ entry that unpacks it and calls kernel()."""
    slots = [_slot(t, i) for i, t in enumerate(argtypes)]
    fmt = "".join(k for k, _ in slots)
    call = ", ".join(e for _, e in slots)
    src = f"""
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
static inline float neuron_slot_float(uint64_t v) {{
    uint32_t bits = static_cast<uint32_t>(v);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}}
extern "C" __attribute__((visibility("default")))
int neuron_packed_kernel(const uint64_t* a, char* msg, size_t msg_size) {{
    (void)a;
    try {{
        kernel({call});
        return 0;
    }} catch (const std::exception& e) {{
        if (std::strstr(e.what(), "ZeroDivisionError") != nullptr) return 1;
        std::snprintf(msg, msg_size, "%s", e.what());
        return 2;
    }} catch (...) {{
        std::snprintf(msg, msg_size, "unknown C++ exception");
        return 2;
    }}
}}
"""
    return fmt, src


def _launcher(fn, fmt: str, name: str):
    """The callable the wrapper calls: queues the kernel of fn's module."""
    module = fn.__self__  # the extension module Inductor built and imported
    lib = ctypes.CDLL(module.__file__)  # the same loaded library
    addr = ctypes.cast(lib.neuron_packed_kernel, ctypes.c_void_p).value
    return functools.partial(_C._launch_compiled, addr, fmt, _C._compiled_kernel_name(name))


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
    fmt, entry = _packed_entry(argtypes)
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
