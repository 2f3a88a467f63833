"""Indexing WebDataset shards in-process: :func:`build_index`, what ``adaptiveload index -o OUT
SHARD...`` does (al_shard_expand_storage, al_index_build, al_index_save of loader/al_index.h).

Shards are local files, folders (their ``*.tar*`` files), brace patterns
(``shard-{000000..000099}.tar``), or URLs: ``http(s)://HOST/PATH/...`` (explicit names or brace
patterns) and ``s3://BUCKET/KEY`` or an ``s3://`` prefix (``s3://BUCKET/train/``: its ``*.tar``,
``*.tar.gz``, ``*.tar.lz4``, ``*.tar.zst``, ``*.tar.bz2``, ``*.tar.xz`` objects, listed). Remote plain tars are indexed from their headers
and metadata members in coalesced range requests (payloads not fetched). The S3 endpoint,
region and addressing are ``s3_endpoint``, ``s3_region``, ``s3_addressing`` ("path" or
"virtual"), else ``$AWS_ENDPOINT_URL`` and ``$AWS_REGION`` (adaptiveload.storage); the index
records them (StreamDataset and ``adaptiveload verify`` take them as their defaults). Keys come
from ``$AWS_ACCESS_KEY_ID``, ``$AWS_SECRET_ACCESS_KEY``, ``$AWS_SESSION_TOKEN`` and are never
stored.
"""

import ctypes

from . import _lib
from . import _structs as S
from ._args import path_arg, whole
from .storage import storage_args


def _expand(arg, storage):
    """One SHARD argument as the list of shards it names."""
    out = ctypes.POINTER(ctypes.c_void_p)()
    n = ctypes.c_size_t(0)
    lib = _lib.lib()
    st = S.StorageOptions(*storage)
    _lib.check(lib.al_shard_expand_storage(_lib.encode_path(arg, "shards"), ctypes.byref(st), ctypes.byref(out),
                                           ctypes.byref(n)),
               "index: shard %s" % _lib.redact(arg))
    try:
        return [ctypes.string_at(out[i]) for i in range(n.value)]
    finally:
        for i in range(n.value):
            _lib.c_free(out[i])
        _lib.c_free(out)


def build_index(shards, out, s3_endpoint=None, threads=0, strict=False, remote_timeout=None, s3_region=None,
                s3_addressing=None):
    """Indexes ``shards`` (a SHARD argument or a list of them, see the module) into the index file
    ``out`` and returns the build's figures as a dict: shards, samples, rejected, bytes,
    seconds, bytes_read, warnings, remote_shards, remote_requests, remote_bytes, and
    ``remote``: [{"url", "requests", "bytes"}] per remote shard. ``threads`` 0: all cores (at
    least 8 with remote shards); ``remote_timeout``: seconds one remote operation (a HEAD, a
    read, a listing page) may take as a whole, retries included (default 60). Rejected samples and shards (an unreachable server, a 403, a missing or
    non-tar object: each names its URL) are in the index (``adaptiveload inspect OUT
    --rejected``); adaptiveload.Error when no shard could be read or, with ``strict``, when
    anything was rejected (the index file is written first, as the CLI does), or for a bad
    pattern or a failed listing."""
    if isinstance(shards, (str, bytes)) or not hasattr(shards, "__iter__"):
        shards = [shards]
    args = [path_arg("shards", s) for s in shards]
    if not args:
        raise ValueError("shards must name at least one shard")
    out = path_arg("out", out)
    threads = whole("threads", threads, 0, 4096)
    storage = storage_args(s3_endpoint, s3_region, s3_addressing, remote_timeout)
    paths = [p for a in args for p in _expand(a, storage)]
    lib = _lib.lib()
    opts = S.IndexOptions()
    opts.threads = threads
    opts.strict = 1 if strict else 0
    opts.progress = -1
    opts.s3_endpoint = storage.s3_endpoint
    opts.s3_region = storage.s3_region
    opts.s3_addressing = storage.s3_addressing
    opts.remote_timeout_s = storage.remote_timeout_s
    io = (S.ShardIo * len(paths))()
    opts.shard_io = ctypes.cast(io, ctypes.c_void_p)
    stats = S.IndexStats()
    arr = (ctypes.c_char_p * len(paths))(*paths)
    handle = ctypes.c_void_p()
    rc = lib.al_index_build(ctypes.byref(handle), arr, len(paths), ctypes.byref(opts), ctypes.byref(stats))
    if not handle.value:
        _lib.check(rc, "index")
    try:
        err = _lib.error(rc, "index") if rc < 0 else None
        _lib.check(lib.al_index_save(handle, _lib.encode_path(out, "out")), "index: save %s" % out)
    finally:
        lib.al_index_free(handle)
    if err is not None:
        raise err
    result = {name: getattr(stats, name) for name, _ in S.IndexStats._fields_}
    result["remote"] = [{"url": paths[i].decode(errors="replace"), "requests": io[i].requests, "bytes": io[i].bytes}
                        for i in range(len(paths)) if _is_url(paths[i])]
    return result


def _is_url(p):
    return p.lower().startswith((b"http://", b"https://", b"s3://"))
