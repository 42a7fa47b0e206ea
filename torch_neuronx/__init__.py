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
    from . import _compile, _ipc, distributed

    _ipc.install()
    distributed.register()
    _compile.install()


_register()


def get_fallback_ops():
    """Ops that ran through the CPU fallback since the last clear, as a dict
    ``{"aten::op.overload": count}``."""
    return dict(_C._fallback_ops())


def clear_op_tracking():
    """Forget the recorded fallback ops (and warn again on their next use)."""
    _C._clear_op_tracking()


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
    "get_fallback_mode",
    "get_fallback_ops",
    "set_fallback_mode",
]
