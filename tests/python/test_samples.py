"""A map-style Dataset of one's own driven by BatchSampler(with_info=True), through the public
API alone (adaptiveload.SampleIndex, crop_to_bucket, bucket_tokens): each position's key,
shard and members, the latent read with numpy from the shard at the member's offset, cut to
its planned bucket and patchified, give byte for byte what StreamDataset's packed() delivers
for the same plan, and as many tokens as the plan counted. Bad positions and buckets raise
errors naming them.

Run by tests/python/python_test.sh (Bazel sh_test) with ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and
PYTHONPATH set. The corpus is written here (tarfile, numpy).
"""

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

import numpy as np

try:
    import torch
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
BUCKETS = "frames 1 5 9\naspect 1:1 64x64\naspect 2:1 128x64\naspect 1:2 64x128\n"
# (width, height, frames) of the samples: latents larger than their buckets' grids, so the crop
# cuts rows, columns and frames.
SHAPES = [(80, 80, 9), (96, 80, 1), (144, 72, 9), (136, 64, 5), (64, 144, 9), (72, 72, 1), (160, 80, 13)]


def write_corpus(d):
    os.makedirs(d)
    rng = np.random.default_rng(5)
    for s in range(2):
        with tarfile.open(os.path.join(d, "shard-%06d.tar" % s), "w", format=tarfile.USTAR_FORMAT) as t:
            for i, (w, h, f) in enumerate(SHAPES):
                key = "%d-%03d" % (s, i)
                meta = json.dumps({"width": w, "height": h, "frames": f, "fps": 8}).encode()
                lat = rng.standard_normal((16, 1 + (f - 1) // 4, h // 8, w // 8)).astype(np.float16)
                buf = io.BytesIO()
                np.save(buf, lat)
                for ext, data in (("json", meta), ("latent.npy", buf.getvalue())):
                    ti = tarfile.TarInfo("%s.%s" % (key, ext))
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))


def run(*args):
    subprocess.run([BIN] + [str(a) for a in args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


class MyDataset(torch.utils.data.Dataset):
    """A team's own Dataset: reads each latent itself (numpy, from the shard file)."""

    def __init__(self, index):
        self.samples = adaptiveload.SampleIndex(index)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, item):
        position, info = item
        s = self.samples[position]
        m = s.members["latent.npy"]
        with open(s.shard, "rb") as f:
            f.seek(m.offset)
            lat = torch.from_numpy(np.load(io.BytesIO(f.read(m.size))))
        return s.key, adaptiveload.bucket_tokens(lat, info), info["tokens"]


class SampleIndexTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="al_samples_", dir=os.environ.get("TEST_TMPDIR"))
        cls.shards = os.path.join(cls.tmp, "shards")
        write_corpus(cls.shards)
        cls.index = os.path.join(cls.tmp, "i.alidx")
        cls.buckets = os.path.join(cls.tmp, "buckets.txt")
        with open(cls.buckets, "w") as f:
            f.write(BUCKETS)
        run("index", "-o", cls.index, cls.shards)
        cls.manifest = os.path.join(cls.tmp, "m.alm")
        run("plan", "--index", cls.index, "--world", 1, "--buckets", cls.buckets, "--mem-tokens", 256,
            "--micro-per-step", 2, "-o", cls.manifest)

    def test_a_position_gives_key_shard_and_members(self):
        samples = adaptiveload.SampleIndex(self.index)
        self.assertEqual(len(samples), 2 * len(SHAPES))
        s = samples[3]
        self.assertEqual((s.position, s.key, s.width, s.height, s.frames), (3, "0-003", 136, 64, 5))
        self.assertEqual(s.shard, os.path.join(self.shards, "shard-000000.tar"))
        self.assertEqual(list(s.members), ["json", "latent.npy"])
        lat = s.members["latent.npy"]
        self.assertEqual((lat.dtype, lat.shape, lat.lz4), ("float16", (16, 2, 8, 17), False))
        self.assertEqual((s.members["json"].dtype, s.members["json"].shape), (None, None))
        with tarfile.open(s.shard) as t:
            ti = t.getmember("0-003.latent.npy")
            self.assertEqual((lat.offset, lat.size), (ti.offset_data, ti.size))
        self.assertEqual(samples.key(len(SHAPES)), "1-000")

    def test_bad_positions_name_themselves(self):
        samples = adaptiveload.SampleIndex(self.index)
        with self.assertRaisesRegex(IndexError, "sample position 14 out of range .* has 14 samples"):
            samples[14]
        with self.assertRaisesRegex(TypeError, "SampleIndex position must be an integer, not '2'"):
            samples["2"]

    def test_own_dataset_delivers_what_the_stream_delivers(self):
        sampler = adaptiveload.BatchSampler(self.manifest, rank=0, world_size=1, with_info=True)
        loader = torch.utils.data.DataLoader(MyDataset(self.index), batch_sampler=sampler, num_workers=2,
                                             collate_fn=list)
        mine = list(loader)
        stream = list(adaptiveload.StreamDataset(self.index, self.manifest, rank=0, world_size=1,
                                                 members=["latent.npy"]))
        self.assertEqual(len(mine), len(stream))
        self.assertGreater(len(mine), 2)
        cut = 0
        for items, batch in zip(mine, stream):
            real = [it for it, pad in zip(items, batch.padded.tolist()) if not pad]
            self.assertEqual([k for k, _, _ in real], [k for k, p in zip(batch.keys, batch.padded.tolist()) if not p])
            for (_, tokens, planned), want in zip(real, batch.tensors("latent.npy")):
                self.assertEqual(tokens.shape[0], planned)
                ref = adaptiveload.latents.patchify(want)
                self.assertTrue(torch.equal(tokens.view(torch.int16), ref.view(torch.int16)))
            ours = torch.cat([t for _, t, _ in real])
            theirs = batch.packed("latent.npy")[: ours.shape[0]]
            self.assertTrue(torch.equal(ours.view(torch.int16), theirs.view(torch.int16)))
            cut += sum(t.shape[0] for _, t, _ in real)
        self.assertGreater(cut, 0)

    def test_crop_to_bucket_takes_a_shape_and_refuses_others(self):
        lat = torch.arange(16 * 3 * 10 * 12, dtype=torch.float32).view(16, 3, 10, 12)
        out = adaptiveload.crop_to_bucket(lat, (64, 64, 9))  # grid (3, 8, 8): rows 1..9, columns 2..10
        self.assertTrue(torch.equal(out, lat[:, :3, 1:9, 2:10]))
        self.assertEqual(tuple(adaptiveload.bucket_tokens(lat, (64, 64, 5)).shape), (2 * 4 * 4, 64))
        with self.assertRaisesRegex(TypeError, "a with_info dict holds 'bucket_shape'"):
            adaptiveload.crop_to_bucket(lat, {"tokens": 3})
        with self.assertRaisesRegex(ValueError, "bucket width must be"):
            adaptiveload.crop_to_bucket(lat, (0, 64, 9))
        with self.assertRaisesRegex(ValueError, "smaller than its bucket's grid"):
            adaptiveload.crop_to_bucket(lat, (128, 64, 9))


if __name__ == "__main__":
    unittest.main(verbosity=2)
