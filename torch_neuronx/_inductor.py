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
    return launcher(module.__file__, "neuron_packed_kernel", fmt, name, team=True)


def neuron_kernel(compiled, fmt: str, name: str):
    """Used by the generated wrapper: compiled is what
    ``async_compile.cpp_pybinding`` returned (a function, or a future of one
    when Inductor compiles in parallel)."""
    if isinstance(compiled, LambdaFuture) or hasattr(compiled, "result"):
        return LambdaFuture(lambda: _launcher(compiled.result(), fmt, name))
    return _launcher(compiled, fmt, name)


# The OpenMP constructs of Inductor's C++ kernels, which GCC turns into calls
# to GOMP_parallel, GOMP_barrier, GOMP_single_start, omp_get_thread_num and
# omp_get_num_threads (static loop schedules are computed inline).
_OMP_PRAGMA = re.compile(r"^\s*#\s*pragma\s+omp\s+(.*?)\s*$", re.M)
_OMP_SUPPORTED = re.compile(
    r"(parallel( for)?( num_threads\(\d+\))?"
    r"|for( nowait| collapse\(\d+\)| schedule\(static(,\s*\d+)?\))*"
    r"|single|barrier|simd.*|declare simd.*)"
    r"( schedule\(static(,\s*\d+)?\))?( nowait)?"
)
_OMP_CALL = re.compile(r"\bomp_[A-Za-z_]+(?=\s*\()")
_OMP_CALLS = {"omp_get_thread_num", "omp_get_num_threads", "omp_get_max_threads"}

# Binds those calls, inside the kernel's own library (hidden symbols win over
# libgomp's), to the runtime's teams (tnrt_team_*): the kernel's parallel
# regions run on the device's thread pool, whose threads are placed one per
# CPU, instead of an OpenMP team started by the stream worker. That team
# would inherit the worker's CPU, and its threads spin between kernels on
# the CPUs the pool's next kernel needs.
_TEAM_SHIM = r"""
namespace {
struct tn_team_ops {
    uint32_t size;
    void (*run)(void (*)(void*), void*, unsigned);
    void (*barrier)();
    int (*single_start)();
    int (*thread_num)();
    int (*num_threads)();
    int (*max_threads)();
};
const tn_team_ops* tn_team = nullptr;
}
#define TN_HIDDEN __attribute__((visibility("hidden")))
extern "C" {
__attribute__((visibility("default"))) int neuron_set_team(const void* ops) {
    const tn_team_ops* t = static_cast<const tn_team_ops*>(ops);
    if (t == nullptr || t->size != sizeof(tn_team_ops)) return 1;
    tn_team = t;
    return 0;
}
TN_HIDDEN void GOMP_parallel(void (*fn)(void*), void* data, unsigned n, unsigned flags) {
    (void)flags;
    tn_team->run(fn, data, n);
}
TN_HIDDEN void GOMP_barrier(void) { tn_team->barrier(); }
TN_HIDDEN bool GOMP_single_start(void) { return tn_team->single_start() != 0; }
TN_HIDDEN int omp_get_thread_num(void) noexcept { return tn_team->thread_num(); }
TN_HIDDEN int omp_get_num_threads(void) noexcept { return tn_team->num_threads(); }
TN_HIDDEN int omp_get_max_threads(void) noexcept { return tn_team->max_threads(); }
}
"""


def runs_on_pool(src: str) -> bool:
    """Whether the kernel source uses only the OpenMP constructs that
    _TEAM_SHIM provides (anything else keeps libgomp)."""
    if not all(_OMP_SUPPORTED.fullmatch(p) for p in _OMP_PRAGMA.findall(src)):
        return False
    return set(_OMP_CALL.findall(src)) <= _OMP_CALLS


def _rewrite_kernel_definition(kernel_name: str, body: str) -> str:
    m = _PYBINDING.match(body)
    if m is None:
        raise NotImplementedError(
            f"torch_neuronx: unexpected form of the C++ kernel definition {kernel_name}"
        )
    argtypes = ast.literal_eval(m.group(1))
    fmt, entry = packed_entry(argtypes, "kernel", "neuron_packed_kernel", cxx=True)
    src = m.group(2)
    src += (_TEAM_SHIM if runs_on_pool(src) else "") + entry
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
