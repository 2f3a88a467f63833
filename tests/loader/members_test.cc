// loader/al_members.h: the latent rule on a table of names, the index's default member, and
// which samples hold requested members (counts, first lacking member, the messages), over an
// index of hand-written .npy members built by al_index_build.
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "loader/al_members.h"
}

namespace {

// A .npy of float16 zeros: magic, version 1.0, header dict padded to 64, data.
std::string Npy(const std::vector<uint64_t> &shape) {
  std::string dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (";
  uint64_t elems = 1;
  for (size_t i = 0; i < shape.size(); i++) {
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
    elems *= shape[i];
  }
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += (char)(dict.size() & 0xff);
  out += (char)(dict.size() >> 8);
  return out + dict + std::string((size_t)elems * 2, '\0');
}

// The table both the C rule and Python's mirror (tests/python/test_members.py) are held to.
TEST(Members, TheLatentRuleOnATableOfNames) {
  const char *yes[] = {"latent",         "latent.npy",  "latent_hr.npy", "latent.safetensors",
                       "latent.npy.lz4", "latents.npy", "latent2.npy"};
  const char *no[] = {"json", "t5.npy", "txt", "Latent.npy", "hr.latent.npy", "lat.npy", ""};
  for (const char *n : yes) EXPECT_EQ(al_member_is_latent(n), 1) << n;
  for (const char *n : no) EXPECT_EQ(al_member_is_latent(n), 0) << n;
  EXPECT_EQ(al_member_is_latent(nullptr), 0);
}

struct Idx {
  al_index *idx = nullptr;
  std::string shard;
  ~Idx() { al_index_free(idx); }
  // 6 samples 64x64, 1 frame: KEY.json and `members(i)`.
  void Make(const std::string &tag,
            const std::vector<std::vector<std::pair<std::string, std::string>>> &per) {
    altest::Members ms;
    for (size_t i = 0; i < per.size(); i++) {
      std::string key = tag + "-" + std::to_string(i);
      ms.push_back({key + ".json", "{\"width\":64,\"height\":64,\"frames\":1}"});
      for (auto &m : per[i]) ms.push_back({key + "." + m.first, m.second});
    }
    shard = altest::TmpPath(tag + ".tar");
    ASSERT_NO_FATAL_FAILURE(altest::WriteTar(shard, ms));
    const char *p = shard.c_str();
    al_index_options io{};
    io.threads = 1;
    io.progress = -1;
    ASSERT_EQ(al_index_build(&idx, &p, 1, &io, nullptr), AL_OK) << al_last_error();
    ASSERT_EQ(al_index_sample_count(idx), per.size());
  }
};

TEST(Members, DefaultMemberIsTheTypedLatentMostSamplesHave) {
  const std::string lat = Npy({4, 8, 8}), t5 = Npy({3, 8});
  Idx a;
  ASSERT_NO_FATAL_FAILURE(a.Make("dm", {{{"latent.npy", lat}, {"t5.npy", t5}},
                                        {{"latent_hr.npy", lat}},
                                        {{"latent_hr.npy", lat}},
                                        {{"latent.npy", lat}},
                                        {{"latent_hr.npy", lat}, {"txt", "x"}}}));
  char buf[64];
  ASSERT_EQ(al_index_default_member(a.idx, buf, sizeof buf), AL_OK) << al_last_error();
  EXPECT_STREQ(buf, "latent_hr.npy");
  EXPECT_EQ(al_index_default_member(a.idx, buf, 5), AL_ERANGE);
  // Untyped latents only (synth's KEY.latent): none, the caller's "latent".
  Idx b;
  ASSERT_NO_FATAL_FAILURE(b.Make("raw", {{{"latent", "bytes"}}, {{"latent", "more"}}}));
  EXPECT_EQ(al_index_default_member(b.idx, buf, sizeof buf), AL_ENOTFOUND);
}

TEST(Members, WhichRequestedMemberIsTheSamplesLatent) {
  const std::string lat = Npy({4, 8, 8});
  Idx a;
  ASSERT_NO_FATAL_FAILURE(a.Make("il", {{{"latent_hr.npy", lat}, {"latent.npy", lat}},
                                        {{"latent", "raw"}, {"latent.npy", lat}},
                                        {{"t5.npy", lat}}}));
  EXPECT_EQ(al_index_member_is_latent(a.idx, 0, "latent_hr.npy"), 1); // the first typed one
  EXPECT_EQ(al_index_member_is_latent(a.idx, 0, "latent.npy"), 0);
  EXPECT_EQ(al_index_member_is_latent(a.idx, 1, "latent"), 0); // untyped
  EXPECT_EQ(al_index_member_is_latent(a.idx, 1, "latent.npy"), 1);
  EXPECT_EQ(al_index_member_is_latent(a.idx, 2, "t5.npy"), 0);
  EXPECT_EQ(al_index_member_is_latent(a.idx, 2, "latent.npy"), 0); // lacks it
  EXPECT_EQ(al_index_member_is_latent(a.idx, 3, "latent.npy"), AL_ERANGE);
}

TEST(Members, CheckCountsWhatEachSampleLacks) {
  const std::string lat = Npy({4, 8, 8}), t5 = Npy({3, 8});
  Idx a;
  ASSERT_NO_FATAL_FAILURE(a.Make("ck", {{{"latent.npy", lat}, {"t5.npy", t5}},
                                        {{"latent.npy", lat}},
                                        {{"t5.npy", t5}},
                                        {{"latent.npy", lat}, {"t5.npy", t5}}}));
  const char *want[] = {"latent.npy", "t5.npy"};
  uint32_t lacks[4] = {9, 9, 9, 9};
  uint64_t held[2] = {7, 7}, missing = 7;
  ASSERT_EQ(al_index_check_members(a.idx, want, 2, nullptr, 0, lacks, held, &missing), AL_OK);
  EXPECT_EQ(lacks[0], 0u);
  EXPECT_EQ(lacks[1], 2u); // no t5.npy
  EXPECT_EQ(lacks[2], 1u); // no latent.npy
  EXPECT_EQ(lacks[3], 0u);
  EXPECT_EQ(held[0], 3u);
  EXPECT_EQ(held[1], 3u);
  EXPECT_EQ(missing, 2u);
  // A subset of positions, with repeats.
  const uint64_t pos[] = {3, 1, 1};
  ASSERT_EQ(al_index_check_members(a.idx, want, 2, pos, 3, lacks, nullptr, &missing), AL_OK);
  EXPECT_EQ(missing, 2u);
  EXPECT_EQ(lacks[0], 0u);
  EXPECT_EQ(lacks[1], 2u);
  const uint64_t bad[] = {4};
  EXPECT_EQ(al_index_check_members(a.idx, want, 2, bad, 1, nullptr, nullptr, nullptr), AL_ERANGE);
  const char *empty[] = {""};
  EXPECT_EQ(al_index_check_members(a.idx, empty, 1, nullptr, 0, nullptr, nullptr, nullptr),
            AL_EINVAL);

  EXPECT_EQ(al_index_require_members(a.idx, want, 2, nullptr, 0, &missing), AL_ENOTFOUND);
  EXPECT_EQ(missing, 2u);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "2 of 4 samples lack a requested member")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "key 'ck-1' (shard " + a.shard + ") has no 't5.npy'")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "key 'ck-2' (shard " + a.shard + ") has no 'latent.npy'"))
      << msg;
  const char *one[] = {"latent.npy"};
  const uint64_t good[] = {0, 3};
  EXPECT_EQ(al_index_require_members(a.idx, one, 1, good, 2, &missing), AL_OK);
  EXPECT_EQ(missing, 0u);

  EXPECT_EQ(al_index_members_known(a.idx, want, 2), AL_OK);
  const char *typo[] = {"latent.npy", "clip.npy"};
  EXPECT_EQ(al_index_members_known(a.idx, typo, 2), AL_ENOTFOUND);
  msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg,
                               "member 'clip.npy' is in no sample of the index (4 samples); "
                               "the index has: json, latent.npy, t5.npy"))
      << msg;
}

TEST(Members, AnLz4MemberHoldsItsPlainName) {
  Idx a;
  // KEY.txt.lz4: held as "txt" (the stream decodes it), and as itself.
  altest::Bytes raw = {'h', 'i'};
  altest::Bytes z = altest::Lz4Frame(raw, true);
  ASSERT_NO_FATAL_FAILURE(a.Make("lz", {{{"txt.lz4", std::string(z.begin(), z.end())}}}));
  const char *plain[] = {"txt"}, *packed[] = {"txt.lz4"};
  uint64_t missing = 9;
  ASSERT_EQ(al_index_check_members(a.idx, plain, 1, nullptr, 0, nullptr, nullptr, &missing), AL_OK);
  EXPECT_EQ(missing, 0u);
  ASSERT_EQ(al_index_check_members(a.idx, packed, 1, nullptr, 0, nullptr, nullptr, &missing),
            AL_OK);
  EXPECT_EQ(missing, 0u);
}

} // namespace
