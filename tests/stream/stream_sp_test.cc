// Sequence-parallel groups in the stream, over the typed corpus of members_fixtures.h (real
// index, real plan) with the rank plan's group fields set as a planner sets them for the
// ranks of one group: every rank of the group gets the group's micro-batch, byte for byte;
// with sp_shard the d token shards tile the group's packed sequence exactly (the shards'
// latent rows, concatenated in rank order, are the patchified packed latent of the whole
// micro-batch), cu_seqlens / token_first / sample_tokens place each piece, text members come
// whole; resuming every rank of a group gives the same next micro-batch; and the errors
// (a bad option, an untyped latent, a plan without a latent grid).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tests/stream/members_fixtures.h"

using altest::Bytes;
using altest::MEnv;
using altest::MSample;

namespace {

const char *const kMembers[] = {"latent.npy", "t5.npy", "txt"};

// The rank plan of rank 0 of a one-rank manifest, given to rank j of a group of degree d
// (world d): every micro-batch of it runs on ranks [0, d).
stream_rank_plan GroupPlan(const MEnv &e, uint32_t d, uint32_t j) {
  stream_rank_plan p;
  EXPECT_EQ(stream_rank_plan_from_manifest(&p, e.m, 0), AL_OK) << al_last_error();
  p.rank = j;
  p.world = d;
  for (size_t i = 0; i < p.n_batches; i++) {
    p.batches[i].sp_degree = d;
    p.batches[i].sp_rank = j;
  }
  return p;
}

al_stream *Open(const MEnv &e, uint32_t d, uint32_t j, int shard, const al_stream_state *resume,
                stream_source *src) {
  stream_index_source(e.idx, src);
  stream_rank_plan p = GroupPlan(e, d, j);
  al_stream_options o{};
  o.threads = 2;
  o.prefetch = 2;
  o.members = kMembers;
  o.n_members = 3;
  o.sp_shard = shard;
  o.resume = resume;
  al_stream *s = nullptr;
  int rc = stream_open_source(&s, src, &p, &o);
  EXPECT_EQ(rc, AL_OK) << al_last_error();
  stream_rank_plan_free(&p);
  return s;
}

// Patchify 1x2x2 of a float16 (C, T, H, W) crop: tokens (t, y, x), features (c, dt, dy, dx).
Bytes Patchify(const Bytes &crop, uint64_t C, uint64_t T, uint64_t H, uint64_t W) {
  Bytes out;
  for (uint64_t t = 0; t < T; t++)
    for (uint64_t y = 0; y < H / 2; y++)
      for (uint64_t x = 0; x < W / 2; x++)
        for (uint64_t c = 0; c < C; c++)
          for (uint64_t dy = 0; dy < 2; dy++) {
            size_t at = (size_t)((((c * T + t) * H + 2 * y + dy) * W + 2 * x) * 2);
            out.insert(out.end(), crop.begin() + at, crop.begin() + at + 4);
          }
  return out;
}

// One batch as plain data, to compare batches of different streams.
struct Got {
  uint32_t step, micro, bucket, sp_degree, sp_rank, sp_group_first, sp_sharded;
  uint64_t lo, hi, tokens, planned, group_tokens;
  std::vector<std::string> keys;
  std::vector<int32_t> cu;
  std::vector<uint64_t> first, whole;
  std::vector<uint8_t> padded;
  Bytes data;
  std::vector<Bytes> member[3];
  std::vector<std::vector<uint64_t>> shape0;
};

Got Take(const al_stream_batch *b) {
  Got g;
  g.step = b->step;
  g.micro = b->micro;
  g.bucket = b->bucket;
  g.sp_degree = b->sp_degree;
  g.sp_rank = b->sp_rank;
  g.sp_group_first = b->sp_group_first;
  g.sp_sharded = b->sp_sharded;
  g.lo = b->shard_token_begin;
  g.hi = b->shard_token_end;
  g.tokens = b->tokens;
  g.planned = b->planned_tokens;
  g.group_tokens = b->group_tokens;
  const unsigned char *d = static_cast<const unsigned char *>(b->data);
  g.data.assign(d, d + b->data_bytes);
  for (size_t i = 0; i <= b->n; i++) g.cu.push_back(b->cu_seqlens[i]);
  for (size_t i = 0; i < b->n; i++) {
    g.keys.push_back(b->keys[i]);
    g.first.push_back(b->token_first[i]);
    g.whole.push_back(b->sample_tokens[i]);
    g.padded.push_back(b->padded[i]);
    for (size_t j = 0; j < 3; j++) {
      const al_stream_member &m = b->members[j];
      g.member[j].emplace_back(d + m.offsets[i], d + m.offsets[i] + m.sizes[i]);
    }
    g.shape0.push_back(
        {b->members[0].ndim[i], b->members[0].shapes[8 * i], b->members[0].shapes[8 * i + 1]});
  }
  return g;
}

// The whole batch's latent, each sample cropped to its bucket's grid and patchified 1x2x2,
// concatenated: what the shards of the batch must tile.
void PackedLatent(const MEnv &e, const Got &w, Bytes *out) {
  al_bucket_info bi = AL_BUCKET_INFO_INIT;
  ASSERT_EQ(al_manifest_bucket(e.m, w.bucket, &bi), AL_OK);
  uint64_t tb = 1 + (bi.frames - 1) / 4, hb = bi.height / 8, wb = bi.width / 8;
  for (size_t i = 0; i < w.keys.size(); i++) {
    const MSample &smp = e.samples[e.by_key.at(w.keys[i])];
    uint64_t C = smp.lat[0];
    Bytes p = Patchify(altest::Crop(smp, (uint32_t)tb, (uint32_t)hb, (uint32_t)wb), C, tb, hb, wb);
    ASSERT_EQ(p.size(), (size_t)(w.cu[i + 1] - w.cu[i]) * C * 4 * 2);
    out->insert(out->end(), p.begin(), p.end());
  }
}

std::vector<Got> ReadAll(al_stream *s) {
  std::vector<Got> out;
  const al_stream_batch *b;
  int rc;
  while ((rc = al_stream_next(s, &b)) == AL_OK) {
    out.push_back(Take(b));
    EXPECT_EQ(al_stream_release(s, b), AL_OK);
  }
  EXPECT_EQ(rc, AL_EOF) << al_last_error();
  return out;
}

TEST(StreamSp, EveryRankOfAGroupGetsTheGroupsMicroBatch) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("spw", 1, 40));
  stream_source src;
  al_stream *s0 = Open(e, 1, 0, 0, nullptr, &src);
  ASSERT_NE(s0, nullptr);
  std::vector<Got> ref = ReadAll(s0);
  al_stream_close(s0);
  ASSERT_GT(ref.size(), 2u);
  for (uint32_t d : {2u, 4u})
    for (uint32_t j = 0; j < d; j++) {
      al_stream *s = Open(e, d, j, 0, nullptr, &src);
      ASSERT_NE(s, nullptr);
      std::vector<Got> got = ReadAll(s);
      al_stream_close(s);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t k = 0; k < got.size(); k++) {
        EXPECT_EQ(got[k].sp_degree, d);
        EXPECT_EQ(got[k].sp_rank, j);
        EXPECT_EQ(got[k].sp_group_first, 0u);
        EXPECT_EQ(got[k].sp_sharded, 0u);
        EXPECT_EQ(got[k].lo, 0u);
        EXPECT_EQ(got[k].hi, got[k].tokens);
        EXPECT_EQ(got[k].keys, ref[k].keys) << "degree " << d << " rank " << j << " batch " << k;
        EXPECT_EQ(got[k].cu, ref[k].cu);
        EXPECT_TRUE(got[k].data == ref[k].data) << "the group's batch, byte for byte";
        for (uint64_t f : got[k].first) EXPECT_EQ(f, 0u);
      }
    }
}

