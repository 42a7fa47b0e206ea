#!/usr/bin/env bash
# Applies the project's formatters (the test command checks them):
# ruff for the Python, clang-format (.clang-format) for csrc.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check --fix .
.venv/bin/ruff format .
git ls-files 'csrc/*.c' 'csrc/*.h' 'csrc/*.cpp' | xargs .venv/bin/clang-format -i
