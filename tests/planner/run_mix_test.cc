// A mixture of sources planned as one run (planner/al_run.h, "mixtures"): the one-source mixture
// is the run of its input byte for byte; each source's share over every 100 steps is its weight's
// (by tokens, samples and predicted compute); every pass draws each sample exactly once; stop
// sources leave and until ends the run; slices equal the full run; bad mixtures are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_run.h"
#include "planner/plan_internal.h"
#include "planner/run_internal.h"
}

namespace {

using altest::DefaultCost;
using altest::Shapes;

struct RunHandle {
  al_run *r = nullptr;
  ~RunHandle() { al_run_free(r); }
};

struct PlanHandle {
  al_plan *p = nullptr;
  ~PlanHandle() { al_plan_free(p); }
};

al_plan_options Options(uint32_t W, uint32_t K) {
  al_plan_options o = AL_PLAN_OPTIONS_INIT;
  o.world = W;
  o.micro_per_step = K;
  o.seed = 11;
  return o;
}

// Only images (one frame), or only clips: sources that differ in what a sample costs.
Shapes Filtered(size_t n, uint64_t seed, bool images) {
  Shapes all = altest::MakeShapes(n * 3, seed), s;
  for (size_t i = 0; i < all.w.size() && s.w.size() < n; i++)
    if ((all.f[i] == 1) == images) {
      s.w.push_back(all.w[i]);
      s.h.push_back(all.h[i]);
      s.f.push_back(all.f[i]);
      s.keys.push_back(all.keys[i]);
    }
  return s;
}

struct Mix {
  std::vector<Shapes> shapes;
  std::vector<al_plan_input> inputs;
  std::vector<std::string> names;
  std::vector<al_run_source> src;
  al_run_mix mix = AL_RUN_MIX_INIT;

  void Add(const std::string &name, Shapes s, double w, al_exhaust e) {
    shapes.push_back(std::move(s));
    names.push_back(name);
    al_run_source x = AL_RUN_SOURCE_INIT;
    x.weight = w;
    x.on_exhaust = e;
    src.push_back(x);
  }
  // Pointers into the vectors, taken once they stop growing.
  const al_run_source *Sources() {
    inputs.clear();
    for (auto &s : shapes) inputs.push_back(s.Input());
    for (size_t i = 0; i < src.size(); i++) {
      src[i].input = &inputs[i];
      src[i].name = names[i].c_str();
    }
    return src.data();
  }
  int Open(al_run **out, const al_plan_options &o) {
    al_cost_model c = DefaultCost();
    const al_run_source *s = Sources();
    return al_run_open_mixture(out, s, src.size(), &mix, &c, &o);
  }
};

// The three-source mixture of a run: a large web set, a small high-quality set that repeats,
// an image set.
Mix ThreeSources(al_mix_by by, uint32_t steps) {
  Mix m;
  m.Add("web", altest::MakeShapes(12000, 3), 0.5, AL_EXHAUST_REPEAT);
  m.Add("hq", Filtered(1500, 5, false), 0.3, AL_EXHAUST_REPEAT);
  m.Add("images", Filtered(6000, 7, true), 0.2, AL_EXHAUST_REPEAT);
  m.mix.by = by;
  m.mix.steps = steps;
  return m;
}

double UnitOf(const al_plan *p, uint32_t bucket, al_mix_by by) {
  const plan_bucket &k = p->buckets[bucket];
  if (by == AL_MIX_SAMPLES) return 1;
  if (by == AL_MIX_COMPUTE) return k.batch_cost_ms / k.batch_size;
  return (double)k.tokens;
}

// Per step, per source: the units its real samples hold.
std::vector<std::vector<double>> StepShares(const al_run *r, const al_plan *p, al_mix_by by,
                                            uint32_t n_src) {
  std::vector<std::vector<double>> out(p->steps, std::vector<double>(n_src, 0));
  for (uint32_t s = 0; s < p->steps; s++)
    for (uint64_t x = p->slot[(size_t)s * p->world]; x < p->slot[(size_t)(s + 1) * p->world]; x++) {
      const plan_micro &m = p->micro[x];
      if (m.padded) continue;
      for (uint32_t k = 0; k < m.n; k++) {
        uint32_t src = 0;
        EXPECT_EQ(al_run_draw_where(r, p->mb[m.first + k], &src, nullptr, nullptr), AL_OK);
        out[s][src] += UnitOf(p, m.bucket, by);
      }
    }
  return out;
}

TEST(RunMix, OneStopSourceIsThePlainRunByteForByte) {
  Shapes s = altest::MakeShapes(5000, 2);
  al_plan_input in = s.Input();
  al_cost_model c = DefaultCost();
  al_plan_options o = Options(16, 2);
  RunHandle plain, mixed;
  ASSERT_EQ(al_run_open(&plain.r, &in, &c, &o), AL_OK) << al_last_error();
  Mix m;
  m.Add("only", s, 3.0, AL_EXHAUST_STOP);
  ASSERT_EQ(m.Open(&mixed.r, o), AL_OK) << al_last_error();
  al_run_info a = AL_RUN_INFO_INIT, b = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(plain.r, &a), AL_OK);
  ASSERT_EQ(al_run_get_info(mixed.r, &b), AL_OK);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(b.sources, 1u);
  PlanHandle pa, pb;
  ASSERT_EQ(al_run_plan_steps(plain.r, 16, 0, a.steps, &pa.p), AL_OK);
  ASSERT_EQ(al_run_plan_steps(mixed.r, 16, 0, b.steps, &pb.p), AL_OK);
  ASSERT_EQ(pa.p->n_mb, pb.p->n_mb);
  EXPECT_EQ(0, memcmp(pa.p->mb, pb.p->mb, pa.p->n_mb * sizeof *pa.p->mb));
  ASSERT_EQ(pa.p->n_micro, pb.p->n_micro);
  EXPECT_EQ(0, memcmp(pa.p->status, pb.p->status, pa.p->index_samples));
}

