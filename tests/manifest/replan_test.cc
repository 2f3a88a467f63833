// The elastic re-plan keeps the global batch: tokens per step, measured from the manifests'
// step totals (al_manifest_step), stay within 1% of the old plan's over the same steps (or the
// re-plan is refused, saying why); a new T is planned only when asked for (step_tokens); the
// samples the old plan dropped stay counted; every sample is still scheduled exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tests/planner/plan_fixtures.h"

using altest::Info;
using altest::MakeShapes;
using altest::Occurrences;
using altest::PlanAndLoad;
using altest::Shapes;

namespace {

al_plan_options Opts(uint32_t world, al_policy pol) {
  al_plan_options o{};
  o.world = world;
  o.policy = pol;
  o.seed = 3;
  return o;
}

// Mean real tokens per step of steps [from, to) of m, from the step totals.
double MeanStepTokens(const al_manifest *m, uint32_t from, uint32_t to) {
  double sum = 0;
  for (uint32_t s = from; s < to; s++) {
    al_step_info si = AL_STEP_INFO_INIT;
    EXPECT_EQ(al_manifest_step(m, s, &si), AL_OK) << "step " << s;
    sum += (double)si.tokens;
  }
  return to > from ? sum / (to - from) : 0;
}

// Re-plans, saves and loads (nullptr, with the status in *rc, when the re-plan is refused).
al_manifest *Replan(const al_manifest *old, uint32_t at, const al_replan_options &o,
                    const std::string &name, int *rc = nullptr) {
  al_plan *p = nullptr;
  int r = al_plan_replan_opts(&p, old, at, &o);
  if (rc) *rc = r;
  if (r) {
    EXPECT_EQ(p, nullptr);
    return nullptr;
  }
  std::string path = altest::TmpPath(name);
  EXPECT_EQ(al_plan_save(p, path.c_str(), al_manifest_key_fn, (void *)old), AL_OK)
      << al_last_error();
  al_plan_free(p);
  al_manifest *m = nullptr;
  EXPECT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
  return m;
}

// The old plan's steps < at plus the new plan schedule every sample of the old plan exactly
// once (`before`: what ran before the old plan's first step, in a chain of re-plans).
void CheckExactlyOnce(const al_manifest *old, uint32_t at, const al_manifest *nm,
                      const std::string &what, std::map<uint64_t, int> before = {}) {
  auto all = before;
  for (auto &kv : Occurrences(old)) all[kv.first] += kv.second;
  for (auto &kv : Occurrences(old, 0, at)) before[kv.first] += kv.second;
  for (auto &kv : Occurrences(nm)) before[kv.first] += kv.second;
  EXPECT_EQ(before, all) << what;
}

struct Resize {
  const char *name;
  uint32_t w0;
  std::vector<uint32_t> chain; // world sizes re-planned to, in turn
};

} // namespace

