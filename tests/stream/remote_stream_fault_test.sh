#!/bin/bash
# The stream over shards at URLs through fault_proxy.py (the project's faulting proxy) in front
# of nginx and the S3 server (tests/loader/s3_server.py: path-style, SigV4 checked). Every run's --jsonl
# is checked by jsonl_check.py against the same stream from the local shards: each batch
# exactly once, the same keys in the same order, the CRC-32 of every member of every sample.
#   each fault kind (latency with a bandwidth cap, 503 bursts, 429 with Retry-After, resets
#   and truncated bodies mid-body, all at once) in front of both servers, without a cache
#   folder and with one, fetching ahead and not (--no-fetch-ahead);
#   nginx and the S3 server killed and restarted mid-epoch (the S3 server keeping its objects): the stream
#   rides through;
#   a server that stays down: with --on-error fail a non-zero exit within the retry budget
#   plus a margin, naming the URL; one object down with --on-error skip: its samples skipped,
#   counted and listed with their reasons, the others delivered;
#   the stream killed (SIGKILL) mid-epoch and resumed (--resume-at the last delivered
#   position + 1): both runs together deliver the epoch exactly once;
#   an object changed mid-epoch (rewritten at the same size on nginx, re-uploaded to the S3 server):
#   an error naming the URL, and what was delivered before it is the local bytes.
# Budgets (ADAPTIVELOAD_REMOTE_TIMEOUT_S) are short where a failure is expected and long where
# the stream must ride through; waits poll files and the proxy's counters.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(dirname "$(readlink -f "$0")")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_stream_fault
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$HERE/../loader/remote_servers.sh"
. "$HERE/../loader/remote_fault_proxy.sh"
check() { python3 "$HERE/jsonl_check.py" "$T/local.jsonl" "$@"; }
export ADAPTIVELOAD_REMOTE_TIMEOUT_S=20

"$BIN" synth --out "$T/www/corpus" --samples 32 --shards 3 --seed 11 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=("$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --threads 2
  --members latent,json --jsonl)
"${S[@]}" >"$T/local.jsonl" 2>"$T/err" || fail "local: $(cat "$T/err")"
nb=$(wc -l <"$T/local.jsonl")
[ "$nb" -ge 10 ] || fail "only $nb batches"

