#!/usr/bin/env bash
# Set up sextant and run every check CI makes:
#
#   1. tools/setup.sh: Debian packages, Release build in build/
#   2. the GoogleTest suites of build/
#   3. the command line of build/: `simulate --format json` prints the DESIGN.md
#      fields, bad input exits with code 2, `validate` predicts every dev case
#   4. a sanitizer build in build-asan/ (ASan + UBSan, no CUDA, no benchmarks):
#      its GoogleTest suites and the same command-line checks
#
# Every phase runs even when an earlier, unrelated one failed; a summary with
# the time of each phase ends the output. Exit code 0 only if nothing failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

summary=()
failed=0

# phase NAME FUNCTION [ARGS...]: runs FUNCTION with errexit in a subshell, records
# PASS/FAIL and its wall time, and leaves FUNCTION's status in $phase_rc. Call it
# as a plain statement, never from `if`, `||` or `&&`: there bash ignores errexit
# inside the function and every subshell it starts, so a failing step would not
# stop its phase.
phase_rc=0
phase() {
  local name=$1
  shift
  echo
  echo "==> test: $name"
  local start=$SECONDS rc=0
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  local took=$((SECONDS - start)) status=PASS
  if ((rc != 0)); then
    status="FAIL (exit $rc)"
    failed=1
  fi
  echo "<== test: $name: $status, ${took} s"
  summary+=("$(printf '%-44s %-14s %5d s' "$name" "$status" "$took")")
  phase_rc=$rc
}

skip() {
  echo
  echo "==> test: $1: SKIP ($2)"
  summary+=("$(printf '%-44s %-14s %5s    (%s)' "$1" SKIP - "$2")")
}

# Prints a command, runs it, and prints how long it took.
run() {
  echo "+ $*"
  local start=$SECONDS
  "$@"
  echo "  ($((SECONDS - start)) s)"
}

run_ctest() {
  run ctest --test-dir "$1" --output-on-failure --parallel "$(nproc)" --timeout 900
}

# `simulate --format json` on GPT-3 175B as in Narayanan et al. 2021: exit 0 and
# the DESIGN.md fields, with a positive step time and an MFU in (0, 1].
check_simulate_json() {
  local sextant=$1 json
  # shellcheck disable=SC2054  # the commas are inside the --layout value
  local args=(simulate --model gpt3-175b --cluster dgx-a100 --gpus 1536
              --layout tp=8,pp=16,dp=12,mbs=1,gbs=1536,recompute=selective,sp=1 --format json)
  echo "+ $sextant ${args[*]}"
  json=$("$sextant" "${args[@]}")
  if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
missing = [k for k in ("step_time_s", "mfu", "memory_bytes_per_gpu") if k not in r]
if missing:
    sys.exit(f"missing keys: {missing}")
step, mfu, mem = r["step_time_s"], r["mfu"], r["memory_bytes_per_gpu"]["total"]
print(f"step_time_s {step:.3f}, mfu {mfu:.3f}, memory_bytes_per_gpu.total {mem}")
if not (step > 0 and 0 < mfu <= 1 and mem > 0):
    sys.exit("expected step_time_s > 0, 0 < mfu <= 1, memory_bytes_per_gpu.total > 0")
' <<<"$json"
  else
    echo "(python3 not installed: checking the keys with grep only)"
    local key
    for key in step_time_s mfu memory_bytes_per_gpu; do
      grep -q "\"$key\"" <<<"$json" || { echo "missing key: $key" >&2; return 1; }
    done
  fi
}

# An unknown preset is bad input: exit code 2 and a message on stderr.
check_bad_input() {
  local sextant=$1 rc=0 err
  local args=(simulate --model nonexistent --cluster dgx-a100 --gpus 1536)
  echo "+ $sextant ${args[*]}"
  err=$("$sextant" "${args[@]}" 2>&1 >/dev/null) || rc=$?
  echo "$err" | head -c 300
  echo
  if ((rc != 2)); then
    echo "expected exit code 2 for bad input, got $rc" >&2
    return 1
  fi
  [[ -n "$err" ]] || { echo "bad input printed no message" >&2; return 1; }
  echo "exit code 2, as expected"
}

check_validate() {
  run "$1" validate --cases validation/dev_cases.yaml
}

check_cli() {
  check_simulate_json "$1"
  check_bad_input "$1"
}

