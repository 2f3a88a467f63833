"""Resume states and the DataLoader path's checks: a state names the manifest it belongs to
and the step it stands at (StreamDataset, BatchSampler, the C stream), IndexDataset refuses
positions planned from another index, the step's delivered totals after skipped samples
(StepTotals), state dicts and members checked with messages that name the field, and
exactly-once coverage after a checkpoint in both resume orders under real torch.distributed
(2 processes, gloo on the CPU).

Run by tests/python/python_test.sh (Bazel sh_test, al_py_test) with ADAPTIVELOAD_LIB,
ADAPTIVELOAD_BIN and PYTHONPATH set. References (sample sets, token totals, payloads) come
from the plan's schedule and from Python's own tarfile reading, not from the stream.
"""

import faulthandler
import gc
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import warnings

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.utils.data import DataLoader
except ImportError as e:  # the sh_test checks first; this keeps direct runs honest too
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, IndexDataset, StepTotals, StreamDataset, collate_packed
from adaptiveload.schedule import Schedule

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")
END = (1 << 32) - 1
MEM = 20000


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def shard_files(d):
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".tar"))


def real_samples(sched, step=None):
    """(index position, tokens) of every real (not padding) sample of a schedule, per step."""
    out = []
    for i in range(sched.n_batches):
        info = sched.info(i)
        if step is None or info.step == step:
            out += [(s, t) for s, t, p in zip(info.samples, info.tokens, info.padded) if not p]
    return out


def index_keys(shard_dir):
    """Index position -> key, in the order `adaptiveload index` lists the shards' samples."""
    keys = []
    for path in shard_files(shard_dir):
        with tarfile.open(path) as t:
            for m in t.getmembers():
                k = os.path.basename(m.name).partition(".")[0]
                if not keys or keys[-1] != k:
                    keys.append(k)
    return keys


class Corpus:
    """synth -> index -> plan (world 2), a re-plan of it at step `at`, and an index of the
    same shards listed in reverse."""

    def __init__(self, root, samples=48):
        self.root = root
        self.shards = os.path.join(root, "shards")
        run("synth", "--out", self.shards, "--samples", samples, "--shards", 3, "--seed", 5)
        self.index = os.path.join(root, "corpus.alidx")
        run("index", "-o", self.index, *shard_files(self.shards))
        self.reversed_index = os.path.join(root, "reversed.alidx")
        run("index", "-o", self.reversed_index, *reversed(shard_files(self.shards)))
        self.manifest = os.path.join(root, "plan.alm")
        run("plan", "--index", self.index, "--world", 2, "--seed", 1, "--mem-tokens", MEM, "-o", self.manifest)
        self.at = 2
        self.replan = os.path.join(root, "replan.alm")
        run("plan", "--resume-from", self.manifest, "--at-step", self.at, "--world", 2, "-o", self.replan)


def setUpModule():
    global TMP, C
    TMP = tempfile.mkdtemp(prefix="al_resume_", dir=os.environ.get("TEST_TMPDIR"))
    C = Corpus(TMP)
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


class IndexOfTheManifestTest(unittest.TestCase):
    """BatchSampler + IndexDataset check the index as StreamDataset does."""

    def test_the_reversed_index_is_another_index(self):
        fp = [adaptiveload._handles.Index(p).fingerprint() for p in (C.index, C.reversed_index)]
        self.assertNotEqual(fp[0], fp[1])
        with self.assertRaisesRegex(adaptiveload.Error, "another index"):
            next(iter(StreamDataset(C.reversed_index, C.manifest, rank=0, world_size=2)))

    def test_a_dataloader_over_another_index_fails_before_any_batch(self):
        for workers in (0, 2):
            for with_info in (False, True):
                sampler = BatchSampler(C.manifest, rank=0, world_size=2, with_info=with_info)
                loader = DataLoader(IndexDataset(C.reversed_index), batch_sampler=sampler, num_workers=workers,
                                    collate_fn=collate_packed)
                with self.assertRaises(ValueError) as cm:
                    next(iter(loader))
                msg = str(cm.exception)
                self.assertIn(C.manifest, msg)
                self.assertIn(C.reversed_index, msg)
                self.assertIn("another index", msg)

    def test_the_right_index_reads_as_before(self):
        sampler = BatchSampler(C.manifest, rank=1, world_size=2)
        got = [b["index"].tolist() for b in DataLoader(IndexDataset(C.index), batch_sampler=sampler, num_workers=2,
                                                        collate_fn=collate_packed)]
        self.assertEqual(got, [list(i.samples) for i in sampler.infos()])
        # Positions are ints (with their origin), equal to the schedule's.
        first = next(iter(sampler))[0]
        self.assertIsInstance(first, int)
        self.assertEqual(first.origin.manifest, C.manifest)


