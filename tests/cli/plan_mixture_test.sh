#!/bin/bash
# Mixtures through the binary: `plan --mixture MIX.json` of one stop source writes the bytes
# `plan --index --planner chunked` writes; a three-source mixture plans the same bytes twice,
# names every source's passes, loads and is inspected, and a slice of it loads; bad mixtures are
# refused naming the file, the field or the source, and write nothing.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/plan_mixture
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

for x in web:900:3 hq:150:4 img:500:5; do
  IFS=: read -r name n seed <<<"$x"
  "$BIN" synth --out "$T/$name" --samples "$n" --payload none --seed "$seed" >/dev/null 2>&1 || fail "synth $name"
  "$BIN" index -o "$T/$name.alidx" "$T/$name" >/dev/null 2>&1 || fail "index $name"
done
P=(--world 4 --micro-per-step 2)

# One stop source, no length: the plain chunked plan, byte for byte.
cat >"$T/one.json" <<'J'
{"sources": [{"name": "web", "index": "web.alidx", "weight": 2, "on_exhaust": "stop"}]}
J
"$BIN" plan --index "$T/web.alidx" --planner chunked "${P[@]}" -o "$T/plain.alm" 2>/dev/null || fail "plain plan"
"$BIN" plan --mixture "$T/one.json" "${P[@]}" -o "$T/one.alm" 2>"$T/err" || fail "one-source mixture: $(cat "$T/err")"
cmp -s "$T/plain.alm" "$T/one.alm" || fail "the one-source mixture's manifest differs from the plain plan's"

# Three sources, repeating, by compute, for 120 steps.
cat >"$T/mix.json" <<'J'
{"by": "compute", "steps": 120,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3, "on_exhaust": "repeat"},
             {"name": "img", "index": "img.alidx", "weight": 0.2}],
 "stages": [{"from_step": 0, "weights": {"web": 0.5}}]}
J
"$BIN" plan --mixture "$T/mix.json" "${P[@]}" -o "$T/m1.alm" 2>"$T/err1" || fail "mixture: $(cat "$T/err1")"
"$BIN" plan --mixture "$T/mix.json" "${P[@]}" -o "$T/m2.alm" 2>/dev/null || fail "mixture again"
cmp -s "$T/m1.alm" "$T/m2.alm" || fail "the same mixture planned twice differs"
grep -q "plan: mixture of 3 sources, 120 steps" "$T/err1" || fail "summary: $(cat "$T/err1")"
for s in web hq img; do
  grep -q "plan: source $s: weight" "$T/err1" || fail "no line for source $s: $(cat "$T/err1")"
done
# hq is small and weighted high: it goes round several passes.
passes=$(sed -n 's/^plan: source hq: weight [0-9.]*, repeat, \([0-9]*\) pass.*/\1/p' "$T/err1")
[ "${passes:-0}" -ge 2 ] || fail "hq made ${passes:-no} passes: $(cat "$T/err1")"
"$BIN" inspect "$T/m1.alm" --json >"$T/m1.json" 2>"$T/err" || fail "inspect: $(cat "$T/err")"
grep -q '"steps": 120' "$T/m1.json" || fail "inspect: $(head -c 400 "$T/m1.json")"
# A slice of the run loads and holds those steps.
"$BIN" plan --mixture "$T/mix.json" "${P[@]}" --steps 30:45 -o "$T/s.alm" 2>"$T/err" || fail "slice: $(cat "$T/err")"
"$BIN" inspect "$T/s.alm" >/dev/null 2>"$T/err" || fail "inspect slice: $(cat "$T/err")"

# Stages: a weight change at step 60 (hq paused from there): the plan names the stages, the
# manifest records them, inspect reports each stage's realised shares (hq none in stage 1), the
# JSONL rows name every sample's source, the shares SVG is written; a plain plan has no shares.
cat >"$T/staged.json" <<'J'
{"by": "tokens", "steps": 120,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}],
 "stages": [{"from_step": 60, "weights": {"hq": 0, "img": 0.5}}]}
