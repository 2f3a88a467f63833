// Typed payload members in the index: .npy / .safetensors headers parsed while
// indexing (dtype, shape, data offset), the latent grid cross-checked against KEY.json under
// the VAE stride (or giving the shape when the JSON has none), frame-count aliases and the
// warning for a video without a known frame field, save/load and the fingerprint.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
}

using altest::Build;
using altest::Bytes;
using altest::RejectedText;
using altest::TmpPath;

namespace {

// An .npy member (version 1.0, header padded to 64 bytes) of zeros.
std::string Npy(const std::string &descr, const std::vector<uint64_t> &shape, size_t elem) {
  std::string sh = "(";
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); i++) {
    sh += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
    n *= shape[i];
  }
  sh += ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + sh + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += (char)(h.size() & 0xff);
  out += (char)(h.size() >> 8);
  out += h;
  out.append(n * elem, '\0');
  return out;
}

std::string Latent(uint64_t c, uint64_t t, uint64_t h, uint64_t w) {
  return Npy("<f2", {c, t, h, w}, 2);
}

std::string Safetensors(const std::string &dtype, const std::vector<uint64_t> &shape, size_t elem) {
  uint64_t n = elem;
  std::string sh;
  for (size_t i = 0; i < shape.size(); i++) {
    n *= shape[i];
    sh += (i ? "," : "") + std::to_string(shape[i]);
  }
  std::string j = "{\"__metadata__\":{\"format\":\"pt\"},\"latent\":{\"dtype\":\"" + dtype +
                  "\",\"shape\":[" + sh + "],\"data_offsets\":[0," + std::to_string(n) + "]}}";
  std::string out(8, '\0');
  for (int k = 0; k < 8; k++) out[k] = (char)((j.size() >> (8 * k)) & 0xff);
  return out + j + std::string(n, '\0');
}

std::string Lz4(const std::string &s, bool content_size) {
  Bytes b = altest::Lz4Frame(Bytes(s.begin(), s.end()), content_size);
  return std::string(b.begin(), b.end());
}

std::string Json(const std::string &body) { return "{" + body + "}"; }

al_member_type Type(const al_index *idx, size_t sample, size_t m) {
  al_member_type t = AL_MEMBER_TYPE_INIT;
  std::memset(&t, 0xAB, sizeof t);
  t.struct_size = sizeof t;
  EXPECT_EQ(al_index_member_type(idx, sample, m, &t), AL_OK) << al_last_error();
  return t;
}

std::vector<uint64_t> Shape(const al_member_type &t) {
  return std::vector<uint64_t>(t.shape, t.shape + t.ndim);
}

