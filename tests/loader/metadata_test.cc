// KEY.json as other tools write it (ffprobe's numeric strings and rational frame rates),
// frames taken from a typed latent when the JSON has none, NUL bytes refused, and the
// .npy header limit counted and reported the same way.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "loader/tensor_header_internal.h"
}

using altest::Build;
using altest::RejectedText;
using altest::TmpPath;

namespace {

// An .npy member (version 1.0, header padded to 64 bytes) of zeros, float16.
std::string Latent(const std::vector<uint64_t> &shape) {
  std::string sh = "(";
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); i++) {
    sh += std::to_string(shape[i]) + (i + 1 < shape.size() ? ", " : "");
    n *= shape[i];
  }
  sh += ")";
  std::string h = "{'descr': '<f2', 'fortran_order': False, 'shape': " + sh + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += (char)(h.size() & 0xff);
  out += (char)(h.size() >> 8);
  return out + h + std::string(n * 2, '\0');
}

// One sample per JSON, each followed by the good sample "z"; returns the index.
al_index *IndexJsons(const std::string &name, const std::vector<std::string> &jsons) {
  altest::Members m;
  for (size_t i = 0; i < jsons.size(); i++)
    m.push_back({"s" + std::to_string(i) + ".json", jsons[i]});
  m.push_back({"z.json", "{\"width\": 16, \"height\": 16}"});
  std::string path = TmpPath(name + ".tar");
  altest::WriteTar(path, m);
  return Build({path});
}

std::string Reason(const al_index *idx, size_t i) {
  al_rejected_info r = AL_REJECTED_INFO_INIT;
  EXPECT_EQ(al_index_rejected(idx, i, &r), AL_OK);
  return r.reason;
}

TEST(Metadata, FfprobeNumericStringsAndRationalRates) {
  al_index *
      idx = IndexJsons("ffprobe",
                       {"{\"width\": 640, \"height\": 480, \"nb_frames\": \"81\", \"r_frame_rate\": \"30000/1001\"}",
                        "{\"width\": \"832\", \"height\": \"480\", \"frames\": \"49\", \"fps\": \"24\"}",
                        "{\"width\": 64, \"height\": 64, \"avg_frame_rate\": \"25/1\", \"duration\": \"2.000000\"}",
                        "{\"width\": 64, \"height\": 64, \"frames\": 9, \"fps\": \"29.97\"}"});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 5u) << RejectedText(idx);
  EXPECT_EQ(al_index_rejected_count(idx), 0u);
  altest::ExpectSample(idx, 0, "s0", 640, 480, 81, (float)(30000.0 / 1001.0));
  altest::ExpectSample(idx, 1, "s1", 832, 480, 49, 24);
  altest::ExpectSample(idx, 2, "s2", 64, 64, 50, 25); // 2 s x 25 fps, warned about
  altest::ExpectSample(idx, 3, "s3", 64, 64, 9, 29.97f);
  EXPECT_EQ(al_index_warning_count(idx), 1u);
  al_index_free(idx);
}

TEST(Metadata, ZeroOverZeroRateIsUnknown) {
  /* ffprobe writes avg_frame_rate "0/0" for a still image: the rate is unknown (fps 0). */
  al_index *idx = IndexJsons("zero",
                             {"{\"width\": 64, \"height\": 48, \"avg_frame_rate\": \"0/0\"}",
                              "{\"width\": 64, \"height\": 48, \"nb_frames\": \"9\", "
                              "\"avg_frame_rate\": \"0/0\"}"});
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_rejected_count(idx), 0u) << RejectedText(idx);
  altest::ExpectSample(idx, 0, "s0", 64, 48, 1, 0);
  altest::ExpectSample(idx, 1, "s1", 64, 48, 9, 0);
  al_index_free(idx);
}

struct BadString {
  const char *json;
  const char *reason;
};

