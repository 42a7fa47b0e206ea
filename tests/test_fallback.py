"""The boxed CPU fallback: correctness on the cases where the stock
cpu_fallback goes wrong, op tracking, warn-once and error mode."""

import warnings

import pytest
import torch
from conftest import assert_same, run_python

import torch_neuronx


@pytest.fixture(autouse=True)
def _tracking():
    torch_neuronx.clear_op_tracking()
    yield
    torch_neuronx.set_fallback_mode("warn")


def test_out_of_place_matches_cpu_and_is_counted():
    x = torch.randn(4, 5)
    assert_same(torch.special.i1(x.neuron()), torch.special.i1(x))
    assert_same(x.neuron().sum(dim=1), x.sum(dim=1))
    ops = torch_neuronx.get_fallback_ops()
    assert ops.get("aten::special_i1.out") == 1, ops
    torch.special.i1(x.neuron())
    assert torch_neuronx.get_fallback_ops()["aten::special_i1.out"] == 2
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == {}


def test_inplace_keeps_identity_and_writes_device_memory():
    x = torch.randn(6)
    n = x.neuron()
    ptr = n.data_ptr()
    r = n.mul_(3).polygamma_(1)  # polygamma_: a fallback op
    assert r is n and n.data_ptr() == ptr
    assert_same(n, x.mul(3).polygamma(1))
    v = n[::2]
    v.polygamma_(1)  # in place through a strided view
    ref = x.mul(3).polygamma(1)
    ref[::2].polygamma_(1)
    assert_same(n, ref)
    assert torch_neuronx.get_fallback_ops() == {"aten::polygamma.out": 2}  # the fallback ran


def test_out_argument_is_resized_and_written_back():
    # special_i1 / special_i1e have no neuron kernel: the fallback's out= path
    x = torch.randn(3, 4)
    out = torch.empty(0, device="neuron")
    r = torch.special.i1(x.neuron(), out=out)
    assert r is out
    assert_same(out, torch.special.i1(x))
    out2 = torch.empty(3, 4, device="neuron")[:, ::2]  # non-contiguous out
    torch.special.i1e(x[:, :2].neuron(), out=out2)
    assert_same(out2, torch.special.i1e(x[:, :2]))
    assert torch_neuronx.get_fallback_ops() == {
        "aten::special_i1.out": 1,
        "aten::special_i1e.out": 1,
    }


def test_composite_explicit_ops_are_not_empty():
    x = torch.tensor([-1.0, float("nan"), 2.0])
    assert_same(torch.abs(x.neuron()), torch.abs(x), equal_nan=True)
    assert_same(torch.isnan(x.neuron()), torch.isnan(x))
    assert_same(x.neuron().sgn(), x.sgn(), equal_nan=True)


