#!/bin/bash
# plan --sp-degrees / --sync through the binary: an SP manifest that inspect loads, its summary
# (both bubbles, micro-batches per degree) on stderr and in --json, inspect's text, --json and
# --jsonl (sp_degree / sp_rank, followers), inspect INDEX --sp-degrees and the plan's fidelity
# line cutting in time only beyond d_max x M_mem, byte-identity of the default, a re-plan, and
# each option error naming the option with no manifest written.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/plan_sp
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # WANT_RC ARGS...: plan ARGS -o $T/m.alm; stdout in $T/out, stderr in $T/err
  local want=$1; shift
  rm -f "$T/m.alm"
  "$BIN" plan "$@" -o "$T/m.alm" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "plan $* -> exit $rc, wanted $want: $(cat "$T/err")"
  if [ "$want" != 0 ] && [ -e "$T/m.alm" ]; then fail "plan $* wrote a manifest"; fi
}
says() { grep -qF -- "$1" "$T/err" || fail "message '$(cat "$T/err")' lacks '$1'"; }
py() { /usr/bin/python3 -c "$@"; }

"$BIN" synth --out "$T/c" --samples 800 --payload none --seed 3 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/c" >/dev/null 2>&1 || fail index
I=(--index "$T/i.alidx" --world 8 --mem-tokens 16384)

# The plan summary: sync model, both bubbles, micro-batches per degree.
run 0 "${I[@]}" --micro-per-step 2 --sp-degrees 1,2,4,8
says "plan: sync micro, sp-degrees 1,2,4,8 (largest used 8): bubble"
says "(micro model); by degree: d1 "
cp "$T/m.alm" "$T/sp.alm"
"$BIN" inspect "$T/sp.alm" >"$T/insp" 2>&1 || fail "inspect: $(cat "$T/insp")"
grep -q "^sp          sync micro, sp-degrees 1,2,4,8" "$T/insp" || fail "inspect lacks the sp line"
grep -q "^layout      step 0" "$T/insp" || fail "inspect lacks the layout"
grep -qE "^  slot 1: 0-" "$T/insp" || fail "inspect's layout lacks slot 1"
"$BIN" inspect --json "$T/sp.alm" >"$T/j" || fail "inspect --json"
py "
import json, sys
d = json.load(open('$T/j'))
assert d['sync'] == 'micro' and d['sp_degrees'] == [1, 2, 4, 8], d
assert 0 <= d['bubble_step'] <= d['bubble_micro'] + 1e-9 < 1, d
assert d['bubble'] == d['bubble_micro'], d
assert sum(v['micro_batches'] for v in d['by_degree'].values()) > 0, d
assert sum(v['tokens'] for v in d['by_degree'].values()) == d['tokens'], d
assert len(d['layout']) == 2, d['layout']  # K = 2 slots of step 0
for slot in d['layout']:
    assert sum(g[1] for g in slot) == 8 and all(g[0] % g[1] == 0 for g in slot), slot
" || fail "inspect --json SP fields"
"$BIN" inspect --jsonl "$T/sp.alm" >"$T/jl" || fail "inspect --jsonl"
py "
import json
rows = [json.loads(l) for l in open('$T/jl')]
assert all('sp_degree' in r and 'sp_rank' in r for r in rows)
follow = [r for r in rows if r['sp_rank'] > 0]
assert follow, 'no follower'
lead = {(r['step'], r['rank'], r['micro']): r for r in rows}
for f in follow:
    l = lead[(f['step'], f['rank'] - f['sp_rank'], f['micro'])]
    assert l['sp_rank'] == 0 and l['samples'] == f['samples'] and l['sp_degree'] == f['sp_degree']
    assert (f['rank'] - f['sp_rank']) % f['sp_degree'] == 0
" || fail "inspect --jsonl groups"
run 0 "${I[@]}" --micro-per-step 2 --sp-degrees 1,2,4,8 --json
py "
import json
d = json.load(open('$T/out'))
assert d['sync'] == 'micro' and d['sp_max_degree'] == 8 and 'bubble_step' in d and 'by_degree' in d, d
" || fail "plan --json SP fields"

# Time cuts: only beyond d_max x M_mem (inspect INDEX and the plan's fidelity line).
cuts() { sed -n 's/.* \([0-9]*\) cut in time.*/\1/p' "$1" | head -1; }
run 0 "${I[@]}"
c1=$(cuts "$T/err")
run 0 "${I[@]}" --sp-degrees 1,2,4,8
c8=$(cuts "$T/err")
[ -n "$c1" ] && [ -n "$c8" ] && [ "$c8" -lt "$c1" ] || fail "time cuts: $c1 at d=1, $c8 at d<=8"
"$BIN" inspect "$T/i.alidx" --mem-tokens 16384 --sp-degrees 1,2,4,8 >"$T/ix" 2>&1 || fail "inspect INDEX --sp-degrees: $(cat "$T/ix")"
grep -qF "sp-degrees 1,2,4,8 (time cuts beyond 131072 tokens)" "$T/ix" || fail "inspect INDEX names the cap"

