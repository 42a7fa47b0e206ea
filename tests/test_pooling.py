"""Native 2-D and 3-D pooling (csrc/aten/pooling_ops.cpp: max with indices,
average, adaptive average and max) and bilinear upsampling, forward and
backward, against PyTorch CPU; and the pooling edge cases."""

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from op_util import both, native, randn

import torch_neuronx

pytestmark = pytest.mark.usefixtures("fresh_op_tracking")

POOLS = {
    "max2": lambda t: F.max_pool2d(t, 2),
    "max3s2p1": lambda t: F.max_pool2d(t, 3, stride=2, padding=1),
    "max_dil_ceil": lambda t: F.max_pool2d(
        t, (3, 2), stride=(2, 1), padding=1, dilation=2, ceil_mode=True
    ),
    "max_indices": lambda t: F.max_pool2d(t, 3, stride=2, return_indices=True)[1].float(),
    "avg2": lambda t: F.avg_pool2d(t, 2),
    "avg3s2p1": lambda t: F.avg_pool2d(t, 3, stride=2, padding=1),
    "avg_nopad_ceil": lambda t: F.avg_pool2d(
        t, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
    ),
    "avg_divisor": lambda t: F.avg_pool2d(t, (2, 3), stride=1, divisor_override=5),
    "adaptive_1": lambda t: F.adaptive_avg_pool2d(t, 1),
    "adaptive_3x4": lambda t: F.adaptive_avg_pool2d(t, (3, 4)),
    "adaptive_up": lambda t: F.adaptive_avg_pool2d(t, (11, 13)),
    "adaptive_max_1": lambda t: F.adaptive_max_pool2d(t, 1),
    "adaptive_max_3x4": lambda t: F.adaptive_max_pool2d(t, (3, 4)),
    "adaptive_max_up": lambda t: F.adaptive_max_pool2d(t, (11, 13)),
    "adaptive_max_indices": lambda t: F.adaptive_max_pool2d(t, (4, 5), return_indices=True)[
        1
    ].float(),
    "adaptive_max_1d": lambda t: F.adaptive_max_pool1d(t.flatten(2), 7),
    "adaptive_max_channels_last": lambda t: F.adaptive_max_pool2d(
        t.contiguous(memory_format=torch.channels_last), (5, 3)
    ),
    "bilinear_x2": lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"),
    "bilinear_size": lambda t: F.interpolate(t, size=(5, 13), mode="bilinear"),
    "bilinear_align": lambda t: F.interpolate(t, size=(17, 4), mode="bilinear", align_corners=True),
    "bilinear_frac": lambda t: F.interpolate(t, scale_factor=(1.7, 0.6), mode="bilinear"),
    "upsample_module": lambda t: torch.nn.Upsample(scale_factor=2, mode="bilinear")(t),
}


