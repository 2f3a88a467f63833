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

Sequence parallelism: :func:`sp_groups` makes every SP process group once (on every rank);
:func:`sp_group_of` / :func:`sp_group_for` give this rank's group for a batch or a degree,
:func:`sp_shard_of` its :class:`adaptiveload.sp.Shard` (python/README.md, "Sequence
parallelism").
"""

import atexit
import collections
import contextlib
import gc
import os
import subprocess
import time

from ._args import whole
from ._rules import sp_degrees


_CLOSED_GROUPS = []  # world groups ended by Distributed.close(), kept (see there)


def _release_closed_groups():
    """At exit, before the interpreter finalises: drops the world groups close() kept, so that
    a group nothing else holds is freed (its threads joined) while every thread can still take
    the GIL."""
    del _CLOSED_GROUPS[:]
    gc.collect()


_GLOO_WORKER = "pt_gloo_runloop"  # the name torch gives ProcessGroupGloo's worker threads
_IDLE_FOR_S = 0.02  # this long asleep, with the GIL free, a worker has dropped its last work
_IDLE_WAIT_MAX_S = 10.0


def _gloo_workers_running():
    """Whether a gloo worker thread of this process is running or runnable (Linux /proc;
    False where there is none to read)."""
    tasks = "/proc/self/task"
    try:
        tids = os.listdir(tasks)
    except OSError:
        return False
    for tid in tids:
        try:
            with open(os.path.join(tasks, tid, "comm")) as f:
                if f.read().strip() != _GLOO_WORKER:
                    continue
            with open(os.path.join(tasks, tid, "stat")) as f:
                stat = f.read()
        except OSError:  # the thread ended while listed
            continue
        if stat[stat.rindex(")") + 2] == "R":
            return True
    return False


def _wait_for_idle_gloo_workers():
    """Sleeps (the GIL released) until every gloo worker thread has been asleep for
    _IDLE_FOR_S, at most _IDLE_WAIT_MAX_S. A worker drops a finished work (and the works a
    barrier waited for, with their tensors) only after the waiting rank has been woken; on a
    loaded machine it may not run again before the interpreter finalises, and a worker that
    then frees a tensor with a Python object must take the GIL: CPython ends such a thread
    with pthread_exit, whose unwinding through torch's noexcept frames aborts the process
    ("terminate called without an active exception", SIGABRT in ~AsyncBarrierWork)."""
    deadline = time.monotonic() + _IDLE_WAIT_MAX_S
    idle_since = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if _gloo_workers_running():
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since >= _IDLE_FOR_S:
            return
        time.sleep(0.002)


class Distributed(collections.namedtuple("Distributed", "rank world_size local_rank device initialized")):
    """What :func:`setup_distributed` found: torchrun's rank, world size and local rank, the
    torch device to train on, and whether it started torch.distributed."""

    def close(self):
        """Ends torch.distributed when :func:`setup_distributed` started it: a collective,
        called by every rank (as the examples end).

        It first waits at a barrier for every rank: no rank tears its connections down while
        another still has a collective in flight over them (a rank that exited early made its
        peer's gloo abort, "terminate called without an active exception", on a loaded
        machine), then until the group's worker threads have dropped the barrier's work (see
        _wait_for_idle_gloo_workers). The world group's Python handle is then kept until the
        interpreter exits (an atexit handler drops it before finalisation). A
        DistributedDataParallel model still alive after close() holds the group in its C++
        Reducer; freed last, the Reducer frees a gloo group with the GIL held, joining worker
        threads that may need the GIL to free a Python tensor of the last collective: a
        deadlock at the end of the script. With the handle kept, the group's last release is
        the handle's, which torch makes with the GIL released."""
        if self.initialized:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.barrier()
                _wait_for_idle_gloo_workers()
                if not _CLOSED_GROUPS:
                    atexit.register(_release_closed_groups)
                _CLOSED_GROUPS.append(dist.group.WORLD)
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


# --------------------------------------------------------------------------------------------
# sequence parallelism: the SP process groups of a world


def _check_sp_degrees(world, degrees):
    """The sorted distinct degrees, after the library's degree rule (al_plan_check_sp_degrees,
    as plan --sp-degrees); ``world`` in 1..2^20, the planner's range (plan --world), so a world
    no plan can have is refused before anything is made for it. A degree listed twice counts
    once."""
    if isinstance(world, bool):
        raise TypeError("sp_groups: world must be an int, not %r" % (world,))
    world = whole("sp_groups: world", world, 1, 1 << 20)
    if not isinstance(degrees, (list, tuple)):
        raise TypeError("sp_groups: degrees must be a list of ints (e.g. [1, 2, 4]), not %r" % (degrees,))
    if not degrees:
        raise ValueError("sp_groups: no degrees given")
    distinct = []
    for d in degrees:
        if d not in distinct or isinstance(d, bool):
            distinct.append(d)
    return sorted(sp_degrees("sp_groups: degrees", distinct, world))


def sp_groups(world, degrees, backend=None):
    """The SP process groups of a world of ``world`` ranks for the allowed ``degrees`` (the
    plan's ``--sp-degrees``): {degree: [group 0, group 1, ...]}, group g of degree d being ranks
    [g d, (g + 1) d). Degree 1 maps to ``world`` Nones (a rank alone needs no group).

    torch.distributed.new_group is collective: EVERY rank must call this, with the same
    arguments, before the first micro-batch; the groups are created once each, degrees in
    increasing order, groups in rank order (W / d groups of each degree d > 1: 7 for W = 8 and
    degrees 1, 2, 4, 8), so every rank creates them in the same order. ``backend``: the
    groups' backend (default: the world's). Raises ValueError (a world outside 1..2^20, a
    degree not a power of two or not dividing ``world``, a world other than torch.distributed's)
    or TypeError (a world or degree that is not an int, degrees not a list or tuple)."""
    import torch.distributed as dist

    degrees = _check_sp_degrees(world, degrees)
    if not (dist.is_available() and dist.is_initialized()):
        if degrees != [1]:
            raise RuntimeError("sp_groups: degrees %s need torch.distributed initialised (setup_distributed)"
                               % degrees)
    elif dist.get_world_size() != world:
        raise ValueError("sp_groups: world %d, but torch.distributed has %d ranks" % (world, dist.get_world_size()))
    groups = {}
    for d in degrees:
        if d == 1:
            groups[1] = [None] * world
            continue
        groups[d] = [dist.new_group(list(range(g, g + d)), backend=backend) for g in range(0, world, d)]
    return groups


def sp_group_for(groups, degree, rank):
    """The group of :func:`sp_groups` that global rank ``rank`` belongs to at ``degree``
    (the aligned one: index rank // degree); None for degree 1. KeyError naming the degrees
    there when ``degree`` was not created; TypeError when it is not an int."""
    if isinstance(degree, bool) or not isinstance(degree, int):
        raise TypeError("sp_group_for: degree must be an int, not %r" % (degree,))
    if degree == 1:
        return None
    if degree not in groups:
        raise KeyError("SP degree %r: sp_groups made degrees %s only (the plan's --sp-degrees and "
                       "sp_groups(degrees=) must agree)" % (degree, sorted(groups)))
    gs = groups[degree]
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < degree * len(gs):
        raise ValueError("sp_group_for: rank %r is outside the world of %d ranks" % (rank, degree * len(gs)))
    return gs[rank // degree]


def _rank():
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def sp_group_of(groups, batch, rank=None):
    """This rank's group for ``batch`` (a PackedBatch, a BatchSampler info, or anything with
    ``sp_degree``, ``sp_rank`` and, optionally, ``sp_ranks``; a batch without them is degree 1):
    None for degree 1. ``rank``: this process's global rank (default: torch.distributed's).
    ValueError when the batch's group is not the aligned one holding ``rank``."""
    degree, sp_rank, ranks = _batch_sp(batch)
    rank = _rank() if rank is None else rank
    if degree == 1:
        return None
    first = rank - sp_rank
    aligned = tuple(range(first, first + degree))
    if sp_rank >= degree or first % degree or (ranks is not None and tuple(ranks) != aligned):
        raise ValueError("SP group of degree %d, position %d, ranks %s does not hold rank %d as aligned group %d"
                         % (degree, sp_rank, tuple(ranks) if ranks is not None else "?", rank, first // degree))
    return sp_group_for(groups, degree, rank)


def _batch_sp(batch):
    """(sp_degree, sp_rank, sp_ranks or None) of a batch (sp_ranks from sp_group_first when
    only that is given); (1, 0, None) without the fields."""
    get = (lambda k, v: batch.get(k, v)) if isinstance(batch, dict) else (lambda k, v: getattr(batch, k, v))
    degree, sp_rank, ranks = int(get("sp_degree", 1) or 1), int(get("sp_rank", 0) or 0), get("sp_ranks", None)
    first = get("sp_group_first", None)
    if ranks is None and first is not None and degree > 1:  # a batch naming the group by its first rank
        ranks = tuple(range(int(first), int(first) + degree))
    return degree, sp_rank, ranks


def sp_shard_of(groups, batch, n_tokens, rank=None):
    """The :class:`adaptiveload.sp.Shard` of this rank for ``batch``, whose group's packed
    sequence has ``n_tokens`` tokens: the group (:func:`sp_group_of`), degree, position and
    token range (the batch's ``sp_token_range`` when it is a shard, else the shard rule)."""
    from . import sp

    degree, sp_rank, _ = _batch_sp(batch)
    group = sp_group_of(groups, batch, rank)
    held = getattr(batch, "sp_token_range", None) if not isinstance(batch, dict) else batch.get("sp_token_range")
    if held is not None and tuple(held) == (0, n_tokens):
        held = None  # the whole micro-batch delivered: this rank takes the rule's slice
    return sp.Shard(group, degree, sp_rank, n_tokens, held)
