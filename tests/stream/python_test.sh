#!/bin/bash
# Runs a Python test file of tests/stream/ (the first argument; test_python.py without one) under Debian's python3 with torch (CPU), against
# the freshly built libadaptiveload.so and CLI. Skips (exit 0, SKIP line) only when
# torch cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch; the Python package tests did not run"
  "$PY" -c "import torch" 2>&1 | tail -1 || true
  exit 0
fi
export ADAPTIVELOAD_LIB="$here/dist/libadaptiveload.so"
export AL_TEST_KERNELS_LIB="$here/dist/libal_kernels.so"  # the kernels alone: no stream API
export ADAPTIVELOAD_BIN="$here/adaptiveload"
export PYTHONPATH="$here/python"
export PYTHONDONTWRITEBYTECODE=1
# Under --config=asan the library is instrumented: the runtime must be loaded first,
# and CPython's own allocations are not ours to leak-check.
# (nm's output is captured first: with pipefail, grep -q closing the pipe early would
# make the test fail to notice.)
syms=$(nm -D "$ADAPTIVELOAD_LIB" 2>/dev/null || true)
if grep -q " U __asan_init" <<<"$syms"; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
fi
exec "$PY" "$here/tests/stream/${1:-test_python.py}"