TEST(Metadata, NumericStringsAreWholeAndStrict) {
  const BadString cases[] = {
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"81x\"}",
       "nb_frames must be a number or a string holding one, got the string \"81x\""},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"\"}",
       "nb_frames must be a number or a string holding one, got the string \"\""},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \" 81\"}", "got the string \" 81\""},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"81 \"}", "got the string \"81 \""},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"+81\"}", "got the string \"+81\""},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"0x51\"}", "got the string \"0x51\""},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"8.5\"}", "must be a whole number"},
      {"{\"width\": 64, \"height\": 64, \"nb_frames\": \"0\"}", "nb_frames must be >= 1"},
      {"{\"width\": \"64px\", \"height\": 64}", "width must be a number or a string"},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"r_frame_rate\": \"30000/0\"}",
       "r_frame_rate must be a number, a string holding one or a ratio \"A/B\" (B > 0), got the "
       "string \"30000/0\""},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"r_frame_rate\": \"30000/\"}",
       "got the string \"30000/\""},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"r_frame_rate\": \"/1001\"}",
       "got the string \"/1001\""},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"r_frame_rate\": \"-30/1\"}",
       "got the string \"-30/1\""},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"fps\": \"nan\"}",
       "got the string \"nan\""},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"fps\": \"1e999\"}",
       "got the string \"1e999\""},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"fps\": \"5000/1\"}",
       "r_frame_rate 5000 is outside [0, 1000]"},
      {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"fps\": [30]}",
       "fps must be a number, got an array"},
  };
  for (const BadString &c : cases) {
    al_index *idx = IndexJsons("strict", {c.json});
    ASSERT_NE(idx, nullptr);
    EXPECT_EQ(al_index_sample_count(idx), 1u) << c.json << "\n" << RejectedText(idx);
    ASSERT_EQ(al_index_rejected_count(idx), 1u) << c.json;
    std::string want = c.reason;
    if (want.rfind("r_frame_rate 5000", 0) == 0) want = "fps 5000 is outside [0, 1000]";
    EXPECT_TRUE(altest::Contains(Reason(idx, 0), want)) << c.json;
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    ASSERT_EQ(al_index_rejected(idx, 0, &r), AL_OK);
    EXPECT_STREQ(r.member, "s0.json");
    EXPECT_EQ(r.offset, 0u);
    al_index_free(idx);
  }
}

// The frame-rate names and their order: the configured one, fps, frame_rate, r_frame_rate,
// avg_frame_rate (the first present wins).
TEST(Metadata, RateFieldPrecedence) {
  al_index *
      idx = IndexJsons("rates",
                       {"{\"width\": 64, \"height\": 64, \"frames\": 9, \"avg_frame_rate\": \"24/1\", "
                        "\"r_frame_rate\": \"30/1\"}",
                        "{\"width\": 64, \"height\": 64, \"frames\": 9, \"r_frame_rate\": \"30/1\", "
                        "\"frame_rate\": 25}"});
  ASSERT_EQ(al_index_sample_count(idx), 3u) << RejectedText(idx);
  altest::ExpectSample(idx, 0, "s0", 64, 64, 9, 30);
  altest::ExpectSample(idx, 1, "s1", 64, 64, 9, 25);
  al_index_free(idx);
}

// A clip with an fps but no frame count, and a typed latent of T = 21: its frames come from
// the grid ((21 - 1) x 4 + 1 = 81), with a warning, instead of "1 frames gives T=1".
TEST(Metadata, FramesFromTheTypedLatentWithAWarning) {
  std::string path = TmpPath("latent_frames.tar");
  altest::WriteTar(path, {{"a.json", "{\"width\": 640, \"height\": 480, \"fps\": 30}"},
                          {"a.latent.npy", Latent({16, 21, 60, 80})},
                          // duration x fps = 80 frames gives T = 20, the grid says 21
                          {"b.json",
                           "{\"width\": 640, \"height\": 480, \"duration\": 2.666, "
                           "\"fps\": 30}"},
                          {"b.latent.npy", Latent({16, 21, 60, 80})},
                          // duration x fps agrees with the grid: kept as before
                          {"c.json",
                           "{\"width\": 640, \"height\": 480, \"duration\": 2.7, "
                           "\"fps\": 30}"},
                          {"c.latent.npy", Latent({16, 21, 60, 80})},
                          // a frame count that disagrees is still a mismatch
                          {"d.json", "{\"width\": 640, \"height\": 480, \"frames\": 5}"},
                          {"d.latent.npy", Latent({16, 21, 60, 80})},
                          // an image JSON with an image latent: no warning
                          {"e.json", "{\"width\": 640, \"height\": 480}"},
                          {"e.latent.npy", Latent({16, 1, 60, 80})}});
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  ASSERT_EQ(al_index_sample_count(idx), 4u) << RejectedText(idx);
  altest::ExpectSample(idx, 0, "a", 640, 480, 81, 30);
  altest::ExpectSample(idx, 1, "b", 640, 480, 81, 30);
  altest::ExpectSample(idx, 2, "c", 640, 480, 81, 30);
  altest::ExpectSample(idx, 3, "e", 640, 480, 1, 0);
  ASSERT_EQ(al_index_rejected_count(idx), 1u);
  EXPECT_TRUE(altest::Contains(Reason(idx, 0), "640x480 x 5 frames gives T, H, W = 2, 60, 80"));
  ASSERT_EQ(al_index_warning_count(idx), 3u);
  al_rejected_info w = AL_REJECTED_INFO_INIT;
  ASSERT_EQ(al_index_warning(idx, 0, &w), AL_OK);
  EXPECT_STREQ(w.key, "a");
  EXPECT_STREQ(w.member, "a.json");
  EXPECT_TRUE(altest::Contains(w.reason,
                               "indexed as 81 frames from the latent grid (T = 21, "
                               "VAE time stride 4)"))
      << w.reason;
  ASSERT_EQ(al_index_warning(idx, 1, &w), AL_OK);
  EXPECT_STREQ(w.key, "b");
  EXPECT_TRUE(altest::Contains(w.reason, "indexed as 81 frames from the latent grid"));
  EXPECT_TRUE(altest::Contains(w.reason, "the JSON alone gives 80 (duration x fps)"));
  ASSERT_EQ(al_index_warning(idx, 2, &w), AL_OK);
  EXPECT_STREQ(w.key, "c");
  EXPECT_TRUE(altest::Contains(w.reason, "indexed as 81 frames from duration x fps"));
  al_index_free(idx);
}

