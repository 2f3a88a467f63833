"""Finds and loads the AdaptiveLoad C library through ctypes (no compiled extension) and
declares the kernel API (kernels/al_adaln.h). This is the package's only library finder:
the stream, schedule and index calls (adaptiveload._stream_lib) use the library loaded here.

Search order, first file that loads wins:
  1. ``ADAPTIVELOAD_LIB``: a library file, or a folder holding one (then nothing else);
  2. next to the package: this folder, its ``lib/``, ``../lib`` and ``../../lib``
     (the //dist bundle puts ``lib/`` beside ``python/``);
  3. the repository checkout: ``bazel-bin/dist/``;
  4. the system loader's path (``ctypes.util.find_library``).
In each place ``libadaptiveload.so`` (everything) is preferred to ``libal_kernels.so``
(the kernels alone, //dist:libal_kernels.so). Code that needs more than the kernels gets
the library through :func:`require`, which fails naming the library loaded and every
candidate tried when the kernels-only one was found.

Thread-safe; the library is loaded once per process.
"""

import ctypes
import ctypes.util
import os
import threading

LIB_NAMES = ("libadaptiveload.so", "libal_kernels.so")
_SYSTEM_NAMES = ("adaptiveload", "al_kernels")  # LIB_NAMES as ctypes.util.find_library wants them

AL_OK = 0

# al_dtype
AL_DTYPE_BF16 = 1
AL_DTYPE_FP16 = 2
AL_DTYPE_FP32 = 3

# al_adaln_options.flags
AL_ADALN_PLAIN_SCALE = 1
AL_ADALN_VALIDATE_OFFSETS = 2


class AdalnDesc(ctypes.Structure):
    """al_adaln_desc."""

    _fields_ = [
        ("dtype", ctypes.c_int),
        ("batch", ctypes.c_int32),
        ("dim", ctypes.c_int32),
        ("rows", ctypes.c_int64),
        ("seq_len", ctypes.c_int64),
        ("cu_seqlens", ctypes.c_void_p),
        ("cu_seqlens_host", ctypes.c_void_p),
    ]


class AdalnOptions(ctypes.Structure):
    """al_adaln_options (zero = default). ``tuning`` points to a struct al_adaln_tuning
    (kernels/al_adaln_tuning.h: kernel knobs, unstable, not mirrored here); None = the
    library's choice."""

    _fields_ = [
        ("eps", ctypes.c_float),
        ("flags", ctypes.c_uint),
        ("tuning", ctypes.c_void_p),
    ]


_vp, _int, _size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
_D, _O = ctypes.POINTER(AdalnDesc), ctypes.POINTER(AdalnOptions)

# name: (restype, argtypes)
_SIGNATURES = {
    "al_adaln_forward": (_int, [_D, _O, _vp, _vp, _vp, _vp, _vp, _vp, _vp]),
    "al_adaln_backward_workspace_size": (_int, [_D, _O, ctypes.POINTER(_size)]),
    "al_adaln_backward": (_int, [_D, _O, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _size, _vp]),
    "al_adaln_struct_size": (_size, [_int]),
    "al_dtype_size": (_size, [_int]),
    "al_last_error": (ctypes.c_char_p, []),
    "al_status_name": (ctypes.c_char_p, [_int]),
}

_lock = threading.Lock()
_cdll = None
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


def load_library():
    """The loaded library (ctypes.CDLL) with the kernel API's argtypes declared."""
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
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(cdll, name, None)
                if fn is not None:
                    fn.restype = res
                    fn.argtypes = args
            if hasattr(cdll, "al_adaln_struct_size"):
                for which, cls in ((0, AdalnDesc), (1, AdalnOptions)):
                    want = cdll.al_adaln_struct_size(which)
                    if want != ctypes.sizeof(cls):
                        raise ImportError(
                            "adaptiveload: %s is %d bytes in %s but %d in Python: library and "
                            "package are from different versions" % (cls.__name__, want, path, ctypes.sizeof(cls))
                        )
            _tried[:] = tried + [path + " (loaded)"]
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


def last_error():
    """al_last_error() of this thread."""
    return load_library().al_last_error().decode("utf-8", "replace")


def check(status, what):
    """Raises RuntimeError naming the status and al_last_error() when status is not AL_OK."""
    if status != AL_OK:
        lib = load_library()
        raise RuntimeError("%s: %s: %s" % (what, lib.al_status_name(status).decode(), last_error()))
