"""Fused AdaLN for PyTorch, over the C kernels (kernels/al_adaln.h) through ctypes.

    y = layer_norm(x, no affine, eps) * (1 + scale[b]) + shift[b]      (one_plus=True)
    y = layer_norm(x, no affine, eps) * scale[b] + shift[b]            (one_plus=False)

``adaln(x, scale, shift, eps=1e-6, cu_seqlens=None, one_plus=True)``

* x: bf16/fp16/fp32 tensor, shape (B, N, D), or (rows, D) with ``cu_seqlens``.
* scale, shift: (B, D) or (B, 1, D), on x's device; cast to x's dtype (gradients come back in
  theirs).
* cu_seqlens: int32 offsets (B + 1) of a packed batch, sample b owning rows
  [cu[b], cu[b+1]). A CPU tensor is checked in full on the host and copied to the device;
  a CUDA tensor is used as is and trusted (bad offsets give wrong numbers, never a crash).
* eps: added to the variance, as float32; 0 means 1e-6 (the C API's default).

x on CUDA runs the fused kernels: differentiable in x, scale and shift. The forward keeps only
fp32 mean and rstd per row (8 bytes per token) besides its inputs; the backward is
deterministic. Work is enqueued on the current CUDA stream of x's device; nothing synchronises.
Calls can be captured in CUDA graphs, and under torch.compile (torch >= 2.4) they go through
the custom operators ``torch.ops.adaptiveload.adaln_fwd`` / ``adaln_bwd``: no graph break,
fullgraph=True works.

x on any other device (the CPU) runs plain PyTorch ops with autograd and no kernel call (the
library is loaded once, for the kernels' limits, AL_ADALN_MAX_DIM and AL_ADALN_MAX_BATCH): the
same math (statistics and modulation in fp32, the result in x's dtype, gradients in the
inputs' dtypes), so one model file also trains and tests on a machine without a GPU. Its
argument checks are the C API's, with the same adaptiveload.Error (status and message); the
offsets are always checked (they are read on the host anyway). tests/python/test_adaln_cpu.py
checks it against a float64 reference and, on a GPU, against the kernels.
"""

import ctypes
import math

import torch

from . import _constants as C
from . import _lib
from . import _structs as S

__all__ = ["adaln"]

# torch dtype -> the name of its al_dtype; the codes are the library's (_constants).
_DTYPES = {
    torch.bfloat16: "AL_DTYPE_BF16",
    torch.float16: "AL_DTYPE_FP16",
    torch.float32: "AL_DTYPE_FP32",
}


# Per-call host cost matters (hundreds of calls per training step): the C functions, their
# argtypes and the struct classes are looked up once; the structs of a fixed layout are built
# once per shape, and those built by the forward are reused by its backward; the workspace is
# cached per (device, stream); the C API does the argument checks. With argtypes declared,
# ctypes takes plain ints for void* and a struct for a struct pointer (passed by reference).
_FNS = None


def _fns():
    global _FNS
    if _FNS is None:
        lib = _lib.load_library()
        _FNS = (lib.al_adaln_forward, lib.al_adaln_backward, lib.al_adaln_backward_workspace_size)
    return _FNS


def _fail(rc, what):
    raise _lib.error(rc, what)  # adaptiveload.Error: names the status and al_last_error()


# The raw cudaStream_t of the current stream of a device index: torch's private fast getter
# (what Inductor's generated code uses) when present, else the public one.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _raw_stream is None:  # pragma: no cover - older or newer torch

    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


# (desc, options) of the fixed layout per (dtype, batch, seq_len, dim, eps, one_plus): built
# once, read-only afterwards (the C API reads them during a call and keeps nothing), shared by
# the forward and its backward. Packed batches build theirs per call (the offsets change).
_FIXED = {}


def _make_fixed(x2d, batch, seq_len, eps, one_plus):
    key = (x2d.dtype, batch, seq_len, x2d.shape[1], eps, one_plus)
    p = _FIXED.get(key)
    if p is None:
        p = _FIXED.setdefault(key, _make(x2d, batch, seq_len, None, None, eps, one_plus))
    return p


