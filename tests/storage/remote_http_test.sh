#!/bin/bash
# //storage against real HTTP servers on 127.0.0.1: Debian's nginx (sizes, ETags, byte
# ranges compared with the files' bytes, one client shared by threads, 404, an object changed
# between open and read) and
# remote_faults.py (every retry path: 503, 429 + Retry-After, a reset and a clean close in
# mid-body, a short 206, a 200 to a range, a stall; the errors: changed ETag, 412, changed
# size, a server that stays 503 and one that is down, each within its time budget).
set -uo pipefail
PROBE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_http
rm -rf "$T" && mkdir -p "$T/www"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"

head -c 1000000 /dev/urandom >"$T/www/blob"
head -c 300000 /dev/urandom >"$T/www/small"
printf x >"$T/www/one"
: >"$T/www/empty"
start_nginx "$T/www"
start_faults "$T/www"
NG=http://127.0.0.1:$NGINX_PORT
FT=http://127.0.0.1:$FAULT_PORT

# probe ARGS...: runs the probe (stdout in $T/out, stderr in $T/err), its exit status.
probe() { "$PROBE" "$@" >"$T/out" 2>"$T/err"; }
# same FILE OFF LEN OUT: OUT holds bytes [OFF, OFF+LEN) of FILE.
same() { [ "$(stat -c %s "$4")" = "$3" ] && cmp -s -i "$2:0" -n "$3" "$1" "$4"; }
stats() { grep -q "^$1\$" "$T/err" || fail "expected '$1', got: $(cat "$T/err")"; }

# nginx: HEAD gives the size and an ETag; ranges anywhere; a whole object in chunks.
probe head "$NG/blob" || fail "head: $(cat "$T/err")"
grep -Eq '^size 1000000 etag "[0-9a-f]+-[0-9a-f]+"$' "$T/out" || fail "head: $(cat "$T/out")"
for r in "0 1" "0 1000000" "123457 65536" "999999 1"; do
  set -- $r
  probe get "$NG/blob" "$1" "$2" "$T/got" || fail "get $r: $(cat "$T/err")"
  same "$T/www/blob" "$1" "$2" "$T/got" || fail "get $r: bytes differ"
done
stats "requests 2 retries 0 bytes 1 discarded 0"
probe cat "$NG/blob" "$T/got" 65536 || fail "cat: $(cat "$T/err")"
cmp -s "$T/www/blob" "$T/got" || fail "cat: bytes differ"
stats "requests 17 retries 0 bytes 1000000 discarded 0"
# One client shared by 8 threads, each with its own object and slice.
probe par "$NG/blob" 8 "$T/got" || fail "par: $(cat "$T/err")"
cmp -s "$T/www/blob" "$T/got" || fail "par: bytes differ"
probe par "$FT/reset/4/small" 3 "$T/got" || fail "par reset: $(cat "$T/err")"
cmp -s "$T/www/small" "$T/got" || fail "par reset: bytes differ"
probe cat "$NG/one" "$T/got" 7 && cmp -s "$T/www/one" "$T/got" || fail "cat one: $(cat "$T/err")"
probe cat "$NG/empty" "$T/got" 7 && cmp -s "$T/www/empty" "$T/got" || fail "cat empty"
stats "requests 1 retries 0 bytes 0 discarded 0"
probe get "$NG/blob" 999999 2 "$T/got" && fail "a range past the end was read"
grep -q "lie beyond its size 1000000" "$T/err" || fail "past end: $(cat "$T/err")"

# nginx: a missing file fails at once, naming the URL.
probe head "$NG/nothere" && fail "404 opened"
grep -q "^$NG/nothere: HTTP 404$" "$T/err" || fail "404: $(cat "$T/err")"
probe head "http://someone:pw-never-printed@127.0.0.1:$NGINX_PORT/nothere" && fail "404 opened"
grep -qxF "http://***@127.0.0.1:$NGINX_PORT/nothere: HTTP 404" "$T/err" || fail "userinfo: $(cat "$T/err")"

