"""TorchNeuron: a native PyTorch backend for Neuron-class accelerators.

Importing this package (which ``import torch`` does by itself through the
``torch.backends`` entry point) registers PyTorch's PrivateUse1 device as
``"neuron"`` and installs ``torch.neuron``, a module mirroring ``torch.cuda``.
"""


def _autoload():
    """Entry point called by ``import torch``. It must exist before this
    module imports torch: ``import torch_neuronx`` on its own imports torch,
    whose autoload then finds this module half-initialised. The work is done
    by the module body below."""


import torch  # noqa: E402

from . import _C  # noqa: E402  (registers the allocator, guard, hooks, kernels, fallback)

__version__ = "0.1.0"


def _register():
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    from . import neuron as _device_module

    if getattr(torch, "neuron", None) is not _device_module:
        torch._register_device_module("neuron", _device_module)
    import sys

    for sub in ("amp", "random", "memory"):  # `import torch.neuron.amp` as torch.cuda.amp
        sys.modules[f"torch.neuron.{sub}"] = getattr(_device_module, sub)
    if not hasattr(torch.Tensor, "is_neuron"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    from . import _compile, _exit, _flex_attention, _ipc, distributed

    _exit.install()
    _ipc.install()
    distributed.register()
    _compile.install()
    _flex_attention.install(_compile._hooks)


_register()


def get_fallback_ops():
    """Ops that ran through the CPU fallback since the last clear, as a dict
    ``{"aten::op.overload": count}``."""
    return dict(_C._fallback_ops())


def enable_op_tracking():
    """Start counting every op that runs on neuron, for get_executed_ops().
    Off by default: the count boxes every op's arguments for inspection,
    which costs about 10% on small ops. TORCH_NEURONX_OP_TRACKING=1 turns it
    on at import. (Fallback ops are always counted: get_fallback_ops().)"""
    _C._set_op_tracking(True)


def disable_op_tracking():
    """Stop counting executed ops; the counts so far are kept."""
    _C._set_op_tracking(False)


def is_op_tracking_enabled() -> bool:
    return _C._op_tracking()


def get_executed_ops():
    """Every op that ran on neuron (native kernel or CPU fallback) while
    tracking was on, since the last clear_op_tracking(), as a dict
    ``{"aten::op.overload": count}``. A call counts when an argument is a
    neuron tensor or names the neuron device; calls that composite ops make
    count too, as the profiler shows them. The ops in it that are not in
    get_fallback_ops() ran natively."""
    ops = dict(_C._executed_ops())
    if not ops and not _C._op_tracking():
        raise RuntimeError(
            "torch_neuronx.get_executed_ops(): executed-op tracking is off. Call "
            "torch_neuronx.enable_op_tracking() (or set TORCH_NEURONX_OP_TRACKING=1) "
            "before running the ops; it is off by default because it costs about 10% "
            "on small ops. get_fallback_ops() needs no switch."
        )
    return ops


def clear_op_tracking():
    """Forget the recorded fallback and executed ops (and warn again about a
    fallback op on its next use)."""
    _C._clear_op_tracking()


def _op_tracking_from_env():
    import os

    value = os.environ.get("TORCH_NEURONX_OP_TRACKING", "")
    if value in ("1", "true", "True", "yes", "on"):
        enable_op_tracking()
    elif value not in ("", "0", "false", "False", "no", "off"):
        raise ValueError(f"TORCH_NEURONX_OP_TRACKING must be 1 or 0, got {value!r}")


_op_tracking_from_env()


def set_fallback_mode(mode: str):
    """'warn' (default: warn once per op), 'silent', or 'error' (raise
    NotImplementedError instead of running an op on the CPU). The
    TORCH_NEURONX_FALLBACK environment variable sets the initial mode."""
    _C._set_fallback_mode(mode)


def get_fallback_mode() -> str:
    return _C._fallback_mode()


from .neuron import Event, Stream  # noqa: E402

__all__ = [
    "Event",
    "Stream",
    "clear_op_tracking",
    "disable_op_tracking",
    "enable_op_tracking",
    "get_executed_ops",
    "get_fallback_mode",
    "get_fallback_ops",
    "is_op_tracking_enabled",
    "set_fallback_mode",
]
