#!/usr/bin/env bash
# An MoE engine change on one GPU, before against after, in one call (issue 25):
# the step time of both tiny MoE presets at training batches (gradients
# accumulated over micro-batches, so every weight-gradient path runs), A and B
# alternating (ab_step.sh); then B's `run --compare` of the same layouts and a
# kernel-level profile of one of them (CUPTI, libsextant_kernel_profile.so:
# GPU busy share, idle gaps by length, memset count), and once more with the
# host's CUDA calls recorded (SEXTANT_PROFILE_API: what the host did while the
# GPU idled). A short table is printed last.
#
#   bash tools/bench/moe_ab.sh A_DIR B_DIR OUT_DIR [PARTS]
#
# A_DIR and B_DIR hold a `sextant` each; B_DIR also libsextant_kernel_profile.so;
# A_DIR/configs, if there, is A's presets folder.
# PARTS: a comma-separated subset of ab,compare,profile (default: all).
# ROUNDS (default 2) and STEPS (default 30) go to ab_step.sh; PROFILE (default the
# committed H100 profile) to --compare.
set -uo pipefail
a=${1:?usage: moe_ab.sh A_DIR B_DIR OUT_DIR [PARTS]}
b=${2:?usage: moe_ab.sh A_DIR B_DIR OUT_DIR [PARTS]}
out=${3:?usage: moe_ab.sh A_DIR B_DIR OUT_DIR [PARTS]}
parts=",${4:-ab,compare,profile},"
wants() { [[ $parts == *",$1,"* ]]; }
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
profile=${PROFILE:-configs/profiles/measured/h100-sxm-80gb.yaml}
here=$(dirname "${BASH_SOURCE[0]}")
# name model mbs gbs: the layouts of the 2026-11-28 compare table
# (reports/measurements/2026-11-28-h100-moe-step-kernels).
layouts=("fine-tiny_mbs1 moe-fine-tiny 1 16" "fine-tiny_mbs4 moe-fine-tiny 4 16" "mixtral-tiny_mbs2 moe-mixtral-tiny 2 16")
# `run --compare` covers the issue's six one-GPU layouts: both models, two
# micro-batches each, top-4 instead of top-8 (a copy of moe-fine-tiny written to
# OUT_DIR), capacity on (1.25: the pairs beyond it dropped; no padding to it).
# name model mbs gbs [run arguments]
sed -e 's/^name: moe-fine-tiny$/name: moe-fine-tiny-top4/' -e 's/^  router_topk: 8$/  router_topk: 4/' \
  configs/models/moe-fine-tiny.yaml >"$out/moe-fine-tiny-top4.yaml"
compare_layouts=("${layouts[@]}" "mixtral-tiny_mbs1 moe-mixtral-tiny 1 16"
  "fine-tiny-top4_mbs2 $out/moe-fine-tiny-top4.yaml 2 16"
  "fine-tiny-capacity1.25_mbs2 moe-fine-tiny 2 16 --moe-capacity-factor 1.25")
summary=()
# A's own presets where A_DIR holds them (an older binary refuses newer keys).
a_configs=configs
[[ -d $a/configs ]] && a_configs=$a/configs

if wants ab; then
  for spec in "${layouts[@]}"; do
    read -r name model mbs gbs <<<"$spec"
    A_CONFIGS=$a_configs GBS=$gbs bash "$here/ab_step.sh" "$a/sextant" "$b/sextant" "$model" "$mbs" "${ROUNDS:-2}" "${STEPS:-30}" \
      >"$out/ab_$name.txt" 2>&1
    summary+=("$(printf '%-20s A/B  %s' "$name" "$(grep -E '^(A|B|B - A):' "$out/ab_$name.txt" | tr '\n' ' ')")")
  done
fi

if wants compare; then
  for spec in "${compare_layouts[@]}"; do
    read -r name model mbs gbs extra <<<"$spec"
    # shellcheck disable=SC2086  # extra: zero or more run arguments
    "$b/sextant" --configs configs run --model "$model" --layout "mbs=$mbs,gbs=$gbs" --data synthetic --steps 12 \
      --compare --profile "$profile" $extra >"$out/compare_$name.txt" 2>&1
    summary+=("$(printf '%-20s compare exit %d  %s' "$name" "$?" \
      "$(grep -E '^  step +[0-9.]+ ms' "$out/compare_$name.txt" | head -n 1)")")
  done
fi

if wants profile && [[ -f "$b/libsextant_kernel_profile.so" ]]; then
  for spec in "${layouts[0]}" "${layouts[2]}"; do
    read -r name model mbs gbs <<<"$spec"
    CUDA_INJECTION64_PATH="$b/libsextant_kernel_profile.so" SEXTANT_PROFILE_LAST_S=1.0 SEXTANT_PROFILE_GAPS=25 SEXTANT_PROFILE_TOP=80 \
      "$b/sextant" --configs configs run --model "$model" --layout "mbs=$mbs,gbs=$gbs" --data synthetic --steps 12 \
      >"$out/profile_$name.txt" 2>&1
    summary+=("$(printf '%-20s profile  %s; memsets: %s' "$name" \
      "$(grep -E '^window' "$out/profile_$name.txt")" \
      "$(grep -E '\[memset\]' "$out/profile_$name.txt" | head -n 1 | awk '{print $2}')")")
    # Again with the host's CUDA calls recorded: what the host did while the GPU idled.
    CUDA_INJECTION64_PATH="$b/libsextant_kernel_profile.so" SEXTANT_PROFILE_LAST_S=1.0 SEXTANT_PROFILE_API=1 \
      "$b/sextant" --configs configs run --model "$model" --layout "mbs=$mbs,gbs=$gbs" --data synthetic --steps 12 \
      >"$out/profile_api_$name.txt" 2>&1
    summary+=("$(printf '%-20s host     %s; idle: %s' "$name" \
      "$(grep -E '^host thread in' "$out/profile_api_$name.txt")" \
      "$(grep -A 4 '^GPU idle' "$out/profile_api_$name.txt" | tail -n 3 | awk '{printf "%s%% %s %s; ", $4, $5, $6}')")")
  done
fi

echo
echo "==================== MoE A/B ===================="
printf '%s\n' "${summary[@]}"
