// The ABI of the sized public structs (docs/DESIGN.md, "The ABI of the public structs"): a
// caller built against an older header passes a smaller struct_size, and the library writes
// nothing past it and fills the fields it knows as for a full struct; it reads nothing past an
// older options struct; a filled struct of size 0, below its first version or above the
// library's is refused (AL_EINVAL naming the struct and both sizes).
//
// Each "older" layout below is the current struct minus its last fields (what the header said
// before those fields were added at the end). It sits at the start of a buffer poisoned with a
// sentinel byte; after the call every byte past the layout must still hold the sentinel.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "loader/al_check.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"
#include "manifest/al_plan_index.h"
#include "manifest/al_report.h"
#include "planner/al_buckets.h"
#include "planner/al_plan.h"
#include "stream/al_stream.h"
}

namespace {

constexpr unsigned char kPoison = 0xA5;

// An older layout T at the start of a poisoned buffer of the library's struct plus slack.
template <typename T, typename Full>
struct Poisoned {
  union {
    T old;
    unsigned char bytes[sizeof(Full) + 64];
  };
  Poisoned() {
    std::memset(bytes, kPoison, sizeof bytes);
    old.struct_size = sizeof(T);
  }
  Full *full() { return reinterpret_cast<Full *>(bytes); }
  // Bytes past the older layout that no longer hold the sentinel.
  size_t touched_past_end() const {
    size_t n = 0;
    for (size_t i = sizeof(T); i < sizeof bytes; i++) n += bytes[i] != kPoison;
    return n;
  }
};

// ---- older layouts: the current structs minus their last fields ----------------------------

struct shard_info_v1 { // al_shard_info before content_fp, remote, etag
  size_t struct_size;
  const char *path;
  uint64_t size;
  int64_t mtime_ns;
  uint64_t sample_count;
  uint64_t rejected_count;
  int seekable;
  const char *compression;
};
static_assert(sizeof(shard_info_v1) == AL_SHARD_INFO_V1, "al_shard_info's first version");

struct index_stats_v1 { // al_index_stats before the remote counters
  size_t struct_size;
  uint64_t shards, samples, rejected, bytes;
  double seconds;
  uint64_t bytes_read, warnings;
};
static_assert(sizeof(index_stats_v1) == AL_INDEX_STATS_V1, "al_index_stats's first version");

struct index_options_v1 { // al_index_options before the remote settings
  size_t struct_size;
  int threads, strict, progress;
  size_t block_size;
  const char *dali_idx_dir;
  const char *field_width, *field_height, *field_frames, *field_fps, *field_duration;
  uint64_t max_member_bytes;
  uint32_t vae_stride_t, vae_stride_s;
};
static_assert(sizeof(index_options_v1) == AL_INDEX_OPTIONS_V1, "al_index_options's first version");

// al_manifest_info before sequence parallelism: the current struct up to `sync`.
struct manifest_info_v1 {
  size_t struct_size;
  unsigned char rest[offsetof(al_manifest_info, sync) - sizeof(size_t)];
};
static_assert(sizeof(manifest_info_v1) == AL_MANIFEST_INFO_V1, "al_manifest_info's first version");

struct bucket_info_v1 { // al_bucket_info before sp_degree
  size_t struct_size;
  uint32_t id;
  uint32_t width, height, frames;
  uint64_t tokens;
  uint32_t batch_size;
  double batch_cost_ms;
  uint64_t samples;
  const char *limited_by;
};
static_assert(sizeof(bucket_info_v1) == AL_BUCKET_INFO_V1, "al_bucket_info's first version");

struct micro_ref_v1 { // al_micro_ref before sp_degree, sp_rank
  size_t struct_size;
  uint32_t step, rank, micro, n_micro, bucket;
  size_t n_samples;
  const uint64_t *samples;
  const uint64_t *tokens;
  size_t n_padded;
  const uint32_t *padded;
  double cost_ms;
  uint64_t step_samples, step_tokens;
};
static_assert(sizeof(micro_ref_v1) == AL_MICRO_REF_V1, "al_micro_ref's first version");

struct stream_state_v1 { // al_stream_state before manifest_fingerprint
  size_t struct_size;
  uint32_t version, rank, world, epoch;
  uint64_t seed, index_fingerprint, position;
  uint32_t stride, next_step, next_micro, reserved;
  uint64_t skipped, delivered;
};
static_assert(sizeof(stream_state_v1) == AL_STREAM_STATE_V1, "al_stream_state's first version");

struct stream_stats_v1 { // al_stream_stats before `lacking` and the remote counters
  size_t struct_size;
  uint64_t batches, samples, bytes, skipped, total_batches;
  double stall_seconds, read_seconds;
  int buffers, buffers_allocated, max_in_use;
  uint64_t host_bytes, device_bytes;
  int pinned, device_copy, threads;
};
static_assert(sizeof(stream_stats_v1) == AL_STREAM_STATS_V1, "al_stream_stats's first version");

struct stream_options_v1 { // al_stream_options before members
  size_t struct_size;
  int threads, prefetch;
  const char *ext;
  int on_error, world;
  uint64_t first;
  uint32_t stride;
  const al_stream_state *resume;
  int pinned, device_copy, cuda_device;
  size_t align, read_block;
};
static_assert(sizeof(stream_options_v1) == AL_STREAM_OPTIONS_V1,
              "al_stream_options's first version");

// ---- a small synthetic corpus, indexed, planned and loaded -----------------------------------

struct Corpus {
  std::vector<std::string> paths;
  al_index *idx = nullptr;
  al_manifest *m = nullptr;
  ~Corpus() {
    al_manifest_free(m);
    al_index_free(idx);
  }
};

void ShardPaths(const std::string &dir, std::vector<std::string> *out) {
  char **paths = nullptr;
  size_t n = 0;
  ASSERT_EQ(al_shard_expand(dir.c_str(), &paths, &n), AL_OK) << al_last_error();
  for (size_t i = 0; i < n; i++) {
    out->push_back(paths[i]);
    free(paths[i]);
  }
  free(paths);
}

void Build(Corpus *c, const std::string &tag) {
  std::string dir = altest::TmpPath(tag);
  al_synth_options so{};
  so.out_dir = dir.c_str();
  so.samples = 40;
  so.shards = 2;
  so.seed = 3;
  so.threads = 1;
  ASSERT_EQ(al_synth_write(&so, nullptr), AL_OK) << al_last_error();
  ASSERT_NO_FATAL_FAILURE(ShardPaths(dir, &c->paths));
  std::vector<const char *> p;
  for (auto &s : c->paths) p.push_back(s.c_str());
  al_index_options io = AL_INDEX_OPTIONS_INIT;
  io.threads = 1;
  io.progress = -1;
  ASSERT_EQ(al_index_build(&c->idx, p.data(), p.size(), &io, nullptr), AL_OK) << al_last_error();
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK) << al_last_error();
  al_plan_options po = AL_PLAN_OPTIONS_INIT;
  po.world = 1;
  po.seed = 7;
  al_plan *plan = nullptr;
  ASSERT_EQ(al_plan_build_index(&plan, c->idx, &cost, &po), AL_OK) << al_last_error();
  std::string mp = altest::TmpPath(tag + ".alm");
  ASSERT_EQ(al_plan_save(plan, mp.c_str(), nullptr, nullptr), AL_OK) << al_last_error();
  al_plan_free(plan);
  ASSERT_EQ(al_manifest_load(&c->m, mp.c_str()), AL_OK) << al_last_error();
}

