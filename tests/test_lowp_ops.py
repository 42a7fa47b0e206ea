"""Low-precision matrix products on neuron (kernels/lowp_gemm.c):
torch._int_mm (exact against CPU), torch._weight_int8pack_mm (against CPU
and a float64 oracle) and torch._scaled_mm with fp8 operands (against CPU's
_scaled_mm and a float64 oracle), each native (no fallback); odd shapes,
non-contiguous operands, the formats' extremes (max normal, subnormals,
NaN); CPU's errors for _int_mm / _weight_int8pack_mm and CUDA's
size rules and messages for _scaled_mm."""

import pytest
import torch

N = "neuron"
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _i8(*shape, seed):
    return torch.randint(-128, 128, shape, dtype=torch.int8, generator=_gen(seed))


# ---- _int_mm -------------------------------------------------------------------


@pytest.mark.parametrize(
    "m,k,n", [(1, 1, 1), (5, 3, 7), (17, 33, 65), (64, 256, 128), (3, 2049, 40), (150, 1030, 70)]
)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_int_mm_matches_cpu(m, k, n, layout, no_fallback):
    a = _i8(m, k, seed=1) if layout[0] == "n" else _i8(k, m, seed=1).t()
    b = _i8(k, n, seed=2) if layout[1] == "n" else _i8(n, k, seed=2).t()
    ref = torch._int_mm(a, b)
    got = torch._int_mm(a.to(N), b.to(N))
    assert got.dtype == torch.int32 and got.device.type == N
    assert torch.equal(got.cpu(), ref)


def test_int_mm_extremes_and_strided_views(no_fallback):
    # every product at the int8 extremes: -128 * -128 summed over k = 2048
    a = torch.full((32, 2048), -128, dtype=torch.int8)
    a[::2] = 127
    b = torch.full((2048, 48), -128, dtype=torch.int8)
    assert torch.equal(torch._int_mm(a.to(N), b.to(N)).cpu(), torch._int_mm(a, b))
    # every other row and column of larger operands
    A, B = _i8(64, 130, seed=3), _i8(130, 96, seed=4)
    a, b = A[::2, 1:129], B[1:129, ::3]
    assert torch.equal(
        torch._int_mm(A.to(N)[::2, 1:129], B.to(N)[1:129, ::3]).cpu(), torch._int_mm(a, b)
    )


def test_int_mm_out(no_fallback):
    a, b = _i8(20, 48, seed=5), _i8(48, 24, seed=6)
    out = torch.empty(0, dtype=torch.int32, device=N)
    r = torch._int_mm(a.to(N), b.to(N), out=out)
    assert r is out and torch.equal(out.cpu(), torch._int_mm(a, b))
    # a transposed out view is written through
    big = torch.zeros(24, 20, dtype=torch.int32, device=N)
    torch._int_mm(a.to(N), b.to(N), out=big.t())
    assert torch.equal(big.t().cpu(), torch._int_mm(a, b))


@pytest.mark.parametrize(
    "args,match",
    [
        (lambda: (_i8(4, 8, seed=0).float(), _i8(8, 4, seed=0)), "self dtype"),
        (lambda: (_i8(4, 8, seed=0), _i8(7, 4, seed=0)), "needs to match"),
        (lambda: (_i8(2, 4, 8, seed=0), _i8(8, 4, seed=0)), "dimension 2"),
        (lambda: (_i8(4, 8, seed=0), _i8(8, 4, seed=0).to(torch.uint8)), "mat2 dtype"),
    ],
)
def test_int_mm_errors_match_cpu(args, match):
    a, b = args()
    with pytest.raises(RuntimeError, match=match):
        torch._int_mm(a, b)
    with pytest.raises(RuntimeError, match=match):
        torch._int_mm(a.to(N), b.to(N))


# ---- _weight_int8pack_mm -----------------------------------------------------------

