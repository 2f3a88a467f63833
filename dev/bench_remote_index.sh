#!/usr/bin/env bash
# dev/bench_remote_index.sh - `adaptiveload index` of the same synthetic corpora from local
# disk, from nginx (http://, brace pattern) and from the S3 server (tests/loader/s3_server.py: s3://, a listed prefix), all on
# this machine's loopback, in one run. Not a test.
#
# Corpora: LAT_N samples with Wan-2.1-sized bf16 latents (~1.75 MB a sample) in SHARDS
# plain tar shards, and META_N metadata-only samples in SHARDS shards (KEY.json only: the
# headers are most of the bytes). Prints per corpus and source: median seconds of RUNS,
# samples/s, HTTP requests, bytes received (remote) or read (local) against the corpus bytes.
#
# Environment (defaults): LAT_N=800 META_N=200000 SHARDS=40 THREADS=8 RUNS=3
# WORK=/tmp/al_bench_remote_index BIN= (a prebuilt binary: skip the build) BAZEL=bazel.
# Needs nginx, curl and the test environment (tools/bootstrap.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAT_N=${LAT_N:-800}
META_N=${META_N:-200000}
SHARDS=${SHARDS:-40}
THREADS=${THREADS:-8}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/al_bench_remote_index}
BAZEL=${BAZEL:-bazel}
if [ -z "${BIN:-}" ]; then
  $BAZEL build --config=opt //:adaptiveload >&2
  BIN="$($BAZEL info --config=opt bazel-bin 2>/dev/null)/adaptiveload"
fi
rm -rf "$WORK" && mkdir -p "$WORK/www"
cp -f "$BIN" "$WORK/adaptiveload"
BIN=$WORK/adaptiveload
T=$WORK
. "$ROOT/tests/loader/remote_servers.sh"

echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
"$BIN" synth --out "$WORK/www/lat" --samples "$LAT_N" --shards "$SHARDS" --seed 0 >/dev/null
"$BIN" synth --out "$WORK/www/meta" --samples "$META_N" --shards "$SHARDS" --seed 0 --payload none >/dev/null
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL
start_nginx "$WORK/www"
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
EP=$S3_EP
for f in "$WORK"/www/lat/*.tar "$WORK"/www/meta/*.tar; do s3_put "$f" "${f#"$WORK"/www/}"; done
cat "$WORK"/www/*/*.tar "$WORK"/s3/*/* >/dev/null 2>&1 || true # warm the page cache

last=$((SHARDS - 1))
pat=$(printf "shard-{000000..%06d}.tar" "$last")
printf "%-6s %-6s %9s %11s %9s %14s %14s\n" corpus source median_s samples/s requests bytes_moved corpus_bytes
for c in lat meta; do
  for src in local http s3; do
    case $src in
      local) args=("$WORK/www/$c") ;;
      http) args=("http://127.0.0.1:$NGINX_PORT/$c/$pat") ;;
      s3) args=(--s3-endpoint "$EP" "s3://bkt/$c/") ;;
    esac
    for r in $(seq 1 "$RUNS"); do
      "$BIN" index --no-progress --json --threads "$THREADS" -o "$WORK/$c.$src.idx" "${args[@]}" \
        >"$WORK/$c.$src.$r.json"
    done
    python3 - "$c" "$src" "$WORK"/"$c.$src".*.json <<'PY'
import json, statistics, sys
runs = [json.load(open(p)) for p in sys.argv[3:]]
s = statistics.median(r["seconds"] for r in runs)
j = runs[0]
moved = j["remote_bytes"] if j["remote_shards"] else j["bytes_read"]
print("%-6s %-6s %9.3f %11.0f %9d %14d %14d" % (sys.argv[1], sys.argv[2], s, j["samples"] / s,
      j["remote_requests"], moved, j["bytes"]))
PY
  done
done