def _desc(x2d, batch, seq_len, cu_dev, cu_host, eps, one_plus):
    """(desc, options) of a call: cached for a fixed layout, built for a packed one."""
    if cu_dev is None:
        return _make_fixed(x2d, batch, seq_len, eps, one_plus)
    return _make(x2d, batch, seq_len, cu_dev, cu_host, eps, one_plus)


def _device_index(t):
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def _make(x2d, batch, seq_len, cu_dev, cu_host, eps, one_plus):
    d = S.AdalnDesc()
    d.dtype = getattr(C, _DTYPES[x2d.dtype])
    d.batch = batch
    d.dim = x2d.shape[1]
    if cu_dev is None:
        d.seq_len = seq_len
    else:
        d.rows = x2d.shape[0]
        d.cu_seqlens = cu_dev.data_ptr()
        d.cu_seqlens_host = cu_host.data_ptr() if cu_host is not None else None
    o = S.AdalnOptions()
    o.eps = eps
    o.flags = 0 if one_plus else C.AL_ADALN_PLAIN_SCALE
    return d, o


# Workspace bytes per (device, dtype, batch, dim, rows, layout, flags): the size query walks
# the configuration choice in C; the answer never changes for a key.
_WS_BYTES = {}
# One workspace tensor per (device index, raw stream): work on one stream runs in order, so a
# backward may reuse the workspace of the previous one on that stream. Grown when too small;
# not used while the stream is being captured into a CUDA graph (a graph keeps its pointers).
_WS = {}


def _workspace(device, index, stream, nbytes):
    if torch.cuda.is_current_stream_capturing():
        return torch.empty(nbytes, device=device, dtype=torch.uint8)
    key = (index, stream)
    ws = _WS.get(key)
    if ws is None or ws.numel() < nbytes:
        ws = _WS[key] = torch.empty(nbytes, device=device, dtype=torch.uint8)
    return ws


def _on_device(index):
    """A context making device `index` current, or a no-op when it already is (the common case)."""
    if index == torch.cuda.current_device():
        return _NULL_CTX
    return torch.cuda.device(index)


class _NullCtx:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL_CTX = _NullCtx()


def _run_forward(x2d, scale, shift, batch, seq_len, cu_dev, cu_host, eps, one_plus):
    """y and stats (fp32 mean, then rstd, per row) of one forward call; also the call's
    (desc, options, device index) for its backward."""
    fwd = _fns()[0]
    rows = x2d.shape[0]
    index = _device_index(x2d)
    y = torch.empty_like(x2d)
    stats = torch.empty(2 * rows, device=x2d.device, dtype=torch.float32)
    d, o = _desc(x2d, batch, seq_len, cu_dev, cu_host, eps, one_plus)
    mean_ptr = stats.data_ptr()
    with _on_device(index):
        rc = fwd(d, o, x2d.data_ptr(), scale.data_ptr(), shift.data_ptr(), y.data_ptr(), mean_ptr,
                 mean_ptr + 4 * rows, _raw_stream(index))
    if rc:
        _fail(rc, "al_adaln_forward")
    if cu_dev is not None:
        # The backward's desc is the forward's without the host offsets (checked once here).
        d.cu_seqlens_host = None
    return y, stats, d, o, index


def _run_backward(dy, x2d, scale, stats, d, o, index, seq_len):
    """dx, dscale, dshift of one backward call (d, o, index from its forward)."""
    _, bwd, ws_size = _fns()
    rows = x2d.shape[0]
    if not dy.is_contiguous():
        dy = dy.contiguous()
    dx = torch.empty_like(x2d)
    dscale = torch.empty_like(scale)
    dshift = torch.empty_like(scale)
    mean_ptr = stats.data_ptr()
    with _on_device(index):
        key = (index, d.dtype, d.batch, d.dim, rows, seq_len, o.flags)
        nbytes = _WS_BYTES.get(key)
        if nbytes is None:
            n = ctypes.c_size_t(0)
            rc = ws_size(d, o, ctypes.byref(n))
            if rc:
                _fail(rc, "al_adaln_backward_workspace_size")
            nbytes = _WS_BYTES.setdefault(key, max(n.value, 16))
        stream = _raw_stream(index)
        ws = _workspace(x2d.device, index, stream, nbytes)
        rc = bwd(d, o, dy.data_ptr(), x2d.data_ptr(), scale.data_ptr(), mean_ptr, mean_ptr + 4 * rows,
                 dx.data_ptr(), dscale.data_ptr(), dshift.data_ptr(), ws.data_ptr(), ws.numel(), stream)
    if rc:
        _fail(rc, "al_adaln_backward")
    return dx, dscale, dshift


