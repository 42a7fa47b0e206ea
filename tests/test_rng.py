"""On-device RNG (csrc/aten/random_ops.cpp): seeding, state, generators,
distributions, dropout."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same

import torch_neuronx


def test_manual_seed_reproduces():
    torch.manual_seed(123)
    a = torch.randn(1000, device="neuron")
    torch.manual_seed(123)
    b = torch.randn(1000, device="neuron")
    assert torch.equal(a.cpu(), b.cpu())
    c = torch.randn(1000, device="neuron")
    assert not torch.equal(a.cpu(), c.cpu())
    assert torch.neuron.initial_seed() == 123


def test_rng_state_roundtrip():
    torch.neuron.manual_seed(5)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.rand(100, device="neuron")
    torch.neuron.set_rng_state(state)
    b = torch.rand(100, device="neuron")
    assert torch.equal(a.cpu(), b.cpu())
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    first = [torch.rand(50, device=f"neuron:{d}").cpu() for d in range(len(states))]
    torch.neuron.set_rng_state_all(states)  # every device rewinds
    again = [torch.rand(50, device=f"neuron:{d}").cpu() for d in range(len(states))]
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], torch.rand(50, device="neuron:0").cpu())


def test_per_device_generators_are_independent():
    torch.neuron.manual_seed_all(9)
    a0 = torch.randn(10, device="neuron:0")
    torch.neuron.manual_seed_all(9)
    torch.randn(50, device="neuron:1")  # advancing device 1 does not move device 0
    b0 = torch.randn(10, device="neuron:0")
    assert torch.equal(a0.cpu(), b0.cpu())
    assert len(torch.neuron.default_generators) == torch.neuron.device_count()


def test_explicit_generator():
    g = torch.Generator(device="neuron")
    g.manual_seed(42)
    a = torch.rand(64, device="neuron", generator=g)
    g.manual_seed(42)
    b = torch.rand(64, device="neuron", generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    assert g.device.type == "neuron"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_distribution_moments(dtype):
    torch.manual_seed(0)
    n = 200_000
    u = torch.empty(n, dtype=dtype, device="neuron").uniform_(-2, 3).cpu().double()
    assert u.min() >= -2 and u.max() < 3
    assert abs(u.mean() - 0.5) < 0.03
    x = torch.empty(n, dtype=dtype, device="neuron").normal_(1.5, 2.0).cpu().double()
    assert abs(x.mean() - 1.5) < 0.03 and abs(x.std() - 2.0) < 0.03
    b = torch.empty(n, dtype=dtype, device="neuron").bernoulli_(0.3).cpu().double()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01


DISTRIBUTIONS = {
    "log_normal": (lambda t: t.log_normal_(0.5, 0.4), torch.float32),
    "cauchy": (lambda t: t.cauchy_(1.0, 2.0), torch.float32),
    "geometric": (lambda t: t.geometric_(0.3), torch.float32),
    "geometric_int64": (lambda t: t.geometric_(0.05), torch.int64),
    "log_normal_bf16": (lambda t: t.log_normal_(0.0, 0.25), torch.bfloat16),
    "cauchy_f64": (lambda t: t.cauchy_(-3.0, 0.5), torch.float64),
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_more_distributions_match_cpu_samples(name):
    """log_normal_, cauchy_, geometric_ on the device's generator: quantiles
    of 200,000 samples against 200,000 of PyTorch CPU's, reproducible with
    manual_seed, no fallback."""
    fill, dtype = DISTRIBUTIONS[name]
    n = 200_000
    mode = torch_neuronx.get_fallback_mode()
    torch_neuronx.set_fallback_mode("error")
    try:
        torch.manual_seed(3)
        got = fill(torch.empty(n, dtype=dtype, device="neuron")).cpu()
        torch.manual_seed(3)
        again = fill(torch.empty(n, dtype=dtype, device="neuron")).cpu()
    finally:
        torch_neuronx.set_fallback_mode(mode)
    assert got.dtype == dtype and torch.equal(got, again)
    want = fill(torch.empty(n, dtype=dtype)).double()
    got = got.double()
    assert got.isfinite().all()
    if name.startswith("geometric"):
        assert got.min() >= 1 and torch.equal(got, got.round())
        assert abs(got.mean() / want.mean() - 1) < 0.02, (got.mean(), want.mean())
        for k in (1, 2, 3):  # P(X = k) against CPU's frequencies
            assert abs((got == k).double().mean() - (want == k).double().mean()) < 0.006
    else:
        # two-sample Kolmogorov-Smirnov distance, read at CPU's percentiles;
        # 0.01 is past the 1e-6 critical value for n = 200,000 (0.0087)
        at = want.quantile(torch.linspace(0.01, 0.99, 99, dtype=torch.float64))
        cdf_got = (got[None, :] <= at[:, None]).double().mean(1)
        cdf_want = (want[None, :] <= at[:, None]).double().mean(1)
        assert (cdf_got - cdf_want).abs().max() < 0.01, (cdf_got - cdf_want).abs().max()


def test_more_distributions_errors():
    x = torch.empty(4, device="neuron")
    with pytest.raises(RuntimeError, match="std > 0.0"):
        x.log_normal_(0, 0)
    with pytest.raises(RuntimeError, match="sigma > 0.0"):
        x.cauchy_(0, -1)
    for p in (0.0, 1.0, 1.5):
        with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\)"):
            x.geometric_(p)
    with pytest.raises(NotImplementedError, match="Long"):
        x.long().log_normal_()
    with pytest.raises(RuntimeError, match="continuous"):
        x.long().cauchy_()
    with pytest.raises(NotImplementedError, match="Bool"):
        x.bool().geometric_(0.5)


def test_random_integers():
    torch.manual_seed(1)
    r = torch.randint(3, 10, (100_000,), device="neuron").cpu()
    assert r.dtype == torch.int64 and r.min() == 3 and r.max() == 9
    counts = torch.bincount(r - 3)
    assert (counts.double() / counts.sum() - 1 / 7).abs().max() < 0.01
    f = torch.empty(1000, device="neuron").random_(0, 5).cpu()
    assert set(f.unique().tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}
    bits = torch.empty(10000, dtype=torch.bool, device="neuron").random_().cpu()
    assert 0.4 < bits.float().mean() < 0.6


def test_bernoulli_tensor_probabilities_and_dropout_mask():
    p = torch.tensor([0.0, 1.0] * 500, device="neuron")
    out = torch.bernoulli(p)
    assert torch.equal(out.cpu(), p.cpu())


def test_invalid_arguments():
    x = torch.empty(4, device="neuron")
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match="from"):
        x.random_(5, 2)
    with pytest.raises(RuntimeError):
        x.uniform_(3, 1)


def test_seed_and_seed_all_are_nondeterministic_and_recorded():
    torch.neuron.seed()
    s1 = torch.neuron.initial_seed()
    torch.neuron.seed_all()
    s2 = torch.neuron.initial_seed()
    assert s1 != s2
    assert torch.neuron.default_generators[1].initial_seed() == s2


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.int16, torch.float32, torch.float64, torch.bfloat16]
)
def test_randperm_on_device(dtype):
    """A permutation of 0..n-1, reproducible from the seed, new each call,
    uniform (every value visits every position), never a CPU fallback."""
    torch_neuronx.clear_op_tracking()
    n = 200 if dtype == torch.bfloat16 else 1000
    torch.neuron.manual_seed(5)
    a = torch.randperm(n, device="neuron", dtype=dtype)
    b = torch.randperm(n, device="neuron", dtype=dtype)
    torch.neuron.manual_seed(5)
    assert torch.equal(torch.randperm(n, device="neuron", dtype=dtype).cpu(), a.cpu())
    assert a.dtype == dtype and a.device.type == "neuron"
    for p in (a, b):
        assert torch.equal(p.cpu().sort().values, torch.arange(n, dtype=dtype))
    assert not torch.equal(a.cpu(), b.cpu())
    assert torch_neuronx.get_fallback_ops() == {}


def test_randperm_statistics_and_errors():
    counts = torch.zeros(4, 4)
    torch.neuron.manual_seed(0)
    for _ in range(2000):
        p = torch.randperm(4, device="neuron").cpu()
        counts[torch.arange(4), p] += 1
    assert (counts - 500).abs().max() < 100  # ~4.4 sigma of a binomial(2000, 1/4)
    out = torch.empty(3, 2, device="neuron", dtype=torch.int64)[:, 0]  # strided out
    torch.randperm(3, out=out)
    assert sorted(out.cpu().tolist()) == [0, 1, 2]
    assert torch.randperm(0, device="neuron").numel() == 0
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="negative"):
            torch.randperm(-1, device=dev)
        with pytest.raises(RuntimeError, match="cannot be greater than 2049"):
            torch.randperm(3000, device=dev, dtype=torch.float16)
        with pytest.raises(RuntimeError, match="int8_t without overflow"):
            torch.randperm(3000, device=dev, dtype=torch.int8)


@pytest.mark.usefixtures("all_native")
def test_dropout_mask_scale_and_backward():
    torch.manual_seed(0)
    x = torch.randn(200, 100).neuron().requires_grad_()
    y = F.dropout(x, p=0.3, training=True)
    kept = y != 0
    frac = kept.float().mean().item()
    assert 0.67 < frac < 0.73  # 20000 draws: 5 sigma is about 0.016
    torch.testing.assert_close(y[kept].cpu(), (x[kept] / 0.7).detach().cpu())
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), kept.float().cpu() / 0.7)
    torch.manual_seed(0)
    y2 = F.dropout(x.detach(), p=0.3, training=True)  # same seed, same mask (Philox)
    assert torch.equal((y2 != 0).cpu(), kept.cpu())
    assert_same(F.dropout(x.detach(), p=0.3, training=False), x.detach().cpu())
