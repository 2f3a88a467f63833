// al_stream_open over a real index (al_index_build of hand-made tar shards)
// and a real manifest (al_plan_build, saved and loaded): order and contents
// against the manifest, every planned sample exactly once over the ranks,
// schedule export, index/manifest and world/rank checks, resume, mtime check.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/stream/stream_fixtures.h"

extern "C" {
#include "stream/al_schedule.h"
#include "stream/al_stream.h"
#include "planner/al_plan.h"
}

using altest::Corpus;

namespace {

const char kBuckets
    [] = "frames 1 17\n"
         "aspect 1:1 48x48 64x64\n"
         "aspect 4:3 64x48\n"
         "aspect 3:2 96x64\n"
         "aspect 2:1 96x48\n";

struct Env {
  Corpus corpus; // hand-made shards; its hand index is not used
  std::map<std::string, const altest::Sample *> by_key;
  al_index *idx = nullptr;
  al_manifest *m = nullptr;
  std::string manifest_path;

  ~Env() {
    al_manifest_free(m);
    al_index_free(idx);
  }

  // `extra` plans that many samples past the end of the index (a forged manifest).
  // `keys` (may be NULL) names the samples in the manifest's key table.
  void Make(const std::string &tag, uint32_t world, size_t n = 48, size_t extra = 0,
            al_key_fn keys = nullptr) {
    corpus.Build(tag, n, 3);
    for (auto &s : corpus.samples) by_key[s.key] = &s;
    ASSERT_NO_FATAL_FAILURE(altest::IndexShards(corpus.shard_paths, &idx));
    ASSERT_EQ(al_index_sample_count(idx), n);
    ASSERT_EQ(al_index_rejected_count(idx), 0u);
    std::vector<uint32_t> w(n + extra), h(n + extra), f(n + extra);
    for (size_t i = 0; i < n + extra; i++) {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      ASSERT_EQ(al_index_sample(idx, i % n, &si), AL_OK);
      w[i] = si.width;
      h[i] = si.height;
      f[i] = si.frames;
    }
    al_bucket_table *bt = nullptr;
    ASSERT_EQ(al_bucket_table_parse(&bt, kBuckets, sizeof kBuckets - 1, "test"), AL_OK)
        << al_last_error();
    al_cost_model cost = AL_COST_MODEL_INIT;
    ASSERT_EQ(al_cost_default(&cost), AL_OK) << al_last_error();
    al_plan_input in{0, n + extra, w.data(), h.data(), f.data(), al_index_fingerprint(idx)};
    al_plan_options po{};
    po.world = world;
    po.seed = 5;
    po.epoch = 2;
    po.mem_tokens = 130;
    po.buckets = bt;
    al_plan *plan = nullptr;
    ASSERT_EQ(al_plan_build(&plan, &in, &cost, &po), AL_OK) << al_last_error();
    manifest_path = altest::TmpPath(tag + ".alm");
    ASSERT_EQ(al_plan_save(plan, manifest_path.c_str(), keys, idx), AL_OK) << al_last_error();
    al_plan_free(plan);
    al_bucket_table_free(bt);
    ASSERT_EQ(al_manifest_load(&m, manifest_path.c_str()), AL_OK) << al_last_error();
  }
};

// Drains rank r, checking each batch against the manifest row and the corpus.
// Returns the real (non-padding) index positions delivered.
std::vector<uint64_t> DrainRank(const Env &e, al_stream *s, uint32_t rank, size_t *batches) {
  std::vector<uint64_t> real;
  const al_stream_batch *b;
  int st;
  uint32_t last_step = 0, expect_micro = 0;
  *batches = 0;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    if (*batches > 0 && b->step != last_step) {
      EXPECT_EQ(expect_micro, 0u) << "previous step ended early";
    }
    al_micro_ref ref = AL_MICRO_REF_INIT;
    EXPECT_EQ(al_manifest_micro(e.m, b->step, rank, b->micro, &ref), AL_OK);
    EXPECT_EQ(b->micro, expect_micro);
    EXPECT_EQ(b->n_micro, ref.n_micro);
    EXPECT_EQ(b->bucket, ref.bucket);
    EXPECT_EQ(b->step_samples, ref.step_samples);
    EXPECT_EQ(b->step_tokens, ref.step_tokens);
    EXPECT_EQ(b->last_in_step, b->micro + 1 == ref.n_micro);
    EXPECT_EQ(b->position, *batches);
    EXPECT_EQ(b->n, ref.n_samples);
    std::set<uint32_t> padded(ref.padded, ref.padded + ref.n_padded);
    const unsigned char *data = static_cast<const unsigned char *>(b->data);
    for (size_t i = 0; i < b->n && i < ref.n_samples; i++) {
      EXPECT_EQ(b->samples[i], ref.samples[i]);
      EXPECT_EQ((uint64_t)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]), ref.tokens[i]);
      EXPECT_EQ(b->padded[i], padded.count((uint32_t)i) ? 1 : 0);
      EXPECT_EQ(b->offsets[i] % 64, 0u);
      auto it = e.by_key.find(b->keys[i]);
      EXPECT_TRUE(it != e.by_key.end()) << b->keys[i];
      if (it == e.by_key.end()) continue;
      const altest::Sample &smp = *it->second;
      EXPECT_EQ(b->shapes[3 * i], smp.w);
      EXPECT_EQ(b->shapes[3 * i + 2], smp.f);
      EXPECT_EQ(b->sizes[i], smp.payload.size());
      EXPECT_EQ(0, memcmp(data + b->offsets[i], smp.payload.data(), smp.payload.size()))
          << b->keys[i];
      if (!b->padded[i]) real.push_back(b->samples[i]);
    }
    expect_micro = b->last_in_step ? 0 : b->micro + 1;
    last_step = b->step;
    (*batches)++;
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  return real;
}

