#!/usr/bin/env bash
# Expert parallelism (issue 25) on a node of four (or two) GPUs, one device call:
#
#   bash tools/bench/moe_ep_checks.sh BUILD_DIR OUT_DIR [PARTS]
#
# PARTS: a comma-separated subset of tests,parity,ckpt,speed (default: all).
# tests: the MoE kernel tests, the MoE trainer tests (in-process ep 2 and 4 against one GPU), the
#   engine and data-parallel tests (the trainer's buckets and norm changed with ep).
# parity: both tiny MoE presets, synthetic data, 20 steps, mbs 1, gbs 16: one GPU, then four ranks
#   through NCCL at dp=4 with ep=1, 2 and 4; each run's losses against the one-GPU run's (1e-5 at
#   step 1: the same forward of the same weights; 1e-2 at step 20: the sums' order).
# ckpt: moe-mixtral-tiny at dp=ep=GPUs saved at step 3 of 5, loaded into ep = GPUs/2 (or 1) on all
#   GPUs and into one GPU; steps 4-5 against the saving run's (1e-3: the same weights and data, the
#   experts' rows summed in another grouping).
# speed: 30 steps of each preset at dp=4 with ep=1, 2 and 4, with --compare (the measured profile
#   of the node's GPU, H100 or H200): tokens/s, the step against the event simulator's, the busiest expert.
# A table of every run ends the output; each run's JSON and log are in OUT_DIR.
set -uo pipefail
build=${1:?usage: moe_ep_checks.sh BUILD_DIR OUT_DIR [PARTS]}
out=${2:?usage: moe_ep_checks.sh BUILD_DIR OUT_DIR [PARTS]}
parts=",${3:-tests,parity,ckpt,speed},"
wants() { [[ $parts == *",$1,"* ]]; }
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
s="$build/tools/sextant"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >"$out/gpus.txt"
# The node's GPUs: dp = that many, ep each power of two up to it.
gpus=$(wc -l <"$out/gpus.txt")
eps=(1)
for ((e = 2; e <= gpus; e *= 2)); do eps+=("$e"); done
summary=()

if wants tests; then
  # One binary per GPU, side by side (CUDA_VISIBLE_DEVICES), each with its own log.
  gpu=0
  pids=()
  binaries=("sextant_kernel_tests --gtest_filter=*Moe*" sextant_moe_trainer_tests sextant_engine_tests
            sextant_data_parallel_tests)
  for t in "${binaries[@]}"; do
    read -r binary filter <<<"$t"
    ( start=$SECONDS
      CUDA_VISIBLE_DEVICES=$((gpu % gpus)) SEXTANT_REQUIRE_GPU=1 timeout 450 "$build/tests/$binary" $filter \
        >"$out/$binary.txt" 2>&1
      echo "$binary exit $? ($((SECONDS - start)) s)" >"$out/$binary.status" ) &
    pids+=($!)
    gpu=$((gpu + 1))
  done
  wait "${pids[@]}"
  for t in "${binaries[@]}"; do
    read -r binary filter <<<"$t"
    summary+=("$(cat "$out/$binary.status") $(grep -E '^\[  (PASSED|FAILED)' "$out/$binary.txt" | tr '\n' ' ')")
  done
  grep -hE "^\[  FAILED|Failure" "$out"/sextant_*.txt | head -20
  # The communicators (parallel_groups.cc shares them by sim::communicator_kind), in-process and NCCL.
  bash tests/engine/comm/run_gpu_comm_checks.sh "$build/tests" "$out/comm" >"$out/comm.txt" 2>&1
  summary+=("comm checks exit $?: $(tail -1 "$out/comm.txt")")
  SEXTANT_REQUIRE_GPU=1 timeout 400 "$build/tests/sextant_layout_parity_tests" >"$out/layout_parity.txt" 2>&1
  summary+=("layout parity tests exit $?: $(grep -E '^\[  (PASSED|FAILED)' "$out/layout_parity.txt" | tr '\n' ' ')")
fi

common=(--configs "$PWD/configs" --data synthetic --format json --no-gemm-tuning)
run() {  # name, arguments
  local name=$1
  shift
  local start=$SECONDS
  timeout 240 "$s" run "$@" >"$out/$name.json" 2>"$out/$name.log"
  summary+=("$(printf '%-28s exit %d (%d s)' "$name" $? $((SECONDS - start)))")
}

