#!/bin/bash
# //storage and `adaptiveload index` against servers that misbehave on purpose, on
# 127.0.0.1 (remote_faults.py, nginx, the S3 server, tests/loader/s3_server.py): every error
# names the URL and never a password, the rest of the work goes on.
#   ETags of any length are kept, sent in If-Match and compared (a 300-byte one that changes
#   is caught); a weak ETag (W/"...") is not sent in If-Match, where it never matches, and is
#   compared in the answers instead; answer headers over libcurl's limits fail at once saying
#   so; upper-case schemes (HTTP://, S3://) are URLs; S3 keys with "." and ".." segments are
#   read as the keys they are (sent as written, SigV4 checked by the server); a listing whose
#   continuation tokens come round again stops at once; a server that trickles its answer (a
#   byte every 2 s, 3 bytes a second) fails the read within the remote timeout; a URL's
#   query (a presigned URL's signature) is not part of the index fingerprint, and the
#   requests carry it; URLs with user:password@ are refused everywhere without the password
#   in any message (index, stream --root, verify --root, Python).
# args: REMOTE_PROBE ADAPTIVELOAD REMOTE_INDEX_DUMP LIBADAPTIVELOAD_SO PYTHON_DIR
set -uo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
PROBE=$(abs "$1")
AL=$(abs "$2")
DUMP=$(abs "$3")
export ADAPTIVELOAD_LIB=$(abs "$4") PYTHONPATH=$(cd "$5" && pwd) PYTHONDONTWRITEBYTECODE=1
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_hostile
rm -rf "$T" && mkdir -p "$T/www"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/remote_servers.sh"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_ENDPOINT_URL
SECRET=pw-never-printed-$$

"$AL" synth --out "$T/www/corpus" --samples 24 --shards 2 --seed 5 >/dev/null 2>&1 || fail synth
head -c 300000 /dev/urandom >"$T/www/small"
start_nginx "$T/www"
start_faults "$T/www"
NG=http://127.0.0.1:$NGINX_PORT
FT=http://127.0.0.1:$FAULT_PORT

# probe ARGS...: the probe (stdout in $T/out, stderr in $T/err), at most 60 s.
probe() { timeout 60 "$PROBE" "$@" >"$T/out" 2>"$T/err"; }
stats() { grep -q "^$1\$" "$T/err" || fail "expected '$1', got: $(cat "$T/err")"; }
# same FILE OFF LEN OUT: OUT holds bytes [OFF, OFF+LEN) of FILE.
same() { [ "$(stat -c %s "$4")" = "$3" ] && cmp -s -i "$2:0" -n "$3" "$1" "$4"; }
now() { date +%s.%N; }
# within T0 LIMIT: less than LIMIT seconds since T0.
within() { python3 -c "import sys; sys.exit(not ($(now) - $1 < $2))"; }
# index NAME ARGS...: `adaptiveload index` (at most 60 s) into $T/NAME.idx; exit status in
# $T/NAME.rc, outputs in $T/NAME.{out,err}.
index() {
  local name=$1
  shift
  timeout 60 "$AL" index --no-progress -o "$T/$name.idx" "$@" >"$T/$name.out" 2>"$T/$name.err"
  echo $? >"$T/$name.rc"
}
ok() { [ "$(cat "$T/$1.rc")" = 0 ] || fail "$1: exit $(cat "$T/$1.rc"): $(cat "$T/$1.err")"; }
dump() { "$DUMP" "$T/$1.idx" >"$T/$1.dump" 2>"$T/$1.where" || fail "dump $1"; }
fp() { sed -n 's/^fingerprint //p' "$T/$1.dump"; }
index local "$T/www/corpus/shard-000000.tar"
ok local
dump local

# ETags of any length: kept whole, sent whole in If-Match (the server answers 412 to any
# other), an answer with another one is the object changed; the index stores it whole.
LONG=\"$(printf 'e%.0s' $(seq 290))-v1-300000\"
probe head "$FT/bigetag/0/small" || fail "long ETag: head: $(cat "$T/err")"
grep -qxF "size 300000 etag $LONG" "$T/out" || fail "long ETag: head: $(cat "$T/out")"
probe get "$FT/bigetag/0/small" 1000 50000 "$T/got" || fail "long ETag: get: $(cat "$T/err")"
same "$T/www/small" 1000 50000 "$T/got" || fail "long ETag: bytes differ"
stats "requests 2 retries 0 bytes 50000 discarded 0"
probe get "$FT/bigetagchg/0/small" 0 10 "$T/got2" && fail "long ETag: a changed object was read"
grep -q "^$FT/bigetagchg/0/small: the object changed since it was opened" "$T/err" ||
  fail "long ETag changed: $(cat "$T/err")"
