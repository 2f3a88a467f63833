// The crop report's cuts by why (crop to bucket vs longer than M_mem) and the bucket table
// fitted to a corpus (planner/bucket_fit_internal.h): what the fit predicts is what the
// planner's assignment keeps (fidelity_from_table over the fitted table), a corpus of few
// shapes is kept whole, M_mem's longest length is offered as a frame count, at most N sizes,
// the same bytes for the same index, and bad arguments refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "loader/al_index.h"
#include "planner/al_buckets.h"
#include "planner/bucket_fit_internal.h"
#include "manifest/fidelity_internal.h"
}

namespace {

struct Shape {
  uint32_t w, h, f;
};

al_index *MakeIndex(const std::vector<Shape> &shapes) {
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_new(&idx), AL_OK);
  uint32_t shard = 0;
  EXPECT_EQ(al_index_add_shard(idx, "/nowhere/s.tar", 1 << 20, 1, &shard), AL_OK);
  for (size_t i = 0; i < shapes.size(); i++) {
    std::string key = "k" + std::to_string(i);
    EXPECT_EQ(al_index_add_sample(idx, key.c_str(), shard, shapes[i].w, shapes[i].h, shapes[i].f,
                                  24, nullptr, 0),
              AL_OK);
  }
  return idx;
}

std::string TableText(const al_bucket_table *t) {
  char *buf = nullptr;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  EXPECT_EQ(al_bucket_table_write(t, f), AL_OK);
  fclose(f);
  std::string s(buf, n);
  free(buf);
  return s;
}

TEST(FidelityWhy, CropAndTimeCut) {
  // Default table at M_mem 65536: 832x480 x 81 is a bucket (kept whole); 960x720 x 1 goes to
  // 4:3's 736x544 (cropped); 1280x720 x 81 is 21 x 45 x 80 = 75600 tokens at 1280x720, over
  // the cap, so 1280x720 x 65 (17 latent frames) is chosen: a time cut.
  al_index *idx = MakeIndex({{832, 480, 81}, {960, 720, 1}, {1280, 720, 81}});
  fid_report r;
  memset(&r, 0x5a, sizeof r);
  ASSERT_EQ(fidelity_from_table(&r, idx, nullptr, nullptr, 65536, 3), AL_OK);
  EXPECT_EQ(r.cut_by[FID_KEPT], 1u);
  EXPECT_EQ(r.cut_by[FID_CROP], 1u);
  EXPECT_EQ(r.cut_by[FID_TIME_CUT], 1u);
  EXPECT_EQ(r.lost_by[FID_TIME_CUT], 75600u - 17u * 45 * 80);
  EXPECT_EQ(r.lost_by[FID_CROP], 45u * 60 - 34u * 46);
  ASSERT_EQ(r.n_cut, 3u);
  EXPECT_EQ(r.cut[0].why, FID_CROP); // 1564 / 2700 = 57.9%
  EXPECT_EQ(r.cut[1].why, FID_TIME_CUT);
  EXPECT_EQ(r.cut[1].bucket_frames, 65u);
  EXPECT_EQ(r.cut[2].why, FID_KEPT);
  EXPECT_STREQ(fidelity_why_name(FID_TIME_CUT), "longer than M_mem (time cut)");
  EXPECT_STREQ(fidelity_why_name(FID_CROP), "crop to bucket (aspect/size)");
  // Without a cap nothing is a time cut: the 1280x720 clip gets all 81 frames.
  fidelity_free(&r);
  ASSERT_EQ(fidelity_from_table(&r, idx, nullptr, nullptr, UINT32_MAX, 3), AL_OK);
  EXPECT_EQ(r.cut_by[FID_TIME_CUT], 0u);
  EXPECT_EQ(r.cut_by[FID_KEPT], 2u);
  fidelity_free(&r);
  al_index_free(idx);
}

TEST(BucketFit, PredictsWhatThePlannerKeeps) {
  std::vector<Shape> shapes;
  const Shape base[] = {{1280, 720, 81}, {960, 720, 33}, {720, 1280, 17}, {1000, 560, 1},
                        {512, 512, 49},  {832, 480, 81}, {640, 480, 1},   {848, 480, 17}};
  for (int rep = 0; rep < 3; rep++)
    for (const Shape &s : base) shapes.push_back(s);
  al_index *idx = MakeIndex(shapes);
  for (size_t n : {1u, 3u, 8u}) {
    bucket_fit_options o = {n, 65536, {0, 0, 0, 0, 0}, nullptr};
    al_bucket_table *t = nullptr;
    bucket_fit_result res;
    memset(&res, 0x5a, sizeof res);
    ASSERT_EQ(bucket_fit(&t, &res, idx, &o), AL_OK) << al_last_error();
    EXPECT_LE(res.sizes, n);
    EXPECT_EQ(res.shapes, 8u);
    fid_report r;
    ASSERT_EQ(fidelity_from_table(&r, idx, t, nullptr, 65536, 0), AL_OK);
    EXPECT_EQ(r.kept_tokens, res.kept_tokens) << n;
    if (r.unplanned == 0) {
      EXPECT_EQ(r.native_tokens, res.native_tokens);
    }
    if (n == 8) {
      // every shape its own size (1000x560 floored to whole patches: 992x560, the tokens it
      // has); only the 1280x720 clip loses tokens, cut in time to the longest M_mem allows:
      // 18 latent frames = 69 frames, a frame count the fit added.
      EXPECT_EQ(r.unplanned, 0u);
      EXPECT_EQ(r.cut_by[FID_CROP], 0u);
      EXPECT_EQ(r.cut_by[FID_KEPT], 21u);
      EXPECT_EQ(r.cut_by[FID_TIME_CUT], 3u);
      EXPECT_EQ(r.lost_by[FID_TIME_CUT], 3u * 3 * 45 * 80);
      EXPECT_NE(TableText(t).find(" 69 "), std::string::npos) << TableText(t);
      EXPECT_NE(TableText(t).find("992x560"), std::string::npos) << TableText(t);
    }
    fidelity_free(&r);
    al_bucket_table_free(t);
  }
  al_index_free(idx);
}

