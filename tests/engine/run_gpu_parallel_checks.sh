#!/usr/bin/env bash
# The engine's parallel training checks on a GPU machine, from binaries built
# elsewhere, in one call (a missing GPU fails the tests instead of skipping):
#   1. the communicator, gradient-reducer, tensor-parallel and NCCL tests
#      (tests/engine/comm/run_gpu_comm_checks.sh, memcheck included);
#   2. data-parallel training: dp = 2 on the in-process communicator against one
#      rank, with and without the distributed optimizer
#      (sextant_data_parallel_tests); the whole model at tp = 2 against one rank
#      (sextant_tensor_parallel_trainer_tests: tp = 2 and 4, with and without
#      sequence parallelism, alone and beside dp = 2; with the
#      vocabulary-parallel kernels' tests from sextant_kernel_tests,
#      VocabParallel*); pipeline parallelism at pp = 2, pp = 4 vpp = 2 and
#      tp = 2 pp = 2 dp = 2 against one rank (sextant_pipeline_trainer_tests);
#      resuming from a checkpoint at one GPU and dp = 2 zero=1, and loading one
#      into another layout (tp 2 <-> 1, dp 2 zero=1 <-> 1)
#      (sextant_checkpoint_gpu_tests); a non-finite step and a peer that stops
#      (sextant_resilience_gpu_tests); and the one-GPU trainer tests, which these
#      changes must leave as they were;
#   3. `sextant run` end to end on gpt-350m (seq 512, mbs 2, gbs 8, 5 steps):
#      alone, and through NCCL with --nproc-per-node 1; a checkpoint resumed,
#      and the same with a NaN written into one weight (exit code 3 naming the
#      step and tensor; --on-nonfinite skip runs on); with two or more GPUs
#      also --nproc-per-node 2 with dp = 2, dp = 2 zero=1, tp = 2, tp = 2 sp = 1,
#      pp = 2 and pp = 2 vpp = 2, with four pp = 2 dp = 2 zero=1, and with eight
#      tp = 2 pp = 2 dp = 2 without and with dist_opt=1, whose
#      losses are compared with the single run's (tolerances below), and
#      checkpoints moved between layouts (tp=2 -> 1, dp=2 zero=1 -> 1, 1 -> dp=2 zero=1).
#
#   bash tests/engine/run_gpu_parallel_checks.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds the test binaries (build/tests) and, for step 3, `sextant`
# (found in BIN_DIR, BIN_DIR/../tools or on the PATH). Run from the repository
# root (the presets under configs/). OUT_DIR gets one log per program and
# summary.txt; the exit code is non-zero when anything failed.
set -uo pipefail
bin=${1:?usage: run_gpu_parallel_checks.sh BIN_DIR OUT_DIR}
out=${2:?usage: run_gpu_parallel_checks.sh BIN_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
exec > >(tee "$out/summary.txt") 2>&1
status=0
note_failure() { [[ $1 -ne 0 ]] && status=$1; }

echo "== communicator, reducer, tensor-parallel and NCCL tests"
bash "$here/comm/run_gpu_comm_checks.sh" "$bin" "$out/comm"
note_failure $?

echo "== data-parallel, tensor-parallel, checkpoint-resume and one-GPU trainer tests"
# SKIP: test programs not to run here (say, run at the same time on another GPU).
for t in sextant_data_parallel_tests sextant_tensor_parallel_trainer_tests sextant_kernel_tests \
    sextant_pipeline_trainer_tests sextant_checkpoint_gpu_tests sextant_resilience_gpu_tests sextant_training_loop_tests \
    sextant_layout_parity_tests sextant_engine_tests; do
  [[ " ${SKIP:-} " == *" $t "* ]] && { echo "$t: skipped (SKIP)"; continue; }
  [[ -x "$bin/$t" ]] || { echo "$t: not in $bin"; status=1; continue; }
  filter='*'
  [[ $t == sextant_engine_tests ]] && filter='Trainer*:TinyModels/*'
  [[ $t == sextant_kernel_tests ]] && filter='Shapes/VocabParallel*'
  SEXTANT_REQUIRE_GPU=1 "$bin/$t" --gtest_filter="$filter" >"$out/${t#sextant_}.txt" 2>&1
  rc=$?
  note_failure $rc
  echo "$t exit code $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/${t#sextant_}.txt" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|rror|  dp-|  tp-|  gpt_|  gpt350m|  llama_|worst|  saved |gave up|named on' "$out/${t#sextant_}.txt" | head -n 30
done

echo "== sextant run"
sextant=""
for candidate in "$bin/sextant" "$bin/../tools/sextant" "$(command -v sextant)"; do
  [[ -n "$candidate" && -x "$candidate" ]] && { sextant=$candidate; break; }
done
if [[ -z "$sextant" ]]; then
  echo "sextant: not found next to $bin or on the PATH; run checks skipped"
  exit "$status"
fi
# libnccl.so.2 as run_gpu_comm_checks.sh finds it: the toolkit's, else PyTorch's wheel's.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ldd "$sextant" | grep -q "libnccl.*not found"; then
  lib=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -n 1)
  [[ -n "$lib" ]] && export LD_LIBRARY_PATH="$(dirname "$lib"):$LD_LIBRARY_PATH"
