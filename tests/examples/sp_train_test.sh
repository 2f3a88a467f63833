#!/bin/bash
# tests/examples/sp_train_test.py (Ulysses SP of examples/train_dit.py: 2 and 4 gloo processes
# on the CPU: DDP and FSDP2, each started directly and by torchrun) under the test environment's
# Python (tools/bootstrap.sh: torch from PyPI), against the freshly built CLI and
# libadaptiveload.so (the stream batches of the --smoke corpus). Fails when torch cannot be
# imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch.distributed "the SP training test" || exit 1
al_python_env "$here"
export OMP_NUM_THREADS=1
"$PY" "$here/tests/examples/sp_train_test.py"
"$PY" "$here/tests/examples/sp_train_test.py" --fsdp
"$PY" "$here/tests/examples/sp_train_test.py" --torchrun
"$PY" "$here/tests/examples/sp_train_test.py" --fsdp --torchrun
