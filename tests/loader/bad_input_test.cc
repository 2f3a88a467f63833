// Bad input: every broken shard or sample is rejected with shard, member, byte
// offset and reason; the rest is still indexed; nothing disappears uncounted.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"
}

using altest::Build;
using altest::Members;
using altest::RejectedText;
using altest::TmpPath;

namespace {

std::string Json(int w, int h) {
  return "{\"width\": " + std::to_string(w) + ", \"height\": " + std::to_string(h) + "}";
}

// Three good samples around one bad one; returns the index of the shard.
al_index *WithBadJson(const std::string &name, const std::string &bad_json) {
  std::string path = TmpPath(name + ".tar");
  altest::WriteTar(path, {{"a.json", Json(64, 64)},
                          {"a.latent", "AAAA"},
                          {"b.json", bad_json},
                          {"b.latent", "BBBB"},
                          {"c.json", Json(32, 48)},
                          {"d.json", Json(16, 16)}});
  return Build({path});
}

struct BadJsonCase {
  const char *name;
  const char *json;
  const char *reason; // substring expected in the reason
};

class BadJson : public ::testing::TestWithParam<BadJsonCase> {};

TEST_P(BadJson, RejectedWithReasonOthersKept) {
  const BadJsonCase &c = GetParam();
  al_index *idx = WithBadJson(c.name, c.json);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_sample_count(idx), 3u);
  ASSERT_EQ(al_index_rejected_count(idx), 1u) << RejectedText(idx);
  al_rejected_info r = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_rejected(idx, 0, &r), AL_OK);
  EXPECT_STREQ(r.member, "b.json");
  EXPECT_STREQ(r.key, "b");
  EXPECT_EQ(r.offset, 2048u); // header of b.json: after a.json and a.latent (2 x 1024)
  EXPECT_EQ(r.shard, 0u);
  EXPECT_TRUE(altest::Contains(r.reason, c.reason));
  al_sample_info s = AL_SAMPLE_INFO_INIT;
  ASSERT_EQ(al_index_sample(idx, 1, &s), AL_OK);
  EXPECT_STREQ(s.key, "c");
  al_index_free(idx);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadJson,
    ::testing::Values(
        BadJsonCase{"broken", "{\"width\": 64, \"height\": }", "broken JSON: line 1 col"},
        BadJsonCase{"trailing", "{\"width\": 64, \"height\": 64} x", "broken JSON"},
        BadJsonCase{"notobject", "[64, 64]", "must be a JSON object"},
        BadJsonCase{"dupfield", "{\"width\": 64, \"width\": 65, \"height\": 64}", "broken JSON"},
        BadJsonCase{"nowidth", "{\"height\": 64}", "missing field 'width'"},
        BadJsonCase{"noheight", "{\"width\": 64, \"frames\": 5}", "missing field 'height'"},
        BadJsonCase{"zero", "{\"width\": 0, \"height\": 64}", "width must be >= 1 (got 0)"},
        BadJsonCase{"negative", "{\"width\": 64, \"height\": -5}", "height must be >= 1 (got -5)"},
        BadJsonCase{"string", "{\"width\": \"64px\", \"height\": 64}",
                    "width must be a number or a string holding one, got the string \"64px\""},
        BadJsonCase{"fraction", "{\"width\": 64.5, \"height\": 64}", "whole number"},
        BadJsonCase{"huge", "{\"width\": 65537, \"height\": 64}",
                    "width 65537 exceeds the limit 65536"},
        BadJsonCase{"bigint", "{\"width\": 99999999999999999, \"height\": 64}",
                    "exceeds the limit"},
        BadJsonCase{"frames0", "{\"width\": 64, \"height\": 64, \"frames\": 0}",
                    "frames must be >= 1"},
        BadJsonCase{"framesbig", "{\"width\": 64, \"height\": 64, \"frames\": 100001}",
                    "frames 100001 exceeds"},
        BadJsonCase{"fpsneg", "{\"width\": 64, \"height\": 64, \"frames\": 9, \"fps\": -1}",
                    "fps -1 is outside"},
        BadJsonCase{"durneg", "{\"width\": 64, \"height\": 64, \"duration\": -2, \"fps\": 8}",
                    "duration must be > 0"},
        BadJsonCase{"durnofps", "{\"width\": 64, \"height\": 64, \"duration\": 2}", "without fps"},
        BadJsonCase{"durlong", "{\"width\": 64, \"height\": 64, \"duration\": 100000, \"fps\": 30}",
                    "beyond the limit 100000"},
        // T' = 1 + 1020/4 = 256; 256 * 4096 * 4096 = 2^32: one past UINT32_MAX.
        BadJsonCase{"tokens", "{\"width\": 65536, \"height\": 65536, \"frames\": 1021}",
                    "beyond 2^32-1"},
        BadJsonCase{"empty", "", "broken JSON"}),
    [](const ::testing::TestParamInfo<BadJsonCase> &i) { return std::string(i.param.name); });

