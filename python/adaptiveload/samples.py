"""The samples of an index by position, and a loaded latent cut to its planned bucket: what a
map-style Dataset of one's own needs when :class:`adaptiveload.BatchSampler` drives it::

    samples = adaptiveload.SampleIndex("corpus.alidx")
    sampler = adaptiveload.BatchSampler(planner, with_info=True)   # yields [(position, info), ...]

    class MyDataset(torch.utils.data.Dataset):
        def __getitem__(self, item):
            position, info = item
            s = samples[position]              # key, shard, members (offset, size, dtype, shape)
            lat = my_decode(s.shard, s.members["latent.npy"])        # (C, T, H, W), any dtype
            lat = adaptiveload.crop_to_bucket(lat, info)             # the planned grid
            return adaptiveload.bucket_tokens(lat, info)             # (tokens, C*4), as planned

* :class:`SampleIndex` opens the index once per process (DataLoader workers included: it
  pickles as its path and reopens), ``len`` is the number of samples, ``samples[i]`` a
  :class:`Sample`; ``key(i)`` the key alone. A position out of range raises IndexError, one
  that is not an integer TypeError, both naming the position.
* :func:`crop_to_bucket`: a (C, T, H, W) or (C, H, W) latent cropped to the latent grid of
  the bucket the plan put the sample in (``info["bucket_shape"]`` of ``with_info=True``, or a
  (width, height, frames) tuple): channels whole, frames [0, T_b), rows and columns centred.
  It is the crop the C stream applies to typed latents (adaptiveload.latents, one rule), so a
  Dataset of one's own delivers the tokens the manifest counted.
* :func:`bucket_tokens`: the same, patchified (Wan 2.1's 1 x 2 x 2 by default) into
  (tokens, C * p_t * p_h * p_w): ``len`` equals the planned tokens of the sample.
"""

import collections
import operator
import os

from . import _constants as C
from . import _lib
from . import _structs as S
from ._args import path_arg, whole
from ._handles import Index, root_pairs
from .latents import crop_latent, latent_grid, patchify

__all__ = ["SampleIndex", "Sample", "Member", "crop_to_bucket", "bucket_tokens"]

Sample = collections.namedtuple("Sample", "position key shard width height frames fps members")
Sample.__doc__ = """One indexed sample: its index position, key, the path or URL of its shard,
width, height and frames (1 for an image) and fps (0 when unknown) as indexed, and its members
by extension (an ordered dict of :class:`Member`)."""

Member = collections.namedtuple("Member", "name offset size lz4 dtype shape")
Member.__doc__ = """One member of a sample: its extension ("latent.npy", "json", ...), the byte
offset of its data in the (uncompressed) tar stream, its stored size, whether it is an LZ4
frame, and for a typed member (.npy, .safetensors) the dtype and shape its header said when
indexed (None, None otherwise)."""


class SampleIndex:
    """The samples of the index at ``index`` by position. ``root``: the corpus moved, "FROM=TO",
    {FROM: TO} or a list of them (as ``adaptiveload stream --root``)."""

    def __init__(self, index, root=None):
        self.index_path = path_arg("index", index)
        self.root = root_pairs(root)
        self._idx = None
        self._len = len(self._index())

    def _index(self):
        pid = os.getpid()
        if self._idx is None or self._idx[0] != pid:  # one C index per process (DataLoader workers)
            self._idx = (pid, Index(self.index_path, root=self.root))
        return self._idx[1]

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_idx"] = None  # C handles do not travel to spawned workers
        return d

    def __len__(self):
        return self._len

    def _position(self, position):
        try:
            i = operator.index(position)
        except TypeError:
            raise TypeError("SampleIndex position must be an integer, not %r" % (position,)) from None
        if not 0 <= i < self._len:
            raise IndexError("sample position %d out of range (%s has %d samples)" % (i, self.index_path, self._len))
        return i

    def key(self, position):
        """The sample key at ``position``."""
        return self._index().sample(self._position(position)).key.decode("utf-8", "replace")

    def __getitem__(self, position):
        i = self._position(position)
        idx = self._index()
        lib = _lib.lib()
        si = idx.sample(i)
        sh = S.ShardInfo()
        _lib.check(lib.al_index_shard(idx.handle, si.shard, sh), "index %s: shard %d" % (self.index_path, si.shard))
        members = collections.OrderedDict()
        for m in range(si.n_members):
            mi = S.MemberInfo()
            _lib.check(lib.al_index_member(idx.handle, i, m, mi), "index %s: sample %d member %d" % (
                self.index_path, i, m))
            mt = S.MemberType()
            typed = lib.al_index_member_type(idx.handle, i, m, mt) == C.AL_OK
            name = mi.ext.decode("utf-8", "replace")
            members[name] = Member(name, mi.offset, mi.size, bool(mi.lz4), mt.dtype.decode() if typed else None,
                                   tuple(mt.shape[:mt.ndim]) if typed else None)
        return Sample(i, si.key.decode("utf-8", "replace"), sh.path.decode("utf-8", "replace"), si.width, si.height,
                      si.frames, si.fps, members)


def _bucket_grid(bucket, vae_stride_t, vae_stride_s):
    if isinstance(bucket, dict):
        if "bucket_shape" not in bucket:
            raise TypeError("bucket: a with_info dict holds 'bucket_shape'; this one has %s" % sorted(bucket))
        bucket = bucket["bucket_shape"]
    try:
        w, h, f = (whole("bucket " + n, v, 1) for n, v in zip(("width", "height", "frames"), tuple(bucket)[:3]))
    except (TypeError, ValueError) as e:
        raise type(e)("bucket must be BatchSampler's info or (width, height, frames): %s" % e) from None
    return latent_grid(w, h, f, vae_stride_t=whole("vae_stride_t", vae_stride_t, 1),
                       vae_stride_s=whole("vae_stride_s", vae_stride_s, 1))


def crop_to_bucket(latent, bucket, vae_stride_t=4, vae_stride_s=8):
    """``latent`` ((C, T, H, W) or (C, H, W) tensor) cropped to the latent grid of ``bucket``
    (BatchSampler's ``info``, or (width, height, frames)), contiguous; the C stream's crop.
    ValueError when the latent is smaller than the grid."""
    return crop_latent(latent, _bucket_grid(bucket, vae_stride_t, vae_stride_s))


def bucket_tokens(latent, bucket, patch=(1, 2, 2), vae_stride_t=4, vae_stride_s=8):
    """:func:`crop_to_bucket`, then patchified into (tokens, C * p_t * p_h * p_w) (tokens in
    (t, y, x) order, features (c, dt, dy, dx): Wan 2.1's patch embedding)."""
    return patchify(crop_to_bucket(latent, bucket, vae_stride_t, vae_stride_s), patch).contiguous()
