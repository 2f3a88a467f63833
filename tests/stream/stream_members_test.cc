// Several members per sample and the latent crop: a corpus of real .npy latents
// at native grids larger than their buckets (written byte by byte here: magic, header dict,
// data), a variable-length t5.npy embedding and a txt caption per sample, indexed by
// al_index_build and planned by al_plan_build. Every sample arrives exactly once across the
// ranks, each latent cropped by the rule (channels whole, frames [0, T_b), rows and columns
// centred at (n - n_b) / 2) byte for byte against a reference crop computed here, tokens
// equal to cu_seqlens and the step totals, gaps zero in reused (poisoned) buffers. Also: a
// missing member names what the sample has, a latent smaller than its grid is refused, the
// member cap option, and the CRC-32 of --jsonl against known vectors.
#include <cinttypes>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/stream/members_fixtures.h"

extern "C" {
#include "planner/al_plan.h"
#include "stream/al_stream.h"
#include "stream/crc32_internal.h"
}

using altest::Bytes;

namespace {

using altest::Crop;
using altest::kC;
using altest::kD;
using altest::MEnv;
using altest::MSample;
using altest::Npy;
using altest::Safetensors;

const char *const kMembers[] = {"latent.npy", "t5.npy", "txt"};

al_stream_options Options(int prefetch = 2) {
  al_stream_options o{};
  o.threads = 2;
  o.prefetch = prefetch;
  o.members = kMembers;
  o.n_members = 3;
  return o;
}

// Checks one batch against the corpus and the manifest; returns its real sample keys.
void CheckBatch(const MEnv &e, const al_stream_batch *b, uint32_t rank,
                std::map<uint32_t, uint64_t> *step_tokens, std::vector<std::string> *keys) {
  al_micro_ref ref = AL_MICRO_REF_INIT;
  ASSERT_EQ(al_manifest_micro(e.m, b->step, rank, b->micro, &ref), AL_OK);
  al_bucket_info bi = AL_BUCKET_INFO_INIT;
  ASSERT_EQ(al_manifest_bucket(e.m, b->bucket, &bi), AL_OK);
  const uint32_t tb = 1 + (bi.frames - 1) / 4, hb = bi.height / 8, wb = bi.width / 8;
  EXPECT_EQ(b->grid[0], tb);
  EXPECT_EQ(b->grid[1], hb);
  EXPECT_EQ(b->grid[2], wb);
  ASSERT_EQ(b->n, ref.n_samples);
  ASSERT_EQ(b->n_members, 3u);
  const al_stream_member &lat = b->members[0], &t5 = b->members[1], &txt = b->members[2];
  EXPECT_STREQ(lat.name, "latent.npy");
  EXPECT_STREQ(t5.name, "t5.npy");
  EXPECT_STREQ(txt.name, "txt");
  EXPECT_STREQ(lat.dtype, "float16");
  EXPECT_EQ(lat.itemsize, 2u);
  EXPECT_EQ(lat.typed, 1);
  EXPECT_EQ(lat.cropped, 1);
  EXPECT_STREQ(t5.dtype, "float32");
  EXPECT_EQ(t5.cropped, 0);
  EXPECT_STREQ(txt.dtype, "uint8");
  EXPECT_EQ(txt.typed, 0);
  const unsigned char *d = static_cast<const unsigned char *>(b->data);
  // Coverage: every byte of the payload is one member's or zero padding.
  std::vector<char> used(b->data_bytes, 0);
  uint64_t tokens = 0;
  for (size_t i = 0; i < b->n; i++) {
    auto it = e.by_key.find(b->keys[i]);
    ASSERT_TRUE(it != e.by_key.end()) << b->keys[i];
    const MSample &s = e.samples[it->second];
    EXPECT_EQ(b->samples[i], ref.samples[i]);
    // Latent: the crop, byte for byte.
    Bytes want = Crop(s, tb, hb, wb);
    ASSERT_EQ(lat.sizes[i], want.size()) << s.key;
    EXPECT_EQ(b->offsets[i], lat.offsets[i]);
    EXPECT_EQ(b->sizes[i], lat.sizes[i]);
    EXPECT_EQ(0, memcmp(d + lat.offsets[i], want.data(), want.size())) << s.key;
    if (s.lat.size() == 4) {
      ASSERT_EQ(lat.ndim[i], 4u);
      EXPECT_EQ(lat.shapes[8 * i + 1], tb);
      EXPECT_EQ(lat.shapes[8 * i + 2], hb);
      EXPECT_EQ(lat.shapes[8 * i + 3], wb);
    } else {
      ASSERT_EQ(lat.ndim[i], 3u);
      EXPECT_EQ(tb, 1u);
      EXPECT_EQ(lat.shapes[8 * i + 1], hb);
      EXPECT_EQ(lat.shapes[8 * i + 2], wb);
    }
    EXPECT_EQ(lat.shapes[8 * i], kC);
    // Tokens delivered = T_b x h_b/2 x w_b/2 = what cu_seqlens says.
    uint64_t delivered = (uint64_t)tb * (hb / 2) * (wb / 2);
    EXPECT_EQ((uint64_t)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]), delivered) << s.key;
    EXPECT_EQ(ref.tokens[i], delivered);
    EXPECT_EQ(lat.sizes[i], delivered * 4 * kC * 2) << "patch 1x2x2, C channels, 2 bytes";
    if (!b->padded[i]) tokens += delivered;
    // t5: the whole (L, D) array, its own length.
    ASSERT_EQ(t5.ndim[i], 2u);
    EXPECT_EQ(t5.shapes[8 * i], s.t5_len);
    EXPECT_EQ(t5.shapes[8 * i + 1], kD);
    ASSERT_EQ(t5.sizes[i], s.t5_data.size());
    EXPECT_EQ(0, memcmp(d + t5.offsets[i], s.t5_data.data(), s.t5_data.size())) << s.key;
    // txt: raw bytes.
    ASSERT_EQ(txt.ndim[i], 1u);
    EXPECT_EQ(txt.shapes[8 * i], s.txt.size());
    ASSERT_EQ(txt.sizes[i], s.txt.size());
    EXPECT_EQ(0, memcmp(d + txt.offsets[i], s.txt.data(), s.txt.size())) << s.key;
    // Sample-major, aligned, in order.
    EXPECT_EQ(lat.offsets[i] % 64, 0u);
    EXPECT_EQ(t5.offsets[i] % 64, 0u);
    EXPECT_EQ(txt.offsets[i] % 64, 0u);
    EXPECT_LT(lat.offsets[i], t5.offsets[i]);
    EXPECT_LT(t5.offsets[i], txt.offsets[i]);
    if (i + 1 < b->n) {
      EXPECT_LE(txt.offsets[i] + txt.sizes[i], lat.offsets[i + 1]);
    }
    for (size_t j = 0; j < 3; j++)
      for (uint64_t k = 0; k < b->members[j].sizes[i]; k++) {
        ASSERT_LT(b->members[j].offsets[i] + k, used.size());
        used[b->members[j].offsets[i] + k] = 1;
      }
    if (!b->padded[i]) keys->push_back(s.key);
  }
  if (b->n) {
    EXPECT_EQ(b->offsets[b->n], txt.offsets[b->n - 1] + txt.sizes[b->n - 1]);
  }
  EXPECT_EQ(b->data_bytes, b->n ? b->offsets[b->n] : 0u);
  size_t nonzero_gap = 0;
  for (size_t k = 0; k < used.size(); k++)
    if (!used[k] && d[k] != 0) nonzero_gap++;
  EXPECT_EQ(nonzero_gap, 0u) << "padding between members must be zero";
  for (size_t k = b->data_bytes; k < b->cu_seqlens_offset; k++) ASSERT_EQ(d[k], 0) << k;
  EXPECT_EQ(0, memcmp(d + b->cu_seqlens_offset, b->cu_seqlens, (b->n + 1) * 4));
  EXPECT_EQ(b->tokens, (uint64_t)b->cu_seqlens[b->n]);
  (*step_tokens)[b->step] += tokens;
}

