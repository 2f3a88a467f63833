// The in-memory index: hand assembly, accessors, save/load round trip, corrupt files.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"
}

using altest::TmpPath;

namespace {

// Two shards, `n` samples spread over them, images and videos, json + latent members.
al_index *MakeIndex(size_t n) {
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_new(&idx), AL_OK);
  uint32_t s0 = 9, s1 = 9;
  EXPECT_EQ(al_index_add_shard(idx, "/data/shard-0.tar", 1000000, 1, &s0), AL_OK);
  EXPECT_EQ(al_index_add_shard(idx, "/data/shard-1.tar.lz4", 2000000, 0, &s1), AL_OK);
  EXPECT_EQ(s0, 0u);
  EXPECT_EQ(s1, 1u);
  for (size_t i = 0; i < n; i++) {
    char key[32];
    std::snprintf(key, sizeof key, "%06zu-%08zu", i % 2, i);
    al_member_info m[2];
    m[0].ext = (i % 3 == 0) ? "json.lz4" : "json";
    m[0].offset = 512 + i * 4096;
    m[0].size = 90 + i % 7;
    m[0].lz4 = (i % 3 == 0);
    m[1].ext = "latent";
    m[1].offset = 1536 + i * 4096;
    m[1].size = 16ull * 21 * 60 * 104 * 2;
    m[1].lz4 = 0;
    bool video = i % 5 != 0;
    EXPECT_EQ(al_index_add_sample(idx, key, (uint32_t)(i % 2), 832, 480, video ? 81 : 1,
                                  video ? 16.0f : 0.0f, m, i % 4 == 0 ? 1 : 2),
              AL_OK);
  }
  return idx;
}

TEST(Index, HandAssemblyAccessors) {
  al_index *idx = MakeIndex(10);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_shard_count(idx), 2u);
  EXPECT_EQ(al_index_sample_count(idx), 10u);
  EXPECT_EQ(al_index_rejected_count(idx), 0u);
  al_shard_info sh = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(idx, 1, &sh), AL_OK);
  EXPECT_STREQ(sh.path, "/data/shard-1.tar.lz4");
  EXPECT_EQ(sh.size, 2000000u);
  EXPECT_EQ(sh.sample_count, 5u);
  EXPECT_EQ(sh.seekable, 0);
  altest::ExpectSample(idx, 3, "000001-00000003", 832, 480, 81, 16.0f);
  al_sample_info s = AL_SAMPLE_INFO_INIT;
  ASSERT_EQ(al_index_sample(idx, 3, &s), AL_OK);
  EXPECT_EQ(s.shard, 1u);
  EXPECT_EQ(s.n_members, 2u);
  al_member_info m;
  ASSERT_EQ(al_index_member(idx, 3, 1, &m), AL_OK);
  EXPECT_STREQ(m.ext, "latent");
  EXPECT_EQ(m.offset, 1536u + 3 * 4096);
  EXPECT_EQ(m.lz4, 0);
  // "json" finds a json.lz4 member too, with the lz4 flag set.
  ASSERT_EQ(al_index_find_member(idx, 3, "json", &m), AL_OK);
  EXPECT_STREQ(m.ext, "json.lz4");
  EXPECT_EQ(m.lz4, 1);
  ASSERT_EQ(al_index_find_member(idx, 1, "json", &m), AL_OK);
  EXPECT_STREQ(m.ext, "json");
  EXPECT_EQ(m.lz4, 0);
  EXPECT_EQ(al_index_find_member(idx, 4, "latent", &m), AL_ENOTFOUND); // one member only
  EXPECT_TRUE(altest::ErrorContains("latent"));
  EXPECT_EQ(al_index_find_member(idx, 1, "png", &m), AL_ENOTFOUND);
  EXPECT_EQ(al_index_sample(idx, 10, &s), AL_ERANGE);
  EXPECT_EQ(al_index_member(idx, 4, 1, &m), AL_ERANGE);
  EXPECT_EQ(al_index_add_sample(idx, "x", 2, 1, 1, 1, 0, nullptr, 0), AL_EINVAL); // no shard 2
  al_index_free(idx);
}

