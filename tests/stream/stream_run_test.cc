// al_stream_open_run: a chunked run streamed window by window through the plan feed gives, for
// every rank, exactly the batches of the manifest of al_run_plan_steps(run, W, 0, steps) saved
// and streamed (samples, order, step/micro, step totals, tokens, payload bytes), from step 0 and
// from a middle step, with plan_ahead 1, 2 and 4; a state taken mid-chunk resumes the rest
// exactly; states of another plan are refused; closing mid-epoch stops the feed; the chunks
// alive never exceed plan_ahead + 1; a window whose samples lack a member fails the batch of it.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/stream/stream_fixtures.h"

extern "C" {
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"
#include "manifest/al_plan_index.h"
#include "planner/al_run.h"
#include "stream/al_stream.h"
#include "stream/plan_feed_internal.h"
}

using altest::Corpus;

namespace {

const char kBuckets
    [] = "frames 1 17\n"
         "aspect 1:1 48x48 64x64\n"
         "aspect 4:3 64x48\n"
         "aspect 3:2 96x64\n"
         "aspect 2:1 96x48\n";

// One delivered batch, everything a consumer sees of the plan and the payload.
struct Rec {
  uint64_t position;
  uint32_t step, micro, n_micro, bucket;
  int last;
  uint64_t step_samples, step_tokens, tokens;
  std::vector<uint64_t> samples;
  std::vector<int32_t> cu;
  std::vector<uint8_t> padded;
  std::vector<std::string> keys;
  std::string data;
  bool operator==(const Rec &o) const {
    return position == o.position && step == o.step && micro == o.micro && n_micro == o.n_micro &&
           bucket == o.bucket && last == o.last && step_samples == o.step_samples &&
           step_tokens == o.step_tokens && tokens == o.tokens && samples == o.samples &&
           cu == o.cu && padded == o.padded && keys == o.keys && data == o.data;
  }
};

std::string Describe(const Rec &r) {
  return "position " + std::to_string(r.position) + " step " + std::to_string(r.step) + " micro " +
         std::to_string(r.micro) + " n " + std::to_string(r.samples.size());
}

Rec Take(const al_stream_batch *b) {
  Rec r;
  r.position = b->position;
  r.step = b->step;
  r.micro = b->micro;
  r.n_micro = b->n_micro;
  r.bucket = b->bucket;
  r.last = b->last_in_step;
  r.step_samples = b->step_samples;
  r.step_tokens = b->step_tokens;
  r.tokens = b->tokens;
  r.samples.assign(b->samples, b->samples + b->n);
  r.cu.assign(b->cu_seqlens, b->cu_seqlens + b->n + 1);
  r.padded.assign(b->padded, b->padded + b->n);
  for (size_t i = 0; i < b->n; i++) r.keys.push_back(b->keys[i]);
  r.data.assign(static_cast<const char *>(b->data), b->data_bytes);
  return r;
}

// Up to `most` batches (all when 0); *end = the status that stopped it (AL_EOF at the end).
std::vector<Rec> Drain(al_stream *s, size_t most = 0, int *end = nullptr, int ahead_bound = 0) {
  std::vector<Rec> out;
  const al_stream_batch *b;
  int st = AL_OK;
  while ((most == 0 || out.size() < most) && (st = al_stream_next(s, &b)) == AL_OK) {
    out.push_back(Take(b));
    EXPECT_EQ(al_stream_release(s, b), AL_OK);
    if (ahead_bound) {
      stream_feed_counts c;
      stream_feed_get_counts(stream_get_feed(s), &c);
      EXPECT_LE(c.alive, ahead_bound + 1) << "after " << Describe(out.back());
    }
  }
  if (end) *end = st;
  return out;
}

struct Env {
  Corpus corpus;
  al_run *run = nullptr;
  al_run_info info = AL_RUN_INFO_INIT;
  al_bucket_table *bt = nullptr;

  ~Env() {
    al_run_free(run);
    al_bucket_table_free(bt);
  }

