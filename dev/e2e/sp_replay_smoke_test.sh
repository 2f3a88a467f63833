#!/bin/bash
# //dev/e2e:sp_replay_smoke_test: dev/e2e/sp_replay_test.py under the test environment's
# Python (tools/bootstrap.sh: torch from PyPI, CPU) against the built CLI and library. Fails
# when torch cannot be imported.
set -euo pipefail
. "$PWD/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch "the SP replay checks" || exit 1
al_python_env "$PWD"
exec "$PY" "$PWD/dev/e2e/sp_replay_test.py"
