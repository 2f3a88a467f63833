#!/bin/bash
# Runs a Python test file of tests/stream/ (the first argument; test_python.py without one) under Debian's python3 with torch (CPU), against
# the freshly built libadaptiveload.so and CLI. Skips (exit 0, SKIP line) only when
# torch cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
. "$here/tests/common/python_env.sh"
al_have "$PY" torch "the Python package tests" || exit 0
al_python_env "$here"
export AL_TEST_KERNELS_LIB="$here/dist/libal_kernels.so"  # the kernels alone: no stream API
exec "$PY" "$here/tests/stream/${1:-test_python.py}"
