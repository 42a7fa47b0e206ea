"""Launches TorchTitan's trainer (``torchtitan.train.main``) on device
"neuron", or on the CPU with Gloo as a reference run, without patching
TorchTitan. Works with torchtitan 0.2.2 (the release that runs on
torch 2.13) and 0.3.0 (see ``titan_neuron_030.py``).

On neuron this changes nothing: TorchTitan picks its device with
``torch._utils._get_available_device_type()``, which returns the PrivateUse1
backend name "neuron" because ``import torch`` loads torch_neuronx (the
``torch.backends`` entry point) and ``torch.neuron.is_available()``; its
``init_distributed`` takes the c10d backend from
``torch.distributed.Backend.default_device_backend_map["neuron"]``
(= "neuron"). ``python -m torchtitan.train`` works as well.

With ``--cpu`` as the first argument it is a CPU/Gloo reference run. TorchTitan
has no CPU device (with no accelerator it falls back to "cuda"), so this

* points ``torchtitan.tools.utils.device_type``/``device_module`` at the CPU
  (while torchtitan is imported: its modules compute and copy those two names
  at import time);
* turns torch_neuronx's autoload off, so that the accelerator which
  ``torch.distributed.barrier(device_ids=...)`` sees is the CPU;
* makes FSDP2 reduce with SUM instead of ``PREMUL_SUM(1.0)``, which Gloo
  lacks (the same arithmetic: TorchTitan sets the gradient divide factor to
  1.0 and scales by the token count itself).

Usage, from the repository root::

    torchrun --standalone --nproc-per-node 2 tools/titan_neuron.py [--cpu] \\
        --model.name llama3 --model.flavor debugmodel ...   # torchtitan 0.2.2
"""

import inspect
import os
import sys

_CPU = __name__ == "__main__" and sys.argv[1:2] == ["--cpu"]
if _CPU:
    del sys.argv[1]
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
# Nothing is fetched at run time: datasets and tokenizers are local paths.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402


class _CPUDevice:
    """The ``torch.cuda``-like calls TorchTitan makes on its device module,
    answered for the CPU (``torch.cpu`` has no memory statistics)."""

    def __getattr__(self, name):
        return getattr(torch.cpu, name)

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def set_device(device):
        pass

    @staticmethod
    def get_device_name(device=None):
        return "cpu"

    @staticmethod
    def get_device_properties(device=None):
        class _Props:
            name = "cpu"
            total_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

        return _Props()

    @staticmethod
    def memory_stats(device=None):
        return {}

    @staticmethod
    def reset_peak_memory_stats(device=None):
        pass

    @staticmethod
    def empty_cache():
        pass


def use_cpu() -> None:
    """Makes TorchTitan run on the CPU with Gloo. Must run before torchtitan
    is imported: ``torchtitan.tools.utils`` computes ``device_type`` and
    ``device_module`` at import time, with the two ``torch._utils`` helpers it
    imports by name, and the other modules copy those values when imported.
    The helpers are replaced only while torchtitan is being imported."""
    import torch._utils as torch_utils

    saved = torch_utils._get_available_device_type, torch_utils._get_device_module
    cpu_device = _CPUDevice()
    torch_utils._get_available_device_type = lambda: "cpu"
    torch_utils._get_device_module = lambda t: cpu_device if t == "cpu" else saved[1](t)
    try:
        import torchtitan.tools.utils as tt_utils
        import torchtitan.train  # noqa: F401  (the modules that copy the names)
    finally:
        torch_utils._get_available_device_type, torch_utils._get_device_module = saved
    assert tt_utils.device_type == "cpu", tt_utils.device_type

    from torch.distributed.fsdp import FSDPModule

    set_factor = FSDPModule.set_gradient_divide_factor

    def set_factor_sum_only(self, factor):
        set_factor(self, factor)
        self.set_force_sum_reduction_for_comms(True)

    FSDPModule.set_gradient_divide_factor = set_factor_sum_only


def main() -> None:
    if _CPU:
        use_cpu()
    import torchtitan.train as tt_train

    if inspect.signature(tt_train.main).parameters:  # 0.2.x: main(trainer_class)
        tt_train.main(tt_train.Trainer)
    else:  # 0.3.x
        tt_train.main()
    if _CPU:
        # The CPU/Gloo reference run (torch_neuronx not loaded) has been seen
        # to abort at interpreter exit after TorchTitan destroyed the process
        # group ("terminate called without an active exception", no Python
        # frame: a joinable std::thread in torch's teardown), in 2 of 3 CI
        # runs on 2026-12-07, after every step had run and logged. Its work
        # is done here: leave without the teardown. The neuron run exits
        # normally, so its teardown stays under test.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
