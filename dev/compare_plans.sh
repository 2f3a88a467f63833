#!/usr/bin/env bash
# dev/compare_plans.sh OLD_BIN NEW_BIN [WORK] - do two builds of the CLI write the same manifests
# over the planner's scheduling space? For a change to the schedule's internals that must not
# change a plan (dev/compare_builds.sh covers the other verbs at the default K):
#   three synthetic corpora (500, 3,000 and 20,000 metadata-only samples), the default and a
#   fitted power cost model, all three policies, W = 1, 2, 3, 8, 64, K = 1 .. 4,096 (both sides
#   of the levelling's search switch at K = 16), seeds 0 and 7, last step pad and drop, short
#   windows, a step-token target, a start step and an elastic re-plan of each adaptive plan;
#   K = 16,384 at W = 1 and 2 on the small corpus.
# Prints one line per differing manifest and `compare: N same, M differ`; exit 1 if any differ.
set -uo pipefail
OLD=${1:?OLD_BIN} NEW=${2:?NEW_BIN} WORK=${3:-/tmp/al_compare_plans}
here=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
same=0 differ=0
for c in 500:1 3000:4 20000:3; do
  n=${c%:*} s=${c#*:}
  "$NEW" synth --out c$n --samples "$n" --payload none --seed "$s" >/dev/null 2>&1 || exit 2
  "$NEW" index -o c$n.alidx c$n >/dev/null 2>&1 || exit 2
done
"$NEW" fit --bench "$here/cost/data/h200_shape_bench.csv" --model power -o power.cost >/dev/null 2>&1 || exit 2
one() {  # NAME ARGS... : plan with both binaries, compare, then re-plan the adaptive ones
  local name=$1
  shift
  "$OLD" plan "$@" -o old-$name.alm >old-$name.txt 2>&1
  "$NEW" plan "$@" -o new-$name.alm >new-$name.txt 2>&1
  if cmp -s old-$name.alm new-$name.alm && cmp -s old-$name.txt new-$name.txt; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "DIFFER $name: $*"
  fi
}
for n in 500 3000 20000; do
  for W in 1 2 3 8 64; do
    for K in 1 2 4 8 16 17 32 64 256 1024 4096; do
      [ $n = 20000 ] && [ $((W * K)) -gt 4096 ] && continue
      [ $((W * K)) -gt 65536 ] && continue
      for P in adaptive equal-token adaptive-unbalanced; do
        for S in 0 7; do
          one $n-$W-$K-$P-$S --index c$n.alidx --world $W --micro-per-step $K --policy $P --seed $S --json
        done
      done
      one $n-$W-$K-drop --index c$n.alidx --world $W --micro-per-step $K --last-step drop --json
      one $n-$W-$K-win --index c$n.alidx --world $W --micro-per-step $K --window 3 --seed 2 --json
      one $n-$W-$K-power --index c$n.alidx --world $W --micro-per-step $K --cost power.cost --json
    done
  done
  one $n-tokens --index c$n.alidx --world 8 --step-tokens 2000000 --json
  one $n-start --index c$n.alidx --world 8 --micro-per-step 32 --start-step 1 --json
done
for K in 16384; do
  for W in 1 2; do one 500-$W-$K --index c500.alidx --world $W --micro-per-step $K --json; done
done
for f in new-*-adaptive-0.alm; do
  b=${f#new-} b=${b%.alm}
  one re-$b --resume-from "$f" --at-step 1 --world 5 --json
done
echo "compare: $same same, $differ differ"
[ $differ = 0 ]
