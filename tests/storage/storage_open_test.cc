// storage/storage_open.c, url_kind.c, file_ops.c, file_path.c, url_ops.c, tar_member.c: the
// backend a path or URL gets, the file backend's answers and messages, what the tables say
// without a server (lookup, prefixes, containers, canonical names), a tar walk over a file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "storage/storage_internal.h"
#include "storage/tar_member_internal.h"
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
  EXPECT_EQ(st.etag, nullptr); // files have no ETag
  EXPECT_GT(st.mtime_ns, 0);
  EXPECT_EQ(st.type, STORAGE_OBJECT);
  EXPECT_EQ(std::string(storage_name(o)), path);
  EXPECT_FALSE(storage_is_remote(o));
  char buf[100];
  ASSERT_EQ(storage_read(o, 4900, buf, sizeof buf), AL_OK) << al_last_error();
  EXPECT_EQ(std::string(buf, sizeof buf), bytes.substr(4900));
  EXPECT_EQ(storage_read(o, 4950, buf, sizeof buf), AL_EIO);
  EXPECT_EQ(std::string(al_last_error()),
            path + ": read of 100 bytes at byte 4950: the file ends first");
  // Partial reads, as pread: what is there, then 0 at (and past) the end.
  size_t got = 1;
  ASSERT_EQ(storage_read_some(o, 4950, buf, sizeof buf, &got), AL_OK);
  EXPECT_EQ(got, 50u);
  EXPECT_EQ(std::string(buf, got), bytes.substr(4950));
  ASSERT_EQ(storage_read_some(o, 5000, buf, sizeof buf, &got), AL_OK);
  EXPECT_EQ(got, 0u);
  ASSERT_EQ(storage_read_some(o, 9000, buf, sizeof buf, &got), AL_OK);
  EXPECT_EQ(got, 0u);
  ASSERT_EQ(storage_read_at(o, buf, 10, 20, "ignored"), AL_OK);
  EXPECT_EQ(std::string(buf, 10), bytes.substr(20, 10));
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

