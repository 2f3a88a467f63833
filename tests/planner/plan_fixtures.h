// Planner test fixtures: synthetic sample shapes, planning to a saved and loaded
// manifest, and whole-manifest checks (exactly-once, ranks never idle, memory cap).
#ifndef AL_TESTS_PLANNER_PLAN_FIXTURES_H
#define AL_TESTS_PLANNER_PLAN_FIXTURES_H

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"
}

namespace altest {

// A mixed corpus like `adaptiveload synth`: ~40% images, clips of 2..121
// frames, short sides 240..720, aspect 1:1..21:9, some portrait. Deterministic.
struct Shapes {
  std::vector<uint32_t> w, h, f;
  std::vector<std::string> keys;
  al_plan_input Input() const {
    al_plan_input in{};
    in.n = w.size();
    in.width = w.data();
    in.height = h.data();
    in.frames = f.data();
    in.index_fingerprint = 0x1234;
    return in;
  }
};

inline Shapes MakeShapes(size_t n, uint64_t seed = 1) {
  static const uint32_t sides[] = {240, 352, 480, 720};
  static const double aspects[] = {1.0, 4.0 / 3, 1.5, 16.0 / 9, 21.0 / 9};
  Shapes s;
  SplitMix64 rng(seed);
  for (size_t i = 0; i < n; i++) {
    uint32_t side = sides[rng.Next() % 4];
    uint32_t longer = (uint32_t)(side * aspects[rng.Next() % 5] / 16 + 0.5) * 16;
    bool portrait = rng.Next() % 4 == 0;
    bool image = rng.Next() % 10 < 4;
    s.w.push_back(portrait ? side : longer);
    s.h.push_back(portrait ? longer : side);
    s.f.push_back(image ? 1 : (uint32_t)(2 + rng.Next() % 120));
    s.keys.push_back("k" + std::to_string(i));
  }
  return s;
}

inline const char *ShapeKey(void *ctx, uint64_t i) {
  return static_cast<const Shapes *>(ctx)->keys[i].c_str();
}

inline al_cost_model DefaultCost() {
  al_cost_model c = AL_COST_MODEL_INIT;
  EXPECT_EQ(al_cost_default(&c), AL_OK) << al_last_error();
  return c;
}

// Plans, saves and loads; returns the loaded manifest (caller frees).
inline al_manifest *PlanAndLoad(const Shapes &s, const al_plan_options &o, const std::string &name,
                                al_plan **keep = nullptr) {
  al_cost_model c = DefaultCost();
  al_plan_input in = s.Input();
  al_plan *p = nullptr;
  int rc = al_plan_build(&p, &in, &c, &o);
  EXPECT_EQ(rc, AL_OK) << al_last_error();
  if (rc) return nullptr;
  std::string path = TmpPath(name);
  EXPECT_EQ(al_plan_save(p, path.c_str(), ShapeKey, (void *)&s), AL_OK) << al_last_error();
  if (keep)
    *keep = p;
  else
    al_plan_free(p);
  al_manifest *m = nullptr;
  EXPECT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
  return m;
}

// The manifest's summary figures.
inline al_manifest_info Info(const al_manifest *m) {
  al_manifest_info in = AL_MANIFEST_INFO_INIT;
  EXPECT_EQ(al_manifest_get_info(m, &in), AL_OK);
  return in;
}

// Real (non-padding) occurrences of each index position in the manifest.
inline std::map<uint64_t, int> Occurrences(const al_manifest *m, uint32_t from_step = 0,
                                           uint32_t to_step = UINT32_MAX) {
  al_manifest_info in = Info(m);
  std::map<uint64_t, int> occ;
  for (uint32_t s = in.first_step; s < in.first_step + in.steps; s++) {
    if (s < from_step || s >= to_step) continue;
    for (uint32_t r = 0; r < in.world; r++) {
      uint32_t n = 0;
      EXPECT_EQ(al_manifest_micro_count(m, s, r, &n), AL_OK);
      for (uint32_t k = 0; k < n; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        EXPECT_EQ(al_manifest_micro(m, s, r, k, &ref), AL_OK);
        std::vector<bool> pad(ref.n_samples, false);
        for (size_t q = 0; q < ref.n_padded; q++) pad[ref.padded[q]] = true;
        for (size_t q = 0; q < ref.n_samples; q++)
          if (!pad[q]) occ[ref.samples[q]]++;
      }
    }
  }
  return occ;
}

// Every step: every rank has >= 1 micro-batch, and exactly micro_per_step (K) when the
// manifest records K (the training contract); no micro-batch above mem_tokens, nor a
// micro-batch of several samples above the per-micro-batch target; step totals match the
// micro-batches.
inline void CheckSteps(const al_manifest *m) {
  al_manifest_info in = Info(m);
  ASSERT_EQ(in.unequal_steps, 0u);
  for (uint32_t s = in.first_step; s < in.first_step + in.steps; s++) {
    uint64_t samples = 0, tokens = 0;
    al_step_info si = AL_STEP_INFO_INIT;
    ASSERT_EQ(al_manifest_step(m, s, &si), AL_OK);
    for (uint32_t r = 0; r < in.world; r++) {
      uint32_t n = 0;
      ASSERT_EQ(al_manifest_micro_count(m, s, r, &n), AL_OK);
      ASSERT_GE(n, 1u) << "step " << s << " rank " << r << " has no micro-batch";
      if (in.micro_per_step) {
        ASSERT_EQ(n, in.micro_per_step) << "step " << s << " rank " << r;
      }
      for (uint32_t k = 0; k < n; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        ASSERT_EQ(al_manifest_micro(m, s, r, k, &ref), AL_OK);
        uint64_t mt = 0;
        for (size_t q = 0; q < ref.n_samples; q++) mt += ref.tokens[q];
        ASSERT_LE(mt, in.mem_tokens) << "step " << s << " rank " << r << " micro " << k;
        if (ref.n_samples > 1 && in.micro_tokens) {
          ASSERT_LE(mt, in.micro_tokens) << "step " << s << " rank " << r << " micro " << k;
        }
        ASSERT_EQ(ref.step_samples, si.samples);
        ASSERT_EQ(ref.step_tokens, si.tokens);
        if (ref.n_padded == 0) {
          samples += ref.n_samples;
          tokens += mt;
        }
      }
    }
    ASSERT_EQ(samples, si.samples);
    ASSERT_EQ(tokens, si.tokens);
  }
}

} // namespace altest

#endif // AL_TESTS_PLANNER_PLAN_FIXTURES_H