class ManifestOfTheStateTest(unittest.TestCase):
    """A state names its manifest and step; a state of the pre-resume manifest is refused by
    the re-planned one at every position, the end included."""

    @classmethod
    def setUpClass(cls):
        cls.old = list(StreamDataset(C.index, C.manifest, rank=0, world_size=2))
        cls.new = list(StreamDataset(C.index, C.replan, rank=0, world_size=2))
        cls.n_new = len(cls.new)

    def test_replan_is_another_manifest_of_the_same_index_rank_world_seed_epoch(self):
        a, b = Schedule(C.manifest, 0, 2), Schedule(C.replan, 0, 2)
        for k in ("rank", "world", "seed", "epoch", "index_fingerprint"):
            self.assertEqual(getattr(a, k), getattr(b, k), k)
        self.assertNotEqual(a.manifest_fingerprint, b.manifest_fingerprint)
        self.assertGreater(len(self.old), self.n_new + 1)
        self.assertEqual(self.new[0].step, C.at)
        st = self.new[0].resume_state
        self.assertEqual(st["version"], 2)
        self.assertEqual(st["manifest_fingerprint"], b.manifest_fingerprint)
        self.assertEqual((st["next_step"], st["next_micro"]), (self.new[1].step, self.new[1].micro))

    def test_stream_state_of_the_old_manifest_is_refused_at_every_position(self):
        fp_old = Schedule(C.manifest, 0, 2).manifest_fingerprint
        fp_new = Schedule(C.replan, 0, 2).manifest_fingerprint
        # Positions n-1, n (the re-plan's end: it was accepted and yielded nothing) and n+1.
        for pos in (self.n_new - 1, self.n_new, self.n_new + 1):
            st = self.old[pos - 1].resume_state
            self.assertEqual(st["position"], pos)
            with self.assertRaises(ValueError) as cm:
                StreamDataset(C.index, C.replan, rank=0, world_size=2, state=st)
            self.assertIn("%016x" % fp_old, str(cm.exception))
            self.assertIn("%016x" % fp_new, str(cm.exception))
            # The C library refuses it too (the Python check left out).
            ds = StreamDataset(C.index, C.replan, rank=0, world_size=2)
            ds._loaded = dict(st)
            ds._check_manifest = lambda state: None
            with self.assertRaisesRegex(adaptiveload.Error, "belongs to manifest %016x" % fp_old):
                next(iter(ds))

    def test_end_state_of_its_own_manifest_is_accepted_and_a_forged_one_refused(self):
        end = self.new[-1].resume_state
        self.assertEqual((end["position"], end["next_step"], end["next_micro"]), (self.n_new, END, END))
        self.assertEqual(list(StreamDataset(C.index, C.replan, rank=0, world_size=2, state=end)), [])
        forged = dict(end, next_step=self.new[-1].step, next_micro=self.new[-1].micro + 1)
        ds = StreamDataset(C.index, C.replan, rank=0, world_size=2, state=forged)
        with self.assertRaisesRegex(adaptiveload.Error, "end there"):
            next(iter(ds))
        # A mid-epoch state of its own manifest still resumes exactly.
        mid = self.new[2].resume_state
        got = [b.position for b in StreamDataset(C.index, C.replan, rank=0, world_size=2, state=mid)]
        self.assertEqual(got, [b.position for b in self.new[3:]])

    def test_sampler_state_of_the_old_manifest_is_refused(self):
        old = BatchSampler(C.manifest, rank=0, world_size=2)
        it = iter(old)
        for _ in range(5):
            next(it)
        st = old.state_dict()
        self.assertEqual(st["position"], 5)
        self.assertEqual(st["manifest_fingerprint"], Schedule(C.manifest, 0, 2).manifest_fingerprint)
        self.assertEqual((st["next_step"], st["next_micro"]), (old.info(5).step, old.info(5).micro))
        new = BatchSampler(C.replan, rank=0, world_size=2)
        with self.assertRaises(ValueError) as cm:
            new.load_state_dict(st)
        self.assertIn("%016x" % st["manifest_fingerprint"], str(cm.exception))
        self.assertIn("%016x" % Schedule(C.replan, 0, 2).manifest_fingerprint, str(cm.exception))
        self.assertEqual(len(list(new)), new.num_batches, "nothing was loaded")
        # A step that is not the plan's at that position is refused; the end needs the end marker.
        with self.assertRaisesRegex(ValueError, "is step"):
            BatchSampler(C.manifest, rank=0, world_size=2).load_state_dict(dict(st, next_micro=st["next_micro"] + 7))
        end = new.state_at(new.num_batches)
        self.assertEqual((end["next_step"], end["next_micro"]), (END, END))
        s2 = BatchSampler(C.replan, rank=0, world_size=2)
        s2.load_state_dict(end)
        self.assertEqual(list(s2), [])
        with self.assertRaisesRegex(ValueError, "end of the rank"):
            s2.load_state_dict(dict(end, next_step=C.at, next_micro=0))

    def test_state_at_resumes_exactly_with_dataloader_workers(self):
        sampler = BatchSampler(C.manifest, rank=1, world_size=2)
        all_batches = [list(b) for b in sampler]
        loader = DataLoader(IndexDataset(C.index), batch_sampler=sampler, num_workers=2, collate_fn=collate_packed)
        it = iter(loader)
        used = [next(it)["index"].tolist() for _ in range(3)]
        st = sampler.state_at(3)  # the workers ran the sampler further ahead
        del it
        resumed = BatchSampler(C.manifest, rank=1, world_size=2)
        resumed.load_state_dict(st)
        rest = [b["index"].tolist() for b in DataLoader(IndexDataset(C.index), batch_sampler=resumed, num_workers=2,
                                                         collate_fn=collate_packed)]
        self.assertEqual(used + rest, all_batches)

    def test_version_1_states_are_refused_with_a_reason(self):
        st = dict(self.new[1].resume_state, version=1)
        del st["manifest_fingerprint"]
        with self.assertRaisesRegex(ValueError, "version 1 names no manifest"):
            StreamDataset(C.index, C.replan, rank=0, world_size=2, state=st)
        v1 = {"version": 1, "epoch": 0, "position": 2, "rank": 0, "world": 2, "seed": 1,
              "index_fingerprint": Schedule(C.manifest, 0, 2).index_fingerprint}
        with self.assertRaisesRegex(ValueError, "version 1 names no manifest"):
            BatchSampler(C.manifest, rank=0, world_size=2).load_state_dict(v1)
        # The C library says so too (the Python check left out).
        ds = StreamDataset(C.index, C.replan, rank=0, world_size=2)
        ds._loaded = dict(self.new[1].resume_state, version=1)
        with self.assertRaisesRegex(adaptiveload.Error, "version 1 names no manifest"):
            next(iter(ds))


