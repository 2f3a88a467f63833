#!/usr/bin/env bash
# dev/bench_remote.sh - read throughput of the remote layer (//storage) on a synthetic
# corpus, against local disk in the same run. Not a test.
#
# Sources, each read with tests/storage/remote_probe's `ranges` mode (one process, one
# client, an object per shard, reads in order, one at a time):
#   local         pread of the shard files (the baseline; page cache warm)
#   nginx         Debian's nginx on 127.0.0.1
#   moto          tests/loader/s3_server.py (moto's S3, the test environment) on 127.0.0.1, path-style, SigV4-signed
#   nginx+proxy   nginx behind tests/loader/fault_proxy.py at PROXY_LATENCY_MS per request
#   moto+proxy    and PROXY_BW bytes/s (all connections together)
# Modes (MODES):
#   shard         one GET of each whole shard
#   member        one ranged GET per tar member (the data bytes of every KEY.json and
#                 KEY.latent, in tar order), what a member-level reader sends
#   stream        `adaptiveload stream --index I --manifest M --bench` over the source's
#                 URLs: run_stream below (index, plan, one epoch with --bench)
# Before the timed runs, each source reads each mode's ranges once computing the CRC-32 of
# the bytes, which must equal the local one: a wrong byte fails the benchmark. Prints per source and mode: ranges
# (requests), bytes, best and median seconds of RUNS, MB/s of the best.
#
# Environment (defaults): N=120 samples in SHARDS=4 shards (~1.75 MB a sample), RUNS=3,
# MODES="shard member", PROXY_LATENCY_MS=50, PROXY_BW=500000000, WORK=/tmp/al_bench_remote,
# BIN= and PROBE= (prebuilt adaptiveload and remote_probe: skip the build), BAZEL=bazel,
# KEEP=1 (keep WORK). Needs nginx, curl, python3 and the test environment (tools/bootstrap.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

N=${N:-120}
SHARDS=${SHARDS:-4}
RUNS=${RUNS:-3}
MODES=${MODES:-shard member}
PROXY_LATENCY_MS=${PROXY_LATENCY_MS:-50}
PROXY_BW=${PROXY_BW:-500000000}
WORK=${WORK:-/tmp/al_bench_remote}
BAZEL=${BAZEL:-bazel}

if [ -z "${BIN:-}" ] || [ -z "${PROBE:-}" ]; then
  $BAZEL build --config=opt //:adaptiveload //tests/storage:remote_probe >&2
  OUTB=$($BAZEL info --config=opt bazel-bin 2>/dev/null)
  BIN=${BIN:-$OUTB/adaptiveload}
  PROBE=${PROBE:-$OUTB/tests/storage/remote_probe}
