"""Planning from Python: the C planner through ctypes, no CLI call and no compiled extension.

::

    m = adaptiveload.plan("corpus.alidx", world=8, epoch=3, seed=0)      # -> Manifest
    m.info["micro_per_step"], m.info["step_tokens_mean"], m.path

    planner = adaptiveload.Planner("corpus.alidx", world=8, seed=0, micro_per_step=2)
    sampler = adaptiveload.BatchSampler(planner)          # epoch 0, planned in-process
    for epoch in range(epochs):
        sampler.set_epoch(epoch)                           # plans epoch `epoch` here
        ...

The manifest written is byte-identical to ``adaptiveload plan --index INDEX --world W
--epoch E --seed S [options]`` (both call ``al_plan_build_index`` and save with the index's
keys): the plan is a pure function of (index, cost model, options, seed, epoch, world), so
every rank can plan for itself with no communication. Options (all optional; the CLI flag
of the same name documents each):

    policy ("adaptive" | "equal-token" | "adaptive-unbalanced"), micro_per_step, step_tokens, mem_tokens, comp_ms,
    window, last_step ("pad" | "drop"), start_step, buckets (bucket table file),
    geometry ((vae_stride_t, vae_stride_s, patch_t, patch_h, patch_w)),
    sp_degrees (sequence-parallel degrees, e.g. [1, 2, 4, 8]: powers of two dividing world),
    sync ("step" | "micro" | "auto"),
    planner ("epoch" | "chunked": ``plan --planner chunked``, planner/al_run.h; with it
    ``plan(..., steps=(A, B))`` writes only steps [A, B) and ``reference_world`` opens the run at
    another world than the one its steps are laid out at)

Elastic resume (another world size mid-epoch)::

    planner = adaptiveload.Planner.resume(old_planner, at_step=120, world=8, epoch=3)
    # or, from a checkpoint: adaptiveload.checkpoint.resume(load_checkpoint(path), world=8)

re-plans what epoch 3 of the old planner schedules at steps >= 120 for 8 ranks, keeping the
global batch (``plan --resume-from``: K' = ceil(K W / W'), the old steps from 120 on in
number, tokens per step within 1%, else :class:`adaptiveload.Error`); ``step_tokens=`` plans a
new T instead, ``micro_per_step=`` chooses K'. The resumed Planner's ``path(3)`` is that
re-planned manifest (steps numbered from 120), rebuilt from the old plan on demand; its other
epochs are planned fresh for the new world at the same T (``step_tokens``) and K'.

``cost`` is a cost-model file (``adaptiveload fit``); None uses the embedded H200 model.
Manifests go to ``out`` (plan) or ``out_dir`` (Planner); by default to a temporary folder
of this process, removed at exit.
"""

import atexit
import ctypes
import hashlib
import itertools
import json
import os
import shutil
import tempfile

from . import _lib
from . import _structs as S
from ._args import U32_MAX, finite, path_arg, sync_model, whole, whole_or_default
from ._rules import sp_degrees
from ._handles import Index, Manifest

_POLICY = {"adaptive": 0, "equal-token": 1, "adaptive-unbalanced": 2}
_LAST_STEP = {"pad": 0, "drop": 1}
_OPTIONS = ("policy", "micro_per_step", "step_tokens", "mem_tokens", "comp_ms", "window", "last_step",
            "start_step", "buckets", "geometry", "require_members", "sp_degrees", "sync", "planner",
            "reference_world")
_PLANNERS = ("epoch", "chunked")


def _chunked(options):
    """Whether options ask for a chunked run (planner="chunked"), checked."""
    planner = options.get("planner", "epoch")
    if not isinstance(planner, str) or planner not in _PLANNERS:
        raise ValueError("planner must be 'epoch' or 'chunked', not %r" % (planner,))
    if options.get("reference_world") is not None and planner != "chunked":
        raise ValueError("reference_world applies to planner='chunked' only")
    return planner == "chunked"


