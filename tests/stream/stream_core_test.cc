// The stream engine over hand-made tar shards and hand-made rank plans:
// packing, order, offsets, contents, LZ4, state restore, shutdown, errors,
// bounded memory, sequential (libarchive) shards.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/stream/stream_fixtures.h"

using altest::Corpus;
using altest::MakePlan;

namespace {

struct Got {
  uint64_t position;
  uint32_t step, micro;
  std::vector<std::string> keys;
};

// A stream over `src` that takes `plan` (the stream owns it from here, or it is freed).
al_stream *OpenSource(const stream_source *src, stream_rank_plan plan,
                      const al_stream_options *o = nullptr) {
  al_stream *s = nullptr;
  int st = stream_open_source(&s, src, &plan, o);
  EXPECT_EQ(st, AL_OK) << al_last_error();
  if (st != AL_OK) stream_rank_plan_free(&plan);
  return s;
}

// Checks one batch against the corpus and the plan; returns its keys.
void CheckBatch(const Corpus &c, const stream_rank_plan &plan_copy, const al_stream_batch *b,
                size_t align = 64) {
  ASSERT_LT(b->position, plan_copy.n_batches);
  const stream_plan_batch &pb = plan_copy.batches[b->position];
  EXPECT_EQ(b->step, pb.step);
  EXPECT_EQ(b->micro, pb.micro);
  EXPECT_EQ(b->n_micro, pb.n_micro);
  EXPECT_EQ(b->last_in_step, pb.micro + 1 == pb.n_micro);
  EXPECT_EQ(b->bucket, pb.bucket);
  EXPECT_EQ(b->step_samples, pb.step_samples);
  EXPECT_EQ(b->step_tokens, pb.step_tokens);
  ASSERT_EQ(b->n + b->n_skipped, pb.n);
  const unsigned char *data = static_cast<const unsigned char *>(b->data);
  EXPECT_EQ(b->cu_seqlens[0], 0);
  EXPECT_EQ(b->offsets[0], 0u);
  uint64_t tokens = 0;
  size_t j = 0; // position in the plan batch (skipped samples are absent from b)
  for (size_t i = 0; i < b->n; i++, j++) {
    // Skip plan entries whose key was skipped.
    while (j < pb.n && b->n_skipped &&
           c.samples[plan_copy.samples[pb.first + j].sample].key != b->keys[i])
      j++;
    ASSERT_LT(j, pb.n);
    const stream_plan_sample &ps = plan_copy.samples[pb.first + j];
    const altest::Sample &s = c.samples[ps.sample];
    EXPECT_EQ(std::string(b->keys[i]), s.key);
    EXPECT_EQ(b->samples[i], ps.sample);
    EXPECT_EQ(b->shapes[3 * i], s.w);
    EXPECT_EQ(b->shapes[3 * i + 1], s.h);
    EXPECT_EQ(b->shapes[3 * i + 2], s.f);
    EXPECT_EQ(b->padded[i], ps.padded);
    EXPECT_EQ(b->offsets[i] % align, 0u) << "sample " << i;
    ASSERT_EQ(b->sizes[i], s.payload.size()) << s.key;
    EXPECT_EQ(0, std::memcmp(data + b->offsets[i], s.payload.data(), s.payload.size())) << s.key;
    if (i > 0) {
      uint64_t prev_end = b->offsets[i - 1] + b->sizes[i - 1];
      EXPECT_GE(b->offsets[i], prev_end);
      EXPECT_LT(b->offsets[i] - prev_end, align);
      for (uint64_t k = prev_end; k < b->offsets[i]; k++)
        ASSERT_EQ(data[k], 0) << "padding byte " << k;
    }
    tokens += ps.tokens;
    EXPECT_EQ((uint64_t)b->cu_seqlens[i + 1], tokens);
  }
  EXPECT_EQ(b->tokens, tokens);
  if (b->n) {
    EXPECT_EQ(b->offsets[b->n], b->offsets[b->n - 1] + b->sizes[b->n - 1]);
  }
  EXPECT_EQ(b->data_bytes, b->offsets[b->n]);
  // The cu_seqlens copy behind the payload, for a single device copy.
  EXPECT_EQ(b->cu_seqlens_offset % align, 0u);
  EXPECT_GE(b->cu_seqlens_offset, b->data_bytes);
  EXPECT_EQ(b->copy_bytes, b->cu_seqlens_offset + (b->n + 1) * sizeof(int32_t));
  EXPECT_EQ(0,
            std::memcmp(data + b->cu_seqlens_offset, b->cu_seqlens, (b->n + 1) * sizeof(int32_t)));
}

stream_rank_plan Copy(const stream_rank_plan &p) {
  stream_rank_plan c = p;
  c.batches = static_cast<stream_plan_batch *>(std::malloc((p.n_batches + 1) * sizeof *p.batches));
  c.samples = static_cast<stream_plan_sample *>(std::malloc((p.n_samples + 1) * sizeof *p.samples));
  std::memcpy(c.batches, p.batches, p.n_batches * sizeof *p.batches);
  std::memcpy(c.samples, p.samples, p.n_samples * sizeof *p.samples);
  return c;
}

// Reader threads and pool buffers (0: the library's default).
al_stream_options Options(int threads, int prefetch) {
  al_stream_options o{};
  o.threads = threads;
  o.prefetch = prefetch;
  return o;
}

// A stream over the corpus reading a copy of `ref` (ref stays the caller's, for checks).
al_stream *Open(const Corpus &c, const stream_rank_plan &ref,
                const al_stream_options *o = nullptr) {
  return OpenSource(&c.src, Copy(ref), o);
}

// Sample positions 0, 1, ..., n-1.
std::vector<uint64_t> InOrder(size_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<uint64_t> Shuffled(size_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  uint64_t x = seed;
  for (size_t i = n; i > 1; i--) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i - 1], v[(x >> 33) % i]);
  }
  return v;
}