TEST(StreamMembers, EverySampleOnceAcrossRanksCroppedByteForByte) {
  MEnv e;
  const uint32_t world = 2;
  ASSERT_NO_FATAL_FAILURE(e.Make("mem", world, 60));
  std::map<uint32_t, uint64_t> step_tokens;
  std::map<uint32_t, uint64_t> planned;
  std::multiset<std::string> seen;
  size_t cropped_smaller = 0;
  for (uint32_t r = 0; r < world; r++) {
    al_stream_options o = Options(1); // one buffer: every batch reuses the poisoned one
    al_stream *s = nullptr;
    ASSERT_EQ(al_stream_open(&s, e.idx, e.m, (int)r, &o), AL_OK) << al_last_error();
    const al_stream_batch *b;
    int st;
    std::vector<std::string> keys;
    while ((st = al_stream_next(s, &b)) == AL_OK) {
      ASSERT_NO_FATAL_FAILURE(CheckBatch(e, b, r, &step_tokens, &keys));
      planned[b->step] = b->step_tokens;
      for (size_t i = 0; i < b->n; i++) {
        const MSample &smp = e.samples[e.by_key[b->keys[i]]];
        if (smp.lat[smp.lat.size() - 1] > b->grid[2] || smp.lat[smp.lat.size() - 2] > b->grid[1])
          cropped_smaller++;
      }
      std::memset(b->data, 0xA5, b->copy_bytes); // poison before the pool reuses it
      ASSERT_EQ(al_stream_release(s, b), AL_OK);
    }
    ASSERT_EQ(st, AL_EOF) << al_last_error();
    al_stream_close(s);
    seen.insert(keys.begin(), keys.end());
  }
  ASSERT_EQ(seen.size(), e.samples.size());
  for (const MSample &smp : e.samples) EXPECT_EQ(seen.count(smp.key), 1u) << smp.key;
  EXPECT_GT(cropped_smaller, e.samples.size() / 2) << "the fixture must exercise the crop";
  for (auto &kv : planned) EXPECT_EQ(step_tokens[kv.first], kv.second) << "step " << kv.first;
}

