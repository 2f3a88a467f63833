#!/bin/bash
# One set of storage settings everywhere, against the S3 server (tests/loader/s3_server.py) on
# the loopback, with no AWS_ENDPOINT_URL in the environment:
#   - `index --s3-endpoint` records the endpoint, region and addressing (inspect shows them;
#     no credentials in the index), and `stream`, `verify` and Python's StreamDataset read the
#     s3:// index with no option and no environment variable: the same bytes as local disk;
#   - the environment overrides the index (AWS_ENDPOINT_URL of another server: the stream
#     fails within --remote-timeout, naming both endpoints and where each came from), and an
#     option overrides the environment;
#   - virtual-hosted addressing at a set endpoint (BUCKET.localhost:PORT): indexed, recorded,
#     streamed, each request sent to the bucket's host name (the server's log shows paths
#     without the bucket).
set -uo pipefail
BIN=$(readlink -f "$1")
LIB=${2:-}
HERE=$(dirname "$(readlink -f "$0")")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_storage
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$HERE/../loader/remote_servers.sh"
. "$HERE/remote_stream_steps.sh"

"$BIN" synth --out "$T/www/corpus" --samples 40 --shards 3 --seed 4 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/local.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail "index local"
"$BIN" plan --index "$T/local.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=("$BIN" stream --manifest "$T/m.alm" --rank 0 --threads 2 --members latent,json --jsonl)
"${S[@]}" --index "$T/local.alidx" >"$T/local.jsonl" 2>"$T/err" || fail "local stream: $(cat "$T/err")"

start_nginx "$T/www"
start_s3 bkt
s3_put_corpus "$T"/www/corpus/*.tar
unset AWS_ENDPOINT_URL AWS_SESSION_TOKEN # s3_put_corpus set it: from here on, none

# 1. Indexed with --s3-endpoint: recorded; read with nothing given.
"$BIN" index -o "$T/s3.alidx" --s3-endpoint "$S3_EP" s3://bkt/corpus/ >/dev/null 2>"$T/err" ||
  fail "index: $(cat "$T/err")"
"$BIN" inspect "$T/s3.alidx" >"$T/inspect.txt" 2>&1 || fail "inspect"
grep -q "^  s3        built with endpoint $S3_EP, region us-east-1, addressing default" "$T/inspect.txt" ||
  fail "inspect: $(cat "$T/inspect.txt")"
grep -q -- "$S3_SECRET\|$S3_KEY_ID" "$T/s3.alidx" && fail "credentials in the index"
"${S[@]}" --index "$T/s3.alidx" >"$T/s3.jsonl" 2>"$T/err" || fail "stream, no endpoint given: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/s3.jsonl" || fail "stream of the s3 index: other bytes than local disk"
"$BIN" verify "$T/s3.alidx" --quiet >"$T/verify.txt" 2>&1 || fail "verify, no endpoint given: $(cat "$T/verify.txt")"
echo "ok: indexed with --s3-endpoint; stream and verify with no option and no AWS_ENDPOINT_URL"

python_step "$LIB" "$T" <<'PY' || fail "StreamDataset"
import json, os, sys
import adaptiveload
t = sys.argv[1]
want = [json.loads(line)["keys"] for line in open(os.path.join(t, "local.jsonl"))]
ds = adaptiveload.StreamDataset(os.path.join(t, "s3.alidx"), os.path.join(t, "m.alm"), rank=0, world_size=1,
                                members=["latent", "json"])
got = [list(b.keys) for b in ds]
assert got == want, (len(got), len(want))
try:
    adaptiveload.StreamDataset(os.path.join(t, "s3.alidx"), os.path.join(t, "m.alm"), rank=0, world_size=1,
                               s3_addressing="sideways")
except ValueError as e:
    assert "s3_addressing must be 'path', 'virtual' or None" in str(e), e
else:
    raise AssertionError("s3_addressing='sideways' accepted")
for bad, why in (("ftp://x", "not an http:// or https:// URL"), ("http://a\0b", "NUL")):
    try:
        adaptiveload.StreamDataset(os.path.join(t, "s3.alidx"), os.path.join(t, "m.alm"), rank=0, world_size=1,
                                   s3_endpoint=bad)
    except ValueError as e:
        assert "s3_endpoint" in str(e) and why in str(e), e
    else:
        raise AssertionError("s3_endpoint %r accepted" % bad)
print("python ok: %d batches with no endpoint given" % len(got))
PY

# 2. The environment overrides the index; an option overrides the environment.
WRONG=http://127.0.0.1:$NGINX_PORT
AWS_ENDPOINT_URL=$WRONG "${S[@]}" --index "$T/s3.alidx" --remote-timeout 2 >"$T/wrong.jsonl" 2>"$T/wrong.err" &&
  fail "streamed from another endpoint"
grep -q "s3://bkt/corpus/shard-00000.\.tar ($WRONG/bkt/corpus/.*(S3 endpoint $WRONG from AWS_ENDPOINT_URL; the index was built with $S3_EP)" "$T/wrong.err" ||
  fail "mismatch not named: $(cat "$T/wrong.err")"
AWS_ENDPOINT_URL=$WRONG "${S[@]}" --index "$T/s3.alidx" --s3-endpoint "$S3_EP" >"$T/opt.jsonl" 2>"$T/err" ||
  fail "--s3-endpoint over AWS_ENDPOINT_URL: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/opt.jsonl" || fail "--s3-endpoint over the environment: other bytes"
echo "ok: AWS_ENDPOINT_URL overrides the index (named in the error: $(grep -o '(S3 endpoint[^)]*)' "$T/wrong.err" | head -1)); --s3-endpoint overrides AWS_ENDPOINT_URL"

# 3. Virtual-hosted addressing at a set endpoint: BUCKET.localhost:PORT.
VEP=http://localhost:$S3_PORT
lines_before=$(wc -l <"$T/s3_server.log")
"$BIN" index -o "$T/virtual.alidx" --s3-endpoint "$VEP" --s3-addressing virtual s3://bkt/corpus/ >/dev/null 2>"$T/err" ||
  fail "index, virtual: $(cat "$T/err")"
"$BIN" inspect "$T/virtual.alidx" >"$T/inspect-virtual.txt" 2>&1 || fail "inspect virtual"
grep -q "addressing virtual" "$T/inspect-virtual.txt" || fail "virtual addressing not recorded: $(cat "$T/inspect-virtual.txt")"
"$BIN" plan --index "$T/virtual.alidx" --world 1 -o "$T/mv.alm" >/dev/null 2>&1 || fail "plan virtual"
cmp -s "$T/m.alm" "$T/mv.alm" || fail "the virtual-hosted index plans another manifest"
"${S[@]}" --index "$T/virtual.alidx" >"$T/virtual.jsonl" 2>"$T/err" || fail "stream, virtual: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/virtual.jsonl" || fail "virtual-hosted: other bytes than local disk"
tail -n +$((lines_before + 1)) "$T/s3_server.log" >"$T/virtual.log"
grep -q 'GET /corpus/shard-000000.tar HTTP' "$T/virtual.log" || fail "no virtual-hosted GET: $(head -5 "$T/virtual.log")"
grep -q '\(GET\|HEAD\) /bkt' "$T/virtual.log" && fail "a path-style request in the virtual-hosted run: $(grep '/bkt' "$T/virtual.log" | head -2)"
echo "ok: virtual-hosted addressing at a set endpoint: indexed, recorded, the same manifest and bytes; $(grep -c 'GET /corpus/' "$T/virtual.log") GETs to bkt.localhost"
echo PASS
