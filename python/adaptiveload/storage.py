"""The storage settings of shards at URLs, one set for every Python entry point (as the CLI's
``--s3-endpoint``, ``--s3-region``, ``--s3-addressing``, ``--remote-timeout``): validated here
like the CLI validates them. A setting left None is taken from the environment
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``ADAPTIVELOAD_REMOTE_TIMEOUT_S``), else from what the
index recorded when it was built, else the default (loader/al_index.h, al_storage_resolve).
"""

import collections

from . import _lib
from ._args import finite

# loader/al_index.h: AL_S3_ADDRESSING_*
ADDRESSING = {None: 0, "path": 1, "virtual": 2}

Storage = collections.namedtuple("Storage", "s3_endpoint s3_region s3_addressing remote_timeout_s")


def _text(name, value, check):
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("%s must be a str or None, not %r" % (name, value))
    why = check(value)
    if why:
        raise ValueError("%s %r: %s" % (name, value, why))
    return _lib.encode_text(value, name)


def _endpoint_why(v):
    if not v.lower().startswith(("http://", "https://")) or len(v.split("://", 1)[1]) == 0:
        return "not an http:// or https:// URL"
    return None


def _region_why(v):
    if not v or len(v) >= 64 or any(c in v for c in ":/ "):
        return "not a region name"
    return None


def storage_args(s3_endpoint=None, s3_region=None, s3_addressing=None, remote_timeout=None):
    """:class:`Storage` of C values (bytes or None, int, float), or TypeError / ValueError
    naming the argument."""
    if s3_addressing not in ADDRESSING:
        raise ValueError("s3_addressing must be 'path', 'virtual' or None, not %r" % (s3_addressing,))
    timeout = 0.0 if remote_timeout is None else finite("remote_timeout", remote_timeout, 0.1, 86400)
    return Storage(_text("s3_endpoint", s3_endpoint, _endpoint_why), _text("s3_region", s3_region, _region_why),
                   ADDRESSING[s3_addressing], timeout)