[ ! -e "$T/got2" ] || fail "long ETag changed: bytes written"
index longetag "$FT/bigetag/0/corpus/shard-000000.tar"
ok longetag
dump longetag
grep -qF "remote 1 etag \"$(printf 'e%.0s' $(seq 290))-v1-" "$T/longetag.where" ||
  fail "long ETag not stored: $(cat "$T/longetag.where")"
[ "$(fp longetag)" = "$(fp local)" ] || fail "long ETag: another index"
echo "ok: a 300-byte ETag kept, sent in If-Match and compared"

# Weak ETags: no If-Match (the server answers 412 to one, as nginx does), the answers' ETags
# compared.
probe get "$FT/weak/0/small" 1000 50000 "$T/got" || fail "weak ETag: $(cat "$T/err")"
same "$T/www/small" 1000 50000 "$T/got" || fail "weak ETag: bytes differ"
probe get "$FT/weakchg/0/small" 0 10 "$T/got2" && fail "weak ETag: a changed object was read"
grep -qxF "$FT/weakchg/0/small: the object changed since it was opened (ETag W/\"v1-300000\", now W/\"v2-300000\")" \
  "$T/err" || fail "weak ETag changed: $(cat "$T/err")"
index weak "$FT/weak/0/corpus/shard-000000.tar"
ok weak
dump weak
[ "$(fp weak)" = "$(fp local)" ] || fail "weak ETag: another index"
echo "ok: weak ETags compared in the answers, never sent in If-Match"

# Answer headers over libcurl's limits (one line of 200 KB; 400 KB in 40 lines): an error
# naming the URL and saying what is wrong, at once (not retried: the answer would be the same).
for m in bighdr manyhdr; do
  t0=$(now)
  probe -t 20 head "$FT/$m/0/small" && fail "$m: opened"
  grep -q "^$FT/$m/0/small: the answer's headers are too long (libcurl takes a header line of up to 100 KiB, 300 KiB of headers in all)" \
    "$T/err" || fail "$m: $(cat "$T/err")"
  within "$t0" 5 || fail "$m: retried"
done
echo "ok: over-long answer headers"

# Schemes in any case.
probe head "HTTP://127.0.0.1:$NGINX_PORT/small" || fail "HTTP://: $(cat "$T/err")"
grep -q "^size 300000 etag " "$T/out" || fail "HTTP://: $(cat "$T/out")"
index upper --remote-timeout 1 "HTTPS://127.0.0.1:1/none.tar" \
  "Http://127.0.0.1:$NGINX_PORT/corpus/shard-000000.tar"
ok upper
dump upper
grep -qx "where 1 http://127.0.0.1:$NGINX_PORT/corpus/shard-000000.tar remote 1 etag \".*\"" \
  "$T/upper.where" || fail "Http://: $(cat "$T/upper.where")"
grep -qi "https://127.0.0.1:1/none.tar.*gave up after" "$T/upper.err" ||
  fail "HTTPS://: $(cat "$T/upper.err")"
echo "ok: HTTP://, Http://, HTTPS://"

# A listing whose continuation tokens come round again (the same one for ever; a cycle of 3):
# refused at the first repeat, naming the URL.
for n in 1 3; do
  probe -e "$FT/listloop/$n" list s3://bkt/ && fail "endless listing ($n): listed"
  grep -qF "s3://bkt/ ($FT/listloop/$n/bkt?continuation-token=t$((n - 1))&list-type=2&prefix=): listing: page $((n + 1)) sent continuation token 't0' again" \
    "$T/err" || fail "endless listing ($n): $(cat "$T/err")"
  stats "requests $((n + 1)) retries 0 bytes 0 discarded 0"
done
t0=$(now)
index loop --s3-endpoint "$FT/listloop/1" s3://bkt/train/
[ "$(cat "$T/loop.rc")" = 1 ] && grep -q "s3://bkt/train/ .*continuation token 't0' again" "$T/loop.err" ||
  fail "index of an endless listing: exit $(cat "$T/loop.rc"): $(cat "$T/loop.err")"
