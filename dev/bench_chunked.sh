#!/usr/bin/env bash
# dev/bench_chunked.sh BIN_DIR WORK [SAMPLES] [WORLD] [K] - a chunked run against the epoch planner
# at scale: bench_plan writes a metadata-only index of SAMPLES (default 100,000,000) over 10,000
# shards, `plan --save-map` writes its index map, then, each under /usr/bin/time (peak RSS; the
# map's pages are file-backed, shared in the page cache), the epoch planner's whole plan, the
# chunked run's first, middle and last step from the map (`plan --map M --steps A:A+1`), and one
# step from the index (`--planner chunked --steps`). BIN_DIR holds opt builds of adaptiveload and
# bench_plan. Everything is printed; keep the log.
set -uo pipefail
bin=${1:?BIN_DIR} work=${2:?WORK} n=${3:-100000000} W=${4:-1024} K=${5:-2}
mkdir -p "$work" && cd "$work" || exit 2
t() { echo "## $*"; /usr/bin/time -f "wall %e s, user %U s, peak RSS %M KB" "$@" 2>&1 | grep -v "fidelity\|^  "; }
[ -f idx.alidx ] || t "$bin/bench_plan" -o idx.alidx --samples "$n" --shards 10000 --no-members
[ -f idx.map ] || t "$bin/adaptiveload" plan --index idx.alidx --save-map idx.map
ls -l idx.alidx idx.map
steps=$("$bin/adaptiveload" plan --map idx.map --world "$W" --micro-per-step "$K" --steps 0:1 -o s.alm 2>&1 |
  sed -n 's/.*chunked run of \([0-9]*\) steps.*/\1/p')
echo "steps of the chunked run: $steps"
for a in 0 $((steps / 2)) $((steps - 1)); do
  t "$bin/adaptiveload" plan --map idx.map --world "$W" --micro-per-step "$K" --steps "$a:$((a + 1))" -o s.alm
done
t "$bin/adaptiveload" plan --index idx.alidx --world "$W" --micro-per-step "$K" --steps "$((steps / 2)):$((steps / 2 + 1))" -o s.alm
t "$bin/adaptiveload" plan --index idx.alidx --world "$W" --micro-per-step "$K" -o epoch.alm
rm -f s.alm epoch.alm
