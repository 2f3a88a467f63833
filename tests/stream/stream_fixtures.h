// Stream test fixtures: a corpus of tar shards with an index assembled by hand (no
// al_index_build), deterministic payloads, a rank plan by hand (no manifest), and shards
// indexed by al_index_build for the tests that want the real index.
#ifndef AL_TESTS_STREAM_STREAM_FIXTURES_H
#define AL_TESTS_STREAM_STREAM_FIXTURES_H

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "loader/al_index.h"
#include "stream/engine_internal.h"
}

namespace altest {

// Deterministic, compressible-ish payload bytes.
inline Bytes Payload(uint64_t seed, size_t n) {
  Bytes b(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = (i % 3 == 0) ? (unsigned char)(x & 0x0f) : (unsigned char)(x >> 24);
  }
  return b;
}

enum class Store { kRaw, kLz4, kLz4NoSize };

struct Sample {
  std::string key;
  uint32_t shard;
  uint32_t w, h, f;
  Bytes payload; // decoded latent
  Store store;
};

// A corpus of tar shards on disk and a hand-assembled index over them.
struct Corpus {
  std::vector<std::string> shard_paths;
  std::vector<Sample> samples;
  al_index *idx = nullptr;
  stream_source src{}; // the engine's source over idx (set by Build; outlives the streams)

  ~Corpus() { al_index_free(idx); }

