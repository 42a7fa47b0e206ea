#!/usr/bin/env bash
# Sets up .venv with torch 2.13.0 (CPU) and builds torch-neuronx into it.
# Idempotent: safe to rerun; reinstalls only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python

# torch is pinned: any other request would fetch a multi-GB CUDA build.
if ! "$VPY" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  "$VPY" -m pip install --quiet --upgrade pip
  "$VPY" -m pip install --quiet torch==2.13.0
fi
"$VPY" -m pip install --quiet -r requirements-dev.txt -r requirements-hf.txt
# TorchTitan and its run-time needs, pinned and without dependency resolution
# (its metadata would otherwise pull another torch): requirements-torchtitan.txt
"$VPY" -m pip install --quiet --no-deps -r requirements-torchtitan.txt
# timm and torchvision for the model sweep, without dependency resolution
# (torchvision pins a torch build of its own), into a directory of their own
# that only the sweep puts on its path: torchvision's C extension does not
# load against this torch, and Transformers imports torchvision wherever it
# is importable (requirements-models.txt).
"$VPY" -m pip install --quiet --no-deps --upgrade --target build/sweep-site -r requirements-models.txt

# The extension builds against the installed torch (no build isolation).
TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=${MAX_JOBS:-$(nproc)} "$VPY" -m pip install --quiet --no-build-isolation --no-deps -e .
"$VPY" -c 'import torch; assert torch.neuron.is_available(); print("torch-neuronx ready:", torch.neuron.device_count(), "neuron devices")'