// A latent corpus: each sample has json, latent.npy (f16, 16 channels), t5.npy (variable
// length), txt. 480x832 x 81 frames -> grid (21, 60, 104) under stride 4 / 8.
TEST(TypedIndex, NpyMembersTypedWithoutReadingData) {
  std::string path = TmpPath("typed.tar");
  std::vector<uint64_t> offs;
  altest::WriteTar(path,
                   {{"a.json", Json("\"width\": 832, \"height\": 480, \"frames\": 81")},
                    {"a.latent.npy", Latent(16, 21, 60, 104)},
                    {"a.t5.npy", Npy("<f4", {77, 64}, 4)},
                    {"a.txt", "a cat"},
                    {"b.json", Json("\"width\": 256, \"height\": 256")},
                    {"b.latent.npy", Latent(16, 1, 32, 32)},
                    {"b.t5.npy", Npy("<f4", {12, 64}, 4)},
                    {"b.txt", "a dog"}},
                   &offs);
  al_index_options o{};
  std::vector<const char *> p = {path.c_str()};
  o.threads = 1;
  o.progress = -1;
  al_index *idx = nullptr;
  al_index_stats st = AL_INDEX_STATS_INIT;
  ASSERT_EQ(al_index_build(&idx, p.data(), 1, &o, &st), AL_OK) << al_last_error();
  ASSERT_EQ(al_index_sample_count(idx), 2u) << RejectedText(idx);
  EXPECT_EQ(al_index_rejected_count(idx), 0u);
  EXPECT_EQ(st.warnings, 0u);
  // The data of the ~8.5 MB of latents was skipped: only headers (and the small reads
  // around them) were read.
  EXPECT_LT(st.bytes_read * 20, st.bytes) << st.bytes_read << " of " << st.bytes;

  al_member_type t = Type(idx, 0, 1);
  EXPECT_STREQ(t.dtype, "float16");
  EXPECT_EQ(t.elem_size, 2u);
  EXPECT_EQ(Shape(t), (std::vector<uint64_t>{16, 21, 60, 104}));
  EXPECT_EQ(t.data_offset, 128u);
  EXPECT_EQ(t.data_bytes, 16u * 21 * 60 * 104 * 2);
  al_member_info mi;
  ASSERT_EQ(al_index_member(idx, 0, 1, &mi), AL_OK);
  EXPECT_EQ(mi.size, t.data_offset + t.data_bytes);
  EXPECT_EQ(mi.offset, offs[1]);
  // The stream's view: the array data lies at member offset + data_offset in the file.
  EXPECT_EQ(altest::Pread(path, mi.offset, 6), std::string("\x93NUMPY", 6));
  t = Type(idx, 0, 2);
  EXPECT_STREQ(t.dtype, "float32");
  EXPECT_EQ(Shape(t), (std::vector<uint64_t>{77, 64}));
  t = Type(idx, 1, 2);
  EXPECT_EQ(Shape(t), (std::vector<uint64_t>{12, 64}));
  // json and txt are not typed; out of range is an error.
  al_member_type u = AL_MEMBER_TYPE_INIT;
  EXPECT_EQ(al_index_member_type(idx, 0, 0, &u), AL_ENOTFOUND);
  EXPECT_EQ(al_index_member_type(idx, 0, 3, &u), AL_ENOTFOUND);
  EXPECT_EQ(al_index_member_type(idx, 0, 4, &u), AL_ERANGE);
  EXPECT_EQ(al_index_member_type(idx, 2, 0, &u), AL_ERANGE);
  EXPECT_EQ(al_index_member_type(nullptr, 0, 0, &u), AL_EINVAL);

  uint32_t gt = 0, gh = 0, gw = 0;
  size_t lm = 99;
  ASSERT_EQ(al_index_latent_grid(idx, 0, &gt, &gh, &gw, &lm), AL_OK);
  EXPECT_EQ(gt, 21u);
  EXPECT_EQ(gh, 60u);
  EXPECT_EQ(gw, 104u);
  EXPECT_EQ(lm, 1u);
  ASSERT_EQ(al_index_latent_grid(idx, 1, &gt, &gh, &gw, nullptr), AL_OK);
  EXPECT_EQ(gt, 1u);
  EXPECT_EQ(gh, 32u);
  EXPECT_EQ(al_index_latent_grid(idx, 2, &gt, &gh, &gw, nullptr), AL_ERANGE);

  // Save and load: the same types, the same fingerprint.
  std::string f = TmpPath("typed.alidx");
  ASSERT_EQ(al_index_save(idx, f.c_str()), AL_OK) << al_last_error();
  al_index *back = nullptr;
  ASSERT_EQ(al_index_load(&back, f.c_str()), AL_OK) << al_last_error();
  altest::ExpectSameIndex(idx, back);
  EXPECT_EQ(al_index_fingerprint(idx), al_index_fingerprint(back));
  ASSERT_EQ(al_index_latent_grid(back, 0, &gt, &gh, &gw, nullptr), AL_OK);
  EXPECT_EQ(gw, 104u);
  // Typed members cost 8 bytes each plus the interned shapes: well under 100 bytes a sample.
  size_t records = 0;
  al_index_memory(back, &records, nullptr);
  EXPECT_GT(records, 0u);
  al_index_free(back);
  al_index_free(idx);
}

