#!/bin/bash
# adaptiveload fit on the shipped H200 SP benchmark (examples/shape_bench.py --sp-degrees): the
# band table and the per-degree fits in text and --json, the all-to-all bytes from the
# benchmark's metadata line or --sp-a2a-bytes-per-token, the link rate; bad --sp-* values and a
# bad d column refused, naming the option or the line and column.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SP=$2
T=${TEST_TMPDIR:-$(mktemp -d)}/cost_sp_cli
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" fit --bench "$SP" -o "$T/sp.cost" >"$T/out" 2>"$T/err" || fail "fit: $(cat "$T/err")"
grep -q "held-out relative error by tokens per sample" "$T/out" || fail "no band table: $(cat "$T/out")"
for d in 1 2 4; do
  grep -Eq "^    $d +[0-9.]+% " "$T/out" || fail "no band row for d = $d: $(cat "$T/out")"
done
grep -q "d = 2    floor" "$T/out" || fail "no d = 2 fit: $(cat "$T/out")"
grep -q "SP all-to-all: 24576 bytes per token at 350 GB/s (default)" "$T/out" ||
  fail "all-to-all line: $(cat "$T/out")"
[ -s "$T/sp.cost" ] || fail "no cost file"

"$BIN" fit --bench "$SP" --json --sp-link-gbps 100 --sp-a2a-bytes-per-token 5e4 >"$T/j" 2>"$T/err" ||
  fail "fit --json: $(cat "$T/err")"
python3 - "$T/j" <<'PY' || fail "fit --json: $(cat "$T/j")"
import json, sys
m = json.loads(open(sys.argv[1]).read())
assert m["model"] == "floor", m["model"]
assert [b["lo"] for b in m["bands"]] == [0, 2048, 8192, 32768], m["bands"]
assert sum(b["rows"] for b in m["bands"]) == m["all_rows"]["rows"] == m["rows"], m
sp = m["sp"]
assert sp["a2a_bytes_per_token"] == 5e4 and sp["link_gbps"] == 100, sp
assert sp["family"] == "floor" and [f["d"] for f in sp["fits"]] == [2, 4], sp
for f in sp["fits"]:
    assert f["fit"]["family"] == "floor" and f["rows"] >= 8, f
    assert all(b["median_rel_err"] < 0.05 for b in f["bands"] if b["rows"]), f
PY

for bad in -1 0 nan inf abc; do
  "$BIN" fit --bench "$SP" --sp-link-gbps "$bad" >"$T/out" 2>"$T/err" && fail "--sp-link-gbps $bad accepted"
  grep -q -- "--sp-link-gbps" "$T/err" || fail "--sp-link-gbps $bad: $(cat "$T/err")"
  "$BIN" fit --bench "$SP" --sp-a2a-bytes-per-token "$bad" >"$T/out" 2>"$T/err" &&
    fail "--sp-a2a-bytes-per-token $bad accepted"
  grep -q -- "--sp-a2a-bytes-per-token" "$T/err" || fail "--sp-a2a-bytes-per-token $bad: $(cat "$T/err")"
done

# A degree that is not a power of two, named by line and column.
{ grep -v '^#' "$SP" | head -20; echo "1,1024,3,5.0,100"; } >"$T/bad.csv"
"$BIN" fit --bench "$T/bad.csv" >"$T/out" 2>"$T/err" && fail "d = 3 accepted"
grep -q "bad.csv: line 21 column 3: d = 3 must be a power of two in \[1, 1024\]" "$T/err" ||
  fail "d = 3: $(cat "$T/err")"
echo "PASS"
