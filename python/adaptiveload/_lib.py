"""The package's one binding of the C library: finds and loads it through ctypes (no
compiled extension), declares every C function the package calls in one table
(:data:`SIGNATURES`), checks every mirrored struct's size (adaptiveload._structs), and turns
failing calls into :class:`Error`. No other module loads the library or sets a restype or
argtypes.

Search order, first file that loads wins:
  1. ``ADAPTIVELOAD_LIB``: a library file, or a folder holding one (then nothing else);
  2. next to the package: this folder, its ``lib/``, ``../lib`` and ``../../lib``
     (the //dist bundle puts ``lib/`` beside ``python/``);
  3. the repository checkout: ``bazel-bin/dist/``;
  4. the system loader's path (``ctypes.util.find_library``).
In each place ``libadaptiveload.so`` (everything) is preferred to ``libal_kernels.so``
(the kernels alone, //dist:libal_kernels.so, which exports only the functions of
:data:`KERNELS_HEADERS`). Code that needs more than the kernels gets the library through
:func:`require`, which fails naming the library loaded and every candidate tried when the
kernels-only one was found.

Loading also reads every library constant the package uses (adaptiveload._structs.CONSTANTS)
through the modules' constant queries (:data:`CONSTANT_QUERIES`), so no value is copied into
Python by hand; :func:`constant` answers them afterwards. A library that lacks a function of
the table (the kernels-only one: outside KERNELS_HEADERS) or a constant, or whose struct sizes
or array lengths differ from the mirrors, is refused with ImportError naming the library's
path: library and package come from different versions.

Thread-safe; the library is loaded and declared once per process.
"""

import ctypes
import ctypes.util
import os
import re
import threading

from . import _structs as S
from ._args import no_nul

LIB_NAMES = ("libadaptiveload.so", "libal_kernels.so")
_SYSTEM_NAMES = ("adaptiveload", "al_kernels")  # LIB_NAMES as ctypes.util.find_library wants them

_P = ctypes.POINTER
_vp, _cp, _int, _size = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
_u8, _u32, _u64, _i64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
_constant = (_int, [_cp, _P(_i64)])  # al_*_constant(name, &value)

