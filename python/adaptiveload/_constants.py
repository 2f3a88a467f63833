"""The C library's constants as attributes (internal): ``_constants.AL_STREAM_MAX_DIMS`` is the
value the loaded library defines (adaptiveload._lib.constant, read through the library's
constant queries when it is loaded), for every name of adaptiveload._structs.CONSTANTS. The
first read of a name loads the library; the value is then kept as a module attribute, so later
reads cost a plain lookup. AttributeError for a name the package does not list there.
"""

from . import _lib
from . import _structs as S


def __getattr__(name):
    if name in S.CONSTANTS:
        value = globals()[name] = _lib.constant(name)
        return value
    raise AttributeError("module %r has no attribute %r (not in adaptiveload._structs.CONSTANTS)" % (__name__, name))
