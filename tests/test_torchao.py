"""TorchAO on neuron, as its users call it: float8 training
(convert_to_float8_training, tensorwise and rowwise recipes) and int8
quantization (Int8WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig),
each with no CPU fallback, against the same TorchAO code on CPU; and the
routes torch_neuronx installs (torch_neuronx/_lowp.py) with the canary that
fails when torch stops hard-coding the devices of out_dtype's int8 mm."""

import copy
import importlib

import pytest
import torch

import torch_neuronx

torchao = pytest.importorskip("torchao")  # pinned in requirements-hf.txt

N = "neuron"


def _mlp(seed, dims=(64, 128, 32), bias=True):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(dims) - 1):
        layers += [torch.nn.Linear(dims[i], dims[i + 1], bias=bias), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


@pytest.fixture
def ops():
    torch_neuronx.clear_op_tracking()
    torch_neuronx.enable_op_tracking()
    yield lambda: set(torch_neuronx.get_executed_ops())
    torch_neuronx.disable_op_tracking()


# ---- the out_dtype route ---------------------------------------------------------


def test_torch_still_hard_codes_the_int_mm_devices():
    """Canary: torch's is_int_mm names CUDA and XPU only, so torch_neuronx
    wraps it (docs/upstream/int-mm-devices.md). When this fails, torch
    accepts other devices and the wrapper can go."""
    module = importlib.import_module("torch._higher_order_ops.out_dtype")
    original = module.is_int_mm.__wrapped__
    a = torch.zeros(4, 8, dtype=torch.int8, device=N)
    assert not original(torch.ops.aten.mm.default, torch.int32, (a, a.t()))
    assert module.is_int_mm(torch.ops.aten.mm.default, torch.int32, (a, a.t()))


def test_out_dtype_int8_mm_runs_int_mm(no_fallback, ops):
    from torch._higher_order_ops.out_dtype import out_dtype

    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (24, 40), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (40, 16), dtype=torch.int8, generator=g)
    got = out_dtype(torch.ops.aten.mm.default, torch.int32, a.to(N), b.to(N))
    assert torch.equal(got.cpu(), a.int() @ b.int())
    assert "aten::_int_mm" in ops()


# ---- int8 quantization -------------------------------------------------------------


def _quantized_pair(config, dtype=torch.bfloat16, seed=0):
    from torchao.quantization import quantize_

    cpu = _mlp(seed, dims=(256, 512, 128)).to(dtype)
    dev = copy.deepcopy(cpu).to(N)
    quantize_(cpu, config)
    quantize_(dev, config)
    return cpu, dev


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_int8_weight_only_runs_weight_int8pack_mm(dtype, no_fallback, ops):
    from torchao.quantization import Int8WeightOnlyConfig

    cpu, dev = _quantized_pair(Int8WeightOnlyConfig(), dtype)
    # the weights on neuron are the same int8 values as on CPU
    assert torch.equal(dev[0].weight.qdata.cpu(), cpu[0].weight.qdata)
    for rows in (1, 7):
        x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(rows)).to(dtype)
        ref = cpu(x)
        got = dev(x.to(N))
        assert got.dtype == dtype and got.device.type == N
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
        torch.testing.assert_close(got.cpu(), ref, atol=tol * ref.abs().max().item(), rtol=tol)
    executed = ops()
    assert "aten::_weight_int8pack_mm" in executed
    # no bf16 copy of the weight per call: torchao's path converts qdata.t()
    assert "aten::mm" not in executed


