"""User kernels in C as torch ops (torch_neuronx.c_kernels and the example
in examples/c_kernels): eager, compiled (fullgraph) and backward, against
the PyTorch reference on the CPU."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo

import torch_neuronx.c_kernels as ck

DEV = "neuron"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "c_kernels" / "rmsnorm_residual.py"


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TORCH_NEURONX_KERNEL_CACHE", str(tmp_path_factory.mktemp("kcache")))
    spec = importlib.util.spec_from_file_location("rmsnorm_residual_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    mp.undo()


def inputs(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    r = torch.randn(shape, generator=g).to(dtype) * 3
    w = torch.randn(shape[-1], generator=g).to(dtype)
    return x, r, w


@pytest.mark.parametrize("shape", [(1, 1), (7, 17), (3, 5, 64), (2, 4096), (600, 40)])
def test_eager_matches_cpu_reference(ex, shape):
    x, r, w = inputs(shape)
    y, h = torch.ops.neuron_examples.rmsnorm_residual(x.to(DEV), r.to(DEV), w.to(DEV), 1e-6)
    ey, eh = ex.reference(x.double(), r.double(), w.double(), 1e-6)
    torch.testing.assert_close(h.cpu(), eh.float(), atol=0, rtol=0)
    torch.testing.assert_close(y.cpu(), ey.float(), atol=1e-5, rtol=1e-5)


def test_bf16_and_non_contiguous_inputs(ex):
    x, r, w = inputs((8, 48), torch.bfloat16)
    xt = x.to(DEV).t().contiguous().t()  # same values, column-major
    y, h = torch.ops.neuron_examples.rmsnorm_residual(xt, r.to(DEV), w.to(DEV), 1e-5)
    ey, eh = ex.reference(x, r, w, 1e-5)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(h.cpu(), eh, atol=0, rtol=0)
    torch.testing.assert_close(y.cpu(), ey, atol=2e-2, rtol=2e-2)


def test_runs_in_stream_order(ex):
    """Queued behind a 0.2 s task and an eager copy: a kernel that ran on
    the host at once would read the old values."""
    x, r, w = inputs((64, 256))
    xd = torch.zeros_like(x, device=DEV)
    rd, wd = r.to(DEV), w.to(DEV)
    ex.kernels()  # compile first
    torch.neuron.synchronize()
    src = x.to(DEV)
    torch.neuron._sleep(200_000_000)
    xd.copy_(src)
    y, h = torch.ops.neuron_examples.rmsnorm_residual(xd, rd, wd, 1e-6)
    ey, eh = ex.reference(x, r, w, 1e-6)
    torch.testing.assert_close(h.cpu(), eh)
    torch.testing.assert_close(y.cpu(), ey, atol=1e-5, rtol=1e-5)


def test_compiled_fullgraph_and_backward_match_cpu(ex):
    torch._dynamo.reset()

    def block(x, r, w, lin):
        y, h = torch.ops.neuron_examples.rmsnorm_residual(x, r, w, 1e-6)
        return lin(y).relu().sum() + h.square().mean()

    torch.manual_seed(0)
    lin = torch.nn.Linear(40, 9)
    lin_d = torch.nn.Linear(40, 9).to(DEV)
    lin_d.load_state_dict(lin.state_dict())
    x, r, w = inputs((6, 11, 40))
    cpu_in = [t.clone().requires_grad_() for t in (x, r, w)]
    dev_in = [t.to(DEV).requires_grad_() for t in (x, r, w)]

    def cpu_block(x, r, w):  # the reference formula, differentiated by autograd
        y, h = ex.reference(x, r, w, 1e-6)
        return lin(y).relu().sum() + h.square().mean()

    out = torch.compile(block, fullgraph=True)(*dev_in, lin_d)
    out.backward()
    ref = cpu_block(*cpu_in)
    ref.backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-5)
    for d, c in zip(dev_in, cpu_in):
        torch.testing.assert_close(d.grad.cpu(), c.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(lin_d.weight.grad.cpu(), lin.weight.grad, atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()


def test_op_checks_shapes(ex):
    x, r, w = inputs((4, 8))
    with pytest.raises(RuntimeError, match="do not match"):
        torch.ops.neuron_examples.rmsnorm_residual(x.to(DEV), r[:, :4].to(DEV), w.to(DEV), 1e-6)


SCALE = """
#include <stdint.h>
void scale(const float *x, float *out, int64_t n, float k, int64_t offset) {
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * k + (float)offset;
}
"""


def test_launcher_arguments_and_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_KERNEL_CACHE", str(tmp_path))
    lib = ck.load_inline(
        "scale_test",
        SCALE,
        functions={"scale": ["const float*", "float*", "int64_t", "float", "int64_t"]},
    )
    x = torch.randn(1000)
    out = torch.empty(1000, device=DEV)
    lib.scale(x.to(DEV), out, 1000, 2.5, -3)
    torch.testing.assert_close(out.cpu(), x * 2.5 - 3)
    # Cached: a second load compiles nothing and returns the same library.
    assert (
        ck.load_inline(
            "scale_test",
            SCALE,
            {"scale": ["const float*", "float*", "int64_t", "float", "int64_t"]},
        ).path
        == lib.path
    )
    with pytest.raises(RuntimeError, match="argument 0 is on cpu"):
        lib.scale(x, out, 1000, 2.5, 0)
    with pytest.raises(RuntimeError, match="takes 5 arguments, got 4"):
        lib.scale(x.to(DEV), out, 1000, 2.5)
    with pytest.raises(TypeError, match="must be a tensor"):
        lib.scale(1, out, 1000, 2.5, 0)
    with pytest.raises(RuntimeError, match="compiling 'broken' failed"):
        ck.load_inline("broken", "void f(void) { this is not C; }", {"f": []})
    with pytest.raises(NotImplementedError, match="struct pair"):
        ck.load_inline(
            "badtype", "struct pair {int a;}; void g(struct pair p) {}", {"g": ["struct pair"]}
        )