// ---- filled structs: an older layout gets its fields, nothing past it -----------------------

TEST(Abi, OlderShardInfoIsFilledWithinItsSize) {
  Corpus c;
  ASSERT_NO_FATAL_FAILURE(Build(&c, "abi_shard"));
  al_shard_info full = AL_SHARD_INFO_INIT;
  ASSERT_EQ(al_index_shard(c.idx, 1, &full), AL_OK) << al_last_error();
  Poisoned<shard_info_v1, al_shard_info> b;
  ASSERT_EQ(al_index_shard(c.idx, 1, b.full()), AL_OK) << al_last_error();
  EXPECT_EQ(b.touched_past_end(), 0u);
  EXPECT_EQ(b.old.struct_size, sizeof(shard_info_v1));
  EXPECT_STREQ(b.old.path, full.path);
  EXPECT_EQ(b.old.size, full.size);
  EXPECT_EQ(b.old.mtime_ns, full.mtime_ns);
  EXPECT_EQ(b.old.sample_count, full.sample_count);
  EXPECT_EQ(b.old.rejected_count, full.rejected_count);
  EXPECT_EQ(b.old.seekable, full.seekable);
  EXPECT_STREQ(b.old.compression, full.compression);
  EXPECT_NE(full.content_fp, 0u); // the full struct does get the fields the old one lacks
}

