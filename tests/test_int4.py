"""Weight-only int4 on neuron (kernels/int4_gemm.c): torch's
_convert_weight_to_int4pack_for_cpu and _weight_int4pack_mm_for_cpu, native
and in CPU's packed format for this host's ATen ISA (bytes equal to CPU's;
a weight packed on either device runs on the other), against CPU's op and a
float64 oracle; CPU's errors; TorchAO's int4 weight-only linear on neuron."""

import pytest
import torch

N = "neuron"
pack = torch.ops.aten._convert_weight_to_int4pack_for_cpu
mm = torch.ops.aten._weight_int4pack_mm_for_cpu


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _case(m, n, k, group, dtype, seed):
    g = _gen(seed)
    w = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=g)
    a = torch.randn(m, k, generator=g).to(dtype)
    groups = (k + group - 1) // group
    scale = (torch.rand(groups, n, generator=g) * 0.1 + 0.01).to(dtype)
    zero = (torch.randn(groups, n, generator=g) * 0.5).to(dtype)
    sz = torch.stack([scale, zero], dim=-1).contiguous()
    return w, a, sz


def _oracle(w, a, sz, group):
    """float64: A @ ((q - 8) * s + z)^T, s and z of the row's group"""
    k = a.shape[1]
    g = torch.arange(k) // group
    s, z = sz[..., 0].double()[g], sz[..., 1].double()[g]  # [k, n]
    deq = (w.double().t() - 8) * s + z
    return a.double() @ deq