def test_reverse_scalar_ops_stay_on_neuron():
    x = torch.tensor([1.0, 2.0, 4.0])
    n = x.neuron()
    assert_same(2 // n, 2 // x)
    assert_same(2 - n, 2 - x)
    assert_same(2**n, 2**x)
    assert_same(1 / n, 1 / x)


def test_cpu_scalar_tensors_mix_with_neuron():
    x = torch.randn(5)
    assert_same(x.neuron() + torch.tensor(2.5), x + torch.tensor(2.5))
    assert_same(torch.tensor(2.5) * x.neuron(), torch.tensor(2.5) * x)


def test_factories_honour_the_device():
    assert_same(torch.arange(7, device="neuron"), torch.arange(7))
    assert_same(torch.linspace(0, 1, 5, device="neuron"), torch.linspace(0, 1, 5))
    assert_same(torch.eye(3, device="neuron:1"), torch.eye(3))
    assert torch.eye(3, device="neuron:1").device.index == 1
    assert_same(torch.full((2, 2), 3.0, device="neuron"), torch.full((2, 2), 3.0))


def test_multiple_and_list_returns():
    x = torch.randn(4, 6)
    vals, idx = torch.max(x.neuron(), dim=1)
    rv, ri = torch.max(x, dim=1)
    assert_same(vals, rv)
    assert_same(idx, ri)
    u, c = torch.unique(torch.tensor([3, 1, 3, 2]).neuron(), return_counts=True)
    assert_same(u, torch.tensor([1, 2, 3]))
    assert_same(c, torch.tensor([1, 1, 2]))
    parts = torch.tensor_split(x.neuron(), 3, dim=1)
    for p, q in zip(parts, torch.tensor_split(x, 3, dim=1)):
        assert_same(p, q)


def test_index_with_cpu_indices():
    x = torch.randn(5, 3)
    idx = torch.tensor([4, 0, 2])
    assert_same(x.neuron()[idx], x[idx])
    n = x.neuron()
    n[idx] = 0.0
    x[idx] = 0.0
    assert_same(n, x)


def test_view_ops_never_fall_back():
    x = torch.randn(4, 6)
    n = x.neuron()
    views = [
        n.t(),
        n.transpose(0, 1),
        n.view(24),
        n.reshape(2, 12),
        n[1],
        n[:, 2:5],
        n.narrow(1, 1, 3),
        n.expand(3, 4, 6),
        n.unsqueeze(0),
        n.squeeze(),
        n.diagonal(),
        n.unfold(1, 2, 2),
        n.permute(1, 0),
        n.view(torch.int32),
        n.flatten(),
        n.select(1, 2),
        n.movedim(0, 1),
        *n.unbind(0),
        *n.split(2),
        *n.chunk(3, dim=1),
        n.as_strided((2, 2), (1, 2)),
        n.detach(),
        n.real,
        n.view_as(torch.empty(24)),
        n.unflatten(1, (2, 3)),
    ]
    for v in views:
        assert v.untyped_storage().data_ptr() == n.untyped_storage().data_ptr()
    assert torch_neuronx.get_fallback_ops() == {}
    c = torch.randn(3, 2).neuron()
    z = torch.view_as_complex(c)
    assert torch.view_as_real(z).data_ptr() == c.data_ptr()
    assert torch_neuronx.get_fallback_ops() == {}


def _view_ops_needing_a_backend_kernel():
    out = []
    for name in torch._C._dispatch_get_registrations_for_dispatch_key("CPU"):
        op, _, overload = name.partition(".")
        try:
            schema = torch._C._get_schema(op, overload)
        except RuntimeError:
            continue
        rets = schema.returns
        if not rets or not any(
            r.alias_info is not None and not r.alias_info.is_write for r in rets
        ):
            continue
        out.append(name)
    return out


# View ops that exist only for layouts neuron does not have (sparse, nested,
# quantized, mkldnn): they cannot receive a strided neuron tensor.
_LAYOUT_ONLY = (
    "sparse",
    "indices",
    "values",
    "crow",
    "ccol",
    "col_indices",
    "row_indices",
    "nested",
    "quantize",
    "mkldnn",
    "q_per_channel",
    "_fw_primal",
)


def test_every_strided_view_op_has_a_neuron_kernel():
    missing = []
    for name in _view_ops_needing_a_backend_kernel():
        if any(k in name for k in _LAYOUT_ONLY):
            continue
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
            missing.append(name)
    assert missing == [], missing


def test_warns_once_per_op():
    x = torch.randn(3).neuron()
    with pytest.warns(UserWarning, match="aten::special_zeta.out.*neuron"):
        torch.special.zeta(x, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.special.zeta(x, 2.0)  # second call: silent


def test_error_mode_raises_not_implemented():
    torch_neuronx.set_fallback_mode("error")
    with pytest.raises(NotImplementedError, match="aten::special_i1.out.*TORCH_NEURONX_FALLBACK"):
        torch.special.i1(torch.ones(2, device="neuron"))
    torch_neuronx.set_fallback_mode("warn")
    with pytest.raises(RuntimeError, match="warn"):
        torch_neuronx.set_fallback_mode("loud")


def test_error_mode_from_environment():
    r = run_python(
        "import torch\ntry:\n  torch.special.i1(torch.ones(2, device='neuron'))\n"
        "except NotImplementedError as e: print('NIE', 'aten::special_i1' in str(e))\n"
        "print((torch.ones(2, device='neuron') * 0).device)  # native ops still fine\n".replace(
            "* 0", ".clone()"
        ),
        {"TORCH_NEURONX_FALLBACK": "error"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["NIE", "True", "neuron:0"]


def test_fallback_orders_after_pending_stream_work():
    # the fallback must see what queued native work wrote
    n = torch.empty(2000, 2000, device="neuron")
    n.fill_(2.0)
    assert n.sum().item() == 2.0 * 2000 * 2000


def test_convolution_through_overrideable_ops():
    # ATen sends convolutions of unknown backends to *_overrideable ops,
    # whose default kernels raise; neuron runs 1-D/2-D/3-D ones (regular and
    # transposed) natively in fp32/bf16/fp16 and fp64 ones on the CPU
    torch.manual_seed(0)
    for transposed in (False, True):
        x = torch.randn(2, 4, 7, 7, requires_grad=True)
        w = (
            torch.randn(4, 3, 3, 3, requires_grad=True)
            if transposed
            else torch.randn(6, 2, 3, 3, requires_grad=True)
        )
        b = torch.randn(3 if transposed else 6, requires_grad=True)
        xn, wn, bn = (t.detach().neuron().requires_grad_() for t in (x, w, b))
        if transposed:
            f = lambda i, k, c: torch.nn.functional.conv_transpose2d(i, k, c, stride=2, padding=1)  # noqa: E731
        else:
            f = lambda i, k, c: torch.nn.functional.conv2d(i, k, c, padding=1, groups=2)  # noqa: E731
        y, yn = f(x, w, b), f(xn, wn, bn)
        assert_same(yn, y, rtol=1e-5, atol=1e-5)
        (y * y).sum().backward()
        (yn * yn).sum().backward()
        for t, tn in ((x, xn), (w, wn), (b, bn)):
            assert_same(tn.grad, t.grad, rtol=1e-4, atol=1e-4)
    assert "aten::convolution_overrideable" not in torch_neuronx.get_fallback_ops()
    x3, w3 = torch.randn(1, 2, 4, 5, 5), torch.randn(3, 2, 3, 3, 3)
    assert_same(
        torch.nn.functional.conv3d(x3.neuron(), w3.neuron()),
        torch.nn.functional.conv3d(x3, w3),
        rtol=1e-4,
        atol=1e-4,
    )
    assert "aten::convolution_overrideable" not in torch_neuronx.get_fallback_ops()
    x3, w3 = x3.double(), w3.double()
    assert_same(
        torch.nn.functional.conv3d(x3.neuron(), w3.neuron()),
        torch.nn.functional.conv3d(x3, w3),
        rtol=1e-10,
        atol=1e-10,
    )
    assert "aten::convolution_overrideable" in torch_neuronx.get_fallback_ops()


@pytest.fixture
def _executed():
    torch_neuronx.enable_op_tracking()
    torch_neuronx.clear_op_tracking()
    yield
    torch_neuronx.disable_op_tracking()
    torch_neuronx.clear_op_tracking()


def test_executed_ops_off_by_default_says_how_to_turn_on():
    assert not torch_neuronx.is_op_tracking_enabled()
    torch.ones(2, device="neuron").add(1)
    with pytest.raises(RuntimeError, match="enable_op_tracking"):
        torch_neuronx.get_executed_ops()


def test_executed_ops_count_native_and_fallback_not_cpu(_executed):
    x = torch.randn(4, 5)
    n = x.neuron()
    assert_same(n + n, x + x)
    assert_same(torch.special.i1(n), torch.special.i1(x))
    x + x  # CPU only: not counted
    ops = torch_neuronx.get_executed_ops()
    assert ops.get("aten::add.Tensor") == 1, ops
    assert ops.get("aten::special_i1") == 1, ops
    # the fallback op is also among the fallbacks; the native add is not
    fb = torch_neuronx.get_fallback_ops()
    assert "aten::special_i1.out" in fb and "aten::add.Tensor" not in fb
    torch.zeros(3, device="neuron")  # a factory naming the device counts
    assert torch_neuronx.get_executed_ops().get("aten::zeros") == 1
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == {} and torch_neuronx.get_fallback_ops() == {}


def test_executed_ops_see_backward_and_stop_when_disabled(_executed):
    w = torch.randn(8, 8, device="neuron", requires_grad=True)
    torch.nn.functional.gelu(w @ w).sum().backward()  # backward runs on autograd's thread
    ops = torch_neuronx.get_executed_ops()
    assert ops.get("aten::gelu_backward") == 1, ops
    assert ops.get("aten::mm", 0) >= 3, ops  # forward, and both gradient products
    torch_neuronx.disable_op_tracking()
    torch.nn.functional.gelu(w)
    assert torch_neuronx.get_executed_ops().get("aten::gelu") == 1  # kept, not counted again


def test_executed_op_tracking_from_environment():
    r = run_python(
        "import torch, torch_neuronx\n(torch.ones(2, device='neuron') * 3).sum()\n"
        "print(torch_neuronx.get_executed_ops()['aten::mul.Tensor'])\n",
        {"TORCH_NEURONX_OP_TRACKING": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1"]
    r = run_python("import torch", {"TORCH_NEURONX_OP_TRACKING": "maybe"})
    assert r.returncode != 0 and "TORCH_NEURONX_OP_TRACKING must be 1 or 0" in r.stderr
