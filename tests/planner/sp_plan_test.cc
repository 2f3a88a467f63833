// Sequence-parallel plans (al_plan_options.sp_degrees, sync): aligned groups in every slot,
// followers resolved to their leader's samples, every sample once, a long sample kept whole at
// a degree and cut only beyond the largest, both bubbles as the steps hold them, re-plans and
// start steps, byte-identity of the default, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "tests/manifest/manifest_forge.h"
#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"
}

namespace {

using altest::Shapes;

const uint32_t kD1248[] = {1, 2, 4, 8};

al_plan_options SpOptions(uint32_t world, uint32_t k, const uint32_t *d, size_t nd,
                          al_sync sync = AL_SYNC_AUTO) {
  al_plan_options o{};
  o.world = world;
  o.seed = 5;
  o.micro_per_step = k;
  o.mem_tokens = 16384;
  o.sp_degrees = d;
  o.n_sp_degrees = nd;
  o.sync = sync;
  return o;
}

std::string ReadFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Every slot of every step: the ranks partitioned into aligned groups of allowed degrees,
// each rank of a group given the group's samples, bucket and cost with sp_rank 0..d-1; every
// rank K micro-batches. Returns the degrees seen.
std::set<uint32_t> CheckGroups(const al_manifest *m) {
  al_manifest_info in = altest::Info(m);
  std::set<uint32_t> allowed(in.sp_degrees, in.sp_degrees + in.n_sp_degrees), seen;
  for (uint32_t s = in.first_step; s < in.first_step + in.steps; s++)
    for (uint32_t k = 0; k < in.micro_per_step; k++)
      for (uint32_t r = 0; r < in.world;) {
        uint32_t n = 0;
        EXPECT_EQ(al_manifest_micro_count(m, s, r, &n), AL_OK);
        EXPECT_EQ(n, in.micro_per_step);
        al_micro_ref lead = AL_MICRO_REF_INIT;
        EXPECT_EQ(al_manifest_micro(m, s, r, k, &lead), AL_OK);
        uint32_t d = lead.sp_degree;
        EXPECT_EQ(lead.sp_rank, 0u) << "step " << s << " slot " << k << " rank " << r;
        EXPECT_TRUE(allowed.count(d)) << d;
        EXPECT_EQ(r % d, 0u) << "a group of degree " << d << " at rank " << r;
        EXPECT_GE(lead.n_samples, 1u);
        uint64_t tok = 0;
        for (size_t q = 0; q < lead.n_samples; q++) tok += lead.tokens[q];
        EXPECT_LE(tok, (uint64_t)d * in.mem_tokens);
        al_bucket_info b = AL_BUCKET_INFO_INIT;
        EXPECT_EQ(al_manifest_bucket(m, lead.bucket, &b), AL_OK);
        EXPECT_EQ(b.sp_degree, d) << "bucket " << lead.bucket;
        for (uint32_t q = 1; q < d; q++) {
          al_micro_ref f = AL_MICRO_REF_INIT;
          EXPECT_EQ(al_manifest_micro(m, s, r + q, k, &f), AL_OK);
          EXPECT_EQ(f.sp_degree, d);
          EXPECT_EQ(f.sp_rank, q);
          EXPECT_EQ(f.bucket, lead.bucket);
          EXPECT_EQ(f.cost_ms, lead.cost_ms);
          EXPECT_EQ(f.n_samples, lead.n_samples);
          EXPECT_EQ(f.samples, lead.samples) << "a follower resolves to its leader's samples";
        }
        seen.insert(d);
        if (d == 0) break;
        r += d;
      }
  return seen;
}

// Real occurrences counted at leaders only (a group's sample is one sample).
std::map<uint64_t, int> LeaderOccurrences(const al_manifest *m) {
  al_manifest_info in = altest::Info(m);
  std::map<uint64_t, int> occ;
  for (uint32_t s = in.first_step; s < in.first_step + in.steps; s++)
    for (uint32_t r = 0; r < in.world; r++)
      for (uint32_t k = 0; k < in.micro_per_step; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        EXPECT_EQ(al_manifest_micro(m, s, r, k, &ref), AL_OK);
        if (ref.sp_rank) continue;
        std::vector<bool> pad(ref.n_samples, false);
        for (size_t q = 0; q < ref.n_padded; q++) pad[ref.padded[q]] = true;
        for (size_t q = 0; q < ref.n_samples; q++)
          if (!pad[q]) occ[ref.samples[q]]++;
      }
  return occ;
}

// The reference bubbles: 1 - sum of every rank's cost / (W x sum of step times), the step
// model's step time the slowest rank's sum, the micro model's the sum over slots of the
// slowest rank's micro-batch there.
void ReferenceBubbles(const al_manifest *m, double *step, double *micro) {
  al_manifest_info in = altest::Info(m);
  double all = 0, ts = 0, tm = 0;
  for (uint32_t s = in.first_step; s < in.first_step + in.steps; s++) {
    double mx = 0;
    std::vector<double> slot_max(in.micro_per_step, 0.0);
    for (uint32_t r = 0; r < in.world; r++) {
      double c = 0;
      for (uint32_t k = 0; k < in.micro_per_step; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        EXPECT_EQ(al_manifest_micro(m, s, r, k, &ref), AL_OK);
        c += ref.cost_ms;
        slot_max[k] = std::max(slot_max[k], ref.cost_ms);
      }
      all += c;
      mx = std::max(mx, c);
    }
    ts += mx;
    for (double v : slot_max) tm += v;
  }
  *step = 1 - all / (in.world * ts);
  *micro = 1 - all / (in.world * tm);
}

TEST(SpPlan, GroupsAlignedEverySampleOnceEveryRankK) {
  Shapes s = altest::MakeShapes(3000, 11);
  al_plan_options o = SpOptions(8, 2, kD1248, 4);
  al_plan *p = nullptr;
  al_manifest *m = altest::PlanAndLoad(s, o, "sp_groups.alm", &p);
  ASSERT_TRUE(m);
  al_manifest_info in = altest::Info(m);
  EXPECT_STREQ(in.sync, "micro"); // auto with a degree above 1
  ASSERT_EQ(in.n_sp_degrees, 4u);
  EXPECT_EQ(in.sp_max_degree, 8u);
  std::set<uint32_t> seen = CheckGroups(m);
  EXPECT_EQ(seen, (std::set<uint32_t>{1, 2, 4, 8}));
  auto occ = LeaderOccurrences(m);
  EXPECT_EQ(occ.size(), in.samples);
  for (auto &kv : occ) ASSERT_EQ(kv.second, 1) << "sample " << kv.first;
  EXPECT_EQ(in.samples + in.rejected + in.dropped, s.w.size());
  // Step totals count every sample once.
  for (uint32_t st = 0; st < in.steps; st++) {
    al_step_info si = AL_STEP_INFO_INIT;
    ASSERT_EQ(al_manifest_step(m, st, &si), AL_OK);
    uint64_t tok = 0;
    for (uint32_t r = 0; r < in.world; r++)
      for (uint32_t k = 0; k < in.micro_per_step; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        ASSERT_EQ(al_manifest_micro(m, st, r, k, &ref), AL_OK);
        if (ref.sp_rank || ref.n_padded) continue;
        for (size_t q = 0; q < ref.n_samples; q++) tok += ref.tokens[q];
      }
    ASSERT_EQ(tok, si.tokens) << "step " << st;
  }
  // Each bucket's degree: the smallest allowed d with S <= d x M_mem.
  for (size_t b = 0; b < in.buckets; b++) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    ASSERT_EQ(al_manifest_bucket(m, b, &bi), AL_OK);
    uint32_t want = 8;
    for (uint32_t d : kD1248)
      if (bi.tokens <= (uint64_t)d * in.mem_tokens) {
        want = d;
        break;
      }
    if (bi.samples) {
      EXPECT_EQ(bi.sp_degree, want) << "bucket " << b;
    }
  }
  // Both bubbles: the plan's figures, the loaded ones and a reference from the steps agree.
  al_manifest_info pi = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_plan_get_info(p, &pi), AL_OK);
  double rs = -1, rm = -1;
  ReferenceBubbles(m, &rs, &rm);
  EXPECT_NEAR(pi.bubble_step, rs, 1e-9);
  EXPECT_NEAR(pi.bubble_micro, rm, 1e-9);
  EXPECT_NEAR(in.bubble_step, rs, 1e-9);
  EXPECT_NEAR(in.bubble_micro, rm, 1e-9);
  EXPECT_NEAR(in.bubble, rm, 1e-9); // the plan's own (micro) model's
  EXPECT_GE(rm, rs - 1e-12);        // a step's slots' maxima sum to at least its slowest rank
  al_plan_free(p);
  al_manifest_free(m);
}

