#!/bin/bash
# Slices of a chunked run through the binaries: `plan --steps A:B --rank R` writes rank R's work
# alone, with its own samples' keys, and is streamed as rank R (the batches of the whole plan's
# rank R) and refused as any other rank; a slice from an index map carries no keys and streams
# with the index; `plan --check` proves the pass and refuses -o; `bench_plan --map` writes the
# bytes `plan --save-map` writes for the same synthetic corpus.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BENCH=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
T=${TEST_TMPDIR:-$(mktemp -d)}/plan_slices
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
# batches MANIFEST RANK: the rank's stream, one line per batch, without its timings.
batches() {
  "$BIN" stream --index "$T/i.alidx" --manifest "$1" --rank "$2" --threads 1 --members json 2>"$T/serr" |
    sed 's/ stall_s.*//'
}

"$BIN" synth --out "$T/c" --samples 600 --payload none --seed 3 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/i.alidx" "$T/c" >/dev/null 2>&1 || fail index
P=(--index "$T/i.alidx" --world 4 --micro-per-step 2)
"$BIN" plan "${P[@]}" --planner chunked -o "$T/full.alm" 2>/dev/null || fail "full plan"
steps=$("$BIN" inspect "$T/full.alm" --json | sed -n 's/.*"steps": \([0-9]*\).*/\1/p')
[ "${steps:-0}" -ge 3 ] || fail "the run has $steps steps"
a=1 b=3

# Rank 2's slice: rank 2's batches of those steps, byte for byte what the full plan streams.
"$BIN" plan "${P[@]}" --steps $a:$b --rank 2 -o "$T/r2.alm" 2>/dev/null || fail "plan --rank 2"
batches "$T/r2.alm" 2 >"$T/r2.txt" || fail "stream of rank 2's slice: $(cat "$T/serr")"
batches "$T/full.alm" 2 | awk -v a=$a -v b=$b '$2 >= a && $2 < b' >"$T/f2.txt"
[ -s "$T/r2.txt" ] || fail "rank 2's slice streams nothing"
cmp -s "$T/r2.txt" "$T/f2.txt" || fail "rank 2's slice streams other batches: $(diff "$T/r2.txt" "$T/f2.txt" | head -4)"
batches "$T/r2.alm" 1 >/dev/null && fail "rank 2's slice streamed as rank 1"
grep -qF "holds only rank 2's work" "$T/serr" || fail "refusal says: $(cat "$T/serr")"
# Its key table: its own samples only (far fewer than the index's 600).
keys=$("$BIN" inspect "$T/r2.alm" --jsonl | grep -o '"keys": \[[^]]*\]' | grep -o '"[^"]*-[^"]*"' | sort -u | wc -l)
[ "$keys" -ge 1 ] && [ "$keys" -lt 600 ] || fail "rank 2's slice names $keys keys"
[ "$(stat -c %s "$T/r2.alm")" -lt "$(stat -c %s "$T/full.alm")" ] || fail "the slice is not smaller"

# From the index map: the same steps, no keys, streamed with the index.
"$BIN" plan --index "$T/i.alidx" --save-map "$T/i.map" 2>/dev/null || fail save-map
"$BIN" plan --map "$T/i.map" --world 4 --micro-per-step 2 --steps $a:$b --rank 2 -o "$T/m2.alm" 2>/dev/null ||
  fail "plan --map --rank"
batches "$T/m2.alm" 2 >"$T/m2.txt" || fail "stream of the map's slice: $(cat "$T/serr")"
cmp -s "$T/m2.txt" "$T/f2.txt" || fail "the map's slice streams other batches"

# --rank outside the world: a usage error, nothing written.
"$BIN" plan "${P[@]}" --steps $a:$b --rank 4 -o "$T/bad.alm" 2>"$T/err" && fail "--rank 4 of world 4 planned"
grep -qF -- "--rank 4: a world of 4 ranks has ranks 0..3" "$T/err" || fail "says: $(cat "$T/err")"
[ -e "$T/bad.alm" ] && fail "--rank 4 wrote a manifest"

# --check: the whole pass, each sample once; it writes nothing and takes no -o.
"$BIN" plan "${P[@]}" --check --json >"$T/check.json" 2>"$T/err" || fail "check: $(cat "$T/err")"
grep -q "\"steps\": $steps," "$T/check.json" || fail "check says $(cat "$T/check.json")"
planned=$("$BIN" inspect "$T/full.alm" --json | sed -n 's/.*"samples": \([0-9]*\).*/\1/p' | head -1)
grep -q "\"samples\": $planned," "$T/check.json" || fail "check: $(cat "$T/check.json"), plan $planned"
"$BIN" plan --map "$T/i.map" --world 4 --micro-per-step 2 --check 2>"$T/err" || fail "check --map"
grep -qF "samples each in exactly one step" "$T/err" || fail "check says: $(cat "$T/err")"
"$BIN" plan "${P[@]}" --check -o "$T/x.alm" 2>"$T/err" && fail "--check with -o ran"
grep -qF -- "--check plans every step of the run and writes nothing" "$T/err" || fail "says: $(cat "$T/err")"

# bench_plan --map: the map of its corpus without the index, the bytes save-map writes.
"$BENCH" -o "$T/b.alidx" --samples 30011 --shards 17 2>/dev/null || fail "bench_plan -o"
"$BENCH" --map "$T/b1.map" --samples 30011 --shards 17 2>/dev/null || fail "bench_plan --map"
"$BIN" plan --index "$T/b.alidx" --save-map "$T/b2.map" 2>/dev/null || fail "save-map of bench"
cmp "$T/b1.map" "$T/b2.map" || fail "bench_plan --map differs from plan --save-map"
echo PASS
