#!/usr/bin/env bash
# Device call 2 of 2026-12-08: the layout parity tests (call 1 gave them 120 s, too few), then
# balance on real text, the progress lines kept (one tarball): DeepSeek-V3's expert bias at update
# rates 1e-3 (Megatron's default) and 1e-2.
set -u
R=$OUT/r; mkdir -p $R
tar xJf .gpu-bin/bins.tar.xz -C /tmp
B=/tmp/b
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
SEXTANT_REQUIRE_GPU=1 timeout 200 $B/sextant_layout_parity_tests --gtest_brief=1 > $R/layout_parity_tests.txt 2>&1
echo "layout parity exit $? $(grep -E '^\[  (PASSED|FAILED)' $R/layout_parity_tests.txt | tr '\n' ' ')"
common=(--configs configs run --model moe-mixtral-tiny --layout mbs=2,gbs=16 --data $B/data/vim-doc_text_document
        --steps 300 --lr 6e-4 --warmup-steps 30 --log-interval 25 --format json)
bias=(--moe-aux-loss-coeff 0 --moe-router-score-function sigmoid --moe-router-enable-expert-bias)
timeout 100 $B/sextant "${common[@]}" "${bias[@]}" --moe-router-bias-update-rate 1e-3 > $R/bias_1e-3.json 2> $R/bias_1e-3.log; echo "bias 1e-3 exit $?"
timeout 100 $B/sextant "${common[@]}" "${bias[@]}" --moe-router-bias-update-rate 1e-2 > $R/bias_1e-2.json 2> $R/bias_1e-2.log; echo "bias 1e-2 exit $?"
tar czf $OUT/balance.tgz -C $OUT r
for f in bias_1e-3 bias_1e-2; do echo "== $f"; grep -E "busiest expert" $R/$f.log | tail -n 2; done