def test_int8_dynamic_activation_runs_int_mm(no_fallback, ops):
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig

    cpu, dev = _quantized_pair(Int8DynamicActivationInt8WeightConfig())
    x = torch.randn(9, 256, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    ref = cpu(x)
    got = dev(x.to(N))
    torch.testing.assert_close(got.cpu(), ref, atol=3e-2 * ref.abs().max().item(), rtol=3e-2)
    assert "aten::_int_mm" in ops()


# ---- float8 training --------------------------------------------------------------------


def _train(model, device, steps, lr=1e-2, seed=0):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    w_true = torch.randn(64, 32, generator=g) / 8
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 64, generator=g)
        y = torch.tanh(x @ w_true)
        x, y = x.to(device, torch.bfloat16), y.to(device, torch.bfloat16)
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_float8_training_tracks_bf16(recipe, no_fallback, ops):
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    steps = 150
    base = _mlp(3, dims=(64, 128, 32), bias=False).to(torch.bfloat16)
    bf16 = _train(copy.deepcopy(base).to(N), N, steps)
    f8_model = convert_to_float8_training(
        copy.deepcopy(base).to(N), config=Float8LinearConfig.from_recipe_name(recipe)
    )
    f8 = _train(f8_model, N, steps)
    assert "aten::_scaled_mm" in ops()
    # the same TorchAO float8 model on CPU: the first steps agree closely
    f8_cpu = _train(
        convert_to_float8_training(
            copy.deepcopy(base), config=Float8LinearConfig.from_recipe_name(recipe)
        ),
        "cpu",
        5,
    )
    for a, b in zip(f8[:5], f8_cpu):
        assert abs(a - b) <= 0.05 * abs(b) + 1e-4, (f8[:5], f8_cpu)
    # it learns, and its loss curve follows bf16's
    assert f8[-1] < 0.5 * f8[0]
    late_f8, late_bf16 = sum(f8[-20:]) / 20, sum(bf16[-20:]) / 20
    assert abs(late_f8 - late_bf16) <= 0.25 * late_bf16 + 1e-3, (late_f8, late_bf16)


# ---- Transformers' TorchAoConfig, end to end ------------------------------------------


def test_transformers_torchao_int8_weight_only_generates_like_cpu(tmp_path, no_fallback):
    """A Llama-style model (random weights) saved, then loaded with
    TorchAoConfig(Int8WeightOnlyConfig()) on CPU and on neuron: greedy
    decoding gives CPU's tokens; where a token differs, CPU's own top two
    logits at that step are closer than the two devices' logits differ
    (an accumulation-order tie), and the logits agree everywhere."""
    from torchao.quantization import Int8WeightOnlyConfig
    from transformers import LlamaConfig, LlamaForCausalLM, TorchAoConfig

    cfg = LlamaConfig(
        vocab_size=1000,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
        initializer_range=0.1,  # decisive logits: random weights at 0.02 give near ties
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tmp_path)
    q = TorchAoConfig(quant_type=Int8WeightOnlyConfig())
    models = {
        d: LlamaForCausalLM.from_pretrained(
            tmp_path, quantization_config=q, dtype=torch.bfloat16, device_map=d
        )
        for d in ("cpu", N)
    }
    assert models[N].device.type == N
    ids = torch.randint(0, 1000, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = {
            d: m.generate(ids.to(d), max_new_tokens=32, do_sample=False).cpu()
            for d, m in models.items()
        }
        # the logits along CPU's sequence, on both devices
        logits = {d: m(out["cpu"].to(d)).logits.float().cpu()[0] for d, m in models.items()}
    diff = (logits[N] - logits["cpu"]).abs().max().item()
    assert diff <= 0.05 * logits["cpu"].abs().max().item(), diff
    same = out[N][0] == out["cpu"][0]
    if not bool(same.all()):
        first = int((~same).nonzero()[0])
        top2 = logits["cpu"][first - 1].topk(2).values
        assert (top2[0] - top2[1]).item() <= 2 * diff, (first, top2, diff)
    else:
        assert torch.equal(out[N], out["cpu"])


def test_mx_inference_runs_scaled_mm_with_block_scales(no_fallback, ops):
    """TorchAO's MXFP8 inference (MXDynamicActivationMXWeightConfig, kernel
    AUTO: torch._scaled_mm with e8m0 block scales in cuBLAS's layout) on
    neuron against the same config's emulated kernel on CPU."""
    from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig
    from torchao.quantization import quantize_
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(256, 128, bias=False)).to(torch.bfloat16)
    cpu, dev = copy.deepcopy(base), copy.deepcopy(base).to(N)
    quantize_(cpu, MXDynamicActivationMXWeightConfig(kernel_preference=KernelPreference.EMULATED))
    quantize_(dev, MXDynamicActivationMXWeightConfig(kernel_preference=KernelPreference.AUTO))
    x = torch.randn(32, 256, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    ref = cpu(x)
    got = dev(x.to(N))
    torch.testing.assert_close(got.cpu(), ref, atol=1e-2 * ref.abs().max().item(), rtol=1e-2)
    assert "aten::_scaled_mm" in ops()
