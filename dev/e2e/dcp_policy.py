#!/usr/bin/env python3
"""A DCP-like planner (VideoSys's Data-Centric Parallel, inter-iteration variant with
automatic gradient accumulation), from the same corpus, bucket rule and cost model as the
planner's arms, producing a per-rank schedule (dev/e2e/sp_model.py) for the replay.

    dev/e2e/dcp_policy.py --corpus DIR/corpus.json --world 8 --mem-tokens 32768 --sp-degrees 1,2,4,8 \
        --cost-fit fit.json --model 14b --micro-per-step 4 -o dcp-w8.json

What is kept from VideoSys (NUS-HPC-AI-Lab/VideoSys, videosys/training/datasets/open_sora/
sampler.py, VariableVideoBatchSampler._build_local_bucket_id_access_order_acc and
_calculate_grad_accumulation_num; videosys/core/dcp/profiler.py):
  * per bucket a fixed SP size and a maximum batch size from a profile (here: the smallest
    allowed degree holding S tokens per rank share, B = max(1, floor(d M_mem / S)), and the
    execution time from the cost model at that B: the profiler's memory-bounded choice);
  * each iteration fills the W ranks with SP groups: an SP size is drawn among those that
    still fit the ranks left, weighted by the number of buckets of each size; a bucket of
    that size is drawn uniformly; its next max-batch of samples is the group's first
    micro-batch; groups are laid out largest SP size first (so groups are aligned);
  * gradient-accumulation counts per group by the same search: candidate reference times
    (each group's time times 1..), per group the count whose time is closest to it, with
    over-shooting weighted 1.2, counts at most max_grad_accumulation_steps x the slowest
    group's time; each group then takes that many micro-batches from its bucket (fewer when
    it runs out);
  * no lock-step: groups run their micro-batches independently and meet once per step
    (gradient reduce-scatter / all-gather: ZeRO-2-like, as VideoSys's Open-Sora training),
    so the step time is the slowest group's sum (sync "per-rank");
  * an iteration that cannot fill the ranks (only SP sizes larger than the ranks left) is
    dropped with its samples, as VideoSys does.
What differs: the profile is the cost model (al_cost_predict_sp, dev/e2e/sp_model.PlanCost)
rather than a measured profiler run. DCP's global batch is its own (about W M_mem x the mean
accumulation count, varying per step); --merge (arm "dcp-T") joins consecutive iterations
into optimizer steps of about the other arms' T = W K M_mem tokens, each iteration a phase
that starts when the previous one has ended on every rank (its groups re-form).
Buckets: dev/e2e/sp_buckets.py, the planner arms' table, each sample placed by the library's own rule.
"""

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sp_buckets  # noqa: E402
import sp_model  # noqa: E402


def _score(t, ref):
    return (t - ref) * 1.2 if t > ref else (ref - t)


