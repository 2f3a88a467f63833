#!/bin/bash
# examples/train_dit.py --smoke and dev/e2e/run_arms.py --smoke on the CPU under the test
# environment's Python (tools/bootstrap.sh: torch from PyPI), against the freshly built CLI and
# libadaptiveload.so. Fails when torch cannot be imported. AL_TEST_PYTHON overrides the interpreter.
set -euo pipefail
here=$(pwd)
. "$here/tests/common/python_env.sh"
PY=$(al_python)
al_require "$PY" torch "train_dit.py --smoke and the replay smoke" || exit 1
al_python_env "$here"
export OMP_NUM_THREADS=1
T=${TEST_TMPDIR:-$(mktemp -d)}/dit
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== dit_model.py: packed samples are independent; the loss masks padding and follows the README's normalisation"
"$PY" - "$here/examples" <<'PY' || fail "model checks"
import sys
sys.path.insert(0, sys.argv[1])
import torch
import dit_model as M
import train_dit as td

torch.manual_seed(0)
cfg = M.DiTConfig.smoke(blocks=2)
m = M.PackedDiT(cfg, attention=M.make_attention("auto", "cpu"))
grids = [(2, 3, 4), (2, 3, 4), (1, 5, 2)]
cu = torch.tensor([0, 24, 48, 58], dtype=torch.int32)
x, t = torch.randn(58, 64), torch.rand(3)
text, cut = torch.randn(17, 32), torch.tensor([0, 5, 14, 17], dtype=torch.int32)
y = m(x, cu, grids, t, text, cut, [5, 9, 3])
for i, (a, b, ta, tb) in enumerate([(0, 24, 0, 5), (24, 48, 5, 14), (48, 58, 14, 17)]):
    one = m(x[a:b], torch.tensor([0, b - a], dtype=torch.int32), [grids[i]], t[i:i + 1], text[ta:tb],
            torch.tensor([0, tb - ta], dtype=torch.int32))
    assert (y[a:b] - one).abs().max() < 1e-5, i
M._check_backend(m.attention, torch.device("cpu"), torch.float32)

# loss: (W / step_tokens) * sum over real tokens; the padding sample (2) contributes nothing
p = td.Prepared()
p.x0, p.cu, p.grids, p.n, p.S = x, cu, grids, 3, 24
p.text, p.cu_text, p.text_lengths = text, cut, [5, 9, 3]
p.seg = torch.repeat_interleave(torch.arange(3), torch.tensor([24, 24, 10]))
p.keep = torch.tensor([True, True, False])[p.seg]
p.step_tokens = 100
g = torch.Generator().manual_seed(1)
loss, total = td.flow_loss(m, p, 4, g)
assert abs(float(loss) - 4 * float(total) / 100) < 1e-6
g = torch.Generator().manual_seed(1)
t_ = td.sample_t(3, g, torch.device("cpu"), "logit-normal")
noise = torch.randn(p.x0.shape, generator=g)
tt = t_[p.seg][:, None]
pred = m((1 - tt) * x + tt * noise, cu, grids, t_, text, cut, [5, 9, 3])
per_tok = (pred - (noise - x)).pow(2).mean(1)
assert abs(float(per_tok[:48].sum()) - float(total)) < 1e-3, (float(per_tok[:48].sum()), float(total))
print("model checks: OK")
PY

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

echo "== train_dit.py --smoke on an adaptiveload synth corpus (raw payload, text embeddings from keys)"
"$PY" "$here/examples/train_dit.py" --smoke --smoke-corpus synth --samples 32 --steps 2 --workdir "$T/s" \
  2>&1 | tee "$T/synth.log"
grep -q "^data: raw payload, text embeddings from keys" "$T/synth.log" || fail "synth corpus: not the raw path"
grep -q "done: 2 of 2 steps, losses finite" "$T/synth.log" || fail "train_dit.py --smoke --smoke-corpus synth"

echo "== train_dit.py --smoke, 2 processes (gloo DDP)"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$PY" "$here/examples/train_dit.py" --smoke --steps 2 --workdir "$T/w" >"$T/ddp$r.log" 2>&1 &
  pids[$r]=$!
done
for r in 0 1; do wait "${pids[$r]}" || { cat "$T/ddp$r.log"; fail "DDP rank $r"; }; done
cat "$T/ddp0.log"
grep -q "parallel: DDP over 2 ranks" "$T/ddp0.log" || fail "DDP not used"
grep -q "done: 2 of 2 steps, losses finite" "$T/ddp0.log" || fail "DDP run"

