// The planner's limits through the C API (al_plan_build): every product and sum of user
// numbers either gives a sane plan or a clear error naming the option; a step of many
// micro-batches, mostly padding, plans in time near-linear in its size; a sweep of extreme
// option values never crashes, never gives a wrapped plan.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_plan.h"
}

namespace {

using altest::CheckSteps;
using altest::DefaultCost;
using altest::Info;
using altest::MakeShapes;
using altest::PlanAndLoad;
using altest::Shapes;

const uint64_t kU64Max = UINT64_MAX;

al_plan_options Opts(uint32_t world, uint32_t k = 0, uint64_t t = 0, uint64_t m = 0) {
  al_plan_options o{};
  o.world = world;
  o.micro_per_step = k;
  o.step_tokens = t;
  o.mem_tokens = m;
  return o;
}

// al_plan_build's status (the plan is freed); *msg the error message.
int Build(const Shapes &s, const al_plan_options &o, std::string *msg = nullptr,
          const al_cost_model *cost = nullptr) {
  al_cost_model c = cost ? *cost : DefaultCost();
  al_plan_input in = s.Input();
  al_plan *p = nullptr;
  int rc = al_plan_build(&p, &in, &c, &o);
  if (msg) *msg = rc ? al_last_error() : "";
  al_plan_free(p);
  return rc;
}

bool Says(const std::string &msg, const std::string &part) {
  return msg.find(part) != std::string::npos;
}

// Adaptive K = 65,536 on W = 2 for 500 samples is one step of 131,072 micro-batches, nearly
// all padding: the levelling swaps tried all K x K pairs of two bins per swap (several minutes
// here); now their sorted search takes well under a second.
TEST(PlanLimits, ManyMicroBatchesPerStepPlanQuickly) {
  Shapes s = MakeShapes(500, 3);
  al_plan_options o = Opts(2, 65536);
  auto t0 = std::chrono::steady_clock::now();
  al_manifest *m = PlanAndLoad(s, o, "k65536.alm");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(m, nullptr);
  EXPECT_LT(secs, 20.0);
  al_manifest_info in = Info(m);
  EXPECT_EQ(in.micro_per_step, 65536u);
  EXPECT_EQ(in.steps, 1u);
  EXPECT_EQ(in.samples, 500u);
  EXPECT_EQ(in.micro_batches, 131072u);
  EXPECT_EQ(in.padded, 131072u - 500u);
  CheckSteps(m);
  al_manifest_free(m);
}

// W x M_mem x K: M_mem above 2^32 - 1 is refused by name (it wrapped: step_tokens 0,
// micro_tokens 1, 500 one-sample micro-batches); 2^32 - 1 itself gives the plan it should.
TEST(PlanLimits, MemTokensOverTheMaximumAreRefused) {
  Shapes s = MakeShapes(200, 4);
  std::string msg;
  for (uint64_t m : {UINT64_C(1) << 63, UINT64_C(1) << 32, kU64Max}) {
    EXPECT_EQ(Build(s, Opts(4, 0, 0, m), &msg), AL_ERANGE) << m;
    EXPECT_TRUE(Says(msg, "mem-tokens " + std::to_string(m) + " is above the maximum 4294967295"))
        << msg;
  }
  const uint64_t M = AL_PLAN_MAX_MEM_TOKENS;
  al_manifest *man = PlanAndLoad(s, Opts(1024, 0, 0, M), "memmax.alm");
  ASSERT_NE(man, nullptr);
  al_manifest_info in = Info(man);
  EXPECT_EQ(in.mem_tokens, M);
  EXPECT_EQ(in.micro_per_step, 1u);
  EXPECT_EQ(in.step_tokens, 1024 * M);
  EXPECT_EQ(in.micro_tokens, M);
  CheckSteps(man);
  al_manifest_free(man);
}

// al_plan_build has no index: required members are refused, not silently ignored.
TEST(PlanLimits, RequireMembersWithoutAnIndexAreRefused) {
  Shapes s = MakeShapes(50, 2);
  al_plan_options o = Opts(2);
  const char *req[] = {"latent.npy"};
  o.require_members = req;
  o.n_require_members = 1;
  std::string msg;
  EXPECT_EQ(Build(s, o, &msg), AL_EINVAL);
  EXPECT_TRUE(Says(msg, "require_members needs the index")) << msg;
  o.n_require_members = 0;
  EXPECT_EQ(Build(s, o, &msg), AL_OK) << msg;
}

// T alone sets K = ceil(T / (W M_mem)): T + W M_mem - 1 wrapped near 2^64; a K past 2^20 is
// refused naming step-tokens.
TEST(PlanLimits, StepTokensNearTwoToTheSixtyFour) {
  Shapes s = MakeShapes(200, 4);
  std::string msg;
  EXPECT_EQ(Build(s, Opts(3, 0, kU64Max), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg,
                   "step-tokens 18446744073709551615 over 3 ranks of mem-tokens 65536 needs "
                   "micro-per-step 93824992236886, above its maximum 1048576"))
      << msg;
  EXPECT_EQ(Build(s, Opts(1, 0, UINT64_C(1) << 40), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "needs micro-per-step 16777216")) << msg;
  // With K given: T / (W K) above M_mem even at K's maximum.
  EXPECT_EQ(Build(s, Opts(3, 2, kU64Max), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "even at micro-per-step's maximum 1048576")) << msg;
  // Within reach: the K to raise to, computed without wrapping.
  EXPECT_EQ(Build(s, Opts(3, 2, 1000000), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "raise --micro-per-step to 6 or more")) << msg;
  al_manifest *m = PlanAndLoad(s, Opts(1, 0, UINT64_C(65536) * 3000), "t3000.alm");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Info(m).micro_per_step, 3000u);
  CheckSteps(m);
  al_manifest_free(m);
}

