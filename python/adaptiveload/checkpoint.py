"""Checkpoints of the data side of a training run: the planner (index, world, seed, options and
the re-plans it went through), the identity of the epoch's manifest, the step, and one rank's
stream or sampler state; so that resuming, at the same or another world size, is one call::

    # at a step boundary (batch.last_in_step), next to the model's checkpoint
    adaptiveload.checkpoint.save_checkpoint("data-%d.json" % rank, planner=planner, stream=batch.resume_state)

    # after a restart, with any world size
    r = adaptiveload.checkpoint.resume("data-%d.json" % rank, world=world)
    ds = adaptiveload.StreamDataset(index, r.planner, rank=rank, world_size=world)
    ds.set_epoch(r.epoch)
    if r.stream_state: ds.load_state_dict(r.stream_state)   # same world: continue exactly

At the world size of the checkpoint, :func:`resume` rebuilds the same manifests (checked
against the recorded identity) and gives back the saved state. At another world size it
re-plans the epoch from the checkpoint's step (:meth:`adaptiveload.Planner.resume`: the global
batch kept within 1%, or :class:`adaptiveload.Error`) and gives no state: the re-planned
manifest starts at that step, so every rank starts at its first micro-batch, and the steps
before it plus the re-plan hold every sample of the epoch exactly once. A resize needs a
checkpoint at a step boundary (every rank past the same steps); :func:`save_checkpoint`
refuses a stream or sampler state inside a step unless ``step`` is given. The state after an
epoch's last step saves as that epoch at its step count: resumed, the epoch yields nothing
more (at another world size its re-plan holds no steps) and the next epoch starts whole.

A checkpoint is a JSON-ready dict (written atomically as JSON when a path is given):
``version``, ``planner`` (:meth:`Planner.state_dict`), ``epoch``, ``step`` (the first step not
yet trained), ``manifest`` (:func:`adaptiveload.planning.manifest_identity` of the epoch's
manifest), ``stream`` and ``sampler`` (the states, or None), ``extra`` (yours).
"""

import collections
import json
import os
import tempfile

from ._args import U32_MAX, whole
from .planning import Planner, manifest_identity
from .schedule import Schedule

__all__ = ["save_checkpoint", "load_checkpoint", "resume", "Resumed"]

VERSION = 1

Resumed = collections.namedtuple("Resumed", "planner epoch step stream_state sampler_state resized")
Resumed.__doc__ = """What :func:`resume` gives: the Planner to pass to StreamDataset / BatchSampler,
the epoch (call ``set_epoch(epoch)``) and the step it continues at; the saved stream and sampler
states (None after a resize: start at the re-planned manifest's first micro-batch); resized:
whether the world size changed."""


def _state_of(obj):
    """A state dict from a StreamDataset / BatchSampler (its state_dict()) or a dict as it is."""
    if obj is None:
        return None
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    return dict(obj) if obj else None


def _step_of(planner, epoch, stream, sampler):
    """The first step not yet trained, from a stream state (next_step / next_micro) or a sampler
    state (its position in this rank's schedule); ValueError inside a step. The state after
    an epoch's last batch (next_step U32_MAX: nothing left) gives the epoch's step count."""
    if stream:
        if int(stream.get("next_step", 0)) == U32_MAX:
            return int(planner.plan(epoch).info["steps"])
        if int(stream.get("next_micro", 0)) != 0:
            raise ValueError("the stream state is inside step %d (micro-batch %d): save the checkpoint after a "
                             "step's last micro-batch (batch.last_in_step), or pass step="
                             % (int(stream["next_step"]), int(stream["next_micro"])))
        return int(stream["next_step"])
    if sampler:
        sched = Schedule(planner.path(epoch), sampler["rank"], sampler["world"])
        pos = int(sampler["position"])
        if pos >= sched.n_batches:
            return int(sched.step[sched.n_batches - 1]) + 1 if sched.n_batches else 0
        if sched.micro[pos] != 0:
            raise ValueError("the sampler state is inside step %d (micro-batch %d): save the checkpoint after a "
                             "step's last micro-batch, or pass step=" % (sched.step[pos], sched.micro[pos]))
        return int(sched.step[pos])
    raise TypeError("save_checkpoint needs step= (the first step not yet trained), or a stream or sampler state")


