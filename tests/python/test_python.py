"""Python package tests: BatchSampler, IndexDataset, StreamDataset with real DataLoaders
(several worker processes) on a small synthetic corpus made by the CLI; the fused AdaLN
module's import and argument check (no GPU needed).

Run by tests/python/python_test.sh (Bazel sh_test) with ADAPTIVELOAD_LIB (the shared
library), ADAPTIVELOAD_BIN (the CLI) and PYTHONPATH (python/) set. Payload bytes are
checked against Python's own tarfile reading of the shards, independent of the C code.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError as e:  # the sh_test checks first; this keeps direct runs honest too
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload
from adaptiveload import BatchSampler, IndexDataset, StreamDataset, StreamError, collate_packed

BIN = os.environ.get("ADAPTIVELOAD_BIN", "adaptiveload")


def run(*args):
    p = subprocess.run([BIN] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("adaptiveload %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p.stdout


def tar_payloads(shard_dir, ext="latent"):
    """key -> payload bytes, read with Python's tarfile."""
    out = {}
    for name in sorted(os.listdir(shard_dir)):
        if not name.endswith(".tar"):
            continue
        with tarfile.open(os.path.join(shard_dir, name)) as t:
            for m in t.getmembers():
                base = os.path.basename(m.name)
                key, _, e = base.partition(".")
                if e == ext:
                    out[key] = t.extractfile(m).read()
    return out


class Corpus:
    """synth -> index -> plan (world 2), in a temp dir shared by the tests."""

    def __init__(self, root, samples=36, world=2, epochs=(0,)):
        self.root = root
        self.shards = os.path.join(root, "shards")
        run("synth", "--out", self.shards, "--samples", samples, "--shards", 3, "--seed", 3)
        self.index = os.path.join(root, "corpus.alidx")
        run("index", "-o", self.index, self.shards)
        # Small micro-batches so that the plan has many of them.
        for e in epochs:
            run("plan", "--index", self.index, "--world", world, "--seed", 1, "--epoch", e, "--mem-tokens", 20000,
                "-o", os.path.join(root, "plan-%d.alm" % e))
        self.manifest = os.path.join(root, "plan-0.alm")
        self.payload = tar_payloads(self.shards)


def setUpModule():
    global TMP, C
    TMP = tempfile.mkdtemp(prefix="al_pytest_", dir=os.environ.get("TEST_TMPDIR"))
    C = Corpus(TMP, epochs=(0, 1))
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def stream_all(ds):
    return [b for b in ds]


class BatchSamplerTest(unittest.TestCase):
    def test_lists_positions_and_states(self):
        s = BatchSampler(C.manifest, rank=0, world_size=2)
        self.assertEqual(s.rank, 0)
        self.assertEqual(s.world_size, 2)
        self.assertEqual(s.epoch, 0)
        batches = list(s)
        self.assertGreater(len(batches), 3)
        self.assertEqual(len(batches), len(s))
        infos = list(s.infos())
        self.assertEqual([list(i.samples) for i in infos], batches)
        self.assertTrue(infos[-1].last_in_step)
        self.assertTrue(all(i.step_samples > 0 and i.step_tokens > 0 for i in infos))
        # Ranks together cover every planned sample once (padding aside).
        other = BatchSampler(C.manifest, rank=1, world_size=2)
        real = []
        for smp in (s, other):
            for info in smp.infos():
                real += [x for x, p in zip(info.samples, info.padded) if not p]
        self.assertEqual(len(real), len(set(real)))
        # Mid-pass state: the next pass yields exactly the rest.
        it = iter(s)
        head = [next(it) for _ in range(3)]
        state = s.state_dict()
        self.assertEqual(state["position"], 3)
        s2 = BatchSampler(C.manifest, rank=0, world_size=2)
        s2.load_state_dict(state)
        self.assertEqual(len(s2), len(batches) - 3)
        self.assertEqual(head + list(s2), batches)
        self.assertEqual(list(s2), batches, "a loaded state applies to one pass")
        with self.assertRaisesRegex(ValueError, "rank"):
            BatchSampler(C.manifest, rank=1, world_size=2).load_state_dict(state)

    def test_epochs_and_world_checks(self):
        s = BatchSampler(C.manifest, rank=0, world_size=2)
        s.set_epoch(0)
        with self.assertRaisesRegex(ValueError, "epoch"):
            s.set_epoch(1)
        t = BatchSampler(os.path.join(TMP, "plan-{epoch}.alm"), rank=1, world_size=2)
        e0 = list(t)
        t.set_epoch(1)
        self.assertEqual(t.epoch, 1)
        self.assertNotEqual(list(t), e0)
        with self.assertRaisesRegex(StreamError, "world of 2"):
            BatchSampler(C.manifest, rank=0, world_size=4)
        os.environ["WORLD_SIZE"], os.environ["RANK"] = "2", "1"
        try:
            self.assertEqual(BatchSampler(C.manifest).rank, 1)
            os.environ["WORLD_SIZE"] = "8"
            with self.assertRaisesRegex(StreamError, "WORLD_SIZE is 8"):
                BatchSampler(C.manifest)
        finally:
            del os.environ["WORLD_SIZE"], os.environ["RANK"]

    def test_dataloader_with_workers(self):
        s = BatchSampler(C.manifest, rank=1, world_size=2)
        ds = IndexDataset(C.index)
        loader = DataLoader(ds, batch_sampler=s, num_workers=3, collate_fn=collate_packed)
        n = 0
        for info, batch in zip(s.infos(), loader):
            self.assertEqual(batch["index"].tolist(), list(info.samples))
            offs = batch["offsets"].tolist()
            for i, key in enumerate(batch["keys"]):
                self.assertEqual(offs[i] % 64, 0)
                got = bytes(batch["data"][offs[i]:offs[i] + int(batch["sizes"][i])].numpy())
                self.assertEqual(got, C.payload[key], key)
            self.assertEqual(batch["cu_seqlens"].shape[0], len(batch["keys"]) + 1)
            n += 1
        self.assertEqual(n, len(s))


