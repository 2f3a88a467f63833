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
width, heads, FFN width, layers, text length and width, dtype and its bytes), the device, the torch version and
the date: `adaptiveload fit` derives the all-to-all bytes per token of sequence
parallelism from hidden, layers and dtype_bytes.

The default model is a stack of Wan 2.1-style DiT blocks (DiTBlock below; shaped like
Wan 2.1 1.3B by default: D=1536, 12 heads, FFN 8960): AdaLN modulation from the step's
embedding, q/k RMSNorm, SDPA self-attention, cross-attention of every token to its
sample's --text-len text tokens (512, Wan's), GELU FFN. The text's K/V projection runs on
every sample's text whatever S is: a per-sample cost that the cost model's per-sample term
(`fit`'s floor family) measures, and that batches of many short samples are dominated by.
The SP replay (dev/e2e/sp_share.py) times this same block.

Sequence parallelism (--sp-degrees 1,2,4,8; built-in model only): at degree d the row
times ONE rank's share of a micro-batch as Ulysses runs it: the linear layers (QKV,
projection, cross-attention queries, FFN) on ceil(S / d) tokens of each sample, attention
for H / d heads over all d * ceil(S / d) tokens (a sample is padded to a multiple of d), and
the text K/V of each sample whole. The two all-to-alls around attention are emulated by the
local permutes that pack and unpack them (the bytes that would cross the link are modelled
by `fit`, not timed here). A degree that does not divide the heads is skipped. --max-tokens
caps the tokens one rank holds, B * ceil(S / d), as M_mem caps them in a plan; --fill adds,
at each (S, d), batches doubling up to that cap and the cap itself, so the fit sees the
largest batches of short samples a plan can pack. The d column is 1 throughout without
--sp-degrees.

