// The stream's member rules against the index: requested members checked at open (a member no
// sample holds, samples of the rank lacking one), the skip budget, the default member (the
// index's typed latent), the latent the index records (KEY.latent_hr.npy cropped as planned),
// and a typed member's header checked against the dtype and shape the index recorded. Corpora
// of hand-written .npy members, indexed by al_index_build and planned by al_plan_build_index.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/stream/stream_fixtures.h"

extern "C" {
#include "loader/al_members.h"
#include "planner/al_plan.h"
#include "manifest/al_plan_index.h"
#include "stream/al_stream.h"
}

using altest::Bytes;

namespace {

const uint32_t kC = 4; // latent channels
const char kBuckets
    [] = "frames 1 9 17\n"
         "aspect 1:1 64x64\n"
         "aspect 3:2 96x64\n"
         "aspect 2:1 96x48 128x64\n";

// The .npy bytes of a C-order array: magic, version 1.0, header dict padded to 64, data.
std::string Npy(const std::string &descr, const std::vector<uint64_t> &shape, const Bytes &data) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); i++)
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += (char)(dict.size() & 0xff);
  out += (char)(dict.size() >> 8);
  return out + dict + std::string(data.begin(), data.end());
}

// Which members sample i gets besides KEY.json: (extension, bytes).
using MemberFn = std::function<altest::Members(size_t i, const std::string &key,
                                               const std::string &latent_npy)>;

struct Env {
  std::vector<std::string> keys, shards;
  std::map<std::string, uint64_t> pos;
  std::map<std::string, Bytes> latent; // key -> latent array bytes (float16)
  al_index *idx = nullptr;
  al_manifest *m = nullptr;

  ~Env() {
    al_manifest_free(m);
    al_index_free(idx);
  }

  // n samples over 2 shards: KEY.json (96..128 x 64..88 pixels, 1 or 9 frames) and what fn
  // gives, the latent (C, T, H/8, W/8) passed to it as .npy bytes; planned for one rank.
  // `require`: al_plan_options.require_members.
  void Make(const std::string &tag, size_t n, const MemberFn &fn,
            const std::vector<const char *> &require = {}) {
    std::vector<altest::Members> members(2);
    for (size_t i = 0; i < n; i++) {
      char key[64];
      std::snprintf(key, sizeof key, "%s-%04zu", tag.c_str(), i);
      uint32_t w = 96 + 8 * (uint32_t)(i % 5), h = 64 + 8 * (uint32_t)(i % 4);
      uint32_t f = i % 2 ? 9 : 1;
      std::vector<uint64_t> shape = {kC, 1 + (f - 1) / 4, h / 8, w / 8};
      Bytes data = altest::Payload(700 + i, (size_t)(kC * shape[1] * shape[2] * shape[3] * 2));
      latent[key] = data;
      auto &ms = members[i % 2];
      ms.push_back({std::string(key) + ".json", "{\"width\":" + std::to_string(w) +
                                                    ",\"height\":" + std::to_string(h) +
                                                    ",\"frames\":" + std::to_string(f) + "}"});
      for (auto &m : fn(i, key, Npy("<f2", shape, data)))
        ms.push_back({std::string(key) + "." + m.first, m.second});
      keys.push_back(key);
    }
    ASSERT_NO_FATAL_FAILURE(altest::WriteAndIndexShards(tag, members, shards, &idx));
    ASSERT_EQ(al_index_sample_count(idx), n) << "rejected " << al_index_rejected_count(idx);
    for (size_t i = 0; i < n; i++) {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      ASSERT_EQ(al_index_sample(idx, i, &si), AL_OK);
      pos[si.key] = i;
    }
    al_bucket_table *bt = nullptr;
    ASSERT_EQ(al_bucket_table_parse(&bt, kBuckets, sizeof kBuckets - 1, "test"), AL_OK);
    al_cost_model cost = AL_COST_MODEL_INIT;
    ASSERT_EQ(al_cost_default(&cost), AL_OK);
    al_plan_options po{};
    po.world = 1;
    po.seed = 5;
    po.mem_tokens = 400;
    po.buckets = bt;
    po.require_members = require.empty() ? nullptr : require.data();
    po.n_require_members = require.size();
    al_plan *plan = nullptr;
    ASSERT_EQ(al_plan_build_index(&plan, idx, &cost, &po), AL_OK) << al_last_error();
    std::string mp = altest::TmpPath(tag + ".alm");
    ASSERT_EQ(al_plan_save(plan, mp.c_str(), al_plan_index_key, idx), AL_OK) << al_last_error();
    al_plan_free(plan);
    al_bucket_table_free(bt);
    ASSERT_EQ(al_manifest_load(&m, mp.c_str()), AL_OK) << al_last_error();
  }
};

