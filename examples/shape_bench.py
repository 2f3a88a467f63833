#!/usr/bin/env python3
"""Shape benchmark for AdaptiveLoad's cost model.

Times forward + backward of a model over a grid of (B, S) -- B samples of S
tokens each -- on one GPU and writes the CSV that `adaptiveload fit --bench`
reads:

    B,S,step_ms,peak_mem_bytes

step_ms is the median over --iters timed iterations (CUDA events) after
--warmup untimed ones; peak_mem_bytes is torch.cuda.max_memory_allocated()
over the timed iterations. Shapes that run out of memory are skipped and
reported on stderr (they bound M_mem from above).

The default model is a small stack of DiT blocks shaped like Wan 2.1 1.3B
(D=1536, 12 heads, FFN 8960, AdaLN modulation, SDPA attention). To measure
your own model, pass --model package.module:factory, where factory(dim) returns
an nn.Module called as module(x, cond) with x of shape [B, S, dim] and cond of
shape [B, dim] (or use --model-kwargs for extra JSON keyword arguments).

    python3 examples/shape_bench.py -o bench.csv
    adaptiveload fit --bench bench.csv -o cost.alcost --mem-capacity 150e9

--dit benchmarks examples/dit_model.py's PackedDiT instead (what examples/train_dit.py
trains): one step of B samples of S tokens is train_dit.py's packed micro-batch, i.e.
the rectified-flow loss forward + backward with per-sample text cross-attention (--text-len
tokens of --text-dim each), the fused AdaLN (unless --no-fused-adaln) and the attention of
--attn, under bf16 autocast; --depth is its block count:

    python3 examples/shape_bench.py --dit --depth 2 -o dit_bench.csv
"""

import argparse
import csv
import importlib
import json
import math
import statistics
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # Lets --help and py_compile work without PyTorch.
    torch = None
    nn = None
    F = None


def _module_base():
    return nn.Module if nn is not None else object


