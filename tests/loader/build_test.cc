// Indexing real tar layouts: fixtures from GNU tar and Python's tarfile, synthetic
// corpora plain and compressed, offsets checked by pread, determinism, DALI files.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"
}

using altest::Build;
using altest::Pread;
using altest::TmpPath;

namespace {

const char kLongDir
    [] = "a-very-long-directory-name-that-pushes-the-path-beyond-one-hundred-characters/sub/";

std::string Fixture(const std::string &name) { return "tests/loader/testdata/" + name; }

// Every member's data, read at its recorded offset, equals `want` (member name -> bytes).
void ExpectMembersAt(const al_index *idx, const std::string &path, size_t first, size_t n,
                     const std::map<std::string, std::string> &want) {
  size_t seen = 0;
  for (size_t i = first; i < first + n; i++) {
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(idx, i, &s), AL_OK);
    for (uint32_t m = 0; m < s.n_members; m++) {
      al_member_info mi;
      ASSERT_EQ(al_index_member(idx, i, m, &mi), AL_OK);
      std::string name = std::string(s.key) + "." + mi.ext;
      auto it = want.find(name);
      ASSERT_NE(it, want.end()) << name;
      EXPECT_EQ(mi.size, it->second.size()) << name;
      EXPECT_EQ(Pread(path, mi.offset, mi.size), it->second) << name << " at " << mi.offset;
      seen++;
    }
  }
  EXPECT_EQ(seen, want.size());
}

class Fixtures : public ::testing::TestWithParam<const char *> {};

TEST_P(Fixtures, IndexesBothSamplesWithExactOffsets) {
  std::string path = Fixture(GetParam());
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_rejected_count(idx), 0u) << altest::RejectedText(idx);
  ASSERT_EQ(al_index_sample_count(idx), 2u);
  std::string clip = std::string(kLongDir) + "clip-with-a-long-key-000001";
  altest::ExpectSample(idx, 0, "img-000002", 512, 512, 1, 0.0f);
  altest::ExpectSample(idx, 1, clip, 640, 352, 17, 24.0f);
  al_shard_info sh = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(idx, 0, &sh), AL_OK);
  EXPECT_EQ(sh.seekable, 1);
  EXPECT_STREQ(sh.compression, "none");
  EXPECT_EQ(sh.sample_count, 2u);
  EXPECT_EQ(sh.size, 10240u);
  EXPECT_EQ(sh.path[0], '/'); // made absolute
  ExpectMembersAt(idx, path, 0, 2,
                  {{"img-000002.json", "{\"width\": 512, \"height\": 512}"},
                   {"img-000002.latent", "PAYLOAD-2-IMAGE"},
                   {clip + ".json",
                    "{\"width\": 640, \"height\": 352, \"frames\": 17, \"fps\": 24}"},
                   {clip + ".latent", "LATENT-PAYLOAD-1"}});
  al_index_free(idx);
}

INSTANTIATE_TEST_SUITE_P(GnuPythonUstar, Fixtures,
                         ::testing::Values("gnu_longname.tar", "gnutar_pax.tar", "ustar_prefix.tar",
                                           "python_tarfile.tar"));

// Our own writer with names > 100 bytes (pax path records): offsets still exact.
TEST(Build, PaxLongNamesFromOurWriter) {
  std::string key(150, 'k');
  std::string path = TmpPath("paxlong.tar");
  altest::WriteTar(path, {{"dir/" + key + ".json", "{\"width\": 32, \"height\": 48}"},
                          {"dir/" + key + ".latent", std::string(1000, 'z')},
                          {"short.json", "{\"width\": 16, \"height\": 16}"}});
  al_index *idx = Build({path});
  ASSERT_EQ(al_index_sample_count(idx), 2u);
  ExpectMembersAt(idx, path, 0, 2,
                  {{"dir/" + key + ".json", "{\"width\": 32, \"height\": 48}"},
                   {"dir/" + key + ".latent", std::string(1000, 'z')},
                   {"short.json", "{\"width\": 16, \"height\": 16}"}});
  al_index_free(idx);
}

std::string Synth(const std::string &dir, uint64_t samples, uint32_t shards,
                  al_synth_payload payload, int lz4_json = 0, uint64_t seed = 7) {
  std::string out = TmpPath(dir);
  al_synth_options o{};
  o.out_dir = out.c_str();
  o.samples = samples;
  o.shards = shards;
  o.seed = seed;
  o.payload = payload;
  o.lz4_json = lz4_json;
  al_synth_stats st = AL_SYNTH_STATS_INIT;
  EXPECT_EQ(al_synth_write(&o, &st), AL_OK) << al_last_error();
  EXPECT_EQ(st.samples, samples);
  return out;
}

