#!/usr/bin/env python3
"""Ulysses sequence parallelism of examples/train_dit.py under real gloo processes (CPU).

Run without RANK it is the launcher: for each world (2, then 4) it starts that many copies of
itself, with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or,
with --torchrun, through torchrun itself (python3 -m torch.distributed.run); with --fsdp the
model is sharded by FSDP2 (fully_shard over the world mesh) instead of wrapped by DDP. It waits
for them and compares what they recorded.

Each rank (a tiny PackedDiT, float32, DDP over the world, SP groups from
adaptiveload.training.sp_groups) runs synthetic micro-batches built directly (no planner):

* world 2: one step, one micro-batch on the SP=2 group {0, 1} (35 tokens: the slices are 17
  and 18 tokens and cut a sample); its per-rank predictions equal the rows of one process's
  SP=1 forward, and its loss and DDP gradients the SP=1 loss and gradients of the same
  samples on one process (relative 1e-5);
* world 4: step 0 mixes an SP=2 group {0, 1} with ranks 2 and 3 alone (slot 0), then ranks 0
  and 1 alone with the SP=2 group {2, 3} (slot 1); step 1 runs an SP=4 group (slot 0, with a
  padding sample), then two SP=2 groups (slot 1). Each step's loss and gradients equal those
  of all its micro-batches on one process without SP.

Every rank records the collectives it issues (torch.distributed calls, wrapped, and DDP's
gradient all-reduces through a communication hook): the launcher checks that all ranks issue
the same world-group collectives in the same order, and the ranks of each SP group the same
collectives over it. train_dit.micro_generator gives the ranks of a group the same stream;
StepTotals counts an SP group's skipped samples once; the SP helpers refuse bad arguments.
With the CLI and library (ADAPTIVELOAD_BIN, ADAPTIVELOAD_LIB: under bazel), world 2 also runs
train_dit.prepare on real StreamDataset batches of the --smoke corpus handed to an SP=2 group
(the stream's SP fields added to each PackedBatch) against the same batches without SP.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _find(rel):
    """A checkout path: under bazel's runfiles (the working directory) or beside this file."""
    for base in (os.getcwd(), os.path.join(HERE, "..", "..")):
        p = os.path.join(base, rel)
        if os.path.exists(p):
            return os.path.abspath(p)
    raise SystemExit("cannot find %s" % rel)