TEST(Index, FingerprintDependsOnKeysAndShards) {
  al_index *a = MakeIndex(100), *b = MakeIndex(100), *c = MakeIndex(101);
  EXPECT_EQ(al_index_fingerprint(a), al_index_fingerprint(b));
  EXPECT_NE(al_index_fingerprint(a), al_index_fingerprint(c));
  al_index *d = nullptr;
  ASSERT_EQ(al_index_new(&d), AL_OK);
  uint32_t id;
  ASSERT_EQ(al_index_add_shard(d, "/data/shard-0.tar", 1000001, 1, &id), AL_OK); // other size
  ASSERT_EQ(al_index_add_shard(d, "/data/shard-1.tar.lz4", 2000000, 0, &id), AL_OK);
  al_index *e = nullptr;
  ASSERT_EQ(al_index_new(&e), AL_OK);
  ASSERT_EQ(al_index_add_shard(e, "/data/shard-0.tar", 1000000, 1, &id), AL_OK);
  ASSERT_EQ(al_index_add_shard(e, "/data/shard-1.tar.lz4", 2000000, 0, &id), AL_OK);
  EXPECT_NE(al_index_fingerprint(d), al_index_fingerprint(e));
  al_index_free(a);
  al_index_free(b);
  al_index_free(c);
  al_index_free(d);
  al_index_free(e);
}

// A forged index that shifts a member's offset (or flips its LZ4 flag) would stream
// foreign bytes under a manifest planned from the real one: the fingerprint covers them.
TEST(Index, FingerprintCoversMemberOffsetsSizesAndLz4) {
  auto one = [](uint64_t off, uint64_t size, int lz4) {
    al_index *x = nullptr;
    EXPECT_EQ(al_index_new(&x), AL_OK);
    uint32_t id;
    EXPECT_EQ(al_index_add_shard(x, "/data/s.tar", 1 << 20, 1, &id), AL_OK);
    al_member_info m[2] = {{"json", 512, 30, 0}, {"latent", off, size, lz4}};
    EXPECT_EQ(al_index_add_sample(x, "k", 0, 64, 64, 1, 0, m, 2), AL_OK) << al_last_error();
    uint64_t fp = al_index_fingerprint(x);
    al_index_free(x);
    return fp;
  };
  uint64_t base = one(1536, 4096, 0);
  EXPECT_EQ(base, one(1536, 4096, 0));
  EXPECT_NE(base, one(1536 + 512, 4096, 0)) << "offset not covered";
  EXPECT_NE(base, one(1536, 4097, 0)) << "size not covered";
  EXPECT_NE(base, one(1536, 4096, 1)) << "LZ4 flag not covered";
}

// The fingerprint folded without an index (al_index_fp) is the index's, members and LZ4 flags
// included; a sample of a shard not added yet is refused.
TEST(Index, FingerprintFoldedWithoutTheIndex) {
  al_index *idx = nullptr;
  ASSERT_EQ(al_index_new(&idx), AL_OK);
  al_index_fp fp = AL_INDEX_FP_INIT;
  const char *paths[] = {"/data/a/shard-0.tar", "s3://b/shard-1.tar.lz4?X-Sig=1"};
  for (uint32_t s = 0; s < 2; s++) {
    uint32_t id;
    ASSERT_EQ(al_index_add_shard(idx, paths[s], 1000u + s, 1, &id), AL_OK) << al_last_error();
    al_index_fp_add_shard(&fp, paths[s], 1000u + s);
  }
  for (size_t i = 0; i < 300; i++) {
    char key[32];
    std::snprintf(key, sizeof key, "k-%zu", i);
    al_member_info m[2] = {{"json", 512 + i * 2048, 90 + i % 5, (int)(i % 3 == 0)},
                           {"latent", 1536 + i * 2048, 4000 + i, 0}};
    size_t nm = i % 4; // 0, 1 or 2 members
    if (nm > 2) nm = 2;
    ASSERT_EQ(al_index_add_sample(idx, key, (uint32_t)(i % 2), 64 + (uint32_t)i, 48, 1 + i % 9, 0,
                                  nm ? m : nullptr, nm),
              AL_OK);
    ASSERT_EQ(al_index_fp_add_sample(&fp, key, (uint32_t)(i % 2), 64 + (uint32_t)i, 48, 1 + i % 9,
                                     nm ? m : nullptr, nm),
              AL_OK);
  }
  EXPECT_EQ(al_index_fp_value(&fp), al_index_fingerprint(idx));
  al_index_fp other = fp;
  ASSERT_EQ(al_index_fp_add_sample(&other, "k-x", 0, 1, 1, 1, nullptr, 0), AL_OK);
  EXPECT_NE(al_index_fp_value(&other), al_index_fingerprint(idx));
  EXPECT_EQ(al_index_fp_add_sample(&fp, "k", 2, 1, 1, 1, nullptr, 0), AL_EINVAL);
  al_index_free(idx);
}

TEST(Index, MemoryPerSampleWithinBudget) {
  al_index *idx = MakeIndex(100000);
  size_t rec = 0, keys = 0;
  al_index_memory(idx, &rec, &keys);
  // 40-byte sample records + 16 bytes per member (1.75 members/sample here) + growth slack.
  EXPECT_LE(rec / 100000.0, 100.0);
  EXPECT_GE(keys, 100000u * 16);
  al_index_free(idx);
}

