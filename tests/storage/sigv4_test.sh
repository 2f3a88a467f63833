#!/bin/bash
# AWS Signature V4 as //storage sends it (libcurl's CURLOPT_AWS_SIGV4, the client's
# headers, the vector's X-Amz-Date), checked against AWS's published test vectors
# (testdata/sigv4, README.md there says which and where from): the Authorization header a
# loopback server of this test receives must be the vector's.
#   creq mode: the vector's canonical request sent as it is: every vector must match (the
#              key derivation, string to sign, header trimming and sorting are right).
#   req mode:  the request as the vector writes it: every vector matches except those in
#              DIFFERS, which libcurl (7.88) does not normalise as SigV4 says; there the
#              test checks the difference is still there, so a libcurl that fixes it is
#              noticed (move the vector out of DIFFERS).
# Then the layer's own S3 requests (remote_probe, no test hooks: HEAD, ranged GETs with
# If-Match, a key with "." and ".." segments, a listing of two pages, the session token) to
# the same server, acting as a small bucket: each signature is checked by sigv4_verify.py, a
# SigV4 implementation of its own.
set -uo pipefail
PROBE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
REMOTE_PROBE=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
HERE=$(dirname "$0")
VEC=$(cd "$(dirname "$0")/testdata/sigv4" && pwd)
T=${TEST_TMPDIR:-$(mktemp -d)}/sigv4
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"

# libcurl before 8.3 signs the query in the order given (SigV4 sorts it by name, then
# value); before 8.13 it signs a repeated header once per line (SigV4 joins the values with
# ',' in one line). //storage builds its one query (ListObjectsV2) sorted and sends
# no repeated header, so neither reaches S3 from it.
DIFFERS=" get-vanilla-query-order-key get-vanilla-query-order-key-case get-vanilla-query-order-value get-header-key-duplicate get-header-value-order "

python3 "$(dirname "$0")/sigv4_capture.py" "$T/port" "$T/log" &
REMOTE_PIDS+=($!)
for _ in $(seq 1 200); do [ -f "$T/port" ] && break; sleep 0.05; done
PORT=$(cat "$T/port") || fail "no capture server"

export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY
export AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL

# sent MODE FILE: the Authorization header the server received for FILE sent in MODE.
sent() {
  : >"$T/log"
  "$PROBE" "$PORT" "$1" "$2" >"$T/out" 2>"$T/err" || fail "$1 $2: $(cat "$T/err")"
  [ "$(wc -l <"$T/log")" = 1 ] || fail "$1 $2: $(wc -l <"$T/log") requests"
  python3 -c 'import json, sys
print("".join(v for k, v in json.loads(open(sys.argv[1]).read())["headers"] if k == "Authorization"))' "$T/log"
}

n=0 same=0
for authz in "$VEC"/*.authz; do
  v=$(basename "$authz" .authz)
  want=$(cat "$authz")
  got=$(sent creq "$VEC/$v.creq")
  [ "$got" = "$want" ] || fail "$v (canonical request): sent '$got', the vector says '$want'"
  got=$(sent req "$VEC/$v.req")
  if [[ "$DIFFERS" == *" $v "* ]]; then
    [ "$got" != "$want" ] || fail "$v: libcurl now signs it as SigV4 says; take it out of DIFFERS"
  else
    [ "$got" = "$want" ] || fail "$v (request): sent '$got', the vector says '$want'"
    same=$((same + 1))
  fi
  n=$((n + 1))
done
[ "$n" = 13 ] || fail "$n vectors, expected 13"
echo "vectors: $n match as canonical requests, $same as written"

# verify REQUIRED: every request logged since the last call is signed right, with REQUIRED.
verify() {
  python3 "$HERE/sigv4_verify.py" "$T/log" "$AWS_SECRET_ACCESS_KEY" "$1" >"$T/verify" ||
    fail "signatures: $(cat "$T/verify")"
  cat "$T/verify"
  : >"$T/log"
}
# The checker agrees with AWS: the vectors' own signatures (those whose path S3 would sign
# as written).
python3 "$HERE/sigv4_verify.py" --vectors "$VEC" "$AWS_SECRET_ACCESS_KEY" >"$T/verify" ||
  fail "sigv4_verify.py disagrees with the vectors: $(cat "$T/verify")"
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=another-secret/with+signs AWS_REGION=eu-west-3
: >"$T/log"
"$REMOTE_PROBE" -e "$EP" get "s3://bkt/dir/a b+c=d%e.bin" 100 300 "$T/got" 2>"$T/err" ||
  fail "get: $(cat "$T/err")"
python3 -c 'import sys; sys.exit(open(sys.argv[1], "rb").read() != bytes(i % 232 for i in range(100, 400)))' \
  "$T/got" || fail "get: bytes differ"
[ "$(wc -l <"$T/log")" = 2 ] || fail "get: $(wc -l <"$T/log") requests"
grep -q '"target": "/bkt/dir/a%20b%2Bc%3Dd%25e.bin"' "$T/log" || fail "get: key not encoded: $(cat "$T/log")"
grep -q '/eu-west-3/s3/aws4_request' "$T/log" || fail "get: not signed for eu-west-3's s3"
head -1 "$T/log" >"$T/log.head"
sed -n 2p "$T/log" >"$T/log.get"
mv "$T/log.get" "$T/log" && verify host,range,if-match,x-amz-content-sha256,x-amz-date
mv "$T/log.head" "$T/log" && verify host,x-amz-content-sha256,x-amz-date
# A key with "." and ".." segments is that key: sent as written (libcurl's path squashing
# off) and signed as sent, as S3 signs it.
"$REMOTE_PROBE" -e "$EP" get "s3://bkt/x/../y/./a b.bin" 10 20 "$T/got" 2>"$T/err" ||
  fail "dot segments: $(cat "$T/err")"
[ "$(grep -c '"target": "/bkt/x/../y/./a%20b.bin"' "$T/log")" = 2 ] ||
  fail "dot segments: not sent as written: $(cat "$T/log")"
verify host,x-amz-content-sha256,x-amz-date
"$REMOTE_PROBE" -e "$EP" -k 1 list "s3://bkt/dir/" >"$T/out" 2>"$T/err" || fail "list: $(cat "$T/err")"
printf 's3://bkt/dir/KEY-a 1000 "e-1000"\ns3://bkt/dir/KEY-b 1000 "e-1000"\n' | cmp -s - "$T/out" ||
  fail "list: $(cat "$T/out")"
grep -q 'continuation-token=page%2B2%2Fof%3D2&list-type=2&max-keys=1&prefix=dir%2F' "$T/log" ||
  fail "list: the second page's query: $(cat "$T/log")"
verify host,x-amz-content-sha256,x-amz-date
AWS_SESSION_TOKEN=the-token "$REMOTE_PROBE" -e "$EP" head s3://bkt/k >/dev/null 2>"$T/err" ||
  fail "token: $(cat "$T/err")"
grep -q '"x-amz-security-token", "the-token"' "$T/log" || fail "token: not sent: $(cat "$T/log")"
verify host,x-amz-content-sha256,x-amz-date,x-amz-security-token
echo PASS
