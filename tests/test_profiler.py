"""torch.profiler records neuron work on the device streams."""

import json

import torch
from torch.profiler import ProfilerActivity, profile


def test_kineto_trace_has_device_intervals(tmp_path):
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
    x = torch.randn(256, 256, device="neuron")
    s = torch.neuron.Stream()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        y = x.clone()
        y.fill_(2.0)
        z = y + x
        w = z @ z
        with torch.neuron.stream(s):
            v = torch.empty(64, device="neuron")
            v.fill_(1.0)
        torch.neuron.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    device = [e for e in events if e.get("cat") == "kernel"]
    names = {e["name"] for e in device}
    assert {"aten::copy_", "aten::fill_", "aten::add", "aten::mm"} <= names, names
    assert all(e["dur"] > 0 for e in device)
    mm = next(e for e in device if e["name"] == "aten::mm")
    assert mm["args"]["stream"] == 0 and mm["args"]["device"] == 0
    assert any(e["args"]["stream"] == s.stream_id for e in device if e["name"] == "aten::fill_")
    # device intervals lie inside the profiled window of the CPU ops
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    assert min(e["ts"] for e in cpu) <= mm["ts"] <= max(e["ts"] + e["dur"] for e in cpu) + 1e6
    table = prof.key_averages().table()
    assert "NEURON" in table.upper()
    del w, v


def test_legacy_profiler_measures_device_time():
    x = torch.randn(512, 512, device="neuron")
    with torch.autograd.profiler.profile(use_device="neuron", use_kineto=False) as prof:
        x.clone().fill_(3.0)
    fill = [e for e in prof.function_events if e.name == "aten::fill_"]
    assert fill and fill[0].device_time > 0
