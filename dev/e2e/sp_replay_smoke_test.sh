#!/bin/bash
# //dev/e2e:sp_replay_smoke_test: dev/e2e/sp_replay_test.py under Debian's python3 with torch
# (CPU) against the built CLI and library. Skips (exit 0, SKIP line) only when torch cannot be
# imported.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
. "$PWD/tests/common/python_env.sh"
al_have "$PY" torch "the SP replay checks" || exit 0
al_python_env "$PWD"
exec "$PY" "$PWD/dev/e2e/sp_replay_test.py"