# LeakSanitizer stops the process's threads with ptrace; some sandboxes forbid
# that, and then every sanitized program dies at exit ("LeakSanitizer has
# encountered a fatal error"). Build a program that leaks and see whether LSan
# reports the leak; only if it cannot, turn leak detection off.
probe_leak_sanitizer() {
  local dir=build-asan/lsan-probe out
  mkdir -p "$dir"
  printf '%s\n' '#include <cstdlib>' 'void* volatile p;' \
    'int main() { p = std::malloc(33); p = nullptr; return 0; }' >"$dir/leak.cc"
  if ! "${CXX:-c++}" -fsanitize=address -g "$dir/leak.cc" -o "$dir/leak"; then
    echo "could not build the probe with ${CXX:-c++} -fsanitize=address; keeping detect_leaks=1"
    return 0
  fi
  out=$(ASAN_OPTIONS=detect_leaks=1 "$dir/leak" 2>&1) || true
  if grep -q "detected memory leaks" <<<"$out"; then
    echo "LeakSanitizer works here: detect_leaks=1"
    leak_detection=1
  else
    echo "LeakSanitizer cannot run here (it needs ptrace); the probe printed:"
    echo "$out" | head -n 5
    echo "falling back to detect_leaks=0 (ASan and UBSan still check everything else)"
    leak_detection=0
  fi
}

build_asan() {
  run cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSEXTANT_SANITIZE=ON -DSEXTANT_WITH_CUDA=OFF -DSEXTANT_BUILD_BENCHMARKS=OFF
  run cmake --build build-asan
}

start_all=$SECONDS

# Without a GPU the kernels' tests skip, so the Release build only checks that
# the kernels compile: one architecture (sm_90a, the one with the most code:
# wgmma and TMA paths) instead of the three a user's build makes, about a third
# of the CUDA compile time. With a GPU visible, its own architecture, so the
# tests run on it. SEXTANT_TEST_CUDA_ARCHITECTURES overrides both.
setup_args=()
if [[ -n "${SEXTANT_TEST_CUDA_ARCHITECTURES:-}" ]]; then
  setup_args=("-DSEXTANT_KERNEL_CUDA_ARCHITECTURES=$SEXTANT_TEST_CUDA_ARCHITECTURES")
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  setup_args=("-DSEXTANT_KERNEL_CUDA_ARCHITECTURES=native")
else
  setup_args=("-DSEXTANT_KERNEL_CUDA_ARCHITECTURES=90a-real")
fi
phase "setup: packages + Release build (build/)" bash tools/setup.sh "${setup_args[@]}"
setup_ok=$((phase_rc == 0))

if ((setup_ok)); then
  phase "ctest build/" run_ctest build
  phase "cli build/: simulate json, bad input" check_cli build/tools/sextant
else
  skip "ctest build/" "setup failed"
  skip "cli build/: simulate json, bad input" "setup failed"
fi
if [[ ! -f validation/dev_cases.yaml ]]; then
  skip "validate dev cases" "validation/dev_cases.yaml is not in the repository yet"
elif ((setup_ok)); then
  phase "validate build/ dev cases" check_validate build/tools/sextant
else
  skip "validate build/ dev cases" "setup failed"
fi

# The sanitizer options are exported before the build: gtest_discover_tests runs
# the sanitized test binary while building to list its tests.
leak_detection=1
if [[ "${SEXTANT_SKIP_LSAN_PROBE:-0}" != 1 ]]; then
  echo
  echo "==> test: LeakSanitizer probe"
  probe_leak_sanitizer
fi
export ASAN_OPTIONS="detect_leaks=$leak_detection:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS"

phase "sanitizer build (build-asan/, no CUDA)" build_asan
if ((phase_rc == 0)); then
  phase "ctest build-asan/" run_ctest build-asan
  phase "cli build-asan/: simulate json, bad input" check_cli build-asan/tools/sextant
  if [[ -f validation/dev_cases.yaml ]]; then
    phase "validate build-asan/ dev cases" check_validate build-asan/tools/sextant
  fi
else
  skip "ctest build-asan/" "sanitizer build failed"
  skip "cli build-asan/: simulate json, bad input" "sanitizer build failed"
fi

echo
echo "==================== sextant test summary ===================="
printf '%s\n' "${summary[@]}"
echo "leak detection: $([[ $leak_detection == 1 ]] && echo on || echo 'OFF (LeakSanitizer cannot run here)')"
echo "total: $((SECONDS - start_all)) s"
if ((failed)); then
  echo "RESULT: FAILED"
  exit 1
fi
echo "RESULT: all checks passed"
