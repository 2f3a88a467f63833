#!/usr/bin/env python3
"""examples/train_dit.py --smoke on real sequence-parallel plans, under gloo processes (CPU).

For each case the launcher plans the smoke corpus with ``plan --sp-degrees`` and a
--mem-tokens below the longest clips' tokens (so those buckets go to groups of 2 or 4),
starts W copies of train_dit.py with torchrun's variables (RANK, WORLD_SIZE, ...; started
here, each with its own log; tests/examples/readme_loop_test.py and sp_train_test.py
--torchrun launch through torchrun itself) and checks:

* every rank exits 0 (every step ran, every loss finite: train_dit's own check);
* lock-step: every rank ran the same (step, micro) slots, as many per step as the plan's K;
  the ranks of each SP group ran the same micro-batch in the same slot, their token rows
  tile [0, N) in rank order, and micro-batches of every degree > 1 the plan has were run;
* step 0's loss and whole gradients (``--record``: rank 0 after the step's last backward,
  DDP-averaged) equal those of the same plan's step-0 micro-batches on one process without
  SP: every rank's micro-batches read whole from StreamDataset, an SP group's once (its
  sp_rank 0), each with the generator train_dit gives it (relative 1e-4, float32).

Cases: world 2 at degrees 1,2 (the whole micro-batch on each rank, then token shards:
--sp-shard), world 4 at degrees 1,2,4 with token shards.
"""

import glob
import json
import math
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _find(rel):
    for base in (os.getcwd(), os.path.join(HERE, "..", "..")):
        p = os.path.join(base, rel)
        if os.path.exists(p):
            return os.path.abspath(p)
    raise SystemExit("cannot find %s" % rel)


CASES = [
    # (name, world, degrees, mem_tokens, sp_shard)
    ("w2-whole", 2, "1,2", 40, False),
    ("w2-shard", 2, "1,2", 40, True),
    ("w4-shard", 4, "1,2,4", 24, True),
]
SEED = 0


def run_case(name, world, degrees, mem, shard, root, workdir):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    rec = os.path.join(root, name)
    os.makedirs(rec, exist_ok=True)
    cmd = [sys.executable, _find("examples/train_dit.py"), "--smoke", "--workdir", workdir, "--samples", "48",
           "--mem-tokens", str(mem), "--sp-degrees", degrees, "--steps", "3", "--record", rec, "--lr", "0",
           "--seed", str(SEED)] + (["--sp-shard"] if shard else [])
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        log = open(os.path.join(rec, "rank%d.log" % r), "w")
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    failed = []
    for r, (p, log) in enumerate(procs):
        try:
            rc = p.wait(timeout=400)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        log.close()
        if rc != 0:
            failed.append((r, rc))
    for r in range(world):
        sys.stdout.write("---- %s rank %d\n" % (name, r) + open(os.path.join(rec, "rank%d.log" % r)).read())
    if failed:
        raise SystemExit("%s: ranks failed: %s" % (name, failed))
    return [json.load(open(os.path.join(rec, "rank%d.json" % r))) for r in range(world)], rec


def check_lockstep(name, recs, degrees):
    world = len(recs)
    slots = [[(m["step"], m["micro"]) for m in r["micro"]] for r in recs]
    for r in range(world):
        assert slots[r] == slots[0], "%s: rank %d ran slots %s, rank 0 %s" % (name, r, slots[r], slots[0])
    assert slots[0], name
    k = max(m for _, m in slots[0]) + 1
    for step in sorted({s for s, _ in slots[0]}):
        assert [m for s, m in slots[0] if s == step] == list(range(k)), (name, step, slots[0])
    seen = set()
    for i, (step, micro) in enumerate(slots[0]):
        for r in range(world):
            m = recs[r]["micro"][i]
            assert all(math.isfinite(m["loss"]) for m in recs[r]["micro"]), name
            d = m["sp_degree"]
            seen.add(d)
            first = r - m["sp_rank"]
            assert first % d == 0 and m["sp_ranks"] == list(range(first, first + d)), (name, r, m)
            if m["sp_rank"] == 0 and d > 1:  # the group: same micro-batch, rows tiling [0, N)
                ms = [recs[g]["micro"][i] for g in range(first, first + d)]
                assert all(x["tokens"] == m["tokens"] and x["samples"] == m["samples"] and x["bucket"] == m["bucket"]
                           and x["sp_degree"] == d for x in ms), (name, step, micro, ms)
                assert [x["sp_rank"] for x in ms] == list(range(d)), ms
                rows = [x["rows"] for x in ms]
                assert rows[0][0] == 0 and rows[-1][1] == m["tokens"] and all(
                    a[1] == b[0] for a, b in zip(rows, rows[1:])), (name, rows)
    want = {int(v) for v in degrees.split(",")}
    assert want - {1} <= seen, "%s: the run had micro-batches of degrees %s, the plan's SP degrees are %s" % (
        name, sorted(seen), sorted(want))
    print("%s: lock-step over %d ranks, %d slots each, degrees run %s" % (name, world, len(slots[0]), sorted(seen)))


