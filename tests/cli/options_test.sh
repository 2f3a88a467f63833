#!/bin/bash
# The verbs' option tables through the binary: numbers are whole strings (no space, no sign,
# no overflow; " 4" and "" were once taken by some verbs), usage errors keep their wording and
# exit 2, valid values still run, and every option is listed by --help.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/options
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
# run WANT_RC ARGS...: runs the binary, stderr in $T/err, and checks the exit status.
run() {
  local want=$1; shift
  "$BIN" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "$* -> exit $rc, wanted $want: $(cat "$T/err")"
}
# says TEXT: the first line of stderr is TEXT.
says() { [ "$(head -1 "$T/err")" = "$1" ] || fail "message '$(head -1 "$T/err")', wanted '$1'"; }

"$BIN" synth --out "$T/c" --samples 4 --shards 1 --seed 2 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/c" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=(stream --index "$T/i.alidx" --manifest "$T/m.alm")

# Values the verbs take, next to their refused spellings.
run 0 index --threads 4 -o "$T/x.alidx" "$T/c"
run 2 index --threads ' 4' -o "$T/x.alidx" "$T/c"
says "adaptiveload index: bad --threads ' 4'"
run 2 index --threads 18446744073709551617 -o "$T/x.alidx" "$T/c"
run 2 index --block-size ' 1024' -o "$T/x.alidx" "$T/c"
run 2 index --vae-stride ' 4,8' -o "$T/x.alidx" "$T/c"
says "adaptiveload index: bad --vae-stride ' 4,8' (want T,S, e.g. 4,8)"
# Every verb's refused value names its option and value (inspect once passed no format: UBSan
# found vfprintf(NULL) and the exit was 1, not 2).
run 2 inspect "$T/i.alidx" --mem-tokens 0
says "adaptiveload inspect: bad --mem-tokens '0'"
run 0 plan --index "$T/i.alidx" --world 1 --geometry 4,8,1,2,2 -o "$T/g.alm"
run 2 plan --index "$T/i.alidx" --world 1 --geometry 4,8,1,2,2x -o "$T/g.alm"
run 2 plan --index "$T/i.alidx" --world ' -1' -o "$T/g.alm"
says "adaptiveload plan: bad option or value: --world  -1"
run 2 plan --index "$T/i.alidx" --world 18446744073709551616 -o "$T/g.alm"
run 0 "${S[@]}" --rank 0 --max-batches 1
run 2 "${S[@]}" --rank ' 0'
says "adaptiveload stream: bad --rank ' 0'"
run 2 "${S[@]}" --rank ''
run 2 "${S[@]}" --max-batches ''
run 2 "${S[@]}" --bench --compute-ms nan
run 2 "${S[@]}" --threads +2
run 2 synth --out "$T/s" --samples 18446744073709551616
run 2 inspect "$T/i.alidx" --top ' 5'
says "adaptiveload inspect: bad --top  5"

# Unknown options, missing values and stray arguments: each verb's wording.
run 2 synth --bogus
says "adaptiveload synth: --bogus needs a value (or is unknown)"
run 2 synth --out "$T/s" --payload jpeg
says "adaptiveload synth: bad option or value: --payload jpeg"
run 2 index --bogus x
says "adaptiveload index: unknown option '--bogus'"
run 2 fit --default --folds
says "adaptiveload fit: bad option or value: --folds "
run 2 fit --default --model cubic
run 2 plan --index "$T/i.alidx" --world 1 --step-ms 5 -o "$T/g.alm"
says "adaptiveload plan: --step-ms was removed: every step now holds"
run 2 "${S[@]}" extra
says "adaptiveload stream: extra unexpected"
run 2 "${S[@]}" --on-error retry
says "adaptiveload stream: --on-error is fail or skip, not 'retry'"
run 2 inspect "$T/m.alm" "$T/m.alm"
says "adaptiveload inspect: bad argument: $T/m.alm"
run 2 demo --bogus
says "adaptiveload demo: unknown option '--bogus'"
run 2 demo --out
says "adaptiveload demo: missing value for '--out'"

# --help lists every option of the verb.
check_help() {  # VERB OPTION...
  local verb=$1; shift
  run 0 "$verb" --help
  for o in "$@"; do grep -q -- "$o\b" "$T/out" || fail "$verb --help lacks $o"; done
}
check_help synth --out --samples --shards --seed --payload --json-lz4 --threads
check_help index --output --threads --json --dali-idx --strict --progress --no-progress \
  --field-width --field-height --field-frames --field-fps --field-duration --fields \
  --vae-stride --max-member-bytes --block-size
check_help fit --bench --trace --default --out --model --loss --min-tokens --folds \
  --mem-capacity --mem-safety --json
check_help plan --index --world --out --cost --policy --seed --epoch --mem-tokens \
  --mem-capacity --mem-safety --comp-ms --micro-per-step --step-tokens --window --last-step \
  --buckets --geometry --start-step --resume-from --at-step --json --require-members
check_help inspect --json --jsonl --svg --rejected --compare --top
check_help stream --index --manifest --rank --threads --prefetch --max-batches --ext --members \
  --root --max-sample-bytes --max-member-bytes --on-error --max-skip-fraction --bench --device \
  --compute-ms --compute-cost --no-pinned --json --jsonl --sp-shard --cache-dir --cache-bytes \
  --fetch-parallel --no-fetch-ahead --remote-timeout
check_help demo --out --samples --shards --world --micro-per-step --seed --batches
echo "options_test: OK"
