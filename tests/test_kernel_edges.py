"""Kernel edge cases against PyTorch CPU (the oracle): the inputs that the
families' smaller tests never reach (issue 16: bugs planted in the kernels
were caught only by the model sweep).

- softmax / log_softmax / cross_entropy: numeric range (rows around 1e4, rows
  whose exponentials overflow fp32 without the max subtraction, tiny and
  mixed-magnitude rows, -inf entries as in masked attention), at row lengths
  around the vector widths, along the last dimension (the fp32 row kernel)
  and an inner one (the strided path);
- the GEMM family (mm, addmm, linear, addmv, bmm, baddbmm, addbmm): sizes of
  several micro-kernel tiles with remainders, depths over one packed block,
  alpha != 1, beta in {0, 1, other}, non-zero bias, transposed operands;
- gather / scatter / scatter_add / scatter_reduce / index_select / index_add /
  take_along_dim: transposed, sliced (storage offset, steps) and expanded
  index, src, self and out;
- element-wise (the vector exp/sigmoid/silu/gelu bodies and their backward)
  and row reductions (sum/mean): lengths at each vector boundary (one
  element, one vector, vector + remainder, over the parallel grain), inf,
  nan, -0.0 and subnormals where CPU defines the result.

tools/mutate.py plants realistic bugs in the kernels and checks that these
tests (with each family's own) catch them; test_isa_variants.py runs this
file again under the reference and AVX2 variants."""

import pytest
import torch
from conftest import assert_same

import torch_neuronx

F32 = {"rtol": 1e-5, "atol": 1e-6}


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


@pytest.fixture(autouse=True)
def _track():
    torch_neuronx.clear_op_tracking()
    yield


def native(*names):
    """None of the named ops fell back to CPU."""
    ops = torch_neuronx.get_fallback_ops()
    bad = [k for k in ops if any(n in k for n in names)]
    assert not bad, ops


# ---- softmax family ------------------------------------------------------------

# Row lengths: one element, under one AVX2 vector, one AVX-512 vector,
# vector + 1, two vectors (the unrolled body) + remainder, and longer.
SOFTMAX_LENS = [1, 7, 16, 17, 33, 100]


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


@pytest.mark.parametrize("n", SOFTMAX_LENS)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_numeric_range_last_dim(n, log):
    x = softmax_rows(n, seed=n)
    f = torch.log_softmax if log else torch.softmax
    assert_same(f(x.neuron(), -1), f(x, -1), rtol=1e-5, atol=1e-6, equal_nan=True)
    native("softmax")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_numeric_range_inner_dim(dtype, log):
    """Along dim 0 (inner stride > 1: the generic path), every dtype."""
    x = softmax_rows(17, seed=3).to(dtype)
    t = x.t().contiguous()  # (17, 10): softmax over the 17
    f = torch.log_softmax if log else torch.softmax
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    if dtype == torch.bfloat16 and log:  # log-softmax of 1e4-scale logits: bf16 ulps are ~64
        tol = {"rtol": 1e-2, "atol": 1.0}
    assert_same(f(t.neuron(), 0), f(t, 0), equal_nan=True, **tol)
    # a three-dimensional view, softmax over the middle dimension
    y = x[:8].reshape(2, 4, -1).transpose(1, 2).contiguous()
    assert_same(f(y.neuron(), 1), f(y, 1), equal_nan=True, **tol)
    native("softmax")


def test_softmax_masked_attention_rows():
    """A causal mask of -inf over large scores, as in attention: row i keeps
    the first i + 1 entries; the masked ones are exact zeros."""
    s = randn(4, 37, 37, seed=1) * 60
    mask = torch.ones(37, 37, dtype=torch.bool).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    got = s.neuron().softmax(-1)
    assert_same(got, s.softmax(-1), rtol=1e-5, atol=1e-6)
    assert (got.cpu()[:, mask] == 0).all()
    native("softmax")