TEST(Abi, OlderIndexStatsAndOptions) {
  std::string dir = altest::TmpPath("abi_stats");
  al_synth_options so{};
  so.out_dir = dir.c_str();
  so.samples = 12;
  so.shards = 2;
  so.threads = 1;
  ASSERT_EQ(al_synth_write(&so, nullptr), AL_OK) << al_last_error();
  std::vector<std::string> paths;
  ASSERT_NO_FATAL_FAILURE(ShardPaths(dir, &paths));
  std::vector<const char *> p;
  for (auto &s : paths) p.push_back(s.c_str());

  al_index *a = nullptr, *b = nullptr;
  al_index_stats full = AL_INDEX_STATS_INIT;
  ASSERT_EQ(al_index_build(&a, p.data(), p.size(), nullptr, &full), AL_OK) << al_last_error();
  // Older options: the poisoned bytes past them (the remote settings) must not be read: read
  // as a pointer, 0xA5A5... would not be an endpoint URL.
  Poisoned<index_options_v1, al_index_options> o;
  std::memset(&o.old, 0, sizeof o.old);
  o.old.struct_size = sizeof o.old;
  o.old.threads = 1;
  o.old.progress = -1;
  Poisoned<index_stats_v1, al_index_stats> st;
  ASSERT_EQ(al_index_build(&b, p.data(), p.size(), o.full(), st.full()), AL_OK) << al_last_error();
  EXPECT_EQ(st.touched_past_end(), 0u);
  EXPECT_EQ(st.old.shards, full.shards);
  EXPECT_EQ(st.old.samples, full.samples);
  EXPECT_EQ(st.old.rejected, full.rejected);
  EXPECT_EQ(st.old.bytes, full.bytes);
  EXPECT_EQ(st.old.bytes_read, full.bytes_read);
  EXPECT_EQ(st.old.warnings, full.warnings);
  EXPECT_EQ(al_index_fingerprint(a), al_index_fingerprint(b));
  al_index_free(a);
  al_index_free(b);
}

TEST(Abi, OlderManifestStructsAreFilledWithinTheirSize) {
  Corpus c;
  ASSERT_NO_FATAL_FAILURE(Build(&c, "abi_manifest"));
  al_manifest_info full = AL_MANIFEST_INFO_INIT;
  ASSERT_EQ(al_manifest_get_info(c.m, &full), AL_OK) << al_last_error();
  Poisoned<manifest_info_v1, al_manifest_info> mi;
  ASSERT_EQ(al_manifest_get_info(c.m, mi.full()), AL_OK) << al_last_error();
  EXPECT_EQ(mi.touched_past_end(), 0u);
  // Every field the older layout holds, byte for byte (the library copies its struct).
  EXPECT_EQ(std::memcmp(mi.old.rest,
                        reinterpret_cast<const unsigned char *>(&full) + sizeof(size_t),
                        sizeof mi.old.rest),
            0);
  EXPECT_EQ(mi.old.struct_size, sizeof(manifest_info_v1));

  ASSERT_GT(full.buckets, 0u);
  al_bucket_info bf = AL_BUCKET_INFO_INIT;
  ASSERT_EQ(al_manifest_bucket(c.m, 0, &bf), AL_OK) << al_last_error();
  Poisoned<bucket_info_v1, al_bucket_info> bo;
  ASSERT_EQ(al_manifest_bucket(c.m, 0, bo.full()), AL_OK) << al_last_error();
  EXPECT_EQ(bo.touched_past_end(), 0u);
  EXPECT_EQ(bo.old.id, bf.id);
  EXPECT_EQ(bo.old.width, bf.width);
  EXPECT_EQ(bo.old.height, bf.height);
  EXPECT_EQ(bo.old.frames, bf.frames);
  EXPECT_EQ(bo.old.tokens, bf.tokens);
  EXPECT_EQ(bo.old.batch_size, bf.batch_size);
  EXPECT_EQ(bo.old.batch_cost_ms, bf.batch_cost_ms);
  EXPECT_EQ(bo.old.samples, bf.samples);
  EXPECT_STREQ(bo.old.limited_by, bf.limited_by);

  uint32_t step = full.first_step;
  al_micro_ref rf = AL_MICRO_REF_INIT;
  ASSERT_EQ(al_manifest_micro(c.m, step, 0, 0, &rf), AL_OK) << al_last_error();
  Poisoned<micro_ref_v1, al_micro_ref> ro;
  ASSERT_EQ(al_manifest_micro(c.m, step, 0, 0, ro.full()), AL_OK) << al_last_error();
  EXPECT_EQ(ro.touched_past_end(), 0u);
  EXPECT_EQ(ro.old.step, rf.step);
  EXPECT_EQ(ro.old.rank, rf.rank);
  EXPECT_EQ(ro.old.micro, rf.micro);
  EXPECT_EQ(ro.old.n_micro, rf.n_micro);
  EXPECT_EQ(ro.old.bucket, rf.bucket);
  EXPECT_EQ(ro.old.n_samples, rf.n_samples);
  EXPECT_EQ(ro.old.samples, rf.samples);
  EXPECT_EQ(ro.old.tokens, rf.tokens);
  EXPECT_EQ(ro.old.n_padded, rf.n_padded);
  EXPECT_EQ(ro.old.padded, rf.padded);
  EXPECT_EQ(ro.old.cost_ms, rf.cost_ms);
  EXPECT_EQ(ro.old.step_samples, rf.step_samples);
  EXPECT_EQ(ro.old.step_tokens, rf.step_tokens);
}

