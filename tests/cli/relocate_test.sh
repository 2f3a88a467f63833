#!/bin/bash
# A corpus copied to another place (cp: new paths, new mtimes) streams under the manifest
# planned before, with --root FROM=TO; a rewrite of a shard is caught.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/relocate
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" synth --out "$T/data/corpus" --samples 20 --shards 2 --seed 5 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/data/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --json >"$T/before" 2>&1 || fail "stream"

sleep 1
mkdir -p "$T/local" && cp -r "$T/data/corpus" "$T/local/corpus" && mv "$T/data" "$T/gone"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" >/dev/null 2>"$T/err" &&
  fail "streamed from a corpus that is gone"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --json --root "$T/data=$T/local" \
  >"$T/after" 2>"$T/err" || fail "stream --root: $(cat "$T/err")"
grep -q "2 shard paths moved from $T/data to $T/local" "$T/err" || fail "message: $(cat "$T/err")"
cmp -s <(sed -e /seconds/d -e 's/,"cost":{[^}]*}//' "$T/before") <(sed -e /seconds/d -e 's/,"cost":{[^}]*}//' "$T/after") || fail "the copy streamed other batches"

"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --root "/nowhere=$T/local" \
  >/dev/null 2>"$T/err" && fail "a --root matching nothing was accepted"
grep -q "no shard path starts with /nowhere" "$T/err" || fail "message: $(cat "$T/err")"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --root "nothing" >/dev/null 2>&1
[ $? = 2 ] || fail "--root without = is a usage error"

# Same size, other bytes in a member header (its mtime field): caught.
shard=$(ls "$T/local/corpus"/*.tar | head -1)
python3 - "$shard" <<'PY' || fail "could not rewrite a header"
import sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as t:
    m = t.getmembers()[0]
with open(path, "r+b") as f:  # one digit of the ustar mtime field of the first member
    f.seek(m.offset_data - 512 + 137)
    c = f.read(1)
    f.seek(m.offset_data - 512 + 137)
    f.write(b"1" if c != b"1" else b"2")
PY
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --root "$T/data=$T/local" \
  >/dev/null 2>"$T/err" && fail "a rewritten shard streamed"
grep -q "shard changed since indexing" "$T/err" || fail "message: $(cat "$T/err")"
echo "relocate_test: OK"
