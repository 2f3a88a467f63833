"""StreamDataset: one rank's packed micro-batches from the C stream, as torch tensors.

::

    ds = adaptiveload.StreamDataset("corpus.alidx", "plan.alm", device="cuda")
    for batch in ds:                      # a PackedBatch per planned micro-batch
        x = batch.view(torch.bfloat16)    # all samples, packed; batch.cu_seqlens (int32, n+1)
        loss = model(x, batch.cu_seqlens, batch.shapes).sum() / batch.step_samples
        loss.backward()
        if batch.last_in_step:
            optimizer.step(); optimizer.zero_grad()

What happens underneath: C reader threads pread each sample's payload member at its
indexed offset, decode LZ4 members, and pack the micro-batch into one buffer from a
bounded pool (``prefetch`` buffers, pinned when CUDA is present). Samples start at
64-byte offsets (``batch.offsets``, bytes) and ``batch.cu_seqlens`` gives token
boundaries. With ``device`` set (main process only), the C library copies each batch
to the GPU on its own stream and the current torch stream waits for that copy on the
GPU (cudaStreamWaitEvent), not on the host.

Workers. With ``DataLoader(ds, batch_size=None, num_workers=k)`` worker ``i`` reads
micro-batches ``i, i+k, i+2k, ...`` of the rank (each worker runs its own C stream);
DataLoader returns worker outputs round-robin, which restores the plan order exactly
(``batch.position`` counts 0, 1, 2, ...). Workers give CPU tensors in shared memory;
use ``pin_memory=True`` on the DataLoader and ``batch.to("cuda", non_blocking=True)``.
``device=`` is refused inside workers (CUDA in forked workers is not supported).

Ranks and multi-node: as for :class:`adaptiveload.BatchSampler` - rank and world come
from the arguments or torchrun's RANK / WORLD_SIZE (LOCAL_RANK picks the default CUDA
device), the manifest's world must equal WORLD_SIZE, and every rank reads the same
manifest with no coordination service.

Errors. A sample that cannot be read (missing member, shard changed since indexing,
short read, bad LZ4 frame) raises :class:`adaptiveload.Error` (also named StreamError)
naming the shard, key and offset (``on_error="fail"``, the default), or with
``on_error="skip"`` the batch comes without it and ``batch.skipped`` lists ``(key,
reason)``; nothing is skipped silently.

Resuming. Every batch carries ``batch.resume_state``: the state to continue right
after it. ``StreamDataset(..., state=batch.resume_state)`` or ``load_state_dict``
restarts there (any number of workers). ``state_dict()`` inside a worker returns that
worker's own position (what torchdata's StatefulDataLoader stores per worker; it
restores with the same number of workers). A state is a dict of ints (al_stream_state,
version 2): rank, world, epoch, seed, index_fingerprint, manifest_fingerprint, position,
next_step and next_micro (the plan's micro-batch at position; 2^32-1 both at the end),
stride, skipped, delivered. It names the manifest it belongs to: a state of another
manifest (a re-plan, ``plan --resume-from``) raises ValueError naming both fingerprints,
a malformed one (missing key, a value that is not a whole number, version 1) ValueError
naming the key; the C library refuses a position or (step, micro) that does not fit.
``load_state_dict`` then ``set_epoch`` of the state's epoch, or the reverse, resume the same
way (stream/README.md, "Resume states from Python").

Loss normalisation after a skip: ``batch.skipped_real_tokens`` / ``skipped_real_samples``
say what the batch's skips took from the planned ``step_tokens`` / ``step_samples``;
:class:`adaptiveload.StepTotals` sums them over the step and the ranks and rescales the
gradients so the loss is normalised by the delivered total exactly.

Several members. ``members=["latent.npy", "t5.npy", "txt"]`` delivers each sample's
members one after the other (each 64-byte aligned). ``batch.members[name]`` describes
one (:class:`MemberInfo`: numpy dtype name, per-sample shapes, byte offsets and sizes);
``batch.tensors(name)`` gives the per-sample tensors, typed and shaped (``.npy`` and
``.safetensors`` members arrive without their header; untyped members as uint8 bytes);
``batch.packed(name)`` the latent patchified into one (tokens, C*p_t*p_h*p_w) tensor
whose rows ``cu_seqlens`` indexes. A typed latent member (``latent`` or ``latent.*``) is
cropped by the C library to its bucket's latent grid (channels whole, the first T_b
latent frames, rows and columns centred at (n - n_b) // 2), so its tokens are exactly
``cu_seqlens``'s.

Sequence parallelism. A micro-batch of a plan with SP degrees runs on a group of d ranks
(``batch.sp_degree``; ``batch.sp_ranks`` the group's global ranks, this rank number
``batch.sp_rank`` of them). By default every rank of the group gets the group's whole
micro-batch. ``sp_shard=True`` delivers only this rank's token shard: rank j holds tokens
``batch.sp_token_range`` = [j N // d, (j + 1) N // d) of the group's packed sequence of N
tokens (floor boundaries: the d shards tile [0, N) exactly, in rank order). The batch then
holds the samples with tokens in the shard, each as its piece: ``cu_seqlens`` delimits the
pieces, ``batch.token_first[i]`` is piece i's first token in its own sample and
``batch.sample_tokens[i]`` that sample's whole length (a sample cut by a boundary is a
partial sequence on both ranks); ``batch.token_positions()`` gives each token's (t, y, x)
on its sample's patch grid, for RoPE. The latent member arrives patchified, token-major:
``batch.tensors(latent)[i]`` is (tokens_i, C * p_t * p_h * p_w) with the plan's patch
(``batch.patch``), and ``batch.packed()`` their concatenation: the d shards' ``packed()``,
concatenated in rank order, equal the whole batch's ``packed()`` byte for byte. Text members
come whole for every sample with tokens in the shard. An untyped latent (``synth``'s raw
``latent``) cannot be sliced: the stream refuses to open (adaptiveload.Error). Skips: each
sample and token counted once over the group (``skipped_real_*``; without sp_shard the
group's first rank reports them), so :class:`adaptiveload.StepTotals` stays exact.

Tensor lifetime. By default every tensor a batch holds is its own (copied out of the
pool). ``zero_copy=True`` instead gives views into the stream's buffers (host or
device), valid until ``keep`` more batches have been taken; clone() what you keep.
"""

