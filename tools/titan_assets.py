"""Makes the two local assets TorchTitan's Llama 3 debug configuration reads,
so that nothing is fetched at run time:

* a tokenizer directory (``tokenizer.json`` + ``tokenizer_config.json``), a
  byte-level BPE with at most 2048 ids (the debug model's vocabulary), trained
  here with the ``tokenizers`` library on the corpus below; BOS and EOS are
  ``<|begin_of_text|>`` / ``<|end_of_text|>`` as in Llama 3;
* a text dataset directory in the layout of TorchTitan's ``c4_test``
  (``load_dataset(path, split="train")`` over a JSON-lines file of
  ``{"text": ...}`` records).

The corpus is synthetic English generated from a fixed seed (a small grammar
over fixed word lists), so the files are the same on every machine and no
data set is downloaded. TorchTitan's own test assets live only in its source
repository, not in the ``torchtitan`` wheel.

Usage: python tools/titan_assets.py OUT_DIR  ->  OUT_DIR/tokenizer, OUT_DIR/c4_test
"""

import json
import os
import random
import sys

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
VOCAB_SIZE = 2000  # < 2048, the Llama 3 debug model's vocab_size

_SUBJECTS = [
    "the engineer",
    "a small model",
    "the compiler",
    "our runtime",
    "the scheduler",
    "every worker",
    "the allocator",
    "a tensor",
    "the device",
    "the kernel",
    "the network",
    "a student",
    "the optimizer",
    "the dataset",
    "each process",
    "the old library",
    "a new backend",
    "the test suite",
    "the cluster",
    "the team",
]
_VERBS = [
    "reads",
    "writes",
    "computes",
    "reduces",
    "copies",
    "schedules",
    "measures",
    "trains",
    "shards",
    "gathers",
    "checks",
    "builds",
    "loads",
    "saves",
    "streams",
    "splits",
    "merges",
    "compares",
    "updates",
    "launches",
]
_OBJECTS = [
    "the weights",
    "a batch of tokens",
    "the gradients",
    "every parameter",
    "the loss",
    "a long sequence",
    "the attention scores",
    "the memory pool",
    "two shards",
    "the checkpoint",
    "a random matrix",
    "the learning rate",
    "the embeddings",
    "the final layer",
    "the logits",
    "a block of memory",
    "the queue",
    "the results",
    "the cache",
    "the labels",
]
_ADVERBIALS = [
    "before the next step",
    "on every rank",
    "in a single pass",
    "without a copy",
    "after the barrier",
    "once per epoch",
    "in half precision",
    "at the end of the day",
    "on the host",
    "on the device",
    "in the background",
    "with great care",
    "as fast as it can",
    "for the first time",
    "in a fixed order",
    "every morning",
]
_CONNECTIVES = ["and then", "while", "because", "so that", "but", "after", "before"]


def _sentence(rng: random.Random) -> str:
    s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    if rng.random() < 0.6:
        s += f" {rng.choice(_ADVERBIALS)}"
    if rng.random() < 0.3:
        s += (
            f" {rng.choice(_CONNECTIVES)} {rng.choice(_SUBJECTS)} "
            f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
        )
    n = rng.randint(0, 9999)
    if rng.random() < 0.2:
        s += f" {n} times"
    return s[0].upper() + s[1:] + "."


def corpus(n_docs: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(4, 20))) for _ in range(n_docs)]


def make_tokenizer(out_dir: str, texts: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    assert tok.get_vocab_size() <= 2048, tok.get_vocab_size()
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    config = {
        "added_tokens_decoder": {
            str(tok.token_to_id(t)): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in (BOS, EOS)
        },
        "bos_token": BOS,
        "eos_token": EOS,
        "clean_up_tokenization_spaces": True,
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def make_dataset(out_dir: str, texts: list[str]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "data.json"), "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")


def make_assets(out: str) -> tuple[str, str]:
    """Returns (tokenizer_dir, dataset_dir)."""
    texts = corpus()
    tok_dir, data_dir = os.path.join(out, "tokenizer"), os.path.join(out, "c4_test")
    make_tokenizer(tok_dir, texts)
    make_dataset(data_dir, texts)
    return tok_dir, data_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(*make_assets(sys.argv[1]))
