// Tokens per sample and shape buckets: formula, default table, assignment
// rules, table files and their errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_buckets.h"
}

namespace {

TEST(Tokens, Wan21Examples) {
  EXPECT_EQ(al_tokens(nullptr, 832, 480, 81), 21u * 30 * 52); // 32,760 (DESIGN.md)
  EXPECT_EQ(al_tokens(nullptr, 1280, 720, 81), 21u * 45 * 80);
  EXPECT_EQ(al_tokens(nullptr, 256, 256, 1), 256u);
  // T' = 1 + (F - 1) / 4 with integer division.
  EXPECT_EQ(al_tokens(nullptr, 16, 16, 4), 1u);
  EXPECT_EQ(al_tokens(nullptr, 16, 16, 5), 2u);
  EXPECT_EQ(al_tokens(nullptr, 16, 16, 8), 2u);
  EXPECT_EQ(al_tokens(nullptr, 16, 16, 9), 3u);
  // Partial patches are cut off; below one patch there are no tokens.
  EXPECT_EQ(al_tokens(nullptr, 31, 47, 1), 2u);
  EXPECT_EQ(al_tokens(nullptr, 15, 480, 1), 0u);
  EXPECT_EQ(al_tokens(nullptr, 832, 480, 0), 0u);
}

TEST(Tokens, ConfigurableGeometryAnd64Bit) {
  al_latent_geom g{};
  g.patch_t = 2; // T'' = ceil(T' / 2)
  EXPECT_EQ(al_tokens(&g, 832, 480, 81), 11u * 30 * 52);
  al_latent_geom h{8, 16, 1, 1, 1};
  EXPECT_EQ(al_tokens(&h, 832, 480, 81), 11u * 30 * 52);
  // Far above 2^32: must not wrap.
  uint64_t t = al_tokens(nullptr, 65520, 65520, 100001);
  EXPECT_EQ(t, 25001ull * 4095 * 4095);
  EXPECT_GT(t, 1ull << 32);
}

TEST(Buckets, DefaultTable) {
  al_bucket_table *t = nullptr;
  ASSERT_EQ(al_bucket_table_default(&t), AL_OK);
  EXPECT_EQ(al_bucket_table_count(t), 9u * 5 * 8);
  EXPECT_EQ(al_bucket_table_check(t, nullptr), AL_OK) << al_last_error();
  bool has480p = false, has720p = false, portrait = false;
  for (size_t i = 0; i < al_bucket_table_count(t); i++) {
    al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
    ASSERT_EQ(al_bucket_table_get(t, i, &s), AL_OK);
    EXPECT_EQ(s.width % 16, 0u);
    EXPECT_EQ(s.height % 16, 0u);
    has480p |= s.width == 832 && s.height == 480;
    has720p |= s.width == 1280 && s.height == 720;
    portrait |= s.width == 480 && s.height == 832;
  }
  EXPECT_TRUE(has480p && has720p && portrait);
  al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
  EXPECT_EQ(al_bucket_table_get(t, al_bucket_table_count(t), &s), AL_ERANGE);
  al_bucket_table_free(t);
}

class Assign : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(al_bucket_table_default(&t_), AL_OK); }
  void TearDown() override { al_bucket_table_free(t_); }
  // Returns "WxHxF" or "reject:<reason>".
  std::string Put(uint32_t w, uint32_t h, uint32_t f, uint64_t cap = 65536) {
    uint32_t b = 0;
    al_reject_reason r;
    int rc = al_bucket_assign(t_, nullptr, cap, w, h, f, &b, &r);
    if (rc != AL_OK) {
      EXPECT_EQ(rc, AL_ENOTFOUND);
      return "reject:" + std::to_string((int)r);
    }
    al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
    EXPECT_EQ(al_bucket_table_get(t_, b, &s), AL_OK);
    return std::to_string(s.width) + "x" + std::to_string(s.height) + "x" +
           std::to_string(s.frames);
  }
  al_bucket_table *t_ = nullptr;
};

