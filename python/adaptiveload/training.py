"""Helpers for training scripts: torchrun set-up, the gradient-sync context of one
micro-batch, and a small demo corpus made with the CLI (what examples/train_dataloader.py
and examples/train_stream.py share)::

    env = adaptiveload.setup_distributed()          # rank, world, device from torchrun
    sampler = adaptiveload.BatchSampler(manifest)   # reads the same RANK / WORLD_SIZE
    for info, batch in zip(sampler.infos(), loader):
        with adaptiveload.grad_sync(model, info.last_in_step):
            loss = ...
            loss.backward()
        if info.last_in_step:
            optimizer.step(); optimizer.zero_grad()
    env.close()

Every rank gets exactly ``micro_per_step`` micro-batches in every step (the planner levels
the ranks' predicted cost within a step, not their counts), the last one ``last_in_step``:
gradients are all-reduced there, so DDP, FSDP and ZeRO run their collectives together.
"""

import collections
import contextlib
import os
import subprocess


class Distributed(collections.namedtuple("Distributed", "rank world_size local_rank device initialized")):
    """What :func:`setup_distributed` found: torchrun's rank, world size and local rank, the
    torch device to train on, and whether it started torch.distributed."""

    def close(self):
        """Ends torch.distributed when :func:`setup_distributed` started it."""
        if self.initialized:
            import torch.distributed as dist

            dist.destroy_process_group()


def setup_distributed(cpu=False):
    """Reads torchrun's ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (rank 0 of 1 without
    them). The device is ``cuda:LOCAL_RANK`` (made the current CUDA device) when CUDA is
    available and ``cpu`` is false, else the CPU. Under a launcher (``WORLD_SIZE`` and
    ``MASTER_ADDR`` set, as torchrun sets them, also for one process) or with ``WORLD_SIZE`` > 1
    it initialises torch.distributed: NCCL for a CUDA device, gloo on the CPU; so
    ``torchrun --nproc-per-node 1`` runs the same DDP / FSDP code path as a larger job. A plain
    ``python script.py`` runs undistributed. Returns a :class:`Distributed`."""
    import torch

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and not cpu
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    launched = "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ
    if world > 1 or launched:
        import torch.distributed as dist

        dist.init_process_group("nccl" if use_cuda else "gloo")
    return Distributed(rank, world, local_rank, device, world > 1 or launched)


def grad_sync(model, sync):
    """The context for one micro-batch's forward and backward: a DistributedDataParallel
    ``model`` all-reduces gradients only when ``sync`` (the step's last micro-batch,
    ``last_in_step``) and runs under ``model.no_sync()`` otherwise. Any other model: a
    context that does nothing."""
    if sync or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return model.no_sync()


def demo_corpus(workdir, world=1, samples=64, mem_tokens=16384, bin="adaptiveload"):
    """A small synthetic corpus to try things on, made in ``workdir`` with the CLI ``bin``:
    ``synth`` (``samples`` samples, 4 shards), ``index``, and ``plan`` for ``world`` ranks
    with micro-batches of at most ``mem_tokens`` tokens. Files already there are reused.
    Returns (index path, manifest path)."""
    os.makedirs(workdir, exist_ok=True)
    index = os.path.join(workdir, "corpus.alidx")
    manifest = os.path.join(workdir, "plan-w%d.alm" % world)
    if not os.path.exists(index):
        shards = os.path.join(workdir, "shards")
        subprocess.run([bin, "synth", "--out", shards, "--samples", str(samples), "--shards", "4"], check=True)
        subprocess.run([bin, "index", "-o", index, shards], check=True)
    if not os.path.exists(manifest):
        subprocess.run([bin, "plan", "--index", index, "--world", str(world), "--mem-tokens", str(mem_tokens),
                        "-o", manifest], check=True, stdout=subprocess.DEVNULL)
    return index, manifest


def add_corpus_arguments(parser):
    """Adds ``--index`` / ``--manifest`` (your corpus) and, used without them, the
    :func:`demo_corpus` options ``--workdir``, ``--bin``, ``--samples``, ``--world``
    (default ``WORLD_SIZE``) and ``--mem-tokens`` to an argparse parser."""
    parser.add_argument("--index", help="index file (adaptiveload index)")
    parser.add_argument("--manifest", help="manifest planned from it (adaptiveload plan)")
    parser.add_argument("--workdir", default="/tmp/adaptiveload-example", help="where the demo corpus is made")
    parser.add_argument("--bin", default="adaptiveload", help="the adaptiveload CLI (for the demo corpus)")
    parser.add_argument("--samples", type=int, default=64, help="demo corpus samples")
    parser.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", "1")),
                        help="ranks the demo corpus is planned for")
    parser.add_argument("--mem-tokens", type=int, default=16384, help="demo plan: tokens per micro-batch at most")


def corpus_from_args(args):
    """(index, manifest) from :func:`add_corpus_arguments`' options: the given files, or
    the demo corpus when ``--index`` is not given."""
    if args.index:
        return args.index, args.manifest
    return demo_corpus(args.workdir, args.world, args.samples, args.mem_tokens, args.bin)