def tol(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return {"rtol": 2e-2, "atol": 2e-2}
    return {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("name", list(POOLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_pool_forward_backward(name, dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 9, 11, generator=g).to(dtype)
    f = POOLS[name]
    torch_neuronx.clear_op_tracking()
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    yc, yn = f(xc), f(xn)
    assert_same(yn, yc, **tol(dtype))
    if yc.requires_grad:
        gy = torch.randn(yc.shape, generator=g).to(dtype)
        yc.backward(gy)
        yn.backward(gy.neuron())
        assert_same(xn.grad, xc.grad, **tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


POOLS3D = {
    "max2": lambda t: F.max_pool3d(t, 2),
    "max_s2p1": lambda t: F.max_pool3d(t, 3, stride=2, padding=1),
    "max_dil_ceil": lambda t: F.max_pool3d(
        t, (2, 3, 2), stride=(1, 2, 1), padding=(0, 1, 1), dilation=(2, 1, 2), ceil_mode=True
    ),
    "max_indices": lambda t: F.max_pool3d(t, 3, stride=2, return_indices=True)[1].float(),
    "avg2": lambda t: F.avg_pool3d(t, 2),
    "avg_s2p1": lambda t: F.avg_pool3d(t, 3, stride=2, padding=1),
    "avg_nopad_ceil": lambda t: F.avg_pool3d(
        t, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
    ),
    "avg_divisor": lambda t: F.avg_pool3d(t, (1, 2, 3), stride=1, divisor_override=5),
    "adaptive_1": lambda t: F.adaptive_avg_pool3d(t, 1),
    "adaptive_2x3x4": lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)),
    "adaptive_up": lambda t: F.adaptive_avg_pool3d(t, (7, 11, 13)),
    "adaptive_max_2x3x4": lambda t: F.adaptive_max_pool3d(t, (2, 3, 4)),
    "adaptive_max_up": lambda t: F.adaptive_max_pool3d(t, (7, 11, 13)),
    "adaptive_max_indices": lambda t: F.adaptive_max_pool3d(t, 3, return_indices=True)[1].float(),
}


@pytest.mark.parametrize("name", list(POOLS3D))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_pool3d_forward_backward(name, dtype):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 5, 9, 7, generator=g).to(dtype)
    f = POOLS3D[name]
    torch_neuronx.clear_op_tracking()
    # CPU has no bf16 3-D pooling: its fp32 result on the same values, rounded
    ref = torch.float32 if dtype == torch.bfloat16 else dtype
    xc, xn = x.to(ref).clone().requires_grad_(), x.neuron().requires_grad_()
    yc, yn = f(xc), f(xn)
    assert_same(yn, yc.to(yn.dtype), **tol(dtype))
    if yc.requires_grad:
        gy = torch.randn(yc.shape, generator=g).to(dtype)
        yc.backward(gy.to(ref))
        yn.backward(gy.neuron())
        assert_same(xn.grad, xc.grad.to(dtype), **tol(dtype))
    assert torch_neuronx.get_fallback_ops() == {}


def test_pool3d_layouts_unbatched_and_errors():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 4, 4, 6, 6, generator=g)
    cl = x.to(memory_format=torch.channels_last_3d)
    for f in (lambda t: F.max_pool3d(t, 2), lambda t: F.avg_pool3d(t, 3, 1, 1)):
        yc, yn = f(cl), f(cl.neuron())
        assert_same(yn, yc)
        assert yn.stride() == yc.stride()  # channels-last-3d stays so
        assert_same(f(x[0].neuron()), f(x[0]))  # [C, D, H, W]
        assert_same(f(x.transpose(3, 4).neuron()), f(x.transpose(3, 4)))  # strided
    assert torch_neuronx.get_fallback_ops() == {}
    for dev in ("cpu", "neuron"):
        t = x.to(dev)
        with pytest.raises(RuntimeError, match="pad should be"):
            F.max_pool3d(t, 2, padding=2)
        with pytest.raises(RuntimeError):
            F.avg_pool3d(t, 5)  # window larger than the input
        with pytest.raises(RuntimeError, match="divisor must be not zero"):
            F.avg_pool3d(t, 2, divisor_override=0)
        with pytest.raises(RuntimeError):
            F.max_pool3d(t[0, 0], 2)  # 3-D input: no channel dim
        with pytest.raises(RuntimeError):
            F.avg_pool3d(t[0, 0], 2)
    assert torch_neuronx.get_fallback_ops() == {}  # the errors are raised here, as CPU's


RESAMPLE = [
    ((2, 3, 7), dict(scale_factor=2, mode="linear")),
    ((2, 3, 7), dict(size=12, mode="linear", align_corners=True)),
    ((2, 3, 9), dict(scale_factor=0.6, mode="linear")),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 8), mode="trilinear", align_corners=True)),
    ((1, 2, 4, 6, 5), dict(scale_factor=(1, 0.5, 1.5), mode="trilinear")),
    ((2, 3, 6, 7), dict(scale_factor=2, mode="bicubic")),
    ((2, 3, 6, 7), dict(size=(9, 4), mode="bicubic", align_corners=True)),
    ((2, 3, 6, 7), dict(scale_factor=(1.7, 0.6), mode="bicubic")),
    ((1, 4, 5, 5), dict(size=(8, 8), mode="bicubic")),  # ViT position-embedding resize
]


