"""A mixture streamed from Python: StreamDataset over a Planner(mixture=...) reads every sample
from its own source's index (each delivered array is what IndexDataset over that source's index
gives at the draw's position), names the source of every sample in batch.sources, and the ranks
together deliver each source's draws; the manifest and its list of indexes stream the same
batches; a resume state continues exactly; a Planner state rebuilds the same plan; a resize
resumes the same run at another world; BatchSampler refuses a mixture's plan.

Run by tests/python/python_test.sh (Bazel sh_test, //tests/python:test_mixture_stream) with
ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

import collections
import faulthandler
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, IndexDataset, Planner, StreamDataset
from adaptiveload.checkpoint import resume, save_checkpoint

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def setUpModule():
    global TMP, MIX, OPTS
    TMP = tempfile.mkdtemp(prefix="al_mixture_stream_", dir=os.environ.get("TEST_TMPDIR"))
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    buckets = os.path.join(TMP, "buckets.txt")
    with open(buckets, "w") as f:
        f.write("frames 1 5\naspect 1:1 240x240\naspect 16:9 416x240\naspect 9:16 240x416\n")
    for name, n, seed in (("web", 90, 3), ("hq", 24, 4), ("img", 60, 5)):
        run("synth", "--out", os.path.join(TMP, name), "--samples", n, "--shards", 2, "--seed", seed)
        run("index", "-o", os.path.join(TMP, name + ".alidx"), os.path.join(TMP, name))
    MIX = {"by": "tokens", "steps": 60,
           "sources": [{"name": "web", "index": os.path.join(TMP, "web.alidx"), "weight": 0.5},
                       {"name": "hq", "index": os.path.join(TMP, "hq.alidx"), "weight": 0.3},
                       {"name": "img", "index": os.path.join(TMP, "img.alidx"), "weight": 0.2}]}
    OPTS = dict(seed=2, micro_per_step=2, buckets=buckets)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def record(b):
    return (b.position, b.step, b.micro, tuple(b.samples.tolist()), tuple(b.keys), tuple(b.sources),
            tuple(b.cu_seqlens.tolist()), bytes(b.data.numpy().tobytes()))


class MixtureStream(unittest.TestCase):
    def test_every_sample_comes_from_its_source(self):
        planner = Planner(mixture=MIX, world=2, **OPTS)
        m = planner.plan(0)
        src = m.sources
        by_name = {s["name"]: s for s in src}
        datasets = {s["name"]: IndexDataset(p) for s, p in zip(src, planner.source_indexes())}
        real = collections.Counter()
        for rank in (0, 1):
            for b in StreamDataset(None, planner, rank=rank, world_size=2):
                self.assertEqual(len(b.sources), len(b.keys))
                for i, (name, draw) in enumerate(zip(b.sources, b.samples.tolist())):
                    s = by_name[name]
                    self.assertTrue(s["draw_base"] <= draw < s["draw_base"] + s["passes"] * s["samples"])
                    pos = (draw - s["draw_base"]) % s["samples"]
                    item = datasets[name][pos]
                    self.assertEqual(item["key"], b.keys[i])
                    got = b.data[b.offsets[i]:b.offsets[i] + b.sizes[i]]
                    whole = item["data"]
                    if not b.members[next(iter(b.members))].cropped:
                        self.assertTrue(torch.equal(got, whole), "%s/%s" % (name, b.keys[i]))
                    if not b.padded[i]:
                        real[name] += 1
        for s in src:
            self.assertEqual(real[s["name"]], s["drawn"], s["name"])

    def test_manifest_with_its_indexes_streams_the_same(self):
        planner = Planner(mixture=MIX, world=2, **OPTS)
        a = [record(b) for b in StreamDataset(None, planner, rank=1, world_size=2)]
        paths = [s["index"] for s in MIX["sources"]]
        b = [record(x) for x in StreamDataset(paths, planner.path(0), rank=1, world_size=2)]
        self.assertEqual(a, b)
        with self.assertRaises(adaptiveload.Error) as e:  # one index for a mixture's manifest
            list(StreamDataset(paths[0], planner.path(0), rank=1, world_size=2))
        self.assertIn("mixture", str(e.exception))
        with self.assertRaises(adaptiveload.Error) as e:  # the sources in another order
            list(StreamDataset([paths[1], paths[0], paths[2]], planner.path(0), rank=1, world_size=2))
        self.assertIn("source 'web' was planned from another index", str(e.exception))

    def test_resume_state_continues_exactly(self):
        planner = Planner(mixture=MIX, world=2, **OPTS)
        full = list(StreamDataset(None, planner, rank=0, world_size=2))
        cut = 5
        state = full[cut - 1].resume_state
        rest = [record(b) for b in StreamDataset(None, planner, rank=0, world_size=2, state=state)]
        self.assertEqual(rest, [record(b) for b in full[cut:]])

    def test_state_dict_rebuilds_the_plan(self):
        planner = Planner(mixture=MIX, world=2, **OPTS)
        again = Planner.from_state(planner.state_dict())
        with open(planner.path(0), "rb") as f, open(again.path(0), "rb") as g:
            self.assertEqual(f.read(), g.read())
        self.assertIn("mixture=", repr(again))

    def test_resize_resumes_the_run(self):
        old = Planner(mixture=MIX, world=2, **OPTS)
        new = Planner.resume(old, at_step=20, world=1, epoch=0)
        self.assertEqual(new.plan(0).info["first_step"], 20)

        def draws(planner, world):  # real samples of steps >= 20 over every rank
            out = collections.Counter()
            for r in range(world):
                for b in StreamDataset(None, planner, rank=r, world_size=world):
                    if b.step >= 20:
                        out.update((s, d) for s, d, p in zip(b.sources, b.samples.tolist(), b.padded.tolist())
                                   if not p)
            return out
        a, b = draws(old, 2), draws(new, 1)
        self.assertTrue(a)
        self.assertEqual(a, b)
        self.assertEqual(max(b.values()), 1)  # every draw once

    def test_schedule_changes_mid_run(self):
        """A kill at step 23 at 2 ranks, the rest at 1 rank under new weights and an added source,
        then a second change at step 41: every (source, pass, position) once over the three
        stretches, the added source only from its change on, states rebuild the same plans."""
        opts = dict(OPTS, window=16)
        mix1 = dict(MIX, steps=70)
        mix2 = dict(mix1, sources=[dict(MIX["sources"][0], weight=0.2), MIX["sources"][1],
                                   dict(MIX["sources"][2], weight=0.5),
                                   {"name": "more", "index": MIX["sources"][0]["index"], "weight": 0.1}])
        mix3 = dict(mix2, stages=[{"from_step": 0, "weights": {"web": 0.4, "hq": 0, "img": 0.3, "more": 0.3}}])
        p1 = Planner(mixture=mix1, world=2, **opts)

        def triples(planner, world, lo, hi):
            m = planner.plan(0)
            src = {x["name"]: x for x in m.sources}
            out = []
            for r in range(world):
                for b in StreamDataset(None, planner, rank=r, world_size=world):
                    if lo <= b.step < hi:
                        for name, d, pad in zip(b.sources, b.samples.tolist(), b.padded.tolist()):
                            if not pad:
                                q, pos = divmod(d - src[name]["draw_base"], src[name]["samples"])
                                out.append((b.step, name, q, pos))
            return out, m
        a, _ = triples(p1, 2, 0, 23)
        p2 = Planner.resume(p1, at_step=23, world=1, epoch=0, mixture=mix2)
        b, m2 = triples(p2, 1, 23, 41)
        p3 = Planner.resume(p2, at_step=41, world=1, epoch=0, mixture=mix3)
        c, m3 = triples(p3, 1, 41, 70)
        got = [x[1:] for x in a + b + c]
        self.assertEqual(len(got), len(set(got)), "a draw of a pass was delivered twice")
        first_more = min(x[0] for x in b + c if x[1] == "more")
        self.assertGreaterEqual(first_more, 23)
        self.assertLess(first_more, 23 + 16)  # from the first window boundary at or after 23
        self.assertTrue(all(x[1] != "hq" for x in c if x[0] >= 41 + 16))  # hq paused by the second change
        # Finished passes are complete over the three stretches.
        seen = collections.defaultdict(set)
        for name, q, pos in got:
            seen[(name, q)].add(pos)
        for x in m3.sources:
            for q in range(x["passes"] - 1):
                if x["name"] != "hq":
                    self.assertEqual(len(seen[(x["name"], q)]), x["pass_samples"], (x["name"], q))
        # The chain of changes rides in the Planner's state.
        again = Planner.from_state(p3.state_dict())
        with open(p3.path(0), "rb") as f, open(again.path(0), "rb") as g:
            self.assertEqual(f.read(), g.read())
        with self.assertRaises(ValueError):
            Planner.resume(Planner(os.path.join(TMP, "web.alidx"), world=2, planner="chunked", **OPTS),
                           at_step=3, world=1, epoch=0, mixture=mix2)

    def test_planner_refusals(self):
        with self.assertRaises(ValueError):
            Planner(os.path.join(TMP, "web.alidx"), mixture=MIX)
        with self.assertRaises(adaptiveload.Error):
            Planner(mixture={"sources": [{"name": "web", "index": "nope.alidx"}], "steps": 3}).plan(0)
        with self.assertRaises(ValueError):
            Planner(mixture=MIX, planner="epoch")
        with self.assertRaises(ValueError) as e:
            BatchSampler(Planner(mixture=MIX, world=2, **OPTS), rank=0, world_size=2)
        self.assertIn("mixture", str(e.exception))


# -- under torch.distributed: 2 gloo processes, a stage change, a kill and a resize to 1 -------


STAGED_STEP, KILL_STEP = 20, 34


def staged_mix():
    m = dict(MIX, steps=60)
    m["stages"] = [{"from_step": STAGED_STEP, "weights": {"web": 0.3, "hq": 0.1, "img": 0.6}}]
    return m


def _spawned(rank, init_file, out_dir, mix, opts):
    faulthandler.dump_traceback_later(150, exit=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), "2"
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    p = Planner(mixture=mix, out_dir=out_dir, **opts)  # world from WORLD_SIZE
    ds = StreamDataset(None, p)  # rank and world from the environment
    ds.set_epoch(0)
    got, state = [], None
    for b in ds:  # the job is killed once step KILL_STEP begins
        if b.step >= KILL_STEP:
            break
        got += [(s, d) for s, d, pad in zip(b.sources, b.samples.tolist(), b.padded.tolist()) if not pad]
        state = b.resume_state
    out = [None, None]
    dist.all_gather_object(out, got)
    if rank == 0:
        ckpt = save_checkpoint(planner=p, stream=state, step=KILL_STEP, epoch=0)
        torch.save({"delivered": out, "checkpoint": ckpt}, os.path.join(out_dir, "killed.pt"))
    dist.barrier()
    dist.destroy_process_group()


class DistributedStagedMixture(unittest.TestCase):
    def test_kill_after_the_stage_change_and_resize(self):
        if not (dist.is_available() and dist.is_gloo_available()):
            self.skipTest("torch.distributed with gloo is not available")
        root = os.path.join(TMP, "ddp")
        os.makedirs(root)
        mix = staged_mix()
        mp.spawn(_spawned, args=(os.path.join(root, "init"), root, mix, dict(OPTS)), nprocs=2, join=True)
        saved = torch.load(os.path.join(root, "killed.pt"))
        before = [x for per_rank in saved["delivered"] for x in per_rank]
        # The resized job: one rank from the checkpoint's step.
        r = resume(saved["checkpoint"], world=1)
        after = [(s, d) for b in StreamDataset(None, r.planner, rank=0, world_size=1)
                 for s, d, pad in zip(b.sources, b.samples.tolist(), b.padded.tolist()) if not pad]
        full = Planner(mixture=mix, world=2, **OPTS)
        m = full.plan(0)
        self.assertEqual([g["from_step"] for g in m.stages], [0, STAGED_STEP])
        want = [(s, d) for rank in (0, 1) for b in StreamDataset(None, full, rank=rank, world_size=2)
                for s, d, pad in zip(b.sources, b.samples.tolist(), b.padded.tolist()) if not pad]
        delivered = before + after
        self.assertEqual(len(delivered), len(set(delivered)), "a draw was delivered twice")
        self.assertEqual(sorted(delivered), sorted(want))
        # Exactly once within every source's pass.
        src = {s["name"]: s for s in m.sources}
        seen = collections.Counter()
        for name, d in delivered:
            q, pos = divmod(d - src[name]["draw_base"], src[name]["samples"])
            seen[(name, q, pos)] += 1
        self.assertEqual(max(seen.values()), 1)
        self.assertGreaterEqual(src["hq"]["passes"], 2)


if __name__ == "__main__":
    unittest.main()