fi
rm -rf "$WORK" && mkdir -p "$WORK"
T=$WORK
. "$REPO/tests/loader/remote_servers.sh"
. "$REPO/tests/loader/remote_fault_proxy.sh"
cleanup() {
  local rc=$?
  set +e # the servers' exit statuses (killed: 143) are not the benchmark's
  stop_servers
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)'); $(date -u '+%Y-%m-%d %H:%M UTC')"
"$BIN" synth --out "$WORK/corpus" --samples "$N" --shards "$SHARDS" --payload latent >/dev/null
SHARD_NAMES=$(cd "$WORK/corpus" && ls ./*.tar | sed 's|^\./||')
cat "$WORK"/corpus/*.tar >/dev/null # warm the page cache

# lists MODE PREFIX: "URL OFF LEN" lines for every shard, URL = PREFIX + shard name.
lists() {
  python3 - "$1" "$2" "$WORK/corpus" $SHARD_NAMES <<'PY'
import os, sys, tarfile
mode, prefix, root, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
for name in names:
    path = os.path.join(root, name)
    if mode == "shard":
        print(prefix + name, 0, os.path.getsize(path))
        continue
    with tarfile.open(path) as tf:
        for m in tf:
            if m.isfile() and m.size > 0:
                print(prefix + name, m.offset_data, m.size)
PY
}

start_nginx "$WORK/corpus"
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL
for s in $SHARD_NAMES; do s3_put "$WORK/corpus/$s" "corpus/$s"; done
start_proxy px-nginx "http://127.0.0.1:$NGINX_PORT" latency_ms="$PROXY_LATENCY_MS" bandwidth="$PROXY_BW"
PX_NGINX=$PROXY_PORT
start_proxy px-s3 "http://127.0.0.1:$S3_PORT" latency_ms="$PROXY_LATENCY_MS" bandwidth="$PROXY_BW"
PX_S3=$PROXY_PORT

# name PREFIX ENDPOINT for each source (ENDPOINT: AWS_ENDPOINT_URL for s3:// URLs, or -).
SOURCES=(
  "local $WORK/corpus/ -"
  "nginx http://127.0.0.1:$NGINX_PORT/ -"
  "moto s3://bkt/corpus/ http://127.0.0.1:$S3_PORT"
  "nginx+proxy http://127.0.0.1:$PX_NGINX/ -"
  "moto+proxy s3://bkt/corpus/ http://127.0.0.1:$PX_S3"
)

# run_ranges NAME PREFIX ENDPOINT MODE: an untimed read with a CRC check, then RUNS timed.
declare -A CRC
run_ranges() {
  local name=$1 prefix=$2 ep=$3 mode=$4 list="$WORK/$4.$1.list" secs=() line
  lists "$mode" "$prefix" >"$list"
  for r in $(seq 0 "$RUNS"); do
    local crc=""
    [ "$r" = 0 ] && crc=crc
    if [ "$ep" = - ]; then
      line=$("$PROBE" -t 60 ranges "$list" $crc 2>"$WORK/err") || { cat "$WORK/err" >&2; exit 1; }
    else
      line=$(AWS_ENDPOINT_URL=$ep "$PROBE" -t 60 ranges "$list" $crc 2>"$WORK/err") ||
        { cat "$WORK/err" >&2; exit 1; }
    fi
    if [ "$r" = 0 ]; then
      local c
      c=$(echo "$line" | sed -n 's/^crc32 //p')
      [ -n "${CRC[$mode]:-}" ] || CRC[$mode]=$c
      [ "$c" = "${CRC[$mode]}" ] || { echo "$name $mode: crc32 $c, local ${CRC[$mode]}" >&2; exit 1; }
      continue
    fi
    secs+=("$(echo "$line" | head -1 | awk '{print $6}')")
    RANGES=$(echo "$line" | head -1 | awk '{print $2}')
    BYTES=$(echo "$line" | head -1 | awk '{print $4}')
  done
  printf '%s\n' "${secs[@]}" | sort -g >"$WORK/secs"
  local best med
  best=$(head -1 "$WORK/secs")
  med=$(sed -n "$(((RUNS + 1) / 2))p" "$WORK/secs")
  printf '%-13s %-7s %8s %12s %9s %9s %10.1f\n' "$name" "$mode" "$RANGES" "$BYTES" "$best" "$med" \
    "$(python3 -c "print($BYTES / max($best, 1e-9) / 1e6)")"
}

# run_stream NAME PREFIX ENDPOINT: the stream over the source (an index that fails is reported
# with its first rejection).
run_stream() {
  local name=$1 prefix=$2 ep=$3 urls=()
  for s in $SHARD_NAMES; do urls+=("$prefix$s"); done
  if ! AWS_ENDPOINT_URL=${ep/#-/} "$BIN" index -o "$WORK/stream.$name.alidx" "${urls[@]}" \
    >/dev/null 2>"$WORK/stream.err"; then
    printf '%-13s %-7s not available: %s\n' "$name" stream \
      "$(grep -m1 -A1 '^rejected:' "$WORK/stream.err" | tail -1 | sed 's/^ *//')"
    return 0
  fi
  "$BIN" plan --index "$WORK/stream.$name.alidx" --world 1 -o "$WORK/stream.$name.alm" \
    >/dev/null 2>&1
  AWS_ENDPOINT_URL=${ep/#-/} "$BIN" stream --index "$WORK/stream.$name.alidx" \
    --manifest "$WORK/stream.$name.alm" --bench | sed "s/^/$name stream: /"
}

echo "# N=$N SHARDS=$SHARDS RUNS=$RUNS proxy: ${PROXY_LATENCY_MS} ms/request, $PROXY_BW bytes/s"
printf '%-13s %-7s %8s %12s %9s %9s %10s\n' source mode ranges bytes best_s median_s MB/s
for mode in $MODES; do
  for src in "${SOURCES[@]}"; do
    set -- $src
    if [ "$mode" = stream ]; then run_stream "$@"; else run_ranges "$@" "$mode"; fi
  done
done
for p in "$PX_NGINX" "$PX_S3"; do
  proxy_stats "$p" | python3 -c 'import json, sys; d = json.load(sys.stdin)
print("# proxy :%s: %d requests, %d body bytes, %d injected faults" % (sys.argv[1], d["requests"],
      d["body_bytes"], sum(d[k] for k in ("fail", "burst", "throttle", "reset", "truncate"))))' "$p"
done
