// The cache folder's plan order (stream/cache_internal.h): a run of ranges stored with one
// fetch and split into entries, entries the folder holds neither fetched nor stored again, and
// eviction taking read entries first (oldest read first), then unread ones whose read is
// furthest, never one read sooner while a later one is left.
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/al_status.h"
#include "stream/cache_internal.h"

namespace {

struct Server {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<uint64_t, uint64_t>> fetched; // (offset, length) of each fetch
  size_t counted = 0;                                 // spans the cache said it fetched
  explicit Server(size_t size) : bytes(size) {
    uint32_t seed = 7;
    for (size_t i = 0; i < size; i++) {
      seed = seed * 1664525u + 1013904223u;
      bytes[i] = (uint8_t)(seed >> 24);
    }
  }
};

int Fetch(void *ctx, uint64_t off, uint64_t len, void *dst) {
  Server *s = static_cast<Server *>(ctx);
  s->fetched.push_back({off, len});
  memcpy(dst, s->bytes.data() + off, (size_t)len);
  return AL_OK;
}

void Count(void *ctx, size_t n) { static_cast<Server *>(ctx)->counted += n; }

size_t Entries(const std::string &dir) {
  size_t n = 0;
  DIR *d = opendir(dir.c_str());
  if (!d) return 0;
  while (struct dirent *e = readdir(d)) n += !strncmp(e->d_name, "e-", 2);
  closedir(d);
  return n;
}

class CacheOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    const char *t = getenv("TEST_TMPDIR");
    dir = std::string(t ? t : "/tmp") + "/cache_order_" + std::to_string(getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(system(("rm -rf '" + dir + "'").c_str()), 0);
  }
  void Open(uint64_t limit) {
    ASSERT_EQ(stream_cache_open(&c, dir.c_str(), limit), AL_OK);
    ASSERT_EQ(stream_cache_lock_fd(c, &fd), AL_OK);
  }
  void TearDown() override {
    if (fd >= 0) close(fd);
    stream_cache_close(c);
  }
  // Whether [off, off + len) is in the folder (a read that must not fetch: a poisoned server).
  bool Holds(uint64_t off, uint64_t len) {
    Server none(0);
    std::vector<uint8_t> got(len, 0xAB);
    int hit = 0;
    uint64_t ev = 0;
    stream_cache_get(c, fd, kUrl, "e1", kSize, off, len, got.data(), Refuse, &none, 0, 0, &hit,
                     &ev);
    return hit == 1 && !memcmp(got.data(), srv.bytes.data() + off, len);
  }
  static int Refuse(void *, uint64_t, uint64_t, void *) {
    return al_set_error(AL_EIO, "not in the folder");
  }
  static constexpr const char *kUrl = "http://h/shard.tar";
  static constexpr uint64_t kSize = 1 << 20;
  Server srv{kSize};
  std::string dir;
  stream_cache *c = nullptr;
  int fd = -1;
};

TEST_F(CacheOrder, ARunIsOneFetchSplitIntoEntriesAndHeldEntriesAreNotFetched) {
  Open(1 << 20);
  const stream_cache_span spans[] = {{1000, 4000}, {5512, 3000}, {9000, 100}};
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, spans, 3, 4, Fetch, Count, &srv, &ev),
            AL_OK);
  EXPECT_EQ(srv.counted, 3u);
  ASSERT_EQ(srv.fetched.size(), 1u);
  EXPECT_EQ(srv.fetched[0], std::make_pair(uint64_t{1000}, uint64_t{8100})); // gaps included
  EXPECT_EQ(Entries(dir), 3u);
  for (const stream_cache_span &s : spans) EXPECT_TRUE(Holds(s.off, s.len)) << s.off;
  // Again, with one new member: only it is fetched.
  const stream_cache_span more[] = {{1000, 4000}, {5512, 3000}, {20000, 50}};
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, more, 3, 4, Fetch, Count, &srv, &ev),
            AL_OK);
  EXPECT_EQ(srv.counted, 4u); // one more
  ASSERT_EQ(srv.fetched.size(), 2u);
  EXPECT_EQ(srv.fetched[1], std::make_pair(uint64_t{20000}, uint64_t{50}));
  // Another ETag is another object: nothing held.
  size_t before = srv.fetched.size();
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e2", kSize, spans, 1, 4, Fetch, Count, &srv, &ev),
            AL_OK);
  EXPECT_EQ(srv.fetched.size(), before + 1);
}

TEST_F(CacheOrder, EvictionTakesReadEntriesFirstThenTheFurthestRead) {
  const uint64_t kLen = 10000;
  Open(5 * kLen + kLen / 2); // room for 5 entries
  uint64_t ev = 0;
  // Stored ahead of their reads at steps 7, 3, 9, 5 (offsets 0, 1, 2, 3 x 2 kLen).
  const uint32_t steps[] = {7, 3, 9, 5};
  for (int i = 0; i < 4; i++) {
    stream_cache_span s = {(uint64_t)i * 2 * kLen, kLen};
    ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, &s, 1, steps[i], Fetch, Count, &srv,
                                    &ev),
              AL_OK);
  }
  // Read into a batch at step 2 (offset 8 kLen): stored, consumed.
  std::vector<uint8_t> buf(kLen);
  int hit = 0;
  ASSERT_EQ(stream_cache_get(c, fd, kUrl, "e1", kSize, 8 * kLen, kLen, buf.data(), Fetch, &srv, 1,
                             2, &hit, &ev),
            AL_OK);
  EXPECT_EQ(hit, 0);
  EXPECT_EQ(ev, 0u);
  EXPECT_EQ(Entries(dir), 5u);
  // One more, read at step 4: the folder must drop one entry: the one read at step 2.
  stream_cache_span s = {10 * kLen, kLen};
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, &s, 1, 4, Fetch, Count, &srv, &ev),
            AL_OK);
  EXPECT_EQ(ev, kLen);
  EXPECT_FALSE(Holds(8 * kLen, kLen)) << "the read entry should have gone first";
  // And another, read at step 6: now the unread entry read furthest (step 9, offset 4 kLen).
  ev = 0;
  s = {12 * kLen, kLen};
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, &s, 1, 6, Fetch, Count, &srv, &ev),
            AL_OK);
  EXPECT_EQ(ev, kLen);
  EXPECT_FALSE(Holds(4 * kLen, kLen)) << "the entry read at step 9 should have gone";
  for (uint64_t off : {uint64_t{0}, 2 * kLen, 6 * kLen, 10 * kLen, 12 * kLen})
    EXPECT_TRUE(Holds(off, kLen)) << off;
}

} // namespace