class _AdaLN(torch.autograd.Function):
    """The eager path: one autograd node, the C calls made directly."""

    @staticmethod
    def forward(ctx, x2d, scale, shift, eps, batch, seq_len, cu_dev, cu_host, one_plus):
        y, stats, d, o, index = _run_forward(x2d, scale, shift, batch, seq_len, cu_dev, cu_host, eps, one_plus)
        ctx.save_for_backward(x2d, scale, stats)
        ctx.meta = (d, o, index, seq_len, cu_dev)  # cu_dev: d points into it
        return y

    @staticmethod
    def backward(ctx, dy):
        x2d, scale, stats = ctx.saved_tensors
        d, o, index, seq_len, _ = ctx.meta
        dx, dscale, dshift = _run_backward(dy, x2d, scale, stats, d, o, index, seq_len)
        return dx, dscale, dshift, None, None, None, None, None, None


# Under torch.compile (torch >= 2.4) adaln() calls two custom operators instead: dynamo cannot
# trace the ctypes calls (each would be a graph break), while a custom operator is one opaque
# node of the graph, with a fake implementation for shapes and the backward registered as
# autograd. Same C calls, same results; eager calls keep the autograd.Function, which costs
# fewer host steps per call.
_custom_op = getattr(getattr(torch, "library", None), "custom_op", None)
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
_OPS = _custom_op is not None and _is_compiling is not None

