#!/usr/bin/env python3
"""The measured cost model against measured share times: for every (B, S, d) of a
timings.json (dev/e2e/sp_replay.py) the fitted model's prediction of one rank's compute
(the timed blocks, no all-to-all: the device times compute only) against the measurement,
median and max relative error overall, by degree and by band of per-rank tokens (B S / d,
sp_model.size_band).

    dev/e2e/sp_cost_check.py --fit FIT.json --timings timings.json --model 14b [--json OUT]

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
    ap.add_argument("--fit", required=True)
    ap.add_argument("--timings", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    with open(a.fit) as f:
        fit = json.load(f)
    with open(a.timings) as f:
        tm = json.load(f)
    res = errors(sp_model.PlanCost.from_fit_json(fit), rows_of(tm, a.model))
    print(text(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