if wants parity; then
  for model in moe-fine-tiny moe-mixtral-tiny; do
    run "parity_${model}_single" --model "$model" --layout mbs=1,gbs=16 --steps 20 "${common[@]}"
    for ep in "${eps[@]}"; do
      run "parity_${model}_ep$ep" --model "$model" --nproc-per-node "$gpus" --layout "dp=$gpus,ep=$ep,mbs=1,gbs=16" \
        --steps 20 "${common[@]}"
    done
  done
  groups=()
  for model in moe-fine-tiny moe-mixtral-tiny; do
    runs=$(printf "parity_${model}_ep%s," 1 2 4 8)
    groups+=("parity_${model}_single=${runs%,}")
  done
  python3 tools/bench/loss_parity.py parity "$out" --skip-absent "${groups[@]}" | tee "$out/parity.txt"
fi

if wants ckpt; then
  # Checkpoints go to a scratch folder, not OUT_DIR, which the device call copies back.
  ckpt=$(mktemp -d "${TMPDIR:-/tmp}/sextant-ep-ckpt.XXXXXX")
  five=(--model moe-mixtral-tiny --steps 5 "${common[@]}")
  half=$((gpus / 2 > 1 ? gpus / 2 : 1))
  run ckpt_saved --nproc-per-node "$gpus" --layout "dp=$gpus,ep=$gpus,mbs=1,gbs=16" "${five[@]}" \
    --save "$ckpt/ep" --save-interval 3
  run ckpt_to_half_ep --nproc-per-node "$gpus" --layout "dp=$gpus,ep=$half,mbs=1,gbs=16" "${five[@]}" \
    --load "$ckpt/ep/step-3"
  run ckpt_to_one_gpu --layout "mbs=1,gbs=16" "${five[@]}" --load "$ckpt/ep/step-3"
  ls -R "$ckpt/ep/step-3" >"$out/ckpt_listing.txt"
  rm -rf "$ckpt"
  python3 tools/bench/loss_parity.py resume "$out" ckpt_saved ckpt_to_half_ep ckpt_to_one_gpu | tee "$out/ckpt.txt"
fi

if wants speed; then
  # The engine's measured profile of this node's GPU.
  profile=configs/profiles/measured/h100-sxm-80gb.yaml
  grep -q H200 "$out/gpus.txt" && profile=configs/profiles/measured/h200-sxm-141gb.yaml
  for spec in "moe-fine-tiny mbs=1,gbs=32" "moe-fine-tiny mbs=4,gbs=64" "moe-mixtral-tiny mbs=2,gbs=32"; do
    read -r model layout <<<"$spec"
    for ep in "${eps[@]}"; do
      name="speed_${model}_${layout%%,*}_ep$ep"
      name=${name//=/}
      run "$name" --model "$model" --nproc-per-node "$gpus" --layout "dp=$gpus,ep=$ep,$layout" --steps 30 --compare \
        --profile "$profile" "${common[@]}"
    done
  done
  python3 - "$out" <<'PY' | tee "$out/speed.txt"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print(f"{'run':40s} {'ms/step':>8s} {'tok/s':>9s} {'predicted':>9s} {'error':>7s} {'busiest':>7s} {'peak GiB':>8s}")
for f in sorted(out.glob("speed_*.json")):
    try:
        r = json.loads(f.read_text().strip().splitlines()[-1])
    except Exception:
        print(f"{f.stem:40s} no JSON"); continue
    c = r.get("compare") or {}
    pred = c.get("predicted_step_s") or c.get("predicted_step_time_s") or 0
    loads = (r.get("moe") or {}).get("busiest_expert_load") or [0]
    err = (pred - r["step_time_s"]) / r["step_time_s"] * 100 if pred else float("nan")
    print(f"{f.stem:40s} {r['step_time_s']*1e3:8.1f} {r['tokens_per_s']:9.0f} {pred*1e3:9.1f} {err:6.1f}% "
          f"{max(loads):7.2f} {r['peak_memory_bytes']/2**30:8.1f}")
PY
fi

echo
printf '%s\n' "${summary[@]}"