// Real samples the manifest plans (its summary).
uint64_t PlannedSamples(const al_manifest *m) {
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  EXPECT_EQ(al_manifest_get_info(m, &info), AL_OK);
  return info.samples;
}

TEST(StreamApi, EveryRankReadsItsRowsAndTogetherEverySampleOnce) {
  Env e;
  e.Make("api", 3);
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_manifest_get_info(e.m, &info), AL_OK);
  std::multiset<uint64_t> all;
  for (uint32_t r = 0; r < 3; r++) {
    al_stream *s = nullptr;
    al_stream_options o{};
    o.threads = 2;
    o.world = 3;
    ASSERT_EQ(al_stream_open(&s, e.idx, e.m, (int)r, &o), AL_OK) << al_last_error();
    size_t batches = 0;
    auto real = DrainRank(e, s, r, &batches);
    uint64_t expect_batches = 0;
    ASSERT_EQ(al_stream_rank_batches(e.m, r, &expect_batches), AL_OK);
    EXPECT_EQ(batches, expect_batches);
    EXPECT_GT(batches, 0u);
    all.insert(real.begin(), real.end());
    al_stream_close(s);
  }
  EXPECT_EQ(all.size(), info.samples);
  EXPECT_EQ(std::set<uint64_t>(all.begin(), all.end()).size(), all.size())
      << "a sample delivered twice";
}

