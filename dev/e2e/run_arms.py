#!/usr/bin/env python3
"""One whole arm set of the end-to-end experiment in one call.

    dev/e2e/run_arms.py --out OUT [--bundle DIR]                 # one GPU: replay at W = 8 and 16
    dev/e2e/run_arms.py --out OUT --two-gpu                      # two GPUs: torchrun W = 2 + its replay
    dev/e2e/run_arms.py --out OUT --real-world 1 --real-parallel ddp,fsdp --arms c
                                                                 # one GPU: the training loop vs the replay
    dev/e2e/run_arms.py --out OUT --smoke                        # CPU: tiny everything, W = 2

1. Corpus: synthetic typed latents (16 channels, fp16 .npy at native size) and text
   embeddings (L x --text-dim fp16 .npy) at a Koala-like shape mix (30 % images, 2-10 s
   clips at 16 fps, 360p-720p, mostly 16:9; Wan VAE strides 4 x 8 x 8), written by
   examples/train_dit.py's write_typed_corpus and indexed with `adaptiveload index`.
2. Plans, all at the same global batch (--mem-tokens, --micro-per-step, --step-tokens):
   (a) equal-token, `plan --policy equal-token`;
   (b) adaptive without per-step balancing (the paper's method): `plan --policy
       adaptive-unbalanced` (--paper-plan-args; empty skips it);
   (c) adaptive with balancing (ours, `plan` defaults);
   (d) ours with the cost model refitted from (c)'s replay trace (`adaptiveload fit
       --trace`, then `plan --cost`).
   Each arm plans as many epochs as --warmup-steps + --steps need (epoch 0, 1, ...).
3. Replay (dev/e2e/replay.py) of every arm at each W of --worlds on this one device; plus
   (c) at the first W for --adaln-steps steps with and without the fused AdaLN.
   --real-world N instead (--two-gpu: N = 2): every arm trained for real with torchrun (N
   processes, examples/train_dit.py, DDP and/or FSDP: --real-parallel) and replayed at W = N on
   one GPU; their step times and gains side by side. N = 1 checks the replay's step time against
   the training loop (data path, wrapper, optimizer) and runs the FSDP path on one GPU; only
   N >= 2 checks the replay's max-over-ranks and collective model.

Outputs in --out: corpus/plan facts (setup.json), ARM-wW.json per replay (replay.py's
fields), trace-c-wW.jsonl, steps-wW.svg (per-rank step time per arm), adaln.json,
summary.json (the headline table, also printed) and, with --real-world N (--two-gpu: N = 2),
real-wN.json.
--bundle DIR: an unpacked //dist bundle (DIR/bin/adaptiveload, DIR/python, DIR/examples);
default: $ADAPTIVELOAD_BIN / PATH / this checkout's bazel-bin, python/ and examples/.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
ARMS = {
    "a": ("equal-token", "equal-token, the usual baseline"),
    "b": ("paper", "adaptive without per-step balancing (the paper's method)"),
    "c": ("ours", "adaptive with per-step balancing (ours)"),
    "d": ("ours-refit", "ours with the cost model refitted from (c)'s trace"),
}


def log(*a):
    print(*a, flush=True)


def _error(e):
    """A failure's message and the end of its traceback, for the results."""
    import traceback

    return ("%s: %s\n%s" % (type(e).__name__, e, "".join(traceback.format_exc().splitlines(True)[-12:])))[-3000:]


def setup_paths(args):
    """Puts the bundle's (or checkout's) package first on sys.path; returns (cli, examples dir,
    python dir)."""
    if args.bundle:
        b = os.path.abspath(args.bundle)
        py, ex, cli = os.path.join(b, "python"), os.path.join(b, "examples"), os.path.join(b, "bin", "adaptiveload")
    else:
        py, ex = os.path.join(REPO, "python"), os.path.join(REPO, "examples")
        cli = args.bin or os.environ.get("ADAPTIVELOAD_BIN") or shutil.which("adaptiveload") or os.path.join(
            REPO, "bazel-bin", "adaptiveload")
    if args.examples:
        ex = os.path.abspath(args.examples)
    if not os.access(cli, os.X_OK):
        raise SystemExit("adaptiveload CLI not found at %s (--bundle or --bin)" % cli)
    sys.path.insert(0, py)
    sys.path.insert(0, ex)
    os.environ["PYTHONPATH"] = py + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    os.environ["ADAPTIVELOAD_BIN"] = cli
    os.environ["AL_EXAMPLES"] = ex
    return cli, ex, py


def run(cmd, **kw):
    """Runs cmd (a list), raising with its output on failure; returns stdout."""
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, **kw)
    if r.returncode:
        raise SystemExit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(map(str, cmd)), r.stdout[-3000:],
                                                     r.stderr[-3000:]))
    return r.stdout


