#!/bin/bash
# //storage against s3_server.py (moto's S3 server from PyPI, SigV4 recomputed for every
# request) on 127.0.0.1, path-style through AWS_ENDPOINT_URL or -e: HEAD and ranged GETs
# compared with the objects' bytes, keys that need percent-encoding, ListObjectsV2 with
# continuation tokens (one key per page) and XML entities in keys, the x-amz-security-token
# header, errors (unknown access key, a wrong secret, missing key and bucket, an object
# overwritten between open and read) that name the URL and never the secret. The server
# itself first: path-style and virtual-hosted addressing, ETags, ranged GETs, pages.
set -uo pipefail
PROBE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_s3
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"

start_s3 bkt
EP=$S3_EP
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL
for i in 0 1 2 3 4; do
  head -c $((100000 + i * 777)) /dev/urandom >"$T/shard-$i.tar"
  s3_put "$T/shard-$i.tar" "data/shard-00000$i.tar"
done
head -c 4096 /dev/urandom >"$T/odd"
s3_put "$T/odd" "odd/a%20b%26c%2Bd%C3%A9.bin"
s3_put "$T/odd" "other.bin"
md5() { md5sum "$1" | cut -d' ' -f1; }

# The server, through curl's SigV4: the same object path-style and virtual-hosted
# (BUCKET.localhost: curl resolves *.localhost to the loopback), its MD5 ETag, a ranged GET
# (206 and the bytes), a listing in pages of one key with continuation tokens.
scurl() { curl -s --aws-sigv4 "aws:amz:us-east-1:s3" -u "$S3_KEY_ID:$S3_SECRET" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"; }
for url in "$EP/bkt/data/shard-000002.tar" "http://bkt.localhost:$S3_PORT/data/shard-000002.tar"; do
  code=$(scurl -D "$T/h" -o "$T/got" -w '%{http_code}' -r 1000-1999 "$url")
  [ "$code" = 206 ] && cmp -s -i 1000:0 -n 1000 "$T/shard-2.tar" "$T/got" && [ "$(stat -c %s "$T/got")" = 1000 ] ||
    fail "server: ranged GET $url: $code"
  grep -qi "^etag: \"$(md5 "$T/shard-2.tar")\"" "$T/h" || fail "server: ETag of $url: $(cat "$T/h")"
done
token="" pages=0
while :; do
  # In SigV4's canonical order (curl 7.88 signs the query as it is given).
  q="list-type=2&max-keys=1&prefix=data%2F"
  [ -n "$token" ] && q="continuation-token=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$token")&$q"
  scurl -o "$T/page" "$EP/bkt?$q" || fail "server: listing"
  pages=$((pages + 1))
  token=$(sed -n 's:.*<NextContinuationToken>\(.*\)</NextContinuationToken>.*:\1:p' "$T/page")
  [ -n "$token" ] || break
  [ $pages -lt 10 ] || fail "server: listing does not end"
done
[ $pages = 5 ] || fail "server: $pages pages of one key for 5 keys"
code=$(scurl -o /dev/null -w '%{http_code}' -H 'If-Match: "0123"' "$EP/bkt/other.bin")
[ "$code" = 412 ] || fail "server: If-Match with another ETag answered $code"
echo "ok: the server: path-style and virtual-hosted ranged GETs, ETags, 5 pages, If-Match"

probe() { "$PROBE" "$@" >"$T/out" 2>"$T/err"; }
stats() { grep -q "^$1\$" "$T/err" || fail "expected '$1', got: $(cat "$T/err")"; }

# -e ENDPOINT, then AWS_ENDPOINT_URL: HEAD gives the size and the MD5 ETag; ranged GETs.
probe -e "$EP/" head s3://bkt/data/shard-000003.tar || fail "head: $(cat "$T/err")"
grep -qx "size 102331 etag \"$(md5 "$T/shard-3.tar")\"" "$T/out" || fail "head: $(cat "$T/out")"
export AWS_ENDPOINT_URL=$EP
probe get s3://bkt/data/shard-000003.tar 4321 50000 "$T/got" || fail "get: $(cat "$T/err")"
cmp -s -i 4321:0 -n 50000 "$T/shard-3.tar" "$T/got" && [ "$(stat -c %s "$T/got")" = 50000 ] ||
  fail "get: bytes differ"
stats "requests 2 retries 0 bytes 50000 discarded 0"
probe cat s3://bkt/data/shard-000004.tar "$T/got" 30000 || fail "cat: $(cat "$T/err")"
cmp -s "$T/shard-4.tar" "$T/got" || fail "cat: bytes differ"
stats "requests 5 retries 0 bytes 103108 discarded 0"
probe cat "s3://bkt/odd/a b&c+dé.bin" "$T/got" 1000 || fail "odd key: $(cat "$T/err")"
cmp -s "$T/odd" "$T/got" || fail "odd key: bytes differ"

