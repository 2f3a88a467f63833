// The cache folder never writes or touches anything outside itself (stream/cache_internal.h):
// symbolic links, hard links, FIFOs and folders planted at its names (`locks`, the temporary
// names, entry names) and a folder path swapped for a link after the open. Each case checks
// that a file outside the folder keeps its bytes and its mtime, and what the cache did instead
// (refused naming the path, or replaced the name with its own regular file).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/al_status.h"
#include "stream/cache_internal.h"
#include "stream/shard_download_internal.h"

namespace {

constexpr const char *kUrl = "http://h/shard.tar";
constexpr uint64_t kSize = 1 << 16;
constexpr time_t kOutsideMtime = 1000000000; // 2001: any touch moves it

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = (uint8_t)(seed >> 24);
  }
  return v;
}

struct Server {
  std::vector<uint8_t> bytes = Pattern(kSize, 7);
  int fetches = 0;
};

int Fetch(void *ctx, uint64_t off, uint64_t len, void *dst) {
  Server *s = static_cast<Server *>(ctx);
  s->fetches++;
  memcpy(dst, s->bytes.data() + off, (size_t)len);
  return AL_OK;
}

void Count(void *, size_t) {}

int FillObject(void *ctx, int fd, const char *) {
  Server *s = static_cast<Server *>(ctx);
  s->fetches++;
  return pwrite(fd, s->bytes.data(), s->bytes.size(), 0) == (ssize_t)s->bytes.size()
             ? AL_OK
             : al_set_error(AL_EIO, "short write");
}

