#!/usr/bin/env python3
"""README.md's training loop, as written there, launched by torchrun with 2 gloo ranks (CPU).

Run without RANK it is the launcher. It writes a typed corpus (KEY.latent.npy, KEY.t5.npy,
examples/train_dit.py's smoke profile), indexes it with the CLI and runs this file under
``python3 -m torch.distributed.run --nproc-per-node 2`` three times:

* run A: two epochs, uninterrupted;
* run B: the same job stopped after its third optimizer step of epoch 0 (the model, the
  optimizer and ``state = batch.resume_state`` saved as a checkpoint, as the README says);
* run C: the job restarted from B's checkpoint, to the end of epoch 1.

Each rank is the README's loop (Planner with micro_per_step=2 and the smoke bucket table, StreamDataset over latent.npy
and t5.npy, set_epoch, load_state_dict on the resumed epoch, grad_sync, the loss normalised by
step_tokens, opt.step on last_in_step) with a small deterministic model under DDP. The
launcher checks:

* lock-step: in every step both ranks run exactly K = 2 micro-batches, the last one
  last_in_step, and the same steps;
* every sample of the index exactly once per epoch over both ranks (padding aside);
* DDP kept the replicas equal: both ranks end with the same parameters;
* exact resume: B then C deliver, rank by rank, the batches A delivered in the same order
  (none lost or repeated), and C ends with A's parameters.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD, EPOCHS, K, STOP_AFTER = 2, 2, 2, 3


def _find(rel):
    """A checkout path: under bazel's runfiles (the working directory) or beside this file."""
    for base in (os.getcwd(), os.path.join(HERE, "..", "..")):
        p = os.path.join(base, rel)
        if os.path.exists(p):
            return os.path.abspath(p)
    raise SystemExit("cannot find %s" % rel)


# ---------------------------------------------------------------------------------------------
# one rank: the README's loop


def rank_main():
    import torch
    import torch.nn as nn

    import adaptiveload

    index, out, stop_after = os.environ["RL_INDEX"], os.environ["RL_OUT"], int(os.environ["RL_STOP_AFTER"])
    ckpt_in = os.environ.get("RL_CKPT_IN")
    env = adaptiveload.setup_distributed(cpu=True)
    rank, world = env.rank, env.world_size
    ckpt_out = os.path.join(out, "ckpt%d.pt" % rank)

    class Model(nn.Module):
        """Per-token loss of a packed micro-batch: a projection of each token plus its
        sample's mean text row, squared (deterministic: no noise, no dropout)."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.x = nn.Linear(64, 64)
            self.t = nn.Linear(32, 64)

        def forward(self, x, text, cu_seqlens):
            lengths = cu_seqlens.diff().long()
            seg = torch.repeat_interleave(torch.arange(len(text)), lengths)
            t = torch.stack([self.t(row.float().mean(0)) for row in text]) if len(text) else torch.zeros(0, 64)
            return ((self.x(x.float()) + t[seg]) ** 2).mean(1)

    model = nn.parallel.DistributedDataParallel(Model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    state = None
    if ckpt_in:
        ck = torch.load(ckpt_in % rank, weights_only=False)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state = ck["stream"]

    planner = adaptiveload.Planner(index, world=world, seed=0, micro_per_step=K, mem_tokens=256,
                                   buckets=os.environ["RL_BUCKETS"])
    ds = adaptiveload.StreamDataset(index, planner, members=["latent.npy", "t5.npy"])
    log, steps = [], 0
    for epoch in range(state["epoch"] if state else 0, EPOCHS):
        ds.set_epoch(epoch)
        if state and state["epoch"] == epoch:
            ds.load_state_dict(state)
        for batch in ds:
            x, text = batch.packed("latent.npy"), batch.tensors("t5.npy")
            real = (~batch.padded).to(x.device).repeat_interleave(batch.cu_seqlens.diff().long())
            with adaptiveload.grad_sync(model, batch.last_in_step):
                (model(x, text, batch.cu_seqlens) * real).sum().mul(world / batch.step_tokens).backward()
            log.append({"epoch": epoch, "step": batch.step, "micro": batch.micro, "n_micro": batch.n_micro,
                        "last": bool(batch.last_in_step), "keys": list(batch.keys),
                        "padded": [bool(p) for p in batch.padded]})
            if batch.last_in_step:
                opt.step()
                opt.zero_grad()
                state = batch.resume_state
                steps += 1
                if steps == stop_after:
                    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "stream": state},
                               ckpt_out)
                    break
        if steps == stop_after:
            break
    params = [p.detach().double().flatten().tolist() for p in model.module.parameters()]
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump({"log": log, "params": params}, f)
    env.close()


# ---------------------------------------------------------------------------------------------
# launcher


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def torchrun(out, index, stop_after=0, ckpt_in=None):
    """Runs this file under torchrun with WORLD ranks; returns each rank's record."""
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, RL_INDEX=index, RL_BUCKETS=index + ".buckets", RL_OUT=out, RL_STOP_AFTER=str(stop_after), OMP_NUM_THREADS="1")
    if ckpt_in:
        env["RL_CKPT_IN"] = ckpt_in
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(WORLD), "--nnodes", "1",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), os.path.abspath(__file__)]
    with open(os.path.join(out, "torchrun.log"), "w") as log:
        rc = subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=300)
    if rc != 0:
        sys.stdout.write(open(os.path.join(out, "torchrun.log")).read())
        raise SystemExit("FAIL: torchrun (%s) exited %d" % (out, rc))
    return [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in range(WORLD)]


