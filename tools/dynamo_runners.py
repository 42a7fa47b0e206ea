"""PyTorch's own model runners, benchmarks/dynamo/huggingface.py and
timm_models.py, on the neuron device, unchanged, with nothing downloaded.

    python tools/dynamo_runners.py huggingface --runners PYTORCH/benchmarks/dynamo \\
        --accuracy --inference --backend eager --devices neuron --output OUT.csv
    python tools/dynamo_runners.py timm_models --runners ... --accuracy --training \\
        --backend neuron --devices neuron --only resnet50 ...

Everything after the suite name and --runners is the runner's own command
line (common.py: --accuracy/--performance, --inference/--training,
--backend eager|aot_eager|neuron|..., --only, -k, --batch-size, --output,
--total-partitions/--partition-id). The runner re-launches itself once per
model (sys.executable + sys.argv): the suite and runner directory travel to
those children in the environment (TORCH_NEURONX_RUNNER_SUITE,
TORCH_NEURONX_RUNNER_DIR).

The runners come from a PyTorch source tree (this project does not carry
them). Where they would download, this builds from configs with random
weights instead, as the rest of the project does:
- timm_models.py creates every model with pretrained=True: here with
  pretrained=False (the same architecture, random weights);
- huggingface.py fetches five configs from the model hub at import
  (EXTRA_MODELS): here the published sizes of those configs, built locally;
  the LLM entries (names with a '/') load weights and tokenizers from the hub
  and are left out (pass -x '/' or they fail as any offline run would).
Nothing about devices is patched: the runners already accept any device name
(torch.get_device_module for synchronize and empty_cache,
torch.accelerator for the default device); what they still key to CUDA
names is written up in docs/upstream/dynamo-benchmark-runners.md.

timm, torchvision's Python parts and scipy (common.py imports it) come from
build/sweep-site (requirements-models.txt), set up as the model sweep does.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = ("huggingface", "timm_models")
ENV_SUITE, ENV_DIR = "TORCH_NEURONX_RUNNER_SUITE", "TORCH_NEURONX_RUNNER_DIR"


class RunnerError(Exception):
    pass


def _split_argv(argv):
    """(suite, runner directory, the runner's own arguments). The first call
    names them; the runner's per-model children find them in the
    environment."""
    args = list(argv)
    suite = os.environ.get(ENV_SUITE)
    rdir = os.environ.get(ENV_DIR)
    if args and args[0] in SUITES:
        suite = args.pop(0)
    elif args and not args[0].startswith("-"):
        raise RunnerError(f"unknown suite {args[0]!r}: choose from {', '.join(SUITES)}")
    if "--runners" in args:
        i = args.index("--runners")
        if i + 1 >= len(args):
            raise RunnerError("--runners needs a directory (a PyTorch tree's benchmarks/dynamo)")
        rdir = args[i + 1]
        del args[i : i + 2]
    if suite is None:
        raise RunnerError(f"name a suite first: {' or '.join(SUITES)}")
    if rdir is None:
        raise RunnerError("pass --runners DIR (a PyTorch source tree's benchmarks/dynamo)")
    rdir = os.path.abspath(rdir)
    if not os.path.isfile(os.path.join(rdir, f"{suite}.py")) or not os.path.isfile(
        os.path.join(rdir, "common.py")
    ):
        raise RunnerError(f"{rdir} has no {suite}.py and common.py (benchmarks/dynamo of PyTorch)")
    return suite, rdir, args


# The five configs huggingface.py's EXTRA_MODELS reads from the hub at
# import, by their published sizes.
def _extra_configs():
    import transformers as t

    return {
        "allenai/longformer-base-4096": lambda: t.LongformerConfig(
            max_position_embeddings=4098, attention_window=512, type_vocab_size=1
        ),
        "t5-small": lambda: t.T5Config(
            d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8, vocab_size=32128
        ),
        "distilgpt2": lambda: t.GPT2Config(n_layer=6),
        "google/fnet-base": lambda: t.FNetConfig(),
        "YituTech/conv-bert-base": lambda: t.ConvBertConfig(),
    }


def _offline_hf():
    import transformers as t

    extra = _extra_configs()
    original = t.AutoConfig.from_pretrained.__func__

    def from_pretrained(cls, name, *args, **kwargs):
        if name in extra:
            return extra[name]()
        return original(cls, name, *args, **kwargs)

    t.AutoConfig.from_pretrained = classmethod(from_pretrained)


def _offline_timm(module):
    create = module.create_model

    def create_model(*args, **kwargs):
        kwargs["pretrained"] = False  # random weights: nothing to download
        return create(*args, **kwargs)

    module.create_model = create_model


def main(argv=None):
    try:
        suite, rdir, rest = _split_argv(sys.argv[1:] if argv is None else argv)
    except RunnerError as e:
        print(f"dynamo_runners: {e}", file=sys.stderr)
        return 2
    os.environ[ENV_SUITE], os.environ[ENV_DIR] = suite, rdir
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import model_sweep  # the sweep's setup of build/sweep-site (timm, torchvision, scipy)

    model_sweep._need("timm" if suite == "timm_models" else "transformers")
    sys.path.insert(0, rdir)
    if suite == "huggingface":
        _offline_hf()
    import importlib

    module = importlib.import_module(suite)
    if suite == "timm_models":
        _offline_timm(module)
    # the runner parses sys.argv and re-launches [sys.executable] + sys.argv
    # per model: this script, the runner's arguments, --only=<model>
    sys.argv = [os.path.abspath(__file__)] + rest
    (module.huggingface_main if suite == "huggingface" else module.timm_main)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
