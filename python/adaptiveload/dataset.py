"""IndexDataset: map-style access to single samples of an index (for BatchSampler),
and collate_packed, which packs a list of samples like the C stream does.

``dataset[i]`` reads index position ``i``'s payload member (``KEY.<ext>``, or
``KEY.<ext>.lz4`` decoded) through the C library, with the same checks as the stream
(shard size and content fingerprint as indexed, no short read, valid LZ4), and
returns a dict: ``key``, ``index``, ``data`` (uint8 tensor), ``shape`` (width, height,
frames). Errors raise :class:`adaptiveload.Error` naming the shard and key.

Positions from :class:`adaptiveload.BatchSampler` carry their manifest's index fingerprint:
an item of a manifest planned from another index (the same shards listed in another order,
say) raises ValueError naming the manifest and this index before anything is read.

With ``members=[...]`` each item also holds ``members``: name -> {dtype, shape, typed,
cropped, data (uint8, the array bytes without header)}, and ``data`` is the first
member's. Given ``(i, info)`` pairs (``BatchSampler(..., with_info=True)``), the typed
latent member is cropped to the bucket's latent grid exactly as the C stream crops it,
the item carries the planned ``tokens``, ``padded`` and the micro-batch fields, and
:func:`collate_packed` makes the batch the stream would deliver (tested against it in
tests/python/test_python.py).

Sequence parallelism: every rank of a group gets the group's whole micro-batch from
BatchSampler, so ``collate_packed`` gives each rank the whole packed batch (what
``StreamDataset(sp_shard=False)`` delivers), with ``sp_degree``, ``sp_rank`` and ``sp_ranks``
among the micro-batch fields; the model takes its shard of the tokens itself (rank j of d:
tokens [j N // d, (j + 1) N // d) of the N packed tokens, as ``sp_shard=True`` would deliver).
"""

import ctypes
import operator
import os
from collections.abc import Mapping

import torch
from torch.utils.data import Dataset

from . import _lib
from . import _structs as S
from . import members as M
from ._args import U32_MAX, no_nul, path_arg, whole
from ._handles import Index, root_pairs
from .latents import crop_latent, latent_grid, wan_tokens

ALIGN = 64


def _position_info(info):
    """The info of a ``(position, info)`` pair (BatchSampler(with_info=True)), checked for what
    IndexDataset reads of it: ``bucket_shape`` (width, height, frames), ``tokens`` and
    ``padded``; TypeError / ValueError naming the position's info and the key."""
    if not isinstance(info, Mapping):
        raise TypeError("IndexDataset position info must be a dict (BatchSampler(with_info=True) yields "
                        "(position, info) pairs), not %r" % (info,))
    missing = [k for k in ("bucket_shape", "tokens", "padded") if k not in info]
    if missing:
        raise ValueError("IndexDataset position info lacks %s (BatchSampler(with_info=True) gives every key), "
                         "got keys %r" % (", ".join(repr(k) for k in missing), sorted(map(str, info))))
    shape = info["bucket_shape"]
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__") or len(shape) != 3:
        raise ValueError("IndexDataset position info['bucket_shape'] must be (width, height, frames), not %r"
                         % (shape,))
    for k, v in zip(("width", "height", "frames"), shape):
        whole("IndexDataset position info['bucket_shape'] %s" % k, v, 1, U32_MAX)
    whole("IndexDataset position info['tokens']", info["tokens"])
    return info


