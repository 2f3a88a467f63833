#!/bin/bash
# The stream over shards at URLs: one corpus indexed on local disk, streamed from local disk,
# nginx and the S3 server (--root DIR=URL) gives byte-identical --jsonl (CRCs of every delivered
# array); --members fetches only those members; the cache folder serves a second epoch with
# no fetch, holds its byte limit, and two processes sharing it fetch no member twice; a
# changed object and a server that is down fail naming the URL, in bounded time.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_stream
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"
. "$(dirname "$(readlink -f "$0")")/remote_stream_steps.sh"

"$BIN" synth --out "$T/www/corpus" --samples 48 --shards 3 --seed 7 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world 2 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=("$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --threads 2)
"${S[@]}" --members latent,json --jsonl >"$T/local.jsonl" 2>"$T/err" || fail "local: $(cat "$T/err")"
[ -s "$T/local.jsonl" ] || fail "no batch streamed"

start_nginx "$T/www"
URL="http://127.0.0.1:$NGINX_PORT/corpus"
R=(--root "$T/www/corpus=$URL")
"${S[@]}" "${R[@]}" --members latent,json --jsonl >"$T/nginx.jsonl" 2>"$T/err" ||
  fail "nginx: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/nginx.jsonl" || fail "nginx delivered other bytes than local disk"
grep -q "remote fetched" "$T/err" || fail "no remote counters: $(cat "$T/err")"
# The batches' fetched bytes add up to the stream's (no cache: readers fetch on demand, so
# nothing is fetched after the last delivery).
sum=$(python3 -c "import json,sys; print(sum(json.loads(l)['cost']['fetched_bytes'] for l in open(sys.argv[1])))" "$T/nginx.jsonl")
[ "$sum" -gt 0 ] && grep -q "remote fetched $sum bytes" "$T/err" ||
  fail "per-batch fetched bytes add up to $sum: $(cat "$T/err")"

# --members latent: bytes fetched within 1.05x the bytes those members hold (+ HEADs: 0 body).
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
"${S[@]}" "${R[@]}" --members latent --bench --json >"$T/lat.json" 2>"$T/err" ||
  fail "bench: $(cat "$T/err")"
got=$(field "$T/lat.json" bytes_fetched) want=$(field "$T/lat.json" bytes)
python3 -c "import sys; g,w=int(sys.argv[1]),int(sys.argv[2]); sys.exit(not (w > 0 and g <= 1.05*w))" \
  "$got" "$want" || fail "members=latent fetched $got bytes for $want member bytes"

# The cache: a cold epoch fills it, a warm one fetches nothing and hits every member.
C=(--cache-dir "$T/cache" --cache-bytes 100000000)
"${S[@]}" "${R[@]}" "${C[@]}" --members latent,json --bench --json >"$T/cold.json" 2>"$T/err" ||
  fail "cold: $(cat "$T/err")"
"${S[@]}" "${R[@]}" "${C[@]}" --members latent,json --jsonl >"$T/warm.jsonl" 2>"$T/err" ||
  fail "warm: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/warm.jsonl" || fail "the cache delivered other bytes"
grep -q "cache hits [1-9][0-9]* misses 0 " "$T/err" || fail "warm epoch fetched: $(cat "$T/err")"
# Warm: only the pins (one HEAD per shard) go to the server.
req=$(sed -n 's/.* in \([0-9]*\) requests.*/\1/p' "$T/err")
[ "$req" -le 3 ] || fail "warm epoch sent $req requests for 3 shards"
# Cold: each member fetched once (readers and the fetch-ahead threads together).
[ "$(field "$T/cold.json" cache_misses)" = "$(ls "$T"/cache/e-* | wc -l)" ] ||
  fail "cold epoch fetched $(field "$T/cold.json" cache_misses) members for $(ls "$T"/cache/e-* | wc -l) entries"

# A cache smaller than what the rank reads: the limit holds, bytes stay identical.
lim=$((want / 3))
"${S[@]}" "${R[@]}" --cache-dir "$T/small" --cache-bytes "$lim" --members latent --jsonl \
  >"$T/small.jsonl" 2>"$T/err" || fail "small cache: $(cat "$T/err")"
"${S[@]}" --members latent --jsonl >"$T/local_lat.jsonl" 2>/dev/null
same_delivery "$T/local_lat.jsonl" "$T/small.jsonl" || fail "small cache: other bytes"
used=$(du -b --apparent-size -c "$T"/small/e-* 2>/dev/null | tail -1 | cut -f1)
[ "$used" -le "$lim" ] || fail "cache holds $used bytes, limit $lim"
grep -q "evicted [1-9]" "$T/err" || fail "nothing evicted: $(cat "$T/err")"
# Fetched ahead within half the limit, read ones evicted first: no member fetched twice.
keys=$(python3 -c "import json,sys; print(len({k for l in open(sys.argv[1]) for k in json.loads(l)['keys']}))" "$T/local_lat.jsonl")
m=$(sed -n 's/.*misses \([0-9]*\).*/\1/p' "$T/err")
[ "$m" = "$keys" ] || fail "small cache: $m fetches for $keys members: $(cat "$T/err")"

# Two ranks' processes at once on one cache folder: each member fetched once in all.
stream_two_ranks "$T/shared" "${R[@]}" --members latent,json --jsonl
same_delivery "$T/local.jsonl" "$T/shared0.jsonl" || fail "shared cache: rank 0 other bytes"
# Every entry was fetched by one process only: the misses of both add up to the entries.
misses=0
for r in 0 1; do
  m=$(sed -n 's/.*misses \([0-9]*\).*/\1/p' "$T/shared$r.err")
  misses=$((misses + m))
done
n=$(ls "$T"/shared/e-* | wc -l)
[ "$misses" = "$n" ] || fail "two processes fetched $misses members for $n cache entries"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 1 --threads 2 "${R[@]}" \
  --cache-dir "$T/shared" --members latent,json --jsonl >/dev/null 2>"$T/err" || fail "rank 1 warm"
grep -q "misses 0 " "$T/err" || fail "rank 1 refetched from the shared cache: $(cat "$T/err")"

# Python: StreamDataset(root=URL, cache_dir=, cache_bytes=) delivers the local bytes.
python_step "${2:-}" "$T" "$URL" <<'PY' || fail "Python StreamDataset over nginx"
import sys
from adaptiveload.stream import StreamDataset
t, url = sys.argv[1], sys.argv[2]
def run(**kw):
    ds = StreamDataset(t + "/i.alidx", t + "/m.alm", rank=0, world_size=2, zero_copy=False, **kw)
    return [(b.keys, bytes(b.data.numpy())) for b in ds]
local = run()
remote = run(root={t + "/www/corpus": url}, cache_dir=t + "/pycache", cache_bytes=50_000_000)
assert local and local == remote, "remote batches differ from local ones"
# Per-batch fetches add up to the stream's totals: without a cache (readers fetch on demand)
# and with one (fetch-ahead threads too); local shards fetch nothing.
ds = StreamDataset(t + "/i.alidx", t + "/m.alm", rank=0, world_size=2)
assert all(b.fetched_bytes == 0 and b.requests == 0 for b in ds) and ds.stats()["bytes_fetched"] == 0
for kw in ({}, {"cache_dir": t + "/pystats", "cache_bytes": 50_000_000}):
    ds = StreamDataset(t + "/i.alidx", t + "/m.alm", rank=0, world_size=2, root={t + "/www/corpus": url}, **kw)
    bs = list(ds)
    last = bs[-1].stream_stats
    for k, f in (("bytes_fetched", "fetched_bytes"), ("requests", "requests"), ("cache_hits", "cache_hits"),
                 ("cache_misses", "cache_misses")):
        total = sum(getattr(b, f) for b in bs)
        assert total == last[k], (kw, k, total, last[k])
    assert last["bytes_fetched"] > 0 and last["requests"] > 0, last
    st = ds.stats()
    assert st["bytes_fetched"] >= last["bytes_fetched"] and st["batches"] == len(bs), (st, last)
    if not kw:  # readers only: nothing is fetched after the last delivery
        assert st["bytes_fetched"] == last["bytes_fetched"], (st, last)
for bad in (-2, 1.5, "4"):
    try:
        StreamDataset(t + "/i.alidx", t + "/m.alm", rank=0, world_size=2, fetch_parallel=bad)
    except (TypeError, ValueError):
        continue
    raise AssertionError("fetch_parallel=%r accepted" % (bad,))
for bad in (-1, 0, 0.05, 1e9, float("nan"), "x"):
    try:
        StreamDataset(t + "/i.alidx", t + "/m.alm", rank=0, world_size=2, remote_timeout=bad)
    except (TypeError, ValueError) as e:
        assert "remote_timeout" in str(e), e
        continue
    raise AssertionError("remote_timeout=%r accepted" % (bad,))
print("python ok")
PY

# S3 (s3_server.py): the same bytes through S3 (path-style, SigV4).
start_s3 bkt
s3_put_corpus "$T"/www/corpus/*.tar
"${S[@]}" --root "$T/www/corpus=s3://bkt/corpus" --members latent,json --jsonl \
  >"$T/s3.jsonl" 2>"$T/err" || fail "S3: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/s3.jsonl" || fail "S3 delivered other bytes than local disk"

# A changed object (other size) is an error naming its URL.
mkdir -p "$T/www2" && cp -r "$T/www/corpus" "$T/www2/" && shard=$(ls "$T"/www2/corpus/*.tar | head -1)
head -c 512 /dev/zero >>"$shard"
ln -s "$T/www2/corpus" "$T/www/changed"
"${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/changed" >/dev/null 2>"$T/err" &&
  fail "a changed object streamed"
grep -q "http://127.0.0.1:$NGINX_PORT/changed/.*object changed" "$T/err" ||
  fail "changed: $(cat "$T/err")"

# An index made from the URLs themselves records each shard's ETag: the stream delivers the same
# bytes, and an object rewritten at the same size (another ETag) is caught naming its URL.
mkdir -p "$T/www/direct" && cp "$T"/www/corpus/*.tar "$T/www/direct/"
url_index direct
U=("$BIN" stream --index "$T/u.alidx" --manifest "$T/u.alm" --rank 0 --threads 2)
"${U[@]}" --members latent,json --jsonl >"$T/url.jsonl" 2>"$T/err" || fail "URL index: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/url.jsonl" ||
  fail "the URL index streamed other bytes than local disk"
sleep 1.1 # nginx's ETag is the mtime (seconds) and the size
shard=$(ls "$T"/www/direct/*.tar | head -1)
cp "$shard" "$shard.tmp" && mv "$shard.tmp" "$shard" && touch "$shard"
"${U[@]}" >/dev/null 2>"$T/err" && fail "a rewritten object (same size) streamed"
grep -q "http://127.0.0.1:$NGINX_PORT/direct/$(basename "$shard").*object changed.*ETag" "$T/err" ||
  fail "ETag change: $(cat "$T/err")"

# A server that is down: a bounded-time error naming the URL.
down=$(free_port)
t0=$(date +%s)
ADAPTIVELOAD_REMOTE_TIMEOUT_S=2 "${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$down/corpus" \
  >/dev/null 2>"$T/err" && fail "streamed from a server that is down"
t1=$(date +%s)
grep -q "http://127.0.0.1:$down/corpus/" "$T/err" || fail "down: $(cat "$T/err")"
[ $((t1 - t0)) -le 30 ] || fail "down: took $((t1 - t0)) s"
echo "remote_stream_test: OK"