std::vector<size_t> Sizes(size_t batches, uint64_t seed) {
  std::vector<size_t> v;
  for (size_t i = 0; i < batches; i++) v.push_back(1 + (i * 7 + seed) % 6);
  return v;
}

// Reads the stream to the end (or `limit` batches), checking every batch.
std::vector<Got> Drain(const Corpus &c, const stream_rank_plan &ref, al_stream *s,
                       size_t limit = SIZE_MAX) {
  std::vector<Got> out;
  const al_stream_batch *b;
  while (out.size() < limit) {
    int st = al_stream_next(s, &b);
    if (st == AL_EOF) break;
    EXPECT_EQ(st, AL_OK) << al_last_error();
    if (st != AL_OK) break;
    CheckBatch(c, ref, b);
    Got g{b->position, b->step, b->micro, {}};
    for (size_t i = 0; i < b->n; i++) g.keys.push_back(b->keys[i]);
    out.push_back(g);
    EXPECT_EQ(al_stream_release(s, b), AL_OK);
  }
  return out;
}

TEST(StreamCore, PacksEveryBatchInOrderWithContents) {
  Corpus c;
  c.Build("pack", 120, 3);
  stream_rank_plan ref = MakePlan(Shuffled(120, 7), Sizes(40, 1), 3, {5, 17});
  for (int threads : {1, 3}) {
    al_stream_options o = Options(threads, 3);
    al_stream *s = Open(c, ref, &o);
    ASSERT_NE(s, nullptr);
    auto got = Drain(c, ref, s);
    ASSERT_EQ(got.size(), ref.n_batches);
    for (size_t i = 0; i < got.size(); i++) EXPECT_EQ(got[i].position, i);
    // Padding flags came through.
    al_stream_stats st = AL_STREAM_STATS_INIT;
    ASSERT_EQ(al_stream_get_stats(s, &st), AL_OK);
    EXPECT_EQ(st.batches, ref.n_batches);
    EXPECT_EQ(st.samples, ref.n_samples);
    EXPECT_EQ(st.skipped, 0u);
    EXPECT_EQ(st.total_batches, ref.n_batches);
    EXPECT_EQ(st.threads, threads);
    // After the end, next keeps saying EOF.
    const al_stream_batch *b;
    EXPECT_EQ(al_stream_next(s, &b), AL_EOF);
    al_stream_close(s);
  }
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, PaddingFlagsAndAlignmentOption) {
  Corpus c;
  c.Build("pad", 12, 1);
  stream_rank_plan ref = MakePlan(InOrder(12), {4, 4, 4}, 1, {3, 11});
  al_stream_options o{};
  o.align = 256;
  al_stream *s = Open(c, ref, &o);
  const al_stream_batch *b;
  int seen = 0;
  while (al_stream_next(s, &b) == AL_OK) {
    CheckBatch(c, ref, b, 256);
    for (size_t i = 0; i < b->n; i++) seen += b->padded[i];
    EXPECT_EQ(b->padded[3], b->position != 1) << "the last sample of batches 0 and 2 is padding";
    al_stream_release(s, b);
  }
  EXPECT_EQ(seen, 2);
  al_stream_close(s);
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, LZ4MembersNamedWithSuffixInTheIndex) {
  Corpus c;
  c.Build("lzsfx", 30, 2, true, /*lz4_ext_with_suffix=*/true);
  stream_rank_plan ref = MakePlan(InOrder(30), {10, 10, 10});
  al_stream_options o{};
  o.read_block = 4096; // forces LZ4 frames across several reads
  al_stream *s = Open(c, ref, &o);
  auto got = Drain(c, ref, s);
  EXPECT_EQ(got.size(), 3u);
  al_stream_close(s);
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, StateRestoreGivesExactlyTheRest) {
  Corpus c;
  c.Build("state", 90, 3);
  stream_rank_plan ref = MakePlan(Shuffled(90, 3), Sizes(30, 2), 2);
  std::vector<Got> full;
  {
    al_stream *s = Open(c, ref);
    full = Drain(c, ref, s);
    al_stream_close(s);
  }
  ASSERT_EQ(full.size(), 30u);
  for (size_t k : {0u, 1u, 7u, 29u, 30u}) {
    al_stream_state state = AL_STREAM_STATE_INIT;
    std::vector<Got> first, rest;
    {
      al_stream_options o = Options(0, 4);
      al_stream *s = Open(c, ref, &o);
      first = Drain(c, ref, s, k);
      ASSERT_EQ(al_stream_get_state(s, &state), AL_OK);
      al_stream_close(s); // readers were ahead: their batches must not count
    }
    EXPECT_EQ(state.position, k);
    EXPECT_EQ(state.delivered, k);
    EXPECT_EQ(state.stride, 1u);
    if (k < 30) {
      EXPECT_EQ(state.next_step, ref.batches[k].step);
      EXPECT_EQ(state.next_micro, ref.batches[k].micro);
    } else {
      EXPECT_EQ(state.next_step, UINT32_MAX);
    }
    {
      al_stream_options o{};
      o.resume = &state;
      al_stream *s = Open(c, ref, &o);
      ASSERT_NE(s, nullptr);
      rest = Drain(c, ref, s);
      al_stream_state end = AL_STREAM_STATE_INIT;
      al_stream_get_state(s, &end);
      EXPECT_EQ(end.delivered, 30u);
      al_stream_close(s);
    }
    ASSERT_EQ(first.size() + rest.size(), full.size()) << "k=" << k;
    for (size_t i = 0; i < full.size(); i++) {
      const Got &g = i < first.size() ? first[i] : rest[i - first.size()];
      EXPECT_EQ(g.position, full[i].position);
      EXPECT_EQ(g.keys, full[i].keys);
    }
  }
  // A state of another epoch / index / rank is refused with a reason.
  al_stream_state bad = AL_STREAM_STATE_INIT;
  {
    al_stream *s = Open(c, ref);
    al_stream_get_state(s, &bad);
    al_stream_close(s);
  }
  bad.epoch += 1;
  stream_rank_plan p = Copy(ref);
  al_stream_options o{};
  o.resume = &bad;
  al_stream *s = nullptr;
  EXPECT_EQ(stream_open_source(&s, &c.src, &p, &o), AL_ESTATE);
  EXPECT_TRUE(altest::ErrorContains("epoch"));
  EXPECT_EQ(s, nullptr);
  stream_rank_plan_free(&p);
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, WorkerSlicesInterleaveToTheFullOrderAndResume) {
  Corpus c;
  c.Build("workers", 60, 2);
  stream_rank_plan ref = MakePlan(Shuffled(60, 11), Sizes(23, 4), 2);
  const uint32_t k = 3;
  std::vector<std::vector<Got>> per(k);
  for (uint32_t w = 0; w < k; w++) {
    al_stream_options o{};
    o.first = w;
    o.stride = k;
    al_stream *s = Open(c, ref, &o);
    per[w] = Drain(c, ref, s);
    al_stream_close(s);
  }
  // Round-robin over workers gives back 0, 1, 2, ... (what DataLoader does).
  std::vector<uint64_t> merged;
  for (size_t j = 0; merged.size() < ref.n_batches; j++)
    for (uint32_t w = 0; w < k; w++)
      if (j < per[w].size()) merged.push_back(per[w][j].position);
  for (size_t i = 0; i < merged.size(); i++) EXPECT_EQ(merged[i], i);
  // A worker's state resumes that worker's slice.
  al_stream_options o{};
  o.first = 1;
  o.stride = k;
  al_stream *s = Open(c, ref, &o);
  auto two = Drain(c, ref, s, 2);
  al_stream_state st = AL_STREAM_STATE_INIT;
  al_stream_get_state(s, &st);
  al_stream_close(s);
  EXPECT_EQ(st.position, 1u + 2 * k);
  EXPECT_EQ(st.stride, k);
  al_stream_options o2{};
  o2.resume = &st;
  s = Open(c, ref, &o2);
  auto rest = Drain(c, ref, s);
  al_stream_close(s);
  ASSERT_EQ(two.size() + rest.size(), per[1].size());
  for (size_t i = 0; i < rest.size(); i++) EXPECT_EQ(rest[i].position, per[1][i + 2].position);
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, CloseMidEpochWhileReadersBlockAndBatchesAreHeld) {
  Corpus c;
  c.Build("close", 200, 4);
  stream_rank_plan ref = MakePlan(Shuffled(200, 5), Sizes(60, 3), 2);
  for (int consumed : {0, 1, 5}) {
    al_stream_options o = Options(4, 3);
    al_stream *s = Open(c, ref, &o);
    const al_stream_batch *b = nullptr;
    for (int i = 0; i < consumed; i++) {
      ASSERT_EQ(al_stream_next(s, &b), AL_OK);
      if (i + 1 < consumed) al_stream_release(s, b); // keep the last one held
    }
    usleep(20000);      // let the readers fill the pool and block
    al_stream_close(s); // joins blocked readers, frees held batches (ASan checks)
  }
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, PoolNeverExceedsPrefetchAndHoldingAllIsReported) {
  Corpus c;
  c.Build("bound", 100, 2);
  stream_rank_plan ref = MakePlan(Shuffled(100, 9), Sizes(40, 5), 2);
  for (int prefetch : {1, 2, 4}) {
    // More readers than buffers: they must wait, not allocate.
    al_stream_options o = Options(4, prefetch);
    al_stream *s = Open(c, ref, &o);
    const al_stream_batch *b;
    size_t n = 0;
    while (al_stream_next(s, &b) == AL_OK) {
      al_stream_stats st = AL_STREAM_STATS_INIT;
      al_stream_get_stats(s, &st);
      EXPECT_LE(st.max_in_use, prefetch);
      EXPECT_LE(st.buffers_allocated, prefetch);
      if (n % 7 == 0) usleep(2000); // slow consumer: readers run into backpressure
      al_stream_release(s, b);
      n++;
    }
    EXPECT_EQ(n, ref.n_batches);
    al_stream_stats st = AL_STREAM_STATS_INIT;
    al_stream_get_stats(s, &st);
    EXPECT_EQ(st.buffers, prefetch);
    EXPECT_LE(st.max_in_use, prefetch);
    EXPECT_GE(st.max_in_use, 1);
    al_stream_close(s);
  }
  // Holding every buffer: next() says so instead of deadlocking.
  al_stream_options o = Options(0, 2);
  al_stream *s = Open(c, ref, &o);
  const al_stream_batch *b1, *b2, *b3;
  ASSERT_EQ(al_stream_next(s, &b1), AL_OK);
  ASSERT_EQ(al_stream_next(s, &b2), AL_OK);
  EXPECT_EQ(al_stream_next(s, &b3), AL_ESTATE);
  EXPECT_TRUE(altest::ErrorContains("held"));
  EXPECT_EQ(al_stream_release(s, b1), AL_OK);
  EXPECT_EQ(al_stream_release(s, b1), AL_EINVAL); // twice
  ASSERT_EQ(al_stream_next(s, &b3), AL_OK);
  EXPECT_EQ(b3->position, 2u);
  al_stream_close(s);
  stream_rank_plan_free(&ref);
}

