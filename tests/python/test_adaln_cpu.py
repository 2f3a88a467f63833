"""adaptiveload.adaln on the CPU (the plain-PyTorch path taken for a tensor not on CUDA):
forward and gradients against an independent float64 reference (closed forms, no autograd, no
layer_norm) over shapes, dtypes, layouts and options; its argument errors are the CUDA path's
(the C API's own messages, got from the library with NULL data pointers, and the Python checks).
With a CUDA device the CUDA kernels and the CPU path are compared on the same inputs (values,
gradients and errors); that class skips only without one.

Run by tests/python/python_test.sh (Bazel sh_test) with ADAPTIVELOAD_LIB set (the kernels'
argument checks come from the library), or directly:
    ADAPTIVELOAD_LIB=.../libadaptiveload.so PYTHONPATH=python python3 tests/python/test_adaln_cpu.py
"""

import ctypes
import importlib
import sys
import unittest

try:
    import torch
except ImportError as e:  # the sh_test checks first; this keeps direct runs honest too
    print("SKIP: torch cannot be imported (%s)" % e)
    sys.exit(0)

import adaptiveload

A = importlib.import_module("adaptiveload._adaln")  # the module (the package's `adaln` is the function)
adaln = A.adaln

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 2e-6}


def reference(x, scale, shift, dy, lens, eps, one_plus):
    """y, dx, dscale, dshift in float64 from the formulas of kernels/al_adaln.h; x, dy are
    (rows, D), scale and shift (B, D), lens the rows of each sample. eps as the kernel uses it:
    float32, 0 meaning 1e-6."""
    x, dy = x.double(), dy.double()
    scale, shift = scale.double(), shift.double()
    e = ctypes.c_float(eps).value or ctypes.c_float(1e-6).value
    one = 1.0 if one_plus else 0.0
    y, dx = torch.empty_like(x), torch.empty_like(x)
    dscale, dshift = torch.zeros_like(scale), torch.zeros_like(scale)
    r0 = 0
    for b, n in enumerate(lens):
        for r in range(r0, r0 + n):
            xr, g0 = x[r], dy[r]
            mean = xr.sum() / xr.numel()
            var = ((xr - mean) ** 2).sum() / xr.numel()
            rstd = 1.0 / torch.sqrt(var + e)
            xh = (xr - mean) * rstd
            y[r] = xh * (one + scale[b]) + shift[b]
            g = g0 * (one + scale[b])
            dx[r] = rstd * (g - g.mean() - xh * (g * xh).mean())
            dscale[b] += g0 * xh
            dshift[b] += g0
        r0 += n
    return y, dx, dscale, dshift


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


class Case:
    """Random inputs (|mean| > std) of a fixed (B, N, D) batch or a packed one (lens)."""

    def __init__(self, D, dtype=torch.float32, B=2, N=5, lens=None, sdtype=None, seed=0, mod3=False):
        g = torch.Generator().manual_seed(seed)
        self.lens = list(lens) if lens is not None else [N] * B
        self.B, rows = len(self.lens), sum(self.lens)
        self.packed = lens is not None
        shape = (rows, D) if self.packed else (B, N, D)
        self.x = (torch.randn(shape, generator=g) * 2 + 3).to(dtype)
        sd = sdtype or dtype
        self.scale = (0.5 * torch.randn(self.B, D, generator=g)).to(sd)
        self.shift = (0.5 * torch.randn(self.B, D, generator=g)).to(sd)
        if mod3:  # (B, 1, D) modulation, as DiTs often produce it
            self.scale, self.shift = self.scale[:, None, :], self.shift[:, None, :]
        self.dy = torch.randn(shape, generator=g).to(dtype)
        self.cu = torch.tensor([0] + torch.tensor(self.lens).cumsum(0).tolist(), dtype=torch.int32)

    def run(self, device="cpu", **kw):
        """y, dx, dscale, dshift of adaln on `device`, dy as the output's gradient."""
        leaves = [t.detach().clone().to(device).requires_grad_() for t in (self.x, self.scale, self.shift)]
        cu = self.cu if self.packed else None
        y = adaln(*leaves, cu_seqlens=cu, **kw)
        y.backward(self.dy.to(device))
        return [y.detach().cpu()] + [t.grad.cpu() for t in leaves]

    def want(self, eps=1e-6, one_plus=True):
        D = self.x.shape[-1]
        # The kernel's inputs: scale and shift cast to x's dtype first.
        s = self.scale.to(self.x.dtype).reshape(self.B, D)
        h = self.shift.to(self.x.dtype).reshape(self.B, D)
        return reference(self.x.reshape(-1, D), s, h, self.dy.reshape(-1, D), self.lens, eps, one_plus)


