#!/bin/bash
# plan --resume-from through the binary: the global batch is kept (K' = ceil(K W / W'), the
# summary prints the re-plan's tokens per step beside the old plan's and the target) or the
# re-plan is refused, exit 1, naming --step-tokens; --step-tokens and --micro-per-step are
# honoured; every other planning option is refused alike (exit 2, whatever its value), since
# the re-plan takes them from OLD; a re-plan of a plan that dropped samples loads.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/replan_cli
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # WANT_RC ARGS...: stdout in $T/out, stderr in $T/err
  local want=$1; shift
  "$BIN" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "$* -> exit $rc, wanted $want: $(cat "$T/err")"
}
has() { grep -qF -- "$1" "$T/err" || fail "stderr lacks '$1': $(cat "$T/err")"; }
json() {  # FIELD: its value in the one-line JSON of $T/out
  sed -E "s/.*\"$1\": \"?([^,\"}]*).*/\1/" "$T/out"
}

run 0 synth --out "$T/c" --samples 1000 --shards 2 --payload none
run 0 index -o "$T/i.alidx" "$T/c"
run 0 plan --index "$T/i.alidx" --world 4 -o "$T/w4.alm"
R=(plan --resume-from "$T/w4.alm" --at-step 20)

# 4 -> 8: K' = 1, the old steps 20.. and their tokens per step kept; the summary says both.
run 0 "${R[@]}" --world 8 -o "$T/w8.alm"
has "the old plan's steps 20..67 held"
has "(+0.00%, target 262144)"
run 0 "${R[@]}" --world 8 -o "$T/w8.alm" --json
[ "$(json micro_per_step)" = 1 ] || fail "K' $(json micro_per_step)"
[ "$(json step_tokens)" = 262144 ] || fail "T $(json step_tokens)"
[ "$(json steps)" = 48 ] || fail "steps $(json steps)"
# 4 -> 2: K' = 2.
run 0 "${R[@]}" --world 2 -o "$T/w2.alm" --json
[ "$(json micro_per_step)" = 2 ] || fail "K' $(json micro_per_step)"
[ "$(json steps)" = 48 ] || fail "steps $(json steps)"

# Too few samples left to fill 48 steps of 64 micro-batches: refused, naming the way out.
run 1 "${R[@]}" --world 64 -o "$T/w64.alm"
has "its steps 20..67 hold"
has "give step_tokens (--step-tokens T) to plan another global batch"
[ ! -e "$T/w64.alm" ] || fail "a refused re-plan wrote a manifest"
# ... unless a new T is asked for; --micro-per-step chooses K'.
run 0 "${R[@]}" --world 64 -o "$T/w64.alm" --step-tokens 1048576 --json
[ "$(json step_tokens)" = 1048576 ] || fail "T $(json step_tokens)"
[ "$(json micro_per_step)" = 1 ] || fail "K' $(json micro_per_step)"
run 0 "${R[@]}" --world 2 -o "$T/k4.alm" --micro-per-step 4 --json
[ "$(json micro_per_step)" = 4 ] || fail "K' $(json micro_per_step)"
run 0 inspect "$T/k4.alm"

# Every option the re-plan takes from OLD is refused alike, its default value included.
for opt in "--seed 0" "--epoch 0" "--policy adaptive" "--mem-tokens 65536" "--window 64" \
  "--last-step pad" "--geometry 4,8,1,2,2" "--comp-ms 100" "--mem-capacity 1e11" \
  "--mem-safety 0.9" "--index $T/i.alidx" "--cost x" "--buckets x" "--start-step 0"; do
  # shellcheck disable=SC2086
  run 2 "${R[@]}" --world 8 -o "$T/x.alm" $opt
  has "it takes only --at-step, --world, -o, --step-tokens, --micro-per-step and --json: ${opt%% *} does not apply"
done
run 2 "${R[@]}" --world 8 -o "$T/x.alm" --seed 1 --window 3
has ": --seed, --window do not apply"
[ ! -e "$T/x.alm" ] || fail "a refused re-plan wrote a manifest"

# A plan that dropped samples, re-planned at step 0: the summary counts the old drops, so the
# manifest loads and says what its key table marks.
run 0 plan --index "$T/i.alidx" --world 3 --policy equal-token --last-step drop --mem-tokens 16384 \
  -o "$T/old.man" --json
old_dropped=$(json dropped)
[ "$old_dropped" -gt 0 ] || fail "the fixture drops nothing"
run 0 plan --resume-from "$T/old.man" --at-step 0 --world 5 -o "$T/new.man" --json
[ "$(json dropped)" -ge "$old_dropped" ] || fail "dropped $(json dropped) < $old_dropped"
run 0 inspect "$T/new.man" --json
[ "$(json dropped)" -ge "$old_dropped" ] || fail "inspect: dropped $(json dropped)"
echo "replan_cli_test: OK"
