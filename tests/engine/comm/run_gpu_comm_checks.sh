#!/usr/bin/env bash
# Runs the communicator tests on a GPU machine (a missing GPU fails them) from
# binaries built elsewhere, then a memcheck pass over the in-process ones.
#
#   bash tests/engine/comm/run_gpu_comm_checks.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds sextant_comm_tests, sextant_nccl_tests and (when built)
# sextant_tensor_parallel_tests; OUT_DIR gets comm_tests.txt, nccl_tests.txt,
# tensor_parallel_tests.txt and memcheck.txt.
set -uo pipefail
bin=${1:?usage: run_gpu_comm_checks.sh BIN_DIR OUT_DIR}
out=${2:?usage: run_gpu_comm_checks.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

# libnccl.so.2: the toolkit's, else the one PyTorch's wheel (nvidia-nccl-cu13)
# brings; the GPU machines have only the latter (seen 2026-11-23).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ldd "$bin/sextant_nccl_tests" | grep -q "not found"; then
  lib=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -n 1)
  [[ -n "$lib" ]] && export LD_LIBRARY_PATH="$(dirname "$lib"):$LD_LIBRARY_PATH"
  echo "libnccl from: ${lib:-not found}"
fi

status=0
for t in sextant_comm_tests sextant_nccl_tests sextant_tensor_parallel_tests; do
  [[ -x "$bin/$t" ]] || { echo "$t: not in $bin, skipped"; continue; }
  SEXTANT_REQUIRE_GPU=1 "$bin/$t" >"$out/${t#sextant_}.txt" 2>&1
  rc=$?
  [[ $rc -ne 0 ]] && status=$rc
  echo "$t exit code $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/${t#sextant_}.txt" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|rror' "$out/${t#sextant_}.txt" | head -n 20
done
if command -v compute-sanitizer >/dev/null; then
  timeout 80 compute-sanitizer --tool memcheck --print-limit 20 "$bin/sextant_comm_tests" \
    --gtest_brief=1 >"$out/memcheck.txt" 2>&1
  echo "memcheck exit code: $? (124: stopped at its 80 s limit)"
  grep -E "ERROR SUMMARY|Invalid|out of bounds" "$out/memcheck.txt" | head -n 10
fi
exit "$status"