std::vector<std::string> ShardPaths(const std::string &dir, uint32_t shards,
                                    const std::string &suffix = "") {
  std::vector<std::string> v;
  for (uint32_t i = 0; i < shards; i++) {
    char b[64];
    std::snprintf(b, sizeof b, "/shard-%06u.tar", i);
    v.push_back(dir + b + suffix);
  }
  return v;
}

TEST(Build, SynthCorpusMetadataAndOffsets) {
  std::string dir = Synth("corpus_a", 48, 3, AL_SYNTH_LATENT);
  auto paths = ShardPaths(dir, 3);
  al_index *idx = Build(paths, 2);
  ASSERT_EQ(al_index_sample_count(idx), 48u);
  EXPECT_EQ(al_index_rejected_count(idx), 0u) << altest::RejectedText(idx);
  for (size_t i = 0; i < 48; i++) {
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(idx, i, &s), AL_OK);
    al_synth_sample_meta m = AL_SYNTH_SAMPLE_META_INIT;
    ASSERT_EQ(al_synth_sample(7, i, &m), AL_OK);
    char key[32];
    std::snprintf(key, sizeof key, "%06u-%08zu", (unsigned)(i * 3 / 48), i);
    ASSERT_STREQ(s.key, key);
    EXPECT_EQ(s.shard, i * 3 / 48);
    EXPECT_EQ(s.width, m.width);
    EXPECT_EQ(s.height, m.height);
    EXPECT_EQ(s.frames, m.frames);
    EXPECT_EQ(s.fps, m.fps);
    ASSERT_EQ(s.n_members, 2u);
    al_member_info js, lat;
    ASSERT_EQ(al_index_find_member(idx, i, "json", &js), AL_OK);
    ASSERT_EQ(al_index_find_member(idx, i, "latent", &lat), AL_OK);
    EXPECT_EQ(lat.size, m.latent_bytes);
    const std::string &shard = paths[s.shard];
    // The data offset is right: the bytes there are this sample's JSON, and the
    // 512 bytes before each member are its ustar header, naming it.
    std::string text = Pread(shard, js.offset, js.size);
    EXPECT_TRUE(altest::Contains(text, "\"width\": " + std::to_string(m.width)));
    EXPECT_EQ(Pread(shard, js.offset - 512, 100).c_str(), std::string(key) + ".json");
    EXPECT_EQ(Pread(shard, lat.offset - 512, 100).c_str(), std::string(key) + ".latent");
    EXPECT_EQ(js.offset % 512, 0u);
    EXPECT_EQ(lat.offset, js.offset + (js.size + 511) / 512 * 512 + 512);
  }
  al_index_free(idx);
}

// Payloads of plain tar shards are skipped (lseek), not read; compressed ones must be read.
TEST(Build, PayloadsAreSkippedNotRead) {
  std::string dir = Synth("corpus_skip", 12, 1, AL_SYNTH_LATENT, 0, 21);
  auto paths = ShardPaths(dir, 1);
  std::vector<const char *> p = {paths[0].c_str()};
  al_index_options o{};
  o.progress = -1;
  al_index *idx = nullptr;
  al_index_stats st = AL_INDEX_STATS_INIT;
  ASSERT_EQ(al_index_build(&idx, p.data(), 1, &o, &st), AL_OK);
  EXPECT_EQ(st.samples, 12u);
  EXPECT_GT(st.bytes, 4u << 20);
  EXPECT_LT(st.bytes_read * 4, st.bytes) << st.bytes_read << " of " << st.bytes;
  size_t rec = 0, keys = 0;
  al_index_memory(idx, &rec, &keys);
  EXPECT_GT(rec, 12u * (40 + 2 * 16));
  al_index_free(idx);
}