class CpuAgainstFloat64Reference(unittest.TestCase):
    def check(self, c, eps=1e-6, one_plus=True):
        got = c.run(eps=eps, one_plus=one_plus)
        want = c.want(eps, one_plus)
        shapes = (c.x.shape, c.x.shape, c.scale.shape, c.shift.shape)
        dtypes = (c.x.dtype, c.x.dtype, c.scale.dtype, c.shift.dtype)
        for name, g, w, shape, dtype in zip(("y", "dx", "dscale", "dshift"), got, want, shapes, dtypes):
            self.assertEqual(g.dtype, dtype, name)
            self.assertEqual(g.shape, shape, name)
            self.assertTrue(torch.isfinite(g).all(), name)
            tol = max(TOL[c.x.dtype], TOL[dtype])
            self.assertLess(rel(g.reshape(w.shape), w), tol, "%s (%s, D %d)" % (name, c.x.dtype, c.x.shape[-1]))

    def test_fixed_layout_dtypes_and_widths(self):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for D in (1, 7, 64, 1000):
                self.check(Case(D, dtype, seed=D))

    def test_packed_layout_with_empty_samples(self):
        for dtype in (torch.float32, torch.bfloat16):
            self.check(Case(96, dtype, lens=[5, 0, 17, 1, 0, 9], seed=3))
        self.check(Case(8, lens=[0, 0], seed=4))  # no rows at all

    def test_options_eps_plain_scale_and_modulation_shapes(self):
        self.check(Case(64, seed=5), eps=0.0)  # 0 means the default, 1e-6, as in C
        self.check(Case(64, seed=6), eps=0.25)
        self.check(Case(64, seed=7), one_plus=False)
        self.check(Case(64, seed=8, mod3=True))
        # scale and shift in another dtype than x: cast to x's, gradients back in theirs.
        self.check(Case(64, torch.bfloat16, sdtype=torch.float32, seed=9))

    def test_non_contiguous_input(self):
        c = Case(64, seed=10)
        c.x = c.x.transpose(0, 1).contiguous().transpose(0, 1)  # (B, N, D) with swapped strides
        self.assertFalse(c.x.is_contiguous())
        self.check(c)

    def test_no_grad_and_shape(self):
        c = Case(32, torch.bfloat16, B=3, N=4, seed=11)
        with torch.no_grad():
            y = adaln(c.x, c.scale, c.shift)
        self.assertEqual((y.shape, y.dtype, y.device.type), (c.x.shape, torch.bfloat16, "cpu"))

    def test_a_model_file_runs_on_the_cpu(self):
        """What the fallback is for: a module calling adaln trains on a CPU box."""

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mod = torch.nn.Linear(16, 2 * 32)
                self.lin = torch.nn.Linear(32, 32)

            def forward(self, x, c, cu):
                scale, shift = self.mod(c).chunk(2, dim=-1)
                return self.lin(adaln(x, scale, shift, cu_seqlens=cu))

        torch.manual_seed(0)
        m = Block()
        x, c = torch.randn(10, 32), torch.randn(3, 16)
        loss = m(x, c, torch.tensor([0, 4, 4, 10], dtype=torch.int32)).square().mean()
        loss.backward()
        self.assertTrue(all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters()))