TEST(BucketFit, DeterministicAndBounded) {
  std::vector<Shape> shapes;
  for (uint32_t i = 0; i < 200; i++)
    shapes.push_back({256 + 16 * (i * 7 % 40), 256 + 16 * (i * 11 % 30), 1 + 4 * (i % 25)});
  al_index *idx = MakeIndex(shapes);
  bucket_fit_options o = {5, 0, {0, 0, 0, 0, 0}, nullptr};
  al_bucket_table *a = nullptr, *b = nullptr;
  bucket_fit_result ra, rb;
  ASSERT_EQ(bucket_fit(&a, &ra, idx, &o), AL_OK);
  ASSERT_EQ(bucket_fit(&b, &rb, idx, &o), AL_OK);
  EXPECT_EQ(TableText(a), TableText(b));
  EXPECT_EQ(ra.kept_tokens, rb.kept_tokens);
  EXPECT_EQ(ra.sizes, 5u);
  size_t sizes = al_bucket_table_count(a) / ra.frames;
  EXPECT_EQ(sizes, 5u);
  // The text form round-trips into a table the planner takes.
  al_bucket_table *c = nullptr;
  std::string text = TableText(a);
  ASSERT_EQ(al_bucket_table_parse(&c, text.data(), text.size(), "fit"), AL_OK);
  EXPECT_EQ(al_bucket_table_check(c, nullptr), AL_OK);
  al_bucket_table_free(a);
  al_bucket_table_free(b);
  al_bucket_table_free(c);
  o.max_sizes = BUCKET_FIT_MAX_SIZES + 1;
  a = reinterpret_cast<al_bucket_table *>(1);
  EXPECT_EQ(bucket_fit(&a, &ra, idx, &o), AL_ERANGE);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(bucket_fit(nullptr, &ra, idx, &o), AL_EINVAL);
  al_index_free(idx);
  al_index *tiny = MakeIndex({{8, 8, 1}}); // smaller than one patch
  o.max_sizes = 0;
  EXPECT_EQ(bucket_fit(&a, &ra, tiny, &o), AL_EINVAL);
  al_index_free(tiny);
}

// Each "aspect W:H" line's sizes have the orientation of W:H: a portrait 480x832 or 720x1280
// is never filed under a landscape group (the planner sends samples to a group by its ratio).
TEST(BucketFit, SizesKeepTheirGroupsOrientation) {
  std::vector<Shape> shapes;
  const Shape base[] = {{832, 480, 81}, {1280, 720, 81}, {480, 832, 81}, {720, 1280, 49},
                        {480, 832, 33}, {960, 544, 17},  {544, 960, 1},  {512, 512, 1},
                        {832, 480, 33}, {640, 352, 17}};
  for (int rep = 0; rep < 4; rep++)
    for (const Shape &s : base) shapes.push_back(s);
  al_index *idx = MakeIndex(shapes);
  for (size_t n : {2u, 3u, 4u, 6u}) {
    bucket_fit_options o = {n, 65536, {0, 0, 0, 0, 0}, nullptr};
    al_bucket_table *t = nullptr;
    bucket_fit_result res;
    ASSERT_EQ(bucket_fit(&t, &res, idx, &o), AL_OK) << al_last_error();
    std::string text = TableText(t);
    size_t at = 0, groups = 0;
    while ((at = text.find("aspect ", at)) != std::string::npos) {
      size_t end = text.find('\n', at);
      std::string line = text.substr(at + 7, end - at - 7);
      unsigned rw = 0, rh = 0;
      ASSERT_EQ(sscanf(line.c_str(), "%u:%u", &rw, &rh), 2) << line;
      int want = (rw > rh) - (rw < rh);
      size_t sp = line.find(' ');
      while (sp != std::string::npos) {
        unsigned w = 0, h = 0;
        ASSERT_EQ(sscanf(line.c_str() + sp + 1, "%ux%u", &w, &h), 2) << line;
        EXPECT_EQ((w > h) - (w < h), want) << "n=" << n << ": " << line << "\n" << text;
        sp = line.find(' ', sp + 1);
      }
      groups++;
      at = end;
    }
    EXPECT_GE(groups, 1u) << text;
    al_bucket_table_free(t);
  }
  al_index_free(idx);
}

} // namespace