@pytest.mark.parametrize("n", [7, 33])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_backward_numeric_range(n, log):
    x = softmax_rows(n, seed=7)[[0, 1, 2, 3, 5, 6, 9, 10]]  # finite rows: finite gradients
    g = randn(*x.shape, seed=8)
    f = torch.log_softmax if log else torch.softmax
    xc = x.clone().requires_grad_()
    xn = x.neuron().requires_grad_()
    f(xc, -1).backward(g)
    f(xn, -1).backward(g.neuron())
    assert_same(xn.grad, xc.grad, rtol=1e-4, atol=1e-5)
    # along an inner dimension (the generic backward)
    xc2 = x.t().contiguous().requires_grad_()
    xn2 = x.t().contiguous().neuron().requires_grad_()
    f(xc2, 0).backward(g.t())
    f(xn2, 0).backward(g.t().neuron())
    assert_same(xn2.grad, xc2.grad, rtol=1e-4, atol=1e-5)
    native("softmax")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_numeric_range(reduction):
    logits = softmax_rows(33, seed=11)[[0, 1, 2, 3, 4, 5, 6, 9, 10]]
    target = torch.randint(0, 33, (9,), generator=gen(12))
    weight = torch.rand(33, generator=gen(13)) + 0.5
    lc = logits.clone().requires_grad_()
    ln = logits.neuron().requires_grad_()
    for kw in ({}, {"weight": weight}, {"label_smoothing": 0.1}):
        kn = {k: (v.neuron() if torch.is_tensor(v) else v) for k, v in kw.items()}
        lc.grad = ln.grad = None
        want = torch.nn.functional.cross_entropy(lc, target, reduction=reduction, **kw)
        got = torch.nn.functional.cross_entropy(ln, target.neuron(), reduction=reduction, **kn)
        # losses of 1e4-scale logits: fp32 keeps ~1e-3 absolute
        assert_same(got, want, rtol=1e-5, atol=2e-3)
        want.sum().backward()
        got.sum().backward()
        assert_same(ln.grad, lc.grad, rtol=1e-4, atol=1e-5)
    native("softmax", "nll_loss")


def test_cross_entropy_masked_logits():
    """-inf logits (a masked vocabulary) away from the target: finite loss."""
    logits = randn(6, 40, seed=14) * 30
    logits[:, 20:] = float("-inf")
    target = torch.randint(0, 20, (6,), generator=gen(15))
    ce = torch.nn.functional.cross_entropy
    assert_same(ce(logits.neuron(), target.neuron()), ce(logits, target), rtol=1e-5, atol=1e-5)
    native("softmax", "nll_loss")


# ---- GEMM family ---------------------------------------------------------------

# (m, n, k): several micro-kernel tiles (AVX2 6x16, AVX-512 12x32) with
# remainders in every dimension; past one packed block of A rows (mc = 144)
# and of depth (kc = 512: the accumulating k blocks); the column split
# (m >= 256, n >= 512 with two threads); the unpacked small path (B rows
# contiguous, m n k <= 128^3).
GEMM_SHAPES = [(67, 131, 45), (256, 256, 256), (150, 70, 600), (260, 530, 40), (13, 33, 17)]
GEMM_IDS = ["x".join(map(str, s)) for s in GEMM_SHAPES]


def gemm_tol(dtype, k):
    if dtype in (torch.bfloat16, torch.float16):
        return {"rtol": 2e-2, "atol": 2e-2 * k**0.5}
    return {"rtol": 1e-4, "atol": 1e-5 * k}


