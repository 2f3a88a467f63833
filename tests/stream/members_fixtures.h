// A corpus of typed members for the stream tests: hand-written .npy (and .safetensors)
// latents at native grids larger than their buckets (some .lz4), a variable-length t5.npy
// embedding and a txt caption per sample, over 3 tar shards, indexed by al_index_build and
// planned by al_plan_build; and the reference crop of a latent.
#ifndef AL_TESTS_STREAM_MEMBERS_FIXTURES_H
#define AL_TESTS_STREAM_MEMBERS_FIXTURES_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/stream/stream_fixtures.h"

extern "C" {
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"
#include "stream/al_stream.h"
}

namespace altest {

const uint32_t kC = 4; // latent channels
const uint32_t kD = 8; // t5 embedding width
const char kBuckets
    [] = "frames 1 9 17\n"
         "aspect 1:1 64x64\n"
         "aspect 3:2 96x64\n"
         "aspect 2:1 96x48 128x64\n";

// The .npy bytes of a C-order array: magic, version 1.0, header dict padded to 64, data.
inline std::string Npy(const std::string &descr, const std::vector<uint64_t> &shape,
                       const Bytes &data) {
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

struct MSample {
  std::string key;
  uint32_t w, h, f;          // pixels and frames (KEY.json)
  std::vector<uint64_t> lat; // latent shape, (C, T, H, W) or (C, H, W)
  Bytes lat_data;            // float16 bits
  bool lat_lz4;
  uint64_t t5_len;
  Bytes t5_data; // float32 (t5_len, kD)
  std::string txt;
  bool has_t5 = true;
};

// The .safetensors bytes of one tensor named "latent": 8-byte header length, JSON, data.
inline std::string Safetensors(const std::string &dtype, const std::vector<uint64_t> &shape,
                               const Bytes &data) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"},\"latent\":{\"dtype\":\"" + dtype +
                  "\",\"shape\":[";
  for (size_t i = 0; i < shape.size(); i++) h += (i ? "," : "") + std::to_string(shape[i]);
  h += "],\"data_offsets\":[0," + std::to_string(data.size()) + "]}}";
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; i++) out[i] = (char)((uint64_t)h.size() >> (8 * i));
  return out + h + std::string(data.begin(), data.end());
}

// The reference crop: channels whole, frames [0, tb), centred rows and columns.
inline Bytes Crop(const MSample &s, uint32_t tb, uint32_t hb, uint32_t wb) {
  const size_t isz = 2;
  uint64_t C = s.lat[0], T = s.lat.size() == 4 ? s.lat[1] : 1;
  uint64_t H = s.lat[s.lat.size() - 2], W = s.lat[s.lat.size() - 1];
  Bytes out;
  uint64_t y0 = (H - hb) / 2, x0 = (W - wb) / 2;
  for (uint64_t c = 0; c < C; c++)
    for (uint64_t t = 0; t < tb; t++)
      for (uint64_t y = 0; y < hb; y++) {
        size_t at = (size_t)((((c * T + t) * H + y0 + y) * W + x0) * isz);
        out.insert(out.end(), s.lat_data.begin() + at, s.lat_data.begin() + at + wb * isz);
      }
  return out;
}

struct MEnv {
  std::vector<MSample> samples;
  std::map<std::string, size_t> by_key;
  std::map<std::string, uint64_t> position; // key -> index position
  std::vector<std::string> shards;
  al_index *idx = nullptr;
  al_manifest *m = nullptr;
  // Set before Make: plan with these sequence-parallel degrees (empty: none) and this M_mem
  // (0: 400, or 4000 with a geometry).
  std::vector<uint32_t> sp_degrees;
  uint64_t mem_tokens = 0;

  ~MEnv() {
    al_manifest_free(m);
    al_index_free(idx);
  }

