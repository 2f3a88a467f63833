"""One rank's share of a Wan-2.1-like DiT block under Ulysses sequence parallelism at
degree d, on one device, and its timing (dev/e2e/sp_replay.py runs it).

A micro-batch of B samples of S tokens on a group of d ranks: each rank holds S/d of each
sample's tokens. Per block, on one rank (Wan 2.1's layout, as examples/dit_model.py):

    y = AdaLN(x)                       x: (B, S/d, hidden), the rank's tokens
    q, k, v = y Wq, y Wk, y Wv         linear layers on S/d tokens, all heads; q/k RMSNorm
    all-to-all                         -> (B, H/d, S, head_dim): H/d heads over all S tokens
    a = attention(q, k, v)             flash attention (SDPA), H/d heads, S x S
    all-to-all back                    -> (B, S/d, hidden)
    x += gate * a Wo
    x += cross-attention(LN(x), text)  S/d queries, all heads, L text tokens
    x += gate * FFN(AdaLN(x))          GELU tanh, on S/d tokens

The all-to-alls are done as the layout change they cause on the rank (the d source chunks of
S/d tokens for H/d heads become one (B, H/d, S, head_dim) tensor, and back), with the
rank's own data standing in for the other ranks': the bytes a rank packs and unpacks are
moved, the transfer between GPUs is not (it is modelled: dev/e2e/sp_model.Comm.a2a_ms).
Heads must divide by d; S is padded up to a multiple of d, as Ulysses does. Timing: CUDA events (perf_counter on the CPU) around forward +
backward of n blocks, warm-up runs first, the median of the timed runs.
"""