# Every C function the package calls, by public header: name -> (restype, argtypes).
SIGNATURES = {
    "common/al_status.h": {
        "al_last_error": (_cp, []),
        "al_status_name": (_cp, [_int]),
        "al_status_constant": _constant,
    },
    "common/al_version.h": {
        "al_version": (_cp, []),
    },
    "kernels/al_adaln.h": {
        "al_adaln_forward": (_int, [_P(S.AdalnDesc), _P(S.AdalnOptions), _vp, _vp, _vp, _vp, _vp, _vp, _vp]),
        "al_adaln_backward_workspace_size": (_int, [_P(S.AdalnDesc), _P(S.AdalnOptions), _P(_size)]),
        "al_adaln_backward": (_int, [_P(S.AdalnDesc), _P(S.AdalnOptions), _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp,
                                     _vp, _size, _vp]),
        "al_adaln_struct_size": (_size, [_int]),
        "al_adaln_constant": _constant,
        "al_dtype_size": (_size, [_int]),
    },
    "loader/al_index.h": {
        "al_index_load": (_int, [_P(_vp), _cp]),
        "al_index_free": (None, [_vp]),
        "al_index_sample_count": (_size, [_vp]),
        "al_index_sample": (_int, [_vp, _size, _P(S.SampleInfo)]),
        "al_index_shard": (_int, [_vp, _size, _P(S.ShardInfo)]),
        "al_index_member": (_int, [_vp, _size, _size, _P(S.MemberInfo)]),
        "al_index_member_type": (_int, [_vp, _size, _size, _P(S.MemberType)]),
        "al_index_fingerprint": (_u64, [_vp]),
        "al_index_remap_root": (_int, [_vp, _cp, _cp, _P(_size)]),
        "al_index_struct_size": (_size, [_int]),
        "al_index_constant": _constant,
        "al_shard_expand_remote": (_int, [_cp, _cp, _P(_P(_vp)), _P(_size)]),
        "al_shard_expand_storage": (_int, [_cp, _P(S.StorageOptions), _P(_P(_vp)), _P(_size)]),
        "al_storage_check": (_int, [_P(S.StorageOptions)]),
        "al_index_build": (_int, [_P(_vp), _P(_cp), _size, _P(S.IndexOptions), _P(S.IndexStats)]),
        "al_index_save": (_int, [_vp, _cp]),
    },
    "loader/al_members.h": {
        "al_member_is_latent": (_int, [_cp]),
        "al_member_is_typed": (_int, [_cp]),
        "al_tensor_header_parse": (_int, [_cp, _vp, _size, _u64, _P(S.TensorHeader), _P(_size)]),
        "al_index_member_is_latent": (_int, [_vp, _size, _cp]),
        "al_index_default_member": (_int, [_vp, _vp, _size]),
        "al_index_members_known": (_int, [_vp, _P(_cp), _size]),
        "al_index_require_members": (_int, [_vp, _P(_cp), _size, _P(_u64), _size, _P(_u64)]),
    },
    "manifest/al_manifest.h": {
        "al_manifest_load": (_int, [_P(_vp), _cp]),
        "al_manifest_free": (None, [_vp]),
        "al_manifest_get_info": (_int, [_vp, _P(S.ManifestInfo)]),
        "al_manifest_source_count": (_u32, [_vp]),
        "al_manifest_source": (_int, [_vp, _u32, _P(S.RunSourceInfo)]),
        "al_manifest_mix_by": (_cp, [_vp]),
        "al_manifest_stage_count": (_u32, [_vp]),
        "al_manifest_stage": (_int, [_vp, _u32, _P(ctypes.c_uint32), _P(ctypes.c_double), _size]),
        "al_plan_replan_write": (_int, [_vp, _u32, _P(S.ReplanOptions), _cp]),
    },
    "planner/al_plan.h": {
        "al_plan_struct_size": (_size, [_int]),
        "al_plan_constant": _constant,
        "al_plan_check_sp_degrees": (_int, [_cp, _P(_u32), _size, _u32]),
    },
    "manifest/al_plan_index.h": {
        "al_plan_index_write": (_int, [_vp, _cp, _cp, _P(S.PlanOptions), _cp]),
        "al_run_index_write": (_int, [_vp, _cp, _cp, _P(S.PlanOptions), _u32, _u32, _u32, _cp]),
        "al_run_index_open": (_int, [_P(_vp), _vp, _cp, _cp, _P(S.PlanOptions)]),
        "al_run_index_write_rank": (_int, [_vp, _cp, _cp, _P(S.PlanOptions), _u32, _u32, _u32, _u32,
                                           _cp]),
    },
    "manifest/al_mixture.h": {
        "al_mixture_parse": (_int, [_P(_vp), _cp, _cp, _cp]),
        "al_mixture_load": (_int, [_P(_vp), _cp]),
        "al_mixture_free": (None, [_vp]),
        "al_mixture_write": (_int, [_vp, _cp, _cp, _P(S.PlanOptions), _u32, _u32, _u32, _u32, _cp]),
        "al_mixture_source_count": (ctypes.c_size_t, [_vp]),
        "al_mixture_continue": (_int, [_vp, _vp, _u32]),
        "al_mixture_index": (_vp, [_vp, ctypes.c_size_t]),
        "al_mixture_open_run_paths": (_int, [_vp, _cp, _cp, _P(S.PlanOptions), _P(_vp)]),
        "al_mixture_source_name": (_cp, [_vp, ctypes.c_size_t]),
        "al_mixture_source_index": (_cp, [_vp, ctypes.c_size_t]),
    },
    "planner/al_run.h": {
        "al_run_get_info": (_int, [_vp, _P(S.RunInfo)]),
        "al_run_source_get": (_int, [_vp, _u32, _P(S.RunSourceInfo)]),
        "al_run_free": (None, [_vp]),
    },
    "stream/al_stream.h": {
        "al_stream_open": (_int, [_P(_vp), _vp, _vp, _int, _P(S.StreamOptions)]),
        "al_stream_open_run": (_int, [_P(_vp), _vp, _vp, _int, _int, _u32, _P(S.StreamOptions)]),
        "al_stream_open_mixture": (_int, [_P(_vp), _P(_vp), ctypes.c_size_t, _vp, _int, _P(S.StreamOptions)]),
        "al_stream_open_run_mixture": (_int, [_P(_vp), _P(_vp), ctypes.c_size_t, _vp, _int, _int, _u32,
                                              _P(S.StreamOptions)]),
        "al_stream_next": (_int, [_vp, _P(_P(S.StreamBatch))]),
        "al_stream_release": (_int, [_vp, _P(S.StreamBatch)]),
        "al_stream_release_after": (_int, [_vp, _P(S.StreamBatch), _vp]),
        "al_stream_batch_wait": (_int, [_P(S.StreamBatch), _vp]),
        "al_stream_batch_sync": (_int, [_P(S.StreamBatch)]),
        "al_stream_get_state": (_int, [_vp, _P(S.StreamState)]),
        "al_stream_get_stats": (_int, [_vp, _P(S.StreamStats)]),
        "al_stream_state_at": (_int, [_vp, _u64, _P(S.StreamState)]),
        "al_stream_close": (None, [_vp]),
        "al_stream_rank_batches": (_int, [_vp, _u32, _P(_u64)]),
        "al_stream_manifest_fingerprint": (_int, [_vp, _P(_u64)]),
        "al_stream_read_sample": (_int, [_vp, _u64, _cp, _P(_vp), _P(_size)]),
        "al_stream_free": (None, [_vp]),
        "al_stream_cuda_available": (_int, []),
        "al_stream_struct_size": (_size, [_int]),
        "al_stream_constant": _constant,
    },
    "stream/al_schedule.h": {
        "al_schedule_open": (_int, [_P(_vp), _vp, _int, _int]),
        "al_schedule_open_path": (_int, [_P(_vp), _cp, _int, _int]),
        "al_schedule_free": (None, [_vp]),
        "al_schedule_batches": (_u64, [_vp]),
        "al_schedule_samples": (_u64, [_vp]),
        "al_schedule_rank": (_u32, [_vp]),
        "al_schedule_world": (_u32, [_vp]),
        "al_schedule_epoch": (_u32, [_vp]),
        "al_schedule_seed": (_u64, [_vp]),
        "al_schedule_index_fingerprint": (_u64, [_vp]),
        "al_schedule_manifest_fingerprint": (_u64, [_vp]),
        "al_schedule_bucket_count": (_size, [_vp]),
        "al_schedule_bucket": (_int, [_vp, _size, _P(_u32), _P(_u32), _P(_u32), _P(_u32), _P(_u64)]),
        "al_schedule_export": (_int, [_vp, _P(_u64), _P(_u32), _P(_u32), _P(_u32), _P(_u32), _P(_u64), _P(_u64),
                                      _P(_u64), _P(_u64), _P(_u8)]),
        "al_schedule_export_sp": (_int, [_vp, _P(_u32), _P(_u32)]),
    },
}