// W x K: at most AL_PLAN_MAX_STEP_MICRO micro-batches per step (one manifest record).
TEST(PlanLimits, MicroBatchesPerStepOverTheMaximumAreRefused) {
  Shapes s = MakeShapes(50, 5);
  std::string msg;
  EXPECT_EQ(Build(s, Opts(5, 1u << 20), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg,
                   "world 5 x micro-per-step 1048576 = 5242880 micro-batches per step, above "
                   "the planner's maximum 4194304"))
      << msg;
  EXPECT_EQ(Build(s, Opts(1u << 20, 5), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "= 5242880 micro-batches per step")) << msg;
  EXPECT_EQ(Build(s, Opts(1u << 20, 1u << 20), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "= 1099511627776 micro-batches per step")) << msg;
  EXPECT_EQ(Build(s, Opts(2, (1u << 20) + 1), &msg), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "micro-per-step 1048577 out of range")) << msg;
  EXPECT_EQ(Build(s, Opts((1u << 20) + 1), &msg), AL_EINVAL);
  EXPECT_TRUE(Says(msg, "world size 1048577 out of range")) << msg;
}

// M_comp: not finite or negative is refused (NaN and negatives meant the default before, an
// infinite one a plan summary of inf); a huge finite one saturates the compute term.
TEST(PlanLimits, CompBudget) {
  Shapes s = MakeShapes(100, 6);
  std::string msg;
  for (double c : {(double)NAN, (double)INFINITY, -1.0}) {
    al_plan_options o = Opts(2);
    o.comp_budget_ms = c;
    EXPECT_EQ(Build(s, o, &msg), AL_ERANGE) << c;
    EXPECT_TRUE(Says(msg, "comp-ms")) << msg;
  }
  al_plan_options o = Opts(2);
  o.comp_budget_ms = 1e300;
  al_manifest *m = PlanAndLoad(s, o, "comp.alm");
  ASSERT_NE(m, nullptr);
  CheckSteps(m);
  al_manifest_free(m);
}

