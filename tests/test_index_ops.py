"""Native indexing (csrc/aten/index_ops.cpp) against CPU: index_select /
index_add / index_copy / index_fill / embedding, gather / scatter /
scatter_reduce, take / put, masked_fill / masked_scatter / masked_select,
where, tril / triu, isin, nonzero, count_nonzero, bincount through its
callers, repeat_interleave, roll and padding, advanced indexing; bad indices
raising like CPU (at the next sync); and the edge cases of gather / scatter /
index_select / index_add."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, run_python
from op_util import REALS, gen, grad_check, native, randn, rnd

import torch_neuronx


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 50, shape, generator=g).to(dtype)


pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


@pytest.mark.parametrize("dtype", REALS + [torch.bool, torch.complex64])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_index_select(dtype, dim, idx_dtype):
    x = rand((5, 6, 7), torch.float32).to(dtype)
    idx = torch.tensor([4, 0, 0, 2], dtype=idx_dtype)
    assert_same(torch.index_select(x.neuron(), dim, idx.neuron()), torch.index_select(x, dim, idx))
    xt = x.transpose(0, 2)  # non-contiguous source
    assert_same(xt.neuron().index_select(dim, idx.neuron()), xt.index_select(dim, idx))
    assert_same(x.neuron().index_select(dim, idx.neuron()[:0]), x.index_select(dim, idx[:0]))
    native()


def test_index_select_out_and_scalar_index():
    x = torch.randn(4, 3)
    out = torch.empty(0, device="neuron")
    torch.index_select(x.neuron(), 0, torch.tensor(2).neuron(), out=out)
    assert_same(out, torch.index_select(x, 0, torch.tensor(2)))
    with pytest.raises(IndexError, match="vector"):
        x.neuron().index_select(0, torch.zeros(2, 2, dtype=torch.long, device="neuron"))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        x.neuron().index_select(0, torch.zeros(2, device="neuron"))


@pytest.mark.parametrize("dtype", REALS)
def test_index_add(dtype):
    x, src = rand((5, 4), dtype, 1), rand((3, 4), dtype, 2)
    idx = torch.tensor([1, 3, 1])
    for alpha in (1, 2):
        assert_same(
            x.neuron().index_add(0, idx.neuron(), src.neuron(), alpha=alpha),
            x.index_add(0, idx, src, alpha=alpha),
        )
    srcT = rand((5, 3), dtype, 3)
    y = x.neuron()
    y.index_add_(1, torch.tensor([0, 3, 3]).neuron(), srcT.neuron())
    assert_same(y, x.index_add(1, torch.tensor([0, 3, 3]), srcT))
    native()


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64]
)
def test_index_copy_matches_cpu_on_device(dtype):
    """index_copy / index_copy_ / out=, on the device (no CPU fallback, no
    host sync: a static KV cache's update): every dim, a transposed self,
    a row named twice (the last wins, as on CPU), 0-d and empty indices, and
    the update inside a NeuronGraph capture."""
    g = torch.Generator().manual_seed(4)

    def make(shape):
        x = torch.randn(shape, generator=g) * 5
        return torch.complex(x, -x).to(dtype) if dtype.is_complex else x.to(dtype)

    x = make((4, 5, 6))
    for dim, idx in ((0, [3, 0]), (1, [4, 1, 4]), (2, [5]), (-1, [2, 0, 1]), (-3, [])):
        i = torch.tensor(idx, dtype=torch.long)
        shape = list(x.shape)
        shape[dim] = len(idx)
        src = make(shape)
        assert_same(x.neuron().index_copy(dim, i.neuron(), src.neuron()), x.index_copy(dim, i, src))
        y = x.neuron()
        y.index_copy_(dim, i.neuron(), src.neuron())
        assert_same(y, x.clone().index_copy_(dim, i, src))
        out = torch.empty(0, dtype=dtype).neuron()
        torch.index_copy(x.neuron(), dim, i.neuron(), src.neuron(), out=out)
        assert_same(out, x.index_copy(dim, i, src))
    # transposed self, 0-d index
    t, src = x.transpose(0, 2), make((6, 5, 1))
    yt = x.neuron().transpose(0, 2)
    yt.index_copy_(2, torch.tensor(3).neuron(), src.neuron())
    assert_same(yt, t.clone().index_copy_(2, torch.tensor(3), src))
    # a 0-d self (one row)
    for dim in (0, -1):
        z, v, i = make(()), make(()), torch.tensor([0])
        assert_same(z.neuron().index_copy(dim, i.neuron(), v.neuron()), z.index_copy(dim, i, v))
    native()
    # a KV-cache update captured, then replayed at new positions
    cache, ref = torch.zeros(1, 2, 8, 4, dtype=dtype).neuron(), torch.zeros(1, 2, 8, 4, dtype=dtype)
    pos, val = torch.tensor([0]).neuron(), make((1, 2, 1, 4)).neuron()
    graph = torch.neuron.NeuronGraph()
    with torch.neuron.graph(graph):
        cache.index_copy_(2, pos, val)
    for p in (5, 2, 7):
        v = make((1, 2, 1, 4))
        pos.fill_(p)
        val.copy_(v.neuron())
        graph.replay()
        ref.index_copy_(2, torch.tensor([p]), v)
    assert_same(cache, ref)


def test_index_copy_bad_input_raises_like_cpu():
    x, src = torch.zeros(3, 2), torch.ones(1, 2)
    cases = [
        (0, torch.tensor([1], dtype=torch.int32), src),  # not int64
        (0, torch.tensor([[1]]), src),  # 2-d index
        (0, torch.tensor([1, 2]), src),  # fewer rows than indices
        (1, torch.tensor([1]), torch.ones(3, 1, dtype=torch.float64)),  # another dtype
        (0, torch.tensor([1]), torch.ones(1, 3)),  # another row shape
        (2, torch.tensor([1]), src),  # dim out of range
    ]
    x0, s0 = torch.zeros(()), torch.ones(())
    for dim, i in ((1, torch.tensor([0])), (0, torch.tensor([0, 0]))):  # 0-d self
        with pytest.raises(Exception) as want:
            x0.clone().index_copy_(dim, i, s0)
        with pytest.raises(want.type) as got:
            x0.neuron().index_copy_(dim, i.neuron(), s0.neuron())
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
    for dim, i, s in cases:
        with pytest.raises(Exception) as want:
            x.clone().index_copy_(dim, i, s)
        with pytest.raises(want.type) as got:
            x.neuron().index_copy_(dim, i.neuron(), s.neuron())
            torch.neuron.synchronize()
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
    for bad in (3, -1):  # out of range: IndexError at the next sync, as CUDA's assert
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
            x.clone().index_copy_(0, torch.tensor([bad]), src)
        y = x.neuron()
        y.index_copy_(0, torch.tensor([bad]).neuron(), src.neuron())
        with pytest.raises(IndexError, match=f"index_copy_: index {bad} is out of bounds"):
            torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.zeros(1, 2).neuron().expand(3, 2).index_copy_(
            0, torch.tensor([1]).neuron(), src.neuron()
        )


@pytest.mark.parametrize("dtype", REALS + [torch.bool, torch.complex64])
def test_index_fill_matches_cpu_on_device(dtype):
    """index_fill / index_fill_ (a Scalar or a 0-d tensor value), every dim,
    negative and repeated indices, a transposed self, 0-d self, empty index:
    on the device, no CPU fallback."""
    x = rand((4, 5, 6), torch.float32).to(dtype)
    value = 3 if not dtype.is_floating_point else -2.5
    for dim in (0, 1, 2, -1):
        i = torch.tensor([-1, 0, 2, 0])
        assert_same(x.neuron().index_fill(dim, i.neuron(), value), x.index_fill(dim, i, value))
        y = x.neuron()
        y.index_fill_(dim, i.neuron(), torch.tensor(value))
        assert_same(y, x.clone().index_fill_(dim, i, torch.tensor(value)))
    t = x.transpose(0, 2)
    yt = t.neuron()
    yt.index_fill_(1, torch.tensor(3).neuron(), value)  # 0-d index
    assert_same(yt, t.clone().index_fill_(1, torch.tensor(3), value))
    z = torch.zeros((), dtype=dtype)
    assert_same(
        z.neuron().index_fill(0, torch.tensor([0]).neuron(), 1),
        z.index_fill(0, torch.tensor([0]), 1),
    )
    e = torch.tensor([], dtype=torch.int64)
    assert_same(x.neuron().index_fill(1, e.neuron(), value), x.index_fill(1, e, value))
    native()


def test_index_fill_bad_input_raises_like_cpu():
    x = torch.zeros(3, 4)
    cases = [
        (0, torch.tensor([1], dtype=torch.int32), 1.0),  # not int64
        (0, torch.tensor([[1]]), 1.0),  # 2-d index
        (2, torch.tensor([1]), 1.0),  # dim out of range
        (0, torch.tensor([1]), torch.ones(1)),  # a value tensor with a dimension
        (0, torch.tensor([1]), 1j),  # complex value into a real tensor
    ]
    for dim, i, v in cases:
        with pytest.raises(Exception) as want:
            x.clone().index_fill_(dim, i, v)
        vn = v.neuron() if isinstance(v, torch.Tensor) else v
        with pytest.raises(want.type) as got:
            x.neuron().index_fill_(dim, i.neuron(), vn)
            torch.neuron.synchronize()
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(2, dtype=torch.float16).index_fill_(0, torch.tensor([0]), 1e6)
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(2, dtype=torch.float16).neuron().index_fill_(0, torch.tensor([0]).neuron(), 1e6)
    for bad in (3, -4):  # out of range: IndexError at the next sync, as CUDA's assert
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
            x.clone().index_fill_(0, torch.tensor([bad]), 1.0)
        y = x.neuron()
        y.index_fill_(0, torch.tensor([bad]).neuron(), 1.0)
        with pytest.raises(IndexError, match=f"index_fill_: index {bad} is out of bounds"):
            torch.neuron.synchronize()


def test_index_copy_backward_on_device():
    """index_copy's backward fills the copied rows of the gradient with 0
    (index_fill): on the device too."""
    x = rand((5, 3), torch.float32).requires_grad_()
    src = rand((2, 3), torch.float32, 1).requires_grad_()
    xn = x.detach().neuron().requires_grad_()
    sn = src.detach().neuron().requires_grad_()
    i = torch.tensor([4, 1])
    g = rand((5, 3), torch.float32, 2)
    x.index_copy(0, i, src).backward(g)
    xn.index_copy(0, i.neuron(), sn).backward(g.neuron())
    assert_same(xn.grad, x.grad)
    assert_same(sn.grad, src.grad)
    native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_embedding_forward_backward(dtype, padding_idx):
    emb = torch.nn.Embedding(10, 8, padding_idx=padding_idx).to(dtype)
    ids = torch.tensor([[1, 0, 3, 3], [9, 1, 1, 0]])
    out = emb(ids)
    out.float().pow(2).sum().backward()
    emb_n = torch.nn.Embedding(10, 8, padding_idx=padding_idx).to(dtype)
    emb_n.load_state_dict(emb.state_dict())
    emb_n.to("neuron")
    out_n = emb_n(ids.neuron())
    out_n.float().pow(2).sum().backward()
    assert_same(out_n, out)
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    assert_same(emb_n.weight.grad, emb.weight.grad, **tol)
    native()


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
def test_gather_scatter(dtype):
    x = rand((4, 5), torch.float32, 4).to(dtype)
    idx = torch.tensor([[0, 1, 3], [2, 2, 0]])
    for dim in (0, 1):
        assert_same(x.neuron().gather(dim, idx.neuron()), x.gather(dim, idx))
    src = rand((2, 3), torch.float32, 5).to(dtype)
    idx_u = torch.tensor([[0, 1, 3], [2, 0, 1]])  # unique along dim 1 rows
    assert_same(x.neuron().scatter(1, idx_u.neuron(), src.neuron()), x.scatter(1, idx_u, src))
    assert_same(x.neuron().scatter(0, idx.neuron(), 1), x.scatter(0, idx, 1))
    if dtype != torch.bool:
        assert_same(
            x.neuron().scatter_add(1, idx.neuron(), src.neuron()), x.scatter_add(1, idx, src)
        )
        y = x.neuron()
        y.scatter_add_(0, idx.neuron(), src.neuron())
        assert_same(y, x.scatter_add(0, idx, src))
    native()


def test_gather_noncontiguous_and_backward():
    x = torch.randn(6, 5, dtype=torch.float64).t()  # (5, 6), non-contiguous
    idx = torch.randint(0, 5, (3, 6))
    xn = x.neuron().requires_grad_()
    xc = x.clone().requires_grad_()
    torch.gather(xn, 0, idx.neuron()).pow(2).sum().backward()
    torch.gather(xc, 0, idx).pow(2).sum().backward()
    assert_same(xn.grad, xc.grad)
    native()


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
def test_masked_fill(dtype):
    x = rand((3, 4), torch.float32, 8).to(dtype)
    mask = torch.tensor([True, False, False, True])  # broadcast over rows
    value = True if dtype == torch.bool else 5
    assert_same(x.neuron().masked_fill(mask.neuron(), value), x.masked_fill(mask, value))
    assert_same(
        x.neuron().masked_fill(mask.neuron(), torch.tensor(value)),
        x.masked_fill(mask, torch.tensor(value)),
    )
    xt = x.t().neuron()  # non-contiguous, in place
    xt.masked_fill_(mask.view(4, 1).neuron(), value)
    assert_same(xt, x.t().masked_fill(mask.view(4, 1), value))
    native()
    with pytest.raises(RuntimeError, match="boolean"):
        x.neuron().masked_fill(mask.neuron().int(), 1)


def test_masked_fill_attention_mask_pattern():
    scores = torch.randn(2, 1, 4, 4)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    ref = scores.masked_fill(causal, float("-inf")).softmax(-1)
    out = scores.neuron().masked_fill(causal.neuron(), float("-inf")).softmax(-1)
    assert_same(out, ref)
    native()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_isin(dtype):
    e = torch.tensor([[1, 2, 3], [4, 5, 2]]).to(dtype)
    t = torch.tensor([2, 5, 9]).to(dtype)
    for invert in (False, True):
        assert_same(
            torch.isin(e.neuron(), t.neuron(), invert=invert), torch.isin(e, t, invert=invert)
        )
    native()


BAD_INDEX_CASES = {
    "index_select": "x.index_select(0, torch.tensor([0, 7], device='neuron'))",
    "embedding": "F.embedding(torch.tensor([[1, 12]], device='neuron'), x)",
    "gather": "x.gather(0, torch.tensor([[5, 0]], device='neuron'))",
    "scatter_add": "x.scatter_add(0, torch.tensor([[-1, 0]], device='neuron'), x)",
    "index_add": "x.index_add(0, torch.tensor([9], device='neuron'), x[:1])",
    "nll_loss": "F.nll_loss(x, torch.tensor([0, 2, 5, 1, 0], device='neuron'))",
}
CPU_EXC = {
    "index_select": IndexError,
    "embedding": IndexError,
    "gather": RuntimeError,
    "scatter_add": RuntimeError,
    "index_add": RuntimeError,
    "nll_loss": IndexError,
}


@pytest.mark.parametrize("case", sorted(BAD_INDEX_CASES))
def test_bad_index_raises_like_cpu_at_sync(case):
    """A bad index is found by the kernel and raised (with CPU's exception type) at
    the next synchronisation; the device stays usable afterwards."""
    code = BAD_INDEX_CASES[case]
    x_cpu = torch.randn(5, 3)
    with pytest.raises(CPU_EXC[case]):  # the oracle's exception type
        eval(code.replace("device='neuron'", "device='cpu'"), {"torch": torch, "F": F, "x": x_cpu})
    x = x_cpu.neuron()
    out = eval(code, {"torch": torch, "F": F, "x": x})
    with pytest.raises(CPU_EXC[case], match="out of bounds"):
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # reported once, then the device is clean
    assert_same(out.new_ones(3) + 1, torch.full((3,), 2.0))


def test_bad_index_raises_at_the_op_under_launch_blocking():
    r = run_python(
        "import torch\n"
        "x = torch.randn(4, 2, device='neuron')\n"
        "try:\n"
        "    x.index_select(0, torch.tensor([4], device='neuron'))\n"
        "except IndexError as e:\n"
        "    print('raised', 'out of bounds' in str(e))\n",
        env_extra={"NEURON_LAUNCH_BLOCKING": "1"},
    )
    assert r.stdout.strip() == "raised True", r.stderr


def test_bad_index_raised_by_item_and_cpu_copy():
    x = torch.randn(4, 2, device="neuron")
    y = x.index_select(0, torch.tensor([0, 4], device="neuron"))
    with pytest.raises(IndexError):
        y.cpu()
    y = x.index_select(0, torch.tensor([-1], device="neuron"))
    with pytest.raises(IndexError):
        y.sum().item()


INDEX_CASES = [
    lambda x, d: x[d(torch.tensor([2, 0, 2]))],
    lambda x, d: x[:, d(torch.tensor([[1], [3]]))],
    lambda x, d: x[d(torch.tensor([1, 0])), :, d(torch.tensor([4, -1]))],  # non-adjacent
    lambda x, d: x[:, d(torch.tensor([0, 3])), d(torch.tensor([[1], [2]]))],  # broadcast
    lambda x, d: x[d(torch.tensor([True, False, True]))],
    lambda x, d: x[x > 0],
    lambda x, d: x[..., d(torch.tensor([-5, 4], dtype=torch.int32))],
    lambda x, d: x.transpose(0, 2)[d(torch.tensor([1, 1]))],  # non-contiguous self
]


@pytest.mark.parametrize("case", range(len(INDEX_CASES)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_advanced_index(case, dtype):
    x = rand((3, 4, 5), torch.float32, 9).to(dtype)
    if dtype == torch.bool and case == 5:
        return  # x > 0 on bool is a different op; covered by the other dtypes
    f = INDEX_CASES[case]
    assert_same(f(x.neuron(), lambda t: t.neuron()), f(x, lambda t: t))
    native()


def test_advanced_index_cpu_indices_and_backward():
    x = torch.randn(4, 6)
    idx = torch.tensor([3, 1, 3])
    assert_same(x.neuron()[idx], x[idx])  # CPU indices move to the device
    xn = x.neuron().requires_grad_()
    xc = x.clone().requires_grad_()
    (xn[idx.neuron(), 2:] ** 2).sum().backward()  # backward accumulates duplicates
    (xc[idx, 2:] ** 2).sum().backward()
    assert_same(xn.grad, xc.grad)
    native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    x = rand((4, 5), torch.float32, 10).to(dtype)
    rows, cols = torch.tensor([0, 2, 0]), torch.tensor([1, 1, 1])
    v = rand((3,), torch.float32, 11).to(dtype)
    if not accumulate:  # duplicates with assignment are unspecified: keep them unique
        rows = torch.tensor([0, 2, 3])
    y = x.neuron()
    y.index_put_((rows.neuron(), cols.neuron()), v.neuron(), accumulate=accumulate)
    assert_same(y, x.clone().index_put_((rows, cols), v, accumulate=accumulate))
    # non-contiguous self, broadcast values, bool mask
    z = x.t().neuron()
    z[torch.tensor([4, 0]).neuron()] = v[:1].neuron()
    ref = x.t().clone()
    ref[torch.tensor([4, 0])] = v[:1]
    assert_same(z, ref)
    m = x.neuron()
    m[m != m[0, 0]] = v[0].neuron()
    ref = x.clone()
    ref[ref != ref[0, 0]] = v[0]
    assert_same(m, ref)
    native()


def test_index_errors_like_cpu():
    x = torch.randn(3, 4, device="neuron")
    with pytest.raises(IndexError, match="too many indices"):
        x[torch.tensor([0]).neuron(), torch.tensor([0]).neuron(), torch.tensor([0]).neuron()]
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[torch.tensor([0.0]).neuron()]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.tensor([True, False]).neuron()]
    with pytest.raises(IndexError, match="broadcast"):
        x[torch.tensor([0, 1]).neuron(), torch.tensor([0, 1, 2]).neuron()]
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_(
            (torch.tensor([0]).neuron(),), torch.ones(4, dtype=torch.float64, device="neuron")
        )
    y = x[torch.tensor([3]).neuron()]
    with pytest.raises(IndexError, match="out of bounds"):
        y.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool, torch.complex64])
def test_nonzero_and_masked_select(dtype):
    x = torch.tensor([[0.0, 1.5, -0.0], [2.0, 0.0, 3.0]]).to(dtype)
    assert_same(x.neuron().nonzero(), x.nonzero())
    assert_same(torch.nonzero(x.neuron()[:0]), torch.nonzero(x[:0]))
    mask = torch.tensor([True, False, True])
    assert_same(x.neuron().masked_select(mask.neuron()), x.masked_select(mask))
    native()


def test_printing_needs_no_fallback():
    x = torch.randn(3, 4, device="neuron")
    assert "neuron:0" in str(x)
    native()


def test_gather_scatter_int32_index_and_bad_dtype():
    x = torch.randn(3, 4)
    i32 = torch.tensor([[0, 3], [2, 0]], dtype=torch.int32)
    assert_same(x.neuron().gather(1, i32.neuron()), x.gather(1, i32))
    assert_same(x.neuron().scatter(1, i32.neuron(), 1.0), x.scatter(1, i32, 1.0))
    assert_same(
        x.neuron().scatter_add(1, i32.neuron(), torch.ones(2, 2).neuron()),
        x.scatter_add(1, i32, torch.ones(2, 2)),
    )
    with pytest.raises(RuntimeError, match="int32/int64"):
        x.neuron().gather(1, i32.to(torch.int16).neuron())


# ---- where, tril / triu ----------------------------------------------------------


def test_where():
    c = torch.tensor([[True, False, True]])
    x, y = torch.randn(2, 3), torch.randn(2, 1, dtype=torch.float64)
    assert_same(torch.where(c.neuron(), x.neuron(), y.neuron()), torch.where(c, x, y))
    assert_same(torch.where(c.neuron(), x.neuron(), 0.0), torch.where(c, x, 0.0))
    assert_same(x.neuron().masked_fill(~c.neuron(), -1.5), x.masked_fill(~c, -1.5))
    out = torch.empty(0, device="neuron")
    torch.where(c.neuron(), x.neuron(), x.neuron() * 2, out=out)
    assert_same(out, torch.where(c, x, x * 2))
    with pytest.raises(RuntimeError, match="boolean"):
        torch.where(
            torch.ones(3, device="neuron"),
            torch.ones(3, device="neuron"),
            torch.zeros(3, device="neuron"),
        )


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu(k):
    x = torch.randn(2, 4, 5)
    for f in (torch.tril, torch.triu):
        assert_same(f(x.neuron(), k), f(x, k))
        assert_same(f(x.neuron().transpose(1, 2), k), f(x.transpose(1, 2), k))
    n = x.neuron()
    n.tril_(k)
    assert_same(n, x.tril(k))
    m = torch.ones(6, 6, dtype=torch.bool)
    assert_same(torch.ones(6, 6, dtype=torch.bool, device="neuron").tril(), m.tril())
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.tril(torch.ones(3, device="neuron"))
    assert torch_neuronx.get_fallback_ops() == {}


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin", "max"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    g = torch.Generator().manual_seed(5)
    self_ = torch.randn(4, 6, generator=g)
    src = torch.randn(4, 5, generator=g)
    src[1, 2] = float("nan") if reduce in ("amax", "amin", "max") else src[1, 2]
    index = torch.randint(0, 6, (4, 5), generator=g)
    ref = self_.scatter_reduce(1, index, src, reduce, include_self=include_self)
    got = self_.neuron().scatter_reduce(
        1, index.neuron(), src.neuron(), reduce, include_self=include_self
    )
    assert_same(got, ref, rtol=1e-5, atol=1e-6, equal_nan=True)
    iself = torch.randint(-5, 5, (3, 4), generator=g)
    isrc = torch.randint(-5, 5, (3, 4), generator=g)
    iidx = torch.randint(0, 4, (3, 4), generator=g)
    assert_same(
        iself.neuron().scatter_reduce(
            0, iidx.neuron() % 3, isrc.neuron(), reduce, include_self=include_self
        ),
        iself.scatter_reduce(0, iidx % 3, isrc, reduce, include_self=include_self),
    )


@pytest.mark.usefixtures("all_native")
def test_scatter_reduce_backward_unfold_backward_and_integer_pow():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 9, generator=g)
    idx = torch.randint(0, 3, (2, 9), generator=g)
    grad_check(
        lambda t: torch.zeros(2, 3, device=t.device).scatter_reduce(
            1, idx.to(t.device), t, "amax", include_self=False
        ),
        x,
    )
    grad_check(lambda t: t.unfold(1, 4, 2).pow(2).sum(-1), x)  # overlapping windows
    grad_check(lambda t: t.unfold(0, 2, 1), x)
    a = torch.randint(-4, 5, (20,), generator=g)
    b = torch.randint(-2, 6, (20,), generator=g)
    assert_same(a.neuron() ** b.neuron(), a**b)
    assert_same(
        a.to(torch.int8).neuron() ** b.to(torch.int8).neuron(), a.to(torch.int8) ** b.to(torch.int8)
    )
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="reduce argument must be"):
            torch.zeros(3, device=dev).scatter_reduce(
                0, torch.zeros(3, dtype=torch.long, device=dev), torch.ones(3, device=dev), "foo"
            )


@pytest.mark.usefixtures("all_native")
def test_masked_scatter():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(4, 6, generator=g)
    mask = torch.rand(4, 6, generator=g) > 0.4
    src = torch.randn(30, generator=g)
    grad_check(lambda a, s: a.masked_scatter(mask.to(a.device), s), x, src)
    # a mask broadcast over rows, a strided self written in place
    row = torch.rand(6, generator=g) > 0.5
    xn, xc = x.neuron().t(), x.clone().t()
    xn.masked_scatter_(row[:4].neuron(), src[:30].neuron())
    xc.masked_scatter_(row[:4], src[:30])
    assert_same(xn, xc)
    assert_same(xn.masked_scatter_(torch.zeros_like(xn, dtype=torch.bool), src.neuron()), xc)
    with pytest.raises(RuntimeError, match="Number of elements of source"):
        x.neuron().masked_scatter_(torch.ones(4, 6, dtype=torch.bool).neuron(), src[:5].neuron())
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.neuron().masked_scatter_(mask.int().neuron(), src.neuron())
    with pytest.raises(RuntimeError, match="same dtypes"):
        x.neuron().masked_scatter_(mask.neuron(), src.double().neuron())


@pytest.mark.usefixtures("all_native")
def test_take_and_put():
    g = torch.Generator().manual_seed(17)
    x = torch.randn(4, 5, generator=g)
    idx = torch.tensor([[0, 19, -1], [-20, 7, 7]])
    grad_check(lambda a: torch.take(a, idx.to(a.device)), x)
    distinct = torch.tensor([0, 19, -2, 7, 11, -9])  # no two name one element
    for accumulate, where in ((False, distinct), (True, idx)):
        src = torch.randn(6, generator=g)
        for base in (x, x.t()):  # contiguous and strided destinations
            want = base.clone().put_(where, src, accumulate)
            got = base.neuron().clone().put_(where.neuron(), src.neuron(), accumulate)
            assert_same(got, want)
    grad_check(
        lambda a, s: a.put(idx.to(a.device), s, accumulate=True), x, torch.randn(2, 3, generator=g)
    )
    xn = x.neuron()
    with pytest.raises(RuntimeError, match="long tensor"):
        xn.take(idx.int().neuron())
    with pytest.raises(IndexError, match="same number of elements"):
        xn.clone().put_(idx.neuron(), torch.ones(2, device="neuron"))
    with pytest.raises(RuntimeError, match="same dtype"):
        xn.clone().put_(idx.neuron(), torch.ones(6, dtype=torch.float64, device="neuron"))
    with pytest.raises(IndexError):
        xn.take(torch.tensor([20]).neuron())
        torch.neuron.synchronize()


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64])
def test_count_nonzero(dtype):
    x = (torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(10)) > 0.3).to(dtype) * 1
    x = x.to(dtype)
    for dim in (None, 0, -1, (0, 2), ()):
        kw = {} if dim is None else {"dim": dim}
        assert_same(torch.count_nonzero(x.neuron(), **kw), torch.count_nonzero(x, **kw))


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_with_tensor_repeats(dtype):
    reps = torch.tensor([2, 0, 3, 1, 0], dtype=dtype)
    assert_same(torch.repeat_interleave(reps.neuron()), torch.repeat_interleave(reps))
    assert_same(
        torch.repeat_interleave(reps.neuron(), output_size=6),
        torch.repeat_interleave(reps, output_size=6),
    )
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(11))
    grad_check(lambda a: torch.repeat_interleave(a, reps.to(a.device), dim=0), x)
    empty = torch.empty(0, dtype=dtype)
    assert_same(torch.repeat_interleave(empty.neuron()), torch.repeat_interleave(empty))
    with pytest.raises(RuntimeError, match="can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], dtype=dtype).neuron())
    with pytest.raises(RuntimeError, match="1D"):
        torch.repeat_interleave(reps.view(1, -1).neuron())
    with pytest.raises(RuntimeError, match="does not match"):
        torch.repeat_interleave(reps.neuron(), output_size=5)
    with pytest.raises(NotImplementedError, match="Float"):
        torch.repeat_interleave(reps.float().neuron())


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize(
    "name", ["roll", "roll_flat", "reflect1d", "reflect2d", "replicate1d", "replicate2d"]
)
def test_roll_and_padding(name):
    x, y = rnd(3, 4, 6), rnd(3, 4, 6)
    fns = {
        "roll": lambda a, b: a.roll((2, -1), (1, 2)) + b,
        "roll_flat": lambda a, b: a.roll(5) * b,
        "reflect1d": lambda a, b: F.pad(a, (2, 3), mode="reflect"),
        "reflect2d": lambda a, b: F.pad(a, (2, 3, 1, 2), mode="reflect"),
        "replicate1d": lambda a, b: F.pad(a, (3, 1), mode="replicate"),
        "replicate2d": lambda a, b: F.pad(a[None], (1, 4, 2, 0), mode="replicate"),
    }
    grad_check(fns[name], x, y, tol={"rtol": 1e-5, "atol": 1e-5})


# ---- edge cases of gather / scatter / scatter_add / scatter_reduce /
# index_select / index_add / take_along_dim (issue 16; tools/mutate.py checks
# that these tests catch planted bugs): transposed, sliced (storage offset,
# steps) and expanded index, src, self and out ------------------------------------


def layouts(t):
    """The same values in other layouts: (name, make) where make maps a
    contiguous tensor of t's shape to a non-contiguous one of equal values."""

    def transposed(x):
        return x.t().contiguous().t()

    def offset(x):  # a slice of a larger tensor: storage offset and row stride
        big = torch.zeros(x.shape[0] + 2, x.shape[1] + 3, dtype=x.dtype, device=x.device)
        big[1 : 1 + x.shape[0], 2 : 2 + x.shape[1]] = x
        return big[1 : 1 + x.shape[0], 2 : 2 + x.shape[1]]

    def stepped(x):  # every other column of a wider tensor
        big = torch.zeros(x.shape[0], 2 * x.shape[1], dtype=x.dtype, device=x.device)
        big[:, ::2] = x
        return big[:, ::2]

    return [("transposed", transposed), ("offset", offset), ("stepped", stepped)]


LAYOUTS = ["transposed", "offset", "stepped"]


def relayout(x, name):
    return dict(layouts(x))[name](x)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1])