TEST(StreamSp, ShardsTileTheGroupsTokensByteForByte) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("sps", 1, 40));
  stream_source src;
  al_stream *s0 = Open(e, 1, 0, 0, nullptr, &src);
  ASSERT_NE(s0, nullptr);
  std::vector<Got> whole = ReadAll(s0);
  al_stream_close(s0);
  for (uint32_t d : {1u, 2u, 4u, 8u}) {
    std::vector<std::vector<Got>> shard(d);
    for (uint32_t j = 0; j < d; j++) {
      al_stream *s = Open(e, d, j, 1, nullptr, &src);
      ASSERT_NE(s, nullptr);
      shard[j] = ReadAll(s);
      al_stream_close(s);
      ASSERT_EQ(shard[j].size(), whole.size());
    }
    size_t cut = 0;
    for (size_t k = 0; k < whole.size(); k++) {
      const Got &w = whole[k];
      const uint64_t N = (uint64_t)w.cu.back();
      // The whole batch's latent patchified (the reference) and each sample's place.
      Bytes want;
      ASSERT_NO_FATAL_FAILURE(PackedLatent(e, w, &want));
      std::vector<uint64_t> start(w.cu.begin(), w.cu.end() - 1);
      Bytes cat;
      uint64_t expect_lo = 0, tokens = 0;
      for (uint32_t j = 0; j < d; j++) {
        const Got &g = shard[j][k];
        EXPECT_EQ(g.sp_sharded, 1u);
        EXPECT_EQ(g.sp_degree, d);
        EXPECT_EQ(g.sp_rank, j);
        EXPECT_EQ(g.group_tokens, N);
        EXPECT_EQ(g.lo, j * N / d) << "floor boundaries";
        EXPECT_EQ(g.hi, (j + 1) * N / d);
        EXPECT_EQ(g.lo, expect_lo) << "the shards tile [0, N) in rank order";
        expect_lo = g.hi;
        EXPECT_EQ(g.tokens, g.hi - g.lo);
        EXPECT_EQ(g.planned, g.hi - g.lo);
        EXPECT_EQ((uint64_t)g.cu.back(), g.hi - g.lo);
        tokens += g.tokens;
        for (size_t i = 0; i < g.keys.size(); i++) {
          size_t wi = 0;
          while (wi < w.keys.size() && w.keys[wi] != g.keys[i]) wi++;
          // A padding repeat has the key of an earlier sample: find the one covering the piece.
          uint64_t at = g.lo + (uint64_t)g.cu[i];
          for (size_t q = 0; q < w.keys.size(); q++)
            if (w.keys[q] == g.keys[i] && start[q] <= at && at < (uint64_t)w.cu[q + 1]) wi = q;
          ASSERT_LT(wi, w.keys.size()) << g.keys[i];
          uint64_t len = (uint64_t)(g.cu[i + 1] - g.cu[i]);
          EXPECT_EQ(g.whole[i], (uint64_t)(w.cu[wi + 1] - w.cu[wi]));
          EXPECT_EQ(g.first[i], at - start[wi]) << "the piece's first token in its sample";
          EXPECT_LE(g.first[i] + len, g.whole[i]);
          if (len < g.whole[i]) cut++;
          EXPECT_EQ(g.padded[i], w.padded[wi]);
          // The latent piece: (len, C x 1 x 2 x 2).
          EXPECT_EQ(g.shape0[i][0], 2u);
          EXPECT_EQ(g.shape0[i][1], len);
          EXPECT_EQ(g.shape0[i][2], (uint64_t)altest::kC * 4);
          cat.insert(cat.end(), g.member[0][i].begin(), g.member[0][i].end());
          // Text members whole.
          EXPECT_TRUE(g.member[1][i] == w.member[1][wi]) << g.keys[i];
          EXPECT_TRUE(g.member[2][i] == w.member[2][wi]) << g.keys[i];
        }
      }
      EXPECT_EQ(expect_lo, N);
      EXPECT_EQ(tokens, N) << "each token once";
      EXPECT_TRUE(cat == want) << "degree " << d << " batch " << k
                               << ": the shards concatenated are the packed latent";
    }
    if (d > 1) {
      EXPECT_GT(cut, 0u) << "some sample is cut by a shard boundary (degree " << d << ")";
    }
  }
}