// A cost model whose c(S) overflows a double: refused, not a plan of infinite costs.
TEST(PlanLimits, NonFiniteBatchCostsAreRefused) {
  Shapes s = MakeShapes(100, 6);
  al_cost_model c = DefaultCost();
  c.fit.family = AL_COST_POWER;
  c.fit.params[0] = 1, c.fit.params[1] = 1e300, c.fit.params[2] = 3;
  std::string msg;
  EXPECT_EQ(Build(s, Opts(2), &msg, &c), AL_ERANGE);
  EXPECT_TRUE(Says(msg, "not a finite cost")) << msg;
}

// The window: W x K x window batches is formed in 64 bits; the largest window is one window.
TEST(PlanLimits, LargestWindowIsOneWindow) {
  Shapes s = MakeShapes(300, 7);
  al_plan_options a = Opts(3, 2), b = a;
  a.window = UINT32_MAX;
  b.window = 1000000;
  al_manifest *ma = PlanAndLoad(s, a, "wa.alm"), *mb = PlanAndLoad(s, b, "wb.alm");
  ASSERT_NE(ma, nullptr);
  ASSERT_NE(mb, nullptr);
  al_manifest_info ia = Info(ma), ib = Info(mb);
  EXPECT_EQ(ia.imbalance_cv, ib.imbalance_cv);
  EXPECT_EQ(ia.step_time_cv, ib.step_time_cv);
  EXPECT_EQ(ia.micro_batches, ib.micro_batches);
  al_manifest_free(ma);
  al_manifest_free(mb);
}

// Geometry products: tokens saturate at 2^64 - 1 instead of wrapping.
TEST(PlanLimits, TokensSaturate) {
  al_latent_geom unit = {1, 1, 1, 1, 1};
  EXPECT_EQ(al_tokens(&unit, UINT32_MAX, UINT32_MAX, UINT32_MAX), kU64Max);
  EXPECT_EQ(al_tokens(&unit, 1u << 21, 1u << 21, 1u << 22), kU64Max); // 2^64
  EXPECT_EQ(al_tokens(&unit, 1u << 20, 1u << 21, 1u << 22), UINT64_C(1) << 63);
  EXPECT_EQ(al_tokens(&unit, 0, UINT32_MAX, UINT32_MAX), 0u);
  // The largest geometry: every bucket below one patch, refused by name.
  Shapes s = MakeShapes(20, 8);
  al_plan_options o = Opts(1);
  o.geom = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};
  std::string msg;
  EXPECT_NE(Build(s, o, &msg), AL_OK);
  EXPECT_TRUE(Says(msg, "patch footprint")) << msg;
}

// M_mem from a memory fit saturates at the planner's maximum.
TEST(PlanLimits, MemCapacitySaturates) {
  al_cost_model c = DefaultCost();
  c.has_mem = 1, c.mem_m0 = 0, c.mem_m1 = 1;
  uint64_t t = 0;
  ASSERT_EQ(al_cost_mem_tokens(&c, 1e300, 1.0, &t), AL_OK);
  EXPECT_EQ(t, (uint64_t)AL_PLAN_MAX_MEM_TOKENS);
  ASSERT_EQ(al_cost_mem_tokens(&c, 1e6, 0.5, &t), AL_OK);
  EXPECT_EQ(t, 500000u);
}