# The headers whose functions libal_kernels.so exports (as //tests/dist:exports_test checks).
KERNELS_HEADERS = ("common/al_status.h", "common/al_version.h", "kernels/al_adaln.h")

# The constant queries, one per module, each answering the integer constants of its module's
# public headers by name; a name is answered by exactly one (//tests/dist:constants_test).
CONSTANT_QUERIES = ("al_status_constant", "al_adaln_constant", "al_index_constant", "al_plan_constant",
                    "al_stream_constant")


class Error(RuntimeError):
    """A failing call into the C library. ``str(e)`` is "<what>: <status name>: <message>";
    ``status`` is the al_status code (negative), ``detail`` the C library's own message
    (al_last_error(): it names the file, shard, key, member and byte offset where that
    applies). ``adaptiveload.StreamError`` is this class under its earlier name."""

    def __init__(self, status, message, detail=None):
        super().__init__(message)
        self.status = status
        self.detail = message if detail is None else detail


Error.__module__ = "adaptiveload"  # tracebacks name it as users catch it: adaptiveload.Error
StreamError = Error

_lock = threading.Lock()
_cdll = None
_constants = {}  # name -> value of every constant of _structs.CONSTANTS the loaded library has
_tried = []  # "candidate (why it was passed over)" before the one loaded, then "path (loaded)"


def candidates():
    """Paths tried, in order (names without a folder come from the system loader's path)."""
    env = os.environ.get("ADAPTIVELOAD_LIB")
    if env:
        if os.path.isdir(env):
            for name in LIB_NAMES:
                yield os.path.join(env, name)
        else:
            yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    places = [
        here,
        os.path.join(here, "lib"),
        os.path.normpath(os.path.join(here, "..", "lib")),
        os.path.normpath(os.path.join(here, "..", "..", "lib")),
        os.path.join(repo, "bazel-bin", "dist"),
    ]
    for place in places:
        for name in LIB_NAMES:
            yield os.path.join(place, name)
    for name in _SYSTEM_NAMES:
        found = ctypes.util.find_library(name)
        if found:
            yield found