TEST(StreamApi, ScheduleExportMatchesTheStream) {
  Env e;
  e.Make("sched", 2);
  for (int r = 0; r < 2; r++) {
    al_schedule *sc = nullptr;
    ASSERT_EQ(al_schedule_open(&sc, e.m, r, 2), AL_OK) << al_last_error();
    EXPECT_EQ(al_schedule_rank(sc), (uint32_t)r);
    EXPECT_EQ(al_schedule_world(sc), 2u);
    EXPECT_EQ(al_schedule_epoch(sc), 2u);
    EXPECT_EQ(al_schedule_index_fingerprint(sc), al_index_fingerprint(e.idx));
    uint64_t nb = al_schedule_batches(sc), ns = al_schedule_samples(sc);
    std::vector<uint64_t> first(nb + 1), samples(ns), tokens(ns);
    std::vector<uint32_t> step(nb), micro(nb);
    std::vector<uint8_t> padded(ns);
    ASSERT_EQ(al_schedule_export(sc, first.data(), step.data(), micro.data(), nullptr, nullptr,
                                 nullptr, nullptr, samples.data(), tokens.data(), padded.data()),
              AL_OK);
    al_stream *s = nullptr;
    ASSERT_EQ(al_stream_open(&s, e.idx, e.m, r, nullptr), AL_OK) << al_last_error();
    const al_stream_batch *b;
    size_t i = 0;
    while (al_stream_next(s, &b) == AL_OK) {
      ASSERT_LT(i, nb);
      EXPECT_EQ(b->step, step[i]);
      EXPECT_EQ(b->micro, micro[i]);
      ASSERT_EQ(b->n, first[i + 1] - first[i]);
      // The batch's bucket is listed, and its per-sample tokens are the manifest's.
      bool found = false;
      for (size_t k = 0; k < al_schedule_bucket_count(sc); k++) {
        uint32_t id, bw, bh, bf;
        uint64_t bt;
        ASSERT_EQ(al_schedule_bucket(sc, k, &id, &bw, &bh, &bf, &bt), AL_OK);
        if (id != b->bucket) continue;
        found = true;
        for (size_t j = 0; j < b->n; j++) EXPECT_EQ(tokens[first[i] + j], bt);
        EXPECT_GT(bw * bh * bf, 0u);
      }
      EXPECT_TRUE(found) << "bucket " << b->bucket;
      for (size_t j = 0; j < b->n; j++) {
        EXPECT_EQ(b->samples[j], samples[first[i] + j]);
        EXPECT_EQ(b->padded[j], padded[first[i] + j]);
      }
      al_stream_release(s, b);
      i++;
    }
    EXPECT_EQ(i, nb);
    EXPECT_EQ(al_schedule_bucket(sc, al_schedule_bucket_count(sc), nullptr, nullptr, nullptr,
                                 nullptr, nullptr),
              AL_ERANGE);
    al_stream_close(s);
    al_schedule_free(sc);
  }
  // The path variant loads the manifest itself.
  al_schedule *sc = nullptr;
  ASSERT_EQ(al_schedule_open_path(&sc, e.manifest_path.c_str(), 1, 0), AL_OK) << al_last_error();
  EXPECT_EQ(al_schedule_rank(sc), 1u);
  al_schedule_free(sc);
  EXPECT_NE(al_schedule_open_path(&sc, "/nonexistent/x.alm", 0, 0), AL_OK);
}

TEST(StreamApi, ManifestOfAnotherIndexIsRefused) {
  Env e;
  e.Make("fp", 1);
  al_index *other = nullptr;
  ASSERT_EQ(al_index_new(&other), AL_OK);
  uint32_t id;
  ASSERT_EQ(al_index_add_shard(other, "/x.tar", 10, 1, &id), AL_OK);
  ASSERT_EQ(al_index_add_sample(other, "k", 0, 64, 64, 1, 0, nullptr, 0), AL_OK);
  al_stream *s = nullptr;
  EXPECT_EQ(al_stream_open(&s, other, e.m, 0, nullptr), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("fingerprint"));
  EXPECT_EQ(s, nullptr);
  al_index_free(other);
}

// A manifest naming a sample past the end of the index is refused, naming the
// sample (al_stream_open read the rank plan after freeing it: a NULL dereference).
TEST(StreamApi, ManifestNamingASamplePastTheIndexIsRefused) {
  Env e;
  e.Make("past", 1, 12, 4);
  al_stream *s = nullptr;
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("the index holds 12")) << al_last_error();
  EXPECT_EQ(s, nullptr);
}