// Truncates shard 1 after indexing: the first batch reading a sample of it fails
// (naming the key), or delivers without it and lists it.
TEST(StreamCore, TruncatedShardFailsOrSkipsNamingTheKey) {
  Corpus c;
  c.Build("trunc", 40, 2);
  std::vector<uint64_t> order;
  for (uint64_t i = 0; i < 40; i += 2) order.push_back(i); // shard 0 only ...
  for (uint64_t i = 1; i < 40; i += 2) order.push_back(i); // ... then shard 1
  stream_rank_plan ref = MakePlan(order, {5, 5, 5, 5, 5, 5, 5, 5}, 2);
  ASSERT_EQ(truncate(c.shard_paths[1].c_str(), 3000), 0);
  const std::string bad_key = c.samples[order[20]].key;

  { // AL_STREAM_FAIL: batches 0-3 are fine; batch 4 fails and the stream stops.
    al_stream *s = Open(c, ref);
    const al_stream_batch *b;
    for (int i = 0; i < 4; i++) {
      ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
      CheckBatch(c, ref, b);
      al_stream_release(s, b);
    }
    int st = al_stream_next(s, &b);
    EXPECT_LT(st, 0);
    std::string msg = al_last_error();
    EXPECT_TRUE(altest::Contains(msg, bad_key));
    EXPECT_TRUE(altest::Contains(msg, "changed since indexing"));
    EXPECT_TRUE(altest::Contains(msg, c.shard_paths[1]));
    EXPECT_EQ(al_stream_next(s, &b), st) << "the stream stays stopped";
    al_stream_state state = AL_STREAM_STATE_INIT;
    al_stream_get_state(s, &state);
    EXPECT_EQ(state.position, 4u) << "a resume re-reads the failed batch";
    al_stream_close(s);
  }
  { // AL_STREAM_SKIP_SAMPLE: every batch delivered, bad samples listed.
    al_stream_options o{};
    o.on_error = AL_STREAM_SKIP_SAMPLE;
    o.max_skip_fraction = 1; // half the samples: past the default budget
    al_stream *s = Open(c, ref, &o);
    const al_stream_batch *b;
    size_t skipped = 0, batches = 0;
    std::set<std::string> skipped_keys;
    while (al_stream_next(s, &b) == AL_OK) {
      CheckBatch(c, ref, b);
      if (batches < 4) {
        EXPECT_EQ(b->n_skipped, 0u);
      } else {
        EXPECT_EQ(b->n_skipped + b->n, 5u);
      }
      for (size_t i = 0; i < b->n_skipped; i++) {
        skipped_keys.insert(b->skipped_keys[i]);
        EXPECT_TRUE(altest::Contains(b->skipped_reasons[i], b->skipped_keys[i]));
      }
      skipped += b->n_skipped;
      batches++;
      al_stream_release(s, b);
    }
    EXPECT_EQ(batches, 8u);
    EXPECT_EQ(skipped, 20u); // the whole shard is unusable: its size changed
    EXPECT_TRUE(skipped_keys.count(bad_key));
    al_stream_stats st = AL_STREAM_STATS_INIT;
    al_stream_get_stats(s, &st);
    EXPECT_EQ(st.skipped, 20u);
    al_stream_state state = AL_STREAM_STATE_INIT;
    al_stream_get_state(s, &state);
    EXPECT_EQ(state.skipped, 20u);
    al_stream_close(s);
  }
  stream_rank_plan_free(&ref);
}

