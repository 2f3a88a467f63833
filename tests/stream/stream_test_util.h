// Test helpers for the stream: tiny tar writer, LZ4 frames, a hand-assembled
// corpus (tar shards + al_index by hand + a rank plan by hand).
#ifndef AL_TESTS_STREAM_TEST_UTIL_H
#define AL_TESTS_STREAM_TEST_UTIL_H

#include <gtest/gtest.h>
#include <lz4frame.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern "C" {
#include "loader/al_index.h"
#include "stream/engine_internal.h"
}

namespace stest {

using Bytes = std::vector<unsigned char>;

inline std::string TmpDir() {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp");
}

struct TarMember {
  std::string name;
  Bytes data;
  uint64_t offset = 0;  // data offset, set by WriteTar
};

// Writes a ustar archive; fills each member's data offset. Returns file size.
inline uint64_t WriteTar(const std::string &path, std::vector<TarMember> &members) {
  Bytes out;
  for (auto &m : members) {
    unsigned char h[512];
    std::memset(h, 0, sizeof h);
    std::snprintf(reinterpret_cast<char *>(h), 100, "%s", m.name.c_str());
    std::snprintf(reinterpret_cast<char *>(h + 100), 8, "%07o", 0644);
    std::snprintf(reinterpret_cast<char *>(h + 108), 8, "%07o", 0);
    std::snprintf(reinterpret_cast<char *>(h + 116), 8, "%07o", 0);
    std::snprintf(reinterpret_cast<char *>(h + 124), 12, "%011llo", (unsigned long long)m.data.size());
    std::snprintf(reinterpret_cast<char *>(h + 136), 12, "%011o", 1700000000);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    h[263] = '0';
    h[264] = '0';
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(reinterpret_cast<char *>(h + 148), 8, "%06o", sum);
    h[155] = ' ';
    out.insert(out.end(), h, h + 512);
    m.offset = out.size();
    out.insert(out.end(), m.data.begin(), m.data.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
  }
  out.resize(out.size() + 1024, 0);
  FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (!f) return 0;
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
  return out.size();
}

inline Bytes Lz4Frame(const Bytes &in, bool content_size, size_t block = 0) {
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.contentSize = content_size ? in.size() : 0;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  if (block) prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  Bytes out(LZ4F_compressFrameBound(in.size(), &prefs));
  size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  EXPECT_FALSE(LZ4F_isError(n));
  out.resize(n);
  return out;
}

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
  Bytes payload;  // decoded latent
  Store store;
};

// A corpus of tar shards on disk and a hand-assembled index over them.
struct Corpus {
  std::vector<std::string> shard_paths;
  std::vector<Sample> samples;
  al_index *idx = nullptr;

  ~Corpus() { al_index_free(idx); }

  // n samples round-robin over `shards` shards; sizes vary (not multiples of 64).
  void Build(const std::string &tag, size_t n, uint32_t shards, bool with_lz4 = true,
             bool lz4_ext_with_suffix = false) {
    ASSERT_EQ(al_index_new(&idx), AL_OK);
    std::vector<std::vector<TarMember>> members(shards);
    std::vector<std::vector<size_t>> sample_members(n);
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
      s.store = !with_lz4 ? Store::kRaw : (i % 3 == 1 ? Store::kLz4 : i % 3 == 2 ? Store::kLz4NoSize : Store::kRaw);
      std::string json = "{\"width\":" + std::to_string(s.w) + ",\"height\":" + std::to_string(s.h) +
                         ",\"frames\":" + std::to_string(s.f) + "}";
      auto &ms = members[s.shard];
      ms.push_back({s.key + ".json", Bytes(json.begin(), json.end())});
      if (s.store == Store::kRaw)
        ms.push_back({s.key + ".latent", s.payload});
      else
        ms.push_back({s.key + ".latent.lz4", Lz4Frame(s.payload, s.store == Store::kLz4)});
      samples.push_back(s);
    }
    std::vector<uint64_t> sizes(shards);
    for (uint32_t k = 0; k < shards; k++) {
      char name[64];
      std::snprintf(name, sizeof name, "/%s-shard-%03u.tar", tag.c_str(), k);
      shard_paths.push_back(TmpDir() + name);
      sizes[k] = WriteTar(shard_paths[k], members[k]);
      uint32_t id;
      ASSERT_EQ(al_index_add_shard(idx, shard_paths[k].c_str(), sizes[k], 1, &id), AL_OK);
      ASSERT_EQ(id, k);
    }
    // Members by key: index samples in the order of `samples`.
    std::vector<size_t> next(shards, 0);
    for (size_t i = 0; i < n; i++) {
      auto &ms = members[samples[i].shard];
      size_t j = next[samples[i].shard];
      next[samples[i].shard] += 2;
      al_member_info mi[2];
      mi[0] = {"json", ms[j].offset, ms[j].data.size(), 0};
      bool lz = samples[i].store != Store::kRaw;
      mi[1] = {lz ? (lz4_ext_with_suffix ? "latent.lz4" : "latent") : "latent", ms[j + 1].offset,
               ms[j + 1].data.size(), lz ? 1 : 0};
      ASSERT_EQ(al_index_add_sample(idx, samples[i].key.c_str(), samples[i].shard, samples[i].w,
                                    samples[i].h, samples[i].f, 0.f, mi, 2),
                AL_OK)
          << al_last_error();
    }
  }
};

// A rank plan by hand: consecutive batches of the given sizes over sample
// positions `order`; steps hold `micro_per_step` micro-batches.
inline stream_rank_plan MakePlan(const std::vector<uint64_t> &order, const std::vector<size_t> &batch_sizes,
                             uint32_t micro_per_step = 2, const std::vector<size_t> &padded_at = {}) {
  stream_rank_plan p;
  std::memset(&p, 0, sizeof p);
  p.world = 1;
  p.epoch = 3;
  p.seed = 42;
  p.index_fingerprint = 0xabcdef;
  size_t total = 0;
  for (size_t n : batch_sizes) total += n;
  p.samples = static_cast<stream_plan_sample *>(std::calloc(total ? total : 1, sizeof *p.samples));
  p.batches = static_cast<stream_plan_batch *>(std::calloc(batch_sizes.size() + 1, sizeof *p.batches));
  size_t at = 0;
  for (size_t b = 0; b < batch_sizes.size(); b++) {
    stream_plan_batch &pb = p.batches[b];
    pb.step = (uint32_t)(b / micro_per_step);
    pb.micro = (uint32_t)(b % micro_per_step);
    size_t steps = (batch_sizes.size() + micro_per_step - 1) / micro_per_step;
    pb.n_micro = (pb.step + 1 < steps) ? micro_per_step
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

}  // namespace stest

#endif  // AL_TESTS_STREAM_TEST_UTIL_H
