#!/usr/bin/env bash
# The MoE layer's checks on one GPU, from binaries built elsewhere (issue 25):
# its kernel and trainer tests, both tiny MoE presets trained by `sextant run`
# (both grouped-GEMM backends), the routing balance on real text with and
# without the Switch loss, and PyTorch's MoE of the same shapes.
#
#   bash tools/bench/moe_checks.sh BIN_DIR OUT_DIR [PARTS]
#
# PARTS: a comma-separated subset of tests,runs,compare,profile,balance,torch
# (default: all).
# BIN_DIR holds sextant, sextant_kernel_tests, sextant_engine_tests,
# sextant_moe_trainer_tests and, in data/, vim-doc_text_document.{bin,idx}
# (run_engine_checks.sh says how it is made). Outputs go to OUT_DIR; a short
# table is printed last.
set -uo pipefail
bin=${1:?usage: moe_checks.sh BIN_DIR OUT_DIR [PARTS]}
out=${2:?usage: moe_checks.sh BIN_DIR OUT_DIR [PARTS]}
parts=",${3:-tests,runs,compare,profile,balance,torch},"
wants() { [[ $parts == *",$1,"* ]]; }
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sextant=("$bin/sextant" --configs configs)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
summary=()

if wants tests; then
echo "== tests"
SEXTANT_REQUIRE_GPU=1 "$bin/sextant_kernel_tests" --gtest_filter='*Moe*' --gtest_brief=1 >"$out/kernel_tests.txt" 2>&1
summary+=("kernel tests (*Moe*): exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/kernel_tests.txt" | tr '\n' ' ')")
SEXTANT_REQUIRE_GPU=1 "$bin/sextant_engine_tests" >"$out/engine_tests.txt" 2>&1
summary+=("engine tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/engine_tests.txt" | tr '\n' ' ')")
SEXTANT_REQUIRE_GPU=1 "$bin/sextant_moe_trainer_tests" >"$out/moe_trainer_tests.txt" 2>&1
summary+=("moe trainer tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/moe_trainer_tests.txt" | tr '\n' ' ')")
grep -E "worst relative|FAILED|Failure" "$out/engine_tests.txt" "$out/moe_trainer_tests.txt" | head -20
fi

# One `sextant run --format json` result on one line: speed, loss, routing, memory.
summarize() {
  python3 - "$1" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception as e:
    print("no JSON:", e)
    sys.exit()
moe = r.get("moe") or {}
loads = moe.get("busiest_expert_load") or [0]
print(f"{r['step_time_s'] * 1e3:8.1f} ms/step {r['tokens_per_s']:9.0f} tok/s MFU {100 * (r['mfu'] or 0):5.1f} % "
      f"loss {r['loss'][0]:.3f}->{r['loss'][-1]:.3f} busiest expert {max(loads):.2f} "
      f"peak {r['peak_memory_bytes'] / 2**30:.1f} GiB")
PY
}

# run NAME ARGS...: one `sextant run --format json`, its JSON kept, its speed summarised.
run() {
  local name=$1
  shift
  "${sextant[@]}" run "$@" --format json >"$out/$name.json" 2>"$out/$name.log"
  local rc=$?
  summary+=("$(printf '%-34s exit %d  %s' "$name" "$rc" "$(summarize "$out/$name.json")")")
}

if wants runs; then
echo "== sextant run: both tiny MoE presets, both grouped-GEMM backends"
for backend in cublaslt-loop cublas-grouped; do
  run "mixtral-tiny_mbs2_$backend" --model moe-mixtral-tiny --layout mbs=2,gbs=16 --steps 30 --moe-grouped-gemm "$backend"
  run "fine-tiny_mbs4_$backend" --model moe-fine-tiny --layout mbs=4,gbs=32 --steps 30 --moe-grouped-gemm "$backend"
done
run "fine-tiny_mbs1_auto" --model moe-fine-tiny --layout mbs=1,gbs=32 --steps 30
fi