TEST(StreamSp, ResumingEveryRankOfAGroupGivesTheSameNextMicroBatch) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("spr", 1, 40));
  stream_source src;
  const uint32_t d = 2;
  for (int shard : {0, 1}) {
    std::vector<std::vector<Got>> full(d), resumed(d);
    for (uint32_t j = 0; j < d; j++) {
      al_stream *s = Open(e, d, j, shard, nullptr, &src);
      ASSERT_NE(s, nullptr);
      full[j] = ReadAll(s);
      al_stream_close(s);
      s = Open(e, d, j, shard, nullptr, &src);
      const al_stream_batch *b;
      for (int k = 0; k < 3; k++) {
        ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
        ASSERT_EQ(al_stream_release(s, b), AL_OK);
      }
      al_stream_state st = AL_STREAM_STATE_INIT;
      ASSERT_EQ(al_stream_get_state(s, &st), AL_OK);
      al_stream_close(s);
      EXPECT_EQ(st.position, 3u) << "positions are per rank";
      EXPECT_EQ(st.rank, j);
      s = Open(e, d, j, shard, &st, &src);
      ASSERT_NE(s, nullptr);
      resumed[j] = ReadAll(s);
      al_stream_close(s);
      ASSERT_EQ(resumed[j].size() + 3, full[j].size());
    }
    for (size_t k = 0; k < resumed[0].size(); k++)
      for (uint32_t j = 0; j < d; j++) {
        const Got &a = resumed[j][k], &b = full[j][k + 3];
        EXPECT_EQ(a.keys, b.keys);
        EXPECT_TRUE(a.data == b.data);
        EXPECT_EQ(a.step, resumed[0][k].step) << "every rank of the group at the same micro";
        EXPECT_EQ(a.micro, resumed[0][k].micro);
        if (!shard) {
          EXPECT_TRUE(a.data == resumed[0][k].data) << "the group's micro-batch";
        }
      }
  }
}

