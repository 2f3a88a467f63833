#!/usr/bin/env python3
"""README.md's training loop, as written there, launched by torchrun with gloo ranks (CPU),
with python/README.md's checkpoints (adaptiveload.checkpoint) at every step.

Run without RANK it is the launcher. It writes a typed corpus (KEY.latent.npy, KEY.t5.npy,
examples/train_dit.py's smoke profile), indexes it with the CLI and runs this file under
``python3 -m torch.distributed.run --nproc-per-node W``:

* A: two epochs at W = 2, uninterrupted;
* B: the same job killed (SIGKILL of rank 0, torchrun then ends the others) inside its fourth
  step, after the third step's checkpoint (mid-epoch 0), and D: killed inside the first step
  after epoch 0's last; each rank leaves its data checkpoint (``save_checkpoint(...,
  planner=planner, stream=batch.resume_state)`` after every step) and the model and optimizer;
* C and E: B and D resumed at W = 2 (``checkpoint.resume(..., world=2)``: each rank its own
  checkpoint, the saved stream state) to the end of epoch 1;
* F and G: B and D resumed at W = 1 (rank 0's checkpoint: the epoch re-planned from its step).

Each rank is the README's loop (Planner with micro_per_step=2 and the smoke bucket table,
StreamDataset over latent.npy and t5.npy, set_epoch, load_state_dict on the resumed epoch,
grad_sync, the loss normalised by step_tokens, opt.step on last_in_step) with a small
deterministic model under DDP. The launcher checks:

* lock-step: in every step every rank runs exactly its K micro-batches, the last one
  last_in_step, and all ranks the same steps;
* every sample of the index exactly once per epoch over all ranks (padding aside), in every
  run and in every stopped run together with its resumed run, at the same and at another
  world size, stopped mid-epoch or at the epoch's end;
* DDP kept the replicas equal: the ranks of a run end with the same parameters;
* exact resume at the same world: the steps B trained then C, and D then E, are rank by rank
  the batches A delivered in the same order, and C and E end with A's parameters.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD, EPOCHS, K, KILL_AFTER = 2, 2, 2, 3


def _find(rel):
    """A checkout path: under bazel's runfiles (the working directory) or beside this file."""
    for base in (os.getcwd(), os.path.join(HERE, "..", "..")):
        p = os.path.join(base, rel)
        if os.path.exists(p):
            return os.path.abspath(p)
    raise SystemExit("cannot find %s" % rel)


# ---------------------------------------------------------------------------------------------
# one rank: the README's loop


def save_atomic(torch, obj, path):
    """torch.save into a temporary file renamed over ``path``: a kill leaves the old file or the
    new one, never half of one."""
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def rank_main():
    import torch
    import torch.nn as nn

    import adaptiveload
    import adaptiveload.checkpoint

    index, out, kill_after = os.environ["RL_INDEX"], os.environ["RL_OUT"], int(os.environ["RL_KILL_AFTER"])
    resume_from = os.environ.get("RL_RESUME_FROM")  # the stopped run's folder
    env = adaptiveload.setup_distributed(cpu=True)
    rank, world = env.rank, env.world_size

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
    if resume_from:
        saved_world = int(open(os.path.join(resume_from, "world")).read())
        mine = rank if world == saved_world else 0  # rank 0's files do for a resize
        ck = torch.load(os.path.join(resume_from, "model%d.pt" % mine), weights_only=False)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        r = adaptiveload.checkpoint.resume(os.path.join(resume_from, "data-%d.json" % mine), world=world)
        planner, first_epoch, state = r.planner, r.epoch, r.stream_state
    else:
        planner = adaptiveload.Planner(index, world=world, seed=0, micro_per_step=K, mem_tokens=256,
                                       buckets=os.environ["RL_BUCKETS"])
        first_epoch, state = 0, None
    with open(os.path.join(out, "world"), "w") as f:
        f.write(str(world))

    ds = adaptiveload.StreamDataset(index, planner, members=["latent.npy", "t5.npy"])
    log, pending, steps = [], [], 0
    trained = open(os.path.join(out, "trained%d.jsonl" % rank), "w")  # each trained step's batches
    for epoch in range(first_epoch, EPOCHS):
        ds.set_epoch(epoch)
        if state and epoch == first_epoch:
            ds.load_state_dict(state)
        for batch in ds:
            x, text = batch.packed("latent.npy"), batch.tensors("t5.npy")
            real = (~batch.padded).to(x.device).repeat_interleave(batch.cu_seqlens.diff().long())
            with adaptiveload.grad_sync(model, batch.last_in_step):
                (model(x, text, batch.cu_seqlens) * real).sum().mul(world / batch.step_tokens).backward()
            if kill_after and steps == kill_after:
                # Inside the next step (its first micro-batch run, the optimizer not stepped),
                # once every rank has checkpointed: SIGKILL, as a preempted node dies.
                torch.distributed.barrier()
                if rank == 0:
                    os.kill(os.getpid(), signal.SIGKILL)
            pending.append({"epoch": epoch, "step": batch.step, "micro": batch.micro, "n_micro": batch.n_micro,
                            "last": bool(batch.last_in_step), "keys": list(batch.keys),
                            "padded": [bool(p) for p in batch.padded]})
            if batch.last_in_step:
                opt.step()
                opt.zero_grad()
                adaptiveload.checkpoint.save_checkpoint(os.path.join(out, "data-%d.json" % rank), planner=planner,
                                                        stream=batch.resume_state)
                save_atomic(torch, {"model": model.module.state_dict(), "opt": opt.state_dict()},
                            os.path.join(out, "model%d.pt" % rank))
                for b in pending:
                    trained.write(json.dumps(b) + "\n")
                trained.flush()
                log += pending
                pending = []
                steps += 1
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


