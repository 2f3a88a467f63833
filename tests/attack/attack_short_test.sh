#!/bin/bash
# //tests/attack:attack_short_test: tests/attack/run.py on a fixed subset (seed 1, 6 cases a
# surface) under the test environment's Python (tools/bootstrap.sh: torch from PyPI, CPU),
# against the built CLI and library. run.py exits 1 when any case is not ok; its table and the
# reason of every case that is not ok are in the test log, every case in results.json among the
# test's undeclared outputs (test.outputs/).
# Fails when torch cannot be imported (the Python surface needs it).
#
# The full-disk cases mount small tmpfs folders when they can (as root). They run in a mount
# namespace of their own where one can be made, so a test killed mid-case leaves no mount
# behind; where none can be made, mount fails too and those cases report "skipped".
set -euo pipefail
here=$PWD
. "$here/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch "the attack's Python surface" || exit 1
al_python_env "$here"
# The cases' files go under a short /tmp path, as in the full run's /tmp/al_attack, so that
# the paths the cases' messages quote are the same as in the full run.
out=$(mktemp -d /tmp/al_attack_short.XXXXXX)
keep() { # results.json (every case, its outcome and reason) to Bazel's undeclared outputs
  [ -z "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ] || cp "$out/results.json" "$TEST_UNDECLARED_OUTPUTS_DIR/" 2>/dev/null || true
  rm -rf "$out"
}
trap keep EXIT
cmd=("$PY" "$here/tests/attack/run.py" --bin "$ADAPTIVELOAD_BIN" --lib "$ADAPTIVELOAD_LIB" --python "$PY"
  --pythonpath "$here/python" --seed 1 --per-surface 6 --jobs 2 --out "$out")
if unshare --mount --propagation private true 2>/dev/null; then
  unshare --mount --propagation private "${cmd[@]}"
else
  "${cmd[@]}"
fi