// Bytes this process has read by read-like system calls (pread included), all threads.
uint64_t ReadBytes() {
  FILE *f = std::fopen("/proc/self/io", "r");
  if (!f) return 0;
  char line[128];
  unsigned long long v = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "rchar: %llu", &v) == 1) break;
  std::fclose(f);
  return v;
}

// Bytes one stream reads, open to close, delivering the latent only.
uint64_t StreamReads(const MEnv &e, uint32_t d, uint32_t j, int shard) {
  static const char *const kLatent[] = {"latent.npy"};
  stream_source src;
  stream_index_source(e.idx, &src);
  stream_rank_plan p = GroupPlan(e, d, j);
  al_stream_options o{};
  o.threads = 1;
  o.members = kLatent;
  o.n_members = 1;
  o.sp_shard = shard;
  uint64_t before = ReadBytes();
  al_stream *s = nullptr;
  EXPECT_EQ(stream_open_source(&s, &src, &p, &o), AL_OK) << al_last_error();
  if (!s) return 0;
  const al_stream_batch *b;
  while (al_stream_next(s, &b) == AL_OK) al_stream_release(s, b);
  al_stream_close(s);
  return ReadBytes() - before;
}

TEST(StreamSp, AShardReadsAboutItsShareOfTheLatent) {
  if (!ReadBytes()) GTEST_SKIP() << "no /proc/self/io rchar on this system";
  MEnv e; // 64 channels, plain .npy: video latents of 1, 3 and 5 frames, images
  ASSERT_NO_FATAL_FAILURE(e.Make("spb", 1, 48, SIZE_MAX, false, nullptr, 64, false));
  const uint64_t whole = StreamReads(e, 1, 0, 0);
  ASSERT_GT(whole, 0u);
  for (uint32_t d : {2u, 4u}) {
    uint64_t sum = 0, most = 0;
    for (uint32_t j = 0; j < d; j++) {
      uint64_t r = StreamReads(e, d, j, 1);
      sum += r;
      most = std::max(most, r);
    }
    std::printf("degree %u: whole %llu bytes, shards %llu in all, at most %llu on a rank\n", d,
                (unsigned long long)whole, (unsigned long long)sum, (unsigned long long)most);
    // Whole-and-sliced would read d x whole in all; frames shared by two shards and the
    // one-frame latents read by every rank holding a piece add to the ideal 1 x whole.
    EXPECT_LT(sum, whole * 2) << "degree " << d;
    EXPECT_LT(most * d, whole * 2) << "degree " << d;
  }
}

