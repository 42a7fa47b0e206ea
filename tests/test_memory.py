"""The caching allocator as PyTorch sees it: stats, cache, OOM, accelerator API."""

import gc

import pytest
import torch
from conftest import run_python

MiB = 2**20


def test_allocated_and_reserved_track_tensors():
    # an earlier test's tensors held in reference cycles (a pytest.raises
    # traceback and its frame) would otherwise be freed by a collection in
    # the middle of this test, below the baseline
    gc.collect()
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    t = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() - base == 3 * MiB
    assert torch.neuron.memory_reserved() >= 3 * MiB
    assert torch.neuron.max_memory_allocated() >= base + 3 * MiB
    del t
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() >= base + 3 * MiB
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base


def test_cache_reuse_and_empty_cache():
    torch.neuron.empty_cache()
    a = torch.empty(1000, device="neuron")
    ptr = a.data_ptr()
    del a
    b = torch.empty(1000, device="neuron")
    assert b.data_ptr() == ptr  # cached block reused on the same stream
    del b
    big = torch.empty(30 * MiB, dtype=torch.uint8, device="neuron")  # own segment
    del big
    reserved = torch.neuron.memory_reserved()
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() <= reserved - 30 * MiB


def test_stats_match_torch_accelerator():
    x = torch.ones(4096, device="neuron")
    s = torch.neuron.memory_stats()
    assert s == torch.accelerator.memory_stats(0)
    assert s["allocated_bytes.all.current"] == torch.accelerator.memory_allocated(0)
    assert torch.neuron.memory_reserved() == torch.accelerator.memory_reserved(0)
    assert torch.neuron.mem_get_info() == torch.accelerator.get_memory_info(0)
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties(0).total_memory
    assert free == total - torch.neuron.memory_reserved()
    for key in (
        "allocation.all.current",
        "segment.all.current",
        "active_bytes.all.peak",
        "requested_bytes.all.current",
        "num_alloc_retries",
        "num_ooms",
    ):
        assert key in s
    del x


def test_accumulated_stats_reset():
    torch.empty(100, device="neuron")
    assert torch.neuron.memory_stats()["allocation.all.allocated"] > 0
    torch.neuron.reset_accumulated_memory_stats()
    assert torch.neuron.memory_stats()["allocation.all.allocated"] == 0


def test_per_device_accounting():
    torch.neuron.empty_cache()
    before = [torch.neuron.memory_allocated(d) for d in range(3)]
    t = torch.empty(MiB, dtype=torch.uint8, device="neuron:2")
    # only the device the tensor lives on is charged
    assert [torch.neuron.memory_allocated(d) for d in range(3)] == [
        before[0],
        before[1],
        before[2] + MiB,
    ]
    del t
    assert torch.neuron.memory_allocated(2) == before[2]


def test_oom_raises_and_process_keeps_working():
    with pytest.raises(torch.OutOfMemoryError, match=r"Tried to allocate 30.00 GiB.*neuron:0"):
        torch.empty(30 * 2**30, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_stats()["num_ooms"] >= 1
    t = torch.ones(10, device="neuron")
    assert t.sum().item() == 10


def test_oom_after_cache_flush_with_small_capacity():
    code = """
import torch
x = torch.empty(40 * 2**20, dtype=torch.uint8, device='neuron')
del x   # cached, not freed: the next request needs the cache flushed
y = torch.empty(50 * 2**20, dtype=torch.uint8, device='neuron')
s = torch.neuron.memory_stats()
print('retries', s['num_alloc_retries'], 'ooms', s['num_ooms'])
try:
    torch.empty(70 * 2**20, dtype=torch.uint8, device='neuron')
except torch.OutOfMemoryError as e:
    print('OOM', 'total capacity of 64.00 MiB' in str(e))
z = torch.ones(4, device='neuron'); print('ok', z.sum().item())
"""
    r = run_python(code, {"TORCH_NEURONX_DEVICE_MEMORY": "64M"})
    assert r.returncode == 0, r.stderr
    assert "retries 1 ooms 0" in r.stdout
    assert "OOM True" in r.stdout
    assert "ok 4.0" in r.stdout


def test_memory_summary_mentions_device():
    text = torch.neuron.memory_summary()
    assert "neuron:0" in text and "Allocated memory" in text


def test_record_stream_defers_reuse():
    torch.neuron.empty_cache()
    s = torch.neuron.Stream()
    x = torch.empty(1024, device="neuron")
    ptr = x.data_ptr()
    with torch.neuron.stream(s):
        torch.neuron._sleep(3_000_000_000)  # s busy for 3 s
    x.record_stream(s)
    del x
    y = torch.empty(1024, device="neuron")
    busy = not s.query()
    assert y.data_ptr() != ptr  # s has not passed the use: the block waits
    assert busy  # (so the check above saw a stream still running)
    torch.neuron.synchronize()
    z = torch.empty(1024, device="neuron")
    assert z.data_ptr() == ptr  # reusable once s has passed


def test_pinned_memory():
    t = torch.randn(16)
    p = t.pin_memory()
    assert p.is_pinned() and not t.is_pinned()
    assert torch.equal(p, t)
    e = torch.empty(8, pin_memory=True)
    assert e.is_pinned()
