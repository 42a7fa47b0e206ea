"""One training step (forward, backward, AdamW) of a small Llama-style decoder,
a ViT and a diffusion UNet on neuron: no op falls back to the CPU, and the
loss and every gradient match the same step on CPU."""

import copy

import pytest
import torch

import torch_neuronx

transformers = pytest.importorskip("transformers")  # installed by scripts/setup.sh
diffusers = pytest.importorskip("diffusers")


def llama():
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    return model, lambda m, dev: m(input_ids=ids.to(dev), labels=ids.to(dev)).loss


def vit():
    cfg = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=5,
    )
    model = transformers.ViTForImageClassification(cfg)
    g = torch.Generator().manual_seed(0)
    px, labels = torch.randn(2, 3, 32, 32, generator=g), torch.tensor([1, 4])
    return model, lambda m, dev: m(pixel_values=px.to(dev), labels=labels.to(dev)).loss


def unet():
    model = diffusers.UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    )
    g = torch.Generator().manual_seed(0)
    x, noise = torch.randn(2, 3, 16, 16, generator=g), torch.randn(2, 3, 16, 16, generator=g)
    t = torch.tensor([10, 500])

    def loss(m, dev):
        pred = m(x.to(dev), t.to(dev)).sample
        return torch.nn.functional.mse_loss(pred, noise.to(dev))

    return model, loss


@pytest.mark.parametrize("build", [llama, vit, unet], ids=["llama", "vit", "unet"])
def test_training_step_runs_natively_and_matches_cpu(build):
    torch.manual_seed(0)
    model, loss_fn = build()
    results = {}
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(model).to(dev).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        torch_neuronx.clear_op_tracking()
        loss = loss_fn(m, dev)
        loss.backward()
        grads = {n: p.grad.detach().cpu() for n, p in m.named_parameters() if p.grad is not None}
        opt.step()
        after = loss_fn(m, dev).detach().cpu()
        results[dev] = (loss.detach().cpu(), grads, after, torch_neuronx.get_fallback_ops())
    assert results["neuron"][3] == {}
    torch.testing.assert_close(results["neuron"][0], results["cpu"][0], rtol=1e-4, atol=1e-5)
    for name, g in results["cpu"][1].items():
        torch.testing.assert_close(
            results["neuron"][1][name],
            g,
            rtol=1e-3,
            atol=1e-5,
            msg=lambda m, name=name: f"{name}: {m}",
        )
    torch.testing.assert_close(results["neuron"][2], results["cpu"][2], rtol=1e-3, atol=1e-4)