if wants compare; then
  echo "== run --compare: measured tasks against the simulator's (the engine's measured H100 profile)"
  for spec in "mixtral-tiny moe-mixtral-tiny mbs=2,gbs=16" "mixtral-tiny moe-mixtral-tiny mbs=4,gbs=16" \
              "fine-tiny moe-fine-tiny mbs=1,gbs=16" "fine-tiny moe-fine-tiny mbs=4,gbs=16"; do
    read -r short model layout <<<"$spec"
    name="compare_${short}_${layout%%,*}"
    name=${name//=/}  # file names without '=' (the device tool returns only plain names)
    "${sextant[@]}" run --model "$model" --layout "$layout" --steps 12 --compare \
      --profile configs/profiles/measured/h100-sxm-80gb.yaml >"$out/$name.txt" 2>&1
    summary+=("$(printf '%-34s exit %d  %s' "$name" "$?" "$(grep -E '^  (step|mlp|attention)' "$out/$name.txt" | head -n 6 | tr '\n' ' ')")")
  done
fi

if wants profile && command -v nsys >/dev/null 2>&1; then
  echo "== nsys: where an MoE step's time goes (mixtral-tiny mbs 2, fine-tiny mbs 4)"
  for spec in "mixtral moe-mixtral-tiny mbs=2,gbs=16" "fine moe-fine-tiny mbs=4,gbs=16"; do
    read -r short model layout <<<"$spec"
    nsys profile -o "$out/nsys_$short" --force-overwrite true -t cuda,nvtx "${sextant[@]}" run --model "$model" \
      --layout "$layout" --steps 6 >"$out/nsys_${short}_run.txt" 2>&1
    nsys stats -r cuda_gpu_kern_sum,cuda_api_sum --format csv -o "$out/nsys_$short" "$out/nsys_$short.nsys-rep" \
      >/dev/null 2>&1
    rm -f "$out/nsys_$short.nsys-rep" "$out/nsys_$short.sqlite"
  done
fi

data="$bin/data/vim-doc_text_document"
if wants balance && [[ -f "$data.bin" ]]; then
  echo "== balance on real text: mixtral-tiny, 300 steps of 16 x 2048 tokens, Switch loss 1e-2 and off,"
  echo "   and DeepSeek-V3's expert bias (sigmoid router, no Switch loss)"
  for coeff in 0.01 0; do
    run "balance_aux_$coeff" --model moe-mixtral-tiny --layout mbs=2,gbs=16 --data "$data" --steps 300 \
      --lr 6e-4 --warmup-steps 30 --log-interval 50 --moe-aux-loss-coeff "$coeff"
  done
  run "balance_bias" --model moe-mixtral-tiny --layout mbs=2,gbs=16 --data "$data" --steps 300 \
    --lr 6e-4 --warmup-steps 30 --log-interval 50 --moe-aux-loss-coeff 0 \
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias
fi

echo "== PyTorch MoE of the same shapes"
if wants torch && [[ -x /opt/torch/.venv/bin/python ]]; then
  for impl in grouped loop; do
    /opt/torch/.venv/bin/python tools/bench/torch_reference.py --model moe-mixtral-tiny --mbs 2 --steps 30 \
      --warmup 10 --mode bf16 --moe-impl "$impl" --json >"$out/torch_mixtral-tiny_$impl.txt" 2>&1
    summary+=("torch mixtral-tiny mbs2 $impl: $(tail -n 1 "$out/torch_mixtral-tiny_$impl.txt" | head -c 400)")
    /opt/torch/.venv/bin/python tools/bench/torch_reference.py --model moe-fine-tiny --mbs 4 --steps 30 \
      --warmup 10 --mode bf16 --moe-impl "$impl" --json >"$out/torch_fine-tiny_$impl.txt" 2>&1
    summary+=("torch fine-tiny mbs4 $impl: $(tail -n 1 "$out/torch_fine-tiny_$impl.txt" | head -c 400)")
  done
fi

echo
echo "==================== MoE checks ===================="
printf '%s\n' "${summary[@]}"