void CheckShares(al_mix_by by, uint32_t W, uint32_t K, double tol_pp) {
  SCOPED_TRACE("by=" + std::to_string(by) + " W=" + std::to_string(W) + " K=" + std::to_string(K));
  Mix m = ThreeSources(by, 400);
  RunHandle run;
  ASSERT_EQ(m.Open(&run.r, Options(W, K)), AL_OK) << al_last_error();
  al_run_info ri = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(run.r, &ri), AL_OK);
  ASSERT_EQ(ri.steps, 400u);
  ASSERT_EQ(ri.sources, 3u);
  PlanHandle p;
  ASSERT_EQ(al_run_plan_steps(run.r, W, 0, ri.steps, &p.p), AL_OK) << al_last_error();
  auto per = StepShares(run.r, p.p, by, 3);
  const double want[3] = {0.5, 0.3, 0.2};
  double worst = 0;
  for (uint32_t s0 = 0; s0 + 100 <= ri.steps; s0++) {
    double tot[3] = {0, 0, 0}, all = 0;
    for (uint32_t s = s0; s < s0 + 100; s++)
      for (int i = 0; i < 3; i++) tot[i] += per[s][i], all += per[s][i];
    for (int i = 0; i < 3; i++) worst = std::max(worst, std::fabs(tot[i] / all - want[i]) * 100);
  }
  EXPECT_LE(worst, tol_pp) << "the worst source share over 100 steps is off by " << worst
                           << " points";
  // The hq source repeats: it has been through more than one pass.
  al_run_source_info hq = AL_RUN_SOURCE_INFO_INIT;
  ASSERT_EQ(al_run_source_get(run.r, 1, &hq), AL_OK);
  EXPECT_STREQ(hq.name, "hq");
  EXPECT_NEAR(hq.weight, 0.3, 1e-12);
}

TEST(RunMix, SharesByTokensHoldOverEvery100Steps) { CheckShares(AL_MIX_TOKENS, 64, 2, 1.0); }
// By samples the steps differ most (an image group holds many samples): within 1.5 points here.
TEST(RunMix, SharesBySamplesHoldOverEvery100Steps) { CheckShares(AL_MIX_SAMPLES, 64, 2, 2.0); }
TEST(RunMix, SharesByComputeHoldOverEvery100Steps) { CheckShares(AL_MIX_COMPUTE, 64, 2, 1.0); }
TEST(RunMix, SharesHoldAtSmallWorlds) {
  CheckShares(AL_MIX_TOKENS, 8, 4, 2.0);
  CheckShares(AL_MIX_COMPUTE, 16, 2, 2.5);
}

