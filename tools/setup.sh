#!/usr/bin/env bash
# Set up sextant on Debian 12: install the build dependencies with apt-get, then
# configure and build the Release build in build/.
#
#   bash tools/setup.sh [extra cmake -D options]
#
# Idempotent: packages already installed are not touched (and `apt-get update`
# runs only when one is missing); an existing build/ is reconfigured and rebuilt
# incrementally. Extra arguments go to the cmake configure step, e.g.
# `-DSEXTANT_WITH_CUDA=OFF`.
#
# The CUDA toolkit is optional and not installed here: when nvcc is found,
# CMake builds kernels/ and engine/ too, otherwise it says so and skips them.
# clang is needed only for the libFuzzer build (-DSEXTANT_FUZZ=ON), which neither
# the main job nor the tests use; set SEXTANT_SETUP_CLANG=1 to install it as well.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  build-essential cmake ninja-build
  libyaml-cpp-dev libcli11-dev libeigen3-dev libboost-graph-dev nlohmann-json3-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
if [[ "${SEXTANT_SETUP_CLANG:-0}" == 1 ]]; then
  packages+=(clang)
fi

# Prints a command, runs it, and prints how long it took.
run() {
  echo "+ $*"
  local start=$SECONDS
  "$@"
  echo "  ($((SECONDS - start)) s)"
}

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

echo "==> setup: Debian packages"
missing=()
for p in "${packages[@]}"; do
  is_installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "all ${#packages[@]} packages are installed: ${packages[*]}"
else
  echo "missing: ${missing[*]}"
  if ((EUID == 0)); then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup: not root and sudo is not installed; install these packages as root:" >&2
    echo "  apt-get install ${missing[*]}" >&2
    exit 1
  fi
  # sudo drops the environment, so pass DEBIAN_FRONTEND through env.
  apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
  run "${apt[@]}" update -q
  run "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
fi

echo "==> setup: configure build/ (Release, Ninja)"
run cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"

echo "==> setup: build build/"
run cmake --build build

echo "setup: done; the command line is build/tools/sextant"
