"""Typed sample members in Python: the same rules as the C stream (stream/README.md).

* :func:`header_kind` / :func:`parse_header`: the header of a ``.npy`` (format 1.0, 2.0,
  3.0) or ``.safetensors`` member (one tensor), possibly stored as ``.lz4`` (the C library
  hands over decoded bytes): numpy dtype name, shape and where the array data starts, read
  by the C library's parser (the index's and the stream's).
* :func:`is_latent`: the latent rule on a member name (the C library's al_member_is_latent).
* :func:`sample_latent`: whether a member of one sample is the latent the index recorded (what
  the stream crops), through the C library.
* :func:`default_member`: the index's default payload member (its typed latent, else "latent").
* :func:`members_known` / :func:`check_members`: the members a run asks for against the index
  (a member no sample has; samples lacking one), as the stream checks them at open.
* :func:`torch_dtype`: numpy dtype name -> torch dtype.

Used by :class:`adaptiveload.IndexDataset`, :func:`adaptiveload.collate_packed` and
:meth:`adaptiveload.PackedBatch.tensors`.
"""

import ctypes

import torch

from . import _lib
from . import _structs as S
from ._args import no_nul
from ._handles import Index

ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
            "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def header_kind(ext):
    """"npy", "safetensors" or None for a member extension ("latent.npy", "t5.npy.lz4"), by the
    library's rule (al_member_is_typed)."""
    if not _lib.lib().al_member_is_typed(_lib.encode_text(str(ext), "member")):
        return None
    parts = ext.split(".")
    return parts[-2] if parts[-1] == "lz4" else parts[-1]


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


def parse_header(name, blob, member_size=None):
    """(dtype name, shape tuple, data offset) of the typed member ``name`` ("latent.npy") whose
    decoded bytes begin with ``blob`` (``member_size`` of them in all; default len(blob)),
    parsed by the library's reader (al_tensor_header_parse), so that Python takes what the
    index and the stream take. ValueError with the library's message for a bad header."""
    blob = bytes(blob)
    size = len(blob) if member_size is None else int(member_size)
    h, need = S.TensorHeader(), ctypes.c_size_t()
    lib = _lib.lib()
    rc = lib.al_tensor_header_parse(_lib.encode_text(str(name), "member"), blob, len(blob), size, ctypes.byref(h),
                                    ctypes.byref(need))
    if rc == _lib.status("AL_ERANGE") and need.value > len(blob):
        raise ValueError("header needs %d bytes, %d given" % (need.value, len(blob)))
    if rc:
        raise ValueError(_lib.last_error())
    return h.dtype.decode(), tuple(int(h.shape[i]) for i in range(h.ndim)), int(h.data_offset)


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