J
"$BIN" plan --mixture "$T/staged.json" "${P[@]}" -o "$T/st.alm" 2>"$T/err" || fail "staged: $(cat "$T/err")"
grep -q "plan: stage 1 from step 60: web 0.5000, hq 0.0000, img 0.5000" "$T/err" || fail "stage line: $(cat "$T/err")"
"$BIN" inspect "$T/st.alm" >"$T/st.txt" 2>&1 || fail "inspect staged: $(cat "$T/st.txt")"
grep -q "stage 1 (steps 60..119)" "$T/st.txt" || fail "inspect stages: $(tail -12 "$T/st.txt")"
"$BIN" inspect "$T/st.alm" --json >"$T/st.json" || fail "inspect --json staged"
"$BIN" inspect "$T/st.alm" --jsonl >"$T/st.jsonl" || fail "inspect --jsonl staged"
python3 - "$T" <<'PY' || fail "the staged mixture's report"
import json, sys
t = sys.argv[1]
mx = json.load(open(t + "/st.json"))["mixture"]
assert [s["from_step"] for s in mx["stages"]] == [0, 60], mx["stages"]
s0, s1 = mx["stages"][0]["shares"], mx["stages"][1]["shares"]
assert s1["hq"]["tokens"] == 0 and s1["hq"]["samples"] == 0, s1
assert abs(s1["img"]["weight"] - 0.5) < 1e-9 and abs(s0["hq"]["weight"] - 0.3) < 1e-9
assert abs(sum(v["tokens"] for v in s0.values()) - 1) < 1e-6
for k in ("web", "hq", "img"):
    assert abs(s0[k]["tokens"] - s0[k]["weight"]) < 0.05, (k, s0[k])
rows = [json.loads(l) for l in open(t + "/st.jsonl")]
for r in rows:
    assert len(r["sources"]) == len(r["samples"]), r
    if r["step"] >= 60:
        assert "hq" not in r["sources"], r
assert any("hq" in r["sources"] for r in rows if r["step"] < 60)
PY
"$BIN" inspect "$T/st.alm" --shares-svg "$T/st.svg" 2>/dev/null || fail "shares svg"
grep -q "<svg" "$T/st.svg" && grep -q ">hq</text>" "$T/st.svg" || fail "shares svg content"
"$BIN" inspect "$T/plain.alm" --shares-svg "$T/p.svg" 2>"$T/err" && fail "shares of a plain plan"
grep -q "shares are a mixture's" "$T/err" || fail "plain shares: $(cat "$T/err")"

# A ramp: web's weight moves from 0.5 to 0.2 over steps 20..100, in stages of one window (16
# steps) each at its middle step's weights, then holds; the manifest loads and inspect reports
# each of those stages.
printf 'frames 1 5\naspect 1:1 240x240\naspect 16:9 416x240\naspect 9:16 240x416\n' >"$T/small.txt"
cat >"$T/ramp.json" <<'J'
{"by": "tokens", "steps": 160,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}],
 "stages": [{"from_step": 20, "ramp_steps": 80, "weights": {"web": 0.2, "img": 0.5}}]}
J
"$BIN" plan --mixture "$T/ramp.json" "${P[@]}" --window 16 --buckets "$T/small.txt" -o "$T/ramp.alm" 2>"$T/err" ||
  fail "ramp: $(cat "$T/err")"
[ "$(grep -c '^plan: stage ' "$T/err")" -eq 7 ] || fail "ramp stages: $(grep stage "$T/err")"
grep -q "plan: stage 1 from step 20: web 0.4700, hq 0.3000, img 0.2300" "$T/err" || fail "ramp stage 1: $(grep stage "$T/err")"
grep -q "plan: stage 5 from step 84: web 0.2300, hq 0.3000, img 0.4700" "$T/err" || fail "ramp stage 5: $(grep stage "$T/err")"
grep -q "plan: stage 6 from step 100: web 0.2000, hq 0.3000, img 0.5000" "$T/err" || fail "ramp end: $(grep stage "$T/err")"
"$BIN" inspect "$T/ramp.alm" >"$T/ramp.txt" 2>&1 || fail "inspect ramp: $(cat "$T/ramp.txt")"
grep -q "stage 6 (steps 100..159)" "$T/ramp.txt" || fail "inspect ramp: $(tail -8 "$T/ramp.txt")"

# Sources from their index maps (plan --save-map): the same run as from their indexes, step
# for step (the manifest of a map has no keys); every source has a map or none.
for x in web hq img; do
  "$BIN" plan --index "$T/$x.alidx" --save-map "$T/$x.map" --world 1 -o /dev/null >/dev/null 2>&1 || fail "save-map $x"