// Every planned number once; within a source and pass, every planned sample of that pass once,
// and a finished pass draws all of them.
void CheckPasses(const al_run *r, const al_plan *p, uint32_t n_src) {
  std::vector<uint8_t> seen(p->index_samples, 0);
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> per_pass;
  for (size_t x = 0; x < p->n_micro; x++) {
    const plan_micro &m = p->micro[x];
    if (m.padded) continue;
    for (uint32_t k = 0; k < m.n; k++) {
      uint64_t id = p->mb[m.first + k];
      ASSERT_LT(id, p->index_samples);
      ASSERT_EQ(seen[id], 0) << "draw " << id << " planned twice";
      seen[id] = 1;
      uint32_t src = 0, pass = 0;
      ASSERT_EQ(al_run_draw_where(r, id, &src, &pass, nullptr), AL_OK);
      per_pass[{src, pass}]++;
      ASSERT_EQ(p->status[id], AL_KEY_PLANNED);
    }
  }
  for (uint32_t i = 0; i < n_src; i++) {
    al_run_source_info si = AL_RUN_SOURCE_INFO_INIT;
    ASSERT_EQ(al_run_source_get(r, i, &si), AL_OK);
    uint64_t total = 0;
    for (uint32_t q = 0; q < si.passes; q++) {
      uint64_t got = per_pass[{i, q}];
      total += got;
      if (q + 1 < si.passes) {
        EXPECT_EQ(got, si.pass_samples) << si.name << " pass " << q;
      }
      EXPECT_LE(got, si.pass_samples);
    }
    EXPECT_EQ(total, si.drawn) << si.name;
  }
}

TEST(RunMix, EveryPassDrawsEachSampleOnce) {
  Mix m = ThreeSources(AL_MIX_TOKENS, 300);
  RunHandle run;
  ASSERT_EQ(m.Open(&run.r, Options(32, 2)), AL_OK) << al_last_error();
  al_run_info ri = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(run.r, &ri), AL_OK);
  PlanHandle p;
  ASSERT_EQ(al_run_plan_steps(run.r, 32, 0, ri.steps, &p.p), AL_OK) << al_last_error();
  EXPECT_EQ(p.p->index_samples, ri.draw_ids);
  CheckPasses(run.r, p.p, 3);
  al_run_source_info hq = AL_RUN_SOURCE_INFO_INIT;
  ASSERT_EQ(al_run_source_get(run.r, 1, &hq), AL_OK);
  EXPECT_GE(hq.passes, 2u);
  // Every rank exactly K micro-batches in every step.
  for (uint32_t s = 0; s < p.p->steps; s++)
    for (uint32_t w = 0; w < 32; w++)
      EXPECT_EQ(p.p->slot[(size_t)s * 32 + w + 1] - p.p->slot[(size_t)s * 32 + w], 2u);
}

TEST(RunMix, StopSourcesLeaveAndTheRunEndsWithThem) {
  Mix m;
  m.Add("a", altest::MakeShapes(4000, 21), 0.6, AL_EXHAUST_STOP);
  m.Add("b", Filtered(800, 22, false), 0.4, AL_EXHAUST_STOP);
  RunHandle run;
  ASSERT_EQ(m.Open(&run.r, Options(16, 2)), AL_OK) << al_last_error();
  al_run_info ri = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(run.r, &ri), AL_OK);
  al_run_source_info a = AL_RUN_SOURCE_INFO_INIT, b = AL_RUN_SOURCE_INFO_INIT;
  ASSERT_EQ(al_run_source_get(run.r, 0, &a), AL_OK);
  ASSERT_EQ(al_run_source_get(run.r, 1, &b), AL_OK);
  // b is small: it leaves first, a goes on alone and the run ends with a's pass.
  EXPECT_LT(b.stop_step, a.stop_step);
  EXPECT_EQ(a.stop_step, ri.steps);
  EXPECT_EQ(a.passes, 1u);
  EXPECT_EQ(b.passes, 1u);
  EXPECT_EQ(a.drawn, a.pass_samples);
  EXPECT_EQ(b.drawn, b.pass_samples);
  PlanHandle p;
  ASSERT_EQ(al_run_plan_steps(run.r, 16, 0, ri.steps, &p.p), AL_OK) << al_last_error();
  CheckPasses(run.r, p.p, 2);
  auto per = StepShares(run.r, p.p, AL_MIX_TOKENS, 2);
  for (uint32_t s = b.stop_step; s < ri.steps; s++) EXPECT_EQ(per[s][1], 0) << "step " << s;
  uint64_t pb = 0;
  for (uint32_t s = 0; s < b.stop_step; s++) pb += per[s][1] > 0;
  EXPECT_GT(pb, b.stop_step / 2);
}