TEST(Index, SaveLoadRoundTrip) {
  al_index *idx = MakeIndex(40000); // several sample chunks
  ASSERT_EQ(al_index_add_rejected(idx, 1, "000001-x.json", 5120, "000001-x",
                                  "broken JSON: line 1 col 9"),
            AL_OK);
  ASSERT_EQ(al_index_add_rejected(idx, 0, nullptr, 0, nullptr, "not a tar archive"), AL_OK);
  std::string path = TmpPath("roundtrip.alidx");
  ASSERT_EQ(al_index_save(idx, path.c_str()), AL_OK) << al_last_error();
  al_index *back = nullptr;
  ASSERT_EQ(al_index_load(&back, path.c_str()), AL_OK) << al_last_error();
  altest::ExpectSameIndex(idx, back);
  EXPECT_EQ(al_index_fingerprint(idx), al_index_fingerprint(back));
  al_shard_info sh = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(back, 0, &sh), AL_OK);
  EXPECT_EQ(sh.rejected_count, 1u);
  // Saving the loaded index gives the same bytes.
  std::string path2 = TmpPath("roundtrip2.alidx");
  ASSERT_EQ(al_index_save(back, path2.c_str()), AL_OK);
  EXPECT_EQ(altest::ReadBytes(path), altest::ReadBytes(path2));
  al_index_free(idx);
  al_index_free(back);
}

TEST(Index, EmptyIndexRoundTrip) {
  al_index *idx = nullptr;
  ASSERT_EQ(al_index_new(&idx), AL_OK);
  std::string path = TmpPath("empty.alidx");
  ASSERT_EQ(al_index_save(idx, path.c_str()), AL_OK);
  al_index *back = nullptr;
  ASSERT_EQ(al_index_load(&back, path.c_str()), AL_OK) << al_last_error();
  EXPECT_EQ(al_index_sample_count(back), 0u);
  al_index_free(idx);
  al_index_free(back);
}

// An index file written by hand: a header, one chunk holding `shards` and `samples`, and
// `summary` when given.
void WriteIndexFile(const std::string &path, std::vector<Adaptiveload__Shard *> shards,
                    std::vector<Adaptiveload__Sample *> samples,
                    Adaptiveload__IndexSummary *summary) {
  pbio_writer *w = nullptr;
  ASSERT_EQ(pbio_writer_open(&w, path.c_str(), AL_KIND_INDEX), AL_OK);
  Adaptiveload__IndexHeader h = ADAPTIVELOAD__INDEX_HEADER__INIT;
  ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_HEADER, &h.base), AL_OK);
  Adaptiveload__IndexChunk c = ADAPTIVELOAD__INDEX_CHUNK__INIT;
  c.n_shards = shards.size();
  c.shards = shards.empty() ? nullptr : shards.data();
  c.n_samples = samples.size();
  c.samples = samples.empty() ? nullptr : samples.data();
  ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_CHUNK, &c.base), AL_OK);
  if (summary) {
    ASSERT_EQ(pbio_write_msg(w, AL_REC_INDEX_SUMMARY, &summary->base), AL_OK);
  }
  ASSERT_EQ(pbio_writer_close(w), AL_OK);
}

// An index file whose summary disagrees with its chunks is refused.
TEST(Index, LoadRejectsSummaryMismatch) {
  std::string path = TmpPath("badsum.alidx");
  Adaptiveload__Shard sh = ADAPTIVELOAD__SHARD__INIT;
  sh.path = (char *)"a.tar";
  sh.sample_count = 1;
  Adaptiveload__Sample s = ADAPTIVELOAD__SAMPLE__INIT;
  s.key = (char *)"k";
  Adaptiveload__IndexSummary sum = ADAPTIVELOAD__INDEX_SUMMARY__INIT;
  sum.shards = 1;
  sum.samples = 2; // wrong
  ASSERT_NO_FATAL_FAILURE(WriteIndexFile(path, {&sh}, {&s}, &sum));
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_load(&idx, path.c_str()), AL_EFORMAT);
  EXPECT_EQ(idx, nullptr);
  EXPECT_TRUE(altest::ErrorContains("summary"));
}

TEST(Index, LoadRejectsSampleWithUnknownShard) {
  std::string path = TmpPath("badshard.alidx");
  Adaptiveload__Sample s = ADAPTIVELOAD__SAMPLE__INIT;
  s.key = (char *)"k";
  s.shard = 3;
  ASSERT_NO_FATAL_FAILURE(WriteIndexFile(path, {}, {&s}, nullptr));
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_load(&idx, path.c_str()), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("shard id 3"));
}

