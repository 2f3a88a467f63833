#!/bin/bash
# The stall of ranks fed from a slow remote store at a training run's consumption rate, with a
# cache folder of a tenth of the corpus. Not a test.
#
#   dev/bench_remote_stall.sh BIN        (BIN: an `adaptiveload` CLI, e.g. bazel-bin/adaptiveload)
#
# A typed corpus (dev/gen_members_corpus.py: KEY.json, KEY.mp4 of MP4_PER_FRAME bytes a frame,
# KEY.latent.npy, KEY.t5.npy, KEY.txt) is
# served by nginx on the loopback behind tests/loader/fault_proxy.py with LAT_MS added per
# request and all answers together capped at BW bytes/s. RANKS ranks of one plan (one node) stream
# it at once, `--members latent.npy,t5.npy`, sharing one cache folder of CACHE_FRAC of the
# corpus's bytes, each batch taking the time `fit --trace TRACE` predicts for it
# (`stream --bench --compute-cost`, slept: the GPU computes, the host waits). Reported per rank and
# over the node: the stall fraction (time al_stream_next waited / wall time), the first
# micro-batch's latency on the cold cache, bytes and requests sent to the server against what
# the requested members hold and against downloading every shard whole (what a whole-shard cache
# such as MosaicML Streaming's or WebDataset's URL reading fetches for the same epoch). The
# baseline, in the same run: the same ranks reading the shards from local disk.
#
# Environment (defaults): SAMPLES=480 SHARDS=16 RANKS=4 LAT_MS=50 BW=500000000 CACHE_FRAC=0.10
# FETCH_PARALLEL=8 THREADS=2 MP4_PER_FRAME=10000 TRACE=docs/results/2026-12-01-h200-e2e-w8-k4-epoch-trace.jsonl
# WORK=(a temporary folder) KEEP=1 (keep WORK) PY=/usr/bin/python3 (numpy)
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
BIN=$(readlink -f "$1")
SAMPLES=${SAMPLES:-480} SHARDS=${SHARDS:-16} RANKS=${RANKS:-4} LAT_MS=${LAT_MS:-50}
BW=${BW:-500000000} CACHE_FRAC=${CACHE_FRAC:-0.10} FETCH_PARALLEL=${FETCH_PARALLEL:-8}
THREADS=${THREADS:-2} PY=${PY:-/usr/bin/python3} MP4_PER_FRAME=${MP4_PER_FRAME:-10000}
TRACE=${TRACE:-$ROOT/docs/results/2026-12-01-h200-e2e-w8-k4-epoch-trace.jsonl}
T=${WORK:-$(mktemp -d /tmp/bench_stall.XXXX)}
mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$ROOT/tests/loader/remote_servers.sh"
. "$ROOT/tests/loader/remote_fault_proxy.sh"
trap 'stop_servers; [ "${KEEP:-0}" = 1 ] || rm -rf "$T"' EXIT

[ -d "$T/www/corpus" ] || "$PY" "$ROOT/dev/gen_members_corpus.py" "$T/www/corpus" --samples "$SAMPLES" \
  --shards "$SHARDS" --mp4-bytes-per-frame "$MP4_PER_FRAME" >/dev/null || fail "gen_members_corpus"
"$BIN" index -o "$T/i.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/i.alidx" --world "$RANKS" -o "$T/m.alm" >/dev/null 2>&1 || fail plan
"$BIN" fit --trace "$TRACE" -o "$T/trace.cost" >/dev/null 2>&1 || fail "fit --trace $TRACE"
MEMBERS=latent.npy,t5.npy
read -r CORPUS WANT <<<"$("$PY" - "$T/www/corpus" "$MEMBERS" <<'PY'
import os, sys, tarfile
d, want = sys.argv[1], sys.argv[2].split(",")
corpus = member = 0
for f in sorted(os.listdir(d)):
    p = os.path.join(d, f)
    corpus += os.path.getsize(p)
    with tarfile.open(p) as t:
        member += sum(m.size for m in t if any(m.name.endswith("." + w) for w in want))
