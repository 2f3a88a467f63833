#!/bin/bash
# //tools:import_cycles_test: tools/import_cycles.py over python/, tests/, examples/ and dev/
# of the source tree (found through the script's real path: the runfiles link points into the
# checkout) under the system python3 (stdlib only). Fails naming every cycle.
set -euo pipefail
exec python3 "$PWD/tools/import_cycles.py"