TEST(StreamSp, GroupCheckRefusesBadGroupsAndAFollowerWithAnotherBatch) {
  const uint64_t samples[] = {3, 5, 7}, other[] = {3, 7, 5}, tokens[] = {10, 10, 10};
  const uint32_t padded[] = {2};
  al_micro_ref lead = AL_MICRO_REF_INIT;
  lead.bucket = 1;
  lead.n_samples = 3;
  lead.samples = samples;
  lead.tokens = tokens;
  lead.n_padded = 1;
  lead.padded = padded;
  lead.sp_degree = 4;
  lead.sp_rank = 0;
  al_micro_ref f = lead;
  f.sp_rank = 2;
  EXPECT_EQ(stream_group_check(8, 3, 4, 0, &lead, &lead), AL_OK) << al_last_error();
  EXPECT_EQ(stream_group_check(8, 3, 6, 0, &f, &lead), AL_OK) << al_last_error();
  auto refused = [](int rc, const char *what) {
    EXPECT_EQ(rc, AL_EFORMAT);
    EXPECT_NE(std::string(al_last_error()).find(what), std::string::npos) << al_last_error();
  };
  al_micro_ref bad = f;
  bad.sp_degree = 3;
  refused(stream_group_check(8, 3, 6, 0, &bad, &lead), "not a power of two");
  bad = f;
  bad.sp_rank = 4;
  refused(stream_group_check(8, 3, 6, 0, &bad, &lead), "sp_rank is not below the degree");
  refused(stream_group_check(8, 3, 5, 0, &f, &lead), "not an aligned group"); // first rank 3
  refused(stream_group_check(6, 3, 6, 0, &f, &lead), "not an aligned group"); // ranks 4..7 of 6
  bad = f;
  bad.samples = other;
  refused(stream_group_check(8, 3, 6, 1, &bad, &lead), "does not get its group's micro-batch");
  bad = f;
  bad.n_padded = 0;
  bad.padded = nullptr;
  refused(stream_group_check(8, 3, 6, 1, &bad, &lead), "rank 6 (sp_rank 2 of degree 4)");
  al_micro_ref lead2 = lead;
  lead2.sp_degree = 2;
  refused(stream_group_check(8, 3, 6, 1, &f, &lead2), "rank 4 has another");
}

