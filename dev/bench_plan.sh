#!/usr/bin/env bash
# dev/bench_plan.sh - planner benchmarks (balance, scale, determinism). Not a test.
#
# 1. Balance: a metadata-only synthetic corpus of N samples, planned for W = 8 and 16 with
#    both policies and the embedded H200 cost model, at the same global batch (default
#    options: K = 1 micro-batch per rank per step, T = W x M_mem; EXTRA="--micro-per-step 2"
#    etc. adds options to both); prints steps with unequal micro-batch counts, tokens per
#    step (mean, CV), imbalance CV, bubble, predicted tokens/s, the adaptive / equal-token
#    ratio and the tokens-per-step ratio, and the largest micro-batch in tokens vs M_mem.
# 2. Scale: a 10M-sample index made in memory by dev/bench_plan (same distribution as
#    synth), planned for W = 64 under /usr/bin/time -v (wall, CPU, peak RSS).
# 3. Determinism: the W = 64 adaptive plan twice, cmp'd.
# 4. With SP_BENCH=1: a 1M-sample index (dev/bench_plan --samples 1000000), planned for W = 64
#    with --sp-degrees 1,2,4,8 and without, interleaved 3 times each, at the defaults and at
#    --mem-tokens 16384 --micro-per-step 4 (degrees 4 and 8 used), under /usr/bin/time -v.
# Environment (defaults): N=20000 BIG=10000000 WORK=/tmp/al_bench_plan EXTRA="" SP_BENCH=0
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
BIG=${BIG:-10000000}
WORK=${WORK:-/tmp/al_bench_plan}
EXTRA=${EXTRA:-}
mkdir -p "$WORK"
bazel build --config=opt //:adaptiveload //dev:bench_plan >&2
cp -f bazel-bin/adaptiveload bazel-bin/dev/bench_plan "$WORK/"
A="$WORK/adaptiveload"
echo "# machine: $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"

"$A" synth --out "$WORK/c" --samples "$N" --payload none >/dev/null 2>&1
"$A" index -o "$WORK/c.alidx" "$WORK/c" >/dev/null 2>&1
printf '%-4s %-12s %6s %3s %7s %11s %8s %8s %8s %8s %14s %7s %7s %12s\n' W policy steps K unequal tok/step tok_cv% smp_cv% cv% \
  bubble% tokens/s ratio tok_rat max_mb_tok
for W in 8 16; do
  for P in equal-token adaptive; do
    # shellcheck disable=SC2086
    "$A" plan --index "$WORK/c.alidx" --world "$W" --policy "$P" $EXTRA -o "$WORK/$P-$W.alm" >/dev/null 2>&1
    "$A" inspect "$WORK/$P-$W.alm" --json >"$WORK/$P-$W.json"
    "$A" inspect "$WORK/$P-$W.alm" --jsonl >"$WORK/$P-$W.jsonl"
  done
  python3 - "$WORK" "$W" <<'PY'
import json, sys
work, W = sys.argv[1], sys.argv[2]
base = json.load(open(f"{work}/equal-token-{W}.json"))
for p in ("equal-token", "adaptive"):
    j = json.load(open(f"{work}/{p}-{W}.json"))
    mx = max(sum(json.loads(l)["tokens"]) for l in open(f"{work}/{p}-{W}.jsonl"))
    print(f"{W:<4} {p:<12} {j['steps']:6d} {j['micro_per_step']:3d} {j['unequal_steps']:7d} "
          f"{j['step_tokens_mean']:11,.0f} {100*j['step_tokens_cv']:8.2f} {100*j['step_samples_cv']:8.2f} "
          f"{100*j['imbalance_cv']:8.2f} {100*j['bubble']:8.2f} "
          f"{j['predicted_tokens_per_s']:14,.0f} {j['predicted_tokens_per_s']/base['predicted_tokens_per_s']:7.2f} "
          f"{j['step_tokens_mean']/base['step_tokens_mean']:7.3f} {mx:>7d}/{j['mem_tokens']}")
PY
done

"$WORK/bench_plan" -o "$WORK/idx10m.alidx" >&2
for P in adaptive equal-token; do
  /usr/bin/time -v "$A" plan --index "$WORK/idx10m.alidx" --world 64 --policy "$P" -o "$WORK/m10m-$P.alm" \
    2>"$WORK/time-$P.txt" >/dev/null
  wall=$(grep 'Elapsed (wall' "$WORK/time-$P.txt" | awk '{print $NF}')
  user=$(grep 'User time' "$WORK/time-$P.txt" | awk '{print $NF}')
  sys=$(grep 'System time' "$WORK/time-$P.txt" | awk '{print $NF}')
  rss=$(grep 'Maximum resident' "$WORK/time-$P.txt" | awk '{print $NF}')
  echo "10M samples, W=64, $P: wall ${wall}, user ${user} s, sys ${sys} s, peak RSS $((rss / 1024)) MB; $(grep '^plan: index' "$WORK/time-$P.txt")"
done
"$A" plan --index "$WORK/idx10m.alidx" --world 64 -o "$WORK/m10m-again.alm" >/dev/null 2>&1
cmp "$WORK/m10m-adaptive.alm" "$WORK/m10m-again.alm" && echo "determinism: two 10M-sample W=64 manifests are byte-identical"

if [ "${SP_BENCH:-0}" = 1 ]; then
  "$WORK/bench_plan" -o "$WORK/idx1m.alidx" --samples 1000000 --shards 100 >&2
  for X in "" "--mem-tokens 16384 --micro-per-step 4"; do
    for i in 1 2 3; do
      for D in "" "--sp-degrees 1,2,4,8"; do
        # shellcheck disable=SC2086
        /usr/bin/time -v "$A" plan --index "$WORK/idx1m.alidx" --world 64 $X $D -o "$WORK/m1m.alm" \
          2>"$WORK/time-sp.txt" >/dev/null
        t=$WORK/time-sp.txt
        echo "1M samples, W=64 ${X:-defaults} ${D:-(no SP)}: wall $(grep 'Elapsed (wall' "$t" | awk '{print $NF}'), user $(grep 'User time' "$t" | awk '{print $NF}') s, sys $(grep 'System time' "$t" | awk '{print $NF}') s, peak RSS $(( $(grep 'Maximum resident' "$t" | awk '{print $NF}') / 1024 )) MB; $(grep '^plan: index' "$t")"
      done
    done
  done
fi
