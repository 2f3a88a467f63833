#!/usr/bin/env bash
# Installs the Debian packages AdaptiveLoad builds and tests with, then the test environment
# (third_party/venv, below). `--packages-only` stops after the Debian packages (the demo needs
# nothing more). Idempotent: when everything is present it only runs dpkg-query, compares a
# stamp and exits.
set -euo pipefail

PKGS=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  libarchive-dev liblz4-dev zlib1g-dev libzstd-dev
  libprotobuf-c-dev protobuf-c-compiler
  libgtest-dev googletest
  libjansson-dev
  python3 python3-numpy python3-venv
  lz4 zstd clang-format
  clang libclang-rt-14-dev
  libcurl4-openssl-dev nginx curl
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg
)
# libavformat-dev libavcodec-dev libswscale-dev libavutil-dev: //decode (raw video and image
# members, FFmpeg on the CPU); ffmpeg: the CLI whose encoders make tests/decode/'s clips at test
# time (libx264, libx265, libvpx, libaom, libwebp come with it).
# libcurl4-openssl-dev: //storage (HTTP(S) and S3 through libcurl, SigV4 signing).
# nginx and curl: the remote tests' HTTP server on 127.0.0.1 and their uploads
# (tests/loader/remote_*); their S3 server, moto, is in the test environment below.
# clang and libclang-rt-14-dev (libclang_rt.fuzzer, the ASan/UBSan runtimes) build the
# libFuzzer harnesses of tests/fuzz/ (tools/fuzz.sh; test.sh runs `fuzz.sh --regress`).
# python3-venv makes the test environment and the fresh environment tests/dist/wheel_test.sh
# installs the wheel into; python3-numpy serves the dev/ scripts run with /usr/bin/python3.

# The test environment: a virtual environment of Debian's python3 at third_party/venv with
# tools/requirements-test.txt from PyPI (torch on the CPU for torch.distributed, torchrun and
# FSDP2; moto's S3 server). The wheels are downloaded into third_party/wheels first and
# installed from there, so the environment can be made again offline. A stamp holding the
# requirements' sha256 marks it complete: when it matches, nothing is fetched or installed.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/third_party/venv
WHEELS=$ROOT/third_party/wheels
REQS=$ROOT/tools/requirements-test.txt
install_venv() {
  local want stamp=$VENV/.requirements.sha256
  want=$(sha256sum "$REQS" | cut -d' ' -f1)
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  echo "bootstrap: making the test environment $VENV from $REQS" >&2
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  if ! "$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELS" -r "$REQS" >&2 2>/dev/null; then
    echo "bootstrap: downloading $REQS from PyPI into $WHEELS" >&2
    mkdir -p "$WHEELS"
    "$VENV/bin/pip" download --quiet --disable-pip-version-check -d "$WHEELS" -r "$REQS" >&2
    "$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELS" -r "$REQS" >&2
  fi
  echo "$want" >"$stamp"
  "$VENV/bin/python3" -c "import torch, moto; print('bootstrap: test environment ready: torch', torch.__version__, 'moto', moto.__version__)" >&2
}

packages_only=0
[ "${1:-}" = --packages-only ] && packages_only=1
finish() {
  [ "$packages_only" = 1 ] || install_venv
}

missing=()
for p in "${PKGS[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  finish
  exit
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
finish