altest::Members LatentAndT5(size_t, const std::string &, const std::string &npy) {
  return {{"latent.npy", npy}, {"t5.npy", Npy("<f4", {3, 2}, altest::Payload(1, 24))}};
}

// Every batch of a stream: its real samples' latent sizes checked against cu_seqlens (patch
// 1x2x2, C channels, 2 bytes per element). Returns the status that ended it.
int Drain(al_stream *s, size_t *samples, size_t *skipped, bool check_tokens = true) {
  const al_stream_batch *b;
  int st;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    for (size_t i = 0; check_tokens && i < b->n; i++)
      EXPECT_EQ(b->members[0].sizes[i],
                (uint64_t)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]) * 4 * kC * 2)
          << b->keys[i] << ": delivered tokens differ from cu_seqlens";
    if (samples) *samples += b->n;
    if (skipped) *skipped += b->n_skipped;
    al_stream_release(s, b);
  }
  return st;
}

TEST(StreamMemberRules, AMemberNoSampleHoldsFailsAtOpenListingTheIndexsMembers) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("typo", 8, LatentAndT5));
  const char *typo[] = {"latent.npy", "clip.npy"};
  for (int on_error : {AL_STREAM_FAIL, AL_STREAM_SKIP_SAMPLE}) {
    al_stream_options o{};
    o.members = typo;
    o.n_members = 2;
    o.on_error = on_error;
    al_stream *s = nullptr;
    EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_ENOTFOUND) << "on_error " << on_error;
    EXPECT_EQ(s, nullptr);
    std::string msg = al_last_error();
    EXPECT_TRUE(altest::Contains(msg, "member 'clip.npy' is in no sample of the index")) << msg;
    EXPECT_TRUE(altest::Contains(msg, "the index has: json, latent.npy, t5.npy")) << msg;
    al_stream_close(s);
  }
}

TEST(StreamMemberRules, SamplesLackingAMemberFailAtOpenOrCountAgainstTheBudget) {
  Env e;
  // Samples 3 and 7 have no t5.npy.
  ASSERT_NO_FATAL_FAILURE(
      e.Make("lack", 12, [](size_t i, const std::string &k, const std::string &npy) {
        altest::Members m = LatentAndT5(i, k, npy);
        if (i == 3 || i == 7) m.pop_back();
        return m;
      }));
  const char *both[] = {"latent.npy", "t5.npy"};
  al_stream_options o{};
  o.members = both;
  o.n_members = 2;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_ENOTFOUND);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "2 of 12 samples lack a requested member")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "key 'lack-0003' (shard " + e.shards[1] + ") has no 't5.npy'"))
      << msg;
  EXPECT_TRUE(altest::Contains(msg, "key 'lack-0007'")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "--require-members")) << msg;

  // Skip, default budget (1%): 2 of 12 known at open is past it, so the open fails.
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_EFORMAT);
  msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "skipped 2 of the 12 samples")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "max_skip_fraction 0.01")) << msg;

  // A budget of 20%: they are counted up front and skipped as they come.
  o.max_skip_fraction = 0.2;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  al_stream_stats st = AL_STREAM_STATS_INIT;
  ASSERT_EQ(al_stream_get_stats(s, &st), AL_OK);
  EXPECT_EQ(st.lacking, 2u);
  size_t n = 0, skipped = 0;
  EXPECT_EQ(Drain(s, &n, &skipped), AL_EOF) << al_last_error();
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(skipped, 2u);
  al_stream_close(s);

  // Out of range.
  o.max_skip_fraction = 1.5;
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_EINVAL);
  o.max_skip_fraction = -0.1;
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_EINVAL);
}

