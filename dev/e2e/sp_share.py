"""One rank's share of a Wan-2.1-like DiT block under Ulysses sequence parallelism at
degree d, on one device, and its timing (dev/e2e/sp_replay.py runs it).

A micro-batch of B samples of S tokens on a group of d ranks: each rank holds S/d of each
sample's tokens. The block is examples/shape_bench.py's DiTBlock, the one the shipped shape
benchmarks time, so the cost model the plans are made with and the replay measure the same
computation: linear layers on the rank's S/d tokens, self-attention for H/d heads over all S
tokens after the all-to-all, cross-attention of the S/d queries to the sample's L text tokens
(the text K/V whole on every rank), FFN.

The all-to-alls are done as the layout change they cause on the rank, with the rank's own
data standing in for the other ranks': the bytes a rank packs and unpacks are moved, the
transfer between GPUs is not (it is modelled: dev/e2e/sp_model.Comm.a2a_ms). Heads must
divide by d; S is padded up to a multiple of d, as Ulysses does. Timing: CUDA events
(perf_counter on the CPU) around forward + backward of n blocks, warm-up runs first, the
median of the timed runs.
"""

import os
import statistics
import sys
import time

import torch
import torch.nn as nn

# The block examples/shape_bench.py times (the shape benchmark the plans' cost model is fitted
# from): staged next to this file on the device, else the checkout's examples/.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "examples")]
from shape_bench import DiTBlock as ShareBlock  # noqa: E402


class Clock:
    """Times a stretch of work on ``device``: CUDA events on the GPU (read without a sync
    until ms() is asked), perf_counter on the CPU; ms() in milliseconds."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            return ("cuda", a, b)
        return ("cpu", time.perf_counter(), None)

    def stop(self, t):
        if t[0] == "cuda":
            t[2].record()
            return t
        return ("cpu", (time.perf_counter() - t[1]) * 1e3, None)

    @staticmethod
    def ms(t):
        if t[0] == "cuda":
            t[2].synchronize()
            return t[1].elapsed_time(t[2])
        return t[1]

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


class Share:
    """n ShareBlocks of one model shape on one device, and the timing of micro-batch shares."""

    def __init__(self, hidden, heads, ffn, text_dim, text_len, blocks, device, dtype=torch.bfloat16, seed=0):
        torch.manual_seed(seed)
        self.device, self.dtype, self.text_len, self.text_dim = device, dtype, text_len, text_dim
        self.blocks = nn.ModuleList(ShareBlock(hidden, heads, ffn, text_dim if text_len else 0)
                                    for _ in range(blocks)).to(device, dtype)
        self.hidden, self.heads = hidden, heads
        self.cuda = device.type == "cuda"
        self.clock = Clock(device)
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def _inputs(self, B, S, d):
        """Random inputs of one rank's share: ceil(S / d) tokens of each sample (Ulysses pads a
        sequence to a multiple of d; attention then runs over d ceil(S / d) >= S tokens). x takes
        its gradient, as a block's input mid-model does (and shape_bench.py's)."""
        g, dt, dev = self.gen, self.dtype, self.device
        s = -(-S // d)
        x = torch.randn(B, s, self.hidden, generator=g, device=dev, dtype=dt, requires_grad=True)
        e = torch.randn(B, 6, self.hidden, generator=g, device=dev, dtype=dt) * 0.1
        text = (torch.randn(B, self.text_len, self.text_dim, generator=g, device=dev, dtype=dt)
                if self.text_len else None)
        gout = torch.randn(B, s, self.hidden, generator=g, device=dev, dtype=dt)
        return x, e, text, gout

    def run(self, B, S, d, inputs=None):
        """Forward + backward of the blocks on one share (gradients accumulate; they are
        dropped now and then by zero_grad so the parameters' .grad stay allocated)."""
        x, e, text, gout = inputs or self._inputs(B, S, d)
        for blk in self.blocks:
            x = blk(x, e, text, d)
        x.backward(gout)

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
            t = self.clock.start()
            self.run(B, S, d, inputs)
            ts.append(self.clock.stop(t))
        runs = [self.clock.ms(t) for t in ts]
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
            t = self.clock.start()
            self.run(B, S, d, inputs)
            pending.append(self.clock.stop(t))
            if len(pending) >= 64:
                out.extend(self.clock.ms(t) for t in pending)
                pending = []
        out.extend(self.clock.ms(t) for t in pending)
        for p in self.blocks.parameters():
            p.grad = None
        return out