TEST(Abi, OlderStreamStructsAreReadAndFilledWithinTheirSize) {
  Corpus c;
  ASSERT_NO_FATAL_FAILURE(Build(&c, "abi_stream"));
  // Older options: what lies past them (members, caps, cache, storage) must read as unset.
  Poisoned<stream_options_v1, al_stream_options> o;
  std::memset(&o.old, 0, sizeof o.old);
  o.old.struct_size = sizeof o.old;
  o.old.threads = 1;
  o.old.prefetch = 2;
  o.old.pinned = -1;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, c.idx, c.m, 0, o.full()), AL_OK) << al_last_error();
  const al_stream_batch *batch = nullptr;
  ASSERT_EQ(al_stream_next(s, &batch), AL_OK) << al_last_error();
  EXPECT_EQ(batch->struct_size, sizeof(al_stream_batch)); // the library's, set by it
  ASSERT_EQ(al_stream_release(s, batch), AL_OK);

  al_stream_state sf = AL_STREAM_STATE_INIT;
  ASSERT_EQ(al_stream_get_state(s, &sf), AL_OK) << al_last_error();
  Poisoned<stream_state_v1, al_stream_state> so;
  ASSERT_EQ(al_stream_get_state(s, so.full()), AL_OK) << al_last_error();
  EXPECT_EQ(so.touched_past_end(), 0u);
  EXPECT_EQ(so.old.version, sf.version);
  EXPECT_EQ(so.old.rank, sf.rank);
  EXPECT_EQ(so.old.world, sf.world);
  EXPECT_EQ(so.old.epoch, sf.epoch);
  EXPECT_EQ(so.old.seed, sf.seed);
  EXPECT_EQ(so.old.index_fingerprint, sf.index_fingerprint);
  EXPECT_EQ(so.old.position, sf.position);
  EXPECT_EQ(so.old.stride, sf.stride);
  EXPECT_EQ(so.old.next_step, sf.next_step);
  EXPECT_EQ(so.old.next_micro, sf.next_micro);
  EXPECT_EQ(so.old.skipped, sf.skipped);
  EXPECT_EQ(so.old.delivered, sf.delivered);
  EXPECT_NE(sf.manifest_fingerprint, 0u);
  Poisoned<stream_state_v1, al_stream_state> sa;
  ASSERT_EQ(al_stream_state_at(s, 0, sa.full()), AL_OK) << al_last_error();
  EXPECT_EQ(sa.touched_past_end(), 0u);
  EXPECT_EQ(sa.old.position, 0u);

  al_stream_stats tf = AL_STREAM_STATS_INIT;
  ASSERT_EQ(al_stream_get_stats(s, &tf), AL_OK) << al_last_error();
  Poisoned<stream_stats_v1, al_stream_stats> to;
  ASSERT_EQ(al_stream_get_stats(s, to.full()), AL_OK) << al_last_error();
  EXPECT_EQ(to.touched_past_end(), 0u);
  EXPECT_EQ(to.old.batches, tf.batches);
  EXPECT_EQ(to.old.samples, tf.samples);
  EXPECT_EQ(to.old.bytes, tf.bytes);
  EXPECT_EQ(to.old.skipped, tf.skipped);
  EXPECT_EQ(to.old.total_batches, tf.total_batches);
  EXPECT_EQ(to.old.buffers, tf.buffers);
  EXPECT_EQ(to.old.threads, tf.threads);
  EXPECT_EQ(to.old.pinned, tf.pinned);
  al_stream_close(s);
}

// ---- refusals --------------------------------------------------------------------------------

