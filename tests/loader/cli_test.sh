#!/usr/bin/env bash
# `adaptiveload synth` and `adaptiveload index` end to end: exit codes, --json,
# the rejected list, --strict, brace patterns, --dali-idx, determinism.
set -uo pipefail
BIN="$1"
T="${TEST_TMPDIR:-/tmp}/cli"
rm -rf "$T" && mkdir -p "$T"
fails=0
check() { # description, condition...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

"$BIN" synth --out "$T/c" --samples 300 --shards 3 --payload none --seed 4 2>/dev/null
check "synth exit 0" test $? = 0
"$BIN" synth --out "$T/c2" --samples 300 --shards 3 --payload none --seed 4 --threads 1 2>/dev/null
check "synth byte-identical" cmp -s "$T/c/shard-000002.tar" "$T/c2/shard-000002.tar"

out=$("$BIN" index --json -o "$T/a.alidx" "$T/c" 2>"$T/err")
check "index exit 0" test $? = 0
check "json summary" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["samples"] == 300 and d["shards"] == 3 and d["rejected"] == 0 and d["bytes"] > 0 and d["seconds"] >= 0, d
' "$out"
check "quiet stderr with --json and nothing rejected" test ! -s "$T/err"

out=$("$BIN" index --json --threads 1 -o "$T/b.alidx" "$T/c/shard-{000000..000002}.tar" 2>/dev/null)
check "brace pattern: same index file" cmp -s "$T/a.alidx" "$T/b.alidx"

printf 'not a tar at all' > "$T/junk.tar"
"$BIN" index -o "$T/j.alidx" "$T/c" "$T/junk.tar" 2>"$T/err"
check "rejections alone: exit 0" test $? = 0
check "rejected list names shard and reason" grep -q "junk.tar: at byte 0: not a readable tar archive" "$T/err"
"$BIN" index --strict -o "$T/s.alidx" "$T/c" "$T/junk.tar" 2>/dev/null
check "--strict with rejections: exit 1" test $? = 1
check "--strict still writes the index" test -s "$T/s.alidx"
"$BIN" index -o "$T/n.alidx" "$T/junk.tar" 2>/dev/null
check "no readable shard: exit 1" test $? = 1

mkdir -p "$T/many"
for i in $(seq 25); do printf 'x' > "$T/many/bad-$i.tar"; done
"$BIN" index -o "$T/m.alidx" "$T/c" "$T/many" 2>"$T/err"
check "first 20 rejections, then a count" grep -q "\.\.\. and 5 more" "$T/err"

"$BIN" index --dali-idx "$T/dali" -o "$T/d.alidx" "$T/c" 2>/dev/null
check "dali index header" test "$(head -1 "$T/dali/shard-000001.idx")" = "v1.2 100"
check "dali index lines" test "$(wc -l < "$T/dali/shard-000001.idx")" = 101

"$BIN" index -o "$T/x.alidx" 2>/dev/null
check "no shard: exit 2" test $? = 2
"$BIN" index "$T/c" 2>/dev/null
check "no -o: exit 2" test $? = 2
"$BIN" index --threads 0 -o "$T/x.alidx" "$T/c" 2>/dev/null
check "bad --threads: exit 2" test $? = 2
"$BIN" synth --samples 5 2>/dev/null
check "synth without --out: exit 2" test $? = 2
# strtoull skips leading white space, so " -1" parsed as 2^64-1.
for v in " -1" "-1" " 5" "+5" "5 " "" "0x10" "18446744073709551616"; do
  "$BIN" synth --out "$T/seed" --samples 5 --payload none --seed "$v" 2>/dev/null
  check "synth --seed '$v': exit 2" test $? = 2
done
"$BIN" synth --out "$T/seed" --samples 5 --payload none --seed 18446744073709551615 2>/dev/null
check "synth --seed 2^64-1: exit 0" test $? = 0

printf 'B,S,ms\n1,256,1.0\n' > "$T/bench.csv"
for v in inf nan " 1e9" -inf; do
  "$BIN" fit --mem-capacity "$v" "$T/bench.csv" 2>/dev/null
  check "fit --mem-capacity '$v': exit 2" test $? = 2
done

"$BIN" index --help > "$T/help"
check "index --help" grep -q "dali-idx" "$T/help"
"$BIN" synth --help > "$T/help"
check "synth --help" grep -q "payload" "$T/help"

# A latent corpus written by Python's tarfile (.npy headers by hand: numpy is not
# needed), --fields, --vae-stride, warnings, and `inspect INDEX`.
python3 - "$T/lat.tar" <<'PY'
import io, json, struct, sys, tarfile
def npy(descr, shape, elem):
    sh = "(" + "".join("%d, " % d for d in shape) + ")" if len(shape) != 1 else "(%d,)" % shape[0]
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, sh)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    n = elem
    for d in shape: n *= d
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + bytes(n)
def add(t, name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
with tarfile.open(sys.argv[1], "w") as t:
    for i, (w, h, f) in enumerate([(832, 480, 81), (416, 240, 17), (256, 256, 1)]):
        k = "s%d" % i
        add(t, k + ".json", json.dumps({"w": w, "h": h, "nb_frames": f}).encode())
        add(t, k + ".latent.npy", npy("<f2", (16, (f - 1) // 4 + 1, h // 8, w // 8), 2))
        add(t, k + ".t5.npy", npy("<f4", (7 + i, 16), 4))
    add(t, "v.json", json.dumps({"w": 64, "h": 64, "fps": 30}).encode())
    add(t, "x.json", json.dumps({"w": 64, "h": 64, "frames": 5}).encode())
    add(t, "x.latent.npy", npy("<f2", (16, 3, 8, 8), 2))
PY
out=$("$BIN" index --json --fields width=w,height=h -o "$T/lat.alidx" "$T/lat.tar" 2>"$T/err")
check "latent index exit 0" test $? = 0
check "latent index json: warnings counted" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["samples"] == 4 and d["rejected"] == 1 and d["warnings"] == 1, d
' "$out"
check "grid mismatch names both grids" grep -q "x.latent.npy' at byte .*latent grid \[16, 3, 8, 8\].*gives T, H, W = 2, 8, 8" "$T/err"
check "warning listed with its key" grep -q "sample 'v', member 'v.json'.*no frame-count field" "$T/err"
"$BIN" inspect "$T/lat.alidx" > "$T/insp" 2>&1
check "inspect INDEX exit 0" test $? = 0
check "inspect INDEX: typed members" grep -q "latent.npy *float16 \[16, T, H, W\] x 3" "$T/insp"
check "inspect INDEX: varying t5 length" grep -q "t5.npy *float32 \[d0, 16\] x 3" "$T/insp"
check "inspect INDEX: shapes" grep -q "832x480 x 81" "$T/insp"
check "inspect INDEX: buckets" grep -q "1 *416x240 x 17 (16:9)" "$T/insp"
out=$("$BIN" inspect "$T/lat.alidx" --json)
check "inspect INDEX --json" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["kind"] == "index" and d["samples"] == 4 and d["rejected"] == 1 and d["warnings"] == 1, d
m = {x["ext"]: x for x in d["members"]}
assert m["latent.npy"]["dtype"] == "float16" and m["latent.npy"]["max_shape"] == [16, 21, 60, 104], m
assert d["warning_list"][0]["key"] == "v", d
assert {"width": 832, "height": 480, "frames": 81, "count": 1} in d["buckets"], d["buckets"]
' "$out"
"$BIN" inspect "$T/lat.alidx" --svg "$T/x.svg" 2>/dev/null
check "inspect INDEX --svg: exit 2" test $? = 2
"$BIN" index --vae-stride 4,16 --fields width=w,height=h -o "$T/lat16.alidx" "$T/lat.tar" 2>"$T/err"
check "--vae-stride 4,16: the grids no longer match" grep -q "under VAE stride 4 (time), 16 (space)" "$T/err"
"$BIN" index --vae-stride 4 -o "$T/x.alidx" "$T/lat.tar" 2>/dev/null
check "bad --vae-stride: exit 2" test $? = 2
"$BIN" index --fields frames -o "$T/x.alidx" "$T/lat.tar" 2>/dev/null
check "bad --fields: exit 2" test $? = 2
printf 'garbage' > "$T/g.alidx"
"$BIN" inspect "$T/g.alidx" 2>/dev/null
check "inspect garbage: exit 1" test $? = 1

echo "$fails failed"
test "$fails" = 0
