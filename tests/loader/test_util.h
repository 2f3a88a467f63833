// Helpers shared by the loader tests: temp paths, whole-file I/O, index equality.
#ifndef AL_TESTS_LOADER_TEST_UTIL_H
#define AL_TESTS_LOADER_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <utility>

extern "C" {
#include "loader/al_index.h"
#include "loader/tar_write_internal.h"
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

using Members = std::vector<std::pair<std::string, std::string>>;

// A tar written by our ustar/pax writer with the given (name, data) members.
inline void WriteTar(const std::string &path, const Members &members, bool trailer = true) {
  tarw *w = nullptr;
  ASSERT_EQ(tarw_open(&w, path.c_str(), 1700000000), AL_OK);
  for (const auto &m : members) ASSERT_EQ(tarw_add(w, m.first.c_str(), m.second.data(), m.second.size()), AL_OK);
  ASSERT_EQ(tarw_close_ex(w, trailer ? 0 : 1), AL_OK);
}

// Compresses a whole file with libarchive's write filters ("gzip", "lz4", "zstd").
inline void CompressFile(const std::string &in, const std::string &out, const std::string &filter) {
  std::vector<unsigned char> data = ReadAll(in);
  struct archive *a = archive_write_new();
  ASSERT_NE(a, nullptr);
  if (filter == "gzip") {
    ASSERT_EQ(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    ASSERT_EQ(archive_write_set_filter_option(a, "gzip", "compression-level", "1"), ARCHIVE_OK);
  } else if (filter == "lz4") {
    ASSERT_EQ(archive_write_add_filter_lz4(a), ARCHIVE_OK);
  } else if (filter == "zstd") {
    ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  } else {
    FAIL() << filter;
  }
  ASSERT_EQ(archive_write_set_format_raw(a), ARCHIVE_OK);
  ASSERT_EQ(archive_write_open_filename(a, out.c_str()), ARCHIVE_OK) << archive_error_string(a);
  struct archive_entry *e = archive_entry_new();
  archive_entry_set_pathname(e, "x");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_size(e, (la_int64_t)data.size());
  ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
  ASSERT_EQ(archive_write_data(a, data.data(), data.size()), (la_ssize_t)data.size());
  archive_entry_free(e);
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

inline std::string Pread(const std::string &path, uint64_t off, size_t n) {
  std::string s(n, '\0');
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  ssize_t k = pread(fileno(f), &s[0], n, (off_t)off);
  std::fclose(f);
  s.resize(k > 0 ? (size_t)k : 0);
  return s;
}

// Builds an index of `paths` with `threads`; asserts the status.
inline al_index *Build(const std::vector<std::string> &paths, int threads = 2, int expect = AL_OK,
                       al_index_options *opts = nullptr) {
  std::vector<const char *> p;
  for (const auto &s : paths) p.push_back(s.c_str());
  al_index_options o{};
  if (opts) o = *opts;
  o.threads = threads;
  o.progress = -1;
  al_index *idx = nullptr;
  al_index_stats st{};
  int rc = al_index_build(&idx, p.data(), p.size(), &o, &st);
  EXPECT_EQ(rc, expect) << al_last_error();
  if (idx) {
    EXPECT_EQ(st.samples, al_index_sample_count(idx));
    EXPECT_EQ(st.rejected, al_index_rejected_count(idx));
  }
  return idx;
}

// All rejected entries as "shard-basename|member|offset|key|reason" lines, for messages.
inline std::string RejectedText(const al_index *idx) {
  std::string out;
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r;
    al_shard_info s;
    al_index_rejected(idx, i, &r);
    al_index_shard(idx, r.shard, &s);
    const char *b = std::strrchr(s.path, '/');
    out += std::string(b ? b + 1 : s.path) + "|" + r.member + "|" + std::to_string(r.offset) + "|" + r.key + "|" +
           r.reason + "\n";
  }
  return out;
}

}  // namespace altest

#endif  // AL_TESTS_LOADER_TEST_UTIL_H
