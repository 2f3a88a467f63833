// Helpers shared by the loader tests: temp paths, whole-file I/O, index equality.
#ifndef AL_TESTS_LOADER_TEST_UTIL_H
#define AL_TESTS_LOADER_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "loader/al_index.h"
}

namespace altest {

inline std::string TmpPath(const std::string &name) {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

inline std::vector<unsigned char> ReadAll(const std::string &path) {
  std::vector<unsigned char> v;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return v;
  unsigned char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
  std::fclose(f);
  return v;
}

inline void WriteAll(const std::string &path, const std::vector<unsigned char> &v) {
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!v.empty()) {
    ASSERT_EQ(std::fwrite(v.data(), 1, v.size(), f), v.size());
  }
  std::fclose(f);
}

inline void WriteStr(const std::string &path, const std::string &s) {
  WriteAll(path, std::vector<unsigned char>(s.begin(), s.end()));
}

// Every field of two indexes compared: shards, samples, members, rejected.
inline void ExpectSameIndex(const al_index *a, const al_index *b, bool compare_paths = true) {
  ASSERT_EQ(al_index_shard_count(a), al_index_shard_count(b));
  ASSERT_EQ(al_index_sample_count(a), al_index_sample_count(b));
  ASSERT_EQ(al_index_rejected_count(a), al_index_rejected_count(b));
  for (size_t i = 0; i < al_index_shard_count(a); i++) {
    al_shard_info x, y;
    ASSERT_EQ(al_index_shard(a, i, &x), AL_OK);
    ASSERT_EQ(al_index_shard(b, i, &y), AL_OK);
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
    al_sample_info x, y;
    ASSERT_EQ(al_index_sample(a, i, &x), AL_OK);
    ASSERT_EQ(al_index_sample(b, i, &y), AL_OK);
    ASSERT_STREQ(x.key, y.key);
    EXPECT_EQ(x.shard, y.shard);
    EXPECT_EQ(x.width, y.width);
    EXPECT_EQ(x.height, y.height);
    EXPECT_EQ(x.frames, y.frames);
    EXPECT_EQ(x.fps, y.fps);
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
    }
  }
  for (size_t i = 0; i < al_index_rejected_count(a); i++) {
    al_rejected_info x, y;
    ASSERT_EQ(al_index_rejected(a, i, &x), AL_OK);
    ASSERT_EQ(al_index_rejected(b, i, &y), AL_OK);
    EXPECT_EQ(x.shard, y.shard);
    EXPECT_STREQ(x.member, y.member);
    EXPECT_STREQ(x.key, y.key);
    if (compare_paths) {
      EXPECT_EQ(x.offset, y.offset);
      EXPECT_STREQ(x.reason, y.reason);
    }
  }
}

}  // namespace altest

#endif  // AL_TESTS_LOADER_TEST_UTIL_H
