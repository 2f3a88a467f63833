"""Sequence-parallel fields and token shards from Python, over a corpus of typed latents
(float16 (4, T, H/8, W/8) .npy, larger than the buckets' grids), a variable-length t5.npy and a
txt per sample, written with tarfile and numpy, indexed and planned (2 ranks) with the CLI:
PackedBatch's sp_degree / sp_rank / sp_ranks / sp_token_range; StreamDataset(sp_shard=True)
delivering the latent patchified (the shard's packed() equals the whole batch's packed(), byte
for byte, at degree 1), token_first / sample_tokens / token_positions() against numpy's
patch order, text members whole; BatchSampler infos and collate_packed carrying the group;
sp_shard validated; an untyped latent refused; resume with sp_shard. And a plan with
`--sp-degrees 1,2` over 2 ranks: both ranks of a group get the group's micro-batch (StreamDataset
and BatchSampler + IndexDataset + collate_packed), their shards' packed() concatenate to the
whole packed() and their token positions continue, and resuming both from their own states gives
the same next group micro-batch. stream_sp_test checks degrees up to 8 in C.

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
    import numpy as np
    import torch
except ImportError as e:  # the sh_test checks first; this keeps direct runs honest too
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
import adaptiveload.sp
from adaptiveload import BatchSampler, IndexDataset, StreamDataset, collate_packed

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
BUCKETS = "frames 1 9 17\naspect 1:1 64x64\naspect 3:2 96x64\naspect 2:1 128x64\n"
MEMBERS = ["latent.npy", "t5.npy", "txt"]


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def patchify_np(lat):
    """(C, T, H, W) -> (T * H/2 * W/2, C * 4): tokens (t, y, x), features (c, dt, dy, dx), patch 1x2x2."""
    c, t, h, w = lat.shape
    x = lat.reshape(c, t, 1, h // 2, 2, w // 2, 2)
    return x.transpose(1, 3, 5, 0, 2, 4, 6).reshape(-1, c * 4)


class Corpus:
    """`lack`: the sample without a t5.npy (None: every sample has one)."""

    def __init__(self, root, n=30, lack=None):
        os.makedirs(os.path.join(root, "shards"))
        rng = np.random.default_rng(5)
        self.lat, self.t5, self.txt = {}, {}, {}
        with tarfile.open(os.path.join(root, "shards", "s-0.tar"), "w") as tar:
            for i in range(n):
                key = "s%04d" % i
                w, h = (96, 104, 112)[i % 3], (64, 72)[i % 2]
                f = (1, 9, 17)[i % 3]
                lat = rng.standard_normal((4, 1 + (f - 1) // 4, h // 8, w // 8)).astype(np.float16)
                t5 = rng.standard_normal((3 + i % 5, 8)).astype(np.float32)
                self.lat[key], self.t5[key], self.txt[key] = lat, t5, ("caption %d" % i).encode()
                members = [(key + ".json", json.dumps({"width": w, "height": h, "frames": f}).encode())]
                for ext, arr in (("latent.npy", lat), ("t5.npy", t5)):
                    if ext == "t5.npy" and i == lack:
                        continue
                    buf = io.BytesIO()
                    np.save(buf, arr)
                    members.append((key + "." + ext, buf.getvalue()))
                members.append((key + ".txt", self.txt[key]))
                for name, data in members:
                    ti = tarfile.TarInfo(name)
                    ti.size = len(data)
                    tar.addfile(ti, io.BytesIO(data))
        self.index = os.path.join(root, "s.alidx")
        run("index", "-o", self.index, os.path.join(root, "shards"))
        buckets = os.path.join(root, "buckets.txt")
        with open(buckets, "w") as fh:
            fh.write(BUCKETS)
        self.manifest = os.path.join(root, "s.alm")
        run("plan", "--index", self.index, "--world", 2, "--seed", 3, "--mem-tokens", 400, "--buckets", buckets,
            "-o", self.manifest)
        # Degrees 1 and 2 under M_mem 60: buckets of more than 60 tokens run on both ranks.
        self.sp_manifest = os.path.join(root, "sp.alm")
        run("plan", "--index", self.index, "--world", 2, "--seed", 3, "--mem-tokens", 60, "--buckets", buckets,
            "--sp-degrees", "1,2", "-o", self.sp_manifest)

    def crop(self, key, grid):
        lat = self.lat[key]
        tb, hb, wb = grid
        h, w = lat.shape[-2:]
        y0, x0 = (h - hb) // 2, (w - wb) // 2
        return lat[:, :tb, y0:y0 + hb, x0:x0 + wb]


def setUpModule():
    global TMP, C
    TMP = tempfile.mkdtemp(prefix="al_sp_", dir=os.environ.get("TEST_TMPDIR"))
    C = Corpus(TMP)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def stream(rank, **kw):
    return StreamDataset(C.index, C.manifest, rank=rank, world_size=2, members=MEMBERS, threads=2, **kw)


class SpTest(unittest.TestCase):
    def test_whole_batches_name_their_group(self):
        for rank in (0, 1):
            n = 0
            for b in stream(rank):
                self.assertEqual((b.sp_degree, b.sp_rank, b.sp_ranks), (1, 0, (rank,)))
                self.assertFalse(b.sp_sharded)
                self.assertEqual(b.sp_token_range, (0, b.tokens))
                self.assertIsNone(b.patch)
                self.assertEqual(b.token_first.tolist(), [0] * len(b))
                self.assertEqual(b.sample_tokens.tolist(), (b.cu_seqlens[1:] - b.cu_seqlens[:-1]).tolist())
                n += 1
            self.assertGreater(n, 0)

    def test_shard_of_degree_one_is_the_whole_batch_patchified(self):
        for rank in (0, 1):
            whole = list(stream(rank))
            shard = list(stream(rank, sp_shard=True))
            self.assertEqual(len(whole), len(shard))
            for w, s in zip(whole, shard):
                self.assertTrue(s.sp_sharded)
                self.assertEqual(s.patch, (1, 2, 2))
                self.assertEqual(s.sp_token_range, (0, w.tokens))
                self.assertEqual(s.keys, w.keys)
                self.assertTrue(torch.equal(s.cu_seqlens, w.cu_seqlens))
                got, want = s.packed(), w.packed()
                self.assertEqual(got.dtype, torch.float16)
                self.assertTrue(torch.equal(got.view(torch.int16), want.view(torch.int16)),
                                "the shard's rows are the whole batch's packed latent")
                pos = s.token_positions()
                self.assertEqual(tuple(pos.shape), (s.tokens, 3))
                at = 0
                for i, (key, lat) in enumerate(zip(s.keys, s.tensors("latent.npy"))):
                    ref = patchify_np(C.crop(key, s.grid))
                    self.assertEqual(tuple(lat.shape), ref.shape, key)
                    self.assertTrue(np.array_equal(lat.view(torch.int16).numpy(), ref.view(np.int16)), key)
                    hp, wp = s.grid[1] // 2, s.grid[2] // 2
                    k = np.arange(ref.shape[0])
                    want_pos = np.stack([k // (hp * wp), (k // wp) % hp, k % wp], axis=1)
                    self.assertTrue(np.array_equal(pos[at:at + ref.shape[0]].numpy(), want_pos), key)
                    at += ref.shape[0]
                    self.assertTrue(np.array_equal(s.tensors("t5.npy")[i].numpy(), C.t5[key]), "t5 whole")
                    self.assertEqual(bytes(s.tensors("txt")[i].numpy()), C.txt[key], "txt whole")
                with self.assertRaises(ValueError):
                    s.packed(patch=(1, 1, 1))  # the shard carries its own patch

    def test_sampler_infos_and_collate_carry_the_group(self):
        for rank in (0, 1):
            sampler = BatchSampler(C.manifest, rank=rank, world_size=2, with_info=True)
            infos = list(sampler.infos())
            self.assertTrue(infos)
            for info in infos:
                self.assertEqual((info.sp_degree, info.sp_rank, info.sp_ranks), (1, 0, (rank,)))
            ds = IndexDataset(C.index, members=MEMBERS)
            loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate_packed)
            for info, batch in zip(infos, loader):
                self.assertEqual((batch["sp_degree"], batch["sp_rank"], batch["sp_ranks"]), (1, 0, (rank,)))
                self.assertEqual(batch["position"], info.position)

    def test_a_planned_sp_manifest_streams_its_groups(self):
        def read(rank, **kw):
            return list(StreamDataset(C.index, C.sp_manifest, rank=rank, world_size=2, members=MEMBERS, threads=2,
                                      **kw))
        whole = [read(0), read(1)]
        shard = [read(0, sp_shard=True), read(1, sp_shard=True)]
        infos = [list(BatchSampler(C.sp_manifest, rank=r, world_size=2).infos()) for r in (0, 1)]
        self.assertEqual(len(whole[0]), len(whole[1]))
        groups = 0
        for k, (a, b) in enumerate(zip(*whole)):
            self.assertEqual((a.step, a.micro), (b.step, b.micro))
            for r, x in enumerate((a, b)):
                info = infos[r][k]
                self.assertEqual((info.sp_degree, info.sp_rank, info.sp_ranks), (x.sp_degree, x.sp_rank, x.sp_ranks))
                self.assertEqual(list(info.samples), x.samples.tolist())
                self.assertIn(r, x.sp_ranks)
            if a.sp_degree == 1:
                self.assertEqual((a.sp_ranks, b.sp_ranks), ((0,), (1,)))
                continue
            groups += 1
            self.assertEqual((a.sp_rank, b.sp_rank, a.sp_ranks, b.sp_ranks), (0, 1, (0, 1), (0, 1)))
            self.assertEqual(a.keys, b.keys, "the group's micro-batch on both ranks")
            self.assertTrue(torch.equal(a.data, b.data))
            s0, s1 = shard[0][k], shard[1][k]
            n = a.tokens
            self.assertEqual((s0.sp_token_range, s1.sp_token_range), ((0, n // 2), (n // 2, n)))
            self.assertEqual((s0.sp_group_tokens, s1.sp_group_tokens, a.sp_group_tokens), (n, n, n))
            self.assertEqual([adaptiveload.sp.token_range(s.sp_group_tokens, 2, s.sp_rank) for s in (s0, s1)],
                             [s0.sp_token_range, s1.sp_token_range], "the training side's shard rule")
            cat = torch.cat([s0.packed(), s1.packed()])
            self.assertTrue(torch.equal(cat.view(torch.int16), a.packed().view(torch.int16)),
                            "the two shards tile the packed latent")
            pos = torch.cat([s0.token_positions(), s1.token_positions()])
            self.assertTrue(torch.equal(pos, whole[0][k].token_positions()), "RoPE positions continue")
            for s in (s0, s1):
                for i, key in enumerate(s.keys):
                    self.assertTrue(np.array_equal(s.tensors("t5.npy")[i].numpy(), C.t5[key]), "t5 whole")
        self.assertGreater(groups, 0, "the plan runs some micro-batches at degree 2")
        # BatchSampler + IndexDataset + collate_packed: the group's whole micro-batch, the group named.
        for r in (0, 1):
            sampler = BatchSampler(C.sp_manifest, rank=r, world_size=2, with_info=True)
            loader = torch.utils.data.DataLoader(IndexDataset(C.index, members=MEMBERS), batch_sampler=sampler,
                                                 collate_fn=collate_packed)
            for x, batch in zip(whole[r], loader):
                self.assertEqual(batch["keys"], x.keys)
                self.assertEqual((batch["sp_degree"], batch["sp_rank"], batch["sp_ranks"]),
                                 (x.sp_degree, x.sp_rank, x.sp_ranks))
                self.assertTrue(torch.equal(batch["cu_seqlens"], x.cu_seqlens))
        # Resuming both ranks of a group from their own states: the same next group micro-batch.
        k = next(i for i, x in enumerate(whole[0]) if i > 0 and x.sp_degree == 2)
        nxt = [next(iter(StreamDataset(C.index, C.sp_manifest, rank=r, world_size=2, members=MEMBERS, threads=2,
                                       sp_shard=True, state=shard[r][k - 1].resume_state))) for r in (0, 1)]
        self.assertEqual([x.position for x in nxt], [k, k])
        self.assertEqual([(x.step, x.micro, x.sp_ranks) for x in nxt], [(nxt[0].step, nxt[0].micro, (0, 1))] * 2)
        self.assertEqual(nxt[0].sp_token_range, shard[0][k].sp_token_range)
        self.assertTrue(torch.equal(torch.cat([nxt[0].packed(), nxt[1].packed()]).view(torch.int16),
                                    whole[0][k].packed().view(torch.int16)))

    def test_skips_are_counted_once_over_a_group(self):
        lacking = Corpus(os.path.join(TMP, "lack"), lack=4)
        from adaptiveload import StepTotals

        def deficits(**kw):
            """Per step, the planned tokens minus the delivered ones summed over both ranks
            (StepTotals of each rank, no torch.distributed: its own sums)."""
            out = {}
            for r in (0, 1):
                totals = StepTotals()
                for b in StreamDataset(lacking.index, lacking.sp_manifest, rank=r, world_size=2, members=MEMBERS,
                                       threads=2, on_error="skip", max_skip_fraction=1, **kw):
                    if totals.add(b):
                        out[b.step] = out.get(b.step, 0) + totals.planned_tokens - totals.delivered_tokens
            return out
        whole, shard = deficits(), deficits(sp_shard=True)
        self.assertEqual(whole, shard)
        self.assertGreater(sum(whole.values()), 0, "the lacking sample was skipped")
        # The truth: the lacking sample's planned tokens, once per (real) occurrence.
        sched = adaptiveload.schedule.Schedule(lacking.sp_manifest, 0, 2), adaptiveload.schedule.Schedule(
            lacking.sp_manifest, 1, 2)
        want = {}
        for s in sched:
            for i in range(s.n_batches):
                if s.sp_rank[i]:
                    continue  # the group's micro-batch is counted at its first rank
                for j in range(s.first[i], s.first[i + 1]):
                    if s.samples[j] == 4 and not s.padded[j]:
                        want[s.step[i]] = want.get(s.step[i], 0) + s.tokens[j]
        self.assertEqual({k: v for k, v in whole.items() if v}, want)

    def test_sp_shard_is_validated(self):
        for bad in ("yes", 2, 0.5, None):
            with self.assertRaises(TypeError, msg=repr(bad)):
                stream(0, sp_shard=bad)
        self.assertTrue(stream(0, sp_shard=1).sp_shard)
        self.assertFalse(stream(0, sp_shard=0).sp_shard)

    def test_untyped_latent_is_refused(self):
        root = os.path.join(TMP, "synth")
        run("synth", "--out", os.path.join(root, "shards"), "--samples", 6, "--shards", 1, "--seed", 1)
        idx, man = os.path.join(root, "i.alidx"), os.path.join(root, "m.alm")
        run("index", "-o", idx, os.path.join(root, "shards"))
        run("plan", "--index", idx, "--world", 1, "--mem-tokens", 20000, "-o", man)
        ds = StreamDataset(idx, man, rank=0, world_size=1, sp_shard=True)
        with self.assertRaises(adaptiveload.Error) as cm:
            next(iter(ds))
        self.assertIn("sp_shard: member 'latent' is untyped", str(cm.exception))
        self.assertEqual(len(list(StreamDataset(idx, man, rank=0, world_size=1))) > 0, True)

    def test_resume_with_sp_shard(self):
        full = list(stream(0, sp_shard=True))
        self.assertGreater(len(full), 2)
        state = full[1].resume_state
        rest = list(stream(0, sp_shard=True, state=state))
        self.assertEqual([b.position for b in rest], [b.position for b in full[2:]])
        for a, b in zip(rest, full[2:]):
            self.assertEqual(a.keys, b.keys)
            self.assertEqual(a.sp_token_range, b.sp_token_range)
            self.assertTrue(torch.equal(a.packed().view(torch.int16), b.packed().view(torch.int16)))


if __name__ == "__main__":
    unittest.main()