// A manifest planned under another patch size (1x1x1) crops to the same latent grids, and the
// tokens delivered are counted under its geometry (al_manifest_geometry), not the defaults'.
TEST(StreamMembers, ANonDefaultGeometryCropsUnderTheManifestsGeometry) {
  MEnv e;
  const al_latent_geom g = {4, 8, 1, 1, 1};
  e.Make("geom", 1, 24, SIZE_MAX, false, &g);
  al_latent_geom got;
  ASSERT_EQ(al_manifest_geometry(e.m, &got), AL_OK);
  EXPECT_EQ(got.patch_h, 1u);
  EXPECT_EQ(got.patch_w, 1u);
  al_stream_options o = Options();
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  int st;
  size_t n = 0;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    ASSERT_EQ(al_manifest_bucket(e.m, b->bucket, &bi), AL_OK);
    const uint32_t tb = 1 + (bi.frames - 1) / 4, hb = bi.height / 8, wb = bi.width / 8;
    EXPECT_EQ(b->grid[0], tb);
    EXPECT_EQ(b->grid[1], hb);
    EXPECT_EQ(b->grid[2], wb);
    for (size_t i = 0; i < b->n; i++) {
      const MSample &smp = e.samples[e.by_key.at(b->keys[i])];
      uint64_t delivered = (uint64_t)tb * hb * wb; // patch 1x1x1: one token per latent cell
      EXPECT_EQ((uint64_t)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]), delivered) << smp.key;
      Bytes want = Crop(smp, tb, hb, wb);
      ASSERT_EQ(b->members[0].sizes[i], want.size());
      EXPECT_EQ(0, memcmp(static_cast<const unsigned char *>(b->data) + b->members[0].offsets[i],
                          want.data(), want.size()))
          << smp.key;
      n++;
    }
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  EXPECT_EQ(n, 24u);
  al_stream_close(s);
}

// The cap on what one sample delivers (its members together, after the crop): over it the
// sample fails naming the key and the bytes, or is skipped and listed.
TEST(StreamMembers, SampleCapFailsOrSkipsNamingTheKey) {
  MEnv e;
  e.Make("scap", 1, 12);
  al_stream_options o = Options();
  // What each sample delivers, its members together, without a cap.
  std::map<std::string, uint64_t> total;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  int st;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    for (size_t i = 0; i < b->n; i++)
      for (size_t j = 0; j < b->n_members; j++) total[b->keys[i]] += b->members[j].sizes[i];
    al_stream_release(s, b);
  }
  al_stream_close(s);
  ASSERT_EQ(total.size(), 12u);
  std::vector<uint64_t> sizes;
  for (auto &kv : total) sizes.push_back(kv.second);
  std::sort(sizes.begin(), sizes.end());
  const uint64_t cap = sizes[6]; // the larger samples are over it
  size_t over = 0;
  for (uint64_t v : sizes) over += v > cap;
  ASSERT_GT(over, 0u);
  o.max_sample_bytes = cap;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  while ((st = al_stream_next(s, &b)) == AL_OK) al_stream_release(s, b);
  EXPECT_EQ(st, AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("-byte cap on a sample")) << al_last_error();
  EXPECT_TRUE(altest::ErrorContains("key 'scap-")) << al_last_error();
  al_stream_close(s);
  // Skipped instead, with the cap from the environment: exactly the samples over it.
  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.max_skip_fraction = 1; // about half the samples: past the default budget
  o.max_sample_bytes = 0;
  setenv("ADAPTIVELOAD_MAX_SAMPLE_BYTES", std::to_string(cap).c_str(), 1);
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  unsetenv("ADAPTIVELOAD_MAX_SAMPLE_BYTES");
  size_t delivered = 0, skipped = 0;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    delivered += b->n;
    skipped += b->n_skipped;
    for (size_t i = 0; i < b->n; i++) EXPECT_LE(total[b->keys[i]], cap) << b->keys[i];
    for (size_t i = 0; i < b->n_skipped; i++) {
      EXPECT_GT(total[b->skipped_keys[i]], cap) << b->skipped_keys[i];
      EXPECT_TRUE(altest::Contains(b->skipped_reasons[i], "cap on a sample"));
    }
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  EXPECT_EQ(skipped, over);
  EXPECT_EQ(delivered + skipped, 12u);
  al_stream_close(s);
}

