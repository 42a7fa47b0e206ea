"""The Hugging Face libraries pick neuron with zero configuration: in each
test the user code names no device. Each run is compared with the same run
on CPU (same seeds, model and data; the CPU run names its device): the
training runs (Trainer, Accelerate, TRL) step by step, in bf16 as they run on
neuron."""

import copy

import pytest
import torch

import torch_neuronx

transformers = pytest.importorskip("transformers")  # installed by scripts/setup.sh

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    torch_neuronx.set_fallback_mode("silent")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_DISABLED", "true")
    yield
    torch_neuronx.set_fallback_mode("warn")


def tiny_llama(seed=0, vocab=64):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    return LlamaForCausalLM(cfg)


def test_library_detection():
    from accelerate.utils import is_neuron_available
    from diffusers.utils import is_torch_neuronx_available
    from transformers.utils import is_torch_neuron_available

    assert is_torch_neuron_available(check_device=True)
    assert is_neuron_available(check_device=True)
    assert is_torch_neuronx_available()


def logged(trainer, key):
    """One value per optimizer step from the trainer's log (logging_steps=1)."""
    return [h[key] for h in trainer.state.log_history if key in h and "train_loss" not in h]


def params_of(model):
    return {k: v.detach().float().cpu().clone() for k, v in model.named_parameters()}


def assert_same_training(neuron, cpu, steps, loss_atol, grad_norm_rtol, update_rtol):
    """Two runs of the same steps (bf16 autocast on both devices) from the
    same initial parameters: each step's loss and gradient norm as CPU's
    within bf16 noise (the Trainer run in fp32 agrees to 1e-6), and each
    parameter's total update within update_rtol of CPU's in norm. bf16 makes
    Adam's first steps flip the sign of some near-zero-gradient elements
    (updates of +-lr), so the updates are compared in norm, not element by
    element; an update of the wrong direction or size is off by about its
    own norm, and Adam hides a gradient's scale, which the norms show."""
    assert len(neuron["loss"]) == len(cpu["loss"]) == steps
    for what, tol in (
        ("loss", dict(rtol=0, atol=loss_atol)),
        ("grad_norm", dict(rtol=grad_norm_rtol, atol=0)),
    ):
        torch.testing.assert_close(
            torch.tensor(neuron[what]),
            torch.tensor(cpu[what]),
            msg=lambda m, what=what: f"{what} per step: {m}",
            **tol,
        )
    before = neuron["before"]
    assert before.keys() == cpu["before"].keys()
    for k in before:
        assert torch.equal(before[k], cpu["before"][k]), k  # the same start
        un, uc = neuron["after"][k] - before[k], cpu["after"][k] - before[k]
        assert uc.norm() > 0, k  # every parameter trained
        rel = float((un - uc).norm() / uc.norm())
        assert rel < update_rtol, (k, rel)


def _trainer_run(on_cpu):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    model = tiny_llama()
    ids = torch.randint(3, 64, (16, 16), generator=torch.Generator().manual_seed(0))
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    args = TrainingArguments(
        output_dir="out",
        per_device_train_batch_size=4,
        max_steps=4,
        bf16=True,
        learning_rate=1e-2,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        **({"use_cpu": True} if on_cpu else {}),  # the oracle names its device
    )
    if not on_cpu:
        assert args.device == torch.device("neuron:0")
    before = params_of(model)
    trainer = Trainer(model=model, args=args, train_dataset=ds)
    trainer.train()
    dev = next(model.parameters()).device.type
    assert dev == ("cpu" if on_cpu else "neuron")
    return {
        "loss": logged(trainer, "loss"),
        "grad_norm": logged(trainer, "grad_norm"),
        "before": before,
        "after": params_of(model),
    }


def test_trainer_bf16_picks_neuron_and_matches_cpu():
    """Trainer with bf16=True and no device: neuron; its 4 steps as the same
    Trainer run on CPU (bf16 autocast there too, same seeds and data order)."""
    neuron = _trainer_run(on_cpu=False)
    cpu = _trainer_run(on_cpu=True)
    # measured: losses 6e-4 apart, gradient norms 1.4%, updates 8% (in norm)
    assert_same_training(
        neuron, cpu, steps=4, loss_atol=2e-3, grad_norm_rtol=3e-2, update_rtol=0.15
    )


