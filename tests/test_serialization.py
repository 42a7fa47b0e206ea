"""torch.save / torch.load of neuron tensors and modules."""

import io

import torch
from conftest import assert_same


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kw)


def test_tensor_roundtrip_keeps_device_and_values():
    x = torch.randn(3, 4)
    y = roundtrip(x.to("neuron:1"))
    assert y.device == torch.device("neuron:1")
    assert_same(y, x)


def test_map_location():
    x = torch.randn(5)
    assert roundtrip(x.neuron(), map_location="cpu").device.type == "cpu"
    y = roundtrip(x, map_location="neuron")
    assert_same(y, x)
    assert roundtrip(x.neuron(), map_location="neuron:2").device.index == 2
    assert roundtrip(x.neuron(), map_location={"neuron:0": "neuron:3"}).device.index == 3


def test_shared_storage_is_preserved():
    base = torch.arange(10.0, device="neuron")
    a, b = base[:5], base[3:]
    la, lb = roundtrip([a, b])
    assert la.untyped_storage().data_ptr() == lb.untyped_storage().data_ptr()
    la[4] = -1.0
    assert lb[1].item() == -1.0


def test_module_state_dict():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3).neuron()
    sd = roundtrip(m.state_dict())
    m2 = torch.nn.Linear(4, 3).neuron()
    m2.load_state_dict(sd)
    for p, q in zip(m.parameters(), m2.parameters()):
        assert torch.equal(p.cpu(), q.cpu())
    cpu_m = torch.nn.Linear(4, 3)
    cpu_m.load_state_dict(roundtrip(m.state_dict(), map_location="cpu"))
    assert torch.equal(cpu_m.weight, m.weight.cpu())


def test_weights_only_load():
    x = torch.randn(4, dtype=torch.bfloat16).neuron()
    y = roundtrip({"w": x}, weights_only=True)["w"]
    assert_same(y, x.cpu())


def test_dlpack_capsule_roundtrip_shares_memory():
    # torch 2.13 exports PrivateUse1 tensors through the capsule API (the
    # __dlpack_device__ protocol does not know the device type yet)
    x = torch.arange(4.0, device="neuron")
    y = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    y.add_(1)
    assert torch.equal(x.cpu(), torch.arange(1.0, 5.0))