// A sample without a latent member has no grid; raw ".latent" members stay untyped.
TEST(TypedIndex, UntypedLatentHasNoGrid) {
  std::string path = TmpPath("untyped.tar");
  altest::WriteTar(path, {{"a.json", Json("\"width\": 64, \"height\": 64")}, {"a.latent", "xx"}});
  al_index *idx = Build({path});
  ASSERT_EQ(al_index_sample_count(idx), 1u);
  uint32_t t, h, w;
  EXPECT_EQ(al_index_latent_grid(idx, 0, &t, &h, &w, nullptr), AL_ENOTFOUND);
  al_member_type u = AL_MEMBER_TYPE_INIT;
  EXPECT_EQ(al_index_member_type(idx, 0, 1, &u), AL_ENOTFOUND);
  al_index_free(idx);
}

struct Rejection {
  std::string member;
  std::string reason;
};

std::vector<Rejection> Rejections(const al_index *idx) {
  std::vector<Rejection> out;
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    EXPECT_EQ(al_index_rejected(idx, i, &r), AL_OK);
    out.push_back({r.member, r.reason});
  }
  return out;
}

TEST(TypedIndex, LatentGridCrossCheck) {
  std::string path = TmpPath("grid.tar");
  std::vector<uint64_t> offs;
  altest::WriteTar(path,
                   {// good: 480x832 x 81 -> (21, 60, 104)
                    {"a.json", Json("\"width\": 832, \"height\": 480, \"frames\": 81")},
                    {"a.latent.npy", Latent(16, 21, 60, 104)},
                    // wrong width: grid W 100 against 832 / 8 = 104
                    {"b.json", Json("\"width\": 832, \"height\": 480, \"frames\": 81")},
                    {"b.latent.npy", Latent(16, 21, 60, 100)},
                    // wrong frames: T 20 against (81 - 1) / 4 + 1 = 21
                    {"c.json", Json("\"width\": 832, \"height\": 480, \"frames\": 81")},
                    {"c.latent.npy", Latent(16, 20, 60, 104)},
                    // sides not multiples of 8: 838 / 8 = 104 (al_tokens' integer division); 82
                    // frames
                    // -> 21 as well
                    {"d.json", Json("\"width\": 838, \"height\": 487, \"frames\": 82")},
                    {"d.latent.npy", Latent(16, 21, 60, 104)},
                    // 3-D latent (C, H, W) is an image: T = 1
                    {"e.json", Json("\"width\": 64, \"height\": 32")},
                    {"e.latent.npy", Npy("<f2", {4, 4, 8}, 2)},
                    // 3-D latent for a video: T 1 against 21
                    {"f.json", Json("\"width\": 832, \"height\": 480, \"frames\": 81")},
                    {"f.latent.npy", Npy("<f2", {16, 60, 104}, 2)},
                    // 2-D latent: not a grid
                    {"g.json", Json("\"width\": 64, \"height\": 32")},
                    {"g.latent.npy", Npy("<f2", {4, 8}, 2)},
                    // a broken header: rejected with the parser's reason and the byte
                    {"h.json", Json("\"width\": 64, \"height\": 32")},
                    {"h.latent.npy", Npy("<c8", {1, 1, 4, 8}, 8)},
                    // a non-latent typed member with a bad header rejects too
                    {"i.json", Json("\"width\": 64, \"height\": 32")},
                    {"i.t5.npy", Npy(">f4", {3, 8}, 4)}},
                   &offs);
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_sample_count(idx), 3u) << RejectedText(idx);
  altest::ExpectSample(idx, 0, "a", 832, 480, 81, 0);
  altest::ExpectSample(idx, 1, "d", 838, 487, 82, 0);
  altest::ExpectSample(idx, 2, "e", 64, 32, 1, 0);
  std::vector<Rejection> r = Rejections(idx);
  ASSERT_EQ(r.size(), 6u) << RejectedText(idx);
  EXPECT_EQ(r[0].member, "b.latent.npy");
  EXPECT_TRUE(altest::Contains(r[0].reason, "latent grid [16, 21, 60, 100]"));
  EXPECT_TRUE(altest::Contains(r[0].reason, "832x480 x 81 frames gives T, H, W = 21, 60, 104"));
  EXPECT_TRUE(altest::Contains(r[0].reason, "VAE stride 4 (time), 8 (space)"));
  EXPECT_EQ(r[1].member, "c.latent.npy");
  EXPECT_TRUE(altest::Contains(r[1].reason, "T, H, W = 20, 60, 104"));
  EXPECT_EQ(r[2].member, "f.latent.npy");
  EXPECT_TRUE(altest::Contains(r[2].reason, "T, H, W = 1, 60, 104"));
  EXPECT_EQ(r[3].member, "g.latent.npy");
  EXPECT_TRUE(altest::Contains(r[3].reason, "2 dimensions"));
  EXPECT_EQ(r[4].member, "h.latent.npy");
  EXPECT_TRUE(altest::Contains(r[4].reason, "npy header: byte 20: unknown dtype '<c8'"));
  EXPECT_EQ(r[5].member, "i.t5.npy");
  EXPECT_TRUE(altest::Contains(r[5].reason, "big-endian"));
  // Offsets are those of the member's header (like every rejection).
  al_rejected_info ri = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_rejected(idx, 4, &ri), AL_OK);
  EXPECT_EQ(ri.offset, offs[15] - 512);
  EXPECT_STREQ(ri.key, "h");
  al_index_free(idx);

  // Another VAE stride: the same JSON and grid no longer agree.
  al_index_options o{};
  o.vae_stride_s = 16;
  idx = Build({path}, 2, AL_OK, &o);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_sample_count(idx), 0u) << RejectedText(idx);
  ASSERT_GE(al_index_rejected_count(idx), 1u);
  ASSERT_EQ(al_index_rejected(idx, 0, &ri), AL_OK);
  EXPECT_TRUE(altest::Contains(ri.reason, "under VAE stride 4 (time), 16 (space)"));
  al_index_free(idx);
}