// The key table of a manifest must name the index's samples position by position.
const char *IndexKey(void *ctx, uint64_t i) {
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  return al_index_sample((const al_index *)ctx, (size_t)i, &si) == AL_OK ? si.key : nullptr;
}
const char *ShiftedKey(void *ctx, uint64_t i) {
  return IndexKey(ctx, (i + 1) % al_index_sample_count((const al_index *)ctx));
}

TEST(StreamApi, ManifestWhoseKeysDisagreeWithTheIndexIsRefused) {
  Env good;
  good.Make("keys", 1, 12, 0, IndexKey);
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, good.idx, good.m, 0, nullptr), AL_OK) << al_last_error();
  al_stream_close(s);
  Env bad;
  bad.Make("keys", 1, 12, 0, ShiftedKey);
  s = nullptr;
  EXPECT_EQ(al_stream_open(&s, bad.idx, bad.m, 0, nullptr), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("at index position 0 where the index holds 'keys-00000'"))
      << al_last_error();
  EXPECT_EQ(s, nullptr);
}

TEST(StreamApi, RankAndWorldFromTheEnvironment) {
  Env e;
  e.Make("env", 2);
  al_stream *s = nullptr;
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, -1, nullptr), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("RANK"));
  setenv("WORLD_SIZE", "3", 1);
  setenv("RANK", "1", 1);
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, -1, nullptr), AL_EINVAL);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "WORLD_SIZE is 3"));
  EXPECT_TRUE(altest::Contains(msg, "world of 2"));
  setenv("WORLD_SIZE", "2", 1);
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, -1, nullptr), AL_OK) << al_last_error();
  al_stream_state st = AL_STREAM_STATE_INIT;
  al_stream_get_state(s, &st);
  EXPECT_EQ(st.rank, 1u);
  EXPECT_EQ(st.world, 2u);
  al_stream_close(s);
  al_stream_options o{};
  o.world = 4; // explicit world wins over the environment and must match too
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_EINVAL);
  setenv("RANK", "7", 1);
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, -1, nullptr), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("rank 7"));
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
}

TEST(StreamApi, ResumeAfterRestartAndForeignStateRefused) {
  Env e;
  e.Make("resume", 2, 60);
  std::vector<std::vector<std::string>> full;
  auto drain = [](al_stream *s, size_t limit) {
    std::vector<std::vector<std::string>> out;
    const al_stream_batch *b;
    while (out.size() < limit && al_stream_next(s, &b) == AL_OK) {
      std::vector<std::string> keys;
      for (size_t i = 0; i < b->n; i++) keys.push_back(b->keys[i]);
      out.push_back(keys);
      al_stream_release(s, b);
    }
    return out;
  };
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_OK);
  full = drain(s, SIZE_MAX);
  al_stream_close(s);
  ASSERT_GE(full.size(), 3u);
  size_t k = full.size() / 2;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_OK);
  auto first = drain(s, k);
  al_stream_state st = AL_STREAM_STATE_INIT;
  ASSERT_EQ(al_stream_get_state(s, &st), AL_OK);
  // state_at(k) is the same rank-level state (what Python attaches to each batch).
  al_stream_state at = AL_STREAM_STATE_INIT;
  ASSERT_EQ(al_stream_state_at(s, k, &at), AL_OK);
  EXPECT_EQ(at.position, st.position);
  EXPECT_EQ(at.next_step, st.next_step);
  EXPECT_EQ(at.next_micro, st.next_micro);
  EXPECT_EQ(at.stride, 1u);
  EXPECT_EQ(al_stream_state_at(s, full.size() + 1, &at), AL_ERANGE);
  al_stream_close(s);
  al_stream_options o{};
  o.resume = &st;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  auto rest = drain(s, SIZE_MAX);
  al_stream_close(s);
  ASSERT_EQ(first.size() + rest.size(), full.size());
  for (size_t i = 0; i < rest.size(); i++) EXPECT_EQ(rest[i], full[k + i]);
  // Rank 1 refuses rank 0's state.
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 1, &o), AL_ESTATE);
  EXPECT_TRUE(altest::ErrorContains("rank 0/2"));
  // A rank-level state re-sliced over 2 workers: together they give the rest.
  al_stream *w0 = nullptr, *w1 = nullptr;
  al_stream_options a{}, b{};
  a.resume = b.resume = &st;
  a.stride = b.stride = 2;
  a.first = 0;
  b.first = 1;
  ASSERT_EQ(al_stream_open(&w0, e.idx, e.m, 0, &a), AL_OK) << al_last_error();
  ASSERT_EQ(al_stream_open(&w1, e.idx, e.m, 0, &b), AL_OK) << al_last_error();
  auto r0 = drain(w0, SIZE_MAX), r1 = drain(w1, SIZE_MAX);
  al_stream_close(w0);
  al_stream_close(w1);
  ASSERT_EQ(r0.size() + r1.size(), rest.size());
  for (size_t i = 0; i < rest.size(); i++) EXPECT_EQ(i % 2 ? r1[i / 2] : r0[i / 2], rest[i]);
}

