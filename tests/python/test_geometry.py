"""Typed latents under a plan of non-default latent geometry (`plan --geometry`): the stream
crops each latent to its bucket's grid under the manifest's geometry, and the delivered rows are
the tokens that geometry counts. The corpus is written with Python's tarfile and numpy, the
expected crops are computed here from the bucket shapes and the geometry (independent of the C
code), and both the CLI (`stream --jsonl`, CRC-32s) and StreamDataset are checked.

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
import zlib

try:
    import numpy as np
    import torch
except ImportError as e:  # the sh_test checks first; this keeps direct runs honest too
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

from adaptiveload import StreamDataset

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
BUCKETS = "frames 1 9 17\naspect 1:1 64x64\naspect 3:2 96x64\naspect 2:1 128x64\n"
# VAE stride 2 in time and 16 in space, patch 1x1x1: every term differs from Wan 2.1's 4,8,1,2,2.
GEOMETRY = (2, 16, 1, 1, 1)


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def grid_of(width, height, frames, geometry=GEOMETRY):
    """(T_b, h_b, w_b) of a bucket under a geometry (planner/README.md section 1)."""
    st, ss = geometry[0], geometry[1]
    return 1 + (frames - 1) // st, height // ss, width // ss


def tokens_of(grid, geometry=GEOMETRY):
    pt, ph, pw = geometry[2:]
    return -(-grid[0] // pt) * (grid[1] // ph) * (grid[2] // pw)


class GeometryCorpus:
    """KEY.json and KEY.latent.npy (float16 (4, T, H/16, W/16): the latent of the plan's
    geometry, larger than the buckets' grids), indexed with --vae-stride 2,16 and planned with
    --geometry 2,16,1,1,1."""

    def __init__(self, root, n=24):
        self.root = root
        os.makedirs(os.path.join(root, "shards"))
        rng = np.random.default_rng(11)
        self.lat = {}
        with tarfile.open(os.path.join(root, "shards", "g-0.tar"), "w") as tar:
            for i in range(n):
                key = "g%04d" % i
                w, h = (96, 128, 160)[i % 3], (64, 80)[i % 2]
                f = (1, 9, 17, 21)[i % 4]
                shape = (4, 1 + (f - 1) // 2, h // 16, w // 16)
                lat = rng.standard_normal(shape).astype(np.float16)
                self.lat[key] = lat
                buf = io.BytesIO()
                np.save(buf, lat)
                for name, data in ((key + ".json", json.dumps({"width": w, "height": h, "frames": f}).encode()),
                                   (key + ".latent.npy", buf.getvalue())):
                    ti = tarfile.TarInfo(name)
                    ti.size = len(data)
                    tar.addfile(ti, io.BytesIO(data))
        self.index = os.path.join(root, "g.alidx")
        run("index", "--vae-stride", "2,16", "-o", self.index, os.path.join(root, "shards"))
        buckets = os.path.join(root, "buckets.txt")
        with open(buckets, "w") as fh:
            fh.write(BUCKETS)
        self.manifest = os.path.join(root, "g.alm")
        run("plan", "--index", self.index, "--world", 1, "--seed", 2, "--mem-tokens", 400, "--buckets", buckets,
            "--geometry", ",".join(map(str, GEOMETRY)), "-o", self.manifest)

    def crop(self, key, grid):
        """Channels whole, frames [0, T_b), rows and columns centred."""
        lat = self.lat[key]
        tb, hb, wb = grid
        h, w = lat.shape[-2:]
        y0, x0 = (h - hb) // 2, (w - wb) // 2
        return lat[:, :tb, y0:y0 + hb, x0:x0 + wb]


def setUpModule():
    global TMP, C
    TMP = tempfile.mkdtemp(prefix="al_geom_", dir=os.environ.get("TEST_TMPDIR"))
    C = GeometryCorpus(TMP)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


class GeometryTest(unittest.TestCase):
    def test_stream_dataset_crops_to_the_plans_grid(self):
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=1, members=["latent.npy"], threads=2)
        seen = 0
        for b in ds:
            w, h, f = ds.bucket_shape(b.bucket)[:3]
            grid = grid_of(w, h, f)
            self.assertEqual(tuple(b.grid), grid, "bucket %dx%d x %d" % (w, h, f))
            self.assertTrue(b.members["latent.npy"].cropped)
            for i, (key, lat) in enumerate(zip(b.keys, b.tensors("latent.npy"))):
                want = C.crop(key, grid)
                self.assertEqual(tuple(lat.shape), want.shape, key)
                self.assertTrue(np.array_equal(lat.view(torch.int16).numpy(), want.view(np.int16)), key)
                self.assertEqual(int(b.cu_seqlens[i + 1] - b.cu_seqlens[i]), tokens_of(grid), key)
                seen += 1
        self.assertEqual(seen, len(C.lat), "every sample streamed")

    def test_cli_stream_jsonl_crcs_are_the_crops(self):
        out = run("stream", "--index", C.index, "--manifest", C.manifest, "--rank", 0, "--members", "latent.npy",
                  "--jsonl")
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=1, members=["latent.npy"])
        batches = list(ds)
        rows = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(rows), len(batches))
        seen = 0
        for r, b in zip(rows, batches):
            self.assertEqual(r["keys"], b.keys)
            grid = grid_of(*ds.bucket_shape(b.bucket)[:3])
            m = r["members"]["latent.npy"]
            for key, shape, crc in zip(r["keys"], m["shapes"], m["crc32"]):
                want = np.ascontiguousarray(C.crop(key, grid))
                self.assertEqual(tuple(shape), want.shape, key)
                self.assertEqual(crc, "%08x" % zlib.crc32(want.tobytes()), key)
                seen += 1
        self.assertEqual(seen, len(C.lat))


if __name__ == "__main__":
    unittest.main(verbosity=2)