def test_gather_noncontiguous_index_self_out(layout, dim):
    src = randn(9, 11, seed=20)
    idx = torch.randint(0, src.shape[dim], (7, 6), generator=gen(21))
    want = torch.gather(src, dim, idx)
    sn, ixn = src.neuron(), idx.neuron()
    assert_same(torch.gather(sn, dim, relayout(ixn, layout)), want)
    assert_same(torch.gather(relayout(sn, layout), dim, ixn), want)
    out = relayout(torch.zeros(7, 6, device="neuron"), layout)
    torch.gather(sn, dim, ixn, out=out)
    assert_same(out, want)
    native("gather")


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_expanded_index(dim):
    """A broadcast index (stride 0), as take_along_dim and top-k routing make."""
    src = randn(9, 11, seed=22)
    col = torch.randint(0, src.shape[dim], (7, 1) if dim == 0 else (1, 6), generator=gen(23))
    idx = col.expand(7, 6)
    assert_same(torch.gather(src.neuron(), dim, idx.neuron()), torch.gather(src, dim, idx))
    native("gather")


def test_take_along_dim_broadcast_and_noncontiguous():
    x = randn(5, 8, 6, seed=24)
    idx = torch.argsort(x, dim=1)[:, :3]  # sliced: non-contiguous
    assert_same(torch.take_along_dim(x.neuron(), idx.neuron(), 1), torch.take_along_dim(x, idx, 1))
    b = torch.randint(0, 8, (1, 4, 1), generator=gen(25))  # broadcast over dims 0 and 2
    assert_same(torch.take_along_dim(x.neuron(), b.neuron(), 1), torch.take_along_dim(x, b, 1))
    xt = x.transpose(0, 2)
    it = torch.randint(0, 6, (5, 8, 2), generator=gen(26)).transpose(0, 2)  # (2, 8, 5)
    assert_same(torch.take_along_dim(xt.neuron(), it.neuron(), 0), torch.take_along_dim(xt, it, 0))
    native("gather")


