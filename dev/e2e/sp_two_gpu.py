#!/usr/bin/env python3
"""Two real GPUs: the Ulysses SP path's collectives, the SP replay's arm set trained for real
at W = 2, and the SP=2 loss against one rank's, beside the one-GPU replay of the same plans.

Host (plans and the device job):

    dev/e2e/sp_arms.py prepare --work W2 --worlds 2 --no-grid --full-steps 0
    dev/e2e/sp_two_gpu.py job --work W2 --steps 30 --blocks 2      # W2/two/: job.json, arms.json

Device (nvidia-h200-x2; `SP2_MODELS=M dev/e2e/sp_two_gpu.sh W2 $OUT` runs all of it for one
model M in one call):

    python3 dev/e2e/sp_replay.py --job W2/two/job.json --models M --out $OUT/replay   # GPU 0 alone
    torchrun --nproc-per-node 2 dev/e2e/sp_two_gpu.py collectives --models M --out $OUT/coll
    torchrun --nproc-per-node 2 dev/e2e/sp_two_gpu.py check --models M --out $OUT/check
    torchrun --nproc-per-node 2 dev/e2e/sp_two_gpu.py train --arms W2/two/arms.json --models M \\
        --budget-s 400 --out $OUT/train

Host (the comparison; --replay, --train, --collectives, --check once per device call, merged):

    dev/e2e/sp_two_gpu.py report --work W2 --replay T/timings.json --train T/train.json \\
        --collectives T/collectives.json [--check T/check.json] --out two_gpu.json --md two_gpu.md

--spawn N (collectives, check, train) starts N local ranks itself (gloo on the CPU: the smoke
test). --smoke: tiny shapes. Backend:
NCCL on the GPU, gloo on the CPU; SP2_BACKEND overrides it (gloo on one GPU: a path check of
two ranks sharing it; its times mean nothing); SP2_CPU=1 stays on the CPU.

collectives: the Ulysses all-to-all of one layer (one (B S/d, hidden) bf16 tensor; a block
runs 8) at degree 2 for each model's hidden size over a range of S, and the FSDP all-gather
and reduce-scatter of one block's bf16 parameters; per size the median ms of --reps runs after
warm-up, the bytes that leave a rank, the effective GB/s, a least-squares latency + bandwidth
fit, and the model's time for the same bytes (sp_model.Comm at its link rate, and `fit`'s
default --sp-link-gbps). A backend without all_gather_into_tensor / reduce_scatter_tensor
(gloo on old torch) gets all_reduce of the same tensor, named in the result.

check: for each model shape (float32, the blocks of the replay), B samples of S tokens run on
one rank whole (the reference: loss, input and parameter gradients) and on the SP=2 group,
each rank on its S/2 tokens with real all-to-alls; the group's loss (summed over ranks) and
gradients (parameters summed over ranks, input rows concatenated) against the reference.

train: each arm's job steps (evenly spaced over its epoch, the same ones the replay composes)
run on the W ranks; --budget-s shares a wall budget out over the arms in order (an arm past its
share stops after the step it is in, on every rank), and train.json is written after every arm.
The blocks are examples/shape_bench.py's DiTBlock (the block the replay and the shipped
benchmark time) with the emulated all-to-alls replaced by adaptiveload.sp's over the group's
process group (adaptiveload.training.sp_groups, created once). Lock-step arms (a, a', c: every rank
runs slot k's micro-batch of its group) under FSDP2 (fully_shard per block and the stack,
bf16 parameters: an all-gather forward and backward and a reduce-scatter per micro-batch, as
the replay models); where fully_shard or an NCCL backend is missing, the parameters are
replicated and the gradients all-reduced after every micro-batch (named "replicated").
The DCP-like arm (b-T) runs each rank's own micro-batches without lock-step and all-reduces
the gradients once per step (ZeRO-2-like traffic). Inputs are views of one random buffer (no
per-micro-batch generation in the step). Per step: wall ms from a barrier to the optimizer's
end (the slowest rank), each rank's micro-batch ms (CUDA events around forward + backward,
all-to-alls and FSDP waits included), tokens.

report: per model and arm the measured tokens/s, step times (mean, CV), idle share (1 - the
ranks' micro-batch time / (W x step time)) and gain over arm a, beside the replay's of the
same steps (one-GPU share timings of the same blocks, sp_model.compose with the model's
collectives for that many blocks); the measured link model beside the assumed one.
"""

import argparse
import functools
import inspect
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path[:0] = [HERE, os.path.join(REPO, "examples"), os.path.join(REPO, "python")]
import sp_model  # noqa: E402

TRAIN_ARMS = ("a", "a'", "b-T", "c")
SMOKE_MODEL = {"hidden": 64, "heads": 4, "ffn": 128, "depth": 2, "text_len": 8, "text_dim": 32}
A2A_S = (2048, 4096, 8192, 16384, 32768, 65536, 131072)


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------------------------
# host: the job


