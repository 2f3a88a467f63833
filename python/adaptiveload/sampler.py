"""BatchSampler: one rank's planned micro-batches as lists of index positions.

Use it with a map-style dataset whose ``dataset[i]`` reads index position ``i``
(:class:`adaptiveload.IndexDataset` does, or your own dataset over the same index)::

    sampler = adaptiveload.BatchSampler("plan.alm")          # rank/world from torchrun
    loader = torch.utils.data.DataLoader(
        adaptiveload.IndexDataset("corpus.alidx"), batch_sampler=sampler,
        num_workers=4, collate_fn=adaptiveload.collate_packed)
    for info, batch in zip(sampler.infos(), loader):          # same order
        loss = model(batch).sum() / info.step_samples
        loss.backward()
        if info.last_in_step:
            optimizer.step(); optimizer.zero_grad()

Ranks and multi-node training. ``rank`` and ``world_size`` default to torchrun's
``RANK`` and ``WORLD_SIZE``; the manifest's world must equal ``WORLD_SIZE`` (else a
clear error tells you to plan again with ``--world``). Every rank, on every node,
opens the same manifest file and reads only its own rows: the schedule is a pure
function of (index, cost model, config, seed, epoch, world), so no coordination
service and no communication is needed beyond what torch.distributed already does
for gradients. Every rank gets the same number of steps and the same number of
micro-batches in every step (``info.n_micro``, the plan's K), so FSDP, ZeRO-3 and
sequence-parallel collectives stay in lock-step; step the optimizer on
``info.last_in_step`` and normalise the loss with ``info.step_tokens`` (or
``info.step_samples``), totals over all ranks (README: "Loss normalisation").

Sequence parallelism. ``info.sp_degree``, ``info.sp_rank`` and ``info.sp_ranks`` name the
group that runs a micro-batch (ranks ``sp_ranks``, this rank number ``sp_rank`` of them);
every rank of the group yields the group's whole micro-batch (the same positions in the same
order), so ``IndexDataset`` + ``collate_packed`` give each rank the whole packed batch and the
model takes its 1/d of the tokens (``adaptiveload.StreamDataset(sp_shard=True)`` delivers the
shard only). With ``with_info=True`` the per-sample dicts carry the three too.

Epochs. A manifest holds one epoch. Pass an :class:`adaptiveload.Planner` (the index,
world, seed and options) and :meth:`set_epoch` plans each epoch in-process, deterministic
and byte-identical to ``adaptiveload plan --epoch E``; or pass a path template containing
``{epoch}`` (``"plans/epoch-{epoch}.alm"``) to switch between files planned beforehand. With
a plain path, ``set_epoch`` to another epoch than the manifest's raises ValueError (rather
than silently repeating the same order).

Index check. The positions yielded are ints that also carry their plan's origin (manifest
path, index and manifest fingerprints; :class:`adaptiveload.schedule.SamplePosition`), so
:class:`adaptiveload.IndexDataset` refuses, at its first item, positions planned from another
index (ValueError naming both files), as :class:`adaptiveload.StreamDataset` does; the
``DataLoader(dataset, batch_sampler=sampler)`` loop stays as it is.

Checkpointing. :meth:`state_dict` / :meth:`load_state_dict` follow the protocol of
torchdata's ``StatefulDataLoader`` (which calls them itself): the state counts the
micro-batches yielded in the current pass; loading it makes the next pass start
right after them. With a plain DataLoader (whose workers run the sampler ahead of the
training loop), take ``sampler.state_at(info.position + 1)`` after the last micro-batch
used. A state dict holds ``version`` (2), ``epoch``, ``position`` (next micro-batch of
the rank), ``next_step`` and ``next_micro`` (where that micro-batch sits in the plan;
2^32-1 both at the end of the rank's micro-batches), ``rank``, ``world``, ``seed``,
``index_fingerprint`` and ``manifest_fingerprint``: a state names the manifest it belongs
to and the step it stands at, and loading refuses (ValueError) a state of another manifest
(a re-plan, ``plan --resume-from``, has another fingerprint), rank, world, seed or index,
a (step, micro) that is not the plan's at that position, a missing or non-integer field,
and version 1 states (they name no manifest, so a state of another plan cannot be told
apart). Order: ``load_state_dict`` then ``set_epoch`` of the state's epoch, or the reverse,
resume the same way; ``set_epoch`` to another epoch discards the loaded state with a
RuntimeWarning.
"""

import os
import warnings

from torch.utils.data import Sampler

from . import _state
from ._args import U32_MAX, path_arg, whole
from ._handles import Manifest, manifest_arg
from .members import check_schedule_members, member_names
from .schedule import BucketShape, MicroBatchInfo, PlanOrigin, SamplePosition, Schedule

__all__ = ["BatchSampler", "BucketShape", "MicroBatchInfo"]