TEST(Index, LoadRejectsOtherFileKinds) {
  std::string path = TmpPath("cost.alcm");
  Adaptiveload__CostModel cm = ADAPTIVELOAD__COST_MODEL__INIT;
  ASSERT_EQ(pbio_save_one(path.c_str(), AL_KIND_COST, AL_REC_COST_MODEL, &cm.base), AL_OK);
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_load(&idx, path.c_str()), AL_EFORMAT);
  EXPECT_EQ(al_index_load(&idx, TmpPath("does-not-exist").c_str()), AL_ENOTFOUND);
}

// A shard's part of the fingerprint is its file name: for an http(s) URL without its query
// or fragment (a presigned URL signed again is the same object) and whatever the scheme's
// case; an s3:// key is opaque, its '?' part of the name.
TEST(Index, FingerprintLeavesOutAUrlsQuery) {
  auto fp = [](const std::vector<std::string> &paths) {
    al_index *idx = nullptr;
    EXPECT_EQ(al_index_new(&idx), AL_OK);
    uint32_t id;
    for (const std::string &p : paths)
      EXPECT_EQ(al_index_add_shard(idx, p.c_str(), 1000, 1, &id), AL_OK);
    uint64_t f = al_index_fingerprint(idx);
    al_index_free(idx);
    return f;
  };
  uint64_t local = fp({"/data/shard-0.tar", "/data/shard-1.tar"});
  EXPECT_EQ(fp({"http://h/c/shard-0.tar?X-Amz-Signature=a", "https://h/c/shard-1.tar#x"}), local);
  EXPECT_EQ(fp({"HTTP://h/c/shard-0.tar?X-Amz-Credential=AKIA/2026/us-east-1/s3&X-Amz-Signature=b",
                "Https://h/c/shard-1.tar?v=2#x/y"}),
            local);
  EXPECT_NE(fp({"s3://b/c/shard-0.tar?v=1", "s3://b/c/shard-1.tar"}), local);
  EXPECT_EQ(fp({"s3://b/c/shard-0.tar", "S3://b/c/shard-1.tar"}), local);
}

// A URL with user:password@ (any scheme, any case) is refused wherever a shard path enters an
// index, and no message carries the password.
TEST(Index, UrlsWithAPasswordAreRefusedByEveryEntryPoint) {
  const char *secret = "pw-never-printed";
  auto refused = [&](int rc, const char *what) {
    EXPECT_EQ(rc, AL_EINVAL) << what;
    EXPECT_EQ(std::strstr(al_last_error(), secret), nullptr) << what << ": " << al_last_error();
    EXPECT_NE(std::strstr(al_last_error(), "***@"), nullptr) << what << ": " << al_last_error();
    EXPECT_NE(std::strstr(al_last_error(), "user:password@ is refused"), nullptr)
        << al_last_error();
  };
  al_index *idx = MakeIndex(4);
  uint32_t id;
  refused(al_index_add_shard(idx, "http://u:pw-never-printed@h/a.tar", 10, 1, &id), "add_shard");
  refused(al_index_add_shard(idx, "S3://u:pw-never-printed@bkt/a.tar", 10, 1, &id), "add_shard s3");
  refused(al_index_remap_root(idx, "/data", "HTTP://u:pw-never-printed@h/c", nullptr), "root TO");
  refused(al_index_remap_root(idx, "https://u:pw-never-printed@h/c", "/data", nullptr),
          "root FROM");
  EXPECT_EQ(al_index_shard_count(idx), 2u);
  al_index_free(idx);
  char **paths = nullptr;
  size_t n = 0;
  refused(al_shard_expand("http://u:pw-never-printed@h/s-{0..1}.tar", &paths, &n), "expand");
  refused(al_shard_expand_remote("s3://u:pw-never-printed@bkt/p/", nullptr, &paths, &n),
          "expand s3");
  refused(al_shard_expand_remote("Https://u:p@pw-never-printed@h/a.tar", nullptr, &paths, &n),
          "expand https");
  EXPECT_EQ(n, 0u);
  const char *shards[] = {"/data/a.tar", "http://u:pw-never-printed@h/a.tar"};
  al_index *out = nullptr;
  refused(al_index_build(&out, shards, 2, nullptr, nullptr), "build");
  EXPECT_EQ(out, nullptr);
  // A forged index file naming one.
  std::string path = TmpPath("userinfo.alidx");
  Adaptiveload__Shard sh = ADAPTIVELOAD__SHARD__INIT;
  sh.path = (char *)"http://u:pw-never-printed@h/a.tar";
  ASSERT_NO_FATAL_FAILURE(WriteIndexFile(path, {&sh}, {}, nullptr));
  refused(al_index_load(&out, path.c_str()), "load");
  EXPECT_EQ(out, nullptr);
}

} // namespace