// A filled struct of size `size` (at the start of a poisoned buffer) is refused and untouched.
template <typename Full, typename Call>
void ExpectRefused(size_t size, const char *name, Call call) {
  SCOPED_TRACE(std::string(name) + " of size " + std::to_string(size));
  union {
    Full s;
    unsigned char bytes[sizeof(Full) + 64];
  } b;
  std::memset(b.bytes, kPoison, sizeof b.bytes);
  b.s.struct_size = size;
  EXPECT_EQ(call(&b.s), AL_EINVAL);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, std::string(name) + ".struct_size is " + std::to_string(size)));
  EXPECT_TRUE(altest::Contains(msg, std::to_string(sizeof(Full))));
  size_t touched = 0;
  for (size_t i = sizeof(size_t); i < sizeof b.bytes; i++) touched += b.bytes[i] != kPoison;
  EXPECT_EQ(touched, 0u);
  EXPECT_EQ(b.s.struct_size, size);
}

TEST(Abi, FilledStructsOfSizeZeroTooSmallOrTooLargeAreRefused) {
  Corpus c;
  ASSERT_NO_FATAL_FAILURE(Build(&c, "abi_refuse"));
  for (size_t size : {size_t{0}, sizeof(size_t), AL_SHARD_INFO_V1 - 1, sizeof(al_shard_info) + 8})
    ExpectRefused<al_shard_info>(size, "al_shard_info",
                                 [&](al_shard_info *x) { return al_index_shard(c.idx, 0, x); });
  for (size_t size : {size_t{0}, sizeof(al_sample_info) + 1})
    ExpectRefused<al_sample_info>(size, "al_sample_info",
                                  [&](al_sample_info *x) { return al_index_sample(c.idx, 0, x); });
  for (size_t size : {size_t{0}, AL_MANIFEST_INFO_V1 - 8, sizeof(al_manifest_info) + 8})
    ExpectRefused<al_manifest_info>(size, "al_manifest_info", [&](al_manifest_info *x) {
      return al_manifest_get_info(c.m, x);
    });
  for (size_t size : {size_t{0}, sizeof(al_micro_ref) + 8})
    ExpectRefused<al_micro_ref>(size, "al_micro_ref", [&](al_micro_ref *x) {
      return al_manifest_micro(c.m, 0, 0, 0, x);
    });
  for (size_t size : {size_t{0}, sizeof(al_step_info) + 8})
    ExpectRefused<al_step_info>(size, "al_step_info",
                                [&](al_step_info *x) { return al_manifest_step(c.m, 0, x); });
  al_checker *chk = nullptr;
  ASSERT_EQ(al_checker_open(&chk, c.idx, nullptr), AL_OK) << al_last_error();
  for (size_t size : {size_t{0}, sizeof(al_shard_check) + 8})
    ExpectRefused<al_shard_check>(size, "al_shard_check", [&](al_shard_check *x) {
      return al_checker_shard(chk, 0, nullptr, nullptr, x);
    });
  al_shard_check sc = AL_SHARD_CHECK_INIT;
  EXPECT_EQ(al_checker_shard(chk, 0, nullptr, nullptr, &sc), AL_OK) << al_last_error();
  EXPECT_EQ(sc.open_rc, AL_OK);
  al_shard_check_clear(&sc);
  EXPECT_EQ(sc.struct_size, sizeof sc); // kept: the struct can be passed again
  al_checker_close(chk);
  al_synth_stats ss{}; // no size: refused before anything is written
  al_synth_options syn = AL_SYNTH_OPTIONS_INIT;
  std::string never = altest::TmpPath("abi_never_written");
  syn.out_dir = never.c_str();
  EXPECT_EQ(al_synth_write(&syn, &ss), AL_EINVAL);
  EXPECT_TRUE(altest::Contains(al_last_error(), "al_synth_stats.struct_size is 0"));
  al_stream_options so = AL_STREAM_OPTIONS_INIT;
  so.threads = 1;
  so.pinned = -1;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, c.idx, c.m, 0, &so), AL_OK) << al_last_error();
  for (size_t size : {size_t{0}, sizeof(al_stream_stats) + 8})
    ExpectRefused<al_stream_stats>(size, "al_stream_stats",
                                   [&](al_stream_stats *x) { return al_stream_get_stats(s, x); });
  for (size_t size : {size_t{0}, AL_STREAM_STATE_V1 - 8, sizeof(al_stream_state) + 8})
    ExpectRefused<al_stream_state>(size, "al_stream_state",
                                   [&](al_stream_state *x) { return al_stream_get_state(s, x); });
  al_stream_close(s);
}

