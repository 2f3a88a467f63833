// A chunked run (planner/al_run.h): one path (slices equal the full plan step for step), every
// planned sample exactly once in the pass, every rank K micro-batches, tokens per step held,
// world-independent sample sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_run.h"
}

namespace {

using altest::DefaultCost;
using altest::Shapes;

struct RunHandle {
  al_run *r = nullptr;
  ~RunHandle() { al_run_free(r); }
};

al_plan_options Options(uint32_t W, uint32_t K, al_policy pol = AL_POLICY_ADAPTIVE) {
  al_plan_options o = AL_PLAN_OPTIONS_INIT;
  o.world = W;
  o.micro_per_step = K;
  o.policy = pol;
  o.seed = 7;
  return o;
}

al_run_info RunInfo(const al_run *r) {
  al_run_info i = AL_RUN_INFO_INIT;
  EXPECT_EQ(al_run_get_info(r, &i), AL_OK) << al_last_error();
  return i;
}

al_manifest *SaveLoad(al_plan *p, const Shapes &s, const std::string &name) {
  std::string path = altest::TmpPath(name);
  EXPECT_EQ(al_plan_save(p, path.c_str(), altest::ShapeKey, (void *)&s), AL_OK) << al_last_error();
  al_manifest *m = nullptr;
  EXPECT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
  return m;
}

// Step s of m as (rank, micro, samples, padded) tuples.
std::vector<std::vector<uint64_t>> StepRecord(const al_manifest *m, uint32_t s, uint32_t W) {
  std::vector<std::vector<uint64_t>> out;
  for (uint32_t r = 0; r < W; r++) {
    uint32_t n = 0;
    EXPECT_EQ(al_manifest_micro_count(m, s, r, &n), AL_OK);
    for (uint32_t k = 0; k < n; k++) {
      al_micro_ref ref = AL_MICRO_REF_INIT;
      EXPECT_EQ(al_manifest_micro(m, s, r, k, &ref), AL_OK);
      std::vector<uint64_t> v = {r, k, ref.bucket, ref.n_padded, ref.step_tokens};
      v.insert(v.end(), ref.samples, ref.samples + ref.n_samples);
      out.push_back(v);
    }
  }
  return out;
}

void CheckFullPass(const Shapes &s, uint32_t W, uint32_t K, al_policy pol) {
  SCOPED_TRACE("W=" + std::to_string(W) + " K=" + std::to_string(K) +
               " policy=" + al_policy_name(pol));
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan_options o = Options(W, K, pol);
  RunHandle run;
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
  al_run_info ri = RunInfo(run.r);
  ASSERT_GT(ri.steps, 0u);
  al_plan *p = nullptr;
  ASSERT_EQ(al_run_plan_steps(run.r, W, 0, ri.steps, &p), AL_OK) << al_last_error();
  al_manifest *m = SaveLoad(p, s, "run_full.alm");
  al_plan_free(p);
  ASSERT_NE(m, nullptr);
  altest::CheckSteps(m);
  al_manifest_info mi = altest::Info(m);
  EXPECT_EQ(mi.steps, ri.steps);
  EXPECT_EQ(mi.micro_per_step, K);
  // Every planned sample exactly once over the pass.
  auto occ = altest::Occurrences(m);
  EXPECT_EQ(occ.size(), ri.pass_samples);
  for (const auto &kv : occ) ASSERT_EQ(kv.second, 1) << "sample " << kv.first;
  // Tokens held: every step but the last within one M_mem-sized batch either side of T per
  // rank-slot of overshoot carried (cumulative quotas), the pass's tokens exact.
  uint64_t total = 0;
  double worst = 0, sq = 0;
  for (uint32_t st = 0; st < mi.steps; st++) {
    al_step_info si = AL_STEP_INFO_INIT;
    ASSERT_EQ(al_manifest_step(m, st, &si), AL_OK);
    total += si.tokens;
    double dev = std::fabs((double)si.tokens - (double)ri.step_tokens);
    worst = std::max(worst, dev);
    sq += dev * dev;
  }
  // Quality against the epoch planner of the same corpus and T: the bubble within 0.5 points
  // (adaptive), the steps' tokens no more spread (adaptive, K > 1: groups of level slots paired
  // by token quota), and within one batch of T for the baselines (each batch to the step with
  // most quota left).
  al_plan *ep = nullptr;
  al_plan_options eo = Options(W, K, pol);
  eo.step_tokens = ri.step_tokens;
  al_plan_input ein = s.Input();
  ASSERT_EQ(al_plan_build(&ep, &ein, &c, &eo), AL_OK) << al_last_error();
  al_manifest_info einfo = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_plan_get_info(ep, &einfo), AL_OK);
  al_plan_free(ep);
  double rms = std::sqrt(sq / mi.steps) / ri.step_tokens;
  if (pol == AL_POLICY_ADAPTIVE) {
    EXPECT_LE(mi.bubble, einfo.bubble + 0.005) << "epoch planner's bubble " << einfo.bubble;
    if (K > 1) {
      EXPECT_LE(rms, einfo.step_tokens_cv) << "rms deviation from T " << rms;
    }
  } else {
    EXPECT_LE(worst, (double)mi.mem_tokens) << "a step's tokens are off T by " << worst;
  }
  EXPECT_EQ(total, ri.pass_tokens);
  // One path: slices at, inside and across window boundaries give the same steps.
  std::vector<std::pair<uint32_t, uint32_t>> cuts = {{0, 1},
                                                     {1, 3},
                                                     {ri.window - 1, ri.window + 1},
                                                     {ri.steps - 1, ri.steps}};
  for (auto [a, b] : cuts) {
    if (b > ri.steps || a >= b) continue;
    al_plan *sp = nullptr;
    ASSERT_EQ(al_run_plan_steps(run.r, W, a, b, &sp), AL_OK) << al_last_error();
    al_manifest *sm = SaveLoad(sp, s, "run_slice.alm");
    al_plan_free(sp);
    ASSERT_NE(sm, nullptr);
    al_manifest_info si = altest::Info(sm);
    EXPECT_EQ(si.first_step, a);
    EXPECT_EQ(si.steps, b - a);
    for (uint32_t st = a; st < b; st++)
      EXPECT_EQ(StepRecord(sm, st, W), StepRecord(m, st, W))
          << "slice " << a << ":" << b << " step " << st;
    al_manifest_free(sm);
  }
  al_manifest_free(m);
}