TEST_F(Assign, LargestAreaAndFramesThatFit) {
  EXPECT_EQ(Put(832, 480, 81), "832x480x81");
  EXPECT_EQ(Put(854, 480, 100), "832x480x97");        // frames: largest <= 100
  EXPECT_EQ(Put(832, 470, 1), "640x368x1");           // 480 rows do not fit in 470: never upscale
  EXPECT_EQ(Put(300, 300, 1), "240x240x1");           // 320x320 does not fit
  EXPECT_EQ(Put(1920, 1080, 200, 0), "1280x720x121"); // no cap: everything kept
  EXPECT_EQ(Put(480, 832, 17), "480x832x17");         // portrait group
  EXPECT_EQ(Put(700, 400, 1), "640x368x1");           // 1.75 is nearest 16:9, not 3:2
}

TEST_F(Assign, MemoryCapTrimsFramesThenSize) {
  // 720p x 81 = 75,600 tokens > 65,536: keep the resolution, fewer frames.
  EXPECT_EQ(Put(1280, 720, 81), "1280x720x65");
  // A cap below every frame count at 720p falls to a smaller size.
  EXPECT_EQ(Put(1280, 720, 1, 3000), "832x480x1");
  EXPECT_EQ(Put(1280, 720, 1, 252), "336x192x1");
}

TEST_F(Assign, RejectsWithReasons) {
  EXPECT_EQ(Put(200, 200, 1), "reject:" + std::to_string(AL_REJECT_TOO_SMALL));
  EXPECT_EQ(Put(0, 480, 1), "reject:" + std::to_string(AL_REJECT_BAD_SHAPE));
  EXPECT_EQ(Put(832, 480, 0), "reject:" + std::to_string(AL_REJECT_BAD_SHAPE));
  EXPECT_EQ(Put(1280, 720, 1, 100), "reject:" + std::to_string(AL_REJECT_OVER_MEMORY));
  EXPECT_STRNE(al_reject_reason_name(AL_REJECT_TOO_SMALL), "unknown");
}

// A sample stored as latents can only be cropped: the bucket's latent grid
// (T_b = 1 + (F_b - 1) / 4, H_b = h_b / 8, W_b = w_b / 8) must fit inside the sample's grid.
class AssignGrid : public Assign {
 protected:
  std::string PutGrid(uint32_t w, uint32_t h, uint32_t f, uint32_t gt, uint32_t gh, uint32_t gw,
                      uint64_t cap = 65536, const al_latent_geom *g = nullptr) {
    uint32_t b = 0;
    al_reject_reason r = AL_REJECT_NONE;
    al_latent_grid grid = {gt, gh, gw};
    int rc = al_bucket_assign_grid(t_, g, cap, w, h, f, &grid, &b, &r);
    if (rc != AL_OK) {
      EXPECT_EQ(rc, AL_ENOTFOUND);
      return "reject:" + std::to_string((int)r);
    }
    al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
    EXPECT_EQ(al_bucket_table_get(t_, b, &s), AL_OK);
    al_latent_geom gg = al_latent_geom_resolve(g);
    // Whatever was chosen fits inside the grid.
    EXPECT_LE(1 + (s.frames - 1) / gg.vae_stride_t, gt);
    EXPECT_LE(s.height / gg.vae_stride_s, gh);
    EXPECT_LE(s.width / gg.vae_stride_s, gw);
    return std::to_string(s.width) + "x" + std::to_string(s.height) + "x" +
           std::to_string(s.frames);
  }
};

TEST_F(AssignGrid, NativeGridGivesThePixelRulesBucket) {
  // The grid a shape gives under the geometry: the same bucket as al_bucket_assign, for a
  // spread of shapes (the pixel rule already keeps buckets inside).
  const uint32_t shapes[][3] = {{832, 480, 81},  {854, 480, 100}, {832, 470, 1}, {300, 300, 1},
                                {1280, 720, 81}, {480, 832, 17},  {700, 400, 1}, {1920, 1080, 49},
                                {640, 368, 33},  {838, 487, 82}};
  for (const auto &sh : shapes) {
    std::string want = Put(sh[0], sh[1], sh[2]);
    EXPECT_EQ(PutGrid(sh[0], sh[1], sh[2], 1 + (sh[2] - 1) / 4, sh[1] / 8, sh[0] / 8), want)
        << sh[0] << "x" << sh[1] << "x" << sh[2];
  }
}

