#!/usr/bin/env python3
"""CPU checks of the SP replay (dev/e2e/sp_*.py, dcp_policy.py): the
composition arithmetic, the schedule checks, the DCP-like planner's accumulation search
against a brute-force search and its sample accounting, the share block's layout, the device
runner in smoke mode, prepare -> fake timings -> compose end to end through the real CLI on
a 2,000-sample corpus, and the two-GPU harness (sp_two_gpu.py: job, SP=2 check, the arms
trained, collectives, report) on two gloo ranks. Run by dev/e2e/sp_replay_smoke_test.sh (bazel:
//dev/e2e:sp_replay_smoke_test); standalone: `python3 dev/e2e/sp_replay_test.py` with
ADAPTIVELOAD_BIN and ADAPTIVELOAD_LIB set (or a checkout's bazel-bin)."""

import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dcp_policy  # noqa: E402
import sp_buckets  # noqa: E402
import sp_corpus  # noqa: E402
import sp_model  # noqa: E402


def brute_force_counts(times, max_gas):
    """Every reference t_j x m <= max(t) x max_gas; per group every count 1..floor(max/t_i);
    the first best total kept (the search dcp_policy.grad_accumulation_counts shortcuts)."""
    cap = max(times) * max_gas

    def score(t, ref):
        return (t - ref) * 1.2 if t > ref else ref - t

    best, best_counts = float("inf"), None
    for t_out in times:
        for mult in range(1, int(cap / t_out) + 1):
            ref = t_out * mult
            if ref > cap:
                break
            counts, total = [], 0.0
            for t in times:
                g_best, s_best = None, float("inf")
                for g in range(1, int(cap / t) + 1):
                    if t * g > cap:
                        break
                    if score(t * g, ref) < s_best:
                        g_best, s_best = g, score(t * g, ref)
                counts.append(g_best)
                total += s_best
            if total < best:
                best, best_counts = total, counts
    return best_counts