def check_lockstep(name, recs):
    steps = []
    for r, rec in enumerate(recs):
        by_step = {}
        for b in rec["log"]:
            by_step.setdefault((b["epoch"], b["step"]), []).append(b)
        for key, bs in by_step.items():
            assert [b["micro"] for b in bs] == list(range(K)), (name, r, key, [b["micro"] for b in bs])
            assert all(b["n_micro"] == K for b in bs), (name, r, key)
            assert [b["last"] for b in bs] == [False] * (K - 1) + [True], (name, r, key)
        steps.append(sorted(by_step))
    assert all(s == steps[0] for s in steps), "%s: the ranks ran different steps" % name
    return steps[0]


def epoch_keys(recs, epoch):
    keys = []
    for rec in recs:
        for b in rec["log"]:
            if b["epoch"] == epoch:
                keys += [k for k, p in zip(b["keys"], b["padded"]) if not p]
    return keys


def main():
    sys.path.insert(0, _find("examples"))
    import train_dit

    cli = os.environ.get("ADAPTIVELOAD_BIN") or "adaptiveload"
    root = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    work = os.path.join(root, "readme_loop")
    shards, index = os.path.join(work, "shards"), os.path.join(work, "corpus.alidx")
    train_dit.write_typed_corpus(shards, 48, shards=2, seed=3, profile="smoke", text_dim=32)
    subprocess.check_call([cli, "index", "-o", index, shards], stdout=subprocess.DEVNULL)
    with open(index + ".buckets", "w") as f:  # the smoke profile's bucket table
        f.write(train_dit.SMOKE_BUCKETS)
    listed = subprocess.check_output([cli, "inspect", index, "--json"])
    n_samples = json.loads(listed)["samples"]

    a = torchrun(os.path.join(work, "A"), index)
    steps = check_lockstep("A", a)
    for e in range(EPOCHS):
        got = epoch_keys(a, e)
        assert len(got) == len(set(got)) == n_samples, "epoch %d: %d keys, %d distinct, %d samples" % (
            e, len(got), len(set(got)), n_samples)
    assert a[0]["params"] == a[1]["params"], "DDP replicas differ after training"
    print("ok: run A: %d steps over %d epochs in lock-step (K = %d on both ranks), each of the %d samples once "
          "per epoch, equal replicas" % (len(steps), EPOCHS, K, n_samples))

    b = torchrun(os.path.join(work, "B"), index, stop_after=STOP_AFTER)
    c = torchrun(os.path.join(work, "C"), index, ckpt_in=os.path.join(work, "B", "ckpt%d.pt"))
    for r in range(WORLD):
        resumed = b[r]["log"] + c[r]["log"]
        assert resumed == a[r]["log"], "rank %d: stopped at step %d and resumed, %d batches against %d" % (
            r, STOP_AFTER, len(resumed), len(a[r]["log"]))
        diff = max(abs(x - y) for pa, pc in zip(a[r]["params"], c[r]["params"]) for x, y in zip(pa, pc))
        assert diff <= 1e-6, "rank %d: resumed parameters differ from the uninterrupted run's by %g" % (r, diff)
    print("ok: runs B + C: stopped after step %d, resumed from the checkpoint: the same %d batches per rank in "
          "the same order, the same parameters" % (STOP_AFTER, len(a[0]["log"])))
    print("readme_loop_test: OK")


if __name__ == "__main__":
    if "RANK" in os.environ:
        rank_main()
    else:
        main()