within "$t0" 10 || fail "index of an endless listing took too long"
echo "ok: repeated continuation tokens"

# A server that trickles its answer: a byte every 2 s (each stall abort brings a byte), 3
# bytes a second (never a stall): the read fails within its 3 s budget.
for m in drip/0 drip/3; do
  t0=$(now)
  probe -t 3 -s 1 -b 0.05 get "$FT/$m/small" 0 2000 "$T/got" && fail "$m: read"
  within "$t0" 6 || fail "$m: the read outlived its budget: $(cat "$T/err")"
  grep -Eq "^$FT/$m/small: gave up after [0-9]+ attempts? in [34]\.[0-9] s; last error: " "$T/err" ||
    fail "$m: $(cat "$T/err")"
done
t0=$(now)
index drip --remote-timeout 2 "$FT/drip/3/corpus/shard-000000.tar" "$T/www/corpus/shard-000001.tar"
ok drip
within "$t0" 12 || fail "index of a trickling shard took too long"
grep -q "$FT/drip/3/corpus/shard-000000.tar: .*gave up after" "$T/drip.err" ||
  fail "index of a trickling shard: $(cat "$T/drip.err")"
echo "ok: trickling answers end within the remote timeout"

# A URL's query and fragment (a presigned URL's signature) are not the shard's identity: two
# signatures, none, and local disk give one index fingerprint and the same plan; the
# requests carry the query.
Q1="?X-Amz-Credential=AKIA%2F20260101%2Fus-east-1&X-Amz-Signature=one"
Q2="?X-Amz-Credential=AKIA/20260102/us-east-1/s3/aws4_request&X-Amz-Signature=two#part"
index all "$T/www/corpus"
index sig1 "$NG/corpus/shard-{000000..000001}.tar$Q1"
index sig2 "$NG/corpus/shard-{000000..000001}.tar$Q2"
index nosig "$NG/corpus/shard-{000000..000001}.tar"
for x in all sig1 sig2 nosig; do
  ok $x
  dump $x
  "$AL" plan --index "$T/$x.idx" --world 2 --seed 3 -o "$T/$x.alm" >/dev/null 2>&1 || fail "plan $x"
done
for x in sig1 sig2 nosig; do
  [ "$(fp $x)" = "$(fp all)" ] || fail "$x: fingerprint $(fp $x), local disk $(fp all)"
  cmp -s "$T/all.alm" "$T/$x.alm" || fail "$x: another plan than local disk's"
done
grep -qF "GET /corpus/shard-000001.tar$Q1 " "$T/nginx/access.log" || fail "the query was not sent"
grep -qF "where 0 $NG/corpus/shard-000000.tar$Q2 remote 1" "$T/sig2.where" ||
  fail "the URL is not stored whole: $(cat "$T/sig2.where")"
echo "ok: signatures are not identity"