TEST(BadInput, TokenCountJustBelowTheLimitIsKept) {
  // T' = 255: 255 * 4096 * 4096 = 4,278,190,080 <= UINT32_MAX.
  al_index *idx = WithBadJson("tokens_ok",
                              "{\"width\": 65536, \"height\": 65536, \"frames\": 1017}");
  EXPECT_EQ(al_index_sample_count(idx), 4u) << RejectedText(idx);
  al_index_free(idx);
}

TEST(BadInput, SampleStructure) {
  std::string path = TmpPath("structure.tar");
  altest::WriteTar(path, {{"a.json", Json(64, 64)},
                          {"a.latent", "1"},
                          {"a.latent", "2"}, // repeated extension
                          {"b.latent", "3"}, // no metadata
                          {"c.json", Json(16, 16)},
                          {"c.json.lz4", "x"}, // two metadata members
                          {"d.json.lz4", "not an lz4 frame"},
                          {"e.json", Json(16, 32)}});
  al_index *idx = Build({path});
  ASSERT_EQ(al_index_sample_count(idx), 1u);
  std::string rej = RejectedText(idx);
  ASSERT_EQ(al_index_rejected_count(idx), 4u) << rej;
  EXPECT_TRUE(
      altest::
          Contains(rej,
                   "structure.tar|a.latent|2048|a|extension 'latent' repeated within sample (first at byte 1024)"));
  EXPECT_TRUE(
      altest::Contains(rej,
                       "structure.tar|b.latent|3072|b|no metadata member (b.json or b.json.lz4)"));
  EXPECT_TRUE(altest::Contains(rej, "structure.tar|c.json.lz4|5120|c|both c.json and c.json.lz4"));
  EXPECT_TRUE(altest::Contains(rej, "|d.json.lz4|6144|d|bad LZ4 frame"));
  al_index_free(idx);
}

TEST(BadInput, DuplicateKeysAcrossShardsNameBothShards) {
  std::string a = TmpPath("dup-a.tar"), b = TmpPath("dup-b.tar");
  altest::WriteTar(a, {{"k1.json", Json(16, 16)}, {"k2.json", Json(16, 16)}});
  altest::WriteTar(b, {{"k3.json", Json(16, 16)},
                       {"k2.json", Json(32, 32)},
                       {"k4.json", Json(16, 16)}});
  al_index *idx = Build({a, b});
  ASSERT_EQ(al_index_sample_count(idx), 4u);
  ASSERT_EQ(al_index_rejected_count(idx), 1u);
  al_rejected_info r = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_rejected(idx, 0, &r), AL_OK);
  EXPECT_EQ(r.shard, 1u);
  EXPECT_STREQ(r.key, "k2");
  EXPECT_STREQ(r.member, "k2.json");
  EXPECT_EQ(r.offset, 1024u);
  std::string why = r.reason;
  EXPECT_TRUE(altest::Contains(why, "duplicate key 'k2'"));
  EXPECT_TRUE(altest::Contains(why, "dup-a.tar"));
  EXPECT_TRUE(altest::Contains(why, "dup-b.tar"));
  // The first occurrence is the one kept.
  al_sample_info s = AL_SAMPLE_INFO_INIT;
  ASSERT_EQ(al_index_sample(idx, 1, &s), AL_OK);
  EXPECT_STREQ(s.key, "k2");
  EXPECT_EQ(s.shard, 0u);
  EXPECT_EQ(s.width, 16u);
  al_shard_info sh = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(idx, 1, &sh), AL_OK);
  EXPECT_EQ(sh.sample_count, 2u);
  EXPECT_EQ(sh.rejected_count, 1u);
  al_index_free(idx);
}

