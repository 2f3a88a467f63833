// A chunked run (planner/al_run.h): one path (slices equal the full plan step for step), every
// planned sample exactly once in the pass, every rank K micro-batches, tokens per step held,
// world-independent sample sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_run.h"
#include "planner/run_internal.h"
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

// A run opened from its index map plans the same steps as one opened from the arrays; a damaged
// map is refused naming the file.
TEST(ChunkedRun, IndexMapPlansTheSameSteps) {
  Shapes s = altest::MakeShapes(5000, 4);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan_options o = Options(8, 2);
  std::string map = altest::TmpPath("run.map");
  ASSERT_EQ(al_run_map_write(&in, map.c_str()), AL_OK) << al_last_error();
  RunHandle a, b;
  ASSERT_EQ(al_run_open(&a.r, &in, &c, &o), AL_OK) << al_last_error();
  ASSERT_EQ(al_run_open_map(&b.r, map.c_str(), &c, &o), AL_OK) << al_last_error();
  al_run_info ia = RunInfo(a.r), ib = RunInfo(b.r);
  ASSERT_EQ(ia.steps, ib.steps);
  EXPECT_EQ(ia.pass_tokens, ib.pass_tokens);
  for (auto [x, y] : std::vector<std::pair<uint32_t, uint32_t>>{{0, ia.steps}, {3, 5}}) {
    al_plan *pa = nullptr, *pb = nullptr;
    ASSERT_EQ(al_run_plan_steps(a.r, 8, x, y, &pa), AL_OK) << al_last_error();
    ASSERT_EQ(al_run_plan_steps(b.r, 8, x, y, &pb), AL_OK) << al_last_error();
    al_manifest *ma = SaveLoad(pa, s, "run_arrays.alm"), *mb = SaveLoad(pb, s, "run_map.alm");
    al_plan_free(pa);
    al_plan_free(pb);
    ASSERT_NE(ma, nullptr);
    ASSERT_NE(mb, nullptr);
    for (uint32_t st = x; st < y; st++)
      ASSERT_EQ(StepRecord(ma, st, 8), StepRecord(mb, st, 8)) << st;
    al_manifest_free(ma);
    al_manifest_free(mb);
  }
  // Damaged: truncated, a position twice, another magic.
  std::string bytes = altest::ReadFile(map);
  std::string bad = altest::TmpPath("bad.map");
  for (int k = 0; k < 3; k++) {
    std::string b2 = bytes;
    if (k == 0) b2.resize(b2.size() - 4);
    if (k == 1) memcpy(&b2[b2.size() - 4], &b2[b2.size() - 8], 4);
    if (k == 2) b2[0] = 'X';
    altest::WriteFile(bad, b2);
    RunHandle h;
    EXPECT_EQ(al_run_open_map(&h.r, bad.c_str(), &c, &o), AL_EFORMAT) << k;
    EXPECT_NE(std::string(al_last_error()).find(bad), std::string::npos) << al_last_error();
  }
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

// One rank's slice: rank R's records of the steps equal the full plan's, every step keeps the
// totals of all ranks, its key table lists its own samples with their keys (none without a key
// function), and every other rank is refused naming the rank it holds.
TEST(ChunkedRun, RankSlicesEqualTheFullPlansRanks) {
  Shapes s = altest::MakeShapes(5000, 6);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  const uint32_t W = 4;
  al_plan_options o = Options(W, 2);
  RunHandle run;
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
  al_run_info ri = RunInfo(run.r);
  al_plan *fp = nullptr;
  ASSERT_EQ(al_run_plan_steps(run.r, W, 0, ri.steps, &fp), AL_OK) << al_last_error();
  al_manifest *full = SaveLoad(fp, s, "run_rank_full.alm");
  al_plan_free(fp);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(altest::Info(full).own_keys, 0);
  uint32_t a = std::min(ri.window, ri.steps / 2) - 1, b = std::min(ri.steps, a + 3);
  al_plan *sp = nullptr;
  ASSERT_EQ(al_run_plan_steps(run.r, W, a, b, &sp), AL_OK) << al_last_error();
  std::string path = altest::TmpPath("run_rank.alm");
  for (uint32_t R = 0; R < W; R++) {
    SCOPED_TRACE("rank " + std::to_string(R));
    al_plan_save_options so = AL_PLAN_SAVE_OPTIONS_INIT;
    so.only_rank = R + 1;
    for (int keys = 0; keys < 2; keys++) {
      ASSERT_EQ(al_plan_save_opts(sp, path.c_str(), keys ? altest::ShapeKey : nullptr, (void *)&s,
                                  &so),
                AL_OK)
          << al_last_error();
      al_manifest *m = nullptr;
      ASSERT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
      al_manifest_info mi = altest::Info(m);
      EXPECT_EQ(mi.only_rank, R + 1);
      EXPECT_NE(mi.own_keys, 0);
      EXPECT_EQ(mi.world, W);
      std::set<uint64_t> listed;
      for (uint32_t st = a; st < b; st++) {
        std::vector<std::vector<uint64_t>> mine, want;
        for (auto &v : StepRecord(full, st, W))
          if (v[0] == R) want.push_back(v);
        uint32_t n = 0;
        ASSERT_EQ(al_manifest_micro_count(m, st, R, &n), AL_OK) << al_last_error();
        for (uint32_t k = 0; k < n; k++) {
          al_micro_ref ref = AL_MICRO_REF_INIT;
          ASSERT_EQ(al_manifest_micro(m, st, R, k, &ref), AL_OK);
          std::vector<uint64_t> v = {R, k, ref.bucket, ref.n_padded, ref.step_tokens};
          v.insert(v.end(), ref.samples, ref.samples + ref.n_samples);
          mine.push_back(v);
          listed.insert(ref.samples, ref.samples + ref.n_samples);
        }
        EXPECT_EQ(mine, want) << "step " << st;
        al_step_info x = AL_STEP_INFO_INIT, y = AL_STEP_INFO_INIT;
        ASSERT_EQ(al_manifest_step(m, st, &x), AL_OK) << al_last_error();
        ASSERT_EQ(al_manifest_step(full, st, &y), AL_OK);
        EXPECT_EQ(x.samples, y.samples);
        EXPECT_EQ(x.tokens, y.tokens);
        EXPECT_EQ(x.max_cost_ms, y.max_cost_ms);
        uint32_t other = (R + 1) % W;
        EXPECT_EQ(al_manifest_micro_count(m, st, other, &n), AL_EINVAL);
        EXPECT_NE(std::string(al_last_error()).find("holds only rank " + std::to_string(R)),
                  std::string::npos)
            << al_last_error();
      }
      // Its keys: exactly the samples it lists; another position has none.
      for (uint64_t i = 0; i < s.w.size(); i++) {
        const char *k = al_manifest_key(m, i);
        if (keys && listed.count(i)) {
          ASSERT_NE(k, nullptr) << i;
          EXPECT_EQ(std::string(k), s.keys[i]);
          EXPECT_EQ(al_manifest_key_status(m, i), 0);
        } else {
          EXPECT_EQ(k, nullptr) << i;
          EXPECT_EQ(al_manifest_key_status(m, i), 19) << i;
        }
      }
      al_manifest_free(m);
    }
  }
  al_plan_save_options bad = AL_PLAN_SAVE_OPTIONS_INIT;
  bad.only_rank = W + 1;
  EXPECT_EQ(al_plan_save_opts(sp, path.c_str(), nullptr, nullptr, &bad), AL_ERANGE);
  al_plan_free(sp);
  al_manifest_free(full);
}

// A slice carries no key table of the pass: only its own samples' keys, and a file that does
// not grow with the corpus.
TEST(ChunkedRun, SlicesListOnlyTheirOwnKeys) {
  Shapes s = altest::MakeShapes(20000, 2);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan_options o = Options(4, 2);
  RunHandle run;
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
  al_plan *sp = nullptr;
  ASSERT_EQ(al_run_plan_steps(run.r, 4, 2, 3, &sp), AL_OK) << al_last_error();
  al_manifest *m = SaveLoad(sp, s, "run_own_keys.alm");
  al_plan_free(sp);
  ASSERT_NE(m, nullptr);
  al_manifest_info mi = altest::Info(m);
  EXPECT_NE(mi.own_keys, 0);
  EXPECT_EQ(mi.only_rank, 0u);
  EXPECT_EQ(mi.index_samples, s.w.size());
  auto occ = altest::Occurrences(m);
  size_t with_key = 0;
  for (uint64_t i = 0; i < s.w.size(); i++) with_key += al_manifest_key(m, i) != nullptr;
  EXPECT_EQ(with_key, occ.size()); // no padding in this step: its real samples, once each
  EXPECT_LT(with_key, s.w.size() / 10);
  al_manifest_free(m);
  EXPECT_LT(altest::ReadFile(altest::TmpPath("run_own_keys.alm")).size(), s.w.size());
}

// --check: the whole pass planned window by window, every planned sample in exactly one step.
TEST(ChunkedRun, CheckProvesThePass) {
  Shapes s = altest::MakeShapes(40000, 8);
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan_options o = Options(16, 1); // several windows, the last taking the tail
  RunHandle run;
  ASSERT_EQ(al_run_open(&run.r, &in, &c, &o), AL_OK) << al_last_error();
  al_run_info ri = RunInfo(run.r);
  ASSERT_GT(ri.steps, 2 * ri.window);
  ASSERT_NE(ri.steps % ri.window, 0u);
  for (uint32_t W : {16u, 5u}) {
    al_run_check_info ci = AL_RUN_CHECK_INFO_INIT;
    ASSERT_EQ(al_run_check(run.r, W, &ci), AL_OK) << al_last_error();
    EXPECT_EQ(ci.steps, ri.steps);
    EXPECT_EQ(ci.samples, ri.pass_samples);
    EXPECT_EQ(ci.micro_batches, (uint64_t)ri.steps * W * ((16 + W - 1) / W));
  }
  // A run whose class list repeats a sample (and so misses another) is caught, naming the step
  // and the sample.
  al_run *r = run.r;
  ASSERT_GT(r->n_cls, 0u);
  size_t big = 0;
  for (size_t k = 0; k < r->n_cls; k++)
    if (r->cls[k].n > r->cls[big].n) big = k;
  ASSERT_GE(r->cls[big].n, 2u);
  std::vector<uint32_t> copy(r->cls[big].list, r->cls[big].list + r->cls[big].n);
  const uint32_t *orig = r->cls[big].list;
  copy[1] = copy[0];
  r->cls[big].list = copy.data();
  al_run_check_info ci = AL_RUN_CHECK_INFO_INIT;
  EXPECT_EQ(al_run_check(r, 16, &ci), AL_EFORMAT);
  std::string e = al_last_error();
  EXPECT_NE(e.find("sample " + std::to_string(copy[0]) + " is planned a second time"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("step "), std::string::npos) << e;
  r->cls[big].list = orig;
}

// The streaming writer writes the bytes of the in-memory map, from two passes; what the passes
// disagree on is refused and nothing is written.
TEST(ChunkedRun, StreamingMapWriterEqualsTheMap) {
  Shapes s = altest::MakeShapes(7000, 11);
  al_plan_input in = s.Input();
  in.index_fingerprint = 0x1234abcd;
  std::string want = altest::TmpPath("run_mem.map"), got = altest::TmpPath("run_stream.map");
  ASSERT_EQ(al_run_map_write(&in, want.c_str()), AL_OK) << al_last_error();
  al_run_map_writer *w = nullptr;
  ASSERT_EQ(al_run_map_writer_open(&w, got.c_str(), 0), AL_OK);
  for (size_t i = 0; i < s.w.size(); i++)
    ASSERT_EQ(al_run_map_writer_count(w, s.w[i], s.h[i], s.f[i], nullptr), AL_OK);
  for (size_t i = 0; i < s.w.size(); i++)
    ASSERT_EQ(al_run_map_writer_place(w, s.w[i], s.h[i], s.f[i], nullptr), AL_OK)
        << al_last_error();
  al_run_map_writer_set_fingerprint(w, in.index_fingerprint);
  ASSERT_EQ(al_run_map_writer_finish(w), AL_OK) << al_last_error();
  EXPECT_EQ(altest::ReadFile(got), altest::ReadFile(want));
  // Refused: a shape the counting pass did not see, a count after placing, too few placed.
  std::string bad = altest::TmpPath("run_stream_bad.map");
  for (int k = 0; k < 3; k++) {
    SCOPED_TRACE(k);
    std::remove(bad.c_str());
    ASSERT_EQ(al_run_map_writer_open(&w, bad.c_str(), 0), AL_OK);
    for (size_t i = 0; i < 100; i++)
      ASSERT_EQ(al_run_map_writer_count(w, s.w[i], s.h[i], s.f[i], nullptr), AL_OK);
    ASSERT_EQ(al_run_map_writer_place(w, s.w[0], s.h[0], s.f[0], nullptr), AL_OK);
    if (k == 0) {
      EXPECT_EQ(al_run_map_writer_place(w, 99999, 7, 1, nullptr), AL_EINVAL);
      EXPECT_NE(std::string(al_last_error()).find("sample 1"), std::string::npos)
          << al_last_error();
      al_run_map_writer_free(w);
    } else if (k == 1) {
      EXPECT_EQ(al_run_map_writer_count(w, s.w[0], s.h[0], s.f[0], nullptr), AL_EINVAL);
      al_run_map_writer_free(w);
    } else {
      EXPECT_EQ(al_run_map_writer_finish(w), AL_EINVAL);
      EXPECT_NE(std::string(al_last_error()).find("100 samples counted, 1 placed"),
                std::string::npos)
          << al_last_error();
    }
    FILE *f = std::fopen(bad.c_str(), "rb");
    EXPECT_EQ(f, nullptr) << "a refused map was written";
    if (f) std::fclose(f);
  }
}

} // namespace
