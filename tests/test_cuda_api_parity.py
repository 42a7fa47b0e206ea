"""The parts of torch.cuda's API that users reach for, on torch.neuron (and
torch.accelerator), checked against what torch.cuda documents."""

import json

import pytest
import torch
from conftest import run_python

N = "neuron"


def test_lazy_init_flag_follows_the_runtime():
    r = run_python(
        "import torch\n"
        "print(torch.neuron._initialized)\n"
        "torch.ones(1, device='neuron')\n"
        "print(torch.neuron._initialized, torch.neuron.is_initialized())\n"
    )
    assert r.stdout.split() == ["False", "True", "True"], r.stdout + r.stderr


def test_device_capability_lists_the_dtypes_a_tensor_can_hold():
    dtypes = torch.accelerator.get_device_capability()["supported_dtypes"]
    for dt in dtypes:
        torch.empty(2, dtype=dt, device=N)  # every advertised dtype is accepted
    for dt in (
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.int64,
        torch.bool,
        torch.complex64,
        torch.complex32,
    ):
        assert dt in dtypes
    for dt in (torch.qint8, torch.bits8):
        assert dt not in dtypes
        with pytest.raises(TypeError):
            torch.empty(2, dtype=dt, device=N)


def test_peer_access_arch_list_and_oom_error_class():
    assert torch.neuron.can_device_access_peer(0, 1) and not torch.neuron.can_device_access_peer(
        1, 1
    )
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.neuron.can_device_access_peer(0, 9)
    assert torch.neuron.get_arch_list() == ["trn2", "trn3"]
    assert torch.neuron.OutOfMemoryError is torch.OutOfMemoryError


def test_random_and_amp_submodules():
    import torch.neuron.amp
    import torch.neuron.random

    torch.neuron.random.manual_seed(5)
    a = torch.randn(4, device=N)
    torch.neuron.random.manual_seed(5)
    assert torch.equal(a.cpu(), torch.randn(4, device=N).cpu())
    x = torch.randn(8, 8, device=N)
    with torch.neuron.amp.autocast():
        assert (x @ x).dtype == torch.bfloat16
    with torch.neuron.amp.autocast(dtype=torch.float16):
        assert (x @ x).dtype == torch.float16
    scaler = torch.neuron.amp.GradScaler()
    p = torch.nn.Parameter(torch.ones(3, device=N))
    opt = torch.optim.SGD([p], lr=0.5)
    scaler.scale((p * 2).sum()).backward()
    scaler.step(opt)
    scaler.update()
    torch.testing.assert_close(p.detach().cpu(), torch.zeros(3))  # 1 - 0.5 * 2


def test_per_process_memory_fraction():
    r = run_python(
        "import torch\n"
        "total = torch.neuron.mem_get_info()[1]\n"
        "torch.neuron.set_per_process_memory_fraction(0.01)\n"
        "print(torch.neuron.get_per_process_memory_fraction())\n"
        "torch.empty(int(total * 0.004), dtype=torch.uint8, device='neuron')\n"
        "try:\n"
        "    torch.empty(int(total * 0.02), dtype=torch.uint8, device='neuron')\n"
        "    print('no error')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    print('OOM', 'set_per_process_memory_fraction' in str(e))\n"
        "print(torch.neuron.mem_get_info()[0] <= total * 0.01)\n"
        "torch.neuron.set_per_process_memory_fraction(1.0)\n"
        "torch.empty(int(total * 0.02), dtype=torch.uint8, device='neuron')\n"
        "print('ok')\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.01", "OOM", "True", "True", "ok"], r.stdout
    with pytest.raises(ValueError, match="Allowed range"):
        torch.neuron.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError, match="float"):
        torch.neuron.set_per_process_memory_fraction(1)


def test_host_memory_stats_and_device_memory_used():
    before = torch.neuron.host_memory_stats()["allocated_bytes.current"]
    p = torch.empty(4096, dtype=torch.uint8, pin_memory=True)
    assert torch.neuron.host_memory_stats()["allocated_bytes.current"] == before + 4096
    del p
    assert torch.neuron.host_memory_stats()["allocated_bytes.current"] == before
    x = torch.empty(1 << 20, device=N)
    assert torch.neuron.device_memory_used() == torch.neuron.memory_reserved() >= x.nbytes


