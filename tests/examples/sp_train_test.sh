#!/bin/bash
# tests/examples/sp_train_test.py (Ulysses SP of examples/train_dit.py: 2 and 4 gloo processes
# on the CPU; DDP, then the FSDP2 and torchrun modes where this torch has them) under Debian's python3 with torch, against the freshly built CLI and
# libadaptiveload.so (the stream batches of the --smoke corpus). Skips (exit 0, SKIP line) only when torch
# cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
. "$here/tests/common/python_env.sh"
al_have "$PY" torch.distributed "the SP training test" || exit 0
al_python_env "$here"
export OMP_NUM_THREADS=1
"$PY" "$here/tests/examples/sp_train_test.py"
# FSDP2 (fully_shard) and the torchrun launch: each prints "NOT RUN: why" and passes where
# this torch lacks it (Debian's 1.13: no fully_shard; torch.distributed.run's agent fails
# under Python 3.11); dev/sp_fsdp_check.sh runs them on the GPU machine's torch.
"$PY" "$here/tests/examples/sp_train_test.py" --fsdp
"$PY" "$here/tests/examples/sp_train_test.py" --torchrun
"$PY" "$here/tests/examples/sp_train_test.py" --fsdp --torchrun
