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
# examples/shape_bench.py --sp-degrees on the CPU (tiny shapes; timings are not checked): the
# metadata line, the d column, a degree that does not divide the heads skipped, per-rank tokens
# capped by --max-tokens; the benchmark reader takes the file. Needs torch (the test environment).
. "$(dirname "$0")/../common/python_env.sh"
PY3=$(al_python)
al_require "$PY3" torch "the shape_bench.py part" || exit 1
{
  "$PY3" examples/shape_bench.py --device cpu --dtype fp32 --dim 64 --heads 4 --ffn 128 --depth 1 \
    --batches 1,2 --seqs 16,30 --sp-degrees 1,2,8 --max-tokens 30 --warmup 1 --iters 2 --text-len 8 --text-dim 16 \
    -o "$T/cpu.csv" 2>"$T/err" || fail "shape_bench.py: $(cat "$T/err")"
  grep -q "skipped B=\* S=\* d=8: 4 heads are not divisible by d" "$T/err" || fail "d = 8 not skipped: $(cat "$T/err")"
  "$PY3" - "$T/cpu.csv" <<'PY' || fail "shape_bench.py CSV: $(cat "$T/cpu.csv")"
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].startswith("# shape_bench: hidden=64 heads=4 ffn=128 layers=1 text_len=8 text_dim=16 dtype=fp32 "
                          "dtype_bytes=4 device=cpu"), lines[0]
rows = list(csv.DictReader(lines[1:]))
assert list(rows[0]) == ["B", "S", "d", "step_ms"], rows[0]
got = sorted((int(r["B"]), int(r["S"]), int(r["d"])) for r in rows)
# d = 1: B * S <= 30 keeps (1, 16) and (1, 30); d = 2: B * ceil(S / 2) <= 30 keeps all four.
assert got == [(1, 16, 1), (1, 16, 2), (1, 30, 1), (1, 30, 2), (2, 16, 2), (2, 30, 2)], got
assert all(float(r["step_ms"]) > 0 for r in rows)
PY
  # --fill: batches doubling past --batches up to floor(--max-tokens / ceil(S / d)), and that cap
  # (d = 1, S = 4: 1, 2, 4, 7; d = 2: 1, 2, 4, 8, 14), without cross-attention (--text-len 0).
  "$PY3" examples/shape_bench.py --device cpu --dtype fp32 --dim 64 --heads 4 --ffn 128 --depth 1 \
    --batches 1 --seqs 4 --sp-degrees 1,2 --max-tokens 28 --fill --text-len 0 --warmup 0 --iters 1 \
    -o "$T/fill.csv" 2>"$T/err" || fail "shape_bench.py --fill: $(cat "$T/err")"
  got=$(awk -F, 'NR > 2 {printf "%s/%s ", $3, $1}' "$T/fill.csv")
  [ "$got" = "1/1 1/2 1/4 1/7 2/1 2/2 2/4 2/8 2/14 " ] || fail "--fill batches: $got"
  grep -q "text_len=0 " "$T/fill.csv" || fail "--text-len 0 not in the metadata: $(head -1 "$T/fill.csv")"
  "$PY3" examples/shape_bench.py --device cpu --dim 64 --heads 4 --ffn 128 --text-len -1 -o "$T/x.csv" \
    2>"$T/err" && fail "--text-len -1 accepted"
  grep -q "text-len must be >= 0" "$T/err" || fail "--text-len -1: $(cat "$T/err")"
}
echo "PASS"