TEST_F(AssignGrid, SmallerGridCropsOnly) {
  // An index made with spatial stride 16 (grid 21 x 30 x 52 for 832x480 x 81) planned under
  // stride 8: only buckets of at most 240 x 416 pixels fit inside the grid.
  EXPECT_EQ(PutGrid(832, 480, 81, 21, 30, 52), "416x240x81");
  // A grid with one latent frame: only the 1-frame buckets.
  EXPECT_EQ(PutGrid(832, 480, 81, 1, 60, 104), "832x480x1");
  // T = 5 latent frames: 17 frames (T_b 5) fit, 33 (T_b 9) do not.
  EXPECT_EQ(PutGrid(832, 480, 81, 5, 60, 104), "832x480x17");
  // Under another geometry (spatial stride 16, patch 2) the grid is read in its units.
  al_latent_geom g16 = {4, 16, 1, 2, 2};
  EXPECT_EQ(PutGrid(832, 480, 81, 21, 30, 52, 0, &g16), "832x480x81");
}

TEST_F(AssignGrid, NoBucketInsideTheGridIsARejection) {
  // Fits 336x192 in pixels, but the grid (10 x 10) holds no 16:9 bucket (24 x 42).
  EXPECT_EQ(PutGrid(832, 480, 81, 21, 10, 10), "reject:" + std::to_string(AL_REJECT_LATENT_GRID));
  // A bucket inside the grid whose tokens are over the cap: over memory, as before.
  EXPECT_EQ(PutGrid(1280, 720, 1, 1, 90, 160, 100),
            "reject:" + std::to_string(AL_REJECT_OVER_MEMORY));
  // Smaller than every bucket in pixels stays TOO_SMALL; an empty grid is a bad shape.
  EXPECT_EQ(PutGrid(200, 200, 1, 1, 25, 25), "reject:" + std::to_string(AL_REJECT_TOO_SMALL));
  EXPECT_EQ(PutGrid(832, 480, 81, 0, 60, 104), "reject:" + std::to_string(AL_REJECT_BAD_SHAPE));
  EXPECT_STREQ(al_reject_reason_name(AL_REJECT_LATENT_GRID),
               "no bucket's latent grid fits inside the sample's latent grid (crop only)");
  EXPECT_STREQ(al_reject_reason_name(AL_REJECT_COUNT), "unknown");
  // NULL grid: exactly al_bucket_assign.
  uint32_t b1 = 0, b2 = 1;
  al_reject_reason r1, r2;
  ASSERT_EQ(al_bucket_assign(t_, nullptr, 65536, 1000, 500, 40, &b1, &r1), AL_OK);
  ASSERT_EQ(al_bucket_assign_grid(t_, nullptr, 65536, 1000, 500, 40, nullptr, &b2, &r2), AL_OK);
  EXPECT_EQ(b1, b2);
}

TEST(BucketFile, TextAndJsonAgree) {
  const char
      *text = "# two sizes\nframes 17 1 1\naspect 16:9 832x480 416x240\naspect 1:1 256x256\n";
  const char *json =
      "{\"frames\": [1, 17], \"aspects\": [{\"name\": \"16:9\", \"sizes\": [[416, 240], [832, 480]]},"
      " {\"name\": \"1:1\", \"sizes\": [[256, 256]]}]}";
  al_bucket_table *a = nullptr, *b = nullptr;
  ASSERT_EQ(al_bucket_table_parse(&a, text, strlen(text), "t.txt"), AL_OK) << al_last_error();
  ASSERT_EQ(al_bucket_table_parse(&b, json, strlen(json), "t.json"), AL_OK) << al_last_error();
  ASSERT_EQ(al_bucket_table_count(a), 6u); // duplicate frame count merged
  ASSERT_EQ(al_bucket_table_count(b), 6u);
  for (size_t i = 0; i < 6; i++) {
    al_bucket_shape x = AL_BUCKET_SHAPE_INIT, y = AL_BUCKET_SHAPE_INIT;
    al_bucket_table_get(a, i, &x);
    al_bucket_table_get(b, i, &y);
    EXPECT_EQ(x.width, y.width);
    EXPECT_EQ(x.height, y.height);
    EXPECT_EQ(x.frames, y.frames);
    EXPECT_STREQ(x.aspect, y.aspect);
  }
  al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
  al_bucket_table_get(a, 0, &s); // sorted by area inside the group
  EXPECT_EQ(s.width, 416u);
  EXPECT_EQ(s.frames, 1u);
  al_bucket_table_free(a);
  al_bucket_table_free(b);
}

