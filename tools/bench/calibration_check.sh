#!/usr/bin/env bash
# Issue 12's check on one GPU: measured step times of the engine on 12 layouts
# against the simulator's predictions with the datasheet profile, the measured
# profile (`sextant calibrate`) and the measured profile after the fit
# (`sextant fit-profile`), with errors, Kendall tau, and the 90 % intervals'
# coverage — in-sample and leave-one-out (each run predicted by a fit on the
# other runs, the honest number).
#
#   bash tools/bench/calibration_check.sh BUILD_DIR [OUT]
#
# OUT defaults to $OUT (the device machine's output folder) or out/calibration-check.
# PROFILE=FILE skips `sextant calibrate` and uses FILE as the measured profile.
# STEPS (default 10) optimizer steps per run; the engine takes the median of steps 4..STEPS.
# Takes about 5-7 minutes on one H100 (calibrate ~70 s, each run 10-25 s).
set -uo pipefail
build=${1:?usage: calibration_check.sh BUILD_DIR [OUT]}
out=${2:-${OUT:-out/calibration-check}}
steps=${STEPS:-10}
# FIT_ARGS: the fit-profile model; default the power-cap model (sim/compute/power_cap.h),
# FIT_ARGS= for the linear one (compute_time_factor and overheads).
fit_args=${FIT_ARGS---power-cap}
# CLUSTER (default dgx-h100): the cluster preset of the GPU the runs are on, for the simulations.
cluster=${CLUSTER:-dgx-h100}
sextant="$build/tools/sextant --configs configs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out/runs" "$out/logs"
start=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; git rev-parse --short HEAD; } \
  > "$out/provenance.txt" 2>&1

profile=${PROFILE:-}
if [[ -z $profile ]]; then
  echo "calibrate: $sextant calibrate --out $out/measured.yaml"
  $sextant calibrate --out "$out/measured.yaml" > "$out/logs/calibrate.log" 2>&1 ||
    { echo "calibrate failed: see $out/logs/calibrate.log"; exit 1; }
  profile=$out/measured.yaml
fi
cp "$profile" "$out/profile-used.yaml"

# model  layout  seq: GPT-350M, 1.3B, 2.7B and Llama 3.2 1B (GQA, SwiGLU, RoPE);
# micro-batch 1-8; recompute none/selective/full; gradient accumulation 1-8.
layouts=(
  "gpt-350m mbs=1,gbs=8,recompute=none 2048"
  "gpt-350m mbs=4,gbs=8,recompute=selective 2048"
  "gpt-350m mbs=8,gbs=8,recompute=none 2048"
  "gpt-1.3b mbs=1,gbs=4,recompute=none 2048"
  "gpt-1.3b mbs=2,gbs=8,recompute=selective 2048"
  "gpt-1.3b mbs=4,gbs=4,recompute=none 2048"
  "gpt-1.3b mbs=4,gbs=8,recompute=none 2048"
  "gpt-1.3b mbs=8,gbs=8,recompute=full 2048"
  "gpt-2.7b mbs=2,gbs=4,recompute=none 2048"
  "gpt-2.7b mbs=4,gbs=4,recompute=full 2048"
  "llama3.2-1b mbs=2,gbs=8,recompute=none 2048"
  "llama3.2-1b mbs=4,gbs=4,recompute=selective 2048"
)
i=0
for entry in "${layouts[@]}"; do
  read -r model layout seq <<< "$entry"
  i=$((i + 1))
  name=$(printf "%02d-%s-%s" "$i" "$model" "${layout//[=,]/_}")
  echo "run $i/${#layouts[@]}: $model $layout (seq $seq) [$(( $(date +%s) - start )) s]"
  $sextant run --model "$model" --layout "$layout" --seq-length "$seq" --data synthetic --steps "$steps" \
    --compare --report "$out/reports/$name" --profile "$profile" --cluster "$cluster" --format json \
    > "$out/runs/$name.json" 2> "$out/logs/$name.log" ||
    { echo "  failed: see $out/logs/$name.log"; rm -f "$out/runs/$name.json"; continue; }
  # The datasheet profile's prediction of the same layout.
  $sextant simulate --model "$model" --cluster "$cluster" --gpus 1 --layout "$layout" --seq-length "$seq" \
    --format json > "$out/logs/$name.datasheet.json" 2>> "$out/logs/$name.log"
done

echo "fit: $sextant fit-profile $fit_args --runs $out/runs --profile $profile --out $out/measured-fitted.yaml"
$sextant fit-profile $fit_args --cluster "$cluster" --runs "$out/runs" --profile "$profile" --out "$out/measured-fitted.yaml" \
  | tee "$out/fit.txt" || { echo "fit failed"; exit 1; }