  void Make(const std::string &tag, size_t n) {
    ASSERT_NO_FATAL_FAILURE(corpus.Build(tag, n, 3));
    ASSERT_EQ(al_bucket_table_parse(&bt, kBuckets, sizeof kBuckets - 1, "test"), AL_OK)
        << al_last_error();
    al_cost_model cost = AL_COST_MODEL_INIT;
    ASSERT_EQ(al_cost_default(&cost), AL_OK) << al_last_error();
    al_plan_options po = AL_PLAN_OPTIONS_INIT;
    po.world = 4; // W_ref
    po.micro_per_step = 2;
    po.window = 2;
    po.seed = 5;
    po.epoch = 2;
    po.mem_tokens = 130;
    po.buckets = bt;
    ASSERT_EQ(al_run_open_index(&run, corpus.idx, &cost, &po), AL_OK) << al_last_error();
    ASSERT_EQ(al_run_get_info(run, &info), AL_OK) << al_last_error();
    // Several windows, or the feed is not exercised.
    ASSERT_GE(info.steps, 4 * info.window) << info.steps << " steps, window " << info.window;
    std::printf("run: %u steps, window %u, %llu samples\n", info.steps, info.window,
                (unsigned long long)info.pass_samples);
  }

  // The manifest of the whole run at world W, saved and loaded.
  al_manifest *Manifest(uint32_t W) {
    al_plan *p = nullptr;
    EXPECT_EQ(al_run_plan_steps(run, W, 0, info.steps, &p), AL_OK) << al_last_error();
    std::string path = altest::TmpPath("run_" + std::to_string(W) + ".alm");
    EXPECT_EQ(al_plan_save(p, path.c_str(), al_plan_index_key, corpus.idx), AL_OK)
        << al_last_error();
    al_plan_free(p);
    al_manifest *m = nullptr;
    EXPECT_EQ(al_manifest_load(&m, path.c_str()), AL_OK) << al_last_error();
    return m;
  }

  std::vector<Rec> FromManifest(const al_manifest *m, uint32_t rank, uint32_t W) {
    al_stream_options o = AL_STREAM_OPTIONS_INIT;
    o.world = (int)W;
    o.threads = 2;
    al_stream *s = nullptr;
    EXPECT_EQ(al_stream_open(&s, corpus.idx, m, (int)rank, &o), AL_OK) << al_last_error();
    if (!s) return {};
    int end = 0;
    std::vector<Rec> r = Drain(s, 0, &end);
    EXPECT_EQ(end, AL_EOF) << al_last_error();
    al_stream_close(s);
    return r;
  }

