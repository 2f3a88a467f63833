"""Hostile Python arguments tests/attack/run.py found handled badly: each raises a clean
ValueError / TypeError naming the argument (or the state's key) instead of an OverflowError,
AttributeError, KeyError or torch RuntimeError, or instead of being accepted. Each found defect
is pinned here with its exact refusal; the generated cases and their classification are the
suite's own (tests/attack, //tests/attack:attack_short_test), and neither repeats the other.

Run by tests/python/python_test.sh with ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
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


class _Fspath:
    """An os.PathLike whose path is any str or bytes."""

    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return self.path


class NulAndMisplacedArgumentsTest(unittest.TestCase):
    """C reads a string only up to its first NUL: 'L.idx\\0junk' would open L.idx. Every path and
    string the package hands to C refuses a NUL, naming the argument; so do misplaced objects."""

    def refused(self, name, fn, exc=(ValueError, TypeError)):
        with self.assertRaises(exc) as cm:
            fn()
        self.assertIn(name, str(cm.exception))
        return cm.exception

    def test_a_nul_in_a_path_or_string_is_refused_naming_the_argument(self):
        out = os.path.join(TMP, "nul.alm")
        cases = [
            ("index", lambda: StreamDataset(INDEX + "\0junk", MANIFEST, rank=0, world_size=2)),
            ("index", lambda: StreamDataset(os.fsencode(INDEX) + b"\0junk", MANIFEST, rank=0, world_size=2)),
            ("index", lambda: StreamDataset(_Fspath(INDEX + "\0junk"), MANIFEST, rank=0, world_size=2)),
            ("manifest", lambda: StreamDataset(INDEX, MANIFEST + "\0junk", rank=0, world_size=2)),
            ("root", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, root={TMP + "\0x": TMP})),
            ("root", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, root=[(TMP, TMP + "\0x")])),
            ("root", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, root="%s=%s\0x" % (TMP, TMP))),
            ("cache_dir", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2,
                                                cache_dir=os.path.join(TMP, "c\0x"))),
            ("ext", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, ext="latent\0x")),
            ("members", lambda: StreamDataset(INDEX, MANIFEST, rank=0, world_size=2, members=["latent", "js\0on"])),
            ("index", lambda: IndexDataset(INDEX + "\0junk")),
            ("root", lambda: IndexDataset(INDEX, root={TMP: TMP + "\0x"})),
            ("ext", lambda: IndexDataset(INDEX, ext="latent\0x")),
            ("members", lambda: IndexDataset(INDEX, members=["latent\0x"])),
            ("manifest", lambda: BatchSampler(MANIFEST + "\0junk", rank=0, world_size=2)),
            ("index", lambda: BatchSampler(MANIFEST, rank=0, world_size=2, index=INDEX + "\0x", members=["latent"])),
            ("members", lambda: BatchSampler(MANIFEST, rank=0, world_size=2, index=INDEX, members=["lat\0ent"])),
            ("index", lambda: adaptiveload.plan(INDEX + "\0junk", world=1, out=out)),
            ("out", lambda: adaptiveload.plan(INDEX, world=1, out=out + "\0junk")),
            ("cost", lambda: adaptiveload.plan(INDEX, world=1, out=out, cost=INDEX + "\0junk")),
            ("buckets", lambda: adaptiveload.plan(INDEX, world=1, out=out, buckets=INDEX + "\0junk")),
            ("require_members[1]", lambda: adaptiveload.plan(INDEX, world=1, out=out, require_members=["latent",
                                                                                                      "x\0y"])),
            ("index", lambda: Planner(INDEX + "\0junk", world=1, out_dir=TMP)),
            ("cost", lambda: Planner(INDEX, world=1, cost=INDEX + "\0junk", out_dir=TMP)),
            ("out_dir", lambda: Planner(INDEX, world=1, out_dir=TMP + "\0junk")),
            ("source", lambda: Planner.resume(MANIFEST + "\0junk", at_step=1, world=1)),
            ("manifest", lambda: adaptiveload.Manifest(MANIFEST + "\0junk")),
            ("shards", lambda: adaptiveload.build_index([os.path.join(TMP, "shards") + "\0x"], out)),
            ("out", lambda: adaptiveload.build_index(os.path.join(TMP, "shards"), out + "\0x")),
            ("s3_endpoint", lambda: adaptiveload.build_index(os.path.join(TMP, "shards"), out,
                                                             s3_endpoint="http://h\0x")),
        ]
        for name, fn in cases:
            e = self.refused(name, fn, ValueError)
            self.assertIn("NUL", str(e), name)
        self.assertFalse(os.path.exists(out), "a plan was written to the path cut at the NUL")
        # The same arguments without the NUL work.
        self.assertGreater(len(StreamDataset(_Fspath(INDEX), MANIFEST, rank=0, world_size=2)), 0)

    def test_a_misplaced_index_or_manifest_names_the_argument(self):
        self.refused("index", lambda: StreamDataset(123, MANIFEST, rank=0, world_size=2), TypeError)
        self.refused("index", lambda: IndexDataset(123), TypeError)
        for bad in (None, 5, {"path": MANIFEST}):
            self.refused("manifest", lambda: StreamDataset(INDEX, bad, rank=0, world_size=2), TypeError)
            self.refused("manifest", lambda: BatchSampler(bad, rank=0, world_size=2), TypeError)

    def test_a_loaded_manifest_stands_for_its_file(self):
        m = adaptiveload.plan(INDEX, world=2, mem_tokens=20000, out=os.path.join(TMP, "loaded.alm"))
        keys = lambda ds: [k for b in ds for k in b.keys]  # noqa: E731
        self.assertEqual(keys(StreamDataset(INDEX, m, rank=1, world_size=2)),
                         keys(StreamDataset(INDEX, m.path, rank=1, world_size=2)))
        self.assertEqual([list(b) for b in BatchSampler(m, rank=1, world_size=2)],
                         [list(b) for b in BatchSampler(m.path, rank=1, world_size=2)])

    def test_index_dataset_position_info_is_checked(self):
        ds = IndexDataset(INDEX)
        e = self.refused("info", lambda: ds[(0, {})], ValueError)
        for key in ("bucket_shape", "tokens", "padded"):
            self.assertIn(key, str(e))
        self.refused("info", lambda: ds[(0, 5)], TypeError)
        self.refused("position", lambda: ds[(0,)], TypeError)
        self.refused("position", lambda: ds[(0, {}, 1)], TypeError)
        good = next(iter(BatchSampler(MANIFEST, rank=0, world_size=2, with_info=True)))[0]
        for bad in ((1, 2), "abc", None, (0, 64, 1), (64, 64, 1.5)):
            self.refused("bucket_shape", lambda: ds[(good[0], dict(good[1], bucket_shape=bad))])
        self.refused("tokens", lambda: ds[(good[0], dict(good[1], tokens=-1))])
        item = ds[good]
        self.assertEqual(item["tokens"], good[1]["tokens"])


if __name__ == "__main__":
    unittest.main()