// A short read after the stream checked the shard (truncated while open).
TEST(StreamCore, ShortReadWhileOpenNamesKey) {
  Corpus c;
  c.Build("short", 10, 1, /*with_lz4=*/false);
  stream_rank_plan ref = MakePlan(InOrder(10), {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1);
  al_stream_options o = Options(1, 1);
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.max_skip_fraction = 1; // one of ten: past the default budget
  al_stream *s = Open(c, ref, &o);
  const al_stream_batch *b;
  ASSERT_EQ(al_stream_next(s, &b), AL_OK); // shard opened and checked
  // Cut inside sample 5's payload; the reader is blocked (one buffer, held).
  al_member_info mi;
  ASSERT_EQ(al_index_find_member(c.idx, 5, "latent", &mi), AL_OK);
  ASSERT_EQ(truncate(c.shard_paths[0].c_str(), (off_t)(mi.offset + 10)), 0);
  al_stream_release(s, b);
  size_t n = 1;
  std::string reason;
  while (al_stream_next(s, &b) == AL_OK) {
    if (b->n_skipped) reason = b->skipped_reasons[0];
    if (b->position == 5) {
      ASSERT_EQ(b->n_skipped, 1u);
      EXPECT_STREQ(b->skipped_keys[0], c.samples[5].key.c_str());
    }
    al_stream_release(s, b);
    n++;
  }
  EXPECT_EQ(n, 10u);
  EXPECT_TRUE(altest::Contains(reason, "short read"));
  al_stream_close(s);
  stream_rank_plan_free(&ref);
}

// A source whose shards claim another mtime than the files have.
struct MtimeSource {
  stream_source inner;
  int64_t mtime;
};
int MtimeShard(void *ctx, uint32_t id, stream_source_shard *out) {
  auto *m = static_cast<MtimeSource *>(ctx);
  int st = m->inner.shard(m->inner.ctx, id, out);
  out->mtime_ns = m->mtime;
  return st;
}
int MtimeJob(void *ctx, uint64_t sample, const char *ext, stream_source_job *job) {
  auto *m = static_cast<MtimeSource *>(ctx);
  return m->inner.job(m->inner.ctx, sample, ext, job);
}

// A source without content fingerprints (an index from before them) falls back to mtime.
TEST(StreamCore, ChangedMtimeIsDetected) {
  Corpus c;
  c.Build("mtime", 6, 1);
  struct stat sb;
  ASSERT_EQ(stat(c.shard_paths[0].c_str(), &sb), 0);
  int64_t real = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  std::vector<uint64_t> order = InOrder(6);
  for (int64_t claimed : {real, real - 1000}) {
    MtimeSource ms;
    stream_index_source(c.idx, &ms.inner);
    ms.mtime = claimed;
    stream_source src = ms.inner;
    src.ctx = &ms;
    src.shard = MtimeShard;
    src.job = MtimeJob;
    src.verify = nullptr; // no fingerprint: size and mtime are what is checked
    al_stream *s = OpenSource(&src, MakePlan(order, {3, 3}, 1));
    ASSERT_NE(s, nullptr);
    const al_stream_batch *b;
    int st = al_stream_next(s, &b);
    if (claimed == real) {
      EXPECT_EQ(st, AL_OK) << al_last_error();
    } else {
      EXPECT_EQ(st, AL_EFORMAT);
      std::string msg = al_last_error();
      EXPECT_TRUE(altest::Contains(msg, "mtime_ns"));
      EXPECT_TRUE(altest::Contains(msg, c.samples[0].key));
    }
    al_stream_close(s);
  }
}

// A source whose reader stops at one sample's job until the test opens the gate: the
// readers' progress is known exactly, without timing.
struct GateSource {
  stream_source inner;
  uint64_t gated_sample;
  std::mutex mu;
  std::condition_variable cv;
  bool reached = false, open = false;
};
int GateShard(void *ctx, uint32_t id, stream_source_shard *out) {
  auto *g = static_cast<GateSource *>(ctx);
  return g->inner.shard(g->inner.ctx, id, out);
}
int GateVerify(void *ctx, uint32_t id, struct storage_obj *obj) {
  auto *g = static_cast<GateSource *>(ctx);
  return g->inner.verify ? g->inner.verify(g->inner.ctx, id, obj) : AL_ENOTFOUND;
}
int GateJob(void *ctx, uint64_t sample, const char *ext, stream_source_job *job) {
  auto *g = static_cast<GateSource *>(ctx);
  if (sample == g->gated_sample) {
    std::unique_lock<std::mutex> lk(g->mu);
    g->reached = true;
    g->cv.notify_all();
    g->cv.wait(lk, [g] { return g->open; });
  }
  return g->inner.job(g->inner.ctx, sample, ext, job);
}

// Per-batch stall: 0 for a batch that was ready when next() was called (the one reader had
// moved on to a later batch), > 0 for one the reader was still filling; the batches' stalls
// add up to the stream's; local shards fetch nothing.
TEST(StreamCore, BatchStallIsTheWaitOfItsNext) {
  Corpus c;
  c.Build("stall", 12, 2);
  stream_rank_plan ref = MakePlan(InOrder(12), {3, 3, 3, 3}, 2);
  GateSource g;
  stream_index_source(c.idx, &g.inner);
  g.gated_sample = ref.samples[ref.batches[2].first].sample; // the first sample of batch 2
  stream_source src = g.inner;
  src.ctx = &g;
  src.shard = GateShard;
  src.job = GateJob;
  src.verify = GateVerify;
  al_stream_options o = Options(1, 4);
  al_stream *s = OpenSource(&src, Copy(ref), &o);
  ASSERT_NE(s, nullptr);
  {
    // One reader fills in order: at batch 2's first sample, batches 0 and 1 are ready.
    std::unique_lock<std::mutex> lk(g.mu);
    g.cv.wait(lk, [&g] { return g.reached; });
  }
  const al_stream_batch *b;
  double sum = 0;
  for (uint64_t k = 0; k < 2; k++) {
    ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
    EXPECT_EQ(b->position, k);
    EXPECT_EQ(b->stall_seconds, 0.0) << "batch " << k << " was ready";
    sum += b->stall_seconds;
    ASSERT_EQ(al_stream_release(s, b), AL_OK);
  }
  // Batch 2 waits at the gate until the opener below runs: next() must wait for it.
  std::thread opener([&g] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lk(g.mu);
    g.open = true;
    g.cv.notify_all();
  });
  auto t0 = std::chrono::steady_clock::now();
  int st = al_stream_next(s, &b);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  opener.join();
  ASSERT_EQ(st, AL_OK) << al_last_error();
  EXPECT_EQ(b->position, 2u);
  EXPECT_GT(b->stall_seconds, 0.0);
  EXPECT_LE(b->stall_seconds, took);
  sum += b->stall_seconds;
  EXPECT_EQ(b->fetched_bytes, 0u);
  EXPECT_EQ(b->requests, 0u);
  EXPECT_EQ(b->cache_hits, 0u);
  EXPECT_EQ(b->cache_misses, 0u);
  ASSERT_EQ(al_stream_release(s, b), AL_OK);
  ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
  EXPECT_GE(b->stall_seconds, 0.0);
  sum += b->stall_seconds;
  ASSERT_EQ(al_stream_release(s, b), AL_OK);
  EXPECT_EQ(al_stream_next(s, &b), AL_EOF);
  al_stream_stats stats = AL_STREAM_STATS_INIT;
  ASSERT_EQ(al_stream_get_stats(s, &stats), AL_OK);
  EXPECT_NEAR(stats.stall_seconds, sum, 1e-9);
  EXPECT_EQ(stats.bytes_fetched, 0u);
  al_stream_close(s);
  stream_rank_plan_free(&ref);
}