  al_stream *OpenRun(uint32_t rank, uint32_t W, uint32_t start, int ahead,
                     const al_stream_state *resume = nullptr, int threads = 2) {
    al_stream_options o = AL_STREAM_OPTIONS_INIT;
    o.threads = threads;
    o.plan_ahead = ahead;
    o.resume = resume;
    al_stream *s = nullptr;
    EXPECT_EQ(al_stream_open_run(&s, corpus.idx, run, (int)rank, (int)W, start, &o), AL_OK)
        << al_last_error();
    return s;
  }
};

TEST(StreamRun, EveryRankGetsTheManifestsBatchesFromAnyStepWithAnyLookAhead) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("srun", 240));
  for (uint32_t W : {1u, 3u, 4u}) {
    al_manifest *m = e.Manifest(W);
    ASSERT_NE(m, nullptr);
    uint32_t mid = e.info.steps / 2 + 1; // inside a window: window 2, an odd step
    for (uint32_t r = 0; r < W; r++) {
      std::vector<Rec> want = e.FromManifest(m, r, W);
      ASSERT_FALSE(want.empty());
      for (uint32_t start : {0u, mid}) {
        std::vector<Rec> tail;
        for (const Rec &x : want)
          if (x.step >= start) tail.push_back(x);
        for (int ahead : {1, 2, 4}) {
          SCOPED_TRACE("W=" + std::to_string(W) + " rank=" + std::to_string(r) +
                       " start=" + std::to_string(start) + " ahead=" + std::to_string(ahead));
          al_stream *s = e.OpenRun(r, W, start, ahead);
          ASSERT_NE(s, nullptr);
          int end = 0;
          std::vector<Rec> got = Drain(s, 0, &end, ahead);
          EXPECT_EQ(end, AL_EOF) << al_last_error();
          ASSERT_EQ(got.size(), tail.size());
          for (size_t i = 0; i < got.size(); i++)
            ASSERT_TRUE(got[i] == tail[i]) << "batch " << i << ": run " << Describe(got[i])
                                           << ", manifest " << Describe(tail[i]);
          stream_feed_counts c;
          stream_feed_get_counts(stream_get_feed(s), &c);
          EXPECT_LE(c.max_alive, ahead + 1);
          EXPECT_GE(c.max_alive, 1);
          EXPECT_EQ(c.micro, (8 + W - 1) / W); // K = ceil(K_ref W_ref / W)
          // Every window from the start's on was planned, each once.
          uint32_t first_window = start / e.info.window * e.info.window;
          uint32_t last_window = (e.info.steps / e.info.window - 1) * e.info.window;
          if (first_window > last_window) first_window = last_window;
          EXPECT_EQ(c.planned, (last_window - first_window) / e.info.window + 1);
          al_stream_stats st = AL_STREAM_STATS_INIT;
          ASSERT_EQ(al_stream_get_stats(s, &st), AL_OK);
          EXPECT_EQ(st.total_batches, tail.size());
          al_stream_close(s);
        }
      }
    }
    al_manifest_free(m);
  }
}

TEST(StreamRun, AStateTakenMidChunkResumesTheRestExactly) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("srres", 240));
  const uint32_t W = 3, r = 1;
  al_stream *s = e.OpenRun(r, W, 0, 1);
  ASSERT_NE(s, nullptr);
  std::vector<Rec> all = Drain(s);
  al_stream_close(s);
  uint32_t K = all.at(0).n_micro;
  // Inside the second window, not at a window's first batch.
  size_t k = (size_t)e.info.window * K + 1;
  ASSERT_LT(k, all.size());
  s = e.OpenRun(r, W, 0, 2);
  ASSERT_NE(s, nullptr);
  std::vector<Rec> head = Drain(s, k);
  ASSERT_EQ(head.size(), k);
  al_stream_state st = AL_STREAM_STATE_INIT;
  ASSERT_EQ(al_stream_get_state(s, &st), AL_OK);
  al_stream_close(s);
  EXPECT_EQ(st.position, k);
  EXPECT_EQ(st.next_step, all[k].step);
  EXPECT_EQ(st.next_micro, all[k].micro);
  EXPECT_EQ(st.manifest_fingerprint, e.info.fingerprint);
  EXPECT_NE(st.manifest_fingerprint, 0u);
  // From the state, with the stream opened at step 0 and at the state's step: the rest.
  for (uint32_t start : {0u, all[k].step}) {
    SCOPED_TRACE("start " + std::to_string(start));
    al_stream *t = e.OpenRun(r, W, start, 4, &st);
    ASSERT_NE(t, nullptr);
    std::vector<Rec> rest = Drain(t);
    al_stream_close(t);
    ASSERT_EQ(rest.size(), all.size() - k);
    for (size_t i = 0; i < rest.size(); i++) ASSERT_TRUE(rest[i] == all[k + i]) << i;
  }
  // A stream starting after the state's step, another world, another run: refused.
  al_stream_options o = AL_STREAM_OPTIONS_INIT;
  o.resume = &st;
  al_stream *t = nullptr;
  EXPECT_EQ(al_stream_open_run(&t, e.corpus.idx, e.run, (int)r, (int)W, all[k].step + 1, &o),
            AL_ESTATE);
  EXPECT_EQ(al_stream_open_run(&t, e.corpus.idx, e.run, (int)r, 4, 0, &o), AL_ESTATE);
  al_stream_state other = st;
  other.manifest_fingerprint ^= 1;
  o.resume = &other;
  EXPECT_EQ(al_stream_open_run(&t, e.corpus.idx, e.run, (int)r, (int)W, 0, &o), AL_ESTATE);
  EXPECT_NE(std::string(al_last_error()).find("run"), std::string::npos) << al_last_error();
  // The manifest of the same steps names another plan: its state does not resume the run.
  al_manifest *m = e.Manifest(W);
  al_stream_options mo = AL_STREAM_OPTIONS_INIT;
  mo.world = (int)W;
  al_stream *ms = nullptr;
  ASSERT_EQ(al_stream_open(&ms, e.corpus.idx, m, (int)r, &mo), AL_OK) << al_last_error();
  Drain(ms, k);
  al_stream_state mst = AL_STREAM_STATE_INIT;
  ASSERT_EQ(al_stream_get_state(ms, &mst), AL_OK);
  al_stream_close(ms);
  EXPECT_EQ(mst.position, st.position);
  o.resume = &mst;
  EXPECT_EQ(al_stream_open_run(&t, e.corpus.idx, e.run, (int)r, (int)W, 0, &o), AL_ESTATE);
  mo.resume = &st;
  EXPECT_EQ(al_stream_open(&ms, e.corpus.idx, m, (int)r, &mo), AL_ESTATE);
  al_manifest_free(m);
  EXPECT_EQ(t, nullptr);
}

