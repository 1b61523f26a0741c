#!/usr/bin/env bash
# Context parallelism on a node of two GPUs, one device call (when no node of four is lent):
#
#   bash tools/bench/cp_two_gpu_checks.sh BUILD_DIR OUT_DIR
#
# 1. `sextant calibrate --model llama3.2-1b` (GQA attention rows to 32k tokens, NCCL over 2 GPUs) into
#    OUT_DIR/profile.yaml (skipped when CALIBRATE=0).
# 2. Parity through NCCL: llama3.2-1b at 16k tokens, 20 steps, mbs 1, gbs 4: one GPU, then cp=2 with the
#    ring (cp_comm_type=p2p) and with the all-gather core; losses against the one-GPU run's.
#    (PARITY=0 skips it.)
# 3. Speed: llama3.2-1b at 32k tokens, cp=2, gbs 2, 10 steps, both variants, `--compare` against the
#    committed measured profile (old) and the one just calibrated (new); gpt-1.3b at 64k tokens, cp=2,
#    full recomputation, 5 steps, both variants against the new profile.
# A table of the speed runs ends the output; every run's JSON and log are in OUT_DIR.
set -uo pipefail
build=${1:?usage: cp_two_gpu_checks.sh BUILD_DIR OUT_DIR}
out=${2:?usage: cp_two_gpu_checks.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
s="$build/tools/sextant"
common=(--configs "$PWD/configs" --data synthetic --format json --no-gemm-tuning)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpus.txt"
committed=configs/profiles/measured/h200-sxm-141gb.yaml
grep -q H100 "$out/gpus.txt" && committed=configs/profiles/measured/h100-sxm-80gb.yaml
run() {  # name, arguments
  local name=$1 start=$SECONDS
  shift
  timeout "${RUN_TIMEOUT:-200}" "$s" run "$@" >"$out/$name.json" 2>"$out/$name.log"
  echo "$name exit $? ($((SECONDS - start)) s)"
}

profile=$committed
if [[ ${CALIBRATE:-1} == 1 ]]; then
  start=$SECONDS
  timeout "${CALIBRATE_TIMEOUT:-360}" "$s" calibrate --out "$out/profile.yaml" --model llama3.2-1b --format json \
    >"$out/calibrate.json" 2>"$out/calibrate.log"
  echo "calibrate exit $? ($((SECONDS - start)) s)"
  [[ -f $out/profile.yaml ]] && profile=$out/profile.yaml
fi

if [[ ${PARITY:-1} == 1 ]]; then
args=(--model llama3.2-1b --seq-length 16384 --steps 20 "${common[@]}")
run parity_single --layout mbs=1,gbs=4 "${args[@]}"
run parity_cp2_p2p --nproc-per-node 2 --layout cp=2,mbs=1,gbs=4,cp_comm_type=p2p "${args[@]}"
run parity_cp2_all_gather --nproc-per-node 2 --layout cp=2,mbs=1,gbs=4,cp_comm_type=all_gather "${args[@]}"
python3 tools/bench/loss_parity.py parity "$out" parity_single=parity_cp2_p2p,parity_cp2_all_gather |
  tee "$out/parity.txt"
fi

for type in all_gather p2p; do
  for which in old new; do
    p=$committed
    [[ $which == new ]] && p=$profile
    run "speed_llama_32k_cp2_${type}_$which" --model llama3.2-1b --seq-length 32768 --nproc-per-node 2 \
      --layout "cp=2,mbs=1,gbs=2,cp_comm_type=$type" --steps 10 --compare --profile "$p" "${common[@]}"
  done
  # Multi-head attention at head_dim 128 (the Hopper kernels), 32k tokens a rank, full recomputation.
  run "speed_gpt_64k_cp2_${type}_new" --model gpt-1.3b --seq-length 65536 --nproc-per-node 2 \
    --layout "cp=2,mbs=1,gbs=1,recompute=full,cp_comm_type=$type" --steps 5 --compare --profile "$profile" \
    "${common[@]}"
done
python3 - "$out" <<'PY' | tee "$out/speed.txt"
import json, sys, pathlib
print(f"{'run':36s} {'ms/step':>8s} {'tok/s':>8s} {'predicted':>9s} {'error':>7s} {'peak GiB':>8s}")
for f in sorted(pathlib.Path(sys.argv[1]).glob("speed_*.json")):
    try:
        r = json.loads(f.read_text().strip().splitlines()[-1])
    except Exception:
        print(f"{f.stem:36s} no JSON"); continue
    c = r.get("compare") or {}
    pred = c.get("predicted_step_s") or c.get("predicted_step_time_s") or 0
    step = r.get("step_time_s") or 0
    err = (pred - step) / step * 100 if pred and step else float("nan")
    print(f"{f.stem:36s} {step*1e3:8.1f} {r.get('tokens_per_s', 0):8.0f} {pred*1e3:9.1f} {err:6.1f}% "
          f"{(r.get('peak_memory_bytes') or 0)/2**30:8.1f}")
PY
