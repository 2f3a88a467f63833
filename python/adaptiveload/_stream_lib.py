"""ctypes declarations of the stream and schedule C API (stream/al_stream.h,
stream/al_schedule.h) and of the few index/manifest calls they need.

Internal: use :mod:`adaptiveload.stream` and :mod:`adaptiveload.sampler`.

The shared library is the one :func:`adaptiveload._lib.load_library` finds when it
holds the stream API; otherwise, in this order: the ``ADAPTIVELOAD_LIB`` environment variable (a
file, or a folder holding ``libadaptiveload.so``), ``libadaptiveload.so`` next to this
package, ``../../lib/libadaptiveload.so`` relative to it (the layout of the //dist
bundle: ``lib/`` beside ``python/``), then the system loader path.
"""

import ctypes
import ctypes.util
import os
import threading

_LIBNAME = "libadaptiveload.so"

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
_lib = None


def _candidates():
    env = os.environ.get("ADAPTIVELOAD_LIB")
    if env:
        yield os.path.join(env, _LIBNAME) if os.path.isdir(env) else env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, _LIBNAME)
    yield os.path.join(here, "lib", _LIBNAME)
    yield os.path.normpath(os.path.join(here, "..", "..", "lib", _LIBNAME))
    found = ctypes.util.find_library("adaptiveload")
    if found:
        yield found


def _open_cdll():
    # Prefer the package's common loader (_lib.load_library) so one copy is loaded; it may
    # find the kernels-only library (libal_kernels.so), which lacks the stream API.
    try:
        from . import _lib as shared

        lib = shared.load_library()
        if hasattr(lib, "al_stream_open"):
            return lib
    except (ImportError, OSError, AttributeError):
        pass
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise OSError(
        "adaptiveload: cannot load %s; tried: %s. Set ADAPTIVELOAD_LIB to the library (from the "
        "//dist bundle's lib/ folder, or bazel-bin/dist/libadaptiveload.so)." % (_LIBNAME, "; ".join(tried) or "nothing")
    )


def lib():
    """The loaded C library with argtypes/restype set for the stream and schedule API."""
    global _lib
    with _lock:
        if _lib is None:
            cdll = _open_cdll()
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
            _lib = cdll
        return _lib


def last_error():
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


class Index:
    """An index file loaded through the C library (owned; freed on close/garbage collection)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        h = c_void_p()
        check(lib().al_index_load(ctypes.byref(h), encode_path(path)), "loading index %s" % self.path)
        self.handle = h

    def __len__(self):
        return lib().al_index_sample_count(self.handle)

    def fingerprint(self):
        return lib().al_index_fingerprint(self.handle)

    def sample(self, i):
        info = SampleInfo()
        check(lib().al_index_sample(self.handle, i, ctypes.byref(info)), "index sample %d" % i)
        return info

    def close(self):
        if getattr(self, "handle", None):
            lib().al_index_free(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


class Manifest:
    """A manifest file loaded through the C library."""

    def __init__(self, path):
        self.path = os.fspath(path)
        h = c_void_p()
        check(lib().al_manifest_load(ctypes.byref(h), encode_path(path)), "loading manifest %s" % self.path)
        self.handle = h

    def close(self):
        if getattr(self, "handle", None):
            lib().al_manifest_free(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