TEST(SpPlan, ReferenceBubbleSeesAPoisonedCost) {
  // The reference is not vacuous: a manifest with one micro-batch's cost raised (forged by
  // planning with another cost model's a) moves it.
  Shapes s = altest::MakeShapes(800, 3);
  al_plan_options o = SpOptions(4, 2, kD1248 + 0, 3);
  al_manifest *m = altest::PlanAndLoad(s, o, "sp_ref.alm");
  ASSERT_TRUE(m);
  double rs, rm;
  ReferenceBubbles(m, &rs, &rm);
  al_manifest_info in = altest::Info(m);
  EXPECT_NEAR(in.bubble_micro, rm, 1e-9);
  // Poison: the bubble of the same costs with one rank's cost doubled differs.
  double all = 0, tm = 0;
  for (uint32_t st = 0; st < in.steps; st++)
    for (uint32_t k = 0; k < in.micro_per_step; k++) {
      double mx = 0;
      for (uint32_t r = 0; r < in.world; r++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        ASSERT_EQ(al_manifest_micro(m, st, r, k, &ref), AL_OK);
        double c = ref.cost_ms * (st == 0 && r == 0 && k == 0 ? 2 : 1);
        all += c;
        mx = std::max(mx, c);
      }
      tm += mx;
    }
  EXPECT_GT(std::fabs((1 - all / (in.world * tm)) - in.bubble_micro), 1e-6);
  al_manifest_free(m);
}