def _options(world, epoch, seed, options):
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError("unknown planning option(s) %s; known: %s" % (", ".join(unknown), ", ".join(_OPTIONS)))
    o = S.PlanOptions()
    # The CLI's ranges (cli/cmd_plan.c); 0 keeps the library's default where the CLI has one.
    # A chunked run is opened at its reference world; `world` is where its steps are laid out.
    o.world = whole("world", world, 1, 1 << 20)
    if _chunked(options) and options.get("reference_world") is not None:
        o.world = whole("reference_world", options["reference_world"], 1, 1 << 20)
    o.epoch = whole("epoch", epoch, 0, U32_MAX)
    o.seed = whole("seed", seed)
    policy = options.get("policy", "adaptive")
    if not isinstance(policy, str) or policy not in _POLICY:
        raise ValueError("policy must be one of %s, not %r" % (", ".join(sorted(_POLICY)), policy))
    o.policy = _POLICY[policy]
    last = options.get("last_step", "pad")
    if not isinstance(last, str) or last not in _LAST_STEP:
        raise ValueError("last_step must be 'pad' or 'drop', not %r" % (last,))
    o.last_step = _LAST_STEP[last]
    o.micro_per_step = whole_or_default("micro_per_step", options.get("micro_per_step"), 0, 1 << 20)
    o.step_tokens = whole_or_default("step_tokens", options.get("step_tokens"))
    o.mem_tokens = whole_or_default("mem_tokens", options.get("mem_tokens"))
    o.comp_budget_ms = finite("comp_ms", 0 if options.get("comp_ms") is None else options["comp_ms"])
    o.window = whole_or_default("window", options.get("window"), 0, 1000000)
    o.start_step = whole_or_default("start_step", options.get("start_step"), 0, U32_MAX)
    req = options.get("require_members")  # al_plan_options.require_members (plan --require-members)
    if req is not None and not hasattr(req, "__len__"):
        raise TypeError("require_members must be a list of member names, not %r" % (req,))
    if options.get("buckets") is not None:
        path_arg("buckets", options["buckets"])
    if req:
        names = [_lib.encode_text(str(m), "require_members[%d]" % k) for k, m in enumerate(req)]
        o._require = (ctypes.c_char_p * len(req))(*names)  # alive with o
        o.require_members, o.n_require_members = ctypes.cast(o._require, ctypes.POINTER(ctypes.c_char_p)), len(req)
    sp = options.get("sp_degrees")  # al_plan_options.sp_degrees (plan --sp-degrees)
    if sp is not None:
        degrees = sp_degrees("sp_degrees", sp, o.world)
        o._sp = (ctypes.c_uint32 * len(degrees))(*degrees)  # alive with o
        o.sp_degrees, o.n_sp_degrees = ctypes.cast(o._sp, ctypes.POINTER(ctypes.c_uint32)), len(degrees)
    o.sync = sync_model(options.get("sync", "auto"))
    geom = options.get("geometry")
    if geom is not None:
        if isinstance(geom, (str, bytes)) or not hasattr(geom, "__len__") or len(geom) != 5:
            raise ValueError("geometry is (vae_stride_t, vae_stride_s, patch_t, patch_h, patch_w), not %r" % (geom,))
        for k, v in enumerate(geom):
            o.geom[k] = whole("geometry[%d]" % k, v, 1, U32_MAX)
    return o


_tmp_dir = None
_serial = itertools.count()


def _default_dir():
    global _tmp_dir
    if _tmp_dir is None:
        _tmp_dir = tempfile.mkdtemp(prefix="adaptiveload-plans-")
        atexit.register(shutil.rmtree, _tmp_dir, True)
    return _tmp_dir


def _index_handle(index):
    """(Index, path): an Index object is used as it is; a path is loaded."""
    if isinstance(index, Index):
        return index, index.path
    idx = Index(path_arg("index", index))
    return idx, idx.path


def _steps_arg(steps):
    """(first, end) of ``steps=(A, B)``: 0 <= A < B < 2^32 (B within the run is the library's
    check); B None: to the run's end (0); steps None: every step, (0, 0)."""
    if steps is None:
        return 0, 0
    if isinstance(steps, (str, bytes)) or not hasattr(steps, "__len__") or len(steps) != 2:
        raise ValueError("steps is (first, end), a range of steps [first, end), not %r" % (steps,))
    a = whole("steps[0]", steps[0], 0, U32_MAX)
    if steps[1] is None:
        return a, 0
    b = whole("steps[1]", steps[1], 1, U32_MAX)
    if a >= b:
        raise ValueError("steps (%d, %d): first must be below end" % (a, b))
    return a, b


def _rank_arg(rank, world):
    """PlanConfig.only_rank of ``rank=R``: R + 1 for 0 <= R < world (the CLI's --rank); None: 0,
    every rank's work."""
    if rank is None:
        return 0
    return whole("rank", rank, 0, whole("world", world, 1, 1 << 20) - 1) + 1


def _write(index, out, world, epoch, seed, cost, options, steps=None, rank=None):
    out = path_arg("out", out)
    cost = None if cost is None else path_arg("cost", cost)
    idx, _ = _index_handle(index)
    o = _options(world, epoch, seed, options)
    buckets = options.get("buckets")
    cost_arg = None if cost is None else _lib.encode_path(cost, "cost")
    buckets_arg = None if buckets is None else _lib.encode_path(buckets, "buckets")
    what = "planning %s for world %d, epoch %d" % (idx.path, int(world), int(epoch))
    if _chunked(options):
        first, end = _steps_arg(steps)
        only = _rank_arg(rank, world)
        _lib.check(_lib.lib().al_run_index_write_rank(idx.handle, cost_arg, buckets_arg,
                                                      ctypes.byref(o), whole("world", world, 1, 1 << 20),
                                                      first, end, only, _lib.encode_path(out, "out")),
                   what)
    elif steps is not None:
        raise ValueError("steps= plans a slice of a chunked run: pass planner='chunked'")
    elif rank is not None:
        raise ValueError("rank= writes one rank's work of a chunked run: pass planner='chunked'")
    else:
        _lib.check(_lib.lib().al_plan_index_write(idx.handle, cost_arg, buckets_arg, ctypes.byref(o),
                                                  _lib.encode_path(out, "out")), what)
    return os.fspath(out)


