"""A Wan-2.1-like video diffusion transformer over packed variable-length batches.

The model of examples/train_dit.py and dev/e2e/replay.py; it takes what
``adaptiveload.StreamDataset`` delivers: every sample of a micro-batch patchified into
tokens and concatenated (no padding between samples), with ``cu_seqlens``.

    cfg = DiTConfig(blocks=2)                       # hidden 1536, 12 heads, FFN 8960 (Wan 2.1 1.3B)
    model = PackedDiT(cfg, attention=make_attention("auto", device), fused_adaln=True)
    pred = model(x, cu, grids, t, text, cu_text)    # x (tokens, 64): patchified latents

Per block (Wan 2.1's layout):

    h = AdaLN(x; shift1, scale1) -> self-attention (3D RoPE, q/k RMSNorm) -> x += gate1 * h
    h = LayerNorm(x) -> cross-attention over the sample's own text tokens -> x += h
    h = AdaLN(x; shift2, scale2) -> FFN (GELU tanh) -> x += gate2 * h

shift/scale/gate come from each sample's timestep embedding (per sample, broadcast over that
sample's tokens). AdaLN is ``adaptiveload.adaln`` (the fused CUDA kernel, packed with
cu_seqlens) when ``fused_adaln`` is set, else LayerNorm + modulate in PyTorch.

Attention backends (:func:`make_attention`), all exact (no padding, no cross-sample terms):

* ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` (flash, packed, cu_seqlens);
* ``flex``: FlexAttention with a document mask built from cu_seqlens (compiled);
* ``sdpa``: a loop over samples with ``scaled_dot_product_attention``; samples of equal
  lengths (every sample of one bucket) go in one batched call, which is the same maths;
* ``math``: the same loop written out (softmax(q k^T / sqrt(d)) v), for torch < 2.0.

Sequence parallelism (Ulysses): ``forward(..., sp=shard)`` with an ``adaptiveload.sp.Shard``
runs this rank's token slice [shard.lo, shard.hi) of the micro-batch (x holds those rows;
cu, grids, t, text describe the whole micro-batch): linear layers, AdaLN, cross-attention
(each row over its own sample's text) and the head on the slice; self-attention over all
tokens for heads / degree heads, between two all-to-alls (adaptiveload.sp). The output is the
slice's rows, equal to the same rows of the unsharded forward.

Positions: 3D RoPE per sample over its own (t, h, w) token grid (head dims split as in Wan:
d - 4 (d // 6) for time, 2 (d // 6) each for rows and columns), so a sample's encoding does
not depend on where it sits in the packed batch.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class DiTConfig:
    """Model sizes. Defaults: Wan 2.1 1.3B's block (hidden 1536, 12 heads, FFN 8960), 16
    latent channels, patch 1x2x2, 4096-d (umT5-XXL-like) text embeddings, 256-d frequency
    embedding of the timestep."""

    def __init__(self, hidden=1536, heads=12, ffn=8960, blocks=2, in_channels=16, patch=(1, 2, 2), text_dim=4096,
                 freq_dim=256, eps=1e-6):
        if hidden % heads:
            raise ValueError("hidden %d is not a multiple of heads %d" % (hidden, heads))
        if (hidden // heads) % 2 or (hidden // heads) < 8:
            raise ValueError("head dim %d must be even and >= 8 (3D RoPE)" % (hidden // heads))
        self.hidden, self.heads, self.ffn, self.blocks = hidden, heads, ffn, blocks
        self.in_channels, self.patch, self.text_dim = in_channels, tuple(patch), text_dim
        self.freq_dim, self.eps = freq_dim, eps

    @property
    def patch_dim(self):
        """Features of one token: C * p_t * p_h * p_w (64 for Wan)."""
        return self.in_channels * self.patch[0] * self.patch[1] * self.patch[2]

    @classmethod
    def smoke(cls, blocks=1):
        """The tiny CPU model of --smoke: hidden 64, 2 heads, FFN 128, text 32."""
        return cls(hidden=64, heads=2, ffn=128, blocks=blocks, text_dim=32, freq_dim=32)

    def as_dict(self):
        return {"hidden": self.hidden, "heads": self.heads, "ffn": self.ffn, "blocks": self.blocks,
                "in_channels": self.in_channels, "patch": list(self.patch), "text_dim": self.text_dim,
                "freq_dim": self.freq_dim}


# --------------------------------------------------------------------------------------------
# attention over packed sequences


def _lengths(cu):
    """Python list of per-sample lengths from a cu_seqlens tensor (one host sync)."""
    c = cu.tolist()
    return [c[i + 1] - c[i] for i in range(len(c) - 1)]


def _groups(lq, lk):
    """Runs of consecutive samples with equal (query, key) lengths: (first, count, lq, lk)."""
    out = []
    i = 0
    while i < len(lq):
        j = i
        while j < len(lq) and lq[j] == lq[i] and lk[j] == lk[i]:
            j += 1
        out.append((i, j - i, lq[i], lk[i]))
        i = j
    return out


class PackedAttention:
    """Exact attention of packed sequences: sample i's queries (rows cu_q[i]:cu_q[i+1] of q)
    attend only to its keys (rows cu_k[i]:cu_k[i+1] of k and v). q, k, v: (rows, heads,
    head_dim). ``name`` says which implementation runs."""

    name = "base"

    def __call__(self, q, k, v, seq):
        raise NotImplementedError


class LoopAttention(PackedAttention):
    """Per-sample loop; equal-length neighbours batched into one call (same maths). Uses
    scaled_dot_product_attention when torch has it (``sdpa``), else the explicit softmax
    (``math``)."""

    def __init__(self, use_sdpa=True):
        self.use_sdpa = use_sdpa and hasattr(F, "scaled_dot_product_attention")
        self.name = "sdpa" if self.use_sdpa else "math"

    def __call__(self, q, k, v, seq):
        outs = []
        for first, count, lq, lk in seq.groups:
            a, b = seq.starts_q[first], seq.starts_k[first]
            qq = q[a:a + count * lq].reshape(count, lq, q.shape[1], q.shape[2]).transpose(1, 2)
            kk = k[b:b + count * lk].reshape(count, lk, k.shape[1], k.shape[2]).transpose(1, 2)
            vv = v[b:b + count * lk].reshape(count, lk, v.shape[1], v.shape[2]).transpose(1, 2)
            if self.use_sdpa:
                o = F.scaled_dot_product_attention(qq, kk, vv)
            else:
                w = torch.matmul(qq, kk.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[2]))
                o = torch.matmul(torch.softmax(w.float(), dim=-1).to(vv.dtype), vv)
            outs.append(o.transpose(1, 2).reshape(count * lq, q.shape[1], q.shape[2]))
        return outs[0] if len(outs) == 1 else torch.cat(outs)


class VarlenAttention(PackedAttention):
    """torch.nn.attention.varlen.varlen_attn (flash attention over cu_seqlens)."""

    name = "varlen"

    def __init__(self):
        from torch.nn.attention.varlen import varlen_attn  # ImportError when torch lacks it

        self.fn = varlen_attn

    def __call__(self, q, k, v, seq):
        # flash wants the head dim contiguous; chunked projections are strided views
        q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
        return self.fn(q, k, v, seq.cu_q, seq.cu_k, seq.max_q, seq.max_k)


class FlexAttention(PackedAttention):
    """FlexAttention with a document mask: query token i may see key token j only when both
    belong to the same sample (ids from cu_seqlens). flex_attention is compiled once with
    dynamic shapes; block masks are built per call (per micro-batch and attention kind)."""

    name = "flex"

    def __init__(self):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        self.create_block_mask = create_block_mask
        self.fn = torch.compile(flex_attention, dynamic=True)

    def __call__(self, q, k, v, seq):
        doc_q, doc_k = seq.doc_q, seq.doc_k

        def same_sample(b, h, qi, ki):
            return doc_q[qi] == doc_k[ki]

        key = ("mask", q.shape[0], k.shape[0])
        mask = seq.cache.get(key)
        if mask is None:
            mask = seq.cache[key] = self.create_block_mask(same_sample, None, None, q.shape[0], k.shape[0],
                                                            device=q.device)
        o = self.fn(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0),
                    block_mask=mask)
        return o.squeeze(0).transpose(0, 1)


class SeqInfo:
    """The packing of one attention call: query and key cu_seqlens (int32, on the device),
    per-sample lengths (host lists: pass them, or they are read from the cu_seqlens with one
    device sync), runs of equal lengths, max lengths and per-token sample ids (built lazily),
    plus a cache for backend objects of this micro-batch (block masks)."""

    def __init__(self, cu_q, cu_k, lq=None, lk=None):
        self.cu_q = cu_q.to(torch.int32)
        self.cu_k = cu_k.to(torch.int32)
        lq = list(lq) if lq is not None else _lengths(cu_q)
        lk = list(lk) if lk is not None else _lengths(cu_k)
        self.lq, self.lk = lq, lk
        self.max_q, self.max_k = max(lq) if lq else 0, max(lk) if lk else 0
        self.starts_q = [0]
        self.starts_k = [0]
        for a, b in zip(lq, lk):
            self.starts_q.append(self.starts_q[-1] + a)
            self.starts_k.append(self.starts_k[-1] + b)
        self.groups = _groups(lq, lk)
        self.cache = {}
        self._doc = None

    def _ids(self):
        if self._doc is None:
            dev = self.cu_q.device  # built on the host (no device sync), then copied
            n = len(self.lq)
            self._doc = (torch.repeat_interleave(torch.arange(n), torch.tensor(self.lq, dtype=torch.long)).to(dev),
                         torch.repeat_interleave(torch.arange(n), torch.tensor(self.lk, dtype=torch.long)).to(dev))
        return self._doc

    @property
    def doc_q(self):
        return self._ids()[0]

    @property
    def doc_k(self):
        return self._ids()[1]


def _torch_version():
    parts = []
    for p in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _check_backend(att, device, dtype):
    """Runs ``att`` on a small packed problem (three samples of different lengths, queries and
    keys of different lengths) against the per-sample loop; raises when it fails or differs."""
    g = torch.Generator(device="cpu").manual_seed(0)
    lq, lk = [40, 7, 129], [40, 19, 3]
    H, D = 2, 64
    q = torch.randn(sum(lq), H, D, generator=g).to(device, dtype)
    k = torch.randn(sum(lk), H, D, generator=g).to(device, dtype)
    v = torch.randn(sum(lk), H, D, generator=g).to(device, dtype)
    cu = lambda ls: torch.tensor([0] + [sum(ls[:i + 1]) for i in range(len(ls))], dtype=torch.int32, device=device)
    seq = SeqInfo(cu(lq), cu(lk))
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    want = LoopAttention(use_sdpa=False)(*ref, seq)
    want.sum().backward()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    got = att(q, k, v, seq)
    got.float().sum().backward()
    err = (got.float() - want).abs().max().item()
    gerr = max((a.grad.float() - b.grad).abs().max().item() / max(1.0, b.grad.abs().max().item())
               for a, b in zip((q, k, v), ref))
    if not (err < 0.05 and gerr < 0.1):
        raise RuntimeError("differs from the per-sample reference by %.3g (gradients %.3g)" % (err, gerr))


def make_attention(kind, device, dtype=torch.bfloat16, log=print):
    """The attention implementation for ``kind`` ("auto", "varlen", "flex", "sdpa", "math").

    auto: on CUDA with torch >= 2.5, varlen if this torch has it, else flex, else sdpa; each
    candidate is checked on a small packed problem against the reference first and skipped
    (saying why) when it fails. On the CPU: sdpa (math when torch has no SDPA). An explicit
    kind is used as asked (and still checked on CUDA). ``log`` gets one line per decision."""
    device = torch.device(device)
    if kind == "math":
        return LoopAttention(use_sdpa=False)
    if kind == "sdpa":
        return LoopAttention(use_sdpa=True)
    if kind in ("varlen", "flex"):
        att = VarlenAttention() if kind == "varlen" else FlexAttention()
        if device.type == "cuda":
            _check_backend(att, device, dtype)
        return att
    if kind != "auto":
        raise ValueError("attention kind %r: auto, varlen, flex, sdpa or math" % (kind,))
    if device.type == "cuda" and _torch_version() >= (2, 5):
        for cls in (VarlenAttention, FlexAttention):
            try:
                att = cls()
                _check_backend(att, device, dtype)
                return att
            except Exception as e:  # noqa: BLE001 - any failure means: try the next one
                log("attention: %s not used (%s: %s)" % (cls.name, type(e).__name__, str(e).splitlines()[0][:200]
                                                         if str(e) else ""))
    return LoopAttention(use_sdpa=True)


# --------------------------------------------------------------------------------------------
# positions


def rope_split(head_dim):
    """Wan's split of a head's dimensions between time, rows and columns (each even)."""
    hw = 2 * (head_dim // 6)
    return head_dim - 2 * hw, hw, hw


class Rope3D:
    """cos/sin tables (tokens, head_dim / 2) of 3D rotary positions for a micro-batch whose
    samples have token grids ``grids`` (t, h, w each), in patchify order (t, y, x); cached per
    grid on the device."""

    def __init__(self, head_dim, theta=10000.0):
        self.dims = rope_split(head_dim)
        self.theta = theta
        self.cache = {}

    def _grid(self, grid, device):
        key = (tuple(grid), str(device))
        hit = self.cache.get(key)
        if hit is None:
            t, h, w = grid
            pos = torch.stack(torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij"),
                              -1).reshape(-1, 3).double()
            angles = []
            for axis, d in enumerate(self.dims):
                inv = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
                angles.append(pos[:, axis:axis + 1] * inv[None, :])
            a = torch.cat(angles, 1)
            hit = self.cache[key] = (a.cos().float().to(device), a.sin().float().to(device))
            if len(self.cache) > 256:
                self.cache.pop(next(iter(self.cache)))
        return hit

    def tables(self, grids, device):
        cs = [self._grid(g, device) for g in grids]
        if len({tuple(g) for g in grids}) == 1:  # one bucket: repeat one table
            c, s = cs[0]
            return c.repeat(len(grids), 1), s.repeat(len(grids), 1)
        return torch.cat([c for c, _ in cs]), torch.cat([s for _, s in cs])


def apply_rope(x, cos, sin):
    """Rotates consecutive pairs of x (rows, heads, head_dim) by the angles of cos/sin
    (rows, head_dim / 2); computed in fp32, returned in x's dtype."""
    xf = x.float().reshape(x.shape[0], x.shape[1], -1, 2)
    a, b = xf[..., 0], xf[..., 1]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), -1).reshape(x.shape).to(x.dtype)