TEST(StreamCore, CorruptLZ4AndMissingMemberNameTheKey) {
  Corpus c;
  c.Build("corrupt", 9, 1);
  // Sample 1 is stored as LZ4 (content size); flip bytes in its frame body.
  al_member_info mi;
  ASSERT_EQ(al_index_find_member(c.idx, 1, "latent", &mi), AL_OK);
  ASSERT_TRUE(mi.lz4);
  int fd = open(c.shard_paths[0].c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  unsigned char junk[16];
  std::memset(junk, 0xA5, sizeof junk);
  ASSERT_EQ(pwrite(fd, junk, sizeof junk, (off_t)(mi.offset + 20)), (ssize_t)sizeof junk);
  close(fd);
  std::vector<uint64_t> order = InOrder(9);
  al_stream_options o{};
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.ext = "nosuch";        // every sample lacks it
  o.max_skip_fraction = 1; // no budget (the stream still fails at its end: nothing delivered)
  al_stream *s = OpenSource(&c.src, MakePlan(order, {3, 3, 3}, 1), &o);
  const al_stream_batch *b;
  ASSERT_EQ(al_stream_next(s, &b), AL_OK);
  EXPECT_EQ(b->n, 0u);
  ASSERT_EQ(b->n_skipped, 3u);
  EXPECT_STREQ(b->skipped_keys[2], c.samples[2].key.c_str());
  EXPECT_TRUE(altest::Contains(b->skipped_reasons[0], "no member"));
  al_stream_release(s, b);
  al_stream_close(s);

  s = OpenSource(&c.src, MakePlan(order, {3, 3, 3}, 1));
  int st = al_stream_next(s, &b);
  EXPECT_EQ(st, AL_EFORMAT);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, c.samples[1].key));
  EXPECT_TRUE(altest::Contains(msg, "LZ4"));
  al_stream_close(s);
}

