"""Native indexing against CPU: index_select/index_add/embedding, gather/scatter,
nll_loss/cross_entropy, max/min with indices, argmax/argmin, cumsum/cumprod,
masked_fill, isin; and bad indices raising like CPU (at the next sync)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, run_python

import torch_neuronx

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
REALS = FLOATS + [torch.int64, torch.int32, torch.int8, torch.uint8]


@pytest.fixture(autouse=True)
def _track():
    torch_neuronx.clear_op_tracking()
    yield


def no_fallback():
    assert torch_neuronx.get_fallback_ops() == {}


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 50, shape, generator=g).to(dtype)


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
    no_fallback()


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
    no_fallback()


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
    no_fallback()
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
    no_fallback()


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
    no_fallback()


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
    no_fallback()


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
    no_fallback()


def test_gather_noncontiguous_and_backward():
    x = torch.randn(6, 5, dtype=torch.float64).t()  # (5, 6), non-contiguous
    idx = torch.randint(0, 5, (3, 6))
    xn = x.neuron().requires_grad_()
    xc = x.clone().requires_grad_()
    torch.gather(xn, 0, idx.neuron()).pow(2).sum().backward()
    torch.gather(xc, 0, idx).pow(2).sum().backward()
    assert_same(xn.grad, xc.grad)
    no_fallback()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(dtype, reduction):
    logits = torch.randn(6, 11).to(dtype)
    target = torch.tensor([1, 10, 0, -100, 3, 3])
    weight = torch.rand(11).to(dtype)
    for w in (None, weight):
        ln = logits.neuron().requires_grad_()
        lc = logits.clone().requires_grad_()
        wn = None if w is None else w.neuron()
        loss_n = F.cross_entropy(ln, target.neuron(), weight=wn, reduction=reduction)
        loss_c = F.cross_entropy(lc, target, weight=w, reduction=reduction)
        tol = dict(atol=2e-2, rtol=2e-2) if dtype in (torch.bfloat16, torch.float16) else {}
        assert_same(loss_n, loss_c, **tol)
        loss_n.float().sum().backward()
        loss_c.float().sum().backward()
        assert_same(ln.grad, lc.grad, **tol)
    no_fallback()


def test_nll_loss_1d_input_and_checks():
    x = torch.randn(5).log_softmax(0)
    t = torch.tensor(3)
    assert_same(F.nll_loss(x.neuron(), t.neuron()), F.nll_loss(x, t))
    with pytest.raises(ValueError, match="batch_size|Expected"):
        F.nll_loss(
            torch.randn(3, 4, device="neuron"), torch.zeros(2, dtype=torch.long, device="neuron")
        )
    with pytest.raises(RuntimeError, match="Long"):
        F.nll_loss(
            torch.randn(3, 4, device="neuron"), torch.zeros(3, dtype=torch.int32, device="neuron")
        )


@pytest.mark.parametrize("dtype", REALS)
def test_argmax_argmin_max_dim(dtype):
    x = rand((4, 7, 3), torch.float32, 6).to(dtype)
    x[1, 2, 0] = x[1, 5, 0]  # ties: the first wins
    for dim in (None, 0, 1, -1):
        for keep in (False, True):
            assert_same(x.neuron().argmax(dim, keep), x.argmax(dim, keep))
            assert_same(x.neuron().argmin(dim, keep), x.argmin(dim, keep))
    for dim in (0, 1, 2):
        vn, in_ = x.neuron().max(dim)
        vc, ic = x.max(dim)
        assert_same(vn, vc)
        assert_same(in_, ic)
        vn, in_ = x.neuron().transpose(0, 1).min(dim, keepdim=True)
        vc, ic = x.transpose(0, 1).min(dim, keepdim=True)
        assert_same(vn, vc)
        assert_same(in_, ic)
    no_fallback()


def test_argmax_nan_and_errors():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 1.0, 0.5, 7.0]])
    assert_same(x.neuron().argmax(1), x.argmax(1))
    assert_same(x.neuron().argmin(1), x.argmin(1))
    vn, in_ = x.neuron().max(1)
    assert_same(vn, x.max(1)[0], equal_nan=True)
    for dev in ("cpu", "neuron"):  # IndexError, as CPU
        with pytest.raises(IndexError, match="numel"):
            torch.empty(0, device=dev).argmax()
    with pytest.raises(IndexError, match="non-zero size"):
        torch.empty(2, 0, device="neuron").max(1)


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
def test_cumsum_cumprod(dtype):
    x = rand((3, 5, 2), torch.float32, 7).mul(0.5).to(dtype)
    for dim in (0, 1, -1):
        assert_same(x.neuron().cumsum(dim), x.cumsum(dim))
        if dtype != torch.bool:
            tol = dict(atol=1e-2, rtol=1e-2) if dtype in (torch.bfloat16, torch.float16) else {}
            assert_same(x.neuron().cumprod(dim), x.cumprod(dim), **tol)
    assert_same(x.neuron().cumsum(1, dtype=torch.float64), x.cumsum(1, dtype=torch.float64))
    no_fallback()


def test_cumsum_backward_and_inplace():
    x = torch.randn(4, 6)
    xn = x.neuron().requires_grad_()
    xc = x.clone().requires_grad_()
    (xn.cumsum(1) ** 2).sum().backward()
    (xc.cumsum(1) ** 2).sum().backward()
    assert_same(xn.grad, xc.grad)
    y = x.neuron()
    y.cumsum_(0)
    assert_same(y, x.cumsum(0))


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
    no_fallback()
    with pytest.raises(RuntimeError, match="boolean"):
        x.neuron().masked_fill(mask.neuron().int(), 1)


def test_masked_fill_attention_mask_pattern():
    scores = torch.randn(2, 1, 4, 4)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    ref = scores.masked_fill(causal, float("-inf")).softmax(-1)
    out = scores.neuron().masked_fill(causal.neuron(), float("-inf")).softmax(-1)
    assert_same(out, ref)
    no_fallback()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_isin(dtype):
    e = torch.tensor([[1, 2, 3], [4, 5, 2]]).to(dtype)
    t = torch.tensor([2, 5, 9]).to(dtype)
    for invert in (False, True):
        assert_same(
            torch.isin(e.neuron(), t.neuron(), invert=invert), torch.isin(e, t, invert=invert)
        )
    no_fallback()


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
    no_fallback()


def test_advanced_index_cpu_indices_and_backward():
    x = torch.randn(4, 6)
    idx = torch.tensor([3, 1, 3])
    assert_same(x.neuron()[idx], x[idx])  # CPU indices move to the device
    xn = x.neuron().requires_grad_()
    xc = x.clone().requires_grad_()
    (xn[idx.neuron(), 2:] ** 2).sum().backward()  # backward accumulates duplicates
    (xc[idx, 2:] ** 2).sum().backward()
    assert_same(xn.grad, xc.grad)
    no_fallback()


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
    no_fallback()


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
    no_fallback()


def test_printing_needs_no_fallback():
    x = torch.randn(3, 4, device="neuron")
    assert "neuron:0" in str(x)
    no_fallback()


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dtype, descending):
    x = torch.randint(0, 5, (3, 40, 4)).to(dtype)  # many ties: stability matters
    for dim in (1, -1, 0):
        vn, in_ = torch.sort(x.neuron(), dim=dim, descending=descending, stable=True)
        vc, ic = torch.sort(x, dim=dim, descending=descending, stable=True)
        assert_same(vn, vc)
        assert_same(in_, ic)
    assert_same(torch.argsort(x.neuron(), dim=1, stable=True), torch.argsort(x, dim=1, stable=True))
    no_fallback()


def test_sort_nan_and_signed_zero():
    x = torch.tensor([3.0, float("nan"), -0.0, 0.0, -float("inf"), 1.0, float("nan")])
    for desc in (False, True):
        vn, in_ = x.neuron().sort(descending=desc, stable=True)
        vc, ic = x.sort(descending=desc, stable=True)
        assert_same(vn, vc, equal_nan=True)
        assert_same(in_, ic)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("k", [1, 2, 7, 50])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, k, largest):
    x = torch.randn(6, 50).mul(100).to(dtype)  # distinct enough that indices are unique
    vn, in_ = torch.topk(x.neuron(), k, dim=1, largest=largest)
    vc, ic = torch.topk(x, k, dim=1, largest=largest)
    assert_same(vn, vc)
    # ties may order differently: the indices must pick the same values, on
    # CPU (not through neuron's own gather), and be distinct per row
    picked = x.gather(1, in_.cpu())
    assert torch.equal(picked, vc)
    assert all(len(set(row.tolist())) == k for row in in_.cpu())
    vn0, in0 = torch.topk(x.neuron().t(), min(k, 6), dim=0, largest=largest)
    vc0, _ = torch.topk(x.t(), min(k, 6), dim=0, largest=largest)
    assert_same(vn0, vc0)
    assert torch.equal(x.t().gather(0, in0.cpu()), vc0)
    no_fallback()
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(x.neuron(), 51)


def test_moe_router_pattern():
    """The Mixtral/Qwen-MoE routing step: softmax, topk, one-hot counts, histc."""
    logits = torch.randn(16, 8)

    def route(lg):
        w = lg.softmax(-1)
        top_w, top_i = torch.topk(w, 2, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        counts = torch.histc(top_i.flatten().float(), bins=8, min=0, max=7)
        counts_int = (
            torch.histc(top_i.flatten(), bins=8, min=0, max=7) if lg.device.type != "cpu" else None
        )
        order = top_i.flatten().argsort(stable=True)
        return top_w, top_i, counts, counts_int, order

    n = route(logits.neuron())
    c = route(logits)
    for a, b in zip(n[:3] + n[4:], c[:3] + c[4:]):
        assert_same(a, b)
    assert_same(n[3], c[2].long())  # integer histc, as CUDA computes it
    no_fallback()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histc(dtype):
    x = torch.randn(1000).to(dtype)
    for bins, lo, hi in ((10, -2, 2), (7, 0, 0), (3, -0.5, 0.5)):
        assert_same(torch.histc(x.neuron(), bins, lo, hi), torch.histc(x, bins, lo, hi))
    same = torch.full((5,), 2.0, dtype=dtype)
    assert_same(torch.histc(same.neuron(), 4), torch.histc(same, 4))
    with pytest.raises(RuntimeError, match="max must be larger"):
        torch.histc(x.neuron(), 4, 3, 1)
    no_fallback()


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(dtype, right):
    g = torch.Generator().manual_seed(12)
    bd = torch.randint(-20, 40, (9,), generator=g).sort().values.to(dtype)
    bd[3] = bd[4]  # a repeated boundary
    vals = torch.randint(-30, 50, (4, 7), generator=g).to(dtype)
    vals[0, :3] = bd[:3]  # values on boundaries
    for out_int32 in (False, True):
        kw = {"right": right, "out_int32": out_int32}
        assert_same(
            torch.searchsorted(bd.neuron(), vals.neuron(), **kw), torch.searchsorted(bd, vals, **kw)
        )
        assert_same(
            torch.bucketize(vals.neuron(), bd.neuron(), **kw), torch.bucketize(vals, bd, **kw)
        )
    side = "right" if right else "left"
    # rows of boundaries, one per row of values; a sorter; scalars; out=
    rows = torch.randint(-20, 40, (4, 5), generator=g).sort(-1).values.to(dtype)
    assert_same(
        torch.searchsorted(rows.neuron(), vals.neuron(), side=side),
        torch.searchsorted(rows, vals, side=side),
    )
    perm = torch.randperm(9, generator=g)
    shuffled, sorter = bd[perm], perm.argsort()
    assert_same(
        torch.searchsorted(shuffled.neuron(), vals.neuron(), right=right, sorter=sorter.neuron()),
        torch.searchsorted(shuffled, vals, right=right, sorter=sorter),
    )
    assert_same(
        torch.searchsorted(bd.neuron(), 7, right=right), torch.searchsorted(bd, 7, right=right)
    )
    assert_same(torch.bucketize(7, bd.neuron(), right=right), torch.bucketize(7, bd, right=right))
    out = torch.empty(0, dtype=torch.long, device="neuron").t()
    torch.searchsorted(bd.neuron(), vals.neuron().t(), right=right, out=out)
    assert_same(out, torch.searchsorted(bd, vals.t(), right=right))
    no_fallback()


def test_searchsorted_nan_promotion_empty_and_errors():
    bd = torch.tensor([1.0, 2.0, 2.0, 3.0, float("nan")])
    v = torch.tensor([2.0, float("nan"), 0.0, 5.0, -float("inf")])
    for right in (False, True):  # NaN: CPU's own comparisons, positions and all
        assert_same(
            torch.searchsorted(bd.neuron(), v.neuron(), right=right),
            torch.searchsorted(bd, v, right=right),
        )
    ints = torch.tensor([[1, 5], [2, 9]])
    assert_same(torch.searchsorted(bd.neuron(), ints.neuron()), torch.searchsorted(bd, ints))
    assert_same(torch.searchsorted(ints[0].neuron(), 2.5), torch.searchsorted(ints[0], 2.5))
    empty = torch.tensor([])
    assert_same(torch.searchsorted(empty.neuron(), v.neuron()), torch.searchsorted(empty, v))
    assert_same(torch.searchsorted(bd.neuron(), empty.neuron()), torch.searchsorted(bd, empty))
    no_fallback()
    b, x = bd.neuron(), v.neuron()
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        torch.searchsorted(b, x, side="left", right=True)
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        torch.searchsorted(b, x, side="middle")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        torch.searchsorted(torch.ones(2, 2, device="neuron"), torch.ones(1, 2, device="neuron"))
    with pytest.raises(RuntimeError, match="same size"):
        torch.searchsorted(b, x, sorter=torch.tensor([0, 1], device="neuron"))
    with pytest.raises(RuntimeError, match="must be 1 dimension"):
        torch.bucketize(x, torch.ones(1, 3, device="neuron"))
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.searchsorted(torch.tensor([False, True]).neuron(), torch.tensor([True]).neuron())
    with pytest.raises(RuntimeError, match="sorter"):
        torch.searchsorted(b, x, sorter=torch.tensor([0, 1, 2, 3, 9], device="neuron"))
        torch.neuron.synchronize()


@pytest.mark.parametrize("dtype", REALS + [torch.bool])
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin(dtype, name):
    g = torch.Generator().manual_seed(18)
    x = torch.randint(-3, 4, (4, 6, 5), generator=g).to(dtype)  # many ties
    if dtype.is_floating_point:
        x[0, 2, 1] = x[1, 4, 3] = x[1, 1, 3] = float("nan")
    f = getattr(torch, name)
    for dim in (0, 1, -1):
        vn, in_ = f(x.neuron(), dim)
        vc, ic = f(x, dim)
        assert_same(vn, vc, equal_nan=True)
        assert_same(in_, ic)
    # out= into strided outputs, a 0-dim input
    v = torch.empty(5, 6, 4, dtype=dtype, device="neuron").transpose(0, 2)
    i = torch.empty(5, 6, 4, dtype=torch.long, device="neuron").transpose(0, 2)
    f(x.neuron(), 1, out=(v, i))
    assert_same(v, f(x, 1).values, equal_nan=True)
    assert_same(i, f(x, 1).indices)
    assert_same(f(x[0, 0, 0].neuron(), 0).values, f(x[0, 0, 0], 0).values)
    no_fallback()


def test_cummax_backward():
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(19))
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    (torch.cummax(xc, 1).values * torch.arange(7.0)).sum().backward()
    (torch.cummax(xn, 1).values * torch.arange(7.0).neuron()).sum().backward()
    assert_same(xn.grad, xc.grad)
    no_fallback()


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
