#!/bin/bash
# Runs tests/planner/sp_python_test.py under Debian's python3 against the freshly built
# libadaptiveload.so and CLI (the binding only: no torch needed).
set -euo pipefail
here=$(pwd)
export ADAPTIVELOAD_LIB="$here/dist/libadaptiveload.so"
export ADAPTIVELOAD_BIN="$here/adaptiveload"
export PYTHONPATH="$here/python"
export PYTHONDONTWRITEBYTECODE=1
syms=$(nm -D "$ADAPTIVELOAD_LIB" 2>/dev/null || true)
if grep -q " U __asan_init" <<<"$syms"; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
fi
exec /usr/bin/python3 "$here/tests/planner/sp_python_test.py"
