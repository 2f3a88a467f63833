#!/bin/bash
# The cache folder in the plan's order, against nginx on the loopback: with a cache of about a
# third of the epoch's member bytes, the epoch fetches every member exactly once (no member
# evicted before it is read), the fetch-ahead coalesces members of one shard into fewer requests
# than members, and members the stream does not ask for are not fetched (bytes fetched within
# 1.05x the requested members' bytes). Then the two ranks of an SP = 2 group (the same members
# in the same steps) share one cache folder: each member is fetched once over both processes,
# and both deliver what the local shards give.
set -uo pipefail
BIN=$(readlink -f "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_cache
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"
. "$(dirname "$(readlink -f "$0")")/remote_stream_steps.sh"

"$BIN" synth --out "$T/synth" --samples 96 --shards 4 --seed 9 >/dev/null 2>&1 || fail synth
# Each sample as a training shard holds it: KEY.json, KEY.mp4 (the source video, 200 kB: not
# asked for), KEY.latent, KEY.txt (a caption).
/usr/bin/python3 - "$T/synth" "$T/www/corpus" <<'PY' || fail "corpus"
import io, os, sys, tarfile
src, dst = sys.argv[1:]
os.makedirs(dst)
for f in sorted(os.listdir(src)):
    with tarfile.open(os.path.join(src, f)) as t, tarfile.open(os.path.join(dst, f), "w",
                                                               format=tarfile.USTAR_FORMAT) as o:
        def add(name, data):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime = len(data), 1700000000
            o.addfile(ti, io.BytesIO(data))
        ms = {m.name: t.extractfile(m).read() for m in t}
        for k in sorted({n.rsplit(".", 1)[0] for n in ms}):
            add(k + ".json", ms[k + ".json"])
            add(k + ".mp4", bytes((i * 131 + len(k)) & 255 for i in range(200000)))
            add(k + ".latent", ms[k + ".latent"])
            add(k + ".txt", ("a caption of %s" % k).encode())
PY
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 1 --mem-tokens 20000 -o "$T/m.alm" >/dev/null 2>&1 ||
  fail plan
start_nginx "$T/www"
ROOT=(--root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/corpus")
# The members the stream asks for (latent and txt: the json and mp4 left out) and their bytes.
read -r N_MEMBERS BYTES <<<"$(/usr/bin/python3 - "$T/www/corpus" <<'PY'
import os, sys, tarfile
n = b = 0
for f in sorted(os.listdir(sys.argv[1])):
    with tarfile.open(os.path.join(sys.argv[1], f)) as t:
        for m in t:
            if m.name.endswith((".latent", ".txt")):
                n, b = n + 1, b + m.size
print(n, b)
PY
)"
CACHE=$((BYTES / 3))

# A slow consumer (20 ms a batch) so the fetch-ahead leads the readers.
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --bench --json "${ROOT[@]}" \
  --members latent,txt \
  --cache-dir "$T/c1" --cache-bytes "$CACHE" --fetch-parallel 4 --compute-ms 20 --no-pinned \
  >"$T/b1.json" 2>"$T/b1.err" || fail "stream: $(cat "$T/b1.err")"
/usr/bin/python3 - "$T/b1.json" "$N_MEMBERS" "$BYTES" "$CACHE" <<'PY' || fail "one epoch: $(cat "$T/b1.json")"
import json, sys
d = json.load(open(sys.argv[1]))
members, size, cache = map(int, sys.argv[2:])
assert d["cache_misses"] == members, ("each member fetched once", d["cache_misses"], members)
assert d["bytes_fetched"] <= 1.05 * size, ("bytes", d["bytes_fetched"], size)
assert d["bytes_fetched"] >= size, d
assert d["evicted_bytes"] > 0, "the cache was meant to be smaller than the epoch"
heads = 4
assert d["requests"] - heads <= 0.75 * members, ("too few requests coalesced", d["requests"], members)
print("one epoch: %d members, %d requests, %.4fx the members' bytes, %d bytes evicted"
      % (members, d["requests"], d["bytes_fetched"] / size, d["evicted_bytes"]))
PY

# SP = 2: both ranks of each group read the same members.
"$BIN" plan --index "$T/i.alidx" --world 2 --sp-degrees 2 --mem-tokens 20000 -o "$T/sp.alm" \
  >/dev/null 2>&1 || fail "plan --sp-degrees 2"
for r in 0 1; do
  "$BIN" stream --index "$T/i.alidx" --manifest "$T/sp.alm" --rank $r --jsonl --members latent,txt \
    >"$T/local$r.jsonl" \
    2>"$T/err" || fail "local rank $r: $(cat "$T/err")"
done
pids=()
for r in 0 1; do
  "$BIN" stream --index "$T/i.alidx" --manifest "$T/sp.alm" --rank $r --jsonl --members latent,txt \
    "${ROOT[@]}" \
    --cache-dir "$T/c2" --cache-bytes $((4 * BYTES)) --fetch-parallel 4 \
    >"$T/sp$r.jsonl" 2>"$T/sp$r.err" &
  pids+=($!)
done
for r in 0 1; do wait "${pids[$r]}" || fail "SP rank $r: $(cat "$T/sp$r.err")"; done
for r in 0 1; do
  same_delivery "$T/local$r.jsonl" "$T/sp$r.jsonl" || fail "SP rank $r delivered other bytes than local"
done
misses=0
for r in 0 1; do
  m=$(grep -o 'misses [0-9]*' "$T/sp$r.err" | awk '{print $2}')
  [ -n "$m" ] || fail "SP rank $r: no remote summary: $(cat "$T/sp$r.err")"
  misses=$((misses + m))
done
[ "$misses" = "$N_MEMBERS" ] || fail "SP group: $misses members fetched over both ranks, $N_MEMBERS distinct"
echo "SP = 2 group on one cache folder: $misses fetches for $N_MEMBERS members, both ranks equal to local"
# --remote-timeout bounds a server that does not answer: a port nobody listens on fails the
# stream within the budget (the default, 60 s, would not), naming the URL.
DEAD=$(free_port)
t0=$(date +%s.%N)
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --members latent,txt \
  --root "$T/www/corpus=http://127.0.0.1:$DEAD/corpus" --remote-timeout 1 >/dev/null 2>"$T/dead.err"
rc=$?
secs=$(/usr/bin/python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(date +%s.%N)")
[ $rc = 1 ] || fail "a dead server: exit $rc, wanted 1: $(cat "$T/dead.err")"
grep -q "127.0.0.1:$DEAD/corpus" "$T/dead.err" || fail "the dead server's URL is not named: $(cat "$T/dead.err")"
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 10 else 1)" "$secs" ||
  fail "--remote-timeout 1: the stream took $secs s to fail"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --remote-timeout 0.01 \
  >/dev/null 2>"$T/err" && fail "--remote-timeout 0.01 accepted"
echo "a dead server with --remote-timeout 1: failed in $secs s naming the URL"
echo "remote_cache_test: OK"
