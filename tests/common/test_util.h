// The helpers every C/C++ test shares: temp paths, whole-file read/write, pread, a tar
// writer (the library's own tarw), compressed copies (libarchive filters, LZ4 frames), a
// deterministic RNG and a substring check. Module fixtures (hand-made indexes, plans,
// corpora) live next to their tests: tests/loader/index_fixtures.h,
// tests/planner/plan_fixtures.h, tests/stream/stream_fixtures.h.
#ifndef AL_TESTS_COMMON_TEST_UTIL_H
#define AL_TESTS_COMMON_TEST_UTIL_H

#include <gtest/gtest.h>

#include <archive.h>
#include <archive_entry.h>
#include <lz4frame.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "common/al_status.h"
#include "loader/tar_write_internal.h"
#include "tests/common/rng.h"
}

namespace altest {

using Bytes = std::vector<unsigned char>;

// `name` inside Bazel's per-test TEST_TMPDIR (/tmp outside Bazel).
inline std::string TmpPath(const std::string &name) {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// The whole file; empty when it cannot be opened.
inline Bytes ReadBytes(const std::string &path) {
  Bytes v;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return v;
  unsigned char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
  std::fclose(f);
  return v;
}

inline std::string ReadFile(const std::string &path) {
  Bytes v = ReadBytes(path);
  return std::string(v.begin(), v.end());
}

// Creates or replaces `path` with exactly `v`.
inline void WriteBytes(const std::string &path, const Bytes &v) {
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!v.empty()) {
    ASSERT_EQ(std::fwrite(v.data(), 1, v.size(), f), v.size()) << path;
  }
  ASSERT_EQ(std::fclose(f), 0) << path;
}

inline void WriteFile(const std::string &path, const std::string &s) {
  WriteBytes(path, Bytes(s.begin(), s.end()));
}

// `n` bytes at `off` (fewer at the end of the file; empty when it cannot be opened).
inline std::string Pread(const std::string &path, uint64_t off, size_t n) {
  std::string s(n, '\0');
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  ssize_t k = pread(fileno(f), &s[0], n, (off_t)off);
  std::fclose(f);
  s.resize(k > 0 ? (size_t)k : 0);
  return s;
}

inline uint64_t FileSize(const std::string &path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return (uint64_t)st.st_size;
}

// (member name, data) in archive order.
using Members = std::vector<std::pair<std::string, std::string>>;

// A tar written by the library's ustar/pax writer (mtime 1700000000), end blocks included.
// `data_offsets`, when given, receives each member's data offset in the file.
inline void WriteTar(const std::string &path, const Members &members,
                     std::vector<uint64_t> *data_offsets = nullptr) {
  tarw *w = nullptr;
  ASSERT_EQ(tarw_open(&w, path.c_str(), 1700000000), AL_OK) << al_last_error();
  if (data_offsets) data_offsets->clear();
  for (const auto &m : members) {
    ASSERT_EQ(tarw_begin(w, m.first.c_str(), m.second.size()), AL_OK) << al_last_error();
    if (data_offsets) data_offsets->push_back(tarw_offset(w));
    if (!m.second.empty()) {
      ASSERT_EQ(tarw_data(w, m.second.data(), m.second.size()), AL_OK) << al_last_error();
    }
    ASSERT_EQ(tarw_end(w), AL_OK) << al_last_error();
  }
  ASSERT_EQ(tarw_close(w), AL_OK) << al_last_error();
}

// Compresses a whole file with libarchive's write filters ("gzip", "lz4", "zstd").
inline void CompressFile(const std::string &in, const std::string &out, const std::string &filter) {
  Bytes data = ReadBytes(in);
  struct archive *a = archive_write_new();
  ASSERT_NE(a, nullptr);
  if (filter == "gzip") {
    ASSERT_EQ(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    ASSERT_EQ(archive_write_set_filter_option(a, "gzip", "compression-level", "1"), ARCHIVE_OK);
  } else if (filter == "lz4") {
    ASSERT_EQ(archive_write_add_filter_lz4(a), ARCHIVE_OK);
  } else if (filter == "zstd") {
    ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  } else if (filter == "xz") {
    ASSERT_EQ(archive_write_add_filter_xz(a), ARCHIVE_OK);
  } else if (filter == "bzip2") {
    ASSERT_EQ(archive_write_add_filter_bzip2(a), ARCHIVE_OK);
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

// One LZ4 frame of `in` with a content checksum; the content size in the frame header
// only when `content_size`.
inline Bytes Lz4Frame(const Bytes &in, bool content_size) {
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.contentSize = content_size ? in.size() : 0;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  Bytes out(LZ4F_compressFrameBound(in.size(), &prefs));
  size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  EXPECT_FALSE(LZ4F_isError(n));
  out.resize(LZ4F_isError(n) ? 0 : n);
  return out;
}

// EXPECT_TRUE(Contains(text, "fragment")): on failure the message shows both.
inline ::testing::AssertionResult Contains(const std::string &haystack, const std::string &needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' lacks '" << needle << "'";
}

// EXPECT_TRUE(ErrorContains("fragment")): the thread's al_last_error() names `needle`.
inline ::testing::AssertionResult ErrorContains(const std::string &needle) {
  std::string message = al_last_error();
  if (message.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "al_last_error() '" << message << "' lacks '" << needle << "'";
}

} // namespace altest

#endif // AL_TESTS_COMMON_TEST_UTIL_H
