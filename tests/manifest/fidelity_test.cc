// The crop report (manifest/fidelity_internal.h): duration bands at their bounds, the fraction
// of native tokens a bucket keeps for known shapes, the samples cut most in order, and, over
// a manifest, every scheduled sample counted once (padding repeats not again) with the kept
// tokens the manifest's summary holds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "loader/al_index.h"
#include "manifest/al_manifest.h"
#include "manifest/al_plan_index.h"
#include "manifest/fidelity_internal.h"
}

using altest::TmpPath;

namespace {

struct Shape {
  uint32_t w, h, f;
  float fps;
};

al_index *MakeIndex(const std::vector<Shape> &shapes) {
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_new(&idx), AL_OK);
  uint32_t shard = 0;
  EXPECT_EQ(al_index_add_shard(idx, "/nowhere/s.tar", 1 << 20, 1, &shard), AL_OK);
  for (size_t i = 0; i < shapes.size(); i++) {
    const Shape &s = shapes[i];
    std::string key = "k" + std::to_string(i);
    EXPECT_EQ(al_index_add_sample(idx, key.c_str(), shard, s.w, s.h, s.f, s.fps, nullptr, 0),
              AL_OK);
  }
  return idx;
}

TEST(Fidelity, Bands) {
  EXPECT_EQ(fidelity_band(1, 30), FID_IMAGE);
  EXPECT_EQ(fidelity_band(0, 0), FID_IMAGE);
  EXPECT_EQ(fidelity_band(17, 0), FID_FPS_UNKNOWN);
  EXPECT_EQ(fidelity_band(31, 16), FID_UNDER_2S); // 1.94 s
  EXPECT_EQ(fidelity_band(32, 16), FID_2S_5S);    // 2 s: lower bounds are inclusive
  EXPECT_EQ(fidelity_band(79, 16), FID_2S_5S);
  EXPECT_EQ(fidelity_band(80, 16), FID_5S_10S);
  EXPECT_EQ(fidelity_band(160, 16), FID_10S_UP);
  EXPECT_STREQ(fidelity_band_name(FID_5S_10S), "5-10s");
  EXPECT_STREQ(fidelity_band_name(FID_FPS_UNKNOWN), "fps unknown");
  EXPECT_STREQ(fidelity_band_name((fid_band)99), "?");
}

TEST(Fidelity, TableKnownFractions) {
  // 832x480 x 81 is a bucket (kept whole); 896x512 x 81 goes to it too: 21 x 30 x 52 of
  // 21 x 32 x 56 tokens; 848x480 x 100 goes to 832x480 x 97: all 25 latent frames, 52 of its
  // 53 token columns; 16x16 fits no bucket.
  al_index *idx = MakeIndex({{832, 480, 81, 16},
                             {896, 512, 81, 16},
                             {848, 480, 100, 25},
                             {16, 16, 1, 0},
                             {832, 480, 1, 0}});
  fid_report r;
  memset(&r, 0xAB, sizeof r);
  ASSERT_EQ(fidelity_from_table(&r, idx, nullptr, nullptr, 0, 2), AL_OK) << al_last_error();
  EXPECT_EQ(r.samples, 4u);
  EXPECT_EQ(r.unplanned, 1u);
  uint64_t whole = 21 * 30 * 52, wide = 21 * 32 * 56, long_ = 25 * 30 * 53;
  EXPECT_EQ(r.native_tokens, whole + wide + long_ + 30 * 52);
  EXPECT_EQ(r.kept_tokens, 2 * whole + 25 * 30 * 52 + 30 * 52);
  ASSERT_EQ(r.n_cut, 2u); // the two cut most, fraction ascending
  EXPECT_EQ(r.cut[0].sample, 1u);
  EXPECT_DOUBLE_EQ(r.cut[0].fraction, (double)whole / (double)wide);
  EXPECT_EQ(r.cut[0].bucket_width, 832u);
  EXPECT_EQ(r.cut[0].bucket_height, 480u);
  EXPECT_EQ(r.cut[0].bucket_frames, 81u);
  EXPECT_EQ(r.cut[1].sample, 2u);
  EXPECT_DOUBLE_EQ(r.cut[1].fraction, 52.0 / 53.0);
  EXPECT_EQ(r.cut[1].bucket_frames, 97u);
  EXPECT_EQ(r.cut[1].kept_tokens, 25u * 30 * 52);
  EXPECT_EQ(r.cut[1].native_tokens, long_);
  // One aspect group (16:9), three bands: image, 2-5s (848x480 x 100 at 25 fps = 4 s),
  // 5-10s (81 frames at 16 fps); in band order.
  ASSERT_EQ(r.n_groups, 3u);
  EXPECT_STREQ(r.groups[0].aspect, "16:9");
  EXPECT_EQ(r.groups[0].band, FID_IMAGE);
  EXPECT_EQ(r.groups[1].band, FID_2S_5S);
  EXPECT_EQ(r.groups[2].band, FID_5S_10S);
  EXPECT_EQ(r.groups[2].samples, 2u);
  EXPECT_DOUBLE_EQ(r.groups[2].min_fraction, (double)whole / (double)wide);
  EXPECT_DOUBLE_EQ(r.groups[2].sum_fraction, 1.0 + (double)whole / (double)wide);
  fidelity_free(&r);
  EXPECT_EQ(r.groups, nullptr);
  al_index_free(idx);
}

