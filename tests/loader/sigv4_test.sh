#!/bin/bash
# AWS Signature V4 as //loader:remote sends it (libcurl's CURLOPT_AWS_SIGV4, the client's
# headers, the vector's X-Amz-Date), checked against AWS's published test vectors
# (testdata/sigv4, README.md there says which and where from): the Authorization header a
# loopback server of this test receives must be the vector's.
#   creq mode: the vector's canonical request sent as it is: every vector must match (the
#              key derivation, string to sign, header trimming and sorting are right).
#   req mode:  the request as the vector writes it: every vector matches except those in
#              DIFFERS, which libcurl (7.88) does not normalise as SigV4 says; there the
#              test checks the difference is still there, so a libcurl that fixes it is
#              noticed (move the vector out of DIFFERS).
set -uo pipefail
PROBE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
VEC=$(cd "$(dirname "$0")/testdata/sigv4" && pwd)
T=${TEST_TMPDIR:-$(mktemp -d)}/sigv4
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/remote_servers.sh"

# libcurl before 8.3 signs the query in the order given (SigV4 sorts it by name, then
# value); before 8.13 it signs a repeated header once per line (SigV4 joins the values with
# ',' in one line). //loader:remote builds its one query (ListObjectsV2) sorted and sends
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
  tr '|' '\n' <"$T/log" | sed -n 's/^ *Authorization: //p' | sed 's/ *$//'
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
# The S3 service (what the remote layer signs for) adds the payload hash header, signed.
echo "vectors: $n match as canonical requests, $same as written"
echo PASS
