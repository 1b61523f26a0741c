#!/usr/bin/env bash
# Runs the kernel tests (a missing GPU fails them), a memcheck pass over them,
# and the bandwidth benchmark on a GPU machine, from binaries built elsewhere.
#
#   bash tests/kernels/run_gpu_checks.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds sextant_kernel_tests and kernel_bandwidth_bench; OUT_DIR gets
# kernel_tests.txt, memcheck.txt and bench.txt. The benchmark's table is printed last.
set -uo pipefail
bin=${1:?usage: run_gpu_checks.sh BIN_DIR OUT_DIR}
out=${2:?usage: run_gpu_checks.sh BIN_DIR OUT_DIR}
mkdir -p "$out"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# cuBLASLt is linked dynamically (the toolkit has no static library); find it
# if the loader does not.
if ldd "$bin/sextant_kernel_tests" | grep -q "not found"; then
  lib=$(find /usr/local /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -n 1)
  [[ -n "$lib" ]] && export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "libcublasLt from: ${lib:-not found}"
fi

SEXTANT_REQUIRE_GPU=1 "$bin/sextant_kernel_tests" 2>&1 | tee "$out/kernel_tests.txt" | grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error' | head -n 80
tests_rc=${PIPESTATUS[0]}
echo "sextant_kernel_tests exit code: $tests_rc"

if command -v compute-sanitizer >/dev/null; then
  timeout 100 compute-sanitizer --tool memcheck --print-limit 20 \
    "$bin/sextant_kernel_tests" --gtest_brief=1 >"$out/memcheck.txt" 2>&1
  echo "memcheck exit code: $? (124: stopped at its 100 s limit)"
  grep -E "ERROR SUMMARY|Invalid|out of bounds" "$out/memcheck.txt" | head -n 10
fi

"$bin/kernel_bandwidth_bench" 2>&1 | tee "$out/bench.txt"
exit "$tests_rc"
