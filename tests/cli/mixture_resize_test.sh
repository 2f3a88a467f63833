#!/bin/bash
# A staged mixture killed after its stage change and resized, through the binary: three sources,
# a weight change at step 80, a kill at step 120 and the rest planned at 8 ranks instead of 16
# (plan --mixture --reference-world 16 --world 8 --steps 120:200). The steps before the kill at
# 16 ranks and after it at 8 hold the full run's draws exactly once, every step after the kill
# the same samples as at 16 ranks; within every source's pass each sample is drawn at most once,
# every finished pass draws all of them; --resume-from a mixture's manifest is refused saying
# how to resize it.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/mixture_resize
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

for x in web:3000:3 hq:400:4 img:1500:5; do
  IFS=: read -r name n seed <<<"$x"
  "$BIN" synth --out "$T/$name" --samples "$n" --payload none --seed "$seed" >/dev/null 2>&1 || fail "synth $name"
  "$BIN" index -o "$T/$name.alidx" "$T/$name" >/dev/null 2>&1 || fail "index $name"
done
cat >"$T/mix.json" <<'J'
{"by": "tokens", "steps": 200,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}],
 "stages": [{"from_step": 80, "weights": {"web": 0.3, "hq": 0.2, "img": 0.5}}]}
J
P=(--micro-per-step 2)
"$BIN" plan --mixture "$T/mix.json" --world 16 "${P[@]}" -o "$T/full.alm" 2>"$T/err" || fail "full: $(cat "$T/err")"
"$BIN" plan --mixture "$T/mix.json" --world 16 "${P[@]}" --steps 0:120 -o "$T/before.alm" 2>"$T/err" ||
  fail "before: $(cat "$T/err")"
"$BIN" plan --mixture "$T/mix.json" --world 8 --reference-world 16 "${P[@]}" --steps 120:200 -o "$T/after.alm" \
  2>"$T/err" || fail "after: $(cat "$T/err")"
for m in full before after; do
  "$BIN" inspect "$T/$m.alm" --jsonl >"$T/$m.jsonl" 2>"$T/err" || fail "inspect $m: $(cat "$T/err")"
  "$BIN" inspect "$T/$m.alm" --json >"$T/$m.json" 2>"$T/err" || fail "inspect --json $m: $(cat "$T/err")"
done
python3 - "$T" <<'PY' || fail "the resized run"
import collections, json, sys
t = sys.argv[1]
def rows(name):
    return [json.loads(l) for l in open("%s/%s.jsonl" % (t, name))]
def real(r):
    pad = set(r["padded"])
    return [(s, d) for k, (s, d) in enumerate(zip(r["sources"], r["samples"])) if k not in pad]
def per_step(rs):
    out = collections.defaultdict(list)
    for r in rs:
        out[r["step"]] += real(r)
    return out
full, before, after = per_step(rows("full")), per_step(rows("before")), per_step(rows("after"))
assert sorted(before) == list(range(120)) and sorted(after) == list(range(120, 200)), (min(after), max(after))
# Each step after the kill holds at 8 ranks the samples it holds at 16.
for s in range(200):
    got = before[s] if s < 120 else after[s]
    assert sorted(got) == sorted(full[s]), "step %d differs from the full run" % s
drawn = [d for s in range(200) for d in (before[s] if s < 120 else after[s])]
assert len(drawn) == len(set(drawn)), "a draw is planned twice"
# K at 8 ranks: ceil(2 x 16 / 8) = 4 micro-batches per rank in every step.
per_rank = collections.Counter((r["step"], r["rank"]) for r in rows("after") if r.get("sp_rank", 0) == 0)
assert set(per_rank.values()) == {4}, set(per_rank.values())
# Within every source's pass each position at most once; finished passes complete.
info = json.load(open(t + "/full.json"))["mixture"]
src = {s["name"]: s for s in info["sources"]}
base, n = {}, {}
acc = 0
for s in info["sources"]:
    base[s["name"]], n[s["name"]] = acc, s["samples"]
    acc += s["passes"] * s["samples"]
seen = collections.defaultdict(set)
for name, d in drawn:
    q, pos = divmod(d - base[name], n[name])
    assert pos not in seen[(name, q)], "%s pass %d position %d twice" % (name, q, pos)
    seen[(name, q)].add(pos)
for name, s in src.items():
    for q in range(s["passes"] - 1):
        assert len(seen[(name, q)]) == s["pass_samples"], (name, q, len(seen[(name, q)]), s["pass_samples"])
    assert sum(len(seen[(name, q)]) for q in range(s["passes"])) == s["drawn"], name
assert src["hq"]["passes"] >= 2, src["hq"]
# The stage change holds across the kill: the shares of each stage near its weights.
st = json.load(open(t + "/full.json"))["mixture"]["stages"]
assert [x["from_step"] for x in st] == [0, 80]
for x in st:
    for name, v in x["shares"].items():
        assert abs(v["tokens"] - v["weight"]) < 0.02, (x["from_step"], name, v)
print("ok", {k: (v["passes"], v["drawn"]) for k, v in src.items()})
PY
"$BIN" plan --resume-from "$T/full.alm" --at-step 120 --world 8 -o "$T/r.alm" 2>"$T/err" && fail "re-planned a mixture"
grep -q "plan --mixture MIX.json --world W2 --reference-world W_OLD --steps K:END" "$T/err" || fail "resume says: $(cat "$T/err")"
"$BIN" plan --index "$T/web.alidx" --world 8 --reference-world 16 -o "$T/x.alm" 2>"$T/err" && fail "reference world of an epoch plan"
grep -q "reference-world opens a chunked run" "$T/err" || fail "epoch plan says: $(cat "$T/err")"
echo PASS