import collections
import ctypes
import os
import warnings

import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import _constants as C
from . import _lib
from . import _structs as S
from .latents import patchify
from . import _state
from .members import member_names, torch_dtype
from ._args import finite, no_nul, path_arg, whole, whole_or_default
from ._handles import Index, Manifest, manifest_arg, root_pairs
from .schedule import Schedule
from .storage import storage_args

_ON_ERROR = {"fail": "AL_STREAM_FAIL", "skip": "AL_STREAM_SKIP_SAMPLE"}  # the constants' names

MemberInfo = collections.namedtuple("MemberInfo", "name dtype itemsize typed cropped shapes offsets sizes")
MemberInfo.__doc__ = """One member of every sample of a batch: name (the requested extension),
dtype (numpy name: "bfloat16", "float32", ...; "uint8" for untyped members), itemsize,
typed (a .npy/.safetensors header was parsed), cropped (the latent, cut to the bucket's
grid), shapes (a tuple per sample), offsets and sizes (bytes into ``batch.data``, per
sample)."""
_STATE_FIELDS = [name for name, _ in S.StreamState._fields_ if name != "reserved"]
# Largest value of each state field (its C width); "worker" (which DataLoader worker's slice) is optional.
_STATE_RANGES = {name: (1 << (8 * ctypes.sizeof(ct))) - 1 for name, ct in S.StreamState._fields_
                 if name in _STATE_FIELDS and name != "version"}


