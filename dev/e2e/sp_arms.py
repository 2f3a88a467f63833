#!/usr/bin/env python3
"""The SP replay's host half: plans every arm, writes the device job, and composes the
device's timings into per-arm results and the report table.

    dev/e2e/sp_arms.py prepare --work DIR [--bin adaptiveload] [--lib libadaptiveload.so] [--smoke]
                               [--bench-extra TIMINGS]
    (device) dev/e2e/sp_replay.py --job DIR/job/job.json --out $OUT
    dev/e2e/sp_arms.py compose --work DIR --timings OUT/timings.json --out results.json [--md table.md]
    dev/e2e/sp_arms.py ceiling --results results.json   (the most a lock-step plan can gain over a)

Arms, all at the same T and the same M_mem per GPU, per model (T: the smallest mean tokens
per step of the lock-step arms planned at the capacity W K M_mem; each other lock-step arm
planned at the --step-tokens input that gives T within STEP_TOL, see plan_world):
  a   fixed SP at the degree the longest clip needs, equal-token batches
      (`plan --policy equal-token --sp-degrees D`);
  a'  the same fixed degree with the planner's balancing (`plan --sp-degrees D`);
  b   DCP-like (dev/e2e/dcp_policy.py): its own global batch; b-T the same iterations merged
      to about T tokens per step; replayed under its own sync model (per-rank sums);
  c   ours: `plan --sp-degrees 1,2,4,8 --sync micro` (1.3B: 1,2,4; degrees above W are
      left out: at W = 2, 1,2, and arm a's fixed degree is 2);
  d   ours with `--sync step`, replayed under the FSDP (lock-step) model.
Models (dev/e2e/sp_model.py): Wan 2.1 14B (M_mem 32,768, degrees 1,2,4,8: a 255,600-token
clip needs 8) and 1.3B (M_mem 65,536, degrees 1,2,4: its 12 heads do not divide by 8).
The cost model every arm plans with: `adaptiveload fit` of the shipped H200 shape benchmark
of one block (BENCHES; with --bench-extra, an earlier replay's timed shapes added as rows),
per-degree floor fits; measured times are reported against it.
Corpus: dev/e2e/sp_corpus.py (120,000 samples, metadata only); buckets dev/e2e/sp_buckets.py.

Composition (sp_model.compose): a micro-batch's per-rank time = the measured share time of
its (B, S, d) through the timed blocks x depth / blocks + the modelled all-to-all; step time
under the FSDP model = sum over slots of the slowest group + K x the FSDP collectives; the
DCP arms: the slowest group's sum + one ZeRO-2-like sync. The full replay (every share of the
first steps of one arm at W = 8 run in order on the device) is compared with the composition
of the same steps from the table.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import dcp_policy  # noqa: E402
import sp_buckets  # noqa: E402
import sp_corpus  # noqa: E402
import sp_cost_check  # noqa: E402
import sp_model  # noqa: E402

SETUPS = {  # model: (M_mem, degrees, blocks timed on the device)
    "14b": (32768, (1, 2, 4, 8), 1),
    "1.3b": (65536, (1, 2, 4), 1),
}
BENCHES = {  # model: the shipped H200 shape benchmark of one block (examples/shape_bench.py)
    "14b": "cost/data/h200_shape_bench_14b_sp.csv",
    "1.3b": "cost/data/h200_shape_bench_sp.csv",
}
STEP_TOL = 0.01  # tokens/step of every lock-step arm within 1% of T
ARMS = ("a", "a'", "b", "b-T", "c", "d")
ARM_NAMES = {"a": "fixed SP, equal-token", "a'": "fixed SP, balanced", "b": "DCP-like",
             "b-T": "DCP-like at T", "c": "ours (--sync micro)", "d": "ours (--sync step)"}


def log(*a):
    print(*a, flush=True)


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode:
        raise SystemExit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(map(str, cmd)), r.stdout[-2000:],
                                                     r.stderr[-2000:]))
    return r.stdout


def find_cli(given):
    for c in (given, os.environ.get("ADAPTIVELOAD_BIN"), os.path.join(REPO, "bazel-bin", "adaptiveload"),
              shutil.which("adaptiveload")):
        if c and os.access(c, os.X_OK):
            return c
    raise SystemExit("adaptiveload CLI not found (bazel build //:adaptiveload, or --bin)")


# ---------------------------------------------------------------------------------------------
# prepare


def fit_cost(cli, work, name, m, extra_timings=None):
    """The measured cost model of ``name``: `adaptiveload fit` of the shipped H200 shape
    benchmark of one block (BENCHES), with the shapes of ``extra_timings`` (a timings.json of
    sp_replay.py) added as rows when given, all-to-all at Comm's link rate. Returns (cost file,
    fit JSON, benchmark CSV). The fit is of one block: PlanCost scales it by the depth."""
    bench = os.path.join(REPO, BENCHES[name])
    if extra_timings:
        with open(extra_timings) as f:
            tm = json.load(f)
        merged = os.path.join(work, "bench-%s.csv" % name)
        sp_cost_check.write_bench(bench, tm, name, merged)
        bench = merged
    cost = os.path.join(work, "cost-%s.alcost" % name)
    link = sp_model.Comm(m, 8).link_gbps
    out = run([cli, "fit", "--bench", bench, "--sp-link-gbps", link, "-o", cost, "--json"])
    objs = [json.loads(x) for x in out.splitlines() if x.strip().startswith("{")]
    fit = next((o for o in objs if "fit" in o), objs[-1])
    with open(os.path.join(work, "fit-%s.json" % name), "w") as f:
        json.dump(fit, f)
    return cost, fit, bench


def plan_cost(fit, m, W, blocks=1):
    """The replay's PlanCost of a fit of ``blocks`` blocks: whole-model ms per rank."""
    return sp_model.PlanCost.from_fit_json(fit, sp_model.Comm(m, W), scale=m["depth"] / blocks)