// A corpus of 2,000 ordinary samples plus `n_long` 1280x720 clips of 121 frames (31 x 45 x 80
// = 111,600 tokens), the last positions.
Shapes WithLong(size_t n_long) {
  Shapes s = altest::MakeShapes(2000, 9);
  for (size_t i = 0; i < n_long; i++) {
    s.w.push_back(1280), s.h.push_back(720), s.f.push_back(121);
    s.keys.push_back("long" + std::to_string(i));
  }
  return s;
}

// The bucket (frames) the manifest gives position i.
uint32_t FramesOf(const al_manifest *m, uint64_t i, uint32_t *degree) {
  al_manifest_info in = altest::Info(m);
  for (uint32_t st = in.first_step; st < in.first_step + in.steps; st++)
    for (uint32_t r = 0; r < in.world; r++)
      for (uint32_t k = 0; k < in.micro_per_step; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        EXPECT_EQ(al_manifest_micro(m, st, r, k, &ref), AL_OK);
        for (size_t q = 0; q < ref.n_samples; q++)
          if (ref.samples[q] == i) {
            al_bucket_info b = AL_BUCKET_INFO_INIT;
            EXPECT_EQ(al_manifest_bucket(m, ref.bucket, &b), AL_OK);
            *degree = ref.sp_degree;
            return b.frames;
          }
      }
  return 0;
}