class PackedBatch:
    """One packed micro-batch.

    Attributes:
        data: uint8 tensor, the packed payload (length ``offsets[-1]`` rounded up to 64:
            the tail is zero), on the CPU or the stream's device.
        cu_seqlens: int32 tensor (n+1), cumulative tokens; on the same device as data.
        offsets: int64 CPU tensor (n+1), byte offset of each sample (64-aligned), and
            the payload end; sizes: int64 CPU tensor (n), payload bytes.
        keys: list of n sample keys; samples: int64 tensor of index positions (a mixture's:
            draw ids, ``Manifest.sources``' draw_base + pass x samples + position).
        sources: a mixture's stream: list of n source names, the source each sample was read
            from (to log the loss per source); None for a stream of one index.
        shapes: int32 tensor (n, 3): width, height, frames.
        padded: bool tensor (n): padding repeats (mask their loss).
        position, step, micro, n_micro, last_in_step, bucket: where it sits in the plan.
        step_samples, step_tokens: planned totals over all ranks of the step (real samples).
        tokens: tokens of the samples here; planned_tokens: what the plan put here (the same
            unless samples were skipped).
        skipped: list of (key, reason) left out under ``on_error="skip"``;
            skipped_real_samples, skipped_real_tokens: what they took from the step totals
            (padding repeats excluded): see :class:`adaptiveload.StepTotals`.
        resume_state: dict; a StreamDataset opened with it continues after this batch.
        members: dict name -> :class:`MemberInfo`, in the requested order (the first one
            is what offsets/sizes/sample() describe).
        grid: (T_b, h_b, w_b), the bucket's latent grid a typed latent was cropped to
            ((0, 0, 0) when the plan carries none).
        sp_degree, sp_rank, sp_ranks: the sequence-parallel group running this micro-batch
            (1, 0, (rank,) without SP); sp_sharded: only this rank's token shard is here
            (``sp_shard=True``); sp_token_range: (lo, hi), the tokens of the group's packed
            sequence held here ((0, tokens) when whole); sp_group_tokens: N, the planned tokens
            of the group's whole micro-batch the shards split (``training.sp_shard_of``'s
            n_tokens).
        token_first, sample_tokens: int64 CPU tensors (n): each piece's first token in its
            sample and the sample's whole length (0 and the sample's tokens when whole).
        patch: (p_t, p_h, p_w) the latent is patchified with when sp_sharded, else None.
        stall_seconds: float, the time the stream's next() waited for its readers before
            returning this batch (0.0 when it was ready); in a DataLoader worker the worker's
            wait, which the main process only sees when the worker falls behind.
        fetched_bytes, requests, cache_hits, cache_misses: ints, for shards at URLs the growth
            of the stream's counters (``stream_stats``) since its previous batch: what was
            received while this batch was the next one (the readers fetch ahead), not the size
            of its members; 0 for local shards. Their sum over a pass equals the stream's
            bytes_fetched / requests / ... as of its last batch.
        stream_stats: dict, the delivering stream's totals (:meth:`StreamDataset.stats`'s
            keys) as of this batch, with ``worker``: the DataLoader worker whose stream it is
            (0 without workers). How the main process learns a worker stream's totals.
    """

    __slots__ = ("data", "cu_seqlens", "offsets", "sizes", "keys", "samples", "shapes", "padded", "position",
                 "step", "micro", "n_micro", "last_in_step", "bucket", "step_samples", "step_tokens", "tokens",
                 "skipped", "resume_state", "members", "grid", "planned_tokens", "skipped_real_samples",
                 "skipped_real_tokens", "sp_degree", "sp_rank", "sp_ranks", "sp_sharded", "sp_token_range",
                 "token_first", "sample_tokens", "patch", "sp_group_tokens", "stall_seconds", "fetched_bytes",
                 "requests", "cache_hits", "cache_misses", "stream_stats", "sources")

    def __len__(self):
        return len(self.keys)

    def view(self, dtype):
        """The packed payload as ``dtype`` (e.g. torch.bfloat16 latents); sample i starts at
        element ``offsets[i] // itemsize``."""
        return self.data.view(dtype)

    def sample(self, i, dtype=torch.uint8):
        """Sample i's payload as a 1-D ``dtype`` view."""
        a = int(self.offsets[i])
        return self.data[a:a + int(self.sizes[i])].view(dtype)

    def tensors(self, name=None):
        """The per-sample tensors of member ``name`` (default: the first), a list of n: typed
        members as their dtype and shape (views into ``data``, on its device), untyped ones
        as 1-D uint8. TypeError for a dtype this torch lacks (uint16/32/64 before 2.3)."""
        m = self.members[name if name is not None else next(iter(self.members))]
        dt = torch_dtype(m.dtype) if m.typed else torch.uint8
        out = []
        for shape, a, n in zip(m.shapes, m.offsets, m.sizes):
            t = self.data[a:a + n]
            out.append(t.view(dt).view(shape) if m.typed else t)
        return out

    def packed(self, name=None, patch=None):
        """The latent member (default: the cropped one, else the first) patchified and
        concatenated: a (tokens, C * p_t * p_h * p_w) tensor (a copy) whose rows
        ``cu_seqlens`` delimits. ``patch`` defaults to 1x2x2, or for a token shard
        (``sp_sharded``) to the patch the stream delivered it with (``self.patch``; another one
        raises ValueError). ValueError when shapes do not split into patches or the rows differ
        from cu_seqlens (an uncropped latent of another grid than its bucket)."""
        if patch is None:
            patch = self.patch if self.sp_sharded else (1, 2, 2)
        if name is None:
            name = next((k for k, m in self.members.items() if m.cropped), next(iter(self.members)))
        m = self.members[name]
        if self.sp_sharded and m.cropped:  # already (tokens, C * p_t * p_h * p_w), the stream's patch
            if tuple(patch) != self.patch:
                raise ValueError("the shard's latent is patchified %s, not %s" % (self.patch, tuple(patch)))
            xs = self.tensors(name)
        else:
            xs = [patchify(t, patch) for t in self.tensors(name)]
        if not xs:
            return torch.empty(0, 0, dtype=torch_dtype(self.members[name].dtype), device=self.data.device)
        out = torch.cat(xs)
        if out.shape[0] != int(self.cu_seqlens[-1]):
            raise ValueError("member %s gives %d tokens, cu_seqlens says %d" % (name, out.shape[0],
                                                                                  int(self.cu_seqlens[-1])))
        return out

    def token_positions(self, patch=None):
        """(tokens, 3) int64 CPU tensor: each token's (t, y, x) on its sample's patch grid (the
        bucket's grid over ``patch``, default the shard's patch, else 1x2x2), for RoPE; with
        sp_shard the pieces' positions, so a cut sample continues where the previous rank's
        piece stopped."""
        pt, ph, pw = patch if patch is not None else (self.patch or (1, 2, 2))
        if not all(self.grid):
            raise ValueError("token positions need the bucket's latent grid; this batch carries none")
        hp, wp = self.grid[1] // ph, self.grid[2] // pw
        parts = []
        for i in range(len(self.keys)):
            n = int(self.cu_seqlens[i + 1]) - int(self.cu_seqlens[i])
            k = torch.arange(int(self.token_first[i]), int(self.token_first[i]) + n, dtype=torch.int64)
            parts.append(torch.stack([k // (hp * wp), (k // wp) % hp, k % wp], dim=1))
        return torch.cat(parts) if parts else torch.empty(0, 3, dtype=torch.int64)

    def _map(self, fn):
        out = PackedBatch.__new__(PackedBatch)
        for k in PackedBatch.__slots__:
            setattr(out, k, getattr(self, k))
        out.data = fn(self.data)
        out.cu_seqlens = fn(self.cu_seqlens)
        return out

    def pin_memory(self):
        """Used by DataLoader(pin_memory=True)."""
        return self._map(lambda t: t if t.is_cuda else t.pin_memory())

    def to(self, device, non_blocking=False):
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def __repr__(self):
        return "PackedBatch(position=%d, step=%d, micro=%d/%d, samples=%d, tokens=%d, bytes=%d, device=%s%s)" % (
            self.position, self.step, self.micro, self.n_micro, len(self.keys), self.tokens,
            int(self.offsets[-1]), self.data.device, ", skipped=%d" % len(self.skipped) if self.skipped else "")


class _CudaArray:
    """Minimal __cuda_array_interface__ holder so torch can view C device memory."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2}


def _host_view(ptr, nbytes):
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(ptr), dtype=torch.uint8)


def _shared_bytes(n):
    """A uint8 tensor in shared memory, so a DataLoader worker hands it over without the
    copy DataLoader would otherwise make. UntypedStorage._new_shared allocates it directly
    (share_memory_() on a fresh tensor costs a second allocation and copy: ~10 ms / 8 MB)."""
    new_shared = getattr(getattr(torch, "UntypedStorage", None), "_new_shared", None)
    if new_shared is not None:
        try:
            return torch.empty(0, dtype=torch.uint8).set_(new_shared(n))
        except (RuntimeError, TypeError):
            pass
    return torch.empty(n, dtype=torch.uint8).share_memory_()


def _state_dict(st):
    return {k: int(getattr(st, k)) for k in _STATE_FIELDS}


_STATS_BOOLS = ("pinned", "device_copy")


def _stream_stats(lib, h):
    """al_stream_get_stats of stream ``h`` as a dict (StreamDataset.stats)."""
    st = S.StreamStats()
    _lib.check(lib.al_stream_get_stats(h, ctypes.byref(st)), "stream stats")
    out = {}
    for name, ct in S.StreamStats._fields_:
        v = getattr(st, name)
        out[name] = bool(v) if name in _STATS_BOOLS else float(v) if ct is ctypes.c_double else int(v)
    return out


def _state_struct(d):
    st = S.StreamState()
    for k in _STATE_FIELDS:
        setattr(st, k, d[k])  # checked by load_state_dict (_state.check_state)
    return st


class _RunSchedule:
    """What StreamDataset reads of a rank's schedule, for a chunked run: by arithmetic (every
    rank holds K micro-batches of every step), the buckets from a one-step slice when asked."""

    def __init__(self, run, planner):
        self._planner = planner
        self._start = run.start_step
        self._steps = run.info["steps"]
        self.epoch = run.epoch
        self.manifest_fingerprint = run.info["fingerprint"]  # what its stream's states name
        self.n_batches = (run.info["steps"] - run.start_step) * run.micro
        self._buckets = None

    @property
    def buckets(self):
        if self._buckets is None:
            from .planning import _serial
            p = self._planner
            s0 = min(self._start, self._steps - 1)
            out = os.path.join(p._dir(), "buckets-e%d-pid%d-%d.alm" % (
                self.epoch, os.getpid(), next(_serial)))
            p._write(out, self.epoch, (s0, s0 + 1))
            self._buckets = Schedule(out, 0, p.world).buckets
        return self._buckets


class StreamDataset(IterableDataset):
    """Iterable over one rank's packed micro-batches (see the module docstring).

    Args:
        index, manifest: paths of the index and of a manifest planned from it (a loaded
            adaptiveload.Manifest, what adaptiveload.plan returns, stands for its file); or, as
            manifest, an adaptiveload.Planner over that index (then set_epoch(e) plans e).
            A mixture: ``index`` None and a ``Planner(mixture=...)`` as manifest (its sources'
            indexes are read), or the list of the sources' index paths, in the mixture's order,
            with its manifest (``plan_mixture``); every sample is read from its source's index
            and ``batch.sources`` names the source of each.
            Anything else raises TypeError naming the argument; a path (this one, root,
            cache_dir) or a member name holding a NUL byte raises ValueError naming it.
        rank, world_size: default RANK / WORLD_SIZE from the environment.
        ext: payload member extension (``KEY.<ext>`` or ``KEY.<ext>.lz4``); None = the
            index's typed latent member (``latent.npy``, ...), else ``latent``.
        members: list of member extensions to deliver per sample, in order (e.g.
            ``["latent.npy", "t5.npy", "txt"]``); None = ``[ext]``. See "Several members".
        decode: also deliver ``"pixels"`` (after ``members``, or alone without them): each
            sample's raw video or image member (mp4, mov, mkv, webm, jpg, png, webp) decoded to
            its bucket's (frames, height, width, 3) uint8 tensor, ``batch.tensors("pixels")``:
            the first frames, scaled keeping the aspect, centre-cropped, rotation applied
            (decode/al_decode.h).
        max_member_bytes: cap on one member's stored or decoded bytes; 0 = the C default
            (ADAPTIVELOAD_MAX_MEMBER_BYTES, else 512 MiB).
        max_sample_bytes: cap on what one sample delivers, its members together; 0 = the C
            default (ADAPTIVELOAD_MAX_SAMPLE_BYTES, else 1 GiB).
        root: the corpus moved (copied to node-local disk, say): "FROM=TO", {FROM: TO} or a list
            of them; shard paths under FROM are read under TO (``adaptiveload stream --root``).
        threads: C reader threads per stream (default min(4, cores); 2 inside workers).
        prefetch: buffers in the C pool (batches read ahead), default 4.
        on_error: "fail" (raise) or "skip" (deliver without the sample, listed in batch.skipped).
            Members are checked against the index when the stream opens: a member no sample
            has raises (whatever on_error), samples of the rank lacking one raise under "fail"
            and are skipped under "skip".
        max_skip_fraction: with on_error="skip", the stream raises once more than this
            fraction of its samples were skipped; 0 = the C default (0.01), 1 = no limit. A
            stream whose samples were all skipped raises at its end whatever the limit.
        device: None for CPU tensors; "cuda" / "cuda:N" / int: the C library copies each
            batch there (main process only).
        zero_copy, keep: see "Tensor lifetime" in the module docstring.
        pin_memory: copy CPU batches into pinned memory (main process; default: when CUDA
            is available and zero_copy is off).
        state: a ``batch.resume_state`` or ``state_dict()`` to continue from.
        sp_shard: False (default): every rank of a sequence-parallel group gets the group's
            whole micro-batch; True: only this rank's token shard (see "Sequence
            parallelism"). A bool (or 0 / 1), else TypeError.
        cache_dir, cache_bytes: shards at URLs (root={DIR: "http://host/dir"} or "s3://..."):
            keep fetched members in this local folder, shared safely by the node's ranks,
            within cache_bytes over all processes using it (0 = 1 GiB); None = no cache.
        fetch_parallel: with cache_dir, threads fetching the coming batches' members into the
            cache in plan order (0 = 4, -1 = none).
        remote_timeout: shards at URLs: seconds one remote operation (a pin, a member read)
            may take as a whole, retries and a slow transfer included, before the sample fails
            naming the URL (None = ADAPTIVELOAD_REMOTE_TIMEOUT_S, else 60; otherwise a number in
            [0.1, 86400], else ValueError).
        s3_endpoint, s3_region, s3_addressing: s3:// shards: the S3-compatible endpoint URL,
            the SigV4 region, "path" or "virtual" addressing (adaptiveload.storage); None =
            the environment's (AWS_ENDPOINT_URL, AWS_REGION), else what the index recorded
            when it was built, else AWS. A failed request names the endpoint used and, when
            the index was built with another, that one.
        plan_ahead: with a chunked Planner (planner="chunked"), the windows the stream's planning
            thread keeps planned ahead of the one it reads (0 = 2, at most 64): what the stream
            holds of the plan is this rank's rows of plan_ahead + 1 windows, whatever the corpus.
    """

    def __init__(self, index, manifest, rank=None, world_size=None, ext=None, threads=None, prefetch=4,
                 on_error="fail", device=None, zero_copy=False, keep=1, pin_memory=None, state=None, members=None,
                 max_member_bytes=0, root=None, max_sample_bytes=0, max_skip_fraction=0, sp_shard=False,
                 cache_dir=None, cache_bytes=0, fetch_parallel=0, remote_timeout=None, s3_endpoint=None,
                 s3_region=None, s3_addressing=None, plan_ahead=0, decode=False):
        super().__init__()
        if not isinstance(on_error, str) or on_error not in _ON_ERROR:
            raise ValueError("on_error must be 'fail' or 'skip', not %r" % (on_error,))
        # An adaptiveload.Planner plans each epoch in-process (set_epoch); else a manifest path
        # (a loaded Manifest stands for its file).
        self.planner, path = manifest_arg(manifest)
        mixture = getattr(self.planner, "mixture", None)
        if index is None and mixture is not None:
            self.index_paths = list(self.planner.source_indexes())
        elif isinstance(index, (list, tuple)):
            if not index:
                raise ValueError("index: an empty list (a mixture's manifest needs its sources' indexes)")
            self.index_paths = [path_arg("index[%d]" % k, x) for k, x in enumerate(index)]
        else:
            self.index_paths = [path_arg("index", index)]
        self.index_path = self.index_paths[0]
        # A chunked Planner's epochs (of one index or a mixture) are streamed from the run itself,
        # window by window (al_stream_open_run, al_stream_open_run_mixture): no manifest of the
        # epoch is written or read.
        self._chunked = self.planner is not None and self.planner.chunked
        self._epoch = self.planner.first_epoch if self.planner else None
        if self._chunked:
            self.manifest_path = None
        else:
            self.manifest_path = self.planner.path(self.planner.first_epoch) if self.planner else path
        self.rank = rank
        self.world_size = world_size
        if ext is not None and not isinstance(ext, str):
            raise TypeError("ext must be a member extension (str) or None, not %r" % (ext,))
        self.ext = None if ext is None else no_nul("ext", ext)
        self.members = member_names(members)
        if decode:  # "pixels": each sample's raw video or image decoded at its bucket's shape
            if self.members is None:
                self.members = ["pixels"]
            elif "pixels" not in self.members:
                self.members = self.members + ["pixels"]
        # The CLI's ranges (cli/cmd_stream.c); 0 or None keeps the library's default.
        self.max_member_bytes = whole_or_default("max_member_bytes", max_member_bytes)
        self.max_sample_bytes = whole_or_default("max_sample_bytes", max_sample_bytes)
        self.max_skip_fraction = finite("max_skip_fraction", 0 if max_skip_fraction is None else max_skip_fraction,
                                        0.0, 1.0)
        if rank is not None:
            whole("rank", rank, 0, 1 << 30)
        if world_size is not None:
            whole("world_size", world_size, 0, 1 << 20)
        if threads is not None:
            whole("threads", threads, 0, 1024)
        if prefetch is not None:
            whole("prefetch", prefetch, 0, 4096)
        if sp_shard not in (True, False) or not isinstance(sp_shard, (bool, int)):
            raise TypeError("sp_shard must be True or False, not %r" % (sp_shard,))
        self.sp_shard = bool(sp_shard)
        self.root = root_pairs(root)
        if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError("cache_dir must be a path or None, not %r" % (cache_dir,))
        self.cache_dir = path_arg("cache_dir", cache_dir) if cache_dir is not None else None
        if self.cache_dir is not None and not self.cache_dir:
            raise ValueError("cache_dir must not be empty")
        self.cache_bytes = whole_or_default("cache_bytes", cache_bytes)
        if fetch_parallel != -1:
            whole("fetch_parallel", 0 if fetch_parallel is None else fetch_parallel, 0, 256)
        self.fetch_parallel = int(fetch_parallel or 0)
        self.storage = storage_args(s3_endpoint, s3_region, s3_addressing, remote_timeout)
        self.remote_timeout = self.storage.remote_timeout_s
        # The CLI's range (al_stream_options.plan_ahead); 0 keeps the library's default (2).
        self.plan_ahead = whole("plan_ahead", 0 if plan_ahead is None else plan_ahead, 0, 64)
        self.threads = threads
        self.prefetch = prefetch
        self.on_error = on_error
        try:
            self.device = None if device is None else torch.device(device)
        except (RuntimeError, TypeError, ValueError, OverflowError) as e:  # torch's words, under the argument's name
            raise ValueError("device %r: %s" % (device, e)) from None
        if self.device is not None and self.device.type != "cuda":
            raise ValueError("device must be a CUDA device (or None for CPU tensors), not %s" % self.device)
        self.zero_copy = bool(zero_copy)
        self.keep = max(1, whole("keep", keep))
        self.pin_memory = pin_memory
        self._loaded = None
        self._live = None  # (pid, worker, stream state) of the current pass
        self._held = {}  # name -> (pid, C object): the index, manifest and schedule of this process
        self._stream = None  # (pid, C stream handle) of the pass running in this process
        self._last_stats = {}  # stats() of the last pass that ended in this process
        if state is not None:
            self.load_state_dict(state)

    def set_epoch(self, epoch):
        """With a Planner: plans epoch ``epoch`` (in this process, deterministic) and reads it
        from the next pass on; call it before iterating, as with DistributedSampler.

        A loaded resume state (``state=`` or ``load_state_dict``) of epoch ``epoch`` is kept,
        so ``set_epoch`` and ``load_state_dict`` may come in either order; a state of another
        epoch no longer applies: it is discarded with a RuntimeWarning naming both epochs."""
        if self.planner is None:
            raise ValueError("StreamDataset(index, manifest) reads one planned epoch; pass an adaptiveload.Planner "
                             "as the manifest to plan each epoch with set_epoch")
        epoch = int(epoch)
        if not self._chunked:
            self.manifest_path = self.planner.path(epoch)
        else:
            whole("epoch", epoch, 0, 0xFFFFFFFF)
        self._epoch = epoch
        self._held = {}
        if self._loaded is not None and self._loaded["epoch"] != epoch:
            warnings.warn("StreamDataset.set_epoch(%d): discarding the loaded resume state of epoch %d (position %d); "
                          "epoch %d starts from its first micro-batch"
                          % (epoch, self._loaded["epoch"], self._loaded["position"], epoch),
                          RuntimeWarning, stacklevel=2)
            self._loaded = None

    # -- per-process C objects -----------------------------------------------

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_held"], d["_live"], d["_stream"] = {}, None, None  # C handles stay in their process
        return d

    def _own(self, name, make):
        """This process's C object ``name``, made by ``make()`` on first use."""
        held = self._held.get(name)
        if held is None or held[0] != os.getpid():
            held = self._held[name] = (os.getpid(), make())
        return held[1]

    def _open_inputs(self):
        """This process's indexes (one, or a mixture's sources' in order) and manifest."""
        return (self._own("index", lambda: [Index(p, root=self.root) for p in self.index_paths]),
                self._own("manifest", lambda: Manifest(self.manifest_path)))

    def _run(self):
        """This process's chunked run of the current epoch (a chunked Planner)."""
        return self._own("run", lambda: self.planner.open_run(self._epoch))

    def _source(self):
        """What the stream reads, for messages: the manifest path, or the run."""
        if not self._chunked:
            return self.manifest_path
        what = self.planner.index if self.planner.mixture is None else "a mixture of %s" % ", ".join(self.index_paths)
        return "the chunked run of %s (epoch %d, world %d)" % (what, self._epoch, self.planner.world)

    def _schedule(self):
        """This rank's schedule from the loaded manifest (the stream's rank resolution); for a
        chunked run, its figures by arithmetic (_RunSchedule)."""
        if self._chunked:
            return self._own("schedule", lambda: _RunSchedule(self._run(), self.planner))
        manifest = self._own("manifest", lambda: Manifest(self.manifest_path))
        return self._own("schedule", lambda: Schedule(manifest, self.rank, self.world_size))

    def __len__(self):
        """Micro-batches this rank reads in the epoch (from the start; a resumed chunked run's
        from its resume step)."""
        return self._schedule().n_batches

    def bucket_shape(self, bucket):
        """BucketShape (width, height, frames, tokens) of bucket id ``batch.bucket``: the
        shape the batch's samples are to be resized/cropped to."""
        return self._schedule().buckets[bucket]

    # -- statistics -------------------------------------------------------------

    def stats(self):
        """The totals of this process's stream (al_stream_stats) as a dict: during a pass the
        running stream's, after it the last pass's ({} before any). Keys: batches, samples,
        bytes (payload delivered), skipped, lacking, total_batches; stall_seconds (the time
        next() waited for the readers, the sum of the batches' ``stall_seconds``) and
        read_seconds (reader threads' busy time), floats; threads, buffers,
        buffers_allocated, max_in_use, host_bytes, device_bytes, pinned and device_copy
        (bools); for shards at URLs bytes_fetched, requests, cache_hits, cache_misses,
        evicted_bytes (0 for local shards). Counters are the C library's 64-bit ones, as
        Python ints.

        With DataLoader workers each worker runs its own stream and this object in the main
        process runs none: there stats() stays {}. The worker streams' totals reach the main
        process with the batches: ``batch.stream_stats`` (that worker's totals as of the
        batch, with its ``worker`` id; keep the latest per worker and add them up) and the
        per-batch ``stall_seconds`` / ``fetched_bytes`` / ... (sum them per step)."""
        live = self._stream
        if live is not None and live[0] == os.getpid():
            return _stream_stats(_lib.lib(), live[1])
        return dict(self._last_stats)

    # -- checkpoints ----------------------------------------------------------

    def state_dict(self):
        """Where the current pass stands (inside a worker: that worker's slice)."""
        if self._live is not None:
            return dict(self._live[2])
        if self._loaded is not None:
            return dict(self._loaded)
        return {}

    def load_state_dict(self, state):
        """Continues from ``state`` (a ``batch.resume_state`` or ``state_dict()``) on the next
        pass; an empty state or None starts from the beginning. ValueError for a state of
        another version, with a missing or non-integer field, or of another manifest (checked
        here when the state's epoch is the open manifest's, else when the pass starts); the
        C library refuses (adaptiveload.Error) a position or (step, micro) that does not fit."""
        if not state:
            self._loaded = None
            return
        ranges = dict(_STATE_RANGES)
        if isinstance(state, dict) and "worker" in state:  # check_state refuses a non-dict
            ranges["worker"] = _state.U32_MAX
        st = _state.check_state("StreamDataset", state, ranges)
        self._loaded = st
        if self.planner is None or self._schedule().epoch == st["epoch"]:
            self._check_manifest(st)

    def _check_manifest(self, st):
        sched = self._schedule()
        if st["epoch"] == sched.epoch and st["manifest_fingerprint"] != sched.manifest_fingerprint:
            raise _state.manifest_mismatch("StreamDataset", st["manifest_fingerprint"], self._source(),
                                           sched.manifest_fingerprint)

    # -- iteration ------------------------------------------------------------

    def _options(self, worker, workers):
        o = S.StreamOptions()
        o.threads = int(self.threads) if self.threads else (2 if workers > 1 else 0)
        o.prefetch = int(self.prefetch or 0)
        o.ext = _lib.encode_text(self.ext, "ext") if self.ext else None  # None: the C library's default
        if self.members:
            names = (ctypes.c_char_p * len(self.members))(*[_lib.encode_text(m, "members") for m in self.members])
            o.members = ctypes.cast(names, ctypes.POINTER(ctypes.c_char_p))
            o.n_members = len(self.members)
            o._keep_names = names  # alive as long as the options
        o.max_member_bytes = self.max_member_bytes
        o.max_sample_bytes = self.max_sample_bytes
        o.max_skip_fraction = self.max_skip_fraction
        o.cache_dir = _lib.encode_path(self.cache_dir, "cache_dir") if self.cache_dir else None
        o.cache_bytes = self.cache_bytes
        o.fetch_parallel = self.fetch_parallel
        o.remote_timeout_s = self.remote_timeout
        o.s3_endpoint, o.s3_region, o.s3_addressing = self.storage[:3]
        o.on_error = getattr(C, _ON_ERROR[self.on_error])
        o.sp_shard = 1 if self.sp_shard else 0
        o.world = int(self.world_size or 0)
        o.first = worker
        o.stride = workers
        if get_worker_info() is not None:
            # A DataLoader worker is a forked process: CUDA, initialised by the parent, cannot
            # be used in it (cudaErrorInitializationError), and its batches reach the main
            # process through shared memory anyway, so its C buffers are plain host memory.
            o.pinned = -1
        resume = None
        st = self._loaded
        if st:
            self._check_manifest(st)
            # The C library checks rank, world, epoch, seed, index and position.
            resume = _state_struct(st)
            if st["stride"] == 1:
                pass  # rank-level state: C re-slices the rest among `workers`
            elif st["stride"] == workers and st.get("worker") == worker:
                o.first, o.stride = 0, 0  # this worker's own state: continue it exactly
            else:
                raise ValueError("StreamDataset state belongs to worker %r of %d; this is worker %d of %d"
                                 % (st.get("worker"), st["stride"], worker, workers))
        if self.device is not None:
            o.device_copy = 1  # without a usable device the C library says so (adaptiveload.Error)
            if self.device.index is not None:
                o.cuda_device = self.device.index
            else:
                o.cuda_device = torch.cuda.current_device() if torch.cuda.is_available() else 0
        return o, resume

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.device is not None and info is not None:
            raise RuntimeError("StreamDataset(device=...) runs in the main process only; in DataLoader workers "
                               "leave device=None and use pin_memory=True and batch.to(device)")
        names = None  # a mixture's source names
        if self._chunked:
            run = self._run()
            names = getattr(run, "sources", None)
            borrowed = getattr(run, "index_handles", None)
            if names is not None and not self.root and borrowed and all(borrowed):
                handles = list(borrowed)  # the run's own indexes: not loaded twice
            else:
                indexes = self._own("index", lambda: [Index(p, root=self.root) for p in self.index_paths])
                handles = [x.handle for x in indexes]
                idx = indexes[0]
        else:
            indexes, man = self._open_inputs()
            idx = indexes[0]
            sources = self._own("sources", lambda: [x["name"] for x in man.sources])
            names = sources or None
        opts, resume = self._options(worker, workers)
        if resume is not None:
            # The C state must match this pass; rank-level validation is the C library's.
            opts.resume = ctypes.pointer(resume)
        lib = _lib.lib()
        if self.device is not None and torch.cuda.is_available():
            torch.cuda.init()
        h = ctypes.c_void_p()
        rank = -1 if self.rank is None else int(self.rank)
        if self._chunked and names is not None:
            opts.plan_ahead = int(self.plan_ahead)
            arr = (ctypes.c_void_p * len(handles))(*handles)
            _lib.check(lib.al_stream_open_run_mixture(ctypes.byref(h), arr, len(handles), run.handle, rank,
                                                      run.world, run.start_step, ctypes.byref(opts)),
                       "opening the stream of %s" % self._source())
        elif self._chunked:
            opts.plan_ahead = int(self.plan_ahead)
            _lib.check(lib.al_stream_open_run(ctypes.byref(h), idx.handle, run.handle, rank, run.world,
                                              run.start_step, ctypes.byref(opts)),
                       "opening the stream of %s" % self._source())
        elif names is not None or len(indexes) > 1:
            handles = (ctypes.c_void_p * len(indexes))(*[x.handle for x in indexes])
            _lib.check(lib.al_stream_open_mixture(ctypes.byref(h), handles, len(indexes), man.handle, rank,
                                                  ctypes.byref(opts)),
                       "opening the stream of mixture manifest %s over %s" % (self.manifest_path,
                                                                              ", ".join(self.index_paths)))
        else:
            _lib.check(lib.al_stream_open(ctypes.byref(h), idx.handle, man.handle, rank, ctypes.byref(opts)),
                       "opening the stream of %s" % self.manifest_path)
        in_worker = info is not None
        pin = self.pin_memory
        if pin is None:
            pin = (not in_worker) and (not self.zero_copy) and torch.cuda.is_available()
        held = []
        self._stream = (os.getpid(), h)
        try:
            st = S.StreamState()
            lib.al_stream_get_state(h, ctypes.byref(st))
            self._live = (os.getpid(), worker, dict(_state_dict(st), worker=worker))
            while True:
                bp = ctypes.POINTER(S.StreamBatch)()  # a fresh pointer: held ones must not change
                status = lib.al_stream_next(h, ctypes.byref(bp))
                if status == _lib.status("AL_EOF"):
                    break
                _lib.check(status, "stream %s rank %s" % (self._source(), "env" if rank < 0 else rank))
                b = bp.contents
                batch = self._convert(lib, b, in_worker, pin)
                batch.sources = None if names is None else [names[b.sources[i]] for i in range(b.n)]
                batch.stream_stats = dict(_stream_stats(lib, h), worker=worker)
                lib.al_stream_get_state(h, ctypes.byref(st))
                worker_state = _state_dict(st)
                worker_state["worker"] = worker
                _lib.check(lib.al_stream_state_at(h, b.position + 1, ctypes.byref(st)), "state")
                batch.resume_state = _state_dict(st)
                if self.zero_copy:
                    held.append(bp)
                    while len(held) > self.keep:
                        self._release(lib, h, held.pop(0))
                else:
                    self._release(lib, h, bp)
                self._live = (os.getpid(), worker, worker_state)
                yield batch
        finally:
            for p in held:
                self._release(lib, h, p)
            self._last_stats = _stream_stats(lib, h)
            self._stream = None
            lib.al_stream_close(h)
            self._live = None
            self._loaded = None  # a state applies to one pass

    def _release(self, lib, h, bp):
        if self.device is not None:
            stream = torch.cuda.current_stream(self.device).cuda_stream
            _lib.check(lib.al_stream_release_after(h, bp, ctypes.c_void_p(stream)), "release")
        else:
            _lib.check(lib.al_stream_release(h, bp), "release")

    def _convert(self, lib, b, in_worker, pin):
        n = b.n
        padded_bytes = b.cu_seqlens_offset if n else 0
        cu_bytes = (n + 1) * 4
        out = PackedBatch()
        if self.device is not None:
            dev = torch.device("cuda", self.device.index if self.device.index is not None
                               else torch.cuda.current_device())
            stream = torch.cuda.current_stream(dev)
            _lib.check(lib.al_stream_batch_wait(ctypes.byref(b), ctypes.c_void_p(stream.cuda_stream)), "batch wait")
            whole = torch.as_tensor(_CudaArray(b.device_data, b.copy_bytes), device=dev)
            data = whole[:padded_bytes]
            cu = whole[b.cu_seqlens_offset:b.cu_seqlens_offset + cu_bytes].view(torch.int32)
            if not self.zero_copy:
                data, cu = data.clone(), cu.clone()  # on the current stream, after the wait
        else:
            whole = _host_view(b.data, b.copy_bytes)
            data = whole[:padded_bytes]
            cu = whole[b.cu_seqlens_offset:b.cu_seqlens_offset + cu_bytes].view(torch.int32)
            if not self.zero_copy:
                dst = _shared_bytes(padded_bytes) if in_worker else torch.empty(padded_bytes, dtype=torch.uint8,
                                                                                pin_memory=bool(pin))
                dst.copy_(data)
                data, cu = dst, cu.clone()
        out.data = data
        out.cu_seqlens = cu
        out.offsets = torch.tensor([b.offsets[i] for i in range(n + 1)], dtype=torch.int64)
        out.sizes = torch.tensor([b.sizes[i] for i in range(n)], dtype=torch.int64)
        out.keys = [b.keys[i].decode("utf-8", "replace") for i in range(n)]
        out.samples = torch.tensor([b.samples[i] for i in range(n)], dtype=torch.int64)
        out.shapes = torch.tensor([b.shapes[i] for i in range(3 * n)], dtype=torch.int32).view(n, 3)
        out.padded = torch.tensor([bool(b.padded[i]) for i in range(n)], dtype=torch.bool)
        out.position = int(b.position)
        out.step = int(b.step)
        out.micro = int(b.micro)
        out.n_micro = int(b.n_micro)
        out.last_in_step = bool(b.last_in_step)
        out.bucket = int(b.bucket)
        out.step_samples = int(b.step_samples)
        out.step_tokens = int(b.step_tokens)
        out.tokens = int(b.tokens)
        out.planned_tokens = int(b.planned_tokens)
        out.skipped_real_samples = int(b.skipped_real_samples)
        out.skipped_real_tokens = int(b.skipped_real_tokens)
        out.skipped = [(b.skipped_keys[i].decode("utf-8", "replace"), b.skipped_reasons[i].decode("utf-8", "replace"))
                       for i in range(b.n_skipped)]
        out.members = collections.OrderedDict()
        for j in range(b.n_members):
            m = b.members[j]
            shapes = tuple(tuple(m.shapes[C.AL_STREAM_MAX_DIMS * i + d] for d in range(m.ndim[i])) for i in range(n))
            name = m.name.decode()
            out.members[name] = MemberInfo(name, m.dtype.decode(), int(m.itemsize), bool(m.typed), bool(m.cropped),
                                           shapes, tuple(int(m.offsets[i]) for i in range(n)),
                                           tuple(int(m.sizes[i]) for i in range(n)))
        out.grid = tuple(int(g) for g in b.grid)
        out.sp_degree = int(b.sp_degree)
        out.sp_rank = int(b.sp_rank)
        out.sp_ranks = tuple(range(int(b.sp_group_first), int(b.sp_group_first) + out.sp_degree))
        out.sp_sharded = bool(b.sp_sharded)
        out.sp_token_range = (int(b.shard_token_begin), int(b.shard_token_end))
        out.token_first = torch.tensor([b.token_first[i] for i in range(n)], dtype=torch.int64)
        out.sample_tokens = torch.tensor([b.sample_tokens[i] for i in range(n)], dtype=torch.int64)
        out.patch = tuple(int(p) for p in b.patch) if b.sp_sharded else None
        out.sp_group_tokens = int(b.group_tokens)
        out.stall_seconds = float(b.stall_seconds)
        out.fetched_bytes = int(b.fetched_bytes)
        out.requests = int(b.requests)
        out.cache_hits = int(b.cache_hits)
        out.cache_misses = int(b.cache_misses)
        return out
