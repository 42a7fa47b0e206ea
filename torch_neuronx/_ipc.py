"""Neuron tensors and torch.multiprocessing, as CUDA tensors are shared.

Sending a neuron tensor or storage to another process (a torch.multiprocessing
Queue, Pipe, Pool, a spawned Process's arguments, DataLoader workers) moves
the storage's bytes once into device memory other processes can map
(``_C._share_neuron_storage``: the storage keeps that memory from then on) and
sends its handle; the receiver maps the same memory, no copy: writes on
either side are seen by the other, as with CUDA IPC. As with CUDA, the sender
must keep the tensor alive until the receiver has it.

Queue.put shares eagerly, in the caller's thread: a Queue pickles in a
background feeder thread, where an error would be printed and the item lost
while the receiver's ``get()`` waits forever."""

import multiprocessing.queues
from multiprocessing.reduction import ForkingPickler

import torch


def _is_neuron(obj) -> bool:
    if isinstance(obj, torch.TypedStorage):
        obj = obj._untyped_storage  # (its .device warns that it is deprecated)
    dev = getattr(obj, "device", None)
    return isinstance(dev, torch.device) and dev.type == "neuron"


def _share(storage: torch.UntypedStorage):
    from . import _C

    handle, nbytes = _C._share_neuron_storage(storage)
    return storage.device.index, handle, nbytes


def _open(device, handle, nbytes) -> torch.UntypedStorage:
    from . import _C

    return _C._open_shared_neuron_storage(device, handle, nbytes)


def _rebuild_tensor(cls, storage_args, dtype, size, stride, offset, requires_grad):
    storage = _open(*storage_args)
    t = torch.empty((0,), dtype=dtype, device=torch.device("neuron", storage_args[0]))
    t.set_(storage, offset, size, stride)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_storage(cls, storage_args, dtype):
    storage = _open(*storage_args)
    if cls is torch.UntypedStorage:
        return storage
    return torch.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)


def _check_sendable(t):
    """torch's own rule for tensors crossing processes."""
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries.  If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the queue)."
        )


def _reduce_tensor(t):
    _check_sendable(t)
    cls = torch.nn.Parameter if isinstance(t, torch.nn.Parameter) else torch.Tensor
    return (
        _rebuild_tensor,
        (
            cls,
            _share(t.untyped_storage()),
            t.dtype,
            tuple(t.size()),
            t.stride(),
            t.storage_offset(),
            t.requires_grad,
        ),
    )


def _reduce_storage(s):
    if isinstance(s, torch.TypedStorage):
        return (_rebuild_storage, (torch.TypedStorage, _share(s._untyped_storage), s.dtype))
    return (_rebuild_storage, (torch.UntypedStorage, _share(s), None))


def _for_neuron(reduce, neuron_reduce):
    def reducer(obj):
        if _is_neuron(obj):
            return neuron_reduce(obj)
        return reduce(obj)

    reducer._neuron_reducer = True
    return reducer


def _share_all(obj, depth=0) -> None:
    """Shares the neuron storages of a queue item in the caller's thread (a
    bounded walk over the containers items are usually made of)."""
    if isinstance(obj, torch.Tensor):
        if _is_neuron(obj):
            _check_sendable(obj)
            _share(obj.untyped_storage())
        return
    if isinstance(obj, (torch.UntypedStorage, torch.TypedStorage)):
        if _is_neuron(obj):
            _share(obj if isinstance(obj, torch.UntypedStorage) else obj._untyped_storage)
        return
    if depth >= 6:
        return
    if isinstance(obj, dict):
        for v in obj.values():
            _share_all(v, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _share_all(v, depth + 1)
    else:
        d = getattr(obj, "__dict__", None)
        if isinstance(d, dict) and not isinstance(obj, type):
            for v in d.values():
                _share_all(v, depth + 1)


def install():
    """Puts the neuron reducers in front of torch.multiprocessing's tensor and
    storage reducers, and makes Queue.put share neuron storages at once."""
    import torch.multiprocessing.reductions  # noqa: F401  registers torch's reducers

    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if getattr(reduce, "_neuron_reducer", False):
            continue
        if getattr(reduce, "__module__", "") != "torch.multiprocessing.reductions":
            continue
        if not isinstance(cls, type):
            continue
        if issubclass(cls, (torch.UntypedStorage, torch.TypedStorage)):
            ForkingPickler.register(cls, _for_neuron(reduce, _reduce_storage))
        elif issubclass(cls, torch.Tensor):
            ForkingPickler.register(cls, _for_neuron(reduce, _reduce_tensor))

    queue_cls = multiprocessing.queues.Queue
    if getattr(queue_cls.put, "_neuron_sharing", False):
        return
    original_put = queue_cls.put

    def put(self, obj, block=True, timeout=None):
        _share_all(obj)
        return original_put(self, obj, block, timeout)

    put._neuron_sharing = True
    put.__doc__ = original_put.__doc__
    queue_cls.put = put