# Leave one out: each run predicted by the fit on the others.
mkdir -p "$out/loo"
for run in "$out"/runs/*.json; do
  name=$(basename "$run" .json)
  rm -rf "$out/loo/runs-$name" && mkdir -p "$out/loo/runs-$name"
  for other in "$out"/runs/*.json; do [[ $other != "$run" ]] && cp "$other" "$out/loo/runs-$name/"; done
  $sextant fit-profile $fit_args --cluster "$cluster" --runs "$out/loo/runs-$name" --profile "$profile" --out "$out/loo/$name.yaml" \
    > "$out/loo/$name.fit.txt" 2>&1
done

# Predictions with the fitted profile (in-sample) and the leave-one-out ones, then the table.
for run in "$out"/runs/*.json; do
  name=$(basename "$run" .json)
  read -r model layout seq < <(python3 -c '
import json, sys
c = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["compare"]
l = c["layout"]
print(c["model"], "mbs=%d,gbs=%d,recompute=%s" % (l["mbs"], l["gbs"], l["recompute"]), c["seq_length"])' "$run")
  for which in fitted loo; do
    p=$out/measured-fitted.yaml
    [[ $which == loo ]] && p=$out/loo/$name.yaml
    $sextant simulate --model "$model" --cluster "$cluster" --gpus 1 --layout "$layout" --seq-length "$seq" \
      --profile "$p" --format json > "$out/logs/$name.$which.json" 2>> "$out/logs/$name.log"
  done
done

python3 - "$out" <<'PY' | tee "$out/summary.md"
import glob, json, math, os, statistics, sys
out = sys.argv[1]
def load(path):  # a pretty-printed object (simulate), or one per line (run): the last
    try:
        text = open(path).read().strip()
    except OSError:
        return None
    for candidate in (text, text.splitlines()[-1] if text else ""):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    return None
rows = []
for run in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    name = os.path.basename(run)[:-5]
    j = load(run)
    if not j or "compare" not in j:
        continue
    c = j["compare"]
    ds = load(os.path.join(out, "logs", name + ".datasheet.json"))
    fi = load(os.path.join(out, "logs", name + ".fitted.json"))
    lo = load(os.path.join(out, "logs", name + ".loo.json"))
    rows.append(dict(name="%s %s" % (c["model"], "mbs=%d,gbs=%d,%s" % (c["layout"]["mbs"], c["layout"]["gbs"], c["layout"]["recompute"])),
                     measured=c["measured_step_time_s"], datasheet=ds and ds["step_time_s"],
                     measured_profile=c["predicted_step_time_s"], fitted=fi and fi["step_time_s"],
                     fitted_iv=fi and fi.get("step_time_interval_s"), loo=lo and lo["step_time_s"],
                     loo_iv=lo and lo.get("step_time_interval_s")))
def err(p, m):
    return None if p is None else p / m - 1
def kendall(a, b):
    n = len(a); s = 0; pairs = 0
    for i in range(n):
        for k in range(i + 1, n):
            x = (a[i] - a[k]) * (b[i] - b[k])
            s += (x > 0) - (x < 0); pairs += 1
    return s / pairs if pairs else float("nan")
cols = [("datasheet", "datasheet"), ("measured profile", "measured_profile"), ("fitted (in-sample)", "fitted"), ("fitted (leave-one-out)", "loo")]
print("# Calibration check: engine step time vs the simulator (one GPU)\n")
print("| layout | measured ms | " + " | ".join("%s ms (err)" % c for c, _ in cols) + " | LOO 90 % interval ms | inside |")
print("|---|---:|" + "---:|" * len(cols) + "---|---|")
for r in rows:
    cells = []
    for _, k in cols:
        p = r[k]
        cells.append("-" if p is None else "%.1f (%+.1f %%)" % (1e3 * p, 100 * err(p, r["measured"])))
    iv = r["loo_iv"]
    inside = iv and iv[0] <= r["measured"] <= iv[1]
    print("| %s | %.1f | %s | %s | %s |" % (r["name"], 1e3 * r["measured"], " | ".join(cells),
          "%.1f - %.1f" % (1e3 * iv[0], 1e3 * iv[1]) if iv else "-", "yes" if inside else "no"))
print()
m = [r["measured"] for r in rows]
for label, k in cols:
    ok = [r for r in rows if r[k] is not None]
    if not ok:
        continue
    e = [abs(err(r[k], r["measured"])) for r in ok]
    tau = kendall([r[k] for r in ok], [r["measured"] for r in ok])
    print("- %s: median |error| %.1f %%, worst %.1f %%, within 5 %%: %d of %d, Kendall tau %.3f" %
          (label, 100 * statistics.median(e), 100 * max(e), sum(x <= 0.05 for x in e), len(e), tau))
for label, key in [("in-sample", "fitted_iv"), ("leave-one-out", "loo_iv")]:
    ivs = [(r[key], r["measured"]) for r in rows if r[key]]
    if ivs:
        inside = sum(lo <= mm <= hi for (lo, hi), mm in ivs)
        width = statistics.median((hi - lo) / (2 * math.sqrt(lo * hi)) for (lo, hi), _ in ivs)
        print("- 90 %% intervals (%s): measured inside for %d of %d; median half-width %.1f %% of the prediction" %
              (label, inside, len(ivs), 100 * width))
PY
echo "logs, runs, reports and profiles under $out ($(( $(date +%s) - start )) s)"
