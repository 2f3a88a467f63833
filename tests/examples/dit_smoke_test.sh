#!/bin/bash
# examples/train_dit.py --smoke and dev/e2e/run_arms.py --smoke on the CPU under Debian's
# python3 with torch, against the freshly built CLI and libadaptiveload.so. Skips (exit 0,
# SKIP line) only when torch cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch; train_dit.py --smoke and the replay smoke did not run"
  "$PY" -c "import torch" 2>&1 | tail -1 || true
  exit 0
fi
export ADAPTIVELOAD_LIB="$here/dist/libadaptiveload.so"
export ADAPTIVELOAD_BIN="$here/adaptiveload"
export PYTHONPATH="$here/python"
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
# Under --config=asan the library is instrumented: load the runtime first (as python_test.sh).
syms=$(nm -D "$ADAPTIVELOAD_LIB" 2>/dev/null || true)
if grep -q " U __asan_init" <<<"$syms"; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
fi
T=${TEST_TMPDIR:-$(mktemp -d)}/dit
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== train_dit.py --smoke (one process)"
"$PY" "$here/examples/train_dit.py" --smoke --steps 3 --workdir "$T/w" --trace "$T/trace.jsonl" \
  --step-log "$T/steps.jsonl" 2>&1 | tee "$T/one.log"
grep -q "done: 3 of 3 steps, losses finite" "$T/one.log" || fail "train_dit.py --smoke did not finish 3 finite steps"
grep -q "^data: typed members" "$T/one.log" || grep -q "^data: raw payload" "$T/one.log" || fail "no data line"
[ "$(grep -c '"ms"' "$T/trace.jsonl")" -ge 3 ] || fail "trace: $(cat "$T/trace.jsonl")"
"$PY" - "$T/trace.jsonl" "$T/steps.jsonl" <<'PY' || fail "trace or step log fields"
import json, math, sys
tr = [json.loads(l) for l in open(sys.argv[1])]
for r in tr:
    for k in ("step", "rank", "micro", "bucket", "B", "S", "tokens", "ms"):
        assert k in r, (k, r)
    assert r["tokens"] == r["B"] * r["S"] and r["ms"] > 0, r
assert [r.get("warmup", False) for r in tr if r["micro"] == 0][:3] == [True, True, False], tr
st = [json.loads(l) for l in open(sys.argv[2])]
assert len(st) == 3 and all(math.isfinite(s["loss"]) for s in st), st
PY

echo "== train_dit.py --smoke, 2 processes (gloo DDP)"
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$PY" "$here/examples/train_dit.py" --smoke --steps 2 --workdir "$T/w" >"$T/ddp$r.log" 2>&1 &
  pids[$r]=$!
done
for r in 0 1; do wait "${pids[$r]}" || { cat "$T/ddp$r.log"; fail "DDP rank $r"; }; done
cat "$T/ddp0.log"
grep -q "parallel: DDP over 2 ranks" "$T/ddp0.log" || fail "DDP not used"
grep -q "done: 2 of 2 steps, losses finite" "$T/ddp0.log" || fail "DDP run"

echo "== dev/e2e/run_arms.py --smoke (corpus, plans, W = 2 replays, refit)"
"$PY" "$here/dev/e2e/run_arms.py" --smoke --workdir "$T/e2e" --out "$T/out" --bin "$here/adaptiveload" \
  2>&1 | grep -v "^replay W" | tee "$T/arms.log"
grep -q "(OK)$" "$T/arms.log" || fail "run_arms.py --smoke"
"$PY" - "$T/out" <<'PY' || fail "run_arms outputs"
import json, os, sys
out = sys.argv[1]
s = json.load(open(os.path.join(out, "summary.json")))
arms = [r["arm"] for r in s["rows"]]
assert arms == ["equal-token", "ours", "ours-refit"], arms
assert "paper" in s["skipped_arms"] or "paper" in arms, s["skipped_arms"]
for r in s["rows"]:
    assert r["steps"] > 0 and r["tokens_per_s"] > 0, r
for name in ("equal-token-w2", "ours-w2", "ours-refit-w2"):
    d = json.load(open(os.path.join(out, name + ".json")))
    assert d["loss_finite"] and len(d["per_step"]) == d["steps"], name
    assert d["pred_vs_measured"]["n"] > 0 and "pearson" in d and "comm" in d, name
assert s["refit"]["fit"]["family"] in ("power", "poly2"), s["refit"]
svg = open(os.path.join(out, "steps-w2.svg")).read()
assert svg.startswith("<svg") and svg.count("<polyline") == 9, svg[:200]
PY
echo "dit_smoke_test: OK"
