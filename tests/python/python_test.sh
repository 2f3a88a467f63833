#!/bin/bash
# Runs a Python test file of tests/python/ (the first argument; test_python.py without one)
# under the test environment's Python (tools/bootstrap.sh: torch from PyPI, CPU), against the
# freshly built libadaptiveload.so and CLI. Fails when torch cannot be imported.
# AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch "the Python package tests" || exit 1
al_python_env "$here"
export AL_TEST_KERNELS_LIB="$here/dist/libal_kernels.so"  # the kernels alone: no stream API
exec "$PY" "$here/tests/python/${1:-test_python.py}"