// KEY.json without width and height: the latent grid gives them (W * 8, H * 8,
// (T - 1) * 4 + 1 frames); without a latent it is rejected as before.
TEST(TypedIndex, ShapeFromLatentWhenJsonHasNone) {
  std::string path = TmpPath("nodims.tar");
  altest::WriteTar(path, {{"a.json", Json("\"fps\": 16")},
                          {"a.latent.npy", Latent(16, 5, 30, 52)},
                          {"b.json", Json("\"caption\": \"x\"")},
                          {"b.latent.safetensors", Safetensors("BF16", {16, 1, 32, 32}, 2)},
                          {"c.json", Json("\"frames\": 9")},
                          {"c.latent.npy", Latent(16, 3, 4, 4)},
                          {"d.json", Json("\"frames\": 9")},
                          {"d.latent.npy", Latent(16, 2, 4, 4)},
                          {"e.json", Json("\"fps\": 16")},
                          {"e.latent", "raw"}});
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 3u) << RejectedText(idx);
  altest::ExpectSample(idx, 0, "a", 416, 240, 17, 16);
  altest::ExpectSample(idx, 1, "b", 256, 256, 1, 0);
  altest::ExpectSample(idx, 2, "c", 32, 32, 9, 0);
  al_member_type t = Type(idx, 1, 1);
  EXPECT_STREQ(t.dtype, "bfloat16");
  EXPECT_EQ(t.data_offset + t.data_bytes, 8 + (t.data_offset - 8) + 16u * 32 * 32 * 2);
  // No warning: the frames came from the grid.
  EXPECT_EQ(al_index_warning_count(idx), 0u);
  std::vector<Rejection> r = Rejections(idx);
  ASSERT_EQ(r.size(), 2u) << RejectedText(idx);
  EXPECT_EQ(r[0].member, "d.latent.npy");
  EXPECT_TRUE(altest::Contains(r[0].reason, "does not match the metadata"));
  EXPECT_EQ(r[1].member, "e.json");
  EXPECT_TRUE(altest::Contains(r[1].reason, "missing field 'width'"));
  EXPECT_TRUE(altest::Contains(r[1].reason, "no typed latent member"));
  al_index_free(idx);
}

