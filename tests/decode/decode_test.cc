// decode/al_decode.h: probe and decode of clips and images encoded at test time by ffmpeg.
// Frames carry their index (media_fixtures.h), so the planned frame indices are asserted
// exactly; geometry and rotation are checked against references computed here (and against
// ffmpeg's own rotation); truncated, corrupt, variable-rate and miscounted input fail located.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "decode/al_decode.h"
}
#include "tests/decode/media_fixtures.h"

using namespace altest;

namespace {

al_decode_input Mem(const Bytes &b, const char *ext, const char *where = "s-0.tar: key 'k'") {
  al_decode_input in = AL_DECODE_INPUT_INIT;
  in.data = b.data();
  in.size = b.size();
  in.ext = ext;
  in.where = where;
  return in;
}

// A read callback over bytes that counts what it serves (and can fail past an offset).
struct Ranged {
  const Bytes *b;
  uint64_t served = 0;
  uint64_t fail_at = UINT64_MAX;
  static int64_t Read(void *ctx, uint64_t off, void *buf, size_t n) {
    Ranged *r = (Ranged *)ctx;
    if (off + n > r->fail_at)
      return al_set_error(AL_EIO, "pread at %llu: Input/output error", (unsigned long long)off);
    if (off >= r->b->size()) return 0;
    size_t k = std::min(n, (size_t)(r->b->size() - off));
    std::memcpy(buf, r->b->data() + off, k);
    r->served += k;
    return (int64_t)k;
  }
};

al_decode_input Cb(Ranged *r, const char *ext) {
  al_decode_input in = AL_DECODE_INPUT_INIT;
  in.read = Ranged::Read;
  in.read_ctx = r;
  in.size = r->b->size();
  in.ext = ext;
  in.where = "s-0.tar: key 'k' member 'k.mp4'";
  return in;
}

// Decodes t frames at w x h; returns the frame indices read back from the grey levels.
std::vector<int> Indices(const al_decode_input &in, int w, int h, int t, const al_decode_options *o,
                         int rows = 0) {
  std::vector<uint8_t> out((size_t)t * w * h * 3);
  int rc = al_decode_frames(&in, w, h, t, o, out.data(), out.size());
  EXPECT_EQ(rc, AL_OK) << al_last_error();
  std::vector<int> idx;
  if (rc != AL_OK) return idx;
  for (int f = 0; f < t; f++) idx.push_back(IndexOf(MeanRows(out, w, h, f, 0, rows ? rows : h)));
  return idx;
}

std::vector<int> Expected(int t, int s0, int l) {
  std::vector<int> v;
  for (int i = 0; i < t; i++) v.push_back(s0 + (int)((long long)i * (l ? l : t) / t));
  return v;
}

} // namespace

TEST(DecodeContract, FrameIndexFormula) {
  EXPECT_EQ(al_decode_frame_index(0, 17, 0, 0), 0u);
  EXPECT_EQ(al_decode_frame_index(16, 17, 0, 0), 16u);
  EXPECT_EQ(al_decode_frame_index(16, 17, 5, 40), 5u + 16u * 40u / 17u);
  EXPECT_EQ(al_decode_frame_index(3, 4, 0, 2), 1u); // a span shorter than T repeats frames
  EXPECT_EQ(al_decode_frame_index(4, 4, 0, 0), UINT32_MAX);
  EXPECT_EQ(al_decode_frame_index(0, 0, 0, 0), UINT32_MAX);
}

TEST(DecodeContract, GeometryAgainstReference) {
  const uint32_t cases[][4] = {{1280, 720, 832, 480}, {720, 1280, 480, 832}, {1920, 1080, 640, 368},
                               {640, 480, 832, 480},  {333, 777, 96, 96},    {832, 480, 832, 480}};
  for (const auto &c : cases) {
    al_decode_geom g = AL_DECODE_GEOM_INIT;
    ASSERT_EQ(al_decode_geometry(c[0], c[1], c[2], c[3], &g), AL_OK) << al_last_error();
    double s = std::max((double)c[2] / c[0], (double)c[3] / c[1]);
    uint32_t ws = std::max(c[2], (uint32_t)std::floor(c[0] * s + 0.5));
    uint32_t hs = std::max(c[3], (uint32_t)std::floor(c[1] * s + 0.5));
    EXPECT_EQ(g.scaled_width, ws) << c[0] << "x" << c[1];
    EXPECT_EQ(g.scaled_height, hs) << c[0] << "x" << c[1];
    EXPECT_EQ(g.crop_x, (ws - c[2]) / 2);
    EXPECT_EQ(g.crop_y, (hs - c[3]) / 2);
  }
  al_decode_geom g = AL_DECODE_GEOM_INIT;
  EXPECT_EQ(al_decode_geometry(1280, 720, 832, 480, &g), AL_OK);
  EXPECT_EQ(g.scaled_width, 853u); // 1280 * 480 / 720 = 853.3
  EXPECT_EQ(g.crop_x, 10u);
  EXPECT_EQ(al_decode_geometry(0, 720, 832, 480, &g), AL_EINVAL);
  al_decode_geom small = g;
  small.struct_size = 0;
  EXPECT_EQ(al_decode_geometry(1280, 720, 832, 480, &small), AL_EINVAL);
}