def make_corpus(args, cli, td):
    """(index path, facts) of the corpus in --workdir (reused when already there)."""
    os.makedirs(args.workdir, exist_ok=True)
    index = os.path.join(args.workdir, "corpus.alidx")
    facts_path = os.path.join(args.workdir, "corpus.json")
    if os.path.exists(index) and os.path.exists(facts_path):
        with open(facts_path) as f:
            return index, json.load(f)
    shards = os.path.join(args.workdir, "shards")
    shutil.rmtree(shards, ignore_errors=True)
    t = time.time()
    nbytes = td.write_typed_corpus(shards, args.samples, shards=args.shards, seed=args.seed, profile=args.profile,
                                   text_dim=args.text_dim)
    t_write = time.time() - t
    t = time.time()
    run([cli, "index", "-o", index + ".tmp", shards])
    os.replace(index + ".tmp", index)
    facts = {"samples": args.samples, "shards": args.shards, "profile": args.profile, "text_dim": args.text_dim,
             "payload_bytes": nbytes, "write_s": round(t_write, 2), "index_s": round(time.time() - t, 2),
             "shape_mix": {k: (list(v) if isinstance(v, tuple) else v) for k, v in td.PROFILES[args.profile].items()
                           if k != "aspects"}}
    try:
        facts["inspect"] = json.loads(run([cli, "inspect", index, "--json"]))
    except SystemExit as e:
        facts["inspect_error"] = str(e)[:500]
    with open(facts_path, "w") as f:
        json.dump(facts, f, indent=1)
    log("corpus: %d samples, %.2f GB of members, written in %.1f s, indexed in %.1f s"
        % (args.samples, nbytes / 1e9, facts["write_s"], facts["index_s"]))
    return index, facts


def plan_args(args, buckets):
    """The options every arm's plan shares (the same global batch)."""
    a = ["--mem-tokens", args.mem_tokens, "--micro-per-step", args.micro_per_step, "--seed", args.seed]
    if args.step_tokens:
        a += ["--step-tokens", args.step_tokens]
    if buckets:
        a += ["--buckets", buckets]
    return a


def bench_cost(args, cli, ex, index):
    """examples/shape_bench.py --dit on this device over --bench-batches x --bench-seqs (B*S <=
    --mem-tokens), then `adaptiveload fit --bench`: the cost model of this model for arms a-c.
    Returns (cost path, facts)."""
    csv = os.path.join(args.out, "shape_bench.csv")
    cost = os.path.join(args.out, "bench.alcost")
    cmd = [sys.executable, os.path.join(ex, "shape_bench.py"), "--dit", "-o", csv, "--depth", args.blocks,
           "--attn", args.attn, "--text-dim", args.text_dim, "--text-len", args.bench_text_len,
           "--batches", args.bench_batches, "--seqs", args.bench_seqs, "--max-tokens", args.mem_tokens,
           "--warmup", 2, "--iters", args.bench_iters]
    if args.smoke:
        cmd += ["--dim", 64, "--heads", 2, "--ffn", 128, "--device", "cpu"]
    else:
        cmd += ["--dim", args.hidden, "--heads", args.heads, "--ffn", args.ffn]
    log("== shape benchmark of the DiT (%s x %s)" % (args.bench_batches, args.bench_seqs))
    t = time.time()
    # A smoke run times a tiny model on a shared CPU: its step times can come out flat, which
    # `fit` refuses (the planner needs times that grow with B*S); it is measured again then.
    for attempt in range(3 if args.smoke else 1):
        r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        with open(os.path.join(args.out, "shape_bench.log"), "w") as f:
            f.write(r.stdout)
        if r.returncode:
            raise SystemExit("shape_bench.py failed:\n" + r.stdout[-3000:])
        try:
            fit = fit_cost(args, cli, ["--bench", csv], cost, index)
            break
        except SystemExit as e:
            if not args.smoke or attempt == 2 or FIT_NEEDS_GROWTH not in str(e):
                raise
            log("fit refused the CPU timings (%s); measuring again" % str(e).strip()[-160:])
    log("   %.1f s; fit: %s" % (time.time() - t, json.dumps(fit.get("fit", fit))[:300]))
    facts = {"csv": csv, "fit": fit, "seconds": round(time.time() - t, 1)}
    mem = fit.get("memory") or {}
    if "m0_bytes" in mem and "m1_bytes_per_token" in mem:
        # the benchmark's memory fit at M_mem: the peak the plan's token cap stands for
        facts["predicted_peak_at_mem_tokens"] = int(mem["m0_bytes"] + mem["m1_bytes_per_token"] * args.mem_tokens)
    return cost, facts


def plan_arm(args, cli, index, arm, W, buckets, cost=None, need_steps=None, base_cost=None):
    """Manifests (epochs 0, 1, ...) of one arm for W ranks, enough for need_steps steps;
    returns (paths, summaries)."""
    extra = []
    if arm == "a":
        extra = ["--policy", "equal-token"]
    elif arm == "b":
        extra = args.paper_plan_args.split()
    elif arm == "d" and cost:
        extra = ["--cost", cost]
    if (arm != "d" or not cost) and base_cost:
        extra += ["--cost", base_cost]
    paths, infos, total = [], [], 0
    need = need_steps if need_steps is not None else args.warmup_steps + args.steps
    for epoch in range(args.max_epochs):
        path = os.path.join(args.workdir, "plan-%s-w%d-e%d.alm" % (arm, W, epoch))
        out = run([cli, "plan", "--index", index, "--world", W, "--epoch", epoch, "-o", path, "--json"]
                  + plan_args(args, buckets) + extra)
        info = json.loads(out)
        paths.append(path)
        infos.append(info)
        total += info["steps"]
        if total >= need:
            break
    return paths, infos


def replay_seconds(args):
    """Seconds the next replay may take: --max-replay-seconds, less when the --budget-s left,
    shared among the replays still to run, is smaller (a replay cut short says so)."""
    left = args.budget_s - (time.time() - args.t0) if args.budget_s else float("inf")
    share = left / max(1, args.replays_left)
    args.replays_left = max(0, args.replays_left - 1)
    return round(max(15.0, min(args.max_replay_seconds, share)), 1)


def export(args, *names):
    """Copies finished result files to --export (the device call's $OUT), so that a run cut
    off by its time limit still leaves what it had finished."""
    if not args.export:
        return
    os.makedirs(args.export, exist_ok=True)
    for n in names:
        src = os.path.join(args.out, n)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(args.export, n))


