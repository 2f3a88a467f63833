"""The index and the manifest loaded through the C library, as owned handles (internal:
:mod:`adaptiveload.planning` exports :class:`Manifest` as ``adaptiveload.Manifest``).

Each object holds one C handle (``handle``) of this process, freed on close() or garbage
collection. Failures raise :class:`adaptiveload.Error` with the C library's message.
"""

import ctypes
import os

from . import _lib
from . import _structs as S


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
            text = os.fsdecode(item)
            if "=" not in text or text.startswith("=") or text.endswith("="):
                raise ValueError("root %r is not FROM=TO" % (_lib.redact(text),))
            item = text.split("=", 1)
        if isinstance(item, (str, bytes, os.PathLike)) or not hasattr(item, "__len__") or len(item) != 2:
            raise TypeError("root entry %s is not FROM=TO nor a (FROM, TO) pair" % _lib.redact(repr(item)))
        src, dst = item
        pairs.append((os.fspath(src), os.fspath(dst)))
    return pairs


class _Loaded:
    """A C object loaded from a file through ``_load`` (al_*_load), owned: freed through
    ``_free`` on close() or garbage collection."""

    _load = _free = _kind = None

    def __init__(self, path):
        self.path = os.fspath(path)
        h = ctypes.c_void_p()
        status = getattr(_lib.lib(), self._load)(ctypes.byref(h), _lib.encode_path(path))
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
        _lib.check(_lib.lib().al_index_remap_root(self.handle, _lib.encode_path(src), _lib.encode_path(dst),
                                                  ctypes.byref(n)),
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