class Composition(unittest.TestCase):
    def test_lockstep_is_sum_of_slot_maxima(self):
        m = sp_model.MODELS["1.3b"]
        comm = sp_model.Comm(m, 4)
        sched = {"sync": "micro", "world": 4, "steps": [[
            [{"d": 1, "rank": r, "B": 1, "S": 100 * (r + 1), "real": 100, "native": 100} for r in range(4)],
            [{"d": 2, "rank": 0, "B": 1, "S": 400, "real": 400, "native": 400},
             {"d": 2, "rank": 2, "B": 1, "S": 200, "real": 200, "native": 400}]]]}
        sp_model.check_schedule(sched)
        steps = sp_model.compose(sched, lambda B, S, d: S / d, comm)
        a2a = comm.a2a_ms(1, 400, 2)
        self.assertAlmostEqual(steps[0]["work_ms"], 400 + 200 + a2a)
        self.assertAlmostEqual(steps[0]["coll_ms"], comm.lockstep_step_ms(2))
        busy = [100 + 200 + a2a, 200 + 200 + a2a, 300 + 100 + comm.a2a_ms(1, 200, 2), 400 + 100 +
                comm.a2a_ms(1, 200, 2)]
        self.assertEqual([round(x, 9) for x in steps[0]["rank_busy_ms"]], [round(x, 9) for x in busy])
        s = sp_model.summarise(steps, 4)
        self.assertAlmostEqual(s["bubble"], 1 - sum(busy) / (4 * steps[0]["work_ms"]))
        self.assertAlmostEqual(s["kept_of_planned"], 1000 / 1200)

    def test_per_rank_is_max_of_lane_sums_per_phase(self):
        comm = sp_model.Comm(sp_model.MODELS["1.3b"], 2)
        mb = lambda S: {"B": 1, "S": S, "real": S, "native": S}  # noqa: E731
        sched = {"sync": "per-rank", "world": 2, "steps": [[
            [{"d": 1, "rank": 0, "micro": [mb(10), mb(10), mb(10)]}, {"d": 1, "rank": 1, "micro": [mb(25)]}],
            [{"d": 2, "rank": 0, "micro": [mb(40)]}]]]}
        sp_model.check_schedule(sched)
        steps = sp_model.compose(sched, lambda B, S, d: float(S), comm)
        self.assertAlmostEqual(steps[0]["work_ms"], 30 + 40 + comm.a2a_ms(1, 40, 2))
        self.assertAlmostEqual(steps[0]["coll_ms"], comm.zero_step_ms())

    def test_check_schedule_refuses_misaligned_and_uncovered(self):
        g = lambda d, r: {"d": d, "rank": r, "B": 1, "S": 1, "real": 1, "native": 1}  # noqa: E731
        with self.assertRaisesRegex(ValueError, "not aligned"):
            sp_model.check_schedule({"sync": "micro", "world": 4, "steps": [[[g(2, 1), g(1, 0), g(1, 3)]]]})
        with self.assertRaisesRegex(ValueError, "exactly once"):
            sp_model.check_schedule({"sync": "micro", "world": 4, "steps": [[[g(2, 0), g(1, 2)]]]})

    def test_cost_mirror_at_degree_one_has_no_a2a(self):
        c = sp_model.PlanCost("poly2", {"a": 2.0, "b": 0.5, "c": 1e-3}, sp_model.Comm(sp_model.MODELS["14b"], 8))
        self.assertAlmostEqual(c.predict(2, 100, 1), 2.0 + 2 * (50 + 10))
        self.assertGreater(c.predict(2, 100, 4), 2.0 + 2 * 60 / 4)

    def test_floor_fit_per_degree_and_depth_scale(self):
        fit = {"fit": {"family": "floor", "params": {"a": 1.0, "b": 0.01, "c": 0.0, "s": 0.5, "F": 3.0, "k": 8}},
               "sp": {"fits": [{"d": 2, "fit": {"family": "floor", "params": {
                   "a": 0.0, "b": 0.02, "c": 0.0, "s": 2.0, "F": 1.0, "k": 8}}}]}}
        c = sp_model.PlanCost.from_fit_json(fit, scale=10.0)
        work = 1.0 + 0.5 * 4 + 0.01 * 4 * 1000
        self.assertAlmostEqual(c.compute(4, 1000, 1), 10.0 * (3.0 ** 8 + work ** 8) ** 0.125)
        self.assertAlmostEqual(c.compute(1, 1, 1), 10.0 * (3.0 ** 8 + 1.51 ** 8) ** 0.125)  # near the floor
        # d = 4 has no fit of its own: the largest fitted degree below (2), evaluated at 4; the
        # per-sample term is not divided by d
        work4 = 2.0 * 4 + 0.02 * 4 * 1000 / 4
        self.assertAlmostEqual(c.compute(4, 1000, 4), 10.0 * (1.0 + work4 ** 8) ** 0.125)
        self.assertIsNone(sp_model.PlanCost.from_fit_json(fit).comm)

    def test_cost_check_scores_by_band(self):
        import sp_cost_check

        c = sp_model.PlanCost("poly2", [0.0, 1.0, 0.0])
        rows = [(1, 1000, 1, 1000.0), (1, 1000, 2, 400.0), (10, 20000, 2, 100000.0)]
        r = sp_cost_check.errors(c, rows)
        self.assertEqual(r["all"]["n"], 3)
        self.assertAlmostEqual(r["all"]["max_rel_err"], 0.25)
        self.assertEqual(r["by_degree"]["2"]["worst"]["B"], 1)
        self.assertEqual(r["by_band"]["<8k"]["n"], 2)
        self.assertAlmostEqual(r["by_band"]["32k-128k"]["max_rel_err"], 0.0)