TEST(StreamMemberRules, SkippingPastTheBudgetOrEverythingFailsTheRun) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("budget", 12, LatentAndT5));
  // A sample cap below the larger samples (the median of what they deliver): some are skipped
  // mid-stream.
  al_stream_options o{};
  al_stream *s = nullptr;
  std::vector<uint64_t> sizes;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  while (al_stream_next(s, &b) == AL_OK) {
    for (size_t i = 0; i < b->n; i++) sizes.push_back(b->members[0].sizes[i]);
    al_stream_release(s, b);
  }
  al_stream_close(s);
  ASSERT_EQ(sizes.size(), 12u);
  std::sort(sizes.begin(), sizes.end());
  ASSERT_LT(sizes[5], sizes[11]);
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.max_sample_bytes = sizes[5];
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  size_t n = 0, skipped = 0;
  int st = Drain(s, &n, &skipped);
  EXPECT_EQ(st, AL_EFORMAT) << "the default budget (1%) is crossed";
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg,
                               "of the 12 samples this stream reads, more than "
                               "max_skip_fraction 0.01 allows"))
      << msg;
  EXPECT_TRUE(altest::Contains(msg, "cap on a sample")) << msg << ": the last reason";
  EXPECT_EQ(skipped, 0u) << "the batch that crosses the budget is not delivered";
  EXPECT_EQ(al_stream_next(s, &b), AL_EFORMAT) << "the stream stays stopped";
  al_stream_close(s);

  // No budget: the run goes on, the samples over the cap skipped.
  o.max_skip_fraction = 1;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  n = skipped = 0;
  EXPECT_EQ(Drain(s, &n, &skipped), AL_EOF) << al_last_error();
  EXPECT_GT(skipped, 0u);
  EXPECT_EQ(n + skipped, 12u);
  al_stream_close(s);

  // Every sample skipped: the end is an error, not AL_EOF, whatever the budget.
  o.max_sample_bytes = 16;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  n = skipped = 0;
  EXPECT_EQ(Drain(s, &n, &skipped), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("delivered no sample: all 12 of its samples were skipped"))
      << al_last_error();
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(skipped, 12u);
  al_stream_close(s);
}

TEST(StreamMemberRules, TheDefaultMemberIsTheIndexsTypedLatent) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("dflt", 8, LatentAndT5));
  al_stream_options o{}; // no ext, no members
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
  ASSERT_EQ(b->n_members, 1u);
  EXPECT_STREQ(b->members[0].name, "latent.npy");
  EXPECT_EQ(b->members[0].typed, 1);
  EXPECT_EQ(b->members[0].cropped, 1);
  al_stream_release(s, b);
  size_t n = 1;
  EXPECT_EQ(Drain(s, &n, nullptr), AL_EOF) << al_last_error();
  al_stream_close(s);
  // The same with no options at all.
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_OK) << al_last_error();
  EXPECT_EQ(Drain(s, nullptr, nullptr), AL_EOF) << al_last_error();
  al_stream_close(s);
  // One sample's payload: its latent.npy, header and all.
  void *p = nullptr;
  size_t len = 0;
  ASSERT_EQ(al_stream_read_sample(e.idx, 0, nullptr, &p, &len), AL_OK) << al_last_error();
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  ASSERT_EQ(al_index_sample(e.idx, 0, &si), AL_OK);
  const Bytes &want = e.latent[si.key];
  ASSERT_GT(len, want.size());
  EXPECT_EQ(0, std::memcmp(static_cast<char *>(p) + len - want.size(), want.data(), want.size()));
  EXPECT_EQ(0, std::memcmp(p, "\x93NUMPY", 6));
  al_stream_free(p);
}

TEST(StreamMemberRules, TheLatentTheIndexRecordsIsCroppedLatentHr) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("hr", 10, [](size_t, const std::string &, const std::string &npy) {
    return altest::Members{{"latent_hr.npy", npy}, {"txt", "a caption"}};
  }));
  const char *names[] = {"latent_hr.npy", "txt"};
  al_stream_options o{};
  o.members = names;
  o.n_members = 2;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  size_t seen = 0, smaller = 0;
  int st;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    const al_stream_member &lat = b->members[0];
    EXPECT_EQ(lat.cropped, 1);
    EXPECT_EQ(b->members[1].cropped, 0);
    for (size_t i = 0; i < b->n; i++) {
      ASSERT_EQ(lat.ndim[i], 4u);
      EXPECT_EQ(lat.shapes[8 * i + 1], b->grid[0]) << b->keys[i];
      EXPECT_EQ(lat.shapes[8 * i + 2], b->grid[1]) << b->keys[i];
      EXPECT_EQ(lat.shapes[8 * i + 3], b->grid[2]) << b->keys[i];
      EXPECT_EQ(lat.sizes[i], (uint64_t)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]) * 4 * kC * 2)
          << b->keys[i] << ": delivered tokens differ from cu_seqlens";
      smaller += lat.sizes[i] < e.latent[b->keys[i]].size();
      seen++;
    }
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  EXPECT_EQ(seen, 10u);
  EXPECT_GT(smaller, 0u) << "the fixture must exercise the crop";
  al_stream_close(s);
}