TEST(BadInput, NonConsecutiveKeyInOneShardIsADuplicate) {
  std::string a = TmpPath("dup-same.tar");
  altest::WriteTar(a, {{"k1.json", Json(16, 16)},
                       {"k2.json", Json(16, 16)},
                       {"k1.json", Json(32, 32)}});
  al_index *idx = Build({a});
  EXPECT_EQ(al_index_sample_count(idx), 2u);
  std::string rej = RejectedText(idx);
  EXPECT_TRUE(altest::Contains(rej, "dup-same.tar|k1.json|2048|k1|duplicate key 'k1'"));
  al_index_free(idx);
}

// A latent-carrying shard written by the synth writer, and the data offsets of one
// sample's members in it (from a clean index of the shard).
struct SynthShard {
  std::string path;
  uint64_t js = 0, lat = 0; // the sample's json and latent data offsets
};

SynthShard WriteSynthShard(const std::string &dir, uint64_t n, size_t sample) {
  SynthShard sh;
  std::string out = TmpPath(dir);
  al_synth_options o{};
  o.out_dir = out.c_str();
  o.samples = n;
  o.shards = 1;
  o.seed = 5;
  EXPECT_EQ(al_synth_write(&o, nullptr), AL_OK) << al_last_error();
  sh.path = out + "/shard-000000.tar";
  al_index *idx = Build({sh.path});
  al_member_info m{};
  EXPECT_EQ(al_index_member(idx, sample, 0, &m), AL_OK);
  sh.js = m.offset;
  EXPECT_EQ(al_index_member(idx, sample, 1, &m), AL_OK);
  sh.lat = m.offset;
  al_index_free(idx);
  return sh;
}

void Truncate(const std::string &path, uint64_t len) {
  ASSERT_EQ(truncate(path.c_str(), (off_t)len), 0);
}

TEST(BadInput, TruncatedInsidePayload) {
  SynthShard sh = WriteSynthShard("trunc1", 10, 6);
  Truncate(sh.path, sh.lat + 100); // cut inside sample 6's latent
  al_index *idx = Build({sh.path});
  EXPECT_EQ(al_index_sample_count(idx), 6u);
  std::string rej = RejectedText(idx);
  ASSERT_GE(al_index_rejected_count(idx), 1u);
  EXPECT_TRUE(altest::Contains(rej, "shard-000000.tar|000000-00000006.latent|" +
                                        std::to_string(sh.lat - 512) + "|000000-00000006|"));
  EXPECT_TRUE(altest::Contains(rej, "truncated"));
  al_index_free(idx);
}

TEST(BadInput, TruncatedInsideHeader) {
  SynthShard sh = WriteSynthShard("trunc2", 10, 4);
  Truncate(sh.path, sh.js - 300); // cut inside sample 4's first header
  al_index *idx = Build({sh.path});
  // Samples 0..2 are certainly complete; sample 3 was in progress when the
  // archive broke (it might have had more members) and is rejected too.
  EXPECT_EQ(al_index_sample_count(idx), 3u);
  std::string rej = RejectedText(idx);
  EXPECT_TRUE(altest::Contains(rej, "|000000-00000003|"));
  EXPECT_TRUE(altest::Contains(rej, "|" + std::to_string(sh.js - 512) +
                                        "||archive error, rest of shard unreadable: "));
  al_index_free(idx);
}

