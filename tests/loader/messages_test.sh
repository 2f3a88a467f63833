#!/usr/bin/env bash
# Index messages end to end: `inspect INDEX` shows real reasons (grouped by kind) and
# `--rejected` lists every entry; a truncated shard's offsets lie within the file; relative
# shard paths are stored normalised so that `stream --root` relocates them.
set -uo pipefail
BIN="$1"
T="${TEST_TMPDIR:-/tmp}/messages"
rm -rf "$T" && mkdir -p "$T"
fails=0
check() { # description, condition...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

"$BIN" synth --out "$T/c" --samples 40 --shards 1 --seed 1 2>/dev/null
size=$(stat -c %s "$T/c/shard-000000.tar")
cp "$T/c/shard-000000.tar" "$T/cut.tar"
truncate -s $((size / 2)) "$T/cut.tar"
printf 'junk' > "$T/j1.tar"
printf 'junk' > "$T/j2.tar"
"$BIN" index -o "$T/cut.alidx" "$T/cut.tar" "$T/j1.tar" "$T/j2.tar" 2>"$T/index.err"
check "index with rejections: exit 0" test $? = 0

"$BIN" inspect "$T/cut.alidx" > "$T/inspect.txt"
check "inspect INDEX: no reason with numbers replaced by N" \
  bash -c "! grep -q 'N bytes' '$T/inspect.txt'"
check "inspect INDEX: a group of two shows an example" \
  grep -q "^ *2  e.g. not a readable tar archive" "$T/inspect.txt"
check "inspect INDEX: the example keeps its numbers" \
  grep -q "extends past the end of the file ($((size / 2)) bytes)" "$T/inspect.txt"

"$BIN" inspect "$T/cut.alidx" --rejected > "$T/rejected.txt"
check "inspect INDEX --rejected: exit 0" test $? = 0
check "--rejected: one line per entry" test "$(grep -c . "$T/rejected.txt")" = \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rejected"])' \
     <("$BIN" inspect "$T/cut.alidx" --json))"
check "--rejected: shard, sample, member, byte, reason" \
  grep -q "^$T/cut.tar: sample '[0-9-]*', member '[0-9-]*\.latent' at byte [0-9]*: member data" \
  "$T/rejected.txt"
check "--rejected: shard-level entries" grep -q "^$T/j2.tar: at byte 0: not a readable tar" \
  "$T/rejected.txt"
"$BIN" inspect "$T/cut.alidx" --rejected --json > "$T/rejected.json"
check "--rejected --json: every entry with its fields" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "index_rejected" and d["rejected"] == len(d["entries"]) >= 3, d
e = d["entries"][0]
assert set(e) == {"shard", "member", "key", "offset", "reason"}, e
assert e["shard"].endswith("/cut.tar") and e["member"].endswith(".latent") and e["key"], e
assert d["entries"][-1]["shard"].endswith("/j2.tar"), d
' "$T/rejected.json"
check "inspect INDEX --json: groups carry an example" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = d["rejected_by_reason"]
assert all("example" in x and "N" not in x["example"].split() for x in g), g
' <("$BIN" inspect "$T/cut.alidx" --json)

echo "messages_test: $fails failed"
test "$fails" = 0
