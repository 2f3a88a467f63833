#!/usr/bin/env bash
# tests/fuzz/make_seeds.sh - rewrites tests/fuzz/corpus/ (the seed corpora) from
# the CLI (bazel-bin/adaptiveload, build it first), the loader's tar fixtures and
# cost/data/. Deterministic; run it when a file format changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CLI=${CLI:-$ROOT/bazel-bin/adaptiveload}
C=$ROOT/tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rm -rf "$C"
mkdir -p "$C"/{tar_index,meta_json,index_load,manifest_load,cost_load,bench_csv}

# Tars: a 3-sample metadata-only shard, a 2-sample KEY.json.lz4 shard, the same
# shard gzip- and lz4-compressed, a shard with payloads and rejected samples
# (Python tarfile), and two fixtures of tests/loader/testdata cut after their last member.
"$CLI" synth --out "$T/c" --payload none --samples 3 --shards 1 >/dev/null 2>&1
"$CLI" synth --out "$T/cl" --payload none --samples 2 --shards 1 --seed 1 --json-lz4 >/dev/null 2>&1
cp "$T/c/shard-000000.tar" "$C/tar_index/synth3.tar"
cp "$T/cl/shard-000000.tar" "$C/tar_index/synth2_json_lz4.tar"
gzip -9nc "$T/c/shard-000000.tar" > "$C/tar_index/synth3.tar.gz"
lz4 -9 -q -c "$T/c/shard-000000.tar" > "$C/tar_index/synth3.tar.lz4"
python3 - "$C/tar_index/mixed_rejects.tar" <<'PY'
import io, sys, tarfile
members = [
    ("a-0001.json", b'{"width": 832, "height": 480, "frames": 81, "fps": 16}'),
    ("a-0001.latent", b"LATENT-BYTES-0001"),
    ("b-0002.json", b'{"width": 0, "height": 480}'),
    ("c-0003.json", b'{"width": 640, "height":'),
    ("d-0004.latent", b"NO-METADATA"),
    ("e-0005.json", b'{"w": 64, "height": 64, "num_frames": 5, "frame_rate": 8}'),
    ("a-0001.txt", b"duplicate key after others"),
]
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for name, data in members:
        ti = tarfile.TarInfo(name)
        ti.size, ti.mtime, ti.mode = len(data), 1700000000, 0o644
        t.addfile(ti, io.BytesIO(data))
PY
python3 - "$C/tar_index" tests/loader/testdata/gnu_longname.tar tests/loader/testdata/gnutar_pax.tar <<'PY'
import os, sys
for src in sys.argv[2:]:
    b = open(src, "rb").read().rstrip(b"\0")
    n = (len(b) + 511) // 512 * 512 + 1024
    open(os.path.join(sys.argv[1], os.path.basename(src)), "wb").write(b.ljust(n, b"\0"))