TEST(SpPlan, LongSampleKeptWholeAtADegreeCutOnlyBeyondTheLargest) {
  Shapes s = WithLong(3);
  uint64_t longest = s.w.size() - 1;
  const uint32_t d1[] = {1}, d12[] = {1, 2}, d124[] = {1, 2, 4}, d8[] = {8}, d2[] = {2};
  struct Case {
    const uint32_t *d;
    size_t n;
    uint32_t mem;
    uint32_t frames, degree;
  } cases[] = {
      {d1, 1, 32768, 0, 1},     // 111,600 > M_mem: cut in time
      {d12, 2, 32768, 0, 2},    // > 2 M_mem: still cut, at the largest degree
      {d124, 3, 32768, 121, 4}, // <= 4 M_mem: whole at degree 4
      {d8, 1, 16384, 121, 8},   // <= 8 M_mem: whole at degree 8
      {d2, 1, 65536, 121, 2},   // <= 2 M_mem: whole at degree 2
  };
  for (const Case &c : cases) {
    al_plan_options o = SpOptions(8, 1, c.d, c.n);
    o.mem_tokens = c.mem;
    al_manifest *m = altest::PlanAndLoad(s, o, "sp_long.alm");
    ASSERT_TRUE(m);
    CheckGroups(m);
    uint32_t deg = 0, frames = FramesOf(m, longest, &deg);
    if (c.frames) {
      EXPECT_EQ(frames, c.frames) << "degrees " << c.n << " mem " << c.mem;
    } else {
      EXPECT_LT(frames, 121u) << "degrees " << c.n << " mem " << c.mem;
    }
    EXPECT_EQ(deg, c.degree) << "degrees " << c.n << " mem " << c.mem;
    EXPECT_EQ(al_manifest_rejected(m, AL_REJECT_NONE), 0u);
    al_manifest_free(m);
  }
}

// The default M_comp prices each allowed degree's fullest micro-batch at that degree: a long clip
// alone in a degree-8 group fills its memory (limited by memory), where a budget priced at degree
// 1 would leave it at one sample limited by nothing it fits.
TEST(SpPlan, DefaultComputeBudgetAdmitsAFullMicroBatchAtEveryDegree) {
  Shapes s = WithLong(3);
  const uint32_t d8[] = {8};
  al_plan_options o = SpOptions(8, 1, d8, 1);
  al_manifest *m = altest::PlanAndLoad(s, o, "sp_comp.alm");
  ASSERT_TRUE(m);
  al_manifest_info in = altest::Info(m);
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK);
  uint32_t deg = 0, frames = FramesOf(m, s.w.size() - 1, &deg);
  ASSERT_EQ(frames, 121u);
  ASSERT_EQ(deg, 8u);
  size_t checked = 0;
  for (uint32_t b = 0; b < in.buckets; b++) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    ASSERT_EQ(al_manifest_bucket(m, b, &bi), AL_OK);
    if (bi.frames != 121 || !bi.samples) continue;
    EXPECT_GE(in.comp_budget_ms * (1 + 1e-9), al_cost_per_sample_sp(&cost, bi.tokens, 8));
    EXPECT_STREQ(bi.limited_by, "memory") << "bucket " << b;
    checked++;
  }
  EXPECT_GT(checked, 0u);
  al_manifest_free(m);
}

TEST(SpPlan, DefaultsAreTodaysPlanByteForByte) {
  Shapes s = altest::MakeShapes(1500, 4);
  const uint32_t one[] = {1};
  for (uint32_t k : {1u, 3u}) {
    al_plan_options a{};
    a.world = 4, a.seed = 2, a.micro_per_step = k;
    al_plan_options b = a;
    b.sp_degrees = one, b.n_sp_degrees = 1; // D = {1} spelt out
    al_plan_options c = b;
    c.sync = AL_SYNC_STEP; // and the step model
    al_manifest *ma = altest::PlanAndLoad(s, a, "sp_def_a.alm");
    al_manifest *mb = altest::PlanAndLoad(s, b, "sp_def_b.alm");
    al_manifest *mc = altest::PlanAndLoad(s, c, "sp_def_c.alm");
    ASSERT_TRUE(ma && mb && mc);
    std::string fa = ReadFile(altest::TmpPath("sp_def_a.alm"));
    EXPECT_FALSE(fa.empty());
    EXPECT_EQ(fa, ReadFile(altest::TmpPath("sp_def_b.alm"))) << "K " << k;
    // K = 1: the two models are one plan. K > 1: the default is the micro model (FSDP), and
    // the step model is the plan of earlier versions.
    if (k == 1)
      EXPECT_EQ(fa, ReadFile(altest::TmpPath("sp_def_c.alm"))) << "K " << k;
    else
      EXPECT_NE(fa, ReadFile(altest::TmpPath("sp_def_c.alm"))) << "K " << k;
    EXPECT_STREQ(altest::Info(ma).sync, k == 1 ? "step" : "micro");
    EXPECT_STREQ(altest::Info(mc).sync, "step");
    EXPECT_EQ(altest::Info(ma).sp_max_degree, 1u);
    al_micro_ref ref = AL_MICRO_REF_INIT;
    ASSERT_EQ(al_manifest_micro(ma, 0, 1, 0, &ref), AL_OK);
    EXPECT_EQ(ref.sp_degree, 1u);
    EXPECT_EQ(ref.sp_rank, 0u);
    al_manifest_free(ma), al_manifest_free(mb), al_manifest_free(mc);
  }
}

