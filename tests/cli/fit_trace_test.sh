#!/bin/bash
# adaptiveload fit --trace: a training run's measured micro-batch times refit the cost model
# that plan then uses: the closed loop.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/fit_trace
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

# t = 2 + 3e-6 * B * S^1.25 ms, 9 measurements per shape, one of them 4x slow (a stall).
awk 'BEGIN {
  print "{\"warmup\": true, \"B\": 1, \"S\": 2048, \"ms\": 500}";
  split("1024 2048 4096 8192 16384 32768", S, " ");
  for (i = 1; i <= 6; i++) for (B = 1; B <= 8; B *= 2) for (k = 0; k < 9; k++) {
    t = 2 + 3e-6 * B * exp(1.25 * log(S[i]));
    if (k == 4) t *= 4;
    printf "{\"step\": %d, \"rank\": 0, \"micro\": 0, \"B\": %d, \"S\": %d, \"ms\": %.6f}\n", k, B, S[i], t * (1 + (k % 3 - 1) * 0.002);
  }
  printf "{\"step\": 9, \"B\": 2, \"S\"";
}' >"$T/trace.jsonl"

"$BIN" fit --trace "$T/trace.jsonl" --model power --min-tokens 1 -o "$T/cost.alcost" --json \
  >"$T/out" 2>"$T/err" || fail "fit --trace: $(cat "$T/err")"
grep -q "216 measurements in 24 (B, S) shapes, 1 warm-up, 1 skipped; first: $T/trace.jsonl: line 218" "$T/err" ||
  fail "trace summary: $(cat "$T/err")"
python3 - "$T/out" <<'PY' || fail "fitted model: $(cat "$T/out")"
import json, sys
m = json.loads(open(sys.argv[1]).readline())
p = m["fit"]["params"]
assert abs(p["p"] - 1.25) < 0.01, p
assert m["fit"]["median_rel_err"] < 0.01, m
assert m["rows"] == 24, m
PY
[ -s "$T/cost.alcost" ] || fail "no cost file written"

"$BIN" synth --out "$T/shards" --samples 40 --shards 1 --seed 3 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/shards" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 2 --cost "$T/cost.alcost" -o "$T/m.alm" >/dev/null 2>&1 ||
  fail "plan with the refitted model"
"$BIN" inspect "$T/m.alm" --json | grep -q '"cost_model": "power"' || fail "plan did not use it"

printf '{"B": 1, "S": 1024, "ms": 1}\n' >"$T/short.jsonl"
"$BIN" fit --trace "$T/short.jsonl" >/dev/null 2>"$T/err" && fail "one shape fitted"
grep -q "1 distinct (B, S) shapes" "$T/err" || fail "short trace message: $(cat "$T/err")"
echo "fit_trace_test: OK"
