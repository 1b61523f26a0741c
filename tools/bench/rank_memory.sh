#!/usr/bin/env bash
# Issue 27, "memory of a real rank": a rank's measured peak memory against the simulator's prediction,
# on 1, 2 and 4 GPUs of one node (one device call on a node of four GPUs; the 4-GPU layouts are skipped
# where fewer GPUs are visible):
#
#   bash tools/bench/rank_memory.sh BIN OUT_DIR
#
# BIN is the sextant binary (e.g. build/tools/sextant). Every run is GPT-350M (seq 512, synthetic data,
# 8 steps, no GEMM tuning) with --format json: one GPU (mbs 2), dp=2, tp=2, tp=2 sp=1 tp_comm_overlap=1,
# pp=2, dp=4 zero=1, tp=4 sp=1, tp=2 pp=2, pp=4 and pp=4 vpp=2. Each run's JSON and log go to OUT_DIR; the
# table at the end gives rank 0's measured peak (cudaMemGetInfo's in-use bytes, the most after a step), the
# arena, the prediction (total, its tensors and its runtime part: the CUDA context and NCCL), and measured
# minus predicted, in GiB. NCCL_NVLS_ENABLE=0 as in every engine run (the runtime model assumes it).
set -uo pipefail
bin=${1:?usage: rank_memory.sh BIN OUT_DIR}
out=${2:?usage: rank_memory.sh BIN OUT_DIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/gpus.txt" 2>&1
gpus=$(grep -c . "$out/gpus.txt")
common=(--configs "$PWD/configs" --model gpt-350m --seq-length 512 --data synthetic --steps 8 --format json
        --no-gemm-tuning)
names=()
run() {  # name, ranks, layout
  local name=$1 ranks=$2 layout=$3
  if ((ranks > gpus)); then
    echo "$name skipped: needs $ranks GPUs, $gpus visible"
    return
  fi
  local start=$SECONDS nproc=()
  ((ranks > 1)) && nproc=(--nproc-per-node "$ranks")
  timeout 240 "$bin" run "${nproc[@]}" --layout "$layout" "${common[@]}" >"$out/$name.json" 2>"$out/$name.log"
  echo "$name exit $? ($((SECONDS - start)) s)"
  names+=("$name")
}

run one 1 mbs=2,gbs=16
run dp2 2 dp=2,mbs=2,gbs=16
run tp2 2 tp=2,mbs=2,gbs=16
run tp2_sp_overlap 2 tp=2,sp=1,tp_comm_overlap=1,mbs=2,gbs=16
run pp2 2 pp=2,mbs=2,gbs=16
run dp4_zero1 4 dp=4,zero=1,mbs=2,gbs=16
run tp4_sp 4 tp=4,sp=1,mbs=2,gbs=16
run tp2_pp2 4 tp=2,pp=2,mbs=2,gbs=16
run pp4 4 pp=4,mbs=2,gbs=16
run pp4_vpp2 4 pp=4,vpp=2,mbs=2,gbs=16

python3 - "$out" "${names[@]}" <<'EOF'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
gib = 1024.0 ** 3
print("\n| run | measured peak | arena | predicted | tensors | runtime | measured - predicted |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in names:
    try:
        lines = [l for l in open(f"{out}/{name}.json") if l.startswith("{")]
        j = json.loads(lines[-1])
    except (OSError, ValueError, IndexError):
        print(f"| {name} | (no JSON: see {name}.log) | | | | | |")
        continue
    p = j["predicted_memory_bytes"]
    runtime = p.get("runtime", 0.0)
    tensors = p["total"] - runtime
    peak = j["peak_memory_bytes"]
    print(f"| {name} | {peak / gib:.2f} | {j['arena_bytes'] / gib:.2f} | {p['total'] / gib:.2f} | "
          f"{tensors / gib:.2f} | {runtime / gib:.2f} | {(peak - p['total']) / gib:+.2f} |")
EOF
