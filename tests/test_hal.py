"""The HAL as the device boundary (docs/ARCHITECTURE.md, "The HAL"): with
device memory closed to host code (TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1),
everything that reads or writes it from the host goes through the HAL's
transfers, with the same results as the zero-copy path; a driver library
that cannot load is reported. The test command also runs the whole suite
under the protect mode."""

import json

import pytest
from conftest import run_python

# Exercises each way host code reaches device memory: the CPU fallback
# (function, in place, out=, a returned view, an in-place _foreach_ list, an
# op that writes an argument its schema does not mark), copies the copy
# kernel cannot do (conj views), the CPU convolution, item() and printing.
PROBE = r"""
import json, warnings
import torch, torch_neuronx
warnings.simplefilter("ignore")
torch.manual_seed(0)
n = "neuron"
x = torch.randn(4, 6)
r = {}
r["hypot"] = torch.hypot(x.to(n), x.to(n) * 2).cpu().tolist()
y = x.to(n); y.copysign_(torch.ones(6, device=n)); r["copysign_"] = y.cpu().tolist()
o = torch.empty(4, 6, device=n); torch.fmax(x.to(n), x.to(n).t().t() * -1, out=o)
r["fmax_out"] = o.cpu().tolist()
d = x.to(n).diagonal(); r["diag"] = d.cpu().tolist()
t = [x.to(n), x.to(n) * 3]; torch._foreach_lgamma_(t); r["foreach"] = [v.cpu().tolist() for v in t]
rm, rv = torch.zeros(6, device=n), torch.ones(6, device=n)
buf = [torch.empty(4, 6, device=n), torch.empty(6, device=n), torch.empty(6, device=n)]
torch.native_batch_norm(x.to(n), None, None, rm, rv, True, 0.5, 1e-5, out=buf)
r["bn_running"] = [rm.cpu().tolist(), rv.cpu().tolist()]
c = torch.complex(x, x).to(n).conj()
r["conj_copy"] = torch.view_as_real(c.resolve_conj()).cpu().tolist()
w = torch.randn(2, 3, 2, 2, 2)
r["conv3d"] = torch.nn.functional.conv_transpose3d(
    torch.randn(1, 2, 3, 3, 3).to(n), w.to(n)).sum().item()
r["item"] = x.to(n).sum().item()
r["repr"] = repr(x.to(n)[:1])
r["addressable"] = torch_neuronx._C._build_info()["host_addressable"]
print(json.dumps(r))
"""


def _probe(protect):
    p = run_python(
        PROBE,
        {
            "TORCH_NEURONX_PROTECT_DEVICE_MEMORY": "1" if protect else "0",
            "TORCH_NEURONX_FALLBACK": "silent",
        },
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_protected_device_memory_gives_the_zero_copy_results():
    plain, protected = _probe(False), _probe(True)
    assert plain.pop("addressable") is True
    assert protected.pop("addressable") is False
    for key in plain:
        assert (
            protected[key] == pytest.approx(plain[key])
            if isinstance(plain[key], float)
            else protected[key] == plain[key]
        ), key


def test_host_access_to_protected_device_memory_faults():
    # a host read of device memory outside the HAL is a segmentation fault
    code = (
        "import torch, torch_neuronx, ctypes\n"
        "x = torch.ones(1024, device='neuron'); torch.neuron.synchronize()\n"
        "print(ctypes.c_float.from_address(x.data_ptr()).value)\n"
    )
    p = run_python(code, {"TORCH_NEURONX_PROTECT_DEVICE_MEMORY": "1"})
    assert p.returncode == -11, (p.returncode, p.stdout, p.stderr[-2000:])
    p = run_python(code, {"TORCH_NEURONX_PROTECT_DEVICE_MEMORY": "0"})
    assert p.returncode == 0 and p.stdout.strip() == "1.0"


def test_a_hal_library_that_cannot_load_is_reported():
    code = (
        "import torch, torch_neuronx\n"
        "print(torch.neuron.device_count())\n"
        "try:\n    torch.ones(1, device='neuron')\n"
        "except RuntimeError as e:\n    print('error:', e)\n"
    )
    p = run_python(code, {"TORCH_NEURONX_HAL": "/nonexistent/libhal.so"})
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.strip().splitlines()
    assert lines[0] == "0"
    assert "TORCH_NEURONX_HAL=/nonexistent/libhal.so cannot be loaded" in lines[1]
