#!/usr/bin/env bash
# Index messages end to end: `inspect INDEX` shows real reasons (grouped by kind) and
# `--rejected` lists every entry; a truncated shard's offsets lie within the file; relative
# shard paths are stored normalised so that `stream --root` relocates them.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
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
check "truncated shard: every offset lies within the file" python3 -c '
import json, sys
d, size = json.load(open(sys.argv[1])), int(sys.argv[2])
cut = [e for e in d["entries"] if e["shard"].endswith("/cut.tar")]
assert len(cut) == 2 and all(e["offset"] <= size for e in cut), (size, cut)
assert cut[1]["member"] == "" and cut[1]["offset"] == size, cut
want = "data ends at the end of the file (byte %d) inside the last member" % size
assert want in cut[1]["reason"] and "member boundary" not in cut[1]["reason"], cut
' "$T/rejected.json" $((size / 2))
check "inspect INDEX --json: groups carry an example" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = d["rejected_by_reason"]
assert all("example" in x and "N" not in x["example"].split() for x in g), g
' <("$BIN" inspect "$T/cut.alidx" --json)

# Relative shard paths with "..": stored normalised, so that --root moves them.
mkdir -p "$T/data/errs" && "$BIN" synth --out "$T/data/corpus" --samples 20 --shards 2 --seed 5 \
  >/dev/null 2>&1
printf 'junk' > "$T/data/corpus/zz-junk.tar"
(cd "$T/data/errs" && "$BIN" index -o "$T/rel.alidx" ../../data/errs/../corpus 2>/dev/null)
check "index of a relative path with ..: exit 0" test $? = 0
"$BIN" inspect "$T/rel.alidx" --rejected > "$T/rel.txt"
check "stored path is normal" grep -q "^$T/data/corpus/zz-junk.tar: at byte 0: " "$T/rel.txt"
"$BIN" plan --index "$T/rel.alidx" --world 1 -o "$T/rel.alm" >/dev/null 2>&1
"$BIN" stream --index "$T/rel.alidx" --manifest "$T/rel.alm" --json >"$T/before" 2>/dev/null
mkdir -p "$T/local" && cp -r "$T/data/corpus" "$T/local/corpus" && mv "$T/data" "$T/gone"
"$BIN" stream --index "$T/rel.alidx" --manifest "$T/rel.alm" --json --root "$T/data=$T/local" \
  >"$T/after" 2>"$T/err"
check "stream --root of the relocated corpus: exit 0" test $? = 0
check "--root: the same batches" cmp -s <(sed -e /seconds/d -e 's/,"cost":{[^}]*}//' "$T/before") \
  <(sed -e /seconds/d -e 's/,"cost":{[^}]*}//' "$T/after")
# A symlinked directory keeps its name (lexical, not the realpath).
ln -s "$T/local" "$T/mnt"
(cd "$T/mnt/corpus" && "$BIN" index -o "$T/ln.alidx" . 2>/dev/null)
"$BIN" inspect "$T/ln.alidx" --rejected > "$T/ln.txt"
check "a symlinked directory keeps the user's name" grep -q "^$T/mnt/corpus/zz-junk.tar: " \
  "$T/ln.txt"
# ".." after a symlink: the lexical path would name another file, so the real one is stored.
mkdir -p "$T/other/corpus" && ln -s "$T/local/corpus" "$T/other/link"
(cd "$T" && "$BIN" index -o "$T/dd.alidx" other/link/../corpus/zz-junk.tar 2>/dev/null)
"$BIN" inspect "$T/dd.alidx" --rejected > "$T/dd.txt"
check "'..' after a symlink: the real path" grep -q "^$T/local/corpus/zz-junk.tar: " "$T/dd.txt"

# Step ranges name the last step held, not one past it.
"$BIN" synth --out "$T/pc" --samples 200 --shards 1 --payload none --seed 2 >/dev/null 2>&1
"$BIN" index -o "$T/pc.alidx" "$T/pc" >/dev/null 2>&1
"$BIN" plan --index "$T/pc.alidx" --world 1 -o "$T/pc.alm" >/dev/null 2>&1
steps=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"])' \
  < <("$BIN" inspect "$T/pc.alm" --json))
"$BIN" plan --resume-from "$T/pc.alm" --at-step 99999 --world 1 -o "$T/x.alm" 2>"$T/err"
check "re-plan: holds steps 0..last" grep -q "holds steps 0\.\.$((steps - 1)) (a re-plan starts at 0\.\.$steps); cannot re-plan from step 99999" "$T/err"
"$BIN" plan --index "$T/pc.alidx" --world 1 --start-step 99999 -o "$T/x.alm" 2>"$T/err"
check "start step: the plan's steps 0..last" grep -q "past the plan's steps 0\.\.$((steps - 1)) (a plan may start at 0\.\.$steps" "$T/err"

echo "messages_test: $fails failed"
test "$fails" = 0