start_nginx "$T/www"
start_proxy p-nginx "http://127.0.0.1:$NGINX_PORT"
NP=$PROXY_PORT
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN
for f in "$T"/www/corpus/*.tar; do s3_put "$f" "corpus/$(basename "$f")"; done
start_proxy p-s3 "http://127.0.0.1:$S3_PORT"
SP=$PROXY_PORT

# stream_cmd SERVER DIR [stream options]: CMD, the stream of the corpus at DIR of SERVER's proxy
# (nginx: http://.../DIR, s3: s3://bkt/DIR) instead of local disk.
stream_cmd() {
  local server=$1 dir=$2
  shift 2
  if [ "$server" = nginx ]; then
    CMD=("${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NP/$dir" "$@")
  else
    CMD=(env "AWS_ENDPOINT_URL=http://127.0.0.1:$SP" "${S[@]}" --root "$T/www/corpus=s3://bkt/$dir" "$@")
  fi
}
# run NAME SERVER [stream options]: the corpus through SERVER's proxy into $T/NAME.jsonl, its
# messages in $T/NAME.err; returns the stream's exit status. run_bg: the same in the
# background, $! the stream's own pid (for kill -9).
run() {
  local name=$1 server=$2
  shift 2
  stream_cmd "$server" corpus "$@"
  "${CMD[@]}" >"$T/$name.jsonl" 2>"$T/$name.err"
}
run_bg() {
  local name=$1 server=$2
  shift 2
  stream_cmd "$server" corpus "$@"
  (exec "${CMD[@]}" >"$T/$name.jsonl" 2>"$T/$name.err") &
}
port_of() { if [ "$1" = nginx ]; then echo "$NP"; else echo "$SP"; fi; }
# injected PORT KEY: the proxy counted at least one KEY.
injected() {
  proxy_stats "$1" >"$T/stats"
  python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[sys.argv[2]] < 1)' \
    "$T/stats" "$2" || fail "no $2 injected: $(cat "$T/stats")"
}
# poll_until PID TEST...: until the command TEST succeeds; 1 when PID ended first (or after 12 s).
poll_until() {
  local pid=$1
  shift
  for _ in $(seq 1 600); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.02
  done
  return 1
}
has_lines() { [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -ge "$2" ]; } # FILE N: N complete lines
# sent PORT N: the proxy sent its clients N body bytes so far.
sent() { [ "$(proxy_stats "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["body_bytes"])')" -ge "$2" ]; }

# 1. Each fault kind, each server, the three ways of reading (cache modes in turn).
modes=("" "--cache-dir @ --cache-bytes 200000000" "--cache-dir @ --no-fetch-ahead")
kinds=(
  "bandwidth latency_ms=10&bandwidth=150000000"
  "burst fail_every=6&burst=3"
  "throttle throttle_every=30&retry_after=1"
  "reset reset_every=3"
  "truncate truncate_every=3"
  "mix latency_ms=2&fail_every=7&throttle_every=41&retry_after=1&reset_every=5&truncate_every=4&bandwidth=300000000"
)
i=0
for server in nginx s3; do
  i=$((i + 1))
  p=$(port_of $server)
  for k in "${kinds[@]}"; do
    key=${k%% *} knobs=${k#* }
    for m in 0 1 2; do
      # Each kind in one mode per server (another on each); the mix in every mode over nginx.
      [ $key != mix ] || [ $server = s3 ] && [ $m != $((i % 3)) ] && continue
      name=$server-$key-$m
      proxy_reset "$p"
      proxy_set "$p" "$knobs"
      run "$name" $server ${modes[$m]//@/$T/cache-$name} || fail "$name: $(cat "$T/$name.err")"
      check "$T/$name.jsonl" >"$T/check" || fail "$name: $(cat "$T/check")"
      case $key in
        bandwidth) ;;
        burst) injected "$p" fail && injected "$p" burst ;;
        mix) for f in fail throttle reset truncate; do injected "$p" $f; done ;;
        *) injected "$p" "$key" ;;
      esac
    done
    i=$((i + 1))
  done
done
proxy_reset "$NP" && proxy_reset "$SP"
echo "fault kinds: ok"

total=$(du -cb "$T"/www/corpus/*.tar | tail -1 | cut -f1)

# 2. The server killed mid-epoch and restarted 1 s later (the proxy at a bandwidth cap keeps
# the epoch over a second long; while the server is down the proxy answers 502 or cuts the body).
for server in nginx s3; do
  p=$(port_of $server)
  proxy_reset "$p" && proxy_set "$p" "bandwidth=40000000"
  run_bg restart-$server $server --cache-dir "$T/cache-restart-$server"
  pid=$!
  poll_until $pid sent "$p" $((total / 3)) || fail "restart $server: the stream ended early"
  stop_$server
  sleep 1
  restart_$server
  wait $pid || fail "restart $server: $(cat "$T/restart-$server.err")"
  check "$T/restart-$server.jsonl" >"$T/check" || fail "restart $server: $(cat "$T/check")"
  injected "$p" upstream_errors
done
echo "restart: ok"

# 3. A server that stays down (nginx killed a third into the epoch, 3 s budget): the stream
# exits non-zero within the budget plus a margin (closing cancels the other readers' retries
# instead of waiting out their budgets), naming a URL of the server; what it delivered before
# is the local bytes.
proxy_reset "$NP" && proxy_set "$NP" "bandwidth=40000000"
ADAPTIVELOAD_REMOTE_TIMEOUT_S=3 run_bg down nginx
pid=$!
poll_until $pid sent "$NP" $((total / 3)) || fail "down: the stream ended early"
stop_nginx
t0=$(date +%s.%N)
wait $pid && fail "down: streamed from a server that is down"
took=$(python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))")
python3 -c "import sys; sys.exit(not $took < 3 + 2)" || fail "down: exit $took s after the outage"
grep -q "http://127.0.0.1:$NP/corpus/shard-.*gave up after" "$T/down.err" ||
  fail "down: $(cat "$T/down.err")"
check --partial "$T/down.jsonl" >"$T/check" || fail "down: $(cat "$T/check")"
restart_nginx
echo "down: exit $took s after the outage (budget 3 s): $(grep -m1 'gave up' "$T/down.err")"

# One object down (every request for shard-000001 a 503) with --on-error skip: its samples
# skipped, each listed with a reason naming the URL, every other sample delivered.
proxy_reset "$NP" && proxy_set "$NP" "only_path=shard-000001&burst_s=100000"
want=$(python3 -c "import json,sys; print(sum(k.startswith('000001-') for l in open(sys.argv[1]) for k in json.loads(l)['keys']))" "$T/local.jsonl")
t0=$SECONDS
ADAPTIVELOAD_REMOTE_TIMEOUT_S=1 run skip nginx --on-error skip --max-skip-fraction 1 ||
  fail "skip: $(cat "$T/skip.err")"
check --skipped "$want" "$T/skip.jsonl" >"$T/check" || fail "skip: $(cat "$T/check")"
[ "$(grep -c "^adaptiveload stream: skipped 000001-[0-9]*: .*http://127.0.0.1:$NP/corpus/shard-000001.tar" "$T/skip.err")" = "$want" ] ||
  fail "skip: not every skipped sample listed with its URL: $(cat "$T/skip.err")"
# Without --jsonl the run's summary counts them.
stream_cmd nginx corpus --on-error skip --max-skip-fraction 1
ns=$(python3 -c "import json,sys; print(sum(len(json.loads(l)['keys']) for l in open(sys.argv[1])))" "$T/local.jsonl")
text=()
for a in "${CMD[@]}"; do [ "$a" = --jsonl ] || text+=("$a"); done
ADAPTIVELOAD_REMOTE_TIMEOUT_S=1 "${text[@]}" >/dev/null 2>"$T/skip-text.err" ||
  fail "skip (text): $(cat "$T/skip-text.err")"
grep -q "^adaptiveload stream: $nb batches, $((ns - want)) samples, $want skipped$" "$T/skip-text.err" ||
  fail "skip: no summary of the skipped samples: $(cat "$T/skip-text.err")"
echo "skip: $(cat "$T/check") in $((SECONDS - t0)) s"

# 4. The stream killed (SIGKILL) after it printed a third of its batches, then resumed after
# the last batch it printed completely: both runs together are the epoch exactly once. Over
# nginx without a cache, over S3 with one (left as the killed process left it) and faults.
# Batches come out in bursts when fetched-ahead shards complete together, and a burst can
# carry the stream to its end between two polls; then the kill missed the epoch, and the run
# is repeated with a fresh cache at a lower rate (at most three times) until it lands mid-epoch.
for server in nginx s3; do
  p=$(port_of $server)
  for attempt in 1 2 3; do
    proxy_reset "$p" && proxy_set "$p" "bandwidth=$((40000000 / attempt / attempt))"
    c=()
    [ $server = s3 ] && c=(--cache-dir "$T/cache-crash-$attempt") && proxy_set "$p" "reset_every=4&fail_every=5"
    run_bg crash-$server $server "${c[@]}"
    pid=$!
    poll_until $pid has_lines "$T/crash-$server.jsonl" $((nb / 3)) ||
      fail "crash $server: the stream ended early"
    kill -KILL $pid
    wait $pid 2>/dev/null
    last=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1],'rb').read().split(b'\n')[-2])['position'])" "$T/crash-$server.jsonl")
    [ "$last" -lt $((nb - 1)) ] && break
    echo "crash $server: the stream had delivered the whole epoch when killed (attempt $attempt)"
  done
  [ "$last" -lt $((nb - 1)) ] || fail "crash $server: killed after the last batch in 3 attempts"
  mv "$T/crash-$server.jsonl" "$T/crash-$server-1.jsonl"
  run crash-$server $server "${c[@]}" --resume-at $((last + 1)) ||
    fail "crash $server resumed: $(cat "$T/crash-$server.err")"
  check "$T/crash-$server-1.jsonl" "$T/crash-$server.jsonl" >"$T/check" ||
    fail "crash $server: $(cat "$T/check")"
  echo "crash $server: killed after position $last; $(cat "$T/check")"
done

# 5. An object changed mid-epoch: every shard rewritten at the same size with other bytes (in
# nginx's directory; re-uploaded to the S3 server)
# after the first batches: an error naming a shard's URL, and every batch delivered before it
# the local bytes.
rewrite() { # rewrite SRC DST: DST is SRC with one byte of each MB flipped (the same size)
  python3 - "$1" "$2" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
for i in range(512, len(b), 1 << 20):
    b[i] ^= 0xFF
open(sys.argv[2] + ".new", "wb").write(b)
PY
  mv "$2.new" "$2"
}
mkdir -p "$T/www/chg" && cp "$T"/www/corpus/*.tar "$T/www/chg/"
for f in "$T"/www/chg/*.tar; do s3_put "$f" "chg/$(basename "$f")"; done
for server in nginx s3; do
  p=$(port_of $server)
  proxy_reset "$p" && proxy_set "$p" "bandwidth=40000000"
  stream_cmd $server chg
  (exec "${CMD[@]}" >"$T/chg-$server.jsonl" 2>"$T/chg-$server.err") &
  URL=http://127.0.0.1:$NP/chg
  [ $server = s3 ] && URL=s3://bkt/chg
  pid=$!
  poll_until $pid sent "$p" $((total / 4)) || fail "changed $server: the stream ended early"
  # The proxy answers 503 while the shards change (the stream retries), so the change lands
  # mid-epoch however fast the rewrite is.
  proxy_set "$p" "burst_s=60"
  [ $server = nginx ] && sleep 1.1 # a new mtime second: nginx's ETag is the mtime and the size
  for f in "$T"/www/chg/*.tar; do
    rewrite "$T/www/corpus/$(basename "$f")" "$f"
    [ $server = s3 ] && s3_put "$f" "chg/$(basename "$f")"
  done
  proxy_set "$p" "burst_s=0"
  wait $pid && fail "changed $server: streamed an object that changed"
  grep -q "$URL/shard-[0-9]*\.tar.*changed" "$T/chg-$server.err" ||
    fail "changed $server: $(cat "$T/chg-$server.err")"
  check --partial "$T/chg-$server.jsonl" >"$T/check" || fail "changed $server: $(cat "$T/check")"
  echo "changed $server: $(cat "$T/check") before: $(grep -m1 changed "$T/chg-$server.err")"
done
echo "remote_stream_fault_test: OK"