def plan(index, world, epoch=0, seed=0, cost=None, out=None, steps=None, rank=None, **options):
    """Plans one epoch of ``index`` (a path or a loaded index) for ``world`` ranks and returns
    the loaded :class:`Manifest`; ``out`` is the manifest path (default: a temporary file).
    ``planner="chunked"`` plans a chunked run (``plan --planner chunked``; planner/al_run.h) and
    ``steps=(A, B)`` only its steps [A, B), step for step what the whole run holds there
    (``reference_world`` opens the run at another world than ``world``, where the steps are
    laid out: a resize); ``rank=R`` writes only rank R's work of those steps, each step with
    the totals of all ranks, and the keys of R's samples alone (``plan --rank R``: what rank R
    streams; streaming it as another rank is refused). Raises :class:`adaptiveload.Error` with the C library's message on a
    failure (bad option values, an index with no plannable sample, ...)."""
    if out is None:
        out = os.path.join(_default_dir(), "plan-w%d-e%d-s%d-%d.alm" % (int(world), int(epoch), int(seed),
                                                                          next(_serial)))
    return Manifest(_write(index, out, world, epoch, seed, cost, options, steps, rank))


class _Mixture:
    """A parsed MIX.json (manifest/al_mixture.h) held by the C library: from a path (index paths
    relative to its folder) or a dict of the same structure (relative to the working folder)."""

    def __init__(self, mixture):
        self.handle = None
        h = ctypes.c_void_p()
        if isinstance(mixture, dict):
            try:
                text = json.dumps(mixture, allow_nan=False)
            except (TypeError, ValueError) as e:
                raise ValueError("mixture: not a JSON structure: %s" % e) from None
            _lib.check(_lib.lib().al_mixture_parse(ctypes.byref(h), _lib.encode_text(text, "mixture"),
                                                   _lib.encode_path(os.getcwd(), "cwd"), b"mixture"),
                       "mixture")
            self.path = None
        else:
            self.path = path_arg("mixture", mixture)
            _lib.check(_lib.lib().al_mixture_load(ctypes.byref(h), _lib.encode_path(self.path, "mixture")),
                       "mixture %s" % self.path)
        self.handle = h

    def sources(self):
        """[(name, index path)] in the mixture's order (paths as the C library resolved them)."""
        lib = _lib.lib()
        return [(lib.al_mixture_source_name(self.handle, i).decode(),
                 os.fsdecode(lib.al_mixture_source_index(self.handle, i)))
                for i in range(lib.al_mixture_source_count(self.handle))]

    def close(self):
        if self.handle:
            _lib.lib().al_mixture_free(self.handle)
            self.handle = None

    def __del__(self):
        self.close()


def plan_mixture(mixture, world, epoch=0, seed=0, cost=None, out=None, steps=None, rank=None, **options):
    """Plans a mixture of several indexes as one chunked run (``plan --mixture MIX.json``;
    planner/al_run.h, manifest/al_mixture.h) and returns the loaded :class:`Manifest`: every
    step apportioned to the sources by weight in tokens, samples or predicted compute (``by``),
    each source drawn once per pass, repeating or leaving when its pass ends. ``mixture`` is the
    path of MIX.json or a dict of the same structure (index paths relative to the working folder)::

        {"by": "tokens", "steps": 1000,
         "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
                     {"name": "hq", "index": "hq.alidx", "weight": 0.3, "on_exhaust": "repeat"},
                     {"name": "img", "index": "img.alidx", "weight": 0.2}]}

    ``steps``, ``rank``, ``cost`` and the planning options are :func:`plan`'s (the run is always
    chunked). The manifest's :attr:`Manifest.sources` lists each source's weight, passes and draws.
    Raises :class:`adaptiveload.Error` naming the field or source of a bad mixture."""
    if out is None:
        out = os.path.join(_default_dir(), "mix-w%d-e%d-s%d-%d.alm" % (int(world), int(epoch), int(seed),
                                                                         next(_serial)))
    return Manifest(_write_mixture(mixture, out, world, epoch, seed, cost, options, steps, rank))


