#!/usr/bin/env bash
# Step time of two sextant binaries on one GPU, A/B: runs A, B, A, B, ...
# (ROUNDS of each, alternating, so clock and temperature drift fall on both)
# and prints each run's median step time, tokens/s and MFU (the engine's own
# --format json numbers), then each binary's median over its runs.
#
#   bash tools/bench/ab_step.sh A_BIN B_BIN [MODEL] [MBS] [ROUNDS] [STEPS]
#
# MODEL defaults to gpt-1.3b, MBS (= global batch) to 4, ROUNDS to 2, STEPS to
# 30 (the engine times steps 4..STEPS). Extra sextant flags: SEXTANT_AB_FLAGS.
# GBS sets the global batch (default MBS: one micro-batch a step); a GBS above
# MBS accumulates gradients over GBS / MBS micro-batches, as training does.
# A_CONFIGS / B_CONFIGS: each binary's presets folder (default configs), for an
# older binary that refuses a newer preset's keys.
set -uo pipefail
a=${1:?usage: ab_step.sh A_BIN B_BIN [MODEL] [MBS] [ROUNDS] [STEPS]}
b=${2:?usage: ab_step.sh A_BIN B_BIN [MODEL] [MBS] [ROUNDS] [STEPS]}
model=${3:-gpt-1.3b}
mbs=${4:-4}
rounds=${5:-2}
steps=${6:-30}
gbs=${GBS:-$mbs}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
results=$(mktemp)
for ((r = 1; r <= rounds; ++r)); do
  # A first in odd rounds, B first in even ones: a drift within a round (clock,
  # temperature) does not always fall on the second binary.
  order="A B"
  ((r % 2 == 0)) && order="B A"
  for side in $order; do
    bin=$a
    configs=${A_CONFIGS:-configs}
    [[ $side == B ]] && bin=$b && configs=${B_CONFIGS:-configs}
    # shellcheck disable=SC2086
    json=$("$bin" --configs "$configs" run --model "$model" --layout "mbs=$mbs,gbs=$gbs" --data synthetic \
      --steps "$steps" --format json ${SEXTANT_AB_FLAGS:-} 2>/dev/null | tail -n 1)
    line=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print("%.2f %.0f %.2f" % (j["step_time_s"]*1e3, j["tokens_per_s"], 100*j["mfu"]))' "$json" 2>/dev/null)
    [[ -z $line ]] && line="failed"
    echo "$side $line" | tee -a "$results" | awk -v r="$r" '{printf "round %s %s: step %s ms, %s tokens/s, MFU %s %%\n", r, $1, $2, $3, $4}'
  done
done
python3 - "$results" <<'PY'
import statistics, sys
runs = {"A": [], "B": []}
for line in open(sys.argv[1]):
    side, *rest = line.split()
    if rest and rest[0] != "failed":
        runs[side].append([float(x) for x in rest])
for side, rows in runs.items():
    if rows:
        ms = statistics.median(r[0] for r in rows)
        print(f"{side}: median of {len(rows)} runs: step {ms:.2f} ms, "
              f"{statistics.median(r[1] for r in rows):,.0f} tokens/s, MFU {statistics.median(r[2] for r in rows):.2f} %")
if runs["A"] and runs["B"]:
    a = statistics.median(r[0] for r in runs["A"]); b = statistics.median(r[0] for r in runs["B"])
    print(f"B - A: {b - a:+.2f} ms per step ({100 * (b - a) / a:+.2f} %)")
PY
rm -f "$results"
