"""Matrix products and linear algebra (csrc/aten/linalg_ops.cpp) against
PyTorch CPU: mm/addmm/bmm/baddbmm/addbmm/addmv/linear/matmul (sizes, layouts,
alpha and beta, half precision, errors), solve_triangular and cdist, forward
and backward; and the GEMM family's edge cases."""

import pytest
import torch
import torch._dynamo
from conftest import assert_same
from op_util import grad_check, native, randn

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (7, 5, 3),
        (64, 64, 64),
        (130, 257, 40),
        (1, 300, 260),
        (300, 700, 37),
        (260, 530, 600),
    ],
)  # last two: column split
def test_mm_matches_cpu(dtype, shape):
    m, n, k = shape
    a, b = randn(m, k, seed=1, dtype=dtype), randn(k, n, seed=2, dtype=dtype)
    want = (a.double() @ b.double()).to(dtype)
    t = (
        {"rtol": 2e-2, "atol": 5e-2 * k**0.5}
        if dtype in (torch.bfloat16, torch.float16)
        else {"rtol": 1e-4, "atol": 1e-4}
    )
    assert_same(a.neuron() @ b.neuron(), want, **t)
    assert_same(a.neuron().t().contiguous().t() @ b.neuron().t().contiguous().t(), want, **t)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["rows", "weight"])
def test_narrow_mm_rounds_once_like_cpu(dtype, layout):
    # Depth 2048 spans several packed blocks of every kernel variant. CPU sums
    # in fp32 and rounds to bf16/fp16 once; rounding after each block (the
    # earlier fp32-converting path) left a fifth of this product one ulp off.
    # Only fp32 summation order may differ: at most 1% of elements by 1 ulp.
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(24, 2048, generator=g) * 0.5 + 0.25).to(dtype)
    b = (torch.rand(48, 2048, generator=g) * 0.01).to(dtype)
    b = b.t() if layout == "weight" else b.t().contiguous()  # x @ W^T, or row-major B
    want = a @ b
    got = (a.neuron() @ b.neuron()).cpu()
    bits = (got.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    assert bits.max().item() <= 1 and (bits != 0).sum().item() <= want.numel() // 100
    assert torch_neuronx.get_fallback_ops() == {}


def test_addmm_bmm_linear_matmul():
    x, w, bias = torch.randn(8, 16), torch.randn(4, 16), torch.randn(4)
    assert_same(
        torch.nn.functional.linear(x.neuron(), w.neuron(), bias.neuron()),
        torch.nn.functional.linear(x, w, bias),
        rtol=1e-5,
        atol=1e-5,
    )
    c = torch.randn(8, 4)
    assert_same(
        torch.addmm(c.neuron(), x.neuron(), w.neuron().t(), beta=0.5, alpha=2),
        torch.addmm(c, x, w.t(), beta=0.5, alpha=2),
        rtol=1e-5,
        atol=1e-5,
    )
    cn = c.neuron()
    cn.addmm_(x.neuron(), w.neuron().t())
    assert_same(cn, c.addmm(x, w.t()), rtol=1e-5, atol=1e-5)
    p, q = torch.randn(3, 5, 6), torch.randn(3, 6, 2)
    assert_same(torch.bmm(p.neuron(), q.neuron()), torch.bmm(p, q), rtol=1e-5, atol=1e-5)
    assert_same(p.neuron() @ q.neuron(), p @ q, rtol=1e-5, atol=1e-5)
    r = torch.randn(2, 3, 5, 6)
    assert_same(r.neuron() @ q.neuron()[0], r @ q[0], rtol=1e-5, atol=1e-5)
    assert torch_neuronx.get_fallback_ops() == {}


def test_mm_edge_cases_and_errors():
    e = torch.empty(3, 0)
    assert_same(e.neuron() @ torch.empty(0, 4).neuron(), e @ torch.empty(0, 4))
    nan_c = torch.full((2, 2), float("nan"))
    assert_same(
        torch.addmm(nan_c.neuron(), torch.ones(2, 3).neuron(), torch.ones(3, 2).neuron(), beta=0),
        torch.addmm(nan_c, torch.ones(2, 3), torch.ones(3, 2), beta=0),
    )
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    ):
        torch.ones(2, 3, device="neuron") @ torch.ones(4, 5, device="neuron")
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(
            torch.ones(2, 2, device="neuron"),
            torch.ones(2, 2, device="neuron", dtype=torch.float64),
        )
    i = torch.randint(0, 5, (3, 3))
    assert_same(i.neuron() @ i.neuron(), i @ i)  # integer matmul: CPU fallback


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_baddbmm(dtype):
    torch_neuronx.clear_op_tracking()
    s, a, b = torch.randn(3, 1, 5), torch.randn(3, 4, 6), torch.randn(3, 6, 5)
    s, a, b = s.to(dtype), a.to(dtype), b.to(dtype)
    tol = dict(atol=5e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    for beta, alpha in ((1.0, 1.0), (0.5, -2.0), (0.0, 1.0)):
        assert_same(
            torch.baddbmm(s.neuron(), a.neuron(), b.neuron(), beta=beta, alpha=alpha),
            torch.baddbmm(s, a, b, beta=beta, alpha=alpha),
            **tol,
        )
    t = torch.randn(3, 4, 5).to(dtype)
    tn = t.neuron()
    tn.baddbmm_(a.neuron(), b.neuron(), alpha=0.5)
    assert_same(tn, t.baddbmm(a, b, alpha=0.5), **tol)
    assert torch_neuronx.get_fallback_ops() == {}


# ---- composites of native kernels: forward and backward against CPU, nothing
# falling back (the all_native fixture) -------------------------------------------


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit):
    """As the gated delta-rule layers (Qwen3-Next) call it: batched, unit
    diagonal, broadcast batch dims; forward and both gradients."""
    g = torch.Generator().manual_seed(7)
    A = torch.randn(2, 3, 8, 8, generator=g) * 0.3 + torch.eye(8) * 2
    A = A.triu() if upper else A.tril()
    B = torch.randn(3, 8, 5, generator=g) if left else torch.randn(3, 5, 8, generator=g)
    grad_check(
        lambda a, b: torch.linalg.solve_triangular(
            a, b, upper=upper, left=left, unitriangular=unit
        ),
        A,
        B,
        tol={"rtol": 1e-4, "atol": 1e-5},
    )


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_layout_matches_cpu_and_compiled_graphs(left):
    """The result is batches of column-major matrices, as on CPU and as the
    meta function says: a compiled graph checks it (olmo_hybrid's gated
    delta rule failed on 'expected stride' before)."""
    g = torch.Generator().manual_seed(3)
    A = torch.randn(2, 1, 6, 6, generator=g).tril() + 3 * torch.eye(6)
    B = torch.randn(3, 6, 4, generator=g) if left else torch.randn(3, 4, 6, generator=g)
    kw = {"upper": False, "left": left}
    cpu = torch.linalg.solve_triangular(A, B, **kw)
    got = torch.linalg.solve_triangular(A.neuron(), B.neuron(), **kw)
    assert got.stride() == cpu.stride()
    torch.testing.assert_close(got.cpu(), cpu, rtol=1e-5, atol=1e-5)
    for out_shape in ((0,), cpu.shape):  # resized by the op / kept as given
        out_cpu, out = torch.empty(out_shape), torch.empty(out_shape, device="neuron")
        torch.linalg.solve_triangular(A, B, **kw, out=out_cpu)
        r = torch.linalg.solve_triangular(A.neuron(), B.neuron(), **kw, out=out)
        assert r is out and out.stride() == out_cpu.stride()
        torch.testing.assert_close(out.cpu(), cpu, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: torch.linalg.solve_triangular(a, b, **kw) * 2, fullgraph=True)
    torch.testing.assert_close(f(A.neuron(), B.neuron()).cpu(), cpu * 2, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("all_native")
def test_solve_triangular_errors_and_float64():
    A = torch.randn(4, 4, dtype=torch.float64).tril() + 3 * torch.eye(4, dtype=torch.float64)
    B = torch.randn(4, 2, dtype=torch.float64)
    assert_same(
        torch.linalg.solve_triangular(A.neuron(), B.neuron(), upper=False),
        torch.linalg.solve_triangular(A, B, upper=False),
    )
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="square"):
            torch.linalg.solve_triangular(
                torch.zeros(3, 4, device=dev), torch.zeros(3, 2, device=dev), upper=True
            )
        with pytest.raises(RuntimeError, match="Incompatible shapes"):
            torch.linalg.solve_triangular(
                torch.eye(3, device=dev), torch.zeros(4, 2, device=dev), upper=True
            )