class StreamDatasetTest(unittest.TestCase):
    def check_batch(self, b):
        offs = b.offsets.tolist()
        self.assertEqual(len(offs), len(b.keys) + 1)
        self.assertEqual(b.cu_seqlens.dtype, torch.int32)
        self.assertEqual(int(b.cu_seqlens[0]), 0)
        self.assertEqual(int(b.cu_seqlens[-1]), b.tokens)
        for i, key in enumerate(b.keys):
            self.assertEqual(offs[i] % 64, 0)
            self.assertEqual(bytes(b.sample(i).numpy()), C.payload[key], key)
        lat = b.view(torch.bfloat16)
        if b.keys:
            i = len(b.keys) - 1
            # Random bytes hold NaN patterns: compare the bf16 views bit for bit.
            self.assertEqual(lat.dtype, torch.bfloat16)
            self.assertTrue(torch.equal(lat[offs[i] // 2:(offs[i] + int(b.sizes[i])) // 2].view(torch.int16),
                                        b.sample(i, torch.bfloat16).view(torch.int16)))

    def test_main_process_order_contents_and_resume(self):
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=2, threads=2, prefetch=3)
        batches = stream_all(ds)
        s = BatchSampler(C.manifest, rank=0, world_size=2)
        self.assertEqual(len(batches), len(s))
        self.assertEqual(len(ds), len(s))
        for b, info in zip(batches, s.infos()):
            self.assertEqual(b.samples.tolist(), list(info.samples))
            self.assertEqual((b.step, b.micro, b.last_in_step), (info.step, info.micro, info.last_in_step))
            self.assertEqual(b.padded.tolist(), [bool(p) for p in info.padded])
            self.check_batch(b)
        self.assertEqual([b.position for b in batches], list(range(len(batches))))
        # Tensors are owned by default: still intact after the pass.
        self.check_batch(batches[0])
        # Resume right after batch k.
        k = len(batches) // 2
        rest = stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2, state=batches[k].resume_state))
        self.assertEqual([b.keys for b in rest], [b.keys for b in batches[k + 1:]])
        # zero_copy views, one kept at a time.
        zc = StreamDataset(C.index, C.manifest, rank=0, world_size=2, zero_copy=True)
        for b, ref in zip(zc, batches):
            self.assertEqual(b.keys, ref.keys)
            self.check_batch(b)

    def test_dataloader_workers_restore_order(self):
        ref = stream_all(StreamDataset(C.index, C.manifest, rank=1, world_size=2))
        for workers in (2, 3):
            ds = StreamDataset(C.index, C.manifest, rank=1, world_size=2, threads=1)
            got = list(DataLoader(ds, batch_size=None, num_workers=workers))
            self.assertEqual([b.position for b in got], list(range(len(ref))), "workers=%d" % workers)
            self.assertEqual([b.keys for b in got], [b.keys for b in ref])
            for b in got[:4]:
                self.check_batch(b)
            # Resume after batch k with workers: exactly the rest, in order.
            k = 2
            ds2 = StreamDataset(C.index, C.manifest, rank=1, world_size=2, state=got[k].resume_state)
            rest = list(DataLoader(ds2, batch_size=None, num_workers=workers))
            self.assertEqual([b.position for b in rest], list(range(k + 1, len(ref))))

    def test_batch_costs_and_stats_local(self):
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=2, threads=1, prefetch=2)
        self.assertEqual(ds.stats(), {})
        it = iter(ds)
        first = next(it)
        live = ds.stats()  # the running stream's totals
        self.assertEqual(live["batches"], 1)
        for k in ("batches", "samples", "bytes", "stall_seconds", "total_batches"):
            self.assertEqual(live[k], first.stream_stats[k], k)  # nothing delivered in between
        self.assertEqual(set(live), set(first.stream_stats) - {"worker"})
        batches = [first] + list(it)
        st = ds.stats()  # after the pass: its final totals
        self.assertEqual(st["batches"], len(batches))
        self.assertEqual(st["total_batches"], len(batches))
        self.assertEqual(st["samples"], sum(len(b) for b in batches))
        for k in ("bytes_fetched", "requests", "cache_hits", "cache_misses", "evicted_bytes"):
            self.assertEqual(st[k], 0, k)
        self.assertIsInstance(st["stall_seconds"], float)
        self.assertIsInstance(st["pinned"], bool)
        for b in batches:
            self.assertIsInstance(b.stall_seconds, float)
            self.assertGreaterEqual(b.stall_seconds, 0.0)
            self.assertEqual((b.fetched_bytes, b.requests, b.cache_hits, b.cache_misses), (0, 0, 0, 0))
            self.assertEqual(b.stream_stats["worker"], 0)
            self.assertEqual(b.stream_stats["batches"], b.position + 1)
        self.assertAlmostEqual(sum(b.stall_seconds for b in batches), st["stall_seconds"], places=9)
        self.assertEqual(batches[-1].stream_stats["stall_seconds"], st["stall_seconds"])

    def test_worker_streams_report_through_their_batches(self):
        ds = StreamDataset(C.index, C.manifest, rank=1, world_size=2, threads=1)
        got = list(DataLoader(ds, batch_size=None, num_workers=2))
        self.assertEqual(ds.stats(), {})  # the main process ran no stream
        last = {}
        for b in got:
            last[b.stream_stats["worker"]] = b.stream_stats
        self.assertEqual(sorted(last), [0, 1])
        self.assertEqual(sum(v["batches"] for v in last.values()), len(got))
        for w, v in last.items():
            stall = sum(b.stall_seconds for b in got if b.stream_stats["worker"] == w)
            self.assertAlmostEqual(stall, v["stall_seconds"], places=9)

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device: workers forked after CUDA's init need one")
    def test_dataloader_workers_after_cuda_is_initialised(self):
        # A training process has CUDA initialised before its DataLoader forks workers; a forked
        # child cannot use CUDA, so a worker's stream must not pin (cudaHostAlloc) its buffers.
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        ref = stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2))
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=2, threads=1)
        got = list(DataLoader(ds, batch_size=None, num_workers=2))
        self.assertEqual([b.keys for b in got], [b.keys for b in ref])

    def test_worker_states_follow_statefuldataloader_protocol(self):
        # What StatefulDataLoader does per worker: state_dict() inside the worker after a
        # batch, load_state_dict() into that worker's copy later. Simulated in-process.
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=2)
        it = iter(ds)
        first = [next(it) for _ in range(2)]
        state = ds.state_dict()
        self.assertEqual(state["position"], 2)
        it.close()
        ds2 = StreamDataset(C.index, C.manifest, rank=0, world_size=2)
        ds2.load_state_dict(state)
        rest = stream_all(ds2)
        full = stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2))
        self.assertEqual([b.keys for b in first + rest], [b.keys for b in full])

    def test_errors_fail_or_skip_naming_the_key(self):
        root = os.path.join(TMP, "broken")
        os.makedirs(root)
        shutil.copytree(C.shards, os.path.join(root, "shards"))
        index = os.path.join(root, "i.alidx")
        run("index", "-o", index, os.path.join(root, "shards"))
        man = os.path.join(root, "m.alm")
        run("plan", "--index", index, "--world", 1, "--mem-tokens", 20000, "-o", man)
        victim = os.path.join(root, "shards", "shard-000001.tar")
        with open(victim, "r+b") as f:
            f.truncate(os.path.getsize(victim) // 2)
        with tarfile.open(os.path.join(C.shards, "shard-000001.tar")) as t:
            victim_keys = {os.path.basename(m.name).partition(".")[0] for m in t.getmembers()}
        with self.assertRaises(StreamError) as cm:
            stream_all(StreamDataset(index, man, rank=0))
        msg = str(cm.exception)
        self.assertIn("shard-000001.tar", msg)
        self.assertTrue(any("'%s'" % k in msg for k in victim_keys), msg)
        skipped = []
        # A third of the samples: past the default skip budget (1%).
        for b in StreamDataset(index, man, rank=0, on_error="skip", max_skip_fraction=1):
            skipped += [k for k, _ in b.skipped]
            self.assertTrue(all(k not in victim_keys for k in b.keys))
            for k, reason in b.skipped:
                self.assertIn(k, reason)
        self.assertEqual(set(skipped), victim_keys)

    def test_a_copied_corpus_streams_with_root(self):
        """A corpus copied elsewhere (the original gone) streams the same batches with
        root=FROM=TO, in StreamDataset and IndexDataset; without it the missing shard is an error."""
        ref = stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2))
        copy = os.path.join(TMP, "shards-copy")
        shutil.copytree(C.shards, copy)
        away = C.shards + ".away"
        os.rename(C.shards, away)
        try:
            with self.assertRaises(StreamError):
                stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2))
            for root in ("%s=%s" % (C.shards, copy), {C.shards: copy}, [(C.shards, copy)]):
                got = stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2, root=root))
                self.assertEqual([b.keys for b in got], [b.keys for b in ref])
                self.check_batch(got[0])
            ds = IndexDataset(C.index, root={C.shards: copy})
            self.assertEqual(len(ds), 36)
            with self.assertRaises(StreamError):  # nothing starts with /nowhere
                stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2, root="/nowhere=" + copy))
            with self.assertRaises(ValueError):
                StreamDataset(C.index, C.manifest, rank=0, world_size=2, root="no-equals-sign")
        finally:
            os.rename(away, C.shards)
            shutil.rmtree(copy, ignore_errors=True)

    def test_device_needs_cuda(self):
        if torch.cuda.is_available():
            self.skipTest("CUDA present: covered by tools/gpu_stream_check.sh")
        with self.assertRaisesRegex(StreamError, "CUDA"):
            stream_all(StreamDataset(C.index, C.manifest, rank=0, world_size=2, device="cuda"))