// .npy.lz4 members: decoded only up to the header when the frame says its size, decoded
// through when it does not; a broken frame is a rejection. Compressed shards give the same.
TEST(TypedIndex, Lz4MembersAndCompressedShards) {
  std::string lat = Latent(16, 5, 30, 52);
  std::string path = TmpPath("lz4m.tar");
  std::string bad = Lz4(lat, true);
  bad[bad.size() / 2] ^= 0x55;
  bad[bad.size() / 2 + 1] ^= 0x55;
  std::string trunc = Lz4(lat, false).substr(0, 40);
  altest::WriteTar(path, {{"a.json", Json("\"width\": 416, \"height\": 240, \"frames\": 17")},
                          {"a.latent.npy.lz4", Lz4(lat, true)},
                          {"b.json", Json("\"width\": 416, \"height\": 240, \"frames\": 17")},
                          {"b.latent.npy.lz4", Lz4(lat, false)},
                          {"c.json", Json("\"width\": 416, \"height\": 240, \"frames\": 17")},
                          {"c.latent.npy.lz4", Lz4(lat.substr(0, lat.size() - 2), false)},
                          {"d.json", Json("\"width\": 416, \"height\": 240, \"frames\": 17")},
                          {"d.latent.npy.lz4", trunc},
                          {"e.json", Json("\"width\": 416, \"height\": 240, \"frames\": 17")},
                          {"e.latent.npy.lz4", "not lz4 at all"}});
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 2u) << RejectedText(idx);
  for (size_t i = 0; i < 2; i++) {
    al_member_type t = Type(idx, i, 1);
    EXPECT_EQ(Shape(t), (std::vector<uint64_t>{16, 5, 30, 52}));
    EXPECT_EQ(t.data_offset + t.data_bytes, lat.size());
    uint32_t gt, gh, gw;
    EXPECT_EQ(al_index_latent_grid(idx, i, &gt, &gh, &gw, nullptr), AL_OK);
  }
  std::vector<Rejection> r = Rejections(idx);
  ASSERT_EQ(r.size(), 3u) << RejectedText(idx);
  EXPECT_EQ(r[0].member, "c.latent.npy.lz4");
  EXPECT_TRUE(altest::Contains(r[0].reason, "the member holds"));
  EXPECT_EQ(r[1].member, "d.latent.npy.lz4");
  EXPECT_TRUE(altest::Contains(r[1].reason, "LZ4 frame truncated"));
  EXPECT_EQ(r[2].member, "e.latent.npy.lz4");
  EXPECT_TRUE(altest::Contains(r[2].reason, "bad LZ4 frame"));

  // The same shard gzip'ed and LZ4'ed whole: the same index content.
  for (const char *filter : {"gzip", "lz4"}) {
    std::string z = TmpPath(std::string("lz4m.tar.") + filter);
    altest::CompressFile(path, z, filter);
    al_index *zi = Build({z});
    ASSERT_NE(zi, nullptr);
    altest::ExpectSameIndex(idx, zi, false);
    al_index_free(zi);
  }

  // A corrupt block past the header: the header decodes and the sample is indexed (the
  // stream verifies the frame's checksum when it reads the data).
  std::string p2 = TmpPath("lz4bad.tar");
  altest::WriteTar(p2, {{"a.json", Json("\"width\": 416, \"height\": 240, \"frames\": 17")},
                        {"a.latent.npy.lz4", bad}});
  al_index *bi = Build({p2});
  ASSERT_NE(bi, nullptr);
  EXPECT_EQ(al_index_sample_count(bi) + al_index_rejected_count(bi), 1u);
  al_index_free(bi);
  al_index_free(idx);
}

