#!/usr/bin/env bash
# Device call 1 of 2026-12-08 (third session of 2026-12-07): GPU tests of ZeRO-1 beside ep, its
# checkpoints, the experts' rows statistic; then `run --compare` of the capacity layout and one
# dropless layout with the measured expert load; then, if time is left, balance on real text.
set -u
R=$OUT/r; mkdir -p $R
start=$SECONDS
tar xJf .gpu-bin/bins.tar.xz -C /tmp
B=/tmp/b
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.txt
s=()
export SEXTANT_REQUIRE_GPU=1
for t in moe_trainer checkpoint_gpu data_parallel pipeline_trainer layout_parity; do
  timeout 120 $B/sextant_${t}_tests --gtest_brief=1 > $R/${t}_tests.txt 2>&1
  s+=("$t tests exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/${t}_tests.txt | tr '\n' ' ') @$((SECONDS-start))s")
done
unset SEXTANT_REQUIRE_GPU
grep -E "FAILED|Failure" $R/*_tests.txt | head -20
grep -E "Moe" $R/checkpoint_gpu_tests.txt | head -4
P=configs/profiles/measured/h100-sxm-80gb.yaml
grep -q H200 $R/gpu.txt && P=configs/profiles/measured/h200-sxm-141gb.yaml
for spec in "fine-tiny-capacity1.25_mbs2 2 --moe-capacity-factor 1.25" "fine-tiny_mbs1 1"; do
  read -r name mbs extra <<<"$spec"
  timeout 90 $B/sextant --configs configs run --model moe-fine-tiny --layout mbs=$mbs,gbs=16 --data synthetic --steps 12 \
    --compare --profile $P $extra > $R/compare_$name.txt 2>&1
  s+=("$name exit $? $(grep -E '^  step +[0-9.]+ ms' $R/compare_$name.txt | head -n 1) @$((SECONDS-start))s")
  grep -h "expert_load_factor" $R/compare_$name.txt
done
if (( SECONDS - start < 420 )); then
  timeout $((560 - (SECONDS - start))) bash tools/bench/moe_checks.sh $B $R/moe balance > $R/moe_balance.txt 2>&1
  s+=("balance exit $? @$((SECONDS-start))s")
  tail -n 5 $R/moe_balance.txt
fi
printf '%s\n' "${s[@]}"