class PlanningTest(unittest.TestCase):
    """adaptiveload.plan / Planner: the C planner in-process, byte-identical to the CLI."""

    def test_plan_is_byte_identical_to_the_cli(self):
        for policy in ("adaptive", "equal-token"):
            cli = os.path.join(TMP, "cli-%s.alm" % policy)
            run("plan", "--index", C.index, "--world", 2, "--seed", 5, "--epoch", 1, "--mem-tokens", 20000,
                "--micro-per-step", 2, "--window", 3, "--policy", policy, "-o", cli)
            out = os.path.join(TMP, "py-%s.alm" % policy)
            m = adaptiveload.plan(C.index, 2, epoch=1, seed=5, mem_tokens=20000, micro_per_step=2, window=3,
                                  policy=policy, out=out)
            self.assertEqual(m.path, out)
            with open(cli, "rb") as a, open(out, "rb") as b:
                self.assertEqual(a.read(), b.read(), policy)
            info = m.info
            self.assertEqual((info["policy"], info["world"], info["epoch"], info["seed"]), (policy, 2, 1, 5))
            self.assertEqual(info["micro_per_step"], 2)
            self.assertEqual(info["unequal_steps"], 0)
            self.assertEqual(info["step_tokens"], 2 * 2 * 20000)
            self.assertEqual(info["samples"] + info["rejected"], info["index_samples"])
        # Deterministic: the same call twice gives the same bytes; another seed does not.
        a = adaptiveload.plan(C.index, 2, seed=9, mem_tokens=20000)
        b = adaptiveload.plan(C.index, 2, seed=9, mem_tokens=20000)
        c = adaptiveload.plan(C.index, 2, seed=10, mem_tokens=20000)

        def read(m):
            with open(m.path, "rb") as f:
                return f.read()

        self.assertNotEqual(a.path, b.path)
        self.assertEqual(read(a), read(b))
        self.assertNotEqual(read(a), read(c))

    def test_options_are_checked(self):
        with self.assertRaises(TypeError):
            adaptiveload.plan(C.index, 2, step_ms=1)
        with self.assertRaises(ValueError):
            adaptiveload.plan(C.index, 2, policy="fast")
        with self.assertRaises(StreamError) as e:  # more tokens than K micro-batches of M_mem hold
            adaptiveload.plan(C.index, 2, mem_tokens=20000, micro_per_step=1, step_tokens=100000)
        self.assertIn("micro-per-step", str(e.exception))

    def test_numbers_are_checked_like_the_cli_nothing_wraps(self):
        # ctypes would store these modulo 2^bits: world 2^32 + 2 as 2, micro_per_step -1 as 2^32 - 1.
        for kw in ({"world": (1 << 32) + 2}, {"world": 0}, {"epoch": -1}, {"seed": 1 << 64},
                   {"micro_per_step": -1}, {"window": 1000001}, {"mem_tokens": 1 << 64},
                   {"start_step": 1 << 32}, {"geometry": (4, 8, 1, 2, -2)}, {"comp_ms": float("nan")}):
            args = dict({"world": 2}, **kw)
            with self.assertRaisesRegex(ValueError, next(iter(kw))) as cm:
                adaptiveload.plan(C.index, **args)
            self.assertNotIn("StreamError", type(cm.exception).__name__)
        with self.assertRaises(TypeError):  # 2.5 ranks is not a whole number
            adaptiveload.plan(C.index, 2.5)
        for kw in ({"threads": -1}, {"prefetch": 1 << 40}, {"rank": -1}, {"max_member_bytes": -5}):
            with self.assertRaisesRegex(ValueError, next(iter(kw))):
                StreamDataset(C.index, C.manifest, **dict({"rank": 0, "world_size": 2}, **kw))
        first = next(iter(StreamDataset(C.index, C.manifest, rank=0, world_size=2)))
        bad = dict(first.resume_state, position=-1)
        with self.assertRaisesRegex(ValueError, "position"):
            next(iter(StreamDataset(C.index, C.manifest, rank=0, world_size=2, state=bad)))

    def test_sampler_set_epoch_plans_in_process(self):
        planner = adaptiveload.Planner(C.index, world=2, seed=1, mem_tokens=20000)
        for rank in (0, 1):
            s = BatchSampler(planner, rank=rank, world_size=2)
            for epoch in (0, 1):
                s.set_epoch(epoch)
                self.assertEqual(s.epoch, epoch)
                ref = BatchSampler(os.path.join(TMP, "plan-%d.alm" % epoch), rank=rank, world_size=2)
                self.assertEqual(list(s), list(ref))  # the CLI's plan of that epoch
        # Lock-step and loss normalisation: per step, both ranks run the same number of
        # micro-batches, and the real tokens of all ranks add up to step_tokens.
        ranks = [list(BatchSampler(planner, rank=r, world_size=2).infos()) for r in (0, 1)]
        steps = {}
        for infos in ranks:
            for i in infos:
                st = steps.setdefault(i.step, {"n": [], "tokens": 0, "samples": 0, "totals": set()})
                if i.micro == 0:
                    st["n"].append(i.n_micro)
                st["tokens"] += sum(t for t, p in zip(i.tokens, i.padded) if not p)
                st["samples"] += sum(1 for p in i.padded if not p)
                st["totals"].add((i.step_tokens, i.step_samples))
        self.assertGreater(len(steps), 2)
        for step, st in steps.items():
            self.assertEqual(len(set(st["n"])), 1, "step %d: micro-batch counts %s" % (step, st["n"]))
            self.assertEqual(st["totals"], {(st["tokens"], st["samples"])}, "step %d" % step)

    def test_stream_dataset_set_epoch(self):
        planner = adaptiveload.Planner(C.index, world=2, seed=1, mem_tokens=20000)
        ds = StreamDataset(C.index, planner, rank=0, world_size=2)
        first = [list(b.samples.tolist()) for b in ds]
        ds.set_epoch(1)
        second = [list(b.samples.tolist()) for b in ds]
        ref = BatchSampler(os.path.join(TMP, "plan-1.alm"), rank=0, world_size=2)
        self.assertEqual(second, [list(x) for x in ref])
        self.assertNotEqual(first, second)
        with self.assertRaises(ValueError):
            StreamDataset(C.index, C.manifest, rank=0, world_size=2).set_epoch(1)

    def test_set_epoch_keeps_a_state_of_its_epoch_in_either_order(self):
        planner = adaptiveload.Planner(C.index, world=2, seed=1, mem_tokens=20000)
        full = list(StreamDataset(C.index, planner, rank=0, world_size=2))
        self.assertGreater(len(full), 3)
        st = full[2].resume_state
        want = [b.position for b in full[3:]]
        # state= then set_epoch (a DistributedSampler user's order), and the other order.
        a = StreamDataset(C.index, planner, rank=0, world_size=2, state=st)
        a.set_epoch(0)
        b = StreamDataset(C.index, planner, rank=0, world_size=2)
        b.set_epoch(0)
        b.load_state_dict(st)
        for ds in (a, b):
            self.assertEqual([x.position for x in ds], want)
        # A state of epoch 0 does not apply to epoch 1: discarded, loudly.
        c = StreamDataset(C.index, planner, rank=0, world_size=2, state=st)
        with self.assertWarnsRegex(RuntimeWarning, "discarding the loaded resume state of epoch 0"):
            c.set_epoch(1)
        ref = BatchSampler(os.path.join(TMP, "plan-1.alm"), rank=0, world_size=2)
        self.assertEqual([list(x.samples.tolist()) for x in c], [list(x) for x in ref])


