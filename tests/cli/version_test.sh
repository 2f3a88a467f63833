#!/bin/bash
# adaptiveload --version prints the version common/al_version.h defines, and the top-level
# help says so.
set -uo pipefail
BIN=$1 HEADER=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

want=$(sed -n 's/^#define AL_VERSION_STRING "\(.*\)"$/\1/p' "$HEADER")
[ -n "$want" ] || fail "no AL_VERSION_STRING in $HEADER"
out=$("$BIN" --version) || fail "--version exited $?"
[ "$out" = "adaptiveload $want" ] || fail "--version printed '$out', wanted 'adaptiveload $want'"
"$BIN" --help | grep -q -- "--version" || fail "the top-level help does not list --version"
echo "version_test: OK"
