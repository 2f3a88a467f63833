#!/usr/bin/env bash
# Installs the Debian packages AdaptiveLoad builds and tests with.
# Idempotent: when every package is present it only runs dpkg-query and exits.
set -euo pipefail

PKGS=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  libarchive-dev liblz4-dev zlib1g-dev libzstd-dev
  libprotobuf-c-dev protobuf-c-compiler
  libgtest-dev googletest
  libjansson-dev
  python3 python3-numpy python3-torch python3-venv
  lz4 clang-format
  clang libclang-rt-14-dev
)
# clang and libclang-rt-14-dev (libclang_rt.fuzzer, the ASan/UBSan runtimes) build the
# libFuzzer harnesses of tests/fuzz/ (tools/fuzz.sh; test.sh runs `fuzz.sh --regress`).
# python3-venv (venv with pip, offline) installs the wheel in tests/dist/wheel_test.sh.
# python3-torch (CPU, Debian's) runs the Python package's tests with real DataLoaders.
# AL_SKIP_TORCH=1 leaves it out; those tests then print SKIP and do not run.
if [ "${AL_SKIP_TORCH:-0}" = 1 ]; then
  PKGS=("${PKGS[@]/python3-torch/}")
fi

missing=()
for p in "${PKGS[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