TEST(DecodeContract, KindOfExtensions) {
  EXPECT_EQ(al_decode_kind_of("mp4"), AL_MEDIA_VIDEO);
  EXPECT_EQ(al_decode_kind_of("WEBM"), AL_MEDIA_VIDEO);
  EXPECT_EQ(al_decode_kind_of("mkv"), AL_MEDIA_VIDEO);
  EXPECT_EQ(al_decode_kind_of("jpeg"), AL_MEDIA_IMAGE);
  EXPECT_EQ(al_decode_kind_of("webp"), AL_MEDIA_IMAGE);
  EXPECT_EQ(al_decode_kind_of("latent.npy"), AL_MEDIA_NONE);
  EXPECT_EQ(al_decode_kind_of(nullptr), AL_MEDIA_NONE);
}

TEST(DecodeProbe, Mp4HeaderOnlyRangedRead) {
  // A large stream (noise rows) with the moov box at the end, as ffmpeg writes by default.
  Bytes clip = IndexClip("big.mp4", 320, 240, 60, 25,
                         "-c:v libx264 -preset ultrafast -crf 10 -pix_fmt yuv420p -threads 1 -g 10",
                         120);
  ASSERT_GT(clip.size(), 1000000u);
  Ranged r{&clip};
  al_decode_input in = Cb(&r, "mp4");
  al_media_info mi = AL_MEDIA_INFO_INIT;
  ASSERT_EQ(al_decode_probe(&in, &mi), AL_OK) << al_last_error();
  EXPECT_EQ(mi.kind, AL_MEDIA_VIDEO);
  EXPECT_EQ(mi.width, 320u);
  EXPECT_EQ(mi.height, 240u);
  EXPECT_EQ(mi.frames, 60u);
  EXPECT_NEAR(mi.fps, 25.0, 1e-6);
  EXPECT_EQ(mi.rotation, 0u);
  EXPECT_EQ(mi.vfr, 0u);
  EXPECT_EQ(mi.frames_counted, 0u);
  EXPECT_EQ(mi.decodable, 1u);
  EXPECT_STREQ(mi.codec, "h264");
  EXPECT_STREQ(mi.container, "mov");
  // The header only: the sample table at the end and the first box, not the mdat.
  EXPECT_LT(r.served, clip.size() / 10) << r.served << " of " << clip.size();
  EXPECT_EQ(mi.bytes_read, r.served);

  // Decoding the first 10 frames reads about their share; the last 10 skip the start (seek).
  al_decode_options o = AL_DECODE_OPTIONS_INIT;
  o.threads = 1;
  Ranged r1{&clip};
  al_decode_input in1 = Cb(&r1, "mp4");
  EXPECT_EQ(Indices(in1, 64, 48, 10, &o, 12), Expected(10, 0, 0));
  EXPECT_LT(r1.served, clip.size() * 4 / 10) << r1.served << " of " << clip.size();
  Ranged r2{&clip};
  al_decode_input in2 = Cb(&r2, "mp4");
  o.span_start = 50;
  EXPECT_EQ(Indices(in2, 64, 48, 10, &o, 12), Expected(10, 50, 0));
  EXPECT_LT(r2.served, clip.size() * 4 / 10) << r2.served << " of " << clip.size();
}

struct CodecCase {
  const char *name, *ext, *args;
  int frames_counted;
  const char *codec;
};

class DecodeCodecs : public ::testing::TestWithParam<CodecCase> {};

