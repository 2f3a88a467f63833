#!/usr/bin/env bash
# dev/bench_feed.sh BIN_DIR WORK [SAMPLES] [WORLD] [K] [RANK] - the plan side of a stream over a
# chunked run against a manifest's stream, on a metadata-only corpus (no shards, no reads):
# bench_plan writes an index of SAMPLES (default 10,000,000) over 10,000 shards, `plan
# --save-map` its index map; then bench_feed (one process each) pulls rank RANK's batch
# descriptors of 4 windows through the plan feed from the first, a middle and the last step, and
# prepares the manifest path's stream (the whole epoch planned, saved, loaded and flattened into
# the rank's plan). BIN_DIR holds opt builds of adaptiveload, bench_plan and bench_feed. Every
# figure is printed; keep the log.
set -uo pipefail
bin=${1:?BIN_DIR} work=${2:?WORK} n=${3:-10000000} W=${4:-1024} K=${5:-2} R=${6:-0}
mkdir -p "$work" && cd "$work" || exit 2
t() { echo "## $*"; /usr/bin/time -f "wall %e s, user %U s, peak RSS %M KB" "$@" 2>&1 | grep -v "fidelity\|^  "; }
[ -f idx.alidx ] || t "$bin/bench_plan" -o idx.alidx --samples "$n" --shards 10000 --no-members
[ -f idx.map ] || t "$bin/adaptiveload" plan --index idx.alidx --save-map idx.map
ls -l idx.alidx idx.map
for at in first middle last; do
  for ahead in 1 2; do
    t "$bin/bench_feed" --map idx.map --world "$W" --micro-per-step "$K" --rank "$R" --mode feed \
      --windows 4 --ahead "$ahead" --at "$at"
  done
done
t "$bin/bench_feed" --map idx.map --world "$W" --micro-per-step "$K" --rank "$R" --mode manifest
