#!/usr/bin/env python3
"""Fused AdaLN (adaptiveload.adaln) against the same function in PyTorch eager and under
torch.compile, in one run on one GPU.

    y = layer_norm(x, no affine, eps=1e-6) * (1 + scale[b]) + shift[b]

For each shape and implementation: forward ms and GB/s (read x + write y), forward+backward
ms, and the memory kept alive for the backward (torch.cuda.memory_allocated after a forward
with requires_grad inputs, minus before, minus y). Times are triton.testing.do_bench medians
(it clears L2 between runs), which include the host's launch work wherever that takes longer
than the GPU's: "host_us" is one fwd+bwd step's CPU time. The "graph" columns time the same
calls captured in a CUDA graph and replayed (triton.testing.do_bench_cudagraph: no host work,
no L2 clearing, so a problem smaller than L2, 1x4096x1536, runs from L2): the GPU time of each
implementation. A short correctness check against eager runs first.

    PYTHONPATH=python python3 examples/bench_adaln.py [--dtype bf16] [--json out.json]
        [--autotune] [--shapes 1x65536x1536,...]

--autotune adds torch.compile(mode="max-autotune-no-cudagraphs") (slow to compile); --dynamic
adds torch.compile with symbolic shapes (compile_dynN: B and N, as a training loop over shape
buckets gets after dynamo's first recompile; compile_dyn: dynamic=True, D symbolic too).
"compile" is specialised to each shape (torch._dynamo.reset() per shape): the fastest.
The library is found as adaptiveload._lib says (ADAPTIVELOAD_LIB, next to the package, or
bazel-bin/dist/).
"""

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F
import triton.testing

from adaptiveload import adaln

EPS = 1e-6
SHAPES = ["1x4096x1536", "1x32760x1536", "1x65536x1536", "2x32760x3072", "1x65536x5120", "1x115200x3072"]
PACKED_LENS = [32760, 1024, 256, 15600, 4096, 7800, 2048, 1952]  # 65,536 rows, D = 3072
PACKED_D = 3072


def adaln_eager(x, scale, shift):
    """(B, N, D) x with (B, D) scale/shift."""
    return F.layer_norm(x, (x.shape[-1],), eps=EPS) * (1 + scale[:, None, :]) + shift[:, None, :]


def adaln_eager_packed(x, scale, shift, seg):
    """(rows, D) x; seg[row] = sample of the row."""
    return F.layer_norm(x, (x.shape[-1],), eps=EPS) * (1 + scale[seg]) + shift[seg]


def mark_tokens_dynamic(x):
    """What a training loop over shape buckets ends up with: the sample and token counts
    symbolic (dynamo's automatic dynamic shapes after the first recompile), D static."""
    for dim in range(x.dim() - 1):
        torch._dynamo.maybe_mark_dynamic(x, dim)


def bench(fn, grad_to_none=None):
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median")


def bench_graph(fn, grad_to_none=None):
    """GPU time of fn captured in a CUDA graph (median of replays); NaN where capture fails."""
    try:
        return triton.testing.do_bench_cudagraph(fn, rep=100, grad_to_none=grad_to_none, return_mode="median")
    except Exception as e:  # an op that cannot be captured: report, do not stop the run
        print("    (graph capture failed: %s)" % str(e).splitlines()[0][:120], flush=True)
        torch.cuda.synchronize()
        return float("nan")


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def check_correctness(dtype):
    """Ours against eager on upcast inputs (fp64 reference), fixed and packed layouts."""
    torch.manual_seed(0)
    out = []
    for packed in (False, True):
        D = 1000 if packed else 1536
        if packed:
            lens = [5, 0, 1, 40, 17]
            B, rows = len(lens), sum(lens)
            cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
            seg = torch.repeat_interleave(torch.arange(B), torch.tensor(lens)).cuda()
            x = torch.randn(rows, D, device="cuda", dtype=dtype) * 2 + 3
        else:
            B, N = 2, 37
            x = torch.randn(B, N, D, device="cuda", dtype=dtype) * 2 + 3
        scale = (0.5 * torch.randn(B, D, device="cuda")).to(dtype)
        shift = (0.5 * torch.randn(B, D, device="cuda")).to(dtype)
        dy = torch.randn_like(x)
        leaves = [t.clone().requires_grad_() for t in (x, scale, shift)]
        if packed:
            y = adaln(leaves[0], leaves[1], leaves[2], cu_seqlens=cu)
        else:
            y = adaln(*leaves)
        y.backward(dy)
        ref_leaves = [t.double().clone().requires_grad_() for t in (x, scale, shift)]
        yr = adaln_eager_packed(*ref_leaves, seg) if packed else adaln_eager(*ref_leaves)
        yr.backward(dy.double())
        errs = [rel(y, yr)] + [rel(a.grad, b.grad) for a, b in zip(leaves, ref_leaves)]
        out.append(("packed" if packed else "fixed", errs))
    return out