TEST(StreamRun, ClosingMidEpochStopsTheFeed) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("srclose", 240));
  for (int ahead : {1, 2, 4})
    for (size_t take : {0u, 1u, 5u}) {
      al_stream *s = e.OpenRun(0, 1, 0, ahead, nullptr, 3);
      ASSERT_NE(s, nullptr);
      std::vector<Rec> got = take ? Drain(s, take) : std::vector<Rec>();
      EXPECT_EQ(got.size(), take);
      if (take) {
        // Held batches are freed by the close too.
        const al_stream_batch *b;
        ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
      }
      al_stream_close(s);
    }
}

TEST(StreamRun, OpenChecksIndexWorldRankStartAndOptions) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("srchk", 240));
  Corpus other;
  ASSERT_NO_FATAL_FAILURE(other.Build("srchk-other", 30, 2));
  al_stream *s = nullptr;
  EXPECT_EQ(al_stream_open_run(&s, other.idx, e.run, 0, 1, 0, nullptr), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("another index"), std::string::npos);
  EXPECT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, 3, 3, 0, nullptr), AL_EINVAL);
  EXPECT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, 0, 1, e.info.steps + 1, nullptr),
            AL_ERANGE);
  al_stream_options o = AL_STREAM_OPTIONS_INIT;
  o.plan_ahead = 65;
  EXPECT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, 0, 1, 0, &o), AL_EINVAL);
  o.plan_ahead = 0;
  o.world = 2;
  EXPECT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, 0, 3, 0, &o), AL_EINVAL);
  // The world and rank from the environment, as torchrun sets them.
  setenv("WORLD_SIZE", "3", 1);
  setenv("RANK", "2", 1);
  EXPECT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, -1, 4, 0, nullptr), AL_EINVAL);
  ASSERT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, -1, 0, 0, nullptr), AL_OK)
      << al_last_error();
  al_stream_state st = AL_STREAM_STATE_INIT;
  ASSERT_EQ(al_stream_get_state(s, &st), AL_OK);
  EXPECT_EQ(st.rank, 2u);
  EXPECT_EQ(st.world, 3u);
  EXPECT_EQ(st.seed, 5u);
  EXPECT_EQ(st.epoch, 2u);
  al_stream_close(s);
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  // At the end: nothing to read.
  ASSERT_EQ(al_stream_open_run(&s, e.corpus.idx, e.run, 0, 1, e.info.steps, nullptr), AL_OK);
  const al_stream_batch *b;
  EXPECT_EQ(al_stream_next(s, &b), AL_EOF);
  al_stream_close(s);
}

