#!/bin/bash
# tests/examples/sp_smoke_test.py (examples/train_dit.py --smoke on plan --sp-degrees manifests: 2 and 4 gloo processes
# on the CPU) under Debian's python3 with torch, against the freshly built CLI and
# libadaptiveload.so (it plans and reads the --smoke corpus). Skips (exit 0, SKIP line) only when torch
# cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
. "$here/tests/common/python_env.sh"
al_have "$PY" torch.distributed "the SP smoke test" || exit 0
al_python_env "$here"
export OMP_NUM_THREADS=1
exec "$PY" "$here/tests/examples/sp_smoke_test.py"