class Dcp(unittest.TestCase):
    def test_counts_match_brute_force(self):
        rng = random.Random(3)
        for _ in range(200):
            times = [round(rng.uniform(1, 9), 1) for _ in range(rng.randint(1, 6))]
            g = rng.randint(1, 4)
            self.assertEqual(dcp_policy.grad_accumulation_counts(times, g), brute_force_counts(times, g), (times, g))

    def test_plan_accounts_for_every_sample(self):
        shapes = sp_corpus.make_shapes(3000, 1)
        native = [sp_model.tokens(w, h, f) for w, h, f, _ in shapes]
        cost = sp_model.PlanCost("poly2", [20.0, 0.1, 5e-6])
        buckets, stats = sp_buckets.assign(shapes, 32768, [1, 2, 4, 8])
        sched, facts = dcp_policy.plan(shapes, native, 16, 32768, [1, 2, 4, 8], cost, 2)
        sp_model.check_schedule(sched)
        planned = sum(mb["B"] for st in sched["steps"] for ph in st for ln in ph for mb in ln["micro"])
        self.assertEqual(planned + facts["dropped_samples"], sum(len(v) for v in buckets.values()))
        for st in sched["steps"]:
            for ph in st:
                for ln in ph:
                    for mb in ln["micro"]:
                        self.assertLessEqual(mb["B"] * mb["S"], ln["d"] * 32768)
                        self.assertEqual(sp_buckets.degree_for(mb["S"], 32768, [1, 2, 4, 8]), ln["d"])
        merged = dcp_policy.merge_to_T(sched, 16 * 4 * 32768)
        self.assertLess(len(merged["steps"]), len(sched["steps"]))
        self.assertAlmostEqual(dcp_policy.step_tokens(merged) * len(merged["steps"]),
                               dcp_policy.step_tokens(sched) * len(sched["steps"]), delta=1)

    def test_buckets_are_the_librarys(self):
        # a 720p clip of 281 frames (255,600 tokens): whole under 8 x 32,768, cut in time under
        # 2 x 32,768 (the largest count whose tokens fit 65,536: 65 frames, 61,200 tokens)
        shapes = [(1280, 720, 281, 24.0), (832, 480, 1, 0.0), (640, 360, 33, 24.0)]
        b8, s8 = sp_buckets.assign(shapes, 32768, [1, 2, 4, 8])
        self.assertEqual(b8, {(1280, 720, 281): [0], (832, 480, 1): [1]})
        self.assertEqual((s8["cut_by_cap"], s8["left_out"]), (0, 1))
        b2, s2 = sp_buckets.assign(shapes, 32768, [1, 2])
        self.assertEqual(b2, {(1280, 720, 65): [0], (832, 480, 1): [1]})
        self.assertEqual((s2["cut_by_cap"], s2["left_out"]), (1, 1))


class Share(unittest.TestCase):
    def test_layout_round_trip_and_heads(self):
        import torch

        import sp_share

        b = sp_share.ShareBlock(48, 6, 96, 16)
        t = torch.randn(2, 12, 48)
        for d in (1, 2, 3, 6):
            q = b._a2a_in(t, d)
            self.assertEqual(tuple(q.shape), (2, 6 // d, 12 * d, 8))
            self.assertTrue(torch.equal(b._a2a_out(q, d), t))
        with self.assertRaisesRegex(ValueError, "does not divide"):
            b(t, torch.zeros(2, 6, 48), torch.zeros(2, 4, 16), 4)

    def test_share_runs_forward_and_backward(self):
        import torch

        import sp_share

        s = sp_share.Share(32, 4, 64, 16, 4, 2, torch.device("cpu"), dtype=torch.float32)
        r = s.time_shape(2, 32, 2, reps=2)
        self.assertEqual(len(r["runs"]), 2)
        self.assertGreater(r["ms"], 0)
        ms = s.time_sequence([(1, 32, 1), (2, 16, 4), (1, 31, 4)])  # 31 tokens: padded to 32 for d = 4
        self.assertEqual(len(ms), 3)

    def test_runner_smoke(self):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sys.executable, os.path.join(HERE, "sp_replay.py"), "--smoke", "--out", d], check=True,
                           stdout=subprocess.DEVNULL)
            with open(os.path.join(d, "timings.json")) as f:
                tm = json.load(f)
            self.assertEqual(len(tm["models"]["tiny"]["shapes"]), 4)
            self.assertEqual([len(s) for s in tm["full"]["step_ms"]], [2, 2])


class Ceiling(unittest.TestCase):
    def test_ceiling_of_hand_made_arms(self):
        import sp_arms

        # a: 80 tokens/s with a 20% bubble (100 without it); c: 110 tokens/s with a 10%
        # bubble (122.2 without it): balancing alone buys 1.25x, c's degrees 22.2% a token
        r = {"arms": {"m/a/w8": {"tokens_per_s": 80.0, "bubble": 0.2},
                      "m/c/w8": {"tokens_per_s": 110.0, "bubble": 0.1},
                      "m/a/w16": {"tokens_per_s": 50.0, "bubble": 0.0}}}
        (x,) = sp_arms.ceilings(r)
        self.assertEqual((x["model"], x["world"]), ("m", 8))
        self.assertAlmostEqual(x["balance_only"], 1.25)
        self.assertAlmostEqual(x["degree_saving"], (110.0 / 0.9) / 100.0)
        self.assertAlmostEqual(x["ceiling"], (110.0 / 0.9) / 80.0)
        self.assertAlmostEqual(x["c_vs_a"], 110.0 / 80.0)


