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


def _layouts():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, 4, 3, generator=g)
    return {
        "transposed": x[0, 0].t(),
        "permuted": x.permute(2, 0, 3, 1),
        "channels_last": x.contiguous(memory_format=torch.channels_last),
        "sliced": x[:, ::2],
        "sliced_transposed": x[:, ::2].transpose(1, 3),
        "expanded": x[:, :1].expand(6, 5, 4, 3),
    }


def test_elementwise_outputs_follow_the_input_layout_as_on_cpu():
    """Element-wise results over transposed, permuted and channels-last
    inputs are laid out as CPU's TensorIterator lays them out (like the
    input, not contiguous), functional and into an empty out= tensor, with a
    contiguous partner, a broadcast one and a 0-d one; and give CPU's
    values. (Binary ops gave contiguous results here: the kernels then read
    the input across its rows.)"""
    torch_neuronx.set_fallback_mode("error")
    try:
        for name, a in _layouts().items():
            partners = {
                "same": a.clone(memory_format=torch.preserve_format) + 1,
                "contiguous": a.contiguous() * 2,
                "broadcast": torch.randn(a.shape[-1]),
                "0-d": torch.tensor(1.5),
            }
            for pname, b in partners.items():
                for fn in (torch.add, torch.mul, torch.maximum, torch.lt, torch.abs):
                    args = (a,) if fn is torch.abs else (a, b)
                    want = fn(*args)
                    dev = tuple(
                        t if t.dim() == 0 and fn is not torch.abs else t.to("neuron") for t in args
                    )
                    got = fn(*dev)
                    where = (name, pname, fn.__name__)
                    assert got.stride() == want.stride(), (where, got.stride(), want.stride())
                    torch.testing.assert_close(got.cpu(), want, msg=str(where))
                    out = torch.empty(0, dtype=want.dtype, device="neuron")
                    fn(*dev, out=out)
                    out_cpu = torch.empty(0, dtype=want.dtype)
                    fn(*args, out=out_cpu)
                    assert out.stride() == out_cpu.stride(), (where, out.stride(), out_cpu.stride())
                    torch.testing.assert_close(out.cpu(), out_cpu, msg=str(where))
    finally:
        torch_neuronx.set_fallback_mode("warn")


def test_reductions_and_casts_of_transposed_inputs_match_cpu():
    """Full and partial reductions and dtype casts of transposed and permuted
    inputs (the kernels order the dimensions by memory) give CPU's values
    and layouts."""
    for name, a in _layouts().items():
        an = a.to("neuron")
        torch.testing.assert_close(an.sum().cpu(), a.sum(), msg=name)
        torch.testing.assert_close(an.amax().cpu(), a.amax(), msg=name)
        torch.testing.assert_close(an.abs().max().cpu(), a.abs().max(), msg=name)
        torch.testing.assert_close(an.sum(0).cpu(), a.sum(0), msg=name)
        torch.testing.assert_close(an.mean(-1).cpu(), a.mean(-1), msg=name)
        for dt in (torch.bfloat16, torch.float16, torch.float64, torch.int32):
            got, want = an.to(dt), a.to(dt)
            assert got.stride() == want.stride(), (name, dt, got.stride(), want.stride())
            assert torch.equal(got.cpu(), want), (name, dt)
        assert torch.equal(an.contiguous().cpu(), a.contiguous()), name