// A FIFO put where a shard was fails the read at once (open blocked forever).
TEST(StreamCore, ShardReplacedByAFifoFailsWithoutBlocking) {
  Corpus c;
  c.Build("fifo", 6, 1);
  ASSERT_EQ(unlink(c.shard_paths[0].c_str()), 0);
  ASSERT_EQ(mkfifo(c.shard_paths[0].c_str(), 0644), 0);
  alarm(30); // a hang kills the test instead of stalling the suite
  al_stream *s = OpenSource(&c.src, MakePlan(InOrder(6), {3, 3}, 1));
  ASSERT_NE(s, nullptr);
  const al_stream_batch *b;
  EXPECT_EQ(al_stream_next(s, &b), AL_EINVAL);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "FIFO")) << msg;
  EXPECT_TRUE(altest::Contains(msg, c.samples[0].key)) << msg;
  al_stream_close(s);
  alarm(0);
}

// Compressed shards are not seekable: the libarchive fallback reads them.
TEST(StreamCore, GzipShardReadSequentially) {
  Corpus c;
  c.Build("gz", 24, 2);
  // gzip each shard; the index keeps uncompressed-stream offsets, seekable = 0.
  al_index *gi = nullptr;
  ASSERT_EQ(al_index_new(&gi), AL_OK);
  for (size_t k = 0; k < c.shard_paths.size(); k++) {
    std::string gz = c.shard_paths[k] + ".gz";
    ASSERT_NO_FATAL_FAILURE(altest::CompressFile(c.shard_paths[k], gz, "gzip"));
    uint32_t id;
    ASSERT_EQ(al_index_add_shard(gi, gz.c_str(), altest::FileSize(gz), 0, &id), AL_OK);
  }
  for (size_t i = 0; i < c.samples.size(); i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    ASSERT_EQ(al_index_sample(c.idx, i, &si), AL_OK);
    std::vector<al_member_info> ms(si.n_members);
    for (uint32_t m = 0; m < si.n_members; m++)
      ASSERT_EQ(al_index_member(c.idx, i, m, &ms[m]), AL_OK);
    ASSERT_EQ(al_index_add_sample(gi, si.key, si.shard, si.width, si.height, si.frames, si.fps,
                                  ms.data(), ms.size()),
              AL_OK);
  }
  stream_rank_plan ref = MakePlan(Shuffled(24, 1), {5, 5, 5, 5, 4}, 2);
  al_stream_options o = Options(2, 0);
  stream_source src;
  stream_index_source(gi, &src);
  al_stream *s = OpenSource(&src, Copy(ref), &o);
  auto got = Drain(c, ref, s);
  EXPECT_EQ(got.size(), 5u);
  al_stream_close(s);
  stream_rank_plan_free(&ref);
  al_index_free(gi);
}

