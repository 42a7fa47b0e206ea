#!/usr/bin/env bash
# Sets up (idempotent) and runs the demo: a small transformer language model
# trained on device "neuron", then on CPU, with the losses compared.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/train_tiny_lm.py "$@"
