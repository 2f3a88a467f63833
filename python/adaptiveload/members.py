"""Typed sample members in Python: the same rules as the C stream (stream/README.md).

* :func:`header_kind` / :func:`parse_header`: the header of a ``.npy`` (format 1.0, 2.0,
  3.0) or ``.safetensors`` member (one tensor), possibly stored as ``.lz4`` (the C library
  hands over decoded bytes): numpy dtype name, shape and where the array data starts.
* :func:`is_latent`: the latent rule on a member name (the C library's al_member_is_latent,
  mirrored; tests/python/test_members.py holds the two to one table of names).
* :func:`sample_latent`: whether a member of one sample is the latent the index recorded (what
  the stream crops), through the C library.
* :func:`default_member`: the index's default payload member (its typed latent, else "latent").
* :func:`members_known` / :func:`check_members`: the members a run asks for against the index
  (a member no sample has; samples lacking one), as the stream checks them at open.
* :func:`torch_dtype`: numpy dtype name -> torch dtype.

Used by :class:`adaptiveload.IndexDataset`, :func:`adaptiveload.collate_packed` and
:meth:`adaptiveload.PackedBatch.tensors`.
"""

import ast
import ctypes
import json
import re
import struct

import torch

from . import _lib
from ._args import no_nul
from ._handles import Index

_NPY_DESCR = {
    "|b1": "bool", "<b1": "bool", "|u1": "uint8", "<u1": "uint8", "|i1": "int8", "<i1": "int8",
    "<i2": "int16", "<u2": "uint16", "<i4": "int32", "<u4": "uint32", "<i8": "int64", "<u8": "uint64",
    "<f2": "float16", "<f4": "float32", "<f8": "float64",
}
_ST_DTYPE = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32",
    "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
    "F32": "float32", "F64": "float64",
}
_PY2_LONG = re.compile(r"(?<![\w'\"])(\d+)[lL]\b")
ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
            "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def header_kind(ext):
    """"npy", "safetensors" or None for a member extension ("latent.npy", "t5.npy.lz4")."""
    parts = ext.split(".")
    if parts and parts[-1] == "lz4":
        parts = parts[:-1]
    if parts and parts[-1] in ("npy", "safetensors"):
        return parts[-1]
    return None


def member_names(members):
    """The ``members=`` argument as a list of names: None (or empty) stays None, a string is
    one member ("latent.npy"), any other iterable lists them; ValueError when one repeats."""
    if not members:
        return None
    if isinstance(members, (str, bytes)):
        names = [members]
    else:
        try:
            names = list(members)
        except TypeError:
            raise TypeError("members must be a member name or a list of them, not %r" % (members,)) from None
    names = [m.decode() if isinstance(m, bytes) else str(m) for m in names]
    for k, m in enumerate(names):
        no_nul("members[%d]" % k, m)
    if len(set(names)) != len(names):
        raise ValueError("members lists a member twice: %r" % (names,))
    return names


def is_latent(name):
    """The latent rule (al_member_is_latent, loader/al_members.h): a member extension naming a
    latent starts with "latent" ("latent.npy", "latent_hr.npy"). A sample's latent is its first
    typed member so named; :func:`sample_latent` asks the index which one that is. Asked of
    the library, which owns the rule."""
    return bool(_lib.lib().al_member_is_latent(_lib.encode_text(str(name), "member")))


def sample_latent(index, i, name):
    """True when member ``name`` of sample ``i`` of ``index`` (an :class:`adaptiveload.Index`)
    is the sample's latent as the index recorded it: the member the stream crops."""
    r = _lib.lib().al_index_member_is_latent(index.handle, i, _lib.encode_text(str(name), "member"))
    _lib.check(min(r, 0), "index %s: sample %d member %s" % (index.path, i, name))
    return r == 1


def default_member(index):
    """The index's default payload member: the typed latent most samples have ("latent.npy",
    without ".lz4"), else "latent" (the raw member of ``adaptiveload synth``)."""
    buf = ctypes.create_string_buffer(256)
    r = _lib.lib().al_index_default_member(index.handle, buf, len(buf))
    if r == 0:
        return buf.value.decode()
    return "latent"


