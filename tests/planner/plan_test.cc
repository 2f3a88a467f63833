// The schedule: batch sizes, exactly-once, ranks never idle, memory cap,
// determinism, resume, elastic re-plan, last-step policies, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_plan.h"
}

namespace {

using altest::CheckSteps;
using altest::MakeShapes;
using altest::Occurrences;
using altest::PlanAndLoad;
using altest::Shapes;

al_plan_options Opts(uint32_t world, al_policy pol = AL_POLICY_ADAPTIVE, uint32_t epoch = 0) {
  al_plan_options o{};
  o.world = world;
  o.policy = pol;
  o.epoch = epoch;
  o.seed = 42;
  return o;
}

TEST(BatchSize, DualConstraintPerBucket) {
  Shapes s = MakeShapes(3000);
  for (al_policy pol : {AL_POLICY_ADAPTIVE, AL_POLICY_EQUAL_TOKEN}) {
    al_manifest *m = PlanAndLoad(s, Opts(8, pol), "bs.alm");
    ASSERT_TRUE(m);
    al_manifest_info in = altest::Info(m);
    al_cost_model c = AL_COST_MODEL_INIT;
    ASSERT_EQ(al_manifest_cost(m, &c), AL_OK);
    EXPECT_EQ(in.mem_tokens, 65536u);
    // Default M_comp: c(S) of the largest default bucket within M_mem.
    al_bucket_table *t = nullptr;
    ASSERT_EQ(al_bucket_table_default(&t), AL_OK);
    uint64_t smax = 0;
    for (size_t i = 0; i < al_bucket_table_count(t); i++) {
      al_bucket_shape sh = AL_BUCKET_SHAPE_INIT;
      al_bucket_table_get(t, i, &sh);
      uint64_t tok = al_tokens(nullptr, sh.width, sh.height, sh.frames);
      if (tok <= 65536 && tok > smax) smax = tok;
    }
    al_bucket_table_free(t);
    EXPECT_DOUBLE_EQ(in.comp_budget_ms, al_cost_per_sample(&c, smax));
    size_t used = 0;
    for (size_t i = 0; i < in.buckets; i++) {
      al_bucket_info b = AL_BUCKET_INFO_INIT;
      ASSERT_EQ(al_manifest_bucket(m, i, &b), AL_OK);
      if (b.samples) {
        EXPECT_LE(b.tokens, in.mem_tokens);
      }
      uint64_t bm = in.mem_tokens / b.tokens;
      uint64_t bc = (uint64_t)std::floor(in.comp_budget_ms / al_cost_per_sample(&c, b.tokens) *
                                         (1 + 1e-9));
      uint64_t want = pol == AL_POLICY_EQUAL_TOKEN ? bm : std::min(bm, bc);
      if (want < 1) want = 1;
      EXPECT_EQ(b.batch_size, want) << "bucket " << i << " S=" << b.tokens;
      if (pol == AL_POLICY_ADAPTIVE && bc < bm) {
        EXPECT_STREQ(b.limited_by, "compute");
      }
      EXPECT_NEAR(b.batch_cost_ms, al_cost_predict(&c, b.batch_size, b.tokens), 1e-9);
      used += b.samples != 0;
    }
    EXPECT_GT(used, 50u);
    al_manifest_free(m);
  }
}

TEST(Schedule, ExactlyOnceAcrossEpochsAndWorlds) {
  Shapes s = MakeShapes(2500, 3);
  for (al_policy pol : {AL_POLICY_ADAPTIVE, AL_POLICY_EQUAL_TOKEN})
    for (uint32_t world : {1u, 3u, 8u, 64u}) {
      std::vector<uint64_t> first_samples;
      for (uint32_t epoch = 0; epoch < 3; epoch++) {
        al_manifest *m = PlanAndLoad(s, Opts(world, pol, epoch), "once.alm");
        ASSERT_TRUE(m);
        al_manifest_info in = altest::Info(m);
        auto occ = Occurrences(m);
        EXPECT_EQ(occ.size(), s.w.size())
            << al_policy_name(pol) << " W=" << world << " epoch " << epoch;
        for (auto &kv : occ) ASSERT_EQ(kv.second, 1) << "sample " << kv.first;
        EXPECT_EQ(in.samples, s.w.size());
        EXPECT_EQ(in.dropped, 0u);
        CheckSteps(m);
        al_micro_ref ref = AL_MICRO_REF_INIT;
        ASSERT_EQ(al_manifest_micro(m, 0, 0, 0, &ref), AL_OK);
        first_samples.push_back(ref.samples[0]);
        if (pol == AL_POLICY_EQUAL_TOKEN)
          for (uint32_t st = 0; st < in.steps; st++)
            for (uint32_t r = 0; r < world; r++) {
              uint32_t n;
              al_manifest_micro_count(m, st, r, &n);
              ASSERT_EQ(n, 1u); // the baseline: one batch per rank per step
            }
        al_manifest_free(m);
      }
      // Each epoch is reshuffled.
      EXPECT_TRUE(first_samples[0] != first_samples[1] || first_samples[1] != first_samples[2]);
    }
}

TEST(Schedule, AdaptiveBalancesAndBeatsEqualToken) {
  Shapes s = MakeShapes(20000, 5);
  for (uint32_t world : {8u, 16u}) {
    al_manifest *a = PlanAndLoad(s, Opts(world), "bal_a.alm");
    al_manifest *e = PlanAndLoad(s, Opts(world, AL_POLICY_EQUAL_TOKEN), "bal_e.alm");
    ASSERT_TRUE(a && e);
    al_manifest_info ia = altest::Info(a), ie = altest::Info(e);
    EXPECT_LT(ia.imbalance_cv, 0.03);
    EXPECT_GT(ie.imbalance_cv, 0.2);
    EXPECT_GE(ia.predicted_tokens_per_s / ie.predicted_tokens_per_s, 1.3);
    EXPECT_EQ(ia.tokens, ie.tokens);
    // The summary figures agree with the per-step data.
    double max_sum = 0, mean_sum = 0;
    for (uint32_t st = 0; st < ia.steps; st++) {
      al_step_info si = AL_STEP_INFO_INIT;
      al_manifest_step(a, st, &si);
      max_sum += si.max_cost_ms;
      mean_sum += si.mean_cost_ms;
      double mx = 0;
      for (uint32_t r = 0; r < world; r++) {
        double c;
        al_manifest_rank_cost(a, st, r, &c);
        mx = std::max(mx, c);
      }
      EXPECT_DOUBLE_EQ(mx, si.max_cost_ms);
    }
    EXPECT_NEAR(ia.predicted_seconds, max_sum / 1000, 1e-6 * max_sum);
    EXPECT_NEAR(ia.bubble, 1 - mean_sum / max_sum, 1e-9);
    al_manifest_free(a);
    al_manifest_free(e);
  }
}

TEST(Schedule, DeterministicBytes) {
  Shapes s = MakeShapes(3000, 9);
  al_cost_model c = altest::DefaultCost();
  al_plan_input in = s.Input();
  std::string bytes[3];
  for (int i = 0; i < 3; i++) {
    al_plan_options o = Opts(8);
    if (i == 2) o.seed = 43;
    al_plan *p = nullptr;
    ASSERT_EQ(al_plan_build(&p, &in, &c, &o), AL_OK);
    std::string path = altest::TmpPath("det" + std::to_string(i) + ".alm");
    ASSERT_EQ(al_plan_save(p, path.c_str(), altest::ShapeKey, &s), AL_OK);
    al_plan_free(p);
    bytes[i] = altest::ReadFile(path);
  }
  EXPECT_FALSE(bytes[0].empty());
  EXPECT_EQ(bytes[0], bytes[1]);
  EXPECT_NE(bytes[0], bytes[2]);
}

// Micro-batch contents of one step, for comparing plans.
std::vector<std::vector<uint64_t>> StepContents(const al_manifest *m, uint32_t step,
                                                uint32_t world) {
  std::vector<std::vector<uint64_t>> out;
  for (uint32_t r = 0; r < world; r++) {
    uint32_t n;
    EXPECT_EQ(al_manifest_micro_count(m, step, r, &n), AL_OK);
    for (uint32_t k = 0; k < n; k++) {
      al_micro_ref ref = AL_MICRO_REF_INIT;
      al_manifest_micro(m, step, r, k, &ref);
      std::vector<uint64_t> v(ref.samples, ref.samples + ref.n_samples);
      v.push_back(1000000000ull + r);
      v.push_back((uint64_t)std::llround(ref.cost_ms * 1e6));
      out.push_back(v);
    }
  }
  return out;
}

TEST(Resume, StartStepIsTheSuffix) {
  Shapes s = MakeShapes(3000, 13);
  for (al_policy pol : {AL_POLICY_ADAPTIVE, AL_POLICY_EQUAL_TOKEN}) {
    al_manifest *full = PlanAndLoad(s, Opts(8, pol), "full.alm");
    ASSERT_TRUE(full);
    al_manifest_info fi = altest::Info(full);
    for (uint32_t k : {1u, fi.steps / 2, fi.steps}) {
      al_plan_options o = Opts(8, pol);
      o.start_step = k;
      al_manifest *part = PlanAndLoad(s, o, "part.alm");
      ASSERT_TRUE(part);
      al_manifest_info pi = altest::Info(part);
      EXPECT_EQ(pi.first_step, k);
      EXPECT_EQ(pi.steps, fi.steps - k);
      for (uint32_t st = k; st < fi.steps; st++)
        ASSERT_EQ(StepContents(full, st, 8), StepContents(part, st, 8));
      uint32_t n;
      EXPECT_EQ(al_manifest_micro_count(part, k ? k - 1 : 0, 0, &n),
                k ? AL_ERANGE : (pi.steps ? AL_OK : AL_ERANGE));
      al_manifest_free(part);
    }
    al_plan_options o = Opts(8, pol);
    o.start_step = fi.steps + 1;
    al_cost_model c = altest::DefaultCost();
    al_plan_input in = s.Input();
    al_plan *p = nullptr;
    EXPECT_EQ(al_plan_build(&p, &in, &c, &o), AL_ERANGE);
    al_manifest_free(full);
  }
}

TEST(Resume, ElasticReplanCoversEverySampleOnce) {
  Shapes s = MakeShapes(4000, 17);
  for (al_policy pol : {AL_POLICY_ADAPTIVE, AL_POLICY_EQUAL_TOKEN}) {
    std::string old_path = altest::TmpPath("old.alm");
    al_manifest *old = PlanAndLoad(s, Opts(8, pol), "old.alm");
    ASSERT_TRUE(old);
    al_manifest_info oi = altest::Info(old);
    for (uint32_t k : {0u, oi.steps / 3, oi.steps - 1, oi.steps})
      for (uint32_t w2 : {3u, 16u}) {
        al_plan *p = nullptr;
        ASSERT_EQ(al_plan_replan(&p, old, k, w2), AL_OK) << al_last_error();
        std::string path = altest::TmpPath("new.alm");
        ASSERT_EQ(al_plan_save(p, path.c_str(), al_manifest_key_fn, old), AL_OK) << al_last_error();
        al_plan_free(p);
        al_manifest *nm = nullptr;
        ASSERT_EQ(al_manifest_load(&nm, path.c_str()), AL_OK) << al_last_error();
        al_manifest_info ni = altest::Info(nm);
        EXPECT_EQ(ni.first_step, k);
        EXPECT_EQ(ni.world, w2);
        EXPECT_STREQ(ni.policy, oi.policy);
        CheckSteps(nm);
        auto before = Occurrences(old, 0, k);
        auto after = Occurrences(nm);
        for (auto &kv : after) before[kv.first] += kv.second;
        EXPECT_EQ(before.size(), s.w.size()) << "k=" << k << " w2=" << w2;
        for (auto &kv : before)
          ASSERT_EQ(kv.second, 1) << "sample " << kv.first << " k=" << k << " w2=" << w2;
        // Keys carried over from the old manifest.
        EXPECT_STREQ(al_manifest_key(nm, 7), "k7");
        al_manifest_free(nm);
      }
    // The errors name the old manifest by the path it was loaded from (al_manifest_path).
    EXPECT_STREQ(al_manifest_path(old), old_path.c_str());
    EXPECT_EQ(al_manifest_path(nullptr), nullptr);
    al_plan *p = nullptr;
    EXPECT_EQ(al_plan_replan(&p, old, oi.steps + 1, 4), AL_ERANGE);
    EXPECT_EQ(std::string(al_last_error()),
              old_path + ": holds steps 0.." + std::to_string(oi.steps - 1) +
                  " (a re-plan starts at 0.." + std::to_string(oi.steps) +
                  "); cannot re-plan from step " + std::to_string(oi.steps + 1));
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(al_plan_replan(&p, old, 0, 0), AL_EINVAL);
    EXPECT_EQ(al_plan_replan(&p, nullptr, 0, 4), AL_EINVAL);
    al_manifest_free(old);
  }
}

TEST(LastStep, PadAndDrop) {
  Shapes s = MakeShapes(1001, 21);
  // Equal-token: the last step has fewer batches than ranks.
  al_manifest *pad = PlanAndLoad(s, Opts(64, AL_POLICY_EQUAL_TOKEN), "pad.alm");
  ASSERT_TRUE(pad);
  al_manifest_info pi = altest::Info(pad);
  EXPECT_GT(pi.padded, 0u);
  EXPECT_EQ(pi.samples, 1001u);
  CheckSteps(pad);
  uint64_t padded_micro = 0;
  for (uint32_t r = 0; r < 64; r++) {
    al_micro_ref ref = AL_MICRO_REF_INIT;
    al_manifest_micro(pad, pi.steps - 1, r, 0, &ref);
    if (ref.n_padded) {
      EXPECT_EQ(ref.n_padded, ref.n_samples);
      EXPECT_EQ(al_manifest_key_status(pad, ref.samples[0]), 0); // a real sample, repeated
      padded_micro++;
    }
  }
  EXPECT_EQ(padded_micro, pi.padded);
  al_plan_options o = Opts(64, AL_POLICY_EQUAL_TOKEN);
  o.last_step = AL_LAST_DROP;
  al_manifest *drop = PlanAndLoad(s, o, "drop.alm");
  ASSERT_TRUE(drop);
  al_manifest_info di = altest::Info(drop);
  EXPECT_EQ(di.padded, 0u);
  EXPECT_GT(di.dropped, 0u);
  EXPECT_EQ(di.samples + di.dropped, 1001u);
  EXPECT_EQ(di.steps, pi.steps - 1);
  auto occ = Occurrences(drop);
  uint64_t marked = 0;
  for (uint64_t i = 0; i < 1001; i++) {
    int st = al_manifest_key_status(drop, i);
    if (st == 16) marked++;
    EXPECT_EQ(occ.count(i) ? 1 : 0, st == 16 ? 0 : 1) << "sample " << i;
  }
  EXPECT_EQ(marked, di.dropped);
  al_manifest_free(pad);
  al_manifest_free(drop);
}

TEST(LastStep, TinyEpochSplitsThenPads) {
  Shapes s = MakeShapes(100, 23);
  // 100 samples, W = 16: batches are split until their count is a multiple of 16; no padding.
  al_manifest *m = PlanAndLoad(s, Opts(16), "tiny.alm");
  ASSERT_TRUE(m);
  al_manifest_info in = altest::Info(m);
  EXPECT_EQ(in.padded, 0u);
  EXPECT_EQ(in.samples, 100u);
  EXPECT_EQ(in.micro_batches, (uint64_t)in.steps * 16);
  CheckSteps(m);
  al_manifest_free(m);
  // W = 64: 100 samples cannot fill two steps of 64 micro-batches (one step would need
  // batches of different buckets merged): every sample is split off alone, and the 28
  // micro-batches still missing are padding, never a rank with fewer micro-batches.
  m = PlanAndLoad(s, Opts(64), "tiny64.alm");
  ASSERT_TRUE(m);
  in = altest::Info(m);
  EXPECT_EQ(in.samples, 100u);
  EXPECT_EQ(in.steps, 2u);
  EXPECT_EQ(in.padded, 28u);
  EXPECT_EQ(in.unequal_steps, 0u);
  CheckSteps(m);
  al_manifest_free(m);
  Shapes t = MakeShapes(5, 23);
  m = PlanAndLoad(t, Opts(8), "tiny2.alm"); // fewer samples than ranks: 3 padding micro-batches
  ASSERT_TRUE(m);
  in = altest::Info(m);
  EXPECT_EQ(in.steps, 1u);
  EXPECT_EQ(in.samples, 5u);
  EXPECT_EQ(in.padded, 3u);
  CheckSteps(m);
  al_manifest_free(m);
  al_plan_options o = Opts(8);
  o.last_step = AL_LAST_DROP;
  m = PlanAndLoad(t, o, "tiny3.alm");
  ASSERT_TRUE(m);
  in = altest::Info(m);
  EXPECT_EQ(in.steps, 0u);
  EXPECT_EQ(in.dropped, 5u);
  al_manifest_free(m);
}

TEST(Rejects, CountedAndListed) {
  Shapes s = MakeShapes(500, 29);
  s.w[3] = 100, s.h[3] = 100; // too small
  s.w[10] = 0;                // zero-sized
  al_manifest *m = PlanAndLoad(s, Opts(4), "rej.alm");
  ASSERT_TRUE(m);
  al_manifest_info in = altest::Info(m);
  EXPECT_EQ(in.rejected, 2u);
  EXPECT_EQ(in.samples, 498u);
  EXPECT_EQ(al_manifest_rejected(m, AL_REJECT_TOO_SMALL), 1u);
  EXPECT_EQ(al_manifest_rejected(m, AL_REJECT_BAD_SHAPE), 1u);
  EXPECT_EQ(al_manifest_key_status(m, 3), (int)AL_REJECT_TOO_SMALL);
  EXPECT_EQ(al_manifest_key_status(m, 10), (int)AL_REJECT_BAD_SHAPE);
  EXPECT_EQ(al_manifest_key_status(m, 4), 0);
  EXPECT_EQ(Occurrences(m).count(3), 0u);
  al_manifest_free(m);
}

TEST(Errors, ImpossibleInputsAreClear) {
  al_cost_model c = altest::DefaultCost();
  al_plan *p = nullptr;
  Shapes empty;
  al_plan_input in = empty.Input();
  al_plan_options o = Opts(8);
  EXPECT_EQ(al_plan_build(&p, &in, &c, &o), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("no samples"));

  Shapes s = MakeShapes(100);
  in = s.Input();
  o.mem_tokens = 100; // below the smallest bucket (288x192 image = 216 tokens)
  EXPECT_EQ(al_plan_build(&p, &in, &c, &o), AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("below the smallest bucket"));

  o = Opts(0);
  EXPECT_EQ(al_plan_build(&p, &in, &c, &o), AL_EINVAL);

  Shapes small = MakeShapes(50);
  for (auto &w : small.w) w = 64;
  in = small.Input();
  o = Opts(8);
  EXPECT_EQ(al_plan_build(&p, &in, &c, &o), AL_ENOTFOUND);
  EXPECT_TRUE(altest::ErrorContains("50 rejected"));
  EXPECT_EQ(p, nullptr);

  al_cost_model bad = c;
  bad.fit.params[1] = -1, bad.fit.params[2] = 0;
  in = s.Input();
  EXPECT_EQ(al_plan_build(&p, &in, &bad, &o), AL_EINVAL);
}

TEST(Errors, DamagedManifests) {
  Shapes s = MakeShapes(2000, 31);
  al_manifest *m = PlanAndLoad(s, Opts(8), "ok.alm");
  ASSERT_TRUE(m);
  al_manifest_free(m);
  std::string bytes = altest::ReadFile(altest::TmpPath("ok.alm"));
  std::string cut = altest::TmpPath("cut.alm");
  altest::WriteFile(cut, bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(al_manifest_load(&m, cut.c_str()), AL_OK);
  EXPECT_TRUE(altest::ErrorContains("cut.alm"));
  std::string cost = altest::TmpPath("c.alcost");
  al_cost_model c = altest::DefaultCost();
  ASSERT_EQ(al_cost_save(&c, cost.c_str()), AL_OK);
  EXPECT_NE(al_manifest_load(&m, cost.c_str()), AL_OK); // a cost model is not a manifest
  EXPECT_NE(al_manifest_load(&m, "/nonexistent.alm"), AL_OK);
  EXPECT_TRUE(altest::ErrorContains("/nonexistent.alm"));
}

TEST(Options, MemTokensCapsEveryMicroBatch) {
  Shapes s = MakeShapes(3000, 37);
  al_plan_options o = Opts(8);
  o.mem_tokens = 20000;
  al_manifest *m = PlanAndLoad(s, o, "cap.alm");
  ASSERT_TRUE(m);
  al_manifest_info in = altest::Info(m);
  EXPECT_EQ(in.mem_tokens, 20000u);
  CheckSteps(m); // asserts every micro-batch <= mem_tokens
  EXPECT_EQ(in.samples + in.rejected, 3000u);
  al_manifest_free(m);
}

} // namespace

// adaptive-unbalanced (the paper's method, for comparisons): adaptive's batch sizes, dealt in
// shuffled order like equal-token, so its steps are less balanced than adaptive's.
TEST(Policy, AdaptiveUnbalancedHasAdaptivesBatchesWithoutTheBalancing) {
  Shapes s = MakeShapes(4000, 17);
  al_manifest *ad = PlanAndLoad(s, Opts(8, AL_POLICY_ADAPTIVE), "ad.alm");
  al_manifest *un = PlanAndLoad(s, Opts(8, AL_POLICY_ADAPTIVE_UNBALANCED), "un.alm");
  ASSERT_TRUE(ad && un);
  al_manifest_info ai = altest::Info(ad), ui = altest::Info(un);
  EXPECT_STREQ(ui.policy, "adaptive-unbalanced");
  ASSERT_EQ(ai.buckets, ui.buckets);
  for (size_t b = 0; b < ai.buckets; b++) {
    al_bucket_info x = AL_BUCKET_INFO_INIT, y = AL_BUCKET_INFO_INIT;
    ASSERT_EQ(al_manifest_bucket(ad, b, &x), AL_OK);
    ASSERT_EQ(al_manifest_bucket(un, b, &y), AL_OK);
    EXPECT_EQ(x.batch_size, y.batch_size) << "bucket " << b;
  }
  altest::CheckSteps(un);
  EXPECT_EQ(ui.unequal_steps, 0u);
  EXPECT_EQ(ui.samples, ai.samples);
  EXPECT_GT(ui.imbalance_cv, 2 * ai.imbalance_cv)
      << "unbalanced " << ui.imbalance_cv << " vs adaptive " << ai.imbalance_cv;
  al_policy p;
  ASSERT_EQ(al_policy_parse("adaptive-unbalanced", &p), AL_OK);
  EXPECT_EQ(p, AL_POLICY_ADAPTIVE_UNBALANCED);
  EXPECT_STREQ(al_policy_name(p), "adaptive-unbalanced");
  EXPECT_EQ(al_policy_parse("paper", &p), AL_EINVAL);
  al_manifest_free(ad);
  al_manifest_free(un);
}
