"""ctypes declarations of the stream and schedule C API (stream/al_stream.h,
stream/al_schedule.h) and of the few index/manifest calls they need.

Internal: use :mod:`adaptiveload.stream` and :mod:`adaptiveload.sampler`.

The shared library is the one :mod:`adaptiveload._lib` finds (``ADAPTIVELOAD_LIB``, next to
the package, the checkout's bazel-bin/dist/, the system loader's path); it must be
libadaptiveload.so: the kernels-only libal_kernels.so lacks this API, and :func:`lib` then
fails naming what was tried.
"""

import ctypes
import os
import threading

from . import _lib as _loader

c_int, c_uint32, c_uint64, c_size_t = ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t
c_void_p, c_char_p, c_double, c_uint8 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double, ctypes.c_uint8

AL_OK = 0
AL_EOF = 1
AL_STREAM_FAIL = 0
AL_STREAM_SKIP_SAMPLE = 1
AL_STREAM_STATE_VERSION = 1
UINT32_MAX = 0xFFFFFFFF


class StreamError(RuntimeError):
    """A failing C call: ``status`` is the al_status code, the message is al_last_error()
    (it names the shard, the key, the member and the byte offset where that applies)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class StreamState(ctypes.Structure):
    _fields_ = [
        ("version", c_uint32),
        ("rank", c_uint32),
        ("world", c_uint32),
        ("epoch", c_uint32),
        ("seed", c_uint64),
        ("index_fingerprint", c_uint64),
        ("position", c_uint64),
        ("stride", c_uint32),
        ("next_step", c_uint32),
        ("next_micro", c_uint32),
        ("reserved", c_uint32),
        ("skipped", c_uint64),
        ("delivered", c_uint64),
    ]


class StreamOptions(ctypes.Structure):
    _fields_ = [
        ("threads", c_int),
        ("prefetch", c_int),
        ("ext", c_char_p),
        ("on_error", c_int),
        ("world", c_int),
        ("first", c_uint64),
        ("stride", c_uint32),
        ("resume", ctypes.POINTER(StreamState)),
        ("pinned", c_int),
        ("device_copy", c_int),
        ("cuda_device", c_int),
        ("align", c_size_t),
        ("read_block", c_size_t),
        ("members", ctypes.POINTER(c_char_p)),
        ("n_members", c_size_t),
        ("max_member_bytes", c_uint64),
        ("max_sample_bytes", c_uint64),
    ]


AL_STREAM_MAX_DIMS = 8


class StreamMember(ctypes.Structure):  # al_stream_member
    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_char_p),
        ("itemsize", c_size_t),
        ("typed", c_int),
        ("cropped", c_int),
        ("ndim", ctypes.POINTER(c_uint32)),
        ("shapes", ctypes.POINTER(c_uint64)),
        ("offsets", ctypes.POINTER(c_uint64)),
        ("sizes", ctypes.POINTER(c_uint64)),
    ]


class StreamBatch(ctypes.Structure):
    _fields_ = [
        ("position", c_uint64),
        ("step", c_uint32),
        ("micro", c_uint32),
        ("n_micro", c_uint32),
        ("last_in_step", c_int),
        ("bucket", c_uint32),
        ("reserved", c_uint32),
        ("step_samples", c_uint64),
        ("step_tokens", c_uint64),
        ("tokens", c_uint64),
        ("n", c_size_t),
        ("keys", ctypes.POINTER(c_char_p)),
        ("samples", ctypes.POINTER(c_uint64)),
        ("shapes", ctypes.POINTER(c_uint32)),
        ("padded", ctypes.POINTER(c_uint8)),
        ("cu_seqlens", ctypes.POINTER(ctypes.c_int32)),
        ("offsets", ctypes.POINTER(c_uint64)),
        ("sizes", ctypes.POINTER(c_uint64)),
        ("data", c_void_p),
        ("data_bytes", c_size_t),
        ("cu_seqlens_offset", c_size_t),
        ("copy_bytes", c_size_t),
        ("pinned", c_int),
        ("device_data", c_void_p),
        ("ready_event", c_void_p),
        ("n_skipped", c_size_t),
        ("skipped_keys", ctypes.POINTER(c_char_p)),
        ("skipped_reasons", ctypes.POINTER(c_char_p)),
        ("n_members", c_size_t),
        ("members", ctypes.POINTER(StreamMember)),
        ("grid", c_uint32 * 3),
        ("reserved2", c_uint32),
    ]


class StreamStats(ctypes.Structure):
    _fields_ = [
        ("batches", c_uint64),
        ("samples", c_uint64),
        ("bytes", c_uint64),
        ("skipped", c_uint64),
        ("total_batches", c_uint64),
        ("stall_seconds", c_double),
        ("read_seconds", c_double),
        ("buffers", c_int),
        ("buffers_allocated", c_int),
        ("max_in_use", c_int),
        ("host_bytes", c_uint64),
        ("device_bytes", c_uint64),
        ("pinned", c_int),
        ("device_copy", c_int),
        ("threads", c_int),
    ]


class SampleInfo(ctypes.Structure):  # al_sample_info (loader/al_index.h)
    _fields_ = [
        ("key", c_char_p),
        ("shard", c_uint32),
        ("width", c_uint32),
        ("height", c_uint32),
        ("frames", c_uint32),
        ("fps", ctypes.c_float),
        ("n_members", c_uint32),
    ]


_P = ctypes.POINTER
_SIGNATURES = {
    # status
    "al_last_error": (c_char_p, []),
    "al_status_name": (c_char_p, [c_int]),
    # index / manifest
    "al_index_load": (c_int, [_P(c_void_p), c_char_p]),
    "al_index_free": (None, [c_void_p]),
    "al_index_sample_count": (c_size_t, [c_void_p]),
    "al_index_sample": (c_int, [c_void_p, c_size_t, _P(SampleInfo)]),
    "al_index_fingerprint": (c_uint64, [c_void_p]),
    "al_index_remap_root": (c_int, [c_void_p, c_char_p, c_char_p, _P(c_size_t)]),
    "al_manifest_load": (c_int, [_P(c_void_p), c_char_p]),
    "al_manifest_free": (None, [c_void_p]),
    # stream
    "al_stream_open": (c_int, [_P(c_void_p), c_void_p, c_void_p, c_int, _P(StreamOptions)]),
    "al_stream_next": (c_int, [c_void_p, _P(_P(StreamBatch))]),
    "al_stream_release": (c_int, [c_void_p, _P(StreamBatch)]),
    "al_stream_release_after": (c_int, [c_void_p, _P(StreamBatch), c_void_p]),
    "al_stream_batch_wait": (c_int, [_P(StreamBatch), c_void_p]),
    "al_stream_batch_sync": (c_int, [_P(StreamBatch)]),
    "al_stream_get_state": (c_int, [c_void_p, _P(StreamState)]),
    "al_stream_get_stats": (c_int, [c_void_p, _P(StreamStats)]),
    "al_stream_state_at": (c_int, [c_void_p, c_uint64, _P(StreamState)]),
    "al_stream_close": (None, [c_void_p]),
    "al_stream_rank_batches": (c_int, [c_void_p, c_uint32, _P(c_uint64)]),
    "al_stream_read_sample": (c_int, [c_void_p, c_uint64, c_char_p, _P(c_void_p), _P(c_size_t)]),
    "al_stream_free": (None, [c_void_p]),
    "al_stream_cuda_available": (c_int, []),
    "al_stream_struct_size": (c_size_t, [c_int]),
    # schedule
    "al_schedule_open_path": (c_int, [_P(c_void_p), c_char_p, c_int, c_int]),
    "al_schedule_free": (None, [c_void_p]),
    "al_schedule_batches": (c_uint64, [c_void_p]),
    "al_schedule_samples": (c_uint64, [c_void_p]),
    "al_schedule_rank": (c_uint32, [c_void_p]),
    "al_schedule_world": (c_uint32, [c_void_p]),
    "al_schedule_epoch": (c_uint32, [c_void_p]),
    "al_schedule_seed": (c_uint64, [c_void_p]),
    "al_schedule_index_fingerprint": (c_uint64, [c_void_p]),
    "al_schedule_bucket_count": (c_size_t, [c_void_p]),
    "al_schedule_bucket": (c_int, [c_void_p, c_size_t, _P(c_uint32), _P(c_uint32), _P(c_uint32), _P(c_uint32),
                                   _P(c_uint64)]),
    "al_schedule_export": (
        c_int,
        [c_void_p, _P(c_uint64), _P(c_uint32), _P(c_uint32), _P(c_uint32), _P(c_uint32), _P(c_uint64),
         _P(c_uint64), _P(c_uint64), _P(c_uint64), _P(c_uint8)],
    ),
}

# Struct layouts the C side reports (al_stream_struct_size) must match ours.
_STRUCTS = {0: StreamOptions, 1: StreamState, 2: StreamBatch, 3: StreamStats}

_lock = threading.Lock()
_declared = None  # the library once this module's signatures are set on it


def lib():
    """The loaded C library (adaptiveload._lib) with argtypes/restype set for the stream and
    schedule API."""
    global _declared
    with _lock:
        if _declared is None:
            cdll = _loader.require("al_stream_open", "the stream API (BatchSampler, IndexDataset, StreamDataset)")
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(cdll, name)
                fn.restype = res
                fn.argtypes = args
            for which, cls in _STRUCTS.items():
                want = cdll.al_stream_struct_size(which)
                if want != ctypes.sizeof(cls):
                    raise ImportError(
                        "adaptiveload: %s is %d bytes in the C library but %d in Python: the library "
                        "and the package are from different versions" % (cls.__name__, want, ctypes.sizeof(cls))
                    )
            _declared = cdll
        return _declared


def last_error():
    """al_last_error() of this thread."""
    return lib().al_last_error().decode("utf-8", "replace")


def check(status, what=""):
    """Raises StreamError for a negative status (message from al_last_error)."""
    if status < 0:
        msg = last_error()
        name = lib().al_status_name(status).decode()
        raise StreamError(status, "%s%s: %s" % (what + ": " if what else "", name, msg))
    return status


def encode_path(path):
    return os.fsencode(os.fspath(path))


class _Loaded:
    """A C object loaded from a file through ``_load`` (al_*_load), owned: freed through
    ``_free`` on close() or garbage collection."""

    _load = _free = _kind = None

    def __init__(self, path):
        self.path = os.fspath(path)
        h = c_void_p()
        status = getattr(lib(), self._load)(ctypes.byref(h), encode_path(path))
        check(status, "loading %s %s" % (self._kind, self.path))
        self.handle = h

    def close(self):
        if getattr(self, "handle", None):
            getattr(lib(), self._free)(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def root_pairs(root):
    """``root`` as (FROM, TO) pairs: None, a "FROM=TO" string, a dict {FROM: TO}, or a list of
    "FROM=TO" strings or (FROM, TO) pairs."""
    if not root:
        return []
    if isinstance(root, (str, bytes, os.PathLike)):
        root = [root]
    items = root.items() if isinstance(root, dict) else root
    pairs = []
    for item in items:
        if isinstance(item, (str, bytes, os.PathLike)):
            text = os.fsdecode(item)
            if "=" not in text or text.startswith("=") or text.endswith("="):
                raise ValueError("root %r is not FROM=TO" % (text,))
            item = text.split("=", 1)
        src, dst = item
        pairs.append((os.fspath(src), os.fspath(dst)))
    return pairs


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
        StreamError when none starts with ``src``."""
        n = c_size_t(0)
        check(lib().al_index_remap_root(self.handle, encode_path(src), encode_path(dst), ctypes.byref(n)),
              "index %s: root %s=%s" % (self.path, src, dst))
        return n.value

    def __len__(self):
        return lib().al_index_sample_count(self.handle)

    def fingerprint(self):
        return lib().al_index_fingerprint(self.handle)

    def sample(self, i):
        info = SampleInfo()
        check(lib().al_index_sample(self.handle, i, ctypes.byref(info)), "index sample %d" % i)
        return info


class Manifest(_Loaded):
    """A manifest file loaded through the C library."""

    _load, _free, _kind = "al_manifest_load", "al_manifest_free", "manifest"
