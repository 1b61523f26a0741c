#!/usr/bin/env bash
# Device call 4 of 2026-12-07 (second session): calibrate with the experts' products at their rows
# (calibration_shapes.cc of this commit), then the six MoE compares with that profile.
set -u
R=$OUT/r; mkdir -p $R
tar xJf .gpu-bin/bins.tar.xz -C /tmp
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.txt
s=()
pack() { tar czf $OUT/r4.tgz -C $OUT r; }
t0=$SECONDS
timeout 360 /tmp/b/sextant --configs configs calibrate --out $R/h100-calibrated.yaml --model moe-fine-tiny --model moe-mixtral-tiny --format json > $R/calibrate.json 2> $R/calibrate.log; s+=("calibrate exit $? $((SECONDS - t0)) s")
pack
P=$R/h100-calibrated.yaml
t0=$SECONDS
PROFILE=$P timeout 150 bash tools/bench/moe_ab.sh /tmp/b /tmp/b $R/compare compare > $R/compare.txt 2>&1; s+=("compare exit $? $((SECONDS - t0)) s")
pack
echo; tail -n 7 $R/compare.txt; printf '%s\n' "${s[@]}"
