"""Output strides equal CPU's: every op of PyTorch's OpInfo database, on its
first float32 sample inputs, gives outputs laid out as CPU lays them out (a
compiled graph asserts the strides its meta functions predict, and those
follow CPU). Dimensions of size 1 and empty outputs are left out: any
stride is the same layout there. A stride difference is a failure, not a
tolerance. (Found this way: nonzero/argwhere, whose functional form is
column-major on CPU, and linalg.lstsq through the CPU fallback, whose
resized out= tensors now take the CPU kernel's layout.)"""

import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db

import torch_neuronx

SAMPLES = 2


def _tensors(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if isinstance(o, (list, tuple)):
        return [x for y in o for x in _tensors(y)]
    return []


def _to_neuron(x):
    if isinstance(x, torch.Tensor):
        return x.to("neuron")
    if isinstance(x, list):
        return [_to_neuron(y) for y in x]
    if isinstance(x, tuple):
        return tuple(_to_neuron(y) for y in x)
    if isinstance(x, dict):
        return {k: _to_neuron(v) for k, v in x.items()}
    return x


def _layout(t):
    return tuple((n, s) for n, s in zip(t.shape, t.stride()) if n != 1)


def test_output_strides_match_cpu_over_opinfo():
    torch_neuronx.set_fallback_mode("silent")
    compared, mismatched = 0, {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op in op_db:
                if torch.float32 not in op.supported_dtypes("cpu"):
                    continue
                try:
                    samples = list(op.sample_inputs("cpu", torch.float32))[:SAMPLES]
                except Exception:  # noqa: BLE001 - sample generators needing other devices
                    continue
                for s in samples:
                    try:
                        torch.manual_seed(0)
                        want = op(s.input, *s.args, **s.kwargs)
                    except Exception:  # noqa: BLE001 - CPU refuses the sample: nothing to compare
                        continue
                    try:
                        got = op(_to_neuron(s.input), *_to_neuron(s.args), **_to_neuron(s.kwargs))
                    except Exception:  # noqa: BLE001 - tests/test_opinfo.py judges errors
                        continue
                    compared += 1
                    for a, b in zip(_tensors(want), _tensors(got)):
                        strided = a.layout == b.layout == torch.strided
                        if strided and a.shape == b.shape and a.numel() > 0:
                            if _layout(a) != _layout(b):
                                mismatched.setdefault(
                                    op.name, (tuple(a.shape), a.stride(), b.stride())
                                )
    finally:
        torch_neuronx.set_fallback_mode("warn")
    assert compared > 1200, compared
    assert mismatched == {}, mismatched
