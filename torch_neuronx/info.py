"""``python -m torch_neuronx.info``: devices, properties, memory, build and
kernel ISA, in the spirit of nvidia-smi / neuron-ls."""

import os
import platform

import torch

import torch_neuronx
from torch_neuronx import _C


def _gib(n):
    return f"{n / 2**30:.2f} GiB"


def main():
    print(
        f"torch-neuronx {torch_neuronx.__version__} (torch {torch.__version__}, "
        f"python {platform.python_version()})"
    )
    print(
        f"host: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"features: {', '.join(_C._cpu_features()) or 'baseline'}"
    )
    b = _C._build_info()
    print(
        f"build: built against torch {b['torch']} with gcc {b['compiler']}, HAL '{b['hal']}' "
        f"(device memory {'' if b['host_addressable'] else 'not '}host addressable), "
        f"{b['streams_per_device']} streams/device ({b['comm_streams']} of them for "
        f"collectives), {b['task_slot_bytes']}-byte task slots"
    )
    print(
        f"kernel ISA selected: {_C._isa()} (TORCH_NEURONX_ISA overrides); bf16 GEMM on: "
        f"{_C._bf16_gemm_kernel()}; AMX tiles: {_C._amx_status()} "
        "(TORCH_NEURONX_AMX=0 turns AMX off)"
    )
    print(
        f"host thread pool: {_C._num_threads()} threads; "
        f"launch blocking: {_C._launch_blocking()}; "
        f"CPU fallback mode: {torch_neuronx.get_fallback_mode()}"
    )
    n = torch.neuron.device_count()
    if n == 0:
        print(f"no neuron devices: {_C._init_error() or 'none visible'}")
        return 1
    print(f"{n} neuron device(s):")
    print(
        f"  {'dev':<10}{'name':<34}{'core':>5}{'chip':>5}{'HBM':>12}{'reserved':>12}{'allocated':>12}"
    )
    for i in range(n):
        p = torch.neuron.get_device_properties(i)
        free, total = torch.neuron.mem_get_info(i)
        print(
            f"  neuron:{i:<3}{p.name:<34}{p.global_core_id:>5}{p.chip:>5}"
            f"{_gib(total):>12}{_gib(total - free):>12}"
            f"{_gib(torch.neuron.memory_allocated(i)):>12}"
        )
    _peaks()
    _collectives()
    p = torch.neuron.get_device_properties(0)
    if p.total_memory < p.modelled_memory:
        print(
            f"  device memory capped by the host: the {p.instance_model} model gives each core "
            f"{_gib(p.modelled_memory)} of HBM; this host can back {_gib(p.total_memory)}, "
            f"shared by all devices (set TORCH_NEURONX_DEVICE_MEMORY to choose less)"
        )
    return 0


# (instruction, what it is): the kinds _C._measure_peak times
_PEAK_KINDS = (
    ("fp32-fma256", "fp32 AVX2 FMA"),
    ("fp32-fma512", "fp32 AVX-512 FMA"),
    ("bf16-dot512", "bf16 AVX512-BF16 dot"),
    ("bf16-amx", "bf16 AMX tiles"),
)


def _peaks():
    """The compute limits, measured now (about 0.3 s each): independent
    chains of one instruction on every kernel thread at once."""
    rates = []
    for kind, what in _PEAK_KINDS:
        rate = _C._measure_peak(kind)
        if rate > 0:
            rates.append(f"{what} {rate / 1e9:,.0f}")
    print(
        f"measured peaks, GFLOPS on {_C._num_threads()} threads: "
        f"{'; '.join(rates) if rates else 'none (no vector FMA on this build)'}"
    )


def _collectives():
    """The collective configuration this process would use."""
    import torch.distributed as dist

    from torch_neuronx import distributed

    if not dist.is_available():
        print("collectives: torch.distributed is not available in this torch build")
        return
    registered = distributed.BACKEND in dist.Backend.backend_list
    devices = dist.Backend.backend_capability.get(distributed.BACKEND, [])
    print(
        f"collectives: c10d backend '{distributed.BACKEND}' "
        f"{'registered for ' + ', '.join(devices) if registered else 'NOT registered'}; "
        "ranks of one host: shared device memory (csrc/ccl); between hosts: Gloo between "
        "host leaders"
    )
    local_rank = os.environ.get("LOCAL_RANK")
    lws = os.environ.get("LOCAL_WORLD_SIZE")
    print(
        f"  this process: host id '{distributed.host_id()}'"
        + (f", LOCAL_RANK={local_rank}" if local_rank is not None else "")
        + f" -> current device neuron:{torch.neuron.current_device()}"
        + (f", LOCAL_WORLD_SIZE={lws} (its share of the cores)" if lws else "")
        + f", blocking wait: {os.environ.get('TORCH_NEURONX_BLOCKING_WAIT', '0')}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