def _mixture_options(options):
    """The planning options of a mixture: always a chunked run."""
    if options.get("planner", "chunked") != "chunked":
        raise ValueError("a mixture is planned as a chunked run: planner must be 'chunked'")
    return dict(options, planner="chunked")


def _mixture_chain(mixture, continues):
    """The parsed mixture and, when it changes the schedule of another (``continues``: {"mixture",
    "at_step", "continues"}), the mixtures it continues, linked (al_mixture_continue); the list
    holds every one, to be closed after use."""
    chain = [_Mixture(mixture)]
    try:
        while continues is not None:
            old = _Mixture(continues["mixture"])
            chain.append(old)
            _lib.check(_lib.lib().al_mixture_continue(chain[-2].handle, old.handle,
                                                      whole("at_step", continues["at_step"], 0, U32_MAX)),
                       "mixture")
            continues = continues.get("continues")
    except Exception:
        for mx in chain:
            mx.close()
        raise
    return chain


def _write_mixture(mixture, out, world, epoch, seed, cost, options, steps=None, rank=None, continues=None):
    out = path_arg("out", out)
    cost = None if cost is None else path_arg("cost", cost)
    options = _mixture_options(options)
    o = _options(world, epoch, seed, options)
    buckets = options.get("buckets")
    first, end = _steps_arg(steps)
    only = _rank_arg(rank, world)
    chain = _mixture_chain(mixture, continues)
    mx = chain[0]
    try:
        _lib.check(_lib.lib().al_mixture_write(
            mx.handle, None if cost is None else _lib.encode_path(cost, "cost"),
            None if buckets is None else _lib.encode_path(buckets, "buckets"), ctypes.byref(o),
            whole("world", world, 1, 1 << 20), first, end, only, _lib.encode_path(out, "out")),
            "planning the mixture %s for world %d" % (mx.path or "(dict)", int(world)))
    finally:
        for m in chain:
            m.close()
    return os.fspath(out)