// A copy of `src` whose sample `victim` has only its json member.
al_index *CopyLacking(const al_index *src, size_t victim) {
  al_index *idx = nullptr;
  EXPECT_EQ(al_index_new(&idx), AL_OK);
  for (size_t k = 0; k < al_index_shard_count(src); k++) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    EXPECT_EQ(al_index_shard(src, k, &sh), AL_OK);
    uint32_t id;
    EXPECT_EQ(al_index_add_shard(idx, sh.path, sh.size, 1, &id), AL_OK);
  }
  for (size_t i = 0; i < al_index_sample_count(src); i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    EXPECT_EQ(al_index_sample(src, i, &si), AL_OK);
    std::vector<al_member_info> ms;
    for (size_t m = 0; m < si.n_members; m++) {
      al_member_info mi;
      EXPECT_EQ(al_index_member(src, i, m, &mi), AL_OK);
      if (i != victim || !std::strcmp(mi.ext, "json")) ms.push_back(mi);
    }
    EXPECT_EQ(al_index_add_sample(idx, si.key, si.shard, si.width, si.height, si.frames, si.fps,
                                  ms.data(), ms.size()),
              AL_OK)
        << al_last_error();
  }
  return idx;
}

TEST(StreamRun, AWindowWhoseSamplesLackAMemberFailsItsFirstBatchNamingTheSteps) {
  Env e;
  ASSERT_NO_FATAL_FAILURE(e.Make("srlack", 240));
  // A sample of the last window, lacking its latent in a copy of the index.
  al_stream *s = e.OpenRun(0, 1, 0, 2);
  ASSERT_NE(s, nullptr);
  std::vector<Rec> all = Drain(s);
  al_stream_close(s);
  ASSERT_FALSE(all.empty());
  const Rec &last = all.back();
  ASSERT_FALSE(last.samples.empty());
  uint64_t victim = last.samples[0];
  al_index *lacking = CopyLacking(e.corpus.idx, victim);
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK);
  al_plan_options po = AL_PLAN_OPTIONS_INIT;
  po.world = 4;
  po.micro_per_step = 2;
  po.window = 2;
  po.seed = 5;
  po.epoch = 2;
  po.mem_tokens = 130;
  po.buckets = e.bt;
  al_run *run = nullptr;
  ASSERT_EQ(al_run_open_index(&run, lacking, &cost, &po), AL_OK) << al_last_error();
  uint32_t w0 = (e.info.steps / e.info.window - 1) * e.info.window;
  // AL_STREAM_FAIL: every batch before the last window, then its error.
  al_stream_options o = AL_STREAM_OPTIONS_INIT;
  o.plan_ahead = 1;
  ASSERT_EQ(al_stream_open_run(&s, lacking, run, 0, 1, 0, &o), AL_OK) << al_last_error();
  int end = 0;
  std::vector<Rec> got = Drain(s, 0, &end);
  EXPECT_EQ(end, AL_ENOTFOUND);
  std::string msg = al_last_error();
  EXPECT_NE(msg.find("steps " + std::to_string(w0) + ":" + std::to_string(e.info.steps)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(e.corpus.samples[victim].key), std::string::npos) << msg;
  size_t before = 0;
  for (const Rec &x : all) before += x.step < w0;
  EXPECT_EQ(got.size(), before);
  const al_stream_batch *b;
  EXPECT_EQ(al_stream_next(s, &b), AL_ENOTFOUND); // the stream stays failed
  al_stream_close(s);
  // AL_STREAM_SKIP_SAMPLE: the whole epoch, the sample skipped and counted.
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.max_skip_fraction = 1;
  ASSERT_EQ(al_stream_open_run(&s, lacking, run, 0, 1, 0, &o), AL_OK) << al_last_error();
  got = Drain(s, 0, &end);
  EXPECT_EQ(end, AL_EOF) << al_last_error();
  EXPECT_EQ(got.size(), all.size());
  al_stream_stats st = AL_STREAM_STATS_INIT;
  ASSERT_EQ(al_stream_get_stats(s, &st), AL_OK);
  EXPECT_EQ(st.skipped, 1u);
  al_stream_close(s);
  al_run_free(run);
  al_index_free(lacking);
}

} // namespace