class IndexDataset(Dataset):
    """Map-style dataset over an index file; ``len`` is the number of indexed samples.

    Args:
        index: index file.
        ext: the payload member when ``members`` is None; None = the index's typed latent
            member (``latent.npy``, ...), else ``latent``.
        members: member extensions to read per sample (e.g. ``["latent.npy", "t5.npy", "txt"]``;
            a string is one member);
            a member no sample of the index has raises here, naming what the index has. A
            sample's latent (the member the index recorded as such, the one the stream crops)
            is cropped to its bucket's grid.
        vae_stride_t, vae_stride_s: the latent geometry the crop uses (the planner's; Wan 2.1
            defaults, as the C stream assumes).
        root: the corpus moved: "FROM=TO", {FROM: TO} or a list of them (as
            ``adaptiveload stream --root``).

    ``dataset[p]``: ``p`` an index position, or a ``(position, info)`` pair of
    ``BatchSampler(with_info=True)``; an info that is not a dict holding ``bucket_shape``
    (width, height, frames), ``tokens`` and ``padded`` raises TypeError / ValueError naming
    the key.
    """

    def __init__(self, index, ext=None, members=None, vae_stride_t=4, vae_stride_s=8, root=None):
        self.index_path = path_arg("index", index)
        self.root = root_pairs(root)
        self.members = M.member_names(members)
        self.vae_stride_t = whole("vae_stride_t", vae_stride_t, 1, U32_MAX)
        self.vae_stride_s = whole("vae_stride_s", vae_stride_s, 1, U32_MAX)
        self._idx = None
        self._len = len(self._index())
        self._checked = None  # the last PlanOrigin found to be planned from this index
        if ext is not None and not isinstance(ext, str):
            raise TypeError("ext must be a member extension (str) or None, not %r" % (ext,))
        self.ext = no_nul("ext", ext) if ext else M.default_member(self._index())
        M.members_known(self._index(), self.members or [self.ext])  # a misspelt member raises here

    def _index(self):
        pid = os.getpid()
        if self._idx is None or self._idx[0] != pid:  # one C index per process (DataLoader workers)
            self._idx = (pid, Index(self.index_path, root=self.root))
        return self._idx[1]

    def __len__(self):
        return self._len

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_idx"] = None  # C handles do not travel to spawned workers
        return d

    def _read(self, i, ext):
        lib = _lib.lib()
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(lib.al_stream_read_sample(self._index().handle, i, _lib.encode_text(ext, "ext"), ctypes.byref(p),
                                             ctypes.byref(n)), "reading sample %d" % i)
        try:
            data = torch.empty(n.value, dtype=torch.uint8)
            if n.value:
                ctypes.memmove(data.data_ptr(), p.value, n.value)
        finally:
            lib.al_stream_free(p)
        return data

    def _member(self, i, key, name, grid):
        raw = self._read(i, name)
        kind = M.header_kind(name)
        if kind is None:
            return {"dtype": "uint8", "shape": (raw.numel(),), "typed": False, "cropped": False, "data": raw}
        try:
            dtype, shape, at = M.parse_header(name, bytes(raw[:1 << 20].numpy()), raw.numel())
        except ValueError as e:
            raise _lib.Error(_lib.status("AL_EFORMAT"), "key '%s' member '%s.%s': %s" % (key, key, name, e))
        data = raw[at:]
        cropped = False
        if grid is not None and M.sample_latent(self._index(), i, name):
            # Crop the bytes through an integer view of the same width (any dtype, NaNs kept).
            isz = M.ITEMSIZE[dtype]
            iview = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[isz]
            try:
                lat = crop_latent(data.view(iview).view(shape), grid)
            except ValueError as e:
                raise _lib.Error(_lib.status("AL_ERANGE"), "key '%s' member '%s.%s': %s" % (key, key, name, e))
            shape = tuple(lat.shape)
            data = lat.reshape(-1).view(torch.uint8)
            cropped = True
        return {"dtype": dtype, "shape": tuple(shape), "typed": True, "cropped": cropped, "data": data}

    def _check_origin(self, origin):
        """Refuses positions of a manifest planned from another index (as the C stream does)."""
        fp = self._index().fingerprint()
        if origin.index_fingerprint != fp:
            raise ValueError("manifest %s was planned from another index (index fingerprint %016x in the manifest, "
                             "%016x in %s): plan again from this index, or give IndexDataset the index the manifest "
                             "was planned from" % (origin.manifest, origin.index_fingerprint, fp, self.index_path))
        self._checked = origin

    def __getitem__(self, i):
        info = None
        if isinstance(i, tuple):
            if len(i) != 2:
                raise TypeError("IndexDataset position must be an integer or a (position, info) pair, not %r" % (i,))
            i, info = i
            info = _position_info(info)
        try:
            operator.index(i)
        except TypeError:
            raise TypeError("IndexDataset position must be an integer, not %r" % (i,)) from None
        origin = getattr(i, "origin", None)  # BatchSampler's positions say which plan they are from
        if origin is not None and origin != self._checked:
            self._check_origin(origin)
        if not 0 <= i < self._len:
            raise IndexError("sample %d out of range (%d)" % (i, self._len))
        si = self._index().sample(i)
        key = si.key.decode("utf-8", "replace")
        item = {"key": key, "index": i, "shape": (si.width, si.height, si.frames)}
        grid = None
        if info is not None:
            grid = latent_grid(*info["bucket_shape"], vae_stride_t=self.vae_stride_t, vae_stride_s=self.vae_stride_s)
        if self.members is None:
            item["data"] = self._read(i, self.ext)
        else:
            item["members"] = {name: self._member(i, key, name, grid) for name in self.members}
            item["data"] = item["members"][self.members[0]]["data"]
        if info is not None:
            item["batch"] = dict({k: v for k, v in info.items() if k not in ("tokens", "padded")}, grid=grid)
            item["tokens"] = info["tokens"]
            item["padded"] = info["padded"]
        return item