class StateMessagesTest(unittest.TestCase):
    """Malformed states and members: ValueError naming what is wrong."""

    def test_string_values_and_missing_keys_name_the_key(self):
        good = next(iter(StreamDataset(C.index, C.manifest, rank=0, world_size=2))).resume_state
        for key in ("stride", "position", "rank"):
            with self.assertRaisesRegex(ValueError, "state\\['%s'\\]" % key):
                StreamDataset(C.index, C.manifest, rank=0, world_size=2, state=dict(good, **{key: "1"}))
            bad = dict(good)
            del bad[key]
            with self.assertRaisesRegex(ValueError, "lacks '%s'" % key):
                StreamDataset(C.index, C.manifest, rank=0, world_size=2, state=bad)
        s = BatchSampler(C.manifest, rank=0, world_size=2)
        st = s.state_at(2)
        for key in ("epoch", "position", "manifest_fingerprint"):
            with self.assertRaisesRegex(ValueError, "state\\['%s'\\]" % key):
                s.load_state_dict(dict(st, **{key: "2"}))
            bad = dict(st)
            del bad[key]
            with self.assertRaisesRegex(ValueError, "lacks '%s'" % key):
                s.load_state_dict(bad)
        with self.assertRaisesRegex(ValueError, "state\\['position'\\] must be in"):
            s.load_state_dict(dict(st, position=-1))

    def test_members_as_one_string(self):
        a = IndexDataset(C.index, members="latent")
        self.assertEqual(a.members, ["latent"])
        b = IndexDataset(C.index, members=["latent"])
        self.assertTrue(torch.equal(a[3]["data"], b[3]["data"]))
        one = next(iter(StreamDataset(C.index, C.manifest, rank=0, world_size=2, members="latent")))
        ref = next(iter(StreamDataset(C.index, C.manifest, rank=0, world_size=2, members=["latent"])))
        self.assertEqual(list(one.members), ["latent"])
        self.assertTrue(torch.equal(one.data, ref.data))
        with self.assertRaisesRegex(ValueError, "twice: \\['latent', 'latent'\\]"):
            IndexDataset(C.index, members=["latent", "latent"])

    def test_py2_npy_shapes(self):
        d = os.path.join(TMP, "py2")
        os.makedirs(d, exist_ok=True)
        arr = torch.arange(16 * 1 * 8 * 8, dtype=torch.float32)
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (16L, 1L, 8L, 8L), }"
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1")
        npy += arr.numpy().tobytes()
        with tarfile.open(os.path.join(d, "py2.tar"), "w") as t:
            for name, data in (("k0.json", json.dumps({"width": 64, "height": 64, "frames": 1}).encode()),
                               ("k0.latent.npy", npy)):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
        idx = os.path.join(d, "py2.alidx")
        run("index", "-o", idx, os.path.join(d, "py2.tar"))
        item = IndexDataset(idx, members=["latent.npy"])[0]
        m = item["members"]["latent.npy"]
        self.assertEqual((m["dtype"], m["shape"]), ("float32", (16, 1, 8, 8)))
        self.assertEqual(bytes(m["data"].numpy()), arr.numpy().tobytes())


