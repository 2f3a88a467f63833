#!/usr/bin/env bash
# dev/bench_billion.sh BIN_DIR WORK [SAMPLES] [WORLD] [K] [SHARDS] [EPOCH] - a chunked run planned
# from an index map too large to load (docs/DESIGN.md §6.14): `bench_plan --map` writes the map of
# SAMPLES metadata-only samples (default 10^9 over 100,000 shards) without building the index,
# then one step at the first, a middle and the last step is planned from it (`plan --map M
# --steps A:A+1`), each with its wall time and its peak anonymous memory (RssAnon of
# /proc/PID/status sampled every 10 ms: the map is file-backed, shared in the page cache, so RSS
# says little), and `plan --map M --check` plans the whole pass on one thread (samples planned a
# second). EPOCH=1 also writes the index itself (it must fit in memory: 10^8 here) and times the
# epoch planner's whole plan under /usr/bin/time in the same run. BIN_DIR holds opt builds of
# adaptiveload and bench_plan. Everything is printed as it happens; keep the log.
set -uo pipefail
bin=${1:?BIN_DIR} work=${2:?WORK} n=${3:-1000000000} W=${4:-4096} K=${5:-2}
shards=${6:-100000} epoch=${7:-0}
mkdir -p "$work" && cd "$work" || exit 2

# peak CMD...: runs CMD, then prints its wall time, peak RssAnon and peak VmRSS (sampled).
peak() {
  echo "## $*"
  local t0 t1 pid a r pa=0 pr=0
  t0=$(date +%s.%N)
  "$@" 2>&1 | grep -v "fidelity\|^  " &
  pid=
  for _ in $(seq 200); do pid=$(pgrep -n -f "^$1 ") && break; sleep 0.005; done
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do
    read -r a r < <(awk '/^RssAnon/{a=$2} /^VmRSS/{r=$2} END{print a+0, r+0}' "/proc/$pid/status" 2>/dev/null)
    [ "${a:-0}" -gt "$pa" ] && pa=$a
    [ "${r:-0}" -gt "$pr" ] && pr=$r
    sleep 0.01
  done
  wait
  t1=$(date +%s.%N)
  echo "wall $(echo "$t1 - $t0" | bc) s, peak RssAnon $pa KB, peak RSS $pr KB (sampled every 10 ms)"
}
t() { echo "## $*"; /usr/bin/time -f "wall %e s, user %U s, peak RSS %M KB" "$@" 2>&1 | grep -v "fidelity\|^  "; }

echo "# $(date -Is) $(uname -n), $(nproc) cores; $n samples, W = $W, K = $K"
df -h . | tail -1
[ -f idx.map ] || t "$bin/bench_plan" --map idx.map --samples "$n" --shards "$shards" --no-members
ls -l idx.map
steps=$("$bin/adaptiveload" plan --map idx.map --world "$W" --micro-per-step "$K" --steps 0:1 -o s.alm 2>&1 |
  tee /dev/stderr | sed -n 's/.*chunked run of \([0-9]*\) steps.*/\1/p')
echo "steps of the chunked run: $steps"
for a in 0 $((steps / 2)) $((steps - 1)); do
  peak "$bin/adaptiveload" plan --map idx.map --world "$W" --micro-per-step "$K" --steps "$a:$((a + 1))" -o s.alm
  "$bin/adaptiveload" inspect s.alm --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print("step summary:", {k: d.get(k) for k in ("samples", "tokens", "micro_batches", "bubble", "predicted_tokens_per_s")})' || true
done
peak "$bin/adaptiveload" plan --map idx.map --world "$W" --micro-per-step "$K" --steps "$((steps / 2)):$((steps / 2 + 1))" --rank 0 -o r.alm
ls -l s.alm r.alm
peak "$bin/adaptiveload" plan --map idx.map --world "$W" --micro-per-step "$K" --check --json
if [ "$epoch" = 1 ]; then
  [ -f idx.alidx ] || t "$bin/bench_plan" -o idx.alidx --samples "$n" --shards "$shards" --no-members
  t "$bin/adaptiveload" plan --index idx.alidx --world "$W" --micro-per-step "$K" -o epoch.alm
fi
rm -f s.alm r.alm epoch.alm
echo "# $(date -Is) done"