// A FIFO or a directory given as a shard is rejected at once (open blocked on a FIFO).
TEST(BadInput, FifoAndDirectoryShardsAreRejectedWithoutBlocking) {
  std::string good = TmpPath("fifo-good.tar"), fifo = TmpPath("a-fifo.tar"),
              dir = TmpPath("a-dir.tar");
  altest::WriteTar(good, {{"g.json", Json(16, 16)}});
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  mkdir(dir.c_str(), 0755);
  alarm(30); // a hang kills the test instead of stalling the suite
  al_index *idx = Build({fifo, good, dir});
  alarm(0);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_sample_count(idx), 1u);
  std::string rej = RejectedText(idx);
  EXPECT_EQ(al_index_rejected_count(idx), 2u) << rej;
  EXPECT_TRUE(altest::Contains(rej, "a-fifo.tar||0||is a FIFO, not a regular file"));
  EXPECT_TRUE(altest::Contains(rej, "a-dir.tar||0||is a directory, not a regular file"));
  al_index_free(idx);
}

// A shard cut exactly at a member boundary lacks only its end-of-archive blocks.
// That is reported, and the last sample (which may have lost members) is rejected.
TEST(BadInput, CutAtAMemberBoundaryIsReported) {
  SynthShard sh = WriteSynthShard("cutboundary", 10, 6);
  Truncate(sh.path, sh.js - 512); // right before sample 6's first header
  al_index *idx = Build({sh.path});
  EXPECT_EQ(al_index_sample_count(idx), 5u);
  std::string rej = RejectedText(idx);
  EXPECT_EQ(al_index_rejected_count(idx), 2u) << rej;
  EXPECT_TRUE(altest::Contains(rej, "|000000-00000005|")) << rej;
  EXPECT_TRUE(altest::Contains(rej, "shard-000000.tar||" + std::to_string(sh.js - 512) +
                                        "||no end-of-archive marker"))
      << rej;
  al_index_free(idx);
  // The same cut of a compressed copy is reported the same way.
  std::string gz = sh.path + ".gz";
  altest::CompressFile(sh.path, gz, "gzip");
  idx = Build({gz});
  EXPECT_EQ(al_index_sample_count(idx), 5u);
  EXPECT_TRUE(altest::Contains(RejectedText(idx), "no end-of-archive marker"));
  al_index_free(idx);
}

// A ustar header whose size field is not an octal number (garbage, NULs) was read as size 0:
// the sample indexed (and streamed) with an empty payload. GNU tar refuses such a header.
struct SizeFieldCase {
  const char *name;
  std::string field; // 12 bytes
};
class BadSizeField : public ::testing::TestWithParam<SizeFieldCase> {};

TEST_P(BadSizeField, MemberRejectedOthersKept) {
  const SizeFieldCase &c = GetParam();
  std::string path = TmpPath(std::string("size-") + c.name + ".tar");
  altest::WriteTar(path, {{"a.json", Json(64, 64)},
                          {"b.json", Json(32, 32)},
                          {"b.latent", std::string(600, 'B')},
                          {"c.json", Json(16, 16)}});
  // b.latent's header is the third block pair: header at 2048, its size field at 2048 + 124.
  FILE *f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  unsigned char h[512];
  ASSERT_EQ(pread(fileno(f), h, 512, 2048), 512);
  ASSERT_EQ(std::string(reinterpret_cast<char *>(h)), "b.latent");
  ASSERT_EQ(c.field.size(), 12u);
  memcpy(h + 124, c.field.data(), 12);
  memset(h + 148, ' ', 8); // the checksum is computed with its own field as spaces
  unsigned sum = 0;
  for (unsigned char x : h) sum += x;
  snprintf(reinterpret_cast<char *>(h) + 148, 8, "%06o", sum);
  ASSERT_EQ(pwrite(fileno(f), h, 512, 2048), 512);
  std::fclose(f);
  // Every compression: gzip and LZ4 are decoded by the scanner, zstd, xz and bzip2 through
  // libarchive's filters (raw format), so the header blocks are seen for all of them.
  for (const char *filter : {"", "gzip", "lz4", "zstd", "xz", "bzip2"}) {
    std::string p = path;
    if (*filter) {
      p = path + "." + filter;
      altest::CompressFile(path, p, filter);
    }
    SCOPED_TRACE(*filter ? filter : "plain");
    al_index *idx = Build({p});
    ASSERT_NE(idx, nullptr);
    std::string rej = RejectedText(idx);
    for (size_t i = 0; i < al_index_sample_count(idx); i++) {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      ASSERT_EQ(al_index_sample(idx, i, &si), AL_OK);
      EXPECT_STRNE(si.key, "b") << "sample b indexed with a size field of " << c.name;
    }
    EXPECT_TRUE(altest::Contains(rej, "|b.latent|2048|b|size field")) << rej;
    EXPECT_TRUE(altest::Contains(rej, "not an octal number")) << rej;
    EXPECT_GE(al_index_sample_count(idx), 1u); // a is kept
    al_index_free(idx);
  }
}

