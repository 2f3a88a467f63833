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
  lz4 zstd clang-format
  clang libclang-rt-14-dev
  libcurl4-openssl-dev nginx nodejs curl
)
# libcurl4-openssl-dev: //loader:remote (HTTP(S) and S3 through libcurl, SigV4 signing).
# nginx, nodejs and curl: the remote tests' servers on 127.0.0.1 (tests/loader/remote_*);
# s3rver (npm, pinned below) is installed into third_party/node/ (git-ignored), once.
# clang and libclang-rt-14-dev (libclang_rt.fuzzer, the ASan/UBSan runtimes) build the
# libFuzzer harnesses of tests/fuzz/ (tools/fuzz.sh; test.sh runs `fuzz.sh --regress`).
# python3-venv (venv with pip, offline) installs the wheel in tests/dist/wheel_test.sh.
# python3-torch (CPU, Debian's) runs the Python package's tests with real DataLoaders.
# AL_SKIP_TORCH=1 leaves it out; those tests then print SKIP and do not run.
# Debian's nodejs comes without npm (NodeSource's includes it): ask for npm only when absent.
command -v npm >/dev/null || PKGS+=(npm)
if [ "${AL_SKIP_TORCH:-0}" = 1 ]; then
  PKGS=("${PKGS[@]/python3-torch/}")
fi

# s3rver: an S3-compatible server for tests/loader/remote_s3_test.sh. After the first install
# it is found in third_party/node/ and nothing is fetched again (offline from then on).
S3RVER_VERSION=3.7.1
install_s3rver() {
  local dir="$(cd "$(dirname "$0")/.." && pwd)/third_party/node"
  [ -f "$dir/node_modules/s3rver/bin/s3rver.js" ] && return 0
  command -v npm >/dev/null || { echo "bootstrap: npm missing; s3rver not installed" >&2; return 1; }
  echo "bootstrap: installing s3rver $S3RVER_VERSION into $dir" >&2
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --no-save "s3rver@$S3RVER_VERSION" >&2
}

missing=()
for p in "${PKGS[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  install_s3rver
  exit
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
install_s3rver
