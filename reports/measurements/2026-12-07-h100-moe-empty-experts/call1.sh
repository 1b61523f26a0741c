#!/usr/bin/env bash
# Device call 1 of 2026-12-07: db2103c+ (B) against 1f8ce8a (A) on one GPU; tar after each part.
set -u
R=$OUT/r; mkdir -p $R /tmp/a /tmp/b
tar xJf .gpu-bin/bins.tar.xz -C /tmp
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.txt
s=()
pack() { tar czf $OUT/r1.tgz -C $OUT r; }
export SEXTANT_REQUIRE_GPU=1
timeout 90 /tmp/b/sextant_kernel_tests --gtest_filter='*Moe*:*moe*' > $R/kernel_moe.txt 2>&1; s+=("kernel moe exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/kernel_moe.txt | tr '\n' ' ')")
timeout 90 /tmp/b/sextant_moe_trainer_tests > $R/moe_trainer.txt 2>&1; s+=("moe trainer exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/moe_trainer.txt | tr '\n' ' ')")
unset SEXTANT_REQUIRE_GPU
pack
grep -q H200 $R/gpu.txt && export PROFILE=configs/profiles/measured/h200-sxm-141gb.yaml
ROUNDS=2 STEPS=20 timeout 270 bash tools/bench/moe_ab.sh /tmp/a /tmp/b $R/moe_ab > $R/moe_ab.txt 2>&1; s+=("moe_ab exit $?")
pack
echo; tail -n 14 $R/moe_ab.txt; printf '%s\n' "${s[@]}"
