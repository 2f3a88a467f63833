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
    al_bucket_shape s;
    ASSERT_EQ(al_bucket_table_get(t, i, &s), AL_OK);
    EXPECT_EQ(s.width % 16, 0u);
    EXPECT_EQ(s.height % 16, 0u);
    has480p |= s.width == 832 && s.height == 480;
    has720p |= s.width == 1280 && s.height == 720;
    portrait |= s.width == 480 && s.height == 832;
  }
  EXPECT_TRUE(has480p && has720p && portrait);
  al_bucket_shape s;
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
    al_bucket_shape s;
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
    al_bucket_shape x, y;
    al_bucket_table_get(a, i, &x);
    al_bucket_table_get(b, i, &y);
    EXPECT_EQ(x.width, y.width);
    EXPECT_EQ(x.height, y.height);
    EXPECT_EQ(x.frames, y.frames);
    EXPECT_STREQ(x.aspect, y.aspect);
  }
  al_bucket_shape s;
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
    al_bucket_shape x, y;
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
