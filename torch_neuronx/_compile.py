"""torch.compile for the neuron device: Dynamo's DeviceInterface, the
Inductor backend (torch_neuronx._inductor) and the Dynamo backend "neuron".

Importing Dynamo or Inductor costs more than a second, so ``import torch``
does not: ``install()`` (run at autoload) registers each piece right after
PyTorch itself imports the module it extends (an import hook on
``torch._dynamo.device_interface`` and ``torch._inductor.codegen.common``),
or at once when that module is already loaded.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def _register_device_interface(module) -> None:
    from torch._dynamo.device_interface import DeviceInterface

    class NeuronInterface(DeviceInterface):
        device = torch.neuron.device
        Event = torch.neuron.Event
        Stream = torch.neuron.Stream

        class Worker:
            # Inductor's compile workers (forked or spawned processes) ask
            # these: answered from values the parent cached, as CUDA's are,
            # so a worker never initialises the runtime.
            @staticmethod
            def set_device(device: int) -> None:
                module.caching_worker_current_devices["neuron"] = device

            @staticmethod
            def current_device() -> int:
                cached = module.caching_worker_current_devices.get("neuron")
                return cached if cached is not None else torch.neuron.current_device()

            @staticmethod
            def get_device_properties(device=None):
                if isinstance(device, str):
                    device = torch.device(device)
                index = device.index if isinstance(device, torch.device) else device
                if index is None:
                    index = NeuronInterface.Worker.current_device()
                props = module.caching_worker_device_properties.get("neuron")
                if props is None:
                    props = [
                        torch.neuron.get_device_properties(i)
                        for i in range(torch.neuron.device_count())
                    ]
                    module.caching_worker_device_properties["neuron"] = props
                return props[index]

        current_device = staticmethod(torch.neuron.current_device)
        set_device = staticmethod(torch.neuron.set_device)
        device_count = staticmethod(torch.neuron.device_count)
        stream = staticmethod(torch.neuron.stream)
        current_stream = staticmethod(torch.neuron.current_stream)
        set_stream = staticmethod(torch.neuron.set_stream)
        synchronize = staticmethod(torch.neuron.synchronize)
        get_device_properties = staticmethod(torch.neuron.get_device_properties)
        memory_allocated = staticmethod(torch.neuron.memory_allocated)
        is_available = staticmethod(torch.neuron.is_available)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            torch.neuron.set_stream(
                torch.Stream(
                    stream_id=stream_id, device_index=device_index, device_type=device_type
                )
            )

        @staticmethod
        def exchange_device(device: int) -> int:
            prev = torch.neuron.current_device()
            if device >= 0 and device != prev:
                torch.neuron.set_device(device)
            return prev

        maybe_exchange_device = exchange_device

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return torch.neuron.current_stream(device_idx).stream_id

        @staticmethod
        def get_compute_capability(device=None) -> str:
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

        @staticmethod
        def raise_if_triton_unavailable(device=None) -> None:
            raise RuntimeError("the neuron device compiles with Inductor's C++ backend, not Triton")

    module.register_interface_for_device("neuron", NeuronInterface)
    for i in range(torch.neuron.device_count()):
        module.register_interface_for_device(f"neuron:{i}", NeuronInterface)


# Setting a generator's state is a side effect Dynamo must not trace:
# torch.neuron.set_rng_state clones the state tensor before handing it to the
# generator, and traced inside a region that turned dispatch off (PyTorch's
# freeze_rng_state, around every seeded op of its test suite) the clone
# failed the compile. Run eagerly, between graphs, as CUDA's runs.
def _keep_rng_state_out_of_graphs(decorators) -> None:
    from . import neuron

    neuron.set_rng_state = decorators.disable(
        neuron.set_rng_state, reason="sets a generator's state (a side effect)"
    )


def _register_inductor(common) -> None:
    # Runs while Inductor's own modules are still importing: the wrapper and
    # the scheduling (which import the rest of Inductor) load on first use.
    class NeuronDeviceOpOverrides(common.DeviceOpOverrides):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"def {name}(_):\n    return 0\n"

        def set_device(self, device_idx: int) -> str:
            return f"torch.neuron.set_device({device_idx})"

        def synchronize(self) -> str:
            return "torch.neuron.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.neuron.device({device_idx})"

        def cpp_kernel_type(self) -> str:
            return "void*"

    class NeuronWrapper:
        supports_caching = True

        @staticmethod
        def create(*args, **kwargs):
            from ._inductor import NeuronWrapperCodegen

            return NeuronWrapperCodegen.create(*args, **kwargs)

    class NeuronScheduling:
        # Inductor wants a class here (it checks that it is not Triton's).
        def __new__(cls, scheduler):
            from torch._inductor.codegen.cpp import CppScheduling

            return CppScheduling(scheduler)

    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    class NeuronGraphPass(CustomGraphModulePass):
        """The post-grad pass of neuron graphs. Its uuid enters Inductor's FX
        graph cache key, so code cached by another version of this backend
        (its Python code generation or its launcher in _C) is not reused."""

        def __call__(self, gm: torch.fx.GraphModule) -> None:
            from ._flex_attention import rewrite_flex_attention

            rewrite_flex_attention(gm)

        def uuid(self) -> str:
            return _backend_version()

    common.register_backend_for_device(
        "neuron", NeuronScheduling, NeuronWrapper, device_custom_pass=NeuronGraphPass()
    )
    common.register_device_op_overrides("neuron", NeuronDeviceOpOverrides())


# Inductor equates "cpu" with its C++ code generation in its heuristics and
# fusion rules (a node "is_cpu" when the C++ backend will compile it: loop
# reindexing and reordering in fusion are off for it, its realisation
# thresholds differ). Neuron graphs are compiled by that same backend, so
# these two predicates answer for both devices. Decisions about memory
# (pinned buffers, host-to-device copies) test device.type directly and are
# left alone.
def _patch_ir(ir) -> None:
    original = ir.is_cpu

    def is_cpu(x) -> bool:
        return original(x) or ir.get_device_type(x) == "neuron"

    ir.is_cpu = is_cpu


def _patch_utils(utils) -> None:
    # The code generator in charge of the current device: "cpp" for neuron,
    # as for the CPU (Inductor's default answer for a device it does not
    # know is its CUDA backend, Triton). Modules that imported the function
    # by name before this ran get the wrapper too.
    original = utils.get_current_backend

    def get_current_backend(device_type: str | None = None) -> str:
        if device_type is None:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type == "neuron" else original(device_type)

    # The wrapper enters a device guard (torch.neuron.device(i)) around a
    # device's code, as for CUDA: its buffers are allocated on the current
    # device, which must be the tensors' (neuron:1 graphs while neuron:0 is
    # current).
    original_guard = utils.device_need_guard

    def device_need_guard(device: str) -> bool:
        return device == "neuron" or original_guard(device)

    utils.get_current_backend = get_current_backend
    utils.device_need_guard = device_need_guard
    for name in ("codegen.common", "scheduler", "kernel.mm_common"):
        module = sys.modules.get("torch._inductor." + name)
        if module is None:
            continue
        if getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = get_current_backend
        if getattr(module, "device_need_guard", None) is original_guard:
            module.device_need_guard = device_need_guard


def _patch_scheduler(scheduler) -> None:
    def is_cpu(self) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "neuron")

    scheduler.BaseSchedulerNode.is_cpu = is_cpu


# Lowering choices Inductor ties to its C++ code generation, or to the CPU's
# numerics, by testing device.type == "cpu" (or "triton or cpu+cpp"): neuron
# graphs are written by the same generator and must match the CPU, so they
# take the CPU's branch. On the other branch they were wrong or failed: a
# flattened argmax/argmin of a transposed input returned the index in memory
# order; x / c became x * (1/c) (1-ulp differences from eager, and a finite
# result where c overflows fp32); the masked concatenation CPU never uses
# (pointwise_cat) hit a sympy error in Inductor's loop simplification (HF
# prophetnet). And a CPU scalar tensor as the first operand of a pointwise op
# made the output a CPU tensor: Inductor puts a mixed op on the accelerator
# only for its GPU device types. (Audited against every device test in
# torch/_inductor of the pinned torch; memory placement, pinned buffers and
# the CPU-only oneDNN/CPP-template paths stay keyed to "cpu".)
def _patch_lowering(lowering) -> None:
    ir = lowering.ir

    def on_neuron(x) -> bool:
        return isinstance(x, ir.IRNode) and ir.get_device_type(x) == "neuron"

    # cat: CPU always builds a ConcatKernel unless config.force_pointwise_cat
    # (pointwise_cat is called only where the CPU's branch would have made one)
    pointwise_cat = lowering.pointwise_cat

    def neuron_pointwise_cat(inputs, dim=0):
        if on_neuron(inputs[0]) and not lowering.config.force_pointwise_cat:
            return lowering.TensorBox(ir.ConcatKernel.create(inputs, dim))
        return pointwise_cat(inputs, dim)

    # right-padding as a cat: skipped on CPU, whose cat never fuses the fill
    pad_as_cat = lowering._pad_as_cat

    def neuron_pad_as_cat(x, padding, fill_value):
        return None if on_neuron(x) else pad_as_cat(x, padding, fill_value)

    # arg-reductions over several dimensions of a non-contiguous input: the
    # C++ generator computes the logical linear index (as Triton does), and
    # the predicate that enables it reads "is_triton(x) or cpu with cpp";
    # lowering's is_triton answers yes for neuron during this call only
    make_reduction_inner = lowering._make_reduction_inner
    is_triton = lowering.is_triton

    def neuron_make_reduction_inner(x, **kwargs):
        if not on_neuron(x):
            return make_reduction_inner(x, **kwargs)
        lowering.is_triton = lambda node: on_neuron(node) or is_triton(node)
        try:
            return make_reduction_inner(x, **kwargs)
        finally:
            lowering.is_triton = is_triton

    # division by a constant stays a division (CPU keeps it for precision)
    get_constant_value = lowering.get_constant_value

    def neuron_get_constant_value(x):
        return None if on_neuron(x) else get_constant_value(x)

    # the device of a pointwise op over a CPU scalar and a neuron tensor
    is_gpu = lowering.is_gpu

    def neuron_is_gpu(device_type) -> bool:
        return device_type == "neuron" or is_gpu(device_type)

    # var/var_mean: the two-pass form up to CPU's threshold, not Welford's
    use_two_step_variance = lowering.use_two_step_variance

    def neuron_use_two_step_variance(x, axis, keepdim, input_dtype):
        if not on_neuron(x):
            return use_two_step_variance(x, axis, keepdim, input_dtype)
        threshold = lowering.config.cpp.use_two_step_variance_threshold
        with lowering.config.patch(unroll_reductions_threshold=threshold):
            return use_two_step_variance(x, axis, keepdim, input_dtype)

    # scatter_reduce(sum): ATen's kernel, as on CPU, not atomic adds
    use_scatter_fallback = lowering.use_scatter_fallback

    def neuron_use_scatter_fallback(op, reduction_type, self_dtype, src_dtype, device_type, *a):
        device_type = "cpu" if device_type == "neuron" else device_type
        return use_scatter_fallback(op, reduction_type, self_dtype, src_dtype, device_type, *a)

    lowering.pointwise_cat = neuron_pointwise_cat
    lowering._pad_as_cat = neuron_pad_as_cat
    lowering._make_reduction_inner = neuron_make_reduction_inner
    lowering.get_constant_value = neuron_get_constant_value
    lowering.is_gpu = neuron_is_gpu
    lowering.use_two_step_variance = neuron_use_two_step_variance
    lowering.use_scatter_fallback = neuron_use_scatter_fallback


# Convolution: Inductor peels the bias off into a separate add on every
# device but the CPU (kernel/conv.py: "cudnn is slower with it"), which in
# bf16/fp16 rounds the result twice (1 ulp off eager) and costs a pass over
# the output in fp32. Neuron's kernel adds the bias before its single
# rounding, as the CPU's does: the lowering sees neuron as "cpu" (its only
# other uses of the device type pick Triton template configs and an XPU
# rewrite, neither of which applies).
def _patch_conv(conv) -> None:
    from torch._inductor.lowering import lowerings

    ir = conv.ir

    class _NeuronAsCpu:
        def __getattr__(self, name):
            return getattr(ir, name)

        @staticmethod
        def get_device_type(x):
            device_type = ir.get_device_type(x)
            return "cpu" if device_type == "neuron" else device_type

    as_cpu = _NeuronAsCpu()

    def wrap(lowering):
        def convolution(x, *args, **kwargs):
            if ir.get_device_type(x) != "neuron":
                return lowering(x, *args, **kwargs)
            conv.ir = as_cpu
            try:
                return lowering(x, *args, **kwargs)
            finally:
                conv.ir = ir

        return convolution

    aten = torch.ops.aten
    for op in (aten.convolution, aten.convolution.default):
        if op in lowerings:
            lowerings[op] = wrap(lowerings[op])


def _patch_output_code(output_code) -> None:
    # mode="reduce-overhead" (and "max-autotune") ask for CUDA graphs;
    # Inductor applies them to CUDA graphs only. After its post_compile, a
    # neuron graph that asked for them is wrapped to replay from a
    # NeuronGraph capture (torch_neuronx/_reduce_overhead.py).
    cls = output_code.CompiledFxGraph
    original = cls.post_compile

    def post_compile(self, example_inputs, constants, graph_kwargs):
        # (Inductor has already turned graph_kwargs["cudagraphs"] off for a
        # graph that is not CUDA's; the mode's request is in the config.)
        from torch._inductor import config

        wanted = config.triton.cudagraphs
        original(self, example_inputs, constants, graph_kwargs)
        if wanted and "neuron" in self.device_types and "cuda" not in self.device_types:
            from . import _reduce_overhead

            _reduce_overhead.wrap(self, graph_kwargs)

    cls.post_compile = post_compile


@functools.cache
def _backend_version() -> str:
    from . import _C

    h = hashlib.sha256(torch_neuronx_version().encode())
    for name in (
        "_compile.py",
        "_inductor.py",
        "_packed.py",
        "_reduce_overhead.py",
        "_flex_attention.py",
    ):
        h.update((Path(__file__).parent / name).read_bytes())
    st = os.stat(_C.__file__)
    h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def torch_neuronx_version() -> str:
    from . import __version__

    return __version__


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the callback on the executed module."""

    def __init__(self, loader, callback: Callable[[Any], None]):
        self._loader, self._callback = loader, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._callback(module)

    def __getattr__(self, name):  # get_source, get_code, is_package, ...
        return getattr(self._loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self):
        self._pending: dict[str, Callable[[Any], None]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, callback: Callable[[Any], None]) -> None:
        with self._lock:
            module = sys.modules.get(name)
            if module is None:
                self._pending[name] = callback
        if module is not None:
            callback(module)

    def find_spec(self, name, path, target=None):
        with self._lock:
            callback = self._pending.pop(name, None)
        if callback is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None:
            spec.loader = _Loader(spec.loader, callback)
        return spec