done
sed 's/"index": "\([a-z]*\).alidx"/"map": "\1.map"/g' "$T/mix.json" >"$T/mixmap.json"
grep -q '"map": "hq.map"' "$T/mixmap.json" || fail "mixmap.json: $(cat "$T/mixmap.json")"
"$BIN" plan --mixture "$T/mixmap.json" "${P[@]}" -o "$T/mm.alm" 2>"$T/err" || fail "mixture of maps: $(cat "$T/err")"
nokeys() { "$BIN" inspect "$1" --jsonl | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l); r.pop("keys"); print(json.dumps(r, sort_keys=True))'; }
cmp -s <(nokeys "$T/m1.alm") <(nokeys "$T/mm.alm") || fail "the mixture of maps plans other steps than of indexes"
sed '0,/"index": "web.alidx"/s//"map": "web.map"/' "$T/mix.json" >"$T/half.json"
"$BIN" plan --mixture "$T/half.json" "${P[@]}" -o "$T/half.alm" 2>"$T/err" && fail "planned a half-map mixture"
grep -q "give every source a map, or none" "$T/err" || fail "half map says: $(cat "$T/err")"

# Refusals: the file and the field or source named; nothing written.
refuse() { # NAME JSON EXPECTED
  printf '%s\n' "$2" >"$T/$1.json"
  "$BIN" plan --mixture "$T/$1.json" "${P[@]}" -o "$T/$1.alm" 2>"$T/err" && fail "$1: planned"
  grep -qF -- "$3" "$T/err" || fail "$1 says: $(cat "$T/err")"
  grep -qF -- "$T/$1.json" "$T/err" || fail "$1 does not name the file: $(cat "$T/err")"
  [ -e "$T/$1.alm" ] && fail "$1 wrote a manifest"
  return 0
}
refuse unknown '{"sources": [{"name": "web", "index": "web.alidx", "wieght": 1}], "steps": 5}' "unknown field 'wieght'"
refuse weight '{"sources": [{"name": "web", "index": "web.alidx", "weight": -1}], "steps": 5}' "source 'web': weight must be a number above 0"
refuse stage '{"sources": [{"name": "web", "index": "web.alidx"}], "steps": 50, "stages": [{"from_step": 9}, {"from_step": 9}]}' "stages[1]: from_step must be after the stage before it"
refuse stagebuckets '{"sources": [{"name": "web", "index": "web.alidx"}], "steps": 50, "stages": [{"from_step": 9, "buckets": "b.txt"}]}' "stages[0]: 'buckets' at a stage is not planned yet"
refuse rampover '{"sources": [{"name": "web", "index": "web.alidx"}], "steps": 50, "stages": [{"from_step": 5, "ramp_steps": 20}, {"from_step": 10}]}' "stages[1]: from_step must be after the stage before it and its ramp"
refuse rampzero '{"sources": [{"name": "web", "index": "web.alidx"}], "steps": 50, "stages": [{"from_step": 5, "ramp_steps": 0}]}' "ramp_steps must be an integer in 1..4294967295"
refuse stagepast '{"sources": [{"name": "web", "index": "web.alidx"}], "steps": 50, "stages": [{"from_step": 60}]}' "stage 0 starts at step 60, past the run's 50 steps"
refuse stagezero '{"sources": [{"name": "web", "index": "web.alidx"}, {"name": "hq", "index": "hq.alidx"}], "steps": 50, "stages": [{"from_step": 9, "weights": {"web": 0, "hq": 0}}]}' "weighs every source 0"
refuse never '{"sources": [{"name": "web", "index": "web.alidx"}]}' "the run never ends"
refuse until '{"sources": [{"name": "web", "index": "web.alidx"}], "until": "nope"}' "no source is named 'nope'"
refuse noindex '{"sources": [{"name": "web", "index": "missing.alidx"}], "steps": 5}' "source 'web'"
refuse json '{"sources": [' "expected near end of file"
"$BIN" plan --mixture "$T/mix.json" --index "$T/web.alidx" "${P[@]}" -o "$T/x.alm" 2>"$T/err"
[ $? -eq 2 ] || fail "--mixture with --index is not a usage error"
grep -qF -- "--mixture plans its sources' indexes itself" "$T/err" || fail "says: $(cat "$T/err")"
echo "ok: plan --mixture"