// The table of the README: W0 -> W1 [-> W2], re-planned at a third of the epoch (then at a
// further third), both policies. Tokens per step over the re-planned steps, from the step
// totals of the manifests, against the old plan's over the same steps and the original's
// target T; K' = ceil(K W / W').
TEST(ReplanGlobalBatch, TokensPerStepKeptWithinOnePercent) {
  Shapes s = MakeShapes(6000, 29);
  const Resize cases[] = {{"4->8", 4, {8}},
                          {"8->3", 8, {3}},
                          {"8->1", 8, {1}},
                          {"4->8->2", 4, {8, 2}}};
  std::printf("%-12s %-8s %6s %4s %9s %12s %12s %9s %8s\n", "policy", "resize", "at", "K'",
              "target T", "old tok/st", "new tok/st", "diff", "steps");
  for (al_policy pol : {AL_POLICY_ADAPTIVE, AL_POLICY_EQUAL_TOKEN})
    for (const Resize &c : cases) {
      al_manifest *orig = PlanAndLoad(s, Opts(c.w0, pol), "gb_orig.alm");
      ASSERT_TRUE(orig);
      al_manifest_info oi = Info(orig);
      const al_manifest *old = orig;
      al_manifest *prev = nullptr;
      std::map<uint64_t, int> ran; // the samples of the steps before `old`'s first
      uint32_t w_old = c.w0, k_old = oi.micro_per_step;
      for (size_t i = 0; i < c.chain.size(); i++) {
        al_manifest_info pi = Info(old);
        uint32_t at = pi.first_step + pi.steps / 3, end = pi.first_step + pi.steps;
        uint32_t w = c.chain[i];
        std::string what = std::string(al_policy_name(pol)) + " " + c.name + " step " +
                           std::to_string(at) + " W'=" + std::to_string(w);
        al_plan *p = nullptr;
        ASSERT_EQ(al_plan_replan(&p, old, at, w), AL_OK) << what << ": " << al_last_error();
        std::string path = altest::TmpPath("gb_new.alm");
        ASSERT_EQ(al_plan_save(p, path.c_str(), al_manifest_key_fn, (void *)old), AL_OK);
        al_plan_free(p);
        al_manifest *nm = nullptr;
        ASSERT_EQ(al_manifest_load(&nm, path.c_str()), AL_OK) << al_last_error();
        al_manifest_info ni = Info(nm);
        uint32_t k = (k_old * w_old + w - 1) / w;
        EXPECT_EQ(ni.micro_per_step, k) << what;
        EXPECT_EQ(ni.step_tokens, oi.step_tokens) << what;
        EXPECT_EQ(ni.first_step, at) << what;
        altest::CheckSteps(nm);
        CheckExactlyOnce(old, at, nm, what, ran);
        double was = MeanStepTokens(old, at, end);
        double now = MeanStepTokens(nm, ni.first_step, ni.first_step + ni.steps);
        std::printf("%-12s %-8s %6u %4u %9llu %12.0f %12.0f %+8.2f%% %4u/%-4u\n",
                    al_policy_name(pol), c.name, at, k, (unsigned long long)ni.step_tokens, was,
                    now, 100 * (now / was - 1), ni.steps, end - at);
        EXPECT_NEAR(now / was, 1.0, 0.01) << what;
        // The summary's figure is the step totals' mean.
        EXPECT_NEAR(ni.step_tokens_mean, now, 1e-6 * now) << what;
        for (auto &kv : Occurrences(old, 0, at)) ran[kv.first] += kv.second;
        al_manifest_free(prev);
        prev = nm;
        old = nm;
        w_old = w, k_old = k;
      }
      al_manifest_free(prev);
      al_manifest_free(orig);
    }
}

// Real tokens of each step of m (from the step totals), in step order.
std::vector<uint64_t> StepTokens(const al_manifest *m) {
  al_manifest_info in = Info(m);
  std::vector<uint64_t> t;
  for (uint32_t s = in.first_step; s < in.first_step + in.steps; s++) {
    al_step_info si = AL_STEP_INFO_INIT;
    EXPECT_EQ(al_manifest_step(m, s, &si), AL_OK) << "step " << s;
    t.push_back(si.tokens);
  }
  return t;
}

// Population CV of v.
double Cv(const std::vector<uint64_t> &v) {
  double sum = 0, sq = 0;
  for (uint64_t x : v) sum += (double)x, sq += (double)x * (double)x;
  double mean = v.empty() ? 0 : sum / v.size(), var = v.empty() ? 0 : sq / v.size() - mean * mean;
  return mean > 0 ? std::sqrt(var > 0 ? var : 0) / mean : 0;
}

struct RangeCase {
  const char *name;
  al_policy policy;
  uint32_t w0, k0;      // the old plan's world and micro_per_step (0: from step_tokens)
  uint64_t step_tokens; // the old plan's T (0: W K M_mem)
  uint32_t w1;          // the re-plan's world
  bool sp;              // sp-degrees 1,2 at mem-tokens 32768
};