TEST(SpPlan, SameInputsSameBytes) {
  Shapes s = altest::MakeShapes(2000, 6);
  al_plan_options o = SpOptions(8, 3, kD1248, 4);
  al_manifest *a = altest::PlanAndLoad(s, o, "sp_det_a.alm");
  al_manifest *b = altest::PlanAndLoad(s, o, "sp_det_b.alm");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(ReadFile(altest::TmpPath("sp_det_a.alm")), ReadFile(altest::TmpPath("sp_det_b.alm")));
  o.seed = 6;
  al_manifest *c = altest::PlanAndLoad(s, o, "sp_det_c.alm");
  ASSERT_TRUE(c);
  EXPECT_NE(ReadFile(altest::TmpPath("sp_det_a.alm")), ReadFile(altest::TmpPath("sp_det_c.alm")));
  al_manifest_free(a), al_manifest_free(b), al_manifest_free(c);
}

TEST(SpPlan, MicroSyncLevelsSlotsBetterThanTheStepSchedule) {
  Shapes s = altest::MakeShapes(3000, 2);
  const uint32_t one[] = {1};
  for (uint32_t k : {2u, 4u, 8u}) {
    al_plan_options st = SpOptions(8, k, one, 1, AL_SYNC_STEP);
    al_plan_options mi = SpOptions(8, k, one, 1, AL_SYNC_MICRO);
    al_manifest *ms = altest::PlanAndLoad(s, st, "sp_sync_step.alm");
    al_manifest *mm = altest::PlanAndLoad(s, mi, "sp_sync_micro.alm");
    ASSERT_TRUE(ms && mm);
    al_manifest_info is = altest::Info(ms), im = altest::Info(mm);
    EXPECT_STREQ(is.sync, "step");
    EXPECT_STREQ(im.sync, "micro");
    CheckGroups(mm);
    EXPECT_LE(im.bubble_micro, is.bubble_micro) << "K " << k;
    EXPECT_EQ(im.samples, is.samples);
    al_manifest_free(ms), al_manifest_free(mm);
  }
}

TEST(SpPlan, StepSyncWithDegreesLevelsRanksOverTheStep) {
  Shapes s = altest::MakeShapes(3000, 8);
  al_manifest *ms = altest::PlanAndLoad(s, SpOptions(8, 4, kD1248, 4, AL_SYNC_STEP), "sp_st.alm");
  al_manifest *mm = altest::PlanAndLoad(s, SpOptions(8, 4, kD1248, 4, AL_SYNC_MICRO), "sp_mi.alm");
  ASSERT_TRUE(ms && mm);
  CheckGroups(ms);
  al_manifest_info is = altest::Info(ms), im = altest::Info(mm);
  EXPECT_STREQ(is.sync, "step");
  EXPECT_NEAR(is.bubble, is.bubble_step, 1e-12);
  // Placing each degree's groups on the least loaded ranks levels the step model's sums at
  // least as well as random places.
  EXPECT_LE(is.bubble_step, im.bubble_step + 1e-9);
  al_manifest_free(ms), al_manifest_free(mm);
}