// The fingerprint covers each typed member's shape: two shards that differ only in the
// shape of a typed member (same bytes, same offsets) do not pass for one another.
TEST(TypedIndex, FingerprintCoversTypedShape) {
  std::string a = TmpPath("fp_a/s.tar"), b = TmpPath("fp_b/s.tar");
  mkdir(TmpPath("fp_a").c_str(), 0755);
  mkdir(TmpPath("fp_b").c_str(), 0755);
  altest::WriteTar(a, {{"k.json", Json("\"width\": 64, \"height\": 64")},
                       {"k.t5.npy", Npy("<f4", {4, 8}, 4)}});
  altest::WriteTar(b, {{"k.json", Json("\"width\": 64, \"height\": 64")},
                       {"k.t5.npy", Npy("<f4", {8, 4}, 4)}});
  ASSERT_EQ(altest::FileSize(a), altest::FileSize(b));
  al_index *x = Build({a}), *y = Build({b});
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  EXPECT_NE(al_index_fingerprint(x), al_index_fingerprint(y));
  // The same shard at another path keeps its fingerprint.
  std::string c = TmpPath("fp_c.tar");
  altest::WriteTar(c, {{"k.json", Json("\"width\": 64, \"height\": 64")},
                       {"k.t5.npy", Npy("<f4", {4, 8}, 4)}});
  al_index_free(y);
  std::string d = TmpPath("fp_b/fp_c.tar");
  altest::WriteTar(d, {{"k.json", Json("\"width\": 64, \"height\": 64")},
                       {"k.t5.npy", Npy("<f4", {4, 8}, 4)}});
  al_index *u = Build({c}), *v = Build({d});
  EXPECT_EQ(al_index_fingerprint(u), al_index_fingerprint(v));
  al_index_free(u);
  al_index_free(v);
  al_index_free(x);
}

// Frame-count aliases; a video-looking sample without a known frame field is kept and
// warned about (listed with its key), never silently an image; warnings survive save/load.
TEST(TypedIndex, FrameAliasesAndWarnings) {
  std::string path = TmpPath("frames.tar");
  altest::WriteTar(path, {{"a.json", Json("\"width\": 64, \"height\": 64, \"nb_frames\": 49")},
                          {"b.json", Json("\"width\": 64, \"height\": 64, \"frame_count\": 33")},
                          {"c.json", Json("\"width\": 64, \"height\": 64, \"length\": 17")},
                          {"d.json", Json("\"width\": 64, \"height\": 64, \"fps\": 25")},
                          {"e.json", Json("\"width\": 64, \"height\": 64, \"duration\": 2, "
                                          "\"fps\": 10")},
                          {"f.json", Json("\"width\": 64, \"height\": 64")},
                          {"g.json", Json("\"width\": 64, \"height\": 64, \"fps\": 0")},
                          {"h.json", Json("\"width\": 64, \"height\": 64, \"n_frames\": 81, "
                                          "\"fps\": 24")}});
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 8u) << RejectedText(idx);
  altest::ExpectSample(idx, 0, "a", 64, 64, 49, 0);
  altest::ExpectSample(idx, 1, "b", 64, 64, 33, 0);
  altest::ExpectSample(idx, 2, "c", 64, 64, 17, 0);
  altest::ExpectSample(idx, 3, "d", 64, 64, 1, 25);
  altest::ExpectSample(idx, 4, "e", 64, 64, 20, 10);
  ASSERT_EQ(al_index_warning_count(idx), 3u);
  const char *keys[] = {"d", "e", "h"};
  for (size_t i = 0; i < 3; i++) {
    al_rejected_info w = AL_REJECTED_INFO_INIT;
    ASSERT_EQ(al_index_warning(idx, i, &w), AL_OK);
    EXPECT_STREQ(w.key, keys[i]);
    EXPECT_EQ(std::string(w.member), std::string(keys[i]) + ".json");
    EXPECT_TRUE(altest::Contains(w.reason, "no frame-count field"));
    EXPECT_TRUE(altest::Contains(w.reason, "--fields frames=NAME"));
  }
  al_rejected_info w = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_warning(idx, 0, &w), AL_OK);
  EXPECT_TRUE(altest::Contains(w.reason, "indexed as an image"));
  ASSERT_EQ(al_index_warning(idx, 1, &w), AL_OK);
  EXPECT_TRUE(altest::Contains(w.reason, "indexed as 20 frames from duration x fps"));
  EXPECT_EQ(al_index_warning(idx, 3, &w), AL_ERANGE);

  std::string f = TmpPath("frames.alidx");
  ASSERT_EQ(al_index_save(idx, f.c_str()), AL_OK);
  al_index *back = nullptr;
  ASSERT_EQ(al_index_load(&back, f.c_str()), AL_OK) << al_last_error();
  altest::ExpectSameIndex(idx, back);
  al_index_free(back);
  al_index_free(idx);

  // --fields frames=n_frames maps the name: h has 81 frames and no warning.
  al_index_options o{};
  o.field_frames = "n_frames";
  idx = Build({path}, 2, AL_OK, &o);
  ASSERT_NE(idx, nullptr);
  altest::ExpectSample(idx, 7, "h", 64, 64, 81, 24);
  EXPECT_EQ(al_index_warning_count(idx), 2u);
  al_index_free(idx);
}