// Every step of a re-plan that keeps the global batch holds what one step of the old plan held:
// between the fewest and the most tokens of the old plan's steps (so never above T where the
// old steps are not), not only the old mean over the steps. The schedule groups micro-batches
// by cost; where W' K' > W K a step of the costliest batches held up to 1.9 T (4 -> 8: sixteen
// clips of 61,200 tokens against T = 524,288 at W = 8) and one of the cheapest a fraction of
// the old fewest. Re-planned at the first step, a third of the epoch and the next-to-last step;
// each re-plan covers exactly the samples the old plan had left, K' micro-batches on every rank
// of every step, the same mean, and is byte-identical when made twice.
TEST(ReplanStepRange, EveryStepWithinTheOldPlansRange) {
  Shapes s = MakeShapes(6000, 29);
  const uint32_t sp12[] = {1, 2};
  const RangeCase cases[] = {
      {"4->8", AL_POLICY_ADAPTIVE, 4, 1, 0, 8, false},
      {"4->8 T=2WM", AL_POLICY_ADAPTIVE, 4, 0, 4ull * 2 * 65536, 8, false},
      {"2->1", AL_POLICY_ADAPTIVE, 2, 1, 0, 1, false},
      {"2->1 K=2", AL_POLICY_ADAPTIVE, 2, 2, 0, 1, false},
      {"4->3", AL_POLICY_ADAPTIVE, 4, 1, 0, 3, false},
      {"4->3 T=2WM", AL_POLICY_ADAPTIVE, 4, 0, 4ull * 2 * 65536, 3, false},
      {"2->3", AL_POLICY_ADAPTIVE, 2, 1, 0, 3, false},
      {"4->8", AL_POLICY_EQUAL_TOKEN, 4, 1, 0, 8, false},
      {"4->3", AL_POLICY_EQUAL_TOKEN, 4, 1, 0, 3, false},
      {"4->8 sp 1,2", AL_POLICY_ADAPTIVE, 4, 2, 0, 8, true},
  };
  std::printf("%-12s %-12s %5s %3s %9s | %-19s %7s | %-19s %7s %6s\n", "policy", "resize", "at",
              "K'", "T", "old min..max", "old CV", "new min..max", "new CV", "steps");
  for (const RangeCase &c : cases) {
    al_plan_options po = Opts(c.w0, c.policy);
    po.micro_per_step = c.k0;
    po.step_tokens = c.step_tokens;
    if (c.sp) po.sp_degrees = sp12, po.n_sp_degrees = 2, po.mem_tokens = 32768;
    al_manifest *old = PlanAndLoad(s, po, "range_old.alm");
    ASSERT_TRUE(old);
    al_manifest_info oi = Info(old);
    std::vector<uint64_t> ot = StepTokens(old);
    uint64_t lo = *std::min_element(ot.begin(), ot.end());
    uint64_t hi = *std::max_element(ot.begin(), ot.end());
    for (uint32_t at : {0u, oi.steps / 3, oi.steps - 2}) {
      std::string what = std::string(al_policy_name(c.policy)) + " " + c.name + " at step " +
                         std::to_string(at);
      al_replan_options o{0, c.w1, 0, 0};
      al_plan *p = nullptr;
      ASSERT_EQ(al_plan_replan_opts(&p, old, at, &o), AL_OK) << what << ": " << al_last_error();
      std::string a = altest::TmpPath("range_a.alm"), b = altest::TmpPath("range_b.alm");
      ASSERT_EQ(al_plan_save(p, a.c_str(), al_manifest_key_fn, (void *)old), AL_OK);
      al_plan_free(p);
      ASSERT_EQ(al_plan_replan_write(old, at, &o, b.c_str()), AL_OK) << al_last_error();
      EXPECT_EQ(altest::ReadFile(a), altest::ReadFile(b)) << what << ": not deterministic";
      al_manifest *nm = nullptr;
      ASSERT_EQ(al_manifest_load(&nm, a.c_str()), AL_OK) << what << ": " << al_last_error();
      al_manifest_info ni = Info(nm);
      EXPECT_EQ(ni.first_step, at) << what;
      EXPECT_EQ(ni.micro_per_step, (oi.micro_per_step * c.w0 + c.w1 - 1) / c.w1) << what;
      EXPECT_EQ(ni.step_tokens, oi.step_tokens) << what;
      if (c.sp) { // loading checked the groups and K on every rank; CheckSteps knows no SP
        EXPECT_EQ(ni.unequal_steps, 0u) << what;
      } else {
        altest::CheckSteps(nm);
      }
      CheckExactlyOnce(old, at, nm, what);
      std::vector<uint64_t> nt = StepTokens(nm), rest(ot.begin() + (at - oi.first_step), ot.end());
      for (size_t i = 0; i < nt.size(); i++) {
        EXPECT_GE(nt[i], lo) << what << ": step " << at + i;
        EXPECT_LE(nt[i], hi) << what << ": step " << at + i;
        if (hi <= oi.step_tokens) {
          EXPECT_LE(nt[i], oi.step_tokens) << what << ": step " << at + i;
        }
      }
      EXPECT_NEAR(MeanStepTokens(nm, at, at + ni.steps) /
                      MeanStepTokens(old, at, oi.first_step + oi.steps),
                  1.0, 0.01)
          << what;
      std::printf("%-12s %-12s %5u %3u %9llu | %8llu..%-9llu %6.1f%% | %8llu..%-9llu %6.1f%% %6u\n",
                  al_policy_name(c.policy), c.name, at, ni.micro_per_step,
                  (unsigned long long)ni.step_tokens, (unsigned long long)lo,
                  (unsigned long long)hi, 100 * Cv(rest),
                  (unsigned long long)*std::min_element(nt.begin(), nt.end()),
                  (unsigned long long)*std::max_element(nt.begin(), nt.end()), 100 * Cv(nt),
                  ni.steps);
      al_manifest_free(nm);
    }
    al_manifest_free(old);
  }
}