def timestep_embedding(t, dim, max_period=10000.0):
    """Sinusoidal embedding (n, dim) of timesteps t (n,) in [0, 1000]."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], -1)


# --------------------------------------------------------------------------------------------
# modules


class RMSNorm(nn.Module):
    """RMSNorm with a learned gain, computed in float32 whatever the input's dtype (nn.RMSNorm
    computes in the input's dtype)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight.to(x.dtype)


class Modulate:
    """AdaLN: LayerNorm without affine, then x * (1 + scale[s]) + shift[s] for each sample s.
    ``fused``: adaptiveload.adaln over the packed rows (CUDA); else PyTorch ops."""

    def __init__(self, fused, eps):
        self.fused = fused
        self.eps = eps
        self._adaln = None
        if fused:
            from adaptiveload import adaln  # the fused kernel (needs libal_kernels / libadaptiveload)

            self._adaln = adaln

    def __call__(self, x, scale, shift, seq):
        if self._adaln is not None:
            return self._adaln(x, scale, shift, eps=self.eps, cu_seqlens=seq.cu_q)
        h = F.layer_norm(x, (x.shape[-1],), eps=self.eps)
        return seq.modulate(h, scale, shift)


class Block(nn.Module):
    """One Wan-style DiT block (see the module docstring)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.hidden
        self.heads = cfg.heads
        self.modulation = nn.Parameter(torch.randn(1, 6, d) / d ** 0.5)
        self.qkv = nn.Linear(d, 3 * d)
        self.norm_q, self.norm_k = RMSNorm(d), RMSNorm(d)
        self.proj = nn.Linear(d, d)
        self.norm_x = nn.LayerNorm(d, eps=cfg.eps)  # before cross-attention (affine, as Wan)
        self.cq, self.ckv = nn.Linear(d, d), nn.Linear(d, 2 * d)
        self.cnorm_q, self.cnorm_k = RMSNorm(d), RMSNorm(d)
        self.cproj = nn.Linear(d, d)
        self.ffn = nn.Sequential(nn.Linear(d, cfg.ffn), nn.GELU(approximate="tanh"), nn.Linear(cfg.ffn, d))

    def forward(self, x, e, ctx, pk):
        """x (rows, d); e (n, 6, d) the per-sample time projection; ctx (text rows, d);
        pk: the micro-batch's packing (:class:`Packing`)."""
        n_rows, d = x.shape
        hd = d // self.heads
        shift1, scale1, gate1, shift2, scale2, gate2 = (self.modulation.to(e.dtype) + e).unbind(1)
        h = pk.modulate(x, scale1, shift1, pk.self_seq)
        q, k, v = self.qkv(h).chunk(3, -1)
        q = apply_rope(self.norm_q(q).view(n_rows, self.heads, hd), pk.cos, pk.sin)
        k = apply_rope(self.norm_k(k).view(n_rows, self.heads, hd), pk.cos, pk.sin)
        v = v.reshape(n_rows, self.heads, hd)
        if pk.sp is None:
            a = pk.attention(q, k, v, pk.attn_seq)
        else:
            # Ulysses: one all-to-all moves q, k, v (heads kept whole: (rows, heads, 3 hd)) from
            # this rank's rows of all heads to all rows of its heads, and one moves the output back
            qkv = pk.sp_to_heads(torch.cat((q, k, v.to(q.dtype)), -1), pk.sp)
            q, k, v = qkv.split(hd, -1)
            a = pk.sp_to_rows(pk.attention(q, k, v, pk.attn_seq), pk.sp)
        x = x + pk.self_seq.scale(self.proj(a.reshape(n_rows, d)).to(x.dtype), gate1)
        # cross-attention: each sample's tokens over its own text tokens
        cq = self.cnorm_q(self.cq(self.norm_x(x))).view(n_rows, self.heads, hd)
        ck, cv = self.ckv(ctx).chunk(2, -1)
        ck = self.cnorm_k(ck).view(ctx.shape[0], self.heads, hd)
        c = pk.attention(cq, ck, cv.reshape(ctx.shape[0], self.heads, hd), pk.cross_seq)
        x = x + self.cproj(c.reshape(n_rows, d)).to(x.dtype)
        h = pk.modulate(x, scale2, shift2, pk.self_seq)
        return x + pk.self_seq.scale(self.ffn(h).to(x.dtype), gate2)