def members_known(index, members):
    """Raises :class:`adaptiveload.Error` when a member of ``members`` is in no sample of
    ``index`` (a misspelt name), naming it and the members the index has; else returns the
    names as a ctypes array and their count. Stops scanning once each is found."""
    names = [_lib.encode_text(str(m), "members") for m in members]
    arr = (ctypes.c_char_p * max(1, len(names)))(*names)
    _lib.check(_lib.lib().al_index_members_known(index.handle, arr, len(names)), "index %s: members" % index.path)
    return arr, len(names)


def check_members(index, members, samples=None, on_error="fail"):
    """Checks requested ``members`` against ``index`` (an :class:`adaptiveload.Index`), as the C
    stream does at open: a member no sample holds raises :class:`adaptiveload.Error` naming it
    and the index's members (whatever ``on_error``); samples of ``samples`` (index positions,
    default all) lacking one raise naming the first few under ``on_error="fail"``. Returns how
    many of them lack a member (``on_error="skip"``: they will be skipped)."""
    arr, n_names = members_known(index, members)
    lib = _lib.lib()
    pos = None
    n = 0
    if samples is not None:
        samples = [int(s) for s in samples]
        pos = (ctypes.c_uint64 * max(1, len(samples)))(*samples)
        n = len(samples)
    missing = ctypes.c_uint64(0)
    r = lib.al_index_require_members(index.handle, arr, n_names, pos, n, ctypes.byref(missing))
    if r != 0 and (on_error == "fail" or missing.value == 0):
        _lib.check(r, "index %s: members" % index.path)
    return int(missing.value)


def parse_header(kind, blob):
    """(dtype name, shape tuple, data offset) of a typed member's (decoded) bytes."""
    blob = bytes(blob[:1 << 20]) if not isinstance(blob, (bytes, bytearray)) else blob
    if kind == "npy":
        if blob[:6] != b"\x93NUMPY":
            raise ValueError("npy: bad magic")
        major = blob[6]
        if major == 1:
            (hlen,), start = struct.unpack("<H", blob[8:10]), 10
        elif major in (2, 3):
            (hlen,), start = struct.unpack("<I", blob[8:12]), 12
        else:
            raise ValueError("npy: version %d" % major)
        text = blob[start:start + hlen].decode("utf-8" if major == 3 else "latin1")
        # Python 2's numpy wrote long integers with an L suffix: {'shape': (16L, 5L), ...}; the C
        # reader takes them too.
        d = ast.literal_eval(_PY2_LONG.sub(r"\1", text))
        if d.get("fortran_order"):
            raise ValueError("npy: Fortran order")
        if d["descr"] not in _NPY_DESCR:
            raise ValueError("npy: dtype %r not supported" % (d["descr"],))
        return _NPY_DESCR[d["descr"]], tuple(int(x) for x in d["shape"]), start + hlen
    if kind == "safetensors":
        (hlen,) = struct.unpack("<Q", blob[:8])
        h = json.loads(blob[8:8 + hlen].decode("utf-8"))
        h.pop("__metadata__", None)
        if len(h) != 1:
            raise ValueError("safetensors: %d tensors, the stream takes one" % len(h))
        (t,) = h.values()
        return _ST_DTYPE[t["dtype"]], tuple(int(x) for x in t["shape"]), 8 + hlen + int(t["data_offsets"][0])
    raise ValueError("not a typed member kind: %r" % (kind,))


def check_schedule_members(sched, index_path, members):
    """:func:`check_members` (on_error="fail") over the samples of one rank's schedule
    (:class:`adaptiveload.schedule.Schedule`), loading the index at ``index_path``."""
    n = int(sched.first[sched.n_batches])
    check_members(Index(index_path), members, samples=list(sched.samples[:n]), on_error="fail")


def torch_dtype(name):
    """torch dtype of a numpy dtype name; TypeError when this torch lacks it (uint16/32/64
    before torch 2.3: take the bytes as uint8 instead)."""
    t = getattr(torch, name if name != "bool" else "bool", None)
    if not isinstance(t, torch.dtype):
        raise TypeError("torch %s has no dtype %s" % (torch.__version__, name))
    return t
