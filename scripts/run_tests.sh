#!/usr/bin/env bash
# Sets up (idempotent) and runs the whole test suite: lint and format checks,
# the C runtime/kernel tests (plain, ASan+UBSan, TSan: once) and the PyTorch
# integration tests, twice:
# plain, then (less the OpInfo sample, the ISA re-runs and the model sweeps)
# with device memory closed to the host except through the HAL
# (TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1, the proof that nothing above the
# HAL bypasses it; docs/ARCHITECTURE.md, "The HAL").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The two-host test (tests/test_multihost.py) makes network namespaces with
# iproute2; as root, install it where it is missing (without root or the
# package, that test tells the hosts apart by TORCH_NEURONX_HOST_ID instead).
if ! command -v ip >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q iproute2 >/dev/null 2>&1 || echo "iproute2 not installed: the two-host test runs without namespaces"
fi
# Lint and format checks first: they take seconds (ruff: pyproject.toml;
# clang-format: .clang-format). `bash scripts/format.sh` applies them.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
git ls-files 'csrc/*.c' 'csrc/*.h' 'csrc/*.cpp' | xargs .venv/bin/clang-format --dry-run --Werror
# The C suites (plain, ASan+UBSan, TSan) run once, inside the first pytest
# run (tests/test_c_libraries.py, into build/c); the protected run leaves them
# out: they never read the protect setting (csrc/Makefile unexports it).
.venv/bin/python -m pytest -q --durations=20 tests "$@"
# The protected re-run leaves out the files that add run time but no host
# path of their own to device memory: the OpInfo sample and the ISA re-runs
# (ops through the same launch, copy and fallback paths the per-family files
# take) and the model sweeps (those ops again, many times over; generate
# loops under protection spend their time in mprotect). On a 2-core AVX2 host
# the two full runs came near CI's 90 minutes. test_hal_library.py runs its
# suites under protection already, through the test HAL library.
TORCH_NEURONX_PROTECT_DEVICE_MEMORY=1 exec .venv/bin/python -m pytest -q --durations=20 tests \
  --ignore=tests/test_opinfo.py --ignore=tests/test_isa_variants.py \
  --ignore=tests/test_zoo.py --ignore=tests/test_zoo_compile.py --ignore=tests/test_model_sweep.py \
  --ignore=tests/test_torchtitan.py --ignore=tests/test_torchtitan_moe.py --ignore=tests/test_compile_hf.py \
  --ignore=tests/test_hal_library.py --ignore=tests/test_c_libraries.py "$@"
