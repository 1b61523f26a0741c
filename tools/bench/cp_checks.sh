#!/usr/bin/env bash
# Context parallelism (issue 26) on a node of four (or two) GPUs, one device call:
#
#   bash tools/bench/cp_checks.sh BUILD_DIR OUT_DIR [PARTS]
#
# PARTS: a comma-separated subset of tests,parity,ckpt,speed,torch (default: all).
# tests: the flash attention tests (kv_seq), the cp K/V kernels, the cp attention core in-process
#   (cp 2 and 4 against one GPU's attention), the RoPE/embedding chunk positions, the cp trainer tests.
# parity: llama3.2-1b at 16k tokens and gpt-350m at 8k, synthetic data, 20 steps, mbs 1, gbs 4: one GPU
#   (cp=1), then through NCCL cp=2 (dp=2), cp=4, tp=2,sp=1,cp=2; each run's losses against the one-GPU
#   run's (1e-5 at step 1: the same forward of the same weights; 1e-2 at step 20: the sums' order).
#   CP_COMM_TYPES: the attention cores the cp runs use, space-separated, of all_gather (the layout
#   says nothing: the engine's default, runs named as before) and p2p (the K/V ring: cp_comm_type=p2p,
#   runs named ..._p2p); default all_gather. E.g. CP_COMM_TYPES="all_gather p2p".
# ckpt: a cp=2 x dp=2 ZeRO-1 checkpoint loaded into cp=4 and into one GPU (steps 4-5 within 1e-3).
# speed: llama3.2-1b at 32k (cp=1 on one GPU, cp=2 dp=2 and cp=4 on all) and at 128k (cp=4), with
#   --compare against the event simulator at the node's measured profile (CP_PROFILE: another):
#   tokens/s, step, peak memory; each variant of CP_COMM_TYPES (default all_gather; p2p runs end _p2p).
# torch: PyTorch's context parallelism (tools/bench/torch_context_parallel.py under torchrun) at the
#   same shapes, for tokens/s beside the engine's.
# A table of every run ends the output; each run's JSON and log are in OUT_DIR.
set -uo pipefail
build=${1:?usage: cp_checks.sh BUILD_DIR OUT_DIR [PARTS]}
out=${2:?usage: cp_checks.sh BUILD_DIR OUT_DIR [PARTS]}
parts=",${3:-tests,parity,ckpt,speed,torch},"
wants() { [[ $parts == *",$1,"* ]]; }
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
s="$build/tools/sextant"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >"$out/gpus.txt"
gpus=$(wc -l <"$out/gpus.txt")
summary=()

if wants tests; then
  # One binary per GPU, side by side (CUDA_VISIBLE_DEVICES), each with its own log.
  gpu=0
  pids=()
  # The new kernels and the cp core and trainer; then the suites whose trainer groups changed
  # (dp became dp x cp) or whose attention changed (the square path of the kv_seq kernels).
  # CP_TESTS_ONLY=1: the two cp binaries alone (a rerun after a fix).
  binaries=("sextant_kernel_tests --gtest_filter=*FlashAttention*:*ContextParallel*:*Rope*:*Embedding*:*SequencePositions*"
            sextant_context_parallel_attention_tests sextant_context_parallel_trainer_tests
            sextant_layout_parity_tests sextant_data_parallel_tests sextant_engine_tests
            sextant_pipeline_trainer_tests sextant_checkpoint_gpu_tests)
  [[ ${CP_TESTS_ONLY:-0} == 1 ]] && binaries=(sextant_context_parallel_attention_tests sextant_context_parallel_trainer_tests)
  for t in "${binaries[@]}"; do
    read -r binary filter <<<"$t"
    ( start=$SECONDS
      CUDA_VISIBLE_DEVICES=$((gpu % gpus)) SEXTANT_REQUIRE_GPU=1 timeout 500 "$build/tests/$binary" $filter \
        >"$out/$binary.txt" 2>&1
      echo "$binary exit $? ($((SECONDS - start)) s)" >"$out/$binary.status" ) &
    pids+=($!)
    gpu=$((gpu + 1))
  done
  wait "${pids[@]}"
  for t in "${binaries[@]}"; do
    read -r binary filter <<<"$t"
    summary+=("$(cat "$out/$binary.status") $(grep -E '^\[  (PASSED|FAILED)' "$out/$binary.txt" | tr '\n' ' ')")
  done
  grep -hE "^\[  FAILED|Failure" "$out"/sextant_*.txt | head -30