TEST(StreamMembers, SafetensorsBf16LatentsAreCroppedToo) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("st", 1, 18, SIZE_MAX, true));
  const char *const members[] = {"latent.safetensors", "txt"};
  al_stream_options o{};
  o.members = members;
  o.n_members = 2;
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  int st;
  size_t samples = 0;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    const al_stream_member &lat = b->members[0];
    EXPECT_STREQ(lat.dtype, "bfloat16");
    EXPECT_EQ(lat.cropped, 1);
    for (size_t i = 0; i < b->n; i++) {
      const MSample &smp = e.samples[e.by_key[b->keys[i]]];
      Bytes want = Crop(smp, b->grid[0], b->grid[1], b->grid[2]);
      ASSERT_EQ(lat.sizes[i], want.size()) << smp.key;
      EXPECT_EQ(0, memcmp((const char *)b->data + lat.offsets[i], want.data(), want.size()))
          << smp.key;
      EXPECT_EQ((uint64_t)(b->cu_seqlens[i + 1] - b->cu_seqlens[i]),
                (uint64_t)b->grid[0] * (b->grid[1] / 2) * (b->grid[2] / 2));
      samples += !b->padded[i];
    }
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  EXPECT_EQ(samples, 18u);
  al_stream_close(s);
}

TEST(StreamMembers, MissingMemberNamesWhatTheSampleHas) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("miss", 1, 12, 6));
  const std::string missing = e.samples[6].key;
  al_stream_options o = Options();
  al_stream *s = nullptr;
  // AL_STREAM_FAIL: the index knows the sample lacks it, so the open fails, naming it.
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_ENOTFOUND);
  EXPECT_EQ(s, nullptr);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, "1 of 12 samples lack a requested member")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "key '" + missing + "' (shard ")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "has no 't5.npy'")) << msg;
  const al_stream_batch *b;
  int st;

  o.on_error = AL_STREAM_SKIP_SAMPLE;
  o.max_skip_fraction = 0.5; // one of twelve: past the default budget
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  al_stream_stats stats = AL_STREAM_STATS_INIT;
  ASSERT_EQ(al_stream_get_stats(s, &stats), AL_OK);
  EXPECT_EQ(stats.lacking, 1u) << "counted at open";
  size_t delivered = 0, skipped = 0;
  std::map<uint32_t, uint64_t> tok;
  while ((st = al_stream_next(s, &b)) == AL_OK) {
    std::vector<std::string> keys;
    delivered += b->n;
    for (size_t i = 0; i < b->n_skipped; i++) {
      skipped++;
      EXPECT_EQ(b->skipped_keys[i], missing);
      EXPECT_TRUE(altest::Contains(b->skipped_reasons[i], "the sample has: json, latent.npy, txt"));
    }
    for (size_t i = 0; i < b->n; i++) EXPECT_NE(b->keys[i], missing);
    // Offsets of the samples after the skipped one are still right.
    for (size_t i = 0; i < b->n; i++) {
      const MSample &smp = e.samples[e.by_key[b->keys[i]]];
      EXPECT_EQ(0, memcmp((const char *)b->data + b->members[2].offsets[i], smp.txt.data(),
                          smp.txt.size()));
    }
    al_stream_release(s, b);
  }
  EXPECT_EQ(st, AL_EOF) << al_last_error();
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(delivered, 11u);
  al_stream_close(s);
}

