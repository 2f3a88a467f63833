// A whole object onto local disk (stream/shard_download_internal.h over the cache folder's
// stream_cache_get_object): one download for threads racing on one object, the entry found by
// the next call, a failed download leaving neither entry nor temporary file, the byte limit,
// objects over the limit and streams without a cache in an unlinked $TMPDIR file.
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/al_status.h"
#include "stream/cache_internal.h"
#include "stream/shard_download_internal.h"

namespace {

// An object of `size` pseudo-random bytes, served by ranges; counts the ranges fetched and
// fails at byte `fail_at` (UINT64_MAX: never).
struct Server {
  std::vector<uint8_t> bytes;
  std::atomic<int> fetches{0};
  uint64_t fail_at = UINT64_MAX;
  explicit Server(size_t size, uint32_t seed) : bytes(size) {
    for (size_t i = 0; i < size; i++) {
      seed = seed * 1664525u + 1013904223u;
      bytes[i] = (uint8_t)(seed >> 24);
    }
  }
};

int Fetch(void *ctx, uint64_t off, uint64_t len, void *dst) {
  Server *s = static_cast<Server *>(ctx);
  s->fetches++;
  if (off + len > s->fail_at) return al_set_error(AL_EIO, "http://h/o: connection reset");
  std::this_thread::sleep_for(std::chrono::milliseconds(2)); // let racing threads meet
  memcpy(dst, s->bytes.data() + off, (size_t)len);
  return AL_OK;
}

std::vector<uint8_t> ReadAll(int fd) {
  struct stat sb;
  EXPECT_EQ(fstat(fd, &sb), 0);
  std::vector<uint8_t> v((size_t)sb.st_size);
  EXPECT_EQ(pread(fd, v.data(), v.size(), 0), (ssize_t)v.size());
  return v;
}

std::vector<std::string> Names(const std::string &dir, const char *prefix) {
  std::vector<std::string> out;
  DIR *d = opendir(dir.c_str());
  if (!d) return out;
  while (struct dirent *e = readdir(d))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) out.push_back(e->d_name);
  closedir(d);
  return out;
}

class ShardDownload : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/shard_download_XXXXXX";
    ASSERT_NE(mkdtemp(t), nullptr);
    dir_ = t;
  }
  void TearDown() override {
    RemoveDir(dir_ + "/cache");
    RemoveDir(dir_ + "/tmp");
    rmdir(dir_.c_str());
  }
  static void RemoveDir(const std::string &d) {
    for (auto &n : Names(d, "")) unlink((d + "/" + n).c_str());
    rmdir(d.c_str());
  }
  stream_cache *Cache(uint64_t limit) {
    stream_cache *c = nullptr;
    EXPECT_EQ(stream_cache_open(&c, (dir_ + "/cache").c_str(), limit), AL_OK) << al_last_error();
    return c;
  }
  std::string dir_;
};

TEST_F(ShardDownload, ThreadsRacingOnOneObjectDownloadItOnce) {
  const uint64_t size = 3 * STREAM_DOWNLOAD_CHUNK + 12345; // four ranges
  Server srv(size, 1);
  stream_cache *c = Cache(64ull << 20);
  std::vector<std::thread> th;
  std::vector<std::vector<uint8_t>> got(4);
  std::atomic<int> hits{0};
  for (int i = 0; i < 4; i++)
    th.emplace_back([&, i] {
      int lock = -1, fd = -1, hit = 0;
      uint64_t ev = 0;
      ASSERT_EQ(stream_cache_lock_fd(c, &lock), AL_OK);
      ASSERT_EQ(stream_shard_download(c, lock, "http://h/o", "\"e1\"", size, Fetch, &srv, &fd, &hit,
                                      &ev),
                AL_OK)
          << al_last_error();
      hits += hit;
      got[i] = ReadAll(fd);
      close(fd);
      close(lock);
    });
  for (auto &t : th) t.join();
  EXPECT_EQ(srv.fetches.load(), 4) << "one download of four ranges";
  EXPECT_EQ(hits.load(), 3);
  for (auto &g : got) EXPECT_TRUE(g == srv.bytes);
  EXPECT_EQ(Names(dir_ + "/cache", "e-").size(), 1u);
  EXPECT_TRUE(Names(dir_ + "/cache", "t-").empty());
  // Another ETag is another object: downloaded again, a second entry.
  int lock = -1, fd = -1, hit = 1;
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_lock_fd(c, &lock), AL_OK);
  ASSERT_EQ(stream_shard_download(c, lock, "http://h/o", "\"e2\"", size, Fetch, &srv, &fd, &hit,
                                  &ev),
            AL_OK);
  EXPECT_EQ(hit, 0);
  EXPECT_EQ(srv.fetches.load(), 8);
  EXPECT_EQ(Names(dir_ + "/cache", "e-").size(), 2u);
  close(fd);
  close(lock);
  stream_cache_close(c);
}