TEST(ChunkedRun, FullPassExactlyOnceAndSlicesEqual) {
  Shapes s = altest::MakeShapes(6000, 3);
  CheckFullPass(s, 8, 1, AL_POLICY_ADAPTIVE);
  CheckFullPass(s, 8, 2, AL_POLICY_ADAPTIVE);
  CheckFullPass(s, 3, 4, AL_POLICY_ADAPTIVE);
  CheckFullPass(s, 1, 4, AL_POLICY_ADAPTIVE);
  CheckFullPass(s, 8, 1, AL_POLICY_EQUAL_TOKEN);
  CheckFullPass(s, 4, 2, AL_POLICY_ADAPTIVE_UNBALANCED);
}

// A step's samples do not depend on the world it is laid out at: K(W) = ceil(K_ref W_ref / W).
TEST(ChunkedRun, StepSamplesIndependentOfWorld) {
  Shapes s = altest::MakeShapes(4000, 5);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan_options o = Options(8, 2);
  RunHandle run;
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
  al_run_info ri = RunInfo(run.r);
  std::vector<std::multiset<uint64_t>> ref;
  for (uint32_t W : {8u, 4u, 16u, 3u}) {
    al_plan *p = nullptr;
    ASSERT_EQ(al_run_plan_steps(run.r, W, 0, ri.steps, &p), AL_OK) << al_last_error();
    al_manifest *m = SaveLoad(p, s, "run_w.alm");
    al_plan_free(p);
    ASSERT_NE(m, nullptr);
    altest::CheckSteps(m);
    EXPECT_EQ(altest::Info(m).micro_per_step, (16 + W - 1) / W);
    for (uint32_t st = 0; st < ri.steps; st++) {
      auto occ = altest::Occurrences(m, st, st + 1);
      std::multiset<uint64_t> set;
      for (auto &kv : occ) set.insert(kv.first);
      if (W == 8)
        ref.push_back(set);
      else
        ASSERT_EQ(set, ref[st]) << "W=" << W << " step " << st;
    }
    al_manifest_free(m);
  }
}

TEST(ChunkedRun, SameInputsSamePlan) {
  Shapes s = altest::MakeShapes(3000, 9);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan_options o = Options(4, 2);
  std::vector<std::vector<std::vector<uint64_t>>> first;
  for (int t = 0; t < 2; t++) {
    RunHandle run;
    ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
    al_run_info ri = RunInfo(run.r);
    al_plan *p = nullptr;
    ASSERT_EQ(al_run_plan_steps(run.r, 4, 0, ri.steps, &p), AL_OK);
    al_manifest *m = SaveLoad(p, s, "run_det.alm");
    al_plan_free(p);
    for (uint32_t st = 0; st < ri.steps; st++) {
      if (t == 0)
        first.push_back(StepRecord(m, st, 4));
      else
        ASSERT_EQ(StepRecord(m, st, 4), first[st]) << st;
    }
    al_manifest_free(m);
  }
  // Another seed is another plan.
  o.seed = 8;
  RunHandle run;
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK);
  al_plan *p = nullptr;
  ASSERT_EQ(al_run_plan_steps(run.r, 4, 0, 1, &p), AL_OK);
  al_manifest *m = SaveLoad(p, s, "run_seed.alm");
  al_plan_free(p);
  EXPECT_NE(StepRecord(m, 0, 4), first[0]);
  al_manifest_free(m);
}

TEST(ChunkedRun, RefusesWhatItDoesNotPlan) {
  Shapes s = altest::MakeShapes(500, 1);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  RunHandle run;
  al_plan_options o = Options(4, 1);
  uint32_t d[] = {1, 2};
  o.sp_degrees = d;
  o.n_sp_degrees = 2;
  EXPECT_EQ(al_run_open(&run.r, &in, &c, &o), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("sp-degrees"), std::string::npos);
  o = Options(4, 1);
  o.last_step = AL_LAST_DROP;
  EXPECT_EQ(al_run_open(&run.r, &in, &c, &o), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("last-step"), std::string::npos);
  o = Options(4, 1);
  o.step_tokens = 4ull * 65536; // all of W x K x M_mem: above the capacity
  EXPECT_EQ(al_run_open(&run.r, &in, &c, &o), AL_ERANGE);
  EXPECT_NE(std::string(al_last_error()).find("lower --step-tokens"), std::string::npos)
      << al_last_error();
  o = Options(4, 1);
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
  al_run_info ri = RunInfo(run.r);
  al_plan *p = nullptr;
  EXPECT_EQ(al_run_plan_steps(run.r, 4, ri.steps, ri.steps + 1, &p), AL_ERANGE);
  EXPECT_EQ(al_run_plan_steps(run.r, 4, 2, 2, &p), AL_ERANGE);
  EXPECT_EQ(al_run_plan_steps(run.r, 0, 0, 1, &p), AL_ERANGE);
  EXPECT_EQ(p, nullptr);
}

} // namespace