TEST(StreamMembers, LatentSmallerThanItsGridIsRefusedNamingBothGrids) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("small", 1, 6));
  // A hand-made plan whose bucket grid is larger than sample 1's latent (3 x 9 x 13).
  const uint64_t pos1 = e.position[e.samples[1].key], pos2 = e.position[e.samples[2].key];
  stream_rank_plan p = altest::MakePlan({pos1}, {1}, 1);
  p.batches[0].grid[0] = 3;
  p.batches[0].grid[1] = 10;
  p.batches[0].grid[2] = 4;
  stream_source src;
  stream_index_source(e.idx, &src);
  al_stream_options o = Options();
  al_stream *s = nullptr;
  ASSERT_EQ(stream_open_source(&s, &src, &p, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  EXPECT_EQ(al_stream_next(s, &b), AL_ERANGE);
  std::string msg = al_last_error();
  EXPECT_TRUE(altest::Contains(msg, e.samples[1].key)) << msg;
  EXPECT_TRUE(altest::Contains(msg, "latent grid 3x9x13")) << msg;
  EXPECT_TRUE(altest::Contains(msg, "bucket's grid 3x10x4")) << msg;
  al_stream_close(s);

  // The same sample with a fitting grid: cropped, from a hand plan too.
  p = altest::MakePlan({pos1}, {1}, 1);
  p.batches[0].grid[0] = 2;
  p.batches[0].grid[1] = 4;
  p.batches[0].grid[2] = 6;
  ASSERT_EQ(stream_open_source(&s, &src, &p, &o), AL_OK) << al_last_error();
  ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
  Bytes want = Crop(e.samples[1], 2, 4, 6);
  ASSERT_EQ(b->members[0].sizes[0], want.size());
  EXPECT_EQ(0, memcmp(b->data, want.data(), want.size()));
  al_stream_release(s, b);
  al_stream_close(s);

  // No grid (a hand plan without one): the latent whole, header removed.
  p = altest::MakePlan({pos2}, {1}, 1);
  ASSERT_EQ(stream_open_source(&s, &src, &p, &o), AL_OK) << al_last_error();
  ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
  EXPECT_EQ(b->members[0].cropped, 0);
  ASSERT_EQ(b->members[0].sizes[0], e.samples[2].lat_data.size());
  EXPECT_EQ(0, memcmp(b->data, e.samples[2].lat_data.data(), e.samples[2].lat_data.size()));
  al_stream_release(s, b);
  al_stream_close(s);
}

TEST(StreamMembers, MemberCapOptionAndBadMemberLists) {
  MEnv e;
  ASSERT_NO_FATAL_FAILURE(e.Make("cap", 1, 6));
  al_stream_options o = Options();
  o.max_member_bytes = 300; // below every latent (>= 4 x 8 x 12 x 2 bytes + header)
  al_stream *s = nullptr;
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  const al_stream_batch *b;
  EXPECT_EQ(al_stream_next(s, &b), AL_ERANGE);
  EXPECT_TRUE(altest::Contains(al_last_error(), "exceeds the cap of 300 bytes")) << al_last_error();
  al_stream_close(s);

  const char *dup[] = {"txt", "latent.npy", "txt"};
  o = Options();
  o.members = dup;
  o.n_members = 3;
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_EINVAL);
  EXPECT_TRUE(altest::Contains(al_last_error(), "'txt' requested twice"));
  const char *empty[] = {"latent.npy", ""};
  o.members = empty;
  o.n_members = 2;
  EXPECT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_EINVAL);

  // One member given as the old `ext`: the same latent crop, members[0] only.
  o = al_stream_options{};
  o.ext = "latent.npy";
  ASSERT_EQ(al_stream_open(&s, e.idx, e.m, 0, &o), AL_OK) << al_last_error();
  ASSERT_EQ(al_stream_next(s, &b), AL_OK) << al_last_error();
  EXPECT_EQ(b->n_members, 1u);
  EXPECT_EQ(b->members[0].cropped, 1);
  EXPECT_EQ(b->offsets[b->n], b->data_bytes);
  al_stream_release(s, b);
  al_stream_close(s);
}

TEST(StreamMembers, Crc32MatchesZlib) {
  EXPECT_EQ(stream_crc32(0, "123456789", 9), 0xcbf43926u);
  EXPECT_EQ(stream_crc32(0, "", 0), 0u);
  const char *fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(stream_crc32(0, fox, strlen(fox)), 0x414fa339u);
  // Incremental == one shot, at every split and every alignment.
  Bytes big = altest::Payload(3, 1000);
  uint32_t whole = stream_crc32(0, big.data(), big.size());
  for (size_t k = 0; k <= 40; k++)
    EXPECT_EQ(stream_crc32(stream_crc32(0, big.data(), k), big.data() + k, big.size() - k), whole);
  for (size_t a = 1; a < 9; a++) {
    Bytes sh(big.begin() + a, big.end());
    uint32_t bytewise = 0;
    for (unsigned char c : sh) bytewise = stream_crc32(bytewise, &c, 1);
    EXPECT_EQ(stream_crc32(0, big.data() + a, big.size() - a), bytewise);
  }
}

} // namespace
