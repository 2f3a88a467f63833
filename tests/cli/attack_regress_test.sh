#!/bin/bash
# Defects dev/attack/run.py found in the CLI, each checked the way the attack saw it:
#  * a verb whose standard output cannot be written (a full disk: /dev/full) exits 1 naming
#    standard output, instead of 0 with its report, JSON or listing lost;
#  * `inspect INDEX` of an index without rejected entries passes no NULL to qsort (undefined
#    behaviour that UBSan reports under --config=asan; exit 0 with the summary).
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/attack_regress
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" synth --out "$T/shards" --samples 12 --shards 2 --seed 4 >/dev/null 2>&1 || fail "synth"
"$BIN" index -o "$T/i.alidx" "$T/shards" >/dev/null 2>&1 || fail "index"
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail "plan"

"$BIN" inspect "$T/i.alidx" >"$T/out" 2>"$T/err" || fail "inspect INDEX: $(cat "$T/err")"
grep -q "rejected  0" "$T/out" || fail "inspect INDEX printed: $(head -5 "$T/out")"
"$BIN" inspect "$T/i.alidx" --json >/dev/null 2>"$T/err" || fail "inspect INDEX --json: $(cat "$T/err")"

if [ -w /dev/full ]; then
  for args in "inspect $T/m.alm --json" "inspect $T/m.alm --jsonl" "inspect $T/i.alidx" \
    "stream --index $T/i.alidx --manifest $T/m.alm --jsonl" "fit --default --json" \
    "plan --index $T/i.alidx --world 1 -o $T/m2.alm --json" "index -o $T/i2.alidx --json $T/shards" \
    "--version" "plan --help"; do
    # shellcheck disable=SC2086
    "$BIN" $args >/dev/full 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] || fail "'$args' >/dev/full exited $rc (want 1): $(cat "$T/err")"
    grep -q "standard output" "$T/err" || fail "'$args' >/dev/full: message $(cat "$T/err")"
  done
  "$BIN" inspect "$T/m.alm" --json >/dev/null 2>&1 || fail "inspect to /dev/null must still work"
else
  echo "attack_regress_test: no writable /dev/full, the stdout checks skipped"
fi
echo "attack_regress_test: OK"
