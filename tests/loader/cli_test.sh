#!/usr/bin/env bash
# `adaptiveload synth` and `adaptiveload index` end to end: exit codes, --json,
# the rejected list, --strict, brace patterns, --dali-idx, determinism.
set -uo pipefail
BIN="$1"
T="${TEST_TMPDIR:-/tmp}/cli"
rm -rf "$T" && mkdir -p "$T"
fails=0
check() { # description, condition...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

"$BIN" synth --out "$T/c" --samples 300 --shards 3 --payload none --seed 4 2>/dev/null
check "synth exit 0" test $? = 0
"$BIN" synth --out "$T/c2" --samples 300 --shards 3 --payload none --seed 4 --threads 1 2>/dev/null
check "synth byte-identical" cmp -s "$T/c/shard-000002.tar" "$T/c2/shard-000002.tar"

out=$("$BIN" index --json -o "$T/a.alidx" "$T/c" 2>"$T/err")
check "index exit 0" test $? = 0
check "json summary" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["samples"] == 300 and d["shards"] == 3 and d["rejected"] == 0 and d["bytes"] > 0 and d["seconds"] >= 0, d
' "$out"
check "quiet stderr with --json and nothing rejected" test ! -s "$T/err"

out=$("$BIN" index --json --threads 1 -o "$T/b.alidx" "$T/c/shard-{000000..000002}.tar" 2>/dev/null)
check "brace pattern: same index file" cmp -s "$T/a.alidx" "$T/b.alidx"

printf 'not a tar at all' > "$T/junk.tar"
"$BIN" index -o "$T/j.alidx" "$T/c" "$T/junk.tar" 2>"$T/err"
check "rejections alone: exit 0" test $? = 0
check "rejected list names shard and reason" grep -q "junk.tar: at byte 0: not a readable tar archive" "$T/err"
"$BIN" index --strict -o "$T/s.alidx" "$T/c" "$T/junk.tar" 2>/dev/null
check "--strict with rejections: exit 1" test $? = 1
check "--strict still writes the index" test -s "$T/s.alidx"
"$BIN" index -o "$T/n.alidx" "$T/junk.tar" 2>/dev/null
check "no readable shard: exit 1" test $? = 1

mkdir -p "$T/many"
for i in $(seq 25); do printf 'x' > "$T/many/bad-$i.tar"; done
"$BIN" index -o "$T/m.alidx" "$T/c" "$T/many" 2>"$T/err"
check "first 20 rejections, then a count" grep -q "\.\.\. and 5 more" "$T/err"

"$BIN" index --dali-idx "$T/dali" -o "$T/d.alidx" "$T/c" 2>/dev/null
check "dali index header" test "$(head -1 "$T/dali/shard-000001.idx")" = "v1.2 100"
check "dali index lines" test "$(wc -l < "$T/dali/shard-000001.idx")" = 101

"$BIN" index -o "$T/x.alidx" 2>/dev/null
check "no shard: exit 2" test $? = 2
"$BIN" index "$T/c" 2>/dev/null
check "no -o: exit 2" test $? = 2
"$BIN" index --threads 0 -o "$T/x.alidx" "$T/c" 2>/dev/null
check "bad --threads: exit 2" test $? = 2
"$BIN" synth --samples 5 2>/dev/null
check "synth without --out: exit 2" test $? = 2
# Issue 13: strtoull skips leading white space, so " -1" parsed as 2^64-1.
for v in " -1" "-1" " 5" "+5" "5 " "" "0x10" "18446744073709551616"; do
  "$BIN" synth --out "$T/seed" --samples 5 --payload none --seed "$v" 2>/dev/null
  check "synth --seed '$v': exit 2" test $? = 2
done
"$BIN" synth --out "$T/seed" --samples 5 --payload none --seed 18446744073709551615 2>/dev/null
check "synth --seed 2^64-1: exit 0" test $? = 0

printf 'B,S,ms\n1,256,1.0\n' > "$T/bench.csv"
for v in inf nan " 1e9" -inf; do
  "$BIN" fit --mem-capacity "$v" "$T/bench.csv" 2>/dev/null
  check "fit --mem-capacity '$v': exit 2" test $? = 2
done

"$BIN" index --help > "$T/help"
check "index --help" grep -q "dali-idx" "$T/help"
"$BIN" synth --help > "$T/help"
check "synth --help" grep -q "payload" "$T/help"

echo "$fails failed"
test "$fails" = 0
