"""Neuron tensors and torch.multiprocessing, as CUDA tensors are shared.

Sending a neuron tensor or storage to another process (a torch.multiprocessing
Queue, Pipe, Pool, a spawned Process's arguments, DataLoader workers) moves
the storage's bytes once into device memory other processes can map
(``_C._share_neuron_storage``: the storage keeps that memory from then on) and
sends its handle; the receiver maps the same memory, no copy: writes on
either side are seen by the other, as with CUDA IPC.

Lifetimes. As CUDA's sent-data limbo does, the sender keeps every storage it
pickled alive until the receiver has mapped it (a DataLoader worker drops a
batch as soon as it is queued): each pickle takes a slot in a receipt board
of the sender (a page of a memfd, one byte a slot, set to 1), which the
receiver opens through /proc/<pid>/fd, as the device memory itself, and
clears once it has mapped the storage; the sender lets go of received
storages when it next shares one. Once mapped, the memory is the receiver's
as much as the sender's: unlike CUDA's, a received tensor stays valid after
the sender has exited. The sender must still be alive when the receiver
unpickles (the handle names memory through the sender's /proc entry): if it
has exited by then, unpickling raises a RuntimeError that says so.

Queue.put shares eagerly, in the caller's thread: a Queue pickles in a
background feeder thread, where an error would be printed and the item lost
while the receiver's ``get()`` waits forever."""

import mmap
import multiprocessing.queues
import os
import threading
from multiprocessing.reduction import ForkingPickler

import torch

_SLOTS = 4096  # receipts in a board (one page)


class _Limbo:
    """The sender's side: storages pickled and not yet mapped by their
    receivers, each with its slot in a receipt board."""

    def __init__(self):
        self.lock = threading.Lock()
        self._reset()

    def _reset(self):
        self.pid = os.getpid()
        self.boards = []  # (fd, inode, mmap)
        self.free = []  # (board, slot)
        self.pending = {}  # (board, slot) -> the storage, kept alive

    def collect(self):
        """Lets go of the storages whose receivers have mapped them."""
        for key in [k for k in self.pending if self.boards[k[0]][2][k[1]] == 0]:
            del self.pending[key]
            self.free.append(key)

    def hold(self, storage):
        """Keeps the storage until a receiver clears the returned receipt
        (pid, fd, inode, slot)."""
        with self.lock:
            if self.pid != os.getpid():  # a forked child: its own boards
                self._reset()
            self.collect()
            if not self.free:
                fd = os.memfd_create("neuron-ipc-receipts", os.MFD_CLOEXEC)
                os.ftruncate(fd, _SLOTS)
                self.boards.append((fd, os.fstat(fd).st_ino, mmap.mmap(fd, _SLOTS)))
                b = len(self.boards) - 1
                self.free.extend((b, slot) for slot in reversed(range(_SLOTS)))
            b, slot = self.free.pop()
            fd, ino, board = self.boards[b]
            board[slot] = 1
            self.pending[(b, slot)] = storage
            return (self.pid, fd, ino, slot)

    def held(self):
        with self.lock:
            self.collect()
            return len(self.pending)


_limbo = _Limbo()
_receipt_boards = {}  # the receiver's side: (pid, fd, inode) -> the sender's board
_receipt_lock = threading.Lock()


def _acknowledge(receipt):
    """Tells the sender its storage is mapped here (it may let go of it)."""
    pid, fd, ino, slot = receipt
    with _receipt_lock:
        board = _receipt_boards.get((pid, fd, ino))
        if board is None:
            try:
                f = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                return  # the sender has exited: nothing is held for us any more
            try:
                if os.fstat(f).st_ino != ino:
                    return
                board = mmap.mmap(f, _SLOTS)
            finally:
                os.close(f)
            _receipt_boards[(pid, fd, ino)] = board
        board[slot] = 0


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


def _rebuild_tensor(cls, storage_args, dtype, size, stride, offset, requires_grad, receipt):
    storage = _open(*storage_args)
    _acknowledge(receipt)
    t = torch.empty((0,), dtype=dtype, device=torch.device("neuron", storage_args[0]))
    t.set_(storage, offset, size, stride)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_storage(cls, storage_args, dtype, receipt):
    storage = _open(*storage_args)
    _acknowledge(receipt)
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
    storage = t.untyped_storage()
    return (
        _rebuild_tensor,
        (
            cls,
            _share(storage),
            t.dtype,
            tuple(t.size()),
            t.stride(),
            t.storage_offset(),
            t.requires_grad,
            _limbo.hold(storage),
        ),
    )


def _reduce_storage(s):
    if isinstance(s, torch.TypedStorage):
        u = s._untyped_storage
        return (_rebuild_storage, (torch.TypedStorage, _share(u), s.dtype, _limbo.hold(u)))
    return (_rebuild_storage, (torch.UntypedStorage, _share(s), None, _limbo.hold(s)))


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