def operand(rows, cols, seed, dtype, transposed):
    """A (rows, cols) operand, stored transposed when asked."""
    if transposed:
        return randn(cols, rows, seed=seed, dtype=dtype).t()
    return randn(rows, cols, seed=seed, dtype=dtype)


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=GEMM_IDS)
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.7])
def test_addmm_alpha_beta_full_tiles(shape, beta):
    m, n, k = shape
    a, b = randn(m, k, seed=1), randn(k, n, seed=2)
    c = randn(m, n, seed=3)
    c[0, 0] = float("nan") if beta == 0 else c[0, 0]  # beta = 0 ignores C, NaN included
    for alpha in (1.0, 0.5):
        want = torch.addmm(c, a, b, beta=beta, alpha=alpha)
        got = torch.addmm(c.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha)
        assert_same(got, want, **gemm_tol(torch.float32, k))
        # in place, into C itself
        cn = c.neuron()
        cn.addmm_(a.neuron(), b.neuron(), beta=beta, alpha=alpha)
        assert_same(cn, want, **gemm_tol(torch.float32, k))
    native("mm")


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=GEMM_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_mm_and_bias_addmm_layouts(shape, dtype):
    """Both operands in both storage orders (the packing's two forms), and a
    row-broadcast bias with alpha and beta."""
    m, n, k = shape
    bias = randn(n, seed=4, dtype=dtype)
    for ta in (False, True):
        for tb in (False, True):
            a = operand(m, k, 5, dtype, ta)
            b = operand(k, n, 6, dtype, tb)
            assert_same(a.neuron() @ b.neuron(), a @ b, **gemm_tol(dtype, k))
    for alpha, beta in ((-1.5, 0.5), (0.5, 0.0), (1.0, 1.0)):
        want = torch.addmm(bias, a, b, beta=beta, alpha=alpha)
        got = torch.addmm(bias.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha)
        assert_same(got, want, **gemm_tol(dtype, k))
    native("mm")


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 70])
@pytest.mark.parametrize("k", [45, 300])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_with_bias(rows, k, dtype):
    """x @ W^T + b: up to four rows take the dot-product path (k = 45 and 300
    are no multiple of two vectors), more the packed path; fp32 and bf16
    (the bf16 dot products sum in fp32, as CPU's bf16 GEMM)."""
    w, b = randn(131, k, seed=7, dtype=dtype), randn(131, seed=8, dtype=dtype)
    x = randn(rows, k, seed=9, dtype=dtype)
    f = torch.nn.functional.linear
    tol = gemm_tol(dtype, k)
    assert_same(f(x.neuron(), w.neuron(), b.neuron()), f(x, w, b), **tol)
    assert_same(f(x.neuron(), w.neuron()), f(x, w), **tol)
    want = torch.addmm(b, x, w.t(), beta=0.25, alpha=2.0)
    got = torch.addmm(b.neuron(), x.neuron(), w.neuron().t(), beta=0.25, alpha=2.0)
    assert_same(got, want, **tol)
    # an output row stride other than n (the rows of a wider tensor)
    out = torch.zeros(rows, 140, dtype=dtype).neuron()[:, 3:134]
    torch.mm(x.neuron(), w.neuron().t(), out=out)
    assert_same(out, x @ w.t(), **tol)
    native("mm", "linear")


@pytest.mark.parametrize("n", [3, 45, 300])
def test_addmv_alpha_beta(n):
    a, v, c = randn(67, n, seed=10), randn(n, seed=11), randn(67, seed=12)
    for alpha, beta in ((1.0, 0.0), (0.5, 1.0), (-2.0, 0.3)):
        want = torch.addmv(c, a, v, beta=beta, alpha=alpha)
        got = torch.addmv(c.neuron(), a.neuron(), v.neuron(), beta=beta, alpha=alpha)
        assert_same(got, want, **gemm_tol(torch.float32, n))
        got_t = torch.addmv(
            c.neuron(), a.t().contiguous().neuron().t(), v.neuron(), beta=beta, alpha=alpha
        )
        assert_same(got_t, want, **gemm_tol(torch.float32, n))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bmm_baddbmm_addbmm_full_tiles(dtype):
    m, n, k = 37, 70, 45
    a, b = randn(3, m, k, seed=13, dtype=dtype), randn(3, k, n, seed=14, dtype=dtype)
    c = randn(3, m, n, seed=15, dtype=dtype)
    tol = gemm_tol(dtype, k)
    assert_same(torch.bmm(a.neuron(), b.neuron()), torch.bmm(a, b), **tol)
    bt = b.transpose(1, 2).contiguous().transpose(1, 2)  # B stored column-major
    assert_same(torch.bmm(a.neuron(), bt.neuron()), torch.bmm(a, bt), **tol)
    for alpha, beta in ((1.0, 0.0), (1.0, 1.0), (0.5, 0.0), (0.5, 1.0), (-1.5, 0.7)):
        want = torch.baddbmm(c, a, b, beta=beta, alpha=alpha)
        got = torch.baddbmm(c.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha)
        assert_same(got, want, **tol)
        bias = c[0, 0]  # broadcast over the batch and the rows
        want = torch.baddbmm(bias, a, b, beta=beta, alpha=alpha)
        got = torch.baddbmm(bias.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha)
        assert_same(got, want, **tol)
    want = torch.addbmm(c[0], a, b, beta=0.5, alpha=0.25)
    got = torch.addbmm(c[0].neuron(), a.neuron(), b.neuron(), beta=0.5, alpha=0.25)
    assert_same(got, want, **gemm_tol(dtype, 3 * k))
    native("bmm")