TEST_P(DecodeCodecs, PlannedFrameIndicesExactly) {
  const CodecCase &c = GetParam();
  Bytes clip = IndexClip(std::string(c.name) + "." + c.ext, 96, 64, 50, 25, c.args);
  ASSERT_FALSE(clip.empty());
  al_decode_input in = Mem(clip, c.ext);
  al_media_info mi = AL_MEDIA_INFO_INIT;
  ASSERT_EQ(al_decode_probe(&in, &mi), AL_OK) << al_last_error();
  EXPECT_EQ(mi.frames, 50u);
  EXPECT_EQ(mi.width, 96u);
  EXPECT_EQ(mi.height, 64u);
  EXPECT_NEAR(mi.fps, 25.0, 0.05);
  EXPECT_EQ(mi.vfr, 0u);
  EXPECT_EQ((int)mi.frames_counted, c.frames_counted);
  EXPECT_STREQ(mi.codec, c.codec);

  al_decode_options o = AL_DECODE_OPTIONS_INIT;
  // The default span: the first T frames.
  EXPECT_EQ(Indices(in, 48, 32, 17, &o), Expected(17, 0, 0));
  // A span sampled evenly, starting past a keyframe (a seek).
  o.span_start = 5;
  o.span_frames = 40;
  EXPECT_EQ(Indices(in, 48, 32, 17, &o), Expected(17, 5, 40));
  o.span_start = 33;
  o.span_frames = 17;
  o.threads = 1;
  EXPECT_EQ(Indices(in, 48, 32, 17, &o), Expected(17, 33, 17));
  // The whole clip into 9 frames, multi-threaded.
  o.span_start = 0;
  o.span_frames = 50;
  o.threads = 4;
  EXPECT_EQ(Indices(in, 48, 32, 9, &o), Expected(9, 0, 50));
  // Past the end: AL_ERANGE naming the frame.
  o.span_start = 40;
  o.span_frames = 17;
  std::vector<uint8_t> out(17 * 48 * 32 * 3);
  EXPECT_EQ(al_decode_frames(&in, 48, 32, 17, &o, out.data(), out.size()), AL_ERANGE);
  EXPECT_TRUE(ErrorContains("s-0.tar: key 'k': frame 56"));
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, DecodeCodecs,
    ::testing::Values(CodecCase{"h264", "mp4",
                                "-c:v libx264 -preset ultrafast -qp 0 -pix_fmt "
                                "yuv420p -threads 1 -g 10 -bf 2",
                                0, "h264"},
                      CodecCase{"h264_mov", "mov",
                                "-c:v libx264 -preset ultrafast -qp 0 -g 12 "
                                "-threads 1 -movflags +faststart",
                                0, "h264"},
                      CodecCase{"hevc", "mkv",
                                "-c:v libx265 -preset ultrafast -x265-params "
                                "lossless=1:log-level=error:keyint=10 -pix_fmt "
                                "yuv420p",
                                1, "hevc"},
                      CodecCase{"vp9", "webm",
                                "-c:v libvpx-vp9 -lossless 1 -g 10 -deadline "
                                "realtime -cpu-used 8",
                                1, "vp9"},
                      CodecCase{"av1", "mkv",
                                "-c:v libaom-av1 -crf 0 -cpu-used 8 -g 10 "
                                "-row-mt 1",
                                1, "av1"}),
    [](const ::testing::TestParamInfo<CodecCase> &i) { return std::string(i.param.name); });

// A pattern of known geometry: a white rectangle [rx0, rx1) x [ry0, ry1) on black.
static bool InRect(double x, double y) { return x >= 160 && x < 240 && y >= 32 && y < 96; }

static Pixel RectPixels() {
  return [](int, int x, int y, unsigned char rgb[3]) {
    rgb[0] = rgb[1] = rgb[2] = InRect(x + 0.5, y + 0.5) ? 255 : 0;
  };
}