// Shard identity is size plus content, not mtime: a touched or copied shard
// streams; a rewrite of the same size (a member header changed) is reported with the key.
TEST(StreamApi, TouchedShardStreamsAndARewriteOfTheSameSizeIsReportedWithTheKey) {
  Env e;
  e.Make("touch", 1, 12);
  struct timespec ts[2] = {{0, UTIME_OMIT}, {1600000000, 5}};
  ASSERT_EQ(utimensat(AT_FDCWD, e.corpus.shard_paths[2].c_str(), ts, 0), 0);
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_OK);
  size_t batches = 0;
  EXPECT_EQ(DrainRank(e, s, 0, &batches).size(), PlannedSamples(e.m));
  al_stream_close(s);

  // Same size, one byte of a member's ustar header changed (its mtime field).
  al_member_info mi;
  size_t victim = 0;
  for (; victim < al_index_sample_count(e.idx); victim++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(e.idx, victim, &si), AL_OK);
    if (si.shard == 2) break;
  }
  ASSERT_EQ(al_index_member(e.idx, victim, 0, &mi), AL_OK);
  int fd = open(e.corpus.shard_paths[2].c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char digit = '7';
  ASSERT_EQ(pwrite(fd, &digit, 1, (off_t)(mi.offset - 512 + 136)), 1);
  close(fd);
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_OK);
  const al_stream_batch *b;
  int st;
  std::string msg;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    for (size_t i = 0; i < b->n; i++) {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      al_index_sample(e.idx, b->samples[i], &si);
      EXPECT_NE(si.shard, 2u) << "a sample of the rewritten shard was delivered";
    }
    al_stream_release(s, b);
  }
  ASSERT_EQ(st, AL_EFORMAT) << "some batch holds a sample of shard 2";
  msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "shard changed since indexing")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "headers of its indexed members")) << msg;
  EXPECT_TRUE(altest::Contains(msg, e.corpus.shard_paths[2])) << msg;
  EXPECT_TRUE(altest::Contains(msg, "key '")) << msg;
  al_stream_close(s);
}