if _OPS:
    from typing import Optional, Tuple

    @_custom_op("adaptiveload::adaln_fwd", mutates_args=())
    def _adaln_fwd_op(x2d: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, cu_dev: Optional[torch.Tensor],
                      cu_host: Optional[torch.Tensor], eps: float, batch: int, seq_len: int,
                      one_plus: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        y, stats, _, _, _ = _run_forward(x2d, scale, shift, batch, seq_len, cu_dev, cu_host, eps, one_plus)
        return y, stats

    @_adaln_fwd_op.register_fake
    def _adaln_fwd_fake(x2d, scale, shift, cu_dev, cu_host, eps, batch, seq_len, one_plus):
        return torch.empty_like(x2d), x2d.new_empty((2 * x2d.shape[0],), dtype=torch.float32)

    @_custom_op("adaptiveload::adaln_bwd", mutates_args=())
    def _adaln_bwd_op(dy: torch.Tensor, x2d: torch.Tensor, scale: torch.Tensor, stats: torch.Tensor,
                      cu_dev: Optional[torch.Tensor], eps: float, batch: int, seq_len: int,
                      one_plus: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        d, o = _desc(x2d, batch, seq_len, cu_dev, None, eps, one_plus)
        return _run_backward(dy, x2d, scale, stats, d, o, _device_index(x2d), seq_len)

    @_adaln_bwd_op.register_fake
    def _adaln_bwd_fake(dy, x2d, scale, stats, cu_dev, eps, batch, seq_len, one_plus):
        return torch.empty_like(x2d), torch.empty_like(scale), torch.empty_like(scale)

    def _adaln_setup_context(ctx, inputs, output):
        x2d, scale, _, cu_dev, _, eps, batch, seq_len, one_plus = inputs
        stats = output[1]
        ctx.mark_non_differentiable(stats)
        ctx.save_for_backward(x2d, scale, stats, cu_dev)
        ctx.args = (eps, batch, seq_len, one_plus)

    def _adaln_op_backward(ctx, dy, _dstats):
        x2d, scale, stats, cu_dev = ctx.saved_tensors
        dx, dscale, dshift = _adaln_bwd_op(dy.contiguous(), x2d, scale, stats, cu_dev, *ctx.args)
        return dx, dscale, dshift, None, None, None, None, None, None

    _adaln_fwd_op.register_autograd(_adaln_op_backward, setup_context=_adaln_setup_context)


def _as2d(t, batch, D, dtype, name):
    """t as a contiguous (batch, D) tensor of dtype; no op dispatched when it already is. A
    0-d tensor is refused naming the argument; another shape of the wrong size is torch's
    reshape error."""
    if t.dim() == 0:
        raise ValueError("adaln: %s must be (B, D) or (B, 1, D) = (%d, %d), got a 0-d tensor" % (name, batch, D))
    if t.dtype != dtype:
        t = t.to(dtype)
    if tuple(t.shape) != (batch, D):
        t = t.reshape(batch, D)
    if not t.is_contiguous():
        t = t.contiguous()
    return t


# The C API's argument checks (kernels/adaln_api.cu, setup()) for the CPU path, with its
# messages, so that both paths refuse the same arguments with the same adaptiveload.Error.
_FN = "al_adaln_forward"
_INT32_MAX = (1 << 31) - 1  # C's INT32_MAX: the kernels' row limit


def _c_error(name, detail):
    detail = "%s: %s" % (_FN, detail)
    return _lib.Error(_lib.status(name), "%s: %s: %s" % (_FN, name, detail), detail)


def _check_offsets(cu, batch, rows):
    """cu_seqlens_host's check: cu[0] == 0, non-decreasing, cu[B] == rows."""
    what = "cu_seqlens_host"
    c = cu.tolist()
    if c[0] != 0:
        raise _c_error("AL_EINVAL", "%s[0] = %d, must be 0" % (what, c[0]))
    for b in range(batch):
        if c[b + 1] < c[b]:
            raise _c_error("AL_EINVAL", "%s[%d] = %d < %s[%d] = %d: offsets must not decrease"
                           % (what, b + 1, c[b + 1], what, b, c[b]))
    if c[batch] != rows:
        raise _c_error("AL_EINVAL", "%s[%d] = %d but rows = %d" % (what, batch, c[batch], rows))


def _check_like_c(D, batch, seq_len, rows, cu_host, eps):
    """The C API's checks of the call's desc and options, in its order; the eps it uses."""
    if D < 1 or D > C.AL_ADALN_MAX_DIM:
        raise _c_error("AL_ERANGE", "dim %d outside [1, %d]" % (D, C.AL_ADALN_MAX_DIM))
    if batch > C.AL_ADALN_MAX_BATCH:
        raise _c_error("AL_ERANGE", "batch %d outside [1, %d]" % (batch, C.AL_ADALN_MAX_BATCH))
    if rows > _INT32_MAX:
        raise _c_error("AL_ERANGE", "rows %d outside [0, %d]" % (rows, _INT32_MAX))
    if cu_host is None:
        if seq_len < 1:
            raise _c_error("AL_EINVAL", "seq_len %d: the fixed layout needs seq_len >= 1 "
                           "(or pass cu_seqlens for a packed batch)" % seq_len)
        if seq_len > _INT32_MAX // batch:
            raise _c_error("AL_ERANGE", "batch %d x seq_len %d rows exceed %d"
                           % (batch, seq_len, _INT32_MAX))
    else:
        _check_offsets(cu_host, batch, rows)
    e = ctypes.c_float(eps).value  # the options' float field
    if not (e >= 0.0) or math.isinf(e):
        raise _c_error("AL_EINVAL", "eps %g must be finite and >= 0" % e)
    return e if e != 0.0 else ctypes.c_float(1e-6).value


def _adaln_torch(x2d, scale2d, shift2d, batch, seq_len, cu_host, eps, one_plus):
    """The CPU path: the kernels' math in PyTorch ops (autograd gives the gradients)."""
    D = x2d.shape[1]
    eps = _check_like_c(D, batch, seq_len, x2d.shape[0], cu_host, float(eps))
    # Two passes in fp32, as the kernels: the residual from the row's mean, then its variance
    # (torch's layer_norm leaves a residual of rounding where the kernels give 0, e.g. D = 1).
    xc = x2d.float()
    xc = xc - xc.mean(dim=1, keepdim=True)
    xn = xc * torch.rsqrt((xc * xc).mean(dim=1, keepdim=True) + eps)
    scale, shift = scale2d.float(), shift2d.float()
    if cu_host is None:
        xn = xn.view(batch, seq_len, D)
        scale, shift = scale[:, None, :], shift[:, None, :]
    else:
        sample = torch.repeat_interleave(torch.arange(batch, device=x2d.device),
                                         (cu_host[1:] - cu_host[:-1]).long().to(x2d.device))
        scale, shift = scale.index_select(0, sample), shift.index_select(0, sample)
    y = xn * (scale + 1.0 if one_plus else scale) + shift
    return y.to(x2d.dtype).view(x2d.shape)


def _check_types(x, scale, shift, cu_seqlens, eps):
    for name, t in (("x", x), ("scale", scale), ("shift", shift)):
        if not isinstance(t, torch.Tensor):
            raise TypeError("adaln: %s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if cu_seqlens is not None and not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError("adaln: cu_seqlens must be None or a torch.Tensor, not %s" % type(cu_seqlens).__name__)
    try:
        float(eps)
    except (TypeError, ValueError):
        raise TypeError("adaln: eps must be a number, not %s" % type(eps).__name__) from None


def _check_devices(x, scale, shift):
    for name, t in (("scale", scale), ("shift", shift)):
        if t.device != x.device:
            raise ValueError("adaln: %s is on %s, x on %s: pass them on one device" % (name, t.device, x.device))


def adaln(x, scale, shift, eps=1e-6, cu_seqlens=None, one_plus=True):
    """Fused LayerNorm (no affine) + per-sample modulation; see the module docstring."""
    _check_types(x, scale, shift, cu_seqlens, eps)
    if x.dtype not in _DTYPES:
        raise TypeError("adaln: x dtype %s is not bf16, fp16 or fp32" % x.dtype)
    if cu_seqlens is None:
        if x.dim() != 3:
            raise ValueError("adaln: x must be (B, N, D) without cu_seqlens, got %s" % (tuple(x.shape),))
        batch, seq_len = x.shape[0], x.shape[1]
        cu_dev = cu_host = None
    else:
        if x.dim() != 2:
            raise ValueError("adaln: x must be (rows, D) with cu_seqlens, got %s" % (tuple(x.shape),))
        if cu_seqlens.dim() == 0:
            raise ValueError("adaln: cu_seqlens must be the B + 1 offsets (1-D), got a 0-d tensor")
        batch, seq_len = cu_seqlens.numel() - 1, 0
        if not x.is_cuda:  # the CPU path reads the offsets on the host
            cu_dev, cu_host = None, cu_seqlens.to(torch.int32).cpu().contiguous()
        elif cu_seqlens.is_cuda:
            cu_dev, cu_host = cu_seqlens.to(torch.int32).contiguous(), None
        else:
            cu_host = cu_seqlens.to(torch.int32).contiguous()
            cu_dev = cu_host.to(x.device)
    if batch < 1:
        raise ValueError("adaln: no samples")
    D = x.shape[-1]
    _check_devices(x, scale, shift)
    scale2d = _as2d(scale, batch, D, x.dtype, "scale")
    shift2d = _as2d(shift, batch, D, x.dtype, "shift")
    x2d = x if x.dim() == 2 else x.reshape(-1, D)
    if not x.is_cuda:
        return _adaln_torch(x2d, scale2d, shift2d, batch, seq_len, cu_host, eps, bool(one_plus)).view(x.shape)
    if not x2d.is_contiguous():
        x2d = x2d.contiguous()
    if _OPS and _is_compiling():
        y = torch.ops.adaptiveload.adaln_fwd(x2d, scale2d, shift2d, cu_dev, cu_host, float(eps), batch, seq_len,
                                             bool(one_plus))[0]
    else:
        y = _AdaLN.apply(x2d, scale2d, shift2d, float(eps), batch, seq_len, cu_dev, cu_host, bool(one_plus))
    return y.view(x.shape)
