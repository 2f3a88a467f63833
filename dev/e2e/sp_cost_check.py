#!/usr/bin/env python3
"""The measured cost model against measured share times: for every (B, S, d) of a
timings.json (dev/e2e/sp_replay.py) the fitted model's prediction of one rank's compute
(the timed blocks, no all-to-all: the device times compute only) against the measurement,
median and max relative error overall, by degree and by band of per-rank tokens (B S / d,
sp_model.size_band).

    dev/e2e/sp_cost_check.py --fit FIT.json --timings timings.json --model 14b [--job job.json] [--json OUT]
    dev/e2e/sp_cost_check.py --timings timings.json --model 14b --base BENCH.csv --write-bench OUT.csv

--job: the job.json the timings came from (sp_arms.py prepare); the shapes the plans use
(count > 0) and the grid added for the refit (count 0) are then reported apart as well.

--write-bench: BENCH.csv (a shape benchmark of examples/shape_bench.py, metadata line kept)
followed by the timed shapes as rows B,S,d,step_ms,peak_mem_bytes: a benchmark that also holds
the shapes a plan uses, for `adaptiveload fit --bench OUT.csv`.

FIT.json: `adaptiveload fit --bench ... --json` of a benchmark of the same timed blocks
(examples/shape_bench.py and sp_replay.py both time `layers` = `blocks` blocks).
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sp_model  # noqa: E402


def rows_of(timings, model):
    """[(B, S, d, ms)] of one model's timed shapes."""
    md = timings["models"][model]
    return [tuple(int(x) for x in k.split(",")) + (v["ms"],) for k, v in sorted(md["shapes"].items())]


def write_bench(base, timings, model, out):
    """BENCH.csv's lines, then the timed shapes of ``model`` as rows; returns the rows added."""
    with open(base) as f:
        lines = [x.rstrip("\n") for x in f if x.strip()]
    header = next(x for x in lines if not x.startswith("#")).split(",")
    if header != ["B", "S", "d", "step_ms", "peak_mem_bytes"]:
        raise SystemExit("%s: header %s, expected B,S,d,step_ms,peak_mem_bytes" % (base, ",".join(header)))
    md = timings["models"][model]
    added = 0
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
        for k, v in sorted(md["shapes"].items()):
            if v.get("peak_mem_bytes") is None:
                continue
            f.write("%s,%.6f,%d\n" % (k, v["ms"], v["peak_mem_bytes"]))
            added += 1
    return added


def errors(cost, rows):
    """{"all", "by_degree", "by_band"}: n, median and max relative error of cost.compute."""
    def stats(rs):
        rel = sorted(abs(cost.compute(B, S, d) - ms) / ms for B, S, d, ms in rs if ms > 0)
        if not rel:
            return None
        worst = max(rs, key=lambda r: abs(cost.compute(*r[:3]) - r[3]) / r[3])
        return {"n": len(rel), "median_rel_err": statistics.median(rel), "max_rel_err": rel[-1],
                "worst": {"B": worst[0], "S": worst[1], "d": worst[2], "ms": worst[3],
                          "pred_ms": cost.compute(*worst[:3])}}
    by_d, by_band = {}, {}
    for r in rows:
        by_d.setdefault(r[2], []).append(r)
        by_band.setdefault(sp_model.size_band(r[0] * r[1] / r[2]), []).append(r)
    return {"all": stats(rows), "by_degree": {str(k): stats(v) for k, v in sorted(by_d.items())},
            "by_band": {k: stats(v) for k, v in sorted(by_band.items())}}


def text(res):
    def line(name, s):
        return "%-10s n %3d  median %5.1f%%  max %5.1f%%  (worst B %d S %d d %d: %.1f ms, predicted %.1f)" % (
            name, s["n"], 100 * s["median_rel_err"], 100 * s["max_rel_err"], s["worst"]["B"], s["worst"]["S"],
            s["worst"]["d"], s["worst"]["ms"], s["worst"]["pred_ms"])
    out = [line("all", res["all"])]
    out += [line("d=" + k, v) for k, v in res["by_degree"].items() if v]
    out += [line(k, v) for k, v in res["by_band"].items() if v]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fit")
    ap.add_argument("--timings", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--json")
    ap.add_argument("--job", help="job.json of the timings: plan shapes and grid shapes apart")
    ap.add_argument("--base", help="with --write-bench: the shape benchmark the rows are added to")
    ap.add_argument("--write-bench")
    a = ap.parse_args(argv)
    if a.write_bench:
        if not a.base:
            ap.error("--write-bench needs --base")
        with open(a.timings) as f:
            n = write_bench(a.base, json.load(f), a.model, a.write_bench)
        print("%s: %s + %d timed shapes" % (a.write_bench, a.base, n))
        return 0
    if not a.fit:
        ap.error("--fit or --write-bench")
    with open(a.fit) as f:
        fit = json.load(f)
    with open(a.timings) as f:
        tm = json.load(f)
    cost, rows = sp_model.PlanCost.from_fit_json(fit), rows_of(tm, a.model)
    res = errors(cost, rows)
    print(text(res))
    if a.job:
        with open(a.job) as f:
            count = {tuple(r[:3]): r[4] for r in json.load(f)["models"][a.model]["shapes"]}
        for name, keep in (("plan", lambda n: n > 0), ("grid", lambda n: n == 0)):
            sel = [r for r in rows if keep(count.get(r[:3], 0))]
            if sel:
                res[name] = errors(cost, sel)
                print("-- %s shapes (%s)" % (name, "the plans use them" if name == "plan" else "refit grid only"))
                print(text(res[name]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