def torchrun(out, index, world=WORLD, kill_after=0, resume_from=None):
    """Runs this file under torchrun with ``world`` ranks; returns each rank's record (a killed
    run: the batches of the steps it trained, from trainedR.jsonl)."""
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, RL_INDEX=index, RL_BUCKETS=index + ".buckets", RL_OUT=out, RL_KILL_AFTER=str(kill_after),
               OMP_NUM_THREADS="1")
    if resume_from:
        env["RL_RESUME_FROM"] = resume_from
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), "--nnodes", "1",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), os.path.abspath(__file__)]
    with open(os.path.join(out, "torchrun.log"), "w") as log:
        rc = subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=300)
    if kill_after:
        if rc == 0:
            raise SystemExit("FAIL: torchrun (%s) exited 0: rank 0 was to be killed after step %d" % (out, kill_after))
        return [{"log": [json.loads(line) for line in open(os.path.join(out, "trained%d.jsonl" % r))]}
                for r in range(world)]
    if rc != 0:
        sys.stdout.write(open(os.path.join(out, "torchrun.log")).read())
        raise SystemExit("FAIL: torchrun (%s) exited %d" % (out, rc))
    return [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in range(world)]


def check_lockstep(name, recs):
    steps = []
    for r, rec in enumerate(recs):
        by_step = {}
        for b in rec["log"]:
            by_step.setdefault((b["epoch"], b["step"]), []).append(b)
        for key, bs in by_step.items():
            k = bs[0]["n_micro"]
            assert [b["micro"] for b in bs] == list(range(k)), (name, r, key, [b["micro"] for b in bs])
            assert all(b["n_micro"] == k for b in bs), (name, r, key)
            assert [b["last"] for b in bs] == [False] * (k - 1) + [True], (name, r, key)
        steps.append(sorted(by_step))
    assert all(s == steps[0] for s in steps), "%s: the ranks ran different steps" % name
    return steps[0]


def epoch_keys(runs, epoch):
    """The real samples delivered in ``epoch`` by every rank of every run given."""
    keys = []
    for recs in runs:
        for rec in recs:
            for b in rec["log"]:
                if b["epoch"] == epoch:
                    keys += [k for k, p in zip(b["keys"], b["padded"]) if not p]
    return keys


def check_once(name, runs, n_samples):
    for e in range(EPOCHS):
        got = epoch_keys(runs, e)
        assert len(got) == len(set(got)) == n_samples, "%s: epoch %d: %d keys, %d distinct, %d samples" % (
            name, e, len(got), len(set(got)), n_samples)


def check_exact(name, stopped, resumed, whole):
    for r in range(WORLD):
        got = stopped[r]["log"] + resumed[r]["log"]
        assert got == whole[r]["log"], "%s: rank %d: %d batches delivered against %d uninterrupted" % (
            name, r, len(got), len(whole[r]["log"]))
        diff = max(abs(x - y) for pa, pc in zip(whole[r]["params"], resumed[r]["params"]) for x, y in zip(pa, pc))
        assert diff <= 1e-6, "%s: rank %d: the parameters differ from the uninterrupted run's by %g" % (name, r, diff)


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
    n_samples = json.loads(subprocess.check_output([cli, "inspect", index, "--json"]))["samples"]
    run = lambda name, **kw: torchrun(os.path.join(work, name), index, **kw)  # noqa: E731

    a = run("A")
    steps = check_lockstep("A", a)
    check_once("A", [a], n_samples)
    assert a[0]["params"] == a[1]["params"], "DDP replicas differ after training"
    epoch0 = sum(1 for e, _ in steps if e == 0)
    print("ok: A: %d steps over %d epochs in lock-step (K = %d on both ranks), each of the %d samples once "
          "per epoch, equal replicas" % (len(steps), EPOCHS, K, n_samples))

    for stop, at, same, other in ((KILL_AFTER, "inside the step after step %d" % KILL_AFTER, "C", "F"),
                                  (epoch0, "inside the step after epoch 0's end (step %d)" % epoch0, "E", "G")):
        first = "B" if same == "C" else "D"
        stopped = run(first, kill_after=stop)
        check_lockstep(first, stopped)
        resumed = run(same, resume_from=os.path.join(work, first))
        check_lockstep(same, resumed)
        check_once(first + "+" + same, [stopped, resumed], n_samples)
        check_exact(first + "+" + same, stopped, resumed, a)
        print("ok: %s killed %s, %s resumed at W = 2: the same %d batches per rank in the same order, the same "
              "parameters" % (first, at, same, len(a[0]["log"])))
        resized = run(other, world=1, resume_from=os.path.join(work, first))
        check_lockstep(other, resized)
        check_once(first + "+" + other, [stopped, resized], n_samples)
        print("ok: %s resumed at W = 1: every sample once per epoch over both runs (%d steps after the resize)"
              % (other, len(check_lockstep(other, resized))))
    print("readme_loop_test: OK")


if __name__ == "__main__":
    if "RANK" in os.environ:
        rank_main()
    else:
        main()