def collate_packed(samples, tokens_fn=None):
    """Packs IndexDataset items into one dict like a stream batch: ``data`` (uint8,
    samples at 64-byte offsets, each sample's members one after the other), ``offsets``
    (int64, n+1: the first member's, then the payload end), ``sizes``, ``cu_seqlens``
    (int32, n+1: the planned tokens when the items carry them (``with_info``), else
    ``tokens_fn(width, height, frames)``, default :func:`wan_tokens`), ``shapes`` (int32
    n x 3), ``keys``, ``index``; with members, ``members``: name -> {dtype, shapes,
    offsets, sizes, typed, cropped}; with ``with_info`` items, ``padded`` and the
    micro-batch fields (position, step, micro, n_micro, last_in_step, bucket, step_samples,
    step_tokens, tokens, grid, and the group: sp_degree, sp_rank, sp_ranks; the group's whole
    micro-batch, see "Sequence parallelism" above). :func:`member_tensors` gives the typed per-sample tensors."""
    tokens_fn = tokens_fn or wan_tokens
    names = list(samples[0]["members"]) if samples and "members" in samples[0] else None
    parts = [[s["members"][n]["data"] for n in names] if names else [s["data"]] for s in samples]
    offs, at, end = [], 0, 0
    for ps in parts:
        row = []
        for t in ps:
            row.append(at)
            end = at + t.numel()
            at = (end + ALIGN - 1) // ALIGN * ALIGN
        offs.append(row)
    data = torch.zeros(at, dtype=torch.uint8)
    for row, ps in zip(offs, parts):
        for o, t in zip(row, ps):
            data[o:o + t.numel()] = t
    sizes = [ps[0].numel() for ps in parts]
    cu = [0]
    for s in samples:
        cu.append(cu[-1] + int(s["tokens"] if "tokens" in s else tokens_fn(*s["shape"])))
    out = {
        "data": data,
        "offsets": torch.tensor([r[0] for r in offs] + [end], dtype=torch.int64),
        "sizes": torch.tensor(sizes, dtype=torch.int64),
        "cu_seqlens": torch.tensor(cu, dtype=torch.int32),
        "shapes": torch.tensor([list(s["shape"]) for s in samples], dtype=torch.int32).view(-1, 3),
        "keys": [s["key"] for s in samples],
        "index": torch.tensor([s["index"] for s in samples], dtype=torch.int64),
    }
    if names:
        out["members"] = {
            n: {
                "dtype": samples[0]["members"][n]["dtype"],
                "typed": samples[0]["members"][n]["typed"],
                "cropped": samples[0]["members"][n]["cropped"],
                "shapes": [tuple(s["members"][n]["shape"]) for s in samples],
                "offsets": [r[j] for r in offs],
                "sizes": [p[j].numel() for p in parts],
            }
            for j, n in enumerate(names)
        }
    if samples and "batch" in samples[0]:
        b = samples[0]["batch"]
        out.update({k: b[k] for k in ("position", "step", "micro", "n_micro", "last_in_step", "bucket", "step_samples",
                                       "step_tokens")})
        out["tokens"] = cu[-1]
        out["padded"] = torch.tensor([bool(s["padded"]) for s in samples], dtype=torch.bool)
        out["grid"] = tuple(b["grid"])
        out["sp_degree"] = int(b.get("sp_degree", 1))
        out["sp_rank"] = int(b.get("sp_rank", 0))
        out["sp_ranks"] = tuple(b.get("sp_ranks", ()))
    return out


def member_tensors(batch, name):
    """Per-sample tensors of member ``name`` of a :func:`collate_packed` batch, typed and
    shaped as :meth:`adaptiveload.PackedBatch.tensors` gives them."""
    m = batch["members"][name]
    dt = M.torch_dtype(m["dtype"]) if m["typed"] else torch.uint8
    return [batch["data"][a:a + n].view(dt).view(shape) if m["typed"] else batch["data"][a:a + n]
            for shape, a, n in zip(m["shapes"], m["offsets"], m["sizes"])]
