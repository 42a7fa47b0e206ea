"""Neuron tensors between processes (torch.multiprocessing), as CUDA tensors:
the receiver maps the sender's device memory, so writes on either side are
seen by the other; values are compared with CPU copies sent alongside."""

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
