#!/bin/bash
# A mixture's schedule changed mid-run, through the binary: a run of three sources killed at step
# 90, then planned on from there with new weights, a fourth source and a longer run, at 8 ranks
# instead of 16 (plan --mixture NEW.json --continues OLD.json --at-step 90 --reference-world 16
# --world 8 --steps 90:300). The change takes effect at OLD's first window boundary at or after
# 90; the steps before it are OLD's; over OLD's steps before the kill and the changed run's after
# it every (source, pass, position) is drawn at most once and every finished pass completely;
# the new source draws only from the change on; a changed schedule that drops or reorders a
# source, or ends before it takes effect, is refused naming what differs (OLD is planned with
# the same options, so they cannot differ here).
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/mixture_change
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

for x in web:3000:3 hq:400:4 img:1500:5 extra:800:6; do
  IFS=: read -r name n seed <<<"$x"
  "$BIN" synth --out "$T/$name" --samples "$n" --payload none --seed "$seed" >/dev/null 2>&1 || fail "synth $name"
  "$BIN" index -o "$T/$name.alidx" "$T/$name" >/dev/null 2>&1 || fail "index $name"
done
cat >"$T/old.json" <<'J'
{"by": "tokens", "steps": 200,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}]}
J
cat >"$T/new.json" <<'J'
{"by": "tokens", "steps": 300,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.3},
             {"name": "hq", "index": "hq.alidx", "weight": 0.2},
             {"name": "img", "index": "img.alidx", "weight": 0.2},
             {"name": "extra", "index": "extra.alidx", "weight": 0.3}]}
J
# A small bucket table and short windows, so that the change takes effect soon after the kill.
printf 'frames 1 17 33\naspect 1:1 480x480\naspect 16:9 832x480\naspect 9:16 480x832\n' >"$T/buckets.txt"
P=(--micro-per-step 2 --window 32 --buckets "$T/buckets.txt")
"$BIN" plan --mixture "$T/old.json" --world 16 "${P[@]}" -o "$T/old.alm" 2>"$T/err" || fail "old: $(cat "$T/err")"
"$BIN" plan --mixture "$T/new.json" --continues "$T/old.json" --at-step 90 --world 8 --reference-world 16 \
  "${P[@]}" --steps 90:300 -o "$T/new.alm" 2>"$T/err" || fail "changed: $(cat "$T/err")"
E=$(sed -n 's/^plan: the schedule of .* changes to .*s from step \([0-9]*\) (the first window boundary at or after step 90)$/\1/p' "$T/err")
[ -n "$E" ] || fail "no change step: $(cat "$T/err")"
for m in old new; do
  "$BIN" inspect "$T/$m.alm" --jsonl >"$T/$m.jsonl" 2>"$T/e2" || fail "inspect $m: $(cat "$T/e2")"
  "$BIN" inspect "$T/$m.alm" --json >"$T/$m.report.json" 2>"$T/e2" || fail "inspect --json $m: $(cat "$T/e2")"
done
python3 - "$T" "$E" <<'PY' || fail "the changed run"
import collections, json, sys
t, E = sys.argv[1], int(sys.argv[2])
assert 90 <= E < 90 + 32, E
def draws(name):  # step -> sorted [(source, pass, position)]
    mx = json.load(open("%s/%s.report.json" % (t, name)))["mixture"]
    base, n, acc = {}, {}, 0
    for s in mx["sources"]:
        base[s["name"]], n[s["name"]] = acc, s["samples"]
        acc += s["passes"] * s["samples"]
    out = collections.defaultdict(list)
    for line in open("%s/%s.jsonl" % (t, name)):
        r = json.loads(line)
        pad = set(r["padded"])
        for k, (s, d) in enumerate(zip(r["sources"], r["samples"])):
            if k not in pad:
                q, pos = divmod(d - base[s], n[s])
                out[r["step"]].append((s, q, pos))
    return {k: sorted(v) for k, v in out.items()}, {s["name"]: s for s in mx["sources"]}
old, _ = draws("old")
new, src = draws("new")
assert sorted(new) == list(range(90, 300)), (min(new), max(new))
for s in range(90, E):  # before the change the changed run is the old one
    assert new[s] == old[s], "step %d differs from the old run" % s
got = [d for s in range(90) for d in old[s]] + [d for s in range(90, 300) for d in new[s]]
c = collections.Counter(got)
assert max(c.values()) == 1, [k for k, v in c.items() if v > 1][:3]
seen = collections.defaultdict(set)
for s, q, pos in got:
    seen[(s, q)].add(pos)
for name, x in src.items():
    for q in range(x["passes"] - 1):
        assert len(seen[(name, q)]) == x["pass_samples"], (name, q, len(seen[(name, q)]), x["pass_samples"])
assert all(d[0] != "extra" for s in range(90, E) for d in new[s])
assert any(d[0] == "extra" for s in range(E, 300) for d in new[s])
print("ok: change at", E, {k: v["passes"] for k, v in src.items()})
PY
refuse() { # NAME JSON EXPECTED
  printf '%s\n' "$2" >"$T/$1.json"
  "$BIN" plan --mixture "$T/$1.json" --continues "$T/old.json" --at-step 90 --world 16 "${P[@]}" -o "$T/$1.alm" \
    2>"$T/err" && fail "$1: planned"
  grep -qF -- "$3" "$T/err" || fail "$1 says: $(cat "$T/err")"
  return 0
}
refuse dropped '{"steps": 300, "sources": [{"name": "web", "index": "web.alidx"}, {"name": "hq", "index": "hq.alidx"}]}' "keep every source"
refuse reordered '{"steps": 300, "sources": [{"name": "hq", "index": "hq.alidx"}, {"name": "web", "index": "web.alidx"}, {"name": "img", "index": "img.alidx"}]}' "in its name"
refuse short '{"steps": 50, "sources": [{"name": "web", "index": "web.alidx"}, {"name": "hq", "index": "hq.alidx"}, {"name": "img", "index": "img.alidx"}]}' "before it takes effect"
"$BIN" plan --mixture "$T/new.json" --continues "$T/old.json" --world 16 "${P[@]}" -o "$T/k.alm" 2>"$T/err" && fail "no --at-step"
grep -q "at-step K (with --continues)" "$T/err" || fail "no at-step says: $(cat "$T/err")"
echo PASS