# ---- gather / scatter / index ---------------------------------------------------


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


# ---- element-wise and row reductions ---------------------------------------------

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


UNARY = {
    "exp": torch.exp,
    "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("n", ELT_LENS)
@pytest.mark.parametrize("op", list(UNARY))
def test_vector_unary_lengths_and_specials(op, n):
    f = UNARY[op]
    x = elt_input(n, seed=n)
    if op == "gelu":  # CPU's exact GELU of +inf is NaN (erf's vector form): no oracle
        x[x == float("inf")] = 50.0
    assert_same(f(x.neuron()), f(x), rtol=1e-5, atol=1e-6, equal_nan=True)
    # one offset element: unaligned vector loads, the remainder moves
    assert_same(f(x.neuron()[1:]), f(x[1:]), rtol=1e-5, atol=1e-6, equal_nan=True)
    native(op.split("_")[0])


@pytest.mark.parametrize("n", [7, 17, 33, 40007])
@pytest.mark.parametrize("op", ["sigmoid", "silu", "gelu", "gelu_tanh"])
def test_vector_unary_backward_lengths(op, n):
    f = UNARY[op]
    x = elt_input(n, seed=n + 1)
    x[~torch.isfinite(x)] = 0.5  # gradients of the specials are CPU's own conventions
    g = randn(n, seed=n + 2)
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    f(xc).backward(g)
    f(xn).backward(g.neuron())
    # atol: the derivatives cross zero (GELU's near x = -0.75), where
    # rounding differences are absolute
    assert_same(xn.grad, xc.grad, rtol=1e-5, atol=1e-5)
    native(op.split("_")[0])


# name -> (op, its arguments after self given b and c, keyword arguments)
TERNARY = {
    "addcmul": ("addcmul", lambda b, c: (b, c), {"value": -0.3}),
    "addcdiv": ("addcdiv", lambda b, c: (b, c), {"value": 0.7}),
    "lerp_low": ("lerp", lambda b, c: (b, 0.25), {}),
    "lerp_high": ("lerp", lambda b, c: (b, 0.75), {}),
    "lerp_tensor": ("lerp", lambda b, c: (b, c), {}),
}


@pytest.mark.parametrize("n", ELT_LENS)
@pytest.mark.parametrize("op", list(TERNARY))
def test_vector_ternary_lengths_and_specials(op, n):
    """The optimizers' addcmul / addcdiv / lerp on contiguous fp32 (the
    per-ISA loops), out of place, in place and one element off, with the
    special values in the vector bodies and the remainders."""
    name, args, kw = TERNARY[op]
    a, b = elt_input(n, seed=n), elt_input(n, seed=n + 1).flip(0)
    c = torch.rand(n, generator=gen(n + 2)) * 1.5 - 0.25  # weights on both sides of 0.5
    if op == "addcdiv":
        c[::5] = 0.0  # division by zero: inf / nan as on CPU
    an, bn, cn = a.neuron(), b.neuron(), c.neuron()
    tol = dict(rtol=1.3e-6, atol=1e-6, equal_nan=True)
    f = getattr(torch, name)
    assert_same(f(an, *args(bn, cn), **kw), f(a, *args(b, c), **kw), **tol)
    assert_same(f(an[1:], *args(bn[1:], cn[1:]), **kw), f(a[1:], *args(b[1:], c[1:]), **kw), **tol)
    inplace = getattr(an.clone(), name + "_")(*args(bn, cn), **kw)
    assert_same(inplace, getattr(a.clone(), name + "_")(*args(b, c), **kw), **tol)
    native(name)


@pytest.mark.parametrize("n", ELT_LENS)
def test_row_sum_mean_lengths(n):
    """Sums over the last dimension (the vector row sum) of rows of every
    length class; rows holding inf, -inf, nan, or both infinities."""
    x = randn(5, n, seed=n) * 3
    assert_same(x.neuron().sum(-1), x.sum(-1), rtol=1e-5, atol=1e-5)
    assert_same(x.neuron().mean(-1), x.mean(-1), rtol=1e-5, atol=1e-6)
    assert_same(x.neuron()[:, 1:].sum(-1), x[:, 1:].sum(-1), rtol=1e-5, atol=1e-5)
    x[1, n - 1] = float("inf")
    x[2, n // 2] = float("nan")
    x[3, 0] = float("-inf")
    x[4, 0], x[4, n - 1] = float("inf"), float("-inf")
    assert_same(x.neuron().sum(-1), x.sum(-1), rtol=1e-5, atol=1e-5, equal_nan=True)
    # leading dimensions (column sums): the same values, reduced over dim 0
    t = x.t().contiguous()
    assert_same(t.neuron().sum(0), t.sum(0), rtol=1e-5, atol=1e-5, equal_nan=True)
    native("sum", "mean")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [1, 1023, 1025, 65536, 3 * 65536 + 123])
def test_contiguous_sum_mean_amax_amin(dtype, n):
    """Sum, mean, amax and amin over contiguous runs (kernels/reduce.c): a
    whole tensor (over 2^16 elements: fixed chunks across the threads,
    merged in order) and rows; lengths around the 1024-element widening
    block; bf16/fp16 widened by the variant's conversion; NaN in the last
    chunk (amax/amin are NaN, as on CPU) and infinities; column sums of
    the rows (the leading-dims path, half types widened row by row)."""
    x = (randn(n, seed=n) * 3).to(dtype)
    # sums: double accumulation rounded once vs CPU's fp32 accumulation
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=8e-3, atol=8e-3)
    for t in (
        x,
        x.reshape(1, n).expand(3, n).contiguous() * torch.tensor([[1.0], [-2.0], [0.5]]).to(dtype),
    ):
        tn, dim = t.neuron(), -1 if t.dim() == 2 else None
        kw = {} if dim is None else {"dim": dim}
        assert_same(tn.sum(**kw).float(), t.float().sum(**kw), **tol)
        assert_same(tn.mean(**kw).float(), t.float().mean(**kw), **tol)
        if dim is not None:  # over the leading dim (column sums): 3 rows of n
            assert_same(tn.sum(0).float(), t.float().sum(0), **tol)
            assert_same(tn.mean(0).float(), t.float().mean(0), **tol)
        for f in (torch.amax, torch.amin):  # exact: no rounding
            assert_same(
                f(tn, **({} if dim is None else {"dim": dim})),
                f(t, **({} if dim is None else {"dim": dim})),
                rtol=0,
                atol=0,
            )
    if n > 8:
        x[n - 5] = float("nan")
        x[n // 3] = float("inf")
        xn = x.neuron()
        for f in (torch.amax, torch.amin, torch.sum):
            assert_same(f(xn).float(), f(x.float()), rtol=0, atol=0, equal_nan=True)
        x[n - 5] = float("-inf")
        assert torch.isnan(x.neuron().sum().cpu()), "inf + -inf is NaN"
        assert_same(torch.amin(x.neuron()), torch.amin(x), rtol=0, atol=0)
    native("sum", "mean", "amax", "amin")


F16_SPECIAL = [
    0.0,
    -0.0,
    6e-8,
    -6e-8,
    6.1e-5,
    65504.0,
    -65504.0,
    1.0,
    -2.5,
    float("inf"),
    float("-inf"),
    float("nan"),
]


@pytest.mark.parametrize("n", [1, 7, 8, 9, 255, 256, 257, 1000])
def test_fp16_elementwise_blocks(n):
    """fp16 element-wise through the F16C blocks (kernels/eltwise_loops.h:
    256-element blocks converted with vector instructions, the fp32 loop
    between): lengths around the 8-wide conversion and the block; zeros of
    both signs, subnormals, the largest finite value (a product overflows
    to inf), infinities and NaN; a scalar operand, in place, a cast each
    way with values that round at the fp16 boundaries. Exact against CPU."""
    vals = torch.tensor(F16_SPECIAL)
    a = (randn(n, seed=n) * 300).to(torch.float16)
    b = (randn(n, seed=n + 1) * 300).to(torch.float16)
    a[: min(n, len(vals))] = vals[: min(n, len(vals))].half()
    b[-min(n, len(vals)) :] = vals[: min(n, len(vals))].half()
    an, bn = a.neuron(), b.neuron()
    exact = dict(rtol=0, atol=0, equal_nan=True)
    for f in (torch.add, torch.mul, torch.sub, torch.maximum):
        assert_same(f(an, bn), f(a, b), **exact)
        assert_same(f(an, bn[:1].expand(n)), f(a, b[:1].expand(n)), **exact)  # a scalar operand
    assert_same(an * 0.5, a * 0.5, **exact)
    assert_same(torch.relu(an), torch.relu(a), **exact)
    assert_same(
        torch.nn.functional.gelu(an),
        torch.nn.functional.gelu(a),
        rtol=1e-3,
        atol=1e-3,
        equal_nan=True,
    )
    assert_same(an.clone().add_(bn), a.clone().add_(b), **exact)
    assert_same(an.float(), a.float(), **exact)
    # fp32 -> fp16: ties to even, the overflow boundary, subnormal rounding
    f = torch.tensor(
        [65519.0, 65520.0, 1 + 2**-11, 1 + 3 * 2**-11, 2**-25, 3 * 2**-26, -1e-9, 1e5]
        * (n // 8 + 1)
    )[:n]
    assert_same(f.neuron().half(), f.half(), **exact)
    native("add", "mul", "sub", "maximum", "relu", "gelu", "copy")


def test_row_sum_cancellation_and_subnormals():
    """Subnormal inputs sum to subnormals (not flushed), -0.0 rows to zero,
    large equal magnitudes of both signs cancel exactly."""
    x = torch.tensor([[1e-40] * 36, [-1e-40] * 35 + [0.0], [-0.0] * 36, [3e37, -3e37] * 18])
    assert_same(x.neuron().sum(-1), x.sum(-1), rtol=0, atol=0)
    assert_same(x.neuron().mean(-1), x.mean(-1), rtol=1e-6, atol=0)
    native("sum", "mean")


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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["neg", "abs"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_half_neg_abs_every_bit_pattern(dtype, op, layout):
    # all 65536 encodings: zeros, subnormals, normals, infinities, NaNs
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype).reshape(256, 256)
    xn = x.to("neuron")
    if layout == "strided":  # every other column: rows of 128 with stride 2
        x, xn = x[:, ::2], xn[:, ::2]
    f = getattr(torch, op)
    want, got = f(x), f(xn).cpu()
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    # bit for bit outside NaNs (signed zeros and subnormals included)
    assert torch.equal(got.view(torch.int16)[~nan], want.view(torch.int16)[~nan])
    # a NaN's sign follows the operation as it does on CPU's fp32 path
    if op == "abs":
        assert (got.view(torch.int16)[nan] >= 0).all()