# S3 keys are opaque: "x/../a.tar" and "y/./c.tar" are keys of their own, sent as written and
# signed so (the server recomputes SigV4), not a.tar; listed and indexed as such.
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
s3_put_as_is() {
  local code
  code=$(curl -s --path-as-is -o "$T/put.out" -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
    -u "$S3_KEY_ID:$S3_SECRET" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$1" \
    "$S3_EP/bkt/$2")
  [ "$code" = 200 ] || fail "PUT $2: HTTP $code $(cat "$T/put.out")"
}
s3_put_as_is "$T/www/corpus/shard-000000.tar" a.tar
s3_put_as_is "$T/www/corpus/shard-000001.tar" x/../a.tar
s3_put_as_is "$T/www/small" y/./c.bin
for k in "a.tar 0" "x/../a.tar 1"; do
  set -- $k
  probe -e "$S3_EP" cat "s3://bkt/$1" "$T/got" 100000 || fail "s3://bkt/$1: $(cat "$T/err")"
  cmp -s "$T/www/corpus/shard-00000$2.tar" "$T/got" || fail "s3://bkt/$1: another object's bytes"
done
probe -e "$S3_EP" get "S3://bkt/y/./c.bin" 500 1000 "$T/got" || fail "y/./c.bin: $(cat "$T/err")"
same "$T/www/small" 500 1000 "$T/got" || fail "y/./c.bin: bytes differ"
index dots --s3-endpoint "$S3_EP" s3://bkt/x/
ok dots
dump dots
grep -q "^where 0 s3://bkt/x/../a.tar remote 2 " "$T/dots.where" || fail "x/: $(cat "$T/dots.where")"
index one "$T/www/corpus/shard-000001.tar"
dump one
diff <(grep '^sample' "$T/one.dump") <(grep '^sample' "$T/dots.dump") >/dev/null ||
  fail "s3://bkt/x/../a.tar indexed as another object"
echo "ok: S3 keys with . and .. segments"

# user:password@: refused by every entry point, the password in no message.
"$AL" plan --index "$T/all.idx" --world 1 -o "$T/w1.alm" >/dev/null 2>&1 || fail "plan w1"
index cred1 "http://user:$SECRET@127.0.0.1:$NGINX_PORT/corpus/shard-000000.tar"
index cred2 --s3-endpoint "$S3_EP" "s3://user:$SECRET@bkt/a.tar"
index cred3 "HTTP://user:$SECRET@127.0.0.1:$NGINX_PORT/corpus/shard-{000000..000001}.tar"
for x in cred1 cred2 cred3; do
  [ "$(cat "$T/$x.rc")" = 1 ] && grep -q "://\*\*\*@.*user:password@ is refused" "$T/$x.err" ||
    fail "$x: exit $(cat "$T/$x.rc"): $(cat "$T/$x.err")"
done
for verb in stream verify; do
  args=("$T/all.idx" "$T/w1.alm")
  [ $verb = stream ] && args=(--index "$T/all.idx" --manifest "$T/w1.alm" --rank 0 --max-batches 1)
  timeout 60 "$AL" $verb "${args[@]}" --root "$T/www/corpus=http://user:$SECRET@127.0.0.1:$NGINX_PORT/corpus" \
    >"$T/$verb.out" 2>"$T/$verb.err" && fail "$verb --root with a password ran"
  grep -q "^.*--root TO: http://\*\*\*@127.0.0.1:$NGINX_PORT/corpus: a URL with user:password@ is refused" \
    "$T/$verb.err" || fail "$verb --root: $(cat "$T/$verb.err")"
  timeout 60 "$AL" $verb "${args[@]}" --root "http://user:$SECRET@127.0.0.1/corpus" \
    >"$T/$verb-bad.out" 2>"$T/$verb-bad.err" && fail "$verb: a bad --root was taken"
  grep -q "bad --root 'http://\*\*\*@127.0.0.1/corpus'" "$T/$verb-bad.err" ||
    fail "$verb bad --root: $(cat "$T/$verb-bad.err")"
done
( # a subshell: only python3 gets an ASan build's runtimes preloaded, not the CLI runs
  . "$(dirname "$0")/../common/python_env.sh"
  al_tsan_build "$ADAPTIVELOAD_LIB" && exit 0 # Python cannot load a TSan build: nothing to check
  al_asan_env "$ADAPTIVELOAD_LIB"
  /usr/bin/python3 - "$T" "$NG" "$SECRET" >"$T/py.out" 2>&1 <<'PY'
import sys
import adaptiveload
from adaptiveload._handles import Index
t, ng, secret = sys.argv[1:]
url = ng.replace("http://", "http://user:%s@" % secret) + "/corpus"
checks = [
    lambda: adaptiveload.build_index(url + "/shard-000000.tar", t + "/py.idx"),
    lambda: Index(t + "/all.idx", root={t + "/www/corpus": url}),
    lambda: Index(t + "/all.idx", root=url),
    lambda: Index(t + "/all.idx", root=[(t, url, "x")]),
]
for i, check in enumerate(checks):
    try:
        check()
        raise SystemExit("check %d: accepted" % i)
    except (adaptiveload.Error, ValueError, TypeError) as e:
        assert secret not in str(e), (i, str(e))
        assert "***@" in str(e), (i, str(e))
r = adaptiveload.build_index(ng.upper() + "/corpus/shard-000000.tar", t + "/pyup.idx")
assert r["remote_shards"] == 1 and len(r["remote"]) == 1, r
print("python: ok")
PY
) || fail "python: $(cat "$T/py.out")"
grep -rl -- "$SECRET" "$T"/*.out "$T"/*.err "$T"/*.idx "$T"/*.where 2>/dev/null && fail "the password leaked"
echo "ok: user:password@ refused, never printed"
echo PASS
