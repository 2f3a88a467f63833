"""Ulysses sequence parallelism (SP) for one micro-batch: this rank's token shard and the
all-to-alls that move attention between a token split and a head split.

A micro-batch given to an SP group of degree d (ranks ``sp_ranks``, this one at position
``sp_rank``) is processed by all d ranks: rank j holds the contiguous slice
[j N / d, (j+1) N / d) of the packed sequence of N tokens (:func:`token_range`, the stream's
``sp_token_range``). Linear layers, norms and the loss run on that slice; before
self-attention :func:`sequence_to_heads` exchanges q, k, v so that each rank holds all N
tokens for H / d heads, and :func:`heads_to_sequence` returns the attention output to the
token split (four all-to-alls forward, four backward per block)::

    shard = adaptiveload.sp.Shard(group, degree, rank_in_group, n_tokens)
    q_all = adaptiveload.sp.sequence_to_heads(q_local, shard)   # (hi - lo, H, hd) -> (N, H / d, hd)
    o_loc = adaptiveload.sp.heads_to_sequence(o_all, shard)     # (N, H / d, hd) -> (hi - lo, H, hd)

Both are autograd functions: the backward of one is the other (each rank's gradient for
the rows and heads it sent comes back to it). They use ``torch.distributed.all_to_all_single``
with split sizes, which NCCL and gloo both implement (slices differ by at most one token when
d does not divide N). The ranks of a group hold the same parameters: every rank's parameter
gradient is that of its own tokens' loss, including through the other ranks' attention, so
summing (or averaging, with the loss scaled by the world size) over the ranks gives the
gradient of the whole micro-batch's loss (python/README.md, "Sequence parallelism").
"""

__all__ = ["token_range", "Shard", "sequence_to_heads", "heads_to_sequence"]


def token_range(n_tokens, degree, rank):
    """[lo, hi) of the packed sequence of ``n_tokens`` held by position ``rank`` of an SP group
    of ``degree``: lo = rank n / d, hi = (rank + 1) n / d (floors), the stream's shard rule."""
    for name, v in (("n_tokens", n_tokens), ("degree", degree), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError("token_range: %s must be an int >= 0, not %r" % (name, v))
    if degree < 1 or rank >= degree:
        raise ValueError("token_range: rank %d of degree %d (need 0 <= rank < degree, degree >= 1)" % (rank, degree))
    return rank * n_tokens // degree, (rank + 1) * n_tokens // degree


class Shard:
    """This rank's part of one micro-batch under SP: the group (a torch.distributed process
    group; None for degree 1), its ``degree``, this rank's position ``rank`` in it, the
    micro-batch's ``n_tokens`` and the token range ``lo``, ``hi`` held here (default: the
    :func:`token_range` rule; ``held``, the stream's ``sp_token_range``, is checked against it). ``splits``: every
    position's slice length, in group order (what the all-to-alls exchange)."""

    def __init__(self, group, degree, rank, n_tokens, held=None):
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError("Shard: degree must be an int >= 1, not %r" % (degree,))
        if degree > 1 and group is None:
            raise ValueError("Shard: degree %d needs a process group (adaptiveload.training.sp_groups)" % degree)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < degree:
            raise ValueError("Shard: rank %r is not a position in a group of degree %d" % (rank, degree))
        if n_tokens < degree:
            raise ValueError("Shard: %d tokens cannot be split over %d SP ranks" % (n_tokens, degree))
        self.group, self.degree, self.rank, self.n_tokens = group, degree, rank, int(n_tokens)
        bounds = [token_range(int(n_tokens), degree, j) for j in range(degree)]
        self.lo, self.hi = bounds[rank]
        if held is not None and tuple(int(v) for v in held) != (self.lo, self.hi):
            raise ValueError("Shard: token range %r of SP rank %d of %d over %d tokens; the shard rule gives %r"
                             % (tuple(held), rank, degree, n_tokens, (self.lo, self.hi)))
        self.splits = [b - a for a, b in bounds]

    @property
    def tokens(self):
        """Tokens held here (hi - lo)."""
        return self.hi - self.lo

    def __repr__(self):
        return "Shard(degree=%d, rank=%d, tokens [%d, %d) of %d)" % (self.degree, self.rank, self.lo, self.hi,
                                                                      self.n_tokens)


def _all_to_all(x, out_rows, in_rows, group):
    """all_to_all_single along dim 0 of x (rows, ...), sending in_rows[i] rows to position i
    and receiving out_rows[i] from it."""
    import torch.distributed as dist

    out = x.new_empty((sum(out_rows),) + tuple(x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), output_split_sizes=list(out_rows), input_split_sizes=list(in_rows),
                           group=group)
    return out


def _seq_to_heads(x, shard):
    # x (n_j, H, hd): head block i goes to position i; rows arrive from every position in order
    n, h, hd = x.shape
    d = shard.degree
    send = x.reshape(n, d, h // d, hd).transpose(0, 1).reshape(d * n, h // d, hd)
    return _all_to_all(send, shard.splits, [n] * d, shard.group)


def _heads_to_seq(y, shard):
    # y (N, H/d, hd): position i's rows go back to it; head blocks arrive in position order
    d = shard.degree
    n = shard.tokens
    got = _all_to_all(y, [n] * d, shard.splits, shard.group)  # (d * n, H/d, hd)
    return got.reshape(d, n, y.shape[1], y.shape[2]).transpose(0, 1).reshape(n, d * y.shape[1], y.shape[2])


def _function():
    import torch

    class SeqToHeads(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, shard):
            ctx.shard = shard
            return _seq_to_heads(x, shard)

        @staticmethod
        def backward(ctx, g):
            return _heads_to_seq(g, ctx.shard), None

    class HeadsToSeq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y, shard):
            ctx.shard = shard
            return _heads_to_seq(y, shard)

        @staticmethod
        def backward(ctx, g):
            return _seq_to_heads(g, ctx.shard), None

    return SeqToHeads, HeadsToSeq


_FUNCTIONS = []


def _functions():
    if not _FUNCTIONS:
        _FUNCTIONS.extend(_function())
    return _FUNCTIONS


def _check(x, shard, rows, what):
    if x.dim() != 3:
        raise ValueError("%s: expected (rows, heads, head_dim), got shape %s" % (what, tuple(x.shape)))
    if x.shape[0] != rows:
        raise ValueError("%s: %d rows, this rank's shard needs %d (%r)" % (what, x.shape[0], rows, shard))


def sequence_to_heads(x, shard):
    """(shard.tokens, H, hd) -> (shard.n_tokens, H / d, hd): all the micro-batch's tokens for
    this rank's H / d heads (heads [rank H / d, (rank + 1) H / d)). Degree 1: x itself."""
    if shard.degree == 1:
        return x
    _check(x, shard, shard.tokens, "sequence_to_heads")
    if x.shape[1] % shard.degree:
        raise ValueError("sequence_to_heads: %d heads are not divisible by SP degree %d" % (x.shape[1],
                                                                                           shard.degree))
    return _functions()[0].apply(x, shard)


def heads_to_sequence(y, shard):
    """(shard.n_tokens, H / d, hd) -> (shard.tokens, H, hd): the inverse of
    :func:`sequence_to_heads`. Degree 1: y itself."""
    if shard.degree == 1:
        return y
    _check(y, shard, shard.n_tokens, "heads_to_sequence")
    return _functions()[1].apply(y, shard)
