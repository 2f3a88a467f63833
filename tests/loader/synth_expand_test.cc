// The synthetic corpus writer (shapes, sizes, determinism) and SHARD argument expansion.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"
}

using altest::TmpPath;

namespace {

TEST(Synth, ShapesFollowTheDistribution) {
  const int n = 20000;
  int images = 0, wan = 0, portrait = 0;
  for (int i = 0; i < n; i++) {
    al_synth_sample_meta m = AL_SYNTH_SAMPLE_META_INIT;
    ASSERT_EQ(al_synth_sample(42, (uint64_t)i, &m), AL_OK);
    ASSERT_EQ(m.width % 16, 0u);
    ASSERT_EQ(m.height % 16, 0u);
    uint32_t lo = std::min(m.width, m.height), hi = std::max(m.width, m.height);
    ASSERT_GE(lo, 240u);
    ASSERT_LE(lo, 720u);
    ASSERT_LE(hi, lo * 21 / 9 + 16); // square .. 21:9
    portrait += m.height > m.width;
    uint64_t tp = 1 + (m.frames - 1) / 4;
    ASSERT_EQ(m.latent_bytes, 16ull * tp * (m.height / 8) * (m.width / 8) * 2);
    if (m.is_image) {
      images++;
      ASSERT_EQ(m.frames, 1u);
      ASSERT_EQ(m.fps, 0.0f);
    } else {
      ASSERT_GE(m.frames, 2u);
      ASSERT_LE(m.frames, 121u);
      ASSERT_TRUE(m.fps == 16.0f || m.fps == 24.0f || m.fps == 25.0f || m.fps == 30.0f) << m.fps;
      wan += (m.frames - 1) % 4 == 0;
    }
  }
  EXPECT_NEAR(images / (double)n, 0.40, 0.02);
  EXPECT_GT(wan / (double)(n - images), 0.85);         // mostly 4k+1
  EXPECT_NEAR(portrait / (double)n, 0.25 * 0.8, 0.03); // a quarter flipped, square ones stay
  // Same seed, same shapes; another seed, other shapes.
  al_synth_sample_meta a = AL_SYNTH_SAMPLE_META_INIT, b = AL_SYNTH_SAMPLE_META_INIT;
  ASSERT_EQ(al_synth_sample(42, 7, &a), AL_OK);
  ASSERT_EQ(al_synth_sample(42, 7, &b), AL_OK);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  int differ = 0;
  for (int i = 0; i < 50; i++) {
    al_synth_sample(1, (uint64_t)i, &a);
    al_synth_sample(2, (uint64_t)i, &b);
    differ += a.width != b.width || a.height != b.height || a.frames != b.frames;
  }
  EXPECT_GT(differ, 10);
}

std::vector<unsigned char> WriteAndRead(const std::string &dir, int threads,
                                        al_synth_payload payload, uint64_t seed = 9) {
  std::string out = TmpPath(dir);
  al_synth_options o{};
  o.out_dir = out.c_str();
  o.samples = 40;
  o.shards = 3;
  o.seed = seed;
  o.threads = threads;
  o.payload = payload;
  al_synth_stats st = AL_SYNTH_STATS_INIT;
  EXPECT_EQ(al_synth_write(&o, &st), AL_OK) << al_last_error();
  EXPECT_EQ(st.images + st.videos, 40u);
  std::vector<unsigned char> all;
  for (int k = 0; k < 3; k++) {
    char b[64];
    std::snprintf(b, sizeof b, "/shard-%06d.tar", k);
    auto v = altest::ReadBytes(out + b);
    EXPECT_FALSE(v.empty());
    EXPECT_EQ(v.size() % 512, 0u);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(Synth, ByteIdenticalForASeedWhateverTheThreads) {
  auto a = WriteAndRead("det1", 1, AL_SYNTH_LATENT);
  auto b = WriteAndRead("det4", 4, AL_SYNTH_LATENT);
  EXPECT_EQ(a, b);
  auto c = WriteAndRead("det_other", 2, AL_SYNTH_LATENT, 10);
  EXPECT_NE(a, c);
}

// Shards were written in place (open O_TRUNC): a symlink planted at a shard's name
// was followed and its target overwritten; a crash left a half shard under the real name.
TEST(Synth, ShardsNeverWriteThroughALink) {
  std::string out = TmpPath("synth_link");
  mkdir(out.c_str(), 0755);
  std::string victim = TmpPath("synth_victim"), link = out + "/shard-000000.tar";
  altest::WriteFile(victim, "keep");
  unlink(link.c_str());
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  al_synth_options o{};
  o.out_dir = out.c_str();
  o.samples = 4;
  o.shards = 1;
  o.payload = AL_SYNTH_NONE;
  ASSERT_EQ(al_synth_write(&o, nullptr), AL_OK) << al_last_error();
  EXPECT_EQ(altest::ReadFile(victim), "keep");
  struct stat st;
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_GT(st.st_size, 0);
}

TEST(Synth, MetadataOnlyShards) {
  WriteAndRead("meta_only", 2, AL_SYNTH_NONE);
  std::string dir = TmpPath("meta_only");
  std::vector<std::string> paths = {dir};
  al_index_options o{};
  o.progress = -1;
  char **p = nullptr;
  size_t n = 0;
  ASSERT_EQ(al_shard_expand(dir.c_str(), &p, &n), AL_OK);
  ASSERT_EQ(n, 3u);
  al_index *idx = nullptr;
  ASSERT_EQ(al_index_build(&idx, (const char *const *)p, n, &o, nullptr), AL_OK);
  EXPECT_EQ(al_index_sample_count(idx), 40u);
  for (size_t i = 0; i < 40; i++) {
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(idx, i, &s), AL_OK);
    EXPECT_EQ(s.n_members, 1u);
  }
  al_index_free(idx);
  for (size_t i = 0; i < n; i++) free(p[i]);
  free(p);
}

TEST(Synth, BadOptions) {
  al_synth_options o{};
  EXPECT_EQ(al_synth_write(&o, nullptr), AL_EINVAL);
  std::string f = TmpPath("a-file");
  altest::WriteFile(f, "x");
  o.out_dir = f.c_str();
  EXPECT_NE(al_synth_write(&o, nullptr), AL_OK); // not a directory
}

struct Expanded {
  std::vector<std::string> v;
  int rc;
};

Expanded Expand(const std::string &arg) {
  char **p = nullptr;
  size_t n = 0;
  Expanded e;
  e.rc = al_shard_expand(arg.c_str(), &p, &n);
  for (size_t i = 0; i < n; i++) {
    e.v.push_back(p[i]);
    free(p[i]);
  }
  free(p);
  return e;
}

TEST(Expand, BraceRanges) {
  Expanded e = Expand("/d/shard-{000000..000003}.tar");
  ASSERT_EQ(e.rc, AL_OK);
  ASSERT_EQ(e.v.size(), 4u);
  EXPECT_EQ(e.v[0], "/d/shard-000000.tar");
  EXPECT_EQ(e.v[3], "/d/shard-000003.tar");
  e = Expand("s{8..11}.tar");
  ASSERT_EQ(e.v.size(), 4u);
  EXPECT_EQ(e.v[0], "s8.tar");
  EXPECT_EQ(e.v[3], "s11.tar");
  e = Expand("s{3..1}.tar");
  ASSERT_EQ(e.v.size(), 3u);
  EXPECT_EQ(e.v[0], "s3.tar");
  e = Expand("{a,b}/p-{0..1}.tar");
  ASSERT_EQ(e.v.size(), 4u);
  EXPECT_EQ(e.v[0], "a/p-0.tar");
  EXPECT_EQ(e.v[1], "a/p-1.tar");
  EXPECT_EQ(e.v[3], "b/p-1.tar");
  EXPECT_EQ(Expand("s{1..x}.tar").rc, AL_EINVAL);
  EXPECT_EQ(Expand("s{1..3.tar").rc, AL_EINVAL);
  EXPECT_EQ(Expand("s{0..99999999}.tar").rc, AL_ERANGE);
  EXPECT_EQ(Expand("").rc, AL_EINVAL);
}

TEST(Expand, DirectoryAndFiles) {
  std::string dir = TmpPath("expand_dir");
  mkdir(dir.c_str(), 0755);
  for (const char *n : {"b.tar", "a.tar.lz4", "c.tar.gz", "notes.txt", ".hidden.tar"})
    altest::WriteFile(dir + "/" + n, "x");
  mkdir((dir + "/sub.tar").c_str(), 0755); // a directory named like a shard is not one
  Expanded e = Expand(dir);
  ASSERT_EQ(e.rc, AL_OK);
  ASSERT_EQ(e.v.size(), 3u);
  EXPECT_EQ(e.v[0], dir + "/a.tar.lz4");
  EXPECT_EQ(e.v[1], dir + "/b.tar");
  EXPECT_EQ(e.v[2], dir + "/c.tar.gz");
  e = Expand(dir + "/");
  ASSERT_EQ(e.v.size(), 3u);
  EXPECT_EQ(e.v[0], dir + "/a.tar.lz4");
  std::string empty = TmpPath("expand_empty");
  mkdir(empty.c_str(), 0755);
  EXPECT_EQ(Expand(empty).rc, AL_ENOTFOUND);
  // A file, or a path that does not exist, passes through (the build reports it).
  e = Expand(dir + "/b.tar");
  ASSERT_EQ(e.v.size(), 1u);
  e = Expand("/no/such/file.tar");
  ASSERT_EQ(e.v.size(), 1u);
  EXPECT_EQ(e.v[0], "/no/such/file.tar");
  // Appends to what is there.
  char **p = nullptr;
  size_t n = 0;
  ASSERT_EQ(al_shard_expand("x.tar", &p, &n), AL_OK);
  ASSERT_EQ(al_shard_expand("y{1..2}.tar", &p, &n), AL_OK);
  ASSERT_EQ(n, 3u);
  EXPECT_STREQ(p[2], "y2.tar");
  for (size_t i = 0; i < n; i++) free(p[i]);
  free(p);
}

TEST(Expand, BraceExpandedShardsIndexLikeTheDirectory) {
  std::string out = TmpPath("brace_corpus");
  al_synth_options o{};
  o.out_dir = out.c_str();
  o.samples = 30;
  o.shards = 3;
  o.payload = AL_SYNTH_NONE;
  ASSERT_EQ(al_synth_write(&o, nullptr), AL_OK);
  Expanded a = Expand(out + "/shard-{000000..000002}.tar");
  Expanded b = Expand(out);
  EXPECT_EQ(a.v, b.v);
}

} // namespace
