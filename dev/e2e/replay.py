#!/usr/bin/env python3
"""Replay W data-parallel ranks of a plan on one device and measure every micro-batch.

    dev/e2e/replay.py --index I --manifest M0 [--manifest M1 ...] --world 8 --steps 60 --out arm.json \
        [--trace trace.jsonl] [--svg arm.svg] [--blocks 2] [--no-fused-adaln]

For each optimizer step of the plan (manifests of consecutive epochs, all planned for W
ranks), every rank's micro-batches run in turn through examples/dit_model.py's DiT
(forward + backward of the rectified-flow loss of examples/train_dit.py), each timed with
CUDA events (perf_counter on the CPU). Gradients of all W ranks accumulate, and the
optimizer steps once per step: the gradient is the sum over ranks (the README's loss
normalisation without the factor W, as for a summed all-reduce), so the loss curve is the
real one of W-rank training. Then:

    rank time  = sum of the rank's micro-batch times in the step
    step time  = max over ranks of rank time + the collective's cost (see below)

The collective's cost is not measured across GPUs here (one device): it is a bandwidth
model, ring all-reduce 2 (W - 1) / W x gradient bytes (FSDP: all-gather twice plus
reduce-scatter, 3 (W - 1) / W x parameter bytes) at min(measured device-to-device copy
bandwidth, --link-gbps) (--inter-node-gbps beyond --gpus-per-node ranks), with a floor of
a measured 1-process torch.distributed all_reduce of the gradient bytes where that runs.
The output says which numbers went in ("comm"). It is the same additive cost in every arm.

Output JSON (--out): tokens/s, step-time mean and CV, compute-imbalance CV (mean over steps
of the CV of rank times), bubble (1 - sum mean rank time / sum max rank time), peak memory
against the plan's M_mem, predicted (the plan's cost_ms per micro-batch, `adaptiveload
inspect --jsonl`) against measured micro-batch time, Pearson R of micro-batch (and
rank-step) latency with tokens and with the sum of S^2, the loss curve, per-step rank
times. --trace writes train_dit.py's trace lines (for `adaptiveload fit --trace`).
The first --warmup-steps steps run and are traced as warm-up, but stay out of every figure.
"""

import argparse
import atexit
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _import_train_dit(examples=None):
    """examples/train_dit.py as a module: from ``examples`` (a bundle's examples/), else
    $AL_EXAMPLES, else this checkout's examples/."""
    for d in (examples, os.environ.get("AL_EXAMPLES"), os.path.join(HERE, "..", "..", "examples")):
        if d and os.path.exists(os.path.join(d, "train_dit.py")):
            sys.path.insert(0, os.path.abspath(d))
            import train_dit  # noqa: E402

            return train_dit
    raise SystemExit("examples/train_dit.py not found (pass --examples)")


# ---------------------------------------------------------------------------------------------
# statistics


def pearson(xs, ys):
    """Pearson correlation of two equal-length sequences (None when undefined)."""
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def cv(xs):
    """Population coefficient of variation (0 for fewer than two values or a zero mean)."""
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    if m == 0:
        return 0.0
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) / m


