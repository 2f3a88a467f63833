"""Fused AdaLN for PyTorch, over the C kernels (kernels/al_adaln.h) through ctypes.

    y = layer_norm(x, no affine, eps) * (1 + scale[b]) + shift[b]      (one_plus=True)
    y = layer_norm(x, no affine, eps) * scale[b] + shift[b]            (one_plus=False)

``adaln(x, scale, shift, eps=1e-6, cu_seqlens=None, one_plus=True)``

* x: CUDA tensor, bf16/fp16/fp32, shape (B, N, D), or (rows, D) with ``cu_seqlens``.
* scale, shift: (B, D) or (B, 1, D); cast to x's dtype (gradients come back in theirs).
* cu_seqlens: int32 offsets (B + 1) of a packed batch, sample b owning rows
  [cu[b], cu[b+1]). A CPU tensor is checked in full on the host and copied to the device;
  a CUDA tensor is used as is and trusted (bad offsets give wrong numbers, never a crash).

Differentiable in x, scale and shift. The forward keeps only fp32 mean and rstd per row
(8 bytes per token) besides its inputs; the backward is deterministic. Work is enqueued on
the current CUDA stream of x's device; nothing synchronises.
"""

import ctypes

import torch

from . import _lib

__all__ = ["adaln"]

_DTYPES = {
    torch.bfloat16: _lib.AL_DTYPE_BF16,
    torch.float16: _lib.AL_DTYPE_FP16,
    torch.float32: _lib.AL_DTYPE_FP32,
}


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


def _make(x2d, batch, seq_len, cu_dev, cu_host, eps, one_plus):
    d = _lib.AdalnDesc()
    d.dtype = _DTYPES[x2d.dtype]
    d.batch = batch
    d.dim = x2d.shape[1]
    if cu_dev is None:
        d.seq_len = seq_len
    else:
        d.rows = x2d.shape[0]
        d.cu_seqlens = cu_dev.data_ptr()
        d.cu_seqlens_host = cu_host.data_ptr() if cu_host is not None else None
    o = _lib.AdalnOptions()
    o.eps = eps
    o.flags = 0 if one_plus else _lib.AL_ADALN_PLAIN_SCALE
    return d, o


# Workspace bytes per (device, dtype, batch, dim, rows, layout, flags): the size query walks
# the configuration choice in C; the answer never changes for a key.
_WS_BYTES = {}


def _on_device(device):
    """A context making `device` current, or a no-op when it already is (the common case)."""
    if device.index is None or device.index == torch.cuda.current_device():
        return _NULL_CTX
    return torch.cuda.device(device)


class _NullCtx:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL_CTX = _NullCtx()


class _AdaLN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2d, scale, shift, eps, batch, seq_len, cu_dev, cu_host, one_plus):
        lib = _lib.load_library()
        rows = x2d.shape[0]
        y = torch.empty_like(x2d)
        mean = torch.empty(rows, device=x2d.device, dtype=torch.float32)
        rstd = torch.empty(rows, device=x2d.device, dtype=torch.float32)
        d, o = _make(x2d, batch, seq_len, cu_dev, cu_host, eps, one_plus)
        with _on_device(x2d.device):
            stream = torch.cuda.current_stream(x2d.device).cuda_stream
            _lib.check(
                lib.al_adaln_forward(ctypes.byref(d), ctypes.byref(o), _ptr(x2d), _ptr(scale), _ptr(shift),
                                     _ptr(y), _ptr(mean), _ptr(rstd), ctypes.c_void_p(stream)),
                "al_adaln_forward",
            )
        ctx.save_for_backward(x2d, scale, mean, rstd, cu_dev)
        ctx.meta = (eps, batch, seq_len, one_plus)
        return y

    @staticmethod
    def backward(ctx, dy):
        lib = _lib.load_library()
        x2d, scale, mean, rstd, cu_dev = ctx.saved_tensors
        eps, batch, seq_len, one_plus = ctx.meta
        dy = dy.contiguous()
        dx = torch.empty_like(x2d)
        dscale = torch.empty_like(scale)
        dshift = torch.empty_like(scale)
        d, o = _make(x2d, batch, seq_len, cu_dev, None, eps, one_plus)
        with _on_device(x2d.device):
            key = (x2d.device.index, d.dtype, batch, d.dim, x2d.shape[0], seq_len, o.flags)
            nbytes = _WS_BYTES.get(key)
            if nbytes is None:
                n = ctypes.c_size_t(0)
                _lib.check(lib.al_adaln_backward_workspace_size(ctypes.byref(d), ctypes.byref(o), ctypes.byref(n)),
                           "al_adaln_backward_workspace_size")
                nbytes = _WS_BYTES.setdefault(key, n.value)
            ws = torch.empty(max(nbytes, 16), device=x2d.device, dtype=torch.uint8)
            stream = torch.cuda.current_stream(x2d.device).cuda_stream
            _lib.check(
                lib.al_adaln_backward(ctypes.byref(d), ctypes.byref(o), _ptr(dy), _ptr(x2d), _ptr(scale), _ptr(mean),
                                      _ptr(rstd), _ptr(dx), _ptr(dscale), _ptr(dshift), _ptr(ws), nbytes,
                                      ctypes.c_void_p(stream)),
                "al_adaln_backward",
            )
        return dx, dscale, dshift, None, None, None, None, None, None


def _as2d(t, batch, D, dtype):
    """t as a contiguous (batch, D) tensor of dtype; no op dispatched when it already is."""
    if t.dtype != dtype:
        t = t.to(dtype)
    if tuple(t.shape) != (batch, D):
        t = t.reshape(batch, D)
    if not t.is_contiguous():
        t = t.contiguous()
    return t


def adaln(x, scale, shift, eps=1e-6, cu_seqlens=None, one_plus=True):
    """Fused LayerNorm (no affine) + per-sample modulation; see the module docstring."""
    if not x.is_cuda:
        raise ValueError("adaln: x must be a CUDA tensor")
    if x.dtype not in _DTYPES:
        raise TypeError("adaln: x dtype %s is not bf16, fp16 or fp32" % x.dtype)
    D = x.shape[-1]
    if cu_seqlens is None:
        if x.dim() != 3:
            raise ValueError("adaln: x must be (B, N, D) without cu_seqlens, got %s" % (tuple(x.shape),))
        batch, seq_len = x.shape[0], x.shape[1]
        cu_dev = cu_host = None
    else:
        if x.dim() != 2:
            raise ValueError("adaln: x must be (rows, D) with cu_seqlens, got %s" % (tuple(x.shape),))
        batch, seq_len = cu_seqlens.numel() - 1, 0
        if cu_seqlens.is_cuda:
            cu_dev, cu_host = cu_seqlens.to(torch.int32).contiguous(), None
        else:
            cu_host = cu_seqlens.to(torch.int32).contiguous()
            cu_dev = cu_host.to(x.device)
    if batch < 1:
        raise ValueError("adaln: no samples")
    scale2d = _as2d(scale, batch, D, x.dtype)
    shift2d = _as2d(shift, batch, D, x.dtype)
    x2d = x if x.dim() == 2 else x.reshape(-1, D)
    if not x2d.is_contiguous():
        x2d = x2d.contiguous()
    y = _AdaLN.apply(x2d, scale2d, shift2d, float(eps), batch, seq_len, cu_dev, cu_host, bool(one_plus))
    return y.view(x.shape)