TEST(RunMix, UntilEndsTheRunAtTheSourcesPasses) {
  Mix m = ThreeSources(AL_MIX_SAMPLES, 0);
  m.mix.until = 2; /* hq */
  m.mix.until_passes = 3;
  RunHandle run;
  ASSERT_EQ(m.Open(&run.r, Options(16, 2)), AL_OK) << al_last_error();
  al_run_source_info hq = AL_RUN_SOURCE_INFO_INIT;
  ASSERT_EQ(al_run_source_get(run.r, 1, &hq), AL_OK);
  EXPECT_EQ(hq.passes, 3u);
  EXPECT_EQ(hq.drawn, 3 * hq.pass_samples);
  uint64_t f = 0;
  al_run_info ri = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(run.r, &ri), AL_OK);
  ASSERT_EQ(al_run_source_progress(run.r, 1, ri.steps, &f), AL_OK);
  EXPECT_EQ(f, 3ull << 48);
  ASSERT_EQ(al_run_source_progress(run.r, 1, ri.steps - 1, &f), AL_OK);
  EXPECT_LT(f, 3ull << 48);
}

TEST(RunMix, SlicesEqualTheFullRun) {
  Mix m = ThreeSources(AL_MIX_COMPUTE, 120);
  RunHandle run;
  ASSERT_EQ(m.Open(&run.r, Options(16, 2)), AL_OK) << al_last_error();
  PlanHandle full;
  ASSERT_EQ(al_run_plan_steps(run.r, 16, 0, 120, &full.p), AL_OK) << al_last_error();
  const uint32_t cuts[][2] = {{0, 7}, {37, 38}, {50, 93}, {119, 120}};
  for (auto &c : cuts) {
    PlanHandle part;
    ASSERT_EQ(al_run_plan_steps(run.r, 16, c[0], c[1], &part.p), AL_OK) << al_last_error();
    uint64_t m0 = full.p->slot[(size_t)c[0] * 16], m1 = full.p->slot[(size_t)c[1] * 16];
    ASSERT_EQ(part.p->n_micro, m1 - m0);
    for (uint64_t x = m0; x < m1; x++) {
      const plan_micro &a = full.p->micro[x], &b = part.p->micro[x - m0];
      ASSERT_EQ(a.n, b.n);
      ASSERT_EQ(a.bucket, b.bucket);
      ASSERT_EQ(0, memcmp(full.p->mb + a.first, part.p->mb + b.first, a.n * sizeof(uint32_t)));
    }
    ASSERT_NE(part.p->sources, nullptr);
    EXPECT_EQ(part.p->n_sources, 3u);
  }
}

TEST(RunMix, SameInputsSameRunAndWeightsChangeIt) {
  Mix a = ThreeSources(AL_MIX_TOKENS, 50), b = ThreeSources(AL_MIX_TOKENS, 50);
  RunHandle ra, rb;
  ASSERT_EQ(a.Open(&ra.r, Options(16, 2)), AL_OK);
  ASSERT_EQ(b.Open(&rb.r, Options(16, 2)), AL_OK);
  al_run_info ia = AL_RUN_INFO_INIT, ib = AL_RUN_INFO_INIT;
  al_run_get_info(ra.r, &ia);
  al_run_get_info(rb.r, &ib);
  EXPECT_EQ(ia.fingerprint, ib.fingerprint);
  PlanHandle pa, pb;
  ASSERT_EQ(al_run_plan_steps(ra.r, 16, 0, 50, &pa.p), AL_OK);
  ASSERT_EQ(al_run_plan_steps(rb.r, 16, 0, 50, &pb.p), AL_OK);
  ASSERT_EQ(pa.p->n_mb, pb.p->n_mb);
  EXPECT_EQ(0, memcmp(pa.p->mb, pb.p->mb, pa.p->n_mb * sizeof(uint32_t)));
  Mix c = ThreeSources(AL_MIX_TOKENS, 50);
  c.src[2].weight = 0.25;
  RunHandle rc;
  ASSERT_EQ(c.Open(&rc.r, Options(16, 2)), AL_OK);
  al_run_info ic = AL_RUN_INFO_INIT;
  al_run_get_info(rc.r, &ic);
  EXPECT_NE(ia.fingerprint, ic.fingerprint);
}