def skip_corpus(root, world):
    """A corpus whose sample `missing` lacks its KEY.txt member (all others have one), planned
    for `world` ranks: streaming members latent+txt with on_error="skip" skips it."""
    shards = os.path.join(root, "shards")
    run("synth", "--out", shards, "--samples", 40, "--shards", 2, "--seed", 9)
    keys = index_keys(shards)
    missing = keys[len(keys) // 2]
    for path in shard_files(shards):
        with tarfile.open(path) as t:
            members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
        with tarfile.open(path, "w") as t:
            for m, data in members:
                t.addfile(m, io.BytesIO(data))
                k = os.path.basename(m.name).partition(".")[0]
                if m.name.endswith(".latent") and k != missing:
                    ti = tarfile.TarInfo(k + ".txt")
                    txt = ("caption of %s" % k).encode()
                    ti.size = len(txt)
                    t.addfile(ti, io.BytesIO(txt))
    index = os.path.join(root, "skip.alidx")
    run("index", "-o", index, *shard_files(shards))
    manifest = os.path.join(root, "skip-w%d.alm" % world)
    run("plan", "--index", index, "--world", world, "--seed", 2, "--mem-tokens", MEM, "-o", manifest)
    return index, manifest, keys.index(missing), shards


def weight_of(key):
    """The per-token loss weight of a sample in the normalisation checks."""
    return 1.0 + (sum(key.encode()) % 17) / 7.0


def step_reference(manifest, world, missing):
    """step -> (planned tokens, delivered tokens, sum of tokens x weight over delivered real
    samples), from every rank's schedule and the index keys (not from the stream)."""
    out = {}
    keys = index_keys(os.path.join(os.path.dirname(manifest), "shards"))
    for r in range(world):
        sched = Schedule(manifest, r, world)
        for i in range(sched.n_batches):
            info = sched.info(i)
            planned, delivered, wsum = out.get(info.step, (0, 0, 0.0))
            for s, t, p in zip(info.samples, info.tokens, info.padded):
                if p:
                    continue
                planned += t
                if s != missing:
                    delivered += t
                    wsum += t * weight_of(keys[s])
            out[info.step] = (planned, delivered, wsum)
    return out


def normalised_step_grads(ds, world, model=None):
    """Trains a one-weight model w on the stream: loss_m = W / N * sum over real delivered
    samples of weight(key) * tokens * w, N the planned step_tokens; StepTotals rescales at
    each step's end. Returns step -> (planned, delivered, gradient of w), and the batches'
    skip fields."""
    w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64)) if model is None else None
    params = [w] if model is None else list(model.parameters())
    totals = StepTotals()
    out, skips = {}, []
    for b in ds:
        real = [(k, t) for k, t, p in zip(b.keys, (b.cu_seqlens[1:] - b.cu_seqlens[:-1]).tolist(), b.padded.tolist())
                if not p]
        x = torch.tensor([[weight_of(k) * t] for k, t in real], dtype=torch.float64).view(-1, 1)
        if model is None:
            loss = (x.sum() * w).sum() * world / b.step_tokens
            loss.backward()
        else:
            with adaptiveload.grad_sync(model, b.last_in_step):
                loss = model(x).sum() * world / b.step_tokens
                loss.backward()
        skips.append((b.step, b.keys, b.skipped, b.skipped_real_samples, b.skipped_real_tokens, b.planned_tokens,
                      b.tokens))
        if totals.add(b):
            totals.rescale(params)
            out[b.step] = (totals.planned_tokens, totals.delivered_tokens, float(params[0].grad.view(-1)[0]))
            for p in params:
                p.grad = None
    return out, skips


