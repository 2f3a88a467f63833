#!/bin/bash
# tests/examples/sp_smoke_test.py (examples/train_dit.py --smoke on plan --sp-degrees manifests: 2 and 4 gloo processes
# on the CPU) under Debian's python3 with torch, against the freshly built CLI and
# libadaptiveload.so (it plans and reads the --smoke corpus). Skips (exit 0, SKIP line) only when torch
# cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
if ! "$PY" -c "import torch.distributed" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch.distributed; the SP smoke test did not run"
  "$PY" -c "import torch.distributed" 2>&1 | tail -1 || true
  exit 0
fi
export ADAPTIVELOAD_LIB="$here/dist/libadaptiveload.so"
export ADAPTIVELOAD_BIN="$here/adaptiveload"
export PYTHONPATH="$here/python"
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
# Under --config=asan the library is instrumented: load the runtime first (as python_test.sh).
syms=$(nm -D "$ADAPTIVELOAD_LIB" 2>/dev/null || true)
if grep -q " U __asan_init" <<<"$syms"; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
fi
exec "$PY" "$here/tests/examples/sp_smoke_test.py"