TEST(StorageFile, AdoptsADescriptor) {
  std::string path = TmpPath("storage_adopt.bin");
  WriteFile(path, "0123456789");
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  storage_obj *o = nullptr;
  ASSERT_EQ(storage_file_adopt(fd, "http://h/shard.tar.gz", &o), AL_OK) << al_last_error();
  storage_stat st;
  ASSERT_EQ(storage_get_stat(o, &st), AL_OK);
  EXPECT_EQ(st.size, 10u);
  EXPECT_STREQ(storage_name(o), "http://h/shard.tar.gz"); // messages name what it stands for
  char buf[4];
  ASSERT_EQ(storage_read(o, 6, buf, 4), AL_OK);
  EXPECT_EQ(std::string(buf, 4), "6789");
  EXPECT_EQ(storage_read(o, 8, buf, 4), AL_EIO);
  EXPECT_EQ(std::string(al_last_error()),
            "http://h/shard.tar.gz: read of 4 bytes at byte 8: the file ends first");
  storage_close(o); // closes fd
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

TEST(StorageLookup, WhatAPathNamesWithoutOpeningIt) {
  std::string file = TmpPath("storage_lookup.tar");
  WriteFile(file, std::string(1536, '\0'));
  storage_stat st;
  ASSERT_EQ(storage_lookup(file.c_str(), &st), AL_OK) << al_last_error();
  EXPECT_EQ(st.size, 1536u);
  EXPECT_EQ(st.type, STORAGE_OBJECT);
  EXPECT_GT(st.mtime_ns, 0);
  std::string dir = TmpPath("storage_lookup_dir");
  mkdir(dir.c_str(), 0755);
  ASSERT_EQ(storage_lookup(dir.c_str(), &st), AL_OK);
  EXPECT_EQ(st.type, STORAGE_CONTAINER);
  EXPECT_STREQ(st.type_name, "a directory");
  std::string fifo = TmpPath("storage_lookup.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(storage_lookup(fifo.c_str(), &st), AL_OK); // never opened: no blocking
  EXPECT_EQ(st.type, STORAGE_OTHER);
  EXPECT_STREQ(st.type_name, "a FIFO");
  std::string missing = TmpPath("storage_lookup_missing.tar");
  EXPECT_EQ(storage_lookup(missing.c_str(), &st), AL_ENOTFOUND);
  EXPECT_EQ(std::string(al_last_error()), missing + ": cannot open: No such file or directory");
  // A URL is known only by a request.
  EXPECT_EQ(storage_lookup("http://127.0.0.1:9/s.tar", &st), AL_EUNSUPPORTED);
  EXPECT_EQ(storage_lookup("s3://b/s.tar", &st), AL_EUNSUPPORTED);
}

TEST(StorageTables, RemoteNounsAndPrefixes) {
  EXPECT_FALSE(storage_ops_for("/d/s.tar")->remote);
  EXPECT_TRUE(storage_ops_for("http://h/s.tar")->remote);
  EXPECT_TRUE(storage_ops_for("S3://b/s.tar")->remote);
  EXPECT_STREQ(storage_ops_for("/d/s.tar")->noun, "file");
  EXPECT_STREQ(storage_ops_for("https://h/s.tar")->noun, "object");
  EXPECT_TRUE(storage_is_prefix("s3://b"));
  EXPECT_TRUE(storage_is_prefix("s3://b/train/"));
  EXPECT_TRUE(storage_is_prefix("s3://b/train/shard-"));
  EXPECT_FALSE(storage_is_prefix("s3://b/train/shard-0.tar"));
  EXPECT_FALSE(storage_is_prefix("s3://b/train/shard-0.tar.gz"));
  EXPECT_FALSE(storage_is_prefix("http://h/train/"));   // an http(s) URL names one object
  EXPECT_FALSE(storage_is_prefix(TmpPath("").c_str())); // a directory is found by lookup
}

TEST(StorageListShards, ADirectorysTarFilesSorted) {
  std::string dir = TmpPath("storage_list_dir");
  mkdir(dir.c_str(), 0755);
  WriteFile(dir + "/b.tar.gz", "bb");
  WriteFile(dir + "/a.tar", "a");
  WriteFile(dir + "/c.txt", "c");
  WriteFile(dir + "/.hidden.tar", "h");
  WriteFile(dir + "/x.tar.bak", "xyz"); // holds ".tar": a directory lists *.tar*
  mkdir((dir + "/d.tar").c_str(), 0755);
  storage_listing l;
  ASSERT_EQ(storage_list_shards(nullptr, (dir + "//").c_str(), &l), AL_OK) << al_last_error();
  ASSERT_EQ(l.count, 3u);
  EXPECT_EQ(std::string(l.entries[0].url), dir + "/a.tar");
  EXPECT_EQ(l.entries[0].size, 1u);
  EXPECT_EQ(std::string(l.entries[1].url), dir + "/b.tar.gz");
  EXPECT_EQ(std::string(l.entries[2].url), dir + "/x.tar.bak");
  EXPECT_EQ(l.entries[2].size, 3u);
  storage_listing_free(&l);
  std::string empty = TmpPath("storage_list_empty");
  mkdir(empty.c_str(), 0755);
  EXPECT_EQ(storage_list_shards(nullptr, empty.c_str(), &l), AL_ENOTFOUND);
  EXPECT_EQ(std::string(al_last_error()), empty + ": no *.tar* files in directory");
  EXPECT_EQ(l.count, 0u);
  std::string missing = TmpPath("storage_list_missing");
  EXPECT_EQ(storage_list_shards(nullptr, missing.c_str(), &l), AL_EIO);
  EXPECT_EQ(std::string(al_last_error()),
            missing + ": cannot list directory: No such file or directory");
  EXPECT_EQ(storage_list_shards(nullptr, "http://h/d/", &l), AL_EINVAL);
  EXPECT_EQ(std::string(al_last_error()),
            "http://h/d/: a http URL names one object, not a container to list");
}

TEST(StorageCanonical, PathsAbsoluteAndNormalUrlsLowerCased) {
  char *s = storage_canonical("/data//errs/../corpus/./s.tar");
  EXPECT_STREQ(s, "/data/corpus/s.tar");
  free(s);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  unsetenv("PWD"); // getcwd's answer
  s = storage_canonical("rel/./s.tar");
  EXPECT_EQ(std::string(s), std::string(cwd) + "/rel/s.tar");
  free(s);
  s = storage_canonical("HTTPS://HoSt.Example:8080/Dir/S.tar?X-Sig=AbC");
  EXPECT_STREQ(s, "https://host.example:8080/Dir/S.tar?X-Sig=AbC");
  free(s);
  s = storage_canonical("S3://MyBucket/Key/S.tar"); // a bucket name is kept as written
  EXPECT_STREQ(s, "s3://MyBucket/Key/S.tar");
  free(s);
}

// One ustar member: header block (name, size, checksum) then the data padded to 512 bytes.
void AddMember(std::string *tar, const std::string &name, const std::string &data) {
  char h[512];
  std::memset(h, 0, sizeof h);
  std::snprintf(h, 100, "%s", name.c_str());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 124, 12, "%011o", (unsigned)data.size());
  std::snprintf(h + 136, 12, "%011o", 0u);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : std::string(h, sizeof h)) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  tar->append(h, sizeof h);
  tar->append(data);
  tar->append((512 - data.size() % 512) % 512, '\0');
}

TEST(StorageTar, HeaderWalkOverAFile) {
  std::string tar;
  AddMember(&tar, "k1.json", "{\"width\": 4}");
  AddMember(&tar, "k1.latent", std::string(3000, 'x'));
  AddMember(&tar, "k2.json", "{}");
  tar.append(1024, '\0');
  std::string path = TmpPath("storage_walk.tar");
  WriteFile(path, tar);
  storage_obj *o = nullptr;
  ASSERT_EQ(storage_open(nullptr, path.c_str(), &o), AL_OK) << al_last_error();
  storage_tar_listing l;
  ASSERT_EQ(storage_tar_scan(o, 512, &l), AL_OK) << al_last_error();
  ASSERT_EQ(l.count, 3u);
  EXPECT_STREQ(l.members[0].name, "k1.json");
  EXPECT_EQ(l.members[0].data_off, 512u);
  EXPECT_STREQ(l.members[1].name, "k1.latent");
  EXPECT_EQ(l.members[1].header_off, 1024u);
  EXPECT_EQ(l.members[1].size, 3000u);
  EXPECT_STREQ(l.members[2].name, "k2.json");
  EXPECT_EQ(l.members[2].data_off, 1024u + 512 + 3072 + 512);
  storage_tar_listing_free(&l);
  storage_close(o);
  // Cut inside the last header: the error names the file and the offset.
  std::string cut = TmpPath("storage_walk_cut.tar");
  WriteFile(cut, tar.substr(0, 1024 + 512 + 3072 + 100));
  ASSERT_EQ(storage_open(nullptr, cut.c_str(), &o), AL_OK);
  EXPECT_EQ(storage_tar_scan(o, 0, &l), AL_EFORMAT);
  EXPECT_EQ(std::string(al_last_error()),
            cut + ": offset 4608: the tar ends inside a header (size 4708)");
  storage_close(o);
}

} // namespace