def pick_steps(sched, steps, spread):
    """The schedule cut to ``steps`` steps: the first ones, or (spread) steps evenly spaced
    over the epoch, so that each arm's sample mix is the epoch's (a policy may order its
    buckets so that its first steps hold shorter or longer samples than the rest)."""
    n = len(sched["steps"])
    idx = [i * n // steps for i in range(steps)] if spread and n > steps else list(range(min(n, steps)))
    s = dict(sched)
    s["steps"] = [sched["steps"][i] for i in idx]
    s["step_indices"] = idx
    return s


def job_cmd(a):
    """The device job of --steps steps of every TRAIN_ARMS arm at W = 2 (evenly spaced over
    the epoch; --first: the first ones): two/job.json (sp_replay.py: their distinct shapes,
    timed at --blocks blocks) and two/arms.json (those steps' schedules and the model shapes
    for train)."""
    work = os.path.abspath(a.work)
    with open(os.path.join(work, "meta.json")) as f:
        meta = json.load(f)
    out = os.path.join(work, "two")
    os.makedirs(out, exist_ok=True)
    job = {"models": {}, "order": [], "full": None, "reps": a.reps, "warmup": 1}
    arms = {"world": a.world, "steps": a.steps, "spread": not a.first, "blocks": a.blocks, "models": {}, "arms": {}}
    for name in meta["models"]:
        m = SMOKE_MODEL if a.smoke else sp_model.MODELS[name]
        shapes = {}
        for arm in TRAIN_ARMS:
            key = "%s/%s/w%d" % (name, arm, a.world)
            if key not in meta["arms"]:
                raise SystemExit("%s: no schedule %s (sp_arms.py prepare --worlds %d)" % (work, key, a.world))
            with open(os.path.join(work, os.path.basename(meta["arms"][key]))) as f:
                s = pick_steps(json.load(f), a.steps, not a.first)
            arms["arms"][key] = s
            for k, n in sp_model.schedule_shapes(s).items():
                shapes[k] = shapes.get(k, 0) + n
        est = sp_model.MODELS[name]
        rows = [[B, S, d, a.blocks * sp_model.analytic_ms(est, B, S, d), n] for (B, S, d), n in sorted(shapes.items())]
        dims = {k: m[k] for k in ("hidden", "heads", "ffn", "text_dim", "text_len")}
        job["models"][name] = dict(dims, blocks=a.blocks, shapes=rows)
        job["order"].append(name)
        arms["models"][name] = dict(dims, depth=sp_model.MODELS[name]["depth"])
        log("%s: %d distinct shapes in %d steps (%s) of %s" % (name, len(rows), a.steps,
                                                         "the first" if a.first else "evenly spaced",
                                                         ", ".join(TRAIN_ARMS)))
    for fn, obj in (("job.json", job), ("arms.json", arms)):
        with open(os.path.join(out, fn), "w") as f:
            json.dump(obj, f)
    log("job: %s, %s" % (os.path.join(out, "job.json"), os.path.join(out, "arms.json")))
    return 0


# ---------------------------------------------------------------------------------------------
# device: process setup


def spawn(n, argv):
    """Starts n local ranks of this file with torchrun's variables; returns the worst rc."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env))
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=900))
        except subprocess.TimeoutExpired:
            p.kill()
            rcs.append(124)
    return max(rcs)


def setup():
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and not os.environ.get("SP2_CPU")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        local %= torch.cuda.device_count()  # ranks share a GPU only in the SP2_BACKEND=gloo path check
        torch.cuda.set_device(local)
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    backend = os.environ.get("SP2_BACKEND") or ("nccl" if cuda else "gloo")
    bind = cuda and backend == "nccl" and "device_id" in inspect.signature(dist.init_process_group).parameters
    dist.init_process_group(backend, **({"device_id": dev} if bind else {}))  # NCCL: this rank's GPU, not a guess
    return dist.get_rank(), dist.get_world_size(), dev


def dtype_for(dev):
    """bf16 on the GPU (the replay's); float32 on the CPU (gloo of older torch has no bf16)."""
    import torch

    return torch.bfloat16 if dev.type == "cuda" else torch.float32


def _write(out, name, obj):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name), "w") as f:
        json.dump(obj, f, indent=1)
    log("wrote %s" % os.path.join(out, name))


def _models(smoke, names):
    return {n: (SMOKE_MODEL if smoke else sp_model.MODELS[n]) for n in names}


# ---------------------------------------------------------------------------------------------
# device: collectives


def _fit_link(points):
    """Least squares ms = lat + bytes / (gbps 1e6) over (bytes, ms); (lat_ms, gbps)."""
    n = len(points)
    if n < 2:
        return None, None
    mx = sum(b for b, _ in points) / n
    my = sum(t for _, t in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (t - my) for b, t in points) / sxx if sxx else 0.0
    return my - slope * mx, (1.0 / (slope * 1e6) if slope > 0 else None)