TEST(RunMix, BadMixturesAreRefusedNamingTheField) {
  struct Case {
    const char *what;
    std::function<void(Mix &)> edit;
    int rc;
  } cases[] = {
      {"name", [](Mix &m) { m.names[1] = "bad name"; }, AL_EINVAL},
      {"twice", [](Mix &m) { m.names[2] = "web"; }, AL_EINVAL},
      {"weight", [](Mix &m) { m.src[0].weight = 0; }, AL_EINVAL},
      {"weight", [](Mix &m) { m.src[0].weight = NAN; }, AL_EINVAL},
      {"never ends", [](Mix &m) { m.mix.steps = 0; }, AL_EINVAL},
      {"until", [](Mix &m) { m.mix.until = 9; }, AL_EINVAL},
      {"on_exhaust", [](Mix &m) { m.src[1].on_exhaust = (al_exhaust)7; }, AL_EINVAL},
  };
  for (auto &c : cases) {
    Mix m = ThreeSources(AL_MIX_TOKENS, 10);
    c.edit(m);
    RunHandle run;
    EXPECT_EQ(m.Open(&run.r, Options(16, 2)), c.rc) << c.what;
    EXPECT_NE(std::string(al_last_error())
                  .find(c.what == std::string("twice")        ? "twice"
                        : c.what == std::string("never ends") ? "never ends"
                                                              : c.what),
              std::string::npos)
        << al_last_error();
    EXPECT_EQ(run.r, nullptr);
  }
}

// A weight change at a stage boundary: over every 100 steps inside a stage each source's share is
// that stage's weight; every pass still draws each sample once across the change; a source given
// weight 0 draws nothing in that stage and goes on with its pass in the next; slices equal the
// full run and the stages change the fingerprint.
TEST(RunMix, StagesChangeTheWeightsExactlyAtTheirStep) {
  Mix m = ThreeSources(AL_MIX_TOKENS, 600);
  const double w1[3] = {0.2, 0.3, 0.5}, w2[3] = {0.6, 0.0, 0.4};
  al_run_stage st[2] = {AL_RUN_STAGE_INIT, AL_RUN_STAGE_INIT};
  st[0].from_step = 200;
  st[0].weights = w1;
  st[1].from_step = 400;
  st[1].weights = w2;
  m.mix.stages = st;
  m.mix.n_stages = 2;
  const uint32_t W = 64, K = 2;
  RunHandle run;
  ASSERT_EQ(m.Open(&run.r, Options(W, K)), AL_OK) << al_last_error();
  al_run_info ri = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(run.r, &ri), AL_OK);
  ASSERT_EQ(ri.steps, 600u);
  PlanHandle p;
  ASSERT_EQ(al_run_plan_steps(run.r, W, 0, ri.steps, &p.p), AL_OK) << al_last_error();
  CheckPasses(run.r, p.p, 3);
  auto per = StepShares(run.r, p.p, AL_MIX_TOKENS, 3);
  const double want[3][3] = {{0.5, 0.3, 0.2}, {0.2, 0.3, 0.5}, {0.6, 0.0, 0.4}};
  for (int k = 0; k < 3; k++) {
    double worst = 0;
    for (uint32_t s0 = 200 * k; s0 + 100 <= 200u * (k + 1); s0++) {
      double tot[3] = {0, 0, 0}, all = 0;
      for (uint32_t s = s0; s < s0 + 100; s++)
        for (int i = 0; i < 3; i++) tot[i] += per[s][i], all += per[s][i];
      for (int i = 0; i < 3; i++)
        worst = std::max(worst, std::fabs(tot[i] / all - want[k][i]) * 100);
    }
    EXPECT_LE(worst, 1.0) << "stage " << k << ": the worst share over 100 steps is off by " << worst
                          << " points";
  }
  // hq draws nothing in the last stage: its progress stands still from step 400 on.
  for (uint32_t s = 400; s < 600; s++) EXPECT_EQ(per[s][1], 0) << "step " << s;
  uint64_t f400 = 0, f600 = 0;
  ASSERT_EQ(al_run_source_progress(run.r, 1, 400, &f400), AL_OK);
  ASSERT_EQ(al_run_source_progress(run.r, 1, 600, &f600), AL_OK);
  EXPECT_EQ(f400, f600);
  // Slices across the boundaries hold what the full run holds.
  for (auto c : {std::make_pair(190u, 215u), std::make_pair(399u, 401u)}) {
    PlanHandle part;
    ASSERT_EQ(al_run_plan_steps(run.r, W, c.first, c.second, &part.p), AL_OK) << al_last_error();
    uint64_t m0 = p.p->slot[(size_t)c.first * W], m1 = p.p->slot[(size_t)c.second * W];
    ASSERT_EQ(part.p->n_micro, m1 - m0);
    for (uint64_t x = m0; x < m1; x++) {
      const plan_micro &a = p.p->micro[x], &b = part.p->micro[x - m0];
      ASSERT_EQ(a.n, b.n);
      ASSERT_EQ(0, memcmp(p.p->mb + a.first, part.p->mb + b.first, a.n * sizeof(uint32_t)));
    }
  }
  // The stages are part of the run's identity.
  Mix plain = ThreeSources(AL_MIX_TOKENS, 600);
  RunHandle rp;
  ASSERT_EQ(plain.Open(&rp.r, Options(W, K)), AL_OK);
  al_run_info pi = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(rp.r, &pi), AL_OK);
  EXPECT_NE(pi.fingerprint, ri.fingerprint);
}

