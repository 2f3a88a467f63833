#!/bin/bash
# tests/examples/readme_loop_test.py (README.md's training loop under torchrun, 2 gloo ranks
# on the CPU: lock-step, each sample once per epoch, a stop and an exact resume) under the
# test environment's Python (tools/bootstrap.sh: torch from PyPI), against the freshly built
# CLI and libadaptiveload.so. Fails when torch cannot be imported. AL_TEST_PYTHON overrides
# the interpreter.
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch.distributed.run "the README loop test" || exit 1
al_python_env "$here"
export OMP_NUM_THREADS=1
exec "$PY" "$here/tests/examples/readme_loop_test.py"
