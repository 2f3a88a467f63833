// Resume states against the plan they resume (hand-made tar shards and rank plans): a state
// names its manifest (manifest_fingerprint) and its (step, micro); a state of another plan of
// the same rank, world, epoch, seed and index is refused at every position, the end included;
// a state at the end must carry the end marker; version 1 states are refused. And what a
// skip takes from the step totals (skipped_real_samples / skipped_real_tokens, planned_tokens).
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/stream/stream_fixtures.h"

using altest::Corpus;
using altest::MakePlan;

namespace {

// A stream over the corpus reading a copy of `ref` (ref stays the caller's).
al_stream *OpenPlan(const Corpus &c, const stream_rank_plan &ref, const al_stream_options *o,
                    int *rc) {
  stream_rank_plan p = ref;
  p.batches = static_cast<stream_plan_batch *>(
      std::malloc((ref.n_batches + 1) * sizeof *p.batches));
  p.samples = static_cast<stream_plan_sample *>(
      std::malloc((ref.n_samples + 1) * sizeof *p.samples));
  std::memcpy(p.batches, ref.batches, ref.n_batches * sizeof *p.batches);
  std::memcpy(p.samples, ref.samples, ref.n_samples * sizeof *p.samples);
  al_stream *s = nullptr;
  *rc = stream_open_source(&s, &c.src, &p, o);
  stream_rank_plan_free(&p);
  return s;
}

// The state after `k` batches of a stream over `ref`.
al_stream_state StateAfter(const Corpus &c, const stream_rank_plan &ref, size_t k) {
  int rc;
  al_stream *s = OpenPlan(c, ref, nullptr, &rc);
  EXPECT_EQ(rc, AL_OK) << al_last_error();
  const al_stream_batch *b;
  for (size_t i = 0; i < k; i++) {
    EXPECT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
    al_stream_release(s, b);
  }
  al_stream_state st = AL_STREAM_STATE_INIT;
  al_stream_get_state(s, &st);
  al_stream_close(s);
  return st;
}

size_t Count(const Corpus &c, const stream_rank_plan &ref, const al_stream_state &st) {
  al_stream_options o{};
  o.resume = &st;
  int rc;
  al_stream *s = OpenPlan(c, ref, &o, &rc);
  EXPECT_EQ(rc, AL_OK) << al_last_error();
  size_t n = 0;
  const al_stream_batch *b;
  while (s && al_stream_next(s, &b) == AL_OK) {
    n++;
    al_stream_release(s, b);
  }
  al_stream_close(s);
  return n;
}

int Refused(const Corpus &c, const stream_rank_plan &ref, const al_stream_state &st) {
  al_stream_options o{};
  o.resume = &st;
  int rc;
  al_stream *s = OpenPlan(c, ref, &o, &rc);
  EXPECT_EQ(s, nullptr);
  al_stream_close(s);
  return rc;
}

// The pre-resume plan (12 batches) and a "re-plan" of the same rank (5 batches, other
// samples), with the same rank, world, epoch, seed and index; only the manifests differ.
struct Plans {
  Corpus c;
  stream_rank_plan old_plan, new_plan;
  Plans() {
    c.Build("resume", 40, 2);
    std::vector<uint64_t> order(40);
    for (uint64_t i = 0; i < 40; i++) order[i] = (i * 7) % 40;
    old_plan = MakePlan(order, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, 2);
    std::vector<uint64_t> rest(order.begin() + 12, order.end());
    new_plan = MakePlan(rest, {4, 4, 4, 4, 4}, 2);
    old_plan.manifest_fingerprint = 0x1111;
    new_plan.manifest_fingerprint = 0x2222;
  }
  ~Plans() {
    stream_rank_plan_free(&old_plan);
    stream_rank_plan_free(&new_plan);
  }
};

TEST(StreamResume, StateOfAnotherManifestIsRefusedAtEveryPositionTheEndIncluded) {
  Plans p;
  const size_t n = p.new_plan.n_batches;
  for (size_t k : {n - 1, n, n + 1}) {
    al_stream_state st = StateAfter(p.c, p.old_plan, k);
    EXPECT_EQ(st.version, AL_STREAM_STATE_VERSION);
    EXPECT_EQ(st.manifest_fingerprint, 0x1111u);
    EXPECT_EQ(Refused(p.c, p.new_plan, st), AL_ESTATE) << "position " << k;
    EXPECT_TRUE(altest::ErrorContains("belongs to manifest 0000000000001111"));
    EXPECT_TRUE(altest::ErrorContains("manifest 0000000000002222"));
  }
  // Its own states resume, mid-epoch and at the end (nothing left: nothing lost).
  EXPECT_EQ(Count(p.c, p.new_plan, StateAfter(p.c, p.new_plan, 2)), n - 2);
  al_stream_state end = StateAfter(p.c, p.new_plan, n);
  EXPECT_EQ(end.position, n);
  EXPECT_EQ(end.next_step, UINT32_MAX);
  EXPECT_EQ(end.next_micro, UINT32_MAX);
  EXPECT_EQ(Count(p.c, p.new_plan, end), 0u);
}

TEST(StreamResume, EndStateWithoutTheEndMarkerIsRefused) {
  Plans p;
  const size_t n = p.new_plan.n_batches;
  al_stream_state st = StateAfter(p.c, p.new_plan, n);
  st.next_step = p.new_plan.batches[n - 1].step + 1;
  st.next_micro = 0;
  EXPECT_EQ(Refused(p.c, p.new_plan, st), AL_ESTATE);
  EXPECT_TRUE(altest::ErrorContains("end there"));
  // And a mid-epoch (step, micro) that is not the plan's.
  al_stream_state mid = StateAfter(p.c, p.new_plan, 1);
  mid.next_micro += 1;
  EXPECT_EQ(Refused(p.c, p.new_plan, mid), AL_ESTATE);
  EXPECT_TRUE(altest::ErrorContains("another manifest?"));
}

TEST(StreamResume, Version1StatesAreRefusedWithAReason) {
  Plans p;
  al_stream_state st = StateAfter(p.c, p.new_plan, 1);
  st.version = 1;
  st.manifest_fingerprint = 0;
  EXPECT_EQ(Refused(p.c, p.new_plan, st), AL_EVERSION);
  EXPECT_TRUE(altest::ErrorContains("version 1 names no manifest"));
}

// A skip takes the skipped samples' tokens out of the batch; the real ones (not padding) are
// what the step totals lose.
TEST(StreamResume, SkippedRealSamplesAndTokensAreCounted) {
  Corpus c;
  c.Build("skiptok", 20, 2);
  std::vector<uint64_t> order;
  for (uint64_t i = 0; i < 20; i += 2) order.push_back(i); // shard 0 ...
  for (uint64_t i = 1; i < 20; i += 2) order.push_back(i); // ... then shard 1, made unusable
  stream_rank_plan ref = MakePlan(order, {5, 5, 5, 5}, 2, /*padded_at=*/{11, 17});
  ASSERT_EQ(truncate(c.shard_paths[1].c_str(), 3000), 0);
  al_stream_options o{};
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.max_skip_fraction = 1; /* half the samples are skipped: no budget */
  int rc;
  al_stream *s = OpenPlan(c, ref, &o, &rc);
  ASSERT_EQ(rc, AL_OK) << al_last_error();
  const al_stream_batch *b;
  size_t i = 0;
  while (al_stream_next(s, &b) == AL_OK) {
    const stream_plan_batch &pb = ref.batches[i];
    uint64_t planned = 0, lost_n = 0, lost_t = 0;
    for (size_t j = 0; j < pb.n; j++) {
      const stream_plan_sample &ps = ref.samples[pb.first + j];
      planned += ps.tokens;
      if (ps.sample % 2 == 1 && !ps.padded) { // shard 1
        lost_n++;
        lost_t += ps.tokens;
      }
    }
    EXPECT_EQ(b->planned_tokens, planned) << i;
    EXPECT_EQ(b->skipped_real_samples, lost_n) << i;
    EXPECT_EQ(b->skipped_real_tokens, lost_t) << i;
    EXPECT_EQ(b->step_tokens, pb.step_tokens) << "the planned total stays";
    if (i >= 2) {
      EXPECT_EQ(b->n_skipped, 5u);
      EXPECT_EQ(b->tokens, 0u);
    }
    al_stream_release(s, b);
    i++;
  }
  EXPECT_EQ(i, 4u);
  al_stream_close(s);
  stream_rank_plan_free(&ref);
}

} // namespace