TEST(RunMix, BadStagesAreRefusedNamingTheStage) {
  const double ok[3] = {0.2, 0.3, 0.5}, neg[3] = {0.2, -1, 0.5}, zero[3] = {0, 0, 0};
  struct Case {
    const char *says;
    uint32_t from[2];
    const double *w[2];
  } cases[] = {
      {"not after stage 0", {50, 50}, {ok, ok}},
      {"past the run's", {20, 200}, {ok, ok}},
      {"source 'hq': weight -1", {20, 40}, {ok, neg}},
      {"weighs every source 0", {20, 40}, {zero, ok}},
      {"has no weights", {20, 40}, {ok, nullptr}},
  };
  for (auto &c : cases) {
    Mix m = ThreeSources(AL_MIX_TOKENS, 100);
    al_run_stage st[2] = {AL_RUN_STAGE_INIT, AL_RUN_STAGE_INIT};
    for (int k = 0; k < 2; k++) st[k].from_step = c.from[k], st[k].weights = c.w[k];
    m.mix.stages = st;
    m.mix.n_stages = 2;
    RunHandle run;
    EXPECT_EQ(m.Open(&run.r, Options(16, 2)), AL_EINVAL) << c.says;
    EXPECT_NE(std::string(al_last_error()).find(c.says), std::string::npos) << al_last_error();
  }
}

// What a micro-batch holds, as draws: (source, pass, position) per sample.
std::vector<std::vector<uint64_t>> StepDraws(const al_run *r, const al_plan *p, uint32_t a,
                                             uint32_t b, uint32_t W) {
  std::vector<std::vector<uint64_t>> out;
  for (uint32_t s = a; s < b; s++) {
    std::vector<uint64_t> d;
    for (uint64_t x = p->slot[(size_t)(s - p->first_step) * W];
         x < p->slot[(size_t)(s - p->first_step + 1) * W]; x++) {
      const plan_micro &m = p->micro[x];
      if (m.padded) continue;
      for (uint32_t k = 0; k < m.n; k++) {
        uint32_t src = 0, pass = 0;
        uint64_t pos = 0;
        EXPECT_EQ(al_run_draw_where(r, p->mb[m.first + k], &src, &pass, &pos), AL_OK);
        d.push_back((uint64_t)src << 56 | (uint64_t)pass << 36 | pos);
      }
    }
    std::sort(d.begin(), d.end());
    out.push_back(d);
  }
  return out;
}