_hooks = _AfterImport()


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend "neuron": Inductor with the neuron device's code
    generation (the same as the default backend on neuron tensors)."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, **kwargs)


def _fused_adam_applies(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, kwargs) -> bool:
    import torch

    if kwargs["differentiable"] or kwargs["has_complex"] or not params:
        return False
    dtypes = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    lists = [params, grads, exp_avgs, exp_avg_sqs]
    if kwargs["amsgrad"]:
        lists.append(max_exp_avg_sqs)
    for i, p in enumerate(params):
        if p.device.type != "neuron" or p.dtype not in dtypes:
            return False
        for ts in lists:
            t = ts[i]
            if t.device != p.device or t.dtype != p.dtype or not t.is_contiguous():
                return False
    return True


def _use_fused_adam_in_compiled_steps() -> None:
    """A rewrite to a hand-written kernel: a compiled Adam/AdamW step on
    neuron parameters whose implementation is foreach (the default) calls
    the fused Adam kernel instead of tracing the foreach ops into a generated
    kernel. Measured on the Llama-style model's 20.6M parameters: fused 15.3
    ms, generated 20.5 ms (docs/benchmarks/compile.md). PyTorch runs fused
    optimizers outside the graph (a graph break), as it does for fused=True.
    Eager steps and other devices are untouched."""
    import torch
    import torch.optim.adam as adam_module

    foreach_adam = adam_module._multi_tensor_adam
    # run by the step's Python code between graphs, as PyTorch runs fused=True
    fused_adam = torch._disable_dynamo(adam_module._fused_adam)
    if getattr(foreach_adam, "_neuron_rewrite", False):
        return

    @functools.wraps(foreach_adam)
    def multi_tensor_adam(
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *args, **kwargs
    ):
        fn = foreach_adam
        if torch.compiler.is_compiling() and _fused_adam_applies(
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, kwargs
        ):
            fn = fused_adam
        return fn(
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *args, **kwargs
        )

    multi_tensor_adam._neuron_rewrite = True
    adam_module._multi_tensor_adam = multi_tensor_adam


def install() -> None:
    _use_fused_adam_in_compiled_steps()
    sys.meta_path.insert(0, _hooks)
    _hooks.add("torch._dynamo.device_interface", _register_device_interface)
    _hooks.add("torch._dynamo.decorators", _keep_rng_state_out_of_graphs)
    _hooks.add("torch._inductor.codegen.common", _register_inductor)
    _hooks.add("torch._inductor.utils", _patch_utils)
    _hooks.add("torch._inductor.ir", _patch_ir)
    _hooks.add("torch._inductor.scheduler", _patch_scheduler)
    _hooks.add("torch._inductor.lowering", _patch_lowering)
    _hooks.add("torch._inductor.kernel.conv", _patch_conv)
    _hooks.add("torch._inductor.output_code", _patch_output_code)
    from . import _lowp

    _hooks.add("torch._higher_order_ops.out_dtype", _lowp.route_int_mm)
    _hooks.add(
        "torchao.quantization.quantize_.workflows.int8.int8_tensor", _lowp.route_int8_weight_only
    )
    _hooks.add(
        "torchao.prototype.quantization.int4.int4_opaque_tensor", _lowp.route_int4_weight_only
    )