@pytest.mark.parametrize(
    "n,k",
    [(16, 2), (48, 64), (64, 64), (80, 130), (96, 32), (112, 256), (4096, 64)],
)
def test_pack_bytes_equal_cpu(n, k, no_fallback):
    w = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=_gen(n + k))
    got = pack(w.to(N), 2)
    assert got.dtype == torch.uint8 and got.shape == (n, k // 2) and got.device.type == N
    assert torch.equal(got.cpu(), pack(w, 2))


def test_pack_out_of_range_values_give_cpus_bytes(no_fallback):
    # values outside 0-15 are not masked by CPU: the same bytes here
    w = torch.randint(-300, 300, (64, 34), dtype=torch.int32, generator=_gen(3))
    assert torch.equal(pack(w.to(N), 8).cpu(), pack(w, 8))
    # a non-contiguous weight is packed as its contiguous copy
    wt = torch.randint(0, 16, (40, 96), dtype=torch.int32, generator=_gen(4)).t()
    assert torch.equal(pack(wt.to(N), 2).cpu(), pack(wt, 2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    "m,n,k,group",
    [(1, 64, 256, 32), (2, 48, 128, 64), (3, 112, 512, 128), (5, 80, 256, 256), (17, 96, 192, 64)],
)
def test_mm_matches_cpu_and_float64(m, n, k, group, dtype, no_fallback):
    w, a, sz = _case(m, n, k, group, dtype, seed=m * 7 + n)
    ref = _oracle(w, a, sz, group)
    packed_cpu = pack(w, 2)
    cpu = mm(a, packed_cpu, group, sz)
    # packed on CPU and moved, and packed on neuron: the same bytes, one answer
    got = mm(a.to(N), packed_cpu.to(N), group, sz.to(N))
    got2 = mm(a.to(N), pack(w.to(N), 2), group, sz.to(N))
    assert got.dtype == dtype and got.shape == (m, n)
    assert torch.equal(got.cpu(), got2.cpu())
    # fp32 sums either way: neuron's error against float64 is CPU's, up to
    # the rounding of the output
    out_ulp = {torch.float32: 2.0**-23, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]
    mag = (a.double().abs() @ ((w.double().t() - 8).abs() * 0.11 + 2.0)).max()
    err_n = (got.cpu().double() - ref).abs()
    err_c = (cpu.double() - ref).abs()
    assert (err_n <= ref.abs() * out_ulp + 1e-6 * mag).all(), err_n.max()
    assert err_n.max() <= err_c.max() * 2 + 1e-6 * mag


def test_mm_rows_do_not_change_a_rows_result(no_fallback):
    # decode (register sums) and prefill (the L1 panel) give each row the same sum
    w, a, sz = _case(33, 64, 512, 128, torch.bfloat16, seed=9)
    p, szn = pack(w.to(N), 2), sz.to(N)
    full = mm(a.to(N), p, 128, szn).cpu()
    for i in (0, 1, 2, 5, 32):
        assert torch.equal(mm(a[i : i + 1].to(N), p, 128, szn).cpu(), full[i : i + 1])


def test_mm_packed_on_neuron_runs_on_cpu(no_fallback):
    w, a, sz = _case(4, 96, 128, 32, torch.bfloat16, seed=5)
    p = pack(w.to(N), 2).cpu()
    assert torch.equal(mm(a, p, 32, sz), mm(a, pack(w, 2), 32, sz))


def test_mm_non_contiguous_scales(no_fallback):
    # CPU reads qScaleAndZeros as if contiguous; neuron reads its strides
    w, a, sz = _case(2, 48, 64, 32, torch.float32, seed=6)
    sz_t = sz.permute(2, 0, 1).contiguous().permute(1, 2, 0)
    assert not sz_t.is_contiguous()
    got = mm(a.to(N), pack(w, 2).to(N), 32, sz_t.to(N))
    torch.testing.assert_close(got.cpu(), mm(a, pack(w, 2), 32, sz), rtol=1e-5, atol=1e-5)


def test_mm_empty(no_fallback):
    w, a, sz = _case(3, 32, 64, 32, torch.bfloat16, seed=7)
    r = mm(a[:0].to(N), pack(w, 2).to(N), 32, sz.to(N))
    assert r.shape == (0, 32) and r.device.type == N


def _bad_mm_cases():
    w, a, sz = _case(3, 48, 64, 32, torch.bfloat16, seed=8)
    p = pack(w, 2)
    return [
        ("k mismatch", (a[:, :32].contiguous(), p, 32, sz)),
        ("int A", (torch.ones(3, 64, dtype=torch.int64), p, 32, sz)),
        ("double A", (a.double(), p, 32, sz.double())),
        ("A not contiguous", (a.t().contiguous().t(), p, 32, sz)),
        ("3-d A", (a.reshape(3, 1, 64), p, 32, sz)),
        ("B int32", (a, p.int(), 32, sz)),
        ("B not contiguous", (a, p.t().contiguous().t(), 32, sz)),
        ("group 16", (a, p, 16, sz)),
        ("group 48", (a, p, 48, sz)),
        ("scales wrong n", (a, p, 32, sz[:, :16])),
        ("scales 2-d", (a, p, 32, sz[0])),
        ("scales dtype", (a.float(), p, 32, sz)),
        ("1-d A", (a[0], p, 32, sz)),
        ("1-d B", (a, p.flatten(), 32, sz)),
    ]


@pytest.mark.parametrize("name,args", _bad_mm_cases(), ids=[c[0] for c in _bad_mm_cases()])
def test_mm_errors_match_cpu(name, args):
    with pytest.raises(Exception) as cpu_err:
        mm(*args)
    neuron_args = [x.to(N) if isinstance(x, torch.Tensor) else x for x in args]
    with pytest.raises(type(cpu_err.value)) as err:
        mm(*neuron_args)
    assert str(err.value) == str(cpu_err.value)


def test_mm_errors_where_cpu_reads_past_the_buffers():
    # CPU does not check these and reads out of bounds; neuron refuses them
    w, a, sz = _case(3, 48, 64, 32, torch.bfloat16, seed=8)
    p = pack(w, 2).to(N)
    with pytest.raises(RuntimeError, match="to hold 2 groups of 32"):
        mm(a.to(N), p, 32, sz[:1].to(N))
    with pytest.raises(RuntimeError, match="N to be dividable by 16"):
        mm(a.to(N), p[:8], 32, sz[:, :8].to(N))


@pytest.mark.parametrize(
    "name,w",
    [
        ("float", torch.zeros(32, 8)),
        ("n not a multiple of 16", torch.zeros(40, 8, dtype=torch.int32)),
        ("k odd", torch.zeros(32, 7, dtype=torch.int32)),
        ("1-d", torch.zeros(32, dtype=torch.int32)),
    ],
)
def test_pack_errors_match_cpu(name, w):
    with pytest.raises(Exception) as cpu_err:
        pack(w, 2)
    with pytest.raises(type(cpu_err.value)) as err:
        pack(w.to(N), 2)
    assert str(err.value) == str(cpu_err.value)


def test_torchao_int4_weight_only_linear_on_neuron(no_fallback):
    torchao = pytest.importorskip("torchao")
    from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig
    from torchao.quantization import quantize_

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512, bias=True), torch.nn.ReLU(), torch.nn.Linear(512, 128)
    ).to(torch.bfloat16)
    quantize_(model, PrototypeInt4WeightOnlyConfig(group_size=64))
    assert type(model[0].weight).__name__ == "Int4OpaqueTensor", torchao.__version__
    x = torch.randn(3, 7, 256, dtype=torch.bfloat16)
    ref = model(x)
    model.to(N)
    got = model(x.to(N))
    assert got.device.type == N and got.dtype == torch.bfloat16
    torch.testing.assert_close(got.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_torchao_still_asserts_cpu_inputs():
    # the route in torch_neuronx/_lowp.py exists because torchao's own
    # linear asserts a CPU input (docs/upstream/torchao-int4-devices.md);
    # this fails once it does not, and the route can go
    pytest.importorskip("torchao")
    from torchao.prototype.quantization.int4 import Int4OpaqueTensor, PrototypeInt4WeightOnlyConfig
    from torchao.quantization import quantize_

    lin = torch.nn.Linear(64, 32).to(torch.bfloat16)
    quantize_(lin, PrototypeInt4WeightOnlyConfig(group_size=32))
    table = Int4OpaqueTensor._ATEN_OP_TABLE[Int4OpaqueTensor]
    route = table[torch.ops.aten.linear.default]
    assert route._neuron_route
    original = route.__defaults__[0]
    x = torch.randn(2, 64, dtype=torch.bfloat16, device=N)
    w = lin.weight.to(N)
    with pytest.raises(AssertionError, match="For CPU device only"):
        original(torch.ops.aten.linear.default, (), (x, w, None), {})