  // n samples round-robin over `shards` shards; sizes vary (not multiples of 64).
  void Build(const std::string &tag, size_t n, uint32_t shards, bool with_lz4 = true,
             bool lz4_ext_with_suffix = false) {
    ASSERT_EQ(al_index_new(&idx), AL_OK);
    std::vector<Members> members(shards);
    for (size_t i = 0; i < n; i++) {
      Sample s;
      char key[64];
      std::snprintf(key, sizeof key, "%s-%05zu", tag.c_str(), i);
      s.key = key;
      s.shard = (uint32_t)(i % shards);
      s.w = 64 + 16 * (uint32_t)(i % 5);
      s.h = 48 + 16 * (uint32_t)(i % 3);
      s.f = (i % 4 == 0) ? 17 : 1;
      s.payload = Payload(i + 1, 100 + (i * 7919) % 5000);
      s.store = !with_lz4 ? Store::kRaw
                          : (i % 3 == 1   ? Store::kLz4
                             : i % 3 == 2 ? Store::kLz4NoSize
                                          : Store::kRaw);
      std::string json = "{\"width\":" + std::to_string(s.w) +
                         ",\"height\":" + std::to_string(s.h) +
                         ",\"frames\":" + std::to_string(s.f) + "}";
      auto &ms = members[s.shard];
      ms.push_back({s.key + ".json", json});
      Bytes stored = s.store == Store::kRaw ? s.payload
                                            : Lz4Frame(s.payload, s.store == Store::kLz4);
      const char *ext = s.store == Store::kRaw ? ".latent" : ".latent.lz4";
      ms.push_back({s.key + ext, std::string(stored.begin(), stored.end())});
      samples.push_back(s);
    }
    std::vector<std::vector<uint64_t>> offsets(shards); // data offset of each member
    for (uint32_t k = 0; k < shards; k++) {
      char name[64];
      std::snprintf(name, sizeof name, "%s-shard-%03u.tar", tag.c_str(), k);
      shard_paths.push_back(TmpPath(name));
      ASSERT_NO_FATAL_FAILURE(WriteTar(shard_paths[k], members[k], &offsets[k]));
      uint32_t id;
      ASSERT_EQ(al_index_add_shard(idx, shard_paths[k].c_str(), FileSize(shard_paths[k]), 1, &id),
                AL_OK);
      ASSERT_EQ(id, k);
    }
    // Members by key: index samples in the order of `samples`.
    std::vector<size_t> next(shards, 0);
    for (size_t i = 0; i < n; i++) {
      const Members &ms = members[samples[i].shard];
      const std::vector<uint64_t> &off = offsets[samples[i].shard];
      size_t j = next[samples[i].shard];
      next[samples[i].shard] += 2;
      al_member_info mi[2];
      mi[0] = {"json", off[j], ms[j].second.size(), 0};
      bool lz = samples[i].store != Store::kRaw;
      mi[1] = {lz ? (lz4_ext_with_suffix ? "latent.lz4" : "latent") : "latent", off[j + 1],
               ms[j + 1].second.size(), lz ? 1 : 0};
      ASSERT_EQ(al_index_add_sample(idx, samples[i].key.c_str(), samples[i].shard, samples[i].w,
                                    samples[i].h, samples[i].f, 0.f, mi, 2),
                AL_OK)
          << al_last_error();
    }
    stream_index_source(idx, &src);
  }
};

// A rank plan by hand: consecutive batches of the given sizes over sample
// positions `order`; steps hold `micro_per_step` micro-batches.
inline stream_rank_plan MakePlan(const std::vector<uint64_t> &order,
                                 const std::vector<size_t> &batch_sizes,
                                 uint32_t micro_per_step = 2,
                                 const std::vector<size_t> &padded_at = {}) {
  stream_rank_plan p;
  std::memset(&p, 0, sizeof p);
  p.world = 1;
  p.epoch = 3;
  p.seed = 42;
  p.index_fingerprint = 0xabcdef;
  size_t total = 0;
  for (size_t n : batch_sizes) total += n;
  p.samples = static_cast<stream_plan_sample *>(std::calloc(total ? total : 1, sizeof *p.samples));
  p.batches = static_cast<stream_plan_batch *>(
      std::calloc(batch_sizes.size() + 1, sizeof *p.batches));
  size_t at = 0;
  for (size_t b = 0; b < batch_sizes.size(); b++) {
    stream_plan_batch &pb = p.batches[b];
    pb.step = (uint32_t)(b / micro_per_step);
    pb.micro = (uint32_t)(b % micro_per_step);
    size_t steps = (batch_sizes.size() + micro_per_step - 1) / micro_per_step;
    pb.n_micro = (pb.step + 1 < steps)
                     ? micro_per_step
                     : (uint32_t)(batch_sizes.size() - (steps - 1) * micro_per_step);
    pb.bucket = (uint32_t)(b % 3);
    pb.step_samples = 1000 + pb.step;
    pb.step_tokens = 50000 + pb.step;
    pb.first = at;
    pb.n = batch_sizes[b];
    for (size_t i = 0; i < batch_sizes[b]; i++, at++) {
      p.samples[at].sample = order[at % order.size()];
      p.samples[at].tokens = 10 + (order[at % order.size()] % 97);
    }
  }
  for (size_t pos : padded_at) p.samples[pos].padded = 1;
  p.n_batches = batch_sizes.size();
  p.n_samples = total;
  return p;
}

// Indexes `shards` with al_index_build (one thread, no progress) into *idx.
inline void IndexShards(const std::vector<std::string> &shards, al_index **idx) {
  std::vector<const char *> paths;
  for (auto &p : shards) paths.push_back(p.c_str());
  al_index_options io{};
  io.threads = 1;
  io.progress = -1;
  ASSERT_EQ(al_index_build(idx, paths.data(), paths.size(), &io, nullptr), AL_OK)
      << al_last_error();
}

// Writes members[k] to the tar TmpPath("TAG-shard-k.tar"), appends its path to `shards`, and
// indexes them all (IndexShards).
inline void WriteAndIndexShards(const std::string &tag, const std::vector<Members> &members,
                                std::vector<std::string> &shards, al_index **idx) {
  for (size_t k = 0; k < members.size(); k++) {
    shards.push_back(TmpPath(tag + "-shard-" + std::to_string(k) + ".tar"));
    ASSERT_NO_FATAL_FAILURE(WriteTar(shards.back(), members[k]));
  }
  IndexShards(shards, idx);
}

} // namespace altest

#endif // AL_TESTS_STREAM_STREAM_FIXTURES_H
