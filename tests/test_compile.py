"""torch.compile on neuron tensors: Inductor's C++ code generation for the
device, kernels queued on the current stream, the "neuron" Dynamo backend.
Every result is compared with the same function run eagerly on the CPU."""

import copy
import functools
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch._dynamo.utils import counters

DEV = "neuron"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def close(a, b, atol=1e-5, rtol=1e-5):
    torch.testing.assert_close(a.cpu(), b, atol=atol, rtol=rtol)


def compiled_kernels(fn):
    """Runs fn under a CompileCounter wrapping Inductor: (result, frames)."""
    cnt = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    return torch.compile(fn, backend=cnt), cnt


def test_pointwise_and_reduction_match_cpu():
    def f(x, y):
        z = (x.sin() + y * 3).relu()
        return z.sum(-1), z.amax(0), torch.where(x > 0, x / (y.abs() + 1), -x)

    x, y = torch.randn(37, 129), torch.randn(37, 129)
    cf, cnt = compiled_kernels(f)
    got = cf(x.to(DEV), y.to(DEV))
    for g, e in zip(got, f(x, y)):
        close(g, e)
    assert cnt.frame_count == 1


def test_outputs_are_neuron_tensors_and_inputs_unchanged():
    def f(x):
        x.mul_(2)
        return x + 1

    x = torch.randn(64)
    xn = x.to(DEV)
    out = torch.compile(f)(xn)
    assert out.device.type == DEV and xn.device.type == DEV
    close(xn, x * 2)
    close(out, x * 2 + 1)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(48, 96),
        torch.nn.LayerNorm(96),
        torch.nn.GELU(),
        torch.nn.Dropout(0.0),
        torch.nn.Linear(96, 7),
    )


def test_forward_backward_match_cpu():
    ref = mlp()
    model = copy.deepcopy(ref).to(DEV)
    x = torch.randn(19, 48)
    target = torch.randint(0, 7, (19,))
    cm = torch.compile(model)
    loss = torch.nn.functional.cross_entropy(cm(x.to(DEV)), target.to(DEV))
    loss.backward()
    ref_loss = torch.nn.functional.cross_entropy(ref(x), target)
    ref_loss.backward()
    close(loss, ref_loss)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_dynamic_shapes_one_graph_for_many_sizes():
    def f(a):
        return (a * 2).softmax(-1).sum(0) + a.mean()

    cf, cnt = compiled_kernels(f)
    cf_dyn = torch.compile(f, dynamic=True)
    for n in (5, 9, 17, 64):
        a = torch.randn(n, 33)
        close(cf_dyn(a.to(DEV)), f(a))
    # mark_dynamic: one graph serves every size after the first.
    for n in (6, 10, 18):
        a = torch.randn(n, 33).to(DEV)
        torch._dynamo.mark_dynamic(a, 0)
        close(cf(a), f(a.cpu()))
    assert cnt.frame_count == 1


def test_graph_break_keeps_results():
    def f(x):
        y = x.cos() * 2
        if y.sum().item() > 0:  # data-dependent branch: a graph break
            y = y + 1
        else:
            y = y - 1
        return y.exp()

    x = torch.randn(50)
    cf, cnt = compiled_kernels(f)
    close(cf(x.to(DEV)), f(x))
    close(cf(-x.abs().to(DEV) - 3), f(-x.abs() - 3))
    assert cnt.frame_count >= 2


def test_compiled_kernels_run_in_stream_order_with_eager_work():
    """The eager copy is queued behind a 0.2 s task; a compiled kernel that
    ran on the host at once would read the old values."""

    def f(x):
        return x * 2 + 1

    cf = torch.compile(f)
    x = torch.zeros(1000, device=DEV)
    cf(x)  # compile first
    torch.neuron.synchronize()
    src = torch.arange(1000.0).to(DEV)
    torch.neuron._sleep(200_000_000)
    x.copy_(src)
    out = cf(x)
    close(out, torch.arange(1000.0) * 2 + 1)