TEST(Build, CompressedShardsIndexTheSameSamples) {
  std::string dir = Synth("corpus_c", 16, 2, AL_SYNTH_LATENT);
  auto plain = ShardPaths(dir, 2);
  al_index *ref = Build(plain);
  ASSERT_EQ(al_index_sample_count(ref), 16u);
  const char *filters[][2] = {{"gzip", ".gz"}, {"lz4", ".lz4"}, {"zstd", ".zst"}};
  for (auto &f : filters) {
    std::vector<std::string> packed;
    for (const auto &p : plain) {
      packed.push_back(p + f[1]);
      altest::CompressFile(p, packed.back(), f[0]);
    }
    al_index *idx = Build(packed);
    ASSERT_NE(idx, nullptr);
    // Same samples, members and (uncompressed-stream) offsets; only the shard records differ.
    altest::ExpectSameIndex(ref, idx, false);
    for (size_t i = 0; i < al_index_sample_count(ref); i++) {
      al_member_info a, b;
      ASSERT_EQ(al_index_member(ref, i, 1, &a), AL_OK);
      ASSERT_EQ(al_index_member(idx, i, 1, &b), AL_OK);
      EXPECT_EQ(a.offset, b.offset);
    }
    al_shard_info s = AL_SHARD_INFO_INIT;
    ASSERT_EQ(al_index_shard(idx, 1, &s), AL_OK);
    EXPECT_STREQ(s.compression, f[0]);
    EXPECT_EQ(s.seekable, 0);
    al_index_free(idx);
  }
  al_index_free(ref);
}

TEST(Build, JsonLz4MembersGiveTheSameMetadata) {
  std::string plain = Synth("corpus_j", 50, 2, AL_SYNTH_NONE, 0, 3);
  std::string packed = Synth("corpus_jl", 50, 2, AL_SYNTH_NONE, 1, 3);
  al_index *a = Build(ShardPaths(plain, 2));
  al_index *b = Build(ShardPaths(packed, 2));
  ASSERT_EQ(al_index_sample_count(b), 50u);
  EXPECT_EQ(al_index_rejected_count(b), 0u) << altest::RejectedText(b);
  for (size_t i = 0; i < 50; i++) {
    al_sample_info x = AL_SAMPLE_INFO_INIT, y = AL_SAMPLE_INFO_INIT;
    ASSERT_TRUE(altest::GetBoth(al_index_sample, a, b, i, &x, &y));
    altest::ExpectSameSampleMeta(x, y);
    al_member_info m;
    ASSERT_EQ(al_index_find_member(b, i, "json", &m), AL_OK);
    EXPECT_STREQ(m.ext, "json.lz4");
    EXPECT_EQ(m.lz4, 1);
    // The stored bytes are an LZ4 frame (magic 04 22 4D 18).
    al_shard_info s = AL_SHARD_INFO_INIT;
    ASSERT_EQ(al_index_shard(b, y.shard, &s), AL_OK);
    EXPECT_EQ(Pread(s.path, m.offset, 4), std::string("\x04\x22\x4d\x18", 4));
  }
  al_index_free(a);
  al_index_free(b);
}

TEST(Build, DeterministicAcrossThreadCountsAndSaveLoad) {
  std::string dir = Synth("corpus_d", 400, 7, AL_SYNTH_NONE, 0, 11);
  auto paths = ShardPaths(dir, 7);
  // A bad shard and a duplicate shard in the middle: rejections must be deterministic too.
  std::string junk = TmpPath("junk.tar");
  altest::WriteFile(junk, std::string(3000, 'x'));
  paths.insert(paths.begin() + 3, junk);
  paths.push_back(paths[1]);
  al_index *one = Build(paths, 1);
  al_index *four = Build(paths, 4);
  ASSERT_EQ(al_index_sample_count(one), 400u);
  EXPECT_GT(al_index_rejected_count(one), 50u); // the repeated shard's samples + junk
  std::string f1 = TmpPath("t1.alidx"), f4 = TmpPath("t4.alidx");
  ASSERT_EQ(al_index_save(one, f1.c_str()), AL_OK);
  ASSERT_EQ(al_index_save(four, f4.c_str()), AL_OK);
  auto b1 = altest::ReadBytes(f1), b4 = altest::ReadBytes(f4);
  ASSERT_FALSE(b1.empty());
  EXPECT_EQ(b1, b4);
  al_index *back = nullptr;
  ASSERT_EQ(al_index_load(&back, f1.c_str()), AL_OK) << al_last_error();
  altest::ExpectSameIndex(one, back);
  EXPECT_EQ(al_index_fingerprint(one), al_index_fingerprint(back));
  EXPECT_EQ(al_index_fingerprint(one), al_index_fingerprint(four));
  al_index_free(one);
  al_index_free(four);
  al_index_free(back);
}