fi
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
# --configs: the presets of this checkout (the binary's built-in path is the build machine's).
common=(--configs "$PWD/configs" --model gpt-350m --seq-length 512 --data synthetic --steps 5 --format json --no-gemm-tuning)
run_one() {  # name, then the arguments
  local name=$1
  shift
  timeout 300 "$sextant" run "$@" "${common[@]}" >"$out/run_$name.json" 2>"$out/run_$name.log"
  local rc=$?
  note_failure $rc
  echo "run $name exit code $rc; losses: $(grep -o '"loss":\[[^]]*\]' "$out/run_$name.json")"
  [[ $rc -ne 0 ]] && tail -n 15 "$out/run_$name.log"
}
run_one single --layout mbs=2,gbs=8
run_one nccl_world_of_one --nproc-per-node 1 --layout mbs=2,gbs=8
# Checkpoints: 5 steps saving at 3 (and at the end), then a fresh process from
# step-3 runs steps 4-5. Step 4's loss is the same forward of the same weights
# and tokens (exact); step 5 went through one backward, whose flash-attention
# dQ atomics may add in another order (1e-4 relative).
# The checkpoints (5 GB for GPT-350M) go to a scratch folder, not OUT_DIR, which
# a device call copies back; only their listing and metadata are printed.
ckpt=$(mktemp -d "${TMPDIR:-/tmp}/sextant-ckpt.XXXXXX")
trap 'rm -rf "$ckpt"' EXIT
run_one ckpt_full --layout mbs=2,gbs=8 --save "$ckpt" --save-interval 3
run_one ckpt_resumed --layout mbs=2,gbs=8 --load "$ckpt/step-3"
ls "$ckpt" "$ckpt/step-3" && cat "$ckpt/latest" "$ckpt/step-3/metadata.json" | head -n 40
python3 - "$out/run_ckpt_full.json" "$out/run_ckpt_resumed.json" <<'PY' || status=1
import json, sys
full, resumed = (json.load(open(p))["loss"] for p in sys.argv[1:3])
print("checkpoint: steps 4-5 uninterrupted %r, resumed %r" % (full[3:], resumed))
ok = len(resumed) == 2 and resumed[0] == full[3] and abs(resumed[1] - full[4]) <= 1e-4 * full[4]
print("  resumed run continues the uninterrupted one" if ok else "  resumed run DIFFERS")
sys.exit(0 if ok else 1)
PY
# A NaN in one bf16 weight of the saved step-3 (wte[0][0], the first weight of
# rank 0's shard: 32 header bytes in; the metadata's CRC-32 rewritten to match):
# the resumed run must stop at step 4 with exit code 3 naming the step and the
# first parameter whose gradient is not finite (wte: the NaN reaches every
# gradient), and with --on-nonfinite skip run to the end, skipping its 2 steps.
python3 - "$ckpt/step-3" <<'PY' || status=1
import json, sys, zlib
folder = sys.argv[1]
with open(folder + "/rank-00000.bin", "r+b") as f:
    f.seek(32)
    f.write(b"\xc0\x7f")  # bf16 quiet NaN, little-endian
    f.seek(0)
    crc = 0
    while chunk := f.read(1 << 24):
        crc = zlib.crc32(chunk, crc)