// A corpus copied elsewhere (new paths, new mtimes) streams under the same manifest once its
// root is remapped; a remap that matches nothing is an error naming the first shard path.
TEST(StreamApi, CopiedCorpusStreamsAfterRemappingItsRoot) {
  Env e;
  e.Make("moved", 1, 12);
  std::string from = e.corpus.shard_paths[0].substr(0, e.corpus.shard_paths[0].rfind('/'));
  std::string to = from + "-copy";
  ASSERT_EQ(system(("rm -rf '" + to + "' && mkdir '" + to + "'").c_str()), 0);
  for (const std::string &p : e.corpus.shard_paths) { // copied (new mtimes), then gone
    std::string name = p.substr(p.rfind('/'));
    ASSERT_EQ(system(("cp '" + p + "' '" + to + name + "' && rm '" + p + "'").c_str()), 0);
  }
  size_t moved = 0;
  EXPECT_EQ(al_index_remap_root(e.idx, "/no/such/dir", to.c_str(), &moved), AL_ENOTFOUND);
  EXPECT_TRUE(altest::ErrorContains("no shard path starts with /no/such/dir")) << al_last_error();
  ASSERT_EQ(al_index_remap_root(e.idx, (from + "/").c_str(), to.c_str(), &moved), AL_OK)
      << al_last_error();
  EXPECT_EQ(moved, e.corpus.shard_paths.size());
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, nullptr), AL_OK) << al_last_error();
  size_t batches = 0; // every batch checked against the manifest and the corpus's bytes
  EXPECT_EQ(DrainRank(e, s, 0, &batches).size(), PlannedSamples(e.m));
  al_stream_close(s);
}

TEST(StreamApi, ReadSampleReturnsThePayload) {
  Env e;
  e.Make("one", 1, 9);
  for (size_t i = 0; i < al_index_sample_count(e.idx); i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(e.idx, i, &si), AL_OK);
    void *p = nullptr;
    size_t n = 0;
    ASSERT_EQ(al_stream_read_sample(e.idx, i, nullptr, &p, &n), AL_OK) << al_last_error();
    const altest::Sample &smp = *e.by_key.at(si.key);
    ASSERT_EQ(n, smp.payload.size());
    EXPECT_EQ(0, memcmp(p, smp.payload.data(), n));
    al_stream_free(p);
    EXPECT_EQ(al_stream_read_sample(e.idx, i, "json", &p, &n), AL_OK);
    EXPECT_EQ(static_cast<const char *>(p)[0], '{');
    al_stream_free(p);
  }
  void *p = nullptr;
  size_t n = 0;
  EXPECT_EQ(al_stream_read_sample(e.idx, 0, "nosuch", &p, &n), AL_ENOTFOUND);
  EXPECT_EQ(p, nullptr);
}

// Keys over ~248 bytes indexed and planned but could not stream (a 256-byte member
// name buffer). Every key the index accepts now streams; longer ones are rejected when indexing.
TEST(StreamApi, LongestIndexableKeyStreams) {
  std::string path = altest::TmpPath("longkeys.tar");
  std::string k300(300, 'a'), kmax(AL_INDEX_KEY_MAX, 'b'), kover(AL_INDEX_KEY_MAX + 1, 'c');
  const char *js = "{\"width\": 64, \"height\": 64}";
  altest::WriteTar(path, {{k300 + ".json", js},
                          {k300 + ".latent", "payload-300"},
                          {kmax + ".json", js},
                          {kmax + ".latent", "payload-max"},
                          {kover + ".json", js},
                          {kover + ".latent", "payload-over"}});
  const char *paths[] = {path.c_str()};
  al_index_options io{};
  io.progress = -1;
  al_index *idx = nullptr;
  ASSERT_EQ(al_index_build(&idx, paths, 1, &io, nullptr), AL_OK) << al_last_error();
  ASSERT_EQ(al_index_sample_count(idx), 2u);
  ASSERT_EQ(al_index_rejected_count(idx), 1u);
  al_rejected_info r = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_rejected(idx, 0, &r), AL_OK);
  EXPECT_TRUE(altest::Contains(r.reason, "exceeds the 1024-byte limit")) << r.reason;
  for (size_t i = 0; i < 2; i++) {
    void *p = nullptr;
    size_t n = 0;
    ASSERT_EQ(al_stream_read_sample(idx, i, nullptr, &p, &n), AL_OK) << al_last_error();
    EXPECT_EQ(std::string(static_cast<char *>(p), n), i == 0 ? "payload-300" : "payload-max");
    al_stream_free(p);
  }
  al_index_free(idx);
}