def linfit(xs, ys):
    """Least-squares (intercept, slope) of y on x (None when x does not vary)."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def _r(x, nd=4):
    return None if x is None else round(x, nd)


# ---------------------------------------------------------------------------------------------
# the plan's predictions


def plan_predictions(cli, manifest):
    """{(step, rank, micro): (cost_ms, tokens, samples)} and the manifest summary, from
    `adaptiveload inspect --jsonl` / `--json`."""
    out = subprocess.run([cli, "inspect", manifest, "--jsonl"], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    pred = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        o = json.loads(line)
        pred[(o["step"], o["rank"], o["micro"])] = (o.get("cost_ms"), o.get("tokens"), o.get("samples"))
    info = json.loads(subprocess.run([cli, "inspect", manifest, "--json"], check=True, stdout=subprocess.PIPE,
                                     universal_newlines=True).stdout)
    return pred, info


# ---------------------------------------------------------------------------------------------
# the collective's cost


def measure_comm(n_params, world, device, parallel="ddp", link_gbps=450.0, inter_node_gbps=50.0, gpus_per_node=8,
                 log=print):
    """The per-step collective cost (ms) and how it was obtained (see the module docstring)."""
    import torch

    grad_bytes = 4 * n_params  # fp32 parameters and gradients (bf16 autocast keeps fp32 master weights)
    if parallel == "fsdp":
        volume = 3.0 * (world - 1) / world * grad_bytes
        pattern = "FSDP: all-gather (forward) + all-gather (backward) + reduce-scatter, 3 (W-1)/W x bytes"
    else:
        volume = 2.0 * (world - 1) / world * grad_bytes
        pattern = "DDP ring all-reduce, 2 (W-1)/W x bytes"
    res = {"grad_bytes": grad_bytes, "pattern": pattern, "world": world}
    n = max(1, grad_bytes // 4)
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    reps = 10
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            dst.copy_(src)
        b.record()
        b.synchronize()
        copy_ms = a.elapsed_time(b) / reps
    else:
        t = time.perf_counter()
        for _ in range(reps):
            dst.copy_(src)
        copy_ms = (time.perf_counter() - t) * 1000.0 / reps
    copy_gbps = 2.0 * grad_bytes / (copy_ms / 1000.0) / 1e9  # read + write
    link = link_gbps if world <= gpus_per_node else inter_node_gbps
    bw = min(copy_gbps, link)
    model_ms = volume / (bw * 1e9) * 1000.0 if world > 1 else 0.0
    res.update({"d2d_copy_ms": _r(copy_ms), "d2d_copy_gbps": _r(copy_gbps, 1), "link_gbps": link,
                "bandwidth_gbps_used": _r(bw, 1), "model_ms": _r(model_ms)})
    # A 1-process all_reduce through torch.distributed: a floor (launch and local copies only).
    floor_ms = None
    try:
        import tempfile

        import torch.distributed as dist

        if not dist.is_initialized():
            store_file = tempfile.mktemp(prefix="al-replay-store-")
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                    init_method="file://" + store_file, rank=0, world_size=1)
            # One group serves every replay of this process; it ends at exit (NCCL warns when a
            # group is left), with its store file.
            atexit.register(_end_group, dist, store_file)
        for _ in range(3):
            dist.all_reduce(src)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(src)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        floor_ms = (time.perf_counter() - t) * 1000.0 / reps
        res["dist_1proc_ms"] = _r(floor_ms)
    except Exception as e:  # noqa: BLE001 - optional measurement; say why it is missing
        res["dist_1proc_ms"] = None
        res["dist_1proc_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    res["comm_ms"] = _r(max(model_ms, floor_ms or 0.0) if world > 1 else 0.0)
    res["source"] = ("bandwidth model (not a multi-GPU measurement): %s at min(d2d copy %.0f GB/s, link %.0f GB/s)"
                     "; floor: a 1-process torch.distributed all_reduce%s"
                     % (pattern, copy_gbps, link, "" if floor_ms is not None else " (not available)"))
    log("comm: %.3f ms per step (%s)" % (res["comm_ms"], res["source"]))
    return res


def _end_group(dist, store_file):
    """atexit: ends the 1-process group of the all-reduce floor and removes its store file."""
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - exiting anyway
        pass
    if os.path.exists(store_file):
        os.remove(store_file)


# ---------------------------------------------------------------------------------------------
# the replay


def replay(args, log=print):
    """Runs the replay of ``args`` (see main()) and returns the result dict."""
    td = _import_train_dit(args.examples)
    import torch

    import adaptiveload

    cli = td.find_cli(args.bin)
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() and not args.cpu \
        else torch.device("cpu")
    torch.manual_seed(args.seed)
    W = args.world
    cfg = td.model_config(args)
    model = td.build_model(cfg, device, args.attn, False if args.no_fused_adaln else None, log=log)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    autocast = td.autocast_for(device)
    timer = td.MicroTimer(device)
    typed = td.has_typed_members() and not args.raw
    text_member = None if args.text_member == "none" else args.text_member
    members = [args.latent_member] + ([text_member] if text_member else [])
    comm = measure_comm(n_params, W, device, args.parallel, args.link_gbps, args.inter_node_gbps,
                        args.gpus_per_node, log=log)

    trace = open(args.trace, "w") if args.trace else None
    total_steps = args.warmup_steps + args.steps
    steps, micro_rows, losses = [], [], []
    plan_infos = []
    mem_tokens = None
    t_start = time.perf_counter()
    truncated = False
    done = 0
    for mi, manifest in enumerate(args.manifest):
        if done >= total_steps or truncated:
            break
        pred, info = plan_predictions(cli, manifest)
        plan_infos.append({k: info.get(k) for k in ("policy", "epoch", "steps", "imbalance_cv", "bubble",
                                                    "predicted_tokens_per_s", "mem_tokens", "micro_per_step",
                                                    "step_tokens", "cost_model", "micro_batches")})
        mem_tokens = info.get("mem_tokens", mem_tokens)
        kw = dict(threads=args.threads, prefetch=args.prefetch)
        if typed:
            kw["members"] = members
        dss = [adaptiveload.StreamDataset(args.index, manifest, rank=r, world_size=W, **kw) for r in range(W)]
        its = [iter(ds) for ds in dss]
        while done < total_steps:
            if args.max_seconds and time.perf_counter() - t_start > args.max_seconds:
                truncated = True
                break
            step_loss, step_no = 0.0, None
            pending = []
            exhausted = False
            for r in range(W):
                while True:
                    b = next(its[r], None)
                    if b is None:
                        exhausted = True
                        break
                    step_no = b.step
                    p = td.prepare(b, dss[r], cfg, device, typed, text_member, args.latent_member)
                    if device.type == "cuda":
                        torch.cuda.reset_peak_memory_stats(device)
                    st = timer.start()
                    loss, _ = td.flow_loss(model, p, 1, gen, args.t_sampling, autocast)
                    loss.backward()
                    tok = timer.stop(st)
                    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
                    step_loss = step_loss + loss.detach()  # a tensor: no device sync per micro-batch
                    pending.append((r, p, tok, peak))
                    if b.last_in_step:
                        break
                if exhausted:
                    break
            if exhausted:
                if pending:
                    log("replay: %s ended inside a step (%d micro-batches dropped)" % (manifest, len(pending)))
                opt.zero_grad(set_to_none=True)
                break
            opt.step()
            opt.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            warm = done < args.warmup_steps
            step_loss = float(step_loss)
            per_rank = [0.0] * W
            tok_rank = [0] * W
            s2_rank = [0] * W
            for r, p, tok, peak in pending:
                ms = timer.ms(tok)
                per_rank[r] += ms
                tok_rank[r] += p.tokens
                s2_rank[r] += p.n * p.S * p.S
                cost, ptok, _ = pred.get((p.step, r, p.micro), (None, None, None))
                row = {"epoch": mi, "step": p.step, "rank": r, "micro": p.micro, "bucket": p.bucket, "B": p.n,
                       "S": p.S, "tokens": p.tokens, "real_tokens": p.real_tokens, "ms": ms, "pred_ms": cost,
                       "peak_mem_bytes": peak, "warmup": warm}
                if not warm:
                    micro_rows.append(row)
                if trace:
                    td.write_trace_line(trace, p, r, ms, peak, warm)
            done += 1
            if not warm:
                steps.append({"epoch": mi, "step": step_no, "rank_ms": [round(x, 3) for x in per_rank],
                              "rank_tokens": tok_rank, "rank_sum_s2": s2_rank,
                              "real_tokens": sum(p.real_tokens for _, p, _, _ in pending),
                              "compute_ms": max(per_rank), "step_ms": max(per_rank) + comm["comm_ms"],
                              "loss": step_loss})
            losses.append(step_loss)
            if args.verbose or done % max(1, total_steps // 10) == 0 or done == total_steps:
                log("replay W=%d step %d/%d (epoch %d, plan step %d): slowest rank %.1f ms, mean %.1f ms, loss %.5f%s"
                    % (W, done, total_steps, mi, step_no, max(per_rank), sum(per_rank) / W, step_loss,
                       " (warm-up)" if warm else ""))
        for it in its:
            close = getattr(it, "close", None)
            if close:
                close()
    if trace:
        trace.close()
    res = summarise(args, steps, micro_rows, losses, comm, plan_infos, mem_tokens, device, cfg, n_params)
    res["truncated"] = truncated
    res["wall_s"] = round(time.perf_counter() - t_start, 2)
    res["attention"] = model.attention.name
    res["fused_adaln"] = bool(model.modulate.fused)
    return res


def summarise(args, steps, micro, losses, comm, plan_infos, mem_tokens, device, cfg, n_params):
    """The result dict of a replay (see the module docstring)."""
    import torch

    W = args.world
    step_ms = [s["step_ms"] for s in steps]
    tokens = sum(s["real_tokens"] for s in steps)
    total_s = sum(step_ms) / 1000.0
    imb = [cv(s["rank_ms"]) for s in steps]
    mean_rank = sum(sum(s["rank_ms"]) / W for s in steps)
    max_rank = sum(s["compute_ms"] for s in steps)
    out = {
        "arm": args.arm, "world": W, "steps": len(steps), "warmup_steps": args.warmup_steps,
        "micro_batches": len(micro), "tokens": tokens, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "model": cfg.as_dict(), "parameters": n_params, "parallel": args.parallel,
        "tokens_per_s": _r(tokens / total_s, 1) if total_s > 0 else None,
        "step_ms_mean": _r(statistics.mean(step_ms), 3) if step_ms else None,
        "step_time_cv": _r(cv(step_ms)),
        "compute_imbalance_cv": _r(statistics.mean(imb)) if imb else None,
        "bubble": _r(1.0 - mean_rank / max_rank) if max_rank > 0 else None,
        "comm": comm,
        "plans": plan_infos,
    }
    # memory
    peaks = [m["peak_mem_bytes"] for m in micro if m["peak_mem_bytes"] is not None]
    memo = {"plan_mem_tokens": mem_tokens, "max_micro_tokens": max((m["tokens"] for m in micro), default=0)}
    if peaks:
        fit = linfit([m["tokens"] for m in micro if m["peak_mem_bytes"] is not None], peaks)
        memo.update({"peak_mem_bytes": max(peaks), "gpu_capacity_bytes": torch.cuda.get_device_properties(
            device).total_memory})
        if fit:
            memo["fit_bytes"] = {"intercept": int(fit[0]), "per_token": _r(fit[1], 1)}
            if mem_tokens:
                memo["predicted_peak_at_mem_tokens"] = int(fit[0] + fit[1] * mem_tokens)
    memo["out_of_memory"] = 0  # an OOM raises and ends the replay: reaching here means none
    out["memory"] = memo
    # predicted vs measured
    pairs = [(m["pred_ms"], m["ms"]) for m in micro if m["pred_ms"] is not None and m["ms"] > 0]
    if pairs:
        rel = sorted(abs(p - ms) / ms for p, ms in pairs)
        scale = statistics.median(ms / p for p, ms in pairs if p > 0) if any(p > 0 for p, _ in pairs) else None
        rel_scaled = sorted(abs(p * scale - ms) / ms for p, ms in pairs) if scale else None
        out["pred_vs_measured"] = {
            "n": len(pairs), "median_rel_err": _r(statistics.median(rel)), "max_rel_err": _r(rel[-1]),
            "median_measured_over_pred": _r(scale),
            "after_one_scale": ({"median_rel_err": _r(statistics.median(rel_scaled)), "max_rel_err": _r(rel_scaled[-1])}
                                if rel_scaled else None),
            "pearson_pred_measured": _r(pearson([p for p, _ in pairs], [ms for _, ms in pairs]))}
    # correlations
    ms = [m["ms"] for m in micro]
    out["pearson"] = {
        "micro_ms_vs_tokens": _r(pearson([m["tokens"] for m in micro], ms)),
        "micro_ms_vs_sum_s2": _r(pearson([m["B"] * m["S"] ** 2 for m in micro], ms)),
        "rank_step_ms_vs_tokens": _r(pearson([t for s in steps for t in s["rank_tokens"]],
                                             [x for s in steps for x in s["rank_ms"]])),
        "rank_step_ms_vs_sum_s2": _r(pearson([t for s in steps for t in s["rank_sum_s2"]],
                                             [x for s in steps for x in s["rank_ms"]])),
    }
    out["loss_curve"] = [_r(x, 6) for x in losses]
    out["loss_finite"] = all(math.isfinite(x) for x in losses)
    out["per_step"] = steps
    return out


# ---------------------------------------------------------------------------------------------
# SVG


def write_svg(path, results, title="per-rank compute time per step"):
    """A hand-written SVG: one panel per result (arm), steps on x, ms on y; a thin line per
    rank's compute time, the step time (slowest rank + collective) in black."""
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
              "#17becf"]
    pw, ph, pad = 760, 220, 50
    height = len(results) * (ph + pad) + pad
    ymax = max([s["step_ms"] for r in results for s in r["per_step"]] + [1e-9])
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
             % (pw + 2 * pad, height), '<rect width="100%" height="100%" fill="white"/>',
             '<text x="%d" y="20" font-size="14">%s</text>' % (pad, _esc(title))]
    for i, r in enumerate(results):
        x0, y0 = pad, pad + i * (ph + pad)
        steps = r["per_step"]
        n = max(1, len(steps) - 1)
        parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (x0, y0, pw, ph))
        parts.append('<text x="%d" y="%d">%s W=%d: %s tokens/s, step CV %.1f%%, imbalance CV %.1f%%, '
                     'bubble %.1f%%</text>'
                     % (x0, y0 - 6, _esc(str(r.get("arm"))), r["world"], _fmt(r.get("tokens_per_s")),
                        100 * (r.get("step_time_cv") or 0), 100 * (r.get("compute_imbalance_cv") or 0),
                        100 * (r.get("bubble") or 0)))
        parts.append('<text x="%d" y="%d" text-anchor="end">%.0f ms</text>' % (x0 - 4, y0 + 10, ymax))
        parts.append('<text x="%d" y="%d" text-anchor="end">0</text>' % (x0 - 4, y0 + ph))

        def pt(k, v):
            return "%.1f,%.1f" % (x0 + pw * k / n, y0 + ph - ph * v / ymax)

        W = r["world"]
        for rank in range(W):
            pts = " ".join(pt(k, s["rank_ms"][rank]) for k, s in enumerate(steps))
            parts.append('<polyline fill="none" stroke="%s" stroke-width="0.8" stroke-opacity="0.7" points="%s"/>'
                         % (colors[rank % len(colors)], pts))
        pts = " ".join(pt(k, s["step_ms"]) for k, s in enumerate(steps))
        parts.append('<polyline fill="none" stroke="black" stroke-width="1.6" points="%s"/>' % pts)
    parts.append('<text x="%d" y="%d" fill="#555">thin: each rank\'s compute time; black: step time (slowest rank '
                 '+ modelled collective); x: measured steps</text>' % (pad, height - 10))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def _esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _fmt(x):
    return "-" if x is None else "{:,.0f}".format(x)