INSTANTIATE_TEST_SUITE_P(Fields, BadSizeField,
                         ::testing::Values(SizeFieldCase{"garbage", "zz%&9+-q!xyz"},
                                           SizeFieldCase{"nuls", std::string(12, '\0')},
                                           SizeFieldCase{"spaces", std::string(12, ' ')}),
                         [](const ::testing::TestParamInfo<SizeFieldCase> &i) {
                           return std::string(i.param.name);
                         });

// The gzip CRC32 and the LZ4 content checksum of compressed shards are verified; a
// flipped byte inside (stored, random) payload data was indexed without a word.
TEST(BadInput, CorruptCompressedShardIsRejectedWithEverySample) {
  std::string plain = WriteSynthShard("crc", 6, 0).path;
  for (const char *filter : {"gzip", "lz4", "xz", "bzip2"}) {
    std::string c = plain + "." + filter;
    altest::CompressFile(plain, c, filter);
    uint64_t n = altest::FileSize(c);
    FILE *f = std::fopen(c.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    unsigned char b;
    ASSERT_EQ(pread(fileno(f), &b, 1, (off_t)(n / 2)), 1);
    b ^= 0x10;
    ASSERT_EQ(pwrite(fileno(f), &b, 1, (off_t)(n / 2)), 1);
    std::fclose(f);
    std::string good = TmpPath("crc-good.tar");
    altest::WriteTar(good, {{"g.json", Json(16, 16)}});
    al_index *idx = Build({c, good});
    ASSERT_NE(idx, nullptr);
    std::string rej = RejectedText(idx);
    EXPECT_EQ(al_index_sample_count(idx), 1u) << filter; // only the good shard's sample
    // xz and bzip2 (through libarchive): their block checks fail the first read of this small
    // shard, which is then rejected whole, the stream named.
    const std::string fs = filter;
    EXPECT_TRUE(altest::Contains(rej, fs == "gzip" || fs == "lz4" ? "checksum" : fs + " stream"))
        << rej;
    // gzip: the CRC32 covers the whole stream and is checked at its end, so every sample
    // was seen and each is listed. LZ4 (block checksums): nothing past the bad block can be
    // decoded; the shard-level entry says so.
    if (std::string(filter) == "gzip") {
      for (int i = 0; i < 6; i++)
        EXPECT_TRUE(altest::Contains(rej, "|000000-0000000" + std::to_string(i) + "|")) << rej;
    }
    al_index_free(idx);
  }
}

// More distinct extensions than an index can number (32,767) aborted the whole build.
TEST(BadInput, TooManyExtensionsRejectsTheExtraSamplesOnly) {
  std::string path = TmpPath("manyext.tar");
  Members m;
  const int n = 16500; // 33,000 distinct extensions beside "json"
  for (int i = 0; i < n; i++) {
    std::string k = "k" + std::to_string(i);
    m.push_back({k + ".json", Json(16, 16)});
    m.push_back({k + ".x" + std::to_string(2 * i), "1"});
    m.push_back({k + ".x" + std::to_string(2 * i + 1), "2"});
  }
  std::string good = TmpPath("manyext-good.tar");
  altest::WriteTar(path, m);
  altest::WriteTar(good, {{"g.json", Json(16, 16)}});
  al_index *idx = Build({path, good});
  ASSERT_NE(idx, nullptr);
  EXPECT_GT(al_index_sample_count(idx), 16000u);
  EXPECT_GT(al_index_rejected_count(idx), 0u);
  EXPECT_EQ(al_index_sample_count(idx) + al_index_rejected_count(idx), (size_t)n + 1);
  EXPECT_TRUE(altest::Contains(RejectedText(idx), "distinct extensions"));
  al_index_free(idx);
  // Across shards: each fits alone, together they overflow the index's table at the merge.
  std::string a = TmpPath("manyext-a.tar"), b = TmpPath("manyext-b.tar");
  Members ma, mb;
  for (int i = 0; i < 10000; i++) {
    std::string k = std::to_string(i);
    ma.push_back({"a" + k + ".json", Json(16, 16)});
    ma.push_back({"a" + k + ".p" + k, "1"});
    mb.push_back({"b" + k + ".json", Json(16, 16)});
    mb.push_back({"b" + k + ".q" + k, "1"});
    mb.push_back({"b" + k + ".r" + k, "1"});
    mb.push_back({"b" + k + ".s" + k, "1"});
  }
  altest::WriteTar(a, ma);
  altest::WriteTar(b, mb);
  idx = Build({a, b, good});
  ASSERT_NE(idx, nullptr);
  EXPECT_GT(al_index_rejected_count(idx), 0u);
  EXPECT_EQ(al_index_sample_count(idx) + al_index_rejected_count(idx), 20001u);
  EXPECT_TRUE(altest::Contains(RejectedText(idx), "an index holds at most"));
  al_index_free(idx);
}

TEST(BadInput, TruncatedCompressedShard) {
  std::string path = WriteSynthShard("trunc3", 10, 0).path;
  std::string gz = path + ".gz";
  altest::CompressFile(path, gz, "gzip");
  Truncate(gz, altest::FileSize(gz) / 2);
  al_index *idx = Build({gz});
  ASSERT_NE(idx, nullptr);
  size_t kept = al_index_sample_count(idx);
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, 10u);
  std::string rej = RejectedText(idx);
  EXPECT_GE(al_index_rejected_count(idx), 1u);
  EXPECT_TRUE(altest::Contains(rej, "shard-000000.tar.gz|"));
  al_index_free(idx);
}

