// Index to plan: a corpus of .npy latents at native grids is indexed (typed
// members) and planned from the index; every planned sample's bucket has a latent grid
// inside the sample's grid (crop only: never upscaled or padded), also when the index was
// made under another VAE stride than the plan's geometry.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "loader/al_index.h"
#include "manifest/al_manifest.h"
#include "manifest/al_plan_index.h"
}

using altest::TmpPath;

namespace {

std::string Npy(const std::vector<uint64_t> &shape) {
  std::string sh = "(";
  uint64_t n = 2;
  for (size_t i = 0; i < shape.size(); i++) {
    sh += std::to_string(shape[i]) + ", ";
    n *= shape[i];
  }
  sh += ")";
  std::string h = "{'descr': '<f2', 'fortran_order': False, 'shape': " + sh + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += (char)(h.size() & 0xff);
  out += (char)(h.size() >> 8);
  return out + h + std::string(n, '\0');
}

struct Shape {
  uint32_t w, h, f;
};

// Native shapes, not bucket shapes: odd sizes, frame counts that are not 4k+1.
const Shape kShapes[] = {{832, 480, 81}, {854, 480, 100}, {1280, 720, 49}, {720, 1280, 33},
                         {640, 368, 17}, {512, 512, 1},   {1024, 576, 1},  {848, 480, 61},
                         {960, 544, 45}, {480, 480, 121}, {704, 400, 25},  {1000, 420, 9},
                         {600, 1000, 1}, {416, 240, 97},  {576, 320, 40},  {1920, 1080, 1}};

// One shard of latents (4 channels) whose grid is the JSON's under strides (st, ss).
std::string WriteCorpus(const std::string &name, uint32_t st, uint32_t ss) {
  std::string path = TmpPath(name);
  altest::Members m;
  int k = 0;
  for (int rep = 0; rep < 3; rep++)
    for (const Shape &s : kShapes) {
      std::string key = "k" + std::to_string(k++);
      m.push_back({key + ".json", "{\"width\": " + std::to_string(s.w) +
                                      ", \"height\": " + std::to_string(s.h) +
                                      ", \"frames\": " + std::to_string(s.f) + "}"});
      m.push_back({key + ".latent.npy", Npy({4, 1 + (s.f - 1) / st, s.h / ss, s.w / ss})});
    }
  altest::WriteTar(path, m);
  return path;
}

// Plans `idx` under the default geometry, loads the manifest and checks every planned
// sample's bucket against its grid. Returns how many samples got a smaller bucket than the
// pixel rule alone gives.
size_t PlanAndCheck(const al_index *idx, const std::string &out) {
  al_plan_options o{};
  o.world = 2;
  o.mem_tokens = 80000;
  o.last_step = AL_LAST_DROP;
  EXPECT_EQ(al_plan_index_write(idx, nullptr, nullptr, &o, out.c_str()), AL_OK) << al_last_error();
  al_manifest *m = nullptr;
  EXPECT_EQ(al_manifest_load(&m, out.c_str()), AL_OK) << al_last_error();
  if (!m) return 0;
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  EXPECT_EQ(al_manifest_get_info(m, &info), AL_OK);
  al_bucket_table *t = nullptr;
  EXPECT_EQ(al_bucket_table_default(&t), AL_OK);
  size_t seen = 0, smaller = 0;
  for (uint32_t step = 0; step < info.steps; step++)
    for (uint32_t rank = 0; rank < info.world; rank++) {
      uint32_t nm = 0;
      EXPECT_EQ(al_manifest_micro_count(m, step, rank, &nm), AL_OK);
      for (uint32_t mi = 0; mi < nm; mi++) {
        al_micro_ref r = AL_MICRO_REF_INIT;
        EXPECT_EQ(al_manifest_micro(m, step, rank, mi, &r), AL_OK);
        al_bucket_info b = AL_BUCKET_INFO_INIT;
        EXPECT_EQ(al_manifest_bucket(m, r.bucket, &b), AL_OK);
        for (size_t s = 0; s < r.n_samples; s++) {
          uint32_t gt = 0, gh = 0, gw = 0;
          EXPECT_EQ(al_index_latent_grid(idx, r.samples[s], &gt, &gh, &gw, nullptr), AL_OK);
          EXPECT_LE(1 + (b.frames - 1) / 4, gt) << "sample " << r.samples[s];
          EXPECT_LE(b.height / 8, gh) << "sample " << r.samples[s];
          EXPECT_LE(b.width / 8, gw) << "sample " << r.samples[s];
          al_sample_info si = AL_SAMPLE_INFO_INIT;
          EXPECT_EQ(al_index_sample(idx, r.samples[s], &si), AL_OK);
          uint32_t pb = 0;
          al_reject_reason why;
          if (al_bucket_assign(t, nullptr, o.mem_tokens, si.width, si.height, si.frames, &pb,
                               &why) == AL_OK) {
            al_bucket_shape ps = AL_BUCKET_SHAPE_INIT;
            EXPECT_EQ(al_bucket_table_get(t, pb, &ps), AL_OK);
            if ((uint64_t)b.width * b.height * b.frames <
                (uint64_t)ps.width * ps.height * ps.frames)
              smaller++;
          }
          seen++;
        }
      }
    }
  EXPECT_EQ(seen + info.dropped + al_manifest_rejected(m, AL_REJECT_NONE),
            al_index_sample_count(idx));
  al_bucket_table_free(t);
  al_manifest_free(m);
  return smaller;
}

TEST(LatentPlan, NativeGridsEveryBucketFitsInside) {
  std::string shard = WriteCorpus("native.tar", 4, 8);
  al_index *idx = altest::Build({shard});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 48u) << altest::RejectedText(idx);
  // Grids are the JSON's under the plan's geometry: the pixel rule's buckets, all inside.
  EXPECT_EQ(PlanAndCheck(idx, TmpPath("native.alman")), 0u);
  al_index_free(idx);
}

TEST(LatentPlan, CoarserIndexStrideCropsToSmallerBuckets) {
  // Latents at spatial stride 16 (a VAE with a coarser grid), indexed with --vae-stride 4,16,
  // planned under Wan's stride 8: buckets must fit the half-size grid.
  std::string shard = WriteCorpus("coarse.tar", 4, 16);
  al_index_options o{};
  o.vae_stride_s = 16;
  al_index *idx = altest::Build({shard}, 2, AL_OK, &o);
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 48u) << altest::RejectedText(idx);
  EXPECT_GT(PlanAndCheck(idx, TmpPath("coarse.alman")), 0u);
  // Samples whose grid holds no bucket (e.g. 416x240 at stride 16: 15 x 26 latents, under
  // the smallest 16:9 bucket's 24 x 42) are rejected with the new reason.
  al_plan_options po{};
  po.world = 2;
  po.mem_tokens = 80000;
  po.last_step = AL_LAST_DROP;
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK);
  al_plan *p = nullptr;
  ASSERT_EQ(al_plan_build_index(&p, idx, &cost, &po), AL_OK) << al_last_error();
  EXPECT_GT(al_plan_rejected(p, AL_REJECT_LATENT_GRID), 0u);
  al_plan_free(p);
  al_index_free(idx);
}

} // namespace
