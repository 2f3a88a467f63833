#!/usr/bin/env bash
# `adaptiveload stream --decode`: "pixels", each sample's raw clip or image decoded to its
# bucket's (frames, height, width, 3) uint8, in --jsonl (shapes, CRC-32s); with --members; a
# sample without a media member and a corrupt clip fail with the located reason, or are
# skipped under --on-error skip. Clips encoded here by ffmpeg.
set -uo pipefail
BIN="$1"
T="${TEST_TMPDIR:-/tmp}/decode_cli"
rm -rf "$T" && mkdir -p "$T"
fails=0
check() { # description, condition...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
ff() { ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }
ff -f lavfi -i testsrc=size=160x80:rate=25 -frames:v 20 -c:v libx264 -preset ultrafast -g 5 "$T/a.mp4"
ff -f lavfi -i testsrc=size=64x64 -frames:v 1 "$T/b.jpg"
python3 - "$T" <<'PY'
import io, json, sys, tarfile
d = sys.argv[1]
def add(t, name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); ti.mtime = 1700000000; t.addfile(ti, io.BytesIO(data))
clip = open(f"{d}/a.mp4", "rb").read()
bad = bytearray(clip); bad[len(bad) // 3:len(bad) // 3 + 3000] = bytes(3000)
with tarfile.open(f"{d}/s.tar", "w", format=tarfile.USTAR_FORMAT) as t:
    for i in range(3):
        add(t, f"v{i}.json", b"{}"); add(t, f"v{i}.mp4", clip)
    add(t, "j0.jpg", open(f"{d}/b.jpg", "rb").read()); add(t, "j0.json", b"{}")
with tarfile.open(f"{d}/bad.tar", "w", format=tarfile.USTAR_FORMAT) as t:
    add(t, "v0.json", b"{}"); add(t, "v0.mp4", clip)
    add(t, "x0.json", json.dumps({"width": 160, "height": 80, "frames": 20}).encode()); add(t, "x0.mp4", bytes(bad))
    add(t, "n0.json", json.dumps({"width": 160, "height": 80, "frames": 20}).encode()); add(t, "n0.txt", b"no clip")
PY
printf 'frames 1 9 17\naspect 16:9 128x64\naspect 1:1 64x64\n' > "$T/buckets"
for c in s bad; do
  "$BIN" index -o "$T/$c.alidx" "$T/$c.tar" 2>/dev/null
  "$BIN" plan --index "$T/$c.alidx" --world 1 --mem-tokens 4000 --buckets "$T/buckets" -o "$T/$c.alm" >/dev/null 2>&1
done
"$BIN" stream --index "$T/s.alidx" --manifest "$T/s.alm" --decode --jsonl > "$T/s.jsonl" 2>"$T/s.err"
check "stream --decode exit 0" test $? = 0
check "pixels shapes, one CRC per clip" python3 - "$T/s.jsonl" <<'PY'
import json, sys
shapes, crcs = {}, {}
for line in open(sys.argv[1]):
    b = json.loads(line)
    assert list(b["members"]) == ["pixels"], b["members"].keys()
    px = b["members"]["pixels"]
    assert px["dtype"] == "uint8", px
    for k, s, c in zip(b["keys"], px["shapes"], px["crc32"]):
        shapes[k], crcs[k] = s, c
assert shapes == {"v0": [17, 64, 128, 3], "v1": [17, 64, 128, 3], "v2": [17, 64, 128, 3],
                  "j0": [1, 64, 64, 3]}, shapes
assert crcs["v0"] == crcs["v1"] == crcs["v2"] != crcs["j0"], crcs
PY
"$BIN" stream --index "$T/s.alidx" --manifest "$T/s.alm" --decode --members json --jsonl > "$T/m.jsonl" 2>/dev/null
check "--members json --decode: json then pixels" python3 -c '
import json, sys
for line in open(sys.argv[1]):
    assert list(json.loads(line)["members"]) == ["json", "pixels"]
' "$T/m.jsonl"
"$BIN" stream --index "$T/bad.alidx" --manifest "$T/bad.alm" --decode > /dev/null 2>"$T/bad.err"
check "a bad sample fails the stream" test $? != 0
check "its message names shard, key, member, byte" grep -Eq "(bad.tar: key 'x0' member 'x0.mp4' at byte [0-9]+: frame|key 'n0' member 'pixels': the sample has no raw video or image member)" "$T/bad.err"
"$BIN" stream --index "$T/bad.alidx" --manifest "$T/bad.alm" --decode --on-error skip --max-skip-fraction 1 --jsonl > "$T/skip.jsonl" 2>"$T/skip.err"
check "--on-error skip: exit 0" test $? = 0
check "only the good sample delivered, the bad ones listed" python3 - "$T/skip.jsonl" <<'PY'
import json, sys
got, skipped = [], []
for line in open(sys.argv[1]):
    b = json.loads(line)
    got += b["keys"]
    skipped += b["skipped"]
assert got == ["v0"] and sorted(skipped) == ["n0", "x0"], (got, skipped)
PY
check "skip reason: the clip's shard, key, member, byte and frame" grep -Eq "skipped x0: .*bad.tar: key 'x0' member 'x0.mp4' at byte [0-9]+: frame [0-9]+: " "$T/skip.err"
check "skip reason: no media member" grep -q "skipped n0: .*key 'n0' member 'pixels': the sample has no raw video or image member" "$T/skip.err"
echo "decode_cli_test: $fails failure(s)"
test "$fails" = 0
