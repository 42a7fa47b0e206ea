#!/usr/bin/env bash
# The fast unit tests (under two minutes on a 2-core machine): the C tests
# of the runtime, kernel and collective libraries, then the per-op Python
# tests of the kernels against PyTorch CPU (tests/test_<csrc/aten file>.py
# and the other family files), kernel edge cases included. Not here:
# the model sweeps (HF, zoo, TorchTitan), the distributed and multi-process
# tests, OpInfo, the ISA re-runs (test_isa_variants.py), lint and the
# sanitizer builds; those are scripts/run_tests.sh. Arguments go to pytest
# (e.g. -k softmax, -x).
# Needs a built extension (scripts/setup.sh); see docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s -C csrc BUILD="$PWD/build/c" -j"${JOBS:-1}" test
.venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/test_unary_ops.py \
  tests/test_binary_ops.py \
  tests/test_reduction_ops.py \
  tests/test_norm_ops.py \
  tests/test_loss_ops.py \
  tests/test_linalg_ops.py \
  tests/test_index_ops.py \
  tests/test_sort_ops.py \
  tests/test_tensor_ops.py \
  tests/test_fuzz.py \
  tests/test_training_ops.py \
  tests/test_attention.py \
  tests/test_varlen_attention.py \
  tests/test_grouped_mm.py \
  tests/test_lowp_ops.py \
  tests/test_conv.py \
  tests/test_pooling.py \
  tests/test_copies.py \
  tests/test_optim.py \
  tests/test_autograd.py \
  tests/test_rng.py \
  "$@"
