"""torch.autocast("neuron") with PyTorch's standard op lists."""

import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lower_precision_ops(dtype):
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with torch.autocast("neuron", dtype=dtype):
        assert torch.is_autocast_enabled("neuron")
        assert torch.get_autocast_dtype("neuron") == dtype
        out = torch.mm(a.neuron(), b.neuron())
        lin = torch.nn.functional.linear(a.neuron(), b.neuron())
    assert out.dtype == dtype and lin.dtype == dtype
    want = torch.mm(a.to(dtype), b.to(dtype))  # the same casts, on CPU
    torch.testing.assert_close(out.cpu(), want, rtol=2e-2, atol=2e-2)


def test_fp32_and_promote_policies():
    x = torch.rand(4, 4).neuron().to(torch.bfloat16)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        e = torch.exp(x)  # fp32 list
        ls = torch.log_softmax(x, dim=-1)
        s = torch.addcmul(torch.ones(4, 4, device="neuron"), x, x)  # promote
    assert e.dtype == torch.float32 and ls.dtype == torch.float32
    assert s.dtype == torch.float32


def test_autocast_outside_is_off_and_cpu_untouched():
    a = torch.randn(4, 4)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        cpu_out = torch.mm(a, a)  # a CPU op is not autocast by neuron's context
    assert cpu_out.dtype == torch.float32
    assert not torch.is_autocast_enabled("neuron")


def test_autocast_backward():
    w = torch.randn(4, 4, device="neuron", requires_grad=True)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        y = torch.mm(w, w).sum()
    y.backward()
    assert w.grad.dtype == torch.float32 and w.grad.device.type == "neuron"


def test_binary_cross_entropy_runs_in_fp32_as_cpu_autocast():
    """CPU's autocast runs binary_cross_entropy in fp32 (CUDA's bans it, for
    fp16's range); neuron follows CPU: bf16 probabilities against fp32
    targets give CPU autocast's loss and gradient."""
    g = torch.Generator().manual_seed(0)
    x, t = torch.randn(6, 4, generator=g), torch.rand(6, 4, generator=g)
    w = torch.randn(4, 4, generator=g)
    res = {}
    for dev in ("cpu", "neuron"):
        wd = w.to(dev).detach().requires_grad_()
        with torch.autocast(dev, dtype=torch.bfloat16):
            p = torch.sigmoid(x.to(dev) @ wd)
            loss = torch.nn.functional.binary_cross_entropy(p, t.to(dev))
        assert p.dtype == torch.bfloat16 and loss.dtype == torch.float32
        loss.backward()
        res[dev] = (loss.detach().cpu(), wd.grad.cpu())
    for n, c in zip(res["neuron"], res["cpu"]):
        torch.testing.assert_close(n, c, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    "name, fn",
    [
        ("fftn", lambda x: torch.fft.fftn(x, dim=(-2, -1)).real),
        ("rfft", lambda x: torch.fft.rfft(x).abs()),
        ("irfft", lambda x: torch.fft.irfft(x)),
        (
            "stft",
            lambda x: torch.stft(
                x.flatten(), 8, window=torch.hann_window(8, device=x.device), return_complex=True
            ).abs(),
        ),
    ],
)
def test_fft_runs_in_fp32_as_cpu_autocast(name, fn):
    """FNet mixes tokens with an FFT; under bf16 autocast CPU runs the FFTs
    in fp32 (there is no bf16 FFT), and so does neuron: same dtype, and
    values as close to CPU autocast's as fp32 rounding."""
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1)).bfloat16()
    res = {}
    for dev in ("cpu", "neuron"):
        with torch.autocast(dev, dtype=torch.bfloat16):
            res[dev] = fn(x.to(dev))
    assert res["neuron"].dtype == res["cpu"].dtype == torch.float32
    torch.testing.assert_close(res["neuron"].cpu(), res["cpu"], rtol=1e-5, atol=1e-5)


def test_ctc_loss_runs_in_fp32_as_cpu_autocast():
    g = torch.Generator().manual_seed(2)
    lp = torch.randn(10, 2, 5, generator=g).log_softmax(-1).bfloat16()
    tgt, il, tl = torch.tensor([[1, 2], [3, 3]]), torch.tensor([10, 9]), torch.tensor([2, 2])
    res = {}
    for dev in ("cpu", "neuron"):
        with torch.autocast(dev, dtype=torch.bfloat16):
            res[dev] = torch.nn.functional.ctc_loss(lp.to(dev), tgt.to(dev), il, tl)
    assert res["neuron"].dtype == res["cpu"].dtype == torch.float32
    torch.testing.assert_close(res["neuron"].cpu(), res["cpu"])