def _mixture_arg(mixture):
    """A Planner's ``mixture``, made independent of the working folder: a path made absolute, or
    a dict (JSON-ready, checked by the C parser now) whose relative index paths are made absolute
    against the working folder, as al_mixture_parse would read them now."""
    if isinstance(mixture, dict):
        try:
            m = json.loads(json.dumps(mixture, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise ValueError("mixture: not a JSON structure: %s" % e) from None
        for src in m.get("sources", []) if isinstance(m.get("sources"), list) else []:
            if isinstance(src, dict) and isinstance(src.get("index"), str) and "://" not in src["index"]:
                src["index"] = os.path.abspath(src["index"])
        _Mixture(m).close()  # refuses a bad structure here, naming the field
        return m
    path = os.path.abspath(path_arg("mixture", mixture))
    _Mixture(path).close()
    return path


def _replan_write(old, at_step, world, micro_per_step, step_tokens, out):
    """Re-plans manifest file ``old`` from ``at_step`` for ``world`` ranks into ``out``."""
    o = S.ReplanOptions()
    o.world = whole("world", world, 1, 1 << 20)
    o.micro_per_step = whole_or_default("micro_per_step", micro_per_step, 0, 1 << 20)
    o.step_tokens = whole_or_default("step_tokens", step_tokens)
    at = whole("at_step", at_step, 0, U32_MAX)
    m = Manifest(old)
    try:
        _lib.check(_lib.lib().al_plan_replan_write(m.handle, at, ctypes.byref(o), _lib.encode_path(out, "out")),
                   "re-planning %s from step %d for world %d" % (m.path, at, o.world))
    finally:
        m.close()
    return os.fspath(out)


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_identity(path):
    """What names a manifest: its world, seed, epoch, first step, steps, K, T, index fingerprint
    and the SHA-256 of its bytes (a plan is a pure function of its inputs, so the same inputs
    give the same digest). Checkpoints record it; :meth:`Planner.check_identity` compares."""
    info = Manifest(path).info
    ident = {k: info[k] for k in ("world", "seed", "epoch", "first_step", "steps", "micro_per_step",
                                  "step_tokens", "index_fingerprint")}
    ident["sha256"] = _sha256(path)
    return ident


def _json_options(options):
    """Planner options as JSON-ready values (geometry as a list)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()}


class Run:
    """A chunked run (planner/al_run.h) of one epoch of an index, open in this process (a C
    handle: it does not pickle; each process opens its own). ``info``: al_run_info as a dict
    (steps, window, world_ref, micro_ref, step_tokens, fingerprint, ...); ``world``: the ranks
    its steps are laid out at; ``start_step``: the step a stream over it starts at (a resumed
    Planner's step, else 0); ``micro``: K at ``world``. :class:`StreamDataset` streams it
    window by window (al_stream_open_run) instead of reading a manifest of the epoch."""

    def __init__(self, index, world, epoch, seed, cost, options, start_step=0):
        cost = None if cost is None else path_arg("cost", cost)
        idx, path = _index_handle(index)
        o = _options(world, epoch, seed, options)
        buckets = options.get("buckets")
        h = ctypes.c_void_p()
        _lib.check(_lib.lib().al_run_index_open(
            ctypes.byref(h), idx.handle, None if cost is None else _lib.encode_path(cost, "cost"),
            None if buckets is None else _lib.encode_path(buckets, "buckets"), ctypes.byref(o)),
            "opening the chunked run of %s for world %d, epoch %d" % (path, int(world), int(epoch)))
        self.handle = h
        i = S.RunInfo()
        _lib.check(_lib.lib().al_run_get_info(h, ctypes.byref(i)), "chunked run of %s" % path)
        self.info = {name: getattr(i, name) for name, _ in S.RunInfo._fields_ if name != "struct_size"}
        self.world = int(world)
        self.epoch = int(epoch)
        self.start_step = whole("start_step", start_step, 0, self.info["steps"])
        self.micro = -(-self.info["micro_ref"] * self.info["world_ref"] // self.world)

    def close(self):
        if getattr(self, "handle", None):
            _lib.lib().al_run_free(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class MixtureRun:
    """A mixture's chunked run (planner/al_run.h, al_mixture_open_run), open in this process: as
    :class:`Run`, with ``sources`` (the run's source names, in order) and ``indexes`` (their index
    paths); the C run belongs to the parsed mixture, held here."""

    def __init__(self, mixture, continues, world, epoch, seed, cost, options, start_step=0):
        cost = None if cost is None else path_arg("cost", cost)
        options = _mixture_options(options)
        o = _options(world, epoch, seed, options)
        buckets = options.get("buckets")
        self._chain = _mixture_chain(mixture, continues)
        h = ctypes.c_void_p()
        try:
            _lib.check(_lib.lib().al_mixture_open_run_paths(
                self._chain[0].handle, None if cost is None else _lib.encode_path(cost, "cost"),
                None if buckets is None else _lib.encode_path(buckets, "buckets"), ctypes.byref(o),
                ctypes.byref(h)), "opening the mixture's run for world %d, epoch %d" % (int(world), int(epoch)))
            i = S.RunInfo()
            _lib.check(_lib.lib().al_run_get_info(h, ctypes.byref(i)), "the mixture's run")
        except Exception:
            self.close()
            raise
        self.handle = h
        self.info = {name: getattr(i, name) for name, _ in S.RunInfo._fields_ if name != "struct_size"}
        self.sources = []
        for k in range(self.info["sources"]):
            si = S.RunSourceInfo()
            _lib.check(_lib.lib().al_run_source_get(h, k, ctypes.byref(si)), "the mixture's source %d" % k)
            self.sources.append(si.name.decode())
        self.indexes = [path for _, path in self._chain[0].sources()]
        # The sources' indexes as the run loaded them (None for a source planned from its map):
        # a stream of the run reads these instead of loading each index again.
        self.index_handles = [_lib.lib().al_mixture_index(self._chain[0].handle, k)
                              for k in range(len(self.indexes))]
        self.world = int(world)
        self.epoch = int(epoch)
        self.start_step = whole("start_step", start_step, 0, self.info["steps"])
        self.micro = -(-self.info["micro_ref"] * self.info["world_ref"] // self.world)

    def close(self):
        self.handle = None  # the mixture's
        self.index_handles = []
        for mx in getattr(self, "_chain", []):
            mx.close()
        self._chain = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class Planner:
    """Plans epochs of one index in-process for :class:`BatchSampler` and :class:`StreamDataset`
    (pass it where a manifest path goes; their ``set_epoch(e)`` then plans epoch e).

    Args:
        index: index path (kept as a path: a Planner pickles into DataLoader workers).
        mixture: instead of ``index``, a mixture of several indexes (``plan --mixture``): the
            path of MIX.json or a dict of the same structure (:func:`plan_mixture`; index paths of
            a dict relative to the working folder when the Planner is made). Its epochs are
            chunked runs of the mixture; :class:`StreamDataset` streams each sample from its
            source's index and names the source in ``batch.sources``.
        world: ranks; default ``WORLD_SIZE`` from the environment, else 1.
        seed, cost, **options: as :func:`plan`.
        out_dir: where manifests go (default: a temporary folder of this process).

    ``path(epoch)`` plans epoch ``epoch`` once (into ``out_dir``) and returns the manifest
    path; ``plan(epoch)`` returns it loaded. :meth:`resume` makes the Planner of another world
    size mid-epoch; :meth:`state_dict` / :meth:`from_state` carry a Planner (and the re-plans
    it was resumed through) in a checkpoint (:mod:`adaptiveload.checkpoint`).
    """

    def __init__(self, index=None, world=None, seed=0, cost=None, out_dir=None, mixture=None, **options):
        if index is not None and mixture is not None:
            raise ValueError("Planner takes an index or a mixture, not both")
        self.index = None if index is None else path_arg("index", index.path if isinstance(index, Index) else index)
        self.mixture = None if mixture is None else _mixture_arg(mixture)
        # A changed schedule: {"mixture", "at_step", "continues"}, the mixture this one changes
        # from a step on (Planner.resume(..., mixture=NEW)); None: a schedule of its own.
        self.continues = None
        if self.mixture is not None:
            options = _mixture_options(options)
        if cost is not None:
            path_arg("cost", cost)
        if out_dir is not None:
            path_arg("out_dir", out_dir)
        if world is None:
            world = int(os.environ.get("WORLD_SIZE", "1"))
        self.world = whole("world", world, 1, 1 << 20)
        self.seed = whole("seed", seed)
        self.cost = cost
        self.out_dir = out_dir
        _options(self.world, 0, self.seed, options)  # fails early on bad options
        self.options = dict(options)
        self._paths = {}
        self._tag = next(_serial)  # manifests of distinct Planners of a process never share a file
        # The epoch planned elsewhere, then re-planned: {"epoch", "base" (a manifest path, or a
        # Planner state planning it), "replans": [[at_step, world, micro_per_step, step_tokens]]}.
        self._origin = None

    def _dir(self):
        d = self.out_dir or _default_dir()
        os.makedirs(d, exist_ok=True)
        return d

    def _write(self, out, epoch, steps=None):
        """Plans epoch ``epoch`` (steps [A, B) of it when given) of the index or the mixture."""
        if self.mixture is not None:
            return _write_mixture(self.mixture, out, self.world, epoch, self.seed, self.cost, self.options, steps,
                                  continues=self.continues)
        return _write(self.index, out, self.world, epoch, self.seed, self.cost, self.options, steps)

    def source_indexes(self):
        """The index paths a stream of this Planner's plans reads: the mixture's sources' in its
        order, else [index]."""
        if self.mixture is None:
            return [self.index]
        mx = _Mixture(self.mixture)
        try:
            return [path for _, path in mx.sources()]
        finally:
            mx.close()

    def _origin_path(self):
        o = self._origin
        if o.get("start_step") is not None:  # a chunked run resumed at another world: a slice
            out = os.path.join(self._dir(), "run-e%d-s%d-w%d-pid%d-%d.alm" % (
                o["epoch"], o["start_step"], self.world, os.getpid(), next(_serial)))
            return self._write(out, o["epoch"], (o["start_step"], o["end_step"] or None))
        base = o["base"]
        if isinstance(base, dict):
            path = Planner.from_state(base, out_dir=self.out_dir).path(o["epoch"])
        else:
            path = base
        for n, (at, world, k, t) in enumerate(o["replans"]):
            out = os.path.join(self._dir(), "replan-e%d-s%d-w%d-%d-pid%d-%d.alm" % (
                o["epoch"], at, world, n, os.getpid(), next(_serial)))
            path = _replan_write(path, at, world, k, t, out)
        return path

    @property
    def first_epoch(self):
        """The epoch a StreamDataset or BatchSampler opens before its first ``set_epoch``: the
        epoch a resumed Planner continues, else 0 (a resumed Planner without an index can plan
        no other epoch)."""
        return self._origin["epoch"] if self._origin is not None else 0

    def path(self, epoch):
        epoch = whole("epoch", epoch, 0, U32_MAX)
        p = self._paths.get(epoch)
        if p is None or not os.path.exists(p):
            if self._origin is not None and epoch == self._origin["epoch"]:
                p = self._origin_path()
            elif self.index is None and self.mixture is None:
                raise ValueError("this Planner was resumed from manifest %s (epoch %d) without an index: pass "
                                 "index= to Planner.resume to plan epoch %d"
                                 % (self._origin["base"], self._origin["epoch"], epoch))
            else:
                p = os.path.join(self._dir(), "plan-w%d-s%d-e%d-pid%d-%d.alm" % (
                    self.world, self.seed, epoch, os.getpid(), self._tag))
                self._write(p, epoch)
            self._paths[epoch] = p
        return p

    def plan(self, epoch):
        return Manifest(self.path(epoch))

    @property
    def chunked(self):
        """Whether this Planner plans chunked runs (planner="chunked")."""
        return _chunked(self.options)

    def open_run(self, epoch):
        """The :class:`Run` of epoch ``epoch`` (a chunked Planner only), opened in this process:
        what StreamDataset streams instead of a manifest. A resumed Planner's epoch starts at
        its resume step (``run.start_step``); no manifest is written."""
        epoch = whole("epoch", epoch, 0, U32_MAX)
        if not self.chunked:
            raise ValueError("open_run needs a chunked Planner (planner='chunked')")
        start = 0
        if self._origin is not None and epoch == self._origin["epoch"]:
            start = self._origin.get("start_step") or 0
        if self.mixture is not None:
            return MixtureRun(self.mixture, self.continues, self.world, epoch, self.seed, self.cost, self.options,
                              start)
        if self.index is None:
            raise ValueError("this Planner has no index to open the run of epoch %d from" % epoch)
        return Run(self.index, self.world, epoch, self.seed, self.cost, self.options, start)

    # -- elastic resume -------------------------------------------------------

    @classmethod
    def resume(cls, source, at_step=None, world=None, epoch=None, step_tokens=None, micro_per_step=None,
               index=None, cost=None, out_dir=None, mixture=None):
        """The Planner for ``world`` ranks (default ``WORLD_SIZE``) that continues epoch
        ``epoch`` of ``source`` from step ``at_step`` (the first step not yet trained).

        ``source``: a :class:`Planner`, its :meth:`state_dict`, a checkpoint
        (:func:`adaptiveload.checkpoint.save_checkpoint`; ``at_step`` and ``epoch`` default to
        its step and epoch), or a manifest path (epoch: the manifest's; other epochs need
        ``index``). The re-plan keeps the global batch (tokens per step within 1% of the old
        plan's, K' = ceil(K W / W')) or raises :class:`adaptiveload.Error` saying why;
        ``step_tokens`` plans a new T, ``micro_per_step`` chooses K'. The re-plan runs here,
        so a refusal comes now. Later epochs are planned fresh for ``world`` at the same T
        and K'.

        ``mixture`` (a Planner of a mixture): a changed schedule (a path or dict as
        ``Planner(mixture=)`` takes) from the first window boundary of the run at or after
        ``at_step`` on: the steps before it are the run's, every source's pass goes on where the
        run left it, sources may be added after the run's (a source is kept with weight 0
        rather than removed); the options stay the run's."""
        if isinstance(source, dict) and "planner" in source:  # a checkpoint
            at_step = source["step"] if at_step is None else at_step
            epoch = source["epoch"] if epoch is None else epoch
            source = source["planner"]
        if at_step is None:
            raise TypeError("Planner.resume needs at_step (the first step not yet trained)")
        if world is None:
            world = int(os.environ.get("WORLD_SIZE", "1"))
        replan = [whole("at_step", at_step, 0, U32_MAX), whole("world", world, 1, 1 << 20),
                  whole_or_default("micro_per_step", micro_per_step, 0, 1 << 20),
                  whole_or_default("step_tokens", step_tokens)]
        if isinstance(source, (str, bytes, os.PathLike)):
            base_path = path_arg("source", source)
            info = Manifest(base_path).info
            degrees = list(info["sp_degrees"])[: info["n_sp_degrees"]]
            sp = {} if degrees == [1] and info["sync"] == "step" else {"sp_degrees": degrees, "sync": info["sync"]}
            old = cls(index, world=info["world"], seed=info["seed"], cost=cost, out_dir=out_dir,
                      policy=info["policy"], last_step=info["last_step"], mem_tokens=info["mem_tokens"],
                      window=info["window"], **sp)
            old._origin = {"epoch": info["epoch"], "base": base_path, "replans": []}
            epoch = info["epoch"] if epoch is None else epoch
        else:
            old = source if isinstance(source, Planner) else cls.from_state(source, out_dir=out_dir)
            if epoch is None:
                raise TypeError("Planner.resume needs epoch (the epoch being resumed)")
        return old._resumed(whole("epoch", epoch, 0, U32_MAX), replan, out_dir, mixture)

    def _resumed_chunked(self, epoch, replan, out_dir, mixture=None):
        """A chunked run needs no re-plan: every step holds the same samples at every world, so
        the resumed epoch is the run's slice from at_step laid out at the new world (K' =
        ceil(K W_ref / W')), and later epochs are whole runs laid out there. A mixture given
        changes the schedule from the first window boundary at or after at_step
        (al_mixture_continue): its sources lead with the old ones, every pass goes on."""
        at, world, k, t = replan
        if k or t:
            raise ValueError("a chunked run keeps its steps at every world size (K' = ceil(K W_ref / W')): "
                             "micro_per_step and step_tokens do not apply to its resume")
        options = dict(self.options)
        options["reference_world"] = self.options.get("reference_world") or self.world
        if mixture is not None and self.mixture is None:
            raise ValueError("mixture= changes a mixture's schedule; this Planner plans one index")
        new = Planner(self.index, world=world, seed=self.seed, cost=self.cost,
                      out_dir=self.out_dir if out_dir is None else out_dir,
                      mixture=self.mixture if mixture is None else mixture, **options)
        new.continues = self.continues
        if mixture is not None:
            new.continues = {"mixture": self.mixture, "at_step": at, "continues": self.continues}
        new._origin = {"epoch": epoch, "base": None, "replans": [], "start_step": at, "end_step": 0}
        new.plan(epoch)  # plans the slice now: a step past the run is raised here
        return new

    def _resumed(self, epoch, replan, out_dir, mixture=None):
        if _chunked(self.options):
            return self._resumed_chunked(epoch, replan, out_dir, mixture)
        if mixture is not None:
            raise ValueError("mixture= changes a mixture's schedule; this Planner plans one index")
        new = Planner(self.index, world=replan[1], seed=self.seed, cost=self.cost,
                      out_dir=self.out_dir if out_dir is None else out_dir, **self.options)
        if self._origin is not None and self._origin["epoch"] == epoch:
            new._origin = {"epoch": epoch, "base": self._origin["base"],
                           "replans": [list(r) for r in self._origin["replans"]] + [replan]}
        else:
            new._origin = {"epoch": epoch, "base": self.state_dict(), "replans": [replan]}
        info = new.plan(epoch).info  # re-plans now: a refusal is raised here
        # Later epochs: fresh plans for the new world at the same T and K'.
        new.options["step_tokens"] = info["step_tokens"]
        new.options["micro_per_step"] = info["micro_per_step"]
        return new

    # -- checkpoints ----------------------------------------------------------

    def state_dict(self):
        """What rebuilds this Planner (JSON-ready): index, world, seed, cost, options and the
        re-plans it was resumed through. Manifests are rebuilt from it byte-identical."""
        origin = None
        if self._origin is not None:
            origin = {"epoch": self._origin["epoch"], "base": self._origin["base"],
                      "replans": [list(r) for r in self._origin["replans"]]}
            if self._origin.get("start_step") is not None:
                origin["start_step"] = self._origin["start_step"]
                origin["end_step"] = self._origin["end_step"]
        state = {"version": 1, "index": self.index, "world": self.world, "seed": self.seed,
                 "cost": None if self.cost is None else os.fspath(self.cost),
                 "options": _json_options(self.options), "origin": origin}
        if self.mixture is not None:
            state["mixture"] = self.mixture
        if self.continues is not None:
            state["continues"] = self.continues
        return state

    @classmethod
    def from_state(cls, state, out_dir=None):
        """The Planner :meth:`state_dict` describes (ValueError / TypeError naming the key of
        a state that is not one)."""
        if not isinstance(state, dict):
            raise TypeError("a Planner state is a dict (Planner.state_dict()), not %s" % type(state).__name__)
        if state.get("version") != 1:
            raise ValueError("Planner state version %r unsupported" % (state.get("version"),))
        missing = [k for k in ("index", "world", "seed", "cost", "options") if k not in state]
        if missing:
            raise ValueError("Planner state lacks %s" % ", ".join(missing))
        if not isinstance(state["options"], dict):
            raise TypeError("Planner state options must be a dict, not %r" % (state["options"],))
        options = dict(state["options"])
        if options.get("geometry") is not None:
            options["geometry"] = tuple(options["geometry"])
        p = cls(state["index"], world=state["world"], seed=state["seed"], cost=state["cost"], out_dir=out_dir,
                mixture=state.get("mixture"), **options)
        p.continues = state.get("continues")
        if state.get("origin") is not None:
            o = state["origin"]
            p._origin = {"epoch": int(o["epoch"]), "base": o["base"], "replans": [list(r) for r in o["replans"]]}
            if o.get("start_step") is not None:
                p._origin["start_step"] = whole("origin start_step", o["start_step"], 0, U32_MAX)
                p._origin["end_step"] = whole("origin end_step", o.get("end_step", 0), 0, U32_MAX)
        return p

    def check_identity(self, epoch, identity):
        """ValueError unless this Planner's manifest of ``epoch`` is the one ``identity``
        (:func:`manifest_identity`) names: the same index, options and re-plans."""
        mine = manifest_identity(self.path(epoch))
        diff = sorted(k for k in identity if mine.get(k) != identity[k])
        if diff:
            raise ValueError("the manifest of epoch %d planned now differs from the checkpoint's in %s (%s): the "
                             "index, cost model or options changed since" % (
                                 epoch, ", ".join(diff),
                                 "; ".join("%s %r, not %r" % (k, mine.get(k), identity[k]) for k in diff)))

    def __repr__(self):
        return "Planner(%s, world=%d, seed=%d%s%s)" % (
            repr(self.index) if self.mixture is None else "mixture=%r" % (self.mixture,), self.world, self.seed, "".join(", %s=%r" % kv for kv in sorted(self.options.items())),
            "" if self._origin is None else ", resumed epoch %d at %s" % (
                self._origin["epoch"], ", ".join("step %d -> world %d" % (r[0], r[1])
                                                 for r in self._origin["replans"])))
