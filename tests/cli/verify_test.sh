#!/bin/bash
# adaptiveload verify finds, in one run, every defect of a deliberately damaged corpus: a
# sample without a required member (indexed so), then, after planning, a missing shard, a
# changed shard (same size, one header byte) and a truncated shard. A clean corpus passes
# (exit 0); the damaged one exits 3 and lists each defect, in text and in --json.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/verify
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" synth --out "$T/clean" --samples 40 --shards 5 --seed 7 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/clean.alidx" "$T/clean" >/dev/null 2>&1 || fail index
"$BIN" plan --index "$T/clean.alidx" --world 2 -o "$T/clean.alm" >/dev/null 2>&1 || fail plan

# The clean corpus: exit 0, nothing reported, every sample with a bucket.
"$BIN" verify "$T/clean.alidx" "$T/clean.alm" >"$T/out" 2>"$T/err" || fail "clean: $(cat "$T/out" "$T/err")"
grep -q "verify: no problems" "$T/out" || fail "clean: $(cat "$T/out")"
grep -q "crop (manifest): 40 samples with a bucket" "$T/out" || fail "clean crop: $(cat "$T/out")"
"$BIN" verify "$T/clean.alidx" --json >"$T/clean.json" 2>"$T/err" || fail "clean --json"
python3 - "$T/clean.json" <<'PY' || fail "clean json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] and r["problem_count"] == 0 and r["problems"] == [], r
assert r["members"] == ["latent"] and r["shards_checked"] == 5, r
c = r["crop"]
assert c["from"] == "bucket table" and c["samples"] == 40 and c["unplanned"] == 0, c
assert 0 < c["kept_fraction"] <= 1 and sum(g["samples"] for g in c["groups"]) == 40, c
assert {g["duration"] for g in c["groups"]} <= {"image", "<2s", "2-5s", "5-10s", ">=10s"}, c
fr = [x["fraction"] for x in c["cut_most"]]
assert len(fr) == 10 and fr == sorted(fr), fr
for x in c["cut_most"]:
    assert x["kept_tokens"] <= x["native_tokens"], x
PY

# The damaged corpus. Before indexing: one sample loses its latent (the tar rewritten with
# Python's tarfile); the index records the sample without it.
cp -r "$T/clean" "$T/bad"
python3 - "$T/bad/shard-000000.tar" >"$T/dropped" <<'PY' || fail "could not drop a member"
import io, sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as t:
    members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
victim = [m.name for m, _ in members if m.name.endswith(".latent")][1]
with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
    for m, data in members:
        if m.name != victim:
            t.addfile(m, io.BytesIO(data))
print(victim.split(".")[0])
PY
key=$(cat "$T/dropped")
"$BIN" index -o "$T/bad.alidx" "$T/bad" >/dev/null 2>&1 || fail "index bad"
"$BIN" plan --index "$T/bad.alidx" --world 2 -o "$T/bad.alm" >/dev/null 2>&1 || fail "plan bad"
# After planning: shard 1 deleted, shard 2 changed (one digit of a member header's mtime,
# same size), shard 3 cut in the middle of a member.
rm "$T/bad/shard-000001.tar"
python3 - "$T/bad/shard-000002.tar" <<'PY' || fail "could not change a header"
import sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as t:
    m = t.getmembers()[2]
with open(path, "r+b") as f:
    f.seek(m.offset_data - 512 + 137)
    c = f.read(1)
    f.seek(m.offset_data - 512 + 137)
    f.write(b"1" if c != b"1" else b"2")
PY
size=$(stat -c %s "$T/bad/shard-000003.tar")
truncate -s $((size / 2 + 100)) "$T/bad/shard-000003.tar"

"$BIN" verify "$T/bad.alidx" "$T/bad.alm" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 3 ] || fail "damaged corpus: exit $rc, not 3: $(cat "$T/out" "$T/err")"
grep -q "missing_shard: $T/bad/shard-000001.tar: cannot open shard" "$T/out" || fail "missing shard: $(cat "$T/out")"
grep -q "changed_shard: $T/bad/shard-000002.tar: shard changed since indexing" "$T/out" ||
  fail "changed shard: $(cat "$T/out")"
grep -q "truncated_shard: $T/bad/shard-000003.tar: truncated: $((size / 2 + 100)) bytes, the index says $size" \
  "$T/out" || fail "truncated shard: $(cat "$T/out")"
grep -q "missing_member: key '$key' in $T/bad/shard-000000.tar: no member '$key.latent'" "$T/out" ||
  fail "missing member: $(cat "$T/out")"