def test_compiled_kernels_run_on_the_current_stream():
    def f(x):
        return x.exp() - 1

    cf = torch.compile(f)
    x = torch.randn(4096)
    cf(x.to(DEV))  # compile on the default stream
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        xs = x.to(DEV)
        torch.neuron._sleep(100_000_000)
        out = cf(xs)
    # The default stream waits for s's work before reading out.
    torch.neuron.current_stream().wait_stream(s)
    close(out, f(x))
    with torch.profiler.profile(
        activities=[
            torch.profiler.ProfilerActivity.CPU,
            torch.profiler.ProfilerActivity.PrivateUse1,
        ]
    ) as prof:
        cf(x.to(DEV))
        torch.neuron.synchronize()
    names = {e.name for e in prof.events()}
    assert any(n.startswith("cpp_fused_") for n in names), sorted(names)


def test_backend_neuron_is_registered():
    assert "neuron" in torch._dynamo.list_backends()

    def f(x):
        return torch.nn.functional.silu(x) * x.sigmoid()

    x = torch.randn(300)
    close(torch.compile(f, backend="neuron")(x.to(DEV)), f(x))


def test_compiled_optimizer_step_matches_cpu():
    ref = mlp()
    model = copy.deepcopy(ref).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1)

    @torch.compile
    def step():
        opt.step()

    x = torch.randn(8, 48)
    for i in range(3):
        for m, inp in ((model, x.to(DEV)), (ref, x)):
            m.zero_grad()
            m(inp).square().mean().backward()
        if i == 2:
            # Two steps queued behind a busy stream: Adam's step count is a
            # CPU tensor the host increments before the first step's kernel
            # runs; the kernel must see the count of its own step.
            torch.neuron._sleep(200_000_000)
            step()
            ref_opt.step()
        step()
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), atol=1e-5, rtol=1e-4)


def test_compiler_disable_and_recompile_limit():
    @torch.compiler.disable
    def eager_part(x):
        return x.to("cpu").mul(3).to(DEV)

    def f(x):
        return eager_part(x.sin()) + 1

    x = torch.randn(40)
    cf, cnt = compiled_kernels(f)
    close(cf(x.to(DEV)), x.sin() * 3 + 1)
    assert cnt.frame_count == 2  # the graph before eager_part and the one after

    # Specialising on a Python int recompiles, up to the limit; then the
    # function runs eagerly (still correct).
    def g(x, k):
        return x * k

    cg, cnt2 = compiled_kernels(g)
    with torch._dynamo.config.patch(recompile_limit=2, automatic_dynamic_shapes=False):
        for k in range(5):
            close(cg(x.to(DEV), k), x * k)
    assert cnt2.frame_count == 2


def test_integer_division_by_zero_raises_like_eager():
    def f(a, b):
        return a // b + 1

    a = torch.tensor([7, 8, 9], device=DEV)
    b = torch.tensor([2, 0, 3], device=DEV)
    # CPU raises RuntimeError("ZeroDivisionError"), eager and compiled.
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor([7]) // torch.tensor([0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (a // b).cpu()
    with pytest.raises(RuntimeError, match="ZeroDivisionError.*compiled kernel"):
        torch.compile(f)(a, b).cpu()
    # The device stays usable.
    b = torch.tensor([2, 1, 3], device=DEV)
    close(torch.compile(f)(a, b), torch.tensor([4, 9, 4]))


def test_cpu_and_neuron_tensors_in_one_graph():
    def f(x, y):
        return (x + 1).cpu() * y, (y.to(DEV) * 2).sum()

    x, y = torch.randn(16), torch.randn(16)
    got = torch.compile(f)(x.to(DEV), y)
    exp = ((x + 1) * y, (y * 2).sum())
    assert got[0].device.type == "cpu" and got[1].device.type == DEV
    close(got[0], exp[0])
    close(got[1], exp[1])


FX_CACHE_SCRIPT = textwrap.dedent(
    """
    import torch
    from torch._dynamo.utils import counters
    def f(x):
        return (x.tanh() * 3).sum(0)
    x = torch.arange(120.0).reshape(10, 12) / 100
    out = torch.compile(f)(x.to("neuron")).cpu()
    assert torch.allclose(out, f(x), atol=1e-5), (out, f(x))
    print("hit", counters["inductor"]["fxgraph_cache_hit"], "miss",
          counters["inductor"]["fxgraph_cache_miss"])
    """
)