TEST(BadInput, GarbageOverAHeader) {
  SynthShard sh = WriteSynthShard("garbage", 8, 3);
  // Overwrite sample 3's json header (and data) with garbage.
  FILE *f = std::fopen(sh.path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::string junk(1024, '\x5a');
  ASSERT_EQ(pwrite(fileno(f), junk.data(), junk.size(), (off_t)(sh.js - 512)),
            (ssize_t)junk.size());
  std::fclose(f);
  al_index *idx = Build({sh.path});
  EXPECT_EQ(al_index_sample_count(idx), 7u);
  std::string rej = RejectedText(idx);
  EXPECT_TRUE(altest::Contains(rej, "shard-000000.tar||" + std::to_string(sh.js - 512) +
                                        "||damaged tar header"));
  // Sample 3 kept its latent member only: rejected for missing metadata.
  EXPECT_TRUE(altest::Contains(rej, "|000000-00000003.latent|" + std::to_string(sh.lat - 512) +
                                        "|000000-00000003|no metadata member"));
  al_index_free(idx);
}

TEST(BadInput, GarbageInsideJsonData) {
  std::string path = TmpPath("jsongarbage.tar");
  altest::WriteTar(path,
                   {{"a.json", Json(64, 64)}, {"b.json", std::string("{\"wid\xff\xfe\x01", 9)}});
  al_index *idx = Build({path});
  EXPECT_EQ(al_index_sample_count(idx), 1u);
  EXPECT_TRUE(altest::Contains(RejectedText(idx), "|b.json|1024|b|broken JSON"));
  al_index_free(idx);
}

TEST(BadInput, UnreadableShardsAreCountedAndOthersIndexed) {
  std::string good = TmpPath("good.tar"), text = TmpPath("notatar.tar"),
              empty = TmpPath("empty.tar"), missing = TmpPath("missing.tar"),
              emptytar = TmpPath("emptytar.tar");
  altest::WriteTar(good, {{"g.json", Json(16, 16)}});
  altest::WriteFile(text, std::string(4000, 'h'));
  altest::WriteFile(empty, "");
  altest::WriteTar(emptytar, {});
  al_index *idx = Build({text, good, empty, missing, emptytar});
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_shard_count(idx), 5u);
  EXPECT_EQ(al_index_sample_count(idx), 1u);
  std::string rej = RejectedText(idx);
  EXPECT_EQ(al_index_rejected_count(idx), 3u) << rej;
  EXPECT_TRUE(altest::Contains(rej, "notatar.tar||0||not a readable tar archive"));
  EXPECT_TRUE(altest::Contains(rej, "empty.tar||0||empty file"));
  EXPECT_TRUE(altest::Contains(rej, "missing.tar||0||cannot open"));
  al_shard_info s = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(idx, 4, &s), AL_OK); // a valid tar with no members: no samples, no error
  EXPECT_EQ(s.sample_count, 0u);
  EXPECT_EQ(s.rejected_count, 0u);
  al_index_free(idx);
}

