"""One rank's schedule of a manifest (stream/al_schedule.h) as flat arrays: what
:class:`adaptiveload.BatchSampler` yields and :class:`adaptiveload.StreamDataset` reports
(``len``, ``bucket_shape``). Needs no torch.

:class:`Schedule` resolves the rank as the C stream does (``rank`` None: ``RANK`` from the
environment; ``world`` None: ``WORLD_SIZE`` when set, which must equal the manifest's world).
"""

import collections
import ctypes

from . import _lib
from ._args import path_arg, whole

MicroBatchInfo = collections.namedtuple(
    "MicroBatchInfo",
    "position step micro n_micro last_in_step bucket step_samples step_tokens samples tokens padded "
    "sp_degree sp_rank sp_ranks",
)
MicroBatchInfo.__doc__ = """Where a micro-batch sits in the plan.

position: index in the rank's sequence; step/micro/n_micro: absolute step and the
micro-batch within it; last_in_step: time for the optimizer step; bucket: shape
bucket id; step_samples/step_tokens: planned totals over all ranks of this step;
samples/tokens: per-sample index positions and token counts; padded: per-sample
flags (1 = padding repeat, mask its loss); sp_degree/sp_rank/sp_ranks: the
sequence-parallel group that runs it (its degree, this rank's number in it, the tuple
of the group's global ranks; 1, 0 and (rank,) without SP). Every rank of a group has
the group's micro-batch: the same samples, tokens and padding."""


BucketShape = collections.namedtuple("BucketShape", "width height frames tokens")
BucketShape.__doc__ = "A shape bucket: samples are resized/cropped to width x height x frames; tokens per sample."


class Schedule:
    """One rank's schedule, copied out of the C library at construction.

    ``manifest`` is a manifest path (loaded here, al_schedule_open_path) or a loaded
    :class:`adaptiveload.Manifest` (al_schedule_open on its handle: the file is not read
    again). Failures raise :class:`adaptiveload.Error` with the same message either way.

    Attributes: path, rank, world, epoch, seed, index_fingerprint, manifest_fingerprint
    (al_stream_manifest_fingerprint: what resume states name), n_batches, buckets (id ->
    :class:`BucketShape`) and the flat arrays first (n_batches + 1), step, micro, n_micro,
    bucket, step_samples, step_tokens, sp_degree, sp_rank (per batch), samples, tokens,
    padded (per sample).
    """

    def __init__(self, manifest, rank=None, world=None):
        lib = _lib.lib()
        h = ctypes.c_void_p()
        # None: RANK / WORLD_SIZE from the environment (the C side); else the CLI's ranges.
        rank = -1 if rank is None else whole("rank", rank, 0, 1 << 30)
        world = 0 if world is None else whole("world_size", world, 0, 1 << 20)
        if hasattr(manifest, "handle"):
            self.path = manifest.path
            status = lib.al_schedule_open(ctypes.byref(h), manifest.handle, rank, world)
            _lib.check(status, "manifest %s" % self.path, context=self.path)  # as al_schedule_open_path says it
        else:
            self.path = path_arg("manifest", manifest)
            status = lib.al_schedule_open_path(ctypes.byref(h), _lib.encode_path(self.path, "manifest"), rank, world)
            _lib.check(status, "manifest %s" % self.path)
        try:
            self._export(lib, h)
        finally:
            lib.al_schedule_free(h)

    def _export(self, lib, h):
        self.rank = lib.al_schedule_rank(h)
        self.world = lib.al_schedule_world(h)
        self.epoch = lib.al_schedule_epoch(h)
        self.seed = lib.al_schedule_seed(h)
        self.index_fingerprint = lib.al_schedule_index_fingerprint(h)
        self.manifest_fingerprint = lib.al_schedule_manifest_fingerprint(h)
        nb = lib.al_schedule_batches(h)
        ns = lib.al_schedule_samples(h)
        self.first = (ctypes.c_uint64 * (nb + 1))()
        self.step = (ctypes.c_uint32 * max(nb, 1))()
        self.micro = (ctypes.c_uint32 * max(nb, 1))()
        self.n_micro = (ctypes.c_uint32 * max(nb, 1))()
        self.bucket = (ctypes.c_uint32 * max(nb, 1))()
        self.step_samples = (ctypes.c_uint64 * max(nb, 1))()
        self.step_tokens = (ctypes.c_uint64 * max(nb, 1))()
        self.samples = (ctypes.c_uint64 * max(ns, 1))()
        self.tokens = (ctypes.c_uint64 * max(ns, 1))()
        self.padded = (ctypes.c_uint8 * max(ns, 1))()
        _lib.check(
            lib.al_schedule_export(h, self.first, self.step, self.micro, self.n_micro, self.bucket,
                                   self.step_samples, self.step_tokens, self.samples, self.tokens, self.padded),
            "schedule export",
        )
        self.sp_degree = (ctypes.c_uint32 * max(nb, 1))()
        self.sp_rank = (ctypes.c_uint32 * max(nb, 1))()
        _lib.check(lib.al_schedule_export_sp(h, self.sp_degree, self.sp_rank), "schedule export")
        self.n_batches = nb
        self.buckets = {}
        for k in range(lib.al_schedule_bucket_count(h)):
            i, w, hh, f, t = (ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32(),
                              ctypes.c_uint64())
            _lib.check(lib.al_schedule_bucket(h, k, ctypes.byref(i), ctypes.byref(w), ctypes.byref(hh),
                                              ctypes.byref(f), ctypes.byref(t)), "schedule bucket")
            self.buckets[i.value] = BucketShape(w.value, hh.value, f.value, t.value)

    def batch(self, i):
        """Index positions of micro-batch ``i``."""
        a, b = self.first[i], self.first[i + 1]
        return self.samples[a:b]

    def info(self, i):
        """:class:`MicroBatchInfo` of micro-batch ``i``."""
        a, b = self.first[i], self.first[i + 1]
        return MicroBatchInfo(
            position=i,
            step=self.step[i],
            micro=self.micro[i],
            n_micro=self.n_micro[i],
            last_in_step=self.micro[i] + 1 == self.n_micro[i],
            bucket=self.bucket[i],
            step_samples=self.step_samples[i],
            step_tokens=self.step_tokens[i],
            samples=self.samples[a:b],
            tokens=self.tokens[a:b],
            padded=self.padded[a:b],
            sp_degree=self.sp_degree[i],
            sp_rank=self.sp_rank[i],
            sp_ranks=self.sp_ranks(i),
        )

    def sp_ranks(self, i):
        """The global ranks of the sequence-parallel group that runs micro-batch ``i``."""
        g = self.rank - self.sp_rank[i]
        return tuple(range(g, g + self.sp_degree[i]))


PlanOrigin = collections.namedtuple("PlanOrigin", "manifest index_fingerprint manifest_fingerprint")
PlanOrigin.__doc__ = """Which manifest (path and fingerprint) a sample position was planned in,
and the fingerprint of the index it was planned from."""


class SamplePosition(int):
    """An index position (an int in every way) that also says which plan it came from
    (``origin``, a :class:`PlanOrigin`): what :class:`adaptiveload.BatchSampler` yields, so
    :class:`adaptiveload.IndexDataset` can refuse positions planned from another index. It
    pickles with its origin (DataLoader workers receive it)."""

    def __new__(cls, value, origin):
        self = int.__new__(cls, value)
        self.origin = origin
        return self

    def __reduce__(self):
        return (SamplePosition, (int(self), self.origin))
