#!/bin/bash
# The AMX path's checks, for a host that has AMX-BF16 (Intel Sapphire Rapids
# and later) and a C compiler but no torch: builds the C library into a
# scratch directory, runs the kernel tests with AMX, without it
# (TORCH_NEURONX_AMX=0) and under ASan+UBSan, then the bf16 GEMM benchmark on
# every core and on one. test_gemm prints which bf16 kernels it checked.
#   bash tools/amx_check.sh [build-dir]
set -euo pipefail
B=${1:-/tmp/tnk-amx}
cd "$(dirname "$0")/../csrc"
grep -m1 'model name' /proc/cpuinfo || true
grep -q amx_bf16 /proc/cpuinfo || echo "note: this CPU has no AMX-BF16; only the dot-product kernel runs"
make -s -j"$(nproc)" BUILD="$B" "$B/test_gemm" "$B/test_kernels" "$B/bench_gemm" "$B/asan/test_gemm"
"$B/test_kernels" | grep -E 'passed|FAIL'  # the configuration variants
"$B/test_gemm" | grep -E 'checked|passed|FAIL'
TORCH_NEURONX_AMX=0 "$B/test_gemm" | grep -E 'checked|passed|FAIL'
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$B/asan/test_gemm" | grep -E 'checked|passed|FAIL'
"$B/bench_gemm" 3
TORCH_NEURONX_NUM_THREADS=1 "$B/bench_gemm" 2