TEST(BadInput, NoReadableShardFailsButReports) {
  std::string text = TmpPath("only-text.tar"), empty = TmpPath("only-empty.tar");
  altest::WriteFile(text, "hello, not a tar\n");
  altest::WriteFile(empty, "");
  al_index *idx = Build({text, empty}, 2, AL_EFORMAT);
  ASSERT_NE(idx, nullptr); // still returned so the caller can list why
  EXPECT_EQ(al_index_rejected_count(idx), 2u);
  EXPECT_TRUE(altest::ErrorContains("no shard could be read"));
  al_index_free(idx);
}

TEST(BadInput, StrictFailsOnAnyRejection) {
  std::string path = TmpPath("strict.tar");
  altest::WriteTar(path, {{"a.json", Json(16, 16)}, {"b.json", "{}"}});
  al_index_options o{};
  o.strict = 1;
  al_index *idx = Build({path}, 1, AL_EFORMAT, &o);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_sample_count(idx), 1u);
  EXPECT_EQ(al_index_rejected_count(idx), 1u);
  al_index_free(idx);
  std::string clean = TmpPath("strict-clean.tar");
  altest::WriteTar(clean, {{"a.json", Json(16, 16)}});
  idx = Build({clean}, 1, AL_OK, &o);
  al_index_free(idx);
}

TEST(BadInput, NothingDisappears) {
  // Mixed damage across shards: every sample written is either indexed or named in a rejection.
  std::string p1 = TmpPath("nd1.tar"), p2 = TmpPath("nd2.tar");
  Members m1, m2;
  for (int i = 0; i < 50; i++) {
    std::string k = "s" + std::to_string(i);
    m1.push_back({k + ".json", i % 7 == 0 ? "{\"width\": 0, \"height\": 1}" : Json(16, 16)});
    m1.push_back({k + ".bin", "payload"});
    std::string k2 = (i % 10 == 0) ? k : "t" + std::to_string(i); // some duplicates of shard 1
    m2.push_back({k2 + ".json", i % 9 == 0 ? "{" : Json(32, 32)});
  }
  altest::WriteTar(p1, m1);
  altest::WriteTar(p2, m2);
  al_index *idx = Build({p1, p2});
  EXPECT_EQ(al_index_sample_count(idx) + al_index_rejected_count(idx), 100u) << RejectedText(idx);
  EXPECT_GT(al_index_rejected_count(idx), 10u);
  al_index_free(idx);
}

TEST(BadInput, BadArguments) {
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_build(&idx, nullptr, 0, nullptr, nullptr), AL_EINVAL);
  EXPECT_EQ(idx, nullptr);
  EXPECT_EQ(al_index_build(nullptr, nullptr, 0, nullptr, nullptr), AL_EINVAL);
}

} // namespace