def test_utilization_measures_busy_time():
    torch.neuron.synchronize()
    torch.neuron.utilization()  # starts a sampling period
    threading_sleep = __import__("time").sleep
    threading_sleep(0.2)
    assert torch.neuron.utilization() <= 10  # idle
    x = torch.randn(1024, 1024, device=N)
    for _ in range(20):
        x = torch.tanh(x @ x)
    torch.neuron.synchronize()
    assert torch.neuron.utilization() >= 50  # busy for most of the period


def test_profiler_links_kernels_to_ops_and_records_memory(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True
    ) as prof:
        a = torch.randn(128, 128, device=N)
        b = (a @ a).relu()
        del a
        torch.neuron.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    launches = [e for e in events if e.get("name") == "neuronLaunchKernel"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    starts = {e["id"] for e in events if e.get("cat") == "ac2g" and e.get("ph") == "s"}
    ends = {e["id"] for e in events if e.get("cat") == "ac2g" and e.get("ph") == "f"}
    assert len(launches) >= 3 and len(kernels) >= 3
    assert starts and starts == ends  # every launch flows to its kernel
    memory = [
        e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 20
    ]
    assert any(e["args"]["Bytes"] > 0 for e in memory) and any(
        e["args"]["Bytes"] < 0 for e in memory
    )
    del b


def _allocate_for_snapshot():
    return torch.randn(512, 512, device=N)


def test_memory_history_snapshot_reads_in_the_visualiser(tmp_path):
    import pickle

    from torch.cuda import _memory_viz

    torch.neuron.memory._record_memory_history(stacks="python", max_entries=10000)
    try:
        x = _allocate_for_snapshot()
        y = torch.empty(100, device=N)
        del y
        snap = torch.neuron.memory._snapshot()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc"]
    frees = [e for e in trace if e["action"] == "free_completed"]
    assert any(e["size"] >= x.nbytes for e in allocs) and frees
    assert any(f["name"] == "_allocate_for_snapshot" for e in allocs for f in e["frames"])
    live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    mine = [b for b in live if b["address"] == x.data_ptr()]
    assert len(mine) == 1 and mine[0]["size"] >= x.nbytes
    assert any(f["name"] == "_allocate_for_snapshot" for f in mine[0]["frames"])
    total = sum(s["total_size"] for s in snap["segments"] if s["device"] == 0)
    assert total == torch.neuron.memory_reserved(0)
    # the visualiser's Python readers parse it (its HTML embeds the same data)
    assert "del " in _memory_viz.trace(snap) and "free completed" in _memory_viz.trace(snap)
    assert "total_allocated" in _memory_viz.segsum(snap)
    assert len(_memory_viz.trace_plot(snap)) > 1000 and len(_memory_viz.segment_plot(snap)) > 1000
    path = tmp_path / "snap.pickle"
    torch.neuron.memory._dump_snapshot(str(path))
    assert pickle.loads(path.read_bytes())["segments"]
    assert torch.neuron.memory_snapshot() == torch.neuron.memory._snapshot()["segments"]


def test_mem_pool_routes_allocations():
    torch.neuron.synchronize()
    pool = torch.neuron.MemPool()
    with torch.neuron.use_mem_pool(pool):
        a = torch.empty(3 << 20, dtype=torch.uint8, device=N)
        inner = torch.neuron.MemPool()
        with torch.neuron.use_mem_pool(inner):
            b = torch.empty(1024, device=N)
        c = torch.empty(1024, device=N)  # back in the outer pool
    d = torch.empty(1024, device=N)  # the default pool
    segs = {s["address"]: s for s in torch.neuron.memory_snapshot()}

    def pool_of(t):
        for s in segs.values():
            if s["address"] <= t.data_ptr() < s["address"] + s["total_size"]:
                return tuple(s["segment_pool_id"])

    assert pool_of(a) == pool_of(c) == pool.id
    assert pool_of(b) == inner.id and pool_of(d) == (0, 0)
    assert [s["address"] for s in pool.snapshot()] and all(
        tuple(s["segment_pool_id"]) == pool.id for s in pool.snapshot()
    )
    ptr = a.data_ptr()
    del a
    e = torch.empty(3 << 20, dtype=torch.uint8, device=N)  # default pool: not a's block
    assert e.data_ptr() != ptr
    with torch.neuron.use_mem_pool(pool):
        f = torch.empty(3 << 20, dtype=torch.uint8, device=N)  # reuses the pool's block
    assert f.data_ptr() == ptr
    reserved = torch.neuron.memory_reserved()
    del f, c, b
    del pool, inner  # their unused segments go back
    assert torch.neuron.memory_reserved() < reserved
