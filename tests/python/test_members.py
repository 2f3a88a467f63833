"""Member rules from Python: the latent rule mirrored from the C library (one table of names),
the default member (the index's typed latent), members checked when StreamDataset, BatchSampler
and IndexDataset open, the skip budget (max_skip_fraction), planning with require_members, a
KEY.latent_hr.npy latent cropped as the index planned it, and a header rewritten in a --root
copy refused as a changed shard.

Run by tests/python/python_test.sh (Bazel sh_test) with ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and
PYTHONPATH set. The corpora are .npy members written here (pure Python: tarfile, struct).
"""

import ctypes
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import unittest

try:
    import torch  # noqa: F401 (the package needs it)
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, IndexDataset, Planner, StreamDataset, collate_packed
from adaptiveload import _lib
from adaptiveload import members as M

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
BUCKETS = "frames 1 9 17\naspect 1:1 64x64\naspect 3:2 96x64\naspect 2:1 96x48 128x64\n"
LATENT_NAMES = {  # name -> is it a latent (loader/al_members.h; tests/loader/members_test.cc)
    "latent": True, "latent.npy": True, "latent_hr.npy": True, "latent.safetensors": True,
    "latent.npy.lz4": True, "latents.npy": True, "latent2.npy": True,
    "json": False, "t5.npy": False, "txt": False, "Latent.npy": False, "hr.latent.npy": False,
    "lat.npy": False, "": False,
}


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stderr


def npy(descr, shape):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d, " % s for s in shape))
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    n = 1
    for s in shape:
        n *= s
    data = bytes((i * 7 + 3) % 251 for i in range(n * (2 if descr == "<f2" else 4)))
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1") + data