// Extreme values of every number of al_plan_options, in random combinations: each plan either
// fails with a located message or loads back (al_manifest_load proves every sample once, K on
// every rank of every step, M_mem kept) with the figures its options promise.
TEST(PlanLimits, ExtremeOptionSweep) {
  const uint32_t worlds[] = {0, 1, 2, 3, 1000, 1u << 20, (1u << 20) + 1, UINT32_MAX};
  const uint32_t ks[] = {0, 1, 2, 17, 1u << 20, (1u << 20) + 1, UINT32_MAX};
  const uint64_t ts[] = {0, 1, 65535, 65536 * 40, UINT64_C(1) << 40, UINT64_C(1) << 63, kU64Max};
  const uint64_t ms[] = {0, 1, 215, 216, 65536, AL_PLAN_MAX_MEM_TOKENS, UINT64_C(1) << 32, kU64Max};
  const double comps[] = {0, -1, 1e-300, 1, 1e300, INFINITY, NAN};
  const uint32_t windows[] = {0, 1, 2, UINT32_MAX};
  const uint32_t starts[] = {0, 1, UINT32_MAX};
  Shapes s = MakeShapes(60, 9);
  al_cost_model cost = DefaultCost();
  altest::SplitMix64 rng(11);
  // Half the time a field keeps a usual value (the first listed), so that combinations of a
  // few extreme values also plan.
  auto pick = [&rng](auto &values) {
    size_t n = sizeof values / sizeof values[0];
    return rng.Next() % 2 ? values[0] : values[rng.Next() % n];
  };
  int ok = 0, refused = 0, skipped = 0;
  for (int i = 0; i < 1000; i++) {
    const uint32_t usual_worlds[] = {3, 1, 2, 8};
    al_plan_options o{};
    o.world = rng.Next() % 2 ? pick(usual_worlds) : pick(worlds);
    o.micro_per_step = pick(ks);
    o.step_tokens = pick(ts);
    o.mem_tokens = pick(ms);
    o.comp_budget_ms = pick(comps);
    o.window = pick(windows);
    o.start_step = pick(starts);
    o.seed = rng.Next() % 2 ? kU64Max : 0;
    o.epoch = rng.Next() % 2 ? UINT32_MAX : 0;
    o.policy = (al_policy)(rng.Next() % 3);
    o.last_step = (al_last_step)(rng.Next() % 2);
    // Valid but slow here: more than 2^14 micro-batches a step (tested above at 2^17).
    long double M = o.mem_tokens ? o.mem_tokens : 65536;
    long double K = o.micro_per_step ? o.micro_per_step
                    : o.step_tokens  ? ceill((long double)o.step_tokens / (o.world * M))
                                     : 1;
    long double per = (long double)o.world * K;
    if (o.world && K <= (1u << 20) && per <= AL_PLAN_MAX_STEP_MICRO && per > (1u << 14) &&
        o.mem_tokens <= AL_PLAN_MAX_MEM_TOKENS) {
      skipped++;
      continue;
    }
    std::string what = "case " + std::to_string(i);
    al_plan_input in = s.Input();
    al_plan *p = nullptr;
    int rc = al_plan_build(&p, &in, &cost, &o);
    if (rc) {
      refused++;
      EXPECT_TRUE(rc == AL_EINVAL || rc == AL_ERANGE || rc == AL_ENOTFOUND) << what << " rc " << rc;
      EXPECT_STRNE(al_last_error(), "") << what;
      if (o.mem_tokens > AL_PLAN_MAX_MEM_TOKENS && o.world && o.world <= (1u << 20)) {
        EXPECT_TRUE(Says(al_last_error(), "mem-tokens")) << what << ": " << al_last_error();
      }
      continue;
    }
    ok++;
    std::string path = altest::TmpPath("sweep.alm");
    ASSERT_EQ(al_plan_save(p, path.c_str(), altest::ShapeKey, (void *)&s), AL_OK) << what;
    al_plan_free(p);
    al_manifest *m = nullptr;
    ASSERT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << what << ": " << al_last_error();
    al_manifest_info mi = Info(m);
    EXPECT_LE(mi.mem_tokens, (uint64_t)AL_PLAN_MAX_MEM_TOKENS) << what;
    EXPECT_LE((uint64_t)mi.world * mi.micro_per_step, (uint64_t)AL_PLAN_MAX_STEP_MICRO) << what;
    EXPECT_GE(mi.micro_per_step, 1u) << what;
    EXPECT_GE(mi.step_tokens, 1u) << what;
    EXPECT_LE(mi.micro_tokens, mi.mem_tokens) << what;
    EXPECT_TRUE(std::isfinite(mi.predicted_seconds)) << what;
    CheckSteps(m);
    al_manifest_free(m);
  }
  // The sweep reaches both outcomes.
  EXPECT_GT(ok, 150);
  EXPECT_GT(refused, 500);
  EXPECT_EQ(ok + refused + skipped, 1000);
  printf("sweep: %d planned, %d refused, %d skipped\n", ok, refused, skipped);
}

} // namespace