def saved_bytes(fn, x, scale, shift):
    """Memory a forward keeps for its backward beyond its inputs and y."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, scale, shift)]
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    y = fn(*leaves)
    torch.cuda.synchronize()
    after = torch.cuda.memory_allocated()
    n = after - before - y.numel() * y.element_size()
    del y
    return n


def run_shape(name, dtype, impls):
    torch._dynamo.reset()
    torch.manual_seed(1)
    if name == "packed":
        B, D = len(PACKED_LENS), PACKED_D
        rows = sum(PACKED_LENS)
        cu = torch.tensor([0] + torch.tensor(PACKED_LENS).cumsum(0).tolist(), dtype=torch.int32)
        cu_dev = cu.cuda()
        seg = torch.repeat_interleave(torch.arange(B), torch.tensor(PACKED_LENS)).cuda()
        x = torch.randn(rows, D, device="cuda", dtype=dtype)
        label = "packed%dx%dx%d" % (B, rows, D)
    else:
        B, N, D = (int(v) for v in name.split("x"))
        rows = B * N
        x = torch.randn(B, N, D, device="cuda", dtype=dtype)
        label = name
    scale = (0.5 * torch.randn(B, D, device="cuda")).to(dtype)
    shift = (0.5 * torch.randn(B, D, device="cuda")).to(dtype)
    dy = torch.randn_like(x)
    es = x.element_size()
    fwd_bytes = 2 * rows * D * es

    results = []
    for impl in impls:
        if impl == "ours":
            fn = (lambda a, s, h: adaln(a, s, h, cu_seqlens=cu_dev)) if name == "packed" else adaln
        else:
            base = (lambda a, s, h: adaln_eager_packed(a, s, h, seg)) if name == "packed" else adaln_eager
            if impl == "eager":
                fn = base
            elif impl == "compile":
                fn = torch.compile(base, dynamic=False)
            elif impl == "compile_dynN":
                fn = torch.compile(base)
            elif impl == "compile_dyn":
                fn = torch.compile(base, dynamic=True)
            else:
                fn = torch.compile(base, dynamic=False, mode="max-autotune-no-cudagraphs")
        t0 = time.time()
        if impl == "compile_dynN":
            mark_tokens_dynamic(x)
        with torch.no_grad():
            fn(x, scale, shift)  # compile / warm up
            fwd_ms = bench(lambda: fn(x, scale, shift))
        leaves = [t.detach().clone().requires_grad_() for t in (x, scale, shift)]
        if impl == "compile_dynN":
            mark_tokens_dynamic(leaves[0])

        def step():
            fn(*leaves).backward(dy)

        step()
        fwdbwd_ms = bench(step, grad_to_none=leaves)
        # Host time per fwd+bwd step, back to back (if it exceeds the GPU time, launches are
        # host-bound and the timing above includes idle gaps).
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        for _ in range(50):
            for leaf in leaves:
                leaf.grad = None
            step()
        host_us = (time.perf_counter() - h0) / 50 * 1e6
        torch.cuda.synchronize()
        with torch.no_grad():
            fwd_graph_ms = bench_graph(lambda: fn(x, scale, shift))
        # Pathological steps (eager's and compile_dyn's packed backward take 60-400 ms: a gather
        # through scale[seg]) are not replayed.
        fwdbwd_graph_ms = bench_graph(step, grad_to_none=leaves) if fwdbwd_ms < 20 else float("nan")
        saved = saved_bytes(fn, x, scale, shift)
        r = {
            "shape": label, "impl": impl, "rows": rows, "D": D,
            "fwd_ms": fwd_ms, "fwd_GBps": fwd_bytes / (fwd_ms * 1e-3) / 1e9,
            "fwdbwd_ms": fwdbwd_ms, "saved_MB": saved / 1e6, "host_us": host_us, "setup_s": time.time() - t0,
            "fwd_graph_ms": fwd_graph_ms, "fwdbwd_graph_ms": fwdbwd_graph_ms,
        }
        results.append(r)
        print("%-22s %-12s %9.4f %8.0f %10.4f %10.3f %8.0f %9.4f %10.4f   (setup %.0f s)" % (
            label, impl, fwd_ms, r["fwd_GBps"], fwdbwd_ms, r["saved_MB"], host_us, fwd_graph_ms, fwdbwd_graph_ms,
            r["setup_s"]), flush=True)
        del leaves
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--autotune", action="store_true", help='also torch.compile(mode="max-autotune-no-cudagraphs")')
    ap.add_argument("--shapes", help="comma-separated BxNxD list and/or 'packed' (default: all)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (fast)")
    ap.add_argument("--dynamic", action="store_true",
                    help="also torch.compile with symbolic shapes: compile_dynN (B and N dynamic, D static, "
                         "as a training loop over shape buckets gets) and compile_dyn (dynamic=True, D too)")
    args = ap.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)

    print("device %s, torch %s, dtype %s" % (torch.cuda.get_device_name(), torch.__version__, args.dtype))
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    copy_ms = bench(lambda: b.copy_(a))
    copy_gbps = 2 * n / (copy_ms * 1e-3) / 1e9
    del a, b
    print("device copy %.0f GB/s (read + write)" % copy_gbps)

    for layout, errs in check_correctness(dtype):
        print("correctness %-6s vs fp64 eager: y %.2e  dx %.2e  dscale %.2e  dshift %.2e" % (layout, *errs))

    impls = ["ours", "eager"] + ([] if args.no_compile else ["compile"]) + (["autotune"] if args.autotune else [])
    if args.dynamic and not args.no_compile:
        impls += ["compile_dynN", "compile_dyn"]
    shapes = args.shapes.split(",") if args.shapes else SHAPES + ["packed"]
    print("%-22s %-12s %9s %8s %10s %10s %8s %9s %10s" % ("shape", "impl", "fwd_ms", "GB/s", "fwdbwd_ms", "saved_MB",
                                                         "host_us", "fwd_graph", "fb_graph"))
    rows = []
    for s in shapes:
        rows += run_shape(s, dtype, impls)

    print("\nspeedups of ours (x):")
    print("%-22s %9s %9s %11s %11s %9s %11s %8s" % ("shape", "fwd/eager", "fwd/comp", "fb/eager", "fb/comp",
                                                  "fwd%copy", "fwd/autotn", "fb/autotn"))
    summary = []
    for label in dict.fromkeys(r["shape"] for r in rows):
        by = {r["impl"]: r for r in rows if r["shape"] == label}
        o = by["ours"]

        def ratio(impl, key):
            return by[impl][key] / o[key] if impl in by else float("nan")

        s = {
            "shape": label,
            "fwd_vs_eager": ratio("eager", "fwd_ms"), "fwd_vs_compile": ratio("compile", "fwd_ms"),
            "fwdbwd_vs_eager": ratio("eager", "fwdbwd_ms"), "fwdbwd_vs_compile": ratio("compile", "fwdbwd_ms"),
            "fwd_vs_autotune": ratio("autotune", "fwd_ms"), "fwdbwd_vs_autotune": ratio("autotune", "fwdbwd_ms"),
            "fwd_vs_compile_dynN": ratio("compile_dynN", "fwd_ms"),
            "fwdbwd_vs_compile_dynN": ratio("compile_dynN", "fwdbwd_ms"),
            "fwd_vs_compile_dyn": ratio("compile_dyn", "fwd_ms"),
            "fwdbwd_vs_compile_dyn": ratio("compile_dyn", "fwdbwd_ms"),
            "fwd_pct_copy": 100 * o["fwd_GBps"] / copy_gbps,
            "graph_fwd_vs_eager": ratio("eager", "fwd_graph_ms"), "graph_fwd_vs_compile": ratio("compile", "fwd_graph_ms"),
            "graph_fwdbwd_vs_eager": ratio("eager", "fwdbwd_graph_ms"),
            "graph_fwdbwd_vs_compile": ratio("compile", "fwdbwd_graph_ms"),
        }
        summary.append(s)
        print("%-22s %9.2f %9.2f %11.2f %11.2f %8.1f%% %11.2f %8.2f" % (
            label, s["fwd_vs_eager"], s["fwd_vs_compile"], s["fwdbwd_vs_eager"], s["fwdbwd_vs_compile"],
            s["fwd_pct_copy"], s["fwd_vs_autotune"], s["fwdbwd_vs_autotune"]))
        print("%-22s   graph replay: fwd x eager %.2f, x compile %.2f; fwd+bwd x eager %.2f, x compile %.2f" % (
            "", s["graph_fwd_vs_eager"], s["graph_fwd_vs_compile"], s["graph_fwdbwd_vs_eager"],
            s["graph_fwdbwd_vs_compile"]))
        if args.dynamic:
            print("%-22s   symbolic shapes: fwd x compile_dynN %.2f, x compile_dyn %.2f; "
                  "fwd+bwd x compile_dynN %.2f, x compile_dyn %.2f" % (
                      "", s["fwd_vs_compile_dynN"], s["fwd_vs_compile_dyn"], s["fwdbwd_vs_compile_dynN"],
                      s["fwdbwd_vs_compile_dyn"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": args.dtype,
                       "copy_GBps": copy_gbps, "rows": rows, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