def declare(cdll, path):
    """Sets restype and argtypes of every function of :data:`SIGNATURES` on ``cdll`` (the
    library loaded from ``path``). ImportError naming what the library lacks: a function of
    KERNELS_HEADERS (which both libraries export), or, in a library with the stream API,
    any function of the table."""
    full = hasattr(cdll, "al_stream_open")
    missing = []
    for header, functions in SIGNATURES.items():
        for name, (res, args) in functions.items():
            fn = getattr(cdll, name, None)
            if fn is None:
                if full or header in KERNELS_HEADERS:
                    missing.append(name)
                continue
            fn.restype = res
            fn.argtypes = args
    if missing:
        raise ImportError("adaptiveload: %s lacks %s: library and package are from different versions"
                          % (path, ", ".join(missing)))


def lookup_constant(cdll, name):
    """The value of constant ``name`` from the first of :data:`CONSTANT_QUERIES` that the
    library ``cdll`` has and that knows it; None when none does."""
    value = _i64()
    for query in CONSTANT_QUERIES:
        fn = getattr(cdll, query, None)
        if fn is not None and fn(name.encode(), ctypes.byref(value)) == 0:
            return value.value
    return None


def read_constants(cdll, path):
    """{name: value} of every constant of _structs.CONSTANTS that the library at ``path``
    defines. ImportError naming the ones a library with the stream API lacks (the
    kernels-only library answers the constants of KERNELS_HEADERS only)."""
    found = {}
    for name in S.CONSTANTS:
        value = lookup_constant(cdll, name)
        if value is not None:
            found[name] = value
    missing = [name for name in S.CONSTANTS if name not in found]
    if missing and hasattr(cdll, "al_stream_open"):
        raise ImportError("adaptiveload: %s lacks the constant%s %s: library and package are from different "
                          "versions" % (path, "s" if len(missing) > 1 else "", ", ".join(missing)))
    return found


def check_struct(cdll, path, cls, query, which, constants):
    """ImportError unless ``cls`` (a ctypes mirror) has the size the library at ``path``
    reports for it: ``query(constants[which])``, e.g. al_plan_struct_size(AL_PLAN_STRUCT_OPTIONS)."""
    want = getattr(cdll, query)(constants[which])
    if want != ctypes.sizeof(cls):
        raise ImportError(
            "adaptiveload: %s is %d bytes in %s (%s(%s)) but %d in Python: library and package are from "
            "different versions" % (cls.__name__, want, path, query, which, ctypes.sizeof(cls))
        )


def check_length(path, cls, field, name, constants):
    """ImportError unless array ``field`` of mirror ``cls`` holds constants[name] elements (the
    library at ``path``'s value of the constant that sizes it in C)."""
    have = dict(cls._fields_)[field]._length_
    if have != constants[name]:
        raise ImportError("adaptiveload: %s.%s holds %d in Python but %s is %d in %s: library and package are "
                          "from different versions" % (cls.__name__, field, have, name, constants[name], path))


def load_library():
    """The loaded library (ctypes.CDLL), every function of SIGNATURES it has declared and
    every mirror whose size query it has checked."""
    global _cdll
    with _lock:
        if _cdll is not None:
            return _cdll
        tried = []
        for path in candidates():
            if os.path.sep in path and not os.path.exists(path):
                tried.append(path + " (missing)")
                continue
            try:
                cdll = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            declare(cdll, path)
            constants = read_constants(cdll, path)
            for cls, query, which in S.MIRRORS:
                if hasattr(cdll, query):  # the kernels-only library reports the kernels' structs
                    check_struct(cdll, path, cls, query, which, constants)
            for cls, field, name in S.LENGTHS:
                if name in constants:
                    check_length(path, cls, field, name, constants)
            _tried[:] = tried + [path + " (loaded)"]
            _constants.update(constants)
            _cdll = cdll
            return _cdll
        if not os.environ.get("ADAPTIVELOAD_LIB"):
            tried.append("the system loader's path (ctypes.util.find_library)")
        raise OSError(
            "adaptiveload: cannot load %s; tried: %s. Build it (bazel build //dist:libadaptiveload.so) "
            "or set ADAPTIVELOAD_LIB." % (" or ".join(LIB_NAMES), "; ".join(tried) or "nothing")
        )


