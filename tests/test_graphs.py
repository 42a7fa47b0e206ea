"""torch.neuron.NeuronGraph / torch.neuron.graph: capture and replay, compared
with the same computation on the CPU; what cannot be captured raises."""

import pytest
import torch

DEV = "neuron"


def make_block(seed=0):
    g = torch.Generator().manual_seed(seed)
    w1, b1 = torch.randn(64, 96, generator=g), torch.randn(96, generator=g)
    w2 = torch.randn(96, 32, generator=g)
    return w1, b1, w2


def block(x, w1, b1, w2):
    h = torch.nn.functional.gelu(x @ w1 + b1)
    return torch.softmax(h @ w2, -1), h.sum()


def test_capture_records_and_replay_recomputes_from_static_inputs():
    params = make_block()
    dparams = [p.to(DEV) for p in params]
    static_x = torch.zeros(5, 64, device=DEV)
    block(static_x, *dparams)  # warm-up outside the capture
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        static_out, static_sum = block(static_x, *dparams)
    assert g.num_tasks() >= 6
    for seed in range(3):
        x = torch.randn(5, 64, generator=torch.Generator().manual_seed(10 + seed))
        static_x.copy_(x)
        g.replay()
        out, s = block(x, *params)
        torch.testing.assert_close(static_out.cpu(), out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(static_sum.cpu(), s, atol=1e-3, rtol=1e-5)


def test_capture_does_not_run_the_work_and_replay_follows_stream_order():
    x = torch.ones(1000, device=DEV)
    y = torch.zeros(1000, device=DEV)
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        y.add_(x * 2)
    torch.neuron.synchronize()
    assert torch.equal(y.cpu(), torch.zeros(1000))  # captured, not run
    src = torch.full((1000,), 3.0, device=DEV)
    torch.neuron._sleep(200_000_000)
    x.copy_(src)  # queued behind the sleep; the replay must see it
    g.replay()
    g.replay()
    assert torch.equal(y.cpu(), torch.full((1000,), 12.0))


def test_compiled_code_and_c_kernels_can_be_captured(tmp_path, monkeypatch):
    import torch._dynamo

    import torch_neuronx.c_kernels as ck

    monkeypatch.setenv("TORCH_NEURONX_KERNEL_CACHE", str(tmp_path))
    torch._dynamo.reset()
    lib = ck.load_inline(
        "axpy_graph",
        "#include <stdint.h>\nvoid axpy(float a, const float *x, float *y, int64_t n)"
        " { for (int64_t i = 0; i < n; i++) y[i] += a * x[i]; }\n",
        {"axpy": ["float", "const float*", "float*", "int64_t"]},
    )
    f = torch.compile(lambda t: (t.sin() * 3).cumsum(0) + t.exp())
    static_x = torch.randn(300, device=DEV)
    acc = torch.zeros(300, device=DEV)
    f(static_x)  # compile outside the capture
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        out = f(static_x)
        lib.axpy(0.5, out, acc, 300)
    x = torch.randn(300)
    static_x.copy_(x.to(DEV))
    g.replay()
    g.replay()
    expect = (x.sin() * 3).cumsum(0) + x.exp()
    torch.testing.assert_close(out.cpu(), expect, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(acc.cpu(), expect, atol=1e-4, rtol=1e-5)  # 2 x 0.5
    torch._dynamo.reset()


def test_what_cannot_be_captured_raises_and_leaves_nothing_behind():
    x = torch.randn(10, device=DEV)
    for bad, match in (
        (lambda: (x * 2).sum().item(), "capturing a graph"),
        (lambda: torch.neuron.synchronize(), "capturing a graph"),
        (lambda: torch.rand(3, device=DEV), "random number generation"),
        (lambda: torch.neuron.current_stream().record_event(), "capturing a graph"),
    ):
        g = torch.neuron.NeuronGraph()
        with pytest.raises(RuntimeError, match=match):
            with torch.neuron.graph(g):
                bad()
        assert not torch.neuron.is_current_stream_capturing()
        with pytest.raises(RuntimeError, match="replay before a capture"):
            g.replay()
    # the device is usable afterwards
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)


def test_graphs_share_a_pool_and_outputs_survive_until_reset():
    a = torch.arange(16.0, device=DEV)
    g1, g2 = torch.neuron.NeuronGraph(), torch.neuron.NeuronGraph()
    with torch.neuron.graph(g1):
        o1 = a * 2
    with torch.neuron.graph(g2, pool=g1.pool()):
        o2 = o1 + 1
    assert g2.pool() is g1.pool()
    a.copy_(torch.full((16,), 5.0, device=DEV))
    g1.replay()
    g2.replay()
    assert torch.equal(o2.cpu(), torch.full((16,), 11.0))
    g1.reset()
    g2.reset()
    with pytest.raises(RuntimeError, match="replay before a capture"):
        g1.replay()


def test_empty_cache_keeps_a_live_graphs_memory():
    """The graph's intermediates were allocated and freed during capture:
    their blocks stay the graph's pool's (CUDA keeps a live private pool's
    blocks out of empty_cache). Releasing them unmapped memory the replay
    then wrote: a segmentation fault. Once the graph is gone, empty_cache
    returns its segments."""
    n = 4 << 20  # 16 MiB intermediates: whole segments of their own
    x = torch.randn(n, generator=torch.Generator().manual_seed(0))
    dx = x.to(DEV)
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        out = ((dx * 2).sin() * 3).cos()
    torch.neuron.synchronize()
    reserved = torch.neuron.memory_reserved()
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == reserved  # the pool's free blocks stayed
    filler = torch.empty(3 * n, device=DEV)  # takes any memory that was released
    filler.fill_(7.0)
    g.replay()
    torch.testing.assert_close(out.cpu(), ((x * 2).sin() * 3).cos())
    assert torch.all(filler.cpu() == 7.0)
    held = torch.neuron.memory_reserved()
    del g, out
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() < held


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_hf_llama_decode_step_captured_matches_cpu(dtype):
    """A Transformers Llama decoding with a static KV cache, its step (the
    forward, argmax, cache update and bookkeeping) captured once and
    replayed per token, as gpt-fast does with CUDA graphs: the logits of
    every step match CPU's eager loop (and in fp32 the tokens are equal)."""
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    cfg = LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="sdpa",
    )  # fmt: skip
    torch.manual_seed(0)
    base = LlamaForCausalLM(cfg).eval().to(dtype)
    prompt = torch.randint(0, 96, (1, 5), generator=torch.Generator().manual_seed(1))
    steps = 12
    runs = {}
    for dev in ("cpu", DEV):
        model = base.to(dev) if dev == "cpu" else LlamaForCausalLM(cfg).eval().to(dtype).to(dev)
        if dev != "cpu":
            model.load_state_dict(base.state_dict())
        cache = StaticCache(config=cfg, max_cache_len=5 + steps + 1)
        last = torch.zeros(1, 1, dtype=torch.long, device=dev)
        pos = torch.tensor([5], device=dev)
        logits_all = torch.zeros(steps, 96, dtype=dtype, device=dev)
        i = torch.zeros(1, dtype=torch.long, device=dev)

        @torch.no_grad()
        def step(model=model, cache=cache, last=last, pos=pos, logits_all=logits_all, i=i):
            logits = model(input_ids=last, past_key_values=cache, cache_position=pos).logits
            logits_all.index_copy_(0, i, logits[:, -1])
            last.copy_(logits[:, -1].argmax(-1, keepdim=True))
            pos.add_(1)
            i.add_(1)

        with torch.no_grad():
            first = model(
                input_ids=prompt.to(dev), past_key_values=cache,
                cache_position=torch.arange(5, device=dev),
            ).logits  # fmt: skip
        last.copy_(first[:, -1].argmax(-1, keepdim=True))
        if dev == "cpu":
            for _ in range(steps):
                step()
        else:
            step()  # warm-up, eagerly
            graph = torch.neuron.NeuronGraph()
            with torch.neuron.graph(graph):
                step()
            for _ in range(steps - 1):
                graph.replay()
        runs[dev] = logits_all.cpu()
    if dtype == torch.float32:
        torch.testing.assert_close(runs[DEV], runs["cpu"], atol=1e-4, rtol=1e-4)
        assert torch.equal(runs[DEV].argmax(-1), runs["cpu"].argmax(-1))
    else:  # bf16: the first steps agree before rounding differences compound
        torch.testing.assert_close(runs[DEV][:3], runs["cpu"][:3], atol=0.1, rtol=0.05)
