"""StreamDataset over a chunked Planner (planner="chunked") streams the run itself, window by
window (al_stream_open_run), and writes no manifest: its batches equal those of the manifest of
the same run (adaptiveload.plan(..., planner="chunked")) for every rank, with plan_ahead 1 and
4 and with DataLoader workers; a resume state taken mid-epoch gives the rest exactly, in both
orders of set_epoch and load_state_dict; a manifest's state is refused; a resize through a
checkpoint starts the new world's stream at the resume step; and under torch.distributed (2 gloo
processes) the ranks together deliver every real sample of the epoch once.

Run by tests/python/python_test.sh (Bazel sh_test, //tests/python:test_stream_run) with
ADAPTIVELOAD_LIB, ADAPTIVELOAD_BIN and PYTHONPATH set.
"""

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
    from torch.utils.data import DataLoader
except ImportError as e:
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import Planner, StreamDataset
from adaptiveload.checkpoint import resume, save_checkpoint
from adaptiveload.schedule import Schedule

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
# A run of the same reference world (4) for every world, windows of 2 steps over a few buckets
# (the buckets file, written below), so a small corpus spans several windows.
OPTS = dict(seed=3, micro_per_step=2, window=2, reference_world=4, planner="chunked")
EPOCH = 1


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def setUpModule():
    global TMP, INDEX
    TMP = tempfile.mkdtemp(prefix="al_stream_run_", dir=os.environ.get("TEST_TMPDIR"))
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    shards = os.path.join(TMP, "shards")
    run("synth", "--out", shards, "--samples", 96, "--shards", 3, "--seed", 5)
    OPTS["buckets"] = os.path.join(TMP, "buckets.txt")
    with open(OPTS["buckets"], "w") as f:
        f.write("frames 1 5\naspect 1:1 240x240\naspect 16:9 416x240\naspect 9:16 240x416\n")
    INDEX = os.path.join(TMP, "corpus.alidx")
    run("index", "-o", INDEX, *sorted(os.path.join(shards, n) for n in os.listdir(shards) if n.endswith(".tar")))


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def record(b):
    """What a consumer sees of a batch: plan fields, samples, tokens and the payload bytes."""
    return (b.position, b.step, b.micro, b.n_micro, b.bucket, b.step_samples, b.step_tokens,
            tuple(b.samples.tolist()), tuple(b.cu_seqlens.tolist()), tuple(b.padded.tolist()),
            tuple(b.keys), bytes(b.data.numpy().tobytes()))


def manifest_batches(world, rank, epoch=EPOCH):
    m = adaptiveload.plan(INDEX, world=world, epoch=epoch,
                          out=os.path.join(TMP, "m-w%d-e%d.alm" % (world, epoch)), **OPTS)
    return [record(b) for b in StreamDataset(INDEX, m, rank=rank, world_size=world)], m


def planner(world, sub):
    return Planner(INDEX, world=world, out_dir=os.path.join(TMP, sub), **OPTS)