// Checks a decoded (H, W) frame against the pattern mapped through scale, crop and a clockwise
// rotation, away from the rectangle's edges (2 output pixels).
static void CheckPattern(const uint8_t *img, int bw, int bh, int sw, int sh, int rot) {
  al_decode_geom g = AL_DECODE_GEOM_INIT;
  bool swap = rot == 90 || rot == 270;
  int dw = swap ? sh : sw, dh = swap ? sw : sh; // displayed source size
  ASSERT_EQ(al_decode_geometry(dw, dh, bw, bh, &g), AL_OK);
  double s = std::max((double)bw / dw, (double)bh / dh);
  int checked = 0, bad = 0;
  for (int y = 0; y < bh; y++)
    for (int x = 0; x < bw; x++) {
      // Displayed source coordinates of the output pixel centre.
      double X = (x + g.crop_x + 0.5) / s, Y = (y + g.crop_y + 0.5) / s;
      // Unrotate: displayed (X, Y) -> source (u, v).
      double u = X, v = Y;
      if (rot == 90) u = Y, v = sh - X;
      if (rot == 180) u = sw - X, v = sh - Y;
      if (rot == 270) u = sw - Y, v = X;
      double m = 2.0 / s;
      bool in = InRect(u, v), near = InRect(u - m, v) != in || InRect(u + m, v) != in ||
                                     InRect(u, v - m) != in || InRect(u, v + m) != in;
      if (near) continue;
      checked++;
      int p = img[((size_t)y * bw + x) * 3];
      if (in ? p < 200 : p > 55) bad++;
    }
  EXPECT_GT(checked, bw * bh / 2);
  EXPECT_EQ(bad, 0) << "rotation " << rot << " bucket " << bw << "x" << bh;
}

TEST(DecodeGeometry, ScaleAndCentreCropOfClipsAndImages) {
  std::string raw = RawFrames(TmpPath("rect.rgb"), 320, 180, 3, RectPixels());
  ASSERT_TRUE(Encode(raw, 320, 180, 25, H264Args(), TmpPath("rect.mp4")));
  Bytes clip = ReadBytes(TmpPath("rect.mp4"));
  const int buckets[][2] = {{96, 96}, {160, 48}, {128, 72}, {64, 112}};
  for (const auto &b : buckets) {
    std::vector<uint8_t> out((size_t)2 * b[0] * b[1] * 3);
    al_decode_input in = Mem(clip, "mp4");
    ASSERT_EQ(al_decode_frames(&in, b[0], b[1], 2, nullptr, out.data(), out.size()), AL_OK)
        << al_last_error();
    CheckPattern(out.data() + (size_t)b[0] * b[1] * 3, b[0], b[1], 320, 180, 0);
  }
  // The same pattern as images.
  std::string one = RawFrames(TmpPath("rect1.rgb"), 320, 180, 1, RectPixels());
  const char *imgs[][2] = {{"png", "-c:v png"},
                           {"jpg", "-c:v mjpeg -q:v 1"},
                           {"webp", "-c:v libwebp -lossless 1"}};
  for (const auto &im : imgs) {
    std::string path = TmpPath(std::string("rect.") + im[0]);
    ASSERT_TRUE(Encode(one, 320, 180, 25, std::string(im[1]) + " -frames:v 1 -update 1", path));
    Bytes b = ReadBytes(path);
    al_decode_input in = Mem(b, im[0]);
    al_media_info mi = AL_MEDIA_INFO_INIT;
    ASSERT_EQ(al_decode_probe(&in, &mi), AL_OK) << im[0] << ": " << al_last_error();
    EXPECT_EQ(mi.kind, AL_MEDIA_IMAGE) << im[0];
    EXPECT_EQ(mi.frames, 1u);
    EXPECT_EQ(mi.width, 320u);
    EXPECT_EQ(mi.height, 180u);
    EXPECT_EQ(mi.fps, 0.0);
    std::vector<uint8_t> out(96 * 96 * 3);
    ASSERT_EQ(al_decode_frames(&in, 96, 96, 1, nullptr, out.data(), out.size()), AL_OK)
        << im[0] << ": " << al_last_error();
    CheckPattern(out.data(), 96, 96, 320, 180, 0);
    // An image holds one frame.
    std::vector<uint8_t> two(2 * 96 * 96 * 3);
    EXPECT_EQ(al_decode_frames(&in, 96, 96, 2, nullptr, two.data(), two.size()), AL_ERANGE);
    EXPECT_TRUE(ErrorContains("frame 1"));
  }
  EXPECT_STREQ(
      [&] {
        static al_media_info mi = AL_MEDIA_INFO_INIT;
        Bytes b = ReadBytes(TmpPath("rect.webp"));
        al_decode_input in = Mem(b, nullptr); // container probed from the bytes
        EXPECT_EQ(al_decode_probe(&in, &mi), AL_OK) << al_last_error();
        return mi.codec;
      }(),
      "webp");
}

