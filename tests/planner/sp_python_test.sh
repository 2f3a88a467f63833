#!/bin/bash
# Runs tests/planner/sp_python_test.py under the test environment's Python against the freshly
# built libadaptiveload.so and CLI (the binding only: no torch needed).
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
al_python_env "$here"
exec "$(al_python)" "$here/tests/planner/sp_python_test.py"
