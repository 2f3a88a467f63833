#!/usr/bin/env bash
# dev/bench_index.sh - benchmark of `adaptiveload index`. Not a test.
#
# Builds the CLI with --config=opt, writes synthetic WebDataset corpora, warms
# the page cache, indexes each corpus RUNS times with --threads $THREADS and
# prints per corpus: median seconds and samples/s, bytes read against shard
# bytes (plain tar payloads are skipped with lseek), the bytes the in-memory
# index holds (records per sample, keys) and peak RSS minus a baseline (the
# same binary indexing a one-sample corpus), per sample.
#
# Corpora: N metadata-only samples (KEY.json) in SHARDS plain tar shards, the
# same shards as .tar.lz4 (lz4 -1, needs the `lz4` CLI), and LAT_N samples with
# Wan-2.1-sized bf16 latents (~1.75 MB a sample on average) in LAT_SHARDS shards.
#
# Environment (defaults): N=1000000 SHARDS=100 LAT_N=4000 LAT_SHARDS=16
# THREADS=2 RUNS=3 WORK=/tmp/al_bench_index BIN= (a prebuilt binary: skip the
# build) BAZEL=bazel BAZEL_STARTUP= (e.g. --output_base=...) BAZEL_BUILD_FLAGS= (extra
# build flags) KEEP=1 (keep corpora) REUSE=1 (index kept corpora again, no synthesis).
# The box should be otherwise idle: best_s is the least disturbed run.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
SHARDS=${SHARDS:-100}
LAT_N=${LAT_N:-4000}
LAT_SHARDS=${LAT_SHARDS:-16}
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/al_bench_index}
BAZEL=${BAZEL:-bazel}

if [ -z "${BIN:-}" ]; then
  # shellcheck disable=SC2086
  $BAZEL ${BAZEL_STARTUP:-} build --config=opt ${BAZEL_BUILD_FLAGS:-} //:adaptiveload >&2
  BIN="$($BAZEL ${BAZEL_STARTUP:-} info --config=opt bazel-bin 2>/dev/null)/adaptiveload"
fi
mkdir -p "$WORK"
[ "$BIN" -ef "$WORK/adaptiveload" ] || cp -f "$BIN" "$WORK/adaptiveload"
BIN="$WORK/adaptiveload"

echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load: $(cut -d' ' -f1-3 /proc/loadavg)"
HAVE_LZ4=0
command -v lz4 >/dev/null && HAVE_LZ4=1
if [ "${REUSE:-0}" = 1 ] && [ -d "$WORK/meta" ] && [ -d "$WORK/lat" ] && [ -d "$WORK/one" ]; then
  echo "# reusing the corpora in $WORK (REUSE=1)"
else
  echo "# synthesizing (seed 0) ..."
  rm -rf "$WORK/meta" "$WORK/meta_lz4" "$WORK/lat" "$WORK/one"
  "$BIN" synth --out "$WORK/meta" --samples "$N" --shards "$SHARDS" --payload none
  "$BIN" synth --out "$WORK/lat" --samples "$LAT_N" --shards "$LAT_SHARDS" --payload latent
  "$BIN" synth --out "$WORK/one" --samples 1 --shards 1 --payload none
  if [ "$HAVE_LZ4" = 1 ]; then
    mkdir -p "$WORK/meta_lz4"
    for f in "$WORK"/meta/*.tar; do lz4 -1 -q -f "$f" "$WORK/meta_lz4/$(basename "$f").lz4"; done
  else
    echo "# lz4 CLI not found (Debian package lz4): skipping the .tar.lz4 corpus" >&2
  fi
fi
# Warm the page cache: the numbers are for shards already in memory.
cat "$WORK"/meta/*.tar > /dev/null
[ "$HAVE_LZ4" = 1 ] && cat "$WORK"/meta_lz4/* > /dev/null

run() { # name dir -> one line of results
  local name=$1 dir=$2
  local out="$WORK/runs.txt"
  : > "$out"
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f 'rss_kb %M %U %S' -o "$WORK/time.txt" \
      "$BIN" index --threads "$THREADS" --json --no-progress -o "$WORK/bench.alidx" "$dir" > "$WORK/json.txt"
    echo "$(cat "$WORK/json.txt") $(cat "$WORK/time.txt")" >> "$out"
  done
  python3 - "$name" "$out" "$BASE_RSS_KB" <<'PY'
import json, statistics, sys
name, path, base = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = []
for line in open(path):
    js, t = line.rsplit(" rss_kb ", 1)
    rss, user, sys_ = t.split()
    d = json.loads(js); d["rss_kb"] = int(rss); d["cpu"] = float(user) + float(sys_); rows.append(d)
secs = sorted(r["seconds"] for r in rows)
med = statistics.median(secs)
r = rows[0]
n = r["samples"]
rss = statistics.median(x["rss_kb"] for x in rows)
cpu = statistics.median(x["cpu"] for x in rows)
print(f"{name:<28} {n:>9} {r['shards']:>6} {r['bytes']/1e9:>7.2f} {med:>8.3f} {n/med:>11,.0f} "
      f"{min(secs):>7.3f} {n/min(secs):>11,.0f} {cpu:>6.2f} {100*r['bytes_read']/max(r['bytes'],1):>6.1f}% "
      f"{r['mem_records']/n:>9.1f} {r['mem_keys']/n:>7.1f} {(rss-base)*1024/n:>11.1f}")
PY
}

/usr/bin/time -f '%M' -o "$WORK/time.txt" "$BIN" index --threads "$THREADS" --json --no-progress -o "$WORK/one.alidx" "$WORK/one" > /dev/null
BASE_RSS_KB=$(cat "$WORK/time.txt")
echo "# index --threads $THREADS, $RUNS runs each; page cache warm (latent corpus: as far as it fits); baseline RSS ${BASE_RSS_KB} KB"
printf '%-28s %9s %6s %7s %8s %11s %7s %11s %6s %7s %9s %7s %11s\n' corpus samples shards GB med_s samples/s \
  best_s best_smp/s cpu_s read rec_B/smp key_B/smp rssΔ_B/smp
run "metadata-only .tar" "$WORK/meta"
[ "$HAVE_LZ4" = 1 ] && run "metadata-only .tar.lz4" "$WORK/meta_lz4"
run "latents .tar (payload skip)" "$WORK/lat"
echo "# med/best: wall seconds of the build (not the save); cpu_s: median user+sys of the whole"
echo "# command (build + save), which other load on the box does not inflate;"
echo "# read = bytes read from shard files / shard bytes; rec_B/smp = index records per sample (samples,"
echo "# members, tables; allocated capacity); key_B/smp = key arena per sample; rssΔ = (peak RSS - baseline)"
echo "# per sample, which also holds the build-time key table and in-flight shard results."
if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK/meta" "$WORK/meta_lz4" "$WORK/lat" "$WORK/one"; fi