def c_api_error(x, scale, shift, cu=None, eps=1e-6, one_plus=True):
    """The adaptiveload.Error the C API gives for these arguments: al_adaln_forward called with
    the desc the CUDA path builds and NULL data pointers (its checks run first; a call that
    passes them fails on the NULL pointers and launches nothing)."""
    D = x.shape[-1]
    if cu is None:
        batch, seq_len, cu_dev, cu_host = x.shape[0], x.shape[1], None, None
    else:
        batch, seq_len = cu.numel() - 1, 0
        cu_dev = cu_host = cu.to(torch.int32).contiguous()
    d, o = A._make(x if x.dim() == 2 else x.reshape(-1, D), batch, seq_len, cu_dev, cu_host, float(eps), one_plus)
    rc = A._fns()[0](d, o, None, None, None, None, None, None, None)
    return adaptiveload._lib.error(rc, "al_adaln_forward")


def error_of(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return e
    return None


def same_error(test, got, want, what):
    test.assertIsNotNone(got, what)
    test.assertIs(type(got), type(want), "%s: %r vs %r" % (what, got, want))
    test.assertEqual(str(got), str(want), what)
    test.assertEqual(getattr(got, "status", None), getattr(want, "status", None), what)


# Arguments the C API refuses: (what, x, scale, shift, cu_seqlens, eps).
def c_level_cases():
    z = torch.zeros
    return [
        ("dim 0", z(2, 0), z(1, 0), z(1, 0), torch.tensor([0, 2]), 1e-6),
        ("dim 16385", z(1, 1, 16385), z(1, 16385), z(1, 16385), None, 1e-6),
        ("batch 65536 fixed", z(65536, 1, 2), z(65536, 2), z(65536, 2), None, 1e-6),
        ("batch 65536 packed", z(0, 2), z(65536, 2), z(65536, 2), z(65537, dtype=torch.int32), 1e-6),
        ("seq_len 0", z(2, 0, 8), z(2, 8), z(2, 8), None, 1e-6),
        ("cu[0] != 0", z(3, 8), z(1, 8), z(1, 8), torch.tensor([1, 3]), 1e-6),
        ("cu decreasing", z(3, 8), z(2, 8), z(2, 8), torch.tensor([0, 4, 3]), 1e-6),
        ("cu[B] != rows", z(3, 8), z(2, 8), z(2, 8), torch.tensor([0, 1, 2]), 1e-6),
        ("eps < 0", z(1, 2, 8), z(1, 8), z(1, 8), None, -0.1),
        ("eps inf", z(1, 2, 8), z(1, 8), z(1, 8), None, float("inf")),
        ("eps nan", z(1, 2, 8), z(1, 8), z(1, 8), None, float("nan")),
        ("eps beyond float32", z(1, 2, 8), z(1, 8), z(1, 8), None, 1e39),
    ]


# Arguments refused in Python before the C API: (what, args, kwargs, exception type, message).
def python_level_cases():
    x, s = torch.zeros(1, 2, 8), torch.zeros(1, 8)
    return [
        ("x None", (None, s, s), {}, TypeError, "adaln: x must be a torch.Tensor, not NoneType"),
        ("scale None", (x, None, s), {}, TypeError, "adaln: scale must be a torch.Tensor, not NoneType"),
        ("shift list", (x, s, [0.0] * 8), {}, TypeError, "adaln: shift must be a torch.Tensor, not list"),
        ("cu list", (torch.zeros(2, 8), s, s), {"cu_seqlens": [0, 2]}, TypeError,
         "adaln: cu_seqlens must be None or a torch.Tensor, not list"),
        ("eps None", (x, s, s), {"eps": None}, TypeError, "adaln: eps must be a number, not NoneType"),
        ("int x", (x.long(), s, s), {}, TypeError, "adaln: x dtype torch.int64 is not bf16, fp16 or fp32"),
        ("2-D x", (torch.zeros(2, 8), s, s), {}, ValueError,
         "adaln: x must be (B, N, D) without cu_seqlens, got (2, 8)"),
        ("3-D x packed", (x, s, s), {"cu_seqlens": torch.tensor([0, 2])}, ValueError,
         "adaln: x must be (rows, D) with cu_seqlens, got (1, 2, 8)"),
        ("no samples", (torch.zeros(0, 8), s, s), {"cu_seqlens": torch.tensor([0])}, ValueError,
         "adaln: no samples"),
        ("0-d x", (torch.tensor(1.0), s, s), {}, ValueError, "adaln: x must be (B, N, D) without cu_seqlens, got ()"),
        ("0-d x packed", (torch.tensor(1.0), s, s), {"cu_seqlens": torch.tensor([0, 1])}, ValueError,
         "adaln: x must be (rows, D) with cu_seqlens, got ()"),
        ("0-d scale", (x, torch.tensor(1.0), s), {}, ValueError,
         "adaln: scale must be (B, D) or (B, 1, D) = (1, 8), got a 0-d tensor"),
        ("0-d shift", (x, s, torch.tensor(1.0)), {}, ValueError,
         "adaln: shift must be (B, D) or (B, 1, D) = (1, 8), got a 0-d tensor"),
        ("0-d cu_seqlens", (torch.zeros(2, 8), s, s), {"cu_seqlens": torch.tensor(2)}, ValueError,
         "adaln: cu_seqlens must be the B + 1 offsets (1-D), got a 0-d tensor"),
    ]


class CpuErrorsAreTheCudaPaths(unittest.TestCase):
    def test_c_level_checks_give_the_c_apis_errors(self):
        for what, x, scale, shift, cu, eps in c_level_cases():
            want = c_api_error(x, scale, shift, cu, eps)
            self.assertIsInstance(want, adaptiveload.Error, what)
            got = error_of(adaln, x, scale, shift, eps=eps, cu_seqlens=cu)
            same_error(self, got, want, what)
            self.assertIn("al_adaln_forward: AL_E", str(got), what)

    def test_python_level_checks(self):
        for what, args, kw, etype, msg in python_level_cases():
            e = error_of(adaln, *args, **kw)
            self.assertIs(type(e), etype, "%s: %r" % (what, e))
            self.assertEqual(str(e), msg, what)

    def test_a_wrong_modulation_shape_is_torchs_reshape_error(self):
        x = torch.zeros(2, 3, 8)
        e = error_of(adaln, x, torch.zeros(3, 8), torch.zeros(2, 8))
        self.assertIsInstance(e, RuntimeError)
        self.assertIn("[2, 8]", str(e))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device: the CUDA-vs-CPU comparison needs one")
class CudaAgainstCpu(unittest.TestCase):
    """The CUDA kernels and the CPU path on the same inputs: values and gradients within the
    dtype's rounding, errors identical."""

    def test_values_and_gradients(self):
        cases = [Case(D, dtype, seed=D) for dtype in (torch.float32, torch.bfloat16, torch.float16)
                 for D in (7, 64, 1536, 4096)]
        cases += [Case(1000, torch.bfloat16, lens=[5, 0, 17, 40, 1], seed=1),
                  Case(64, torch.bfloat16, sdtype=torch.float32, seed=2), Case(64, seed=3, mod3=True)]
        for c in cases:
            for kw in ({}, {"eps": 0.0}, {"one_plus": False}):
                cpu, gpu = c.run("cpu", **kw), c.run("cuda", **kw)
                for name, a, b in zip(("y", "dx", "dscale", "dshift"), gpu, cpu):
                    self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape), name)
                    self.assertLess(rel(a, b), 2 * TOL[c.x.dtype] + 1e-6,
                                    "%s %s D %d %s" % (name, c.x.dtype, c.x.shape[-1], kw))

    def test_errors_identical(self):
        for what, x, scale, shift, cu, eps in c_level_cases():
            got = error_of(adaln, x, scale, shift, eps=eps, cu_seqlens=cu)
            want = error_of(adaln, x.cuda(), scale.cuda(), shift.cuda(), eps=eps, cu_seqlens=cu)
            same_error(self, got, want, what)
        for what, args, kw, _, _ in python_level_cases():
            cuda = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
            same_error(self, error_of(adaln, *args, **kw), error_of(adaln, *cuda, **kw), what)

    def test_modulation_on_another_device_is_refused(self):
        x = torch.zeros(1, 2, 8, device="cuda")
        for args, msg in (((x, torch.zeros(1, 8), torch.zeros(1, 8, device="cuda")), "adaln: scale is on cpu, x on cuda"),
                          ((x.cpu(), torch.zeros(1, 8), torch.zeros(1, 8, device="cuda")), "adaln: shift is on cuda")):
            with self.assertRaisesRegex(ValueError, msg):
                adaln(*args)


if __name__ == "__main__":
    unittest.main(verbosity=2)