class LossAfterSkipTest(unittest.TestCase):
    def test_delivered_totals_and_exact_normalisation_one_rank(self):
        root = os.path.join(TMP, "skip1")
        os.makedirs(root)
        index, manifest, missing, shards = skip_corpus(root, 1)
        ref = step_reference(manifest, 1, missing)
        self.assertTrue(any(p != d for p, d, _ in ref.values()), "the missing sample is scheduled as a real sample")
        ds = StreamDataset(index, manifest, rank=0, world_size=1, members=["latent", "txt"], on_error="skip",
                           max_skip_fraction=1)
        got, skips = normalised_step_grads(ds, 1)
        self.assertEqual(sorted(got), sorted(ref))
        missing_key = index_keys(shards)[missing]
        for step, (planned, delivered, wsum) in ref.items():
            self.assertEqual(got[step][:2], (planned, delivered), step)
            self.assertAlmostEqual(got[step][2], wsum / delivered, places=12)
        skipped = [s for s in skips if s[2]]
        self.assertTrue(skipped)
        missing_tokens = {s: t for s, t in real_samples(Schedule(manifest, 0, 1))}[missing]
        for step, keys, sk, n_real, t_real, planned_tokens, tokens in skips:
            self.assertEqual([k for k, _ in sk], [missing_key] * len(sk))
            self.assertNotIn(missing_key, keys)
            self.assertEqual(planned_tokens - tokens, len(sk) * missing_tokens)
            self.assertLessEqual(n_real, len(sk))
            self.assertEqual(t_real, n_real * missing_tokens)
        self.assertEqual(sum(s[4] for s in skips), sum(p - d for p, d, _ in ref.values()))
        # The CLI's --json lines carry the same counts where samples were skipped.
        lines = [json.loads(x) for x in run("stream", "--index", index, "--manifest", manifest, "--rank", 0,
                                            "--members", "latent,txt", "--on-error", "skip", "--max-skip-fraction", 1,
                                            "--json").splitlines()]
        self.assertEqual(len(lines), len(skips))
        for line, (step, keys, sk, n_real, t_real, planned_tokens, tokens) in zip(lines, skips):
            if sk:
                self.assertEqual((line["skipped_real_samples"], line["skipped_real_tokens"], line["planned_tokens"]),
                                 (n_real, t_real, planned_tokens))
            else:
                self.assertNotIn("skipped_real_tokens", line)