TEST(StreamSp, SkipsAreCountedOnceOverTheGroup) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("spk", 1, 30, 7)); // sample 7 has no t5.npy
  stream_source src;
  stream_index_source(e.idx, &src);
  auto sums = [&](uint32_t d, uint32_t j, int shard, uint64_t *samples, uint64_t *tokens) {
    stream_rank_plan p = GroupPlan(e, d, j);
    al_stream_options o{};
    o.members = kMembers;
    o.n_members = 3;
    o.sp_shard = shard;
    o.on_error = AL_STREAM_SKIP_SAMPLE;
    o.max_skip_fraction = 1;
    al_stream *s = nullptr;
    ASSERT_EQ(stream_open_source(&s, &src, &p, &o), AL_OK) << al_last_error();
    const al_stream_batch *b;
    int rc;
    while ((rc = al_stream_next(s, &b)) == AL_OK) {
      *samples += b->skipped_real_samples;
      *tokens += b->skipped_real_tokens;
      for (size_t i = 0; i < b->n; i++) EXPECT_STRNE(b->keys[i], "spk-0007");
      al_stream_release(s, b);
    }
    EXPECT_EQ(rc, AL_EOF) << al_last_error();
    al_stream_close(s);
  };
  uint64_t ref_s = 0, ref_t = 0;
  ASSERT_NO_FATAL_FAILURE(sums(1, 0, 0, &ref_s, &ref_t));
  ASSERT_GT(ref_s, 0u);
  ASSERT_GT(ref_t, 0u);
  for (int shard : {0, 1})
    for (uint32_t d : {2u, 4u}) {
      uint64_t gs = 0, gt = 0;
      for (uint32_t j = 0; j < d; j++) {
        uint64_t rs = 0, rt = 0;
        ASSERT_NO_FATAL_FAILURE(sums(d, j, shard, &rs, &rt));
        if (!shard && j) {
          EXPECT_EQ(rs + rt, 0u) << "a whole batch's skips are reported by the group's first rank";
        }
        gs += rs;
        gt += rt;
      }
      EXPECT_EQ(gs, ref_s) << "degree " << d << " shard " << shard;
      EXPECT_EQ(gt, ref_t) << "degree " << d << " shard " << shard;
    }
}

// A real plan with degrees {1, 2, 4} over 4 ranks (al_plan_build, M_mem 60: buckets of up to
// 60, 120 and 160 tokens run at 1, 2 and 4), streamed by al_stream_open on every rank: the
// ranks of each group get the group's micro-batch; their shards tile its packed latent.
TEST(StreamSp, APlannedSpManifestStreamsItsGroups) {
  MEnv e;
  e.sp_degrees = {1, 2, 4};
  e.mem_tokens = 60;
  const uint32_t W = 4;
  ASSERT_NO_FATAL_FAILURE(e.Make("spm", W, 60));
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_manifest_get_info(e.m, &info), AL_OK);
  ASSERT_EQ(info.sp_max_degree, 4u) << "the plan uses degree 4";
  std::vector<std::vector<Got>> whole(W), shard(W);
  for (uint32_t r = 0; r < W; r++)
    for (int sh : {0, 1}) {
      al_stream_options o{};
      o.threads = 2;
      o.members = kMembers;
      o.n_members = 3;
      o.sp_shard = sh;
      al_stream *s = nullptr;
      ASSERT_EQ(al_stream_open(&s, e.idx, e.m, (int)r, &o), AL_OK) << al_last_error();
      (sh ? shard : whole)[r] = ReadAll(s);
      al_stream_close(s);
    }
  std::map<uint32_t, size_t> by_degree;
  for (uint32_t r = 1; r < W; r++) ASSERT_EQ(whole[r].size(), whole[0].size()) << "lock-step";
  for (size_t k = 0; k < whole[0].size(); k++)
    for (uint32_t r = 0; r < W; r++) {
      const Got &g = whole[r][k];
      ASSERT_EQ(g.step, whole[0][k].step);
      ASSERT_EQ(g.micro, whole[0][k].micro) << "slot k on every rank";
      ASSERT_EQ(g.sp_group_first + g.sp_rank, r);
      ASSERT_EQ(g.sp_group_first % g.sp_degree, 0u);
      if (g.sp_rank) continue;
      by_degree[g.sp_degree]++;
      Bytes want, cat;
      ASSERT_NO_FATAL_FAILURE(PackedLatent(e, g, &want));
      for (uint32_t j = 0; j < g.sp_degree; j++) {
        const Got &f = whole[r + j][k], &sj = shard[r + j][k];
        EXPECT_EQ(f.sp_degree, g.sp_degree);
        EXPECT_EQ(f.sp_rank, j);
        EXPECT_EQ(f.keys, g.keys) << "step " << g.step << " micro " << g.micro << " rank " << r + j;
        EXPECT_TRUE(f.data == g.data) << "the group's micro-batch, byte for byte";
        EXPECT_EQ(sj.lo, j * g.tokens / g.sp_degree);
        EXPECT_EQ(sj.hi, (j + 1) * g.tokens / g.sp_degree);
        for (const Bytes &piece : sj.member[0]) cat.insert(cat.end(), piece.begin(), piece.end());
      }
      EXPECT_TRUE(cat == want) << "step " << g.step << " micro " << g.micro << " ranks " << r << "+"
                               << g.sp_degree << ": the shards tile the packed latent";
    }
  EXPECT_GT(by_degree[2] + by_degree[4], 0u) << "groups above degree 1 were streamed";
  EXPECT_GT(by_degree[4], 0u);
}

