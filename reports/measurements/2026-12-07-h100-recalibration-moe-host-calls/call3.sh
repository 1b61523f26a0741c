#!/usr/bin/env bash
# Device call 3 of 2026-12-07 (second session): MoE trainer tests (the side check over every rank and step),
# the 12-run calibration check with call 2's recalibrated H100 profile, the engine against PyTorch.
set -u
R=$OUT/r; mkdir -p $R
tar xJf .gpu-bin/bins.tar.xz -C /tmp
mkdir -p /tmp/bb/tools && cp /tmp/b/sextant /tmp/bb/tools/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.txt
s=()
pack() { tar czf $OUT/r3.tgz --exclude='*/reports/*' -C $OUT r; }
SEXTANT_REQUIRE_GPU=1 timeout 60 /tmp/b/sextant_moe_trainer_tests --gtest_brief=1 --gtest_repeat=3 > $R/moe_trainer.txt 2>&1; s+=("moe trainer x3 exit $? $(grep -cE '^\[  PASSED' $R/moe_trainer.txt) passes")
t0=$SECONDS
PROFILE=.gpu-stage/h100-calibrated.yaml STEPS=10 timeout 330 bash tools/bench/calibration_check.sh /tmp/bb $R/check > $R/check.txt 2>&1; s+=("calibration check exit $? $((SECONDS - t0)) s")
pack
t0=$SECONDS
timeout 220 /opt/torch/.venv/bin/python tools/bench/engine_vs_pytorch.py --sextant /tmp/b/sextant --models gpt-1.3b --mbs 4 --steps 30 --out $R/bench --deadline-s 200 > $R/bench.txt 2>&1; s+=("vs pytorch exit $? $((SECONDS - t0)) s")
pack
echo; tail -n 25 $R/check.txt; tail -n 12 $R/bench.txt; printf '%s\n' "${s[@]}"