TEST(Build, FingerprintSurvivesAMovedCorpusButNotChangedData) {
  // Same seed, two folders: the same shard names and bytes at another mount point.
  std::string a = Synth("fp_here", 120, 3, AL_SYNTH_NONE, 0, 5);
  std::string b = Synth("fp_moved", 120, 3, AL_SYNTH_NONE, 0, 5);
  std::string c = Synth("fp_other", 120, 3, AL_SYNTH_NONE, 0, 6);
  al_index *ia = Build(ShardPaths(a, 3)), *ib = Build(ShardPaths(b, 3)),
           *ic = Build(ShardPaths(c, 3));
  EXPECT_EQ(al_index_fingerprint(ia), al_index_fingerprint(ib));
  EXPECT_NE(al_index_fingerprint(ia), al_index_fingerprint(ic)); // other data (seed)
  auto pa = ShardPaths(a, 3);
  std::swap(pa[0], pa[2]); // other shard order: other sample positions
  al_index *ir = Build(pa);
  EXPECT_NE(al_index_fingerprint(ia), al_index_fingerprint(ir));
  al_index_free(ia);
  al_index_free(ib);
  al_index_free(ic);
  al_index_free(ir);
}

TEST(Build, DaliIndexFiles) {
  std::string dir = Synth("corpus_dali", 12, 2, AL_SYNTH_LATENT);
  auto paths = ShardPaths(dir, 2);
  std::string gz = paths[1] + ".gz";
  altest::CompressFile(paths[1], gz, "gzip");
  std::string out = TmpPath("dali");
  al_index_options o{};
  o.dali_idx_dir = out.c_str();
  al_index *idx = Build({paths[0], paths[1], gz}, 2, AL_OK, &o);
  ASSERT_NE(idx, nullptr);
  // Keys repeat in the .gz copy: rejected as duplicates, so it has no samples.
  std::string text = altest::ReadFile(out + "/shard-000000.idx");
  ASSERT_FALSE(text.empty());
  size_t nl = text.find('\n');
  al_shard_info s0 = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(idx, 0, &s0), AL_OK);
  EXPECT_EQ(text.substr(0, nl), "v1.2 " + std::to_string(s0.sample_count));
  // Line i+1 is sample i: "ext offset size name" per member, in tar order.
  size_t pos = nl + 1;
  for (size_t i = 0; i < s0.sample_count; i++) {
    size_t end = text.find('\n', pos);
    ASSERT_NE(end, std::string::npos);
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(idx, i, &s), AL_OK);
    std::string want;
    for (uint32_t m = 0; m < s.n_members; m++) {
      al_member_info mi;
      ASSERT_EQ(al_index_member(idx, i, m, &mi), AL_OK);
      if (m) want += " ";
      want += std::string(mi.ext) + " " + std::to_string(mi.offset) + " " +
              std::to_string(mi.size) + " " + s.key + "." + mi.ext;
    }
    EXPECT_EQ(line, want);
  }
  EXPECT_EQ(pos, text.size());
  struct stat st;
  EXPECT_EQ(stat((out + "/shard-000001.idx").c_str(), &st), 0);
  // Compressed shards have no file offsets for DALI; shard-000001.tar.gz maps to
  // the same name, so it must not have overwritten the plain shard's file.
  EXPECT_EQ(altest::ReadFile(out + "/shard-000001.idx").substr(0, 5), "v1.2 ");
  al_index_free(idx);
}

// The DALI files were written in place with fopen: a symlink planted at one's name
// was followed (its target overwritten) and a FIFO there blocked the build.
TEST(Build, DaliIndexFilesNeverWriteThroughALinkOrIntoAFifo) {
  std::string dir = Synth("corpus_dali_safe", 6, 2, AL_SYNTH_NONE);
  auto paths = ShardPaths(dir, 2);
  std::string out = TmpPath("dali_safe");
  mkdir(out.c_str(), 0755);
  std::string victim = TmpPath("dali_victim"), link = out + "/shard-000000.idx";
  altest::WriteFile(victim, "keep");
  unlink(link.c_str());
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  al_index_options o{};
  o.dali_idx_dir = out.c_str();
  al_index *idx = Build({paths[0], paths[1]}, 2, AL_OK, &o);
  al_index_free(idx);
  EXPECT_EQ(altest::ReadFile(victim), "keep");
  struct stat st;
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(altest::ReadFile(link).substr(0, 5), "v1.2 ");
  // A FIFO at a target is refused with a clear error instead of blocking.
  std::string fifo = out + "/shard-000001.idx";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  alarm(30);
  idx = Build({paths[0], paths[1]}, 2, AL_EINVAL, &o);
  alarm(0);
  EXPECT_TRUE(altest::ErrorContains("not a regular file")) << al_last_error();
  al_index_free(idx);
}

