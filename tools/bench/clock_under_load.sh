#!/usr/bin/env bash
# SM clock and power of the GPUs while the engine trains, while `sextant calibrate` measures, and
# while the kernel benchmarks run short and long, sampled by nvidia-smi every 200 ms: are the
# kernels of a sustained training step run at the clocks the calibration's short timings saw, and
# how much slower is a kernel once the GPU has run it long enough to reach its power limit?
#
#   bash tools/bench/clock_under_load.sh BUILD_DIR OUT_DIR [PHASES]
#
# PHASES, comma-separated (default train_cp,calibrate):
#   train_cp     gpt-1.3b at 64k tokens, cp=2 (NPROC ranks, default 2), full recomputation, 5 steps
#   train_dense  gpt-1.3b mbs 4, gbs 64, one GPU, 10 steps
#   train_long   llama3.2-1b at 32k tokens, one GPU, gbs 4, 5 steps
#   calibrate    the first CAL_SECONDS (default 60) of `sextant calibrate --quick`
#   fa_short / fa_long      flash_attention_bench with 10 / 1000 timed launches per shape
#   gemm_short / gemm_long  gemm_bench (GPT-1.3B mbs 4 shapes) with 10 / 400 launches per candidate
# Each phase writes smi_<phase>.csv (+ _reasons.csv) and <phase>.log; a table of every phase's
# median SM clock, power and throttle reasons ends the output (clocks.txt). SMI_GPUS: the GPU
# indices nvidia-smi samples (e.g. 3, or 0,1), for a run pinned by CUDA_VISIBLE_DEVICES beside other
# work (nvidia-smi ignores CUDA_VISIBLE_DEVICES); default all.
set -uo pipefail
build=${1:?usage: clock_under_load.sh BUILD_DIR OUT_DIR [PHASES]}
out=${2:?usage: clock_under_load.sh BUILD_DIR OUT_DIR [PHASES]}
phases=${3:-train_cp,calibrate}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
s="$build/tools/sextant"
common=(--configs "$PWD/configs" --data synthetic --format json --no-gemm-tuning)
fields=timestamp,index,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,utilization.gpu
ids=()
[[ -n ${SMI_GPUS:-} ]] && ids=(-i "$SMI_GPUS")
sample() {  # csv file: runs in the background until killed
  nvidia-smi "${ids[@]}" --query-gpu=$fields --format=csv,noheader,nounits -lms 200 >"$1" &
  smi=$!
  nvidia-smi "${ids[@]}" --query-gpu=timestamp,index,clocks_event_reasons.active --format=csv,noheader -lms 200 >"${1%.csv}_reasons.csv" 2>&1 &
  smi_reasons=$!
}
stop() { kill "$smi" "$smi_reasons" 2>/dev/null; wait "$smi" "$smi_reasons" 2>/dev/null; }

ran=()
for phase in ${phases//,/ }; do
  sample "$out/smi_$phase.csv"
  case $phase in
    train_cp) timeout 200 "$s" run "${common[@]}" --model gpt-1.3b --seq-length 65536 --nproc-per-node "${NPROC:-2}" \
                --layout cp=2,mbs=1,gbs=1,recompute=full --steps 5 >"$out/$phase.json" 2>"$out/$phase.log" ;;
    train_dense) timeout 200 "$s" run "${common[@]}" --model gpt-1.3b --layout mbs=4,gbs=64 --steps 10 \
                   >"$out/$phase.json" 2>"$out/$phase.log" ;;
    train_long) timeout 200 "$s" run "${common[@]}" --model llama3.2-1b --seq-length 32768 --layout mbs=1,gbs=4 \
                  --steps 5 >"$out/$phase.json" 2>"$out/$phase.log" ;;
    calibrate) timeout "${CAL_SECONDS:-60}" "$s" calibrate --quick --out "$out/quick.yaml" >"$out/$phase.log" 2>&1 ;;
    fa_short) timeout 120 "$build/tests/flash_attention_bench" 10 >"$out/$phase.log" 2>&1 ;;
    fa_long) timeout 200 "$build/tests/flash_attention_bench" 1000 >"$out/$phase.log" 2>&1 ;;
    gemm_short) timeout 120 "$build/tests/gemm_bench" --repeats 10 >"$out/$phase.log" 2>&1 ;;
    gemm_long) timeout 200 "$build/tests/gemm_bench" --repeats 400 >"$out/$phase.log" 2>&1 ;;
    *) echo "unknown phase $phase" >&2; stop; continue ;;
  esac
  echo "$phase exit $?"
  stop
  ran+=("$phase")
done
python3 - "$out" "${ran[@]}" <<'PY' | tee "$out/clocks.txt"
import csv, statistics, sys, pathlib, collections
out = pathlib.Path(sys.argv[1])
print(f"{'phase':12s} {'busy samples':>12s} {'SM MHz median':>13s} {'p10':>6s} {'max clock':>9s} {'power W median':>14s} {'limit':>6s}  reasons")
for phase in sys.argv[2:]:
    rows = [r for r in csv.reader(open(out / f"smi_{phase}.csv")) if len(r) >= 8]
    busy = [r for r in rows if r[7].strip().isdigit() and float(r[7]) >= 50]  # utilization >= 50 %
    if not busy:
        print(f"{phase:12s} no busy samples"); continue
    clocks = sorted(float(r[2]) for r in busy)
    power = [float(r[4]) for r in busy]
    busy_times = {(r[0], r[1].strip()) for r in busy}
    reasons = collections.Counter(r[2].strip() for r in csv.reader(open(out / f"smi_{phase}_reasons.csv"))
                                  if len(r) >= 3 and (r[0], r[1].strip()) in busy_times)
    print(f"{phase:12s} {len(busy):12d} {statistics.median(clocks):13.0f} {clocks[len(clocks)//10]:6.0f} "
          f"{busy[0][3]:>9s} {statistics.median(power):14.0f} {busy[0][5]:>6s}  {dict(reasons.most_common(2))}")
PY
