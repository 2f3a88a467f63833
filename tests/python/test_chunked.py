"""A chunked run from Python (planner="chunked"): a slice (steps=(A, B)) equals the same steps of
the whole run; a run trained to a step at one world size, checkpointed and resumed at others
(4 -> 8 -> 3 through checkpoint files) delivers every sample of the epoch exactly once, and every
step after a resize holds exactly the samples it held before (a step's samples do not depend on
the world); the resume's refusals name the argument.

Run by tests/python/python_test.sh (Bazel sh_test, //tests/python:test_chunked) with
ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401  (BatchSampler needs it)
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, Planner
from adaptiveload.checkpoint import resume, save_checkpoint

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
EPOCH = 1


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def setUpModule():
    global TMP, META
    TMP = tempfile.mkdtemp(prefix="al_chunked_", dir=os.environ.get("TEST_TMPDIR"))
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    META = os.path.join(TMP, "meta.alidx")
    run("synth", "--out", os.path.join(TMP, "meta"), "--samples", 3000, "--shards", 2, "--payload", "none")
    run("index", "-o", META, os.path.join(TMP, "meta"))


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def infos_of(planner, world, upto=None):
    """Per rank: the micro-batch infos of the planner's epoch (steps < upto when given) and the
    samplers, each moved past the infos taken (as training would move it)."""
    samplers, infos = [], []
    for r in range(world):
        s = BatchSampler(planner, rank=r, world_size=world, epoch=EPOCH)
        mine = [i for i in s.infos() if upto is None or i.step < upto]
        it = iter(s)
        for _ in mine:
            next(it)
        samplers.append(s)
        infos.append(mine)
    return samplers, infos


def samples_by_step(infos):
    out = {}
    for rank in infos:
        for i in rank:
            out.setdefault(i.step, []).extend(x for x, p in zip(i.samples, i.padded) if not p)
    return {s: sorted(v) for s, v in out.items()}


class ChunkedTest(unittest.TestCase):
    def test_slice_equals_the_whole_run(self):
        full = adaptiveload.plan(META, world=4, epoch=EPOCH, seed=3, micro_per_step=2, planner="chunked")
        steps = full.info["steps"]
        part = adaptiveload.plan(META, world=4, epoch=EPOCH, seed=3, micro_per_step=2, planner="chunked",
                                 steps=(steps // 2, steps // 2 + 3))
        self.assertEqual((part.info["first_step"], part.info["steps"]), (steps // 2, 3))
        whole = samples_by_step(infos_of(full.path, 4)[1])
        sliced = samples_by_step(infos_of(part.path, 4)[1])
        self.assertEqual(sorted(sliced), list(range(steps // 2, steps // 2 + 3)))
        for s, v in sliced.items():
            self.assertEqual(v, whole[s], "step %d" % s)

    def test_rank_slice_is_that_ranks_work(self):
        full = adaptiveload.plan(META, world=4, epoch=EPOCH, seed=3, micro_per_step=2, planner="chunked")
        steps = full.info["steps"]
        a, b = steps // 3, steps // 3 + 2
        part = adaptiveload.plan(META, world=4, epoch=EPOCH, seed=3, micro_per_step=2, planner="chunked",
                                 steps=(a, b), rank=1)
        self.assertEqual((part.info["only_rank"], part.info["first_step"], part.info["steps"]), (2, a, 2))
        self.assertTrue(part.info["own_keys"])
        mine = [(i.step, i.micro, list(i.samples)) for i in BatchSampler(part.path, rank=1, world_size=4,
                                                                          epoch=EPOCH).infos()]
        want = [(i.step, i.micro, list(i.samples)) for i in BatchSampler(full.path, rank=1, world_size=4,
                                                                          epoch=EPOCH).infos()
                if a <= i.step < b]
        self.assertTrue(mine)
        self.assertEqual(mine, want)
        with self.assertRaisesRegex(adaptiveload.Error, "holds only rank 1"):
            list(BatchSampler(part.path, rank=0, world_size=4, epoch=EPOCH).infos())
        with self.assertRaisesRegex(ValueError, "rank must be in 0..3"):
            adaptiveload.plan(META, world=4, planner="chunked", steps=(0, 1), rank=4)
        with self.assertRaisesRegex(ValueError, "planner='chunked'"):
            adaptiveload.plan(META, world=4, rank=0)

    def test_resize_chain_exactly_once_and_steps_unchanged(self):
        planner = Planner(META, world=4, seed=2, micro_per_step=2, planner="chunked",
                          out_dir=os.path.join(TMP, "plans"))
        first = planner.plan(EPOCH).info
        every = samples_by_step(infos_of(planner, 4)[1])
        everything = sorted(x for v in every.values() for x in v)
        self.assertEqual(len(everything), len(set(everything)))
        seen, world, at = [], 4, 0
        for n, w in enumerate([8, 3]):
            at += first["steps"] // 3
            samplers, done = infos_of(planner, world, upto=at)
            seen += [x for v in samples_by_step(done).values() for x in v]
            path = os.path.join(TMP, "ckpt-%d.json" % n)
            ckpt = save_checkpoint(path, planner=planner, sampler=samplers[0])
            self.assertEqual((ckpt["epoch"], ckpt["step"]), (EPOCH, at))
            r = resume(path, world=w)
            self.assertTrue(r.resized)
            info = r.planner.plan(EPOCH).info
            self.assertEqual((info["first_step"], info["world"]), (at, w))
            self.assertEqual(info["micro_per_step"], -(-2 * 4 // w))  # ceil(K_ref W_ref / W')
            after = samples_by_step(infos_of(r.planner, w)[1])
            for s, v in after.items():
                self.assertEqual(v, every[s], "step %d after %d -> %d" % (s, world, w))
            planner, world = r.planner, w
        seen += [x for v in after.values() for x in v]
        self.assertEqual(sorted(seen), everything, "every sample of the epoch exactly once")
        # The resumed Planner carries its slice through its state.
        again = Planner.from_state(planner.state_dict(), out_dir=os.path.join(TMP, "plans2"))
        self.assertEqual(samples_by_step(infos_of(again, world)[1]), after)

    def test_refusals_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "planner must be"):
            adaptiveload.plan(META, world=2, planner="whole")
        with self.assertRaisesRegex(ValueError, "steps"):
            adaptiveload.plan(META, world=2, planner="chunked", steps=(5, 5))
        with self.assertRaisesRegex(ValueError, "planner='chunked'"):
            adaptiveload.plan(META, world=2, steps=(0, 1))
        with self.assertRaisesRegex(ValueError, "reference_world"):
            adaptiveload.plan(META, world=2, reference_world=4)
        p = Planner(META, world=4, planner="chunked", out_dir=os.path.join(TMP, "plans3"))
        with self.assertRaisesRegex(ValueError, "micro_per_step and step_tokens"):
            Planner.resume(p, at_step=2, world=2, epoch=0, micro_per_step=3)
        with self.assertRaisesRegex(adaptiveload.Error, "steps"):
            adaptiveload.plan(META, world=2, planner="chunked", steps=(0, 10 ** 6))


if __name__ == "__main__":
    unittest.main(verbosity=2)