fi

common=(--configs "$PWD/configs" --data synthetic --format json --no-gemm-tuning)
run() {  # name, arguments
  local name=$1
  shift
  local start=$SECONDS
  timeout 300 "$s" run "$@" >"$out/$name.json" 2>"$out/$name.log"
  summary+=("$(printf '%-32s exit %d (%d s)' "$name" $? $((SECONDS - start)))")
}

if wants parity; then
  # PARITY_MODELS: which of the two (default both).
  for model in ${PARITY_MODELS:-llama3.2-1b gpt-350m}; do
    seq=16384
    [[ $model == gpt-350m ]] && seq=8192
    args=(--model "$model" --seq-length "$seq" --steps 20 "${common[@]}")
    run "parity_${model}_single" --layout mbs=1,gbs=4 "${args[@]}"
    for type in ${CP_COMM_TYPES:-all_gather}; do
      knob="" suffix=""
      [[ $type == all_gather ]] || knob=",cp_comm_type=$type" suffix="_$type"
      run "parity_${model}_cp2dp2$suffix" --nproc-per-node 4 --layout "cp=2,dp=2,mbs=1,gbs=4$knob" "${args[@]}"
      run "parity_${model}_cp4$suffix" --nproc-per-node 4 --layout "cp=4,mbs=1,gbs=4$knob" "${args[@]}"
      run "parity_${model}_tp2cp2$suffix" --nproc-per-node 4 --layout "tp=2,sp=1,cp=2,mbs=1,gbs=4$knob" "${args[@]}"
    done
  done
  groups=()
  for model in ${PARITY_MODELS:-llama3.2-1b gpt-350m}; do
    runs=""
    for type in ${CP_COMM_TYPES:-all_gather}; do
      suffix=""
      [[ $type == all_gather ]] || suffix="_$type"
      runs+=$(printf "parity_${model}_%s$suffix," cp2dp2 cp4 tp2cp2)
    done
    groups+=("parity_${model}_single=${runs%,}")
  done
  python3 tools/bench/loss_parity.py parity "$out" "${groups[@]}" | tee "$out/parity.txt"
fi

if wants ckpt; then
  # Checkpoints reshard cp (cp folds into dp: checkpoint_layout_of): gpt-350m at 8k saved at
  # step 3 of 5 by cp=2 x dp=2 with ZeRO-1 (optimizer shards over the 4 replicas), loaded into
  # cp=4 (ZeRO-1 over 4 cp ranks) and into one GPU; steps 4-5 against the saving run's.
  ckpt=$(mktemp -d "${TMPDIR:-/tmp}/sextant-cp-ckpt.XXXXXX")
  five=(--model gpt-350m --seq-length 8192 --steps 5 "${common[@]}")
  run ckpt_saved --nproc-per-node 4 --layout cp=2,dp=2,zero=1,mbs=1,gbs=4 "${five[@]}" --save "$ckpt/cp" --save-interval 3
  run ckpt_to_cp4 --nproc-per-node 4 --layout cp=4,zero=1,mbs=1,gbs=4 "${five[@]}" --load "$ckpt/cp/step-3"
  run ckpt_to_one_gpu --layout mbs=1,gbs=4 "${five[@]}" --load "$ckpt/cp/step-3"
  rm -rf "$ckpt"
  python3 tools/bench/loss_parity.py resume "$out" ckpt_saved ckpt_to_cp4 ckpt_to_one_gpu | tee "$out/ckpt.txt"
fi