  // n samples over 3 shards; `no_t5` drops KEY.t5.npy of that sample (SIZE_MAX: none);
  // `safetensors`: latents as KEY.latent.safetensors (BF16) instead of .npy (float16).
  // `geom`: plan under this latent geometry (NULL: the defaults).
  // `channels`: latent channels; `lz4`: every fourth latent stored as .npy.lz4.
  void Make(const std::string &tag, uint32_t world, size_t n, size_t no_t5 = SIZE_MAX,
            bool safetensors = false, const al_latent_geom *geom = nullptr, uint32_t channels = kC,
            bool lz4 = true) {
    std::vector<altest::Members> members(3);
    for (size_t i = 0; i < n; i++) {
      MSample s;
      char key[64];
      std::snprintf(key, sizeof key, "%s-%04zu", tag.c_str(), i);
      s.key = key;
      s.w = 96 + 8 * (uint32_t)(i % 5); // latent columns 12..16
      s.h = 64 + 8 * (uint32_t)(i % 4); // latent rows 8..11
      s.f = i % 3 == 0 ? 1 : i % 3 == 1 ? 9 : 17;
      uint64_t T = 1 + (s.f - 1) / 4;
      if (i % 6 == 0)
        s.lat = {channels, s.h / 8, s.w / 8}; // an image as (C, H, W)
      else
        s.lat = {channels, T, s.h / 8, s.w / 8};
      uint64_t elems = 1;
      for (uint64_t d : s.lat) elems *= d;
      s.lat_data = altest::Payload(1000 + i, (size_t)elems * 2);
      s.lat_lz4 = lz4 && i % 4 == 1;
      s.t5_len = 3 + i % 7;
      s.t5_data = altest::Payload(5000 + i, (size_t)(s.t5_len * kD * 4));
      s.txt = "a caption of " + s.key + std::string(i % 5, '!');
      s.has_t5 = i != no_t5;
      auto &ms = members[i % 3];
      ms.push_back({s.key + ".json", "{\"width\":" + std::to_string(s.w) +
                                         ",\"height\":" + std::to_string(s.h) +
                                         ",\"frames\":" + std::to_string(s.f) + "}"});
      std::string npy = Npy("<f2", s.lat, s.lat_data);
      if (safetensors) {
        ms.push_back({s.key + ".latent.safetensors", Safetensors("BF16", s.lat, s.lat_data)});
      } else if (s.lat_lz4) {
        Bytes z = altest::Lz4Frame(Bytes(npy.begin(), npy.end()), true);
        ms.push_back({s.key + ".latent.npy.lz4", std::string(z.begin(), z.end())});
      } else {
        ms.push_back({s.key + ".latent.npy", npy});
      }
      if (s.has_t5) ms.push_back({s.key + ".t5.npy", Npy("<f4", {s.t5_len, kD}, s.t5_data)});
      ms.push_back({s.key + ".txt", s.txt});
      by_key[s.key] = samples.size();
      samples.push_back(s);
    }
    ASSERT_NO_FATAL_FAILURE(WriteAndIndexShards(tag, members, shards, &idx));
    ASSERT_EQ(al_index_sample_count(idx), n) << "rejected " << al_index_rejected_count(idx);
    std::vector<uint32_t> w(n), h(n), f(n);
    for (size_t i = 0; i < n; i++) {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      ASSERT_EQ(al_index_sample(idx, i, &si), AL_OK);
      w[i] = si.width;
      h[i] = si.height;
      f[i] = si.frames;
    }
    al_bucket_table *bt = nullptr;
    ASSERT_EQ(al_bucket_table_parse(&bt, kBuckets, sizeof kBuckets - 1, "test"), AL_OK)
        << al_last_error();
    al_cost_model cost = AL_COST_MODEL_INIT;
    ASSERT_EQ(al_cost_default(&cost), AL_OK) << al_last_error();
    al_plan_input in{0, n, w.data(), h.data(), f.data(), al_index_fingerprint(idx)};
    al_plan_options po{};
    po.world = world;
    po.seed = 7;
    po.mem_tokens = mem_tokens ? mem_tokens : geom ? 4000 : 400;
    po.sp_degrees = sp_degrees.empty() ? nullptr : sp_degrees.data();
    po.n_sp_degrees = sp_degrees.size();
    po.buckets = bt;
    if (geom) po.geom = *geom;
    al_plan *plan = nullptr;
    ASSERT_EQ(al_plan_build(&plan, &in, &cost, &po), AL_OK) << al_last_error();
    std::string mp = altest::TmpPath(tag + ".alm");
    ASSERT_EQ(al_plan_save(plan, mp.c_str(), nullptr, nullptr), AL_OK) << al_last_error();
    al_plan_free(plan);
    al_bucket_table_free(bt);
    ASSERT_EQ(al_manifest_load(&m, mp.c_str()), AL_OK) << al_last_error();
    al_manifest_info info = AL_MANIFEST_INFO_INIT;
    ASSERT_EQ(al_manifest_get_info(m, &info), AL_OK);
    ASSERT_EQ(info.samples, n) << "every sample planned; rejected " << info.rejected;
    for (size_t i = 0; i < n; i++) {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      ASSERT_EQ(al_index_sample(idx, i, &si), AL_OK);
      position[si.key] = i;
    }
  }
};

} // namespace altest

#endif // AL_TESTS_STREAM_MEMBERS_FIXTURES_H
