// GPU AdaLN kernels against the CPU reference. Skips when no CUDA device is present (CI).
// Every run: fresh random inputs (never zeros), outputs and workspace poisoned with NaN
// (0xFF bytes) first, normwise relative error ||out - ref|| / ||ref|| against bounds
// (fp32: 1e-5; bf16/fp16: 1e-2 for y and dx, 2e-2 for dscale/dshift; mean/rstd 1e-5), and the
// backward run twice must match bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/al_status.h"
#include "kernels/adaln_ref_internal.h"
#include "kernels/adaln_fill_internal.h"
#include "kernels/al_adaln.h"
#include "kernels/al_adaln_tuning.h"
#include "tests/kernels/adaln_test_util.h"

namespace {

using adaln_test::from_device_bytes;
using adaln_test::rel_err;
using adaln_test::Rng;
using adaln_test::to_device_bytes;

bool HaveGpu() {
  static int have = -1;
  if (have < 0) {
    int n = 0;
    have = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }
  return have == 1;
}

#define REQUIRE_GPU() \
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device"

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// Device allocation with a byte offset (to test misaligned views); freed on scope exit.
struct DevBuf {
  char *base = nullptr;
  size_t off = 0, bytes = 0;
  DevBuf() = default;
  DevBuf(const DevBuf &) = delete;
  DevBuf &operator=(const DevBuf &) = delete;
  ~DevBuf() {
    if (base) cudaFree(base);
  }
  bool alloc(size_t n, size_t offset = 0) {
    off = offset;
    bytes = n;
    return cudaMalloc((void **)&base, n + offset + 16) == cudaSuccess;
  }
  void *p() const { return base + off; }
  bool poison() { return cudaMemset(base, 0xff, bytes + off + 16) == cudaSuccess; }
  bool put(const void *h) {
    return cudaMemcpy(p(), h, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  std::vector<uint8_t> get() const {
    std::vector<uint8_t> h(bytes);
    if (cudaMemcpy(h.data(), p(), bytes, cudaMemcpyDeviceToHost) != cudaSuccess) h.clear();
    return h;
  }
};

struct Case {
  std::string name;
  int dtype = AL_DTYPE_BF16;
  int B = 1, N = 1, D = 64;
  std::vector<int> lens; // non-empty: packed layout with these sample lengths
  unsigned flags = 0;
  al_adaln_tuning tun{}; // what the case forces (al_adaln_tuning.h); zero: the library's choice
  int misalign = 0;      // elements by which every row tensor is offset (the general path)
  float xmean = 0.0f, xstd = 1.0f;
  bool host_offsets = true;

  // Builders: Mk(...).Chunk(7).Stages(3) and the like.
  template <typename F>
  Case &Set(F &field, F value) {
    field = value;
    return *this;
  }
  Case &Flags(unsigned f) { return Set(flags, f); }
  Case &Tpr(int t) { return Set(tun.threads_per_row, t); }
  Case &Chunk(int n) { return Set(tun.rows_per_chunk, n); }
  Case &Path(int p) { return Set(tun.bwd_path, p); }
  Case &General() { return Set(tun.force_general, 1); }
  Case &Stages(int s) { return Set(tun.bwd_stages, s); }
  Case &Kernel(int k) { return Set(tun.bwd_kernel, k); }
  Case &Groups(int g) { return Set(tun.bwd_groups, g); }
  Case &Fwd(int k) { return Set(tun.fwd_kernel, k); }
  Case &Misalign(int m) { return Set(misalign, m); }
  Case &XMean(float m) { return Set(xmean, m); }
  Case &DeviceOffsetsOnly() { return Set(host_offsets, false); }
};

std::ostream &operator<<(std::ostream &o, const Case &c) { return o << c.name; }

Case Mk(const std::string &name, int dtype, int B, int N, int D) {
  Case c;
  c.name = name;
  c.dtype = dtype;
  c.B = B;
  c.N = N;
  c.D = D;
  return c;
}

Case Packed(const std::string &name, int dtype, std::vector<int> lens, int D) {
  Case c = Mk(name, dtype, (int)lens.size(), 0, D);
  c.lens = std::move(lens);
  return c;
}

class AdalnGpu : public ::testing::TestWithParam<Case> {};

TEST_P(AdalnGpu, MatchesReference) {
  REQUIRE_GPU();
  const Case &c = GetParam();
  const int D = c.D, B = c.B, dt = c.dtype;
  const bool packed = !c.lens.empty();
  std::vector<int32_t> cu(B + 1, 0);
  int64_t rows = (int64_t)B * c.N;
  if (packed) {
    for (int b = 0; b < B; ++b) cu[b + 1] = cu[b] + c.lens[b];
    rows = cu[B];
  }
  const size_t es = al_dtype_size(dt), n = (size_t)rows * D, nbd = (size_t)B * D;
  uint64_t seed = 1469598103934665603ull;
  for (char ch : c.name) seed = (seed ^ (uint8_t)ch) * 1099511628211ull;
  Rng rng(seed);
  std::vector<float> x(n), dy(n), scale(nbd), shift(nbd);
  for (auto &v : x) v = rng.Normal(c.xmean, c.xstd);
  for (auto &v : dy) v = rng.Normal(0.0f, 1.0f);
  for (auto &v : scale) v = rng.Normal(0.0f, 0.5f);
  for (auto &v : shift) v = rng.Normal(0.0f, 0.5f);
  const auto xb = to_device_bytes(x, dt), dyb = to_device_bytes(dy, dt),
             scb = to_device_bytes(scale, dt), shb = to_device_bytes(shift, dt);

  const size_t off = (size_t)c.misalign * es;
  DevBuf dx_in, ddy, dsc, dsh, dy_out, dmean, drstd, ddx, dds, ddh, dcu;
  ASSERT_TRUE(dx_in.alloc(n * es, off) && ddy.alloc(n * es, off) && dsc.alloc(nbd * es, off) &&
              dsh.alloc(nbd * es, off) && dy_out.alloc(n * es, off) && dmean.alloc(rows * 4) &&
              drstd.alloc(rows * 4) && ddx.alloc(n * es, off) && dds.alloc(nbd * es) &&
              ddh.alloc(nbd * es) && dcu.alloc((B + 1) * 4));
  ASSERT_TRUE(dx_in.put(xb.data()) && ddy.put(dyb.data()) && dsc.put(scb.data()) &&
              dsh.put(shb.data()) && dcu.put(cu.data()));
  ASSERT_TRUE(dy_out.poison() && dmean.poison() && drstd.poison());

  al_adaln_desc desc{};
  desc.dtype = dt;
  desc.batch = B;
  desc.dim = D;
  if (packed) {
    desc.rows = rows;
    desc.cu_seqlens = (const int32_t *)dcu.p();
    desc.cu_seqlens_host = c.host_offsets ? cu.data() : nullptr;
  } else {
    desc.seq_len = c.N;
  }
  al_adaln_options o{};
  o.flags = c.flags;
  o.tuning = &c.tun;

  ASSERT_EQ(al_adaln_forward(&desc, &o, dx_in.p(), dsc.p(), dsh.p(), dy_out.p(), (float *)dmean.p(),
                             (float *)drstd.p(), nullptr),
            AL_OK)
      << al_last_error();
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> y = from_device_bytes(dy_out.get(), dt);
  std::vector<float> mean(rows), rstd(rows);
  CUDA_OK(cudaMemcpy(mean.data(), dmean.p(), rows * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(rstd.data(), drstd.p(), rows * 4, cudaMemcpyDeviceToHost));

  adaln_ref_shape rs{};
  rs.rows = rows;
  rs.batch = B;
  rs.dim = D;
  rs.seq_len = packed ? 0 : c.N;
  rs.cu_seqlens = cu.data();
  rs.plain_scale = (c.flags & AL_ADALN_PLAIN_SCALE) != 0;
  std::vector<float> yr(n), meanr(rows), rstdr(rows), dxr(n), dsr(nbd), dhr(nbd);
  ASSERT_EQ(adaln_ref_forward(&rs, x.data(), scale.data(), shift.data(), yr.data(), meanr.data(),
                              rstdr.data()),
            AL_OK);
  ASSERT_EQ(adaln_ref_backward(&rs, dy.data(), x.data(), scale.data(), dxr.data(), dsr.data(),
                               dhr.data()),
            AL_OK);

  const double tol = dt == AL_DTYPE_FP32 ? 1e-5 : 1e-2;
  const double tol_sum = dt == AL_DTYPE_FP32 ? 1e-5 : 2e-2;
  const double ey = rel_err(y, yr), em = rel_err(mean, meanr), er = rel_err(rstd, rstdr);
  EXPECT_LE(ey, tol) << "y";
  EXPECT_LE(em, 1e-5) << "mean";
  EXPECT_LE(er, 1e-5) << "rstd";

  size_t wsb = 0;
  ASSERT_EQ(al_adaln_backward_workspace_size(&desc, &o, &wsb), AL_OK) << al_last_error();
  DevBuf ws;
  ASSERT_TRUE(ws.alloc(wsb));
  std::vector<uint8_t> first[3];
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(ddx.poison() && dds.poison() && ddh.poison() && ws.poison());
    ASSERT_EQ(al_adaln_backward(&desc, &o, ddy.p(), dx_in.p(), dsc.p(), (const float *)dmean.p(),
                                (const float *)drstd.p(), ddx.p(), dds.p(), ddh.p(), ws.p(), wsb,
                                nullptr),
              AL_OK)
        << al_last_error();
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> got[3] = {ddx.get(), dds.get(), ddh.get()};
    if (run == 0) {
      const double edx = rel_err(from_device_bytes(got[0], dt), dxr);
      const double eds = rel_err(from_device_bytes(got[1], dt), dsr);
      const double edh = rel_err(from_device_bytes(got[2], dt), dhr);
      EXPECT_LE(edx, tol) << "dx";
      EXPECT_LE(eds, tol_sum) << "dscale";
      EXPECT_LE(edh, tol_sum) << "dshift";
      std::printf(
          "  %-34s rows %7lld D %5d  err y %.2e mean %.2e rstd %.2e dx %.2e dscale %.2e "
          "dshift %.2e ws %zu\n",
          c.name.c_str(), (long long)rows, D, ey, em, er, edx, eds, edh, wsb);
      for (int i = 0; i < 3; ++i) first[i] = got[i];
    } else {
      for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(got[i] == first[i]) << "backward output " << i << " differs between runs";
    }
  }
}

std::vector<Case> Cases() {
  const int BF = AL_DTYPE_BF16, F16 = AL_DTYPE_FP16, F32 = AL_DTYPE_FP32;
  const int SPLIT = AL_ADALN_BWD_SPLIT, GROUP = AL_ADALN_BWD_KERNEL_GROUP,
            TILE = AL_ADALN_BWD_KERNEL_TILE, TIGHT = AL_ADALN_BWD_KERNEL_TILE_TIGHT,
            FWD_ROWS = AL_ADALN_FWD_KERNEL_ROWS, FWD_TILE = AL_ADALN_FWD_KERNEL_TILE;
  std::vector<Case> v;
  v.push_back(Mk("bf16_D1536", BF, 2, 37, 1536));
  v.push_back(Mk("bf16_D64", BF, 3, 50, 64));
  v.push_back(Mk("bf16_D1000", BF, 2, 19, 1000));
  v.push_back(Mk("bf16_D1001_general", BF, 2, 19, 1001));
  v.push_back(Mk("bf16_D77_general", BF, 3, 11, 77));
  v.push_back(Mk("bf16_D3072", BF, 1, 33, 3072));
  v.push_back(Mk("bf16_D5120", BF, 1, 9, 5120));
  v.push_back(Mk("bf16_D12288", BF, 1, 6, 12288));
  v.push_back(Mk("bf16_D16384_split", BF, 2, 3, 16384));
  v.push_back(Mk("bf16_one_token_samples", BF, 5, 1, 1536));
  v.push_back(Packed("bf16_packed_D1536", BF, {5, 0, 1, 40, 0, 17}, 1536));
  v.push_back(Packed("bf16_packed_chunk7", BF, {5, 0, 1, 40, 0, 17, 3}, 1536).Chunk(7));
  v.push_back(Packed("bf16_packed_chunk5_split", BF, {9, 1, 0, 23, 4}, 1536).Chunk(5).Path(SPLIT));
  v.push_back(Packed("bf16_packed_device_offsets", BF, {3, 0, 30, 2}, 3072)
                  .DeviceOffsetsOnly()
                  .Flags(AL_ADALN_VALIDATE_OFFSETS));
  v.push_back(Packed("bf16_packed_unchecked_offsets", BF, {4, 7, 0}, 2048).DeviceOffsetsOnly());
  v.push_back(Packed("bf16_packed_all_empty", BF, {0, 0}, 256));
  v.push_back(Mk("bf16_plain_scale", BF, 2, 21, 1536).Flags(AL_ADALN_PLAIN_SCALE));
  v.push_back(Mk("bf16_misaligned_general", BF, 2, 13, 1536).Misalign(1));
  v.push_back(Mk("bf16_forced_general", BF, 2, 13, 1536).General());
  for (int t : {64, 96, 128, 256})
    v.push_back(Mk("bf16_D1536_tpr" + std::to_string(t), BF, 2, 15, 1536).Tpr(t));
  v.push_back(Packed("bf16_packed_D3072", BF, {7, 0, 19}, 3072));
  for (int st : {1, 2, 4}) { // register prefetch, and cp.async pipelines of 2 and 4 stages
    v.push_back(
        Packed("bf16_packed_chunk6_stages" + std::to_string(st), BF, {5, 0, 1, 30, 0, 11}, 1536)
            .Chunk(6)
            .Stages(st));
  }
  // Tile kernel (the default on the vector path): row groups per block (powers of two and
  // not), stages, register caps, tpr below and above a warp, pieces cut by sample boundaries
  // and by small chunks; and the per-group kernel it replaced.
  for (int g : {1, 2, 3, 4, 8}) {
    v.push_back(
        Packed("bf16_tile_packed_g" + std::to_string(g), BF, {5, 0, 1, 40, 0, 17, 2, 9}, 1536)
            .Kernel(TILE)
            .Groups(g));
  }
  v.push_back(
      Packed("bf16_tile_packed_chunk7_g4", BF, {5, 0, 1, 40, 0, 17, 3}, 1536).Chunk(7).Groups(4));
  v.push_back(Packed("bf16_tile_packed_chunk5_g2_s3", BF, {9, 1, 0, 23, 4}, 3072)
                  .Chunk(5)
                  .Groups(2)
                  .Stages(3));
  v.push_back(Packed("bf16_tile_packed_tight", BF, {11, 0, 30, 2}, 2048).Kernel(TIGHT));
  // 2 groups of 16 lanes per warp
  v.push_back(Mk("bf16_tile_D256_tpr16_g4", BF, 2, 23, 256).Tpr(16).Groups(4));
  v.push_back(Mk("bf16_tile_D256_tpr16_g4_tight", BF, 2, 23, 256).Tpr(16).Groups(4).Kernel(TIGHT));
  v.push_back(Packed("bf16_tile_D64_chunk3", BF, {4, 0, 9, 1}, 64).Chunk(3)); // tpr 8, many groups
  v.push_back(Mk("bf16_tile_D5120_vpt2", BF, 2, 7, 5120).Tpr(320));
  v.push_back(Packed("fp16_tile_packed_g2_s3", F16, {3, 0, 14, 6}, 2048).Groups(2).Stages(3));
  v.push_back(Packed("fp32_tile_packed_g3", F32, {7, 0, 2, 19}, 1536).Groups(3));
  v.push_back(
      Mk("fp32_tile_large_mean_D3072_tight", F32, 1, 20, 3072).XMean(1000.0f).Kernel(TIGHT));
  v.push_back(Packed("bf16_group_packed_D1536", BF, {5, 0, 1, 40, 0, 17}, 1536).Kernel(GROUP));
  v.push_back(Mk("fp32_D3072_stages2", F32, 2, 19, 3072).Stages(2));
  v.push_back(Mk("fp16_D64", F16, 3, 29, 64));
  v.push_back(Mk("bf16_D1536_split", BF, 2, 45, 1536).Path(SPLIT));
  v.push_back(Mk("bf16_large_mean", BF, 2, 20, 1536).XMean(1000.0f));
  v.push_back(Mk("fp16_D2048", F16, 2, 25, 2048));
  v.push_back(Packed("fp16_packed_D777_general", F16, {6, 0, 1, 13}, 777).Chunk(4));
  v.push_back(Mk("fp32_D1536", F32, 2, 37, 1536));
  v.push_back(Mk("fp32_D100", F32, 3, 10, 100));
  v.push_back(Mk("fp32_D101_general", F32, 3, 10, 101));
  v.push_back(Mk("fp32_D8192", F32, 1, 5, 8192));
  v.push_back(Mk("fp32_D16384_split", F32, 1, 4, 16384));
  v.push_back(Mk("fp32_large_mean_D1536", F32, 2, 20, 1536).XMean(1000.0f));
  v.push_back(Mk("fp32_large_mean_D3072", F32, 1, 20, 3072).XMean(-1000.0f));
  v.push_back(Mk("fp32_large_mean_split", F32, 1, 20, 1536).XMean(1000.0f).Path(SPLIT));
  v.push_back(Packed("fp32_packed_plain_chunk3", F32, {2, 9, 0, 1, 5}, 512)
                  .Chunk(3)
                  .Flags(AL_ADALN_PLAIN_SCALE));
  // Forward kernels. Auto picks one by batch shape (the tile forward only for D >= 3072 and
  // short samples, ADALN_FWD_TILE_*); these force each one: the row kernel on a packed batch,
  // the tile kernel on one sample, on rows of several warps (named barriers), on 7 vectors per
  // thread, fp32 and fp16, tiny rows (many groups per warp), a large mean, and many short
  // pieces.
  v.push_back(Packed("bf16_fwd_rows_packed", BF, {5, 0, 1, 40, 0, 17}, 1536).Fwd(FWD_ROWS));
  v.push_back(Mk("bf16_fwd_tile_B1", BF, 1, 50, 1536).Fwd(FWD_TILE));
  v.push_back(Mk("bf16_fwd_tile_D3072_B3", BF, 3, 21, 3072).Fwd(FWD_TILE));
  v.push_back(Packed("bf16_fwd_tile_D5120_packed", BF, {3, 0, 9, 1}, 5120).Fwd(FWD_TILE));
  v.push_back(Packed("fp32_fwd_tile_packed_D1000", F32, {2, 9, 0, 1, 5}, 1000).Fwd(FWD_TILE));
  v.push_back(Packed("fp16_fwd_tile_D64_many", F16,
                     {1, 3, 0, 7, 2, 2, 9, 0, 1, 1, 4, 6, 0, 3, 5, 1, 2, 8, 0, 1}, 64)
                  .Fwd(FWD_TILE));
  v.push_back(Mk("bf16_fwd_tile_large_mean", BF, 2, 20, 1536).XMean(1000.0f).Fwd(FWD_TILE));
  // Many chunks and a full GPU's worth of row groups; excluded from sanitizer runs (Big).
  v.push_back(Mk("Big_bf16_D1536", BF, 2, 3001, 1536));
  v.push_back(Packed("Big_bf16_packed_D3072", BF, {1000, 1, 0, 2047, 333}, 3072));
  v.push_back(
      Packed("Big_bf16_group_packed_D3072", BF, {1000, 1, 0, 2047, 333}, 3072).Kernel(GROUP));
  v.push_back(Mk("Big_fp32_D5120", F32, 1, 2500, 5120));
  {
    // 300 samples of 0..40 rows (pseudo-random, fixed): blocks cross many sample boundaries.
    std::vector<int> lens;
    uint32_t h = 12345u;
    for (int i = 0; i < 300; ++i) {
      h = h * 1664525u + 1013904223u;
      lens.push_back((int)((h >> 16) % 41));
    }
    v.push_back(Packed("Big_bf16_fwd_tile_300_samples", BF, lens, 1536).Fwd(FWD_TILE));
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AdalnGpu, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case> &i) { return i.param.name; });

// Errors that need a device (workspace sizing goes through kernel attributes).
TEST(AdalnGpuArgs, WorkspaceAndOffsets) {
  REQUIRE_GPU();
  const int B = 2, N = 8, D = 256;
  al_adaln_desc d{};
  d.dtype = AL_DTYPE_BF16;
  d.batch = B;
  d.dim = D;
  d.seq_len = N;
  DevBuf x, sc, y, mean, rstd, ws, cu;
  ASSERT_TRUE(x.alloc(B * N * D * 2) && sc.alloc(B * D * 2) && y.alloc(B * N * D * 2) &&
              mean.alloc(B * N * 4) && rstd.alloc(B * N * 4) && cu.alloc(3 * 4));
  size_t need = 0;
  ASSERT_EQ(al_adaln_backward_workspace_size(&d, nullptr, &need), AL_OK) << al_last_error();
  ASSERT_GT(need, 0u);
  ASSERT_TRUE(ws.alloc(need));
  EXPECT_EQ(al_adaln_backward(&d, nullptr, y.p(), x.p(), sc.p(), (float *)mean.p(),
                              (float *)rstd.p(), y.p(), sc.p(), sc.p(), ws.p(), need - 1, nullptr),
            AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("workspace"), std::string::npos);
  EXPECT_EQ(al_adaln_backward(&d, nullptr, y.p(), x.p(), sc.p(), (float *)mean.p(),
                              (float *)rstd.p(), y.p(), sc.p(), sc.p(), (char *)ws.p() + 4, need,
                              nullptr),
            AL_EINVAL);
  // Device offsets checked on request: {0, 9, 3} decreases.
  const int32_t bad[3] = {0, 9, 3};
  ASSERT_TRUE(cu.put(bad));
  al_adaln_desc p{};
  p.dtype = AL_DTYPE_BF16;
  p.batch = 2;
  p.dim = D;
  p.rows = 3;
  p.cu_seqlens = (const int32_t *)cu.p();
  al_adaln_options o{};
  o.flags = AL_ADALN_VALIDATE_OFFSETS;
  EXPECT_EQ(al_adaln_forward(&p, &o, x.p(), sc.p(), sc.p(), y.p(), (float *)mean.p(),
                             (float *)rstd.p(), nullptr),
            AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("must not decrease"), std::string::npos)
      << al_last_error();
  // Forced configurations that cannot run are refused, not launched.
  al_adaln_tuning tpr8{};
  tpr8.threads_per_row = 8; // 256 vectors / 8 threads = 32 per thread > 8 compiled
  al_adaln_options big{};
  big.tuning = &tpr8;
  d.dim = 2048;
  EXPECT_EQ(al_adaln_forward(&d, &big, x.p(), sc.p(), sc.p(), y.p(), nullptr, nullptr, nullptr),
            AL_EUNSUPPORTED);
  al_adaln_tuning fused_path{};
  fused_path.bwd_path = AL_ADALN_BWD_FUSED;
  al_adaln_options fused{};
  fused.tuning = &fused_path;
  d.dim = 16384;
  EXPECT_EQ(al_adaln_backward_workspace_size(&d, &fused, &need), AL_EUNSUPPORTED);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
}

// The sizes the API promises at their limit: two samples of 128k rows, 2.15e9 elements (past
// 2^31, so element offsets and byte offsets need 64 bits), D = 8200 (a vector-path width whose
// row groups have idle threads). Inputs are filled on the device; the check streams every row
// back in 2048-row chunks and compares it with the CPU reference of that chunk (y, dx, mean and
// rstd depend only on their row; dscale and dshift add the chunks' sums in double), chunks
// spread over the host's cores. ~17 GB of device memory; skips where that is not free.
// Excluded from the sanitizer runs (Big).
TEST(AdalnGpuBig, Big_TwoSamplesOf128kRowsPast2e31Elements) {
  REQUIRE_GPU();
  const int B = 2, N = 131072, D = 8200, dt = AL_DTYPE_BF16;
  const int64_t rows = (int64_t)B * N;
  const size_t n = (size_t)rows * D, nbd = (size_t)B * D;
  ASSERT_GT(n, (size_t)1 << 31);
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 4 * n * 2 + ((size_t)1 << 30)) GTEST_SKIP() << "needs ~17 GB of free device memory";

  Rng rng(20261130);
  std::vector<float> scale(nbd), shift(nbd);
  for (auto &v : scale) v = rng.Normal(0.0f, 0.5f);
  for (auto &v : shift) v = rng.Normal(0.0f, 0.5f);
  const auto scb = to_device_bytes(scale, dt), shb = to_device_bytes(shift, dt);
  DevBuf x, dy, y, dx, mean, rstd, sc, sh, ds, dh, ws;
  ASSERT_TRUE(x.alloc(n * 2) && dy.alloc(n * 2) && y.alloc(n * 2) && dx.alloc(n * 2) &&
              mean.alloc(rows * 4) && rstd.alloc(rows * 4) && sc.alloc(nbd * 2) &&
              sh.alloc(nbd * 2) && ds.alloc(nbd * 2) && dh.alloc(nbd * 2));
  ASSERT_TRUE(sc.put(scb.data()) && sh.put(shb.data()));
  ASSERT_EQ(adaln_fill_normal(x.p(), dt, n, 31, 0.5f, 2.0f, nullptr), AL_OK) << al_last_error();
  ASSERT_EQ(adaln_fill_normal(dy.p(), dt, n, 32, 0.0f, 1.0f, nullptr), AL_OK) << al_last_error();
  ASSERT_TRUE(y.poison() && dx.poison() && mean.poison() && rstd.poison() && ds.poison() &&
              dh.poison());

  al_adaln_desc d{};
  d.dtype = dt;
  d.batch = B;
  d.dim = D;
  d.seq_len = N;
  ASSERT_EQ(al_adaln_forward(&d, nullptr, x.p(), sc.p(), sh.p(), y.p(), (float *)mean.p(),
                             (float *)rstd.p(), nullptr),
            AL_OK)
      << al_last_error();
  size_t wsb = 0;
  ASSERT_EQ(al_adaln_backward_workspace_size(&d, nullptr, &wsb), AL_OK) << al_last_error();
  ASSERT_TRUE(ws.alloc(wsb) && ws.poison());
  ASSERT_EQ(al_adaln_backward(&d, nullptr, dy.p(), x.p(), sc.p(), (const float *)mean.p(),
                              (const float *)rstd.p(), dx.p(), ds.p(), dh.p(), ws.p(), wsb,
                              nullptr),
            AL_OK)
      << al_last_error();
  CUDA_OK(cudaDeviceSynchronize());

  // Per thread: sums of squared errors and of squared references (y, dx, mean, rstd), and
  // per sample the reference dscale, dshift as sums of the chunks' (double).
  constexpr int64_t kChunk = 2048;
  const int64_t nchunks = rows / kChunk;
  struct Acc {
    double num[4] = {0, 0, 0, 0}, den[4] = {0, 0, 0, 0};
    std::vector<double> dsr, dhr;
    bool ok = true;
    std::string err;
  };
  const int nthreads = (int)std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<Acc> acc(nthreads);
  std::atomic<int64_t> next{0};
  auto work = [&](Acc &a) {
    a.dsr.assign(nbd, 0.0);
    a.dhr.assign(nbd, 0.0);
    const size_t cn = (size_t)kChunk * D;
    std::vector<uint8_t> hx(cn * 2), hdy(cn * 2), hy(cn * 2), hdx(cn * 2);
    std::vector<float> gm(kChunk), gr(kChunk), yr(cn), dxr(cn), mr(kChunk), rr(kChunk), dsr(D),
        dhr(D);
    for (int64_t k; (k = next.fetch_add(1)) < nchunks && a.ok;) {
      const int64_t r0 = k * kChunk;
      const int b = (int)(r0 / N);
      const size_t eo = (size_t)r0 * D * 2;
      if (cudaMemcpy(hx.data(), (char *)x.p() + eo, cn * 2, cudaMemcpyDeviceToHost) ||
          cudaMemcpy(hdy.data(), (char *)dy.p() + eo, cn * 2, cudaMemcpyDeviceToHost) ||
          cudaMemcpy(hy.data(), (char *)y.p() + eo, cn * 2, cudaMemcpyDeviceToHost) ||
          cudaMemcpy(hdx.data(), (char *)dx.p() + eo, cn * 2, cudaMemcpyDeviceToHost) ||
          cudaMemcpy(gm.data(), (float *)mean.p() + r0, kChunk * 4, cudaMemcpyDeviceToHost) ||
          cudaMemcpy(gr.data(), (float *)rstd.p() + r0, kChunk * 4, cudaMemcpyDeviceToHost)) {
        a.ok = false;
        a.err = "cudaMemcpy of chunk " + std::to_string(k);
        break;
      }
      const std::vector<float> fx = from_device_bytes(hx, dt), fdy = from_device_bytes(hdy, dt),
                               fy = from_device_bytes(hy, dt), fdx = from_device_bytes(hdx, dt);
      adaln_ref_shape rs{};
      rs.rows = kChunk;
      rs.batch = 1;
      rs.dim = D;
      rs.seq_len = kChunk;
      if (adaln_ref_forward(&rs, fx.data(), scale.data() + (size_t)b * D,
                            shift.data() + (size_t)b * D, yr.data(), mr.data(),
                            rr.data()) != AL_OK ||
          adaln_ref_backward(&rs, fdy.data(), fx.data(), scale.data() + (size_t)b * D, dxr.data(),
                             dsr.data(), dhr.data()) != AL_OK) {
        a.ok = false;
        a.err = al_last_error();
        break;
      }
      const std::vector<float> *got[4] = {&fy, &fdx, &gm, &gr}, *ref[4] = {&yr, &dxr, &mr, &rr};
      for (int q = 0; q < 4; ++q)
        for (size_t i = 0; i < ref[q]->size(); ++i) {
          const double g = (*got[q])[i], r = (*ref[q])[i];
          a.num[q] += std::isfinite(g) ? (g - r) * (g - r) : INFINITY;
          a.den[q] += r * r;
        }
      for (int j = 0; j < D; ++j) {
        a.dsr[(size_t)b * D + j] += dsr[j];
        a.dhr[(size_t)b * D + j] += dhr[j];
      }
    }
  };
  std::vector<std::thread> th;
  for (int i = 0; i < nthreads; ++i) th.emplace_back(work, std::ref(acc[i]));
  for (auto &t : th) t.join();
  double num[4] = {0, 0, 0, 0}, den[4] = {0, 0, 0, 0};
  std::vector<double> dsr(nbd, 0.0), dhr(nbd, 0.0);
  for (const Acc &a : acc) {
    ASSERT_TRUE(a.ok) << a.err;
    for (int q = 0; q < 4; ++q) {
      num[q] += a.num[q];
      den[q] += a.den[q];
    }
    for (size_t i = 0; i < nbd; ++i) {
      dsr[i] += a.dsr[i];
      dhr[i] += a.dhr[i];
    }
  }
  const std::vector<float> gds = from_device_bytes(ds.get(), dt),
                           gdh = from_device_bytes(dh.get(), dt);
  const std::vector<float> fdsr(dsr.begin(), dsr.end()), fdhr(dhr.begin(), dhr.end());
  const double ey = std::sqrt(num[0] / den[0]), edx = std::sqrt(num[1] / den[1]),
               em = std::sqrt(num[2] / den[2]), er = std::sqrt(num[3] / den[3]);
  const double eds = rel_err(gds, fdsr), edh = rel_err(gdh, fdhr);
  EXPECT_LE(ey, 1e-2) << "y";
  EXPECT_LE(edx, 1e-2) << "dx";
  EXPECT_LE(em, 1e-5) << "mean";
  EXPECT_LE(er, 1e-5) << "rstd";
  EXPECT_LE(eds, 2e-2) << "dscale";
  EXPECT_LE(edh, 2e-2) << "dshift";
  std::printf(
      "  %-34s rows %7lld D %5d  err y %.2e mean %.2e rstd %.2e dx %.2e dscale %.2e "
      "dshift %.2e ws %zu (%d host threads)\n",
      "Big_2x131072x8200", (long long)rows, D, ey, em, er, edx, eds, edh, wsb, nthreads);
}

} // namespace
