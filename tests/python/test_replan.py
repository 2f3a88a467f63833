"""Elastic resume from Python: train (iterate every rank, simulated in one process) to step N at
one world size, checkpoint (adaptiveload.checkpoint), resume at another world size, and check
that every sample of the epoch is delivered exactly once overall and that tokens per step,
from the micro-batches' own step totals, stay within 1% of the old plan's over the same steps
on average and, step by step, within the old plan's range of tokens per step (4 -> 8, 8 -> 3,
8 -> 1, 4 -> 8 -> 2; BatchSampler on a metadata corpus, StreamDataset on a latent one). Also: the same world resumes the saved state; a resize that cannot keep T is
refused unless a new T is asked for; a checkpoint whose manifest can no longer be rebuilt is
refused.

Run by tests/python/python_test.sh (Bazel sh_test, //tests/python:test_replan) with
ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401  (BatchSampler and StreamDataset need it)
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, Planner, StreamDataset
from adaptiveload.checkpoint import load_checkpoint, resume, save_checkpoint

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
EPOCH = 1


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def setUpModule():
    global TMP, META, LATENT
    TMP = tempfile.mkdtemp(prefix="al_replan_", dir=os.environ.get("TEST_TMPDIR"))
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    META = os.path.join(TMP, "meta.alidx")
    run("synth", "--out", os.path.join(TMP, "meta"), "--samples", 3000, "--shards", 2, "--payload", "none")
    run("index", "-o", META, os.path.join(TMP, "meta"))
    LATENT = os.path.join(TMP, "latent.alidx")
    run("synth", "--out", os.path.join(TMP, "latent"), "--samples", 40, "--shards", 2, "--seed", 5)
    run("index", "-o", LATENT, os.path.join(TMP, "latent"))


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def sampler_steps(planner, world, upto=None):
    """Every rank's micro-batch infos of the planner's epoch (steps < upto when given), the
    samplers, and per rank the number of micro-batches taken."""
    samplers, infos = [], []
    for r in range(world):
        s = BatchSampler(planner, rank=r, world_size=world, epoch=EPOCH)
        mine = [i for i in s.infos() if upto is None or i.step < upto]
        it = iter(s)
        for _ in mine:
            next(it)  # the sampler's own position moves as training would move it
        samplers.append(s)
        infos.append(mine)
    return samplers, infos


def real_samples(infos):
    return [x for rank in infos for i in rank for x, p in zip(i.samples, i.padded) if not p]


def step_totals(infos):
    """step -> tokens over all ranks, as every micro-batch of the step reports it."""
    out = {}
    for rank in infos:
        for i in rank:
            assert out.setdefault(i.step, i.step_tokens) == i.step_tokens
    return out


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


class ResizeTest(unittest.TestCase):
    """BatchSampler over re-planned manifests, through checkpoint files."""

    def resize_chain(self, w0, chain, policy):
        planner = Planner(META, world=w0, seed=2, policy=policy, out_dir=os.path.join(TMP, "plans"))
        full = planner.plan(EPOCH)
        target = full.info["step_tokens"]
        _, every = sampler_steps(planner, w0)
        everything = sorted(real_samples(every))
        old_totals = step_totals(every)
        seen, rows = [], []
        world = w0
        for n, w in enumerate(chain):
            first = planner.plan(EPOCH).info["first_step"]
            steps = planner.plan(EPOCH).info["steps"]
            at = first + steps // 3
            samplers, done = sampler_steps(planner, world, upto=at)
            seen += real_samples(done)
            path = os.path.join(TMP, "ckpt-%s-%d.json" % (policy, n))
            # Rank 0's sampler state: the step it stands at is derived (a step boundary).
            ckpt = save_checkpoint(path, planner=planner, sampler=samplers[0])
            self.assertEqual(ckpt["step"], at)
            self.assertEqual(ckpt["epoch"], EPOCH)
            r = resume(path, world=w)
            self.assertTrue(r.resized)
            self.assertIsNone(r.stream_state)
            self.assertEqual((r.epoch, r.step), (EPOCH, at))
            new = r.planner.plan(EPOCH).info
            self.assertEqual(new["first_step"], at)
            self.assertEqual(new["world"], w)
            self.assertEqual(new["step_tokens"], target)
            _, after = sampler_steps(r.planner, w)
            totals = step_totals(after)
            was = mean(v for s, v in old_totals.items() if s >= at)
            now = mean(totals.values())
            rows.append((policy, "%d->%d" % (world, w), at, new["micro_per_step"], target, was, now,
                         len(totals)))
            self.assertLess(abs(now / was - 1), 0.01, rows[-1])
            # Each step, not only the mean: within the old plan's range of tokens per step.
            lo, hi = min(old_totals.values()), max(old_totals.values())
            out = {s: v for s, v in totals.items() if not lo <= v <= hi or (hi <= target and v > target)}
            self.assertEqual(out, {}, "%s: steps outside %d..%d (T %d)" % (rows[-1][1], lo, hi, target))
            old_totals = totals
            planner, world = r.planner, w
        seen += real_samples(after)
        self.assertEqual(sorted(seen), everything, "every sample of the epoch exactly once")
        return rows

    def test_resizes_keep_tokens_per_step_and_every_sample_once(self):
        rows = []
        for policy in ("adaptive", "equal-token"):
            rows += self.resize_chain(4, [8], policy)
            rows += self.resize_chain(8, [3], policy)
            rows += self.resize_chain(8, [1], policy)
            rows += self.resize_chain(4, [8, 2], policy)
        print("\n%-12s %-6s %5s %3s %9s %11s %11s %8s %6s" % ("policy", "resize", "at", "K'", "target T",
                                                              "old tok/st", "new tok/st", "diff", "steps"))
        for p, rs, at, k, t, was, now, n in rows:
            print("%-12s %-6s %5d %3d %9d %11.0f %11.0f %+7.2f%% %6d" % (p, rs, at, k, t, was, now,
                                                                       100 * (now / was - 1), n))

    def test_later_epochs_plan_fresh_at_the_same_t(self):
        planner = Planner(META, world=4, seed=2)
        t = planner.plan(EPOCH).info["step_tokens"]
        resumed = Planner.resume(planner, at_step=10, world=8, epoch=EPOCH)
        info = resumed.plan(EPOCH + 1).info
        self.assertEqual((info["world"], info["first_step"], info["step_tokens"]), (8, 0, t))
        self.assertEqual(info["micro_per_step"], 1)
        # A Planner state rebuilds the same manifests, byte for byte.
        again = Planner.from_state(json.loads(json.dumps(resumed.state_dict())))
        for e in (EPOCH, EPOCH + 1):
            with open(resumed.path(e), "rb") as a, open(again.path(e), "rb") as b:
                self.assertEqual(a.read(), b.read(), "epoch %d" % e)
        self.assertIn("resumed epoch 1 at step 10 -> world 8", repr(resumed))

    def test_refused_unless_a_new_t_is_asked_for(self):
        planner = Planner(META, world=4, seed=2)
        with self.assertRaises(adaptiveload.Error) as cm:
            Planner.resume(planner, at_step=10, world=256, epoch=EPOCH)
        self.assertIn("step_tokens", cm.exception.detail)
        resumed = Planner.resume(planner, at_step=10, world=256, epoch=EPOCH, step_tokens=256 * 8192)
        self.assertEqual(resumed.plan(EPOCH).info["step_tokens"], 256 * 8192)
        k = Planner.resume(planner, at_step=10, world=2, epoch=EPOCH, micro_per_step=4)
        self.assertEqual(k.plan(EPOCH).info["micro_per_step"], 4)
        with self.assertRaises(ValueError):
            Planner.resume(planner, at_step=-1, world=2, epoch=EPOCH)

    def test_resume_from_a_manifest_path(self):
        path = os.path.join(TMP, "by-cli.alm")
        run("plan", "--index", META, "--world", 4, "--epoch", EPOCH, "-o", path)
        cli = os.path.join(TMP, "by-cli-w8.alm")
        run("plan", "--resume-from", path, "--at-step", 12, "--world", 8, "-o", cli)
        p = Planner.resume(path, at_step=12, world=8)
        with open(p.path(EPOCH), "rb") as a, open(cli, "rb") as b:
            self.assertEqual(a.read(), b.read(), "the CLI's re-plan, byte for byte")
        with self.assertRaisesRegex(ValueError, "index="):
            p.path(EPOCH + 1)
        self.assertEqual(Planner.resume(path, at_step=12, world=8, index=META).plan(EPOCH + 1).info["world"], 8)

    def test_checkpoint_identity_and_boundaries(self):
        planner = Planner(META, world=2, seed=2)
        samplers, _ = sampler_steps(planner, 2, upto=5)
        ckpt = save_checkpoint(planner=planner, sampler=samplers[0])
        # The same world: the same manifests and the saved state; the sampler continues there.
        r = resume(ckpt, world=2)
        self.assertFalse(r.resized)
        self.assertEqual(r.sampler_state, samplers[0].state_dict())
        s = BatchSampler(r.planner, rank=0, world_size=2, epoch=EPOCH)
        s.load_state_dict(r.sampler_state)
        self.assertEqual(BatchSampler(planner, rank=0, world_size=2, epoch=EPOCH).info(r.sampler_state["position"])
                         .step, 5)
        # A checkpoint whose manifest is not what the planner now makes (another seed) is refused.
        bad = json.loads(json.dumps(ckpt))
        bad["planner"]["seed"] = 3
        with self.assertRaisesRegex(ValueError, "differs from the checkpoint's in .*sha256"):
            resume(bad, world=4)
        with self.assertRaisesRegex(ValueError, "version"):
            load_checkpoint(dict(ckpt, version=9))
        # Inside a step (K = 2: after the first of a rank's two micro-batches) is refused.
        p2 = Planner(META, world=2, seed=2, micro_per_step=2)
        s2 = BatchSampler(p2, rank=0, world_size=2, epoch=EPOCH)
        next(iter(s2))
        with self.assertRaisesRegex(ValueError, "inside step"):
            save_checkpoint(planner=p2, sampler=s2)


class StreamResizeTest(unittest.TestCase):
    """StreamDataset: 4 ranks to step N, a checkpoint of rank 0's batch.resume_state, then 2."""

    def test_stream_resumes_at_another_world(self):
        planner = Planner(LATENT, world=4, seed=1, mem_tokens=8000)
        steps = planner.plan(EPOCH).info["steps"]
        self.assertGreater(steps, 6)
        at = steps // 2
        keys, state = [], None
        every = []
        for r in range(4):
            ds = StreamDataset(LATENT, planner, rank=r, world_size=4)
            ds.set_epoch(EPOCH)
            for b in ds:
                real = [k for k, p in zip(b.keys, b.padded.tolist()) if not p]
                every += real
                if b.step < at:
                    keys += real
                    if r == 0 and b.last_in_step and b.step == at - 1:
                        state = b.resume_state
        self.assertIsNotNone(state)
        path = os.path.join(TMP, "stream-ckpt.json")
        save_checkpoint(path, planner=planner, stream=state)
        self.assertEqual(load_checkpoint(path)["step"], at)
        # The same world: the saved state continues rank 0 right after step at - 1.
        same = resume(path, world=4)
        ds = StreamDataset(LATENT, same.planner, rank=0, world_size=4)
        ds.set_epoch(same.epoch)
        ds.load_state_dict(same.stream_state)
        self.assertEqual(min(b.step for b in ds), at)
        # Two ranks from step `at`: the rest of the epoch, exactly once, at the same tokens per step.
        r2 = resume(path, world=2)
        totals = {}
        for r in range(2):
            ds = StreamDataset(LATENT, r2.planner, rank=r, world_size=2)
            ds.set_epoch(r2.epoch)
            for b in ds:
                self.assertGreaterEqual(b.step, at)
                keys += [k for k, p in zip(b.keys, b.padded.tolist()) if not p]
                totals[b.step] = b.step_tokens
        self.assertEqual(sorted(keys), sorted(every))
        self.assertEqual(len(set(keys)), len(keys))
        _, old = sampler_steps(planner, 4)
        was = mean(v for s, v in step_totals(old).items() if s >= at)
        self.assertLess(abs(mean(totals.values()) / was - 1), 0.01)


if __name__ == "__main__":
    unittest.main(verbosity=2)
