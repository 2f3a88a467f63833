// storage/storage_open.c, url_kind.c, file_ops.c: the backend a path or URL gets, and the
// file backend's answers and messages.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "storage/storage_internal.h"
}

namespace {

using altest::TmpPath;
using altest::WriteFile;

TEST(StorageUrlKind, SchemesInAnyCase) {
  EXPECT_EQ(storage_url_kind("/data/s.tar"), STORAGE_LOCAL);
  EXPECT_EQ(storage_url_kind("rel/s.tar"), STORAGE_LOCAL);
  EXPECT_EQ(storage_url_kind("file:///data/s.tar"), STORAGE_LOCAL);
  EXPECT_EQ(storage_url_kind("http://h/s.tar"), STORAGE_HTTP);
  EXPECT_EQ(storage_url_kind("HTTPS://h/s.tar"), STORAGE_HTTP);
  EXPECT_EQ(storage_url_kind("s3://b/k"), STORAGE_S3);
  EXPECT_EQ(storage_url_kind("S3://b/k"), STORAGE_S3);
  EXPECT_STREQ(storage_ops_of(STORAGE_LOCAL)->name, "file");
  EXPECT_STREQ(storage_ops_of(STORAGE_HTTP)->name, "http");
  EXPECT_STREQ(storage_ops_of(STORAGE_S3)->name, "s3");
  EXPECT_EQ(storage_ops_of(7), nullptr);
}

TEST(StorageFile, OpenStatReadClose) {
  std::string path = TmpPath("storage_open_file.bin");
  std::string bytes;
  for (int i = 0; i < 5000; i++) bytes.push_back((char)(i * 7));
  WriteFile(path, bytes);
  storage_obj *o = nullptr;
  ASSERT_EQ(storage_open(nullptr, path.c_str(), &o), AL_OK) << al_last_error();
  storage_stat st;
  ASSERT_EQ(storage_get_stat(o, &st), AL_OK);
  EXPECT_EQ(st.size, 5000u);
  EXPECT_STREQ(st.etag, "");
  EXPECT_GT(st.mtime_ns, 0);
  char buf[100];
  ASSERT_EQ(storage_read(o, 4900, buf, sizeof buf), AL_OK) << al_last_error();
  EXPECT_EQ(std::string(buf, sizeof buf), bytes.substr(4900));
  EXPECT_EQ(storage_read(o, 4950, buf, sizeof buf), AL_EIO);
  EXPECT_EQ(std::string(al_last_error()),
            path + ": read of 100 bytes at byte 4950: the file ends first");
  storage_counts rs = storage_stats(o);
  EXPECT_EQ(rs.requests, 0u);
  storage_close(o);
  storage_close(nullptr);
}

TEST(StorageFile, RefusedAsInputsAre) {
  storage_obj *o = nullptr;
  std::string missing = TmpPath("storage_open_missing.bin");
  EXPECT_EQ(storage_open(nullptr, missing.c_str(), &o), AL_ENOTFOUND);
  EXPECT_EQ(o, nullptr);
  EXPECT_NE(std::string(al_last_error()).find(missing + ": cannot open shard"), std::string::npos)
      << al_last_error();
  std::string dir = TmpPath("");
  EXPECT_EQ(storage_open(nullptr, dir.c_str(), &o), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("not a regular file"), std::string::npos)
      << al_last_error();
}

TEST(StorageUrl, NeedsAClient) {
  storage_obj *o = nullptr;
  EXPECT_EQ(storage_open(nullptr, "http://127.0.0.1:9/x", &o), AL_EINVAL);
  EXPECT_EQ(o, nullptr);
  EXPECT_EQ(storage_open(nullptr, nullptr, &o), AL_EINVAL);
}

TEST(StorageList, OnlyS3Prefixes) {
  storage_listing l;
  storage_counts st;
  EXPECT_EQ(storage_list(nullptr, "/data/shards", &l, &st), AL_EINVAL);
  EXPECT_EQ(std::string(al_last_error()),
            "/data/shards: only s3://BUCKET/PREFIX URLs (no user:password@) can be listed");
  EXPECT_EQ(l.count, 0u);
  EXPECT_EQ(storage_list(nullptr, "http://u:secret@h/d/", &l, &st), AL_EINVAL);
  EXPECT_EQ(std::string(al_last_error()).find("secret"), std::string::npos) << al_last_error();
}

} // namespace
