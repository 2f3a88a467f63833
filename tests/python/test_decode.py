"""Raw video and image members from Python: StreamDataset(..., decode=True) delivers "pixels",
each sample's clip or image decoded to its bucket's (frames, height, width, 3) uint8 tensor
(decode/al_decode.h). The clips are encoded here by ffmpeg from frames whose grey level is their
index, so the delivered frames are checked to be exactly the bucket's first F_b frames; the
geometry against a rectangle pattern scaled and centre-cropped as the header says; a corrupt
clip skipped with a located reason under on_error="skip".

Run by tests/python/python_test.sh (Bazel sh_test) with ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and
PYTHONPATH set.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

try:
    import torch
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

from adaptiveload import StreamDataset

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
BUCKETS = "frames 1 9 17\naspect 16:9 128x64\naspect 1:1 64x64\n"


def run(*args):
    subprocess.run([BIN] + [str(a) for a in args], check=True, stdout=subprocess.DEVNULL)


def encode(path, w, h, frames, pixel, args):
    raw = bytearray()
    for f in range(frames):
        raw += pixel(f, w, h)
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo",
                    "-pix_fmt", "rgb24", "-s", "%dx%d" % (w, h), "-r", "25", "-i", "-"] + args + [path],
                   input=bytes(raw), check=True)
    with open(path, "rb") as fh:
        return fh.read()


def grey(f, w, h):  # frame f's grey level encodes its index
    return bytes([8 + 3 * f]) * (w * h * 3)


def rect(f, w, h):  # white rectangle x in [w/2, 3w/4), all rows, on black
    row = b"".join(b"\xff\xff\xff" if w // 2 <= x < 3 * w // 4 else b"\0\0\0" for x in range(w))
    return row * h


H264 = ["-c:v", "libx264", "-preset", "ultrafast", "-qp", "0", "-g", "5", "-pix_fmt", "yuv420p"]


class Corpus:
    def __init__(self, root):
        self.shards = os.path.join(root, "shards")
        os.makedirs(self.shards)
        clip = encode(os.path.join(root, "a.mp4"), 160, 80, 20, grey, H264)
        short = encode(os.path.join(root, "b.webm"), 144, 72, 12, grey,
                       ["-c:v", "libvpx-vp9", "-lossless", "1", "-deadline", "realtime"])
        pattern = encode(os.path.join(root, "c.png"), 192, 64, 1, rect, ["-c:v", "png", "-frames:v", "1"])
        bad = bytearray(clip)
        bad[len(bad) // 3:len(bad) // 3 + 2000] = bytes(2000)
        with tarfile.open(os.path.join(self.shards, "s-0.tar"), "w", format=tarfile.USTAR_FORMAT) as t:
            def add(name, data):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = len(data), 1700000000
                t.addfile(ti, io.BytesIO(data))
            for i in range(4):
                add("v%d.json" % i, json.dumps({"caption": "clip"}).encode())
                add("v%d.mp4" % i, clip)
            add("w0.json", b"{}")
            add("w0.webm", short)
            add("p0.json", b"{}")
            add("p0.png", pattern)
            add("x0.json", json.dumps({"width": 160, "height": 80, "frames": 20}).encode())
            add("x0.mp4", bytes(bad))
        self.index = os.path.join(root, "i.alidx")
        run("index", "-o", self.index, self.shards)
        buckets = os.path.join(root, "buckets")
        with open(buckets, "w") as fh:
            fh.write(BUCKETS)
        self.manifest = os.path.join(root, "m.alm")
        run("plan", "--index", self.index, "--world", 1, "--mem-tokens", 4000, "--buckets", buckets,
            "-o", self.manifest)


def setUpModule():
    global TMP, C
    TMP = tempfile.mkdtemp(prefix="al_decode_", dir=os.environ.get("TEST_TMPDIR"))
    C = Corpus(TMP)
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


class DecodeTest(unittest.TestCase):
    def test_pixels_at_bucket_shape(self):
        ds = StreamDataset(C.index, C.manifest, rank=0, decode=True, on_error="skip", max_skip_fraction=1)
        self.assertEqual(ds.members, ["pixels"])
        seen = {}
        for b in ds:
            for key, t in zip(b.keys, b.tensors("pixels")):
                seen[key] = t
        self.assertEqual(sorted(seen), ["p0", "v0", "v1", "v2", "v3", "w0"])
        for k in ("v0", "v1", "v2", "v3"):  # 160x80 x 20 frames -> 128x64 x 17
            t = seen[k]
            self.assertEqual(tuple(t.shape), (17, 64, 128, 3))
            self.assertEqual(t.dtype, torch.uint8)
            got = [round((float(t[f].float().mean()) - 8) / 3) for f in range(17)]
            self.assertEqual(got, list(range(17)), k)
        t = seen["w0"]  # 144x72 x 12 frames -> 128x64 x 9
        self.assertEqual(tuple(t.shape), (9, 64, 128, 3))
        self.assertEqual([round((float(t[f].float().mean()) - 8) / 3) for f in range(9)], list(range(9)))
        # 192x64 (3:1) -> 16:9 128x64: s = max(128/192, 64/64) = 1, W' = 192, x0 = 32; the
        # rectangle [96, 144) lands on columns [64, 112).
        t = seen["p0"]
        self.assertEqual(tuple(t.shape), (1, 64, 128, 3))
        col = t[0, :, :, 0].float().mean(0)
        self.assertTrue(bool((col[:61] < 30).all()), col)
        self.assertTrue(bool((col[67:109] > 225).all()), col)
        self.assertTrue(bool((col[115:] < 30).all()), col)

    def test_corrupt_clip_located(self):
        ds = StreamDataset(C.index, C.manifest, rank=0, decode=True, on_error="skip", max_skip_fraction=1)
        reasons = [why for b in ds for _, why in b.skipped]
        self.assertEqual(len(reasons), 1, reasons)
        self.assertIn("s-0.tar: key 'x0' member 'x0.mp4' at byte", reasons[0])
        self.assertIn("frame", reasons[0])
        with self.assertRaises(Exception) as e:
            list(StreamDataset(C.index, C.manifest, rank=0, decode=True))
        self.assertIn("x0.mp4", str(e.exception))

    def test_with_other_members(self):
        ds = StreamDataset(C.index, C.manifest, rank=0, members=["json"], decode=True, on_error="skip",
                           max_skip_fraction=1)
        self.assertEqual(ds.members, ["json", "pixels"])
        n = 0
        for b in ds:
            for js, px in zip(b.tensors("json"), b.tensors("pixels")):
                self.assertEqual(px.dim(), 4)
                json.loads(bytes(js.tolist()).decode())
                n += 1
        self.assertEqual(n, 6)


if __name__ == "__main__":
    unittest.main()