class _TokenSeq(SeqInfo):
    """SeqInfo plus per-token broadcast of per-sample vectors."""

    def per_token(self, v):
        """(n, d) per-sample rows -> (rows, d) per token (one bucket: a repeat, no index)."""
        if len(set(self.lq)) == 1:
            return v.repeat_interleave(self.lq[0], dim=0)
        return v[self.doc_q]

    def _uniform(self):
        return len(self.lq) > 0 and len(set(self.lq)) == 1

    def scale(self, x, v):
        """x (rows, d) times sample s's row v[s] on s's tokens; x's dtype. Samples of one length
        (one bucket) broadcast through a (n, S, d) view, as an eager DiT does."""
        v = v.to(x.dtype)
        if self._uniform():
            return (x.view(len(self.lq), self.lq[0], -1) * v[:, None, :]).view(x.shape)
        return x * self.per_token(v)

    def modulate(self, h, scale, shift):
        """h * (1 + scale[s]) + shift[s] per sample s; h's dtype."""
        scale, shift = scale.to(h.dtype), shift.to(h.dtype)
        if self._uniform():
            n, S = len(self.lq), self.lq[0]
            return torch.addcmul(shift[:, None, :], h.view(n, S, -1), 1 + scale[:, None, :]).view(h.shape)
        return h * (1 + self.per_token(scale)) + self.per_token(shift)


