"""The index and the manifest loaded through the C library, as owned handles (internal:
:mod:`adaptiveload.planning` exports :class:`Manifest` as ``adaptiveload.Manifest``).

Each object holds one C handle (``handle``) of this process, freed on close() or garbage
collection. Failures raise :class:`adaptiveload.Error` with the C library's message.
"""

import ctypes
import os

from . import _constants
from . import _lib
from . import _structs as S
from ._args import no_nul, path_arg


def root_pairs(root):
    """``root`` as (FROM, TO) pairs: None, a "FROM=TO" string, a dict {FROM: TO}, or a list of
    "FROM=TO" strings or (FROM, TO) pairs."""
    if not root:
        return []
    if isinstance(root, (str, bytes, os.PathLike)):
        root = [root]
    items = root.items() if isinstance(root, dict) else root
    if not hasattr(items, "__iter__"):
        raise TypeError("root must be 'FROM=TO', a dict or a list of them, not %s" % _lib.redact(repr(root)))
    pairs = []
    for item in items:
        if isinstance(item, (str, bytes, os.PathLike)):
            text = no_nul("root", os.fsdecode(item))
            if "=" not in text or text.startswith("=") or text.endswith("="):
                raise ValueError("root %r is not FROM=TO" % (_lib.redact(text),))
            item = text.split("=", 1)
        if isinstance(item, (str, bytes, os.PathLike)) or not hasattr(item, "__len__") or len(item) != 2:
            raise TypeError("root entry %s is not FROM=TO nor a (FROM, TO) pair" % _lib.redact(repr(item)))
        src, dst = item
        pairs.append((path_arg("root", src), path_arg("root", dst)))
    return pairs


def manifest_arg(manifest):
    """What a ``manifest`` argument names: ``(planner, None)`` for an adaptiveload.Planner (an
    object with a callable ``path(epoch)``), ``(None, path)`` for a loaded :class:`Manifest`
    (``adaptiveload.plan``'s result: its file) or a path; TypeError naming ``manifest`` for
    anything else (None, a number), ValueError for a path holding a NUL."""
    if hasattr(manifest, "path") and callable(manifest.path):
        return manifest, None
    if isinstance(manifest, Manifest):
        return None, manifest.path
    if not isinstance(manifest, (str, bytes, os.PathLike)):
        raise TypeError("manifest must be a manifest path, a loaded adaptiveload.Manifest (what adaptiveload.plan "
                        "returns) or an adaptiveload.Planner, not %r" % (manifest,))
    return None, path_arg("manifest", manifest)


class _Loaded:
    """A C object loaded from a file through ``_load`` (al_*_load), owned: freed through
    ``_free`` on close() or garbage collection."""

    _load = _free = _kind = None

    def __init__(self, path):
        self.path = path_arg(self._kind, path)
        h = ctypes.c_void_p()
        status = getattr(_lib.lib(), self._load)(ctypes.byref(h), _lib.encode_path(self.path, self._kind))
        _lib.check(status, "loading %s %s" % (self._kind, self.path))
        self.handle = h

    def close(self):
        if getattr(self, "handle", None):
            getattr(_lib.lib(), self._free)(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class Index(_Loaded):
    """An index file loaded through the C library. ``root`` (see :func:`root_pairs`) moves
    the corpus: shard paths under FROM are read under TO (al_index_remap_root; shards are
    checked by size and content fingerprint, so copies stream as indexed)."""

    _load, _free, _kind = "al_index_load", "al_index_free", "index"

    def __init__(self, path, root=None):
        super().__init__(path)
        for src, dst in root_pairs(root):
            self.remap_root(src, dst)

    def remap_root(self, src, dst):
        """Shard paths under directory ``src`` now start with ``dst``; returns how many moved.
        adaptiveload.Error when none starts with ``src``."""
        n = ctypes.c_size_t(0)
        _lib.check(_lib.lib().al_index_remap_root(self.handle, _lib.encode_path(src, "root"),
                                                  _lib.encode_path(dst, "root"), ctypes.byref(n)),
                   "index %s: root %s=%s" % (self.path, _lib.redact(src), _lib.redact(dst)))
        return n.value

    def __len__(self):
        return _lib.lib().al_index_sample_count(self.handle)

    def fingerprint(self):
        return _lib.lib().al_index_fingerprint(self.handle)

    def sample(self, i):
        info = S.SampleInfo()
        _lib.check(_lib.lib().al_index_sample(self.handle, i, ctypes.byref(info)), "index sample %d" % i)
        return info


class Manifest(_Loaded):
    """A loaded manifest (``path``, ``handle``) with its summary as ``info`` (a dict of
    al_manifest_info: world, epoch, steps, micro_per_step, step_tokens, step_tokens_mean,
    step_tokens_cv, imbalance_cv, step_time_cv, predicted_tokens_per_s, ...)."""

    _load, _free, _kind = "al_manifest_load", "al_manifest_free", "manifest"

    @property
    def info(self):
        i = S.ManifestInfo()
        _lib.check(_lib.lib().al_manifest_get_info(self.handle, ctypes.byref(i)), "manifest %s" % self.path)
        out = {}
        for name, _ in S.ManifestInfo._fields_:
            v = getattr(i, name)
            out[name] = v.decode() if isinstance(v, bytes) else v
        return out

    @property
    def mix_by(self):
        """What a mixture's weights apportion ("tokens", "samples", "compute"); "" for a plan of
        one index."""
        return (_lib.lib().al_manifest_mix_by(self.handle) or b"").decode()

    @property
    def sources(self):
        """A mixture's sources (``plan --mixture``), in its order: dicts of name, weight
        (normalised), on_exhaust, passes, samples, pass_samples, draw_base, drawn, drawn_tokens,
        drawn_ms, stop_step; sample number ``draw_base + pass * samples + position`` is the
        source's index position. [] for a plan of one index."""
        out = []
        for k in range(_lib.lib().al_manifest_source_count(self.handle)):
            si = S.RunSourceInfo()
            _lib.check(_lib.lib().al_manifest_source(self.handle, k, ctypes.byref(si)),
                       "manifest %s source %d" % (self.path, k))
            out.append({"name": si.name.decode(), "weight": si.weight,
                        "on_exhaust": "stop" if si.on_exhaust == _constants.AL_EXHAUST_STOP else "repeat",
                        "passes": si.passes, "samples": si.samples, "pass_samples": si.pass_samples,
                        "draw_base": si.draw_base, "drawn": si.drawn, "drawn_tokens": si.drawn_tokens,
                        "drawn_ms": si.drawn_ms, "stop_step": si.stop_step})
        return out

    @property
    def stages(self):
        """A mixture's stages (``"stages"`` of MIX.json), when its weights change: dicts of
        from_step and weights ({source name: weight, normalised over all sources}). [] when the
        weights never change, and for a plan of one index."""
        lib = _lib.lib()
        names = [s["name"] for s in self.sources]
        out = []
        for k in range(lib.al_manifest_stage_count(self.handle)):
            w = (ctypes.c_double * max(len(names), 1))()
            start = ctypes.c_uint32()
            _lib.check(lib.al_manifest_stage(self.handle, k, ctypes.byref(start), w, len(names)),
                       "manifest %s stage %d" % (self.path, k))
            out.append({"from_step": start.value, "weights": dict(zip(names, list(w)))})
        return out