print(corpus, member)
PY
)"
CACHE=$("$PY" -c "print(int($CORPUS * $CACHE_FRAC))")
start_nginx "$T/www"
start_proxy slow "http://127.0.0.1:$NGINX_PORT" latency_ms="$LAT_MS" bandwidth="$BW"
URL="http://127.0.0.1:$PROXY_PORT/corpus"
echo "corpus $SAMPLES samples, $SHARDS shards, $((CORPUS / 1000000)) MB; members $MEMBERS hold" \
  "$((WANT / 1000000)) MB; $RANKS ranks; cache $((CACHE / 1000000)) MB; proxy ${LAT_MS} ms/request," \
  "$((BW / 1000000)) MB/s; consumption from $(basename "$TRACE"); load $(cut -d' ' -f1-3 /proc/loadavg)"

# RANKS streams at once: $1 a label, the rest stream options. Each rank's --bench JSON -> $T/$1.r.
node() {
  local label=$1 r
  shift
  local pids=()
  for r in $(seq 0 $((RANKS - 1))); do
    LOCAL_WORLD_SIZE=$RANKS "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank "$r" --bench --json --no-pinned \
      --threads "$THREADS" --members "$MEMBERS" --compute-cost "$T/trace.cost" "$@" \
      >"$T/$label.$r" 2>"$T/$label.$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$T/$label".*.err >&2; fail "$label: a rank failed"; }; done
  "$PY" - "$label" "$RANKS" "$T" "$WANT" "$CORPUS" "$SHARDS" <<'PY'
import json, sys
label, ranks, t, want, corpus, shards = sys.argv[1], int(sys.argv[2]), sys.argv[3], *map(int, sys.argv[4:])
rs = [json.load(open(f"{t}/{label}.{r}")) for r in range(ranks)]
stall = [d["stall_seconds"] / d["seconds"] for d in rs]
fetched = sum(d["bytes_fetched"] for d in rs)
req = sum(d["requests"] for d in rs)
print(f"{label:28s} stall {100 * max(stall):6.2f}% worst rank, {100 * sum(d['stall_seconds'] for d in rs) / sum(d['seconds'] for d in rs):6.2f}% node;"
      f" {sum(d['seconds'] for d in rs) / ranks:6.1f} s/rank, {sum(d['bytes'] for d in rs) / 1e6:7.1f} MB delivered,"
      f" {sum(d['tokens'] for d in rs) / max(d['seconds'] for d in rs):9.0f} tokens/s node")
st = [d["step_stall_seconds"] for d in rs]
steps = [d["steps"] for d in rs]
print(f"{'':28s} per step (worst rank): stall median {1e3 * max(x['median'] for x in st):.1f} ms,"
      f" p95 {1e3 * max(x['p95'] for x in st):.1f} ms, max {1e3 * max(x['max'] for x in st):.1f} ms"
      f" over {min(steps)}-{max(steps)} steps of {sum(d['seconds'] for d in rs) / sum(steps):.3f} s;"
      f" stall outside each rank's worst step {100 * max((d['stall_seconds'] - x['max']) / d['seconds'] for d, x in zip(rs, st)):.2f}%")
if req:
    print(f"{'':28s} fetched {fetched / 1e6:7.1f} MB = {fetched / want:.3f}x the members' bytes"
          f" (whole shards: {corpus / 1e6:.1f} MB = {corpus / want:.3f}x), {req} requests"
          f" (whole shards: {shards} GETs + {shards} HEADs), hits {sum(d['cache_hits'] for d in rs)}"
          f" misses {sum(d['cache_misses'] for d in rs)}, evicted {sum(d['evicted_bytes'] for d in rs) / 1e6:.1f} MB")
PY
}

node local
node remote-cold-cache --root "$T/www/corpus=$URL" --cache-dir "$T/cache" --cache-bytes "$CACHE" \
  --fetch-parallel "$FETCH_PARALLEL"
rm -rf "$T/cache1"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --bench --json --no-pinned \
  --members "$MEMBERS" --root "$T/www/corpus=$URL" --cache-dir "$T/cache1" --max-batches 1 |
  "$PY" -c "import json,sys; d=json.load(sys.stdin); print('first micro-batch, cold cache: %.0f ms' % (1e3*d['seconds']))"
proxy_stats "$PROXY_PORT" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print('proxy: %d requests, %.1f MB of bodies' % (d['requests'], d['body_bytes']/1e6))"
