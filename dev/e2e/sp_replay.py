#!/usr/bin/env python3
"""The device half of the SP replay: times every distinct micro-batch share of a job
(dev/e2e/sp_arms.py prepare writes job.json) on one GPU, then runs the full replay of the
job's first steps, and writes timings.json for `sp_arms.py compose`.

    dev/e2e/sp_replay.py --job job.json --out OUT [--budget-s 480] [--cpu] [--models 14b,...]
    dev/e2e/sp_replay.py --smoke --out OUT            # CPU: a tiny model and job (no job file)

job.json: {"models": {NAME: {"hidden", "heads", "ffn", "text_dim", "text_len", "blocks",
"shapes": [[B, S, d, est_ms, count], ...]}}, "order": [NAME, ...], "full": {"model": NAME,
"steps": [[[[B, S, d], ...group of each slot], ...slots], ...steps]} or null, "full_est_ms",
"reps", "warmup"}. Each shape runs as ONE RANK'S SHARE at degree d (dev/e2e/sp_share.py)
through the model's `blocks` blocks; shapes whose estimate exceeds 400 ms are timed twice
instead of `reps` times. --budget-s is split among the stages (each model's shapes, the full
replay) by their estimated times; a model's shapes run most-used first (count x estimate),
so a stage cut at its deadline leaves out the rarest (listed as missing). The full replay runs every group's share of every slot of the listed steps in order,
once each (a group's d ranks do the same work: one share per group is its time).

timings.json: {"device", "torch", "ceilings": {"bf16_matmul_tflops", "copy_gbps"},
"models": {NAME: {"blocks", "shapes": {"B,S,d": {"ms", "runs", "peak_mem_bytes"}},
"missing": [...]}}, "full": {"model", "step_ms": [[[ms of each group] of each slot] of each
step]}, "wall_s", "budget_cut": bool}. Written after each stage (a cut-off run keeps what
finished).
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def ceilings(torch, device):
    """bf16 8192^3 matrix product TFLOP/s (random data) and device copy GB/s (read + write)."""
    if device.type != "cuda":
        return None
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        a @ b
    e.record()
    e.synchronize()
    tf = 2 * n ** 3 * 10 / (s.elapsed_time(e) / 1e3) / 1e12
    x = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    s.record()
    for _ in range(10):
        y.copy_(x)
    e.record()
    e.synchronize()
    gbps = 2 * (1 << 30) * 10 / (s.elapsed_time(e) / 1e3) / 1e9
    del a, b, x, y
    torch.cuda.empty_cache()
    return {"bf16_matmul_tflops": round(tf, 1), "copy_gbps": round(gbps, 1)}


def smoke_job():
    tiny = {"hidden": 64, "heads": 4, "ffn": 128, "text_dim": 32, "text_len": 8, "blocks": 1}
    shapes = [[1, 64, 1, 1.0, 3], [2, 64, 2, 1.0, 3], [1, 128, 4, 1.0, 1], [4, 32, 1, 1.0, 1]]
    steps = [[[[1, 64, 1], [4, 32, 1]], [[2, 64, 2]]], [[[1, 128, 4]], [[2, 64, 2]]]]
    return {"models": {"tiny": dict(tiny, shapes=shapes)}, "order": ["tiny"],
            "full": {"model": "tiny", "steps": steps}, "full_est_ms": 8.0, "reps": 3, "warmup": 1}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", help="job.json of sp_arms.py prepare")
    ap.add_argument("--out", required=True, help="folder for timings.json")
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop timing new shapes after this long")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU, a tiny model and job")
    ap.add_argument("--models", help="comma-separated: time only these of the job's models (default: all)")
    a = ap.parse_args(argv)
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)
    import torch

    import sp_share

    if a.smoke:
        job, a.cpu = smoke_job(), True
    elif a.job:
        with open(a.job) as f:
            job = json.load(f)
    else:
        ap.error("--job or --smoke")
    if a.models:
        keep = [n for n in a.models.split(",") if n]
        bad = [n for n in keep if n not in job["models"]]
        if bad or not keep:
            ap.error("--models %r: each one of the job's %s" % (a.models, ", ".join(job["models"])))
        job["order"] = [n for n in job.get("order", list(job["models"])) if n in keep]
        if job.get("full") and job["full"]["model"] not in keep:
            job["full"], job["full_est_ms"] = None, 0.0
    device = torch.device("cpu") if a.cpu or not torch.cuda.is_available() else torch.device("cuda", 0)
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "models": {}, "full": None, "budget_cut": False,
           "sdpa": hasattr(torch.nn.functional, "scaled_dot_product_attention")}

    def save():
        res["wall_s"] = round(time.time() - t0, 1)
        with open(os.path.join(a.out, "timings.json"), "w") as f:
            json.dump(res, f)

    res["ceilings"] = ceilings(torch, device)
    print("ceilings:", res["ceilings"], flush=True)
    save()
    reps, warm = job.get("reps", 3), job.get("warmup", 1)
    shares = {}
    full = job.get("full")
    order = job.get("order", list(job["models"]))
    stage_est = [(n, sum(r[3] * ((2 if r[3] > 400 else reps) + warm) for r in job["models"][n]["shapes"]))
                 for n in order]
    total_est = sum(e for _, e in stage_est) + (job.get("full_est_ms") or 0.0)
    deadline, acc = {}, 0.0
    for n, e in stage_est:
        acc += e
        deadline[n] = a.budget_s * acc / total_est if total_est else a.budget_s
        if full and full["model"] == n:
            acc += job.get("full_est_ms") or 0.0
            deadline["full"] = a.budget_s * acc / total_est if total_est else a.budget_s
    res["deadlines_s"] = deadline
    for name in order:
        m = job["models"][name]
        sh = sp_share.Share(m["hidden"], m["heads"], m["ffn"], m["text_dim"], m["text_len"], m["blocks"], device,
                            dtype=dtype)
        shares[name] = sh
        out = {"blocks": m["blocks"], "shapes": {}, "missing": []}
        res["models"][name] = out
        first = True
        for B, S, d, est, _ in sorted(m["shapes"], key=lambda x: -x[3] * x[4]):
            if time.time() - t0 > deadline[name]:
                res["budget_cut"] = True
                out["missing"].append([B, S, d])
                continue
            r = sh.time_shape(B, S, d, reps=2 if est > 400 else reps, warmup=warm + (1 if first else 0))
            first = False
            out["shapes"]["%d,%d,%d" % (B, S, d)] = r
        print("%s: %d shapes timed, %d missing, %.1f s" % (name, len(out["shapes"]), len(out["missing"]),
                                                         time.time() - t0), flush=True)
        save()
        if full and full["model"] == name:
            step_ms = []
            for step in full["steps"]:
                if time.time() - t0 > deadline["full"]:
                    res["budget_cut"] = True
                    break
                flat = [tuple(g) for slot in step for g in slot]
                ms = sh.time_sequence(flat)
                it = iter(ms)
                step_ms.append([[next(it) for _ in slot] for slot in step])
            res["full"] = {"model": name, "step_ms": step_ms}
            print("full replay: %d steps, %.1f s" % (len(step_ms), time.time() - t0), flush=True)
            save()
        del sh
        shares.pop(name)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    save()
    print("done in %.1f s -> %s" % (time.time() - t0, os.path.join(a.out, "timings.json")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