TEST(DecodeGeometry, RotationMatchesFfmpegAndTheReference) {
  std::string raw = RawFrames(TmpPath("rot.rgb"), 320, 180, 2, RectPixels());
  ASSERT_TRUE(Encode(raw, 320, 180, 25, H264Args(), TmpPath("rot.mp4")));
  for (int tag : {90, 180, 270}) {
    std::string rp = TmpPath("rot" + std::to_string(tag) + ".mp4");
    ASSERT_TRUE(Sh("ffmpeg -nostdin -hide_banner -loglevel error -y -i '" + TmpPath("rot.mp4") +
                   "' -c copy -metadata:s:v:0 rotate=" + std::to_string(tag) + " '" + rp + "'"));
    Bytes clip = ReadBytes(rp);
    al_decode_input in = Mem(clip, "mp4");
    al_media_info mi = AL_MEDIA_INFO_INIT;
    ASSERT_EQ(al_decode_probe(&in, &mi), AL_OK) << al_last_error();
    ASSERT_NE(mi.rotation, 0u) << "tag " << tag;
    bool swap = mi.rotation == 90 || mi.rotation == 270;
    EXPECT_EQ(mi.width, swap ? 180u : 320u);
    EXPECT_EQ(mi.height, swap ? 320u : 180u);
    EXPECT_EQ(mi.coded_width, 320u);
    // ffmpeg's own display of the clip (autorotate), at the displayed size, is the reference.
    std::string ref = TmpPath("rot" + std::to_string(tag) + ".raw");
    ASSERT_TRUE(Sh("ffmpeg -nostdin -hide_banner -loglevel error -y -i '" + rp +
                   "' -frames:v 1 -f rawvideo -pix_fmt rgb24 '" + ref + "'"));
    Bytes want = ReadBytes(ref);
    ASSERT_EQ(want.size(), (size_t)mi.width * mi.height * 3);
    std::vector<uint8_t> out(want.size());
    ASSERT_EQ(al_decode_frames(&in, mi.width, mi.height, 1, nullptr, out.data(), out.size()), AL_OK)
        << al_last_error();
    size_t off = 0;
    for (size_t i = 0; i < out.size(); i++) off += std::abs((int)out[i] - (int)want[i]) > 48;
    EXPECT_LT(off, out.size() / 200) << "rotation " << mi.rotation << ": " << off << " bytes off";
    // And the pattern through scale, crop and rotation into a bucket.
    int bw = swap ? 72 : 128, bh = swap ? 128 : 72;
    std::vector<uint8_t> b((size_t)bw * bh * 3);
    ASSERT_EQ(al_decode_frames(&in, bw, bh, 1, nullptr, b.data(), b.size()), AL_OK);
    CheckPattern(b.data(), bw, bh, 320, 180, (int)mi.rotation);
    std::vector<uint8_t> sq(64 * 64 * 3);
    ASSERT_EQ(al_decode_frames(&in, 64, 64, 1, nullptr, sq.data(), sq.size()), AL_OK);
    CheckPattern(sq.data(), 64, 64, 320, 180, (int)mi.rotation);
  }
}

