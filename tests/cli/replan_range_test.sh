#!/bin/bash
# plan --resume-from keeps each step's global batch, not only the mean: on synth's corpus, every
# step of a re-plan (4 -> 8, 2 -> 1, 4 -> 3, 2 -> 3; the default T and --step-tokens; at a few
# steps) holds between the fewest and the most real tokens of the old plan's steps (so never
# above T where the old steps are not), covers exactly the samples the old plan had not
# delivered by the resume step, gives every rank K' micro-batches in every step, prints the
# range it kept, and is byte-identical when made twice.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/replan_range
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" synth --out "$T/c" --samples 2000 --payload none >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/c" >/dev/null 2>&1 || fail index

# OLD NEW AT: the checks above, from inspect --jsonl (leaders' real samples) and --json.
check() {
  "$BIN" inspect "$1" --jsonl >"$T/old.jsonl" || fail "inspect $1"
  "$BIN" inspect "$2" --jsonl >"$T/new.jsonl" || fail "inspect $2"
  "$BIN" inspect "$2" --json >"$T/new.json" || fail "inspect --json $2"
  /usr/bin/python3 - "$T/old.jsonl" "$T/new.jsonl" "$T/new.json" "$3" <<'EOF' || fail "$1 -> $2 at $3"
import collections, json, sys
def load(path):
    tok, smp, per = collections.Counter(), collections.Counter(), collections.Counter()
    for line in open(path):
        m = json.loads(line)
        per[(m["step"], m["rank"])] += 1
        if m.get("sp_rank", 0):
            continue
        pad = set(m["padded"])
        for i, (s, t) in enumerate(zip(m["samples"], m["tokens"])):
            if i not in pad:
                tok[m["step"]] += t
                smp[s, m["step"]] += 1
    return tok, smp, per
otok, osmp, _ = load(sys.argv[1])
ntok, nsmp, per = load(sys.argv[2])
info, at = json.load(open(sys.argv[3])), int(sys.argv[4])
lo, hi, T = min(otok.values()), max(otok.values()), info["step_tokens"]
out = {s: t for s, t in ntok.items() if not lo <= t <= hi or (hi <= T and t > T)}
assert not out, "steps outside %d..%d (T %d): %s" % (lo, hi, T, sorted(out.items())[:5])
left = collections.Counter(s for (s, st), n in osmp.items() for _ in range(n) if st >= at)
got = collections.Counter(s for (s, st), n in nsmp.items() for _ in range(n))
assert got == left, "samples differ: %d planned, %d left" % (sum(got.values()), sum(left.values()))
assert min(ntok) == at, "first step %d, not %d" % (min(ntok), at)
k = info["micro_per_step"]
assert set(per.values()) == {k}, "micro-batches per rank: %s, not %d" % (set(per.values()), k)
EOF
}

# OLD_ARGS... -- W2 AT...: plans OLD, re-plans it at each step for W2 twice, checks each.
n=0
replan() {
  local args=() w2 ats
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  w2=$1 && shift
  "$BIN" plan --index "$T/i.alidx" "${args[@]}" -o "$T/old.alm" >/dev/null 2>"$T/err" ||
    fail "plan ${args[*]}: $(cat "$T/err")"
  for at in "$@"; do
    for f in a b; do
      "$BIN" plan --resume-from "$T/old.alm" --at-step "$at" --world "$w2" -o "$T/$f.alm" \
        >/dev/null 2>"$T/err" || fail "${args[*]} -> $w2 at $at: $(cat "$T/err")"
    done
    check "$T/old.alm" "$T/a.alm" "$at"
    cmp -s "$T/a.alm" "$T/b.alm" || fail "${args[*]} -> $w2 at $at: two re-plans differ"
    grep -qF "plan: every step within the old plan's " "$T/err" ||
      fail "${args[*]} -> $w2 at $at: no range line: $(cat "$T/err")"
    n=$((n + 1))
  done
}

replan --world 4 -- 8 0 3 40
replan --world 4 --step-tokens 524288 -- 8 0 20
replan --world 4 -- 3 3 40
replan --world 2 -- 1 3 75
replan --world 2 --micro-per-step 2 -- 1 3 40
replan --world 2 -- 3 3 75
replan --world 4 --mem-tokens 16384 --step-tokens 65536 -- 8 100 150
replan --world 4 --mem-tokens 16384 --step-tokens 65536 -- 3 100
replan --world 4 --policy equal-token -- 8 3 60
echo "replan_range_test: OK ($n re-plans)"