class DiTBlock(_module_base()):
    """One DiT block with AdaLN-Zero style modulation from a conditioning vector."""

    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(approximate="tanh"), nn.Linear(ffn, dim))
        self.ada = nn.Linear(dim, 6 * dim)

    def forward(self, x, cond):
        b, s, d = x.shape
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(F.silu(cond)).unsqueeze(1).chunk(6, dim=-1)
        h = self.norm1(x) * (1 + scale1) + shift1
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + gate1 * self.proj(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.mlp(h)


class DiTStack(_module_base()):
    def __init__(self, dim=1536, heads=12, ffn=8960, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList([DiTBlock(dim, heads, ffn) for _ in range(depth)])

    def forward(self, x, cond):
        for blk in self.blocks:
            x = blk(x, cond)
        return x


def load_model(spec, dim, kwargs):
    """'pkg.mod:factory' -> factory(dim, **kwargs)."""
    if ":" not in spec:
        raise SystemExit("--model must look like package.module:factory")
    mod_name, fn_name = spec.split(":", 1)
    factory = getattr(importlib.import_module(mod_name), fn_name)
    return factory(dim, **kwargs)


def parse_list(text):
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            value = int(part)
            if value < 1:
                raise argparse.ArgumentTypeError("values must be >= 1: %r" % text)
            out.append(value)
    if not out:
        raise argparse.ArgumentTypeError("empty list: %r" % text)
    return out


def time_shape(model, batch, seq, dim, dtype, warmup, iters, device):
    """Median ms of forward + backward and the peak bytes allocated."""
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype, requires_grad=True)
    cond = torch.randn(batch, dim, device=device, dtype=dtype)
    for _ in range(warmup):
        model(x, cond).float().square().mean().backward()
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        model(x, cond).float().square().mean().backward()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    peak = torch.cuda.max_memory_allocated(device)
    model.zero_grad(set_to_none=True)
    return statistics.median(times), peak


def _token_grid(seq):
    """A (t, h, w) token grid with t * h * w == seq for the DiT's RoPE (h, w as square as
    the factors allow, t the rest)."""
    best = (seq, 1, 1)
    for t in range(1, seq + 1):
        if seq % t:
            continue
        rest = seq // t
        h = int(math.isqrt(rest))
        while rest % h:
            h -= 1
        if rest // h <= 4 * h:  # first (smallest) t with a near-square frame
            return (t, h, rest // h)
        best = (t, h, rest // h)
    return best


def time_dit_shape(td, model, batch, seq, args, device):
    """Median ms of train_dit.py's forward + backward for B samples of S tokens, and the
    peak bytes allocated."""
    cfg = model.cfg
    grid = _token_grid(seq)
    cu = torch.arange(0, (batch + 1) * seq, seq, dtype=torch.int32, device=device)
    cu_text = torch.arange(0, (batch + 1) * args.text_len, args.text_len, dtype=torch.int32, device=device)
    p = td.Prepared()
    p.x0 = torch.randn(batch * seq, cfg.patch_dim, device=device)
    p.cu, p.grids, p.n, p.S = cu, [grid] * batch, batch, seq
    p.text = torch.randn(batch * args.text_len, cfg.text_dim, device=device)
    p.cu_text, p.text_lengths = cu_text, [args.text_len] * batch
    p.seg = torch.arange(batch, device=device).repeat_interleave(seq)
    p.keep = torch.ones(batch * seq, dtype=torch.bool, device=device)
    p.step_tokens = batch * seq
    gen = torch.Generator(device=device).manual_seed(0)
    autocast = td.autocast_for(device)

    def once():
        loss, _ = td.flow_loss(model, p, 1, gen, "logit-normal", autocast)
        loss.backward()

    cuda = device.type == "cuda"
    for _ in range(args.warmup):
        once()
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    timer = td.MicroTimer(device)
    times = []
    for _ in range(args.iters):
        start = timer.start()
        once()
        times.append(timer.ms(timer.stop(start)))
    peak = torch.cuda.max_memory_allocated(device) if cuda else None
    model.zero_grad(set_to_none=True)
    return statistics.median(times), peak


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="CSV to write")
    ap.add_argument("--model", help="package.module:factory (default: built-in DiT stack)")
    ap.add_argument("--model-kwargs", default="{}", help="JSON keyword arguments for the factory")
    ap.add_argument("--dim", type=int, default=1536)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=8960)
    ap.add_argument("--depth", type=int, default=4, help="blocks of the built-in model")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    ap.add_argument("--batches", type=parse_list, default=parse_list("1,2,4,8,16,32,64"))
    ap.add_argument("--seqs", type=parse_list, default=parse_list("256,1024,2048,4096,8192,16384,32760,65520"))
    ap.add_argument("--max-tokens", type=int, default=1 << 20, help="skip shapes with B*S above this")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dit", action="store_true", help="benchmark examples/dit_model.py's PackedDiT (see above)")
    ap.add_argument("--text-len", type=int, default=128, help="--dit: text tokens per sample")
    ap.add_argument("--text-dim", type=int, default=4096, help="--dit: text embedding width")
    ap.add_argument("--attn", default="auto", help="--dit: attention (auto, varlen, flex, sdpa, math)")
    ap.add_argument("--no-fused-adaln", action="store_true", help="--dit: PyTorch AdaLN instead of the fused one")
    args = ap.parse_args(argv)

    if torch is None:
        raise SystemExit("shape_bench.py needs PyTorch")
    device = torch.device(args.device)
    if device.type == "cpu" and not args.dit:
        raise SystemExit("shape_bench.py needs a CUDA GPU (--dit also runs on the CPU, for checking)")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("shape_bench.py needs a CUDA GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    td = None
    if args.dit:
        import os

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import train_dit as td  # noqa: E402  (examples/train_dit.py: the model, its loss and inputs)

        cfg = td.dit_model.DiTConfig(hidden=args.dim, heads=args.heads, ffn=args.ffn, blocks=args.depth,
                                     text_dim=args.text_dim)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        model = td.build_model(cfg, device, args.attn, False if args.no_fused_adaln else None,
                               log=lambda m: print(m, file=sys.stderr)).train()
    elif args.model:
        model = load_model(args.model, args.dim, json.loads(args.model_kwargs))
    else:
        model = DiTStack(args.dim, args.heads, args.ffn, args.depth)
    if not args.dit:
        model = model.to(device=device, dtype=dtype).train()

    rows = []
    skipped = []
    for seq in args.seqs:
        oom_at = None
        for batch in args.batches:
            if batch * seq > args.max_tokens:
                continue
            if oom_at is not None and batch >= oom_at:
                skipped.append((batch, seq, "larger than an earlier out-of-memory batch"))
                continue
            try:
                if td is not None:
                    ms, peak = time_dit_shape(td, model, batch, seq, args, device)
                else:
                    ms, peak = time_shape(model, batch, seq, args.dim, dtype, args.warmup, args.iters, device)
            except getattr(torch.cuda, "OutOfMemoryError", MemoryError):
                oom_at = batch
                skipped.append((batch, seq, "out of memory"))
                model.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                continue
            if not math.isfinite(ms):
                skipped.append((batch, seq, "non-finite time"))
                continue
            rows.append((batch, seq, ms, peak))
            print("B=%-4d S=%-6d %10.3f ms  %8.2f GB" % (batch, seq, ms, (peak or 0) / 1e9), file=sys.stderr)

    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        mem = all(r[3] is not None for r in rows)
        w.writerow(["B", "S", "step_ms"] + (["peak_mem_bytes"] if mem else []))
        for batch, seq, ms, peak in rows:
            w.writerow([batch, seq, "%.6f" % ms] + ([peak] if mem else []))
    for batch, seq, why in skipped:
        print("skipped B=%d S=%d: %s" % (batch, seq, why), file=sys.stderr)
    print("wrote %d rows to %s (%s, %s)" % (len(rows), args.out, torch.cuda.get_device_name(device)
                                            if device.type == "cuda" else "cpu", args.dtype), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