def save_checkpoint(path=None, planner=None, stream=None, sampler=None, step=None, epoch=None, extra=None):
    """The checkpoint dict of ``planner`` (an :class:`adaptiveload.Planner`) at ``step`` of
    ``epoch``, written as JSON to ``path`` (atomically: a temporary file renamed) when given.

    ``stream``: a StreamDataset or a state (``batch.resume_state``); ``sampler``: a
    BatchSampler or its state. ``epoch`` defaults to the state's; ``step`` (the first step not
    yet trained) to the state's next step, which must start a step."""
    if not isinstance(planner, Planner):
        raise TypeError("save_checkpoint needs planner= (an adaptiveload.Planner), not %r" % (planner,))
    stream, sampler = _state_of(stream), _state_of(sampler)
    if epoch is None:
        src = stream or sampler
        if not src:
            raise TypeError("save_checkpoint needs epoch=, or a stream or sampler state")
        epoch = int(src["epoch"])
    epoch = int(epoch)
    step = _step_of(planner, epoch, stream, sampler) if step is None else int(step)
    ckpt = {
        "version": VERSION,
        "planner": planner.state_dict(),
        "epoch": epoch,
        "step": step,
        "manifest": manifest_identity(planner.path(epoch)),
        "stream": stream,
        "sampler": sampler,
        "extra": extra,
    }
    if path is not None:
        _write_json(os.fspath(path), ckpt)
    return ckpt


def _write_json(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(source):
    """A checkpoint from a JSON file written by :func:`save_checkpoint` (or the dict itself);
    ValueError for another version or a missing field."""
    if isinstance(source, dict):
        ckpt = source
    else:
        with open(os.fspath(source)) as f:
            ckpt = json.load(f)
    if ckpt.get("version") != VERSION:
        raise ValueError("checkpoint version %r unsupported (this package writes %d)" % (ckpt.get("version"), VERSION))
    missing = [k for k in ("planner", "epoch", "step", "manifest") if k not in ckpt]
    if missing:
        raise ValueError("checkpoint lacks %s" % ", ".join(missing))
    return ckpt


def resume(checkpoint, world=None, step_tokens=None, micro_per_step=None, out_dir=None, mixture=None):
    """:class:`Resumed` for ``world`` ranks (default ``WORLD_SIZE``, else the checkpoint's)
    from ``checkpoint`` (a path or a dict). The checkpoint's manifest is rebuilt first and
    checked against its recorded identity (ValueError when the index, cost model or options
    changed). Same world and schedule: that Planner and the saved states. Another world, or a
    changed mixture (``mixture``: the new MIX.json or dict of a mixture Planner's run):
    :meth:`Planner.resume` from the checkpoint's step (``step_tokens`` / ``micro_per_step`` /
    ``mixture`` as there), no states."""
    ckpt = load_checkpoint(checkpoint)
    planner = Planner.from_state(ckpt["planner"], out_dir=out_dir)
    epoch, step = whole("epoch", ckpt["epoch"], 0, U32_MAX), whole("step", ckpt["step"], 0, U32_MAX)
    planner.check_identity(epoch, ckpt["manifest"])
    if world is None:
        world = int(os.environ.get("WORLD_SIZE", planner.world))
    if (whole("world", world, 1, 1 << 20) == planner.world and not step_tokens and not micro_per_step
            and mixture is None):
        return Resumed(planner, epoch, step, ckpt.get("stream"), ckpt.get("sampler"), False)
    new = Planner.resume(planner, at_step=step, world=world, epoch=epoch, step_tokens=step_tokens,
                         micro_per_step=micro_per_step, out_dir=out_dir, mixture=mixture)
    return Resumed(new, epoch, step, None, None, True)