class Packing:
    """What every block of one forward shares: the packing of this rank's rows (``self_seq``:
    per-sample modulation), of self-attention (``attn_seq``) and of cross-attention
    (``cross_seq``), RoPE tables of this rank's rows, the attention and AdaLN implementations.

    Without SP (``sp`` None) the rows are the whole micro-batch and ``attn_seq`` is
    ``self_seq``. Under Ulysses SP (``sp``: an adaptiveload.sp.Shard) the rows are this rank's
    token slice: ``self_seq`` and ``cross_seq`` describe the samples it touches (a sample cut
    at a slice edge counts only its rows here), ``attn_seq`` the whole micro-batch, over which
    self-attention runs for this rank's heads (``sp_to_heads`` / ``sp_to_rows``, the
    all-to-alls)."""

    def __init__(self, cu, cu_text, cos, sin, attention, modulate, lengths=None, text_lengths=None, attn_seq=None,
                 sp=None):
        self.self_seq = _TokenSeq(cu, cu, lengths, lengths)
        self.cross_seq = _TokenSeq(cu, cu_text, lengths, text_lengths)
        self.attn_seq = attn_seq if attn_seq is not None else self.self_seq
        self.cos, self.sin = cos, sin
        self.attention = attention
        self.modulate = modulate
        self.sp = sp
        if sp is not None:
            from adaptiveload.sp import heads_to_sequence, sequence_to_heads

            self.sp_to_heads, self.sp_to_rows = sequence_to_heads, heads_to_sequence