# nginx: the file replaced between open and read: If-Match fails (412), no bytes used.
cp "$T/www/small" "$T/www/changing"
"$PROBE" -w "$T/sync" get "$NG/changing" 0 1000 "$T/got" >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1 200); do [ -f "$T/sync.opened" ] && break; sleep 0.05; done
head -c 300001 /dev/urandom >"$T/www/changing.new" && mv "$T/www/changing.new" "$T/www/changing"
touch "$T/sync"
wait $pid && fail "a changed object was read"
grep -q "^$NG/changing: the object changed since it was opened (HTTP 412" "$T/err" ||
  fail "changed: $(cat "$T/err")"

# Faults that are retried: the bytes are the file's, the stats show the retries.
for m in 503 reset short partial; do
  rm -f "$T/got"
  probe -b 0.01 get "$FT/$m/2/small" 1000 200000 "$T/got" || fail "$m: $(cat "$T/err")"
  same "$T/www/small" 1000 200000 "$T/got" || fail "$m: bytes differ"
  stats "requests 4 retries 2 bytes 200000 discarded 0"
done
t0=$(date +%s.%N)
probe -b 0.01 get "$FT/429/1/small" 0 300000 "$T/got" || fail "429: $(cat "$T/err")"
cmp -s "$T/www/small" "$T/got" || fail "429: bytes differ"
python3 -c "import sys; sys.exit(not ($(date +%s.%N) - $t0 >= 1))" || fail "429: Retry-After not honoured"
stats "requests 3 retries 1 bytes 300000 discarded 0"
probe get "$FT/full/0/small" 5000 1000 "$T/got" || fail "full: $(cat "$T/err")"
same "$T/www/small" 5000 1000 "$T/got" || fail "full: bytes differ"
stats "requests 2 retries 0 bytes 1000 discarded 5000"
probe -s 1 -b 0.01 get "$FT/stall/1/small" 0 1000 "$T/got" || fail "stall: $(cat "$T/err")"
same "$T/www/small" 0 1000 "$T/got" || fail "stall: bytes differ"
stats "requests 3 retries 1 bytes 1000 discarded 0"
probe -b 0.01 head "$FT/headfail/2/small" || fail "headfail: $(cat "$T/err")"
grep -q '^size 300000 etag "v1-300000"$' "$T/out" || fail "headfail: $(cat "$T/out")"
stats "requests 3 retries 2 bytes 0 discarded 0"

# A changed object is an error naming the URL, never other bytes.
probe get "$FT/etag/0/small" 0 10 "$T/got" && fail "etag: read"
grep -qF "$FT/etag/0/small: the object changed since it was opened (ETag \"v1-300000\", now \"v2-300000\")" \
  "$T/err" || fail "etag: $(cat "$T/err")"
probe get "$FT/precond/0/small" 0 10 "$T/got" && fail "precond: read"
grep -qF "$FT/precond/0/small: the object changed since it was opened (HTTP 412" "$T/err" ||
  fail "precond: $(cat "$T/err")"
probe get "$FT/grown/0/small" 0 10 "$T/got" && fail "grown: read"
grep -qF "$FT/grown/0/small: the object changed since it was opened (size 300000, now 300001)" \
  "$T/err" || fail "grown: $(cat "$T/err")"
stats "requests 2 retries 0 bytes 0 discarded 0"

# A server that stays 503, and one that is down: a clear error within the budget (+ slack).
t0=$(date +%s)
probe -t 1.5 -b 0.05 get "$FT/503/1000000/small" 0 10 "$T/got" && fail "always 503: read"
grep -Eq "^$FT/503/1000000/small: gave up after [0-9]+ attempts in 1\.[0-9] s; last error: HTTP 503 \(Injected: fault\)$" \
  "$T/err" || fail "always 503: $(cat "$T/err")"
DOWN=http://127.0.0.1:$(free_port)/x
probe -t 1.5 -b 0.05 head "$DOWN" && fail "down: opened"
grep -Eq "^$DOWN: gave up after [0-9]+ attempts in 1\.[0-9] s; last error: Couldn't connect to server" \
  "$T/err" || fail "down: $(cat "$T/err")"
[ $(($(date +%s) - t0)) -le 6 ] || fail "the budgets were not kept"
echo PASS