echo "== train_dit.py --smoke as one launched process (torchrun --nproc-per-node 1 sets these): DDP over 1 rank"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
  "$PY" "$here/examples/train_dit.py" --smoke --steps 2 --workdir "$T/w1" >"$T/ddp1.log" 2>&1 ||
  { cat "$T/ddp1.log"; fail "1-process DDP"; }
grep -q "parallel: DDP over 1 ranks" "$T/ddp1.log" || fail "1 launched process not distributed: $(cat "$T/ddp1.log")"
grep -q "done: 2 of 2 steps, losses finite" "$T/ddp1.log" || fail "1-process DDP run"

echo "== dev/e2e/run_arms.py --smoke (corpus, plans, W = 2 replays, refit)"
"$PY" "$here/dev/e2e/run_arms.py" --smoke --workdir "$T/e2e" --out "$T/out" --bin "$here/adaptiveload" \
  2>&1 | grep -v "^replay W" | tee "$T/arms.log"
grep -q "(OK)$" "$T/arms.log" || fail "run_arms.py --smoke"
"$PY" - "$T/out" <<'PY' || fail "run_arms outputs"
import json, os, sys
out = sys.argv[1]
s = json.load(open(os.path.join(out, "summary.json")))
arms = [r["arm"] for r in s["rows"]]
assert arms == ["equal-token", "paper", "ours", "ours-refit"], arms
for r in s["rows"]:
    assert r["steps"] > 0 and r["tokens_per_s"] > 0, r
for name in ("equal-token-w2", "paper-w2", "ours-w2", "ours-refit-w2"):
    d = json.load(open(os.path.join(out, name + ".json")))
    assert d["loss_finite"] and len(d["per_step"]) == d["steps"], name
    assert d["pred_vs_measured"]["n"] > 0 and "pearson" in d and "comm" in d, name
# The refit: a fitted model, or (the smoke's CPU step times being launch overheads that need
# not grow with B*S) fit's refusal of exactly that, arm d then planned with (c)'s model.
assert ("fit" in s["refit"] and s["refit"]["fit"]["family"] in ("power", "poly2")) or \
    "the planner needs step times that grow with B*S" in s["refit"].get("refused", ""), s["refit"]
svg = open(os.path.join(out, "steps-w2.svg")).read()
assert svg.startswith("<svg") and svg.count("<polyline") == 12, svg[:200]
PY
"$PY" "$here/dev/e2e/report.py" "$T/out/summary.json" --setup "$T/out/setup.json" >"$T/report.md" ||
  fail "report.py"
grep -q "^| 2 | ours | " "$T/report.md" || fail "report: $(cat "$T/report.md")"

echo "== dev/e2e/run_arms.py --smoke --real-world 2 (2 gloo processes per arm beside the W = 2 replay)"
"$PY" "$here/dev/e2e/run_arms.py" --smoke --real-world 2 --arms a,c --workdir "$T/e2e" --out "$T/out2" \
  --bin "$here/adaptiveload" 2>&1 | grep -v "^replay W" | tee "$T/real.log"
grep -q "(OK)$" "$T/real.log" || fail "run_arms.py --smoke --real-world 2"
"$PY" - "$T/out2" <<'PY' || fail "run_arms --real-world outputs"
import json, os, sys
t = json.load(open(os.path.join(sys.argv[1], "real-w2.json")))
assert t["world"] == 2 and list(t["arms"]) == ["equal-token", "ours"], t.get("arms", t)
for name, r in t["arms"].items():
    assert r["real"]["steps"] > 0 and r["real"]["tokens_per_s"] > 0, (name, r["real"])
    assert len(r["real"]["loss_curve"]) == r["real"]["steps"], name
    assert r["replay"]["steps"] > 0 and r["real_over_replay_step_ms"] > 0, (name, r)
assert t["arms"]["ours"]["gain_real"] > 0 and t["arms"]["ours"]["gain_replay"] > 0, t["arms"]["ours"]
PY
"$PY" "$here/dev/e2e/report.py" --real "$T/out2/real-w2.json" >"$T/report2.md" || fail "report.py --real"
grep -q "^| ours | " "$T/report2.md" || fail "report --real: $(cat "$T/report2.md")"
echo "dit_smoke_test: OK"
