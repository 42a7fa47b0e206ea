"""Transformers' Trainer on a tiny Llama from a config, with no device or
backend configuration: under torchrun it picks neuron and DDP by itself
(`neuron`), or shards the model with FSDP2 (`fsdp2`: Trainer's own
`fsdp`/`fsdp_config` arguments, which hand the model to accelerate's
fully_shard); with `cpu` it trains the same global batch in one process on
CPU. Rank 0 saves the trained parameters (whole) and its log to argv[2]
(tests/test_launchers.py compares)."""

import sys

import torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from torch.utils.data import Dataset, SequentialSampler
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

# a native crash in a rank (an abort, a segfault) prints every thread's stack
torch._C._set_print_stack_traces_on_fatal_signal(True)


class Tokens(Dataset):
    def __init__(self, n=16, seq=12):
        g = torch.Generator().manual_seed(3)
        self.ids = torch.randint(0, 64, (n, seq), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class InOrder(Trainer):
    # the same samples in the same order in both runs (the data-parallel run
    # shards each global batch between the ranks)
    def _get_train_sampler(self, *args, **kwargs):
        return SequentialSampler(self.train_dataset)


def main(mode, out):
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    model = LlamaForCausalLM(cfg)
    cpu = mode == "cpu"
    fsdp = {}
    if mode == "fsdp2":
        # transformers 5.x: fsdp=True and fsdp_config["version"] = 2 (FSDP2, its
        # default); each LlamaDecoderLayer its own FSDP unit (accelerate also
        # shards the embedding and the tail), parameters resharded after forward
        fsdp = dict(
            fsdp=True,
            fsdp_config={
                "version": 2,
                "reshard_after_forward": True,
                "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"],
                "state_dict_type": "FULL_STATE_DICT",
            },
        )
    args = TrainingArguments(
        output_dir=out + ".run",
        per_device_train_batch_size=4 if cpu else 2,  # global batch 4 either way
        max_steps=3,
        learning_rate=1e-2,
        lr_scheduler_type="constant",
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=cpu,
        dataloader_num_workers=0,
        seed=0,
        **fsdp,
    )
    trainer = InOrder(model=model, args=args, train_dataset=Tokens())
    trainer.train()
    params, sharded = {}, {}
    for k, v in trainer.model.state_dict().items():
        if isinstance(v, DTensor):  # FSDP2: this rank's shard; every rank gathers
            sharded[k] = (tuple(v.to_local().shape), str(v.to_local().device), str(v.placements))
            v = v.full_tensor()
        params[k] = v.detach().cpu()
    if trainer.args.process_index == 0:
        info = {
            "device": str(trainer.args.device),
            "world": trainer.args.world_size,
            "parallel_mode": str(trainer.args.parallel_mode),
            "model": type(trainer.model_wrapped).__name__,
            "fsdp_units": sorted(
                name for name, m in trainer.model.named_modules() if isinstance(m, FSDPModule)
            ),
            "sharded": sharded,
        }
        log = [h for h in trainer.state.log_history if "loss" in h]
        losses = [float(h["loss"]) for h in log]
        grad_norms = [float(h["grad_norm"]) for h in log]  # before clipping (max_grad_norm=1)
        torch.save(
            {"info": info, "params": params, "losses": losses, "grad_norms": grad_norms}, out
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
