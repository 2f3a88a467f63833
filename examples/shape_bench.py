#!/usr/bin/env python3
"""Shape benchmark for AdaptiveLoad's cost model.

Times forward + backward of a model over a grid of (B, S) -- B samples of S
tokens each -- on one GPU and writes the CSV that `adaptiveload fit --bench`
reads:

    # shape_bench: hidden=1536 heads=12 ffn=8960 layers=4 dtype=bf16 dtype_bytes=2 ...
    B,S,d,step_ms,peak_mem_bytes

step_ms is the median over the timed iterations (CUDA events) after --warmup untimed
ones: --iters of them, or with --target-ms as many as fill that many milliseconds (at
least --min-iters, at most --iters); peak_mem_bytes is torch.cuda.max_memory_allocated()
over the timed iterations. Shapes that run out of memory are skipped and reported on
stderr (they bound M_mem from above). The comment line gives the model's shape (hidden
width, heads, FFN width, layers, dtype and its bytes), the device, the torch version and
the date: `adaptiveload fit` derives the all-to-all bytes per token of sequence
parallelism from hidden, layers and dtype_bytes.

Sequence parallelism (--sp-degrees 1,2,4,8; built-in model only): at degree d the row
times ONE rank's share of a micro-batch as Ulysses runs it: the linear layers (QKV,
projection, FFN, AdaLN) on ceil(S / d) tokens of each sample, and attention for H / d
heads over all d * ceil(S / d) tokens (a sample is padded to a multiple of d). The two
all-to-alls around attention are emulated by the local permutes that pack and unpack
them (the bytes that would cross the link are modelled by `fit`, not timed here). A
degree that does not divide the heads is skipped. --max-tokens caps the tokens one rank
holds, B * ceil(S / d), as M_mem caps them in a plan. The d column is 1 throughout without
--sp-degrees.

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

One rank's share at SP degrees 1, 2, 4 and 8, for a Wan 2.1 14B block:

    python3 examples/shape_bench.py --dim 5120 --heads 40 --ffn 13824 --depth 1 \
        --sp-degrees 1,2,4,8 --max-tokens 65536 --target-ms 200 -o bench_14b_sp.csv
"""

import argparse
import csv
import datetime
import importlib
import json
import math
import statistics
import sys
import time

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
        self.sp = 1  # SP degree: this module computes one rank's share (see sp_attention)
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
        if self.sp > 1:
            a = sp_attention(self.qkv(h), self.heads, self.sp)
        else:
            q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        x = x + gate1 * self.proj(a)
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.mlp(h)