def perm_index(rows, cols, size, dim, seed):
    """An index without duplicates along dim (scatter's result is then
    defined): per column (dim 0) or row (dim 1), distinct positions."""
    g = gen(seed)
    if dim == 0:
        return torch.stack([torch.randperm(size, generator=g)[:rows] for _ in range(cols)], 1)
    return torch.stack([torch.randperm(size, generator=g)[:cols] for _ in range(rows)], 0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_noncontiguous(layout, dim):
    self_ = randn(9, 11, seed=30)
    idx = perm_index(7, 6, self_.shape[dim], dim, seed=31)
    src = randn(8, 7, seed=32)  # larger than idx: only idx's shape is read
    want = torch.scatter(self_, dim, idx, src)
    sn, ixn, srn = self_.neuron(), idx.neuron(), src.neuron()
    assert_same(torch.scatter(sn, dim, relayout(ixn, layout), srn), want)
    assert_same(torch.scatter(sn, dim, ixn, relayout(srn, layout)), want)
    inplace = relayout(sn, layout)
    inplace.scatter_(dim, ixn, srn)
    assert_same(inplace, want)
    out = relayout(torch.zeros(9, 11, device="neuron"), layout)
    torch.scatter(sn, dim, ixn, srn, out=out)
    assert_same(out, want)
    v = torch.scatter(self_, dim, idx, -3.5)
    assert_same(torch.scatter(sn, dim, relayout(ixn, layout), -3.5), v)
    native("scatter")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add_and_reduce_noncontiguous(layout, dim):
    """Duplicate indices accumulate; integer-valued floats keep the sums exact
    in any order."""
    self_ = torch.randint(-5, 5, (9, 11), generator=gen(33)).float()
    idx = torch.randint(0, self_.shape[dim], (7, 6), generator=gen(34))
    src = torch.randint(-5, 5, (7, 6), generator=gen(35)).float()
    sn, ixn, srn = self_.neuron(), idx.neuron(), src.neuron()
    want = torch.scatter_add(self_, dim, idx, src)
    assert_same(torch.scatter_add(sn, dim, relayout(ixn, layout), srn), want)
    assert_same(torch.scatter_add(sn, dim, ixn, relayout(srn, layout)), want)
    inplace = relayout(sn, layout)
    inplace.scatter_add_(dim, relayout(ixn, layout), relayout(srn, layout))
    assert_same(inplace, want)
    for reduce in ("sum", "prod", "amax", "amin", "mean"):
        for include_self in (True, False):
            want = torch.scatter_reduce(self_, dim, idx, src, reduce, include_self=include_self)
            got = torch.scatter_reduce(
                relayout(sn, layout),
                dim,
                relayout(ixn, layout),
                relayout(srn, layout),
                reduce,
                include_self=include_self,
            )
            assert_same(got, want)
    native("scatter")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_select_index_add_noncontiguous(layout):
    x = randn(10, 12, seed=40)
    idx2 = torch.randint(0, 10, (3, 7), generator=gen(41))
    idx = relayout(idx2.neuron(), layout)[1]  # a row of a relaid index: strided, offset
    want_rows = torch.index_select(x, 0, idx.cpu())
    assert_same(torch.index_select(x.neuron(), 0, idx), want_rows)
    assert_same(torch.index_select(relayout(x.neuron(), layout), 0, idx), want_rows)
    want_cols = torch.index_select(x, 1, idx.cpu())
    assert_same(torch.index_select(relayout(x.neuron(), layout), 1, idx), want_cols)
    out = relayout(torch.zeros(7, 12, device="neuron"), layout)
    torch.index_select(x.neuron(), 0, idx, out=out)
    assert_same(out, want_rows)
    # index_add with duplicates, strided source and self, alpha
    src = torch.randint(-4, 4, (7, 12), generator=gen(42)).float()
    base = torch.randint(-4, 4, (10, 12), generator=gen(43)).float()
    want = torch.index_add(base, 0, idx.cpu(), src, alpha=2)
    got = torch.index_add(base.neuron(), 0, idx, relayout(src.neuron(), layout), alpha=2)
    assert_same(got, want)
    inplace = relayout(base.neuron(), layout)
    inplace.index_add_(0, idx, relayout(src.neuron(), layout), alpha=2)
    assert_same(inplace, want)
    src_c = torch.randint(-4, 4, (10, 7), generator=gen(44)).float()
    want = torch.index_add(base, 1, idx.cpu(), src_c)
    got = torch.index_add(relayout(base.neuron(), layout), 1, idx, relayout(src_c.neuron(), layout))
    assert_same(got, want)
    native("index_select", "index_add")
