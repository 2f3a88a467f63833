"""IndexDataset: map-style access to single samples of an index (for BatchSampler),
and collate_packed, which packs a list of samples like the C stream does.

``dataset[i]`` reads index position ``i``'s payload member (``KEY.<ext>``, or
``KEY.<ext>.lz4`` decoded) through the C library, with the same checks as the stream
(shard size and mtime unchanged since indexing, no short read, valid LZ4), and
returns a dict: ``key``, ``index``, ``data`` (uint8 tensor), ``shape`` (width, height,
frames). Errors raise :class:`adaptiveload.StreamError` naming the shard and key.
"""

import ctypes
import os

import torch
from torch.utils.data import Dataset

from . import _stream_lib as L

ALIGN = 64


def wan_tokens(width, height, frames, vae_stride_t=4, vae_stride_s=8, patch_t=1, patch_h=2, patch_w=2):
    """Tokens of one sample after the VAE and patchify (Wan 2.1 defaults, as the planner)."""
    t = 1 + (frames - 1) // vae_stride_t
    return (t // patch_t) * (height // (vae_stride_s * patch_h)) * (width // (vae_stride_s * patch_w))


class IndexDataset(Dataset):
    """Map-style dataset over an index file; ``len`` is the number of indexed samples."""

    def __init__(self, index, ext="latent"):
        self.index_path = os.fspath(index)
        self.ext = ext
        self._idx = None
        self._len = len(self._index())

    def _index(self):
        pid = os.getpid()
        if self._idx is None or self._idx[0] != pid:  # one C index per process (DataLoader workers)
            self._idx = (pid, L.Index(self.index_path))
        return self._idx[1]

    def __len__(self):
        return self._len

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_idx"] = None  # C handles do not travel to spawned workers
        return d

    def __getitem__(self, i):
        if not 0 <= i < self._len:
            raise IndexError("sample %d out of range (%d)" % (i, self._len))
        idx = self._index()
        lib = L.lib()
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        L.check(lib.al_stream_read_sample(idx.handle, i, self.ext.encode(), ctypes.byref(p), ctypes.byref(n)),
                "reading sample %d" % i)
        try:
            data = torch.empty(n.value, dtype=torch.uint8)
            if n.value:
                ctypes.memmove(data.data_ptr(), p.value, n.value)
        finally:
            lib.al_stream_free(p)
        info = idx.sample(i)
        return {
            "key": info.key.decode("utf-8", "replace"),
            "index": i,
            "data": data,
            "shape": (info.width, info.height, info.frames),
        }


def collate_packed(samples, tokens_fn=None):
    """Packs IndexDataset items into one dict like a stream batch: ``data`` (uint8,
    samples at 64-byte offsets), ``offsets`` (int64, n+1), ``sizes``, ``cu_seqlens``
    (int32, n+1, tokens from ``tokens_fn(width, height, frames)``, default
    :func:`wan_tokens`), ``shapes`` (int32 n x 3), ``keys``, ``index``."""
    tokens_fn = tokens_fn or wan_tokens
    offsets, at = [], 0
    for s in samples:
        offsets.append(at)
        at = (at + s["data"].numel() + ALIGN - 1) // ALIGN * ALIGN
    data = torch.zeros(at, dtype=torch.uint8)
    for o, s in zip(offsets, samples):
        data[o:o + s["data"].numel()] = s["data"]
    sizes = [s["data"].numel() for s in samples]
    end = offsets[-1] + sizes[-1] if samples else 0
    cu = [0]
    for s in samples:
        cu.append(cu[-1] + int(tokens_fn(*s["shape"])))
    return {
        "data": data,
        "offsets": torch.tensor(offsets + [end], dtype=torch.int64),
        "sizes": torch.tensor(sizes, dtype=torch.int64),
        "cu_seqlens": torch.tensor(cu, dtype=torch.int32),
        "shapes": torch.tensor([list(s["shape"]) for s in samples], dtype=torch.int32).view(-1, 3),
        "keys": [s["key"] for s in samples],
        "index": torch.tensor([s["index"] for s in samples], dtype=torch.int64),
    }
