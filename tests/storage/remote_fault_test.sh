#!/bin/bash
# //storage through fault_proxy.py (a reverse proxy of this project's) in front of
# Debian's nginx and the S3 server (tests/loader/s3_server.py) on 127.0.0.1. Every read is compared byte for byte with the
# local file, and the proxy's counters show each fault was injected:
#   each fault kind alone (latency, a bandwidth cap, every Nth request 503, a burst of 503s by
#   count and by time, 429 with Retry-After in seconds and as an HTTP date, resets and clean
#   closes in mid-body) and all of them at once in front of the S3 server (signed requests);
#   an object changed between open and read (rewritten on disk, a same-size and a longer
#   file; an ETag or total size the answers change): an error naming the URL;
#   a server that stays down (503s, an upstream that is gone): a bounded failure naming the
#   URL, the attempts and the last error;
#   nginx killed and restarted in the middle of a read: the read completes, right bytes.
# No tight timing: budgets are generous, and waits poll the proxy's counters.
set -uo pipefail
PROBE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_fault
rm -rf "$T" && mkdir -p "$T/www"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"
. "$(dirname "$(readlink -f "$0")")/../loader/remote_fault_proxy.sh"

head -c 3000000 /dev/urandom >"$T/www/blob"
head -c 24000000 /dev/urandom >"$T/www/big"
start_nginx "$T/www"
NG=http://127.0.0.1:$NGINX_PORT

probe() { "$PROBE" "$@" >"$T/out" 2>"$T/err"; }
# retried: the probe's stats line shows at least one retry.
retried() {
  grep -Eq '^requests [0-9]+ retries [1-9][0-9]* bytes' "$T/err" || fail "$1: no retry: $(cat "$T/err")"
}
# injected PORT KEY: the proxy counted at least one KEY.
injected() {
  proxy_stats "$1" >"$T/stats"
  python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[sys.argv[2]] < 1)' "$T/stats" "$2" ||
    fail "no $2 injected: $(cat "$T/stats")"
}
# check NAME URL FILE: a ranged read and a chunked whole read of URL equal FILE's bytes.
check() {
  local name=$1 url=$2 file=$3 size
  size=$(stat -c %s "$file")
  probe -t 30 -b 0.02 get "$url" 123457 1500000 "$T/got" || fail "$name get: $(cat "$T/err")"
  cmp -s -i 123457:0 -n 1500000 "$file" "$T/got" && [ "$(stat -c %s "$T/got")" = 1500000 ] ||
    fail "$name get: bytes differ"
  probe -t 30 -b 0.02 cat "$url" "$T/got" 262144 || fail "$name cat: $(cat "$T/err")"
  cmp -s "$file" "$T/got" && [ "$(stat -c %s "$T/got")" = "$size" ] || fail "$name cat: bytes differ"
}

# Each fault kind alone, in front of nginx.
kinds=(
  "latency latency_ms=20"
  "bandwidth bandwidth=3000000"
  "fail fail_every=3"
  "throttle throttle_every=3 retry_after=1"
  "throttle throttle_every=4 retry_after=1 retry_after_date=1"
  "reset reset_every=2"
  "truncate truncate_every=2"
)
for k in "${kinds[@]}"; do
  set -- $k
  key=$1
  shift
  start_proxy "p-$key" "$NG" "$@"
  check "$*" "http://127.0.0.1:$PROXY_PORT/blob" "$T/www/blob"
  case $key in latency | bandwidth) ;; *) retried "$*" && injected "$PROXY_PORT" "$key" ;; esac
done
# The bandwidth cap holds: 3 MB/s for 4.5 MB takes at least 1 s (a lower bound only).
start_proxy p-bw "$NG" bandwidth=3000000
t0=$(date +%s.%N)
probe cat "http://127.0.0.1:$PROXY_PORT/blob" "$T/got" 3000000 || fail "bw: $(cat "$T/err")"
python3 -c "import sys; sys.exit(not ($(date +%s.%N) - $t0 >= 0.9))" || fail "bandwidth cap not kept"
# A Retry-After date is honoured: the retry waits for it (at least 1 s, the date's grain).
start_proxy p-date "$NG" throttle_every=2 retry_after=2 retry_after_date=1
t0=$(date +%s.%N)
probe -b 0.01 get "http://127.0.0.1:$PROXY_PORT/blob" 0 1000 "$T/got" || fail "date: $(cat "$T/err")"
python3 -c "import sys; sys.exit(not ($(date +%s.%N) - $t0 >= 1))" || fail "a Retry-After date was not honoured"
cmp -s -n 1000 "$T/www/blob" "$T/got" || fail "date: bytes differ"
injected "$PROXY_PORT" throttle

# Bursts, set at run time: the next 5 requests fail; then every request for 1.5 s.
start_proxy p-burst "$NG"
P=http://127.0.0.1:$PROXY_PORT
proxy_set "$PROXY_PORT" "burst=5"
check "burst=5" "$P/blob" "$T/www/blob"
injected "$PROXY_PORT" burst
curl -s "$P/__proxy/zero" >/dev/null
proxy_set "$PROXY_PORT" "burst_s=1.5"
check "burst_s=1.5" "$P/blob" "$T/www/blob"
injected "$PROXY_PORT" burst