TEST(SpPlan, OnlyLargeDegreesAndDropAndEqualToken) {
  Shapes s = altest::MakeShapes(1200, 5);
  const uint32_t d8[] = {8}, d24[] = {2, 4}, d14[] = {1, 4};
  al_manifest *m = altest::PlanAndLoad(s, SpOptions(8, 2, d8, 1), "sp_d8.alm");
  ASSERT_TRUE(m);
  EXPECT_EQ(CheckGroups(m), (std::set<uint32_t>{8}));
  al_manifest_free(m);
  al_plan_options o = SpOptions(8, 3, d24, 2);
  o.last_step = AL_LAST_DROP;
  m = altest::PlanAndLoad(s, o, "sp_drop.alm");
  ASSERT_TRUE(m);
  CheckGroups(m);
  EXPECT_EQ(altest::Info(m).padded, 0u);
  al_manifest_free(m);
  o = SpOptions(8, 2, d14, 2);
  o.policy = AL_POLICY_EQUAL_TOKEN;
  m = altest::PlanAndLoad(s, o, "sp_et.alm");
  ASSERT_TRUE(m);
  CheckGroups(m);
  auto occ = LeaderOccurrences(m);
  EXPECT_EQ(occ.size(), altest::Info(m).samples);
  al_manifest_free(m);
}

TEST(SpPlan, StartStepKeepsTheFullPlansSteps) {
  Shapes s = altest::MakeShapes(2000, 12);
  al_plan_options o = SpOptions(8, 2, kD1248, 4);
  al_manifest *full = altest::PlanAndLoad(s, o, "sp_full.alm");
  o.start_step = 7;
  al_manifest *cut = altest::PlanAndLoad(s, o, "sp_cut.alm");
  ASSERT_TRUE(full && cut);
  al_manifest_info fi = altest::Info(full), ci = altest::Info(cut);
  ASSERT_EQ(ci.first_step, 7u);
  ASSERT_EQ(ci.steps + 7, fi.steps);
  for (uint32_t st = 7; st < fi.steps; st++)
    for (uint32_t r = 0; r < 8; r++)
      for (uint32_t k = 0; k < 2; k++) {
        al_micro_ref a = AL_MICRO_REF_INIT, b = AL_MICRO_REF_INIT;
        ASSERT_EQ(al_manifest_micro(full, st, r, k, &a), AL_OK);
        ASSERT_EQ(al_manifest_micro(cut, st, r, k, &b), AL_OK);
        ASSERT_EQ(a.sp_degree, b.sp_degree);
        ASSERT_EQ(a.sp_rank, b.sp_rank);
        ASSERT_EQ(a.n_samples, b.n_samples);
        for (size_t q = 0; q < a.n_samples; q++) ASSERT_EQ(a.samples[q], b.samples[q]);
      }
  CheckGroups(cut);
  al_manifest_free(full), al_manifest_free(cut);
}