import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v):
    """softmax(q k^T / sqrt(hd)) v: SDPA (flash on the GPU) where torch has it (>= 2.0), else
    written out (the CPU smoke run on older torch)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    w = torch.softmax((q @ k.transpose(-1, -2)).float() / q.shape[-1] ** 0.5, dim=-1).to(q.dtype)
    return w @ v


class ShareBlock(nn.Module):
    """A DiT block whose forward takes the SP degree d (the weights do not depend on d)."""

    def __init__(self, hidden, heads, ffn, text_dim, eps=1e-6):
        super().__init__()
        if hidden % heads:
            raise ValueError("hidden %d is not a multiple of heads %d" % (hidden, heads))
        self.hidden, self.heads, self.hd, self.eps = hidden, heads, hidden // heads, eps
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.o = nn.Linear(hidden, hidden)
        self.nq = nn.Parameter(torch.ones(hidden))
        self.nk = nn.Parameter(torch.ones(hidden))
        self.cq = nn.Linear(hidden, hidden)
        self.ckv = nn.Linear(text_dim, 2 * hidden)
        self.co = nn.Linear(hidden, hidden)
        self.f1 = nn.Linear(hidden, ffn)
        self.f2 = nn.Linear(ffn, hidden)
        self.mod = nn.Parameter(torch.randn(6, hidden) * 0.02)

    def _rms(self, x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * w

    def _a2a_in(self, t, d):
        """(B, S/d, hidden) -> (B, H/d, S, hd): the layout after Ulysses' first all-to-all."""
        B, s, _ = t.shape
        hl = self.heads // d
        return t.view(B, s, d, hl, self.hd).permute(0, 3, 2, 1, 4).reshape(B, hl, d * s, self.hd)

    def _a2a_out(self, a, d):
        """(B, H/d, S, hd) -> (B, S/d, hidden): the layout after the all-to-all back."""
        B, hl, S, hd = a.shape
        s = S // d
        return a.view(B, hl, d, s, hd).permute(0, 3, 2, 1, 4).reshape(B, s, d * hl * hd)

    def forward(self, x, e, text, d):
        if self.heads % d:
            raise ValueError("SP degree %d does not divide %d heads" % (d, self.heads))
        B, s, h = x.shape
        m = (self.mod.unsqueeze(0) + e).unbind(1)  # 6 x (B, h)
        y = F.layer_norm(x, (h,), eps=self.eps) * (1 + m[1].unsqueeze(1)) + m[0].unsqueeze(1)
        q, k, v = self.qkv(y).chunk(3, -1)
        q, k = self._rms(q, self.nq), self._rms(k, self.nk)
        a = attention(self._a2a_in(q, d), self._a2a_in(k, d), self._a2a_in(v, d))
        x = x + self.o(self._a2a_out(a, d)) * m[2].unsqueeze(1)
        y = F.layer_norm(x, (h,), eps=self.eps)
        cq = self.cq(y).view(B, s, self.heads, self.hd).transpose(1, 2)
        ck, cv = self.ckv(text).view(B, -1, 2, self.heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        c = attention(cq, ck, cv).transpose(1, 2).reshape(B, s, h)
        x = x + self.co(c)
        y = F.layer_norm(x, (h,), eps=self.eps) * (1 + m[4].unsqueeze(1)) + m[3].unsqueeze(1)
        return x + self.f2(F.gelu(self.f1(y), approximate="tanh")) * m[5].unsqueeze(1)


class Share:
    """n ShareBlocks of one model shape on one device, and the timing of micro-batch shares."""

    def __init__(self, hidden, heads, ffn, text_dim, text_len, blocks, device, dtype=torch.bfloat16, seed=0):
        torch.manual_seed(seed)
        self.device, self.dtype, self.text_len, self.text_dim = device, dtype, text_len, text_dim
        self.blocks = nn.ModuleList(ShareBlock(hidden, heads, ffn, text_dim) for _ in range(blocks)).to(device, dtype)
        self.hidden, self.heads = hidden, heads
        self.cuda = device.type == "cuda"
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def _inputs(self, B, S, d):
        """Random inputs of one rank's share: ceil(S / d) tokens of each sample (Ulysses pads a
        sequence to a multiple of d; attention then runs over d ceil(S / d) >= S tokens)."""
        g, dt, dev = self.gen, self.dtype, self.device
        s = -(-S // d)
        x = torch.randn(B, s, self.hidden, generator=g, device=dev, dtype=dt)
        e = torch.randn(B, 6, self.hidden, generator=g, device=dev, dtype=dt) * 0.1
        text = torch.randn(B, self.text_len, self.text_dim, generator=g, device=dev, dtype=dt)
        gout = torch.randn(B, s, self.hidden, generator=g, device=dev, dtype=dt)
        return x, e, text, gout

    def run(self, B, S, d, inputs=None):
        """Forward + backward of the blocks on one share (gradients accumulate; they are
        dropped now and then by zero_grad so the parameters' .grad stay allocated)."""
        x, e, text, gout = inputs or self._inputs(B, S, d)
        for blk in self.blocks:
            x = blk(x, e, text, d)
        x.backward(gout)

    def _timer(self):
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            return ("cuda", a, b)
        return ("cpu", time.perf_counter(), None)

    def _stop(self, t):
        if t[0] == "cuda":
            t[2].record()
            return t
        return ("cpu", (time.perf_counter() - t[1]) * 1e3, None)

    @staticmethod
    def _ms(t):
        if t[0] == "cuda":
            t[2].synchronize()
            return t[1].elapsed_time(t[2])
        return t[1]

    def time_shape(self, B, S, d, reps=3, warmup=1):
        """{"ms": median of reps (n blocks), "runs": [...], "peak_mem_bytes"}."""
        inputs = self._inputs(B, S, d)
        for _ in range(warmup):
            self.run(B, S, d, inputs)
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        ts = []
        for _ in range(reps):
            t = self._timer()
            self.run(B, S, d, inputs)
            ts.append(self._stop(t))
        runs = [self._ms(t) for t in ts]
        peak = torch.cuda.max_memory_allocated(self.device) if self.cuda else None
        for p in self.blocks.parameters():
            p.grad = None
        return {"ms": statistics.median(runs), "runs": runs, "peak_mem_bytes": peak}

    def time_sequence(self, shapes):
        """Each (B, S, d) of ``shapes`` once, in order, each timed (the full replay's inner
        loop); returns the ms list. Inputs are made before each timed run, outside it."""
        out = []
        pending = []
        for B, S, d in shapes:
            inputs = self._inputs(B, S, d)
            t = self._timer()
            self.run(B, S, d, inputs)
            pending.append(self._stop(t))
            if len(pending) >= 64:
                out.extend(self._ms(t) for t in pending)
                pending = []
        out.extend(self._ms(t) for t in pending)
        for p in self.blocks.parameters():
            p.grad = None
        return out