meta = json.load(open(folder + "/metadata.json"))
meta["files"][0]["crc32"] = "%08x" % crc
json.dump(meta, open(folder + "/metadata.json", "w"), indent=2)
PY
timeout 300 "$sextant" run --layout mbs=2,gbs=8 --load "$ckpt/step-3" "${common[@]}" \
  >"$out/run_nan_stop.json" 2>"$out/run_nan_stop.log"
rc=$?
echo "run nan_stop exit code $rc (want 3): $(grep 'error' "$out/run_nan_stop.log")"
[[ $rc -eq 3 ]] && grep -q "step 4: loss nan, gradient norm nan; the first parameter whose gradient is not finite is 'wte'" \
  "$out/run_nan_stop.log" || { echo "  non-finite stop DIFFERS"; status=1; }
run_one nan_skip --layout mbs=2,gbs=8 --load "$ckpt/step-3" --on-nonfinite skip
grep -q '"skipped_steps":2' "$out/run_nan_skip.json" || { echo "  --on-nonfinite skip did not skip 2 steps"; status=1; }
rm -rf "$ckpt"/*

# Loaded into another layout: steps 4-5 of a run saved at step 3 against the
# saving run's own. Step 4 is the forward of the same weights in the new layout:
# dp changes nothing in it (1e-5, as for dp2 below), tp rounds its row-parallel
# partial sums to bf16 (1e-2, tensor_parallel_trainer_test.cc's bound); step 5
# adds one update computed in the new layout (1e-2 and 2e-2).
compare_loaded() {  # name of the saving run, of the loading run, tolerances of steps 4 and 5
  python3 - "$out/run_$1.json" "$out/run_$2.json" "$3" "$4" <<'PY' || status=1
import json, sys
saved, loaded = (json.load(open(p))["loss"] for p in sys.argv[1:3])
tol4, tol5 = float(sys.argv[3]), float(sys.argv[4])
print("%s: steps 4-5 of the saving run %r, loaded %r" % (sys.argv[2], saved[3:], loaded))
ok = len(loaded) == 2 and abs(loaded[0] - saved[3]) <= tol4 * saved[3] and abs(loaded[1] - saved[4]) <= tol5 * saved[4]
print("  the loaded run continues the saved one" if ok else "  the loaded run DIFFERS")
sys.exit(0 if ok else 1)
PY
}
if [[ $gpus -ge 2 ]]; then
  run_one reshard_tp2_saved --nproc-per-node 2 --layout tp=2,mbs=2,gbs=8 --save "$ckpt/tp2" --save-interval 3
  run_one reshard_tp2_to_tp1 --layout mbs=2,gbs=8 --load "$ckpt/tp2/step-3"
  compare_loaded reshard_tp2_saved reshard_tp2_to_tp1 1e-2 2e-2
  rm -rf "$ckpt"/*
  run_one reshard_zero1_saved --nproc-per-node 2 --layout dp=2,zero=1,mbs=2,gbs=8 --save "$ckpt/zero1" --save-interval 3
  run_one reshard_zero1_to_dp1 --layout mbs=2,gbs=8 --load "$ckpt/zero1/step-3"
  compare_loaded reshard_zero1_saved reshard_zero1_to_dp1 1e-5 1e-2
  rm -rf "$ckpt"/*
  run_one reshard_dp1_saved --layout mbs=2,gbs=8 --save "$ckpt/dp1" --save-interval 3
  run_one reshard_dp1_to_zero1 --nproc-per-node 2 --layout dp=2,zero=1,mbs=2,gbs=8 --load "$ckpt/dp1/step-3"
  compare_loaded reshard_dp1_saved reshard_dp1_to_zero1 1e-5 1e-2
  rm -rf "$ckpt"/*
  # A pipeline's checkpoint (one shard per stage, metadata v3): resumed with
  # pp = 2 (step 4 exact, step 5 1e-4 as above), and loaded into one GPU.
  run_one pp2_saved --nproc-per-node 2 --layout pp=2,mbs=2,gbs=8 --save "$ckpt/pp2" --save-interval 3
  run_one pp2_resumed --nproc-per-node 2 --layout pp=2,mbs=2,gbs=8 --load "$ckpt/pp2/step-3"
  compare_loaded pp2_saved pp2_resumed 0 1e-4
  run_one reshard_pp2_to_pp1 --layout mbs=2,gbs=8 --load "$ckpt/pp2/step-3"
  compare_loaded pp2_saved reshard_pp2_to_pp1 1e-5 1e-2
  rm -rf "$ckpt"/*
fi
if [[ $gpus -ge 2 ]]; then
  run_one dp2 --nproc-per-node 2 --layout dp=2,mbs=2,gbs=8
  run_one dp2_zero1 --nproc-per-node 2 --layout dp=2,zero=1,mbs=2,gbs=8
  run_one tp2 --nproc-per-node 2 --layout tp=2,mbs=2,gbs=8
  run_one tp2_sp --nproc-per-node 2 --layout tp=2,sp=1,mbs=2,gbs=8
  run_one pp2 --nproc-per-node 2 --layout pp=2,mbs=2,gbs=8
  run_one pp2_vpp2 --nproc-per-node 2 --layout pp=2,vpp=2,mbs=2,gbs=8
  pairs="single dp2 1e-5 1e-2|single dp2_zero1 1e-5 1e-2|single tp2 1e-4 1e-2|single tp2_sp 1e-4 1e-2"
  pairs="$pairs|tp2 tp2_sp 5e-3 1e-2|single pp2 1e-5 1e-2|single pp2_vpp2 1e-5 1e-2"
  if [[ $gpus -ge 4 ]]; then
    run_one pp2_dp2_zero1 --nproc-per-node 4 --layout pp=2,dp=2,zero=1,mbs=2,gbs=8
    pairs="$pairs|single pp2_dp2_zero1 1e-5 1e-2"
  fi
  if [[ $gpus -ge 8 ]]; then
    run_one tp2_pp2_dp2 --nproc-per-node 8 --layout tp=2,pp=2,dp=2,mbs=2,gbs=8
    run_one tp2_pp2_dp2_zero1 --nproc-per-node 8 --layout tp=2,pp=2,dp=2,dist_opt=1,mbs=2,gbs=8
    pairs="$pairs|single tp2_pp2_dp2 1e-4 1e-2|tp2_pp2_dp2 tp2_pp2_dp2_zero1 1e-5 1e-2"
  fi
  # dp: step 1 is the same forward of the same weights and tokens (1e-5: cuBLASLt may
  # pick another algorithm in another process); later steps differ by NCCL's summation
  # order, ~1e-3 of an update, far below 1e-2 of the loss. tp: each rank draws its
  # shards as their blocks of the one-GPU run's tensors (engine/trainer_arrays.h), so
  # step 1 is the same model with its row-parallel sums in bf16 in another order
  # (measured <= 2e-6 on 4 x H200; 1e-4; ranks drawing from streams of their own
  # were 3e-4 off), and later steps differ as dp's do (1e-2).
  # tp2_sp against tp2: the same shards from the same streams, the same sums
  # (sequence parallelism moves where the residual is added, one extra bf16
  # rounding per row-parallel output): 5e-3 at step 1, 1e-2 at the last.
  # pp: every stage draws its tensors from the one-GPU run's streams, so step 1 is
  # the same forward (1e-5); later steps differ by the fp32 order of the tied wte's
  # and the gradient norm's sums, as dp's do (1e-2).
  IFS='|' read -ra checks <<<"$pairs"
  for check in "${checks[@]}"; do
    set -- $check
    python3 - "$out/run_$1.json" "$out/run_$2.json" "$3" "$4" <<'PY' || status=1
import json, sys
one, two = (json.load(open(p))["loss"] for p in sys.argv[1:3])
first_tol, last_tol = float(sys.argv[3]), float(sys.argv[4])
print("%s vs %s: step-1 loss %.6f, here %.6f; last %.6f vs %.6f" % (sys.argv[1], sys.argv[2], one[0], two[0], one[-1], two[-1]))
ok = abs(one[0] - two[0]) <= first_tol * one[0] and abs(one[-1] - two[-1]) <= last_tol * one[-1]
print("  matches" if ok else "  DIFFERS")
sys.exit(0 if ok else 1)
PY
  done
else
  echo "one GPU: --nproc-per-node 2 skipped (NCCL needs a GPU per rank)"
fi
echo "overall exit code: $status"
exit "$status"