TEST(DecodeBadInput, TruncatedCorruptAndMiscounted) {
  // moov at the end: cut off, the container is unreadable.
  Bytes clip = IndexClip("trunc.mp4", 96, 64, 40, 25, H264Args());
  ASSERT_FALSE(clip.empty());
  Bytes cut(clip.begin(), clip.begin() + clip.size() / 2);
  al_decode_input in = Mem(cut, "mp4", "s-1.tar: key 'k7' member 'k7.mp4' at byte 1536");
  al_media_info mi = AL_MEDIA_INFO_INIT;
  EXPECT_EQ(al_decode_probe(&in, &mi), AL_EFORMAT);
  EXPECT_TRUE(ErrorContains("s-1.tar: key 'k7' member 'k7.mp4' at byte 1536: not a readable"));

  // moov first (faststart), the stream cut: the header is whole, frames are missing.
  Bytes fs = IndexClip("fast.mp4", 96, 64, 40, 25,
                       "-c:v libx264 -preset ultrafast -crf 8 -pix_fmt yuv420p -threads 1 -g 10 "
                       "-movflags +faststart",
                       32);
  ASSERT_FALSE(fs.empty());
  Bytes fcut(fs.begin(), fs.begin() + fs.size() * 6 / 10);
  in = Mem(fcut, "mp4", "s-1.tar: key 'k8'");
  ASSERT_EQ(al_decode_probe(&in, &mi), AL_OK) << al_last_error();
  EXPECT_EQ(mi.frames, 40u); // the header still counts them
  al_decode_options o = AL_DECODE_OPTIONS_INIT;
  o.span_frames = 40;
  std::vector<uint8_t> out((size_t)40 * 48 * 32 * 3);
  int rc = al_decode_frames(&in, 48, 32, 40, &o, out.data(), out.size());
  EXPECT_EQ(rc, AL_EFORMAT);
  EXPECT_TRUE(ErrorContains("s-1.tar: key 'k8': frame "));
  // The frames before the cut still decode.
  o.span_frames = 0;
  EXPECT_EQ(Indices(in, 48, 32, 8, &o, 8), Expected(8, 0, 0));

  // Corrupt bytes inside the stream (past the header): an error, never concealed frames.
  Bytes bad = fs;
  for (size_t i = bad.size() / 2; i < bad.size() / 2 + 4096 && i < bad.size(); i++)
    bad[i] = (unsigned char)(i * 131u);
  in = Mem(bad, "mp4", "s-1.tar: key 'k9'");
  o.span_frames = 40;
  rc = al_decode_frames(&in, 48, 32, 40, &o, out.data(), out.size());
  EXPECT_EQ(rc, AL_EFORMAT) << al_last_error();
  EXPECT_TRUE(ErrorContains("s-1.tar: key 'k9': frame "));

  // Not a container at all.
  Bytes junk(5000, 'x');
  in = Mem(junk, nullptr, "s-1.tar: key 'j'");
  EXPECT_EQ(al_decode_probe(&in, &mi), AL_EFORMAT);
  EXPECT_TRUE(ErrorContains("s-1.tar: key 'j': "));
  Bytes empty;
  in = Mem(empty, "mp4");
  in.data = "";
  EXPECT_EQ(al_decode_probe(&in, &mi), AL_EFORMAT);

  // The index records more frames than the stream holds; a span past the recorded count.
  in = Mem(clip, "mp4", "s-1.tar: key 'k10'");
  o = AL_DECODE_OPTIONS_INIT;
  o.expect_frames = 48;
  rc = al_decode_frames(&in, 48, 32, 17, &o, out.data(), out.size());
  EXPECT_EQ(rc, AL_EFORMAT);
  EXPECT_TRUE(ErrorContains("the stream holds 40 frames, the index records 48"));
  o.expect_frames = 40;
  o.span_start = 30;
  rc = al_decode_frames(&in, 48, 32, 17, &o, out.data(), out.size());
  EXPECT_EQ(rc, AL_ERANGE);
  EXPECT_TRUE(ErrorContains("frame 46"));

  // A read that fails: AL_EIO with the callback's message.
  Ranged r{&clip};
  r.fail_at = clip.size() / 3;
  in = Cb(&r, "mp4");
  rc = al_decode_probe(&in, &mi);
  EXPECT_EQ(rc, AL_EIO);
  EXPECT_TRUE(ErrorContains("Input/output error"));
  EXPECT_TRUE(ErrorContains("member 'k.mp4'"));

  // Output too small.
  in = Mem(clip, "mp4");
  EXPECT_EQ(al_decode_frames(&in, 48, 32, 17, nullptr, out.data(), 100), AL_EINVAL);
}

TEST(DecodeBadInput, VariableFrameRate) {
  std::string raw = RawFrames(TmpPath("vfr.rgb"), 96, 64, 30, IndexPixels());
  // Frames 0-14 at 25 fps, then at 12.5 fps.
  ASSERT_TRUE(
      Encode(raw, 96, 64, 25,
             "-vf \"setpts='if(lt(N,15),N,2*N-15)/25/TB'\" -vsync passthrough " + H264Args(),
             TmpPath("vfr.mp4")));
  Bytes clip = ReadBytes(TmpPath("vfr.mp4"));
  al_decode_input in = Mem(clip, "mp4", "s-2.tar: key 'v'");
  al_media_info mi = AL_MEDIA_INFO_INIT;
  ASSERT_EQ(al_decode_probe(&in, &mi), AL_OK) << al_last_error();
  EXPECT_EQ(mi.vfr, 1u);
  EXPECT_EQ(mi.frames, 30u);
  std::vector<uint8_t> out((size_t)17 * 48 * 32 * 3);
  EXPECT_EQ(al_decode_frames(&in, 48, 32, 17, nullptr, out.data(), out.size()), AL_EUNSUPPORTED);
  EXPECT_TRUE(ErrorContains("s-2.tar: key 'v': variable frame rate"));
  al_decode_options o = AL_DECODE_OPTIONS_INIT;
  o.allow_vfr = 1;
  o.span_frames = 30;
  EXPECT_EQ(Indices(in, 48, 32, 10, &o), Expected(10, 0, 30));
}