def last_lines_of_two_runs(script, **env):
    """Runs script in two fresh processes sharing env; each one's last line."""
    env = dict(os.environ, **env)
    outs = []
    for _ in range(2):
        r = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, r.stderr[-3000:]
        outs.append(r.stdout.strip().splitlines()[-1])
    return outs


def test_fx_graph_cache_across_processes(tmp_path):
    outs = last_lines_of_two_runs(
        FX_CACHE_SCRIPT, TORCHINDUCTOR_CACHE_DIR=str(tmp_path), TORCHINDUCTOR_FX_GRAPH_CACHE="1"
    )
    assert outs[0] == "hit 0 miss 1", outs
    assert outs[1] == "hit 1 miss 0", outs


@pytest.mark.parametrize("transposed", [False, True])
def test_attention_and_matmuls_run_neuron_kernels(transposed):
    """Extern calls in a compiled graph (matmuls, fused attention) dispatch
    to the neuron kernels; outputs keep the layout the meta functions give,
    which the compiled graph asserts."""

    def f(x, w, q, k, v):
        y = x @ w
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.relu().sum() + a.sum() * 0.5, a

    torch.manual_seed(0)
    x, w = torch.randn(33, 70), torch.randn(70, 20)
    if transposed:  # (b, l, h, e) storage seen as (b, h, l, e), as HF models do
        q, k, v = (torch.randn(2, 17, 4, 8).transpose(1, 2) for _ in range(3))
    else:
        q, k, v = (torch.randn(2, 4, 17, 8) for _ in range(3))
    ins = [t.requires_grad_() for t in (x, w, q, k, v)]
    dins = [t.detach().to(DEV).requires_grad_() for t in ins]
    cf = torch.compile(f)
    out, a = cf(*dins)
    (out + a.square().sum()).backward()
    ref, ra = f(*ins)
    (ref + ra.square().sum()).backward()
    close(out, ref.detach(), atol=1e-4, rtol=1e-4)
    close(a, ra.detach(), atol=1e-5, rtol=1e-4)
    for d, r in zip(dins, ins):
        torch.testing.assert_close(d.grad.cpu(), r.grad, atol=1e-4, rtol=1e-4)
    with torch.profiler.profile(
        activities=[
            torch.profiler.ProfilerActivity.CPU,
            torch.profiler.ProfilerActivity.PrivateUse1,
        ]
    ) as prof:
        cf(*[t.detach() for t in dins])
        torch.neuron.synchronize()
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in names, sorted(names)
    assert any(n in names for n in ("aten::mm", "aten::addmm")), sorted(names)


def test_reduce_overhead_replays_inference_graphs_from_a_capture():
    def f(x, w):
        return torch.nn.functional.gelu(x @ w).softmax(-1) + x.sum()

    w = torch.randn(32, 32)
    wd = w.to(DEV)
    cf = torch.compile(f, mode="reduce-overhead")
    kept = []
    with torch.no_grad():
        for i in range(4):
            x = torch.randn(3, 32, generator=torch.Generator().manual_seed(i))
            out = cf(x.to(DEV), wd)
            kept.append((out, f(x, w)))
        with torch.profiler.profile(
            activities=[
                torch.profiler.ProfilerActivity.CPU,
                torch.profiler.ProfilerActivity.PrivateUse1,
            ]
        ) as prof:
            cf(x.to(DEV), wd)
            torch.neuron.synchronize()
        assert "graph_replay" in {e.name for e in prof.events()}
        # every output kept is its own (replays do not overwrite earlier ones)
        for out, expect in kept:
            close(out, expect, atol=1e-5, rtol=1e-4)
        # a new input shape: captured again, still right
        x = torch.randn(5, 32)
        close(cf(x.to(DEV), wd), f(x, w), atol=1e-5, rtol=1e-4)
        close(cf(x.to(DEV), wd), f(x, w), atol=1e-5, rtol=1e-4)
        # the graph with a symbolic size keys its captures by the size:
        # other sizes, back to one captured before, an input at an offset
        for rows in (7, 5, 7, 9, 5):
            x = torch.randn(rows + 2, 32, generator=torch.Generator().manual_seed(rows))
            close(cf(x.to(DEV)[2:], wd), f(x[2:], w), atol=1e-5, rtol=1e-4)


