#!/bin/bash
# adaptiveload stream end to end: synth -> index -> plan (2 ranks) -> stream, listing,
# JSON, bench, error policies and exit codes.
set -uo pipefail
BIN=$(pwd)/adaptiveload
T=${TEST_TMPDIR:-$(mktemp -d)}/cli
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() { local want=$1; shift; "$@" >"$T/out" 2>"$T/err"; local rc=$?; [ $rc = "$want" ] || { cat "$T/err" >&2; fail "$* -> exit $rc, wanted $want"; }; }

expect_rc 0 "$BIN" synth --out "$T/shards" --samples 24 --shards 2 --seed 4
expect_rc 0 "$BIN" index -o "$T/i.alidx" "$T/shards"
expect_rc 0 "$BIN" plan --index "$T/i.alidx" --world 2 --mem-tokens 20000 -o "$T/m.alm"
expect_rc 0 "$BIN" stream --help
grep -q "on-error" "$T/out" || fail "help lacks --on-error"

total=0
for r in 0 1; do
  expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank $r
  n=$(grep -c '^step ' "$T/out")
  [ "$n" -gt 0 ] || fail "rank $r listed no batch"
  expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank $r --json
  [ "$(wc -l <"$T/out")" = "$n" ] || fail "rank $r: --json gave another number of batches"
  samples=$(grep -o '"samples":[0-9]*' "$T/out" | cut -d: -f2 | awk '{s += $1} END {print s}')
  padded=$(grep -o '"padded":[0-9]*' "$T/out" | cut -d: -f2 | awk '{s += $1} END {print s}')
  total=$((total + samples - padded))
  expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank $r --bench --json
  grep -q "\"batches\":$n," "$T/out" || fail "bench counted other batches: $(cat "$T/out")"
done
[ "$total" = 24 ] || fail "ranks together delivered $total real samples, not 24"

# What each batch cost: the per-batch line and the JSON objects carry its stall and the bytes
# fetched (0: local shards); --bench sums them per step, a step being the rank's K
# micro-batches of one step (--micro-per-step K), a step cut by --max-batches counting too.
expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0
grep -q '^step 0 micro 0/1 .* first [^ ]* stall_s [0-9]*\.[0-9]\{6\} fetched 0$' "$T/out" ||
  fail "per-batch line lacks stall_s / fetched: $(head -1 "$T/out")"
expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --jsonl
n=$(wc -l <"$T/out")
[ "$(grep -c ',"cost":{"stall_s":[0-9.]*,"fetched_bytes":0,"requests":0,"cache_hits":0,"cache_misses":0}}$' "$T/out")" = "$n" ] ||
  fail "--jsonl cost: $(head -1 "$T/out")"
for k in 2 3; do
  expect_rc 0 "$BIN" plan --index "$T/i.alidx" --world 2 --mem-tokens 20000 --micro-per-step $k -o "$T/k$k.alm"
  for mb in "" 4; do
    expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/k$k.alm" --rank 1 --json
    python3 - "$T/out" "$T/k$k.alm" "$k" "$mb" "$BIN" "$T/i.alidx" <<'PY' || fail "bench steps (K=$k, max-batches '$mb')"
import json, subprocess, sys
out, man, k, mb, bin_, idx = sys.argv[1:]
k = int(k)
lines = [json.loads(l) for l in open(out)]
if mb:
    lines = lines[: int(mb)]
steps = {}
for b in lines:
    assert b["n_micro"] == k, b
    assert b["cost"]["stall_s"] >= 0 and b["cost"]["fetched_bytes"] == 0, b
    steps.setdefault(b["step"], 0)
    steps[b["step"]] += 1
want = len(steps)
assert mb or all(v == k for v in steps.values()), steps
cmd = [bin_, "stream", "--index", idx, "--manifest", man, "--rank", "1", "--bench", "--json"]
if mb:
    cmd += ["--max-batches", mb]
r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
assert r["batches"] == len(lines), (r["batches"], len(lines))
assert r["steps"] == want, (r["steps"], want, k, mb)
st = r["step_stall_seconds"]
assert 0 <= st["median"] <= st["p95"] <= st["max"] <= r["stall_seconds"] + 1e-6, r
assert 0 <= r["stall_fraction"] <= 1, r
assert r["step_fetched_bytes"] == {"median": 0, "max": 0} and r["step_requests"] == {"median": 0, "max": 0}, r
PY
  done
