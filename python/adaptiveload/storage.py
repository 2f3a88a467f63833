"""The storage settings of shards at URLs, one set for every Python entry point (as the CLI's
``--s3-endpoint``, ``--s3-region``, ``--s3-addressing``, ``--remote-timeout``): validated here
by the C library's rules (al_storage_check), as the CLI's are. A setting left None is taken from the environment
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``ADAPTIVELOAD_REMOTE_TIMEOUT_S``), else from what the
index recorded when it was built, else the default (loader/al_index.h, al_storage_resolve).
"""

import collections
import ctypes

from . import _constants as C
from . import _lib
from . import _structs as S
from ._args import finite

# The s3_addressing argument -> the name of its loader/al_index.h constant (the library's value).
ADDRESSING = {None: "AL_S3_ADDRESSING_DEFAULT", "path": "AL_S3_ADDRESSING_PATH", "virtual": "AL_S3_ADDRESSING_VIRTUAL"}

Storage = collections.namedtuple("Storage", "s3_endpoint s3_region s3_addressing remote_timeout_s")


def _text(name, value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("%s must be a str or None, not %r" % (name, value))
    return _lib.encode_text(value, name)


def _checked(name, st):
    """The C library's rule for one setting (al_storage_check), its message under ``name``."""
    lib = _lib.lib()
    if lib.al_storage_check(ctypes.byref(st)) != C.AL_OK:
        raise ValueError("%s: %s" % (name, _lib.last_error()))


def storage_args(s3_endpoint=None, s3_region=None, s3_addressing=None, remote_timeout=None):
    """:class:`Storage` of C values (bytes or None, int, float), or TypeError / ValueError
    naming the argument (the rules are the C library's, al_storage_check)."""
    if s3_addressing not in ADDRESSING:
        raise ValueError("s3_addressing must be 'path', 'virtual' or None, not %r" % (s3_addressing,))
    timeout = 0.0 if remote_timeout is None else finite("remote_timeout", remote_timeout, 0.1, 86400)
    endpoint, region = _text("s3_endpoint", s3_endpoint), _text("s3_region", s3_region)
    _checked("s3_endpoint", S.StorageOptions(s3_endpoint=endpoint))
    _checked("s3_region", S.StorageOptions(s3_region=region))
    return Storage(endpoint, region, getattr(C, ADDRESSING[s3_addressing]), timeout)
