#!/usr/bin/env python3
"""Predicted step figures of a plan from `adaptiveload inspect PLAN --jsonl` (stdin or files).

    adaptiveload inspect plan.alm --jsonl | python3 dev/plan_step_cv.py
    python3 dev/plan_step_cv.py a.jsonl b.jsonl

Per plan: steps, the step-time CV over steps (a step's predicted time is its slowest rank's
cost sum, as in the replay of dev/e2e), the mean over steps of the ranks' cost CV (imbalance),
the bubble (1 - sum of mean rank cost / sum of max), predicted real tokens/s, and the CV of
real tokens per step. Population CVs, like the planner's summary. Not a test."""
import json
import statistics as st
import sys
from collections import defaultdict


def figures(lines):
    rank = defaultdict(float)
    tokens = defaultdict(int)
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        rank[(r["step"], r["rank"])] += r["cost_ms"]
        pad = set(r.get("padded") or [])
        tokens[r["step"]] += sum(t for i, t in enumerate(r["tokens"]) if i not in pad)
    steps = sorted({s for s, _ in rank})
    W = 1 + max(r for _, r in rank)
    mx = [max(rank[(s, r)] for r in range(W)) for s in steps]
    mean = [sum(rank[(s, r)] for r in range(W)) / W for s in steps]
    imb = st.mean(st.pstdev([rank[(s, r)] for r in range(W)]) / mean[i] for i, s in enumerate(steps))
    tok = [tokens[s] for s in steps]
    return {"steps": len(steps), "world": W, "step_time_cv": round(st.pstdev(mx) / st.mean(mx), 4),
            "imbalance_cv": round(imb, 4), "bubble": round(1 - sum(mean) / sum(mx), 4),
            "tokens_per_s": round(sum(tok) / sum(mx) * 1000), "step_tokens_cv": round(st.pstdev(tok) / st.mean(tok), 4)}


def main():
    if len(sys.argv) == 1:
        print(json.dumps(figures(sys.stdin)))
    for path in sys.argv[1:]:
        with open(path) as f:
            print(json.dumps(dict(figures(f), plan=path)))


if __name__ == "__main__":
    main()
