"""Neuron tensors between processes (torch.multiprocessing), as CUDA tensors:
the receiver maps the sender's device memory, so writes on either side are
seen by the other; values are compared with CPU copies sent alongside."""

import pytest
import torch
import torch.multiprocessing as mp

N = "neuron"


def _child(inq, outq):
    import torch_neuronx  # noqa: F401

    item = inq.get(timeout=60)
    view, ref, param, storage = item["view"], item["ref"], item["param"], item["storage"]
    report = {
        "device": str(view.device),
        "view_ok": torch.equal(view.cpu(), ref),
        "stride": view.stride(),
        "param_type": type(param).__name__,
        "param_grad": param.requires_grad,
        "param_ok": torch.equal(param.detach().cpu(), torch.arange(6.0).reshape(2, 3)),
        "storage_ok": torch.equal(
            torch.tensor([], dtype=torch.uint8, device=N).set_(storage).cpu(),
            torch.arange(10, dtype=torch.uint8),
        ),
    }
    view.add_(100)  # seen by the sender: the same memory
    torch.neuron.synchronize()
    made_here = torch.linspace(0, 1, 7, device=N)
    outq.put((report, made_here, made_here.cpu()))
    inq.get(timeout=60)  # keep made_here alive until the parent has read it


def test_neuron_tensors_travel_through_a_queue_without_copy():
    ctx = mp.get_context("spawn")
    inq, outq = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_child, args=(inq, outq))
    p.start()
    try:
        base = torch.arange(24.0, device=N).reshape(4, 6)
        view = base[1:, ::2]  # offset and strides travel with the tensor
        param = torch.nn.Parameter(torch.arange(6.0, device=N).reshape(2, 3))
        storage = torch.arange(10, dtype=torch.uint8, device=N).untyped_storage()
        inq.put({"view": view, "ref": view.cpu(), "param": param, "storage": storage})
        report, made, made_cpu = outq.get(timeout=120)
        assert report == {
            "device": "neuron:0",
            "view_ok": True,
            "stride": (6, 2),
            "param_type": "Parameter",
            "param_grad": True,
            "param_ok": True,
            "storage_ok": True,
        }
        expect = torch.arange(24.0).reshape(4, 6)
        expect[1:, ::2] += 100
        assert torch.equal(base.cpu(), expect)  # the child's write, no copy back
        assert made.device.type == "neuron" and torch.equal(made.cpu(), made_cpu)
        inq.put("done")
        p.join(timeout=60)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
            p.join(timeout=10)


# ------------------------------------------------------------ DataLoader --

WORKERS = 2
_SENT = {}  # in a DataLoader worker: the items it returned (NeuronItems(keep=True))


def _item(i, device):
    """Item i, made on `device`: the CPU one is the oracle of the neuron one."""
    x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3) * (i + 1) + 0.25
    return {
        "x": x,
        "xt": x.t(),  # a view: strides and offset travel
        "half": (torch.linspace(0, 1, 4, device=device) * i).to(torch.bfloat16),
        "ids": torch.arange(i, i + 5, device=device),
        "i": i,
    }


class NeuronItems(torch.utils.data.Dataset):
    """Items made on neuron in the DataLoader's worker processes."""

    def __init__(self, n, keep=False):
        self.n, self.keep = n, keep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import os

        import torch_neuronx  # noqa: F401  (autoload may be off in the tests' environment)

        item = _item(i, N)
        item["pid"] = os.getpid()
        if self.keep:
            # CPU copies of what this worker returned before, as its memory holds them now
            item["held"] = {j: t.cpu() for j, t in _SENT.items()}
            _SENT.setdefault(i, item["x"])  # the first epoch's
        return item


def _loader(dataset, **kw):
    return torch.utils.data.DataLoader(
        dataset, num_workers=WORKERS, multiprocessing_context="spawn", timeout=120, **kw
    )


def _assert_neuron_like(got, expect, what):
    assert got.device == torch.device(N, 0), (what, got.device)
    assert got.dtype == expect.dtype and got.shape == expect.shape, (what, got, expect)
    assert got.stride() == expect.stride(), (what, got.stride(), expect.stride())
    assert torch.equal(got.cpu(), expect), (what, got.cpu(), expect)