TOL = {torch.float32: 2e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 3, 16, 17, 64])
def test_weight_int8pack_mm_matches_cpu(m, dtype, no_fallback):
    # CPU's bf16 kernel reads past a row whose k is not a multiple of 16
    # (a segmentation fault in torch 2.13 at k = 515); neuron's odd k is
    # checked against float64 alone below
    k, n = 528, 133
    x = torch.randn(m, k, generator=_gen(m)).to(dtype)
    w = _i8(n, k, seed=7)
    s = (torch.rand(n, generator=_gen(8)) / 64 + 1e-3).to(dtype)
    ref = torch._weight_int8pack_mm(x, w, s)
    got = torch._weight_int8pack_mm(x.to(N), w.to(N), s.to(N))
    assert got.dtype == dtype and got.shape == (m, n)
    oracle = (x.double() @ w.double().t()) * s.double()
    scale = oracle.abs().max().item()
    tol = TOL[dtype]
    # as close to the float64 oracle as CPU is (both sum in fp32, round once)
    err_got = (got.cpu().double() - oracle).abs().max().item()
    err_cpu = (ref.double() - oracle).abs().max().item()
    assert err_got <= max(2 * err_cpu, tol * scale), (err_got, err_cpu)
    torch.testing.assert_close(got.cpu(), ref, atol=tol * scale, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 5, 33])
def test_weight_int8pack_mm_odd_k_against_float64(m, dtype, no_fallback):
    k, n = 515, 67
    x = torch.randn(m, k, generator=_gen(m)).to(dtype)
    w = _i8(n, k, seed=9)
    s = (torch.rand(n, generator=_gen(10)) / 64 + 1e-3).to(dtype)
    got = torch._weight_int8pack_mm(x.to(N), w.to(N), s.to(N)).cpu().double()
    oracle = (x.double() @ w.double().t()) * s.double()
    tol = TOL[dtype] * oracle.abs().max().item()
    torch.testing.assert_close(got, oracle, atol=tol, rtol=TOL[dtype])


def test_weight_int8pack_mm_1d_activation_is_index_error_as_cpu():
    w, s = _i8(48, 64, seed=0), torch.rand(48).to(torch.bfloat16)
    x = torch.randn(64, dtype=torch.bfloat16)
    for dev in ("cpu", N):
        with pytest.raises(IndexError):
            torch._weight_int8pack_mm(x.to(dev), w.to(dev), s.to(dev))


def test_weight_int8pack_mm_strided_activation(no_fallback):
    X = torch.randn(8, 300, dtype=torch.bfloat16, generator=_gen(1))
    w, s = _i8(40, 128, seed=2), torch.rand(40, generator=_gen(3)).to(torch.bfloat16)
    x = X[::2, 7:135]
    ref = torch._weight_int8pack_mm(x.contiguous(), w, s)  # CPU's kernel assumes contiguous rows
    got = torch._weight_int8pack_mm(X.to(N)[::2, 7:135], w.to(N), s.to(N))
    torch.testing.assert_close(got.cpu(), ref, atol=0.05, rtol=1.6e-2)


@pytest.mark.parametrize(
    "args,match",
    [
        (lambda x, w, s: (x[0, None, None], w, s), "2D"),
        (lambda x, w, s: (x, w.float(), s), "int8"),
        (lambda x, w, s: (x, w[:, :-1].contiguous(), s), "B.size"),
        (lambda x, w, s: (x, w, s[:-1]), "scales"),
        (lambda x, w, s: (x, w, s.float()), "scalar type"),
    ],
)
def test_weight_int8pack_mm_errors_match_cpu(args, match):
    # (CPU also requires a contiguous weight; neuron reads any strides)
    x, w, s = (
        torch.randn(3, 64, dtype=torch.bfloat16),
        _i8(48, 64, seed=0),
        torch.rand(48).to(torch.bfloat16),
    )
    with pytest.raises(RuntimeError, match=match):
        torch._weight_int8pack_mm(*args(x, w, s))
    with pytest.raises(RuntimeError, match=match):
        torch._weight_int8pack_mm(*args(x.to(N), w.to(N), s.to(N)))


# ---- _scaled_mm -------------------------------------------------------------------


def _f8(*shape, dtype, seed, scale=1.0):
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(dtype)


def _oracle(a, b, sa, sb, bias=None):
    r = (a.double() @ b.double()) * sa.double() * sb.double()
    return r if bias is None else r + bias.double()