// Where no exchange of micro-batches between steps can hold the old plan's range, the re-plan is
// refused, naming the range, the steps outside and the way out; a new T is planned as asked.
// Eight 900-token images and sixteen of 225 at M_mem = 900 on one rank: every old step holds
// 900 (one large image, or four small ones). On two ranks the same 12 steps hold two
// micro-batches each, 900 on average, but a large image and anything beside it is 1,125 or more.
TEST(ReplanStepRange, RefusedWhereNoExchangeHoldsTheRange) {
  Shapes s;
  for (int i = 0; i < 24; i++) {
    uint32_t side = i < 8 ? 480 : 240;
    s.w.push_back(side), s.h.push_back(side), s.f.push_back(1);
    s.keys.push_back("k" + std::to_string(i));
  }
  al_plan_options po = Opts(1, AL_POLICY_ADAPTIVE);
  po.mem_tokens = 900;
  al_manifest *old = PlanAndLoad(s, po, "refuse_old.alm");
  ASSERT_TRUE(old);
  ASSERT_EQ(Info(old).steps, 12u);
  for (uint64_t t : StepTokens(old)) ASSERT_EQ(t, 900u);
  int rc = 0;
  al_replan_options o{0, 2, 0, 0};
  EXPECT_EQ(Replan(old, 0, o, "refuse_new.alm", &rc), nullptr);
  EXPECT_EQ(rc, AL_ERANGE);
  std::string e = al_last_error();
  std::printf("refused: %s\n", e.c_str());
  EXPECT_NE(e.find("refuse_old.alm: its steps hold 900..900 tokens each; at world 2 with 1 "
                   "micro-batches per rank per step, 12 of the re-planned steps stay outside "
                   "that range whatever micro-batches the steps exchange (the first, step 0, "
                   "holds 450)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("give step_tokens (--step-tokens T)"), std::string::npos) << e;
  // A new T: no range to keep.
  o.step_tokens = 2 * 900;
  al_manifest *nm = Replan(old, 0, o, "refuse_new.alm", &rc);
  ASSERT_TRUE(nm) << al_last_error();
  CheckExactlyOnce(old, 0, nm, "new T");
  al_manifest_free(nm);
  al_manifest_free(old);
}

// Where the samples left cannot fill the old steps' W' x K' micro-batches, the re-plan is
// refused with the figures; a new T (step_tokens) is then planned as asked.
TEST(ReplanGlobalBatch, RefusedWhereTCannotBeKeptUnlessAskedForANewT) {
  Shapes s = MakeShapes(600, 31);
  al_manifest *old = PlanAndLoad(s, Opts(4, AL_POLICY_ADAPTIVE), "ref_old.alm");
  ASSERT_TRUE(old);
  al_manifest_info oi = Info(old);
  uint32_t at = oi.steps / 2;
  int rc = 0;
  al_replan_options o{0, 64, 0, 0};
  EXPECT_EQ(Replan(old, at, o, "ref_new.alm", &rc), nullptr);
  EXPECT_EQ(rc, AL_ERANGE);
  std::string e = al_last_error();
  EXPECT_NE(e.find("ref_old.alm: its steps " + std::to_string(at) + ".."), std::string::npos) << e;
  EXPECT_NE(e.find("at world 64 with 1 micro-batches per rank per step"), std::string::npos) << e;
  EXPECT_NE(e.find("--step-tokens"), std::string::npos) << e;
  // A new T: micro-batches aim at T2 / (W' K'), K' the fewest within M_mem.
  o.step_tokens = 64ull * 8192;
  al_manifest *nm = Replan(old, at, o, "ref_new.alm", &rc);
  ASSERT_TRUE(nm) << al_last_error();
  al_manifest_info ni = Info(nm);
  EXPECT_EQ(ni.step_tokens, o.step_tokens);
  EXPECT_EQ(ni.micro_per_step, 1u);
  EXPECT_LE(ni.micro_tokens, 8192u);
  altest::CheckSteps(nm);
  CheckExactlyOnce(old, at, nm, "new T");
  al_manifest_free(nm);
  // T2 / (W' K') above M_mem is refused as al_plan_build refuses it.
  o.step_tokens = 64ull * 65536 * 2;
  o.micro_per_step = 1;
  EXPECT_EQ(Replan(old, at, o, "ref_new.alm", &rc), nullptr);
  EXPECT_EQ(rc, AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("raise --micro-per-step to 2"));
  al_manifest_free(old);
}

// micro_per_step chooses K' (the global batch still kept); too few micro-batches for the
// samples within M_mem are refused.
TEST(ReplanGlobalBatch, MicroPerStepChoosesK) {
  Shapes s = MakeShapes(6000, 37);
  al_manifest *old = PlanAndLoad(s, Opts(8, AL_POLICY_ADAPTIVE), "k_old.alm");
  ASSERT_TRUE(old);
  al_manifest_info oi = Info(old);
  uint32_t at = oi.steps / 4, end = oi.steps;
  al_replan_options o{0, 2, 8, 0}; // K' = 4 by default
  al_manifest *nm = Replan(old, at, o, "k_new.alm");
  ASSERT_TRUE(nm) << al_last_error();
  al_manifest_info ni = Info(nm);
  EXPECT_EQ(ni.micro_per_step, 8u);
  EXPECT_EQ(ni.steps, end - at);
  EXPECT_NEAR(MeanStepTokens(nm, at, end) / MeanStepTokens(old, at, end), 1.0, 0.01);
  altest::CheckSteps(nm);
  CheckExactlyOnce(old, at, nm, "K'=8");
  al_manifest_free(nm);
  // One micro-batch on one rank cannot hold a step of eight ranks' batches within M_mem.
  o = al_replan_options{0, 1, 1, 0};
  int rc = 0;
  EXPECT_EQ(Replan(old, at, o, "k_new.alm", &rc), nullptr);
  EXPECT_EQ(rc, AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("at world 1 with 1 micro-batches per rank per step"));
  al_manifest_free(old);
}

// Samples the old plan dropped (--last-step drop) stay dropped and counted: the re-planned
// manifest's summary agrees with its key table, so it loads (it once said "3 dropped" over a
// key table marking 8, and nothing could load it).
TEST(ReplanDropped, OldDropsCountedInTheSummary) {
  Shapes s = MakeShapes(1000, 41);
  for (al_policy pol : {AL_POLICY_EQUAL_TOKEN, AL_POLICY_ADAPTIVE}) {
    al_plan_options po = Opts(3, pol);
    po.last_step = AL_LAST_DROP;
    po.mem_tokens = 16384;
    al_manifest *old = PlanAndLoad(s, po, "drop_old.alm");
    ASSERT_TRUE(old);
    al_manifest_info oi = Info(old);
    if (pol == AL_POLICY_EQUAL_TOKEN) {
      ASSERT_GT(oi.dropped, 0u) << "the fixture must drop samples";
    }
    int replanned = 0;
    for (uint32_t w : {5u, 2u, 7u}) {
      std::string path = altest::TmpPath("drop_new.alm");
      al_plan *p = nullptr;
      int rc = al_plan_replan(&p, old, 0, w);
      if (rc == AL_ERANGE) continue; // refused, not a manifest that cannot load
      ASSERT_EQ(rc, AL_OK) << al_last_error();
      al_manifest_info pi = AL_MANIFEST_INFO_INIT;
      ASSERT_EQ(al_plan_get_info(p, &pi), AL_OK);
      ASSERT_EQ(al_plan_save(p, path.c_str(), al_manifest_key_fn, (void *)old), AL_OK);
      al_plan_free(p);
      al_manifest *nm = nullptr;
      ASSERT_EQ(al_manifest_load(&nm, path.c_str()), AL_OK) << al_last_error();
      al_manifest_info ni = Info(nm);
      uint64_t marked = 0;
      for (uint64_t i = 0; i < ni.index_samples; i++) marked += al_manifest_key_status(nm, i) == 16;
      EXPECT_EQ(ni.dropped, marked);
      EXPECT_EQ(pi.dropped, marked);
      EXPECT_GE(ni.dropped, oi.dropped);
      EXPECT_EQ(ni.samples + ni.dropped, oi.samples + oi.dropped);
      al_manifest_free(nm);
      replanned++;
    }
    EXPECT_GT(replanned, 0) << al_policy_name(pol);
    al_manifest_free(old);
  }
}

TEST(ReplanArgs, Refused) {
  Shapes s = MakeShapes(300, 43);
  al_manifest *old = PlanAndLoad(s, Opts(2, AL_POLICY_ADAPTIVE), "args_old.alm");
  ASSERT_TRUE(old);
  al_plan *p = nullptr;
  al_replan_options o{0, 0, 0, 0};
  EXPECT_EQ(al_plan_replan_opts(&p, old, 0, &o), AL_EINVAL);
  EXPECT_EQ(al_plan_replan_opts(&p, old, 0, nullptr), AL_EINVAL);
  o.world = 2;
  o.micro_per_step = (1u << 20) + 1;
  EXPECT_EQ(al_plan_replan_opts(&p, old, 0, &o), AL_ERANGE);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(al_plan_replan_write(old, 0, &o, nullptr), AL_EINVAL);
  // al_plan_replan_write is re-plan and save in one call: the same bytes.
  o.micro_per_step = 0;
  std::string a = altest::TmpPath("args_a.alm"), b = altest::TmpPath("args_b.alm");
  ASSERT_EQ(al_plan_replan_write(old, 1, &o, a.c_str()), AL_OK) << al_last_error();
  ASSERT_EQ(al_plan_replan_opts(&p, old, 1, &o), AL_OK);
  ASSERT_EQ(al_plan_save(p, b.c_str(), al_manifest_key_fn, (void *)old), AL_OK);
  al_plan_free(p);
  EXPECT_EQ(altest::ReadFile(a), altest::ReadFile(b));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_REPLAN_OPTIONS), sizeof(al_replan_options));
  al_manifest_free(old);
}