# Temporary credentials: the session token rides along as x-amz-security-token, which the
# server checks; another token is refused.
AWS_ACCESS_KEY_ID=$S3_SESSION_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SESSION_SECRET AWS_SESSION_TOKEN=$S3_SESSION_TOKEN \
  probe head s3://bkt/other.bin || fail "token: $(cat "$T/err")"
AWS_ACCESS_KEY_ID=$S3_SESSION_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SESSION_SECRET AWS_SESSION_TOKEN=other-token \
  probe head s3://bkt/other.bin && fail "another session token accepted"
grep -qx "s3://bkt/other.bin ($EP/bkt/other.bin): HTTP 400" "$T/err" || fail "wrong token: $(cat "$T/err")"

# Listings: a prefix, one key per page (continuation tokens with '+', '/', '='), entities.
probe -k 1 list s3://bkt/data/ || fail "list: $(cat "$T/err")"
for i in 0 1 2 3 4; do
  echo "s3://bkt/data/shard-00000$i.tar $(stat -c %s "$T/shard-$i.tar") \"$(md5 "$T/shard-$i.tar")\""
done >"$T/want"
cmp -s "$T/want" "$T/out" || fail "list: $(diff "$T/want" "$T/out")"
stats "requests 5 retries 0 bytes 0 discarded 0"
probe list s3://bkt/ || fail "list all: $(cat "$T/err")"
[ "$(wc -l <"$T/out")" = 7 ] || fail "list all: $(cat "$T/out")"
grep -qx "s3://bkt/odd/a b&c+dé.bin 4096 \"$(md5 "$T/odd")\"" "$T/out" || fail "list odd: $(cat "$T/out")"
stats "requests 1 retries 0 bytes 0 discarded 0"
probe list s3://bkt/nothing-here/ && [ ! -s "$T/out" ] || fail "empty list: $(cat "$T/out" "$T/err")"

# Errors name the URL (and the endpoint URL), never the secret.
# A wrong secret (secret-never-printed) with an unknown key id, then with the account's.
bad() { AWS_SECRET_ACCESS_KEY=secret-never-printed probe "$@"; local rc=$?; cat "$T/out" "$T/err" >>"$T/bad.all"; return $rc; }
AWS_ACCESS_KEY_ID=NOBODY bad list s3://bkt/data/ && fail "unknown key id listed"
grep -q "^s3://bkt/data/ ($EP/bkt?list-type=2&prefix=data%2F): HTTP 403 (InvalidAccessKeyId: " "$T/err" ||
  fail "403: $(cat "$T/err")"
AWS_ACCESS_KEY_ID=NOBODY bad head s3://bkt/other.bin && fail "unknown key id opened"
grep -qx "s3://bkt/other.bin ($EP/bkt/other.bin): HTTP 403" "$T/err" || fail "403 head: $(cat "$T/err")"
# The right key id with a wrong secret: the server recomputes the signature.
bad list s3://bkt/data/ && fail "a wrong secret listed"
grep -q "^s3://bkt/data/ ($EP/bkt?list-type=2&prefix=data%2F): HTTP 403 (SignatureDoesNotMatch: " "$T/err" ||
  fail "wrong secret: $(cat "$T/err")"
bad head s3://bkt/other.bin && fail "a wrong secret opened"
grep -qx "s3://bkt/other.bin ($EP/bkt/other.bin): HTTP 403" "$T/err" || fail "wrong secret head: $(cat "$T/err")"
grep -q "secret-never-printed" "$T/bad.all" && fail "the secret was printed"
probe head s3://bkt/missing.bin && fail "missing key opened"
grep -qx "s3://bkt/missing.bin ($EP/bkt/missing.bin): HTTP 404" "$T/err" || fail "404: $(cat "$T/err")"
probe list s3://nobucket/ && fail "missing bucket listed"
grep -q "HTTP 404 (NoSuchBucket: " "$T/err" || fail "no bucket: $(cat "$T/err")"
probe head s3://bkt && fail "no key opened"
grep -qx "s3://bkt: an S3 object URL is s3://BUCKET/KEY" "$T/err" || fail "no key: $(cat "$T/err")"

# An object overwritten between open and read: an error naming the URL, no bytes used.
"$PROBE" -w "$T/sync" get s3://bkt/other.bin 0 100 "$T/got2" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1 200); do [ -f "$T/sync.opened" ] && break; sleep 0.05; done
head -c 4096 /dev/urandom >"$T/new" && s3_put "$T/new" other.bin
touch "$T/sync"
wait $pid && fail "a changed object was read"
grep -q "^s3://bkt/other.bin ($EP/bkt/other.bin): the object changed since it was opened" "$T/err" ||
  fail "changed: $(cat "$T/err")"
[ ! -e "$T/got2" ] || fail "changed: bytes written"
echo PASS