def test_dataloader_workers_return_neuron_batches_that_outlive_the_workers():
    """Spawned workers make the items on neuron and collate them; the main
    process receives neuron batches equal to the CPU oracle's (values,
    dtype, device, strides). The workers drop each batch once it is queued:
    the sender holds it until the main process has mapped it (without that,
    mapping fails). The batches stay valid after the workers have exited."""
    import os

    from torch.utils.data import default_collate

    loader = _loader(NeuronItems(8), batch_size=2)
    it = iter(loader)
    batches = list(it)
    assert [b["i"].tolist() for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    pids = {p for b in batches for p in b["pid"].tolist()}
    assert len(pids) == WORKERS and os.getpid() not in pids, pids
    workers = it._workers  # the iterator's worker processes, shut down at its end
    assert len(workers) == WORKERS and all(not w.is_alive() for w in workers)
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    total = torch.zeros((), device=N)
    for b in batches:
        expect = default_collate([_item(i, "cpu") for i in b["i"].tolist()])
        for key in ("x", "xt", "half", "ids"):
            _assert_neuron_like(b[key], expect[key], (key, b["i"].tolist()))
        total += b["x"].sum() + b["half"].float().sum()  # computed after the workers exited
    ref = sum(_item(i, "cpu")["x"].sum() + _item(i, "cpu")["half"].float().sum() for i in range(8))
    torch.testing.assert_close(total.cpu(), ref)


def test_dataloader_worker_items_map_the_workers_memory():
    """No copy, as with CUDA: with batch_size=None the main process gets the
    very tensors the workers returned and kept; it adds 1000 to them in
    place, and the workers (persistent) read the change from their own
    tensors in the next epoch."""
    loader = _loader(NeuronItems(8, keep=True), batch_size=None, persistent_workers=True)
    for item in loader:
        expect = _item(item["i"], "cpu")
        for key in ("x", "xt", "half", "ids"):
            _assert_neuron_like(item[key], expect[key], (key, item["i"]))
        item["x"].add_(1000)
        # before the item is dropped: freeing a received storage with work still
        # queued on it crashes (test_freeing_a_received_tensor_with_queued_work)
        torch.neuron.synchronize()
    held = {}
    for item in loader:
        held.update(item["held"])
    assert sorted(held) == list(range(8))
    for j, x in held.items():
        assert torch.equal(x, _item(j, "cpu")["x"] + 1000), (j, x)


# ------------------------------------------------------------- lifetimes --


def test_sender_holds_a_pickled_storage_until_a_receiver_maps_it():
    from multiprocessing.reduction import ForkingPickler

    from torch_neuronx import _ipc

    before = _ipc._limbo.held()
    t = torch.arange(5.0, device=N) * 3
    data = ForkingPickler.dumps(t)
    del t  # the sender's last reference: the limbo keeps the storage
    assert _ipc._limbo.held() == before + 1
    got = ForkingPickler.loads(data)  # the receiver (here, this process) maps it
    assert _ipc._limbo.held() == before  # and the sender let go
    assert got.device.type == N and torch.equal(got.cpu(), torch.arange(5.0) * 3)


def _send_then_exit(outq, inq):
    import torch_neuronx  # noqa: F401

    outq.put(torch.arange(4.0, device=N) + 1)
    inq.get(timeout=60)  # the receiver has mapped the first
    outq.put(torch.arange(4.0, device=N) + 2)  # flushed to the pipe at exit, never mapped


def test_received_tensor_outlives_its_sender_and_an_unreceived_one_raises():
    """Unlike CUDA's, a tensor the receiver has mapped stays valid after its
    sender exits (the mapping holds the memory). A tensor still in the pipe
    when its sender exits cannot be mapped: getting it raises a RuntimeError
    that says why (no crash, no garbage), and the device keeps working."""
    ctx = mp.get_context("spawn")
    outq, inq = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_send_then_exit, args=(outq, inq))
    p.start()
    try:
        first = outq.get(timeout=120)
        inq.put("mapped")
        p.join(timeout=60)
        assert p.exitcode == 0
        assert first.device.type == N and torch.equal(first.cpu(), torch.arange(4.0) + 1)
        first.mul_(2)  # still the process's memory to use
        assert torch.equal(first.cpu(), (torch.arange(4.0) + 1) * 2)
        with pytest.raises(RuntimeError, match=r"sender must keep it alive.*has it exited"):
            outq.get(timeout=60)
        assert torch.equal((torch.arange(3.0, device=N) * 2).cpu(), torch.arange(3.0) * 2)
    finally:
        if p.is_alive():
            p.kill()
            p.join(timeout=10)


def test_freeing_a_received_tensor_with_queued_work_is_safe():
    """A received (and a shared) tensor dropped right after work is queued
    on it (no synchronize): its memory must stay mapped until that work has
    run (it segfaulted before).
    In a process of its own (tests/scripts/ipc_free_pending.py)."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "scripts", "ipc_free_pending.py")
    r = subprocess.run([sys.executable, script, "200"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "ok 200" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])
