#!/usr/bin/env bash
# The main job on the embedded default: installs missing Debian packages, builds the
# optimised CLI and runs `adaptiveload demo` (synth -> index -> plan both policies ->
# balance comparison -> stream a few batches). Extra arguments go to the demo verb.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh --packages-only
bazel build --config=opt //:adaptiveload
exec bazel-bin/adaptiveload demo "$@"