grep -q "problems: missing_shard 1, changed_shard 1, truncated_shard 1, missing_member 1, bad_header 0, manifest 0" \
  "$T/out" || fail "counts: $(cat "$T/out")"
grep -q "verify: 4 problems" "$T/out" || fail "total: $(cat "$T/out")"

"$BIN" verify "$T/bad.alidx" "$T/bad.alm" --json >"$T/bad.json" 2>"$T/err"
[ $? = 3 ] || fail "--json exit"
python3 - "$T/bad.json" "$T/bad" "$key" <<'PY' || fail "damaged json: $(cat "$T/bad.json")"
import json, sys
r = json.load(open(sys.argv[1]))
d, key = sys.argv[2], sys.argv[3]
assert not r["ok"] and r["problem_count"] == 4 and r["manifest_used"], r
kinds = {p["kind"]: p for p in r["problems"]}
assert sorted(kinds) == ["changed_shard", "missing_member", "missing_shard", "truncated_shard"], r
assert kinds["missing_shard"]["shard"] == d + "/shard-000001.tar"
assert kinds["changed_shard"]["shard"] == d + "/shard-000002.tar"
t = kinds["truncated_shard"]
assert t["shard"] == d + "/shard-000003.tar" and t["key"] and "past the end" in t["message"], t
assert kinds["missing_member"]["key"] == key, kinds["missing_member"]
s = r["skipped"]
# three damaged shards of 8 samples each, one more sample without its latent
assert s["damaged_shard"] == 24 and s["missing_member"] == 1 and s["samples"] == 25, s
assert sum(p["lost"] for p in r["problems"]) == 25, r["problems"]
assert r["crop"]["from"] == "manifest" and r["crop"]["samples"] == 40, r["crop"]
PY

# A manifest of another index is a problem too; the rest is still checked.
"$BIN" verify "$T/bad.alidx" "$T/clean.alm" --json -q >"$T/other.json" 2>"$T/err"
[ $? = 3 ] || fail "other manifest exit"
python3 - "$T/other.json" <<'PY' || fail "other manifest json: $(cat "$T/other.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["counts"]["manifest"] == 1 and r["problem_count"] == 5 and not r["manifest_used"], r
assert "planned from another index" in [p for p in r["problems"] if p["kind"] == "manifest"][0]["message"]
assert "crop" not in r, r
PY

