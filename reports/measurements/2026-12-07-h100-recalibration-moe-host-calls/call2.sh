#!/usr/bin/env bash
# Device call 2 of 2026-12-07 (second session): tests of B, H100 calibration with the MoE presets,
# A/B (A = 5916440, B = tuned loop products + pinned read-back), the six MoE compares with the new profile.
set -u
R=$OUT/r; mkdir -p $R
tar xJf .gpu-bin/bins.tar.xz -C /tmp
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.txt
s=()
pack() { tar czf $OUT/r2.tgz -C $OUT r; }
export SEXTANT_REQUIRE_GPU=1
timeout 60 /tmp/b/sextant_kernel_tests --gtest_brief=1 --gtest_filter='*Moe*:*moe*:*Gemm*' > $R/kernel_moe.txt 2>&1; s+=("kernel moe exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/kernel_moe.txt | tr '\n' ' ')")
timeout 60 /tmp/b/sextant_moe_trainer_tests --gtest_brief=1 > $R/moe_trainer.txt 2>&1; s+=("moe trainer exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/moe_trainer.txt | tr '\n' ' ')")
unset SEXTANT_REQUIRE_GPU
pack
t0=$SECONDS
timeout 300 /tmp/b/sextant --configs configs calibrate --out $R/h100-calibrated.yaml --model moe-fine-tiny --model moe-mixtral-tiny --format json > $R/calibrate.json 2> $R/calibrate.log; s+=("calibrate exit $? $((SECONDS - t0)) s")
pack
P=configs/profiles/measured/h100-sxm-80gb.yaml
[[ -f $R/h100-calibrated.yaml ]] && P=$R/h100-calibrated.yaml
t0=$SECONDS
ROUNDS=2 STEPS=20 timeout 200 bash tools/bench/moe_ab.sh /tmp/a /tmp/b $R/moe_ab ab > $R/moe_ab.txt 2>&1; s+=("moe_ab exit $? $((SECONDS - t0)) s")
pack
t0=$SECONDS
PROFILE=$P timeout 150 bash tools/bench/moe_ab.sh /tmp/a /tmp/b $R/moe_cmp compare > $R/moe_cmp.txt 2>&1; s+=("compare exit $? $((SECONDS - t0)) s, profile $P")
pack
echo; tail -n 12 $R/moe_ab.txt; tail -n 7 $R/moe_cmp.txt; printf '%s\n' "${s[@]}"