class LibraryLoaderTest(unittest.TestCase):
    """adaptiveload._lib is the one library finder: ADAPTIVELOAD_LIB (a file, or a folder
    where libadaptiveload.so comes before libal_kernels.so) wins, and the stream API over
    the kernels-only library fails naming what was loaded and tried."""

    def run_python(self, code, lib):
        env = dict(os.environ, ADAPTIVELOAD_LIB=lib)
        return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def test_folder_prefers_the_full_library(self):
        folder = os.path.dirname(os.environ["ADAPTIVELOAD_LIB"])
        p = self.run_python("import adaptiveload._lib as L; print('\\n'.join(L.candidates()))", folder)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), [os.path.join(folder, "libadaptiveload.so"),
                                            os.path.join(folder, "libal_kernels.so")])

    def test_stream_api_over_the_kernels_library_names_what_was_tried(self):
        kernels = os.environ.get("AL_TEST_KERNELS_LIB")
        if not kernels:
            self.skipTest("AL_TEST_KERNELS_LIB (the kernels-only library) is not set")
        p = self.run_python("import adaptiveload; adaptiveload.BatchSampler(%r)" % C.manifest, kernels)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("OSError: adaptiveload: the stream API", p.stderr)
        self.assertIn("needs libadaptiveload.so", p.stderr)
        self.assertIn("tried: %s (loaded)" % kernels, p.stderr)


