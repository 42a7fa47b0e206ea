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

import os
import socket

import torch

BACKEND = "neuron"


def host_id() -> str:
    """What makes two ranks "on one host": they can map each other's device
    memory. The host name and the network namespace (ranks in different
    namespaces of one machine are separate hosts, as in the tests);
    TORCH_NEURONX_HOST_ID overrides it, to make ranks of one machine use the
    path between hosts."""
    override = os.environ.get("TORCH_NEURONX_HOST_ID")
    if override:
        return override
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = ""
    return f"{socket.gethostname()}|{netns}"


def _create_backend(dist_backend_opts, backend_options):
    from . import _C

    o = dist_backend_opts
    rank, size, store = o.group_rank, o.group_size, o.store
    # where every rank runs, through the group's store
    store.set(f"tn_host/{rank}", host_id())
    hosts = [store.get(f"tn_host/{r}").decode() for r in range(size)]
    index = {h: i for i, h in enumerate(dict.fromkeys(hosts))}
    host_of = [index[h] for h in hosts]
    if len(index) == 1:
        return _C.ProcessGroupNeuron(store, rank, size, o.timeout, str(o.group_id))
    # across hosts: PyTorch's Gloo between the hosts' first ranks, and among
    # all ranks for the operations with no hierarchical form
    import torch.distributed as dist

    leaders = [host_of.index(h) for h in range(len(index))]
    gloo_leaders = None
    if rank in leaders:
        gloo_leaders = dist.ProcessGroupGloo(
            dist.PrefixStore("tn_leaders/", store), leaders.index(rank), len(leaders), o.timeout
        )
    gloo_world = dist.ProcessGroupGloo(dist.PrefixStore("tn_world/", store), rank, size, o.timeout)
    return _C.ProcessGroupNeuron(
        store,
        rank,
        size,
        o.timeout,
        str(o.group_id),
        host_of=host_of,
        leaders=gloo_leaders,
        world=gloo_world,
    )


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
    _allow_monitored_barrier(dist)
    _default_backend_is_neuron(dist)


def _default_backend_is_neuron(dist) -> None:
    """``init_process_group()`` with no backend picks the accelerator's
    backend ("neuron" here), but PyTorch 2.13 then records Gloo as the
    group's default backend type unless the backend is NCCL, so DDP fails
    ("Could not find backend type 1 ... gloo"). On a neuron machine, name the
    backend for the caller: the same group, with its type right (and CPU
    tensors served too, as the named backend does)."""
    import functools

    original = dist.init_process_group
    if getattr(original, "_neuron", False):
        return

    @functools.wraps(original)
    def init_process_group(backend=None, *args, **kwargs):
        device_id = kwargs.get("device_id")
        if (
            (backend is None or str(backend).lower() == "undefined")
            and torch._C._get_accelerator().type == "neuron"
            and (
                device_id is None
                or isinstance(device_id, int)
                or torch.device(device_id).type == "neuron"
            )
        ):
            backend = BACKEND
        out = original(backend, *args, **kwargs)
        # "cpu:gloo,neuron:neuron": PyTorch leaves the default backend type
        # UNDEFINED for a plugin named per device (it compares the plugin key
        # "NEURON" with "neuron"); make it the accelerator's, as NCCL's is in
        # "cpu:gloo,cuda:nccl", so DDP finds it
        if backend is not None and "neuron:neuron" in str(backend).lower().replace(" ", ""):
            pg = dist.distributed_c10d._get_default_group()
            pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return out

    init_process_group._neuron = True
    dist.init_process_group = init_process_group
    dist.distributed_c10d.init_process_group = init_process_group


def _allow_monitored_barrier(dist) -> None:
    """``dist.monitored_barrier`` refuses every backend but Gloo by name in
    Python, although the C++ call it makes is a Backend virtual that ours
    implements (rank 0 names the ranks that did not arrive in time). Let a
    "neuron" group through to it; every other group keeps torch's function."""
    import datetime
    import functools

    original = dist.monitored_barrier
    if getattr(original, "_neuron", False):
        return

    @functools.wraps(original)
    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        if dist.is_initialized() and group is not dist.GroupMember.NON_GROUP_MEMBER:
            pg = group if group is not None else dist.distributed_c10d._get_default_group()
            if dist.get_backend(pg) == BACKEND:
                if timeout is None:
                    timeout = dist.distributed_c10d._get_default_timeout(BACKEND)
                elif isinstance(timeout, float):
                    timeout = datetime.timedelta(seconds=timeout)
                return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)
        return original(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier._neuron = True
    dist.monitored_barrier = monitored_barrier
    dist.distributed_c10d.monitored_barrier = monitored_barrier


__all__ = ["BACKEND", "register"]
