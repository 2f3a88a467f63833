// A compressed shard that fails a checksum names where the damage is: the compressed bytes
// of the one LZ4 block that failed (fed to LZ4F a block at a time), not the start of the
// read buffer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/loader/index_fixtures.h"

extern "C" {
#include "common/al_status.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"
}

using altest::Build;
using altest::Bytes;
using altest::RejectedText;
using altest::TmpPath;

namespace {

// `in` as one LZ4 frame of 64 KiB blocks, each with its checksum.
Bytes Lz4Blocks(const Bytes &in) {
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  Bytes out(LZ4F_compressFrameBound(in.size(), &prefs));
  size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  EXPECT_FALSE(LZ4F_isError(n));
  out.resize(LZ4F_isError(n) ? 0 : n);
  return out;
}

TEST(CorruptOffset, DamagedLz4BlockIsLocated) {
  std::string dir = TmpPath("corrupt_offset");
  al_synth_options o{};
  o.out_dir = dir.c_str();
  o.samples = 4;
  o.shards = 1;
  o.seed = 5;
  ASSERT_EQ(al_synth_write(&o, nullptr), AL_OK) << al_last_error();
  Bytes lz = Lz4Blocks(altest::ReadBytes(dir + "/shard-000000.tar"));
  ASSERT_GT(lz.size(), 1000000u);
  size_t pos = lz.size() * 3 / 4;
  lz[pos] ^= 0x10;
  std::string path = TmpPath("corrupt_offset.tar.lz4");
  altest::WriteBytes(path, lz);
  al_index *idx = Build({path});
  ASSERT_NE(idx, nullptr);
  std::string rej = RejectedText(idx);
  size_t at = rej.find("checksum mismatch in compressed bytes ");
  ASSERT_NE(at, std::string::npos) << rej;
  unsigned long long lo = 0, hi = 0;
  ASSERT_EQ(std::sscanf(rej.c_str() + at, "checksum mismatch in compressed bytes %llu..%llu", &lo,
                        &hi),
            2)
      << rej;
  EXPECT_LE(lo, pos) << rej;
  EXPECT_GE(hi, pos) << rej;
  EXPECT_LE(hi - lo, 65536u + 16) << rej; // one block with its size field and checksum
  al_index_free(idx);
}

} // namespace
