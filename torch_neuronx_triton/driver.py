"""The neuron backend's driver: device and stream queries through
torch.neuron, and a launcher that runs a kernel's grid through Triton's
interpreter."""

from __future__ import annotations

import threading
import time

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase


class NeuronUtils:
    def load_binary(self, name, kernel, shared, device):
        # (module, function, n_regs, n_spills, n_max_threads)
        return None, name, 0, 0, 1 << 30

    def get_device_properties(self, device):
        import torch

        props = torch.neuron.get_device_properties(device)
        return {
            "max_shared_mem": 1 << 30,
            "multiprocessor_count": int(getattr(props, "multi_processor_count", 1) or 1),
            "max_num_regs": 1 << 16,
            "warpSize": 1,
        }


_interpreted: dict = {}
_call_lock = threading.RLock()


def _interpreted_fn(jit_fn):
    from triton.runtime.interpreter import InterpretedFunction

    # keyed by the Python function: a JITFunction hashes by its cache key,
    # which walks its globals (patched while a kernel is interpreted)
    fn = _interpreted.get(jit_fn.fn)
    if fn is None:
        fn = _interpreted[jit_fn.fn] = InterpretedFunction(jit_fn.fn)
    return fn


def _call_interpreted(jit_fn, *args, **kwargs):
    """A nested @triton.jit call, interpreted; the language patches it needs
    (its module's view of triton.language) are undone after it, unlike
    InterpretedFunction.__call__, which leaves them (harmless when every
    kernel is interpreted, not when Triton's compiler runs later)."""
    from triton.runtime.interpreter import InterpreterError, _patch_lang

    scope = _patch_lang(jit_fn.fn)
    try:
        with _Libdevice(jit_fn.fn.__globals__):
            return _interpreted_fn(jit_fn).rewrite()(*args, **kwargs)
    except InterpreterError:
        raise
    except Exception as e:
        raise InterpreterError(repr(e)) from e
    finally:
        scope.restore()


_LIBDEVICE = "triton.language.extra.libdevice"


def _libdevice_impls() -> dict:
    """Triton's device-library functions (triton.language.extra.libdevice:
    stubs a GPU backend binds to its vendor library) that Triton's
    interpreter lacks, as triton.language math: those with a tl.math
    namesake, and tanh."""
    import triton.language as tl

    names = ("abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "floor", "fma", "log",
             "log2", "rsqrt", "sin", "sqrt", "sqrt_rn")  # fmt: skip
    # looked up at call time: the interpreter patches tl.math while it runs
    impls = {
        n: (lambda *args, _n=n: getattr(tl.math, _n)(*args)) for n in names if hasattr(tl.math, n)
    }
    impls["tanh"] = lambda x: 2.0 * tl.sigmoid(2.0 * x) - 1.0
    return impls


class _Libdevice:
    """While a kernel is interpreted: its module's libdevice functions (and
    the libdevice module's own) bound to _libdevice_impls()."""

    def __init__(self, fn_globals):
        self.g = fn_globals

    def __enter__(self):
        import importlib

        impls = _libdevice_impls()
        self.saved = []
        mod = importlib.import_module(_LIBDEVICE)
        for name, impl in impls.items():
            if hasattr(mod, name):
                self.saved.append((mod.__dict__, name, getattr(mod, name)))
                setattr(mod, name, impl)
        for key, val in list(self.g.items()):
            if getattr(val, "__module__", None) == _LIBDEVICE and val.__name__ in impls:
                self.saved.append((self.g, key, val))
                self.g[key] = impls[val.__name__]

    def __exit__(self, *exc):
        for d, key, val in reversed(self.saved):
            d[key] = val


class _NestedCalls:
    """Inside an interpreted kernel, a call of another @triton.jit function
    runs that function interpreted too (as under TRITON_INTERPRET=1)."""

    def __enter__(self):
        from triton.runtime.jit import JITFunction

        self._cls = JITFunction
        self._saved = JITFunction.__call__
        JITFunction.__call__ = _call_interpreted

    def __exit__(self, *exc):
        self._cls.__call__ = self._saved


class NeuronLauncher:
    def __init__(self, src, metadata):
        self.jit_fn = src.fn
        self.name = metadata.name

    def __call__(self, gx, gy, gz, stream, function, packed_metadata, launch_metadata,
                 enter_hook, exit_hook, *args):  # fmt: skip
        if enter_hook is not None:
            enter_hook(launch_metadata)
        fn = _interpreted_fn(self.jit_fn)
        with _call_lock, _NestedCalls(), _Libdevice(self.jit_fn.fn.__globals__):
            fn.run(*args, grid=(gx, gy, gz), warmup=False)
        if exit_hook is not None:
            exit_hook(launch_metadata)


def _bench(kernel_call, quantiles=None, warmup=3, rep=10, **kwargs):
    import torch

    for _ in range(warmup):
        kernel_call()
    torch.neuron.synchronize()
    times = []
    for _ in range(rep):
        t = time.perf_counter()
        kernel_call()
        torch.neuron.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    if quantiles:
        return [times[min(len(times) - 1, int(q * len(times)))] for q in quantiles]
    return sum(times) / len(times)


class NeuronDriver(DriverBase):
    @classmethod
    def is_active(cls) -> bool:
        try:
            import torch

            return hasattr(torch, "neuron") and torch.neuron.is_available()
        except Exception:
            return False

    def __init__(self) -> None:
        import torch

        super().__init__()
        self.utils = NeuronUtils()
        self.launcher_cls = NeuronLauncher
        self.get_current_device = torch.neuron.current_device
        self.set_current_device = torch.neuron.set_device

    def get_current_stream(self, device=None):
        import torch

        return torch.neuron.current_stream(device).stream_id

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("neuron", "neuron", 1)

    def get_active_torch_device(self):
        import torch

        return torch.device("neuron", self.get_current_device())

    def get_device_interface(self):
        import torch

        return torch.neuron

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "void*"
        return {
            "i1": "bool", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
            "u1": "bool", "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t",
            "u64": "uint64_t", "fp16": "uint16_t", "bf16": "uint16_t", "fp32": "float",
            "f32": "float", "fp64": "double",
        }[ty]  # fmt: skip

    def get_benchmarker(self):
        return _bench

    def get_empty_cache_for_benchmark(self):
        import torch

        return torch.empty(64 * 1024 * 1024 // 4, dtype=torch.int32, device="neuron")

    def clear_cache(self, cache) -> None:
        cache.zero_()
