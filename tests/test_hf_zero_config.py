"""The Hugging Face libraries pick neuron with zero configuration: in each
test the user code names no device. Where a run can be repeated on CPU
(fp32, same seeds), the neuron results are compared with it."""

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


def test_trainer_bf16_picks_neuron():
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
    )
    assert args.device == torch.device("neuron:0")
    before = model.model.embed_tokens.weight.detach().clone()
    trainer = Trainer(model=model, args=args, train_dataset=ds)
    result = trainer.train()
    assert next(model.parameters()).device.type == "neuron"
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert not torch.equal(model.model.embed_tokens.weight.detach().cpu(), before)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 4


def test_accelerate_bf16_places_everything_on_neuron():
    from accelerate import Accelerator

    acc = Accelerator(mixed_precision="bf16")
    assert acc.device.type == "neuron"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randn(32, 2))
    dl = torch.utils.data.DataLoader(data, batch_size=8)
    seen = []
    model[0].register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    model, opt, dl = acc.prepare(model, opt, dl)
    losses = []
    for _ in range(5):
        epoch = []
        losses.append(epoch)
        for x, y in dl:
            assert x.device.type == "neuron" and y.device.type == "neuron"
            with acc.autocast():
                out = model(x)  # accelerate returns fp32 outputs
                loss = torch.nn.functional.mse_loss(out.float(), y)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            epoch.append(loss.item())
    assert all(p.device.type == "neuron" for p in model.parameters())
    assert seen and all(d == torch.bfloat16 for d in seen)  # inside: bf16 autocast on neuron
    assert sum(losses[-1]) < sum(losses[0])  # it learns


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


def test_trl_sft_trainer_default_config():
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = _char_tokenizer()
    model = tiny_llama(vocab=len(tok))
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
    )
    assert args.bf16  # TRL's default on accelerators
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"text": texts}),
        processing_class=tok,
    )
    assert trainer.args.device.type == "neuron"
    result = trainer.train()
    assert next(trainer.model.parameters()).device.type == "neuron"
    assert torch.isfinite(torch.tensor(result.training_loss))


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