# ---------------------------------------------------------------------------------------------
# launcher


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(world, out, mode, torchrun):
    """Runs ``world`` ranks of this file (mode "ddp" or "fsdp"): started here with torchrun's
    variables, or (``torchrun``) by ``python3 -m torch.distributed.run --nproc-per-node
    world``; each rank writes OUT/rankR.log and rankR.json. Returns the records, checked for
    lock-step."""
    port = free_port()
    base = dict(os.environ, SP_TEST_OUT=out, SP_TEST_MODE=mode, OMP_NUM_THREADS="1", SP_TEST_REDIRECT="1")
    if torchrun:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world), "--nnodes", "1",
               "--master_addr", "127.0.0.1", "--master_port", str(port), os.path.abspath(__file__)]
        agent_log = os.path.join(out, "torchrun.log")
        with open(agent_log, "w") as log:
            p = subprocess.Popen(cmd, env=base, stdout=log, stderr=subprocess.STDOUT)
            try:
                rc = p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
        failed = [("torchrun", rc)] if rc != 0 else []
        sys.stdout.write("---- world %d torchrun agent\n" % world + open(agent_log).read())
    else:
        procs = []
        for r in range(world):
            env = dict(base, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
            procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        failed = []
        for r, p in enumerate(procs):
            try:
                rc = p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
            if rc != 0:
                failed.append((r, rc))
    for r in range(world):
        path = os.path.join(out, "rank%d.log" % r)
        sys.stdout.write("---- world %d rank %d\n" % (world, r) + (open(path).read() if os.path.exists(path) else
                                                                   "(no log)\n"))
    if failed:
        raise SystemExit("world %d (%s%s): ranks failed: %s" % (world, mode, ", torchrun" if torchrun else "",
                                                              failed))
    recs = [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in range(world)]
    check_lockstep(recs, mode)
    return recs


def check_lockstep(recs, mode="ddp"):
    """All ranks issued the same world-group collectives in the same order, and the members of
    every SP group the same collectives over it."""
    world = len(recs)
    by_group = {}
    for r, rec in enumerate(recs):
        assert rec["rank"] == r and rec["checks"] > 0, rec
        for g, calls in rec["collectives"].items():
            by_group.setdefault(g, {})[r] = calls
    assert "world" in by_group and len(by_group["world"]) == world, sorted(by_group)
    ref = by_group["world"][0]
    if mode == "ddp":
        assert any(c[0] == "ddp_allreduce" for c in ref), ref  # DDP's gradient sync was seen
    else:  # FSDP2's parameter all-gathers and gradient reduce-scatters, where they go through dist.*
        fsdp_ops = [c for per_rank in by_group.values() for c in per_rank.get(0, [])
                    if c[0] in ("all_gather_into_tensor", "reduce_scatter_tensor")]
        print("lock-step (fsdp): %d of FSDP2's all-gathers / reduce-scatters recorded%s" % (
            len(fsdp_ops), "" if fsdp_ops else " (this torch issues them below torch.distributed's Python "
                                               "functions: the check covers the collectives recorded)"))
    for r in range(world):
        assert by_group["world"][r] == ref, "rank %d's world collectives differ from rank 0's:\n%s\n%s" % (
            r, by_group["world"][r], ref)
    n_sp = 0
    for g, per_rank in by_group.items():
        if g == "world":
            continue
        members = [int(v) for v in g.split(",")]
        assert sorted(per_rank) == members, (g, sorted(per_rank))  # only the members issue them
        calls = per_rank[members[0]]
        for r in members:
            assert per_rank[r] == calls, "group %s: rank %d issued %s, rank %d %s" % (
                g, r, per_rank[r], members[0], calls)
        # a group of every rank other than WORLD (FSDP2's mesh) need not be an SP group; at world 2
        # the SP group of degree 2 is also every rank: an SP group is one with all-to-alls
        if len(members) < world:
            assert any(c[0] == "all_to_all_single" for c in calls), calls
        n_sp += any(c[0] == "all_to_all_single" for c in calls)
    assert n_sp > 0, "no SP group collective recorded"
    print("lock-step (%s): %d world collectives identical on %d ranks; every group's on its ranks; %d SP groups"
          % (mode, len(ref), world, n_sp))


def launcher():
    sys.path.insert(0, _find("python"))
    import adaptiveload.training as T

    # without torch.distributed: degree 1 needs no group, larger ones refuse
    assert T.sp_groups(1, [1]) == {1: [None]} and T.sp_group_of(T.sp_groups(4, [1]), object()) is None
    try:
        T.sp_groups(2, [1, 2])
    except RuntimeError as e:
        assert "torch.distributed" in str(e), e
    else:
        raise AssertionError("sp_groups made degree 2 without torch.distributed")
    # a world no plan can have, or arguments of the wrong type, are refused before anything is made
    for args, exc, says in (((1 << 21, [1]), ValueError, "sp_groups: world must be in 1..1048576"),
                            ((2 ** 64, [1]), ValueError, "sp_groups: world must be in 1..1048576"),
                            ((True, [1]), TypeError, "sp_groups: world must be an int"),
                            ((4, {1: 1}), TypeError, "sp_groups: degrees must be a list"),
                            ((4, [3]), ValueError, "sp_groups: degrees: 3 is not a power of two in 1..1024"),
                            ((4, [1, 8]), ValueError, "sp_groups: degrees: 8 does not divide the world size 4")):
        try:
            T.sp_groups(*args)
        except exc as e:
            assert says in str(e), (args, e)
        else:
            raise AssertionError("sp_groups%r did not raise %s" % (args, exc.__name__))
    try:
        T.sp_group_for({1: [None] * 4}, [2], 0)
    except TypeError as e:
        assert "sp_group_for: degree must be an int" in str(e), e
    else:
        raise AssertionError("sp_group_for took a list as the degree")
    mode = "fsdp" if "--fsdp" in sys.argv[1:] else "ddp"
    torchrun = "--torchrun" in sys.argv[1:]
    what = "%s%s" % (mode.upper() if mode == "ddp" else "FSDP2", ", torchrun launch" if torchrun else "")
    out_root = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    for world in (2, 4):
        out = os.path.join(out_root, "sp-%s%s-w%d" % (mode, "-torchrun" if torchrun else "", world))
        os.makedirs(out, exist_ok=True)
        recs = launch(world, out, mode, torchrun)
        print("world %d (%s): %d checks on each rank passed" % (world, what, recs[0]["checks"]))
    print("sp_train_test (%s): OK" % what)


# ---------------------------------------------------------------------------------------------
# one rank


class Recorder:
    """Records the collectives this process issues: torch.distributed's Python calls (wrapped)
    and DDP's gradient buckets (a communication hook), as (op, shape) per group (an
    all-to-all: the shape of a row) ("world" or
    the group's ranks joined by commas)."""

    OPS = ("all_reduce", "all_to_all_single", "all_to_all", "all_gather", "broadcast", "barrier", "reduce_scatter",
           "all_gather_object", "send", "recv", "all_gather_into_tensor", "reduce_scatter_tensor")

    def __init__(self, dist):
        self.dist = dist
        self.calls = {}
        self.on = False
        for op in self.OPS:
            if hasattr(dist, op):
                setattr(dist, op, self._wrap(op, getattr(dist, op)))

    def key(self, group):
        d = self.dist
        if group is None or group is d.group.WORLD:
            return "world"
        return ",".join(str(r) for r in d.get_process_group_ranks(group))

    def add(self, op, group, shape):
        if self.on:
            self.calls.setdefault(self.key(group), []).append([op, list(shape)])

    def _wrap(self, op, fn):
        def wrapped(*args, **kwargs):
            t = args[0] if args and hasattr(args[0], "shape") else None
            shape = list(t.shape) if t is not None else []
            if op == "all_to_all_single":
                shape = shape[1:]  # the rows a rank receives differ by one where d does not divide N
            self.add(op, kwargs.get("group"), shape)
            return fn(*args, **kwargs)

        return wrapped

    def ddp_hook(self):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        def hook(state, bucket):
            self.add("ddp_allreduce", None, bucket.buffer().shape)
            return default_hooks.allreduce_hook(state, bucket)

        return hook


def synth_micro(seed, grids, text_lengths, padded, patch_dim, text_dim):
    import torch

    g = torch.Generator().manual_seed(seed)
    n = sum(a * b * c for a, b, c in grids)
    x0 = torch.randn(n, patch_dim, generator=g)
    texts = [torch.randn(L, text_dim, generator=g) for L in text_lengths]
    return {"x0": x0, "grids": grids, "texts": texts, "padded": padded, "seed": seed}


# Micro-batches of the plans below: grids (t, h, w) per sample, text lengths, padding flags.
MICRO = {
    "A": ([(1, 3, 4), (2, 2, 3), (1, 11, 1)], [5, 9, 3], [False, False, False]),   # 35 tokens
    "B": ([(2, 3, 2), (1, 4, 3)], [4, 6], [False, False]),
    "C": ([(1, 2, 5)], [7], [False]),
    "D": ([(1, 4, 4)], [2], [False]),
    "E": ([(2, 2, 2), (2, 2, 2), (2, 2, 2)], [3, 3, 8], [False, False, False]),
    "F": ([(3, 3, 3), (1, 2, 2)], [6, 5], [False, False]),
    "G": ([(2, 4, 3), (2, 4, 3), (1, 3, 3)], [4, 10, 6], [False, False, True]),      # padding sample
    "H": ([(1, 5, 5), (1, 1, 3)], [8, 2], [False, False]),
    "I": ([(2, 3, 3), (1, 3, 3), (1, 1, 1)], [1, 9, 4], [False, False, False]),
}

# world -> steps -> slots -> [(micro, ranks of its group)]
PLANS = {
    2: [[[("A", (0, 1))]]],
    4: [
        [[("A", (0, 1)), ("B", (2,)), ("C", (3,))], [("D", (0,)), ("E", (1,)), ("F", (2, 3))]],
        [[("G", (0, 1, 2, 3))], [("H", (0, 1)), ("I", (2, 3))]],
    ],
}


class Batch:
    """A PackedBatch-like object: the fields train_dit reads and the SP fields of the stream."""

    def __init__(self, name, step, micro, n_micro, ranks, rank, step_tokens):
        self.name = name
        self.step, self.micro, self.n_micro = step, micro, n_micro
        self.last_in_step = micro == n_micro - 1
        self.bucket, self.step_tokens, self.step_samples = 0, step_tokens, 0
        self.sp_degree, self.sp_rank, self.sp_ranks = len(ranks), ranks.index(rank), tuple(ranks)


def rank_main():
    import torch
    import torch.distributed as dist

    sys.path.insert(0, _find("examples"))
    sys.path.insert(0, _find("python"))
    import adaptiveload
    import adaptiveload.sp
    import adaptiveload.training as T
    import dit_model as M
    import train_dit as td

    torch.set_num_threads(1)
    out = os.environ["SP_TEST_OUT"]
    if os.environ.get("SP_TEST_REDIRECT"):  # this rank's output to OUT/rankR.log (under torchrun too)
        log = os.open(os.path.join(out, "rank%s.log" % os.environ["RANK"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                      0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
    mode = os.environ.get("SP_TEST_MODE", "ddp")
    env = T.setup_distributed(cpu=True)
    rank, world = env.rank, env.world_size
    print("rank %d of %d: torch %s, %s, launched by %s" % (rank, world, torch.__version__, mode,
                                                           "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else
                                                           "the test"), flush=True)
    rec = Recorder(dist)
    checks = [0]

    def close(a, b, what, rel=1e-5):
        err = float((a - b).abs().max()) / max(1e-12, float(b.abs().max()))
        assert err <= rel, "%s: relative difference %.3g > %g" % (what, err, rel)
        checks[0] += 1

    # the API's refusals
    for bad, exc in ((([3], ), ValueError), (([2, 6],), ValueError), ((5,), TypeError), (([1.0],), TypeError)):
        try:
            T.sp_groups(world, *bad)
        except exc:
            checks[0] += 1
        else:
            raise AssertionError("sp_groups(%d, %r) did not raise %s" % (world, bad, exc.__name__))
    try:
        T.sp_groups(world * 2, [1])
    except ValueError:
        checks[0] += 1
    for bad in ((10, 2, 2), (10, 0, 0), (-1, 2, 0), (10, 2, True)):
        try:
            adaptiveload.sp.token_range(*bad)
        except ValueError:
            checks[0] += 1
        else:
            raise AssertionError("token_range%r did not raise" % (bad,))
    assert [adaptiveload.sp.token_range(35, 4, j) for j in range(4)] == [(0, 8), (8, 17), (17, 26), (26, 35)]
    degrees = [1, 2] if world == 2 else [1, 2, 4]
    groups = T.sp_groups(world, degrees)
    for args, kw in (((groups[2][0], 2, 0, 1), {}), ((None, 2, 0, 10), {}), ((groups[2][0], 2, 2, 10), {}),
                     ((groups[2][0], 2, 1, 10), {"held": (4, 10)})):
        try:
            adaptiveload.sp.Shard(*args, **kw)
        except ValueError:
            checks[0] += 1
        else:
            raise AssertionError("Shard%r %r did not raise" % (args, kw))
    sh = adaptiveload.sp.Shard(groups[2][0], 2, 1, 35, held=(17, 35))
    assert (sh.lo, sh.hi, sh.splits) == (17, 35, [17, 18]), sh
    try:  # a batch naming a group that does not hold this rank
        T.sp_group_of(groups, {"sp_degree": 2, "sp_rank": 0, "sp_ranks": (rank ^ 1, rank)})
    except ValueError:
        checks[0] += 1
    else:
        raise AssertionError("sp_group_of accepted a misaligned group")
    try:  # the same, named by the group's first rank (as the C stream batch does)
        T.sp_group_of(groups, {"sp_degree": 2, "sp_rank": rank % 2, "sp_group_first": rank - rank % 2 + 1})
    except ValueError:
        checks[0] += 1
    else:
        raise AssertionError("sp_group_of accepted a group by a wrong first rank")
    assert T.sp_group_of(groups, {"sp_degree": 2, "sp_rank": rank % 2, "sp_group_first": rank - rank % 2}) is \
        groups[2][rank // 2]
    # StepTotals: the skips of an SP group's micro-batch reach every rank of it and count once
    ranks = tuple(range(rank - rank % 2, rank - rank % 2 + 2)) if rank < 2 else (rank,)
    totals = adaptiveload.StepTotals()
    assert totals.add({"last_in_step": 1, "step_tokens": 100, "step_samples": 10, "skipped_real_tokens": 5 if rank < 2
                       else 3, "skipped_real_samples": 1, "sp_degree": len(ranks), "sp_rank": ranks.index(rank)})
    want = 100 - (5 + 3 * (world - 2))
    assert totals.delivered_tokens == want and totals.delivered_samples == 10 - (world - 1), (
        totals.delivered_tokens, want, totals.delivered_samples)
    checks[0] += 1
    assert sorted(groups) == degrees and len(groups[2]) == world // 2 and groups[1] == [None] * world, groups
    for d in degrees[1:]:
        for g, pg in enumerate(groups[d]):
            assert dist.get_process_group_ranks(pg) == list(range(g * d, g * d + d)), (d, g)
        assert T.sp_group_for(groups, d, rank) is groups[d][rank // d]
    try:
        T.sp_group_for(groups, 8, rank)
    except KeyError:
        checks[0] += 1
    checks[0] += 1

    cfg = M.DiTConfig(hidden=32, heads=4, ffn=64, blocks=2, in_channels=4, text_dim=16, freq_dim=16)
    torch.manual_seed(0)
    model = M.PackedDiT(cfg, attention=M.LoopAttention(use_sdpa=False))
    torch.manual_seed(0)
    ref_model = M.PackedDiT(cfg, attention=M.LoopAttention(use_sdpa=False))
    ddp, sync = td.wrap_distributed(model, env, fsdp=mode == "fsdp", log=lambda *a: print(*a, flush=True))
    if mode == "ddp":
        ddp.register_comm_hook(None, rec.ddp_hook())
    micro = {k: synth_micro(1000 + i, *MICRO[k], cfg.patch_dim, cfg.text_dim) for i, k in enumerate(sorted(MICRO))}

    def prepared(name, ranks, step, slot, n_micro, step_tokens, me):
        m = micro[name]
        fields = {"step": step, "micro": slot, "n_micro": n_micro, "last_in_step": slot == n_micro - 1,
                  "bucket": 0, "step_tokens": step_tokens, "step_samples": 0}
        shard = None
        if me is not None and len(ranks) > 1:
            b = Batch(name, step, slot, n_micro, ranks, me, step_tokens)
            assert T.sp_group_of(groups, b) is T.sp_group_for(groups, len(ranks), me)
            shard = T.sp_shard_of(groups, b, m["x0"].shape[0])
        return td.make_prepared(m["x0"], m["grids"], m["texts"], m["padded"], fields, torch.device("cpu"), shard)

    for step, slots in enumerate(PLANS[world]):
        real = {}
        for slot in slots:
            for name, _ in slot:
                m = micro[name]
                lengths = [a * b * c for a, b, c in m["grids"]]
                real[name] = sum(n for n, p in zip(lengths, m["padded"]) if not p)
        step_tokens = sum(real.values())
        # reference: every micro-batch of the step on this one process, SP=1, world 1
        ref_model.zero_grad(set_to_none=True)
        ref_loss, ref_pred = 0.0, {}
        for k, slot in enumerate(slots):
            for name, ranks in slot:
                p = prepared(name, ranks, step, k, len(slots), step_tokens, None)
                loss, _ = td.flow_loss(_Capture(ref_model, ref_pred, name), p, 1,
                                       torch.Generator().manual_seed(micro[name]["seed"]))
                loss.backward()
                ref_loss += float(loss.detach())
        ref_grads = {n: q.grad.clone() for n, q in ref_model.named_parameters()}
        # the distributed step: this rank's micro-batch of every slot, SP where its group has > 1 rank
        rec.on = True
        step_loss = torch.zeros(1, dtype=torch.float64)
        for k, slot in enumerate(slots):
            name, ranks = next((nm, rk) for nm, rk in slot if rank in rk)
            p = prepared(name, ranks, step, k, len(slots), step_tokens, rank)
            assert (p.sp is None) == (len(ranks) == 1)
            got_pred = {}
            with sync(k == len(slots) - 1):
                loss, _ = td.flow_loss(_Capture(ddp, got_pred, name), p, world,
                                       torch.Generator().manual_seed(micro[name]["seed"]))
                loss.backward()
            lo, hi = (p.sp.lo, p.sp.hi) if p.sp is not None else (0, p.tokens)
            close(got_pred[name], ref_pred[name][lo:hi], "step %d %s: predictions of rows [%d, %d)"
                  % (step, name, lo, hi), rel=1e-5)
            if p.sp is not None:
                # train_dit's generator of an SP micro-batch is the same on every rank of the group
                x = torch.randn(4, generator=td.micro_generator(7, p, torch.device("cpu"), None))
                allx = [torch.zeros(4) for _ in ranks]
                dist.all_gather(allx, x, group=p.sp.group)  # over the group: the other ranks are elsewhere
                for r, y in zip(ranks, allx):
                    assert torch.equal(y, x), (name, r)
                checks[0] += 1
            step_loss += loss.detach().double() / world
        dist.all_reduce(step_loss)
        rec.on = False
        close(step_loss, torch.tensor([ref_loss], dtype=torch.float64), "step %d loss" % step, rel=1e-5)
        got = td.full_grads(model)  # FSDP2: each gradient gathered whole from its shards
        assert sorted(got) == sorted(ref_grads), (sorted(got), sorted(ref_grads))
        for n in ref_grads:
            close(got[n], ref_grads[n], "step %d gradient of %s" % (step, n), rel=1e-5)
        model.zero_grad(set_to_none=True)
        print("rank %d step %d: loss %.6f (reference %.6f), %d gradients equal" % (
            rank, step, float(step_loss), ref_loss, len(ref_grads)), flush=True)

    if world == 2 and os.environ.get("ADAPTIVELOAD_BIN") and mode == "ddp":
        checks[0] += stream_batches(rank, world, groups, out, td, M, T)

    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "checks": checks[0], "collectives": rec.calls}, f)
    env.close()


class SPBatch:
    """A real PackedBatch seen as one of an SP group's ranks receives it: the batch's own
    attributes plus the stream's SP fields (the whole micro-batch delivered)."""

    def __init__(self, batch, ranks, rank):
        self._b = batch
        self.sp_degree, self.sp_rank, self.sp_ranks = len(ranks), ranks.index(rank), tuple(ranks)
        self.sp_token_range = (0, int(batch.cu_seqlens[-1]))

    def __len__(self):
        return len(self._b)

    def __getattr__(self, name):
        return getattr(self._b, name)


def stream_batches(rank, world, groups, out, td, M, T):
    """train_dit.prepare on real StreamDataset batches of the --smoke corpus given to the SP=2
    group {0, 1} (both ranks read rank 0's micro-batches): the predictions of each rank's
    slice equal the rows of the unsharded forward, and the group's summed gradients those
    of the whole micro-batch on one process. Returns the number of checks."""
    import torch
    import torch.distributed as dist

    import adaptiveload

    cli = td.find_cli(None)
    typed = td.has_typed_members()
    workdir = os.path.join(out, "corpus")
    if rank == 0:
        td.smoke_corpus(workdir, cli, world, typed, 16, 256)
    dist.barrier()
    index, manifest = td.smoke_corpus(workdir, cli, world, typed, 16, 256)
    members = [td.LATENT_MEMBER, td.TEXT_MEMBER] if typed else None
    text_member = td.TEXT_MEMBER if typed else None
    kw = {"members": members} if typed else {}
    ds = adaptiveload.StreamDataset(index, manifest, rank=0, world_size=world, **kw)
    cfg = M.DiTConfig.smoke(blocks=2)
    torch.manual_seed(0)
    model = M.PackedDiT(cfg, attention=M.LoopAttention(use_sdpa=False))
    cpu = torch.device("cpu")
    checks = 0
    for i, b in enumerate(ds):
        if i == 3:
            break
        ref = td.prepare(b, ds, cfg, cpu, typed, text_member)
        p = td.prepare(SPBatch(b, (0, 1), rank), ds, cfg, cpu, typed, text_member, sp_groups=groups)
        assert p.sp is not None and p.sp.degree == 2 and p.x0.shape[0] == p.sp.tokens < ref.x0.shape[0], p.sp
        assert torch.equal(p.x0, ref.x0[p.sp.lo:p.sp.hi]) and p.tokens == ref.tokens
        preds = {}
        model.zero_grad(set_to_none=True)
        td.flow_loss(_Capture(model, preds, "ref"), ref, 1, torch.Generator().manual_seed(i))[0].backward()
        want = {n: q.grad.clone() for n, q in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        td.flow_loss(_Capture(model, preds, "sp"), p, 1, torch.Generator().manual_seed(i))[0].backward()
        err = float((preds["sp"] - preds["ref"][p.sp.lo:p.sp.hi]).abs().max() / preds["ref"].abs().max())
        assert err < 1e-5, ("stream micro-batch %d: predictions differ by %.3g" % (i, err))
        for n, q in model.named_parameters():
            g = q.grad.clone()
            dist.all_reduce(g, group=p.sp.group)
            e = float((g - want[n]).abs().max() / max(1e-12, float(want[n].abs().max())))
            assert e < 1e-5, ("stream micro-batch %d: gradient of %s differs by %.3g" % (i, n, e))
        checks += 2
        print("rank %d stream micro-batch %d (%d samples, %d tokens, rows [%d, %d) here): SP=2 equals SP=1"
              % (rank, i, ref.n, ref.tokens, p.sp.lo, p.sp.hi), flush=True)
    assert checks == 6, checks
    return checks


class _Capture:
    """Calls a model and keeps its output under ``name`` (what flow_loss does not return)."""

    def __init__(self, model, store, name):
        self.model, self.store, self.name = model, store, name

    def __call__(self, *args, **kwargs):
        y = self.model(*args, **kwargs)
        self.store[self.name] = y.detach()
        return y


if __name__ == "__main__":
    if "RANK" in os.environ:
        rank_main()
    else:
        launcher()