# CP_PROFILE: the profile --compare simulates with (default: the node's committed measured one).
profile=configs/profiles/measured/h100-sxm-80gb.yaml
grep -q H200 "$out/gpus.txt" && profile=configs/profiles/measured/h200-sxm-141gb.yaml
profile=${CP_PROFILE:-$profile}
if wants speed; then
  # 10 steps (a step is seconds long at these lengths); llama3.2-1b at 32k on one GPU (cp=1, the
  # baseline), cp=2 dp=2 and cp=4, and at 128k cp=4 and cp=2 dp=2 (full recomputation: 64k tokens a
  # rank do not fit 141 GB without it); gpt-1.3b at 128k cp=4 with full recomputation. SPEED_RUNS: a
  # subset of the names (default all).
  args=(--steps 10 --compare --profile "$profile" "${common[@]}")
  speed_wanted() { [[ -z ${SPEED_RUNS:-} || " $SPEED_RUNS " == *" $1 "* ]]; }
  speed_wanted llama_32k_cp1 && run speed_llama_32k_cp1 --model llama3.2-1b --seq-length 32768 \
    --layout mbs=1,gbs=4 "${args[@]}"
  for type in ${CP_COMM_TYPES:-all_gather}; do
    knob="" suffix=""
    [[ $type == all_gather ]] || knob=",cp_comm_type=$type" suffix="_$type"
    speed_wanted llama_32k_cp2dp2 && run "speed_llama_32k_cp2dp2$suffix" --model llama3.2-1b --seq-length 32768 \
      --nproc-per-node 4 --layout "cp=2,dp=2,mbs=1,gbs=4$knob" "${args[@]}"
    speed_wanted llama_32k_cp4 && run "speed_llama_32k_cp4$suffix" --model llama3.2-1b --seq-length 32768 \
      --nproc-per-node 4 --layout "cp=4,mbs=1,gbs=4$knob" "${args[@]}"
    speed_wanted llama_128k_cp4 && run "speed_llama_128k_cp4$suffix" --model llama3.2-1b --seq-length 131072 \
      --nproc-per-node 4 --layout "cp=4,mbs=1,gbs=1$knob" --steps 5 --compare --profile "$profile" "${common[@]}"
    speed_wanted llama_128k_cp2dp2 && run "speed_llama_128k_cp2dp2$suffix" --model llama3.2-1b --seq-length 131072 \
      --nproc-per-node 4 --layout "cp=2,dp=2,mbs=1,gbs=2,recompute=full$knob" --steps 5 --compare --profile "$profile" \
      "${common[@]}"
    speed_wanted gpt_128k_cp4 && run "speed_gpt_128k_cp4$suffix" --model gpt-1.3b --seq-length 131072 \
      --nproc-per-node 4 --layout "cp=4,mbs=1,gbs=1,recompute=full$knob" --steps 5 --compare --profile "$profile" \
      "${common[@]}"
  done
fi

if wants torch; then
  torchrun=/opt/torch/.venv/bin/torchrun
  # TORCH_RUNS: model:seq:cp:gbs[:recompute] (recompute none or full, default none), the engine's
  # speed layouts (gpt-1.3b at 128k recomputes in both).
  for spec in ${TORCH_RUNS:-llama3.2-1b:32768:2:4 llama3.2-1b:32768:4:4 llama3.2-1b:131072:4:1 gpt-1.3b:131072:4:1:full}; do
    IFS=: read -r model seq cp gbs recompute <<<"$spec"
    name="torch_${model%%[.-]*}_$((seq / 1024))k_cp$cp"
    start=$SECONDS
    extra=(--recompute "${recompute:-none}")
    timeout "${TORCH_TIMEOUT:-170}" "$torchrun" --nproc-per-node 4 tools/bench/torch_context_parallel.py \
      --model "$model" --seq-length "$seq" --cp "$cp" --gbs "$gbs" --mbs 1 --warmup 3 --steps 6 \
      --time-limit-s "$(( ${TORCH_TIMEOUT:-170} - 10 ))" --json "${extra[@]}" ${TORCH_FLAGS:-} \
      >"$out/$name.json" 2>"$out/$name.log"
    summary+=("$(printf '%-32s exit %d (%d s)' "$name" $? $((SECONDS - start)))")
  done
fi

if wants speed || wants torch; then
  python3 - "$out" <<'PY' | tee "$out/speed.txt"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print(f"{'run':28s} {'ms/step':>8s} {'tok/s':>9s} {'predicted':>9s} {'error':>7s} {'peak GiB':>8s}")
for f in sorted(list(out.glob("speed_*.json")) + list(out.glob("torch_*.json"))):
    try:
        r = json.loads(f.read_text().strip().splitlines()[-1])
    except Exception:
        print(f"{f.stem:28s} no JSON"); continue
    if "error" in r:
        print(f"{f.stem:28s} error: {str(r['error'])[:80]}"); continue
    c = r.get("compare") or {}
    pred = c.get("predicted_step_s") or c.get("predicted_step_time_s") or 0
    step = r.get("step_time_s") or 0
    err = (pred - step) / step * 100 if pred and step else float("nan")
    peak = r.get("peak_memory_bytes") or 0
    print(f"{f.stem:28s} {step*1e3:8.1f} {r.get('tokens_per_s', 0):9.0f} {pred*1e3:9.1f} {err:6.1f}% {peak/2**30:8.1f}")
PY
fi

echo
printf '%s\n' "${summary[@]}"
