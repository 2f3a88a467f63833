// media_fixtures.h - test clips and images encoded at test time by the system's `ffmpeg` CLI
// from raw RGB frames the test writes (no downloads, no committed binaries). A clip's frame i
// carries its index: its top rows are the grey level IndexGrey(i), which any scale, crop and
// rotation keeps, so a decoded frame's index is read back with IndexOf.
#ifndef AL_TESTS_DECODE_MEDIA_FIXTURES_H
#define AL_TESTS_DECODE_MEDIA_FIXTURES_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace altest {

// The grey level of frame i (i < 80): 8 + 3 i; IndexOf inverts it to the nearest index.
inline int IndexGrey(int i) { return 8 + 3 * i; }
inline int IndexOf(double grey) { return (int)std::lround((grey - 8.0) / 3.0); }

// Raw RGB frames (w x h x 3 each), written to `path`.
using Pixel = std::function<void(int frame, int x, int y, unsigned char rgb[3])>;

inline std::string RawFrames(const std::string &path, int w, int h, int n, const Pixel &px) {
  std::string raw((size_t)w * h * 3 * n, '\0');
  for (int f = 0; f < n; f++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        px(f, x, y, (unsigned char *)&raw[(((size_t)f * h + y) * w + x) * 3]);
  WriteFile(path, raw);
  return path;
}

// Frames whose every pixel is IndexGrey(frame), except (noise_from_row > 0) rows at and below
// it, which hold deterministic noise so that the stream is large (seek tests).
inline Pixel IndexPixels(int noise_from_row = 0) {
  return [noise_from_row](int f, int x, int y, unsigned char rgb[3]) {
    if (noise_from_row > 0 && y >= noise_from_row) {
      uint64_t z = (uint64_t)f * 1000003u + (uint64_t)y * 7919u + (uint64_t)x;
      SplitMix64 r(z);
      unsigned v = (unsigned)(r.Next() & 255);
      rgb[0] = rgb[1] = rgb[2] = (unsigned char)v;
      return;
    }
    rgb[0] = rgb[1] = rgb[2] = (unsigned char)IndexGrey(f);
  };
}

// Runs a shell command; true on exit status 0 (stderr to the test log).
inline bool Sh(const std::string &cmd) {
  int rc = std::system(cmd.c_str());
  if (rc != 0) ADD_FAILURE() << "failed (" << rc << "): " << cmd;
  return rc == 0;
}

// Encodes raw frames (w x h, rgb24, `fps`) with ffmpeg arguments `codec_args` into `out`.
inline bool Encode(const std::string &raw, int w, int h, int fps, const std::string &codec_args,
                   const std::string &out) {
  return Sh("ffmpeg -nostdin -hide_banner -loglevel error -y -f rawvideo -pix_fmt rgb24 -s " +
            std::to_string(w) + "x" + std::to_string(h) + " -r " + std::to_string(fps) + " -i '" +
            raw + "' " + codec_args + " '" + out + "'");
}

// A clip of n index frames (IndexPixels) encoded with `codec_args`, as bytes.
inline Bytes IndexClip(const std::string &name, int w, int h, int n, int fps,
                       const std::string &codec_args, int noise_from_row = 0) {
  std::string raw = RawFrames(TmpPath(name + ".rgb"), w, h, n, IndexPixels(noise_from_row));
  std::string out = TmpPath(name);
  if (!Encode(raw, w, h, fps, codec_args, out)) return Bytes();
  std::remove(raw.c_str());
  return ReadBytes(out);
}

// The usual encodings (mostly lossless, so grey levels survive; -g: keyframe interval).
inline std::string H264Args(int gop = 10) {
  return "-c:v libx264 -preset ultrafast -qp 0 -pix_fmt yuv420p -threads 1 -g " +
         std::to_string(gop) + " -bf 2";
}

// Mean of channel 0 over rows [y0, y1) of frame f of a (T, H, W, 3) output.
inline double MeanRows(const std::vector<uint8_t> &out, int w, int h, int f, int y0, int y1) {
  double s = 0;
  for (int y = y0; y < y1; y++)
    for (int x = 0; x < w; x++) s += out[(((size_t)f * h + y) * w + x) * 3];
  return s / ((double)(y1 - y0) * w);
}

} // namespace altest

#endif // AL_TESTS_DECODE_MEDIA_FIXTURES_H