def test_reduce_overhead_mutated_inputs_keep_their_address():
    def step(cache, pos, v):
        cache.index_copy_(0, pos, v)
        return cache.sum(0)

    cache = torch.zeros(6, 4, device=DEV)
    ref = torch.zeros(6, 4)
    cf = torch.compile(step, mode="reduce-overhead")
    with torch.no_grad():
        for i in range(6):
            v = torch.full((1, 4), float(i + 1))
            pos = torch.tensor([i])
            out = cf(cache, pos.to(DEV), v.to(DEV))
            expect = step(ref, pos, v)
            close(out, expect)
    close(cache, ref)


def test_reduce_overhead_falls_back_with_a_warning_when_it_cannot_capture():
    import torch_neuronx._reduce_overhead as ro

    ro._warned.clear()
    lin = torch.nn.Linear(8, 8).to(DEV)
    x = torch.randn(4, 8)
    with pytest.warns(UserWarning, match="training graphs are not captured"):
        out = torch.compile(lambda t: lin(t).relu().sum(), mode="reduce-overhead")(x.to(DEV))
    out.backward()
    assert lin.weight.grad is not None

    def g(t):
        return torch.nn.functional.dropout(t, 0.5, training=True)

    cg = torch.compile(g, mode="reduce-overhead")
    with torch.no_grad(), pytest.warns(UserWarning, match="cannot be captured"):
        y = cg(torch.ones(20000, device=DEV))
        y = cg(torch.ones(20000, device=DEV))
    zero = (y.cpu() == 0).float().mean().item()
    assert 0.47 < zero < 0.53, zero


AOT_CACHE_SCRIPT = textwrap.dedent(
    """
    import torch
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    lin = torch.nn.Linear(12, 5)
    x = torch.randn(7, 12)
    ref = torch.nn.functional.gelu(lin(x)).sum()
    ref.backward()
    ref_grad = lin.weight.grad.clone()
    lin.weight.grad = None
    lin = lin.to("neuron")
    out = torch.compile(lambda t: torch.nn.functional.gelu(lin(t)).sum())(x.to("neuron"))
    out.backward()
    assert torch.allclose(out.detach().cpu(), ref.detach(), atol=1e-5)
    assert torch.allclose(lin.weight.grad.cpu(), ref_grad, atol=1e-5)
    print("hit", counters["aot_autograd"]["autograd_cache_hit"], "miss",
          counters["aot_autograd"]["autograd_cache_miss"])
    """
)


def test_aot_autograd_cache_across_processes(tmp_path):
    outs = last_lines_of_two_runs(
        AOT_CACHE_SCRIPT,
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path),
        TORCHINDUCTOR_FX_GRAPH_CACHE="1",
        TORCHINDUCTOR_AUTOGRAD_CACHE="1",
    )
    assert outs == ["hit 0 miss 1", "hit 1 miss 0"], outs


def test_op_without_kernel_falls_back_in_compiled_graph_as_in_eager():
    """mode has no neuron kernel and Inductor keeps it as a call to ATen:
    it runs through the CPU fallback, counted, with the eager results; in
    "error" mode it raises as eager does."""
    import torch_neuronx

    def f(x):
        return torch.mode(x * 2, 0)[0] + 1

    x = torch.randn(50)
    prev = torch_neuronx.get_fallback_mode()
    torch_neuronx.set_fallback_mode("silent")
    try:
        torch_neuronx.clear_op_tracking()
        out = torch.compile(f)(x.to(DEV))
        close(out, f(x))
        assert torch_neuronx.get_fallback_ops() == {"aten::mode": 1}
        torch._dynamo.reset()
        torch_neuronx.set_fallback_mode("error")
        with pytest.raises(NotImplementedError, match="mode"):
            torch.compile(f)(x.to(DEV))
    finally:
        torch_neuronx.set_fallback_mode(prev)


def test_random_ops_in_compiled_graph_follow_the_neuron_generator():
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.3, training=True))
    x = torch.ones(100_000, device=DEV)
    y = f(x).cpu()
    zero = (y == 0).float().mean().item()
    assert 0.29 < zero < 0.31, zero  # binomial sd 0.0015
    torch.testing.assert_close(y[y != 0].unique(), torch.tensor([1 / 0.7]))
    assert not torch.equal(y, f(x).cpu())  # fresh numbers each call
    torch.neuron.manual_seed(3)
    a = f(x).cpu()
    torch.neuron.manual_seed(3)
    assert torch.equal(a, f(x).cpu())