@pytest.mark.parametrize("case", range(len(RESAMPLE)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_linear_and_cubic_resampling(case, dtype):
    shape, kw = RESAMPLE[case]
    g = torch.Generator().manual_seed(7 + case)
    x = torch.randn(shape, generator=g).to(dtype)
    torch_neuronx.clear_op_tracking()
    xn, xc = x.neuron().requires_grad_(), x.clone().requires_grad_()
    yc, yn = F.interpolate(xc, **kw), F.interpolate(xn, **kw)
    assert_same(yn, yc, **tol(dtype))
    gy = torch.randn(yc.shape, generator=g).to(dtype)
    yc.backward(gy)
    yn.backward(gy.neuron())
    assert_same(
        xn.grad,
        xc.grad,
        **(tol(dtype) if dtype != torch.bfloat16 else {"rtol": 3e-2, "atol": 6e-2}),
    )
    assert torch_neuronx.get_fallback_ops() == {}


def test_resampling_layouts_and_errors():
    torch_neuronx.clear_op_tracking()
    x = torch.randn(2, 3, 5, 6)
    cl = x.to(memory_format=torch.channels_last)
    yc = F.interpolate(cl, scale_factor=2, mode="bicubic")
    yn = F.interpolate(cl.neuron(), scale_factor=2, mode="bicubic")
    assert_same(yn, yc)
    assert yn.is_contiguous(memory_format=torch.channels_last) == yc.is_contiguous(
        memory_format=torch.channels_last
    )
    v = torch.randn(1, 2, 3, 4, 5).to(memory_format=torch.channels_last_3d)
    assert_same(
        F.interpolate(v.neuron(), scale_factor=2, mode="trilinear"),
        F.interpolate(v, scale_factor=2, mode="trilinear"),
    )
    assert torch_neuronx.get_fallback_ops() == {}
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError):
            torch.ops.aten.upsample_trilinear3d(x.to(dev), [4, 4, 4], False)  # 4-D input
        with pytest.raises(RuntimeError):
            torch.ops.aten.upsample_bicubic2d(x.to(dev), [0, 4], False)  # empty output


def test_layouts_and_unbatched():
    torch_neuronx.clear_op_tracking()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 4, 8, 6, generator=g)
    cl = x.to(memory_format=torch.channels_last)
    for f in (
        lambda t: F.max_pool2d(t, 2),
        lambda t: F.avg_pool2d(t, 3, 1, 1),
        lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"),
    ):
        yc, yn = f(cl), f(cl.neuron())
        assert_same(yn, yc)
        assert yn.stride() == yc.stride()  # channels-last stays channels-last
        if "interpolate" not in f.__code__.co_names:
            assert_same(f(x[0].neuron()), f(x[0]))  # [C, H, W]
        assert_same(f(x.transpose(2, 3).neuron()), f(x.transpose(2, 3)))  # strided
    xn = x.neuron()
    xn[0, 0, 0, 0] = float("nan")
    xc = xn.cpu()
    v, i = F.max_pool2d(xn, 2, return_indices=True)
    vc, ic = F.max_pool2d(xc, 2, return_indices=True)
    assert_same(v, vc, equal_nan=True)
    assert torch.equal(i.cpu(), ic)
    out = torch.empty(0, device="neuron")
    torch._C._nn.avg_pool2d(x.neuron(), 2, out=out)
    assert_same(out, F.avg_pool2d(x, 2))
    assert torch_neuronx.get_fallback_ops() == {}


def test_zero_batch_and_bad_arguments():
    x = torch.randn(0, 3, 8, 8)
    assert_same(F.max_pool2d(x.neuron(), 2), F.max_pool2d(x, 2))
    assert_same(
        F.interpolate(x.neuron(), scale_factor=2, mode="bilinear"),
        F.interpolate(x, scale_factor=2, mode="bilinear"),
    )
    y = torch.randn(1, 2, 4, 4)
    for dev in ("cpu", "neuron"):
        t = y.to(dev)
        with pytest.raises(RuntimeError, match="pad should be"):
            F.max_pool2d(t, 2, padding=2)
        with pytest.raises(RuntimeError, match="Output size is too small"):
            F.avg_pool2d(t, 5)
        with pytest.raises(RuntimeError, match="divisor must be not zero"):
            F.avg_pool2d(t, 2, divisor_override=0)
        with pytest.raises(RuntimeError, match="stride should"):
            torch.ops.aten.max_pool2d_with_indices(t, [2, 2], [0, 0])