TEST(StreamCore, EmptyPlanAndBadOptions) {
  Corpus c;
  c.Build("empty", 2, 1);
  al_stream *s = OpenSource(&c.src, MakePlan({0}, {}, 1));
  const al_stream_batch *b;
  EXPECT_EQ(al_stream_next(s, &b), AL_EOF);
  al_stream_close(s);
  al_stream_options o{};
  o.align = 48;
  stream_rank_plan p = MakePlan({0}, {1}, 1);
  EXPECT_EQ(stream_open_source(&s, &c.src, &p, &o), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("align"));
  stream_rank_plan_free(&p);
  o = {};
  o.on_error = 7;
  p = MakePlan({0}, {1}, 1);
  EXPECT_EQ(stream_open_source(&s, &c.src, &p, &o), AL_EINVAL);
  stream_rank_plan_free(&p);
  // Without a CUDA device, a device copy is refused with a reason.
  if (!al_stream_cuda_available()) {
    o = {};
    o.device_copy = 1;
    p = MakePlan({0}, {1}, 1);
    EXPECT_EQ(stream_open_source(&s, &c.src, &p, &o), AL_EUNSUPPORTED);
    EXPECT_TRUE(altest::ErrorContains("CUDA"));
    stream_rank_plan_free(&p);
  }
}

} // namespace