# All at once, in front of the S3 server: SigV4-signed requests forwarded with their headers.
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL
s3_put "$T/www/blob" d/blob.tar
start_proxy p-s3 "http://127.0.0.1:$S3_PORT" latency_ms=5 fail_every=5 throttle_every=7 reset_every=3 \
  truncate_every=4 bandwidth=20000000
SP=$PROXY_PORT
probe -e "http://127.0.0.1:$SP" list s3://bkt/d/ || fail "s3 list: $(cat "$T/err")"
grep -q "^s3://bkt/d/blob.tar 3000000 " "$T/out" || fail "s3 list: $(cat "$T/out")"
AWS_ENDPOINT_URL=http://127.0.0.1:$SP check "s3 all faults" s3://bkt/d/blob.tar "$T/www/blob"
retried "s3 all faults"
for k in fail throttle reset truncate; do injected "$SP" "$k"; done

# A changed object (same size, then another size): an error naming the URL, no bytes used.
start_proxy p-change "$NG"
P=http://127.0.0.1:$PROXY_PORT
for newsize in 300000 300001; do
  rm -f "$T/sync" "$T/sync.opened" "$T/got"
  head -c 300000 /dev/urandom >"$T/www/changing"
  "$PROBE" -w "$T/sync" get "$P/changing" 0 1000 "$T/got" >"$T/out" 2>"$T/err" &
  pid=$!
  for _ in $(seq 1 400); do [ -f "$T/sync.opened" ] && break; sleep 0.05; done
  sleep 1.1 # a new mtime second: nginx's ETag is mtime-size
  head -c $newsize /dev/urandom >"$T/www/changing.new" && mv "$T/www/changing.new" "$T/www/changing"
  touch "$T/sync"
  wait $pid && fail "changed ($newsize): read"
  grep -q "^$P/changing: the object changed since it was opened" "$T/err" ||
    fail "changed ($newsize): $(cat "$T/err")"
  [ ! -e "$T/got" ] || fail "changed ($newsize): bytes written"
done

# The object changed as the proxy reports it (another ETag, a longer total in Content-Range,
# the upstream's own object unchanged): the same error, saying what changed.
start_proxy p-answer "$NG" etag='"other"'
P=http://127.0.0.1:$PROXY_PORT
probe get "$P/blob" 0 1000 "$T/got2" && fail "etag: read"
grep -qF "$P/blob: the object changed since it was opened (ETag " "$T/err" && grep -qF 'now "other")' "$T/err" ||
  fail "etag: $(cat "$T/err")"
proxy_set "$PROXY_PORT" "etag=&total_delta=1"
probe get "$P/blob" 0 1000 "$T/got2" && fail "size: read"
grep -qxF "$P/blob: the object changed since it was opened (size 3000000, now 3000001)" "$T/err" ||
  fail "size: $(cat "$T/err")"
[ ! -e "$T/got2" ] || fail "changed answers: bytes written"

# A server that stays down: every answer 503; then an upstream that is gone (502s); then
# no server at all. Each fails within its budget (2 s) plus generous slack.
start_proxy p-down "$NG" burst_s=100000
P=http://127.0.0.1:$PROXY_PORT
t0=$(date +%s)
probe -t 2 -b 0.05 get "$P/blob" 0 10 "$T/got" && fail "always 503: read"
grep -Eq "^$P/blob: gave up after [0-9]+ attempts in [0-9.]+ s; last error: HTTP 503( \(Injected: fault proxy\))?$" \
  "$T/err" || fail "always 503: $(cat "$T/err")"
start_proxy p-gone "http://127.0.0.1:$(free_port)"
P=http://127.0.0.1:$PROXY_PORT
probe -t 2 -b 0.05 head "$P/blob" && fail "gone upstream: opened"
grep -Eq "^$P/blob: gave up after [0-9]+ attempts in [0-9.]+ s; last error: HTTP 502$" "$T/err" ||
  fail "gone upstream: $(cat "$T/err")"
[ $(($(date +%s) - t0)) -le 30 ] || fail "the budgets were not kept"

# nginx killed and restarted in the middle of a read (the proxy at 3 MB/s makes the read
# last ~8 s): the read completes, resumed from its last byte, with the right bytes.
start_proxy p-restart "$NG" bandwidth=3000000
RP=$PROXY_PORT
"$PROBE" -t 60 -b 0.05 get "http://127.0.0.1:$RP/big" 0 24000000 "$T/big.got" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1 600); do
  b=$(proxy_stats "$RP" | python3 -c 'import json,sys; print(json.load(sys.stdin)["body_bytes"])')
  [ "$b" -ge 2000000 ] && break
  sleep 0.05
done
ngpid=${REMOTE_PIDS[0]}
kill "$ngpid" && wait "$ngpid" 2>/dev/null
sleep 3 # longer than the proxy takes to drain what nginx had sent: the retries meet 502s
"$NGINX" -p "$T/nginx" -c "$T/nginx/nginx.conf" -e "$T/nginx/error.log" &
REMOTE_PIDS+=($!)
wait $pid || fail "restart: $(cat "$T/err")"
cmp -s "$T/www/big" "$T/big.got" || fail "restart: bytes differ"
retried "restart"
injected "$RP" upstream_errors
echo "restart: $(tail -1 "$T/err"); proxy: $(cat "$T/stats")"
echo PASS