done
expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/k2.alm" --rank 0 --bench
grep -q "^per step ([1-9][0-9]* steps): stall median [0-9.]* s  p95 [0-9.]* s  max [0-9.]* s  fetched median 0 B  max 0 B  requests median 0  max 0$" "$T/out" ||
  fail "bench text per step: $(cat "$T/out")"

# --compute-cost: each batch sleeps the cost model's time for it (reported as compute_seconds);
# misuse is a usage error, a missing cost file an error naming it.
expect_rc 0 "$BIN" fit --default -o "$T/def.cost"
expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --bench --json \
  --compute-cost "$T/def.cost"
python3 - "$T/out" <<'PY' || fail "--compute-cost: $(cat "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["compute_seconds"] > 0 and d["seconds"] >= d["compute_seconds"], d
PY
expect_rc 2 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --compute-cost "$T/def.cost"
grep -q -- "--compute-cost needs --bench" "$T/err" || fail "--compute-cost without --bench: $(cat "$T/err")"
expect_rc 2 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --bench \
  --compute-cost "$T/def.cost" --compute-ms 3
expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --bench \
  --compute-cost "$T/none.cost"
grep -q "none.cost" "$T/err" || fail "missing cost file not named: $(cat "$T/err")"

expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --max-batches 1
[ "$(grep -c '^step ' "$T/out")" = 1 ] || fail "--max-batches 1"
RANK=1 WORLD_SIZE=2 expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm"
WORLD_SIZE=3 expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0
grep -q "WORLD_SIZE is 3" "$T/err" || fail "world mismatch message: $(cat "$T/err")"
RANK=x WORLD_SIZE=2 expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm"
grep -q "RANK is not a number: 'x'" "$T/err" || fail "bad RANK message: $(cat "$T/err")"
WORLD_SIZE=-2 expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0
grep -q "WORLD_SIZE is not a number: '-2'" "$T/err" || fail "bad WORLD_SIZE message: $(cat "$T/err")"
expect_rc 2 "$BIN" stream --index "$T/i.alidx"
expect_rc 2 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --on-error maybe

# Caps and FIFOs. A payload cap below the latents' size fails naming the cap; the
# index cap rejects those samples when indexing; a FIFO as index or manifest fails at once.
expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --max-member-bytes 100
grep -q "exceeds the cap of 100 bytes" "$T/err" || fail "cap message: $(cat "$T/err")"
expect_rc 2 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --max-member-bytes " -1"
expect_rc 0 "$BIN" index --max-member-bytes 100 -o "$T/capped.alidx" "$T/shards"
grep -q "exceeds the 100-byte cap" "$T/err" || fail "index cap message: $(cat "$T/err")"
mkfifo "$T/fifo.alm"
expect_rc 1 timeout 20 "$BIN" stream --index "$T/i.alidx" --manifest "$T/fifo.alm" --rank 0
grep -q "FIFO" "$T/err" || fail "FIFO manifest message: $(cat "$T/err")"
expect_rc 1 timeout 20 "$BIN" stream --index "$T/fifo.alm" --manifest "$T/m.alm" --rank 0
grep -q "FIFO" "$T/err" || fail "FIFO index message: $(cat "$T/err")"
expect_rc 1 timeout 20 "$BIN" index -o "$T/fifo.alm" "$T/shards"
grep -q "not a regular file" "$T/err" || fail "index -o FIFO message: $(cat "$T/err")"
[ -p "$T/fifo.alm" ] || fail "index -o replaced the FIFO"
# The planner's text inputs (benchmark CSV, cost JSON) and inspect --svg: a FIFO input is
# refused at once, an SVG never goes through a link nor into a FIFO.
expect_rc 1 timeout 20 "$BIN" fit --bench "$T/fifo.alm"
grep -q "FIFO" "$T/err" || fail "fit --bench FIFO message: $(cat "$T/err")"
echo keep >"$T/victim"
ln -s "$T/victim" "$T/link.svg"
expect_rc 0 "$BIN" inspect "$T/m.alm" --svg "$T/link.svg"
[ "$(cat "$T/victim")" = keep ] || fail "inspect --svg wrote through a symlink"
grep -q "<svg" "$T/link.svg" && [ ! -L "$T/link.svg" ] || fail "inspect --svg did not replace the link with a file"
expect_rc 1 timeout 20 "$BIN" inspect "$T/m.alm" --svg "$T/fifo.alm"
[ -p "$T/fifo.alm" ] || fail "inspect --svg replaced the FIFO"

