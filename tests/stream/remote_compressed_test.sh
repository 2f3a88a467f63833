#!/bin/bash
# Compressed shards at URLs (tar.gz, tar.zst, tar.lz4): each is downloaded whole once, then read
# with libarchive like a local compressed shard. Streamed from nginx and the S3 server (--root DIR=URL),
# the batches are byte-identical (the CRCs of every delivered array in --jsonl; Python's
# batches) to the local copies', with and without a cache folder and with --members selecting
# members; the download counts in the remote counters; without a cache it leaves nothing in
# $TMPDIR; with one it is one entry, found by the next stream, and two processes sharing the
# folder download each shard once; a shard bigger than the cache's limit goes to a private
# file; a changed object (size, content, ETag) and an unwritable $TMPDIR fail naming the URL.
# Args: the adaptiveload binary, libadaptiveload.so (optional: the Python step).
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_compressed
rm -rf "$T" && mkdir -p "$T/tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"
. "$(dirname "$(readlink -f "$0")")/remote_stream_steps.sh"
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
misses() { sed -n 's/.*misses \([0-9]*\).*/\1/p' "$1"; }
size_sum() { du -b --apparent-size -c "$@" 2>/dev/null | tail -1 | cut -f1; }

# Three shards, one of each compression; metadata as LZ4 members (decoded after libarchive).
"$BIN" synth --out "$T/www/corpus" --samples 24 --shards 3 --seed 7 --json-lz4 >/dev/null 2>&1 ||
  fail synth
