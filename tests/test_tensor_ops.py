"""Factories, copies and casts (csrc/aten/tensor_ops.cpp) against PyTorch
CPU: arange, eye and linspace (with flip and prod); copies, casts and
element-wise ops of permuted views split over threads mid-run; fp32 <-> bf16
casts bit for bit."""

import pytest
import torch
from conftest import assert_same
from op_util import X, grad_check, randn

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


def test_arange():
    for args, kw in [
        ((10,), {}),
        ((2, 11, 3), {}),
        ((5, -3, -2), {}),
        ((0, 1, 0.1), {}),
        ((0, 5), {"dtype": torch.float32}),
        ((3,), {"dtype": torch.bfloat16}),
        ((0, 2**40, 2**37), {}),
    ]:
        assert_same(torch.arange(*args, device="neuron", **kw), torch.arange(*args, **kw))
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 5, 0, device="neuron")
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torch.arange(5, 0, 1, device="neuron")


@pytest.mark.usefixtures("all_native")
def test_flip_eye_linspace_prod():
    for dims in ((0,), (1, 2), (-1,)):
        grad_check(lambda t, dims=dims: torch.flip(t, dims), X)
    assert_same(torch.eye(3, 5, device="neuron"), torch.eye(3, 5))
    assert_same(torch.eye(4, dtype=torch.int64, device="neuron"), torch.eye(4, dtype=torch.int64))
    for a, b, n in ((0, 1, 7), (-3.5, 2.0, 10), (5, 5, 1), (0, 10, 0)):
        assert_same(torch.linspace(a, b, n, device="neuron"), torch.linspace(a, b, n))
    assert_same(
        torch.linspace(0, 10, 6, dtype=torch.int64, device="neuron"),
        torch.linspace(0, 10, 6, dtype=torch.int64),
    )
    grad_check(lambda t: torch.prod(t, 1), X)
    assert_same(torch.prod(X.neuron()), torch.prod(X), rtol=1e-4, atol=1e-30)
    assert_same(
        torch.tensor([[2, 3], [4, 5]]).neuron().prod(0), torch.tensor([[2, 3], [4, 5]]).prod(0)
    )


# ---- edge cases of the iterator's row runs (issue 16) ---------------------------

# The iterator walks the rows of a non-coalescable shape in runs along the
# second-innermost dimension and carries into the outer ones at each run's
# end. A thread's share of rows starts where the split falls, mid-run when
# that dimension's length is odd and prime: these shapes make the second
# thread start inside a run and carry across several outer dimensions.
ROW_RUN_CASES = [
    ((997, 51, 3), (1, 0, 2)),
    ((51, 997, 5), (1, 0, 2)),
    ((3, 5, 331, 7), (0, 2, 1, 3)),
    ((7, 331, 3, 5), (3, 1, 0, 2)),
]


@pytest.mark.parametrize("shape,perm", ROW_RUN_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_runs_split_mid_run(shape, perm, dtype):
    x = randn(*shape, seed=21, dtype=dtype)
    y = randn(*[shape[p] for p in perm], seed=22, dtype=dtype)
    xn, yn = x.to("neuron"), y.to("neuron")
    exact = {"rtol": 0, "atol": 0}
    # copy of a permuted view (same dtype, then a cast)
    assert_same(xn.permute(perm).contiguous(), x.permute(perm).contiguous(), **exact)
    other = torch.float32 if dtype == torch.bfloat16 else torch.bfloat16
    assert_same(xn.permute(perm).to(other), x.permute(perm).to(other), **exact)
    # unary over a sliced last dimension (rows of last-1 elements, strided)
    assert_same(-xn[..., 1:], -x[..., 1:], **exact)
    # binary: a permuted view with a contiguous tensor, into a new output
    assert_same(xn.permute(perm) + yn, x.permute(perm) + y, **exact)
    # in place into a permuted view
    xc, xnc = x.clone(), xn.clone()
    xc.permute(perm).mul_(y)
    xnc.permute(perm).mul_(yn)
    assert_same(xnc, xc, **exact)


# ---- fp32 <-> bf16 casts (kernels/copy.c: the configuration's vectorised
# contiguous loops, the generic table for strided views) ----------------------


def _cast_inputs(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g) * 10.0 ** torch.randint(-45, 39, (n,), generator=g)
    special = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -3e-39, 3.4e38, -3.4e38]
    )
    bits = torch.tensor(  # exact ties: round to the even bf16 (down, then up)
        [0x3F808000, 0x3F818000, 0x7F7F8000, 0x00008000, 0x00018000], dtype=torch.int32
    ).view(torch.float32)
    extra = torch.cat([special, bits])
    x[: min(n, extra.numel())] = extra[:n]
    return x


def _same_bits(got, want):
    """Bitwise equal, except that NaN only has to stay NaN (PyTorch CPU
    writes one canonical NaN; the sign and payload are not specified)."""
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    int_t = torch.int16 if want.dtype == torch.bfloat16 else torch.int32
    assert torch.equal(got[~nan].view(int_t), want[~nan].view(int_t))


@pytest.mark.parametrize("n", [1, 9, 15, 16, 17, 31, 33, 64, 65, 1000, 70001])
def test_f32_bf16_casts_bitwise_as_cpu(n):
    x = _cast_inputs(n)
    _same_bits(x.to("neuron").to(torch.bfloat16).cpu(), x.to(torch.bfloat16))
    b = x.to(torch.bfloat16)
    _same_bits(b.to("neuron").to(torch.float32).cpu(), b.to(torch.float32))
    # offset start (not vector aligned) and a strided view take other paths
    _same_bits(x.to("neuron")[1:].to(torch.bfloat16).cpu(), x[1:].to(torch.bfloat16))
    _same_bits(x.to("neuron")[::3].to(torch.bfloat16).cpu(), x[::3].to(torch.bfloat16))


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_channel_shuffle(layout, dtype):
    x = (torch.randn(2, 12, 3, 5, generator=torch.Generator().manual_seed(0)) * 10).to(dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "strided":
        x = x[:, :, :, ::2]
    for groups in (1, 3, 4):
        got, want = (
            torch.nn.functional.channel_shuffle(x.neuron(), groups),
            torch.nn.functional.channel_shuffle(x, groups),
        )
        assert got.stride() == want.stride()
        assert_same(got, want)
    with pytest.raises(RuntimeError, match="divisible by groups"):
        torch.nn.functional.channel_shuffle(x.neuron(), 5)
    assert torch_neuronx.get_fallback_ops() == {}
