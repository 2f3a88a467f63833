#!/usr/bin/env python3
"""adaptiveload.adaln under PyTorch on a GPU: eager, CUDA-graph capture, torch.compile with
fullgraph=True (static and dynamic shapes; the custom operators) and torch.library.opcheck,
against a float64 eager reference and against each other. Runs on the GPU machine
(dev/kernels_device_run.sh); skips without a CUDA device, the torch.compile cases also without
torch.library.custom_op (torch < 2.4).

    ADAPTIVELOAD_LIB=.../libal_kernels.so PYTHONPATH=python python3 tests/kernels/adaln_torch_test.py
"""

import importlib
import unittest

import torch
import torch.nn.functional as F

# The module itself (the package's attribute `adaln` is the function).
A = importlib.import_module("adaptiveload._adaln")
adaln = A.adaln

EPS = 1e-6
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-2, torch.float32: 1e-5}


def reference(x, scale, shift, seg=None):
    """float64 eager AdaLN; seg[row] = sample of each row of a packed (rows, D) x."""
    xn = F.layer_norm(x, (x.shape[-1],), eps=EPS)
    if seg is None:
        return xn * (1 + scale[:, None, :]) + shift[:, None, :]
    return xn * (1 + scale[seg]) + shift[seg]


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


class Problem:
    """Random inputs (never zeros; |mean| > std) of a fixed (B, N, D) or packed batch."""

    def __init__(self, packed, dtype=torch.bfloat16, n=37, seed=0, cu_on_gpu=False):
        torch.manual_seed(seed)
        if packed:
            lens = [5, 0, 17, 40, 1]
            self.B, D = len(lens), 1000
            rows = sum(lens)
            cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
            self.cu = cu.cuda() if cu_on_gpu else cu
            self.seg = torch.repeat_interleave(torch.arange(self.B), torch.tensor(lens)).cuda()
            shape = (rows, D)
        else:
            self.B, D = 2, 1536
            self.cu = self.seg = None
            shape = (self.B, n, D)
        self.x = (torch.randn(shape, device="cuda") * 2 + 3).to(dtype)
        self.scale = (0.5 * torch.randn(self.B, D, device="cuda")).to(dtype)
        self.shift = (0.5 * torch.randn(self.B, D, device="cuda")).to(dtype)
        self.dy = torch.randn(shape, device="cuda").to(dtype)
        self.dtype = dtype

    def run(self, fn):
        """y, dx, dscale, dshift of fn(x, scale, shift) with dy as the output's gradient."""
        leaves = [t.detach().clone().requires_grad_() for t in (self.x, self.scale, self.shift)]
        y = fn(*leaves)
        y.backward(self.dy)
        return [y.detach()] + [t.grad for t in leaves]

    def ours(self, x, scale, shift):
        return adaln(x, scale, shift, eps=EPS, cu_seqlens=self.cu)

    def want(self):
        return self.run(lambda x, s, h: reference(x.double(), s.double(), h.double(), self.seg))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class Eager(unittest.TestCase):
    def check(self, p):
        got, want = p.run(p.ours), p.want()
        for name, g, w in zip(("y", "dx", "dscale", "dshift"), got, want):
            self.assertEqual(g.dtype, p.dtype, name)
            self.assertLess(rel(g, w), TOL[p.dtype], name)

    def test_fixed_bf16(self):
        self.check(Problem(False))

    def test_fixed_fp32(self):
        self.check(Problem(False, torch.float32))

    def test_packed_host_offsets(self):
        self.check(Problem(True))

    def test_packed_device_offsets(self):
        self.check(Problem(True, cu_on_gpu=True))

    def test_deterministic(self):
        p = Problem(True)
        a, b = p.run(p.ours), p.run(p.ours)
        for name, u, v in zip(("y", "dx", "dscale", "dshift"), a, b):
            self.assertTrue(torch.equal(u, v), name)

    def test_cuda_graph(self):
        """fwd+bwd captured and replayed gives the eager call's bits."""
        p = Problem(False)
        want = p.run(p.ours)
        leaves = [t.detach().clone().requires_grad_() for t in (p.x, p.scale, p.shift)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up off the default stream, as capture wants
            p.ours(*leaves).backward(p.dy)
        torch.cuda.current_stream().wait_stream(s)
        for t in leaves:
            t.grad = None
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = p.ours(*leaves)
            y.backward(p.dy)
        g.replay()
        torch.cuda.synchronize()
        for name, u, v in zip(("y", "dx", "dscale", "dshift"), [y.detach()] + [t.grad for t in leaves], want):
            self.assertTrue(torch.equal(u, v), name)


@unittest.skipUnless(torch.cuda.is_available() and A._OPS, "needs CUDA and torch.library.custom_op")
class Compiled(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()

    def same_as_eager(self, p, fn):
        """fn (compiled) gives the eager call's bits: the same kernels run."""
        want = p.run(p.ours)
        got = p.run(fn)
        for name, u, v in zip(("y", "dx", "dscale", "dshift"), got, want):
            self.assertTrue(torch.equal(u, v), "%s differs (max %g)" % (name, (u.float() - v.float()).abs().max()))

    def test_fullgraph_fixed(self):
        p = Problem(False)
        self.same_as_eager(p, torch.compile(p.ours, fullgraph=True))

    def test_fullgraph_packed_host_offsets(self):
        p = Problem(True)
        self.same_as_eager(p, torch.compile(p.ours, fullgraph=True))

    def test_fullgraph_packed_device_offsets(self):
        p = Problem(True, cu_on_gpu=True)
        self.same_as_eager(p, torch.compile(p.ours, fullgraph=True))

    def test_dynamic_shapes(self):
        """One compiled function over two token counts, as a loop over shape buckets."""
        fn = torch.compile(lambda x, s, h: adaln(x, s, h, eps=EPS), fullgraph=True, dynamic=True)
        for n in (37, 53):
            p = Problem(False, n=n, seed=n)
            self.same_as_eager(p, fn)

    def test_inside_a_block(self):
        """Surrounding ops fused by Inductor around the opaque op: close to the float64 reference."""
        p = Problem(False, torch.float32)

        def block(x, s, h):
            return torch.tanh(adaln(x * 0.5 + 1.0, s, h, eps=EPS)) * 2.0

        def ref(x, s, h):
            return torch.tanh(reference(x.double() * 0.5 + 1.0, s.double(), h.double())) * 2.0

        got, want = p.run(torch.compile(block, fullgraph=True)), p.run(ref)
        for name, g, w in zip(("y", "dx", "dscale", "dshift"), got, want):
            self.assertLess(rel(g, w), 1e-5, name)

    def test_opcheck(self):
        """Schema, fake tensors, autograd registration and AOT dispatch of the custom operator."""
        p = Problem(False)
        x2d = p.x.reshape(-1, p.x.shape[-1]).requires_grad_()
        args = (x2d, p.scale.clone().requires_grad_(), p.shift.clone().requires_grad_(), None, None, EPS,
                p.B, p.x.shape[1], True)
        torch.library.opcheck(torch.ops.adaptiveload.adaln_fwd.default, args)


if __name__ == "__main__":
    unittest.main(verbosity=2)