# Typed latents: the grid is the native size. 896x512 x 81 frames at 16 fps (grid 21 x 64 x
# 112) goes to the 16:9 bucket 832x480 x 81: 21 x 30 x 52 of 21 x 32 x 56 tokens kept, band
# 5-10s; 832x480 x 81 is kept whole. The default required member is the typed latent
# (latent.npy); --members latent.npy,t5.npy finds the sample without t5.npy.
python3 - "$T/lat.tar" <<'PY' || fail "latent corpus"
import io, json, struct, sys, tarfile
def npy(descr, shape, elem):
    sh = "(" + "".join("%d, " % d for d in shape) + ")"
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, sh)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    n = elem
    for d in shape: n *= d
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + bytes(n)
def add(t, name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
with tarfile.open(sys.argv[1], "w") as t:
    for k, (w, h, f) in [("wide", (896, 512, 81)), ("exact", (832, 480, 81))]:
        add(t, k + ".json", json.dumps({"width": w, "height": h, "frames": f, "fps": 16}).encode())
        add(t, k + ".latent.npy", npy("<f2", (16, (f - 1) // 4 + 1, h // 8, w // 8), 2))
        if k == "exact":
            add(t, k + ".t5.npy", npy("<f4", (7, 16), 4))
    add(t, "tiny.json", b'{"width": 16, "height": 16}')  # fits no bucket: the plan skips it
    add(t, "tiny.latent.npy", npy("<f2", (16, 1, 2, 2), 2))
    add(t, "broken.json", b'{"width": 16,')  # the index rejects it
    add(t, "broken.latent.npy", npy("<f2", (16, 1, 2, 2), 2))
PY
"$BIN" index -o "$T/lat.alidx" "$T/lat.tar" >/dev/null 2>&1 || fail "index latents"
"$BIN" verify "$T/lat.alidx" --json >"$T/lat.json" 2>"$T/err" || fail "latents: $(cat "$T/lat.json")"
python3 - "$T/lat.json" <<'PY' || fail "latent json: $(cat "$T/lat.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["members"] == ["latent.npy"] and r["ok"], r
assert r["skipped"]["index_rejected"] == 1 and r["index_rejected"][0]["key"] == "broken", r
assert r["plan_skipped"] == [{"sample": 2, "key": "tiny", "reason": "smaller than every bucket of its aspect group"}], r["plan_skipped"]
c = r["crop"]
assert c["samples"] == 2 and c["unplanned"] == 1, c
assert c["native_tokens"] == 21 * 32 * 56 + 21 * 30 * 52 and c["kept_tokens"] == 2 * 21 * 30 * 52, c
g, = c["groups"]
assert (g["aspect"], g["duration"], g["samples"]) == ("16:9", "5-10s", 2), g
assert abs(g["min_fraction"] - 30 * 52 / (32 * 56)) < 1e-6, g
w, e = c["cut_most"]
assert w["key"] == "wide" and w["bucket"] == [832, 480, 81] and w["kept_tokens"] == 21 * 30 * 52, w
assert e["key"] == "exact" and e["fraction"] == 1, e
PY
"$BIN" verify "$T/lat.alidx" --members latent.npy,t5.npy >"$T/out" 2>&1
[ $? = 3 ] || fail "latents --members exit"
grep -q "index rejected: $T/lat.tar: member 'broken.json' at byte" "$T/out" || fail "rejected: $(cat "$T/out")"
grep -q "  buckets: tiny: smaller than every bucket of its aspect group" "$T/out" || fail "plan skip: $(cat "$T/out")"
grep -q "missing_member: key 'wide' in $T/lat.tar: no member 'wide.t5.npy' (nor '.t5.npy.lz4'); the sample has: json, latent.npy" \
  "$T/out" || fail "t5 missing: $(cat "$T/out")"

# --strict: what the index or the plan rejected are problems too (2 here).
"$BIN" verify "$T/lat.alidx" --strict >"$T/out" 2>&1
[ $? = 3 ] || fail "--strict exit: $(cat "$T/out")"
grep -q "verify: 2 problems (--strict" "$T/out" || fail "--strict: $(cat "$T/out")"

# --root: the corpus copied elsewhere is checked there; the old place is gone.
mkdir -p "$T/moved" && cp -r "$T/clean" "$T/moved/clean"
mv "$T/clean" "$T/clean.gone"
"$BIN" verify "$T/clean.alidx" "$T/clean.alm" -q >"$T/out" 2>&1
[ $? = 3 ] || fail "a corpus that is gone passed"
grep -q "missing_shard 5" "$T/out" || fail "gone: $(cat "$T/out")"
"$BIN" verify "$T/clean.alidx" "$T/clean.alm" --root "$T=$T/moved" --threads 3 >"$T/out" 2>"$T/err" ||
  fail "--root: $(cat "$T/out" "$T/err")"
grep -q "verify: 5 shard paths moved from $T to $T/moved" "$T/err" || fail "--root message: $(cat "$T/err")"
"$BIN" verify "$T/clean.alidx" --root "/nowhere=$T/moved" >/dev/null 2>&1
[ $? = 1 ] || fail "a --root matching no shard exits 1"
mv "$T/clean.gone" "$T/clean"

# --help lists every option.
"$BIN" verify --help >"$T/out" || fail "--help exit"
for o in --members --root --buckets --show --top --threads --strict --json --quiet; do
  grep -q -- "$o\b" "$T/out" || fail "--help lacks $o"
done

# --members: a member no sample has is missing from every one; usage errors exit 2.
"$BIN" verify "$T/clean.alidx" --members latent,t5.npy -q >"$T/out" 2>&1
[ $? = 3 ] || fail "--members t5.npy exit"
grep -q "missing_member 40" "$T/out" || fail "--members: $(cat "$T/out")"
grep -q "more missing_member (--json lists all)" "$T/out" || fail "--show: $(cat "$T/out")"
"$BIN" verify >/dev/null 2>&1
[ $? = 2 ] || fail "no INDEX is a usage error"
"$BIN" verify "$T/clean.alidx" "$T/clean.alm" extra >/dev/null 2>&1
[ $? = 2 ] || fail "a third path is a usage error"
"$BIN" verify "$T/clean.alidx" --members a,,b >/dev/null 2>&1
[ $? = 2 ] || fail "an empty member is a usage error"
"$BIN" verify "$T/nothing.alidx" >/dev/null 2>&1
[ $? = 1 ] || fail "an index that does not load exits 1"
echo "verify_test: OK"