TEST_F(ShardDownload, AFailedDownloadLeavesNothingAndTheNextOneStoresTheEntry) {
  Server srv(2 * STREAM_DOWNLOAD_CHUNK, 2);
  srv.fail_at = STREAM_DOWNLOAD_CHUNK + 1; // the second range fails
  stream_cache *c = Cache(64ull << 20);
  int lock = -1, fd = -1, hit = 0;
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_lock_fd(c, &lock), AL_OK);
  EXPECT_EQ(stream_shard_download(c, lock, "http://h/o", "", srv.bytes.size(), Fetch, &srv, &fd,
                                  &hit, &ev),
            AL_EIO);
  EXPECT_EQ(fd, -1);
  std::string e = al_last_error();
  EXPECT_NE(e.find("download of the compressed shard at byte 8388608"), std::string::npos) << e;
  EXPECT_NE(e.find("http://h/o: connection reset"), std::string::npos) << e;
  EXPECT_TRUE(Names(dir_ + "/cache", "e-").empty());
  EXPECT_TRUE(Names(dir_ + "/cache", "t-").empty());
  srv.fail_at = UINT64_MAX;
  ASSERT_EQ(stream_shard_download(c, lock, "http://h/o", "", srv.bytes.size(), Fetch, &srv, &fd,
                                  &hit, &ev),
            AL_OK);
  EXPECT_TRUE(ReadAll(fd) == srv.bytes);
  close(fd);
  EXPECT_EQ(Names(dir_ + "/cache", "e-").size(), 1u);
  close(lock);
  stream_cache_close(c);
}

TEST_F(ShardDownload, TheLimitHoldsAndAnObjectOverItGoesToAPrivateFile) {
  Server a(3 << 20, 3), b(3 << 20, 4), big(5 << 20, 5);
  stream_cache *c = Cache(4 << 20); // room for one of a, b; not for big
  ASSERT_EQ(mkdir((dir_ + "/tmp").c_str(), 0700), 0);
  setenv("TMPDIR", (dir_ + "/tmp").c_str(), 1);
  int lock = -1, fd = -1, hit = 0;
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_lock_fd(c, &lock), AL_OK);
  ASSERT_EQ(stream_shard_download(c, lock, "http://h/a", "", 3 << 20, Fetch, &a, &fd, &hit, &ev),
            AL_OK);
  int fa = fd;
  ASSERT_EQ(stream_shard_download(c, lock, "http://h/b", "", 3 << 20, Fetch, &b, &fd, &hit, &ev),
            AL_OK);
  EXPECT_EQ(ev, 3u << 20) << "a evicted to make room for b";
  EXPECT_EQ(Names(dir_ + "/cache", "e-").size(), 1u);
  EXPECT_TRUE(ReadAll(fa) == a.bytes) << "an evicted entry stays readable while open";
  close(fa);
  close(fd);
  ev = 0;
  ASSERT_EQ(stream_shard_download(c, lock, "http://h/big", "", 5 << 20, Fetch, &big, &fd, &hit,
                                  &ev),
            AL_OK);
  EXPECT_EQ(ev, 0u);
  EXPECT_TRUE(ReadAll(fd) == big.bytes);
  EXPECT_EQ(Names(dir_ + "/cache", "e-").size(), 1u) << "big is not kept";
  EXPECT_TRUE(Names(dir_ + "/tmp", "").size() == 2u) << "only . and ..: the file is unlinked";
  close(fd);
  // Without a cache: the private file too.
  ASSERT_EQ(stream_shard_download(nullptr, -1, "http://h/a", "", 3 << 20, Fetch, &a, &fd, &hit,
                                  &ev),
            AL_OK);
  EXPECT_EQ(hit, 0);
  EXPECT_TRUE(ReadAll(fd) == a.bytes);
  EXPECT_EQ(Names(dir_ + "/tmp", "adaptiveload-").size(), 0u);
  close(fd);
  setenv("TMPDIR", (dir_ + "/missing").c_str(), 1);
  EXPECT_EQ(stream_shard_download(nullptr, -1, "http://h/a", "", 3 << 20, Fetch, &a, &fd, &hit,
                                  &ev),
            AL_EIO);
  std::string e = al_last_error();
  EXPECT_NE(e.find("http://h/a: download of the compressed shard: temporary file " + dir_ +
                   "/missing/adaptiveload-shard-"),
            std::string::npos)
      << e;
  unsetenv("TMPDIR");
  close(lock);
  stream_cache_close(c);
}

} // namespace