# K = 1: the default is the step plan byte for byte (--sp-degrees 1 --sync step spelt out).
# K > 1: the default is the micro model (--sync micro spelt out), which differs from step.
run 0 "${I[@]}"
cp "$T/m.alm" "$T/def.alm"
grep -q "sync" "$T/err" && fail "a K = 1 plan without SP printed a sync line: $(cat "$T/err")"
run 0 "${I[@]}" --sp-degrees 1 --sync step
cmp -s "$T/m.alm" "$T/def.alm" || fail "--sp-degrees 1 --sync step changed the K = 1 default plan"
run 0 "${I[@]}" --micro-per-step 3
cp "$T/m.alm" "$T/def.alm"
run 0 "${I[@]}" --micro-per-step 3 --sp-degrees 1 --sync micro
cmp -s "$T/m.alm" "$T/def.alm" || fail "the K = 3 default is not the micro plan"
says "plan: sync micro, sp-degrees 1 (largest used 1)"
run 0 "${I[@]}" --micro-per-step 3 --sync step
cmp -s "$T/m.alm" "$T/def.alm" && fail "--sync step at K = 3 gave the micro plan"
# A step plan of K > 1 reports the bubble under both models too: the micro model's is what the
# plan would leave under FSDP, where ranks wait at every micro-batch.
says "plan: sync step, sp-degrees 1 (largest used 1): bubble"
"$BIN" inspect "$T/m.alm" >"$T/st" 2>&1 || fail "inspect of the step plan: $(cat "$T/st")"
grep -q "^sp          sync step, sp-degrees 1 " "$T/st" || fail "inspect of a K = 3 step plan lacks the sync line"
grep -q "^layout" "$T/st" && fail "inspect of a plan without SP printed a group layout"
"$BIN" inspect "$T/m.alm" --json >"$T/sj" 2>&1 || fail "inspect --json of the step plan: $(cat "$T/sj")"
py "
import json
d = json.load(open('$T/sj'))
assert d['sync'] == 'step' and d['bubble'] == d['bubble_step'], d
assert d['bubble_micro'] > d['bubble_step'], d
assert 'layout' not in d and d['by_degree']['1']['micro_batches'] == d['micro_batches'], d
" || fail "inspect --json of a K = 3 step plan"
# --compare of the step and the micro plan puts both models' bubbles side by side
cp "$T/m.alm" "$T/step.alm"
"$BIN" inspect "$T/def.alm" --compare "$T/step.alm" >"$T/cmp" 2>&1 || fail "inspect --compare: $(cat "$T/cmp")"
grep -Eq "^sync model +micro +step$" "$T/cmp" || fail "--compare lacks the sync models: $(cat "$T/cmp")"
py "
import json, subprocess
rows = {l[:24].strip(): l[24:].split() for l in open('$T/cmp') if l[:24].strip()}
for name, path, col in (('micro', '$T/def.alm', 0), ('step', '$T/step.alm', 1)):
    d = json.loads(subprocess.run(['$BIN', 'inspect', path, '--json'], stdout=subprocess.PIPE, check=True).stdout)
    for row, key in (('bubble, step model', 'bubble_step'), ('bubble, micro model', 'bubble_micro')):
        assert abs(float(rows[row][col].rstrip('%')) - 100 * d[key]) < 0.006, (row, rows[row], d[key])
    # each plan's prediction under its own model is its predicted seconds; under the other one
    # the same mean rank cost over (1 - that model's bubble)
    own = float(rows['predicted s, %s model' % name][col])
    assert abs(own - d['predicted_seconds']) < 0.06, (name, own, d['predicted_seconds'])
    other = 'step' if name == 'micro' else 'micro'
    want = d['predicted_seconds'] * (1 - d['bubble_' + name]) / (1 - d['bubble_' + other])
    assert abs(float(rows['predicted s, %s model' % other][col]) - want) < 0.06, (name, rows, want)
# under FSDP (the micro model) the step plan is the slower one
assert float(rows['predicted s, micro model'][1]) > float(rows['predicted s, micro model'][0]), rows
" || fail "--compare's bubbles and predictions are not inspect --json's"

# A re-plan keeps the degrees; a world they do not divide is refused.
"$BIN" plan --resume-from "$T/sp.alm" --at-step 4 --world 16 -o "$T/r.alm" >"$T/out" 2>"$T/err" || fail "re-plan: $(cat "$T/err")"
says "sync micro, sp-degrees 1,2,4,8"
"$BIN" inspect "$T/r.alm" >/dev/null 2>&1 || fail "the re-plan does not load"
"$BIN" plan --resume-from "$T/sp.alm" --at-step 4 --world 4 -o "$T/r4.alm" >"$T/out" 2>"$T/err" && fail "re-plan at world 4 planned"
says "cannot re-plan for world 4: sp-degrees: 8 does not divide the world size 4"
[ -e "$T/r4.alm" ] && fail "refused re-plan wrote a manifest"
"$BIN" plan --resume-from "$T/sp.alm" --at-step 4 --world 16 --sp-degrees 1,2 -o "$T/r5.alm" >"$T/out" 2>"$T/err" && fail "re-plan took --sp-degrees"
says "--sp-degrees"

# Errors name the option and write nothing.
run 2 "${I[@]}" --sp-degrees 3
says "bad --sp-degrees: 3 is not a power of two in 1..1024"
run 2 "${I[@]}" --sp-degrees 1,2,2
says "bad --sp-degrees: 2 is listed twice"
run 2 "${I[@]}" --sp-degrees 1,16
says "bad --sp-degrees: 16 does not divide the world size 8"
run 2 "${I[@]}" --sp-degrees 1,2,4,8,16,32,64,128,256,512,1024,2048
says "bad --sp-degrees"
run 2 "${I[@]}" --sp-degrees 1,,2
says "bad --sp-degrees '1,,2'"
run 2 "${I[@]}" --sp-degrees 2048
says "bad --sp-degrees: 2048 is not a power of two in 1..1024"
run 2 "${I[@]}" --sp-degrees 1,x
says "bad --sp-degrees '1,x': 'x' is not a number"
run 2 "${I[@]}" --sync sometimes
says "--sync sometimes"
echo PASS
