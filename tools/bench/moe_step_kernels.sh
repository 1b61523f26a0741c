#!/usr/bin/env bash
# One GPU: every kernel of one training step of the tiny MoE presets by Nsight Compute
# (gpu__time_duration.sum per launch; step 2 of 2, after warm-up), beside `run --compare` of the
# same presets (the event simulator's step and tasks, the GPU's measured profile), so the engine's
# MoE block can be checked kernel by kernel against sim/compute/engine_moe_kernels.cc.
#
#   bash tools/bench/moe_step_kernels.sh BUILD_DIR OUT_DIR
#
# OUT_DIR gets ncu_<preset>.csv (raw), kernels_<preset>.txt (step 2's kernels summed by name,
# largest first, with the step's total GPU time), compare_<preset>.txt; a short table is printed last.
set -uo pipefail
build=${1:?usage: moe_step_kernels.sh BUILD_DIR OUT_DIR}
out=${2:?usage: moe_step_kernels.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
s="$build/tools/sextant"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1 >"$out/gpu.txt"
profile=configs/profiles/measured/h100-sxm-80gb.yaml
grep -q H200 "$out/gpu.txt" && profile=configs/profiles/measured/h200-sxm-141gb.yaml
summary=()
for spec in "fine-tiny moe-fine-tiny 1" "fine-tiny moe-fine-tiny 4" "mixtral-tiny moe-mixtral-tiny 2"; do
  read -r short model mbs <<<"$spec"
  name="${short}_mbs$mbs"
  # --clock-control none: the GPU at the clock it trains at (ncu locks the SM clock to base by
  # default, which made compute-bound kernels 1.15-1.35x slower than the profile's tables in the
  # 2026-11-28 folders: reports/measurements/2026-11-28-h100-moe-step-kernels/README.md).
  timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum --log-file "$out/ncu_$name.csv" \
    "$s" run --configs configs --model "$model" --layout "mbs=$mbs,gbs=$mbs" --steps 2 --data synthetic \
    --no-gemm-tuning >"$out/ncu_$name.log" 2>&1
  summary+=("ncu $name exit $?")
  python3 - "$out/ncu_$name.csv" >"$out/kernels_$name.txt" <<'PY'
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, ni, vi, ui = head.index("ID"), head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
launches = []
for r in rows[1:]:
    v = float(r[vi].replace(",", ""))
    v *= {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}[r[ui]]
    launches.append((int(r[ki]), r[ni], v))
launches.sort()
# Step 2: after step 1's AdamW launches, up to and including step 2's (each step ends with them).
adam = [i for i, (_, n, _) in enumerate(launches) if "adamw" in n]
gap = max(range(1, len(adam)), key=lambda j: adam[j] - adam[j - 1]) if len(adam) > 1 else 0
half = launches[adam[gap - 1] + 1: adam[-1] + 1] if gap > 0 else launches[len(launches) // 2:]
by = collections.defaultdict(lambda: [0, 0.0])
for _, n, v in half:
    by[n[:90]][0] += 1
    by[n[:90]][1] += v
total = sum(v for *_, v in half)
print(f"step 2: {len(half)} launches, {total / 1e3:.3f} ms of kernels")
for n, (c, t) in sorted(by.items(), key=lambda x: -x[1][1]):
    print(f"{t:10.1f} us {c:5d} x {t / c:8.2f} us  {n}")
PY
  timeout 200 "$s" run --configs configs --model "$model" --layout "mbs=$mbs,gbs=16" --steps 12 --data synthetic \
    --compare --profile "$profile" >"$out/compare_$name.txt" 2>&1
  summary+=("compare $name exit $?: $(grep -m1 -E 'step' "$out/compare_$name.txt" | head -c 160)")
  summary+=("  $(head -1 "$out/kernels_$name.txt")")
done
printf '%s\n' "${summary[@]}"