TEST(Fidelity, ManifestCountsScheduledSamplesOnce) {
  // 37 samples that each fill a micro-batch (M_mem = 32760 = 832x480 x 81's tokens, the bucket
  // of all three shapes) on 4 ranks: the last step pads three ranks.
  const Shape three[] = {{832, 480, 81, 16}, {896, 512, 81, 16}, {848, 480, 100, 25}};
  std::vector<Shape> shapes;
  for (uint32_t i = 0; i < 37; i++) shapes.push_back(three[i % 3]);
  shapes.push_back({16, 16, 1, 0}); // rejected by the plan
  al_index *idx = MakeIndex(shapes);
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK);
  al_plan_options po{};
  po.world = 4;
  po.mem_tokens = 32760;
  al_plan *p = nullptr;
  ASSERT_EQ(al_plan_build_index(&p, idx, &cost, &po), AL_OK) << al_last_error();
  std::string path = TmpPath("fidelity.alm");
  ASSERT_EQ(al_plan_save(p, path.c_str(), al_plan_index_key, idx), AL_OK) << al_last_error();
  al_plan_free(p);
  al_manifest *m = nullptr;
  ASSERT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_manifest_get_info(m, &info), AL_OK);
  ASSERT_EQ(info.padded, 3u);

  fid_report r;
  ASSERT_EQ(fidelity_from_manifest(&r, idx, m, nullptr, 100), AL_OK) << al_last_error();
  EXPECT_EQ(r.samples, info.samples);
  EXPECT_EQ(r.samples + r.unplanned, shapes.size());
  EXPECT_EQ(r.samples, 37u);
  EXPECT_EQ(r.kept_tokens, info.tokens); // the real tokens the plan schedules
  EXPECT_EQ(r.kept_tokens, 37u * 32760);
  uint64_t in_groups = 0;
  for (size_t k = 0; k < r.n_groups; k++) in_groups += r.groups[k].samples;
  EXPECT_EQ(in_groups, r.samples);
  ASSERT_EQ(r.n_cut, r.samples);
  for (size_t k = 0; k < r.n_cut; k++) {
    EXPECT_LE(r.cut[k].kept_tokens, r.cut[k].native_tokens);
    if (k) {
      EXPECT_LE(r.cut[k - 1].fraction, r.cut[k].fraction);
    }
  }
  fidelity_free(&r);

  // A manifest of another index (other sample count) is refused.
  shapes.pop_back();
  al_index *other = MakeIndex(shapes);
  EXPECT_EQ(fidelity_from_manifest(&r, other, m, nullptr, 3), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("planned from 38 samples, the index has 37"));
  al_index_free(other);
  al_manifest_free(m);
  al_index_free(idx);
}

} // namespace