TEST(Abi, OptionsOfSizeZeroAreTheCurrentStructAndTooLargeIsRefused) {
  Corpus c;
  ASSERT_NO_FATAL_FAILURE(Build(&c, "abi_options"));
  al_stream_options so{}; // struct_size 0: this header's struct
  so.threads = 1;
  so.pinned = -1;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, c.idx, c.m, 0, &so), AL_OK) << al_last_error();
  al_stream_close(s);
  so.struct_size = sizeof so + 8;
  EXPECT_EQ(al_stream_open(&s, c.idx, c.m, 0, &so), AL_EINVAL);
  EXPECT_TRUE(
      altest::Contains(al_last_error(), "al_stream_open: al_stream_options.struct_size is " +
                                            std::to_string(sizeof so + 8)));
  so.struct_size = AL_STREAM_OPTIONS_V1 - 4;
  EXPECT_EQ(al_stream_open(&s, c.idx, c.m, 0, &so), AL_EINVAL);
  EXPECT_TRUE(altest::Contains(al_last_error(), "below the first version's"));

  al_plan_options po{};
  po.world = 1;
  po.struct_size = sizeof po + 16;
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&cost), AL_OK);
  al_plan *plan = nullptr;
  EXPECT_EQ(al_plan_build_index(&plan, c.idx, &cost, &po), AL_EINVAL);
  EXPECT_TRUE(altest::Contains(al_last_error(), "al_plan_options.struct_size is"));
  EXPECT_EQ(plan, nullptr);

  // The cost fit: its options too large, its trace statistics without a size.
  const char *trace = "{\"B\": 1, \"S\": 1024, \"ms\": 3}\n";
  for (size_t size : {size_t{0}, sizeof(al_trace_stats) + 8})
    ExpectRefused<al_trace_stats>(size, "al_trace_stats", [&](al_trace_stats *x) {
      al_bench b = AL_BENCH_INIT;
      return al_bench_parse_trace(&b, trace, std::strlen(trace), "t.jsonl", x);
    });
  al_bench bench = AL_BENCH_INIT;
  const char *def = al_cost_default_json();
  ASSERT_EQ(al_bench_parse(&bench, def, std::strlen(def), "default"), AL_OK) << al_last_error();
  al_cost_fit_options fo{};
  fo.struct_size = sizeof fo + 8;
  al_cost_model fitted = AL_COST_MODEL_INIT;
  EXPECT_EQ(al_cost_fit_bench(&bench, &fo, &fitted), AL_EINVAL);
  EXPECT_TRUE(
      altest::Contains(al_last_error(), "al_cost_fit_bench: al_cost_fit_options.struct_size"));
  al_bench_free(&bench);
}

// ---- the structs sized last: filled within their size, read by it, refused otherwise ---------

// The sizes a struct of first version V1 and this library's size `full` must refuse when filled.
std::vector<size_t> RefusedSizes(size_t v1, size_t full) {
  return {size_t{0}, sizeof(size_t), v1 - 1, full + 8};
}