def _accelerate_run(on_cpu):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)  # a fresh device choice
    try:
        acc = Accelerator(mixed_precision="bf16", **({"cpu": True} if on_cpu else {}))
        assert acc.device.type == ("cpu" if on_cpu else "neuron")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        before = params_of(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        data = torch.utils.data.TensorDataset(
            torch.randn(32, 8, generator=torch.Generator().manual_seed(1)),
            torch.randn(32, 2, generator=torch.Generator().manual_seed(2)),
        )
        dl = torch.utils.data.DataLoader(data, batch_size=8)
        seen = []
        model[0].register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
        model, opt, dl = acc.prepare(model, opt, dl)
        losses, grad_norms = [], []
        for _ in range(5):
            for x, y in dl:
                assert x.device.type == y.device.type == acc.device.type
                with acc.autocast():
                    out = model(x)  # accelerate returns fp32 outputs
                    loss = torch.nn.functional.mse_loss(out.float(), y)
                acc.backward(loss)
                grad_norms.append(
                    float(sum(p.grad.float().pow(2).sum() for p in model.parameters()) ** 0.5)
                )
                opt.step()
                opt.zero_grad()
                losses.append(loss.item())
        assert all(p.device.type == acc.device.type for p in model.parameters())
        assert seen and all(d == torch.bfloat16 for d in seen)  # inside: bf16 autocast
        return {
            "loss": losses,
            "grad_norm": grad_norms,
            "before": before,
            "after": params_of(model),
        }
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_accelerate_bf16_places_everything_on_neuron_and_matches_cpu():
    """Accelerator(mixed_precision="bf16") with no device: everything on
    neuron; its 20 steps as Accelerator(cpu=True) gives on CPU."""
    neuron = _accelerate_run(on_cpu=False)
    cpu = _accelerate_run(on_cpu=True)
    # measured: losses, gradient norms and updates agree to 2e-7
    assert_same_training(
        neuron, cpu, steps=20, loss_atol=1e-4, grad_norm_rtol=1e-3, update_rtol=1e-2
    )


def _lora_run(device):
    from peft import LoraConfig, get_peft_model

    base = tiny_llama(seed=0)
    torch.manual_seed(1)
    model = get_peft_model(
        base,
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    model.to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        ids = torch.randint(3, 64, (2, 12), generator=g).to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    merged = model.merge_and_unload()
    probe = torch.randint(3, 64, (2, 12), generator=torch.Generator().manual_seed(3)).to(device)
    with torch.no_grad():
        return merged(input_ids=probe).logits.cpu(), loss.item(), next(merged.parameters()).device


def test_peft_lora_train_merge_matches_cpu():
    torch_neuronx.clear_op_tracking()
    cpu_logits, cpu_loss, _ = _lora_run("cpu")
    # the only device-specific line is the one PEFT users write anyway
    dev = "neuron" if torch.neuron.is_available() else "cpu"
    n_logits, n_loss, n_dev = _lora_run(dev)
    assert n_dev.type == "neuron"
    torch.testing.assert_close(n_logits, cpu_logits, rtol=1e-4, atol=1e-4)
    assert abs(n_loss - cpu_loss) < 1e-4


def _char_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)]
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({c: i + 4 for i, c in enumerate(chars)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )


def _sft_run(on_cpu):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = _char_tokenizer()
    model = tiny_llama(vocab=len(tok))
    before = params_of(model)
    texts = [
        "the keeper lit the lamp",
        "gulls on the ledge",
        "wind from the west",
        "two trawlers and a cargo ship",
        "storm in the night",
        "one boat brought in",
    ] * 2
    args = SFTConfig(
        output_dir="sft",
        max_steps=3,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        max_length=32,
        # the oracle names its device, and bf16 (TRL's default on accelerators)
        **({"use_cpu": True, "bf16": True} if on_cpu else {}),
    )
    assert args.bf16
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"text": texts}),
        processing_class=tok,
    )
    assert trainer.args.device.type == ("cpu" if on_cpu else "neuron")
    trainer.train()
    assert next(trainer.model.parameters()).device.type == trainer.args.device.type
    return {
        "loss": logged(trainer, "loss"),
        "grad_norm": logged(trainer, "grad_norm"),
        "before": before,
        "after": params_of(trainer.model),
    }


def test_trl_sft_trainer_default_config_matches_cpu():
    """SFTTrainer with TRL's defaults (bf16 on accelerators) and no device:
    neuron; its 3 steps as the same run on CPU."""
    neuron = _sft_run(on_cpu=False)
    cpu = _sft_run(on_cpu=True)
    # measured: losses 8e-5 apart, gradient norms 1.2e-4, updates 9% (in norm)
    assert_same_training(
        neuron, cpu, steps=3, loss_atol=1e-3, grad_norm_rtol=2e-3, update_rtol=0.15
    )


def _unet():
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    return UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
    )


def test_diffusers_unet2d_pipeline_matches_cpu():
    from diffusers import DDPMPipeline, DDPMScheduler

    unet = _unet()
    out = {}
    for dev in ("cpu", "neuron"):
        pipe = DDPMPipeline(
            unet=copy.deepcopy(unet), scheduler=DDPMScheduler(num_train_timesteps=10)
        )
        pipe.to(dev)
        out[dev] = pipe(
            num_inference_steps=3, output_type="np", generator=torch.Generator().manual_seed(0)
        ).images
    assert abs(out["cpu"] - out["neuron"]).max() < 1e-4


def test_diffusers_dit_pipeline_matches_cpu():
    from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline, DiTTransformer2DModel

    torch.manual_seed(0)
    transformer = DiTTransformer2DModel(
        sample_size=8,
        patch_size=2,
        in_channels=4,
        out_channels=8,
        num_layers=2,
        num_attention_heads=2,
        attention_head_dim=8,
        num_embeds_ada_norm=1000,
        norm_type="ada_norm_zero",
    )  # null class = 1000
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(8, 8),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        norm_num_groups=4,
        sample_size=16,
    )
    # eval mode, as from_pretrained leaves them: in training mode the class
    # embedder drops labels at random, and neuron's RNG is not the CPU's
    transformer.eval()
    vae.eval()
    out = {}
    for dev in ("cpu", "neuron"):
        pipe = DiTPipeline(
            transformer=copy.deepcopy(transformer),
            vae=copy.deepcopy(vae),
            scheduler=DDIMScheduler(num_train_timesteps=10),
        )
        pipe.to(dev)
        out[dev] = pipe(
            class_labels=[1, 3],
            num_inference_steps=2,
            guidance_scale=1.5,
            generator=torch.Generator().manual_seed(0),
            output_type="np",
        ).images
    assert out["cpu"].shape == (2, 16, 16, 3)
    assert abs(out["cpu"] - out["neuron"]).max() < 1e-4