TEST(Build, ConfigurableFieldNamesAndAliases) {
  std::string path = TmpPath("fields.tar");
  altest::WriteTar(path,
                   {{"a.json", "{\"w\": 64, \"h\": 32, \"num_frames\": 9, \"frame_rate\": 8}"},
                    {"b.json", "{\"w\": 64, \"h\": 32, \"nframes\": 5}"},
                    {"c.json", "{\"w\": 64, \"h\": 32, \"len\": 2.5, \"fps\": 10}"},
                    {"d.json", "{\"w\": 64, \"h\": 32, \"len\": 2.5, \"frame_rate\": 29.97}"},
                    {"e.json", "{\"width\": 64, \"height\": 32}"}});
  al_index_options o{};
  o.field_width = "w";
  o.field_height = "h";
  o.field_duration = "len";
  al_index *idx = Build({path}, 1, AL_OK, &o);
  ASSERT_EQ(al_index_sample_count(idx), 4u);
  al_sample_info s = AL_SAMPLE_INFO_INIT;
  ASSERT_EQ(al_index_sample(idx, 0, &s), AL_OK);
  EXPECT_EQ(s.frames, 9u);
  EXPECT_EQ(s.fps, 8.0f);
  ASSERT_EQ(al_index_sample(idx, 1, &s), AL_OK);
  EXPECT_EQ(s.frames, 5u);
  ASSERT_EQ(al_index_sample(idx, 2, &s), AL_OK);
  EXPECT_EQ(s.frames, 25u); // round(2.5 s * 10 fps)
  ASSERT_EQ(al_index_sample(idx, 3, &s), AL_OK);
  EXPECT_EQ(s.frames, 75u); // round(74.925)
  ASSERT_EQ(al_index_rejected_count(idx), 1u);
  al_rejected_info r = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_rejected(idx, 0, &r), AL_OK);
  EXPECT_STREQ(r.member, "e.json");
  EXPECT_TRUE(altest::Contains(r.reason, "missing field 'w'"));
  // The field names travel with the index file.
  std::string f = TmpPath("fields.alidx");
  ASSERT_EQ(al_index_save(idx, f.c_str()), AL_OK);
  al_index_free(idx);
}

TEST(Build, DirectoriesAndOtherMembersInsideTar) {
  // Directory entries are skipped silently; members without a key/extension are counted.
  std::string path = TmpPath("dirs.tar");
  tarw *w = nullptr;
  ASSERT_EQ(tarw_open(&w, path.c_str(), 0), AL_OK);
  unsigned char hdr[512];
  tarw_header(hdr, "sub/", 0, 0, '5');
  ASSERT_EQ(tarw_raw(w, hdr, 512), AL_OK);
  std::string js = "{\"width\": 16, \"height\": 16}";
  ASSERT_EQ(tarw_add(w, "sub/x.json", js.data(), js.size()), AL_OK);
  ASSERT_EQ(tarw_add(w, "sub/README", "hello", 5), AL_OK);
  ASSERT_EQ(tarw_add(w, "sub/.hidden.json", "{}", 2), AL_OK);
  tarw_header(hdr, "sub/link.json", 0, 0, '2');
  ASSERT_EQ(tarw_raw(w, hdr, 512), AL_OK);
  ASSERT_EQ(tarw_add(w, "sub/y.json", js.data(), js.size()), AL_OK);
  ASSERT_EQ(tarw_close(w), AL_OK);
  al_index *idx = Build({path});
  ASSERT_EQ(al_index_sample_count(idx), 2u);
  std::string rej = altest::RejectedText(idx);
  EXPECT_EQ(al_index_rejected_count(idx), 3u) << rej;
  EXPECT_TRUE(altest::Contains(rej, "sub/README|1536||member name has no extension"));
  EXPECT_TRUE(altest::Contains(rej, "sub/.hidden.json|"));
  EXPECT_TRUE(altest::Contains(rej, "sub/link.json|3584||symbolic link"));
  al_index_free(idx);
}

} // namespace