TEST(StreamSp, BadOptionUntypedLatentAndNoGridAreErrors) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("spe", 1, 12));
  stream_source src;
  stream_index_source(e.idx, &src);
  {
    stream_rank_plan p = GroupPlan(e, 2, 0);
    al_stream_options o{};
    o.sp_shard = 2;
    al_stream *s = nullptr;
    EXPECT_EQ(stream_open_source(&s, &src, &p, &o), AL_EINVAL);
    EXPECT_NE(std::string(al_last_error()).find("sp_shard must be 0 or 1"), std::string::npos)
        << al_last_error();
    stream_rank_plan_free(&p);
  }
  {
    // A typed latent of a plan without grids: the sample fails, saying why.
    stream_rank_plan p = GroupPlan(e, 2, 1);
    for (size_t i = 0; i < p.n_batches; i++)
      p.batches[i].grid[0] = p.batches[i].grid[1] = p.batches[i].grid[2] = 0;
    al_stream_options o{};
    o.members = kMembers;
    o.n_members = 3;
    o.sp_shard = 1;
    al_stream *s = nullptr;
    ASSERT_EQ(stream_open_source(&s, &src, &p, &o), AL_OK) << al_last_error();
    const al_stream_batch *b;
    EXPECT_EQ(al_stream_next(s, &b), AL_EUNSUPPORTED);
    EXPECT_NE(std::string(al_last_error()).find("sp_shard needs the bucket's latent grid"),
              std::string::npos)
        << al_last_error();
    al_stream_close(s);
    stream_rank_plan_free(&p);
  }
  {
    // An untyped latent ("latent" raw bytes, as synth writes): refused at open.
    altest::Corpus c;
    ASSERT_NO_FATAL_FAILURE(c.Build("spu", 6, 2));
    stream_rank_plan p = altest::MakePlan({0, 1, 2, 3, 4, 5}, {3, 3});
    al_stream_options o{};
    o.sp_shard = 1;
    al_stream *s = nullptr;
    EXPECT_EQ(stream_open_source(&s, &c.src, &p, &o), AL_EUNSUPPORTED);
    EXPECT_NE(std::string(al_last_error()).find("member 'latent' is untyped"), std::string::npos)
        << al_last_error();
    stream_rank_plan_free(&p);
    // Without sp_shard the same stream opens.
    p = altest::MakePlan({0, 1, 2, 3, 4, 5}, {3, 3});
    o.sp_shard = 0;
    ASSERT_EQ(stream_open_source(&s, &c.src, &p, &o), AL_OK) << al_last_error();
    al_stream_close(s);
  }
}

} // namespace
