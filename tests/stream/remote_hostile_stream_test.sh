#!/bin/bash
# The stream over shards at URLs on servers that misbehave on purpose (remote_faults.py, nginx on
# 127.0.0.1), each run compared with the stream from local disk (--jsonl, CRCs of every member):
#   a 300-byte ETag is pinned whole and sent in If-Match (an object answering another one fails
#   naming the URL); a weak ETag streams (never sent in If-Match, where it cannot match); a
#   server trickling its answers (3 bytes a second) fails the stream within --remote-timeout;
#   an index of presigned URLs signed again (another query) streams under the manifest planned
#   from the first one, and finds the cache folder the first one filled.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_hostile_stream
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"
. "$(dirname "$(readlink -f "$0")")/remote_stream_steps.sh"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_ENDPOINT_URL
now() { date +%s.%N; }
within() { python3 -c "import sys; sys.exit(not ($(now) - $1 < $2))"; }

"$BIN" synth --out "$T/www/corpus" --samples 24 --shards 2 --seed 11 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=("$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --threads 2)
"${S[@]}" --members latent,json --jsonl >"$T/local.jsonl" 2>"$T/err" || fail "local: $(cat "$T/err")"
[ -s "$T/local.jsonl" ] || fail "no batch streamed"
start_nginx "$T/www"
start_faults "$T/www"
NG=http://127.0.0.1:$NGINX_PORT
FT=http://127.0.0.1:$FAULT_PORT
# at MODE ARGS...: the stream with the corpus at $FT/MODE/0/corpus (at most 60 s): --jsonl in
# $T/MODE.jsonl, stderr in $T/MODE.err, its exit status.
at() {
  local mode=$1
  shift
  timeout 60 "${S[@]}" --root "$T/www/corpus=$FT/$mode/0/corpus" --members latent,json --jsonl "$@" \
    >"$T/$mode.jsonl" 2>"$T/$mode.err"
}

# ETags: a 300-byte one pinned and sent whole; a weak one compared in the answers only.
for mode in bigetag weak; do
  at $mode || fail "$mode: $(cat "$T/$mode.err")"
  same_delivery "$T/local.jsonl" "$T/$mode.jsonl" || fail "$mode: other bytes than local disk"
done
at bigetagchg && fail "bigetagchg: an object answering another ETag streamed"
grep -q "$FT/bigetagchg/0/corpus/shard-00000[01].tar: the object changed since it was opened" \
  "$T/bigetagchg.err" || fail "bigetagchg: $(cat "$T/bigetagchg.err")"
echo "ok: long and weak ETags"

# A server trickling its answers (3 bytes a second, never a stall): the stream fails within its
# 2 s budget per read (plus the pins and closing), naming the URL.
t0=$(now)
timeout 60 "${S[@]}" --root "$T/www/corpus=$FT/drip/3/corpus" --remote-timeout 2 >/dev/null \
  2>"$T/drip.err" && fail "drip: streamed"
within "$t0" 15 || fail "drip: the stream outlived its budget: $(cat "$T/drip.err")"
grep -q "$FT/drip/3/corpus/shard-00000[01].tar: gave up after [0-9]* attempts* in 2\.[0-9] s" \
  "$T/drip.err" || fail "drip: $(cat "$T/drip.err")"
echo "ok: a trickling server fails the stream in bounded time"

# Presigned URLs signed again: the index of the new URLs has the old one's fingerprint, so the
# old manifest streams under it; the cache folder filled through the old URLs serves the new.
sig_index() {
  local f urls=()
  for f in "$T"/www/corpus/*.tar; do urls+=("$NG/corpus/$(basename "$f")?X-Amz-Signature=$2"); done
  "$BIN" index -o "$T/$1.alidx" "${urls[@]}" >/dev/null 2>"$T/err" || fail "index $1: $(cat "$T/err")"
  "$BIN" plan --index "$T/$1.alidx" --world 1 -o "$T/$1.alm" >/dev/null 2>&1 || fail "plan $1"
}
sig_index sig1 one
sig_index sig2 two
cmp -s "$T/m.alm" "$T/sig1.alm" || fail "the plan of the signed URLs is not local disk's"
P=("$BIN" stream --rank 0 --threads 2 --members latent,json --jsonl)
timeout 60 "${P[@]}" --index "$T/sig2.alidx" --manifest "$T/sig1.alm" >"$T/sig21.jsonl" 2>"$T/err" ||
  fail "sig2 under the manifest of sig1: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/sig21.jsonl" || fail "sig2 under sig1's manifest: other bytes"
C=(--cache-dir "$T/cache" --cache-bytes 100000000)
timeout 60 "${P[@]}" "${C[@]}" --index "$T/sig1.alidx" --manifest "$T/sig1.alm" >"$T/sig1.jsonl" \
  2>"$T/err" || fail "sig1: $(cat "$T/err")"
timeout 60 "${P[@]}" "${C[@]}" --index "$T/sig2.alidx" --manifest "$T/sig2.alm" >"$T/sig2.jsonl" \
  2>"$T/err" || fail "sig2: $(cat "$T/err")"
for x in sig1 sig2; do
  same_delivery "$T/local.jsonl" "$T/$x.jsonl" || fail "$x: other bytes than local disk"
done
grep -q "cache hits [1-9][0-9]* misses 0 " "$T/err" || fail "sig2: the cache was not found: $(cat "$T/err")"
grep -q "HEAD /corpus/shard-000000.tar?X-Amz-Signature=two " "$T/nginx/access.log" ||
  fail "sig2: the URL signed again was not requested"
echo "ok: presigned URLs signed again"
echo PASS