def test_graphs_on_another_device_and_across_devices():
    """Buffers are allocated on the current device inside the device guard
    the wrapper enters, so a graph on neuron:1 (neuron:0 current) and one
    that moves data between devices keep every tensor where it belongs."""
    if torch.neuron.device_count() < 2:
        pytest.fail("the default software NeuronCore model has several devices")
    assert torch.neuron.current_device() == 0

    def f(x):
        return (x.sin() * 2).sum(0) + x[0]

    def g(x, y):
        return (x * 2).to("neuron:1") + y.cos(), (y.exp()).to("neuron:0") - x

    x, y = torch.randn(8, 5), torch.randn(8, 5)
    out = torch.compile(f)(x.to("neuron:1"))
    assert out.device == torch.device("neuron:1")
    close(out, f(x))
    a, b = torch.compile(g)(x.to("neuron:0"), y.to("neuron:1"))
    assert a.device == torch.device("neuron:1") and b.device == torch.device("neuron:0")
    close(a, x * 2 + y.cos())
    close(b, y.exp() - x)
    assert torch.neuron.current_device() == 0


LATE_IMPORT_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch._inductor.compile_fx  # Inductor first, the backend after
    import torch._dynamo.device_interface as di
    import torch_neuronx
    assert di.get_interface_for_device("neuron").__name__ == "NeuronInterface"
    f = torch.compile(lambda e, i: (e[i] * 2).sum(-1))
    e, i = torch.randn(50, 8), torch.randint(0, 50, (4, 3))
    out = f(e.to("neuron"), i.to("neuron"))
    assert torch.allclose(out.cpu(), (e[i] * 2).sum(-1), atol=1e-5)
    print("ok")
    """
)


def test_backend_registers_when_inductor_was_imported_first():
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run(
        [sys.executable, "-c", LATE_IMPORT_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_dynamo_device_interface():
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("neuron")
    assert iface is get_interface_for_device(torch.device("neuron", 1))
    assert iface.is_available() and iface.device_count() == torch.neuron.device_count()
    assert iface.current_device() == torch.neuron.current_device()
    s = torch.neuron.Stream()
    with iface.stream(s):
        assert iface.current_stream() == s
        assert iface.get_raw_stream(0) == s.stream_id
    prev = iface.exchange_device(1)
    assert torch.neuron.current_device() == 1
    iface.exchange_device(prev)
    assert torch.neuron.current_device() == prev
    props = iface.Worker.get_device_properties("neuron:1")
    assert props.name == torch.neuron.get_device_properties(1).name
    assert iface.is_bf16_supported() and not iface.is_triton_capable()


def _kernel_libraries():
    """Paths of the generated kernel libraries behind the loaded wrappers."""
    from torch._inductor.codecache import PyCodeCache

    return {
        a._library._name
        for m in list(PyCodeCache.modules)
        for a in vars(m).values()
        if isinstance(a, functools.partial) and hasattr(a, "_library")
    }


@pytest.mark.parametrize("on_pool", [True, False])
def test_parallel_kernels_match_cpu_on_the_pool_and_on_libgomp(monkeypatch, on_pool):
    """Large enough for Inductor's parallel regions: per-thread reduction
    buffers, Welford, arg-reductions and single constructs. On the pool
    (default) the kernel libraries import no OpenMP symbol: their regions are
    the runtime's teams. A kernel with another construct keeps libgomp."""
    from torch._inductor.utils import fresh_cache

    import torch_neuronx._inductor as neuron_inductor

    if not on_pool:
        monkeypatch.setattr(neuron_inductor, "runs_on_pool", lambda src: False)

    def f(x):
        y = x.sin() * 2 + x
        v, m = torch.var_mean(y, 0)
        # argmax of the input: sin's last bit differs between Inductor and ATen
        return y.sum(), v, m, y.amax(-1), x.argmax(0), torch.softmax(y, -1)

    x = torch.randn(512, 4099)
    # fresh_cache: not a kernel built the other way (removed on exit).
    # Inductor writes no parallel region for one thread (a host or CI runner
    # with one CPU): ask for two, whatever this host has (a team never
    # exceeds the pool, so on one CPU the pool runs it as a team of one).
    with fresh_cache(), torch._inductor.config.patch({"cpp.threads": 2}):
        got = torch.compile(f)(x.to(DEV))
        libs = _kernel_libraries()
        imports = {
            path: subprocess.run(
                ["nm", "-D", "--undefined-only", path], capture_output=True, text=True, check=True
            ).stdout
            for path in libs
        }
    for g, e in zip(got, f(x)):
        torch.testing.assert_close(g.cpu(), e, atol=1e-3, rtol=1e-4)
    assert libs
    uses_libgomp = {p: "GOMP_" in n or "omp_get_" in n for p, n in imports.items()}
    # on the pool no library imports OpenMP; on libgomp the parallel ones do
    # (a kernel too small for a parallel region imports nothing either way)
    assert any(uses_libgomp.values()) != on_pool, uses_libgomp