def _time(clock, fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    clock.sync()
    runs = []
    for _ in range(reps):
        t = clock.start()
        fn()
        runs.append(clock.ms(clock.stop(t)))
    return statistics.median(runs), runs


def fit_default_link_gbps():
    """`adaptiveload fit --sp-link-gbps`'s default, read from the cost model's header."""
    import re

    with open(os.path.join(REPO, "cost", "al_cost.h")) as f:
        m = re.search(r"#define AL_COST_DEFAULT_SP_LINK_GBPS ([0-9.]+)", f.read())
    if not m:
        raise SystemExit("cost/al_cost.h: AL_COST_DEFAULT_SP_LINK_GBPS not found")
    return float(m.group(1))


def collectives_cmd(a):
    import torch
    import torch.distributed as dist

    from sp_share import Clock

    rank, world, dev = setup()
    clock = Clock(dev)
    d = world
    backend = dist.get_backend()
    res = {"world": world, "backend": backend, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda"
           else "cpu", "torch": torch.__version__, "models": {}}
    fit_default_gbps = fit_default_link_gbps()
    dt = dtype_for(dev)
    size = torch.empty((), dtype=dt).element_size()
    res["dtype"] = str(dt)
    for name, m in _models(a.smoke, a.models.split(",")).items():
        h = m["hidden"]
        comm = sp_model.Comm(m, world)
        rows = []
        for S in ((256, 512, 1024) if a.smoke else A2A_S):
            x = torch.randn(S // d, h, device=dev, dtype=dt)
            y = torch.empty_like(x)
            ms, runs = _time(clock, functools.partial(dist.all_to_all_single, y, x), a.reps)
            out_bytes = x.numel() * size * (d - 1) / d
            model_ms = comm.a2a_ms(1, S, d) / (8 * m["depth"])  # the replay's: one of a block's 8
            rows.append({"S": S, "tensor_bytes": x.numel() * size, "bytes_leaving_rank": out_bytes, "ms": ms,
                         "runs": runs, "gbps": out_bytes / (ms * 1e6) if ms > 0 else None, "model_ms": model_ms,
                         "model_ms_fit_default": 1e3 * out_bytes / (fit_default_gbps * 1e9),
                         "measured_over_model": ms / model_ms if model_ms else None})
            del x, y
        lat, gbps = _fit_link([(r["bytes_leaving_rank"], r["ms"]) for r in rows])
        P = sp_model.block_params(m)
        flat = torch.randn(P - P % world, device=dev, dtype=dt)
        shard = torch.empty(flat.numel() // world, device=dev, dtype=dt)
        if hasattr(dist, "all_gather_into_tensor") and backend != "gloo":
            ag = ("all_gather_into_tensor", functools.partial(dist.all_gather_into_tensor, flat, shard))
            rs = ("reduce_scatter_tensor", functools.partial(dist.reduce_scatter_tensor, shard, flat))
        else:
            ag = rs = ("all_reduce (no all_gather_into_tensor / reduce_scatter_tensor on %s)" % backend,
                       functools.partial(dist.all_reduce, flat))
        fsdp = {}
        for what, (op, fn) in (("all_gather", ag), ("reduce_scatter", rs)):
            ms, runs = _time(clock, fn, a.reps)
            moved = flat.numel() * size * (world - 1) / world
            model_ms = 1e3 * moved / (comm.link_gbps * 1e9)
            fsdp[what] = {"op": op, "block_param_bytes": flat.numel() * size, "bytes_moved_per_rank": moved, "ms": ms,
                          "runs": runs, "gbps": moved / (ms * 1e6) if ms > 0 else None, "model_ms": model_ms,
                          "measured_over_model": ms / model_ms if model_ms else None}
        del flat, shard
        res["models"][name] = {
            "hidden": h, "a2a": rows, "a2a_fit": {"latency_ms": lat, "gbps": gbps},
            "a2a_model": {"link_gbps": comm.link_gbps, "fit_default_gbps": fit_default_gbps,
                          "per_block": "8 all-to-alls of B S/d x hidden bf16"},
            "fsdp_block": fsdp}
        if rank == 0:
            log("%s: all-to-all fit %s ms + bytes / %s GB/s (model %.0f GB/s); all-gather of a block %.3f ms "
                "(model %.3f)" % (name, "%.4f" % lat if lat is not None else "-", "%.0f" % gbps if gbps else "-",
                                  comm.link_gbps, fsdp["all_gather"]["ms"], fsdp["all_gather"]["model_ms"]))
    if rank == 0:
        _write(a.out, "collectives.json", res)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------------------------
# device: the real Ulysses block


def ulysses_block_class():
    """shape_bench.DiTBlock with real all-to-alls over ``self.group`` (None: the emulation):
    adaptiveload.sp's sequence_to_heads / heads_to_sequence, the functions a trainer calls.
    This rank's B x s tokens (s = ceil(S / d) of each sample) are its contiguous slice of a
    packed sequence of d B s rows, so the library's exchange moves exactly the rows and head
    blocks the emulated layout permutes."""
    import torch.distributed as dist
    from adaptiveload import sp as alsp
    from shape_bench import DiTBlock

    class UlyssesBlock(DiTBlock):
        group = None

        def _shard(self, rows, d):
            return alsp.Shard(self.group, d, dist.get_rank(self.group), d * rows)

        def _a2a_in(self, t, d):
            if self.group is None or d == 1:
                return super()._a2a_in(t, d)
            B, s, _ = t.shape
            hl = self.heads // d
            got = alsp.sequence_to_heads(t.reshape(B * s, self.heads, self.hd), self._shard(B * s, d))
            # (d B s, H / d, hd), position-major: position j's tokens of this rank's heads
            return got.view(d, B, s, hl, self.hd).permute(1, 3, 0, 2, 4).reshape(B, hl, d * s, self.hd)

        def _a2a_out(self, o, d):
            if self.group is None or d == 1:
                return super()._a2a_out(o, d)
            B, hl, S, hd = o.shape
            s = S // d
            rows = o.view(B, hl, d, s, hd).permute(2, 0, 3, 1, 4).reshape(d * B * s, hl, hd)
            return alsp.heads_to_sequence(rows, self._shard(B * s, d)).reshape(B, s, d * hl * hd)

    return UlyssesBlock


def make_stack(m, blocks, dev, dtype, seed=0):
    import torch
    import torch.nn as nn

    Block = ulysses_block_class()

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block(m["hidden"], m["heads"], m["ffn"], m["text_dim"] if m["text_len"] else 0)
                                        for _ in range(blocks))

        def set_group(self, group):
            for b in self.blocks:
                b.group = group

        def forward(self, x, e, text, d):
            for b in self.blocks:
                x = b(x, e, text, d)
            return x

    torch.manual_seed(seed)
    return Stack().to(dev, dtype)


# ---------------------------------------------------------------------------------------------
# device: SP=2 against one rank


def check_cmd(a):
    import torch
    import torch.distributed as dist
    from adaptiveload.training import sp_groups

    rank, world, dev = setup()
    groups = sp_groups(world, [1, world])
    group = groups[world][0]
    res = {"world": world, "backend": dist.get_backend(), "dtype": "float32", "models": {}}
    cases = {n: (2, 256) if a.smoke else (2, 4096 if n == "1.3b" else 2048) for n in a.models.split(",")}
    ok = True
    for name, m in _models(a.smoke, a.models.split(",")).items():
        B, S = cases[name]
        stack = make_stack(m, a.blocks, dev, torch.float32, seed=1)
        g = torch.Generator(device="cpu").manual_seed(7)
        x = torch.randn(B, S, m["hidden"], generator=g).to(dev)
        e = (torch.randn(B, 6, m["hidden"], generator=g) * 0.1).to(dev)
        text = torch.randn(B, m["text_len"], m["text_dim"], generator=g).to(dev) if m["text_len"] else None
        w = torch.randn(B, S, m["hidden"], generator=g).to(dev)

        def loss_of(out, wt):
            return (out.float() * wt).square().sum() / (B * S)

        # reference: the whole micro-batch on this rank, no group
        stack.set_group(None)
        xr = x.clone().requires_grad_()
        lr = loss_of(stack(xr, e, text, 1), w)
        lr.backward()
        ref_grads = [p.grad.detach().clone() for p in stack.parameters()]
        stack.zero_grad(set_to_none=True)
        # SP over the group: this rank's S / d tokens of each sample
        s = S // world
        sl = slice(rank * s, (rank + 1) * s)
        stack.set_group(group)
        xs = x[:, sl].clone().requires_grad_()
        ls = loss_of(stack(xs, e, text, world), w[:, sl])
        ls.backward()
        loss_sum = ls.detach().clone()
        dist.all_reduce(loss_sum, group=group)
        grads = [p.grad.detach().clone() for p in stack.parameters()]
        for gr in grads:
            dist.all_reduce(gr, group=group)
        gx = [torch.empty_like(xs.grad) for _ in range(world)]
        dist.all_gather(gx, xs.grad.contiguous(), group=group)
        gx = torch.cat(gx, dim=1)

        def rel(u, v):
            return float((u - v).norm() / max(v.norm(), 1e-30))

        r = {"B": B, "S": S, "blocks": a.blocks, "loss_ref": float(lr.detach()), "loss_sp": float(loss_sum),
             "loss_rel_err": abs(float(loss_sum) - float(lr.detach())) / abs(float(lr.detach())),
             "input_grad_rel_err": rel(gx, xr.grad),
             "param_grad_rel_err_max": max(rel(u, v) for u, v in zip(grads, ref_grads))}
        r["ok"] = r["loss_rel_err"] < a.tol and r["input_grad_rel_err"] < a.tol and r["param_grad_rel_err_max"] < a.tol
        ok = ok and r["ok"]
        res["models"][name] = r
        if rank == 0:
            log("check %s B=%d S=%d: loss %.6g vs %.6g (rel %.2e), input grad rel %.2e, param grads max rel %.2e%s"
                % (name, B, S, r["loss_sp"], r["loss_ref"], r["loss_rel_err"], r["input_grad_rel_err"],
                   r["param_grad_rel_err_max"], "" if r["ok"] else "  FAILED (tol %g)" % a.tol))
        del stack
    res["tol"], res["ok"] = a.tol, ok
    if rank == 0:
        _write(a.out, "check.json", res)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# device: the arms trained for real


def _fsdp2():
    try:
        from torch.distributed.fsdp import fully_shard
        return fully_shard
    except Exception:  # ImportError: a torch before 2.6 has no fully_shard
        return None


def _my_units(sched, step, rank):
    """This rank's micro-batches of one step: [(B, S, d, group leader, real tokens)], in order."""
    out = []
    if sched["sync"] == "per-rank":
        for phase in step:
            for lane in phase:
                if lane["rank"] <= rank < lane["rank"] + lane["d"]:
                    out.extend((mb["B"], mb["S"], lane["d"], lane["rank"], mb["real"]) for mb in lane["micro"])
    else:
        for slot in step:
            g = next(g for g in slot if g["rank"] <= rank < g["rank"] + g["d"])
            out.append((g["B"], g["S"], g["d"], g["rank"], g["real"]))
    return out


def _units_all(arms, name, world):
    for key, s in arms["arms"].items():
        if name is None or key.split("/")[0] == name:
            for step in s["steps"]:
                for r in range(world):
                    yield from _my_units(s, step, r)


def _run_tokens(S, d, shrink):
    """Tokens per sample a run computes: S, or (--shrink, the CPU smoke) S / shrink rounded up to
    a multiple of d."""
    if shrink <= 1:
        return S
    return max(d, -(-(S // shrink) // d) * d)


def _max_share(arms, name, world, shrink):
    """Largest per-rank token count and batch of the model's schedules (input buffers)."""
    tok, bmax = 1, 1
    for B, S, d, _, _ in _units_all(arms, name, world):
        tok = max(tok, B * -(-_run_tokens(S, d, shrink) // d))
        bmax = max(bmax, B)
    return tok, bmax


def train_arm(sched, m, blocks, dev, groups, clock, bufs, lockstep, shrink, deadline=None):
    """Trains one arm's steps in order; after a step that ends past `deadline` (time.time(), as
    rank 0 sees it, so every rank stops after the same step) the rest are left out.
    Returns (steps, sharding)."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    fully_shard = _fsdp2()
    sharding = "fsdp2" if lockstep and fully_shard and dist.get_backend() == "nccl" else "replicated"
    stack = make_stack(m, blocks, dev, dtype_for(dev))
    if sharding == "fsdp2":
        for b in stack.blocks:
            fully_shard(b)
        fully_shard(stack)
    params = list(stack.parameters())
    opt = torch.optim.SGD(params, lr=1e-6)
    xbuf, gbuf, ebuf, tbuf = bufs
    h = m["hidden"]

    acc = []  # replicated lock-step: the step's reduced gradients, summed over its micro-batches

    def reduce_grads(into_acc):
        """One all-reduce of every gradient (flattened); into_acc: added to acc and the
        gradients cleared (each micro-batch's own are reduced), else written back."""
        gs = [p.grad for p in params if p.grad is not None]
        if not gs:
            return
        flat = torch.cat([g.reshape(-1) for g in gs])
        dist.all_reduce(flat)
        if into_acc:
            if acc:
                acc[0] += flat
            else:
                acc.append(flat)
            for p in params:
                p.grad = None
            return
        o = 0
        for g in gs:
            g.copy_(flat[o:o + g.numel()].view_as(g))
            o += g.numel()

    def restore_acc():
        o = 0
        for p in params:
            p.grad = acc[0][o:o + p.numel()].view_as(p).clone()
            o += p.numel()
        acc.clear()

    steps = []
    for si, step in enumerate(sched["steps"]):
        units = _my_units(sched, step, rank)
        clock.sync()
        dist.barrier()
        t0 = time.perf_counter()
        marks = []
        for B, S, d, leader, _ in units:
            s = -(-_run_tokens(S, d, shrink) // d)
            stack.set_group(None if d == 1 else groups[d][leader // d])
            x = xbuf[:B * s].view(B, s, h).detach().requires_grad_()
            gout = gbuf[:B * s].view(B, s, h)
            text = tbuf[:B] if tbuf is not None else None
            t = clock.start()
            stack(x, ebuf[:B], text, d).backward(gout)
            if lockstep and sharding == "replicated":
                reduce_grads(True)
            marks.append(clock.stop(t))
        if not lockstep:
            reduce_grads(False)
        elif acc:
            restore_acc()
        opt.step()
        opt.zero_grad(set_to_none=True)
        clock.sync()
        wall = (time.perf_counter() - t0) * 1e3
        micro_ms = [clock.ms(t) for t in marks]
        tok = sum(real for B, S, d, leader, real in units if rank == leader)
        late = float(deadline is not None and time.time() > deadline)
        v = torch.tensor([wall, sum(micro_ms), float(tok), late], dtype=torch.float64, device=dev)
        allv = [torch.zeros_like(v) for _ in range(world)]
        dist.all_gather(allv, v)
        allv = [x.tolist() for x in allv]
        steps.append({"step": si, "wall_ms": max(x[0] for x in allv), "rank_busy_ms": [x[1] for x in allv],
                      "tokens": int(sum(x[2] for x in allv)), "micro": len(units), "micro_ms": micro_ms})
        if allv[0][3]:
            break
    del stack, opt
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return steps, sharding


def train_cmd(a):
    import torch
    import torch.distributed as dist
    from adaptiveload.training import sp_groups

    from sp_share import Clock

    rank, world, dev = setup()
    with open(a.arms) as f:
        arms = json.load(f)
    if arms["world"] != world:
        raise SystemExit("%s: schedules for W = %d, this run has %d ranks" % (a.arms, arms["world"], world))
    degrees = sorted({1} | {u[2] for u in _units_all(arms, None, world)})
    groups = sp_groups(world, degrees)
    clock = Clock(dev)
    blocks = a.blocks or arms["blocks"]
    res = {"world": world, "backend": dist.get_backend(), "torch": torch.__version__, "blocks": blocks,
           "shrink": a.shrink, "dtype": str(dtype_for(dev)),
           "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "warmup_steps": a.warmup,
           "budget_s": a.budget_s or None, "arms": {}}
    keep = a.models.split(",") if a.models else list(arms["models"])
    bad = [n for n in keep if n not in arms["models"]]
    if bad:
        raise SystemExit("%s: no model %s (it has %s)" % (a.arms, ", ".join(bad), ", ".join(arms["models"])))
    todo = [k for k in sorted(arms["arms"]) if k.split("/")[0] in keep]
    t_all = time.time()
    for name, m in arms["models"].items():
        if name not in keep:
            continue
        tok, bmax = _max_share(arms, name, world, a.shrink)
        g = torch.Generator(device=dev).manual_seed(rank)
        dt = dtype_for(dev)
        bufs = (torch.randn(tok, m["hidden"], generator=g, device=dev, dtype=dt),
                torch.randn(tok, m["hidden"], generator=g, device=dev, dtype=dt),
                torch.randn(bmax, 6, m["hidden"], generator=g, device=dev, dtype=dt) * 0.1,
                torch.randn(bmax, m["text_len"], m["text_dim"], generator=g, device=dev, dtype=dt)
                if m["text_len"] else None)
        for key in todo:
            if key.split("/")[0] != name:
                continue
            s = arms["arms"][key]
            lockstep = s["sync"] != "per-rank"
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
            t = time.time()
            # the budget is shared out in arm order; what an arm leaves unused passes to the next
            deadline = t_all + a.budget_s * (todo.index(key) + 1) / len(todo) if a.budget_s else None
            steps, sharding = train_arm(s, m, blocks, dev, groups, clock, bufs, lockstep, a.shrink, deadline)
            peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
            res["arms"][key] = {"sync": s["sync"], "sharding": sharding, "steps": steps, "peak_mem_bytes": peak,
                                "planned_steps": len(s["steps"])}
            if rank == 0:
                run = steps[a.warmup:] or steps
                log("%s: %d of %d steps in %.1f s (%s), %.0f tokens/s after %d warm-up steps" % (
                    key, len(steps), len(s["steps"]), time.time() - t, sharding,
                    sum(x["tokens"] for x in run) / (sum(x["wall_ms"] for x in run) / 1e3), a.warmup))
                res["wall_s"] = time.time() - t_all
                _write(a.out, "train.json", res)  # after every arm: a run cut off keeps what finished
        del bufs
    res["wall_s"] = time.time() - t_all
    if rank == 0:
        _write(a.out, "train.json", res)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------------------------
# host: the comparison


def _idle(steps, world, busy_key="rank_busy_ms", step_key="wall_ms"):
    tot = sum(s[step_key] for s in steps)
    return 1.0 - sum(sum(s[busy_key]) for s in steps) / (world * tot) if tot > 0 else None


def _measured(real, world):
    tok = sum(s["tokens"] for s in real)
    return {"tokens": tok, "measured_tokens_per_s": tok / (sum(s["wall_ms"] for s in real) / 1e3),
            "measured_step_ms_mean": statistics.mean(s["wall_ms"] for s in real),
            "measured_step_cv": sp_model.cv([s["wall_ms"] for s in real]), "measured_idle": _idle(real, world)}


def _merged(paths, key):
    """One result from the JSON files of several device calls (one model each, say): the first
    file's fields, with `key`'s entries of every file; an entry in two files is an error."""
    out = None
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        if out is None:
            out = r
            continue
        for k, v in r[key].items():
            if k in out[key]:
                raise SystemExit("%s: %s %r is in an earlier file too" % (path, key, k))
            out[key][k] = v
    return out


def report_cmd(a):
    """The comparison table; without --train, the replay's half alone (measured columns -)."""
    work = os.path.abspath(a.work)
    with open(os.path.join(work, "two", "arms.json")) as f:
        arms = json.load(f)
    tr = _merged(a.train, "arms") if a.train else None
    tm = _merged(a.replay, "models")
    world = arms["world"]
    blocks = tr["blocks"] if tr else arms["blocks"]
    skip = tr["warmup_steps"] if tr else a.warmup
    out = {"world": world, "blocks": blocks, "warmup_steps_left_out": skip, "replay_device": tm.get("device"),
           "device": tr.get("device") if tr else None, "backend": tr.get("backend") if tr else None, "rows": []}
    base = {}
    keys = tr["arms"] if tr else arms["arms"]
    for key in sorted(keys, key=lambda k: (k.split("/")[0], TRAIN_ARMS.index(k.split("/")[1]))):
        name, arm, _ = key.split("/")
        m = dict(arms["models"][name], depth=blocks)
        table = {tuple(int(x) for x in k.split(",")): v["ms"] for k, v in tm["models"][name]["shapes"].items()}
        scale = blocks / tm["models"][name]["blocks"]
        comm = sp_model.Comm(m, world)
        sched = arms["arms"][key]
        missing = sorted(k for k in sp_model.schedule_shapes(sched) if k not in table)
        if missing:
            raise SystemExit("%s: the replay timed no %s (B, S, d) of %s" % (a.replay, missing[:4], key))
        # a trained arm cut off by its budget is set beside the replay of the steps it ran
        upto = len(tr["arms"][key]["steps"]) if tr else len(sched["steps"])
        if upto <= skip:
            raise SystemExit("%s: %d step(s) %s, none after the %d warm-up step(s)" % (
                key, upto, "trained" if tr else "in the schedule", skip))
        composed = sp_model.compose(sched, lambda B, S, d: table[(B, S, d)] * scale, comm)[skip:upto]
        c_tok = sum(s["real"] for s in composed)
        row = {"model": name, "arm": arm, "steps": len(composed), "tokens": c_tok,
               "replay_tokens_per_s": c_tok / (sum(s["step_ms"] for s in composed) / 1e3),
               "replay_step_ms_mean": statistics.mean(s["step_ms"] for s in composed),
               "replay_step_cv": sp_model.cv([s["step_ms"] for s in composed]),
               "replay_idle": _idle(composed, world, step_key="step_ms"),
               "replay_bubble": sp_model.summarise(composed, world)["bubble"],
               "sharding": None, "peak_mem_bytes": None, "measured_tokens_per_s": None,
               "measured_step_ms_mean": None, "measured_step_cv": None, "measured_idle": None}
        if tr:
            real = tr["arms"][key]["steps"][skip:]
            row.update(_measured(real, world), sharding=tr["arms"][key]["sharding"],
                       peak_mem_bytes=tr["arms"][key]["peak_mem_bytes"])
            if row["tokens"] != c_tok:
                raise SystemExit("%s: the trained steps hold %d tokens, the replayed %d" % (key, row["tokens"], c_tok))
        if arm == "a":
            base[name] = row
        b = base.get(name)
        row["replay_vs_a"] = row["replay_tokens_per_s"] / b["replay_tokens_per_s"] if b else None
        row["measured_vs_a"] = (row["measured_tokens_per_s"] / b["measured_tokens_per_s"]
                                if b and tr else None)
        row["gain_gap_points"] = (100 * (row["measured_vs_a"] - row["replay_vs_a"])
                                  if row["measured_vs_a"] is not None else None)
        out["rows"].append(row)
    if a.collectives:
        out["collectives"] = _merged(a.collectives, "models")
    if a.check:
        out["check"] = _merged(a.check, "models")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    md = report_table(out)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    print(md)
    return 0


def report_table(out):
    def p(x):
        return "-" if x is None else "%.1f%%" % (100 * x)

    def x_(v):
        return "-" if v is None else "%.3fx" % v

    def n_(v):
        return "-" if v is None else "{:,.0f}".format(v)

    lines = ["| model | arm | sharding | tokens/s measured / replay | vs (a) measured / replay | gap (points) | "
             "step ms measured / replay | step CV measured / replay | idle measured / replay | bubble (replay) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["rows"]:
        lines.append("| %s | %s | %s | %s / %s | %s / %s | %s | %s / %.1f | %s / %s | %s / %s | %s |" % (
            r["model"], r["arm"], r["sharding"] or "-", n_(r["measured_tokens_per_s"]),
            n_(r["replay_tokens_per_s"]), x_(r["measured_vs_a"]), x_(r["replay_vs_a"]),
            "-" if r["gain_gap_points"] is None else "%+.1f" % r["gain_gap_points"],
            "-" if r["measured_step_ms_mean"] is None else "%.1f" % r["measured_step_ms_mean"],
            r["replay_step_ms_mean"], p(r["measured_step_cv"]), p(r["replay_step_cv"]), p(r["measured_idle"]),
            p(r["replay_idle"]), p(r["replay_bubble"])))
    c = out.get("collectives")
    if c:
        lines.append("\n| model | all-to-all fit (latency, GB/s) | model GB/s | measured / model at S = 32,768 | "
                     "block all-gather ms (model) | block reduce-scatter ms (model) |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for name, v in c["models"].items():
            at = next((r for r in v["a2a"] if r["S"] == 32768), v["a2a"][-1])
            f = v["a2a_fit"]
            lines.append("| %s | %s ms, %s | %.0f | %.2f | %.3f (%.3f) | %.3f (%.3f) |" % (
                name, "-" if f["latency_ms"] is None else "%.4f" % f["latency_ms"],
                "-" if not f["gbps"] else "%.0f" % f["gbps"], v["a2a_model"]["link_gbps"],
                at["measured_over_model"], v["fsdp_block"]["all_gather"]["ms"],
                v["fsdp_block"]["all_gather"]["model_ms"], v["fsdp_block"]["reduce_scatter"]["ms"],
                v["fsdp_block"]["reduce_scatter"]["model_ms"]))
    ck = out.get("check")
    if ck:
        for name, r in ck["models"].items():
            lines.append("\nSP=%d vs one rank, %s B=%d S=%d (%s): loss rel. error %.1e, input gradient %.1e, "
                         "parameter gradients max %.1e (%s at tol %g)." % (
                             ck["world"], name, r["B"], r["S"], ck["dtype"], r["loss_rel_err"],
                             r["input_grad_rel_err"], r["param_grad_rel_err_max"], "ok" if r["ok"] else "FAILED",
                             ck["tol"]))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def _int_min(lo):
    """An argparse type: an integer >= lo, else a message naming the value."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not an integer" % text)
        if v < lo:
            raise argparse.ArgumentTypeError("%d is below %d" % (v, lo))
        return v
    return parse


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError("%r is not a finite number > 0" % text)
    return v


def _model_list(text):
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in sp_model.MODELS]
    if bad or not names:
        raise argparse.ArgumentTypeError("models %r: each one of %s" % (text, ", ".join(sorted(sp_model.MODELS))))
    return ",".join(names)


def _without_spawn(argv):
    """argv less its --spawn N / --spawn=N (the ranks it starts get the rest)."""
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
        elif x == "--spawn":
            skip = True
        elif not x.startswith("--spawn="):
            out.append(x)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("job")
    j.add_argument("--work", required=True)
    j.add_argument("--world", type=_int_min(1), default=2)
    j.add_argument("--steps", type=_int_min(1), default=30)
    j.add_argument("--blocks", type=_int_min(1), default=2)
    j.add_argument("--reps", type=_int_min(1), default=3)
    j.add_argument("--first", action="store_true", help="the first --steps steps (default: evenly spaced)")
    j.add_argument("--smoke", action="store_true", help="tiny model shapes")
    for cmd in ("collectives", "check", "train"):
        p = sub.add_parser(cmd)
        p.add_argument("--out", required=True)
        p.add_argument("--spawn", type=_int_min(0), default=0, help="start N local ranks here (gloo on the CPU)")
        p.add_argument("--smoke", action="store_true", help="tiny model shapes")
        p.add_argument("--models", type=_model_list, default=None if cmd == "train" else "14b,1.3b",
                       help="comma-separated (train: default every model of --arms)")
        if cmd == "collectives":
            p.add_argument("--reps", type=_int_min(1), default=10)
        if cmd in ("check", "train"):
            p.add_argument("--blocks", type=_int_min(0 if cmd == "train" else 1), default=0 if cmd == "train" else 2,
                           help="blocks (train: 0 = the job's)")
        if cmd == "check":
            p.add_argument("--tol", type=_positive_float, default=2e-4)
        if cmd == "train":
            p.add_argument("--arms", required=True, help="two/arms.json of `job`")
            p.add_argument("--warmup", type=_int_min(0), default=2, help="steps left out of the figures")
            p.add_argument("--budget-s", type=_positive_float, default=None,
                           help="wall seconds for all arms, shared out in order; an arm past its share stops "
                           "after the step it is in (default: no limit)")
            p.add_argument("--shrink", type=_int_min(1), default=1, help="compute S / N tokens per sample (CPU smoke "
                           "only: the figures then mean nothing; tokens are still the schedule's)")
    r = sub.add_parser("report")
    r.add_argument("--work", required=True)
    # each may be given once per device call (one model a call): the files are merged
    r.add_argument("--replay", required=True, action="append", help="timings.json of sp_replay.py on the job")
    r.add_argument("--train", action="append", help="train.json (absent: the replay's half alone)")
    r.add_argument("--warmup", type=_int_min(0), default=2, help="without --train: first steps left out")
    r.add_argument("--collectives", action="append")
    r.add_argument("--check", action="append")
    r.add_argument("--out", required=True)
    r.add_argument("--md")
    a = ap.parse_args(argv)
    if getattr(a, "spawn", 0) and "RANK" not in os.environ:
        return spawn(a.spawn, _without_spawn(argv))
    return {"job": job_cmd, "collectives": collectives_cmd, "check": check_cmd, "train": train_cmd,
            "report": report_cmd}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