// A raw NUL byte is not JSON (RFC 8259): refused, naming the member and the byte.
TEST(Metadata, NulByteIsRefused) {
  const std::string a = std::string("{\"width\":720,\"height\":720,\"frames\":5") + '\0' + "}";
  const std::string b = std::string("{\"width\":720") + '\0' + ",\"height\":720}";
  const std::string c = std::string("{\"width\":720,\"height\":720}") + '\0';
  al_index *idx = IndexJsons("nul", {a, b, c});
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(al_index_sample_count(idx), 1u) << RejectedText(idx);
  ASSERT_EQ(al_index_rejected_count(idx), 3u) << RejectedText(idx);
  const size_t at[] = {36, 12, 26};
  for (size_t i = 0; i < 3; i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    ASSERT_EQ(al_index_rejected(idx, i, &r), AL_OK);
    EXPECT_EQ(std::string(r.member), "s" + std::to_string(i) + ".json");
    EXPECT_EQ(r.offset, 1024u * i);
    EXPECT_TRUE(altest::Contains(r.reason, "broken JSON: NUL byte at byte " +
                                               std::to_string(at[i]) + " of the metadata"))
        << r.reason;
  }
  al_index_free(idx);
}

// The limit counts the whole header (preamble + dict), and the message says so.
TEST(Metadata, NpyHeaderLimitCountsThePreamble) {
  auto v2 = [](uint32_t dict) {
    std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
    for (int k = 0; k < 4; k++) b.push_back((uint8_t)(dict >> (8 * k)));
    return b;
  };
  theader th;
  size_t need = 0;
  // 12 + 1048564 = 1048576: at the limit, accepted (more bytes wanted).
  std::vector<uint8_t> ok = v2(THEADER_MAX_HEADER_BYTES - 12);
  EXPECT_EQ(theader_parse(THEADER_KIND_NPY, ok.data(), ok.size(), 1u << 21, nullptr, &th, &need),
            AL_ERANGE);
  EXPECT_EQ(need, (size_t)THEADER_MAX_HEADER_BYTES);
  al_clear_error();
  // One byte over: 12 + 1048565 = 1048577.
  std::vector<uint8_t> over = v2(THEADER_MAX_HEADER_BYTES - 11);
  EXPECT_EQ(theader_parse(THEADER_KIND_NPY, over.data(), over.size(), 1u << 21, nullptr, &th,
                          &need),
            AL_EFORMAT);
  EXPECT_TRUE(altest::Contains(al_last_error(),
                               "npy header: byte 8: header of 1048577 bytes (12-byte preamble + "
                               "1048565-byte dict) exceeds the limit of 1048576 bytes"))
      << al_last_error();
  // A 4 GiB dict length: the same wording.
  std::vector<uint8_t> huge = v2(0xFFFFFFFFu);
  EXPECT_EQ(theader_parse(THEADER_KIND_NPY, huge.data(), huge.size(), 1u << 21, nullptr, &th,
                          &need),
            AL_EFORMAT);
  EXPECT_TRUE(altest::Contains(al_last_error(),
                               "header of 4294967307 bytes (12-byte preamble + "
                               "4294967295-byte dict) exceeds the limit of "
                               "1048576 bytes"))
      << al_last_error();
  // safetensors: the 8-byte length counted the same way.
  std::vector<uint8_t> st(8, 0);
  uint64_t n = THEADER_MAX_HEADER_BYTES - 7;
  for (int k = 0; k < 8; k++) st[k] = (uint8_t)(n >> (8 * k));
  EXPECT_EQ(theader_parse(THEADER_KIND_SAFETENSORS, st.data(), st.size(), 1u << 21, nullptr, &th,
                          &need),
            AL_EFORMAT);
  EXPECT_TRUE(altest::Contains(al_last_error(),
                               "safetensors header: byte 0: header of 1048577 bytes (8-byte "
                               "length + 1048569-byte JSON) exceeds the limit of 1048576 bytes"))
      << al_last_error();
  al_clear_error();
}

} // namespace