def comp_ms_sp(fit, m, M, D):
    """M_comp for an SP plan in the cost file's units (one block, all-to-all included): the
    per-rank cost of one sample of the largest bucket at the largest degree, so that the
    longest clip runs alone and no batch of a shorter one costs more (the planner's default
    is c(S*) at d = 1 with S* <= M_mem, below what the longest clip costs at its degree)."""
    dmax = max(D)
    S = max(t for t in (sp_model.tokens(w, h, f) for _, sizes in sp_buckets.ASPECTS for w, h in sizes
                        for f in sp_buckets.FRAMES) if t <= dmax * M)
    c = sp_model.PlanCost.from_fit_json(fit)
    f = c.fit_at(dmax)
    per = f.p.get("s", 0.0) + (f.p["b"] * S + f.p["c"] * S * S) / dmax
    bytes_tok = fit.get("sp", {}).get("a2a_bytes_per_token") or 8 * 2.0 * m["hidden"]
    gbps = fit.get("sp", {}).get("link_gbps") or sp_model.Comm(m, 8).link_gbps
    return per + S * (dmax - 1) / (dmax * dmax) * bytes_tok / (gbps * 1e6)


def grid_shapes(D, M):
    """Benchmark rows the plans may lack: many short samples per micro-batch (images and
    short clips, B up to 291) at every degree, where the per-sample work (the text K/V of
    the cross-attention, whole on every rank of a group) is a large share of a rank's time.
    Timed after the plans' own shapes (count 0), for the refit."""
    return [(B, S, d) for d in D for S in (900, 1560, 3600, 8160) for B in (8, 32, 96, 192, 291)
            if B * S <= d * M]


