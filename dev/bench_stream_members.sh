#!/usr/bin/env bash
# dev/bench_stream_members.sh - packed stream throughput with three members and the latent
# crop, beside today's single-member figure measured in the same run. Not a test.
#
# Makes a corpus of typed members (dev/gen_members_corpus.py: KEY.latent.npy float16 at native
# grids larger than their buckets, KEY.t5.npy (L, 4096), KEY.txt), and the synthetic corpus of
# the stream's earlier benchmark (`adaptiveload synth`, raw KEY.latent members, one member,
# no header, no crop), indexes and plans both (world 1, default buckets), warms the page
# cache, then alternates RUNS times:
#   baseline: stream --bench over the synth corpus (the default member: one raw payload)
#   members:  stream --bench --members latent.npy,t5.npy,txt over the typed corpus
#   latent:   stream --bench --members latent.npy (the crop alone)
#   old:      with BASE_BIN (a CLI built before typed members), the baseline again with it
# and prints each run's GB/s (packed payload bytes / wall time) and the medians, and the
# bytes per CPU-second (user + system time of the process, /usr/bin/time), which a busy box
# disturbs less than the wall time.
#
# Environment (defaults): SAMPLES=1000 (typed corpus) SYNTH=1500 THREADS=2 RUNS=5
# WORK=/tmp/al_bench_stream_members BIN= (a prebuilt CLI: skip the build) PY=/usr/bin/python3
# BAZEL_BUILD_FLAGS= (extra build flags, e.g. --copt=-Wno-error=maybe-uninitialized)
# BASE_BIN= (an older CLI for the "old" baseline, e.g. built from `git archive 2a5825c`)
# KEEP=1 (keep corpora) REUSE=1 (use kept corpora). The box should be otherwise idle
# (cat /proc/loadavg).
set -euo pipefail
cd "$(dirname "$0")/.."

SAMPLES=${SAMPLES:-1000}
SYNTH=${SYNTH:-1500}
THREADS=${THREADS:-2}
RUNS=${RUNS:-5}
WORK=${WORK:-/tmp/al_bench_stream_members}
PY=${PY:-/usr/bin/python3}

if [ -z "${BIN:-}" ]; then
  bazel build --config=opt ${BAZEL_BUILD_FLAGS:-} //:adaptiveload >/dev/null
  BIN=$(bazel info --config=opt ${BAZEL_BUILD_FLAGS:-} bazel-bin 2>/dev/null)/adaptiveload
fi
echo "binary: $BIN  commit: $(git rev-parse --short HEAD)$(git diff --quiet -- stream cli || echo '+dirty')"
echo "loadavg before: $(cat /proc/loadavg)"

if [ "${REUSE:-0}" != 1 ]; then
  rm -rf "$WORK"
  mkdir -p "$WORK"
  "$PY" dev/gen_members_corpus.py "$WORK/typed" --samples "$SAMPLES" --shards 8 --seed 1
  "$BIN" synth --out "$WORK/synth" --samples "$SYNTH" --shards 8 --seed 1 >/dev/null
  "$BIN" index -o "$WORK/typed.alidx" "$WORK/typed" >/dev/null
  "$BIN" index -o "$WORK/synth.alidx" "$WORK/synth" >/dev/null
  "$BIN" plan --index "$WORK/typed.alidx" --world 1 -o "$WORK/typed.alm" >/dev/null
  "$BIN" plan --index "$WORK/synth.alidx" --world 1 -o "$WORK/synth.alm" >/dev/null
fi
cat "$WORK"/typed/*.tar "$WORK"/synth/*.tar >/dev/null  # page cache
echo "corpora: typed $(du -sh "$WORK/typed" | cut -f1), synth $(du -sh "$WORK/synth" | cut -f1)"

gbs() { sed -n 's/.*"gb_per_s":\([0-9.]*\).*/\1/p'; }
run() { # name args...
  local name=$1 bin=$BIN
  shift
  [ "$name" = old ] && bin=$BASE_BIN
  local out cpu bytes
  out=$(/usr/bin/time -f "%U %S" -o "$WORK/cpu" "$bin" stream --rank 0 --threads "$THREADS" --prefetch 4 \
    --bench --json "$@")
  cpu=$(awk '{print $1 + $2}' "$WORK/cpu")
  bytes=$(echo "$out" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
  echo "$name $out cpu_s $cpu" >&2
  echo "$(echo "$out" | gbs)/$(awk -v b="$bytes" -v c="$cpu" 'BEGIN {printf "%.2f", (c > 0 ? b / c / 1e9 : 0)}')"
}
base=() mem=() lat=() old=()
for r in $(seq "$RUNS"); do
  base+=("$(run baseline --index "$WORK/synth.alidx" --manifest "$WORK/synth.alm")")
  [ -z "${BASE_BIN:-}" ] || old+=("$(run old --index "$WORK/synth.alidx" --manifest "$WORK/synth.alm")")
  mem+=("$(run members --index "$WORK/typed.alidx" --manifest "$WORK/typed.alm" --members latent.npy,t5.npy,txt)")
  lat+=("$(run latent --index "$WORK/typed.alidx" --manifest "$WORK/typed.alm" --members latent.npy)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
report() { # label, then the runs as WALL/CPU pairs
  local label=$1 w=() c=()
  shift
  for x in "$@"; do
    w+=("${x%/*}")
    c+=("${x#*/}")
  done
  echo "$label  GB/s: ${w[*]}  median $(median "${w[@]}")  | GB per CPU-s: ${c[*]}  median $(median "${c[@]}")"
}
echo "runs: wall GB/s, then packed GB per CPU-second of the process"
report "baseline (synth, one raw member)" "${base[@]}"
report "members (latent.npy,t5.npy,txt) " "${mem[@]}"
report "latent.npy alone (crop)         " "${lat[@]}"
[ -z "${BASE_BIN:-}" ] || report "baseline, BASE_BIN $BASE_BIN" "${old[@]}"
echo "loadavg after: $(cat /proc/loadavg)"
[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