class Whole:
    """A PackedBatch read as degree 1 (the reference runs every micro-batch whole)."""

    sp_degree, sp_rank, sp_sharded = 1, 0, False

    def __init__(self, b):
        self._b = b

    def __len__(self):
        return len(self._b)

    def __getattr__(self, name):
        return getattr(self._b, name)


def reference_steps(name, recs, rec_dir):
    """Every step of the run on this process at SP=1 from the initial parameters (the run
    trains at --lr 0: AdamW leaves them unchanged), compared with the run's stepN.pt."""
    import torch

    sys.path.insert(0, _find("examples"))
    import adaptiveload
    import train_dit as td

    info = recs[0]
    world, epoch = info["world"], info["epoch"]
    steps = sorted({m["step"] for m in info["micro"]})

    class A:
        smoke, tiny_model, blocks = True, False, 0

    cfg = td.model_config(A, info["degrees"])
    torch.manual_seed(SEED)
    model = td.build_model(cfg, torch.device("cpu"), "auto", False, log=lambda *a: None)
    cpu = torch.device("cpu")
    per_step = {s: [] for s in steps}  # (rank, degree, micro-batch) of each step, an SP group's once
    gens = {}
    for r in range(world):
        ds = adaptiveload.StreamDataset(info["index"], info["manifest"], rank=r, world_size=world,
                                        members=[td.LATENT_MEMBER, td.TEXT_MEMBER])
        gens[r] = torch.Generator(device=cpu).manual_seed(SEED * 1000003 + r)  # train_dit's rank stream
        for b in ds:
            if b.step > steps[-1]:
                break
            if b.sp_degree > 1 and b.sp_rank != 0:
                continue  # the group's micro-batch, run once
            p = td.prepare(Whole(b), ds, cfg, cpu, True, td.TEXT_MEMBER, td.LATENT_MEMBER, None, epoch)
            per_step[b.step].append((r, int(b.sp_degree), p))
    sp_steps = 0
    for s in steps:
        model.zero_grad(set_to_none=True)
        total = 0.0
        for r, d, p in per_step[s]:
            # the generator train_dit gives it: rank r's stream at degree 1 (drawn in order), else the group's key
            g = gens[r] if d == 1 else torch.Generator(device=cpu).manual_seed(
                td.sp_seed(SEED, epoch, p.step, p.micro, r))
            loss, _ = td.flow_loss(model, p, 1, g)
            loss.backward()
            total += float(loss)
        got = torch.load(os.path.join(rec_dir, "step%d.pt" % s))
        err = abs(got["loss"] - total) / max(1e-12, abs(total))
        assert err < 1e-4, "%s: step %d loss %.8g, SP=1 reference %.8g (relative %.3g)" % (
            name, s, got["loss"], total, err)
        n = 0
        for pn, q in model.named_parameters():
            a, b = got["grads"][pn], q.grad
            e = float((a - b).abs().max()) / max(1e-12, float(b.abs().max()))
            assert e < 1e-4, "%s: step %d gradient of %s differs from SP=1 by %.3g" % (name, s, pn, e)
            n += 1
        degrees = sorted({d for _, d, _ in per_step[s]})
        sp_steps += degrees != [1]
        print("%s: step %d (%d micro-batches, degrees %s) loss %.6f equals SP=1's %.6f; %d gradients equal"
              % (name, s, len(per_step[s]), degrees, got["loss"], total, n))
    assert sp_steps > 0, "%s: no step had an SP micro-batch" % name


def main():
    root = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    workdir = os.path.join(root, "corpus")
    for name, world, degrees, mem, shard in CASES:
        recs, rec = run_case(name, world, degrees, mem, shard, root, workdir)
        check_lockstep(name, recs, degrees)
        reference_steps(name, recs, rec)
    print("sp_smoke_test: OK (%d cases)" % len(CASES))


if __name__ == "__main__":
    main()
