#!/bin/bash
# `bazel run //:adaptiveload -- VERB ...` runs in the runfiles tree with the caller's
# directory in BUILD_WORKING_DIRECTORY: relative paths must resolve there.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/workdir
rm -rf "$T" && mkdir -p "$T/caller" "$T/runfiles"
fail() { echo "FAIL: $*" >&2; exit 1; }

cd "$T/runfiles" || fail "cd"
export BUILD_WORKING_DIRECTORY="$T/caller"
"$BIN" synth --out shards --samples 6 --shards 1 --seed 2 >/dev/null 2>&1 || fail "synth"
[ -d "$T/caller/shards" ] || fail "synth wrote its shards outside the caller's directory"
[ ! -e "$T/runfiles/shards" ] || fail "synth wrote into the runfiles directory"
"$BIN" index -o i.alidx shards >/dev/null 2>&1 || fail "index with relative paths"
"$BIN" plan --index i.alidx --world 1 -o m.alm >/dev/null 2>&1 || fail "plan with relative paths"
[ -f "$T/caller/i.alidx" ] && [ -f "$T/caller/m.alm" ] || fail "outputs not in the caller's directory"
"$BIN" stream --index i.alidx --manifest m.alm --rank 0 --max-batches 1 >/dev/null 2>&1 ||
  fail "stream with relative paths"

export BUILD_WORKING_DIRECTORY="$T/missing"
"$BIN" inspect m.alm >/dev/null 2>"$T/err" && fail "a missing BUILD_WORKING_DIRECTORY was ignored"
grep -q "cannot enter BUILD_WORKING_DIRECTORY '$T/missing'" "$T/err" || fail "message: $(cat "$T/err")"

unset BUILD_WORKING_DIRECTORY
cd "$T/caller" && "$BIN" inspect m.alm >/dev/null 2>&1 || fail "plain run from the caller's directory"
echo "workdir_test: OK"