@pytest.mark.parametrize("fmts", [(E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_scaled_mm_matches_cpu(fmts, out_dtype, scaling, no_fallback):
    m, k, n = 37, 96, 80
    a = _f8(m, k, dtype=fmts[0], seed=1, scale=4)
    b = _f8(n, k, dtype=fmts[1], seed=2, scale=4).t()  # column-major, as CUDA requires
    if scaling == "tensor":
        sa, sb = torch.tensor(0.25), torch.tensor(1.5)
    else:
        sa = torch.rand(m, 1, generator=_gen(3)) + 0.1
        sb = torch.rand(1, n, generator=_gen(4)) + 0.1
    bias = torch.randn(n, generator=_gen(5)).to(
        out_dtype if out_dtype != torch.float32 else torch.bfloat16
    )
    for bi in (None, bias):
        ref = torch._scaled_mm(a, b, sa, sb, bias=bi, out_dtype=out_dtype)
        got = torch._scaled_mm(
            a.to(N),
            b.to(N),
            sa.to(N),
            sb.to(N),
            bias=None if bi is None else bi.to(N),
            out_dtype=out_dtype,
        )
        assert got.dtype == out_dtype and got.shape == (m, n) and got.device.type == N
        oracle = _oracle(a, b, sa, sb, bi)
        tol = TOL[out_dtype]
        torch.testing.assert_close(
            got.cpu().double(), oracle, atol=tol * oracle.abs().max().item(), rtol=tol
        )
        torch.testing.assert_close(got.cpu(), ref, atol=tol * oracle.abs().max().item(), rtol=tol)


def test_scaled_mm_format_extremes(no_fallback):
    # max normal, the smallest subnormals, zeros of both signs, and NaN: exact
    # products in fp32 sums, NaN only in the rows and columns that hold it
    k = 32
    a = torch.zeros(16, k, dtype=E4M3)
    a[0, :4] = torch.tensor([448.0, -448.0, 2.0**-9, -(2.0**-9)]).to(E4M3)
    a[1, :] = torch.tensor(2.0**-9).to(E4M3)  # subnormal
    a[2, 0] = float("nan")
    a[3, :] = torch.tensor(-0.0).to(E4M3)
    b = torch.zeros(16, k, dtype=E5M2)
    b[:, :4] = torch.tensor([57344.0, 2.0**-16, 1.0, -1.0]).to(E5M2)
    b[5, :] = torch.tensor(2.0**-16).to(E5M2)
    bt = b.t()
    one = torch.tensor(1.0)
    ref = torch._scaled_mm(a, bt, one, one, out_dtype=torch.float32)
    got = torch._scaled_mm(a.to(N), bt.to(N), one.to(N), one.to(N), out_dtype=torch.float32).cpu()
    assert torch.equal(torch.isnan(got), torch.isnan(ref)) and torch.isnan(got[2]).all()
    torch.testing.assert_close(got, ref, equal_nan=True, rtol=1e-6, atol=0)
    oracle = _oracle(a, bt, one, one)
    finite = ~torch.isnan(oracle)
    torch.testing.assert_close(got.double()[finite], oracle[finite], rtol=1e-6, atol=0)


def test_scaled_mm_fp8_output_with_scale_result(no_fallback):
    a, b = _f8(16, 64, dtype=E4M3, seed=1), _f8(32, 64, dtype=E4M3, seed=2).t()
    one, sr = torch.tensor(1.0), torch.tensor(4.0)
    for sres in (None, sr):
        ref = torch._scaled_mm(a, b, one, one, scale_result=sres, out_dtype=E4M3)
        got = torch._scaled_mm(
            a.to(N),
            b.to(N),
            one.to(N),
            one.to(N),
            scale_result=None if sres is None else sres.to(N),
            out_dtype=E4M3,
        )
        assert got.dtype == E4M3
        # one fp8 step apart at most (sums in another order before the narrowing)
        torch.testing.assert_close(got.cpu().float(), ref.float(), rtol=0.125, atol=2.0**-6)


def test_scaled_mm_out_and_fast_accum(no_fallback):
    a, b = _f8(32, 48, dtype=E4M3, seed=1), _f8(16, 48, dtype=E4M3, seed=2).t()
    one = torch.tensor(1.0)
    ref = torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
    out = torch.empty(0, dtype=torch.bfloat16, device=N)
    r = torch._scaled_mm(
        a.to(N),
        b.to(N),
        one.to(N),
        one.to(N),
        out_dtype=torch.bfloat16,
        use_fast_accum=True,
        out=out,
    )
    assert r is out
    torch.testing.assert_close(out.cpu(), ref, rtol=1.6e-2, atol=1e-2)


def test_scaled_mm_any_layout(no_fallback):
    """Row-major mat2, column-major self and strided views: CUDA's eager op
    copies such operands for cuBLAS; neuron reads them as they are. CPU
    takes them too: its result is the oracle."""
    A = _f8(64, 96, dtype=E4M3, seed=1)
    B = _f8(96, 96, dtype=E4M3, seed=2)
    one = torch.tensor(1.0)
    for a, b in [
        (A[:32, :48], B[:48, :32]),  # row-major mat2
        (A.t().contiguous().t()[:32, :48], B.t().contiguous().t()[:48, :32]),  # column-major self
        (A[::2, ::2], B[::2, ::2]),  # every other row and column
    ]:
        ref = torch._scaled_mm(
            a.contiguous(), b.t().contiguous().t(), one, one, out_dtype=torch.float32
        )
        got = torch._scaled_mm(a.to(N), b.to(N), one.to(N), one.to(N), out_dtype=torch.float32)
        torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())


def _scaled_args():
    return (
        _f8(32, 48, dtype=E4M3, seed=1),
        _f8(16, 48, dtype=E4M3, seed=2).t(),
        torch.tensor(1.0),
        torch.tensor(1.0),
    )


@pytest.mark.parametrize(
    "change,exc,match",
    [
        (
            lambda a, b, sa, sb: (a[:, :40].contiguous(), b[:40], sa, sb),
            RuntimeError,
            "divisible by 16",
        ),
        (lambda a, b, sa, sb: (a, b[:, :15], sa, sb), RuntimeError, "divisible by 16"),
        (lambda a, b, sa, sb: (a, b[:32], sa, sb), RuntimeError, "cannot be multiplied"),
        (lambda a, b, sa, sb: (a.float(), b, sa, sb), RuntimeError, "fp8"),
        (lambda a, b, sa, sb: (a.to(E5M2), b.to(E5M2), sa, sb), RuntimeError, "two Float8_e5m2"),
        (lambda a, b, sa, sb: (a, b, sa.double(), sb), ValueError, "float"),
        (
            lambda a, b, sa, sb: (a, b, torch.ones(32, 1), torch.ones(1, 15)),
            ValueError,
            "Invalid scaling",
        ),
        (
            lambda a, b, sa, sb: (a, b, torch.ones(32), torch.ones(16)),
            ValueError,
            "Invalid scaling",
        ),
    ],
)
def test_scaled_mm_errors_follow_cuda(change, exc, match):
    args = change(*_scaled_args())
    with pytest.raises(exc, match=match):
        torch._scaled_mm(*[t.to(N) for t in args], out_dtype=torch.bfloat16)


def test_scaled_mm_bias_errors():
    a, b, sa, sb = (t.to(N) for t in _scaled_args())
    with pytest.raises(RuntimeError, match="Bias must be size 16"):
        torch._scaled_mm(a, b, sa, sb, bias=torch.zeros(15, device=N), out_dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="Bias must be"):
        torch._scaled_mm(
            a,
            b,
            sa,
            sb,
            bias=torch.zeros(16, device=N, dtype=torch.float64),
            out_dtype=torch.bfloat16,
        )


@pytest.mark.parametrize("m,k,n", [(128, 64, 128), (80, 96, 144), (16, 256, 48)])
def test_scaled_mm_mx_block_scales(m, k, n, no_fallback):
    """MX scaling: one float8_e8m0fnu (power of two) scale per 32 values of
    k, per row of self and per column of mat2, in cuBLAS's swizzled layout;
    the layout comes from TorchAO's to_blocked (what its MX training passes
    to _scaled_mm on CUDA). CPU has no MX _scaled_mm: float64 oracle."""
    to_blocked = pytest.importorskip("torchao.prototype.mx_formats.utils").to_blocked
    g = _gen(m + k + n)
    a = _f8(m, k, dtype=E4M3, seed=1)
    b = _f8(n, k, dtype=E4M3, seed=2)
    ea = torch.randint(120, 135, (m, k // 32), generator=g, dtype=torch.uint8)
    eb = torch.randint(120, 135, (n, k // 32), generator=g, dtype=torch.uint8)
    sa = to_blocked(ea.view(torch.float8_e8m0fnu))
    sb = to_blocked(eb.view(torch.float8_e8m0fnu))
    got = torch._scaled_mm(a.to(N), b.to(N).t(), sa.to(N), sb.to(N), out_dtype=torch.float32)
    wa = torch.exp2(ea.double() - 127).repeat_interleave(32, dim=1)
    wb = torch.exp2(eb.double() - 127).repeat_interleave(32, dim=1)
    oracle = (a.double() * wa) @ (b.double() * wb).t()
    torch.testing.assert_close(
        got.cpu().double(), oracle, rtol=1e-5, atol=1e-5 * oracle.abs().max().item()
    )


def test_scaled_mm_mx_errors():
    a, b = _f8(32, 96, dtype=E4M3, seed=1).to(N), _f8(32, 96, dtype=E4M3, seed=2).to(N).t()
    e8 = torch.float8_e8m0fnu
    ok = torch.ones(128 * 4, dtype=torch.uint8).view(e8).to(N)
    with pytest.raises(ValueError, match="scale_a should have 512 elements, got 256"):
        torch._scaled_mm(a, b, ok[:256], ok, out_dtype=torch.bfloat16)
    a2, b2 = _f8(32, 48, dtype=E4M3, seed=1).to(N), _f8(32, 48, dtype=E4M3, seed=2).to(N).t()
    with pytest.raises(ValueError, match="multiple of 32"):
        torch._scaled_mm(a2, b2, ok, ok, out_dtype=torch.bfloat16)


# ---- casts to and from float8 --------------------------------------------------------


def _every_value(dtype):
    if dtype in (torch.bfloat16, torch.float16):  # every bit pattern
        return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    g = _gen(5)  # fp32: random bit patterns over every exponent, and each bf16 pattern's
    bits = torch.randint(-(2**31), 2**31 - 1, (1 << 20,), dtype=torch.int64, generator=g).to(
        torch.int32
    )
    wide = torch.arange(-32768, 32768, dtype=torch.int32) << 16
    return torch.cat([bits, wide, wide + (1 << 15), wide + (1 << 15) + 1]).view(torch.float32)


@pytest.mark.parametrize("fp8", [E4M3, E5M2])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_float8_casts_match_cpu_bit_for_bit(fp8, dtype, no_fallback):
    """Casts to float8 round as CPU's (nearest even; e4m3fn saturates at 448,
    e5m2 overflows to infinity; subnormals, ties, NaN signs): every bf16 /
    f16 bit pattern and 1M random f32 patterns, compared as bytes; and every
    float8 code back."""
    x = _every_value(dtype)
    ref = x.to(fp8)
    got = x.to(N).to(fp8)
    assert got.dtype == fp8 and got.device.type == N
    assert torch.equal(got.cpu().view(torch.uint8), ref.view(torch.uint8))
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8)
    back = codes.to(N).to(dtype).cpu()
    torch.testing.assert_close(back, codes.to(dtype), equal_nan=True, rtol=0, atol=0)
    # a strided view and a non-contiguous destination
    y = x[: 1 << 12].reshape(64, 64).t()
    out = torch.empty(64, 64, dtype=fp8, device=N).t()
    out.copy_(y.to(N))
    assert torch.equal(out.cpu().view(torch.uint8), y.to(fp8).view(torch.uint8))


def test_float8_cast_runs_on_the_device_stream():
    """The cast is a device task: it can be captured in a graph (a cast
    through the host would synchronise the stream, which capture refuses)."""
    x = torch.randn(1000, device=N)
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        y = x.to(E4M3).to(torch.float32)
    x.copy_(torch.linspace(-500, 500, 1000, device=N))
    g.replay()
    ref = torch.linspace(-500, 500, 1000).to(E4M3).float()
    torch.testing.assert_close(y.cpu(), ref, equal_nan=True, rtol=0, atol=0)