// A warning whose sample is dropped as a duplicate key goes with it.
TEST(TypedIndex, WarningOfDuplicateDropped) {
  std::string a = TmpPath("dupw_a.tar"), b = TmpPath("dupw_b.tar");
  altest::WriteTar(a, {{"k.json", Json("\"width\": 64, \"height\": 64")}});
  altest::WriteTar(b, {{"k.json", Json("\"width\": 64, \"height\": 64, \"fps\": 30")},
                       {"m.json", Json("\"width\": 64, \"height\": 64, \"fps\": 30")}});
  al_index *idx = Build({a, b});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 2u);
  ASSERT_EQ(al_index_warning_count(idx), 1u);
  al_rejected_info w = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_warning(idx, 0, &w), AL_OK);
  EXPECT_STREQ(w.key, "m");
  EXPECT_EQ(w.shard, 1u);
  al_index_free(idx);
}

} // namespace

namespace {

// Typed members, warnings and rejections: a byte-identical index file whatever the thread
// count (the merge re-interns shapes in shard order).
TEST(TypedIndex, DeterministicAcrossThreads) {
  std::vector<std::string> paths;
  for (int s = 0; s < 4; s++) {
    std::string path = TmpPath("det" + std::to_string(s) + ".tar");
    altest::Members m;
    for (int i = 0; i < 6; i++) {
      std::string k = "s" + std::to_string(s) + "_" + std::to_string(i);
      uint64_t t = 1 + (uint64_t)((s + i) % 3), h = 4 + (uint64_t)i, w = 8 + (uint64_t)s;
      m.push_back({k + ".json", Json("\"fps\": 24")});
      m.push_back({k + ".latent.npy", Latent(4, t, h, w)});
      m.push_back({k + ".t5.npy", Npy("<f2", {(uint64_t)(3 + i), 16}, 2)});
    }
    m.push_back({"w" + std::to_string(s) + ".json", Json("\"width\": 64, \"height\": 64, "
                                                         "\"duration\": 1.5, \"fps\": 8")});
    m.push_back({"x" + std::to_string(s) + ".json", Json("\"fps\": 24")});
    m.push_back({"x" + std::to_string(s) + ".latent.npy", Npy("<f2", {4, 4}, 2)});
    altest::WriteTar(path, m);
    paths.push_back(path);
  }
  std::string f1 = TmpPath("det1.alidx"), f4 = TmpPath("det4.alidx");
  al_index *a = Build(paths, 1), *b = Build(paths, 4);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(al_index_sample_count(a), 28u) << RejectedText(a);
  EXPECT_EQ(al_index_warning_count(a), 4u);
  EXPECT_EQ(al_index_rejected_count(a), 4u);
  ASSERT_EQ(al_index_save(a, f1.c_str()), AL_OK);
  ASSERT_EQ(al_index_save(b, f4.c_str()), AL_OK);
  EXPECT_TRUE(altest::ReadBytes(f1) == altest::ReadBytes(f4));
  altest::ExpectSameIndex(a, b);
  al_index_free(a);
  al_index_free(b);
}

} // namespace
