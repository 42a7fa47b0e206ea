"""Bad input gets the exception CPU/CUDA would raise, with an actionable
message: never a crash, hang or silent wrong result."""

import pytest
import torch
from conftest import run_python


def test_wrong_device_index():
    with pytest.raises(RuntimeError, match="invalid device ordinal.*4 neuron device"):
        torch.empty(1, device="neuron:9")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.neuron.set_device(7)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(2).to("neuron:4")
    assert torch.neuron.current_device() == 0  # nothing changed


def test_two_devices_in_one_op():
    a = torch.ones(3, device="neuron:0")
    with pytest.raises(
        RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and cpu"
    ):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        a * torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, torch.ones(3, device="neuron:1")])


def test_unsupported_dtypes():
    with pytest.raises(TypeError, match="QInt8|quantized"):
        torch.empty(2, dtype=torch.qint8, device="neuron")
    with pytest.raises(TypeError, match="Bits8|bits8|dtype"):
        torch.empty(2, dtype=torch.bits8, device="neuron")


def test_complex32_tensors_as_cpu():
    """complex32 lives on the device as on CUDA: storage, copies both ways,
    views, cat, fill, item; its arithmetic as CPU's (through the fallback),
    and an op neither has for it raises CPU's error. (CPU has no equal or
    sum for complex32: compared through view_as_real.)"""

    def same(a, b):
        assert a.dtype == b.dtype == torch.complex32 and a.device.type == "neuron"
        assert torch.equal(torch.view_as_real(a).cpu(), torch.view_as_real(b))

    x = torch.randn(3, 4, dtype=torch.complex64)
    c, n = x.chalf(), x.to("neuron").chalf()
    same(n, c)
    same(n * n, c * c)
    same(torch.cat([n, n.t().contiguous().t()]), torch.cat([c, c]))
    same(n[:, ::2].clone(), c[:, ::2])
    assert n[1, 2].item() == c[1, 2].item()
    assert torch.equal(n.cfloat().cpu(), c.cfloat())
    n.fill_(1 - 2j)
    c.fill_(1 - 2j)
    same(n, c)
    # sum is the device's own (over view_as_real, as CUDA has it; CPU has none)
    torch.testing.assert_close(n.sum().cfloat().cpu(), c.cfloat().sum(), rtol=2e-3, atol=1e-2)
    for t in (c, n):  # mean is not: CPU's error
        with pytest.raises(NotImplementedError, match="ComplexHalf"):
            t.mean()


def test_out_of_bounds_as_strided_and_set():
    t = torch.zeros(4, device="neuron")
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 16"):
        t.as_strided((10,), (1,))
    with pytest.raises(RuntimeError, match="out of bounds"):
        t.as_strided((2,), (1,), 3)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(0, device="neuron").set_(t.untyped_storage(), 2, (4,), (1,))
    with pytest.raises(RuntimeError, match="storage offset"):
        t.as_strided((1,), (1,), -1)


def test_set_across_devices_refused():
    t = torch.zeros(4, device="neuron:1")
    with pytest.raises(RuntimeError, match="devices must match"):
        torch.empty(0, device="neuron:0").set_(t.untyped_storage(), 0, (4,), (1,))


def test_oom_is_torch_out_of_memory():
    with pytest.raises(torch.OutOfMemoryError, match="neuron out of memory.*Tried to allocate"):
        torch.empty(2**40, dtype=torch.uint8, device="neuron")
    assert torch.ones(3, device="neuron").cpu().sum() == 3


def test_bad_generator_device():
    with pytest.raises(RuntimeError, match="generator"):
        torch.empty(3, device="neuron").normal_(generator=torch.Generator())


def test_event_misuse():
    a = torch.neuron.Event()
    b = torch.neuron.Event()
    a.record()
    b.record()
    with pytest.raises(ValueError, match="enable_timing"):  # torch's own check
        a.elapsed_time(b)


def test_forked_child_gets_spawn_hint():
    code = """
import os, torch
torch.ones(1, device='neuron')  # initialise in the parent
pid = os.fork()
if pid == 0:
    try:
        torch.ones(1, device='neuron')
        os._exit(3)
    except RuntimeError as e:
        os._exit(0 if "spawn" in str(e) and "forked" in str(e) else 4)
_, status = os.waitpid(pid, 0)
print('child', os.WEXITSTATUS(status), torch.neuron._is_in_bad_fork())
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["child", "0", "False"]


def test_spawn_children_work():
    code = """
import torch, torch.multiprocessing as mp
def work(q):
    q.put(float(torch.ones(4, device='neuron').sum().item()))
if __name__ == '__main__':
    torch.ones(1, device='neuron')
    ctx = mp.get_context('spawn'); q = ctx.Queue()
    p = ctx.Process(target=work, args=(q,)); p.start(); print(q.get(timeout=60)); p.join()
"""
    import os
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        import subprocess

        r = subprocess.run([sys.executable, f.name], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4.0"
