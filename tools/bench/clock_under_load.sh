#!/usr/bin/env bash
# SM clock and power of the GPUs while the engine trains and while `sextant calibrate` measures,
# sampled by nvidia-smi every 200 ms: is a sustained training step run at the clocks the
# calibration's short timings saw?
#
#   bash tools/bench/clock_under_load.sh BUILD_DIR OUT_DIR [NPROC]
#
# 1. gpt-1.3b at 64k tokens, cp=2 (NPROC ranks, default 2), full recomputation, 5 steps (smi_train.csv).
# 2. The first CAL_SECONDS (default 60) of `sextant calibrate --quick` (smi_calibrate.csv).
# Then a table: median SM clock, power and the busy samples' throttle reasons of each phase.
set -uo pipefail
build=${1:?usage: clock_under_load.sh BUILD_DIR OUT_DIR [NPROC]}
out=${2:?usage: clock_under_load.sh BUILD_DIR OUT_DIR [NPROC]}
nproc=${3:-2}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
s="$build/tools/sextant"
fields=timestamp,index,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,utilization.gpu
sample() {  # csv file: runs in the background until killed
  nvidia-smi --query-gpu=$fields --format=csv,noheader,nounits -lms 200 >"$1" &
  smi=$!
  nvidia-smi --query-gpu=timestamp,index,clocks_event_reasons.active --format=csv,noheader -lms 200 >"${1%.csv}_reasons.csv" 2>&1 &
  smi_reasons=$!
}
stop() { kill "$smi" "$smi_reasons" 2>/dev/null; wait "$smi" "$smi_reasons" 2>/dev/null; }

sample "$out/smi_train.csv"
timeout 200 "$s" run --configs "$PWD/configs" --data synthetic --format json --no-gemm-tuning --model gpt-1.3b \
  --seq-length 65536 --nproc-per-node "$nproc" --layout cp=2,mbs=1,gbs=1,recompute=full --steps 5 \
  >"$out/train.json" 2>"$out/train.log"
echo "train exit $?"
stop
sample "$out/smi_calibrate.csv"
timeout "${CAL_SECONDS:-60}" "$s" calibrate --quick --out "$out/quick.yaml" >"$out/calibrate.log" 2>&1
stop
python3 - "$out" <<'PY' | tee "$out/clocks.txt"
import csv, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
print(f"{'phase':10s} {'busy samples':>12s} {'SM MHz median':>13s} {'p10':>6s} {'max clock':>9s} {'power W median':>14s} {'limit':>6s}")
for phase in ("train", "calibrate"):
    rows = [r for r in csv.reader(open(out / f"smi_{phase}.csv")) if len(r) >= 8]
    busy = [r for r in rows if float(r[7]) >= 50]  # utilization >= 50 %
    if not busy:
        print(f"{phase:10s} no busy samples"); continue
    clocks = sorted(float(r[2]) for r in busy)
    power = [float(r[4]) for r in busy]
    print(f"{phase:10s} {len(busy):12d} {statistics.median(clocks):13.0f} {clocks[len(clocks)//10]:6.0f} "
          f"{busy[0][3]:>9s} {statistics.median(power):14.0f} {busy[0][5]:>6s}")
PY