def _schedule_fact(attr, doc):
    """A read-only property: ``attr`` of the open schedule."""
    return property(lambda self: getattr(self._sched, attr), doc=doc)


class BatchSampler(Sampler):
    """Yields, for one rank, a list of index positions per planned micro-batch, in plan order.

    Args:
        manifest: manifest path (``adaptiveload plan``), a template with ``{epoch}``, a loaded
            :class:`adaptiveload.Manifest` (its file), or an :class:`adaptiveload.Planner` that
            plans each epoch in-process; anything else TypeError naming ``manifest``.
        rank: this rank; default ``RANK`` from the environment (0 for a one-rank plan).
        world_size: must equal the manifest's world; default ``WORLD_SIZE`` when set.
        drop_padding: leave out padding repeats (the planner pads the last step so that
            every rank has work; dropping them changes batch sizes, not the step count).
        epoch: epoch to open first when ``manifest`` is a template or a Planner (default 0).
        with_info: yield ``(position, info)`` pairs instead of bare positions, where info
            (a dict) says where the sample sits: position, step, micro, n_micro,
            last_in_step, bucket, bucket_shape (width, height, frames), step_samples,
            step_tokens, sp_degree, sp_rank, sp_ranks (the group), and the sample's own
            tokens and padded flag.
            :class:`adaptiveload.IndexDataset` then crops typed latents to the bucket's
            grid and :func:`adaptiveload.collate_packed` fills a batch exactly as the C
            stream does (same cu_seqlens, members, bucket and step fields).
        index, members: with both, each epoch's schedule is checked when opened: a member no
            sample of the index has, or a sample of this rank's schedule lacking one, raises
            :class:`adaptiveload.Error` naming them (as the C stream checks at open; plan with
            ``require_members=`` to leave such samples out).
    """

    def __init__(self, manifest, rank=None, world_size=None, drop_padding=False, epoch=None, with_info=False,
                 index=None, members=None):
        self._planner, self._template = manifest_arg(manifest)
        self._rank = rank
        self._world = world_size
        self._drop_padding = bool(drop_padding)
        self._with_info = bool(with_info)
        self._start = 0
        self._yielded = 0
        self._sched = None
        if index is not None:
            path_arg("index", index)
        members = member_names(members)  # TypeError / ValueError naming members
        self._check = (os.fspath(index), [str(m) for m in members]) if index is not None and members else None
        if epoch is None:
            epoch = getattr(self._planner, "first_epoch", 0) if self._planner is not None else 0
        self._open(whole("epoch", epoch, 0, U32_MAX))

    # -- epochs ---------------------------------------------------------------

    def _is_template(self):
        return self._planner is not None or "{epoch}" in self._template

    def _open(self, epoch):
        if self._planner is not None:
            path = self._planner.path(epoch)
        else:
            path = self._template.format(epoch=epoch) if "{epoch}" in self._template else self._template
        m = Manifest(path)
        if m.sources:
            raise ValueError("manifest %s is a mixture's (%d sources): its sample numbers are draws of several "
                             "indexes, which BatchSampler and IndexDataset (one index) cannot read; stream it with "
                             "StreamDataset (batch.sources names each sample's source)" % (path, len(m.sources)))
        self._sched = Schedule(m, self._rank, self._world)
        if self._check is not None:
            check_schedule_members(self._sched, *self._check)
        self._origin = PlanOrigin(path, self._sched.index_fingerprint, self._sched.manifest_fingerprint)

    def set_epoch(self, epoch):
        """Switches to epoch ``epoch``: a Planner plans it here, a template opens its file; a
        plain path must hold that epoch."""
        epoch = int(epoch)
        if epoch == self._sched.epoch:
            return
        if not self._is_template():
            raise ValueError(
                "manifest %s holds epoch %d, not %d: plan every epoch (adaptiveload plan --epoch N) and pass "
                "a path template such as 'plan-{epoch}.alm'" % (self._sched.path, self._sched.epoch, epoch)
            )
        if self._start:
            warnings.warn("BatchSampler.set_epoch(%d): discarding the loaded state of epoch %d (position %d); epoch %d "
                          "starts from its first micro-batch" % (epoch, self._sched.epoch, self._start, epoch),
                          RuntimeWarning, stacklevel=2)
        self._open(epoch)
        if self._sched.epoch != epoch:
            raise ValueError("manifest %s holds epoch %d, expected %d" % (self._sched.path, self._sched.epoch, epoch))
        self._start = 0

    # -- plan facts -----------------------------------------------------------

    rank = _schedule_fact("rank", "This rank.")
    world_size = _schedule_fact("world", "Ranks the manifest was planned for.")
    epoch = _schedule_fact("epoch", "Epoch of the open manifest.")
    num_batches = _schedule_fact("n_batches", "Micro-batches of this rank in the epoch (whatever the start position).")

    def bucket_shape(self, bucket):
        """BucketShape (width, height, frames, tokens) of bucket id ``bucket``."""
        return self._sched.buckets[bucket]

    def info(self, position):
        """MicroBatchInfo of micro-batch ``position`` of this rank."""
        if not 0 <= position < self._sched.n_batches:
            raise IndexError("micro-batch %d out of range (%d)" % (position, self._sched.n_batches))
        return self._sched.info(position)

    def infos(self, start=None):
        """MicroBatchInfo for each micro-batch the next iteration yields, in the same order."""
        first = self._start if start is None else start
        for i in range(first, self._sched.n_batches):
            yield self._sched.info(i)

    # -- Sampler --------------------------------------------------------------

    def __len__(self):
        return self._sched.n_batches - self._start

    def __iter__(self):
        sched = self._sched
        start, self._start = self._start, 0  # a loaded state applies to one pass
        self._yielded = start
        origin = self._origin
        for i in range(start, sched.n_batches):
            a = sched.first[i]
            batch = [SamplePosition(s, origin) for s in sched.batch(i)]
            if self._with_info:
                info = sched.info(i)
                common = dict(position=i, step=info.step, micro=info.micro, n_micro=info.n_micro,
                              last_in_step=info.last_in_step, bucket=info.bucket,
                              bucket_shape=tuple(sched.buckets[info.bucket][:3]), step_samples=info.step_samples,
                              step_tokens=info.step_tokens, sp_degree=info.sp_degree, sp_rank=info.sp_rank,
                              sp_ranks=info.sp_ranks)
                batch = [(s, dict(common, tokens=int(sched.tokens[a + j]), padded=bool(sched.padded[a + j])))
                         for j, s in enumerate(batch)]
            if self._drop_padding:
                batch = [s for j, s in enumerate(batch) if not sched.padded[a + j]]
            self._yielded = i + 1
            yield batch
        self._yielded = 0  # a finished pass: the next starts from the beginning

    # -- checkpoints ----------------------------------------------------------

    def state_at(self, position):
        """The state that resumes at micro-batch ``position`` of this rank (0 .. num_batches):
        ``state_at(info.position + 1)`` continues right after a micro-batch, however far the
        DataLoader's workers ran the sampler ahead."""
        s = self._sched
        pos = _state.field("BatchSampler", "position", position, s.n_batches)
        return {
            "version": _state.version(),
            "epoch": s.epoch,
            "position": pos,
            "next_step": s.step[pos] if pos < s.n_batches else _state.END,
            "next_micro": s.micro[pos] if pos < s.n_batches else _state.END,
            "rank": s.rank,
            "world": s.world,
            "seed": s.seed,
            "index_fingerprint": s.index_fingerprint,
            "manifest_fingerprint": s.manifest_fingerprint,
        }

    def state_dict(self):
        """Where the current pass stands: the micro-batches yielded so far (see "Checkpointing")."""
        return self.state_at(self._yielded)

    def load_state_dict(self, state):
        """Makes the next pass start at the state's position; ValueError for a state this
        sampler cannot continue (see "Checkpointing")."""
        u32, u64 = _state.U32_MAX, _state.U64_MAX
        st = _state.check_state("BatchSampler", state, {
            "epoch": u32, "position": u64, "next_step": u32, "next_micro": u32, "rank": u32, "world": u32,
            "seed": u64, "index_fingerprint": u64, "manifest_fingerprint": u64})
        self._start = 0  # replaced, not discarded: set_epoch has nothing to warn about
        if st["epoch"] != self._sched.epoch:
            self.set_epoch(st["epoch"])
        s = self._sched
        for k, mine in (("rank", s.rank), ("world", s.world), ("seed", s.seed),
                        ("index_fingerprint", s.index_fingerprint)):
            if st[k] != mine:
                raise ValueError("BatchSampler state is for %s=%r, this sampler has %r" % (k, st[k], mine))
        if st["manifest_fingerprint"] != s.manifest_fingerprint:
            raise _state.manifest_mismatch("BatchSampler", st["manifest_fingerprint"], s.path, s.manifest_fingerprint)
        pos = st["position"]
        if pos > s.n_batches:
            raise ValueError("BatchSampler state position %d out of range (%d batches)" % (pos, s.n_batches))
        want = self.state_at(pos)
        if (st["next_step"], st["next_micro"]) != (want["next_step"], want["next_micro"]):
            raise ValueError("BatchSampler state says micro-batch %d is step %d micro %d; manifest %s has %s there"
                             % (pos, st["next_step"], st["next_micro"], s.path,
                                "the end of the rank's micro-batches" if pos == s.n_batches else
                                "step %d micro %d" % (want["next_step"], want["next_micro"])))
        self._start = pos
        self._yielded = pos
