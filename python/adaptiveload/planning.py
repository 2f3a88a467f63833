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
    geometry ((vae_stride_t, vae_stride_s, patch_t, patch_h, patch_w))

``cost`` is a cost-model file (``adaptiveload fit``); None uses the embedded H200 model.
Manifests go to ``out`` (plan) or ``out_dir`` (Planner); by default to a temporary folder
of this process, removed at exit.
"""

import atexit
import ctypes
import itertools
import os
import shutil
import tempfile

from . import _lib
from . import _structs as S
from ._args import U32_MAX, finite, whole
from ._handles import Index, Manifest

_POLICY = {"adaptive": 0, "equal-token": 1, "adaptive-unbalanced": 2}
_LAST_STEP = {"pad": 0, "drop": 1}
_OPTIONS = ("policy", "micro_per_step", "step_tokens", "mem_tokens", "comp_ms", "window", "last_step",
            "start_step", "buckets", "geometry", "require_members")


def _options(world, epoch, seed, options):
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError("unknown planning option(s) %s; known: %s" % (", ".join(unknown), ", ".join(_OPTIONS)))
    o = S.PlanOptions()
    # The CLI's ranges (cli/cmd_plan.c); 0 keeps the library's default where the CLI has one.
    o.world = whole("world", world, 1, 1 << 20)
    o.epoch = whole("epoch", epoch, 0, U32_MAX)
    o.seed = whole("seed", seed)
    policy = options.get("policy", "adaptive")
    if policy not in _POLICY:
        raise ValueError("policy must be one of %s, not %r" % (", ".join(sorted(_POLICY)), policy))
    o.policy = _POLICY[policy]
    last = options.get("last_step", "pad")
    if last not in _LAST_STEP:
        raise ValueError("last_step must be 'pad' or 'drop', not %r" % (last,))
    o.last_step = _LAST_STEP[last]
    o.micro_per_step = whole("micro_per_step", options.get("micro_per_step") or 0, 0, 1 << 20)
    o.step_tokens = whole("step_tokens", options.get("step_tokens") or 0)
    o.mem_tokens = whole("mem_tokens", options.get("mem_tokens") or 0)
    o.comp_budget_ms = finite("comp_ms", options.get("comp_ms") or 0)
    o.window = whole("window", options.get("window") or 0, 0, 1000000)
    o.start_step = whole("start_step", options.get("start_step") or 0, 0, U32_MAX)
    req = options.get("require_members")  # al_plan_options.require_members (plan --require-members)
    if req:
        o._require = (ctypes.c_char_p * len(req))(*[str(m).encode() for m in req])  # alive with o
        o.require_members, o.n_require_members = ctypes.cast(o._require, ctypes.POINTER(ctypes.c_char_p)), len(req)
    geom = options.get("geometry")
    if geom is not None:
        if len(geom) != 5:
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
    idx = Index(index)
    return idx, idx.path


def _write(index, out, world, epoch, seed, cost, options):
    idx, _ = _index_handle(index)
    o = _options(world, epoch, seed, options)
    buckets = options.get("buckets")
    _lib.check(
        _lib.lib().al_plan_index_write(idx.handle, None if cost is None else _lib.encode_path(cost),
                                       None if buckets is None else _lib.encode_path(buckets), ctypes.byref(o),
                                       _lib.encode_path(out)),
        "planning %s for world %d, epoch %d" % (idx.path, int(world), int(epoch)),
    )
    return os.fspath(out)


def plan(index, world, epoch=0, seed=0, cost=None, out=None, **options):
    """Plans one epoch of ``index`` (a path or a loaded index) for ``world`` ranks and returns
    the loaded :class:`Manifest`; ``out`` is the manifest path (default: a temporary file).
    Raises :class:`adaptiveload.Error` with the C library's message on a failure (bad option values, an
    index with no plannable sample, ...)."""
    if out is None:
        out = os.path.join(_default_dir(), "plan-w%d-e%d-s%d-%d.alm" % (int(world), int(epoch), int(seed),
                                                                          next(_serial)))
    return Manifest(_write(index, out, world, epoch, seed, cost, options))


class Planner:
    """Plans epochs of one index in-process for :class:`BatchSampler` and :class:`StreamDataset`
    (pass it where a manifest path goes; their ``set_epoch(e)`` then plans epoch e).

    Args:
        index: index path (kept as a path: a Planner pickles into DataLoader workers).
        world: ranks; default ``WORLD_SIZE`` from the environment, else 1.
        seed, cost, **options: as :func:`plan`.
        out_dir: where manifests go (default: a temporary folder of this process).

    ``path(epoch)`` plans epoch ``epoch`` once (into ``out_dir``) and returns the manifest
    path; ``plan(epoch)`` returns it loaded.
    """

    def __init__(self, index, world=None, seed=0, cost=None, out_dir=None, **options):
        self.index = os.fspath(index.path if isinstance(index, Index) else index)
        if world is None:
            world = int(os.environ.get("WORLD_SIZE", "1"))
        self.world = int(world)
        self.seed = int(seed)
        self.cost = cost
        self.out_dir = out_dir
        _options(self.world, 0, self.seed, options)  # fails early on bad options
        self.options = dict(options)
        self._paths = {}

    def path(self, epoch):
        epoch = int(epoch)
        p = self._paths.get(epoch)
        if p is None or not os.path.exists(p):
            d = self.out_dir or _default_dir()
            os.makedirs(d, exist_ok=True)
            p = os.path.join(d, "plan-w%d-s%d-e%d-pid%d.alm" % (self.world, self.seed, epoch, os.getpid()))
            _write(self.index, p, self.world, epoch, self.seed, self.cost, self.options)
            self._paths[epoch] = p
        return p

    def plan(self, epoch):
        return Manifest(self.path(epoch))

    def __repr__(self):
        return "Planner(%r, world=%d, seed=%d%s)" % (
            self.index, self.world, self.seed, "".join(", %s=%r" % kv for kv in sorted(self.options.items())))