PY
# the tarfile default pads to 10240 bytes: cut the padding as above
python3 - "$C/tar_index/mixed_rejects.tar" <<'PY'
import sys
b = open(sys.argv[1], "rb").read().rstrip(b"\0")
open(sys.argv[1], "wb").write(b.ljust((len(b) + 511) // 512 * 512 + 1024, b"\0"))
PY

# JSON metadata objects.
m=$C/meta_json
printf '{"width": 720, "height": 720}' > "$m/image.json"
printf '{"width": 240, "height": 320, "frames": 33, "fps": 30, "duration": 1.100000}' > "$m/video.json"
printf '{"width": 1280.0, "height": 720, "duration": 5.0, "frame_rate": 24}' > "$m/duration.json"
printf '{"w": 64, "h": 48, "num_frames": 17, "nframes": 9, "fps": null}' > "$m/renamed.json"
printf '[{"width": 1}, "x", true, 1e309, -0.0, "\\u00e9\\ud83d\\ude00"]' > "$m/types.json"

# Container files: byte 0 = 0 then the decompressed stream (the harness wraps it
# in an LZ4 frame), or byte 0 = 1 then the file as written.
container() { # FILE DEST_PREFIX
  { printf '\000'; lz4 -d -q -c "$1"; } > "$2.stream"
  { printf '\001'; cat "$1"; } > "$2.file"
}
"$CLI" index "$T/c" -o "$T/c.alidx" >/dev/null 2>&1
"$CLI" index "$C/tar_index/mixed_rejects.tar" "$T/cl" -o "$T/mixed.alidx" >/dev/null 2>&1
container "$T/c.alidx" "$C/index_load/synth3"
container "$T/mixed.alidx" "$C/index_load/rejects"
# Manifests with and without padding, both policies, a dropped last step.
"$CLI" synth --out "$T/c12" --payload none --samples 12 --shards 2 --seed 3 >/dev/null 2>&1
"$CLI" index "$T/c12" -o "$T/c12.alidx" >/dev/null 2>&1
"$CLI" plan --index "$T/c.alidx" --world 4 -o "$T/a4.alm" >/dev/null 2>&1
"$CLI" plan --index "$T/c12.alidx" --world 5 --policy equal-token -o "$T/e5.alm" >/dev/null 2>&1
container "$T/a4.alm" "$C/manifest_load/adaptive_w4_pad"
container "$T/e5.alm" "$C/manifest_load/equal_w5_pad"
"$CLI" plan --index "$T/c.alidx" --world 2 -o "$T/a2.alm" >/dev/null 2>&1
"$CLI" plan --index "$T/c12.alidx" --world 5 --policy equal-token --last-step drop -o "$T/e5d.alm" >/dev/null 2>&1
container "$T/a2.alm" "$C/manifest_load/adaptive_w2"
{ printf '\000'; lz4 -d -q -c "$T/e5d.alm"; } > "$C/manifest_load/equal_w5_drop.stream"
# A sequence-parallel plan: groups of degree 2 and 4 with followers (no samples of their own).
"$CLI" plan --index "$T/c12.alidx" --world 4 --micro-per-step 2 --mem-tokens 16384 \
  --sp-degrees 1,2,4 -o "$T/sp4.alm" >/dev/null 2>&1
container "$T/sp4.alm" "$C/manifest_load/sp_w4"
{ head -1 cost/data/h200_shape_bench.csv; sed -n '10,21p' cost/data/h200_shape_bench.csv; } > "$T/bench.csv"
"$CLI" fit --bench "$T/bench.csv" -o "$T/mem.alcost" >/dev/null 2>&1
"$CLI" fit --default --loss abs -o "$T/default.alcost" >/dev/null 2>&1
container "$T/mem.alcost" "$C/cost_load/poly2_mem"
container "$T/default.alcost" "$C/cost_load/default_abs"

# Shape benchmarks: CSV rows of cost/data/h200_shape_bench.csv, reordered
# columns with a comment, and the JSON form.
b=$C/bench_csv
cp "$T/bench.csv" "$b/h200_rows.csv"
{
  echo '# reordered, extra column, ms alias'
  echo 'S,note,ms,B'
  sed -n '2,10p' cost/data/h200_shape_bench.csv | awk -F, '{print $2",x,"$3","$1}'
} > "$b/reordered.csv"
# RFC 4180 quoting: every field quoted, a comma, doubled quotes and a line break inside quotes.
{
  echo '"note, ""free""","B","S","step_ms"'
  sed -n '2,10p' cost/data/h200_shape_bench.csv |
    awk -F, '{printf "\"run\n%d\",\"%s\",\"%s\",\"%s\"\n", NR, $1, $2, $3}'
} > "$b/quoted.csv"
python3 - "$b/h200_rows.json" <<'PY'
import json, sys
rows = json.load(open("cost/data/h200_dit_block_cost.json"))["rows"][:10]
json.dump({"device": "NVIDIA H200", "measured": "2026-11-30", "rows": rows}, open(sys.argv[1], "w"))
PY
du -sh "$C"
