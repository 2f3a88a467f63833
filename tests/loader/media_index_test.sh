#!/usr/bin/env bash
# `adaptiveload index` over raw video and image members (decode/): what KEY.json lacks (size,
# frames, fps) is read from the member's container header, a sample without KEY.json takes it
# all from there, a JSON that the stream contradicts and a member that cannot be decoded reject
# the sample with the reason; plain (ranged reads) and compressed shards alike; a sample whose
# KEY.json gives everything, or that has a latent, is not probed. The clips are encoded here by
# ffmpeg.
set -uo pipefail
BIN="$1"
DUMP="$2"
T="${TEST_TMPDIR:-/tmp}/media_index"
rm -rf "$T" && mkdir -p "$T"
fails=0
check() { # description, condition...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
ff() { ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }

ff -f lavfi -i testsrc=size=320x180:rate=25 -frames:v 40 -c:v libx264 -preset ultrafast -threads 1 "$T/a.mp4"
ff -i "$T/a.mp4" -c copy -metadata:s:v:0 rotate=90 "$T/r.mp4"
ff -f lavfi -i testsrc=size=160x96:rate=30 -frames:v 20 -c:v libvpx-vp9 -deadline realtime "$T/b.webm"
ff -f lavfi -i testsrc=size=200x100 -frames:v 1 "$T/c.png"
ff -f lavfi -i testsrc=size=96x64 -frames:v 1 -q:v 2 "$T/d.jpg"
ff -f lavfi -i testsrc=size=96x64:rate=25 -frames:v 30 \
  -vf "setpts='if(lt(N,15),N,2*N-15)/25/TB'" -vsync passthrough -c:v libx264 -preset ultrafast "$T/v.mp4"
check "clips encoded" test -s "$T/a.mp4" -a -s "$T/r.mp4" -a -s "$T/b.webm" -a -s "$T/c.png" -a -s "$T/v.mp4"
head -c 3000 "$T/a.mp4" > "$T/cut.mp4"

python3 - "$T" <<'PY'
import io, json, sys, tarfile
d = sys.argv[1]
def add(t, name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
rd = lambda n: open(f"{d}/{n}", "rb").read()
js = lambda o: json.dumps(o).encode()
with tarfile.open(f"{d}/s.tar", "w", format=tarfile.USTAR_FORMAT) as t:
    add(t, "k1.json", js({"caption": "no shape"})); add(t, "k1.mp4", rd("a.mp4"))
    add(t, "k2.mp4", rd("a.mp4"))                                   # no KEY.json at all
    add(t, "k3.json", js({"frames": 81})); add(t, "k3.mp4", rd("a.mp4"))
    add(t, "k4.json", js({})); add(t, "k4.webm", rd("b.webm"))
    add(t, "k5.json", js({})); add(t, "k5.png", rd("c.png"))
    add(t, "k6.json", js({})); add(t, "k6.mp4", b"\x00\x00\x00\x18ftypisom" + b"x" * 3000)
    add(t, "k7.json", js({"width": 320, "height": 180})); add(t, "k7.mp4", rd("r.mp4"))
    add(t, "k8.json", js({"fps": 24})); add(t, "k8.mp4", rd("r.mp4"))
    add(t, "k9.d.jpg", b""); # a loose name: key 'k9', ext 'd.jpg' (not media): no JSON, rejected
    add(t, "ka.json", js({"width": 96, "height": 64})); add(t, "ka.mp4", rd("v.mp4"))
    add(t, "kb.jpg", rd("d.jpg")); add(t, "kb.json", js({"width": 96, "height": 64}))
    add(t, "kc.json", js({"width": 999, "height": 64})); add(t, "kc.png", rd("c.png"))
    add(t, "kd.json", js({})); add(t, "kd.mp4", rd("cut.mp4"))
    # A latent sample carrying its source clip (not a readable one here): the latent is the
    # truth, the clip is not probed.
    import struct
    hdr = b"{'descr': '<f2', 'fortran_order': False, 'shape': (16, 1, 8, 12), }"
    hdr += b" " * (64 - 10 - len(hdr) - 1) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + bytes(2 * 16 * 8 * 12)
    add(t, "ke.json", js({"width": 96, "height": 64, "frames": 1}))
    add(t, "ke.latent.npy", npy); add(t, "ke.mp4", b"not a clip" * 100)
    # A KEY.json that gives everything: the clip is not probed at indexing (the stream's decode
    # finds what is wrong with it).
    add(t, "kf.json", js({"width": 96, "height": 64, "frames": 9})); add(t, "kf.mp4", b"not a clip" * 100)
PY
gzip -k -n "$T/s.tar"

for shard in s.tar s.tar.gz; do
  "$BIN" index -o "$T/$shard.alidx" "$T/$shard" 2>"$T/$shard.err"
  check "$shard: index exit 0" test $? = 0
  "$DUMP" "$T/$shard.alidx" > "$T/$shard.dump" 2>/dev/null
  has() { grep -q -- "$2" "$T/$shard.$1" || { echo "  '$2' not in $shard.$1:"; cat "$T/$shard.$1"; return 1; }; }
  check "$shard: size, frames, fps from the mp4 header" has dump "sample k1 shard 0 320x180x40 fps 25 "
  check "$shard: the codec recorded (saved and loaded)" has dump "sample k1 shard 0 320x180x40 fps 25 member json@[0-9]*+[0-9]* mp4@[0-9]*+[0-9]*:codec=h264$"
  check "$shard: webm: vp9" has dump "sample k4 .* webm@[0-9]*+[0-9]*:codec=vp9$"
  check "$shard: png" has dump "sample k5 .* png@[0-9]*+[0-9]*:codec=png$"
  check "$shard: jpg" has dump "sample kb .* jpg@[0-9]*+[0-9]*:codec=mjpeg "
  check "$shard: not probed: no codec" has dump "sample kf shard 0 96x64x9 fps 0 member json@[0-9]*+[0-9]* mp4@[0-9]*+[0-9]*$"
  check "$shard: a sample without KEY.json" has dump "sample k2 shard 0 320x180x40 fps 25 "
  check "$shard: webm frames counted, fps" has dump "sample k4 shard 0 160x96x20 fps 30 "
  check "$shard: png: one frame" has dump "sample k5 shard 0 200x100x1 fps 0 "
  check "$shard: rotated clip: the displayed size; the JSON's fps kept" has dump "sample k8 shard 0 180x320x40 fps 24 "
  check "$shard: jpg with its JSON" has dump "sample kb shard 0 96x64x1 "
  check "$shard: a latent sample's clip is carried, not probed" has dump "sample ke shard 0 96x64x1 "
  check "$shard: a complete KEY.json: the clip is not probed" has dump "sample kf shard 0 96x64x9 "
  check "$shard: frames the stream does not hold" has err "member 'k3.mp4' at byte [0-9]*: k3.json gives 81 frames, the stream holds 40"
  check "$shard: a member that is no container" has err "member 'k6.mp4' at byte [0-9]*: cannot be decoded: not a readable container"
  check "$shard: the coded size of a rotated clip" has err "member 'k7.mp4' at byte [0-9]*: k7.json gives 320x180, the coded size of a stream displayed rotated by 270 degrees as 180x320"
  check "$shard: variable frame rate" has err "member 'ka.mp4' at byte [0-9]*: cannot be decoded: variable frame rate"
  check "$shard: a size the image does not have" has err "member 'kc.png' at byte [0-9]*: kc.json gives 999x64, the stream's png frames are 200x100"
  check "$shard: a truncated clip" has err "member 'kd.mp4' at byte [0-9]*: cannot be decoded: "
  n=$(grep -c "^sample " "$T/$shard.dump")
  check "$shard: 8 samples indexed ($n)" test "$n" = 8
  "$BIN" inspect "$T/$shard.alidx" --rejected > "$T/$shard.rej" 2>&1
  check "$shard: inspect --rejected lists them" has rej "cannot be decoded: variable frame rate"
done
# The JSON summary counts them like any other reject.
out=$("$BIN" index --json -o "$T/x.alidx" "$T/s.tar" 2>/dev/null)
check "index --json counts the rejects" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["samples"] == 8 and d["rejected"] == 7, d
' "$out"

echo "media_index_test: $fails failure(s)"
test "$fails" = 0