// Decompression had no cap: a small LZ4 member could claim (and get) 1 GiB. A member
// over the cap (default AL_STREAM_MAX_MEMBER_DEFAULT, ADAPTIVELOAD_MAX_MEMBER_BYTES) fails its
// read naming key and member, before the memory is allocated.
std::string ZeroFrame(size_t mib, bool content_size) {
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockSizeID = LZ4F_max4MB;
  if (content_size) prefs.frameInfo.contentSize = (unsigned long long)mib << 20;
  LZ4F_cctx *c = nullptr;
  EXPECT_FALSE(LZ4F_isError(LZ4F_createCompressionContext(&c, LZ4F_VERSION)));
  std::vector<char> zeros(1 << 20, 0), out(LZ4F_compressBound(1 << 20, &prefs) + 64);
  std::string frame;
  size_t n = LZ4F_compressBegin(c, out.data(), out.size(), &prefs);
  frame.append(out.data(), n);
  for (size_t i = 0; i < mib; i++) {
    n = LZ4F_compressUpdate(c, out.data(), out.size(), zeros.data(), zeros.size(), nullptr);
    EXPECT_FALSE(LZ4F_isError(n));
    frame.append(out.data(), n);
  }
  n = LZ4F_compressEnd(c, out.data(), out.size(), nullptr);
  frame.append(out.data(), n);
  LZ4F_freeCompressionContext(c);
  return frame;
}

TEST(StreamApi, DecompressionAndMemberSizeAreCapped) {
  // 1 GiB claimed in the header (about 4 MB stored); 64 MiB without a content size.
  std::string claimed = ZeroFrame(1024, true), silent = ZeroFrame(64, false);
  ASSERT_LT(claimed.size(), 8u << 20);
  std::string path = altest::TmpPath("bomb.tar");
  const char *js = "{\"width\": 64, \"height\": 64}";
  altest::WriteTar(path, {{"bomb.json", js},
                          {"bomb.latent.lz4", claimed},
                          {"quiet.json", js},
                          {"quiet.latent.lz4", silent},
                          {"small.json", js},
                          {"small.latent", std::string(1000, 's')}});
  const char *paths[] = {path.c_str()};
  al_index_options io{};
  io.progress = -1;
  al_index *idx = nullptr;
  ASSERT_EQ(al_index_build(&idx, paths, 1, &io, nullptr), AL_OK) << al_last_error();
  ASSERT_EQ(al_index_sample_count(idx), 3u);
  void *p = nullptr;
  size_t n = 0;
  unsetenv("ADAPTIVELOAD_MAX_MEMBER_BYTES");
  EXPECT_EQ(al_stream_read_sample(idx, 0, nullptr, &p, &n), AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("bomb.latent.lz4")) << al_last_error();
  EXPECT_TRUE(altest::ErrorContains("cap")) << al_last_error();
  EXPECT_EQ(p, nullptr);
  ASSERT_EQ(al_stream_read_sample(idx, 2, nullptr, &p, &n), AL_OK) << al_last_error();
  al_stream_free(p);
  // A smaller cap set in the environment: decoding stops there; stored members too.
  setenv("ADAPTIVELOAD_MAX_MEMBER_BYTES", "8388608", 1);
  EXPECT_EQ(al_stream_read_sample(idx, 1, nullptr, &p, &n), AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("quiet.latent.lz4")) << al_last_error();
  setenv("ADAPTIVELOAD_MAX_MEMBER_BYTES", "999", 1);
  EXPECT_EQ(al_stream_read_sample(idx, 2, nullptr, &p, &n), AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("1000 bytes exceeds the cap of 999 bytes")) << al_last_error();
  unsetenv("ADAPTIVELOAD_MAX_MEMBER_BYTES");
  al_index_free(idx);
}

} // namespace
