#!/bin/bash
# Runs tests/planner/sp_python_test.py under Debian's python3 against the freshly built
# libadaptiveload.so and CLI (the binding only: no torch needed).
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
al_python_env "$here"
exec /usr/bin/python3 "$here/tests/planner/sp_python_test.py"
