"""tools/dynamo_runners.py, the wrapper that runs PyTorch's benchmarks/dynamo
runners on neuron: its command line (bad input gets a message and exit 2,
not a traceback) and the local stand-ins for what the runners would
download. The runs themselves need a PyTorch source tree and hours: their
results are committed under docs/dynamo-runners/."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import dynamo_runners  # noqa: E402


def _run(*args, env=None):
    e = dict(os.environ)
    e.pop(dynamo_runners.ENV_SUITE, None)
    e.pop(dynamo_runners.ENV_DIR, None)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "dynamo_runners.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=e,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["torchbench", "--runners", "/tmp"], "unknown suite 'torchbench'"),
        (["--accuracy"], "name a suite first"),
        (["timm_models", "--accuracy"], "pass --runners DIR"),
        (["huggingface", "--runners"], "--runners needs a directory"),
        (["huggingface", "--runners", ROOT], "has no huggingface.py and common.py"),
    ],
)
def test_bad_command_lines_get_a_message(args, message):
    r = _run(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_children_find_suite_and_directory_in_the_environment(tmp_path):
    for name in ("common.py", "timm_models.py"):
        (tmp_path / name).write_text("")
    env = {dynamo_runners.ENV_SUITE: "timm_models", dynamo_runners.ENV_DIR: str(tmp_path)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        suite, rdir, rest = dynamo_runners._split_argv(["--accuracy", "--only=x"])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert (suite, rdir, rest) == ("timm_models", str(tmp_path), ["--accuracy", "--only=x"])


def test_hub_configs_are_built_locally_at_their_published_sizes():
    cfgs = {k: f() for k, f in dynamo_runners._extra_configs().items()}
    assert set(cfgs) == {
        "allenai/longformer-base-4096",
        "t5-small",
        "distilgpt2",
        "google/fnet-base",
        "YituTech/conv-bert-base",
    }
    t5 = cfgs["t5-small"]
    assert (t5.d_model, t5.num_layers, t5.num_heads) == (512, 6, 8)
    assert cfgs["distilgpt2"].n_layer == 6
    assert cfgs["allenai/longformer-base-4096"].max_position_embeddings == 4098
