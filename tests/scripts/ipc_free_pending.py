"""A process receives neuron tensors from another (torch.multiprocessing
Queue), queues work on each and drops it at once, without synchronizing:
the storage's memory must outlive the work queued on it, as a device
allocation's does. The same on the sending side: a storage moved into
shared memory, worked on and dropped at once. Prints "ok <n>" and exits 0; tests/test_multiprocessing.py
runs it in its own process (a crash must not take pytest down)."""

import sys

import torch
import torch.multiprocessing as mp

import torch_neuronx


def sender(q, n):
    import time

    keep = []  # the sender keeps every tensor: only the receiver's side is exercised
    for _ in range(n):
        t = torch.zeros(1 << 16, device="neuron")
        keep.append(t)
        q.put(t)
    q.put(None)
    time.sleep(5)


def exported_side(n):
    for _ in range(n):
        t = torch.zeros(1 << 16, device="neuron")
        torch_neuronx._C._share_neuron_storage(t.untyped_storage())
        for _ in range(20):
            t.add_(1)
        last = t[:4].clone()
        del t  # the shared storage freed while its adds may still be running
    assert torch.equal(last.cpu(), torch.full((4,), 20.0)), last.cpu()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    exported_side(n)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=sender, args=(q, n))
    p.start()
    got, last = 0, None
    while (t := q.get(timeout=60)) is not None:
        for _ in range(20):
            t.add_(1)  # queued on the device stream
        last = t[:4].clone()
        del t  # the received storage freed while its adds may still be running
        got += 1
    assert torch.equal(last.cpu(), torch.full((4,), 20.0)), last.cpu()
    p.join(timeout=60)
    print("ok", got)