# --members and --jsonl over synth's raw members (latent, json): one line per batch
# with both members, their bytes' CRC-32 (8 hex digits), a missing member naming what the
# sample has, bad lists refused as usage.
expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --members latent,json --jsonl
n0=$("$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 2>/dev/null | grep -c '^step ')
[ "$(wc -l <"$T/out")" = "$n0" ] || fail "--jsonl gave another number of batches"
grep -q '"members":{"latent":{"dtype":"uint8","shapes":\[\[[0-9]' "$T/out" || fail "--jsonl members: $(head -1 "$T/out")"
grep -q '"json":{"dtype":"uint8"' "$T/out" || fail "--jsonl second member: $(head -1 "$T/out")"
grep -q '"crc32":\["[0-9a-f]\{8\}"' "$T/out" || fail "--jsonl crc32: $(head -1 "$T/out")"
# The group fields (a plan without SP: degree 1, the rank its own group, the whole batch).
grep -q '"sp_degree":1,"sp_rank":0,"sp_group_first":0,"sp_sharded":0,"shard_token_range":\[0,[1-9][0-9]*\],"token_first":\[0' "$T/out" || fail "--jsonl sp fields: $(head -1 "$T/out")"
expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 1 --jsonl
grep -q '"sp_degree":1,"sp_rank":0,"sp_group_first":1,' "$T/out" || fail "--jsonl rank 1 group: $(head -1 "$T/out")"
# A plan on groups of 2 (--sp-degrees 2): both ranks get each group micro-batch, naming the group.
expect_rc 0 "$BIN" plan --index "$T/i.alidx" --world 2 --mem-tokens 20000 --sp-degrees 2 -o "$T/sp.alm"
for r in 0 1; do
  expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/sp.alm" --rank $r --jsonl
  grep -q "\"sp_degree\":2,\"sp_rank\":$r,\"sp_group_first\":0," "$T/out" || fail "--jsonl rank $r of a group of 2: $(head -1 "$T/out")"
  grep -o '"keys":\[[^]]*\]' "$T/out" >"$T/sp-keys-$r"
done
[ -s "$T/sp-keys-0" ] && cmp -s "$T/sp-keys-0" "$T/sp-keys-1" || fail "the ranks of a group got other micro-batches"
# --sp-shard needs a typed latent: synth's raw one is refused at open, naming it.
expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --sp-shard
grep -q "sp_shard: member 'latent' is untyped" "$T/err" || fail "--sp-shard untyped message: $(cat "$T/err")"
expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --members latent,t5.npy
grep -q "member 't5.npy' is in no sample of the index (24 samples); the index has: json, latent" "$T/err" || fail "missing member message: $(cat "$T/err")"
expect_rc 2 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --members latent,,txt
expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0 --members latent,latent
grep -q "requested twice" "$T/err" || fail "duplicate member message: $(cat "$T/err")"

# A manifest of another index.
expect_rc 0 "$BIN" synth --out "$T/other" --samples 5 --shards 1 --seed 9
expect_rc 0 "$BIN" index -o "$T/o.alidx" "$T/other"
expect_rc 1 "$BIN" stream --index "$T/o.alidx" --manifest "$T/m.alm" --rank 0
grep -q "fingerprint" "$T/err" || fail "fingerprint message: $(cat "$T/err")"

# Truncate shard 1 after indexing: fail names a key of it; skip lists every one of its samples.
truncate -s 4096 "$T/shards/shard-000001.tar"
expect_rc 1 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank 0
grep -q "shard-000001.tar" "$T/err" && grep -q "key '000001-" "$T/err" || fail "fail message: $(cat "$T/err")"
# synth puts samples 12..23 in shard 1 (24 samples, 2 shards).
: >"$T/skipped"
for r in 0 1; do
  expect_rc 0 "$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --rank $r --on-error skip --max-skip-fraction 1
  grep -o 'skipped 000001-[0-9]*' "$T/err" | cut -d' ' -f2 >>"$T/skipped" || true
done
skipped=$(sort -u "$T/skipped" | wc -l)
[ "$skipped" = 12 ] || fail "skip listed $skipped distinct samples of shard 1, wanted 12"
echo "PASS: stream CLI ($total samples over 2 ranks, $skipped skipped after truncation)"