@pytest.mark.usefixtures("all_native")
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_direct_and_backward(p):
    g = torch.Generator().manual_seed(15)
    a = torch.randn(2, 1, 5, 4, generator=g)
    b = torch.randn(3, 7, 4, generator=g)
    b[0, 0] = a[0, 0, 0]  # a zero distance
    tol = {"rtol": 1e-4, "atol": 1e-5}
    grad_check(lambda x, y: torch.cdist(x, y, p=p), a, b, tol=tol)
    grad_check(lambda x, y: torch.cdist(x, y, p=p), a[0, 0].double(), b[0].double(), tol=tol)


@pytest.mark.usefixtures("all_native")
def test_cdist_matrix_product_form_and_errors():
    g = torch.Generator().manual_seed(16)
    a, b = torch.randn(30, 6, generator=g), torch.randn(40, 6, generator=g)
    grad_check(lambda x, y: torch.cdist(x, y), a, b, tol={"rtol": 1e-4, "atol": 1e-4})
    grad_check(
        lambda x, y: torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist"),
        a[:5],
        b[:5],
        tol={"rtol": 1e-4, "atol": 1e-4},
    )
    an, bn = a.neuron(), b.neuron()
    with pytest.raises(RuntimeError, match="same number of columns"):
        torch.cdist(an, bn[:, :5])
    with pytest.raises(RuntimeError, match="non-negative p"):
        torch.cdist(an, bn, p=-1.0)
    with pytest.raises(NotImplementedError, match="BFloat16"):
        torch.cdist(an[:4].bfloat16(), bn[:4].bfloat16(), p=1.0)


# ---- edge cases of the GEMM family (issue 16; tools/mutate.py checks that
# these tests catch planted bugs): mm, addmm, linear, addmv, bmm, baddbmm,
# addbmm at sizes of several micro-kernel tiles with remainders, depths over
# one packed block, alpha != 1, beta in {0, 1, other}, non-zero bias,
# transposed operands ---------------------------------------------------------------

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