def test_only_supported_openmp_constructs_run_on_the_pool():
    from torch_neuronx._inductor import runs_on_pool

    ok = """
    #pragma omp parallel num_threads(2)
    {
        int tid = omp_get_thread_num();
        #pragma omp for
        for (int i = 0; i < n; i++) {}
        #pragma omp for collapse(2) nowait
        for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) {}
        #pragma omp single
        {}
        #pragma omp barrier
    }
    #pragma omp parallel
    {}
    """
    assert runs_on_pool(ok)
    assert runs_on_pool("int x = 0;")  # no OpenMP at all
    for bad in (
        "#pragma omp for schedule(dynamic)",
        "#pragma omp critical",
        "#pragma omp task",
        "#pragma omp parallel for reduction(+:s)",
        "double t = omp_get_wtime();",
        "omp_set_num_threads(3);",
    ):
        assert not runs_on_pool(ok + bad), bad


def _ops_in(fn):
    from torch.profiler import profile

    with profile() as prof:
        fn()
    return {e.name for e in prof.events()}


@pytest.mark.parametrize("opt_cls", [torch.optim.AdamW, torch.optim.Adam])
def test_compiled_adam_step_runs_the_fused_kernel(opt_cls):
    """The rewrite to a hand-written kernel: a compiled foreach Adam/AdamW step
    on neuron runs the fused kernel (faster than the generated one,
    docs/benchmarks/compile.md) and matches CPU eager; eager neuron steps and
    compiled CPU steps keep foreach."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 4))
    runs = {  # name: (device, compiled)
        "cpu eager": ("cpu", False),
        "cpu compiled": ("cpu", True),
        "neuron compiled": (DEV, True),
        "neuron eager": (DEV, False),
    }
    models, steps = {}, {}
    for name, (dev, compiled) in runs.items():
        models[name] = copy.deepcopy(m).to(dev)
        step = opt_cls(models[name].parameters(), lr=1e-2, weight_decay=0.1).step
        steps[name] = torch.compile(step) if compiled else step
    fused = "aten::_fused_adamw_" if opt_cls is torch.optim.AdamW else "aten::_fused_adam_"
    x = torch.randn(8, 32)
    for i in range(3):
        for name, (dev, _) in runs.items():
            models[name].zero_grad()
            models[name](x.to(dev)).square().mean().backward()
            if i < 2:
                steps[name]()
                continue
            ops = _ops_in(steps[name])
            assert (fused in ops) == (name == "neuron compiled"), (name, sorted(ops))
    for name in runs:
        for a, b in zip(models["cpu eager"].parameters(), models[name].parameters()):
            torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)


def test_flattened_arg_reductions_of_permuted_inputs_match_cpu():
    """argmax/argmin over several dimensions of a non-contiguous input return
    the index in the tensor's logical order (the C++ generator's logical
    index, which CPU Inductor enables; it used to be the memory order)."""

    def f(x, y):
        return (
            x.t().argmax(),
            x.t().argmin(),
            y.permute(2, 0, 1).argmax(),
            y.transpose(0, 2).argmin(dim=None, keepdim=True),
            x.t().contiguous().t().argmax(),
        )

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(37, 53, generator=g), torch.randn(5, 7, 9, generator=g)
    got = torch.compile(f, fullgraph=True)(x.to(DEV), y.to(DEV))
    for a, e in zip(got, f(x, y)):
        assert a.shape == e.shape
        assert torch.equal(a.cpu(), e), (a, e)


def test_concatenation_and_padding_compile_as_on_cpu():
    """cat and right-padding take CPU Inductor's lowering (a ConcatKernel, no
    masked pointwise concatenation). The masked form failed to compile this
    graph (HF prophetnet's position embeddings: clamped cumsum positions
    feeding a cat) with a sympy error in Inductor's loop simplification."""
    import torch.nn.functional as F

    def f(w, x, n):
        mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
        pos = (torch.cumsum(mask, dim=1) * mask).clamp(0, 127)
        main = x + F.embedding(pos, w)
        pred = F.embedding(pos + 1, w)
        out = torch.cat([main, n[0] + pred, n[1] + pred], 1)
        return out, F.pad(out.sin(), (0, 3), value=0.5), torch.cat([x.cos(), x], 2)

    g = torch.Generator().manual_seed(0)
    args = (torch.randn(129, 16, generator=g), torch.randn(2, 8, 16, generator=g))
    args += (torch.randn(2, 16, generator=g),)
    got = torch.compile(f, fullgraph=True)(*(a.to(DEV) for a in args))
    for a, e in zip(got, f(*args)):
        torch.testing.assert_close(a.cpu(), e)


