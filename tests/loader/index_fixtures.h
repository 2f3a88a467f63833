// Loader test fixtures: building an index with checked statistics, comparing two indexes
// field by field, one sample's metadata, and the rejected entries as text.
#ifndef AL_TESTS_LOADER_INDEX_FIXTURES_H
#define AL_TESTS_LOADER_INDEX_FIXTURES_H

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "loader/al_index.h"
}

namespace altest {

// The metadata two samples must share: key, shape, frames, fps.
inline void ExpectSameSampleMeta(const al_sample_info &x, const al_sample_info &y) {
  EXPECT_STREQ(x.key, y.key);
  EXPECT_EQ(x.width, y.width);
  EXPECT_EQ(x.height, y.height);
  EXPECT_EQ(x.frames, y.frames);
  EXPECT_EQ(x.fps, y.fps);
}

// Sample i of `idx` has this key and metadata.
inline void ExpectSample(const al_index *idx, size_t i, const std::string &key, uint32_t width,
                         uint32_t height, uint32_t frames, float fps) {
  al_sample_info s = AL_SAMPLE_INFO_INIT;
  ASSERT_EQ(al_index_sample(idx, i, &s), AL_OK);
  al_sample_info want = s;
  want.key = key.c_str();
  want.width = width;
  want.height = height;
  want.frames = frames;
  want.fps = fps;
  ExpectSameSampleMeta(s, want);
}

// Record i of both indexes through `get` (al_index_shard, al_index_sample, al_index_rejected).
template <class Info>
::testing::AssertionResult GetBoth(int (*get)(const al_index *, size_t, Info *), const al_index *a,
                                   const al_index *b, size_t i, Info *x, Info *y) {
  int ra = get(a, i, x), rb = get(b, i, y);
  if (ra == AL_OK && rb == AL_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "record " << i << ": status " << ra << " and " << rb << ": " << al_last_error();
}

// Every field of two indexes compared: shards, samples, members, rejected. Without
// `compare_paths`, what depends on the shard files themselves (path, size, mtime,
// compression, member and rejection offsets, reasons) is left out.
inline void ExpectSameIndex(const al_index *a, const al_index *b, bool compare_paths = true) {
  ASSERT_EQ(al_index_shard_count(a), al_index_shard_count(b));
  ASSERT_EQ(al_index_sample_count(a), al_index_sample_count(b));
  ASSERT_EQ(al_index_rejected_count(a), al_index_rejected_count(b));
  for (size_t i = 0; i < al_index_shard_count(a); i++) {
    al_shard_info x = AL_SHARD_INFO_INIT, y = AL_SHARD_INFO_INIT;
    ASSERT_TRUE(GetBoth(al_index_shard, a, b, i, &x, &y));
    if (compare_paths) {
      EXPECT_STREQ(x.path, y.path);
      EXPECT_EQ(x.size, y.size);
      EXPECT_EQ(x.mtime_ns, y.mtime_ns);
      EXPECT_EQ(x.seekable, y.seekable);
      EXPECT_STREQ(x.compression, y.compression);
    }
    EXPECT_EQ(x.sample_count, y.sample_count);
    EXPECT_EQ(x.rejected_count, y.rejected_count);
  }
  for (size_t i = 0; i < al_index_sample_count(a); i++) {
    al_sample_info x = AL_SAMPLE_INFO_INIT, y = AL_SAMPLE_INFO_INIT;
    ASSERT_TRUE(GetBoth(al_index_sample, a, b, i, &x, &y));
    ASSERT_STREQ(x.key, y.key);
    ExpectSameSampleMeta(x, y);
    EXPECT_EQ(x.shard, y.shard);
    ASSERT_EQ(x.n_members, y.n_members);
    for (uint32_t m = 0; m < x.n_members; m++) {
      al_member_info p, q;
      ASSERT_EQ(al_index_member(a, i, m, &p), AL_OK);
      ASSERT_EQ(al_index_member(b, i, m, &q), AL_OK);
      EXPECT_STREQ(p.ext, q.ext);
      if (compare_paths) {
        EXPECT_EQ(p.offset, q.offset);
      }
      EXPECT_EQ(p.size, q.size);
      EXPECT_EQ(p.lz4, q.lz4);
      al_member_type ta = AL_MEMBER_TYPE_INIT, tb = AL_MEMBER_TYPE_INIT;
      int ra = al_index_member_type(a, i, m, &ta), rb = al_index_member_type(b, i, m, &tb);
      ASSERT_EQ(ra, rb) << x.key << "." << p.ext;
      if (ra == AL_OK) {
        EXPECT_STREQ(ta.dtype, tb.dtype);
        ASSERT_EQ(ta.ndim, tb.ndim);
        for (uint32_t d = 0; d < ta.ndim; d++) EXPECT_EQ(ta.shape[d], tb.shape[d]);
        EXPECT_EQ(ta.data_offset, tb.data_offset);
        EXPECT_EQ(ta.data_bytes, tb.data_bytes);
      }
    }
  }
  ASSERT_EQ(al_index_warning_count(a), al_index_warning_count(b));
  for (size_t i = 0; i < al_index_warning_count(a); i++) {
    al_rejected_info x = AL_REJECTED_INFO_INIT, y = AL_REJECTED_INFO_INIT;
    ASSERT_TRUE(GetBoth(al_index_warning, a, b, i, &x, &y));
    EXPECT_EQ(x.shard, y.shard);
    EXPECT_STREQ(x.member, y.member);
    EXPECT_STREQ(x.key, y.key);
    EXPECT_STREQ(x.reason, y.reason);
    if (compare_paths) {
      EXPECT_EQ(x.offset, y.offset);
    }
  }
  for (size_t i = 0; i < al_index_rejected_count(a); i++) {
    al_rejected_info x = AL_REJECTED_INFO_INIT, y = AL_REJECTED_INFO_INIT;
    ASSERT_TRUE(GetBoth(al_index_rejected, a, b, i, &x, &y));
    EXPECT_EQ(x.shard, y.shard);
    EXPECT_STREQ(x.member, y.member);
    EXPECT_STREQ(x.key, y.key);
    if (compare_paths) {
      EXPECT_EQ(x.offset, y.offset);
      EXPECT_STREQ(x.reason, y.reason);
    }
  }
}

// Builds an index of `paths` with `threads`; expects status `expect` and statistics that
// agree with the index. Returns the index (also on failure when the build gives one).
inline al_index *Build(const std::vector<std::string> &paths, int threads = 2, int expect = AL_OK,
                       al_index_options *opts = nullptr) {
  std::vector<const char *> p;
  for (const auto &s : paths) p.push_back(s.c_str());
  al_index_options o{};
  if (opts) o = *opts;
  o.threads = threads;
  o.progress = -1;
  al_index *idx = nullptr;
  al_index_stats st = AL_INDEX_STATS_INIT;
  int rc = al_index_build(&idx, p.data(), p.size(), &o, &st);
  EXPECT_EQ(rc, expect) << al_last_error();
  if (idx) {
    EXPECT_EQ(st.samples, al_index_sample_count(idx));
    EXPECT_EQ(st.rejected, al_index_rejected_count(idx));
    EXPECT_EQ(st.warnings, al_index_warning_count(idx));
  }
  return idx;
}

// All rejected entries as "shard-basename|member|offset|key|reason" lines, for messages.
inline std::string RejectedText(const al_index *idx) {
  std::string out;
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    al_shard_info s = AL_SHARD_INFO_INIT;
    al_index_rejected(idx, i, &r);
    al_index_shard(idx, r.shard, &s);
    const char *b = std::strrchr(s.path, '/');
    out += std::string(b ? b + 1 : s.path) + "|" + r.member + "|" + std::to_string(r.offset) + "|" +
           r.key + "|" + r.reason + "\n";
  }
  return out;
}

} // namespace altest

#endif // AL_TESTS_LOADER_INDEX_FIXTURES_H
