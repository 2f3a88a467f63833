#!/bin/bash
# plan's numbers at their limits through the binary: products of user numbers that wrapped
# (mem-tokens x world, step-tokens near 2^64, world x micro-per-step) are refused with a message
# naming the option and write no manifest; the largest values that plan give the plan they
# promise; a step of 131,072 micro-batches, nearly all padding, plans in seconds.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/plan_limits
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
# run WANT_RC ARGS...: runs `plan ARGS -o $T/m.alm`, stdout in $T/out, stderr in $T/err.
run() {
  local want=$1; shift
  rm -f "$T/m.alm"
  "$BIN" plan "$@" -o "$T/m.alm" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "plan $* -> exit $rc, wanted $want: $(cat "$T/err")"
  if [ "$want" != 0 ] && [ -e "$T/m.alm" ]; then fail "plan $* wrote a manifest"; fi
}
# says TEXT: stderr holds TEXT.
says() { grep -qF -- "$1" "$T/err" || fail "message '$(cat "$T/err")' lacks '$1'"; }
# field NAME: NAME of the --json summary on stdout.
field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$T/out"; }

"$BIN" synth --out "$T/c" --samples 500 --payload none --seed 1 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/c" >/dev/null 2>&1 || fail index
I=(--index "$T/i.alidx")

# M_mem x W wrapped to 0: step_tokens 0, micro_tokens 1, 500 one-sample micro-batches, exit 0.
run 1 "${I[@]}" --mem-tokens 9223372036854775808 --world 4
says "mem-tokens 9223372036854775808 is above the maximum 4294967295 (2^32 - 1)"
run 1 "${I[@]}" --mem-tokens 18446744073709551615 --world 1
says "mem-tokens 18446744073709551615 is above the maximum"
run 0 "${I[@]}" --mem-tokens 4294967295 --world 4 --json
[ "$(field step_tokens)" = 17179869180 ] || fail "step_tokens $(field step_tokens)"
[ "$(field micro_tokens)" = 4294967295 ] || fail "micro_tokens $(field micro_tokens)"

# T near 2^64: K = ceil(T / (W M_mem)) past its maximum, and T + W M_mem - 1 no longer wraps.
run 1 "${I[@]}" --world 3 --step-tokens 18446744073709551615
says "step-tokens 18446744073709551615 over 3 ranks of mem-tokens 65536 needs micro-per-step 93824992236886, above its maximum 1048576"
run 1 "${I[@]}" --world 3 --micro-per-step 2 --step-tokens 18446744073709551615
says "even at micro-per-step's maximum 1048576"

# W x K past one step's maximum.
run 1 "${I[@]}" --world 5 --micro-per-step 1048576
says "world 5 x micro-per-step 1048576 = 5242880 micro-batches per step, above the planner's maximum 4194304"
run 1 "${I[@]}" --world 1048576 --micro-per-step 1048576 --policy equal-token
says "= 1099511627776 micro-batches per step"

# M_mem from --mem-capacity saturates at the maximum (was 10^15).
"$BIN" fit --bench "$(dirname "$0")/../../cost/data/h200_shape_bench.csv" -o "$T/sb.cost" \
  >/dev/null 2>&1 || fail fit
run 0 "${I[@]}" --world 2 --cost "$T/sb.cost" --mem-capacity 1e300 --json
[ "$(field mem_tokens)" = 4294967295 ] || fail "mem_tokens $(field mem_tokens)"

# One step of 2 x 65,536 micro-batches, 500 real: minutes before, well under a second now.
start=$(date +%s)
run 0 "${I[@]}" --world 2 --micro-per-step 65536 --json
[ "$(field micro_batches)" = 131072 ] || fail "micro_batches $(field micro_batches)"
[ $(($(date +%s) - start)) -lt 30 ] || fail "K = 65536 took $(($(date +%s) - start)) s"
echo "plan_limits_test: OK"