def attention(q, k, v):
    """SDPA (flash attention on the GPU); plain softmax attention where torch has no SDPA
    (old CPU builds: for checking only)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v


def sp_attention(qkv, heads, sp):
    """One Ulysses rank's attention at degree sp, on one GPU. qkv is this rank's
    [B, S/sp, 3 * dim] (its tokens, all heads); the all-to-all would give it all S tokens
    of heads / sp heads: here the same-shaped local permute stands in for it (the
    chunks of the other ranks' tokens are this rank's other heads), then attention over
    S tokens, and the permute back to [B, S/sp, dim]. Same shapes, kernels and copies as
    the rank runs; the values differ, which a timing does not see."""
    b, s_loc, d3 = qkv.shape
    dim, hd = d3 // 3, d3 // 3 // heads
    hl = heads // sp
    # [B, S/sp, 3, sp, H/sp, hd] -> [3, B, H/sp, sp * S/sp, hd]
    q, k, v = (qkv.view(b, s_loc, 3, sp, hl, hd).permute(2, 0, 4, 3, 1, 5)
               .reshape(3, b, hl, sp * s_loc, hd))
    a = attention(q, k, v)
    # [B, H/sp, sp, S/sp, hd] -> [B, S/sp, sp, H/sp, hd] -> [B, S/sp, dim]
    return a.view(b, hl, sp, s_loc, hd).permute(0, 3, 2, 1, 4).reshape(b, s_loc, dim)


class DiTStack(_module_base()):
    def __init__(self, dim=1536, heads=12, ffn=8960, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList([DiTBlock(dim, heads, ffn) for _ in range(depth)])

    def set_sp(self, degree):
        for blk in self.blocks:
            blk.sp = degree

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


def time_shape(model, batch, seq, dim, dtype, args, device):
    """Median ms of forward + backward and the peak bytes allocated (None on the CPU).
    seq is the tokens of each sample this rank holds."""
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype, requires_grad=True)
    cond = torch.randn(batch, dim, device=device, dtype=dtype)
    cuda = device.type == "cuda"

    def once():
        model(x, cond).float().square().mean().backward()

    for _ in range(args.warmup):
        once()
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    while len(times) < args.iters:
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            once()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            once()
            times.append(1e3 * (time.perf_counter() - t0))
        if args.target_ms and len(times) >= args.min_iters and sum(times) >= args.target_ms:
            break
    peak = torch.cuda.max_memory_allocated(device) if cuda else None
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


def parse_degrees(text):
    out = parse_list(text)
    for d in out:
        if d & (d - 1):
            raise argparse.ArgumentTypeError("--sp-degrees: %d is not a power of two" % d)
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError("--sp-degrees: %r lists a degree twice" % text)
    return out


DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def metadata(args, device):
    """The comment line: the model's shape (what fit's all-to-all bytes come from), device, date."""
    items = [("hidden", args.dim)]
    if not args.model:
        if not args.dit:
            items.append(("heads", args.heads))
        items += [("ffn", args.ffn), ("layers", args.depth)]
    dtype = "bf16" if args.dit and device.type == "cuda" else "fp32" if args.dit else args.dtype
    items += [("dtype", dtype), ("dtype_bytes", DTYPE_BYTES[dtype])]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    items += [("device", name), ("torch", torch.__version__),
              ("measured", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))]
    text = []
    for key, value in items:
        value = str(value)
        text.append('%s="%s"' % (key, value) if any(c.isspace() for c in value) else "%s=%s" % (key, value))
    return "# shape_bench: " + " ".join(text)


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
    ap.add_argument("--sp-degrees", type=parse_degrees, default=[1],
                    help="SP degrees (powers of two): time one rank's share at each (built-in model)")
    ap.add_argument("--max-tokens", type=int, default=1 << 20,
                    help="skip shapes whose rank holds more than this many tokens, B * ceil(S / d)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10, help="timed iterations (the most, with --target-ms)")
    ap.add_argument("--target-ms", type=float, default=0,
                    help="stop timing a shape once its timed iterations add up to this (0: always --iters)")
    ap.add_argument("--min-iters", type=int, default=3, help="with --target-ms: the fewest timed iterations")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dit", action="store_true", help="benchmark examples/dit_model.py's PackedDiT (see above)")
    ap.add_argument("--text-len", type=int, default=128, help="--dit: text tokens per sample")
    ap.add_argument("--text-dim", type=int, default=4096, help="--dit: text embedding width")
    ap.add_argument("--attn", default="auto", help="--dit: attention (auto, varlen, flex, sdpa, math)")
    ap.add_argument("--no-fused-adaln", action="store_true", help="--dit: PyTorch AdaLN instead of the fused one")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0 or args.min_iters < 1 or not (args.target_ms >= 0):
        ap.error("--iters and --min-iters must be >= 1, --warmup and --target-ms >= 0")
    if max(args.sp_degrees) > 1 and (args.dit or args.model):
        ap.error("--sp-degrees above 1 needs the built-in model (not --dit or --model)")

    if torch is None:
        raise SystemExit("shape_bench.py needs PyTorch")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("shape_bench.py needs a CUDA GPU (the CPU, --device cpu, is for checking)")
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

    mem = device.type == "cuda"
    rows = 0
    skipped = []
    with open(args.out, "w", newline="") as f:
        # Rows are written as they are measured: a run stopped part way keeps what it timed.
        f.write(metadata(args, device) + "\n")
        w = csv.writer(f)
        w.writerow(["B", "S", "d", "step_ms"] + (["peak_mem_bytes"] if mem else []))
        for degree in args.sp_degrees:
            if args.heads % degree:
                skipped.append(("*", "*", degree, "%d heads are not divisible by d" % args.heads))
                continue
            if not (args.dit or args.model):
                model.set_sp(degree)
            for seq in args.seqs:
                local = -(-seq // degree)  # this rank's tokens of each sample (padded to d)
                oom_at = None
                for batch in args.batches:
                    if batch * local > args.max_tokens:
                        continue
                    if oom_at is not None and batch >= oom_at:
                        skipped.append((batch, seq, degree, "larger than an earlier out-of-memory batch"))
                        continue
                    try:
                        if td is not None:
                            ms, peak = time_dit_shape(td, model, batch, seq, args, device)
                        else:
                            ms, peak = time_shape(model, batch, local, args.dim, dtype, args, device)
                    except getattr(torch.cuda, "OutOfMemoryError", MemoryError):
                        oom_at = batch
                        skipped.append((batch, seq, degree, "out of memory"))
                        model.zero_grad(set_to_none=True)
                        torch.cuda.empty_cache()
                        continue
                    if not math.isfinite(ms):
                        skipped.append((batch, seq, degree, "non-finite time"))
                        continue
                    w.writerow([batch, seq, degree, "%.6f" % ms] + ([peak] if mem else []))
                    f.flush()
                    rows += 1
                    print("d=%d B=%-4d S=%-6d %10.3f ms  %8.2f GB" % (degree, batch, seq, ms, (peak or 0) / 1e9),
                          file=sys.stderr, flush=True)
    for batch, seq, degree, why in skipped:
        print("skipped B=%s S=%s d=%d: %s" % (batch, seq, degree, why), file=sys.stderr)
    print("wrote %d rows to %s (%s, %s)" % (rows, args.out, torch.cuda.get_device_name(device)
                                            if device.type == "cuda" else "cpu", args.dtype), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
