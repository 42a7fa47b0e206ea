"""torch.distributed on neuron: the c10d backend "neuron".

Registered when torch_neuronx is imported (which ``import torch`` does), for
the devices "neuron" and "cpu": ``init_process_group("neuron")`` runs the
collectives of neuron tensors, and of CPU tensors too, over the native
shared-memory collectives (csrc/ccl); ``init_process_group()`` picks it for
the neuron accelerator; ``"cpu:gloo,neuron:neuron"`` keeps Gloo for CPU
tensors. The backend is a C++ ``c10d::Backend`` (csrc/aten/distributed.cpp),
so DDP, FSDP2, DTensor and the functional collectives reach it as they
reach NCCL.
"""

BACKEND = "neuron"


def _create_backend(dist_backend_opts, backend_options):
    from . import _C

    o = dist_backend_opts
    return _C.ProcessGroupNeuron(o.store, o.group_rank, o.group_size, o.timeout, str(o.group_id))


def register() -> None:
    """Registers the "neuron" backend with torch.distributed (idempotent)."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    if BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(
        BACKEND, _create_backend, extended_api=True, devices=["neuron", "cpu"]
    )


__all__ = ["BACKEND", "register"]