def grad_accumulation_counts(exec_times, max_gas):
    """VideoSys's _calculate_grad_accumulation_num: per group a count g >= 1 so that the
    groups' g x time are closest to one reference time (over-shoot weighted 1.2), searched
    over references t_j x m <= max(time) x max_gas. Same result, with the per-group
    minimum taken from the two counts around ref / t (the score is piecewise linear)."""
    max_time = max(exec_times) * max_gas
    uniq = sorted(set(exec_times))
    best_total, best = float("inf"), None
    # VideoSys's order (the groups' own times, first best kept); a repeated time gives the
    # same totals again, so each distinct time is tried once, in first-appearance order.
    for e_out in dict.fromkeys(exec_times):
        mult = 1
        while e_out * mult <= max_time:
            ref = e_out * mult
            gas_for = {}
            for e in uniq:
                gmax = max(1, int(max_time / e))
                g0 = min(gmax, max(1, int(ref // e)))
                g1 = min(gmax, g0 + 1)
                gas_for[e] = g0 if _score(e * g0, ref) <= _score(e * g1, ref) else g1
            total = sum(_score(e * gas_for[e], ref) for e in exec_times)
            if total < best_total:
                best_total, best = total, [gas_for[e] for e in exec_times]
            mult += 1
    return best


def plan(shapes, native, world, mem_tokens, degrees, cost, max_gas, seed=0, epoch=0, lib=None):
    """The per-rank schedule (sp_model's format) and its facts; lib: libadaptiveload.so, whose
    bucket rule places the samples (sp_buckets.assign)."""
    buckets, bstats = sp_buckets.assign(shapes, mem_tokens, degrees, lib)
    rng = random.Random(seed * 1000003 + epoch)
    info = {}
    sp_map = {}
    for key in sorted(buckets):
        S = sp_model.tokens(*key)
        d = sp_buckets.degree_for(S, mem_tokens, degrees)
        bs = max(1, (d * mem_tokens) // S)
        rng.shuffle(buckets[key])
        info[key] = {"S": S, "d": d, "bs": bs, "exec": cost.predict(bs, S, d), "next": 0}
        sp_map.setdefault(d, []).append(key)
    steps, dropped = [], 0

    def take(key, n):
        b = info[key]
        idx = buckets[key][b["next"]:b["next"] + n]
        b["next"] += len(idx)
        if b["next"] >= len(buckets[key]):
            lst = sp_map[b["d"]]
            lst.remove(key)
            if not lst:
                del sp_map[b["d"]]
        return idx

    def micro(key, idx):
        b = info[key]
        return {"B": len(idx), "S": b["S"], "real": len(idx) * b["S"], "native": sum(native[i] for i in idx),
                "pred": cost.predict(len(idx), b["S"], b["d"])}

    while sp_map:
        remain, lanes, full = world, [], True
        while remain > 0:
            fit = sorted(d for d in sp_map if d <= remain)
            if not fit:
                full = False
                break
            x = rng.random() * sum(len(sp_map[d]) for d in fit)
            d = fit[-1]
            for c in fit:
                if x < len(sp_map[c]):
                    d = c
                    break
                x -= len(sp_map[c])
            key = sp_map[d][rng.randrange(len(sp_map[d]))]
            lanes.append((key, [take(key, info[key]["bs"])]))
            remain -= d
        if not full:
            dropped += sum(len(i) for _, ii in lanes for i in ii)
            continue
        lanes.sort(key=lambda x: -info[x[0]]["d"])
        gas = grad_accumulation_counts([info[k]["exec"] for k, _ in lanes], max_gas)
        step, rank = [], 0
        for (key, ii), g in zip(lanes, gas):
            for _ in range(g - 1):
                b = info[key]
                if b["next"] >= len(buckets[key]):
                    break
                ii.append(take(key, b["bs"]))
            step.append({"d": info[key]["d"], "rank": rank, "micro": [micro(key, i) for i in ii]})
            rank += info[key]["d"]
        steps.append([step])
    sched = {"sync": "per-rank", "world": world, "policy": "dcp-like", "max_gas": max_gas, "steps": steps}
    facts = dict(bstats)
    facts.update({"dropped_samples": dropped, "buckets": len(buckets),
                  "bucket_degrees": {str(d): len(v) for d, v in sorted(
                      ((d, [k for k in info if info[k]["d"] == d]) for d in degrees))}})
    return sched, facts


def step_tokens(sched):
    toks = [sum(mb["real"] for phase in step for lane in phase for mb in lane["micro"]) for step in sched["steps"]]
    return sum(toks) / len(toks) if toks else 0.0


def merge_to_T(sched, T):
    """Consecutive DCP iterations merged into optimizer steps of about T tokens (an
    iteration joins the step while that brings its tokens closer to T); each iteration stays
    a phase (sp_model's format)."""
    steps, cur, tok = [], [], 0
    for it in sched["steps"]:
        t = sum(mb["real"] for phase in it for lane in phase for mb in lane["micro"])
        if cur and abs(tok + t - T) > abs(tok - T):
            steps.append(cur)
            cur, tok = [], 0
        cur.extend(it)
        tok += t
    if cur:
        steps.append(cur)
    out = dict(sched, steps=steps, merged_to_step_tokens=T)
    return out


def plan_arms(shapes, native, world, mem_tokens, degrees, cost, K, seed=0, epoch=0, max_gas=2, T=None, lib=None):
    """(natural, merged, facts): the DCP-like plan at its own global batch (one iteration per
    step, max_grad_accumulation_steps = max_gas, VideoSys's default 2) and the same
    iterations merged to about T tokens per step (default world K mem_tokens)."""
    T = T or world * K * mem_tokens
    s, f = plan(shapes, native, world, mem_tokens, degrees, cost, max_gas, seed, epoch, lib)
    f["target_step_tokens"] = T
    f["natural_mean_step_tokens"] = step_tokens(s)
    m = merge_to_T(s, T)
    f["merged_mean_step_tokens"] = step_tokens(m)
    return s, m, f


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="corpus.json of dev/e2e/sp_corpus.py")
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--mem-tokens", type=int, required=True)
    ap.add_argument("--sp-degrees", default="1,2,4,8")
    ap.add_argument("--micro-per-step", type=int, default=4, help="K of the other arms (sets T)")
    ap.add_argument("--cost-fit", required=True, help="`adaptiveload fit --json` output of the cost model")
    ap.add_argument("--model", default="14b", choices=sorted(sp_model.MODELS))
    ap.add_argument("--max-gas", type=int, default=2, help="max_grad_accumulation_steps (VideoSys's default: 2)")
    ap.add_argument("--merge", action="store_true", help="iterations merged to about T tokens per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--link-gbps", type=float, default=450.0)
    ap.add_argument("--bench-blocks", type=int, default=1, help="blocks the fitted benchmark timed (the fit "
                    "is scaled to the model's depth)")
    ap.add_argument("--lib", default=None, help="libadaptiveload.so (default: $ADAPTIVELOAD_LIB, bazel-bin's)")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args(argv)
    degrees = [int(x) for x in a.sp_degrees.split(",")]
    for d in degrees:
        if d < 1 or d & (d - 1) or a.world % d:
            ap.error("--sp-degrees: %d is not a power of two dividing --world %d" % (d, a.world))
    with open(a.corpus) as f:
        corpus = json.load(f)
    with open(a.cost_fit) as f:
        fit = json.load(f)
    m = sp_model.MODELS[a.model]
    comm = sp_model.Comm(m, a.world, link_gbps=a.link_gbps)
    cost = sp_model.PlanCost.from_fit_json(fit, comm, scale=m["depth"] / a.bench_blocks)
    nat, merged, facts = plan_arms(corpus["samples"], corpus["tokens"], a.world, a.mem_tokens, degrees, cost,
                                   a.micro_per_step, a.seed, max_gas=a.max_gas, lib=a.lib)
    sched = merged if a.merge else nat
    sp_model.check_schedule(sched)
    sched["facts"] = facts
    with open(a.out, "w") as f:
        json.dump(sched, f)
    print(json.dumps(dict(facts, steps=len(sched["steps"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
