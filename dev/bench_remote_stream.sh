#!/bin/bash
# Epoch throughput of one corpus streamed from local disk, nginx and moto's S3 server (loopback), cold
# and with a warm cache folder, and the first micro-batch's latency on a cold cache.
# usage: dev/bench_remote_stream.sh BIN [SAMPLES] [SHARDS]   (servers from tests/loader/remote_servers.sh)
set -uo pipefail
BIN=$(readlink -f "$1"); N=${2:-192}; SH=${3:-8}
T=$(mktemp -d /tmp/bench_remote.XXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../tests/loader/remote_servers.sh"
trap 'stop_servers; rm -rf "$T"' EXIT
"$BIN" synth --out "$T/www/corpus" --samples "$N" --shards "$SH" --seed 3 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
start_nginx "$T/www"
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=$S3_EP
for f in "$T"/www/corpus/*.tar; do s3_put "$f" "corpus/$(basename "$f")"; done
S=("$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --bench --json --no-pinned)
row() { # stdin: one --bench --json object
 python3 -c "import json,sys; d=json.load(sys.stdin); print('%-26s %8.3f s %7.3f GB/s stall %5.1f%% fetched %7.1f MB req %5d hits %4d' % (sys.argv[1], d['seconds'], d['gb_per_s'], 100*d['stall_seconds']/max(d['seconds'],1e-9), d['bytes_fetched']/1e6, d['requests'], d['cache_hits']))" "$1"; }
sync
"${S[@]}" | row "local disk (page cache)"
"${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/corpus" | row "nginx, no cache"
"${S[@]}" --root "$T/www/corpus=s3://bkt/corpus" | row "moto S3, no cache"
"${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/corpus" --cache-dir "$T/c1" | row "nginx, cold cache+ahead"
"${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/corpus" --cache-dir "$T/c1" | row "nginx, warm cache"
"${S[@]}" --root "$T/www/corpus=s3://bkt/corpus" --cache-dir "$T/c2" | row "moto S3, cold cache+ahead"
"${S[@]}" --root "$T/www/corpus=s3://bkt/corpus" --cache-dir "$T/c2" | row "moto S3, warm cache"
for src in "http://127.0.0.1:$NGINX_PORT/corpus" "s3://bkt/corpus"; do
  rm -rf "$T/c3"
  "${S[@]}" --root "$T/www/corpus=$src" --cache-dir "$T/c3" --max-batches 1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print('first micro-batch, cold cache, %s: %.1f ms' % (sys.argv[1], 1e3*d['seconds']))" "${src%%:*}"
done
rm -rf "$T/c3"
"${S[@]}" --max-batches 1 | python3 -c "import json,sys; d=json.load(sys.stdin); print('first micro-batch, local disk: %.1f ms' % (1e3*d['seconds']))"