class Corpus:
    """24 samples over 2 shards: KEY.json, KEY.<latent> (16, T, H/8, W/8) float16 and KEY.t5.npy
    (left out of samples i % lack == 1), indexed and planned for one rank."""

    def __init__(self, root, latent="latent.npy", lack=0):
        self.root, self.shards = root, os.path.join(root, "shards")
        os.makedirs(self.shards)
        tars = [tarfile.open(os.path.join(self.shards, "s-%d.tar" % k), "w", format=tarfile.USTAR_FORMAT)
                for k in range(2)]
        for i in range(24):
            w, h, f = 96 + 8 * (i % 5), 64 + 8 * (i % 4), 1 if i % 2 == 0 else 9
            members = [("json", json.dumps({"width": w, "height": h, "frames": f}).encode()),
                       (latent, npy("<f2", (16, 1 + (f - 1) // 4, h // 8, w // 8)))]
            if not (lack and i % lack == 1):
                members.append(("t5.npy", npy("<f4", (3 + i % 4, 8))))
            for ext, b in members:
                ti = tarfile.TarInfo("k%04d.%s" % (i, ext))
                ti.size, ti.mtime = len(b), 1700000000
                tars[i % 2].addfile(ti, io.BytesIO(b))
        for t in tars:
            t.close()
        self.index = os.path.join(root, "i.alidx")
        run("index", "-o", self.index, self.shards)
        self.buckets = os.path.join(root, "buckets")
        with open(self.buckets, "w") as fh:
            fh.write(BUCKETS)
        self.manifest = os.path.join(root, "m.alm")
        run("plan", "--index", self.index, "--world", 1, "--mem-tokens", 400, "--buckets", self.buckets,
            "-o", self.manifest)


def setUpModule():
    global TMP, A, HR
    TMP = tempfile.mkdtemp(prefix="al_members_", dir=os.environ.get("TEST_TMPDIR"))
    A = Corpus(os.path.join(TMP, "a"), lack=12)  # k0001 and k0013 lack t5.npy
    HR = Corpus(os.path.join(TMP, "hr"), latent="latent_hr.npy")
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def check_cropped(test, batches, name):
    n = 0
    for b in batches:
        test.assertTrue(b.members[name].cropped, name)
        test.assertEqual(b.packed(name).shape[0], int(b.cu_seqlens[-1]))  # packed() checks it too
        n += len(b.keys)
    return n


class LatentRuleTest(unittest.TestCase):
    def test_the_mirror_agrees_with_the_c_rule_on_a_table_of_names(self):
        lib = _lib.lib()
        for name, want in LATENT_NAMES.items():
            self.assertEqual(bool(lib.al_member_is_latent(name.encode())), want, name)
            self.assertEqual(M.is_latent(name), want, name)


class DefaultMemberTest(unittest.TestCase):
    def test_stream_without_members_delivers_the_typed_latent_cropped(self):
        batches = list(StreamDataset(A.index, A.manifest, rank=0))
        self.assertEqual(list(batches[0].members), ["latent.npy"])
        self.assertEqual(check_cropped(self, batches, "latent.npy"), 24)

    def test_index_dataset_default_ext(self):
        self.assertEqual(IndexDataset(A.index).ext, "latent.npy")
        self.assertEqual(IndexDataset(HR.index).ext, "latent_hr.npy")
        self.assertEqual(bytes(IndexDataset(A.index)[0]["data"][:6].numpy()), b"\x93NUMPY")

    def test_planner_snippet_of_the_readme(self):
        planner = Planner(A.index, world=1, seed=0, buckets=A.buckets, mem_tokens=400)
        ds = StreamDataset(A.index, planner)
        ds.set_epoch(0)
        self.assertEqual(check_cropped(self, list(ds), "latent.npy"), 24)


class OpenCheckTest(unittest.TestCase):
    def test_a_misspelt_member_raises_at_open_whatever_on_error(self):
        for mode in ("fail", "skip"):
            with self.assertRaises(adaptiveload.Error) as cm:
                list(StreamDataset(A.index, A.manifest, rank=0, members=["latent.npy", "clip.npy"], on_error=mode))
            self.assertIn("member 'clip.npy' is in no sample of the index", cm.exception.detail)
            self.assertIn("the index has: json, latent.npy, t5.npy", cm.exception.detail)
        with self.assertRaises(adaptiveload.Error) as cm:
            IndexDataset(A.index, members=["latent.npy", "clip.npy"])
        self.assertIn("clip.npy", cm.exception.detail)
        with self.assertRaises(adaptiveload.Error):
            BatchSampler(A.manifest, index=A.index, members=["clip.npy"])

    def test_samples_lacking_a_member_fail_at_open_or_count_against_the_budget(self):
        both = ["latent.npy", "t5.npy"]
        with self.assertRaises(adaptiveload.Error) as cm:
            list(StreamDataset(A.index, A.manifest, rank=0, members=both))
        self.assertIn("2 of 24 samples lack a requested member", cm.exception.detail)
        self.assertIn("key 'k0001'", cm.exception.detail)
        with self.assertRaises(adaptiveload.Error) as cm:
            BatchSampler(A.manifest, index=A.index, members=both)
        self.assertIn("key 'k0013'", cm.exception.detail)
        self.assertEqual(len(list(BatchSampler(A.manifest, index=A.index, members=["latent.npy"]))),
                         len(list(BatchSampler(A.manifest))))
        with self.assertRaises(adaptiveload.Error) as cm:
            list(StreamDataset(A.index, A.manifest, rank=0, members=both, on_error="skip"))
        self.assertIn("more than max_skip_fraction 0.01 allows", cm.exception.detail)
        batches = list(StreamDataset(A.index, A.manifest, rank=0, members=both, on_error="skip",
                                     max_skip_fraction=0.1))
        self.assertEqual(sorted(k for b in batches for k, _ in b.skipped), ["k0001", "k0013"])
        self.assertEqual(sum(len(b.keys) for b in batches), 22)
        for bad in (1.5, -0.1, float("nan")):
            with self.assertRaises(ValueError):
                StreamDataset(A.index, A.manifest, max_skip_fraction=bad)

    def test_everything_skipped_fails(self):
        with self.assertRaises(adaptiveload.Error) as cm:
            list(StreamDataset(A.index, A.manifest, rank=0, on_error="skip", max_skip_fraction=1,
                               max_sample_bytes=16))
        self.assertIn("delivered no sample", cm.exception.detail)


class RequireMembersTest(unittest.TestCase):
    def test_plan_leaves_the_lacking_out_and_the_stream_needs_no_skip(self):
        both = ["latent.npy", "t5.npy"]
        m = adaptiveload.plan(A.index, world=1, buckets=A.buckets, mem_tokens=400, require_members=both)
        self.assertEqual(m.info["samples"], 22)
        batches = list(StreamDataset(A.index, m.path, rank=0, members=both))
        self.assertEqual(sum(len(b.keys) for b in batches), 22)
        self.assertFalse(any(b.skipped for b in batches))
        keys = {k for b in batches for k in b.keys}
        self.assertNotIn("k0001", keys)
        planner = Planner(A.index, world=1, buckets=A.buckets, mem_tokens=400, require_members=both)
        self.assertEqual(len(list(BatchSampler(planner, index=A.index, members=both))), len(batches))
        with self.assertRaises(adaptiveload.Error) as cm:
            adaptiveload.plan(A.index, world=1, require_members=["t5.np"])
        self.assertIn("member 't5.np' is in no sample", cm.exception.detail)


class LatentHrTest(unittest.TestCase):
    def test_the_index_latent_is_cropped_by_stream_and_index_dataset(self):
        batches = list(StreamDataset(HR.index, HR.manifest, rank=0, members=["latent_hr.npy", "t5.npy"]))
        self.assertEqual(check_cropped(self, batches, "latent_hr.npy"), 24)
        self.assertFalse(batches[0].members["t5.npy"].cropped)
        ds = IndexDataset(HR.index, members=["latent_hr.npy", "t5.npy"])
        s = BatchSampler(HR.manifest, with_info=True)
        for want, pos in zip(batches, s):
            got = collate_packed([ds[p] for p in pos])
            self.assertEqual(got["cu_seqlens"].tolist(), want.cu_seqlens.tolist())
            m = got["members"]["latent_hr.npy"]
            self.assertTrue(m["cropped"])
            self.assertEqual([list(x) for x in m["shapes"]],
                             [list(t.shape) for t in want.tensors("latent_hr.npy")])
            self.assertTrue(torch.equal(got["data"], want.data[:got["data"].numel()]))


class HeaderTest(unittest.TestCase):
    def test_a_header_rewritten_in_a_root_copy_is_a_changed_shard(self):
        copy = os.path.join(TMP, "copy")
        shutil.copytree(A.shards, copy)
        p = os.path.join(copy, "s-1.tar")
        with open(p, "rb") as fh:
            b = bytearray(fh.read())
        old, new = b"'shape': (16, 3, 9, 13, ), }", b"'shape': (8, 6, 9, 13, ), } "  # k0001
        at = b.find(old)
        self.assertGreater(at, 0)
        b[at:at + len(old)] = new
        with open(p, "wb") as fh:
            fh.write(bytes(b))
        with self.assertRaises(adaptiveload.Error) as cm:
            list(StreamDataset(A.index, A.manifest, rank=0, root={A.shards: copy}))
        self.assertIn("shard changed since indexing: key 'k0001'", cm.exception.detail)
        self.assertIn("its header says float16 (8, 6, 9, 13), the index recorded float16 (16, 3, 9, 13)",
                      cm.exception.detail)


if __name__ == "__main__":
    unittest.main()
