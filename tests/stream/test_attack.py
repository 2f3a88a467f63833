"""Hostile Python arguments dev/attack/run.py found handled badly: each raises a clean
ValueError / TypeError naming the argument (or the state's key) instead of an OverflowError,
AttributeError, KeyError or torch RuntimeError, or instead of being accepted.

Run by tests/stream/python_test.sh with ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, IndexDataset, Planner, StreamDataset, checkpoint

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))


def setUpModule():
    global TMP, INDEX, MANIFEST
    TMP = tempfile.mkdtemp(prefix="al_attack_", dir=os.environ.get("TEST_TMPDIR"))
    run("synth", "--out", os.path.join(TMP, "shards"), "--samples", 24, "--shards", 2, "--seed", 3)
    INDEX = os.path.join(TMP, "i.alidx")
    run("index", "-o", INDEX, os.path.join(TMP, "shards"))
    MANIFEST = os.path.join(TMP, "p.alm")
    run("plan", "--index", INDEX, "--world", 2, "--mem-tokens", 20000, "-o", MANIFEST)
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


class HostileArgumentsTest(unittest.TestCase):
    def refused(self, name, fn, exc=(ValueError, TypeError)):
        with self.assertRaises(exc) as cm:
            fn()
        self.assertIn(name, str(cm.exception))

    def test_batch_sampler_rank_and_world(self):
        for bad in (float("inf"), -1, -(2 ** 63), 1.5):
            self.refused("rank", lambda: list(BatchSampler(MANIFEST, rank=bad, world_size=2)))
        for bad in (-1, float("nan"), 2 ** 64):
            self.refused("world_size", lambda: list(BatchSampler(MANIFEST, rank=0, world_size=bad)))
        self.assertTrue(list(BatchSampler(MANIFEST, rank=1, world_size=2)))

    def test_index_dataset_strides(self):
        for name in ("vae_stride_t", "vae_stride_s"):
            for bad in (float("inf"), 1.5, 2 ** 64, 0, None):
                self.refused(name, lambda: IndexDataset(INDEX, **{name: bad}))
        self.assertEqual(IndexDataset(INDEX, vae_stride_t=4, vae_stride_s=8).vae_stride_s, 8)

    def test_stream_dataset_ext_device_keep(self):
        for bad in ({"a": "b"}, 5, ["latent"]):
            self.refused("ext", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, ext=bad))
        for bad in (-1, "clip.npy"):
            self.refused("device", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, device=bad))
        for name in ("max_member_bytes", "max_sample_bytes", "max_skip_fraction"):
            for bad in ([], {}):
                self.refused(name, lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, **{name: bad}))
        for bad in (1.5, -1, "2"):
            self.refused("keep", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, keep=bad))
        b = next(iter(StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, keep=2)))
        self.assertGreater(b.tokens, 0)

    def test_empty_containers_are_not_defaults(self):
        out = os.path.join(TMP, "x.alm")
        for name in ("micro_per_step", "step_tokens", "mem_tokens", "window", "start_step"):
            self.refused(name, lambda: adaptiveload.plan(INDEX, world=1, out=out, **{name: {}}))
            self.refused(name, lambda: adaptiveload.plan(INDEX, world=1, out=out, **{name: []}))
        adaptiveload.plan(INDEX, world=1, out=out, micro_per_step=None, step_tokens=None)  # None: the default
        base = Planner(INDEX, world=2, mem_tokens=20000, out_dir=TMP)
        for name in ("step_tokens", "micro_per_step"):
            self.refused(name, lambda: Planner.resume(base, at_step=1, world=1, epoch=0, **{name: []}))
        self.refused("epoch", lambda: Planner.resume(base, at_step=1, world=1, epoch=[]))

    def test_planner_state_and_checkpoint(self):
        pl = Planner(INDEX, world=2, mem_tokens=20000, out_dir=TMP)
        st = pl.state_dict()
        for key in ("cost", "index", "options"):
            s = dict(st)
            del s[key]
            self.refused(key, lambda: Planner.from_state(s, out_dir=TMP))
        self.refused("options", lambda: Planner.from_state(dict(st, options=4), out_dir=TMP))
        for bad in (-1, "4", b"1"):
            self.refused("Planner state", lambda: Planner.from_state(bad, out_dir=TMP))
        ck = checkpoint.save_checkpoint(planner=pl, step=1, epoch=0)
        self.refused("world", lambda: checkpoint.resume(ck, world=float("inf"), out_dir=TMP))
        self.refused("step", lambda: checkpoint.resume(dict(ck, step=1.5), world=2, out_dir=TMP))
        self.refused("epoch", lambda: checkpoint.resume(dict(ck, epoch=None), world=2, out_dir=TMP))
        self.refused("Planner state", lambda: checkpoint.resume(dict(ck, planner=-1), world=2, out_dir=TMP))
        self.assertEqual(checkpoint.resume(ck, world=2, out_dir=TMP).step, 1)

    def test_wrong_types_name_their_argument(self):
        out = os.path.join(TMP, "y.alm")
        for name, bad in (("policy", {"a": "b"}), ("last_step", {}), ("geometry", 2 ** 21), ("geometry", "4,8,1,2,2"),
                          ("comp_ms", {}), ("comp_ms", [])):
            self.refused(name, lambda: adaptiveload.plan(INDEX, world=1, out=out, **{name: bad}))
        self.refused("world", lambda: Planner(INDEX, world={}, out_dir=TMP))
        self.refused("seed", lambda: Planner(INDEX, world=1, seed=None, out_dir=TMP))
        self.refused("epoch", lambda: Planner(INDEX, world=1, out_dir=TMP).path(float("nan")))
        self.refused("epoch", lambda: BatchSampler(MANIFEST, rank=0, world_size=2, epoch=float("nan")))
        for bad in (2 ** 63, float("nan")):
            self.refused("members", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, members=bad))
            self.refused("members", lambda: IndexDataset(INDEX, members=bad))
        for bad in (2 ** 32, (0, 0, 0), True):
            self.refused("root", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, root=bad))
        self.refused("on_error", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, on_error=["fail"]))
        self.refused("state", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, state=1.5))
        for bad in ([], {}):
            self.refused("ext", lambda: IndexDataset(INDEX, ext=bad))
        for bad in (None, b"1", 1.5):
            self.refused("position", lambda: IndexDataset(INDEX)[bad])
        self.assertEqual(IndexDataset(INDEX)[0]["index"], 0)
        ds = StreamDataset(INDEX, MANIFEST, rank=0, world_size=2)
        st = dict(next(iter(ds)).resume_state)
        for bad in (2.0, True, "2"):
            self.refused("version", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2).load_state_dict(
                dict(st, version=bad)))
            self.refused("version", lambda: BatchSampler(MANIFEST, rank=0, world_size=2).load_state_dict(
                dict(BatchSampler(MANIFEST, rank=0, world_size=2).state_dict(), version=bad)))
        for name, bad in (("comp_ms", b"1"), ("require_members", 2 ** 32), ("buckets", float("nan"))):
            self.refused(name, lambda: adaptiveload.plan(INDEX, world=1, out=out, **{name: bad}))
        self.refused("index", lambda: Planner({}, world=1, out_dir=TMP))
        self.refused("cost", lambda: Planner(INDEX, world=1, cost=5, out_dir=TMP))
        self.refused("index", lambda: BatchSampler(MANIFEST, rank=0, world_size=2, index=1.5))
        self.refused("members", lambda: BatchSampler(MANIFEST, rank=0, world_size=2, index=INDEX, members=10 ** 30))
        self.assertEqual(len(StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, root={"/nowhere": "/x"}).root), 1)


if __name__ == "__main__":
    unittest.main()
