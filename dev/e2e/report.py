#!/usr/bin/env python3
"""Markdown tables of an arm set's results, for BENCHMARKS.md.

    dev/e2e/report.py OUT/summary.json [--real OUT2/real-wN.json] [--setup OUT/setup.json]

Prints, per W and arm: tokens/s and the ratio to equal-token, tokens per step, step-time CV,
compute-imbalance CV, bubble, predicted-vs-measured micro-batch time (median / max relative
error), Pearson R of micro-batch time with tokens and with B x S^2, peak memory against the
benchmark's prediction at M_mem, the last loss; then the fused AdaLN pair, the refit, the
skipped arms and (with --real) real against replayed step times at W = N.
"""

import argparse
import json


def _pct(x):
    return "-" if x is None else "%.1f %%" % (100 * x)


def _num(x, fmt="%.3g"):
    return "-" if x is None else fmt % x


def _gb(x):
    return "-" if x is None else "%.1f GB" % (x / 1e9)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("summary", nargs="?", help="summary.json of dev/e2e/run_arms.py (a --real-world run has none)")
    ap.add_argument("--real", "--two-gpu", dest="real",
                    help="real-wN.json of run_arms.py --real-world N (--two-gpu)")
    ap.add_argument("--setup", help="setup.json (device, torch, corpus)")
    args = ap.parse_args(argv)
    if not args.summary and not args.real:
        ap.error("give summary.json, --real real-wN.json, or both")
    s = {}
    if args.summary:
        with open(args.summary) as f:
            s = json.load(f)
    if args.setup:
        with open(args.setup) as f:
            st = json.load(f)
        c = st.get("corpus", {})
        print("Device %s, torch %s; corpus %s samples (%s), %.2f GB of members; cost model of arms a-c: %s.\n"
              % (st.get("device_name"), st.get("torch"), c.get("samples"), c.get("profile"),
                 (c.get("payload_bytes") or 0) / 1e9, st.get("cost_model_arms_a_c")))
    if s.get("rows"):
        print("| W | arm | tokens/s | vs equal-token | tokens/step (vs e.-t.) | step-time CV | imbalance CV | bubble | "
              "pred. err median / max | R tokens | R B·S² | peak mem (bench pred. at M_mem) | last loss |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in s.get("rows", []):
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s (%s) | %s |" % (
            r.get("W"), r.get("arm"), _num(r.get("tokens_per_s"), "%.0f"),
            _num(r.get("vs_equal_token"), "%.3fx"),
            "%s (%s)" % (_num(r.get("tokens_per_step"), "%.0f"),
                         _num(r.get("tokens_per_step_vs_equal_token"), "%.2fx")),
            _pct(r.get("step_time_cv")), _pct(r.get("compute_imbalance_cv")), _pct(r.get("bubble")),
            _pct(r.get("pred_median_rel_err")), _pct(r.get("pred_max_rel_err")), _num(r.get("pearson_tokens"), "%.2f"),
            _num(r.get("pearson_sum_s2"), "%.2f"), _gb(r.get("peak_mem_bytes")),
            _gb(r.get("bench_predicted_peak_bytes")),
            _num(r.get("loss_last"), "%.4f")))
    for name, why in (s.get("skipped_arms") or {}).items():
        print("\nArm %s not run: %s." % (name, why))
    a = s.get("adaln")
    if a:
        if "skipped" in a:
            print("\nFused AdaLN pair: skipped (%s)." % a["skipped"])
        else:
            print("\nFused AdaLN (arm ours, W = %s, %s steps): %s tokens/s fused, %s with PyTorch LayerNorm + modulate "
                  "(%.3fx); the fused kernel saves %s of the PyTorch run's compute time."
                  % (a.get("world"), a.get("steps"), _num(a.get("tokens_per_s_fused"), "%.0f"),
                     _num(a.get("tokens_per_s_pytorch"), "%.0f"), a.get("speedup") or 0,
                     _pct(a.get("share_of_pytorch_compute_saved"))))
    rf = s.get("refit")
    if rf and rf.get("refused"):
        print("\nRefit (arm ours-refit) from %s: refused (%s); arm ours-refit was planned with arm ours' model."
              % (rf.get("source", "arm c's trace"), rf["refused"].splitlines()[-1][-200:]))
    elif rf:
        f = rf.get("fit", {})
        print("\nRefit (arm ours-refit) from %s: %s %s, held-out median error %s, max %s%s."
              % (rf.get("source", "arm c's trace"), f.get("family"), json.dumps(f.get("params")),
                 _pct(f.get("median_rel_err")), _pct(f.get("max_rel_err")),
                 (" (family fallback: %s refused)" % rf["family_fallback"]["refused"])
                 if rf.get("family_fallback") else ""))
    if args.real:
        with open(args.real) as f:
            t = json.load(f)
        W = t.get("world", 2)
        modes = t.get("parallel", ["ddp"])
        print("\n| arm (W = %s) | real tokens/s | replay tokens/s | real step ms (CV) | replay step ms (CV) | "
              "real / replay step | gain real | gain replay | difference |" % W)
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, r in t.get("arms", {}).items():
            print("| %s | %s | %s | %s (%s) | %s (%s) | %s | %s | %s | %s |" % (
                name, _num(r["real"].get("tokens_per_s"), "%.0f"), _num(r["replay"].get("tokens_per_s"), "%.0f"),
                _num(r["real"].get("step_ms_mean"), "%.1f"), _pct(r["real"].get("step_time_cv")),
                _num(r["replay"].get("step_ms_mean"), "%.1f"), _pct(r["replay"].get("step_time_cv")),
                _num(r.get("real_over_replay_step_ms"), "%.3f"),
                _num(r.get("gain_real"), "%.3fx"), _num(r.get("gain_replay"), "%.3fx"),
                _num(r.get("gain_diff_points"), "%.1f points")))
        for name, r in t.get("arms", {}).items():
            for m in modes[1:]:
                o = r.get("real_" + m) or {}
                print("\nArm %s under %s: %s tokens/s (%s of %s), step %s ms; loss max relative difference from "
                      "%s's %s." % (name, m, _num(o.get("tokens_per_s"), "%.0f"),
                                    _num(r.get("real_%s_over_%s_tokens_per_s" % (m, modes[0])), "%.3fx"), modes[0],
                                    _num(o.get("step_ms_mean"), "%.1f"), modes[0],
                                    _num(r.get("real_%s_loss_max_rel_diff" % m), "%.2g")))
        for e in t.get("errors", []):
            print("\nArm %s failed: %s" % (e.get("arm"), e.get("error", "")[:300]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
