#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (second session): host-blocking probe, GPU test suites, dense sanity run.
set -u
R=$OUT/r; mkdir -p $R
tar xJf .gpu-bin/bins.tar.xz -C /tmp
B=/tmp/b
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/gpu.txt
s=()
pack() { tar czf $OUT/r1.tgz -C $OUT r; }
timeout 60 $B/host_blocking_probe > $R/probe.txt 2>&1; s+=("probe exit $?")
timeout 60 $B/host_blocking_probe --experts 128 > $R/probe128.txt 2>&1
pack
export SEXTANT_REQUIRE_GPU=1
for t in kernel moe_trainer layout_parity engine; do
  timeout 200 $B/sextant_${t}_tests --gtest_brief=1 > $R/${t}_tests.txt 2>&1
  s+=("$t tests exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/${t}_tests.txt | tr '\n' ' ')")
  pack
done
unset SEXTANT_REQUIRE_GPU
timeout 90 $B/sextant --configs configs run --model gpt-1.3b --layout mbs=4,gbs=32 --steps 20 --log-interval 5 > $R/gpt13b.txt 2>&1; s+=("gpt-1.3b exit $?")
pack
cat $R/probe.txt; grep -E "drains|read its" $R/probe128.txt; tail -n 4 $R/gpt13b.txt; printf '%s\n' "${s[@]}"
