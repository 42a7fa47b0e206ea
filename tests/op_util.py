"""Helpers shared by the per-op test files (tests/test_<csrc/aten file>.py):
seeded inputs, the CPU-fallback check, CPU/neuron leaf pairs, the forward
and backward comparison with the CPU, and the edge-case inputs that more
than one kernel family takes."""

import torch
from conftest import assert_same

import torch_neuronx

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
REALS = FLOATS + [torch.int64, torch.int32, torch.int8, torch.uint8]


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


def sample(shape, dtype, seed):
    """Integers 0..3 (many ties) in dtype."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 4, shape, generator=g).to(dtype)  # ties included


def half_tol(dtype):
    """2e-2 for the 16-bit floats, about fp32's rounding for the others."""
    if dtype in (torch.bfloat16, torch.float16):
        return {"rtol": 2e-2, "atol": 2e-2}
    return {"rtol": 1e-5, "atol": 1e-6}


def native(*names):
    """None of the named ops fell back to CPU (none at all, without names)
    since the tracking was last cleared (the fresh_op_tracking fixture)."""
    ops = torch_neuronx.get_fallback_ops()
    bad = [k for k in ops if any(n in k for n in names)] if names else list(ops)
    assert not bad, ops


def both(t, grad=True):
    """A CPU leaf and a neuron leaf with the same values (None stays None)."""
    if t is None:
        return None, None
    c, n = t.detach().clone(), t.detach().neuron()
    if grad:
        c.requires_grad_()
        n.requires_grad_()
    return c, n


def grad_check(fn, *inputs, tol=None):
    """fn on neuron and CPU: outputs and input gradients match."""
    tol = tol or {}
    cpu = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    neu = [x.neuron().requires_grad_(x.is_floating_point()) for x in inputs]
    oc, on = fn(*cpu), fn(*neu)
    assert_same(on, oc, **tol)
    w = torch.linspace(-1, 1, oc.numel()).view(oc.shape) if oc.dim() else torch.tensor(1.5)
    (oc * w).sum().backward()
    (on * w.neuron()).sum().backward()
    for a, b in zip(neu, cpu):
        if b.grad is not None:
            assert_same(a.grad, b.grad, **tol)


# the composite tests' common input
X = torch.randn(4, 6, 5, generator=torch.Generator().manual_seed(0))

# a generator shared by the tests that take whatever values come next
R = torch.Generator().manual_seed(11)


def rnd(*shape):
    return torch.randn(*shape, generator=R)


def softmax_rows(n, seed=0):
    """Rows of length n that a kernel without the max subtraction, or with a
    wrong one, gets wrong: the row index picks the numeric regime."""
    g = gen(seed)
    base = torch.randn(11, n, generator=g)
    rows = [
        base[0] * 3,  # ordinary logits
        base[1] * 1e4,  # huge spread: exp(x) overflows everywhere
        base[2] + 90.0,  # all near 90: exp(90) = inf in fp32
        base[3] - 90.0,  # all near -90: exp underflows to 0, 0/0 without the max
        base[4] * 1e-30,  # tiny: uniform to fp32 precision
        base[5] * 1e-3 + 1e4,  # a large offset with a small spread
        torch.where(torch.arange(n) % 3 == 0, base[6] * 1e4, base[6] * 1e-4),  # mixed
        torch.where(torch.arange(n) % 2 == 1, torch.tensor(float("-inf")), base[7] * 5),
        torch.where(torch.arange(n) == n - 1, base[8] * 5, torch.tensor(float("-inf"))),
        base[9] * 20 + 80,  # the max near the far end of exp's range
        base[10] * 2 - 120,  # exp underflows even to subnormals: 0/0 without the max
    ]
    return torch.stack(rows)


# Lengths: one element, under one AVX2 vector, one AVX2 / AVX-512 vector and
# one more, two AVX-512 vectors (an unrolled body) +- 1, and over the unary
# kernels' parallel grain (16384 elements, split between threads mid-vector).
ELT_LENS = [1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 65, 40007]
SPECIALS = [float("inf"), float("-inf"), float("nan"), -0.0, 1e-40, -1e-40, 88.8, -88.8, 100.0]


def elt_input(n, scale=4.0, seed=0):
    """n values, the special ones spread over the whole length (so they land
    in vector bodies and remainders alike)."""
    x = randn(n, seed=seed) * scale
    if n >= 3:
        pos = torch.linspace(0, n - 1, min(n, len(SPECIALS))).long()
        x[pos] = torch.tensor(SPECIALS[: len(pos)])
    return x
