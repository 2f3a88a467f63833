#!/usr/bin/env bash
# Runs every test: installs missing Debian packages, checks the C/C++/CUDA style
# (tools/format.sh --check), replays the fuzzing seeds and regression inputs
# (tools/fuzz.sh --regress: libFuzzer harnesses of tests/fuzz/ built with clang
# and ASan/UBSan), then `bazel test //...`, then prints
# `tests: N passed, M failed` summed over all test.xml files.
# Extra arguments go to bazel (e.g. --config=asan).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh || exit 1
tools/format.sh --check
format_rc=$?
tools/fuzz.sh --regress
fuzz_rc=$?
rm -rf bazel-testlogs/ 2>/dev/null || true
bazel test //... "$@"
rc=$?
python3 tools/test_summary.py bazel-testlogs --bazel-rc "$rc" || exit 1
[ "$format_rc" -eq 0 ] || exit "$format_rc"
exit "$fuzz_rc"
