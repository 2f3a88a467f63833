#!/bin/bash
# adaptiveload fit: `fit --json` prints one JSON document (also with --mem-capacity); a
# benchmark whose time does not grow with B*S is refused by fit, naming why, and writes no cost
# file; a fully quoted CSV (header and rows) fits as the plain one.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/fit_checks
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

# t = 2 + 2e-3 B S + 1.5e-7 B S^2 ms, peak memory 2e9 + 3.5e5 B S bytes; QUOTE says how fields
# are written (python's csv module, QUOTE_ALL: every field in double quotes).
bench() {
  python3 - "$1" "$2" <<'PY'
import csv, sys
out, how = sys.argv[1], sys.argv[2]
with open(out, "w", newline="") as f:
    w = csv.writer(f, quoting=csv.QUOTE_ALL if how == "quoted" else csv.QUOTE_MINIMAL)
    w.writerow(["B", "S", "step_ms", "peak_mem_bytes"])
    for S in (1024, 4096, 16384, 65536):
        for B in (1, 2, 4, 8, 16):
            if B * S < 4096:
                continue
            t = 2 + 2e-3 * B * S + 1.5e-7 * B * S * S if how != "flat" else 40 - 1e-5 * B * S
            w.writerow([B, S, "%.6f" % t, int(2e9 + 3.5e5 * B * S)])
PY
}
bench "$T/plain.csv" plain
bench "$T/quoted.csv" quoted
bench "$T/flat.csv" flat
head -1 "$T/quoted.csv" | grep -q '^"B","S","step_ms","peak_mem_bytes"' || fail "not quoted: $(head -1 "$T/quoted.csv")"

# --json: exactly one JSON document, with M_mem in it when derived.
"$BIN" fit --bench "$T/plain.csv" --json --mem-capacity 80e9 >"$T/out" 2>"$T/err" ||
  fail "fit --json --mem-capacity: $(cat "$T/err")"
python3 - "$T/out" <<'PY' || fail "fit --json --mem-capacity output: $(cat "$T/out")"
import json, sys
text = open(sys.argv[1]).read()
m = json.loads(text)  # one document: raises "Extra data" on two
assert text.count("\n") == 1 and text.endswith("}\n"), repr(text)
assert m["mem_capacity"] == 80e9 and m["mem_safety"] == 0.9, m
assert m["mem_tokens"] == int((80e9 * 0.9 - m["memory"]["m0_bytes"]) // m["memory"]["m1_bytes_per_token"]), m
assert m["model"] == "poly2" and m["rows"] == 18, m
PY
# Without --mem-capacity the object has no mem_* keys (unchanged).
"$BIN" fit --bench "$T/plain.csv" --json >"$T/out2" 2>"$T/err" || fail "fit --json: $(cat "$T/err")"
python3 - "$T/out" "$T/out2" <<'PY' || fail "fit --json without --mem-capacity: $(cat "$T/out2")"
import json, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:])
for k in ("mem_capacity", "mem_safety", "mem_tokens"):
    del a[k]
assert a == b, (a, b)
PY

# A fully quoted CSV fits exactly as the plain one.
"$BIN" fit --bench "$T/quoted.csv" --json >"$T/out3" 2>"$T/err" || fail "quoted CSV: $(cat "$T/err")"
sed -e "s|$T/quoted.csv|X|" "$T/out3" >"$T/a" && sed -e "s|$T/plain.csv|X|" "$T/out2" >"$T/b"
cmp -s "$T/a" "$T/b" || fail "quoted and plain CSV fit differently: $(cat "$T/a") vs $(cat "$T/b")"

# Time shrinking with B*S: fit refuses it, naming the file and the reason; nothing is written.
"$BIN" fit --bench "$T/flat.csv" -o "$T/flat.alcost" >"$T/out" 2>"$T/err" && fail "flat benchmark fitted"
grep -q "fit: $T/flat.csv: the .* fit cannot be planned with: .*per-sample cost does not grow with S" "$T/err" ||
  fail "flat benchmark message: $(cat "$T/err")"
[ ! -e "$T/flat.alcost" ] || fail "a refused fit wrote its cost file"

# A forged cost file (p = 100) is refused by al_cost_load, which plan --cost calls:
# tests/cost/cost_bounds_test.cc.
echo "PASS"
