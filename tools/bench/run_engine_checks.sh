#!/usr/bin/env bash
# The engine's checks on a GPU machine, from binaries built elsewhere, in one go:
# the kernel and engine tests (a missing GPU fails them), the loss curve of a
# short run on real text, Ctrl-C handling, and the comparison with PyTorch.
#
#   bash tools/bench/run_engine_checks.sh BIN_DIR OUT_DIR [MODELS]
#
# BIN_DIR holds sextant, sextant_kernel_tests, sextant_engine_tests and, in
# data/, the dataset vim-doc_text_document.{bin,idx} (tools/data/text_files_to_jsonl.py
# then `sextant preprocess`); MODELS is the comma-separated list for the PyTorch
# comparison (default gpt-1.3b; "none" skips it). Every output goes to OUT_DIR;
# short tables are printed.
set -uo pipefail
bin=${1:?usage: run_engine_checks.sh BIN_DIR OUT_DIR [MODELS]}
out=${2:?usage: run_engine_checks.sh BIN_DIR OUT_DIR [MODELS]}
models=${3:-gpt-1.3b}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sextant=("$bin/sextant" --configs configs)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee "$out/commit.txt"

echo "== tests"
SEXTANT_REQUIRE_GPU=1 "$bin/sextant_kernel_tests" --gtest_brief=1 >"$out/kernel_tests.txt" 2>&1
echo "sextant_kernel_tests exit code $?: $(grep -E '^\[  (PASSED|FAILED)' "$out/kernel_tests.txt" | tr '\n' ' ')"
SEXTANT_REQUIRE_GPU=1 "$bin/sextant_engine_tests" >"$out/engine_tests.txt" 2>&1
echo "sextant_engine_tests exit code $?: $(grep -E '^\[  (PASSED|FAILED)' "$out/engine_tests.txt" | tr '\n' ' ')"
grep -E "worst relative" "$out/engine_tests.txt"

echo "== Ctrl-C: SIGINT after 15 s must stop after the current step with the summary, exit code 130"
"${sextant[@]}" run --model gpt-350m --layout mbs=8,gbs=8 --steps 100000 --log-interval 50 \
  >"$out/interrupt.txt" 2>&1 &
pid=$!
sleep 15
kill -INT "$pid"
wait "$pid"
echo "exit code $?; $(grep -E 'interrupted' "$out/interrupt.txt")"

if [[ -f "$bin/data/vim-doc_text_document.bin" ]]; then
  echo "== loss on real text: GPT-350M, Vim's manual (byte tokens), 300 steps of 16 x 2048 tokens"
  "${sextant[@]}" run --model gpt-350m --layout mbs=8,gbs=16 --data "$bin/data/vim-doc_text_document" \
    --steps 300 --lr 6e-4 --warmup-steps 30 --log-interval 25 >"$out/loss_curve.txt" 2>&1
  echo "exit code $?"
  tail -n 20 "$out/loss_curve.txt"
fi

[[ "$models" == none ]] && exit 0
echo "== speed against PyTorch: $models"
python3 tools/bench/engine_vs_pytorch.py --sextant "$bin/sextant" --models "$models" --mbs 4 \
  --steps 30 --out "$out/bench" --deadline-s "${BENCH_DEADLINE_S:-420}"