To measure your own model, pass --model package.module:factory, where factory(dim)
returns an nn.Module called as module(x, cond) with x of shape [B, S, dim] and cond of
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
        --sp-degrees 1,2,4,8 --max-tokens 32760 --fill --target-ms 200 -o bench_14b_sp.csv
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
    """One Wan 2.1-style DiT block (examples/dit_model.py's layout), as one rank of an SP
    group of degree ``sp`` runs it under Ulysses:

        y = LN(x) * (1 + scale) + shift     modulation: the block's table + the step's e (B, 6, dim)
        q, k, v = y Wq, y Wk, y Wv          linear layers on this rank's S/sp tokens; q/k RMSNorm
        all-to-all                          -> H/sp heads over all S tokens
        a = attention(q, k, v)              SDPA (flash on the GPU)
        all-to-all back, x += gate * a Wo
        x += cross-attention(LN(x), text)   S/sp queries, all heads, the sample's text tokens;
                                            the text K/V computed whole on every rank
        x += gate * FFN(LN(x) * (1 + scale) + shift)   GELU tanh

    The all-to-alls are emulated by the local permutes that pack and unpack them (the other
    ranks' chunks are this rank's other heads): the same shapes, kernels and copies as a rank
    runs, without the transfer (modelled by `adaptiveload fit`). The text K/V is a per-sample
    cost that does not shrink with the degree. text_dim 0: no cross-attention."""

    def __init__(self, dim, heads, ffn, text_dim=0, eps=1e-6):
        super().__init__()
        if dim % heads:
            raise ValueError("hidden %d is not a multiple of heads %d" % (dim, heads))
        self.hidden, self.heads, self.hd, self.eps = dim, heads, dim // heads, eps
        self.sp = 1  # SP degree: this module computes one rank's share
        self.qkv = nn.Linear(dim, 3 * dim)
        self.o = nn.Linear(dim, dim)
        self.nq = nn.Parameter(torch.ones(dim))
        self.nk = nn.Parameter(torch.ones(dim))
        if text_dim:
            self.cq = nn.Linear(dim, dim)
            self.ckv = nn.Linear(text_dim, 2 * dim)
            self.co = nn.Linear(dim, dim)
        self.f1 = nn.Linear(dim, ffn)
        self.f2 = nn.Linear(ffn, dim)
        self.mod = nn.Parameter(torch.randn(6, dim) * 0.02)

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

    def forward(self, x, e, text=None, d=None):
        """x (B, S/d, hidden) this rank's tokens; e (B, 6, hidden); text (B, L, text_dim) or
        None; d the degree (default self.sp)."""
        d = self.sp if d is None else d
        if self.heads % d:
            raise ValueError("SP degree %d does not divide %d heads" % (d, self.heads))
        B, s, h = x.shape
        m = (self.mod.unsqueeze(0) + e).unbind(1)  # 6 x (B, h)
        y = F.layer_norm(x, (h,), eps=self.eps) * (1 + m[1].unsqueeze(1)) + m[0].unsqueeze(1)
        q, k, v = self.qkv(y).chunk(3, -1)
        q, k = self._rms(q, self.nq), self._rms(k, self.nk)
        a = attention(self._a2a_in(q, d), self._a2a_in(k, d), self._a2a_in(v, d))
        x = x + self.o(self._a2a_out(a, d)) * m[2].unsqueeze(1)
        if text is not None:
            y = F.layer_norm(x, (h,), eps=self.eps)
            cq = self.cq(y).view(B, s, self.heads, self.hd).transpose(1, 2)
            ck, cv = self.ckv(text).view(B, -1, 2, self.heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
            x = x + self.co(attention(cq, ck, cv).transpose(1, 2).reshape(B, s, h))
        y = F.layer_norm(x, (h,), eps=self.eps) * (1 + m[4].unsqueeze(1)) + m[3].unsqueeze(1)
        return x + self.f2(F.gelu(self.f1(y), approximate="tanh")) * m[5].unsqueeze(1)


def attention(q, k, v):
    """SDPA (flash attention on the GPU); plain softmax attention where torch has no SDPA
    (old CPU builds: for checking only)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    w = torch.softmax((q @ k.transpose(-2, -1)).float() / math.sqrt(q.shape[-1]), dim=-1).to(q.dtype)
    return w @ v


class DiTStack(_module_base()):
    """depth DiTBlocks; forward(x, e, text) with e the step's modulation (B, 6, dim), made
    once per step outside the blocks as Wan's time projection does."""

    def __init__(self, dim=1536, heads=12, ffn=8960, depth=4, text_dim=0):
        super().__init__()
        self.blocks = nn.ModuleList([DiTBlock(dim, heads, ffn, text_dim) for _ in range(depth)])

    def set_sp(self, degree):
        for blk in self.blocks:
            blk.sp = degree

    def forward(self, x, e, text=None):
        for blk in self.blocks:
            x = blk(x, e, text)
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


def time_shape(model, batch, seq, dim, dtype, args, device, builtin):
    """Median ms of forward + backward (the output's gradient given, as a rank's backward
    receives it) and the peak bytes allocated (None on the CPU). seq is the tokens of each
    sample this rank holds. The built-in model takes the step's modulation (B, 6, dim) and
    --text-len text tokens of --text-dim per sample; a --model takes cond (B, dim)."""
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(batch, seq, dim, generator=g, device=device, dtype=dtype, requires_grad=True)
    if builtin:
        e = torch.randn(batch, 6, dim, generator=g, device=device, dtype=dtype) * 0.1
        text = (torch.randn(batch, args.text_len, args.text_dim, generator=g, device=device, dtype=dtype)
                if args.text_len else None)
        inputs = (x, e, text)
    else:
        inputs = (x, torch.randn(batch, dim, generator=g, device=device, dtype=dtype))
    cuda = device.type == "cuda"
    gout = []

    def once():
        out = model(*inputs)
        if not gout:
            gout.append(torch.randn(out.shape, generator=g, device=device, dtype=out.dtype))
        out.backward(gout[0])

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


def batch_list(batches, local, max_tokens, fill):
    """The batch sizes timed at one (S, d) whose rank holds ``local`` tokens of each sample:
    ``batches`` ascending; with ``fill`` also doubling past the largest up to the cap
    floor(max_tokens / local), and the cap itself."""
    out = sorted(set(batches))
    if fill:
        cap = max_tokens // local
        b = out[-1] * 2
        while b < cap:
            out.append(b)
            b *= 2
        if cap > out[-1]:
            out.append(cap)
    return out


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
        items += [("ffn", args.ffn), ("layers", args.depth), ("text_len", args.text_len),
                  ("text_dim", args.text_dim)]
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
    ap.add_argument("--model", help="package.module:factory (default: the built-in Wan-style DiT stack)")
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
    ap.add_argument("--text-len", type=int, default=512,
                    help="text tokens per sample of the cross-attention (built-in model and --dit; 0: none, "
                         "built-in only); 512 is Wan's")
    ap.add_argument("--text-dim", type=int, default=4096, help="text embedding width (umT5's 4096)")
    ap.add_argument("--fill", action="store_true",
                    help="at each (S, d), also time batches doubling past --batches up to the largest B that "
                         "--max-tokens allows, and that B: the many-short-sample micro-batches a plan packs")
    ap.add_argument("--attn", default="auto", help="--dit: attention (auto, varlen, flex, sdpa, math)")
    ap.add_argument("--no-fused-adaln", action="store_true", help="--dit: PyTorch AdaLN instead of the fused one")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0 or args.min_iters < 1 or not (args.target_ms >= 0):
        ap.error("--iters and --min-iters must be >= 1, --warmup and --target-ms >= 0")
    if max(args.sp_degrees) > 1 and (args.dit or args.model):
        ap.error("--sp-degrees above 1 needs the built-in model (not --dit or --model)")
    if args.text_len < 0 or args.text_dim < 1 or (args.dit and args.text_len < 1):
        ap.error("--text-len must be >= 0 (>= 1 with --dit) and --text-dim >= 1")
    if args.max_tokens < 1:
        ap.error("--max-tokens must be >= 1")
    builtin = not (args.dit or args.model)

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
        model = DiTStack(args.dim, args.heads, args.ffn, args.depth, args.text_dim if args.text_len else 0)
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
            if builtin:
                model.set_sp(degree)
            for seq in args.seqs:
                local = -(-seq // degree)  # this rank's tokens of each sample (padded to d)
                oom_at = None
                for batch in batch_list(args.batches, local, args.max_tokens, args.fill):
                    if batch * local > args.max_tokens:
                        continue
                    if oom_at is not None and batch >= oom_at:
                        skipped.append((batch, seq, degree, "larger than an earlier out-of-memory batch"))
                        continue
                    try:
                        if td is not None:
                            ms, peak = time_dit_shape(td, model, batch, seq, args, device)
                        else:
                            ms, peak = time_shape(model, batch, local, args.dim, dtype, args, device, builtin)
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
