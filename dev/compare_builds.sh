#!/usr/bin/env bash
# dev/compare_builds.sh OLD_BIN NEW_BIN [WORK] - do two builds of the CLI behave the same?
#
# For a refactor that must not change behaviour: runs both `adaptiveload` binaries on the
# same inputs and compares every file and every line they write, byte for byte:
#   index of plain and of .tar.lz4 shards (metadata-only synthetic corpus, 20,000 samples);
#   plan for W = 1, 8, 16, 64, both policies, seeds 0 and 7, and inspect --json/--jsonl;
#   fit of the embedded H200 shape benchmark, and a plan with that cost model;
#   an elastic re-plan (8 -> 4 ranks at step 10);
#   stream lines of 200 micro-batches over a corpus with real-size latents (300 samples).
# Prints one line per comparison and `compare: N same, M differ`; exit 1 if any differ.
# Build an old binary from another commit in a worktree, e.g.
#   git worktree add /tmp/old COMMIT && (cd /tmp/old && bazel build --config=opt //:adaptiveload)
set -uo pipefail
OLD=${1:?OLD_BIN} NEW=${2:?NEW_BIN} WORK=${3:-/tmp/al_compare_builds}
here=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
same=0 differ=0
check() {  # FILE... : old-FILE vs new-FILE
  for f in "$@"; do
    if cmp -s "old-$f" "new-$f"; then same=$((same + 1)); else differ=$((differ + 1)); echo "DIFFER $f"; fi
  done
}
"$NEW" synth --out meta --samples 20000 --payload none --seed 3 >/dev/null 2>&1 || exit 2
"$NEW" synth --out lat --samples 300 --shards 4 --seed 5 >/dev/null 2>&1 || exit 2
mkdir -p lz && for f in meta/shard-00000[0-3].tar; do lz4 -q -1 "$f" "lz/$(basename "$f").lz4"; done
for v in old new; do
  B=$([ $v = old ] && echo "$OLD" || echo "$NEW")
  "$B" index -o $v-meta.alidx meta >$v-index.txt 2>&1
  "$B" index -o $v-lz.alidx lz >$v-index-lz.txt 2>&1
  "$B" index -o $v-lat.alidx lat >/dev/null 2>&1
  "$B" fit --bench "$here/cost/data/h200_shape_bench.csv" -o $v-model.cost --json >$v-fit.json 2>&1
done
check meta.alidx lz.alidx lat.alidx fit.json model.cost
for W in 1 8 16 64; do
  for P in adaptive equal-token; do
    for S in 0 7; do
      n=$W-$P-$S
      for v in old new; do
        B=$([ $v = old ] && echo "$OLD" || echo "$NEW")
        "$B" plan --index new-meta.alidx --world $W --policy $P --seed $S -o $v-$n.alm >$v-$n.txt 2>&1
        "$B" inspect $v-$n.alm --json >$v-$n.json 2>&1
        "$B" inspect $v-$n.alm --jsonl >$v-$n.jsonl 2>&1
      done
      check $n.alm $n.json $n.jsonl
    done
  done
done
"$NEW" plan --index new-lat.alidx --world 1 -o lat.alm >/dev/null 2>&1
for v in old new; do
  B=$([ $v = old ] && echo "$OLD" || echo "$NEW")
  "$B" plan --index new-meta.alidx --world 8 --cost new-model.cost -o $v-cost.alm >/dev/null 2>&1
  "$B" plan --resume-from new-8-adaptive-0.alm --at-step 10 --world 4 -o $v-replan.alm >/dev/null 2>&1
  "$B" plan --index new-lat.alidx --world 1 -o $v-lat.alm >/dev/null 2>&1
  # Each line's stall and fetched bytes are the run's, not the build's: left out.
  # stdout and stderr apart: interleaved, the summary on stderr lands inside a buffered line.
  "$B" stream --index new-lat.alidx --manifest lat.alm --rank 0 --max-batches 200 2>$v-stream.err |
    sed 's/ stall_s [0-9.]* fetched [0-9]*//' >$v-stream.txt
done
check cost.alm replan.alm lat.alm stream.txt stream.err
echo "compare: $same same, $differ differ"
[ $differ = 0 ]
