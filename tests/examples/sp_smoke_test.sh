#!/bin/bash
# tests/examples/sp_smoke_test.py (examples/train_dit.py --smoke on plan --sp-degrees manifests: 2 and 4 gloo processes
# on the CPU) under the test environment's Python (tools/bootstrap.sh: torch from PyPI), against the
# freshly built CLI and libadaptiveload.so (it plans and reads the --smoke corpus). Fails when
# torch cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch.distributed "the SP smoke test" || exit 1
al_python_env "$here"
export OMP_NUM_THREADS=1
exec "$PY" "$here/tests/examples/sp_smoke_test.py"