TEST(BucketFile, WriteRoundTrips) {
  al_bucket_table *t = nullptr, *u = nullptr;
  ASSERT_EQ(al_bucket_table_default(&t), AL_OK);
  std::string path = altest::TmpPath("buckets.txt");
  FILE *f = fopen(path.c_str(), "w");
  ASSERT_TRUE(f);
  ASSERT_EQ(al_bucket_table_write(t, f), AL_OK);
  fclose(f);
  ASSERT_EQ(al_bucket_table_load(&u, path.c_str()), AL_OK) << al_last_error();
  ASSERT_EQ(al_bucket_table_count(t), al_bucket_table_count(u));
  for (size_t i = 0; i < al_bucket_table_count(t); i++) {
    al_bucket_shape x = AL_BUCKET_SHAPE_INIT, y = AL_BUCKET_SHAPE_INIT;
    al_bucket_table_get(t, i, &x);
    al_bucket_table_get(u, i, &y);
    EXPECT_EQ(x.width * 100000 + x.height * 10 + x.frames,
              y.width * 100000 + y.height * 10 + y.frames);
  }
  al_bucket_table_free(t);
  al_bucket_table_free(u);
}

void ExpectBad(const char *text, const char *fragment) {
  al_bucket_table *t = nullptr;
  int rc = al_bucket_table_parse(&t, text, strlen(text), "bad.txt");
  EXPECT_EQ(rc, AL_EFORMAT) << text;
  EXPECT_EQ(t, nullptr);
  EXPECT_TRUE(altest::ErrorContains(fragment));
}

TEST(BucketFile, ClearErrors) {
  ExpectBad("frames 1\naspect 16:9 832by480\n", "bad.txt: line 2: size '832by480' is not WxH");
  ExpectBad("frames 1\nsizes 1 2\n", "line 2: unknown directive 'sizes'");
  ExpectBad("aspect 16:9 832x480\n", "no 'frames'");
  ExpectBad("frames 1 x\naspect 16:9 832x480\n", "line 1: frame count 'x'");
  ExpectBad("frames 1\naspect wide 832x480\n", "aspect 'wide' is not a ratio");
  ExpectBad("frames 1\naspect 16:9\n", "aspect group '16:9' has no sizes");
  ExpectBad("frames 1\naspect 16:9 832x480 832x480\n", "lists 832x480 twice");
  ExpectBad("{\"frames\": [1], \"aspects\": [{\"name\": \"1:1\"}]}", "aspects[0]: needs");
  ExpectBad("{\"frames\": [1],\n \"aspects\": [", "line 2");
  al_bucket_table *t = nullptr;
  EXPECT_EQ(al_bucket_table_load(&t, "/nonexistent/buckets.txt"), AL_EIO);
  EXPECT_TRUE(altest::ErrorContains("/nonexistent/buckets.txt"));
}

TEST(BucketFile, CheckAgainstGeometry) {
  const char *text = "frames 1\naspect 1:1 200x200\n";
  al_bucket_table *t = nullptr;
  ASSERT_EQ(al_bucket_table_parse(&t, text, strlen(text), "odd.txt"), AL_OK);
  EXPECT_EQ(al_bucket_table_check(t, nullptr), AL_EINVAL); // 200 is not a multiple of 16
  EXPECT_TRUE(altest::ErrorContains("200x200"));
  al_latent_geom g{4, 8, 1, 1, 1};
  EXPECT_EQ(al_bucket_table_check(t, &g), AL_OK);
  al_bucket_table_free(t);
}

} // namespace