def lockstep_schedule(cli, manifest, native, world):
    """The lock-step schedule (sp_model's format) of a manifest, from `inspect --jsonl`. A
    group's micro-batch is its leader's line (sp_rank 0); its followers' lines (sp_rank > 0)
    and empty lines add none. A plan without --sp-degrees has lines without sp_degree: every
    rank is a group of one."""
    out = subprocess.run([cli, "inspect", manifest, "--jsonl"], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    slots = {}
    for line in out.splitlines():
        if line.strip():
            o = json.loads(line)
            slots.setdefault((o["step"], o["micro"]), {})[o["rank"]] = o
    steps = {}
    for (step, k), by_rank in slots.items():
        groups = []
        for r in sorted(by_rank):
            o = by_rank[r]
            toks = o.get("tokens") or []
            if o.get("sp_rank", 0) or not toks:
                continue
            groups.append({"d": o.get("sp_degree", 1) or 1, "rank": r, "B": len(toks), "S": max(toks),
                           "real": sum(toks), "native": sum(native[i] for i in o["samples"]),
                           "plan_cost_ms": o.get("cost_ms")})
        steps.setdefault(step, {})[k] = groups
    sched = {"sync": "micro", "world": world, "steps": []}
    for s in sorted(steps):
        sched["steps"].append([steps[s][k] for k in sorted(steps[s])])
    return sched


LOCKSTEP_ARMS = ("a", "a'", "c", "d")


def plan_flags(arm, D):
    dmax = max(D)
    return {"a": ["--policy", "equal-token", "--sp-degrees", dmax], "a'": ["--sp-degrees", dmax],
            "c": ["--sp-degrees", ",".join(map(str, D)), "--sync", "micro"],
            "d": ["--sp-degrees", ",".join(map(str, D)), "--sync", "step"]}[arm]


def plan_once(cli, man, base, arm, D, step_tokens, comp_ms):
    """`plan --json` of one lock-step arm at --step-tokens ``step_tokens``; returns (summary,
    the flags after the common ones). Equal-token (a) has no compute limit, so no --comp-ms."""
    extra = plan_flags(arm, D) + ["--step-tokens", step_tokens]
    if arm != "a" and comp_ms:
        extra += ["--comp-ms", "%.6f" % comp_ms]
    return json.loads(run([cli, "plan", "-o", man, "--json"] + base + extra)), extra


def plan_at_T(cli, man, base, arm, D, cap, T, comp_ms, tol=STEP_TOL):
    """The --step-tokens input at which the arm's mean tokens per step is T within ``tol``.
    The planner treats --step-tokens as a bound (calibrate_micro_tokens only lowers the
    micro-batch target m; packing and the compute limit leave batches below m), so a plan
    at --step-tokens T holds less than T: the input is searched (bisection on [T / 8, cap],
    the mean grows with it) and the closest plan kept. Returns (summary, flags, input)."""
    best = None
    lo, hi = max(1, T // 8), cap
    for _ in range(20):
        mid = (lo + hi) // 2 if best else cap
        info, extra = plan_once(cli, man, base, arm, D, mid, comp_ms)
        got = info["step_tokens_mean"]
        if best is None or abs(got - T) < abs(best[0]["step_tokens_mean"] - T):
            best = (info, extra, mid)
        if abs(got - T) <= tol * T or hi - lo <= 1:
            break
        if got > T:
            hi = mid
        else:
            if mid == cap:
                break  # the arm cannot hold T even at the capacity
            lo = mid
    if best[2] != mid:
        best = plan_once(cli, man, base, arm, D, best[2], comp_ms) + (best[2],)
    return best


def planner_schedule(cli, man, info, extra, base, native, W, D, arm):
    s = lockstep_schedule(cli, man, native, W)
    got = {g["d"] for step in s["steps"] for slot in step for g in slot}
    if not got <= set(D if arm in ("c", "d") else [max(D)]):
        raise SystemExit("plan %s gave degrees %s for --sp-degrees %s" % (arm, sorted(got), extra[-1]))
    s["plan"] = {k: info.get(k) for k in ("steps", "step_tokens", "step_tokens_mean", "micro_tokens",
                                          "comp_budget_ms", "micro_per_step", "mem_tokens", "bubble",
                                          "bubble_step", "bubble_micro", "sync", "sp_degrees", "rejected",
                                          "imbalance_cv", "step_time_cv", "predicted_tokens_per_s")}
    s["command"] = "adaptiveload plan " + " ".join(map(str, base + extra))
    return s


def plan_world(cli, lib, work, index, cost, name, W, K, M, D, corpus, pcost, fit, m):
    """Every arm of one (model, W) at one T: {arm: (schedule or None, reason)} and T's facts.
    T is the smallest mean tokens per step of the lock-step arms planned at the capacity
    W K M_mem (the arm that holds least there bounds what all can hold); the others are
    planned at the --step-tokens input that gives T (plan_at_T); b keeps its own batch, b-T
    its iterations merged to T."""
    native, shapes = corpus["tokens"], corpus["samples"]
    cap = W * K * M
    base = ["--index", index, "--world", W, "--mem-tokens", M, "--micro-per-step", K, "--buckets",
            os.path.join(work, "buckets.txt"), "--cost", cost, "--seed", 0, "--epoch", 0, "--last-step", "drop"]
    comp = comp_ms_sp(fit, m, M, D)
    out, at_cap = {}, {}
    arms = LOCKSTEP_ARMS
    mans = {x: os.path.join(work, "plan-%s-%s-w%d.alm" % (name, x.replace("'", "p"), W)) for x in arms}
    for arm in arms:
        at_cap[arm] = plan_once(cli, mans[arm], base, arm, D, cap, comp)[0]["step_tokens_mean"]
    T = int(min(at_cap.values()))
    facts = {"capacity": cap, "T": T, "at_capacity": at_cap, "comp_ms": comp, "tolerance": STEP_TOL}
    for arm in arms:
        info, extra, given = plan_at_T(cli, mans[arm], base, arm, D, cap, T, comp)
        s = planner_schedule(cli, mans[arm], info, extra, base, native, W, D, arm)
        s["plan"]["step_tokens_given"] = given
        out[arm] = (s, None)
    nat, merged, bf = dcp_policy.plan_arms(shapes, native, W, M, list(D), pcost, K, T=T, lib=lib)
    nat["facts"], merged["facts"] = bf, bf
    out["b"], out["b-T"] = (nat, None), (merged, None)
    return out, facts


def prepare(a):
    cli = find_cli(a.bin)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    samples = 2000 if a.smoke else a.samples
    if not os.path.exists(os.path.join(work, "corpus.json")):
        sp_corpus.main(["-o", work, "--samples", str(samples)] + (["--lib", a.lib] if a.lib else []))
    with open(os.path.join(work, "corpus.json")) as f:
        corpus = json.load(f)
    with open(os.path.join(work, "buckets.txt"), "w") as f:
        f.write(sp_buckets.table_text())
    index = os.path.join(work, "corpus.alidx")
    worlds = [int(w) for w in a.worlds.split(",")]
    K = a.micro_per_step
    job = {"models": {}, "order": [], "full": None, "reps": a.reps, "warmup": 1}
    meta = {"worlds": worlds, "K": K, "arms": {},
            "models": {}, "corpus": {k: corpus[k] for k in ("total_tokens", "max_tokens", "token_bands", "mix")},
            "samples": len(corpus["samples"]), "skipped": {}}
    for name in a.models.split(","):
        M, D, blocks = SETUPS[name]
        if a.smoke:
            M = M // 8
        m = sp_model.MODELS[name]
        cost, fit, bench = fit_cost(cli, work, name, m, a.bench_extra)
        meta["models"][name] = {"mem_tokens": M, "degrees": list(D), "blocks": blocks, "fit": fit.get("fit"),
                                "fit_json": os.path.join(work, "fit-%s.json" % name), "bench": bench,
                                "shape": m, "T": {}}
        shapes = {}
        for W in worlds:
            pcost = plan_cost(fit, m, W, blocks)
            DW = tuple(d for d in D if d <= W)  # a group holds at most the world (W = 2: degrees 1, 2)
            arms, tf = plan_world(cli, a.lib, work, index, cost, name, W, K, M, DW, corpus, pcost, fit, m)
            tf["degrees"] = list(DW)
            meta["models"][name]["T"][str(W)] = tf
            log("%s W=%d: T = %d (capacity %d; at capacity %s)" % (name, W, tf["T"], tf["capacity"],
                                                                  tf["at_capacity"]))
            for arm in ARMS:
                s, why = arms.get(arm, (None, "not planned"))
                key = "%s/%s/w%d" % (name, arm, W)
                if s is None:
                    meta["skipped"][key] = why
                    log("skip %s: %s" % (key, why))
                    continue
                sp_model.check_schedule(s)
                path = os.path.join(work, "sched-%s-%s-w%d.json" % (name, arm.replace("'", "p"), W))
                with open(path, "w") as f:
                    json.dump(s, f)
                meta["arms"][key] = path
                for k, n in sp_model.schedule_shapes(s).items():
                    shapes[k] = shapes.get(k, 0) + n
                log("%s: %d steps, %d distinct shapes so far" % (key, len(s["steps"]), len(shapes)))
        est = plan_cost(fit, m, worlds[0], blocks)
        rows = [[B, S, d, est.compute(B, S, d) * blocks / m["depth"], n] for (B, S, d), n in sorted(shapes.items())]
        have = {(r[0], r[1], r[2]) for r in rows}
        grid = [[B, S, d, est.compute(B, S, d) * blocks / m["depth"], 0] for B, S, d in grid_shapes(D, M)
                if (B, S, d) not in have and d <= max(worlds) and not a.no_grid]
        rows += grid
        job["models"][name] = dict(hidden=m["hidden"], heads=m["heads"], ffn=m["ffn"], text_dim=m["text_dim"],
                                   text_len=m["text_len"], blocks=blocks, shapes=rows)
        job["order"].append(name)
        est = sum(r[3] * ((2 if r[3] > 400 else a.reps) + 1) for r in rows) / 1e3
        meta["models"][name]["shapes"] = len(rows)
        meta["models"][name]["est_device_s"] = round(est, 1)
        log("%s: %d distinct shapes, estimated %.0f s of device time" % (name, len(rows), est))
    # the full replay: the first --full-steps steps of one arm at the smallest W
    full_model, full_arm = a.full.split(":")
    key = "%s/%s/w%d" % (full_model, full_arm, worlds[0])
    if key in meta["arms"] and a.full_steps:
        with open(meta["arms"][key]) as f:
            s = json.load(f)
        steps = [[[[g["B"], g["S"], g["d"]] for g in slot] for slot in step] for step in s["steps"][:a.full_steps]]
        job["full"] = {"model": full_model, "arm_key": key, "steps": steps}
        job["full_est_ms"] = 0.0
        m = sp_model.MODELS[full_model]
        blocks = SETUPS[full_model][2]
        est = sum(blocks * sp_model.analytic_ms(m, *g) for st in steps for sl in st for g in sl) / 1e3
        meta["full"] = {"arm_key": key, "steps": len(steps), "est_device_s": round(est, 1)}
        job["full_est_ms"] = est * 1e3
        log("full replay %s: %d steps, estimated %.0f s" % (key, len(steps), est))
    jd = os.path.join(work, "job")
    os.makedirs(jd, exist_ok=True)
    with open(os.path.join(jd, "job.json"), "w") as f:
        json.dump(job, f)
    with open(os.path.join(work, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log("job: %s (%d bytes)" % (os.path.join(jd, "job.json"), os.path.getsize(os.path.join(jd, "job.json"))))
    return 0


# ---------------------------------------------------------------------------------------------
# compose


def timing_fn(tm, name, m):
    """time_ms(B, S, d) of model ``name``: the measured share ms x depth / blocks; a shape
    without a measurement gets the analytic estimate scaled by the median measured/analytic
    ratio (counted in ``missing``)."""
    md = tm["models"][name]
    blocks = md["blocks"]
    table = {tuple(int(x) for x in k.split(",")): v["ms"] for k, v in md["shapes"].items()}
    ratios = [ms / (blocks * sp_model.analytic_ms(m, *k)) for k, ms in table.items()]
    scale = statistics.median(ratios) if ratios else 1.0
    missing = set()

    def f(B, S, d):
        v = table.get((B, S, d))
        if v is None:
            missing.add((B, S, d))
            v = scale * blocks * sp_model.analytic_ms(m, B, S, d)
        return v * m["depth"] / blocks

    return f, missing, scale


def arm_result(sched, name, m, W, time_ms, tm, corpus_tokens, M):
    comm = sp_model.Comm(m, W)
    steps = sp_model.compose(sched, time_ms, comm)
    res = sp_model.summarise(steps, W, corpus_tokens)
    res["collectives"] = comm.describe()
    fit = None
    pairs, peak, max_share = [], None, 0
    shapes_md = tm["models"][name]["shapes"]
    units = ([lane for step in sched["steps"] for phase in step for lane in phase] if sched["sync"] == "per-rank"
             else [g for step in sched["steps"] for slot in step for g in slot])
    for u in units:
        d = u["d"]
        for mb in (u["micro"] if sched["sync"] == "per-rank" else [u]):
            B, S = mb["B"], mb["S"]
            meas = time_ms(B, S, d) + comm.a2a_ms(B, S, d)
            pairs.append((B * S / d, mb.get("pred"), meas))
            max_share = max(max_share, B * S // d)
            p = (shapes_md.get("%d,%d,%d" % (B, S, d)) or {}).get("peak_mem_bytes")
            if p is not None and (peak is None or p > peak):
                peak = p
    res["pred_vs_measured"] = sp_model.pred_vs_measured(pairs)
    res["memory"] = {"mem_tokens": M, "max_share_tokens": max_share, "max_share_over_mem_tokens": max_share / M,
                     "peak_mem_bytes_timed_blocks": peak, "timed_blocks": tm["models"][name]["blocks"]}
    del fit
    return res, steps


def pred_fill(sched, pcost):
    """Sets each micro-batch's "pred" (the cost model's per-rank ms, a2a included) where the
    schedule has none (the planner's schedules carry their own cost_ms as plan_cost_ms)."""
    if sched["sync"] == "per-rank":
        return
    for step in sched["steps"]:
        for slot in step:
            for g in slot:
                if g.get("pred") is None:
                    g["pred"] = pcost.predict(g["B"], g["S"], g["d"])


def compose_cmd(a):
    work = os.path.abspath(a.work)
    with open(os.path.join(work, "meta.json")) as f:
        meta = json.load(f)
    with open(a.timings) as f:
        tm = json.load(f)
    out = {"meta": meta, "device": tm.get("device"), "torch": tm.get("torch"), "ceilings": tm.get("ceilings"),
           "device_wall_s": tm.get("wall_s"), "budget_cut": tm.get("budget_cut"), "rows": [], "arms": {}}
    fns = {}
    for name in meta["models"]:
        if name not in tm["models"]:
            continue
        m = sp_model.MODELS[name]
        fns[name] = timing_fn(tm, name, m)
        out.setdefault("scale_measured_over_analytic", {})[name] = fns[name][2]
    base = {}
    for key, path in sorted(meta["arms"].items(), key=lambda kv: (kv[0].split("/")[0], int(kv[0].split("/w")[1]),
                                                                     ARMS.index(kv[0].split("/")[1]))):
        name, arm, w = key.split("/")
        W = int(w[1:])
        if name not in fns:
            continue
        with open(path) as f:
            sched = json.load(f)
        m = sp_model.MODELS[name]
        M = meta["models"][name]["mem_tokens"]
        with open(meta["models"][name]["fit_json"]) as f:
            pcost = plan_cost(json.load(f), m, W, meta["models"][name]["blocks"])
        pred_fill(sched, pcost)
        res, steps = arm_result(sched, name, m, W, fns[name][0], tm, meta["corpus"]["total_tokens"], M)
        res.update({"model": name, "arm": arm, "world": W, "name": ARM_NAMES[arm], "policy": sched.get("policy"),
                    "facts": sched.get("facts"), "plan": sched.get("plan"), "command": sched.get("command")})
        if arm == "a":
            base[(name, W)] = res
        b = base.get((name, W))
        res["vs_a"] = res["tokens_per_s"] / b["tokens_per_s"] if b and b["tokens_per_s"] else None
        out["arms"][key] = res
        out["rows"].append({k: res.get(k) for k in ("model", "world", "arm", "name", "tokens_per_s", "vs_a", "bubble",
                                                    "kept_of_corpus", "step_time_cv", "tokens_per_step_mean",
                                                    "collective_share")})
        out["rows"][-1]["pred_median"] = (res["pred_vs_measured"]["all"] or {}).get("median_rel_err")
        out["rows"][-1]["pred_max"] = (res["pred_vs_measured"]["all"] or {}).get("max_rel_err")
        out["rows"][-1]["pred_scaled"] = (res["pred_vs_measured"]["all"] or {}).get("after_one_scale")
        out["rows"][-1]["peak_gb"] = (res["memory"]["peak_mem_bytes_timed_blocks"] or 0) / 1e9
        out["rows"][-1]["max_share_over_mem"] = res["memory"]["max_share_over_mem_tokens"]
    for name, (fn, missing, _) in fns.items():
        out.setdefault("missing_shapes", {})[name] = sorted(missing)
    out["full_replay"] = full_check(tm, meta, fns)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    md = table(out)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    print(md)
    return 0


def full_check(tm, meta, fns):
    """The full replay against the composition of the same steps (compute only: the modelled
    collectives are the same in both)."""
    fr = tm.get("full")
    if not fr or not fr.get("step_ms") or "full" not in meta:
        return None
    key = meta["full"]["arm_key"]
    name = fr["model"]
    m = sp_model.MODELS[name]
    blocks = tm["models"][name]["blocks"]
    with open(meta["arms"][key]) as f:
        sched = json.load(f)
    fn = fns[name][0]
    meas, comp = [], []
    for step, ms in zip(sched["steps"], fr["step_ms"]):
        meas.append(sum(max(x * m["depth"] / blocks for x in slot_ms) for slot_ms in ms))
        comp.append(sum(max(fn(g["B"], g["S"], g["d"]) for g in slot) for slot in step))
    rel = [abs(c - x) / x for c, x in zip(comp, meas)]
    return {"arm_key": key, "steps": len(meas), "measured_total_ms": sum(meas), "composed_total_ms": sum(comp),
            "total_rel_err": abs(sum(comp) - sum(meas)) / sum(meas), "step_median_rel_err": statistics.median(rel),
            "step_max_rel_err": max(rel), "within_2pct_total": abs(sum(comp) - sum(meas)) / sum(meas) <= 0.02}


def _p(x):
    return "-" if x is None else "%.1f%%" % (100 * x)


def table(out):
    lines = ["| model | W | arm | tokens/s | vs (a) | bubble | tokens kept | step-time CV | tokens/step | "
             "collectives | pred. err median / max | max share / M_mem | peak mem (timed blocks) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["rows"]:
        lines.append("| %s | %d | %s %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %.2f | %.1f GB |" % (
            r["model"], r["world"], r["arm"], r["name"], "-" if r["tokens_per_s"] is None else "{:,.0f}".format(
                r["tokens_per_s"]), "-" if r["vs_a"] is None else "%.3fx" % r["vs_a"], _p(r["bubble"]),
            _p(r["kept_of_corpus"]), _p(r["step_time_cv"]), "{:,.0f}".format(r["tokens_per_step_mean"] or 0),
            _p(r["collective_share"]), _p(r["pred_median"]), _p(r["pred_max"]), r["max_share_over_mem"],
            r["peak_gb"]))
    fr = out.get("full_replay")
    if fr:
        lines.append("\nFull replay %s, %d steps: composed %.0f ms vs measured %.0f ms (total error %s; per step "
                     "median %s, max %s)." % (fr["arm_key"], fr["steps"], fr["composed_total_ms"],
                                              fr["measured_total_ms"], _p(fr["total_rel_err"]),
                                              _p(fr["step_median_rel_err"]), _p(fr["step_max_rel_err"])))
    for k, why in (out["meta"].get("skipped") or {}).items():
        lines.append("\nNot run: %s (%s)." % (k, why))
    return "\n".join(lines) + "\n"


def ceilings(results):
    """What a lock-step plan could gain over arm (a) at most, per (model, W), from a composed
    results.json: a's tokens/s with its bubble removed sets what balancing alone can buy
    (1 / (1 - bubble_a)); the degree saving is c's bubble-free tokens/s over a's, what c's
    per-micro-batch degrees buy per token over the whole epoch (the same samples in both);
    the ceiling is c with no bubble at all over (a)."""
    arms = results["arms"]
    rows = []
    for key in sorted(arms, key=lambda k: (k.split("/")[0], int(k.split("/w")[1]))):
        name, arm, w = key.split("/")
        if arm != "a" or "%s/c/%s" % (name, w) not in arms:
            continue
        a, c = arms[key], arms["%s/c/%s" % (name, w)]
        free_a = a["tokens_per_s"] / (1.0 - a["bubble"])
        free_c = c["tokens_per_s"] / (1.0 - c["bubble"])
        rows.append({"model": name, "world": int(w[1:]), "bubble_a": a["bubble"],
                     "balance_only": 1.0 / (1.0 - a["bubble"]), "degree_saving": free_c / free_a,
                     "ceiling": free_c / a["tokens_per_s"], "c_vs_a": c["tokens_per_s"] / a["tokens_per_s"]})
    return rows


def ceiling_cmd(a):
    with open(a.results) as f:
        rows = ceilings(json.load(f))
    print("| model | W | bubble of (a) | balancing alone, 1 / (1 - bubble) | degree saving per token | "
          "ceiling over (a) | c over (a) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| %s | %d | %s | %.3fx | %+.2f%% | %.3fx | %.3fx |" % (
            r["model"], r["world"], _p(r["bubble_a"]), r["balance_only"], 100 * (r["degree_saving"] - 1),
            r["ceiling"], r["c_vs_a"]))
    return 0


def fake_timings(a):
    """timings.json made from the analytic estimate (x (1 + noise)) of every job shape and a
    full replay equal to the table: what compose needs, for the CPU smoke test."""
    import random

    with open(os.path.join(os.path.abspath(a.work), "job", "job.json")) as f:
        job = json.load(f)
    rng = random.Random(0)
    tm = {"device": "fake (analytic)", "torch": None, "ceilings": None, "models": {}, "wall_s": 0.0,
          "budget_cut": False}
    for name, m in job["models"].items():
        tm["models"][name] = {"blocks": m["blocks"], "missing": [], "shapes": {
            "%d,%d,%d" % (B, S, d): {"ms": est * (1 + a.noise * (2 * rng.random() - 1)), "runs": [],
                                     "peak_mem_bytes": 1000 * B * S // d} for B, S, d, est, _ in m["shapes"]}}
    fr = job.get("full")
    if fr:
        sh = tm["models"][fr["model"]]["shapes"]
        tm["full"] = {"model": fr["model"], "step_ms": [[[sh["%d,%d,%d" % tuple(g)]["ms"] for g in slot]
                                                         for slot in step] for step in fr["steps"]]}
    with open(a.out, "w") as f:
        json.dump(tm, f)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--work", required=True)
    p.add_argument("--bin")
    p.add_argument("--lib")
    p.add_argument("--samples", type=int, default=120000)
    p.add_argument("--worlds", default="8,16,64")
    p.add_argument("--micro-per-step", type=int, default=4)
    p.add_argument("--models", default="14b,1.3b")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--full", default="1.3b:c", help="MODEL:ARM of the full replay (c falls back to a', a)")
    p.add_argument("--full-steps", type=int, default=30)
    p.add_argument("--smoke", action="store_true", help="2,000 samples, M_mem / 8")
    p.add_argument("--no-grid", action="store_true", help="time only the plans' shapes (no refit grid)")
    p.add_argument("--bench-extra", help="timings.json of an earlier replay: its shapes join the shipped "
                   "benchmark the cost model is fitted to")
    c = sub.add_parser("compose")
    c.add_argument("--work", required=True)
    c.add_argument("--timings", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--md")
    t = sub.add_parser("fake-timings", help="timings.json from the analytic estimate (CPU smoke test)")
    t.add_argument("--work", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--noise", type=float, default=0.05)
    e = sub.add_parser("ceiling", help="the most a lock-step plan can gain over (a), from compose's results.json")
    e.add_argument("--results", required=True)
    a = ap.parse_args(argv)
    return {"prepare": prepare, "compose": compose_cmd, "fake-timings": fake_timings, "ceiling": ceiling_cmd}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