def _host_cu(lengths, device):
    c = [0]
    for n in lengths:
        c.append(c[-1] + int(n))
    return torch.tensor(c, dtype=torch.int32).to(device)


def shard_samples(lengths, lo, hi):
    """The samples that rows [lo, hi) of a packed sequence of ``lengths`` touch: (first, end,
    their row counts within [lo, hi)). Samples first..end-1, each with at least one row."""
    first = end = None
    rows = []
    at = 0
    for i, n in enumerate(lengths):
        a, b = max(at, lo), min(at + n, hi)
        if b > a:
            if first is None:
                first = i
            end = i + 1
            rows.append(b - a)
        at += n
    if first is None:
        raise ValueError("rows [%d, %d) hold no token of a micro-batch of %d" % (lo, hi, at))
    return first, end, rows


class PackedDiT(nn.Module):
    """The DiT over packed micro-batches; forward(x, cu, grids, t, text, cu_text) -> (rows,
    patch_dim) prediction of the flow-matching velocity.

    x: (rows, C*p_t*p_h*p_w) patchified noisy latents; cu: int32 (n+1) token offsets;
    grids: n token grids (t, h, w) (t * h * w = that sample's tokens); t: (n,) timesteps in
    [0, 1]; text: (text rows, text_dim) every sample's text embedding concatenated; cu_text:
    int32 (n+1) offsets into it; text_lengths: the n text lengths as a host list (optional:
    saves a device sync; the token lengths come from grids)."""

    def __init__(self, cfg, attention=None, fused_adaln=False):
        super().__init__()
        d = cfg.hidden
        self.cfg = cfg
        self.patch_embed = nn.Linear(cfg.patch_dim, d)
        self.text_embed = nn.Sequential(nn.Linear(cfg.text_dim, d), nn.GELU(approximate="tanh"), nn.Linear(d, d))
        self.time_embed = nn.Sequential(nn.Linear(cfg.freq_dim, d), nn.SiLU(), nn.Linear(d, d))
        self.time_proj = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.blocks)])
        self.head_modulation = nn.Parameter(torch.randn(1, 2, d) / d ** 0.5)
        self.head = nn.Linear(d, cfg.patch_dim)
        self.rope = Rope3D(d // cfg.heads)
        self.attention = attention or LoopAttention()
        self.modulate = Modulate(fused_adaln, cfg.eps)

    def forward(self, x, cu, grids, t, text, cu_text, text_lengths=None, sp=None):
        d = self.cfg.hidden
        cos, sin = self.rope.tables(grids, x.device)
        lengths = [a * b * c for a, b, c in grids]
        if sp is None or sp.degree == 1:
            pk = Packing(cu, cu_text, cos, sin, self.attention, self.modulate, lengths, text_lengths)
        else:
            pk, t, text = self._sp_packing(x, cu, cos, sin, lengths, t, text, cu_text, text_lengths, sp)
        h = self.patch_embed(x)
        temb = self.time_embed(timestep_embedding(t * 1000.0, self.cfg.freq_dim).to(h.dtype))
        e = self.time_proj(temb).view(-1, 6, d)
        ctx = self.text_embed(text)
        for blk in self.blocks:
            h = blk(h, e, ctx, pk)
        shift, scale = (self.head_modulation.to(temb.dtype) + temb[:, None, :]).unbind(1)
        h = pk.modulate(h, scale, shift, pk.self_seq)
        return self.head(h)

    def _sp_packing(self, x, cu, cos, sin, lengths, t, text, cu_text, text_lengths, sp):
        """(Packing, t, text) of this rank's rows [sp.lo, sp.hi) of the micro-batch (x holds
        them): the samples they touch, those samples' timesteps and text rows, RoPE at the
        rows' own positions, and self-attention over the whole micro-batch."""
        if sum(lengths) != sp.n_tokens or x.shape[0] != sp.tokens:
            raise ValueError("SP forward: %d rows for %r of a micro-batch of %d tokens (grids give %d)"
                             % (x.shape[0], sp, sp.n_tokens, sum(lengths)))
        if self.cfg.heads % sp.degree:
            raise ValueError("SP degree %d does not divide the model's %d heads (Ulysses splits heads)"
                             % (sp.degree, self.cfg.heads))
        first, end, rows = shard_samples(lengths, sp.lo, sp.hi)
        tl = list(text_lengths) if text_lengths is not None else _lengths(cu_text)
        t0, t1 = sum(tl[:first]), sum(tl[:end])
        attn_seq = _TokenSeq(cu, cu, lengths, lengths)
        cu_rows = _host_cu(rows, x.device)
        pk = Packing(cu_rows, _host_cu(tl[first:end], x.device), cos[sp.lo:sp.hi], sin[sp.lo:sp.hi], self.attention,
                     self.modulate, rows, tl[first:end], attn_seq=attn_seq, sp=sp)
        return pk, t[first:end], text[t0:t1]


def param_count(model):
    return sum(p.numel() for p in model.parameters())
