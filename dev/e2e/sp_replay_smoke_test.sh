#!/bin/bash
# //dev/e2e:sp_replay_smoke_test: dev/e2e/sp_replay_test.py under Debian's python3 with torch
# (CPU) against the built CLI and library. Skips (exit 0, SKIP line) only when torch cannot be
# imported.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch; the SP replay checks did not run"
  exit 0
fi
export ADAPTIVELOAD_BIN="$PWD/adaptiveload"
export ADAPTIVELOAD_LIB="$PWD/dist/libadaptiveload.so"
export PYTHONDONTWRITEBYTECODE=1
# An ASan build of the library (bazel test --config=asan) needs the runtimes loaded first.
syms=$(nm -D "$ADAPTIVELOAD_LIB" 2>/dev/null || true) # no pipe: grep -q would cut nm short under pipefail
if grep -q " U __asan_init" <<<"$syms"; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
fi
exec "$PY" "$PWD/dev/e2e/sp_replay_test.py"