# -- under torch.distributed: 2 processes, gloo on the CPU ------------------------------------


def _init(rank, world, init_file):
    # A hang (a collective one rank never joins) fails with every thread's stack instead of
    # running into the test's timeout silently.
    faulthandler.dump_traceback_later(150, exit=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)


def _gather(obj):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _stream_resume(rank, planner, epoch, k, order, workers):
    """Epoch `epoch` of this rank, checkpointed after k micro-batches and resumed in a fresh
    dataset in `order`; the real samples delivered before and after."""
    ds = StreamDataset(C_INDEX, planner, rank=rank, world_size=2)
    ds.set_epoch(epoch)
    first, state = [], None
    it = iter(ds)
    for b in it:
        first.append(b)
        if len(first) == k:
            state = b.resume_state
            break
    it.close()  # the first pass's reader threads stop before DataLoader workers fork
    del it
    resumed = StreamDataset(C_INDEX, planner, rank=rank, world_size=2)
    if order == "load-then-set":
        resumed.load_state_dict(state)
        resumed.set_epoch(epoch)
    else:
        resumed.set_epoch(epoch)
        resumed.load_state_dict(state)
    rest = list(DataLoader(resumed, batch_size=None, num_workers=workers)) if workers else list(resumed)
    real = lambda bs: [s for b in bs for s, p in zip(b.samples.tolist(), b.padded.tolist()) if not p]
    return real(first) + real(rest), [b.position for b in first + rest]


def _sampler_resume(rank, planner, epoch, k, order, workers):
    sampler = BatchSampler(planner, rank=rank, world_size=2, epoch=0)
    sampler.set_epoch(epoch)
    loader = DataLoader(IndexDataset(C_INDEX), batch_sampler=sampler, num_workers=workers, collate_fn=collate_packed)
    it = iter(loader)
    first = [next(it) for _ in range(k)]
    state = sampler.state_at(k)  # after the k-th micro-batch (the workers ran the sampler ahead)
    del it
    resumed = BatchSampler(planner, rank=rank, world_size=2, epoch=0)
    if order == "load-then-set":
        resumed.load_state_dict(state)
        resumed.set_epoch(epoch)
    else:
        resumed.set_epoch(epoch)
        resumed.load_state_dict(state)
    infos = list(resumed.infos())
    rest = list(DataLoader(IndexDataset(C_INDEX), batch_sampler=resumed, num_workers=workers,
                           collate_fn=collate_packed))
    pads = [list(i.padded) for i in list(sampler.infos(0))[:k]] + [list(i.padded) for i in infos]
    real = [s for b, pad in zip(first + rest, pads) for s, p in zip(b["index"].tolist(), pad) if not p]
    return real, list(range(k)) + [i.position for i in infos]