def require(symbol, what):
    """The loaded library when it exports ``symbol``; otherwise (the kernels-only
    libal_kernels.so was found first) OSError naming ``what`` needs it, the library loaded
    and every candidate tried."""
    cdll = load_library()
    if hasattr(cdll, symbol):
        return cdll
    raise OSError(
        "adaptiveload: %s needs %s, but the library loaded lacks %s (it holds the kernels only); "
        "tried: %s. Build //dist:libadaptiveload.so or set ADAPTIVELOAD_LIB to it."
        % (what, LIB_NAMES[0], symbol, "; ".join(_tried))
    )


def lib():
    """The full library (loader, planner, stream): :func:`require` for the stream API."""
    return require("al_stream_open", "the stream API (BatchSampler, IndexDataset, StreamDataset)")


def version():
    """al_version() of the loaded library ("MAJOR.MINOR.PATCH")."""
    return load_library().al_version().decode()


def last_error():
    """al_last_error() of this thread."""
    return load_library().al_last_error().decode("utf-8", "replace")


def constant(name):
    """The value of library constant ``name`` (one of adaptiveload._structs.CONSTANTS:
    "AL_STREAM_MAX_DIMS", "AL_ADALN_MAX_DIM", ...), as the loaded library defines it (read when
    it was loaded). KeyError for a name the package does not list; ImportError when the library
    loaded lacks it (the kernels-only one holds the kernels' and the status codes only)."""
    if name not in S.CONSTANTS:
        raise KeyError("adaptiveload: %r is not a library constant the package reads (_structs.CONSTANTS)"
                       % (name,))
    load_library()
    try:
        return _constants[name]
    except KeyError:
        raise ImportError("adaptiveload: %s lacks the constant %s; tried: %s" % (_tried[-1], name, "; ".join(_tried)))


_status_codes = {}


def status(name):
    """The code of status ``name`` ("AL_EOF", "AL_ERANGE", ...) as the library defines it
    (al_status_constant), so that no code is copied by hand; KeyError for a name it lacks."""
    code = _status_codes.get(name)
    if code is None:
        value = _i64()
        if load_library().al_status_constant(name.encode(), ctypes.byref(value)) != 0:
            raise KeyError(name)
        code = _status_codes[name] = value.value
    return code


def error(status, what="", context=None):
    """The :class:`Error` of a failed call that returned ``status``: "<what>: <status name>:
    <al_last_error()>"; ``context`` is put before the C message as "<context>: " (as the C
    side's al_error_prefix does)."""
    detail = last_error()
    if context:
        detail = "%s: %s" % (context, detail)
    name = load_library().al_status_name(status).decode()
    return Error(status, "%s%s: %s" % (what + ": " if what else "", name, detail), detail)


def check(status, what="", context=None):
    """``status`` when it is not an error (AL_OK, AL_EOF, a count); :func:`error` raised for
    a negative one."""
    if status < 0:
        raise error(status, what, context)
    return status


_libc = None


def c_free(ptr):
    """free(3) of memory the library allocated and handed over (al_shard_expand_remote's paths)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None)
        _libc.free.argtypes = [_vp]
        _libc.free.restype = None
    _libc.free(ptr)


def encode_path(path, name="path"):
    """A path (str, bytes or os.PathLike) as the bytes C functions take; ValueError naming
    ``name`` when it holds a NUL (C would read it only up to the NUL). Every path the package
    hands to C goes through here."""
    return no_nul(name, os.fsencode(os.fspath(path)))


def encode_text(text, name):
    """A str (a member name, an extension) as the UTF-8 bytes C functions take; ValueError
    naming ``name`` when it holds a NUL. Every other string the package hands to C goes
    through here."""
    return no_nul(name, text.encode())


_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s'\"]*@")


def redact(text):
    """``text`` (a path, str, bytes or os.PathLike, or any object's repr) for a message: every
    URL's user:password@ in it shown as ***@ (up to its authority's last '@'), as the C
    library's messages show it."""
    if isinstance(text, (str, bytes, os.PathLike)):
        text = os.fsdecode(os.fspath(text))
    else:
        text = repr(text)
    return _USERINFO.sub(r"\1***@", text)
