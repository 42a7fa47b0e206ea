#!/usr/bin/env bash
# Sets up (idempotent) and runs the whole test suite: the C runtime/kernel
# tests (plain and ASan+UBSan) and the PyTorch integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
make -C csrc BUILD="$PWD/build/c" test
make -C csrc BUILD="$PWD/build/c" asan
make -C csrc BUILD="$PWD/build/c" tsan
exec .venv/bin/python -m pytest -q tests "$@"
