"""Transformers' Trainer with torch_compile=True picks the "neuron" Dynamo
backend by itself; its losses match the same run eagerly on the CPU."""

import copy

import torch


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(cfg)


def train(model, tmp_path, **kwargs):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    ids = torch.randint(3, 64, (12, 16), generator=torch.Generator().manual_seed(0))
    ds = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        max_steps=3,
        learning_rate=1e-2,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        seed=0,
        data_seed=0,
        **kwargs,
    )
    trainer = Trainer(model=model, args=args, train_dataset=ds)
    trainer.train()
    return args, [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_trainer_torch_compile_uses_neuron_backend_and_matches_cpu(tmp_path):
    import torch._dynamo

    torch._dynamo.reset()
    model = tiny_llama()
    ref = copy.deepcopy(model)
    args, losses = train(model, tmp_path / "neuron", torch_compile=True)
    assert args.device.type == "neuron"
    assert args.torch_compile_backend == "neuron"
    _, ref_losses = train(ref, tmp_path / "cpu", use_cpu=True)
    assert len(losses) == len(ref_losses) == 3
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), atol=2e-3, rtol=2e-3)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), atol=2e-3, rtol=2e-3)
    torch._dynamo.reset()