TEST(Abi, BucketShapeSynthMetaAndStorageOriginAreFilledWithinTheirSize) {
  al_bucket_table *t = nullptr;
  ASSERT_EQ(al_bucket_table_default(&t), AL_OK) << al_last_error();
  al_bucket_shape full = AL_BUCKET_SHAPE_INIT;
  ASSERT_EQ(al_bucket_table_get(t, 3, &full), AL_OK) << al_last_error();
  Poisoned<al_bucket_shape, al_bucket_shape> bs;
  ASSERT_EQ(al_bucket_table_get(t, 3, bs.full()), AL_OK) << al_last_error();
  EXPECT_EQ(bs.touched_past_end(), 0u);
  EXPECT_EQ(bs.old.struct_size, sizeof(al_bucket_shape));
  EXPECT_EQ(bs.old.width, full.width);
  EXPECT_EQ(bs.old.height, full.height);
  EXPECT_EQ(bs.old.frames, full.frames);
  EXPECT_STREQ(bs.old.aspect, full.aspect);
  EXPECT_GT(full.width, 0u);
  for (size_t size : RefusedSizes(AL_BUCKET_SHAPE_V1, sizeof(al_bucket_shape)))
    ExpectRefused<al_bucket_shape>(size, "al_bucket_shape", [&](al_bucket_shape *x) {
      return al_bucket_table_get(t, 3, x);
    });
  al_bucket_table_free(t);

  al_synth_sample_meta sm = AL_SYNTH_SAMPLE_META_INIT;
  ASSERT_EQ(al_synth_sample(3, 5, &sm), AL_OK) << al_last_error();
  Poisoned<al_synth_sample_meta, al_synth_sample_meta> mo;
  ASSERT_EQ(al_synth_sample(3, 5, mo.full()), AL_OK) << al_last_error();
  EXPECT_EQ(mo.touched_past_end(), 0u);
  EXPECT_EQ(std::memcmp(&mo.old, &sm, sizeof sm), 0);
  for (size_t size : RefusedSizes(AL_SYNTH_SAMPLE_META_V1, sizeof(al_synth_sample_meta)))
    ExpectRefused<al_synth_sample_meta>(size, "al_synth_sample_meta", [](al_synth_sample_meta *x) {
      return al_synth_sample(3, 5, x);
    });

  // al_storage_resolve: the origin filled within its size; a bad one refused before `out` is
  // written either.
  al_storage_options given{};
  given.s3_endpoint = "http://127.0.0.1:9";
  al_storage_options used{};
  Poisoned<al_storage_origin, al_storage_origin> oo;
  ASSERT_EQ(al_storage_resolve(&given, nullptr, &used, oo.full()), AL_OK) << al_last_error();
  EXPECT_EQ(oo.touched_past_end(), 0u);
  EXPECT_STREQ(oo.old.s3_endpoint, "option");
  EXPECT_STREQ(used.s3_endpoint, "http://127.0.0.1:9");
  for (size_t size : RefusedSizes(AL_STORAGE_ORIGIN_V1, sizeof(al_storage_origin)))
    ExpectRefused<al_storage_origin>(size, "al_storage_origin", [&](al_storage_origin *x) {
      al_storage_options poisoned;
      std::memset(&poisoned, kPoison, sizeof poisoned);
      al_storage_options before = poisoned;
      int rc = al_storage_resolve(&given, nullptr, &poisoned, x);
      EXPECT_EQ(std::memcmp(&poisoned, &before, sizeof poisoned), 0); // out untouched too
      return rc;
    });
}

TEST(Abi, CostModelIsFilledWithinItsSizeAndReadByIt) {
  Corpus c;
  ASSERT_NO_FATAL_FAILURE(Build(&c, "abi_cost"));
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&m), AL_OK) << al_last_error();
  std::string path = altest::TmpPath("abi_cost.alcost");
  ASSERT_EQ(al_cost_save(&m, path.c_str()), AL_OK) << al_last_error();
  // Every function that fills one: nothing past its size; a size of 0, below the first version
  // or above the library's refused, untouched.
  auto fillers = {
      std::make_pair("al_cost_default", std::function<int(al_cost_model *)>(
                                            [](al_cost_model *x) { return al_cost_default(x); })),
      std::make_pair("al_cost_load", std::function<int(al_cost_model *)>([&](al_cost_model *x) {
                       return al_cost_load(x, path.c_str());
                     })),
      std::make_pair("al_manifest_cost", std::function<int(al_cost_model *)>([&](al_cost_model *x) {
                       return al_manifest_cost(c.m, x);
                     })),
  };
  for (auto &f : fillers) {
    SCOPED_TRACE(f.first);
    Poisoned<al_cost_model, al_cost_model> b;
    ASSERT_EQ(f.second(b.full()), AL_OK) << al_last_error();
    EXPECT_EQ(b.touched_past_end(), 0u);
    EXPECT_EQ(b.old.struct_size, sizeof(al_cost_model));
    EXPECT_EQ(b.old.fit.family, m.fit.family);
    EXPECT_EQ(b.old.fit.params[1], m.fit.params[1]);
    for (size_t size : RefusedSizes(AL_COST_MODEL_V1, sizeof(al_cost_model)))
      ExpectRefused<al_cost_model>(size, "al_cost_model", f.second);
  }
  // Read: 0 is this header's struct; a size below the first version or above the library's
  // gives NaN (the predictions) or AL_EINVAL, with the message naming the struct.
  const double want = al_cost_predict(&m, 4, 4096);
  ASSERT_GT(want, 0);
  al_cost_model z = m;
  z.struct_size = 0;
  EXPECT_EQ(al_cost_predict(&z, 4, 4096), want);
  EXPECT_EQ(al_cost_predict_sp(&z, 4, 4096, 2), al_cost_predict_sp(&m, 4, 4096, 2));
  for (size_t size : {AL_COST_MODEL_V1 - 8, sizeof(al_cost_model) + 8}) {
    SCOPED_TRACE(size);
    z.struct_size = size;
    std::string named = "al_cost_model.struct_size is " + std::to_string(size);
    EXPECT_TRUE(std::isnan(al_cost_predict(&z, 4, 4096)));
    EXPECT_TRUE(altest::Contains(al_last_error(), "al_cost_predict: " + named));
    EXPECT_TRUE(std::isnan(al_cost_per_sample(&z, 4096)));
    EXPECT_TRUE(std::isnan(al_cost_predict_sp(&z, 4, 4096, 2)));
    EXPECT_TRUE(std::isnan(al_cost_per_sample_sp(&z, 4096, 2)));
    uint64_t tokens = 7;
    EXPECT_EQ(al_cost_mem_tokens(&z, 80e9, 0.9, &tokens), AL_EINVAL);
    EXPECT_EQ(tokens, 7u);
    EXPECT_EQ(al_cost_save(&z, altest::TmpPath("abi_never.alcost").c_str()), AL_EINVAL);
    EXPECT_TRUE(altest::Contains(al_last_error(), "al_cost_save: " + named));
    FILE *f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(al_cost_print_json(&z, f), AL_EINVAL);
    EXPECT_EQ(std::ftell(f), 0L); // nothing written
    std::fclose(f);
    al_plan_options po = AL_PLAN_OPTIONS_INIT;
    po.world = 1;
    al_plan *plan = nullptr;
    EXPECT_EQ(al_plan_build_index(&plan, c.idx, &z, &po), AL_EINVAL);
    EXPECT_TRUE(altest::Contains(al_last_error(), "al_plan_build_index: " + named));
    EXPECT_EQ(plan, nullptr);
  }
}

