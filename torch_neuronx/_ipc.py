"""Neuron tensors and torch.multiprocessing.

Neuron device memory cannot be shared between processes yet (the
distributed work adds memory other processes can map). Until then, sending a
neuron tensor or storage to another process must fail at once in the sender,
with a message that says what to do, instead of failing in a queue's feeder
thread while the receiver's ``get()`` waits forever."""

import multiprocessing.queues
from multiprocessing.reduction import ForkingPickler

import torch

_MESSAGE = (
    "neuron tensors cannot be shared between processes yet: send a CPU copy "
    "(tensor.cpu()) and move it to the neuron device in the receiving process"
)


def _is_neuron(obj) -> bool:
    if isinstance(obj, torch.TypedStorage):
        obj = obj._untyped_storage  # (its .device warns that it is deprecated)
    dev = getattr(obj, "device", None)
    return isinstance(dev, torch.device) and dev.type == "neuron"


def _guarded(reduce):
    def reduce_or_refuse(obj):
        if _is_neuron(obj):
            raise RuntimeError(_MESSAGE)
        return reduce(obj)

    reduce_or_refuse._neuron_guarded = True
    return reduce_or_refuse


def _find_neuron(obj, depth=0) -> bool:
    """A bounded walk over the containers a queue item is usually made of."""
    if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
        return _is_neuron(obj)
    if depth >= 6:
        return False
    if isinstance(obj, dict):
        return any(_find_neuron(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(_find_neuron(v, depth + 1) for v in obj)
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and not isinstance(obj, type):
        return any(_find_neuron(v, depth + 1) for v in d.values())
    return False


def install():
    """Guards torch.multiprocessing's tensor and storage reducers (pickling
    for Pipe, SimpleQueue, Pool and Process arguments raises in the sender),
    and checks Queue.put eagerly: a Queue pickles in a background feeder
    thread, where an error would be printed and the item lost."""
    import torch.multiprocessing.reductions  # noqa: F401  registers torch's reducers

    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if getattr(reduce, "__module__", "") == "torch.multiprocessing.reductions" and not getattr(
            reduce, "_neuron_guarded", False
        ):
            ForkingPickler.register(cls, _guarded(reduce))

    queue_cls = multiprocessing.queues.Queue
    if getattr(queue_cls.put, "_neuron_guarded", False):
        return
    original_put = queue_cls.put

    def put(self, obj, block=True, timeout=None):
        if _find_neuron(obj):
            raise RuntimeError(_MESSAGE)
        return original_put(self, obj, block, timeout)

    put._neuron_guarded = True
    put.__doc__ = original_put.__doc__
    queue_cls.put = put