def _ddp_main(rank, init_file, out_dir, skip_index, skip_manifest):
    _init(rank, 2, init_file)
    results = {}
    planner = adaptiveload.Planner(C_INDEX, world=2, seed=1, mem_tokens=MEM, out_dir=out_dir)
    for kind, fn in (("stream", _stream_resume), ("sampler", _sampler_resume)):
        for order, workers in (("load-then-set", 2), ("set-then-load", 0)):
            real, positions = fn(rank, planner, 1, 3, order, workers)
            results[(kind, order, workers)] = (_gather(real), positions)
    # The step's delivered totals over both ranks after a skip, with a real DDP model.
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1, bias=False).double())
    with torch.no_grad():
        model.module.weight.zero_()
    ds = StreamDataset(skip_index, skip_manifest, rank=rank, world_size=2, members=["latent", "txt"],
                       on_error="skip", max_skip_fraction=1)
    results["skip"] = normalised_step_grads(ds, 2, model)[0]
    torch.save(results, os.path.join(out_dir, "rank%d.pt" % rank))
    # The DDP model goes before the group: its C++ Reducer holds the gloo group, and a Reducer
    # freed after destroy_process_group frees the group with the GIL held while a gloo worker
    # thread may need the GIL to free a Python tensor of the last collective (a deadlock).
    del model
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


C_INDEX = None  # set in the spawned processes from the environment


def _spawned(rank, init_file, out_dir, skip_index, skip_manifest, index):
    global C_INDEX
    C_INDEX = index
    _ddp_main(rank, init_file, out_dir, skip_index, skip_manifest)


class DistributedResumeTest(unittest.TestCase):
    """Checkpoint mid-epoch, resume in both orders (load_state_dict then set_epoch, and the
    reverse), under torch.distributed with 2 gloo processes: every real sample of the epoch
    once across ranks; and StepTotals' all-reduce gives the exact delivered normalisation."""

    def test_exactly_once_in_both_orders_and_the_step_totals_over_ranks(self):
        if not (dist.is_available() and dist.is_gloo_available()):
            self.skipTest("torch.distributed with gloo is not available")
        root = os.path.join(TMP, "ddp")
        os.makedirs(root)
        skip_root = os.path.join(root, "skip")
        os.makedirs(skip_root)
        skip_index, skip_manifest, missing, _ = skip_corpus(skip_root, 2)
        mp.spawn(_spawned, args=(os.path.join(root, "init"), root, skip_index, skip_manifest, C.index), nprocs=2,
                 join=True)
        res = [torch.load(os.path.join(root, "rank%d.pt" % r)) for r in range(2)]
        planner = adaptiveload.Planner(C.index, world=2, seed=1, mem_tokens=MEM, out_dir=os.path.join(root, "ref"))
        scheds = [Schedule(planner.path(1), r, 2) for r in range(2)]
        want = sorted(s for sc in scheds for s, _ in real_samples(sc))
        self.assertEqual(len(want), len(set(want)))
        for key in [k for k in res[0] if k != "skip"]:
            gathered, _ = res[0][key]
            delivered = sorted(s for per_rank in gathered for s in per_rank)
            self.assertEqual(delivered, want, key)
            for r in range(2):
                self.assertEqual(res[r][key][1], list(range(scheds[r].n_batches)), (key, r))
        ref = step_reference(skip_manifest, 2, missing)
        self.assertTrue(any(p != d for p, d, _ in ref.values()))
        for r in range(2):
            got = res[r]["skip"]
            self.assertEqual(sorted(got), sorted(ref))
            for step, (planned, delivered, wsum) in ref.items():
                self.assertEqual(got[step][:2], (planned, delivered), (r, step))
                self.assertAlmostEqual(got[step][2], wsum / delivered, places=12)


if __name__ == "__main__":
    print("adaptiveload resume test: torch %s, library %s" % (torch.__version__, os.environ.get("ADAPTIVELOAD_LIB")))
    unittest.main(verbosity=2)