class StreamRunTest(unittest.TestCase):
    def test_every_rank_gets_the_manifests_batches_and_no_manifest_is_written(self):
        for world in (1, 3):
            p = planner(world, "plans-%d" % world)
            for rank in range(world):
                want, m = manifest_batches(world, rank)
                self.assertTrue(want)
                for ahead in (1, 4):
                    ds = StreamDataset(INDEX, p, rank=rank, world_size=world, plan_ahead=ahead)
                    ds.set_epoch(EPOCH)
                    got = [record(b) for b in ds]
                    self.assertEqual(len(got), len(want), (world, rank, ahead))
                    self.assertTrue(got == want, (world, rank, ahead))
                    self.assertEqual(len(ds), len(want))
                ds = StreamDataset(INDEX, p, rank=rank, world_size=world)
                ds.set_epoch(EPOCH)
                got = sorted(record(b) for b in DataLoader(ds, batch_size=None, num_workers=2))
                self.assertTrue(got == sorted(want), "DataLoader workers, world %d rank %d" % (world, rank))
                self.assertEqual(ds.bucket_shape(want[0][4]), Schedule(m.path, rank, world).buckets[want[0][4]])
            written = os.listdir(os.path.join(TMP, "plans-%d" % world)) if os.path.isdir(
                os.path.join(TMP, "plans-%d" % world)) else []
            self.assertFalse([n for n in written if n.startswith("plan-")], written)

    def test_resume_mid_epoch_in_both_orders_and_a_manifests_state_is_refused(self):
        world, rank = 3, 2
        p = planner(world, "plans-resume")
        want, m = manifest_batches(world, rank)
        k = 5
        ds = StreamDataset(INDEX, p, rank=rank, world_size=world)
        ds.set_epoch(EPOCH)
        it = iter(ds)
        first = [next(it) for _ in range(k)]
        state = first[-1].resume_state
        it.close()
        self.assertEqual(state["position"], want[k][0])
        for order in ("load-then-set", "set-then-load"):
            again = StreamDataset(INDEX, p, rank=rank, world_size=world)
            if order == "load-then-set":
                again.load_state_dict(state)
                again.set_epoch(EPOCH)
            else:
                again.set_epoch(EPOCH)
                again.load_state_dict(state)
            self.assertTrue([record(b) for b in again] == want[k:], order)
        # The manifest of the same run is another plan: its state does not resume the run.
        ms = StreamDataset(INDEX, m, rank=rank, world_size=world)
        it = iter(ms)
        mstate = [next(it) for _ in range(k)][-1].resume_state
        it.close()
        self.assertNotEqual(mstate["manifest_fingerprint"], state["manifest_fingerprint"])
        again = StreamDataset(INDEX, p, rank=rank, world_size=world)
        again.set_epoch(EPOCH)
        with self.assertRaises(ValueError):
            again.load_state_dict(mstate)

    def test_a_resize_through_a_checkpoint_streams_from_the_resume_step(self):
        p = planner(4, "plans-resize")
        from adaptiveload import BatchSampler
        sampler = BatchSampler(p, rank=0, world_size=4, epoch=EPOCH)
        at = 3
        it = iter(sampler)
        for info in sampler.infos():
            if info.step >= at:
                break
            next(it)
        path = os.path.join(TMP, "ckpt.json")
        save_checkpoint(path, planner=p, sampler=sampler)
        r = resume(path, world=3)
        self.assertTrue(r.resized)
        want, _ = manifest_batches(3, 1)
        got = [record(b) for b in StreamDataset(INDEX, r.planner, rank=1, world_size=3)]
        self.assertTrue(got == [w for w in want if w[1] >= at])


# -- under torch.distributed: 2 processes, gloo on the CPU ------------------------------------


def _spawned(rank, init_file, out_dir, index, opts):
    faulthandler.dump_traceback_later(150, exit=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), "2"
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
    p = Planner(index, out_dir=out_dir, **opts)  # world from WORLD_SIZE
    ds = StreamDataset(index, p)  # rank and world from the environment
    ds.set_epoch(EPOCH)
    real = [s for b in ds for s, pad in zip(b.samples.tolist(), b.padded.tolist()) if not pad]
    out = [None, None]
    dist.all_gather_object(out, real)
    torch.save(out, os.path.join(out_dir, "rank%d.pt" % rank))
    dist.barrier()
    dist.destroy_process_group()


class DistributedRunTest(unittest.TestCase):
    def test_the_ranks_deliver_every_real_sample_once(self):
        if not (dist.is_available() and dist.is_gloo_available()):
            self.skipTest("torch.distributed with gloo is not available")
        root = os.path.join(TMP, "ddp")
        os.makedirs(root)
        mp.spawn(_spawned, args=(os.path.join(root, "init"), root, INDEX, dict(OPTS)), nprocs=2, join=True)
        gathered = torch.load(os.path.join(root, "rank0.pt"))
        delivered = sorted(s for per_rank in gathered for s in per_rank)
        m = adaptiveload.plan(INDEX, world=2, epoch=EPOCH, out=os.path.join(root, "ref.alm"), **OPTS)
        want = []
        for r in range(2):
            sc = Schedule(m.path, r, 2)
            for i in range(sc.n_batches):
                info = sc.info(i)
                want += [s for s, pad in zip(info.samples, info.padded) if not pad]
        self.assertEqual(len(delivered), len(set(delivered)))
        self.assertEqual(delivered, sorted(want))


if __name__ == "__main__":
    unittest.main(verbosity=2)