# ---------------------------------------------------------------------------------------------


def build_parser():
    td = _import_train_dit(None if "--examples" not in sys.argv else sys.argv[sys.argv.index("--examples") + 1])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--manifest", action="append", required=True,
                   help="manifest planned for --world ranks; repeat for the next epochs (used in order)")
    p.add_argument("--world", type=int, required=True, help="ranks the manifests are planned for")
    p.add_argument("--steps", type=int, default=60, help="measured steps (after the warm-up)")
    p.add_argument("--warmup-steps", type=int, default=3, help="steps run first, traced as warm-up, not measured")
    p.add_argument("--arm", default="arm", help="name in the output")
    p.add_argument("--out", help="result JSON")
    p.add_argument("--trace", help="trace JSONL (train_dit.py's format, for adaptiveload fit --trace)")
    p.add_argument("--svg", help="per-rank step-time plot")
    p.add_argument("--smoke", action="store_true", help="the tiny CPU model of train_dit.py --smoke")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--raw", action="store_true", help="single raw payload member (adaptiveload synth corpora)")
    p.add_argument("--latent-member", default=td.LATENT_MEMBER)
    p.add_argument("--text-member", default=td.TEXT_MEMBER, help="'none': text embeddings from keys")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=1, help="C reader threads per rank's stream")
    p.add_argument("--prefetch", type=int, default=2, help="buffers per rank's stream")
    p.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp", help="collective modelled per step")
    p.add_argument("--link-gbps", type=float, default=450.0,
                   help="per-GPU link bandwidth within a node, GB/s each way (H200 NVLink: 450)")
    p.add_argument("--inter-node-gbps", type=float, default=50.0,
                   help="per-GPU bandwidth across nodes (400 Gb/s InfiniBand: 50 GB/s), used when W > --gpus-per-node")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--max-seconds", type=float, default=0, help="stop early after this long (reported as truncated)")
    p.add_argument("--bin", help="adaptiveload CLI")
    p.add_argument("--examples", help="folder holding train_dit.py and dit_model.py (default: this checkout's)")
    p.add_argument("--verbose", action="store_true")
    td.add_model_arguments(p)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)  # NVLink multicast stays off on the shared GPU machines
    res = replay(args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    if args.svg:
        write_svg(args.svg, [res])
    brief = {k: res.get(k) for k in ("arm", "world", "steps", "tokens_per_s", "step_time_cv", "compute_imbalance_cv",
                                     "bubble", "loss_finite", "truncated")}
    print(json.dumps(brief))
    return 0 if res["loss_finite"] and res["steps"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
