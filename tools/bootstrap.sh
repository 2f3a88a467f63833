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
  python3 python3-numpy
  lz4
)
# Optional: Python tests of the ctypes package need torch (CPU). Debian ships it as python3-torch.
OPT_PKGS=(python3-torch)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
opt_missing=()
if [ "${AL_SKIP_TORCH:-0}" != 1 ]; then
  for p in "${OPT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || opt_missing+=("$p")
  done
fi

if [ ${#missing[@]} -eq 0 ] && [ ${#opt_missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]} ${opt_missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if [ ${#opt_missing[@]} -gt 0 ]; then
  $SUDO apt-get install -y -qq --no-install-recommends "${opt_missing[@]}" >&2 \
    || echo "bootstrap: optional ${opt_missing[*]} not installed; Python tests will be skipped" >&2
fi