TEST(SpPlan, ReplanKeepsBucketsAndDegreesAndRefusesAWorldTheyDoNotDivide) {
  Shapes s = altest::MakeShapes(3000, 13);
  al_manifest *old = altest::PlanAndLoad(s, SpOptions(8, 2, kD1248, 4), "sp_old.alm");
  ASSERT_TRUE(old);
  for (uint32_t w2 : {8u, 16u}) {
    al_plan *p = nullptr;
    ASSERT_EQ(al_plan_replan(&p, old, 12, w2), AL_OK) << al_last_error();
    std::string path = altest::TmpPath("sp_new.alm");
    ASSERT_EQ(al_plan_save(p, path.c_str(), al_manifest_key_fn, old), AL_OK) << al_last_error();
    std::string again = altest::TmpPath("sp_new2.alm");
    al_plan *p2 = nullptr;
    ASSERT_EQ(al_plan_replan(&p2, old, 12, w2), AL_OK);
    ASSERT_EQ(al_plan_save(p2, again.c_str(), al_manifest_key_fn, old), AL_OK);
    EXPECT_EQ(ReadFile(path), ReadFile(again)) << "a re-plan is deterministic";
    al_plan_free(p), al_plan_free(p2);
    al_manifest *m = nullptr;
    ASSERT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
    al_manifest_info in = altest::Info(m);
    EXPECT_EQ(in.world, w2);
    EXPECT_EQ(in.first_step, 12u);
    EXPECT_STREQ(in.sync, "micro");
    CheckGroups(m);
    // Old steps < 12 plus the re-plan: every sample once, in its old bucket.
    auto occ = LeaderOccurrences(m);
    for (uint32_t st = 0; st < 12; st++)
      for (uint32_t r = 0; r < 8; r++)
        for (uint32_t k = 0; k < 2; k++) {
          al_micro_ref ref = AL_MICRO_REF_INIT;
          ASSERT_EQ(al_manifest_micro(old, st, r, k, &ref), AL_OK);
          if (ref.sp_rank || ref.n_padded) continue;
          for (size_t q = 0; q < ref.n_samples; q++) occ[ref.samples[q]]++;
        }
    EXPECT_EQ(occ.size(), altest::Info(old).samples);
    for (auto &kv : occ) ASSERT_EQ(kv.second, 1) << "sample " << kv.first << " world " << w2;
    for (size_t b = 0; b < in.buckets; b++) {
      al_bucket_info nb = AL_BUCKET_INFO_INIT, ob = AL_BUCKET_INFO_INIT;
      ASSERT_EQ(al_manifest_bucket(m, b, &nb), AL_OK);
      ASSERT_EQ(al_manifest_bucket(old, b, &ob), AL_OK);
      EXPECT_EQ(nb.sp_degree, ob.sp_degree) << "bucket " << b;
    }
    al_manifest_free(m);
  }
  al_plan *p = nullptr;
  EXPECT_EQ(al_plan_replan(&p, old, 12, 4), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("8 does not divide the world size 4"),
            std::string::npos)
      << al_last_error();
  EXPECT_FALSE(p);
  al_manifest_free(old);
}

TEST(SpPlan, OptionErrorsNameTheOption) {
  Shapes s = altest::MakeShapes(200, 1);
  al_cost_model c = altest::DefaultCost();
  al_plan_input in = s.Input();
  const uint32_t three[] = {3}, sixteen[] = {1, 16}, twice[] = {2, 2}, zero[] = {0};
  const uint32_t many[12] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1};
  struct Case {
    const uint32_t *d;
    size_t n;
    int sync;
    int rc;
    const char *says;
  } cases[] = {
      {three, 1, 0, AL_EINVAL, "sp-degrees: 3 is not a power of two"},
      {zero, 1, 0, AL_EINVAL, "sp-degrees: 0 is not a power of two"},
      {sixteen, 2, 0, AL_EINVAL, "sp-degrees: 16 does not divide the world size 8"},
      {twice, 2, 0, AL_EINVAL, "sp-degrees: 2 is listed twice"},
      {many, 12, 0, AL_ERANGE, "sp-degrees: 12 degrees, at most 11"},
      {nullptr, 2, 0, AL_EINVAL, "sp-degrees: 2 degrees but a NULL array"},
      {nullptr, 0, 7, AL_EINVAL, "sync 7 is not a sync model"},
  };
  for (const Case &k : cases) {
    al_plan_options o{};
    o.world = 8;
    o.sp_degrees = k.d;
    o.n_sp_degrees = k.n;
    o.sync = (al_sync)k.sync;
    al_plan *p = nullptr;
    EXPECT_EQ(al_plan_build(&p, &in, &c, &o), k.rc) << k.says;
    EXPECT_NE(std::string(al_last_error()).find(k.says), std::string::npos) << al_last_error();
    EXPECT_FALSE(p);
  }
}