class BindingTest(unittest.TestCase):
    """adaptiveload._lib is the package's one binding: one signature table, one error class,
    every mirrored struct checked against the library's size queries at load time."""

    def run_python(self, code, lib=None):
        env = dict(os.environ, ADAPTIVELOAD_LIB=lib or os.environ["ADAPTIVELOAD_LIB"])
        return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def test_every_mirror_has_the_size_the_library_reports(self):
        from adaptiveload import _lib, _structs

        lib = _lib.lib()
        checked = {cls for cls, _, _ in _structs.MIRRORS}
        for cls, query, which in _structs.MIRRORS:
            self.assertEqual(getattr(lib, query)(_lib.constant(which)), ctypes.sizeof(cls), cls.__name__)
        mirrors = {v for v in vars(_structs).values() if isinstance(v, type) and issubclass(v, ctypes.Structure)}
        self.assertEqual(mirrors - checked - {_structs._Sized}, set())  # _Sized: the base of sized ones

    def test_a_wrong_mirror_is_refused_naming_struct_sizes_and_library(self):
        from adaptiveload import _lib, _structs

        class PlanOptions(_structs._Sized):  # al_plan_options without its last field
            _fields_ = _structs.PlanOptions._fields_[:-1]

        lib, path = _lib.lib(), os.environ["ADAPTIVELOAD_LIB"]
        want = ctypes.sizeof(_structs.PlanOptions)
        with self.assertRaises(ImportError) as cm:
            _lib.check_struct(lib, path, PlanOptions, "al_plan_struct_size", "AL_PLAN_STRUCT_OPTIONS",
                              {"AL_PLAN_STRUCT_OPTIONS": _lib.constant("AL_PLAN_STRUCT_OPTIONS")})
        self.assertEqual(str(cm.exception), "adaptiveload: PlanOptions is %d bytes in %s "
                         "(al_plan_struct_size(AL_PLAN_STRUCT_OPTIONS)) but %d in Python: library and package are "
                         "from different versions" % (want, path, ctypes.sizeof(PlanOptions)))
        # At load time: a mirror that differs makes the library unusable, with the same message.
        p = self.run_python(
            "import ctypes, sys\n"
            "sys.modules['torch'] = None  # not needed: a faster start\n"
            "from adaptiveload import _lib, _structs as S\n"
            "class ManifestInfo(S.ManifestInfo):\n"
            "    _fields_ = [('extra', ctypes.c_double)]\n"
            "S.MIRRORS = S.MIRRORS + ((ManifestInfo, 'al_plan_struct_size', 'AL_PLAN_STRUCT_MANIFEST_INFO'),)\n"
            "_lib.load_library()\n")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ImportError: adaptiveload: ManifestInfo is %d bytes in %s "
                      "(al_plan_struct_size(AL_PLAN_STRUCT_MANIFEST_INFO)) but %d in Python"
                      % (ctypes.sizeof(_structs.ManifestInfo), path, ctypes.sizeof(_structs.ManifestInfo) + 8),
                      p.stderr)

    def test_constants_are_the_librarys(self):
        # Every constant the package uses is read from the library's constant queries at load
        # time, none copied: each agrees with a fresh query, and the array lengths of the
        # mirrors with the constants that size them in C.
        import re

        from adaptiveload import _constants as C, _lib, _structs as S

        lib = _lib.lib()
        for name in S.CONSTANTS:
            v = ctypes.c_int64()
            answered = [q for q in _lib.CONSTANT_QUERIES if getattr(lib, q)(name.encode(), ctypes.byref(v)) == 0]
            self.assertEqual(len(answered), 1, name)
            self.assertEqual(getattr(C, name), v.value, name)
            self.assertEqual(_lib.constant(name), v.value, name)
        self.assertEqual((C.AL_OK, _lib.status("AL_EINVAL"), _lib.status("AL_EOF")), (0, -1, 1))
        for cls, field, name in S.LENGTHS:
            self.assertEqual(dict(cls._fields_)[field]._length_, getattr(C, name), (cls.__name__, field))
        with self.assertRaises(KeyError):
            _lib.constant("AL_NOT_READ_BY_THE_PACKAGE")
        with self.assertRaises(AttributeError):
            C.AL_NOT_READ_BY_THE_PACKAGE  # noqa: B018
        with self.assertRaises(KeyError):
            _lib.status("AL_NO_SUCH_STATUS")
        # No module of the package assigns a number to an AL_ name: the values are the library's.
        folder = os.path.dirname(_lib.__file__)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                self.assertIsNone(re.search(r"^\s*_?AL_[A-Z0-9_]+\s*=\s*[-(0-9]", text, flags=re.M), name)
        # A mirror's array length that the library sizes otherwise is refused at load time.
        p = self.run_python(
            "import ctypes, sys\n"
            "sys.modules['torch'] = None\n"
            "from adaptiveload import _lib, _structs as S\n"
            "class ManifestInfo(ctypes.Structure):\n"
            "    _fields_ = [('sp_degrees', ctypes.c_uint32 * 12)]\n"
            "S.LENGTHS = S.LENGTHS + ((ManifestInfo, 'sp_degrees', 'AL_PLAN_MAX_SP_DEGREES'),)\n"
            "_lib.load_library()\n")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ImportError: adaptiveload: ManifestInfo.sp_degrees holds 12 in Python but AL_PLAN_MAX_SP_DEGREES "
                      "is %d in %s" % (C.AL_PLAN_MAX_SP_DEGREES, os.environ["ADAPTIVELOAD_LIB"]), p.stderr)
        # A constant the library lacks makes it unusable, naming it.
        p = self.run_python(
            "import sys\n"
            "sys.modules['torch'] = None\n"
            "from adaptiveload import _lib, _structs as S\n"
            "S.CONSTANTS = S.CONSTANTS + ('AL_STREAM_NO_SUCH_LIMIT',)\n"
            "_lib.load_library()\n")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ImportError: adaptiveload: %s lacks the constant AL_STREAM_NO_SUCH_LIMIT: library and package "
                      "are from different versions" % os.environ["ADAPTIVELOAD_LIB"], p.stderr)

    def test_only_the_binding_declares_c_functions(self):
        import re

        from adaptiveload import _lib

        folder = os.path.dirname(_lib.__file__)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py") and name != "_lib.py":
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                self.assertIsNone(re.search(r"\.(argtypes|restype)\s*=|CDLL\(", text), name)
        lib = _lib.lib()
        for functions in _lib.SIGNATURES.values():
            for name, (res, args) in functions.items():
                self.assertEqual(getattr(lib, name).argtypes, args, name)

    def test_only_the_binding_encodes_strings_for_c(self):
        # Every str the package hands to C is encoded by _lib.encode_path / encode_text, which
        # refuse a NUL byte naming the argument (C would read the string only up to it).
        import re

        from adaptiveload import _lib

        folder = os.path.dirname(_lib.__file__)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py") and name != "_lib.py":
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                self.assertIsNone(re.search(r"\.encode\(|fsencode\(", text), name)
        for encode in (lambda s: _lib.encode_path(s, "where"), lambda s: _lib.encode_text(s, "where")):
            with self.assertRaisesRegex(ValueError, "where must not contain a NUL byte"):
                encode("a\0b")
        self.assertEqual(_lib.encode_path(b"a/b", "where"), b"a/b")

    def test_one_error_class_with_status_and_c_message(self):
        self.assertIs(adaptiveload.StreamError, adaptiveload.Error)
        self.assertTrue(issubclass(adaptiveload.Error, RuntimeError))
        with self.assertRaises(adaptiveload.Error) as cm:
            BatchSampler(C.manifest, rank=0, world_size=4)
        e = cm.exception
        self.assertEqual(e.status, -1)  # AL_EINVAL
        self.assertIn("world of 2", e.detail)
        self.assertEqual(str(e), "manifest %s: AL_EINVAL: %s" % (C.manifest, e.detail))
        with self.assertRaises(adaptiveload.Error) as cm:
            adaptiveload.plan(C.index, world=1, mem_tokens=1)
        self.assertLess(cm.exception.status, 0)
        from adaptiveload import _lib

        with self.assertRaisesRegex(adaptiveload.Error, "al_adaln_forward: AL_EINVAL: ") as cm:  # the kernels' calls
            _lib.check(_lib.lib().al_adaln_forward(None, None, None, None, None, None, None, None, None),
                       "al_adaln_forward")
        self.assertEqual(cm.exception.status, -1)

    def test_a_schedule_from_a_loaded_manifest_is_the_schedule_of_its_path(self):
        from adaptiveload.planning import Manifest
        from adaptiveload.schedule import Schedule

        m = Manifest(C.manifest)
        a, b = Schedule(m, 1, 2), Schedule(C.manifest, 1, 2)
        for attr in ("rank", "world", "epoch", "seed", "index_fingerprint", "n_batches", "buckets"):
            self.assertEqual(getattr(a, attr), getattr(b, attr), attr)
        self.assertEqual([a.info(i) for i in range(a.n_batches)], [b.info(i) for i in range(b.n_batches)])
        errors = []
        for source in (m, C.manifest):
            with self.assertRaises(adaptiveload.Error) as cm:
                Schedule(source, 0, 4)
            errors.append(str(cm.exception))
        self.assertEqual(errors[0], errors[1])

    def test_import_leaves_torch_unloaded(self):
        # The wheel's console script imports the package: it must not pay for importing torch.
        p = self.run_python("import sys, adaptiveload\nprint('torch' in sys.modules)\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "False")

    def test_version_all_and_an_import_without_torch_or_library(self):
        p = self.run_python(
            "import sys\n"
            "sys.modules['torch'] = None  # no torch\n"
            "import adaptiveload\n"
            "from adaptiveload import _lib\n"
            "assert _lib._cdll is None, 'the library was loaded at import'\n"
            "print(adaptiveload.__version__)\n"
            "print(_lib.version())\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        v, w = p.stdout.split()
        self.assertRegex(v, r"^[0-9]+\.[0-9]+\.[0-9]+$")
        self.assertEqual(v, w)
        self.assertEqual(adaptiveload.__version__, v)
        for name in adaptiveload.__all__:
            self.assertIsNotNone(getattr(adaptiveload, name), name)
        self.assertTrue(callable(adaptiveload.adaln))
        # The kernels-only library reports the same version and the kernels' constants.
        kernels = os.environ.get("AL_TEST_KERNELS_LIB")
        if kernels:
            from adaptiveload import _constants as C

            p = self.run_python("import sys; sys.modules['torch'] = None; import adaptiveload; "
                                "from adaptiveload import _constants as C; "
                                "print(adaptiveload.__version__, C.AL_ADALN_MAX_DIM, C.AL_DTYPE_FP32, C.AL_OK)", kernels)
            self.assertEqual((p.returncode, p.stdout.split()), (0, [v, str(C.AL_ADALN_MAX_DIM), str(C.AL_DTYPE_FP32),
                                                                 "0"]), p.stderr)


class LatentRuleTest(unittest.TestCase):
    """adaptiveload.latents holds the grid, crop and patchify rule once; the raw-payload path
    of latent_tokens gives the rows the C stream's cu_seqlens count."""

    def test_tokens_grid_and_raw_payload_rows(self):
        from adaptiveload import latents

        for w, h, f in ((64, 48, 1), (96, 64, 17), (128, 72, 33), (8, 8, 0)):
            t, hh, ww = latents.latent_grid(w, h, f)
            self.assertEqual(adaptiveload.wan_tokens(w, h, f), (t // 1) * (h // 16) * (w // 16), (w, h, f))
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=2)
        n = 0
        for b in ds:
            bucket = ds.bucket_shape(b.bucket)
            for i in range(len(b)):
                x = adaptiveload.latent_tokens(b.sample(i), b.shapes[i].tolist(), bucket)
                self.assertEqual(x.shape[0], int(b.cu_seqlens[i + 1] - b.cu_seqlens[i]), b.keys[i])
                # By hand: the centred crop, then (t, y, x) patches of (c, dt, dy, dx) features.
                sw, sh, sf = b.shapes[i].tolist()
                lat = b.sample(i, torch.bfloat16).view(16, 1 + (sf - 1) // 4, sh // 8, sw // 8)
                tb, hb, wb = latents.latent_grid(*bucket[:3])
                y0, x0 = (sh // 8 - hb) // 2, (sw // 8 - wb) // 2
                c = lat[:, :tb, y0:y0 + hb, x0:x0 + wb].reshape(16, tb, 1, hb // 2, 2, wb // 2, 2)
                want = c.permute(1, 3, 5, 0, 2, 4, 6).reshape(-1, 64)
                self.assertTrue(torch.equal(x.view(torch.int16), want.view(torch.int16)), b.keys[i])
                n += 1
        self.assertGreater(n, 0)


class TrainingHelpersTest(unittest.TestCase):
    """adaptiveload.training: what the example training scripts share."""

    def test_single_process_setup_and_grad_sync(self):
        env = adaptiveload.setup_distributed(cpu=True)
        self.assertEqual((env.rank, env.world_size, env.initialized, env.device.type), (0, 1, False, "cpu"))
        model = torch.nn.Linear(2, 2)
        for sync in (False, True):  # not DDP: nothing to hold back
            with adaptiveload.grad_sync(model, sync):
                model(torch.ones(1, 2)).sum().backward()
        self.assertIsNotNone(model.weight.grad)
        env.close()

    def test_demo_corpus_and_arguments(self):
        import argparse

        p = argparse.ArgumentParser()
        adaptiveload.add_corpus_arguments(p)
        args = p.parse_args(["--workdir", os.path.join(TMP, "demo"), "--bin", BIN, "--samples", "12", "--world", "2"])
        index, manifest = adaptiveload.corpus_from_args(args)
        self.assertEqual(manifest, os.path.join(TMP, "demo", "plan-w2.alm"))
        self.assertEqual(len(IndexDataset(index)), 12)
        self.assertEqual(BatchSampler(manifest, rank=1, world_size=2).world_size, 2)
        stamp = os.path.getmtime(manifest)
        self.assertEqual(adaptiveload.demo_corpus(args.workdir, world=2, bin=BIN), (index, manifest))
        self.assertEqual(os.path.getmtime(manifest), stamp, "an existing plan is reused")
        given = p.parse_args(["--index", C.index, "--manifest", C.manifest])
        self.assertEqual(adaptiveload.corpus_from_args(given), (C.index, C.manifest))


class AdalnImportTest(unittest.TestCase):
    """The fused AdaLN module imports under any torch (its torch.compile operators only where
    torch.library.custom_op exists) and runs CPU tensors through plain PyTorch; its tests are
    tests/python/test_adaln_cpu.py and, on a GPU, tests/kernels/adaln_torch_test.py."""

    def test_imports_and_runs_on_the_cpu(self):
        import importlib

        mod = importlib.import_module("adaptiveload._adaln")
        x = torch.ones(1, 4, 64)
        y = mod.adaln(x, torch.zeros(1, 64), torch.ones(1, 64))
        self.assertTrue(torch.equal(y, torch.ones(1, 4, 64)))  # a constant row normalises to 0


class MembersCorpus:
    """A corpus written with Python's tarfile and numpy (independent of the C code):
    KEY.json, KEY.latent.npy (float16 (C, T, H/8, W/8) or (C, H/8, W/8), native grids larger than
    the buckets), KEY.t5.npy (float32 (L, 16), L varying), KEY.txt; indexed and planned (world 2)
    by the CLI with a small bucket table. (LZ4-stored members: stream_members_test.)"""

    BUCKETS = "frames 1 9 17\naspect 1:1 64x64\naspect 3:2 96x64\naspect 2:1 96x48 128x64\n"

    def __init__(self, root, n=40):
        import io
        import json
        import numpy as np

        self.root = root
        os.makedirs(os.path.join(root, "shards"), exist_ok=True)
        rng = np.random.default_rng(5)
        self.lat, self.t5, self.txt = {}, {}, {}
        tars = [tarfile.open(os.path.join(root, "shards", "m-%d.tar" % k), "w") for k in range(2)]

        def add(t, name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))

        for i in range(n):
            key = "m%04d" % i
            w, h = 96 + 8 * (i % 5), 64 + 8 * (i % 4)
            f = (1, 9, 17)[i % 3]
            t = 1 + (f - 1) // 4
            shape = (4, h // 8, w // 8) if i % 6 == 0 else (4, t, h // 8, w // 8)
            lat = rng.standard_normal(shape).astype(np.float16)
            emb = rng.standard_normal((3 + i % 7, 16)).astype(np.float32)
            self.lat[key], self.t5[key], self.txt[key] = lat, emb, ("caption %d" % i + "!" * (i % 4)).encode()
            tar = tars[i % 2]
            add(tar, key + ".json", json.dumps({"width": w, "height": h, "frames": f}).encode())
            for ext, arr in (("latent.npy", lat), ("t5.npy", emb)):
                b = io.BytesIO()
                np.save(b, arr)
                add(tar, key + "." + ext, b.getvalue())
            add(tar, key + ".txt", self.txt[key])
        for t in tars:
            t.close()
        self.index = os.path.join(root, "m.alidx")
        run("index", "-o", self.index, os.path.join(root, "shards"))
        buckets = os.path.join(root, "buckets.txt")
        with open(buckets, "w") as fh:
            fh.write(self.BUCKETS)
        self.manifest = os.path.join(root, "m.alm")
        run("plan", "--index", self.index, "--world", 2, "--seed", 3, "--mem-tokens", 400, "--buckets", buckets,
            "-o", self.manifest)

    def crop(self, key, grid):
        """Reference crop in numpy: channels whole, frames [0, T_b), centred rows/columns."""
        lat = self.lat[key]
        tb, hb, wb = grid
        h, w = lat.shape[-2:]
        y0, x0 = (h - hb) // 2, (w - wb) // 2
        if lat.ndim == 3:
            return lat[:, y0:y0 + hb, x0:x0 + wb]
        return lat[:, :tb, y0:y0 + hb, x0:x0 + wb]


MEMBERS = ["latent.npy", "t5.npy", "txt"]


class MembersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.C = MembersCorpus(os.path.join(TMP, "members"))

    def test_stream_members_crop_and_collate_agree(self):
        import numpy as np

        C = self.C
        seen = []
        for rank in (0, 1):
            ds = StreamDataset(C.index, C.manifest, rank=rank, world_size=2, members=MEMBERS, threads=2)
            s = BatchSampler(C.manifest, rank=rank, world_size=2, with_info=True)
            loader = DataLoader(IndexDataset(C.index, members=MEMBERS), batch_sampler=s, num_workers=2,
                                collate_fn=collate_packed)
            n = 0
            for b, ref in zip(ds, loader):
                n += 1
                # The DataLoader path produces exactly the stream's batch.
                self.assertEqual(b.keys, ref["keys"])
                self.assertTrue(torch.equal(b.cu_seqlens, ref["cu_seqlens"]))
                self.assertTrue(torch.equal(b.offsets, ref["offsets"]))
                self.assertTrue(torch.equal(b.data, ref["data"]), "packed bytes")
                for k in ("position", "step", "micro", "n_micro", "last_in_step", "bucket", "step_samples",
                          "step_tokens", "tokens"):
                    self.assertEqual(getattr(b, k), ref[k], k)
                self.assertEqual(b.grid, ref["grid"])
                self.assertTrue(torch.equal(b.padded, ref["padded"]))
                self.assertEqual(list(b.members), MEMBERS)
                for name in MEMBERS:
                    m, r = b.members[name], ref["members"][name]
                    self.assertEqual((m.dtype, list(m.shapes), list(m.offsets), list(m.sizes), m.cropped),
                                     (r["dtype"], r["shapes"], r["offsets"], r["sizes"], r["cropped"]), name)
                self.assertEqual(b.members["latent.npy"].dtype, "float16")
                self.assertTrue(b.members["latent.npy"].cropped)
                self.assertEqual(b.members["t5.npy"].dtype, "float32")
                self.assertEqual(b.members["txt"].dtype, "uint8")
                # Against numpy's own reading of the tar members.
                lats, embs, txts = b.tensors("latent.npy"), b.tensors("t5.npy"), b.tensors("txt")
                for i, key in enumerate(b.keys):
                    want = C.crop(key, b.grid)
                    self.assertEqual(tuple(lats[i].shape), want.shape, key)
                    self.assertEqual(lats[i].dtype, torch.float16)
                    self.assertTrue(np.array_equal(lats[i].view(torch.int16).numpy(), want.view(np.int16)), key)
                    self.assertTrue(np.array_equal(embs[i].numpy(), C.t5[key]), key)
                    self.assertEqual(bytes(txts[i].numpy()), C.txt[key])
                    tok = int(b.cu_seqlens[i + 1] - b.cu_seqlens[i])
                    self.assertEqual(tok, b.grid[0] * (b.grid[1] // 2) * (b.grid[2] // 2), key)
                    if not b.padded[i]:
                        seen.append(key)
                x = b.packed()
                self.assertEqual(tuple(x.shape), (b.tokens, 4 * 4))
                self.assertEqual(x.dtype, torch.float16)
                if b.keys:  # latent_tokens on a typed latent: the same rows as packed()
                    bucket = ds.bucket_shape(b.bucket)
                    t0 = adaptiveload.latent_tokens(lats[0], None, bucket)
                    self.assertTrue(torch.equal(t0.view(torch.int16), x[:int(b.cu_seqlens[1])].view(torch.int16)))
            self.assertEqual(n, len(s))
        self.assertEqual(sorted(seen), sorted(C.lat), "every sample exactly once over both ranks")

    def test_cli_jsonl_crc32_is_zlib(self):
        import json
        import zlib

        C = self.C
        out = run("stream", "--index", C.index, "--manifest", C.manifest, "--rank", 1, "--members", ",".join(MEMBERS),
                  "--jsonl")
        lines = [json.loads(l) for l in out.splitlines()]
        ds = StreamDataset(C.index, C.manifest, rank=1, world_size=2, members=MEMBERS)
        batches = list(ds)
        self.assertEqual(len(lines), len(batches))
        for line, b in zip(lines, batches):
            self.assertEqual((line["step"], line["micro"], line["keys"]), (b.step, b.micro, b.keys))
            self.assertEqual(line["cu_seqlens"], b.cu_seqlens.tolist())
            for name in MEMBERS:
                m = line["members"][name]
                self.assertEqual(m["dtype"], b.members[name].dtype)
                self.assertEqual([tuple(x) for x in m["shapes"]], list(b.members[name].shapes))
                want = ["%08x" % zlib.crc32(bytes(t.contiguous().view(torch.uint8).view(-1).numpy()))
                        for t in b.tensors(name)]
                self.assertEqual(m["crc32"], want, name)

    def test_missing_member_names_what_the_sample_has(self):
        C = self.C
        ds = StreamDataset(C.index, C.manifest, rank=0, world_size=2, members=["latent.npy", "clip.npy"])
        with self.assertRaisesRegex(StreamError, r"member 'clip\.npy' is in no sample of the index .*the index "
                                                 r"has: json, latent\.npy, t5\.npy, txt"):
            list(ds)


if __name__ == "__main__":
    print("adaptiveload python test: torch %s, library %s" % (torch.__version__, os.environ.get("ADAPTIVELOAD_LIB")))
    unittest.main(verbosity=2)