(
  cd "$T/www/corpus" && a=(*.tar) && gzip -n "${a[0]}" && zstd -q --rm "${a[1]}" &&
    lz4 -q --rm "${a[2]}" "${a[2]}.lz4"
) || fail "compress the shards"
[ "$(ls "$T"/www/corpus | wc -l)" = 3 ] || fail "shards: $(ls "$T"/www/corpus)"
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>"$T/err" || fail "index: $(cat "$T/err")"
"$BIN" plan --index "$T/i.alidx" --world 2 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=("$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --threads 2)
for m in latent,json json; do
  "${S[@]}" --members $m --jsonl >"$T/local.$m.jsonl" 2>"$T/err" || fail "local: $(cat "$T/err")"
  [ -s "$T/local.$m.jsonl" ] || fail "no batch streamed"
done
same_delivery "$T/local.latent,json.jsonl" "$T/local.json.jsonl" && fail "--members json changed nothing"

start_nginx "$T/www"
URL="http://127.0.0.1:$NGINX_PORT/corpus"
R=(--root "$T/www/corpus=$URL")

# No cache folder: a private file in $TMPDIR, gone when the stream ends.
for m in latent,json json; do
  TMPDIR=$T/tmp "${S[@]}" "${R[@]}" --members $m --jsonl >"$T/nginx.jsonl" 2>"$T/err" ||
    fail "nginx --members $m: $(cat "$T/err")"
  same_delivery "$T/local.$m.jsonl" "$T/nginx.jsonl" || fail "nginx --members $m: other bytes than local disk"
done
[ -z "$(ls -A "$T/tmp")" ] || fail "left in TMPDIR: $(ls -A "$T/tmp")"
TMPDIR=$T/tmp "${S[@]}" "${R[@]}" --bench --json >"$T/nocache.json" 2>"$T/err" ||
  fail "bench: $(cat "$T/err")"

# A cache folder: one entry per shard, holding exactly the object; the download is what was
# fetched (each shard once, in bytes_fetched).
C=(--cache-dir "$T/cache" --cache-bytes 100000000)
"${S[@]}" "${R[@]}" "${C[@]}" --bench --json >"$T/cold.json" 2>"$T/err" || fail "cold: $(cat "$T/err")"
n=$(ls "$T"/cache/e-* 2>/dev/null | wc -l)
[ "$n" -ge 1 ] && [ "$(field "$T/cold.json" cache_misses)" = "$n" ] ||
  fail "cold: $(field "$T/cold.json" cache_misses) downloads for $n entries"
for e in "$T"/cache/e-*; do
  found=0
  for f in "$T"/www/corpus/*; do cmp -s "$e" "$f" && found=1; done
  [ $found = 1 ] || fail "cache entry $e is no shard"
done
got=$(field "$T/cold.json" bytes_fetched) want=$(size_sum "$T"/cache/e-*)
[ "$got" = "$want" ] || fail "cold: fetched $got bytes, the downloaded shards hold $want"
[ "$(field "$T/nocache.json" bytes_fetched)" = "$want" ] ||
  fail "no cache: fetched $(field "$T/nocache.json" bytes_fetched) bytes, the shards hold $want"
# Warm: the entries serve the stream; only the pins (one HEAD per shard) reach the server.
for m in latent,json json; do
  "${S[@]}" "${R[@]}" "${C[@]}" --members $m --jsonl >"$T/warm.jsonl" 2>"$T/err" ||
    fail "warm: $(cat "$T/err")"
  same_delivery "$T/local.$m.jsonl" "$T/warm.jsonl" || fail "warm --members $m: other bytes"
  grep -q "remote fetched 0 bytes .*cache hits [1-9][0-9]* misses 0 " "$T/err" ||
    fail "warm epoch fetched: $(cat "$T/err")"
  req=$(sed -n 's/.* in \([0-9]*\) requests.*/\1/p' "$T/err")
  [ "$req" -le 3 ] || fail "warm epoch sent $req requests for 3 shards"
done

# Python: StreamDataset(root=URL) delivers the local bytes, with and without a cache folder.
TMPDIR=$T/tmp python_step "${2:-}" "$T" "$URL" <<'PY' || fail "Python StreamDataset over nginx"
import sys
from adaptiveload.stream import StreamDataset
t, url = sys.argv[1], sys.argv[2]
def run(**kw):
    ds = StreamDataset(t + "/i.alidx", t + "/m.alm", rank=0, world_size=2, zero_copy=False, **kw)
    return [(b.keys, bytes(b.data.numpy())) for b in ds]
local = run()
assert local, "no batch"
assert run(root={t + "/www/corpus": url}) == local, "remote batches differ from local ones"
cached = run(root={t + "/www/corpus": url}, cache_dir=t + "/pycache", cache_bytes=100_000_000)
assert cached == local, "remote batches through the cache differ from local ones"
print("python ok")
PY
[ -z "$(ls -A "$T/tmp")" ] || fail "Python: left in TMPDIR: $(ls -A "$T/tmp")"

# A limit below the larger shards: those go to private files, the limit holds, same bytes.
lim=$(( $(stat -c %s "$T"/www/corpus/*.tar.gz) + 1000 ))
TMPDIR=$T/tmp "${S[@]}" "${R[@]}" --cache-dir "$T/small" --cache-bytes "$lim" --members latent,json \
  --jsonl >"$T/small.jsonl" 2>"$T/err" || fail "small cache: $(cat "$T/err")"
same_delivery "$T/local.latent,json.jsonl" "$T/small.jsonl" || fail "small cache: other bytes"
used=$(size_sum "$T"/small/e-*)
[ "$used" -le "$lim" ] || fail "cache holds $used bytes, limit $lim"
[ -z "$(ls -A "$T/tmp")" ] || fail "small cache: left in TMPDIR: $(ls -A "$T/tmp")"

# Two ranks' processes at once on one cache folder: each shard downloaded once in all.
stream_two_ranks "$T/shared" "${R[@]}" --members latent,json --jsonl
same_delivery "$T/local.latent,json.jsonl" "$T/shared0.jsonl" || fail "shared cache: rank 0 other bytes"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 1 --threads 2 \
  --members latent,json --jsonl >"$T/local1.jsonl" 2>/dev/null || fail "local rank 1"
same_delivery "$T/local1.jsonl" "$T/shared1.jsonl" || fail "shared cache: rank 1 other bytes"
total=$(( $(misses "$T/shared0.err") + $(misses "$T/shared1.err") ))
n=$(ls "$T"/shared/e-* | wc -l)
[ "$total" = "$n" ] || fail "two processes downloaded $total shards for $n cache entries"
fetched=0
for r in 0 1; do
  b=$(sed -n 's/.*remote fetched \([0-9]*\) bytes.*/\1/p' "$T/shared$r.err")
  fetched=$((fetched + b))
done
[ "$fetched" = "$(size_sum "$T"/shared/e-*)" ] ||
  fail "two processes fetched $fetched bytes for $(size_sum "$T"/shared/e-*) bytes of shards"

# $TMPDIR that cannot hold the file: the error names the URL and the folder.
TMPDIR=$T/missing "${S[@]}" "${R[@]}" >/dev/null 2>"$T/err" && fail "streamed without a TMPDIR"
grep -q "$URL/shard-.*download of the compressed shard.*$T/missing" "$T/err" ||
  fail "no TMPDIR: $(cat "$T/err")"

# S3 (s3_server.py): the same bytes through S3 (path-style, SigV4).
start_s3 bkt
s3_put_corpus "$T"/www/corpus/*
for c in "" "--cache-dir $T/s3cache"; do
  TMPDIR=$T/tmp "${S[@]}" --root "$T/www/corpus=s3://bkt/corpus" $c --members latent,json --jsonl \
    >"$T/s3.jsonl" 2>"$T/err" || fail "S3 $c: $(cat "$T/err")"
  same_delivery "$T/local.latent,json.jsonl" "$T/s3.jsonl" || fail "S3 $c: other bytes than local disk"
done
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION AWS_ENDPOINT_URL

# A changed object: another size is refused at the pin, other bytes of the same size (the local
# index records no ETag) after the download, by the content fingerprint; both name the URL.
mkdir -p "$T/www/grown" "$T/www/flipped"
cp "$T"/www/corpus/* "$T/www/grown/" && cp "$T"/www/corpus/* "$T/www/flipped/"
head -c 512 /dev/zero >>"$(ls "$T"/www/grown/*.tar.zst)"
f=$(ls "$T"/www/flipped/*.tar.zst)
printf '\x55' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
"${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/grown" >/dev/null 2>"$T/err" &&
  fail "a grown object streamed"
grep -q "http://127.0.0.1:$NGINX_PORT/grown/shard-.*tar.zst.*object changed" "$T/err" ||
  fail "grown: $(cat "$T/err")"
for c in "" "--cache-dir $T/flipcache"; do
  TMPDIR=$T/tmp "${S[@]}" --root "$T/www/corpus=http://127.0.0.1:$NGINX_PORT/flipped" $c \
    >/dev/null 2>"$T/err" && fail "a changed object streamed ($c)"
  grep -q "http://127.0.0.1:$NGINX_PORT/flipped/shard-.*tar.zst: shard changed since indexing.*fingerprint" "$T/err" ||
    fail "flipped $c: $(cat "$T/err")"
done

# An index made from the URLs records each shard's ETag: the same bytes, and an object rewritten
# at the same size (another ETag) is refused naming its URL.
mkdir -p "$T/www/direct" && cp "$T"/www/corpus/* "$T/www/direct/"
url_index direct
U=("$BIN" stream --index "$T/u.alidx" --manifest "$T/u.alm" --rank 0 --threads 2)
TMPDIR=$T/tmp "${U[@]}" --members latent,json --jsonl >"$T/url.jsonl" 2>"$T/err" ||
  fail "URL index: $(cat "$T/err")"
same_delivery "$T/local.latent,json.jsonl" "$T/url.jsonl" ||
  fail "the URL index streamed other bytes than local disk"
sleep 1.1 # nginx's ETag is the mtime (seconds) and the size
f=$(ls "$T"/www/direct/*.tar.gz)
cp "$f" "$f.tmp" && mv "$f.tmp" "$f" && touch "$f"
"${U[@]}" >/dev/null 2>"$T/err" && fail "a rewritten object (same size) streamed"
grep -q "http://127.0.0.1:$NGINX_PORT/direct/$(basename "$f").*object changed.*ETag" "$T/err" ||
  fail "ETag change: $(cat "$T/err")"
echo "remote_compressed_test: OK"