// A changed schedule mid-run: new weights and a source added from step 150 on. The change takes
// effect at the old run's first window boundary at or after 150; the steps before it are the old
// run's; after it every source's pass goes on (no sample of a pass repeated or skipped), the new
// source starts its first pass there, and the shares follow the new weights.
TEST(RunMix, AChangedScheduleContinuesEverySourcesPass) {
  const uint32_t W = 64, K = 2;
  Mix a = ThreeSources(AL_MIX_TOKENS, 400);
  RunHandle old;
  ASSERT_EQ(a.Open(&old.r, Options(W, K)), AL_OK) << al_last_error();
  Mix b = ThreeSources(AL_MIX_TOKENS, 600);
  b.src[0].weight = 0.2, b.src[1].weight = 0.3, b.src[2].weight = 0.3;
  b.Add("new", Filtered(3000, 9, false), 0.2, AL_EXHAUST_REPEAT);
  b.mix.continues = old.r;
  b.mix.at_step = 150;
  RunHandle run;
  ASSERT_EQ(b.Open(&run.r, Options(W, K)), AL_OK) << al_last_error();
  uint32_t E = al_run_continued_at(run.r);
  al_run_info oi = AL_RUN_INFO_INIT, ni = AL_RUN_INFO_INIT;
  ASSERT_EQ(al_run_get_info(old.r, &oi), AL_OK);
  ASSERT_EQ(al_run_get_info(run.r, &ni), AL_OK);
  EXPECT_GE(E, 150u);
  EXPECT_LT(E, 150u + oi.window);
  EXPECT_EQ(ni.steps, 600u);
  EXPECT_EQ(ni.step_tokens, oi.step_tokens);
  EXPECT_NE(ni.fingerprint, oi.fingerprint);
  PlanHandle po, pn;
  ASSERT_EQ(al_run_plan_steps(old.r, W, 0, oi.steps, &po.p), AL_OK) << al_last_error();
  ASSERT_EQ(al_run_plan_steps(run.r, W, 0, ni.steps, &pn.p), AL_OK) << al_last_error();
  // The steps before the change hold the old run's draws, step by step.
  EXPECT_EQ(StepDraws(old.r, po.p, 0, E, W), StepDraws(run.r, pn.p, 0, E, W));
  // Exactly once per pass over the whole changed run; finished passes complete.
  CheckPasses(run.r, pn.p, 4);
  // The new source draws nothing before the change.
  auto per = StepShares(run.r, pn.p, AL_MIX_TOKENS, 4);
  for (uint32_t s = 0; s < E; s++) EXPECT_EQ(per[s][3], 0) << "step " << s;
  const double want[4] = {0.2, 0.3, 0.3, 0.2};
  double worst = 0;
  for (uint32_t s0 = E; s0 + 100 <= ni.steps; s0++) {
    double tot[4] = {0, 0, 0, 0}, all = 0;
    for (uint32_t s = s0; s < s0 + 100; s++)
      for (int i = 0; i < 4; i++) tot[i] += per[s][i], all += per[s][i];
    for (int i = 0; i < 4; i++) worst = std::max(worst, std::fabs(tot[i] / all - want[i]) * 100);
  }
  EXPECT_LE(worst, 1.0) << "after the change the worst share over 100 steps is off by " << worst;
  // A slice from the change on equals the full changed run there.
  PlanHandle part;
  ASSERT_EQ(al_run_plan_steps(run.r, W, E, E + 10, &part.p), AL_OK) << al_last_error();
  EXPECT_EQ(StepDraws(run.r, part.p, E, E + 10, W), StepDraws(run.r, pn.p, E, E + 10, W));
}

TEST(RunMix, AChangedScheduleKeepsTheRunsSourcesAndOptions) {
  const uint32_t W = 16, K = 2;
  Mix a = ThreeSources(AL_MIX_TOKENS, 200);
  RunHandle old;
  ASSERT_EQ(a.Open(&old.r, Options(W, K)), AL_OK) << al_last_error();
  struct Case {
    const char *says;
    std::function<void(Mix &, al_plan_options &)> edit;
  } cases[] = {
      {"in its name", [](Mix &m, al_plan_options &) { std::swap(m.names[0], m.names[1]); }},
      {"keep every source",
       [](Mix &m, al_plan_options &) {
         m.shapes.pop_back(), m.names.pop_back(), m.src.pop_back();
       }},
      {"apportions by", [](Mix &m, al_plan_options &) { m.mix.by = AL_MIX_SAMPLES; }},
      {"micro-batches per step", [](Mix &, al_plan_options &o) { o.micro_per_step = 4; }},
      {"step tokens", [](Mix &, al_plan_options &o) { o.step_tokens = 12345; }},
      {"ends at step", [](Mix &m, al_plan_options &) { m.mix.steps = 60; }},
  };
  for (auto &c : cases) {
    Mix b = ThreeSources(AL_MIX_TOKENS, 300);
    al_plan_options o = Options(W, K);
    b.mix.continues = old.r;
    b.mix.at_step = 50;
    c.edit(b, o);
    RunHandle run;
    EXPECT_EQ(b.Open(&run.r, o), AL_EINVAL) << c.says;
    EXPECT_NE(std::string(al_last_error()).find(c.says), std::string::npos)
        << c.says << ": " << al_last_error();
  }
}

} // namespace
