"""Streams and events with CUDA's semantics."""

import time

import torch
from conftest import run_python


def busy(ms=1000, n=1500):
    # device work that holds the current stream for `ms` milliseconds (a
    # sleep task, torch.cuda._sleep's analogue), then fills x: a check made
    # right after this sees the stream busy unless ms passed in between
    x = torch.zeros(n, n, device="neuron")
    torch.neuron._sleep(ms * 1_000_000)
    x.fill_(1.0)
    return x


def test_streams_pool_and_current():
    s0 = torch.neuron.current_stream()
    assert s0 == torch.neuron.default_stream() and s0.stream_id == 0
    s = torch.neuron.Stream()
    assert s.stream_id != 0 and s.device == torch.device("neuron:0")
    assert isinstance(s, torch.neuron.Stream) and isinstance(s, torch.Stream)
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.neuron.current_stream() == s0
    torch.accelerator.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(s0)
    s1 = torch.neuron.Stream(device=1)
    assert s1.device_index == 1


def test_stream_pool_leaves_the_collectives_streams_out():
    # as CUDA's pool never hands out NCCL's streams: the top indices are the
    # process groups' communication streams
    import torch_neuronx

    info = torch_neuronx._C._build_info()
    n, comm = info["streams_per_device"], info["comm_streams"]
    ids = {torch.neuron.Stream().stream_id for _ in range(3 * n)}
    assert ids == set(range(1, n - comm))


def test_ops_are_asynchronous_and_synchronize_waits():
    x = busy()
    s = torch.neuron.current_stream()
    assert not s.query()  # work still queued: the op returned at once
    torch.neuron.synchronize()
    assert s.query()
    assert x[0, 0].item() == 1.0


def test_in_order_on_one_stream():
    x = torch.zeros(1000, device="neuron")
    for i in range(50):
        x.fill_(float(i))
    assert x.cpu().eq(49).all()


def test_small_ops_keep_stream_order_in_place_or_queued():
    """Element-wise kernels over a few elements run at once on the calling
    thread when their stream is idle, and are queued behind pending work
    otherwise; either way they see every earlier write of the stream, and
    later work sees theirs."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=g)
    b = torch.randn(16, generator=g)
    s2 = torch.neuron.Stream()
    for round in range(20):
        x = busy(50) if round % 2 else torch.zeros(1000, 1000, device="neuron")
        x.fill_(float(round))  # large: queued behind busy() or alone
        y = x[0, :16] * 2 + torch.tensor(b, device="neuron")  # small, right after
        if round % 4 == 3:  # let the worker go to sleep: z then runs in place
            torch.neuron.synchronize()
            time.sleep(0.002)
        z = y.abs().neg_()  # small, stream maybe idle by now
        m = torch.tensor(a, device="neuron") @ torch.tensor(a, device="neuron")
        w = m[:2, :8].sum(0) + z[:8]  # small, behind the matmul
        s2.wait_stream(torch.neuron.current_stream())
        with torch.neuron.stream(s2):
            v = w + 1  # small, on a stream that waits on pending work
        torch.neuron.current_stream().wait_stream(s2)
        y_cpu = torch.full((16,), float(round)) * 2 + b
        z_cpu = y_cpu.abs().neg()
        w_cpu = (a @ a)[:2, :8].sum(0) + z_cpu[:8]
        torch.testing.assert_close(z.cpu(), z_cpu)
        torch.testing.assert_close(v.cpu(), w_cpu + 1, rtol=1e-5, atol=1e-3)  # 256-long dots


def test_event_record_query_wait_elapsed():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    busy()
    end.record()
    assert not end.query()
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) > 0
    assert isinstance(end, torch.neuron.Event)


def test_cross_stream_wait_event_orders_work():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        x = busy(300)  # without the wait, s2 would copy before the fills
        x.fill_(7.0)
        ev = torch.neuron.Event()
        ev.record()
    s2.wait_event(ev)
    with torch.neuron.stream(s2):
        y = torch.empty_like(x)
        y.copy_(x)
    s2.synchronize()
    assert y.cpu().eq(7.0).all()


def test_wait_stream():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        x = busy(300)
        x.fill_(3.0)
    s2.wait_stream(s1)
    with torch.neuron.stream(s2):
        y = x.clone()
    torch.neuron.synchronize()
    assert y.cpu().eq(3.0).all()


def test_launch_blocking_makes_launches_synchronous():
    code = """
import torch
x = torch.empty(1500, 1500, device='neuron')
for _ in range(8): x.fill_(1.0)
print(torch.neuron.current_stream().query(), torch_neuronx._C._launch_blocking())
""".replace("torch_neuronx", "__import__('torch_neuronx')")
    r = run_python(code, {"NEURON_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


def test_non_blocking_copy_from_pinned():
    src = torch.randn(256, 256).pin_memory()
    d = src.to("neuron", non_blocking=True)
    back = torch.empty(256, 256).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, src)