TEST(Abi, BenchIsFilledWithinItsSizeAndReadByIt) {
  const char *def = al_cost_default_json();
  const size_t len = std::strlen(def);
  Poisoned<al_bench, al_bench> b;
  ASSERT_EQ(al_bench_parse(b.full(), def, len, "default"), AL_OK) << al_last_error();
  EXPECT_EQ(b.touched_past_end(), 0u);
  EXPECT_EQ(b.old.struct_size, sizeof(al_bench));
  EXPECT_GE(b.old.n, (size_t)AL_BENCH_MIN_ROWS);
  const char *trace = "{\"B\": 1, \"S\": 1024, \"ms\": 3}\n";
  for (size_t size : RefusedSizes(AL_BENCH_V1, sizeof(al_bench))) {
    ExpectRefused<al_bench>(size, "al_bench",
                            [&](al_bench *x) { return al_bench_parse(x, def, len, "default"); });
    ExpectRefused<al_bench>(size, "al_bench", [&](al_bench *x) {
      return al_bench_parse_trace(x, trace, std::strlen(trace), "t.jsonl", nullptr);
    });
    ExpectRefused<al_bench>(size, "al_bench", [&](al_bench *x) {
      return al_bench_load(x, altest::TmpPath("abi_no_such.csv").c_str());
    });
  }
  // Read: a source or a benchmark to fit of a size this library cannot read is refused, the
  // destination left as it was; al_bench_free of one frees nothing and writes nothing.
  al_bench src = b.old, dst = AL_BENCH_INIT;
  ASSERT_EQ(al_bench_parse(&dst, def, len, "default"), AL_OK) << al_last_error();
  const al_bench before = dst;
  src.struct_size = sizeof(al_bench) + 8;
  EXPECT_EQ(al_bench_append(&dst, &src), AL_EINVAL);
  EXPECT_TRUE(altest::Contains(al_last_error(), "al_bench_append: al_bench.struct_size is"));
  EXPECT_EQ(std::memcmp(&dst, &before, sizeof dst), 0);
  al_cost_model fitted = AL_COST_MODEL_INIT;
  EXPECT_EQ(al_cost_fit_bench(&src, nullptr, &fitted), AL_EINVAL);
  EXPECT_TRUE(altest::Contains(al_last_error(), "al_cost_fit_bench: al_bench.struct_size is"));
  al_bench_free(&src);
  EXPECT_EQ(src.B, b.old.B); // not freed: its layout is unknown
  src.struct_size = 0;       // 0: this header's struct, appended and fitted as usual
  ASSERT_EQ(al_bench_append(&dst, &src), AL_OK) << al_last_error();
  EXPECT_EQ(dst.n, 2 * b.old.n);
  EXPECT_EQ(al_cost_fit_bench(&dst, nullptr, &fitted), AL_OK) << al_last_error();
  al_bench_free(&dst);
  EXPECT_EQ(dst.B, nullptr);
  EXPECT_EQ(dst.struct_size, sizeof(al_bench)); // kept: the struct can be filled again
  al_bench_free(b.full());
  EXPECT_EQ(b.old.B, nullptr);
  EXPECT_EQ(b.touched_past_end(), 0u);
}

} // namespace