class EndToEnd(unittest.TestCase):
    def test_prepare_fake_compose(self):
        cli = os.environ.get("ADAPTIVELOAD_BIN") or os.path.join(HERE, "..", "..", "bazel-bin", "adaptiveload")
        lib = os.environ.get("ADAPTIVELOAD_LIB") or os.path.join(HERE, "..", "..", "bazel-bin", "dist",
                                                                "libadaptiveload.so")
        arms = [sys.executable, os.path.join(HERE, "sp_arms.py")]
        with tempfile.TemporaryDirectory() as w:
            subprocess.run(arms + ["prepare", "--work", w, "--smoke", "--bin", cli, "--lib", lib, "--worlds", "8,16",
                                   "--full-steps", "5"], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(arms + ["fake-timings", "--work", w, "--out", os.path.join(w, "t.json")], check=True)
            subprocess.run(arms + ["compose", "--work", w, "--timings", os.path.join(w, "t.json"), "--out",
                                   os.path.join(w, "r.json")], check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(w, "r.json")) as f:
                r = json.load(f)
            ceiling_md = subprocess.run(arms + ["ceiling", "--results", os.path.join(w, "r.json")], check=True,
                                        stdout=subprocess.PIPE, text=True).stdout
            # a planner schedule read back from `inspect --jsonl` (degree 1: the plan of today)
            import sp_arms

            with open(os.path.join(w, "corpus.json")) as f:
                native = json.load(f)["tokens"]
            man = os.path.join(w, "p.alm")
            subprocess.run([cli, "plan", "--index", os.path.join(w, "corpus.alidx"), "--world", "4", "--mem-tokens",
                            "8192", "--micro-per-step", "2", "--buckets", os.path.join(w, "buckets.txt"), "-o", man,
                            "--last-step", "drop"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            sched = sp_arms.lockstep_schedule(cli, man, native, 4)
            # ours at several degrees: groups of more than one rank, read back from the manifest
            with open(r["meta"]["arms"]["14b/c/w8"]) as f:
                ours = json.load(f)
        sp_model.check_schedule(sched)
        self.assertGreater(len(sched["steps"]), 10)
        for step in sched["steps"]:
            self.assertEqual(len(step), 2)
            for slot in step:
                self.assertEqual([(g["d"], g["rank"]) for g in slot], [(1, 0), (1, 1), (1, 2), (1, 3)])
                for g in slot:
                    self.assertLessEqual(g["real"], 8192)
                    self.assertLessEqual(g["real"], g["native"])
        got = {(x["model"], x["world"], x["arm"]) for x in r["rows"]}
        for model in ("14b", "1.3b"):
            for W in (8, 16):
                for arm in ("a", "a'", "b", "b-T", "c", "d"):
                    self.assertIn((model, W, arm), got)
        sp_model.check_schedule(ours)
        degrees = {g["d"] for st in ours["steps"] for sl in st for g in sl}
        self.assertTrue(degrees & {2, 4, 8} and degrees <= {1, 2, 4, 8}, degrees)
        for x in r["rows"]:
            self.assertGreater(x["tokens_per_s"], 0)
            self.assertTrue(0 <= x["bubble"] < 1, x)
            self.assertTrue(0 < x["kept_of_corpus"] <= 1, x)
            self.assertLessEqual(x["max_share_over_mem"], 1.0, x)
        ceil = sp_arms.ceilings(r)
        self.assertEqual({(x["model"], x["world"]) for x in ceil}, {(m, W) for m in ("14b", "1.3b") for W in (8, 16)})
        for x in ceil:
            self.assertGreaterEqual(x["ceiling"], x["c_vs_a"] - 1e-12, x)
            self.assertAlmostEqual(x["ceiling"], x["balance_only"] * x["degree_saving"], places=9)
            self.assertIn("| %s | %d |" % (x["model"], x["world"]), ceiling_md)
        self.assertEqual(r["full_replay"]["steps"], 5)
        self.assertLess(r["full_replay"]["total_rel_err"], 1e-9)  # the fake full replay is the table itself
        self.assertEqual(r["missing_shapes"], {"14b": [], "1.3b": []})
        # one T per (model, W): every lock-step arm's mean tokens per step within the tolerance
        for x in r["rows"]:
            T = r["meta"]["models"][x["model"]]["T"][str(x["world"])]
            self.assertLessEqual(T["T"], T["capacity"])
            if x["arm"] in ("a", "a'", "c", "d"):
                self.assertLessEqual(abs(x["tokens_per_step_mean"] - T["T"]), 0.011 * T["T"], x)


class TwoGpu(unittest.TestCase):
    """dev/e2e/sp_two_gpu.py end to end on two gloo ranks (CPU): W = 2 plans, the job, the
    SP=2 check against one rank, the arms trained (S / 16 tokens per sample), collectives,
    and the report against a replay table made from the analytic estimate."""

    def test_job_check_train_collectives_report(self):
        cli = os.environ.get("ADAPTIVELOAD_BIN") or os.path.join(HERE, "..", "..", "bazel-bin", "adaptiveload")
        lib = os.environ.get("ADAPTIVELOAD_LIB") or os.path.join(HERE, "..", "..", "bazel-bin", "dist",
                                                                "libadaptiveload.so")
        two = [sys.executable, os.path.join(HERE, "sp_two_gpu.py")]
        env = dict(os.environ, SP2_CPU="1")
        with tempfile.TemporaryDirectory() as w:
            out = os.path.join(w, "out")

            def run(args):
                subprocess.run(args, check=True, stdout=subprocess.DEVNULL, env=env)

            run([sys.executable, os.path.join(HERE, "sp_arms.py"), "prepare", "--work", w, "--smoke", "--bin", cli,
                 "--lib", lib, "--worlds", "2", "--no-grid", "--full-steps", "0"])
            run(two + ["job", "--work", w, "--steps", "4", "--blocks", "1", "--smoke"])
            run(two + ["check", "--spawn", "2", "--smoke", "--out", out, "--blocks", "2"])
            # one model a call, as on the device; the files are merged by the report
            for name in ("14b", "1.3b"):
                run(two + ["train", "--spawn", "2", "--arms", os.path.join(w, "two", "arms.json"), "--out",
                           os.path.join(out, name), "--models", name, "--shrink", "16", "--warmup", "1"])
            cut = os.path.join(out, "cut")
            run(two + ["train", "--spawn", "2", "--arms", os.path.join(w, "two", "arms.json"), "--out", cut,
                       "--models", "1.3b", "--shrink", "16", "--warmup", "1", "--budget-s", "0.001"])
            run(two + ["collectives", "--spawn", "2", "--smoke", "--out", out, "--reps", "2"])
            with open(os.path.join(w, "two", "job.json")) as f:
                job = json.load(f)
            # the device half for one model of a job (CPU, tiny shapes: their times mean nothing)
            rep, tiny = os.path.join(out, "rep"), os.path.join(w, "tiny.json")
            dims = {"hidden": 64, "heads": 4, "ffn": 128, "text_dim": 32, "text_len": 8, "blocks": 1}
            with open(tiny, "w") as f:
                json.dump({"models": {"x": dict(dims, shapes=[[1, 64, 1, 1.0, 1]]),
                                      "y": dict(dims, shapes=[[2, 64, 2, 1.0, 1], [1, 32, 1, 1.0, 1]])},
                           "order": ["x", "y"], "full": {"model": "x", "steps": [[[[1, 64, 1]]]]},
                           "full_est_ms": 1.0, "reps": 1, "warmup": 0}, f)
            replay = [sys.executable, os.path.join(HERE, "sp_replay.py"), "--job", tiny, "--cpu", "--out", rep]
            run(replay + ["--models", "y"])
            with open(os.path.join(rep, "timings.json")) as f:
                rep_y = json.load(f)
            bad = subprocess.run(replay + ["--models", "y,nope"], env=env, capture_output=True, text=True)
            tm = {"models": {n: {"blocks": m["blocks"], "shapes": {"%d,%d,%d" % (B, S, d): {"ms": est}
                                                                   for B, S, d, est, _ in m["shapes"]}}
                             for n, m in job["models"].items()}}
            with open(os.path.join(out, "timings.json"), "w") as f:
                json.dump(tm, f)
            trains = ["--train", os.path.join(out, "14b", "train.json"), "--train",
                      os.path.join(out, "1.3b", "train.json")]
            run(two + ["report", "--work", w, "--replay", os.path.join(out, "timings.json")] + trains +
                ["--collectives", os.path.join(out, "collectives.json"), "--check", os.path.join(out, "check.json"),
                 "--out", os.path.join(out, "r.json")])
            # a model in two files, and arms cut to their warm-up step, are refused by name
            dup = subprocess.run(two + ["report", "--work", w, "--replay", os.path.join(out, "timings.json")] +
                                 trains + ["--train", os.path.join(cut, "train.json"), "--out",
                                           os.path.join(out, "x.json")], env=env, capture_output=True, text=True)
            few = subprocess.run(two + ["report", "--work", w, "--replay", os.path.join(out, "timings.json"),
                                        "--train", os.path.join(out, "14b", "train.json"), "--train",
                                        os.path.join(cut, "train.json"), "--out", os.path.join(out, "y.json")],
                                 env=env, capture_output=True, text=True)
            with open(os.path.join(cut, "train.json")) as f:
                tr_cut = json.load(f)
            run(two + ["report", "--work", w, "--replay", os.path.join(out, "timings.json"), "--warmup", "1",
                       "--out", os.path.join(out, "r0.json")])
            with open(os.path.join(out, "r0.json")) as f:
                r0 = json.load(f)
            with open(os.path.join(w, "two", "arms.json")) as f:
                arms = json.load(f)
            tr = {}
            for name in ("14b", "1.3b"):
                with open(os.path.join(out, name, "train.json")) as f:
                    t = json.load(f)
                tr.setdefault("world", t["world"])
                tr.setdefault("arms", {}).update(t["arms"])
            with open(os.path.join(out, "check.json")) as f:
                ck = json.load(f)
            with open(os.path.join(out, "collectives.json")) as f:
                co = json.load(f)
            with open(os.path.join(out, "r.json")) as f:
                r = json.load(f)
        self.assertTrue(ck["ok"], ck)
        self.assertEqual(list(rep_y["models"]), ["y"])  # x and its full replay left out
        self.assertEqual(sorted(rep_y["models"]["y"]["shapes"]), ["1,32,1", "2,64,2"])
        self.assertIsNone(rep_y["full"])
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("'y,nope'", bad.stderr)
        # --budget-s: every 1.3B arm stops after its first step, on both ranks alike
        self.assertEqual(sorted(tr_cut["arms"]), sorted(k for k in arms["arms"] if k.startswith("1.3b/")))
        for key, res in tr_cut["arms"].items():
            self.assertEqual((len(res["steps"]), res["planned_steps"]), (1, 4), key)
        self.assertNotEqual(dup.returncode, 0)
        self.assertIn("is in an earlier file too", dup.stderr)
        self.assertNotEqual(few.returncode, 0)
        self.assertIn("none after the 1 warm-up step", few.stderr)
        for name, c in ck["models"].items():
            self.assertLess(c["loss_rel_err"], 1e-4, name)
            self.assertLess(c["param_grad_rel_err_max"], 1e-4, name)
            self.assertLess(c["input_grad_rel_err"], 1e-4, name)
        self.assertEqual(tr["world"], 2)
        self.assertEqual(set(tr["arms"]), set(arms["arms"]))
        self.assertEqual(len(tr["arms"]), 8)
        for key, res in tr["arms"].items():
            sched = arms["arms"][key]
            self.assertEqual(len(res["steps"]), 4, key)
            for st, got in zip(sched["steps"], res["steps"]):
                if sched["sync"] == "per-rank":
                    want = sum(mb["real"] for ph in st for lane in ph for mb in lane["micro"])
                else:
                    want = sum(g["real"] for slot in st for g in slot)
                    self.assertEqual(got["micro"], len(st), key)  # every rank ran K micro-batches
                self.assertEqual(got["tokens"], want, key)
                self.assertEqual(len(got["rank_busy_ms"]), 2)
                self.assertGreaterEqual(got["wall_ms"], max(got["rank_busy_ms"]) * 0.999, key)
        degrees = {g["d"] for s in arms["arms"].values() if s["sync"] != "per-rank"
                   for st in s["steps"] for sl in st for g in sl}
        self.assertIn(2, degrees)
        self.assertEqual(len(r["rows"]), 8)
        for row in r["rows"]:
            self.assertGreater(row["measured_tokens_per_s"], 0)
            self.assertGreater(row["replay_tokens_per_s"], 0)
            if row["arm"] == "a":
                self.assertAlmostEqual(row["measured_vs_a"], 1.0)
        # the replay's half alone: the same composition, no measured figures
        self.assertEqual([(x["model"], x["arm"], x["replay_tokens_per_s"]) for x in r0["rows"]],
                         [(x["model"], x["arm"], x["replay_tokens_per_s"]) for x in r["rows"]])
        self.assertTrue(all(x["measured_tokens_per_s"] is None for x in r0["rows"]))
        for name, c in co["models"].items():
            self.assertEqual(len(c["a2a"]), 3, name)
            for x in c["a2a"]:
                self.assertGreater(x["ms"], 0)
                self.assertEqual(x["bytes_leaving_rank"], x["tensor_bytes"] / 2)
            self.assertIn("all_gather", c["fsdp_block"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