def replay_arm(args, arm, W, index, manifests, steps, trace=None, fused=True, tag=None):
    """Runs dev/e2e/replay.py in this process; returns its result dict (also written to
    OUT/TAG.json)."""
    import replay as R

    tag = tag or "%s-w%d" % (ARMS[arm][0], W)
    argv = ["--index", index, "--world", W, "--steps", steps, "--warmup-steps", args.warmup_steps,
            "--arm", ARMS[arm][0], "--blocks", args.blocks, "--attn", args.attn, "--text-dim", args.text_dim,
            "--seed", args.seed, "--lr", args.lr, "--parallel", args.parallel, "--link-gbps", args.link_gbps,
            "--inter-node-gbps", args.inter_node_gbps, "--gpus-per-node", args.gpus_per_node,
            "--max-seconds", replay_seconds(args), "--bin", os.environ["ADAPTIVELOAD_BIN"],
            "--examples", os.environ["AL_EXAMPLES"]]
    for m in manifests:
        argv += ["--manifest", m]
    if trace:
        argv += ["--trace", trace]
    if args.smoke:
        argv += ["--smoke"]
    else:
        argv += ["--hidden", args.hidden, "--heads", args.heads, "--ffn", args.ffn]
    if not fused:
        argv += ["--no-fused-adaln"]
    ns = R.build_parser().parse_args([str(a) for a in argv])
    log("== replay %s (%s), W = %d, %d steps%s" % (tag, ARMS[arm][1], W, steps, "" if fused else ", unfused AdaLN"))
    res = R.replay(ns, log=log)
    res["bench_predicted_peak_at_mem_tokens"] = getattr(args, "bench_peak", None)
    res["arm_key"] = arm
    res["arm_description"] = ARMS[arm][1]
    with open(os.path.join(args.out, tag + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    _free_cuda()
    return res


def _free_cuda():
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


# What `adaptiveload fit` says when the measured times do not grow with B*S (cost_fit.c).
FIT_NEEDS_GROWTH = "the planner needs step times that grow with B*S"


def _fit_json(out):
    """The fit's JSON object among the lines `adaptiveload fit --json` prints."""
    objs = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]
    return next((o for o in objs if "fit" in o), objs[-1] if objs else {})


def fit_cost(args, cli, source, out_cost, index):
    """`adaptiveload fit SOURCE... -o out_cost` (family auto). The planner refuses a model whose
    per-sample cost does not grow with S (a noisy fit can give a negative S^2 term): then the
    other family is fitted instead, and the JSON says so ("family_fallback")."""
    fit = _fit_json(run([cli, "fit"] + source + ["-o", out_cost, "--json", "--min-tokens", args.fit_min_tokens]))
    probe = os.path.join(args.workdir, "probe.alm")
    r = subprocess.run([cli, "plan", "--index", index, "--world", "1", "--cost", out_cost, "-o", probe] + (
        ["--buckets", args.buckets_file] if args.buckets_file else []),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode and "does not grow" not in r.stderr:
        raise SystemExit("plan with %s failed:\n%s" % (out_cost, r.stderr.strip()[-2000:]))
    if r.returncode:
        family = (fit.get("fit") or {}).get("family")
        other = "power" if family == "poly2" else "poly2"
        log("fit: the %s fit is refused by plan (%s); fitting %s instead" % (family, r.stderr.strip()[-200:], other))
        fit = _fit_json(run([cli, "fit"] + source + ["-o", out_cost, "--json", "--min-tokens", args.fit_min_tokens,
                                                     "--model", other]))
        fit["family_fallback"] = {"refused": family, "why": r.stderr.strip()[-300:]}
    return fit


def refit(args, cli, trace, out_cost, index):
    """`adaptiveload fit --trace` of (c)'s trace; returns the fit's JSON. With a shape benchmark
    (--bench-cost), the trace is fitted together with it (`fit --bench CSV --trace TRACE`): the
    trace's real micro-batches (text lengths, the data path, the training loop's own overheads)
    correct the benchmark where they overlap, and the benchmark keeps the shapes the trace did
    not see (a trace of a few dozen steps holds few distinct (B, S), and a fit of those alone
    extrapolates badly: the trace-only refit of the first device run planned worse than the
    benchmark's model). --refit-source trace fits the trace alone (falling back to the join
    when it holds too few shapes); the JSON's "source" says which."""
    csv = os.path.join(args.out, "shape_bench.csv")
    source = ["--trace", trace]
    if os.path.exists(csv) and args.refit_source == "join":
        source = ["--bench", csv, "--trace", trace]
    else:
        r = subprocess.run([cli, "fit", "--trace", trace, "--json", "--min-tokens", str(args.fit_min_tokens)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if r.returncode and ("distinct (B, S) shapes" in r.stderr or FIT_NEEDS_GROWTH in r.stderr) \
                and os.path.exists(csv):
            log("refit: %s; fitting the trace with the shape benchmark" % r.stderr.strip()[-160:])
            source = ["--bench", csv, "--trace", trace]
    try:
        fit = fit_cost(args, cli, source, out_cost, index)
    except SystemExit as e:
        # A smoke run's trace times a tiny model on a shared CPU, whose step times are launch
        # overheads that need not grow with B*S; `fit` rightly refuses them. The smoke then
        # plans arm d with (c)'s cost model and records the refusal (the test checks its reason).
        if not args.smoke or FIT_NEEDS_GROWTH not in str(e):
            raise
        log("refit refused the smoke run's CPU timings; arm d keeps (c)'s cost model: %s" % str(e).strip()[-200:])
        return {"refused": str(e).strip()[-600:], "source": " ".join(source)}
    fit["source"] = " ".join(source)
    log("refit from %s: %s" % (trace, json.dumps(fit.get("fit", fit))[:400]))
    return fit


HEADLINE = ("tokens_per_s", "step_ms_mean", "step_time_cv", "compute_imbalance_cv", "bubble")


def headline(res, base=None):
    """The summary row of one replay."""
    row = {k: res.get(k) for k in HEADLINE}
    row["steps"] = res.get("steps")
    per = res.get("per_step") or []
    row["tokens_per_step"] = round(sum(s["real_tokens"] for s in per) / len(per), 1) if per else None
    row["peak_mem_bytes"] = res.get("memory", {}).get("peak_mem_bytes")
    row["plan_mem_tokens"] = res.get("memory", {}).get("plan_mem_tokens")
    row["max_micro_tokens"] = res.get("memory", {}).get("max_micro_tokens")
    row["bench_predicted_peak_bytes"] = res.get("bench_predicted_peak_at_mem_tokens")
    pv = res.get("pred_vs_measured") or {}
    row["pred_median_rel_err"] = pv.get("median_rel_err")
    row["pred_max_rel_err"] = pv.get("max_rel_err")
    row["pearson_tokens"] = res.get("pearson", {}).get("micro_ms_vs_tokens")
    row["pearson_sum_s2"] = res.get("pearson", {}).get("micro_ms_vs_sum_s2")
    row["loss_last"] = (res.get("loss_curve") or [None])[-1]
    row["truncated"] = res.get("truncated")
    if base and base.get("tokens_per_s") and res.get("tokens_per_s"):
        row["vs_equal_token"] = round(res["tokens_per_s"] / base["tokens_per_s"], 4)
    bper = (base or {}).get("per_step") or []
    if bper and per:
        # the same global batch? measured tokens per step against equal-token's
        row["tokens_per_step_vs_equal_token"] = round(row["tokens_per_step"] / (
            sum(x["real_tokens"] for x in bper) / len(bper)), 4)
    return row


def print_table(rows):
    cols = ["W", "arm", "tokens_per_s", "vs_equal_token", "tokens_per_step", "step_time_cv", "compute_imbalance_cv",
            "bubble",
            "pred_median_rel_err", "pred_max_rel_err", "pearson_tokens", "pearson_sum_s2", "peak_mem_bytes"]
    log(" | ".join(cols))
    for r in rows:
        log(" | ".join("-" if r.get(c) is None else ("%.4g" % r[c] if isinstance(r[c], float) else str(r[c]))
                       for c in cols))


def fit_steps(args, pace, t0, worlds_left, n_arms, adaln_world):
    """Measured steps per replay for the next world size: --steps, or fewer when the time left
    in --budget-s, at the measured pace (seconds per micro-batch), cannot hold that many for
    every replay still to run (the AdaLN pair's share reserved); at least 5. Every arm of one W
    gets the same number, so arms stay comparable."""
    if not pace or not args.budget_s:
        return args.steps
    left = args.budget_s - (time.time() - t0) - 30.0  # 30 s: plans, fits, writing results
    if adaln_world:
        left -= 2 * (args.adaln_steps + args.warmup_steps) * adaln_world * pace
    per_step = pace * n_arms * sum(worlds_left)  # one step of every remaining replay
    return max(5, min(args.steps, int(left / per_step) - args.warmup_steps))


def adaln_share(args, index, manifests, W):
    """(c) at W for --adaln-steps steps with and without the fused AdaLN: the kernel's share."""
    import torch

    if not torch.cuda.is_available() or args.cpu:
        return {"skipped": "the fused AdaLN needs CUDA"}
    fused = replay_arm(args, "c", W, index, manifests, args.adaln_steps, fused=True, tag="adaln-fused-w%d" % W)
    if not fused.get("fused_adaln"):
        return {"skipped": "the fused AdaLN did not load (see the log)", "fused_run": headline(fused)}
    plain = replay_arm(args, "c", W, index, manifests, args.adaln_steps, fused=False, tag="adaln-pytorch-w%d" % W)
    cf = sum(s["compute_ms"] for s in fused["per_step"])
    cp = sum(s["compute_ms"] for s in plain["per_step"])
    mf = sum(sum(s["rank_ms"]) for s in fused["per_step"])
    mp = sum(sum(s["rank_ms"]) for s in plain["per_step"])
    return {"world": W, "steps": fused["steps"], "tokens_per_s_fused": fused["tokens_per_s"],
            "tokens_per_s_pytorch": plain["tokens_per_s"],
            "speedup": round(plain["tokens_per_s"] and fused["tokens_per_s"] / plain["tokens_per_s"], 4),
            "compute_ms_fused": round(mf, 2), "compute_ms_pytorch": round(mp, 2),
            "share_of_pytorch_compute_saved": round(1 - mf / mp, 4) if mp else None,
            "slowest_rank_ms_fused": round(cf, 2), "slowest_rank_ms_pytorch": round(cp, 2),
            "note": "same steps and micro-batches, same seed; the difference is the AdaLN implementation "
                    "(3 calls per block per micro-batch)"}


# ---------------------------------------------------------------------------------------------
# two GPUs


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _use_torchrun(args):
    """--launcher auto: torchrun on CUDA, spawned gloo processes on the CPU."""
    import torch

    return args.launcher == "torchrun" or (args.launcher == "auto" and torch.cuda.is_available() and not args.cpu)


def launch_real(args, ex, index, manifest, steps, tag, world, parallel):
    """Trains with ``world`` processes (torchrun on CUDA, else spawned gloo processes) under
    ``parallel`` (ddp or fsdp): returns every rank's step-log records."""
    step_log = os.path.join(args.out, "real-%s-%s.steps.jsonl" % (tag, parallel))
    trace = os.path.join(args.out, "real-%s-%s.trace.jsonl" % (tag, parallel))
    script = [os.path.join(ex, "train_dit.py"), "--index", index, "--manifest", manifest, "--steps", steps,
              "--warmup-steps", args.warmup_steps, "--step-log", step_log, "--trace", trace, "--blocks", args.blocks,
              "--attn", args.attn, "--text-dim", args.text_dim, "--seed", args.seed, "--lr", args.lr]
    if args.smoke:
        script += ["--tiny-model", "--cpu"]
    else:
        script += ["--hidden", args.hidden, "--heads", args.heads, "--ffn", args.ffn]
    if parallel == "fsdp":
        script += ["--fsdp"]
    script = [str(s) for s in script]
    env = dict(os.environ, PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "4"))
    use_torchrun = _use_torchrun(args)
    log("== real %d-process run %s, %s (%s)" % (world, tag, parallel,
                                               "torchrun" if use_torchrun else "spawned processes, gloo"))
    t = time.time()
    if use_torchrun:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port",
               str(_free_port())] + script
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        outs, rcs = [r.stdout], [r.returncode]
    else:
        port = str(_free_port())
        procs = []
        for rank in range(world):
            e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port)
            procs.append(subprocess.Popen([sys.executable] + script, env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, universal_newlines=True))
        outs = [p.communicate()[0] for p in procs]
        rcs = [p.returncode for p in procs]
    with open(os.path.join(args.out, "real-%s-%s.log" % (tag, parallel)), "w") as f:
        f.write("\n".join(outs))
    if any(rcs):
        raise SystemExit("%d-process run %s (%s) failed (%s):\n%s"
                         % (world, tag, parallel, rcs, "\n".join(o[-3000:] for o in outs)))
    for key in ("model:", "parallel:"):  # what train_dit.py printed it used
        line = next((ln for o in outs for ln in o.splitlines() if ln.startswith(key)), None)
        log("   " + (line.strip()[:200] if line else "%s (not printed)" % key))
    recs = []
    for rank in range(world):
        with open(step_log + (".rank%d" % rank if world > 1 else "")) as f:
            recs += [json.loads(line) for line in f if line.strip()]
    log("   done in %.1f s" % (time.time() - t))
    return recs


def real_summary(recs, world):
    """tokens/s and step-time statistics of a real run from every rank's step log (warm-up
    steps left out): step time = rank 0's wall time between optimizer steps."""
    import replay as R

    steps = sorted({r["step"] for r in recs if not r.get("warmup")})
    by = {(r["step"], r["rank"]): r for r in recs}
    wall = [by[(s, 0)]["wall_ms"] for s in steps if (s, 0) in by]
    tokens = sum(by[(s, k)]["tokens"] for s in steps for k in range(world) if (s, k) in by)
    comp = [[by[(s, k)]["compute_ms"] for k in range(world) if (s, k) in by] for s in steps]
    return {"steps": len(steps), "tokens": tokens,
            "tokens_per_s": round(tokens / (sum(wall) / 1000.0), 1) if wall and sum(wall) > 0 else None,
            "step_ms_mean": round(sum(wall) / len(wall), 3) if wall else None, "step_time_cv": round(R.cv(wall), 4),
            "compute_ms_mean": round(sum(max(c) for c in comp) / len(comp), 3) if comp else None,
            "compute_imbalance_cv": round(sum(R.cv(c) for c in comp) / len(comp), 4) if comp else None,
            "step_ms": wall, "loss_curve": [by[(s, 0)]["loss"] for s in steps if (s, 0) in by]}


def real_runs(args, cli, ex, index, buckets, base_cost=None):
    """Every arm trained for real with W = --real-world processes (once per --real-parallel mode)
    and replayed at that W on one GPU; returns real-wW.json's dict."""
    W = args.real_world
    modes = args.real_parallel
    arms = [a for a in args.arms if a != "b" or args.paper_plan_args]
    out = {"world": W, "parallel": modes, "arms": {},
           "note": "real: %s, %d process(es), %s, wall time between optimizer steps on rank 0; replay: "
                   "dev/e2e/replay.py at W = %d on one GPU, same manifest and steps; the gains, the step-time "
                   "ratio and the difference use the first parallel mode"
                   % ("torchrun" if _use_torchrun(args) else "spawned", W, " and ".join(modes), W)}
    cost = None
    for arm in arms:
        try:
            if arm == "d":
                trace = os.path.join(args.out, "trace-c-w%d.jsonl" % W)
                cost = os.path.join(args.workdir, "refit-w%d.alcost" % W)
                out["refit"] = refit(args, cli, trace, cost, index)
                if "refused" in out["refit"]:
                    cost = None
            paths, infos = plan_arm(args, cli, index, arm, W, buckets, cost, base_cost=base_cost)
            steps = min(args.steps, infos[0]["steps"] - args.warmup_steps)
            if steps < 1:
                raise SystemExit("epoch 0 of arm %s has %d steps: too few for --warmup-steps %d"
                                 % (arm, infos[0]["steps"], args.warmup_steps))
            reals = {m: real_summary(launch_real(args, ex, index, paths[0], args.warmup_steps + steps, ARMS[arm][0],
                                                 W, m), W)
                     for m in modes}
            rep = replay_arm(args, arm, W, index, paths[:1], steps,
                             trace=os.path.join(args.out, "trace-c-w%d.jsonl" % W) if arm == "c" else None)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - keep the other arms' results
            out.setdefault("errors", []).append({"arm": ARMS[arm][0], "error": _error(e)})
            log("arm %s failed:\n%s" % (ARMS[arm][0], out["errors"][-1]["error"]))
            _free_cuda()
            continue
        real = reals[modes[0]]
        r = {"real": real, "replay": headline(rep), "replay_step_ms": [s["step_ms"] for s in rep["per_step"]]}
        if real["step_ms_mean"] and r["replay"]["step_ms_mean"]:
            r["real_over_replay_step_ms"] = round(real["step_ms_mean"] / r["replay"]["step_ms_mean"], 4)
        for m in modes[1:]:
            o = reals[m]
            r["real_" + m] = o
            n = min(len(o["loss_curve"]), len(real["loss_curve"]))
            if n:  # the same manifest, seed and model: the losses should agree up to bf16 noise
                r["real_%s_loss_max_rel_diff" % m] = round(max(
                    abs(o["loss_curve"][i] - real["loss_curve"][i]) / max(abs(real["loss_curve"][i]), 1e-12)
                    for i in range(n)), 5)
            if o["tokens_per_s"] and real["tokens_per_s"]:
                r["real_%s_over_%s_tokens_per_s" % (m, modes[0])] = round(o["tokens_per_s"] / real["tokens_per_s"], 4)
        out["arms"][ARMS[arm][0]] = r
    base = out["arms"].get("equal-token")
    for name, r in out["arms"].items():
        if base and name != "equal-token":
            gr = r["real"]["tokens_per_s"] / base["real"]["tokens_per_s"] if base["real"]["tokens_per_s"] else None
            gp = (r["replay"]["tokens_per_s"] / base["replay"]["tokens_per_s"]
                  if base["replay"]["tokens_per_s"] else None)
            r["gain_real"] = round(gr, 4) if gr else None
            r["gain_replay"] = round(gp, 4) if gp else None
            r["gain_diff_points"] = round(100 * (gr - gp), 2) if gr and gp else None
    log("real runs (W = %d) against the replay at W = %d:" % (W, W))
    for name, r in out["arms"].items():
        log("  %-12s real %s tokens/s (step %s ms, CV %s)  replay %s tokens/s (step %s ms, CV %s)  "
            "real/replay step %s  gain real %s replay %s"
            % (name, r["real"]["tokens_per_s"], r["real"]["step_ms_mean"], r["real"]["step_time_cv"],
               r["replay"]["tokens_per_s"], r["replay"]["step_ms_mean"], r["replay"]["step_time_cv"],
               r.get("real_over_replay_step_ms"), r.get("gain_real"), r.get("gain_replay")))
        for m in modes[1:]:
            log("  %-12s %s: %s tokens/s (%sx of %s), loss max rel. diff %s"
                % ("", m, r["real_" + m]["tokens_per_s"], r.get("real_%s_over_%s_tokens_per_s" % (m, modes[0])),
                   modes[0], r.get("real_%s_loss_max_rel_diff" % m)))
    return out


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="results folder")
    p.add_argument("--workdir", default="/tmp/al-e2e", help="corpus, index and manifests (reused when present)")
    p.add_argument("--bundle", help="an unpacked //dist bundle (bin/, python/, examples/)")
    p.add_argument("--bin", help="adaptiveload CLI (without --bundle)")
    p.add_argument("--examples", help="folder with train_dit.py / dit_model.py (default: the bundle's or checkout's)")
    p.add_argument("--smoke", action="store_true",
                   help="CPU check: tiny corpus and model, W = 2, 4 steps (overrides the sizes below)")
    p.add_argument("--two-gpu", action="store_true", help="--real-world 2: torchrun on 2 GPUs beside the W = 2 replay")
    p.add_argument("--real-world", type=int, default=0,
                   help="N: every arm trained for real with N processes (one per GPU) beside the replay at W = N, "
                        "instead of the replays at --worlds (1 on one GPU: the training loop against the replay)")
    p.add_argument("--real-parallel", default=None,
                   help="--real-world: comma-separated parallel modes (ddp, fsdp), each arm trained once per mode; "
                        "the first is compared with the replay (default: --parallel)")
    p.add_argument("--launcher", choices=["auto", "torchrun", "spawn"], default="auto",
                   help="--real-world: torchrun (default on CUDA) or processes spawned here (gloo on the CPU)")
    p.add_argument("--cpu", action="store_true", help="stay on the CPU")
    # corpus
    p.add_argument("--profile", default="koala", choices=["koala", "smoke"], help="corpus shape mix")
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--text-dim", type=int, default=4096)
    # plans
    p.add_argument("--arms", default="a,b,c,d", help="arms to run (a, b, c, d; see above)")
    p.add_argument("--paper-plan-args", default="--policy adaptive-unbalanced",
                   help="plan options giving adaptive batch sizes without per-step balancing (arm b); empty: skip b")
    p.add_argument("--worlds", default="8,16", help="replayed world sizes")
    p.add_argument("--mem-tokens", type=int, default=65536,
                   help="M_mem of every plan (default: the planner's, AL_PLAN_DEFAULT_MEM_TOKENS)")
    p.add_argument("--micro-per-step", type=int, default=1, help="K of every plan")
    p.add_argument("--step-tokens", type=int, default=0, help="T of every plan (0: W x K x M_mem)")
    p.add_argument("--max-epochs", type=int, default=50)
    p.add_argument("--refit-source", choices=["join", "trace"], default="join",
                   help="arm d's fit: the trace joined with the shape benchmark (default), or the trace alone")
    p.add_argument("--fit-min-tokens", type=int, default=4096, help="fit --min-tokens (bench and trace fits)")
    p.add_argument("--bench-cost", choices=["auto", "on", "off"], default="auto",
                   help="cost model of arms a-c from a shape benchmark of this DiT on this device (auto: on with "
                        "CUDA); off: the planner's embedded H200 model")
    p.add_argument("--bench-batches", default="1,2,4,8,16,32,64")
    p.add_argument("--bench-seqs", default="1024,2048,4096,8192,16384,32768,65536")
    p.add_argument("--bench-iters", type=int, default=3)
    p.add_argument("--bench-text-len", type=int, default=72, help="text tokens per sample in the benchmark")
    # replay
    p.add_argument("--steps", type=int, default=40, help="measured steps per replay")
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--adaln-steps", type=int, default=10, help="steps of the fused/unfused AdaLN pair (0: skip)")
    p.add_argument("--max-replay-seconds", type=float, default=150, help="cut one replay short after this (reported)")
    p.add_argument("--budget-s", type=float, default=540,
                   help="wall-clock budget of the whole call: replays are cut short (reported) to end inside it; "
                        "0: none")
    p.add_argument("--export", help="copy summary.json, setup.json, adaln.json, real-wN.json and the SVGs here as "
                                    "they are written (dev/e2e/run_arms.sh: $OUT)")
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--hidden", type=int, default=1536)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ffn", type=int, default=8960)
    p.add_argument("--attn", default="auto", choices=["auto", "varlen", "flex", "sdpa", "math"])
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--link-gbps", type=float, default=450.0)
    p.add_argument("--inter-node-gbps", type=float, default=50.0)
    p.add_argument("--gpus-per-node", type=int, default=8)
    args = p.parse_args(argv)

    if args.smoke:
        args.profile, args.text_dim, args.fit_min_tokens = "smoke", 32, 1
        if args.samples == 1000:
            args.samples = 160
        args.shards = min(args.shards, 2)
        if args.worlds == "8,16":
            args.worlds = "2"
        args.steps = min(args.steps, 10)
        args.warmup_steps = min(args.warmup_steps, 1)
        args.mem_tokens = min(args.mem_tokens, 256)
        args.blocks = 1
        args.lr = 1e-3
        args.bench_batches, args.bench_seqs, args.bench_text_len = "1,2,4", "8,18,27,48", 8
    args.arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if args.two_gpu:
        args.real_world = args.real_world or 2
    if args.real_world < 0:
        raise SystemExit("--real-world must be 1 or more")
    args.real_parallel = [m.strip() for m in (args.real_parallel or args.parallel).split(",") if m.strip()]
    for m in args.real_parallel:
        if m not in ("ddp", "fsdp"):
            raise SystemExit("unknown --real-parallel mode %r (ddp, fsdp)" % m)
    for a in args.arms:
        if a not in ARMS:
            raise SystemExit("unknown arm %r (a, b, c, d)" % a)
    worlds = [int(w) for w in args.worlds.split(",")]
    os.makedirs(args.out, exist_ok=True)
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ[k] = v  # NVLink multicast stays off on the shared GPU machines (also for the children)
    t0 = args.t0 = time.time()
    args.replays_left = 0
    cli, ex, py = setup_paths(args)
    sys.path.insert(0, HERE)
    import train_dit as td

    import torch

    buckets = args.buckets_file = None
    if args.smoke:
        buckets = os.path.join(args.workdir, "smoke-buckets.txt")
        os.makedirs(args.workdir, exist_ok=True)
        with open(buckets, "w") as f:
            f.write(td.SMOKE_BUCKETS)
        args.buckets_file = buckets
    index, corpus = make_corpus(args, cli, td)
    setup = {"corpus": {k: v for k, v in corpus.items() if k != "inspect"}, "args": vars(args),
             "torch": torch.__version__, "cuda": torch.cuda.is_available(),
             "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
             "plan_help_has_paper_option": None}
    help_text = subprocess.run([cli, "plan", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True).stdout
    setup["plan_policies"] = [w for w in ("adaptive", "equal-token", "adaptive-unbalanced") if w in help_text]
    skipped = {}
    if "b" in args.arms and not args.paper_plan_args:
        skipped["paper"] = "--paper-plan-args is empty"
        log("arm b skipped: " + skipped["paper"])
    setup["skipped_arms"] = skipped
    base_cost = None
    if args.bench_cost == "on" or (args.bench_cost == "auto" and torch.cuda.is_available() and not args.cpu):
        try:
            base_cost, setup["bench"] = bench_cost(args, cli, ex, index)
            args.bench_peak = setup["bench"].get("predicted_peak_at_mem_tokens")
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the arms can still run on the default model
            setup["bench_error"] = _error(e)
            log("shape benchmark failed, arms a-c use the planner's embedded model:\n" + setup["bench_error"])
    setup["cost_model_arms_a_c"] = base_cost or "the planner's embedded H200 model (plan without --cost)"
    with open(os.path.join(args.out, "setup.json"), "w") as f:
        json.dump(setup, f, indent=1, default=str)
    export(args, "setup.json")

    if args.real_world:
        args.replays_left = len([a for a in args.arms if a != "b" or args.paper_plan_args])
        res = real_runs(args, cli, ex, index, buckets, base_cost)
        res["skipped_arms"] = skipped
        name = "real-w%d.json" % args.real_world
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(res, f, indent=1)
        export(args, name)
        ok = not res.get("errors") and bool(res["arms"])
        log("done in %.1f s: %s (%s)" % (time.time() - t0, os.path.join(args.out, name), "OK" if ok else "FAILED"))
        return 0 if ok else 1

    import replay as R

    arms = [a for a in args.arms if not (a == "b" and not args.paper_plan_args)]
    summary = {"rows": [], "skipped_arms": skipped, "plans": {}}
    results_by_w = {}
    do_adaln = "c" in arms and args.adaln_steps > 0
    args.replays_left = len(worlds) * len(arms) + (2 if do_adaln else 0)

    def save_summary():
        summary["wall_s"] = round(time.time() - t0, 1)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        export(args, "summary.json")

    done_replays = []  # (wall seconds, micro-batches run) of each replay: the measured pace
    summary["steps_by_world"] = {}

    def pace():
        """Seconds per micro-batch so far (replay wall time, data and bookkeeping included)."""
        n = sum(m for _, m in done_replays)
        return sum(w for w, _ in done_replays) / n if n else None

    for wi, W in enumerate(worlds):
        results = []
        base = None
        steps_w = fit_steps(args, pace(), t0, worlds[wi:], len(arms), worlds[0] if do_adaln else 0)
        summary["steps_by_world"][str(W)] = steps_w
        if steps_w < args.steps:
            log("W = %d: %d measured steps per arm (not %d) to stay inside --budget-s at the measured pace of "
                "%.1f ms per micro-batch" % (W, steps_w, args.steps, 1000 * pace()))
        for arm in arms:
            try:
                res = run_one_arm(args, cli, index, arm, W, worlds, buckets, base_cost, steps_w, summary)
            except (Exception, SystemExit) as e:  # noqa: BLE001 - keep the other arms' results
                msg = _error(e)
                summary.setdefault("errors", []).append({"W": W, "arm": ARMS[arm][0], "error": msg})
                log("arm %s at W = %d failed:\n%s" % (ARMS[arm][0], W, msg))
                save_summary()
                _free_cuda()
                continue
            done_replays.append((res["wall_s"], (res["steps"] + args.warmup_steps) * W))
            results.append(res)
            if arm == "a":
                base = res
            row = headline(res, base)
            row.update({"W": W, "arm": ARMS[arm][0]})
            summary["rows"].append(row)
            save_summary()
        results_by_w[W] = results
        if results:
            R.write_svg(os.path.join(args.out, "steps-w%d.svg" % W), results,
                        title="per-rank compute time per step, W = %d (replay on one device)" % W)
            export(args, "steps-w%d.svg" % W)
    if do_adaln:  # last: the lowest priority of the call's budget
        try:
            adaln_pair(args, cli, index, worlds[0], buckets, base_cost, pace(), t0, summary)
        except (Exception, SystemExit) as e:  # noqa: BLE001
            summary["adaln"] = {"error": _error(e)}
            log("the AdaLN pair failed:\n" + summary["adaln"]["error"])
    save_summary()
    print_table(summary["rows"])
    if "adaln" in summary:
        log("fused AdaLN: %s" % json.dumps(summary["adaln"])[:2000])
    ok = not summary.get("errors") and all(r.get("steps", 0) > 0 for rs in results_by_w.values() for r in rs) and all(
        r.get("loss_finite") for rs in results_by_w.values() for r in rs)
    log("done in %.1f s: %s (%s)" % (time.time() - t0, os.path.join(args.out, "summary.json"),
                                     "OK" if ok else "FAILED"))
    return 0 if ok else 1


def run_one_arm(args, cli, index, arm, W, worlds, buckets, base_cost, steps_w, summary):
    """Plans arm ``arm`` for W ranks (refitting first for arm d) and replays it; returns the
    replay's result."""
    cost = None
    if arm == "d":
        cost = os.path.join(args.out, "refit.alcost")
        if "refit" not in summary:
            trace = os.path.join(args.out, "trace-c-w%d.jsonl" % worlds[0])
            if not os.path.exists(trace):
                raise SystemExit("arm d needs arm c's trace %s (arm c did not run)" % trace)
            summary["refit"] = refit(args, cli, trace, cost, index)
        if "refused" in summary["refit"]:
            cost = None
    paths, infos = plan_arm(args, cli, index, arm, W, buckets, cost, base_cost=base_cost)
    summary["plans"]["%s-w%d" % (ARMS[arm][0], W)] = [
        {k: i.get(k) for k in ("steps", "step_tokens", "step_tokens_mean", "micro_per_step", "mem_tokens",
                               "imbalance_cv", "bubble", "step_time_cv", "predicted_tokens_per_s", "cost_model",
                               "rejected")}
        for i in infos]
    trace = os.path.join(args.out, "trace-c-w%d.jsonl" % W) if arm == "c" else None
    return replay_arm(args, arm, W, index, paths, steps_w, trace=trace)


def adaln_pair(args, cli, index, W, buckets, base_cost, pace, t0, summary):
    """The fused / unfused AdaLN pair of arm c at W, with the steps the budget leaves."""
    if pace and args.budget_s:
        left = args.budget_s - (time.time() - t0)
        args.adaln_steps = max(2, min(args.adaln_steps, int(left / (2 * W * pace)) - args.warmup_steps))
    paths, _ = plan_arm(args, cli, index, "c", W, buckets, need_steps=args.warmup_steps + args.adaln_steps,
                        base_cost=base_cost)
    summary["adaln"] = adaln_share(args, index, paths, W)
    with open(os.path.join(args.out, "adaln.json"), "w") as f:
        json.dump(summary["adaln"], f, indent=1)
    export(args, "adaln.json")


if __name__ == "__main__":
    sys.exit(main())