std::vector<uint8_t> ReadFile(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
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

bool IsLink(const std::string &p) {
  struct stat sb;
  return lstat(p.c_str(), &sb) == 0 && S_ISLNK(sb.st_mode);
}

bool IsRegular(const std::string &p) {
  struct stat sb;
  return lstat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

std::string TmpName(int attempt) {
  std::string n = "t-" + std::to_string(getpid()) + "-" + std::to_string(syscall(SYS_gettid));
  return attempt < 0 ? n : n + "-" + std::to_string(attempt);
}

class CacheLinks : public ::testing::Test {
 protected:
  void SetUp() override {
    const char *t = getenv("TEST_TMPDIR");
    base = std::string(t ? t : "/tmp") + "/cache_links_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(system(("rm -rf '" + base + "'").c_str()), 0);
    ASSERT_EQ(mkdir(base.c_str(), 0777), 0);
    dir = base + "/cache";
    ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
    outside = base + "/outside";
    MakeOutside(outside, 4096);
  }
  void TearDown() override {
    if (fd >= 0) close(fd);
    stream_cache_close(c);
    (void)system(("rm -rf '" + base + "'").c_str());
  }
  // A file outside the folder: known bytes, an mtime in 2001.
  void MakeOutside(const std::string &p, size_t n) {
    original = Pattern(n, 99);
    std::ofstream(p, std::ios::binary).write((const char *)original.data(), original.size());
    struct timespec ts[2] = {{kOutsideMtime, 0}, {kOutsideMtime, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
  }
  void ExpectUntouched(const std::string &p) {
    EXPECT_EQ(ReadFile(p), original) << p << ": the outside file's bytes changed";
    struct stat sb;
    ASSERT_EQ(stat(p.c_str(), &sb), 0);
    EXPECT_EQ(sb.st_mtim.tv_sec, kOutsideMtime) << p << ": the outside file's mtime changed";
    EXPECT_EQ(sb.st_mtim.tv_nsec, 0) << p;
    EXPECT_EQ((size_t)sb.st_size, original.size()) << p;
  }
  void Open(uint64_t limit = 1 << 30) {
    ASSERT_EQ(stream_cache_open(&c, dir.c_str(), limit), AL_OK) << al_last_error();
    ASSERT_EQ(stream_cache_lock_fd(c, &fd), AL_OK) << al_last_error();
  }
  // A range read through the cache: AL_OK and the server's bytes, or the status.
  int Get(uint64_t off, uint64_t len, int consume, int *hit) {
    std::vector<uint8_t> got(len, 0xAB);
    uint64_t ev = 0;
    int rc = stream_cache_get(c, fd, kUrl, "e1", kSize, off, len, got.data(), Fetch, &srv, consume,
                              3, hit, &ev);
    if (rc == AL_OK) {
      EXPECT_EQ(0, memcmp(got.data(), srv.bytes.data() + off, len)) << "bytes at " << off;
    }
    return rc;
  }
  // The name of the one entry the folder holds.
  std::string OnlyEntry() {
    std::vector<std::string> e = Names(dir, "e-");
    EXPECT_EQ(e.size(), 1u);
    return e.empty() ? "" : e[0];
  }
  // Stores [off, off + len) once, learns its entry's name and removes the entry.
  std::string EntryNameOf(uint64_t off, uint64_t len) {
    int hit = 0;
    EXPECT_EQ(Get(off, len, 0, &hit), AL_OK);
    std::string name = OnlyEntry();
    EXPECT_EQ(unlink((dir + "/" + name).c_str()), 0);
    return name;
  }
  std::string ObjectEntryName() {
    int ofd = -1, hit = 0;
    uint64_t ev = 0;
    EXPECT_EQ(stream_cache_get_object(c, fd, kUrl, "e1", kSize, FillObject, &srv, &ofd, &hit, &ev),
              AL_OK);
    if (ofd >= 0) close(ofd);
    std::string name = OnlyEntry();
    EXPECT_EQ(unlink((dir + "/" + name).c_str()), 0);
    return name;
  }
  std::string base, dir, outside;
  std::vector<uint8_t> original;
  Server srv;
  stream_cache *c = nullptr;
  int fd = -1;
};

TEST_F(CacheLinks, ALocksLinkIsRefusedNamingItAndItsTargetIsUntouched) {
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/locks").c_str()), 0);
  ASSERT_EQ(stream_cache_open(&c, dir.c_str(), 1 << 20), AL_OK);
  int rc = stream_cache_lock_fd(c, &fd);
  EXPECT_EQ(rc, AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find(dir + "/locks is a symbolic link"), std::string::npos)
      << al_last_error();
  if (rc == AL_OK) { // a store writes the running total into the lock file
    int hit = 0;
    EXPECT_EQ(Get(0, 100, 0, &hit), AL_OK);
  }
  ExpectUntouched(outside);
  EXPECT_TRUE(IsLink(dir + "/locks"));
  // A dangling link: its target is not created.
  ASSERT_EQ(unlink((dir + "/locks").c_str()), 0);
  ASSERT_EQ(symlink((base + "/absent").c_str(), (dir + "/locks").c_str()), 0);
  if (fd >= 0) close(fd);
  fd = -1;
  EXPECT_EQ(stream_cache_lock_fd(c, &fd), AL_EINVAL);
  EXPECT_NE(access((base + "/absent").c_str(), F_OK), 0) << "the link's target was created";
}

TEST_F(CacheLinks, ALocksFileWithAnotherNameOrNotRegularIsRefused) {
  ASSERT_EQ(link(outside.c_str(), (dir + "/locks").c_str()), 0);
  ASSERT_EQ(stream_cache_open(&c, dir.c_str(), 1 << 20), AL_OK);
  int rc = stream_cache_lock_fd(c, &fd);
  EXPECT_EQ(rc, AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find(dir + "/locks has 2 hard links"), std::string::npos)
      << al_last_error();
  if (rc == AL_OK) {
    int hit = 0;
    EXPECT_EQ(Get(0, 100, 0, &hit), AL_OK);
  }
  ExpectUntouched(outside);
  ASSERT_EQ(unlink((dir + "/locks").c_str()), 0);
  ASSERT_EQ(mkfifo((dir + "/locks").c_str(), 0666), 0);
  if (fd >= 0) close(fd);
  fd = -1;
  EXPECT_EQ(stream_cache_lock_fd(c, &fd), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find(dir + "/locks is a FIFO"), std::string::npos)
      << al_last_error();
}

TEST_F(CacheLinks, LinksAtTheTemporaryNamesAreNeverFollowed) {
  Open();
  // Links at the names this thread's next store tries first (the single name of the past
  // included), planted again before each store (an eviction scan removes them).
  auto plant = [&](int from, int to) {
    for (int a = from; a < to; a++) {
      std::string p = dir + "/" + TmpName(a);
      if (!IsLink(p)) {
        ASSERT_EQ(symlink(outside.c_str(), p.c_str()), 0) << p;
      }
    }
  };
  plant(-1, 4);
  int hit = 0;
  ASSERT_EQ(Get(0, 1000, 1, &hit), AL_OK) << al_last_error();
  EXPECT_EQ(hit, 0);
  plant(-1, 4);
  const stream_cache_span spans[] = {{2000, 500}, {3000, 700}};
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, spans, 2, 4, Fetch, Count, &srv, &ev),
            AL_OK)
      << al_last_error();
  plant(-1, 4);
  int ofd = -1;
  ASSERT_EQ(stream_cache_get_object(c, fd, kUrl, "e1", kSize, FillObject, &srv, &ofd, &hit, &ev),
            AL_OK)
      << al_last_error();
  close(ofd);
  EXPECT_EQ(Names(dir, "e-").size(), 4u);
  for (const std::string &e : Names(dir, "e-")) EXPECT_TRUE(IsRegular(dir + "/" + e)) << e;
  ExpectUntouched(outside);
  // Every name taken: the store fails naming the folder, still without following a link.
  plant(-1, 64);
  EXPECT_EQ(Get(5000, 100, 1, &hit), AL_EIO);
  EXPECT_NE(std::string(al_last_error()).find("temporary file " + dir + "/" + TmpName(63)),
            std::string::npos)
      << al_last_error();
  ExpectUntouched(outside);
}

TEST_F(CacheLinks, ALinkAtAnEntryNameIsReplacedNeverReadNorTouched) {
  Open();
  MakeOutside(outside, 1000); // the entry's size: a followed link would be a hit
  const std::string name = EntryNameOf(0, 1000);
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/" + name).c_str()), 0);
  int hit = 1;
  ASSERT_EQ(Get(0, 1000, 1, &hit), AL_OK) << al_last_error(); // checks the server's bytes
  EXPECT_EQ(hit, 0) << "read through the link";
  EXPECT_TRUE(IsRegular(dir + "/" + name)) << "the link was not replaced";
  ExpectUntouched(outside);
  // The prefetcher's touch (a run the folder holds): the same.
  ASSERT_EQ(unlink((dir + "/" + name).c_str()), 0);
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/" + name).c_str()), 0);
  int before = srv.fetches;
  const stream_cache_span span = {0, 1000};
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_warm_run(c, fd, kUrl, "e1", kSize, &span, 1, 9, Fetch, Count, &srv, &ev),
            AL_OK)
      << al_last_error();
  EXPECT_EQ(srv.fetches, before + 1) << "the link was taken for the entry";
  EXPECT_TRUE(IsRegular(dir + "/" + name));
  ExpectUntouched(outside);
}

TEST_F(CacheLinks, ALinkAtAWholeObjectsEntryIsReplacedNeverTouched) {
  Open();
  MakeOutside(outside, kSize);
  const std::string name = ObjectEntryName();
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/" + name).c_str()), 0);
  int ofd = -1, hit = 1;
  uint64_t ev = 0;
  ASSERT_EQ(stream_cache_get_object(c, fd, kUrl, "e1", kSize, FillObject, &srv, &ofd, &hit, &ev),
            AL_OK)
      << al_last_error();
  EXPECT_EQ(hit, 0) << "the link was taken for the entry";
  std::vector<uint8_t> got(kSize);
  EXPECT_EQ(pread(ofd, got.data(), got.size(), 0), (ssize_t)kSize);
  EXPECT_EQ(got, srv.bytes);
  close(ofd);
  EXPECT_TRUE(IsRegular(dir + "/" + name));
  ExpectUntouched(outside);
}

TEST_F(CacheLinks, AHardLinkAtAnEntryNameIsReplacedNeverTouched) {
  Open();
  MakeOutside(outside, 1000);
  const std::string name = EntryNameOf(0, 1000);
  ASSERT_EQ(link(outside.c_str(), (dir + "/" + name).c_str()), 0);
  int hit = 1;
  ASSERT_EQ(Get(0, 1000, 1, &hit), AL_OK) << al_last_error();
  EXPECT_EQ(hit, 0) << "a file with a name outside the folder was taken for the entry";
  ExpectUntouched(outside);
  struct stat sb;
  ASSERT_EQ(stat(outside.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_nlink, 1u) << "the entry name still links the outside file";
}

TEST_F(CacheLinks, AFifoAtAnEntryNameDoesNotBlockAndIsReplaced) {
  Open();
  const std::string name = EntryNameOf(0, 1000);
  ASSERT_EQ(mkfifo((dir + "/" + name).c_str(), 0666), 0);
  int hit = 1;
  ASSERT_EQ(Get(0, 1000, 1, &hit), AL_OK) << al_last_error();
  EXPECT_EQ(hit, 0);
  EXPECT_TRUE(IsRegular(dir + "/" + name));
}

TEST_F(CacheLinks, AFolderAtAnEntryNameFailsTheStoreNamingIt) {
  Open();
  const std::string name = EntryNameOf(0, 1000);
  ASSERT_EQ(mkdir((dir + "/" + name).c_str(), 0777), 0);
  int hit = 1;
  EXPECT_EQ(Get(0, 1000, 1, &hit), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find(dir + "/" + name + " is a directory"),
            std::string::npos)
      << al_last_error();
  EXPECT_TRUE(Names(dir, "t-").empty()) << "the temporary file was left";
}

TEST_F(CacheLinks, EvictionRemovesPlantedLinksNotTheirTargets) {
  Open(4000);                                     // room for 4 entries of 1000 bytes
  const std::string dead_tmp = "t-999999999-1-0"; // above any pid_max: a dead process
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/" + dead_tmp).c_str()), 0);
  ASSERT_EQ(symlink(outside.c_str(), (dir + "/e-0000000000000000").c_str()), 0);
  int hit = 0;
  for (uint64_t i = 0; i < 6; i++) ASSERT_EQ(Get(i * 1000, 1000, 1, &hit), AL_OK) << i;
  ExpectUntouched(outside);
  EXPECT_FALSE(IsLink(dir + "/" + dead_tmp));
  EXPECT_FALSE(IsLink(dir + "/e-0000000000000000"));
  EXPECT_LE(Names(dir, "e-").size(), 4u);
}

TEST_F(CacheLinks, AFolderSwappedForALinkAfterTheOpenIsNotFollowed) {
  Open(3000); // room for 3 entries of 1000 bytes: the fourth store scans and evicts
  int hit = 0;
  ASSERT_EQ(Get(0, 1000, 1, &hit), AL_OK);
  // The folder moves away and a link to another folder takes its path.
  const std::string moved = base + "/moved", other = base + "/other";
  ASSERT_EQ(rename(dir.c_str(), moved.c_str()), 0);
  ASSERT_EQ(mkdir(other.c_str(), 0777), 0);
  ASSERT_EQ(symlink(other.c_str(), dir.c_str()), 0);
  const std::string victim = other + "/e-0000000000000001"; // looks like an old entry
  MakeOutside(victim, 1000);
  for (uint64_t i = 1; i < 5; i++) ASSERT_EQ(Get(i * 1000, 1000, 1, &hit), AL_OK) << i;
  ExpectUntouched(victim);
  EXPECT_EQ(Names(other, "").size(), 3u) << "only ., .. and the victim";
  EXPECT_FALSE(Names(moved, "e-").empty()) << "the entries stay in the folder opened";
}

} // namespace