TEST(StreamMemberRules, AHeaderRewrittenInPlaceIsAChangedShard) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("hdr", 6, LatentAndT5));
  // Sample 1 (shard 1, 9 frames, 104 x 72 pixels): latent (4, 3, 9, 13). Its header now says
  // (2, 6, 9, 13): as many elements, the member and shard sizes and the tar headers unchanged.
  const std::string key = "hdr-0001";
  al_member_info mi;
  ASSERT_EQ(al_index_find_member(e.idx, e.pos[key], "latent.npy", &mi), AL_OK);
  std::string head = altest::Pread(e.shards[1], mi.offset, 128);
  size_t at = head.find("(4, 3, 9, 13)");
  ASSERT_NE(at, std::string::npos) << head;
  int fd = open(e.shards[1].c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, "(2, 6", 5, (off_t)(mi.offset + at)), 5);
  close(fd);
  for (const char *member : {"latent.npy", (const char *)nullptr}) {
    al_stream_options o{};
    const char *one[] = {"t5.npy", member};
    o.members = one;
    o.n_members = member ? 2 : 1;
    al_stream *s = nullptr;
    ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
    int st = Drain(s, nullptr, nullptr, false);
    if (!member) {
      EXPECT_EQ(st, AL_EOF) << "the other members of the shard still stream: " << al_last_error();
      al_stream_close(s);
      continue;
    }
    EXPECT_EQ(st, AL_EFORMAT);
    std::string msg = al_last_error();
    EXPECT_TRUE(altest::Contains(msg, e.shards[1] + ": shard changed since indexing")) << msg;
    EXPECT_TRUE(altest::Contains(msg, "member 'hdr-0001.latent.npy'")) << msg;
    EXPECT_TRUE(altest::Contains(msg, "its header says float16 (2, 6, 9, 13)")) << msg;
    EXPECT_TRUE(altest::Contains(msg, "the index recorded float16 (4, 3, 9, 13)")) << msg;
    al_stream_close(s);
  }
}

// plan --require-members: the samples lacking one are left out before bucketing, marked in
// the key table; the stream of the rest needs no skipping and every micro-batch is full.
TEST(StreamMemberRules, PlanningWithRequiredMembersLeavesTheLackingOut) {
  auto lack = [](size_t i, const std::string &k, const std::string &npy) {
    altest::Members m = LatentAndT5(i, k, npy);
    if (i % 5 == 2) m.pop_back(); // 2, 7, 12, 17: no t5.npy
    return m;
  };
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("req", 20, lack, {"latent.npy", "t5.npy"}));
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_manifest_get_info(e.m, &info), AL_OK);
  EXPECT_EQ(info.samples, 16u);
  EXPECT_EQ(info.rejected, 0u) << "left out is not rejected";
  EXPECT_EQ(al_manifest_rejected(e.m, AL_REJECT_BAD_SHAPE), 0u);
  for (size_t i = 0; i < 20; i++) {
    char key[32];
    std::snprintf(key, sizeof key, "req-%04zu", i);
    EXPECT_EQ(al_manifest_key_status(e.m, e.pos[key]), i % 5 == 2 ? 18 : 0) << key;
  }
  const char *both[] = {"latent.npy", "t5.npy"};
  al_stream_options o{};
  o.members = both;
  o.n_members = 2;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  size_t n = 0;
  int st;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    al_micro_ref ref = AL_MICRO_REF_INIT;
    ASSERT_EQ(al_manifest_micro(e.m, b->step, 0, b->micro, &ref), AL_OK);
    EXPECT_EQ(b->n, ref.n_samples) << "every planned sample delivered";
    EXPECT_EQ(b->n_skipped, 0u);
    n += b->n;
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  EXPECT_EQ(n, 16u + info.padded);
  al_stream_close(s);

  // The same corpus planned without the requirement: the same samples fail the stream's open.
  Env f;
  ASSERT_NO_FATAL_FAILURE(f.Make("noreq", 20, lack));
  EXPECT_EQ(al_stream_open(&s, f.idx, f.m, 0, &o), AL_ENOTFOUND);
  EXPECT_TRUE(altest::ErrorContains("4 of 20 samples lack a requested member")) << al_last_error();

  // A misspelt requirement, or one no sample meets: planning fails naming it.
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK);
  al_plan_options po{};
  po.world = 1;
  const char *typo[] = {"t5.np"};
  po.require_members = typo;
  po.n_require_members = 1;
  al_plan *p = nullptr;
  EXPECT_EQ(al_plan_build_index(&p, f.idx, &cost, &po), AL_ENOTFOUND);
  EXPECT_TRUE(altest::ErrorContains("member 't5.np' is in no sample of the index"))
      << al_last_error();
  EXPECT_EQ(p, nullptr);
}

} // namespace