TEST(SpPlan, SweepOfWorldsDegreesPoliciesAndLastSteps) {
  // Every plan loads (manifest_check proves the groups) and holds every sample once.
  Shapes s = altest::MakeShapes(300, 21);
  const uint32_t all[] = {1, 2, 4, 8, 16, 32, 64};
  int plans = 0;
  for (uint32_t W : {1u, 2u, 3u, 4u, 8u, 12u, 64u})
    for (uint32_t K : {1u, 3u})
      for (uint32_t mask : {0x1u, 0x3u, 0x6u, 0xFu, 0x8u, 0x55u, 0x7Fu}) {
        std::vector<uint32_t> d;
        for (int b = 0; b < 7; b++)
          if ((mask >> b & 1) && W % all[b] == 0) d.push_back(all[b]);
        if (d.empty()) continue;
        for (int pol = 0; pol < 3; pol++)
          for (int last = pol % 2; last < 2; last += 2) {
            al_plan_options o = SpOptions(W, K, d.data(), d.size(), (al_sync)((W + K + pol) % 3));
            o.policy = (al_policy)pol;
            o.last_step = (al_last_step)last;
            o.mem_tokens = 8192;
            o.window = 3;
            al_manifest *m = altest::PlanAndLoad(s, o, "sp_sweep.alm");
            ASSERT_TRUE(m) << "W " << W << " K " << K << " mask " << mask << " policy " << pol;
            CheckGroups(m);
            al_manifest_info in = altest::Info(m);
            auto occ = LeaderOccurrences(m);
            ASSERT_EQ(occ.size(), in.samples);
            ASSERT_EQ(in.samples + in.dropped + in.rejected, s.w.size());
            for (auto &kv : occ) ASSERT_EQ(kv.second, 1);
            al_manifest_free(m);
            plans++;
          }
      }
  EXPECT_GT(plans, 100);
}

// Forged followers: a manifest's groups are proved on load.
using altest::Forge;

TEST(SpPlan, ForgedGroupsAreRefusedOnLoad) {
  Shapes s = altest::MakeShapes(600, 7);
  const uint32_t d8[] = {8};
  al_manifest *m = altest::PlanAndLoad(s, SpOptions(8, 1, d8, 1), "sp_real.alm");
  ASSERT_TRUE(m);
  al_manifest_free(m);
  std::string src = altest::TmpPath("sp_real.alm"), dst = altest::TmpPath("sp_forged.alm");
  struct Case {
    std::function<void(Adaptiveload__RankWork **ranks)> lie;
    const char *says;
  } cases[] = {
      {[](Adaptiveload__RankWork **rk) { rk[5]->micro[0]->sp_rank = 4; },
       "a group's ranks run one micro-batch"},
      {[](Adaptiveload__RankWork **rk) { rk[2]->micro[0]->cost_ms += 1; },
       "a group's ranks run one micro-batch"},
      {[](Adaptiveload__RankWork **rk) {
         for (int r = 0; r < 8; r++) rk[r]->micro[0]->sp_degree = 16;
       },
       "is not one the plan allows"},
      {[](Adaptiveload__RankWork **rk) { rk[5]->micro[0]->sp_rank = 6; }, "has no leader"},
      {[](Adaptiveload__RankWork **rk) {
         rk[1]->micro[0]->n_samples = rk[0]->micro[0]->n_samples;
         rk[1]->micro[0]->samples = rk[0]->micro[0]->samples;
       },
       "lists samples"},
  };
  for (const Case &c : cases) {
    ASSERT_EQ(Forge(src, dst,
                    [&](uint32_t tag, ProtobufCMessage *msg) {
                      if (tag != AL_REC_MANIFEST_CHUNK) return;
                      auto *ch = (Adaptiveload__ManifestChunk *)msg;
                      if (ch->n_steps && ch->steps[0]->step == 0) c.lie(ch->steps[0]->ranks);
                    }),
              AL_OK);
    al_manifest *f = nullptr;
    EXPECT_EQ(al_manifest_load(&f, dst.c_str()), AL_EFORMAT) << c.says;
    EXPECT_NE(std::string(al_last_error()).find(c.says), std::string::npos) << al_last_error();
    al_manifest_free(f);
  }
}

} // namespace