def test_bad_max_pool_indices_fault():
    """Backward with indices outside the plane: a RuntimeError at the next
    synchronisation, never a write outside the gradient."""
    x = torch.randn(1, 1, 4, 4, device="neuron")
    grad = torch.ones(1, 1, 2, 2, device="neuron")
    idx = torch.tensor([[[[0, 1], [99, 2]]]], device="neuron")
    with pytest.raises(RuntimeError, match="max_pool2d_backward"):
        g = torch.ops.aten.max_pool2d_with_indices_backward(
            grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx
        )
        g.cpu()
    torch.neuron.synchronize()


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sample_forward_backward(mode, padding, align, dtype):
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 3, 5, 7, generator=g).to(dtype)
    # points inside, on and well outside [-1, 1] (padding matters), nudged off the
    # exact half-pixel ties where nearest rounding is ambiguous
    grid = (torch.rand(2, 4, 6, 2, generator=g) * 3.2 - 1.6).to(dtype)
    grid[0, 0, 0] = torch.tensor([1.0, -1.0], dtype=dtype)
    torch_neuronx.clear_op_tracking()
    xs = [x.clone().requires_grad_(), x.neuron().requires_grad_()]
    gs = [grid.clone().requires_grad_(), grid.neuron().requires_grad_()]
    ys = [
        F.grid_sample(xs[i], gs[i], mode=mode, padding_mode=padding, align_corners=align)
        for i in range(2)
    ]
    assert_same(ys[1], ys[0], rtol=1e-5, atol=1e-5)
    gy = torch.randn(ys[0].shape, generator=g).to(dtype)
    ys[0].backward(gy)
    ys[1].backward(gy.neuron())
    assert_same(xs[1].grad, xs[0].grad, rtol=1e-5, atol=1e-5)
    assert_same(gs[1].grad, gs[0].grad, rtol=1e-4, atol=1e-4)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sample_3d_forward_backward(mode, padding, align, dtype):
    """5-D grid_sample (trilinear or nearest): points inside, on the faces and
    well outside the volume; input and grid gradients; an odd-sized volume
    and output."""
    g = torch.Generator().manual_seed(21)
    x = torch.randn(2, 3, 4, 5, 6, generator=g).to(dtype)
    grid = (torch.rand(2, 3, 2, 5, 3, generator=g) * 3.2 - 1.6).to(dtype)
    grid[0, 0, 0, 0] = torch.tensor([1.0, -1.0, 1.0], dtype=dtype)
    (xc, xn), (gc, gn) = both(x), both(grid)
    kw = dict(mode=mode, padding_mode=padding, align_corners=align)
    yc, yn = F.grid_sample(xc, gc, **kw), F.grid_sample(xn, gn, **kw)
    assert yn.shape == (2, 3, 3, 2, 5)
    # fp32: CPU computes the trilinear weights in float, neuron in double
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    assert_same(yn, yc, **tol)
    go = torch.randn(yc.shape, generator=g).to(dtype)
    yc.backward(go)
    yn.backward(go.neuron())
    assert_same(xn.grad, xc.grad, **tol)
    assert_same(gn.grad, gc.grad, **(dict(rtol=1e-4, atol=1e-4) if tol else {}))
    native()


