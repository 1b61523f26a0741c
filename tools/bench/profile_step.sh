#!/usr/bin/env bash
# Where a training step's GPU time goes, for the engine and for PyTorch, kernel
# by kernel (tools/bench/kernel_profile.cc through CUDA's injection hook), and
# the cuBLASLt products at the model's shapes (tests/bench/kernels/gemm_bench.cc).
#
#   bash tools/bench/profile_step.sh BIN_DIR OUT_DIR [MODEL] [MBS] [MODES]
#
# BIN_DIR holds sextant, gemm_bench and libsextant_kernel_profile.so; MODEL
# defaults to gpt-1.3b, MBS to 4, MODES (PyTorch set-ups, comma-separated) to
# bf16. Each profile keeps the last second of the run (the steady state);
# tables go to OUT_DIR and the top rows are printed.
set -uo pipefail
bin=${1:?usage: profile_step.sh BIN_DIR OUT_DIR [MODEL] [MBS] [MODES]}
out=${2:?usage: profile_step.sh BIN_DIR OUT_DIR [MODEL] [MBS] [MODES]}
model=${3:-gpt-1.3b}
mbs=${4:-4}
modes=${5:-bf16}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
profiler=$(realpath "$bin/libsextant_kernel_profile.so")
top=${PROFILE_TOP:-25}

echo "== cuBLASLt products ($model shapes are gemm_bench's defaults for gpt-1.3b)"
"$bin/gemm_bench" >"$out/gemm.txt" 2>&1
cat "$out/gemm.txt"

echo "== sextant run $model mbs=$mbs"
CUDA_INJECTION64_PATH=$profiler SEXTANT_PROFILE_LAST_S=1.0 SEXTANT_PROFILE_OUT="$out/profile_sextant.txt" \
  SEXTANT_PROFILE_TOP=60 "$bin/sextant" --configs configs run --model "$model" --layout "mbs=$mbs,gbs=$mbs" \
  --steps 14 >"$out/sextant_run.txt" 2>&1
echo "exit code $?; $(grep -E '^[0-9]+ steps' "$out/sextant_run.txt")"
head -n "$top" "$out/profile_sextant.txt"; tail -n 2 "$out/profile_sextant.txt"

IFS=, read -ra mode_list <<<"$modes"
for mode in "${mode_list[@]}"; do
  echo "== PyTorch $mode $model mbs=$mbs"
  CUDA_INJECTION64_PATH=$profiler SEXTANT_PROFILE_LAST_S=1.0 SEXTANT_PROFILE_OUT="$out/profile_torch_$mode.txt" \
    SEXTANT_PROFILE_TOP=60 python3 tools/bench/torch_reference.py --model "$model" --mbs "$mbs" --mode "$mode" \
    --steps 15 --warmup 10 --json >"$out/torch_$mode.txt" 2>&1
  echo "exit code $?; $(tail -n 1 "$out/torch_$mode.txt" | cut -c1-300)"
  head -n "$top" "$out/profile_torch_$mode.txt"; tail -n 2 "$out/profile_torch_$mode.txt"
done