def test_pointwise_and_reduction_lowerings_match_cpu_inductor():
    """The CPU's lowering choices for numerics: division by a constant stays a
    division (x * (1/c) differs from eager by an ulp, and stays finite where
    c overflows fp32); a CPU scalar times a neuron tensor is a neuron tensor,
    as in eager; var takes CPU Inductor's two-pass form (bit-identical to it);
    scatter_reduce(sum) runs ATen's kernel, as on CPU."""

    def f(x, s, y, z, idx):
        out = torch.zeros(4, 100, device=x.device)
        return x / 3.0, y / 1e39, s * x + 1, x.var(-1), out.scatter_reduce(0, idx, z, "sum")

    g = torch.Generator().manual_seed(0)
    x, s, y = torch.randn(64, 100, generator=g), torch.tensor(2.0), torch.tensor([3e38, 1.0])
    z, idx = torch.randn(50, 100, generator=g), torch.randint(0, 4, (50, 100), generator=g)
    eager = f(x, s, y, z, idx)
    # two threads whatever the host has: CPU Inductor keeps scatter_reduce
    # (sum) generated for a single thread
    with torch._inductor.config.patch({"cpp.threads": 2}):
        cpu_inductor = torch.compile(f)(x, s, y, z, idx)
        torch._dynamo.reset()
        compiled = torch.compile(f)
        args = (x.to(DEV), s, y.to(DEV), z.to(DEV), idx.to(DEV))
        got = compiled(*args)
    for a, e, c in zip(got, eager, cpu_inductor):
        assert a.device.type == DEV
        torch.testing.assert_close(a.cpu(), e, rtol=1e-6, atol=1e-6)
        assert torch.equal(a.cpu(), c)
    assert torch.equal(got[0].cpu(), eager[0]) and torch.equal(got[1].cpu(), eager[1])
    assert "aten::scatter_reduce_" in _ops_in(lambda: compiled(*args))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_compiled_convolution_adds_its_bias_in_the_kernel(dtype):
    """A compiled convolution with a bias runs the neuron kernel with the bias
    (as on CPU), not the kernel then a separate add, which Inductor does for
    other devices: in bf16 that rounds twice (1 ulp off eager)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 8, 12, 12, generator=g), torch.randn(16, 8, 3, 3, generator=g)
    b = torch.randn(16, generator=g)
    args = [t.to(dtype).to(DEV) for t in (x, w, b)]

    def f(x, w, b):
        return F.conv2d(x, w, b, padding=1), F.conv_transpose2d(x, w.transpose(0, 1), b)

    for got, want in zip(torch.compile(f)(*args), f(*args)):
        assert torch.equal(got, want)