def test_grid_sample_3d_bad_input_as_cpu():
    x = torch.randn(1, 2, 3, 4, 5)
    grid = torch.rand(1, 2, 2, 2, 3) * 2 - 1
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D"):
            F.grid_sample(x.to(dev), grid.to(dev), mode="bicubic", align_corners=False)
        with pytest.raises(RuntimeError, match="grid"):  # grid's last dim must be 3
            F.grid_sample(x.to(dev), grid[..., :2].to(dev), align_corners=False)
    # non-finite coordinates as CPU's 3-D kernel: out of bounds (0) with zero
    # padding; a NaN clipped to the last pixel by border and reflection
    bad = grid.clone()
    bad[0, 0, 0, 0, 0] = float("nan")
    bad[0, 0, 0, 1, 2] = float("inf")
    bad[0, 1, 1, 0, 1] = -float("inf")
    for mode in ("bilinear", "nearest"):
        for pad in ("zeros", "border", "reflection"):
            kw = dict(mode=mode, padding_mode=pad, align_corners=False)
            xc, xn = both(x)
            gc, gn = both(bad)
            yc, yn = F.grid_sample(xc, gc, **kw), F.grid_sample(xn, gn, **kw)
            assert_same(yn, yc, equal_nan=True)
            yc.sum().backward()
            yn.sum().backward()
            assert_same(xn.grad, xc.grad, equal_nan=True)
            assert_same(gn.grad, gc.grad, equal_nan=True)
    native()


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "size, scale, align",
    [
        ((7, 5), None, False),
        ((20, 9), None, False),
        (None, (0.3, 0.6), False),
        ((5, 4), None, True),
    ],
)
def test_antialiased_interpolate_matches_cpu(mode, dtype, size, scale, align):
    """interpolate(antialias=True): downscaling widens the filter, upscaling
    is plain bilinear/bicubic (Keys a=-0.5); forward and backward, and a
    channels_last input keeps its layout."""
    x = randn(2, 3, 12, 10, seed=3, dtype=dtype)
    kw = dict(size=size, scale_factor=scale, mode=mode, antialias=True, align_corners=align)
    # fp32: CPU computes the filter weights in float, neuron in double
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else {}
    for fmt in (torch.contiguous_format, torch.channels_last):
        xc, xn = both(x.contiguous(memory_format=fmt))
        yc, yn = F.interpolate(xc, **kw), F.interpolate(xn, **kw)
        assert_same(yn, yc, **tol)
        assert yn.is_contiguous(memory_format=fmt) == yc.is_contiguous(memory_format=fmt)
        g = randn(*yc.shape, seed=4, dtype=dtype)
        yc.backward(g)
        yn.backward(g.neuron())
        assert_same(xn.grad, xc.grad, **tol)
    native()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_bicubic_matches_cpu(dtype, pad, align):
    """Bicubic (Keys, A=-0.75) over 16 taps, the padding applied to each tap;
    grid points inside and outside the image; input and grid gradients."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 5, 6, generator=g, dtype=dtype)
    grid = torch.rand(2, 4, 7, 2, generator=g, dtype=dtype) * 2.6 - 1.3
    (xc, xn), (gc, gn) = both(x), both(grid)
    kw = dict(mode="bicubic", padding_mode=pad, align_corners=align)
    yc, yn = F.grid_sample(xc, gc, **kw), F.grid_sample(xn, gn, **kw)
    # fp32: CPU computes the tap weights in float, neuron in double
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else {}
    assert_same(yn, yc, **tol)
    go = torch.randn(yc.shape, generator=g, dtype=dtype)
    yc.backward(go)
    yn.backward(go.neuron())
    assert_same(xn.grad, xc.grad, **tol)
    assert_same(gn.grad, gc.grad, **(dict(rtol=1e-4, atol=1e-4) if tol else {}))
    native()
    for dev in ("cpu", "neuron"):
        with pytest.raises(RuntimeError):  # grid batch differs from the input's
            F.grid_sample(x.to(dev), torch.rand(3, 3, 3, 2, device=dev, dtype=dtype), **kw)


# ---- edge cases (issue 16; tools/mutate.py checks that these tests catch
# planted bugs): max / avg / adaptive-avg pooling (kernels/pooling.c) with
# ceil_mode, padding, dilation, windows of -inf and NaN, ties, non-contiguous
# inputs, indices -------------------------------------------------------------------


def pool_input(shape, seed, specials=True):
    x = randn(*shape, seed=seed)
    if specials:
        flat = x.view(-1)
        flat[5] = float("nan")
        flat[40:52] = float("-inf")  # whole windows of -inf
        flat[70] = float("inf")
        flat[90:94] = 1.25  # ties: the first one wins
    return x


POOL1D = {
    "max_ceil_pad": lambda t: F.max_pool1d(t, 3, 2, 1, ceil_mode=True),
    "max_dil": lambda t: F.max_pool1d(t, 4, 3, 2, dilation=2, ceil_mode=True),
    "max_idx": lambda t: F.max_pool1d(t, 3, 2, 1, return_indices=True)[1].float(),
    "avg_ceil_pad": lambda t: F.avg_pool1d(t, 3, 2, 1, ceil_mode=True),
    "avg_nopad_count": lambda t: F.avg_pool1d(t, 4, 3, 2, ceil_mode=True, count_include_pad=False),
}
POOL2D = {
    "max_ceil_pad": lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True),
    "max_dil": lambda t: F.max_pool2d(t, (2, 3), (3, 2), (1, 1), dilation=(2, 2), ceil_mode=True),
    "max_idx": lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True)[1].float(),
    "avg_ceil_pad": lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True),
    "avg_nopad_count": lambda t: F.avg_pool2d(
        t, (3, 2), 2, 1, ceil_mode=True, count_include_pad=False
    ),
    "avg_divisor": lambda t: F.avg_pool2d(t, 3, 2, 1, divisor_override=4),
    "adaptive_odd": lambda t: F.adaptive_avg_pool2d(t, (5, 7)),
}


def pool_check(f, x, dtype=torch.float32):
    x = x.to(dtype)
    xc, xn = both(x)
    yc, yn = f(xc), f(xn)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    assert_same(yn, yc, equal_nan=True, **tol)
    if yc.requires_grad:
        gy = randn(*yc.shape, seed=70, dtype=dtype)
        yc.backward(gy)
        yn.backward(gy.neuron())
        assert_same(xn.grad, xc.grad, equal_nan=True, **tol)
    native("pool")


@pytest.mark.parametrize("name", list(POOL1D))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_pool1d_specials_layouts(name, layout):
    x = pool_input((2, 3, 37), seed=71)
    if layout == "transposed":  # channels innermost in storage
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    pool_check(POOL1D[name], x)


@pytest.mark.parametrize("name", list(POOL2D))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "stepped"])
def test_pool2d_specials_layouts(name, layout):
    x = pool_input((2, 3, 13, 17), seed=72)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "stepped":
        big = torch.zeros(2, 3, 13, 34)
        big[..., ::2] = x
        x = big[..., ::2]
    pool_check(POOL2D[name], x)


@pytest.mark.parametrize("name", ["max_ceil_pad", "avg_ceil_pad", "adaptive_odd"])
def test_pool2d_bf16_and_many_planes(name):
    """bf16, and enough planes and rows that the forward and the per-plane
    backward split over threads."""
    pool_check(POOL2D[name], pool_input((4, 16, 30, 31), seed=73), dtype=torch.bfloat16)
    pool_check(POOL2D[name], pool_input((4, 16, 30, 31), seed=74, specials=False))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("batched", [True, False])
def test_max_unpool2d_forward_backward(dtype, batched):
    """SegNet-style unpooling: max_pool2d's indices scattered back, output
    sizes beyond the pooled one, forward, out= and the gradient (a gather)."""
    x = torch.randn(2, 3, 8, 6, generator=torch.Generator().manual_seed(0)).to(dtype)
    if not batched:
        x = x[0]
    o, i = F.max_pool2d(x, 2, return_indices=True)
    for size in (None, (9, 7)):
        oc = o.clone().requires_grad_()
        on = o.neuron().requires_grad_()
        want = F.max_unpool2d(oc, i, 2, output_size=size)
        got = F.max_unpool2d(on, i.neuron(), 2, output_size=size)
        assert_same(got, want)
        w = torch.linspace(-1, 1, want.numel()).view(want.shape).to(dtype)
        (want * w).sum().backward()
        (got * w.neuron()).sum().backward()
        assert_same(on.grad, oc.grad)
    out = torch.empty(0, dtype=dtype, device="neuron")
    torch._C._nn.max_unpool2d(o.neuron(), i.neuron(), [8, 6], out=out)
    assert_same(out, torch._C._nn.max_unpool2d(o, i, [8, 6]))
    with pytest.raises(RuntimeError, match="should be type int64"):
        F.max_unpool2d(o.neuron(), i.neuron().int(), 2)
    with pytest.raises(RuntimeError, match="same as that of the input"):
        torch._C._nn.max_unpool2d(o.neuron(), i.neuron()[..., :1], [8, 6])
    assert torch_neuronx.get_fallback_ops() == {}
