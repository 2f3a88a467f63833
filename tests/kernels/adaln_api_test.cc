// Argument checks of the AdaLN C API. Every case here fails before any CUDA call, so the test
// runs (and must pass) on machines without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "common/al_status.h"
#include "kernels/al_adaln.h"

namespace {

// Fake, never dereferenced: the checks reject the call before anything is launched.
void *const P = reinterpret_cast<void *>(0x10000);
float *const F = reinterpret_cast<float *>(0x20000);

al_adaln_desc Good() {
  al_adaln_desc d{};
  d.dtype = AL_DTYPE_BF16;
  d.batch = 2;
  d.dim = 1536;
  d.seq_len = 16;
  return d;
}

int Fwd(const al_adaln_desc &d, const al_adaln_options *o = nullptr, void *x = P) {
  return al_adaln_forward(&d, o, x, P, P, P, F, F, nullptr);
}

std::string Msg() { return al_last_error(); }

TEST(AdalnApi, RejectsBadDescriptors) {
  al_adaln_desc d = Good();
  d.dtype = 0;
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  EXPECT_NE(Msg().find("dtype"), std::string::npos) << Msg();

  d = Good();
  d.dim = 0;
  EXPECT_EQ(Fwd(d), AL_ERANGE);
  d.dim = 16385;
  EXPECT_EQ(Fwd(d), AL_ERANGE);
  EXPECT_NE(Msg().find("16385"), std::string::npos) << Msg();

  d = Good();
  d.batch = 0;
  EXPECT_EQ(Fwd(d), AL_ERANGE);
  d.batch = 70000;
  EXPECT_EQ(Fwd(d), AL_ERANGE);

  d = Good();
  d.seq_len = 0;  // no layout
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  d = Good();
  d.rows = 33;  // != 2 x 16
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  d = Good();
  d.seq_len = 1LL << 31;
  EXPECT_EQ(Fwd(d), AL_ERANGE);
  d = Good();
  d.rows = -1;
  EXPECT_EQ(Fwd(d), AL_ERANGE);

  EXPECT_EQ(al_adaln_forward(nullptr, nullptr, P, P, P, P, F, F, nullptr), AL_EINVAL);
}

TEST(AdalnApi, ChecksHostOffsets) {
  int32_t cu[4] = {0, 5, 5, 9};
  al_adaln_desc d = Good();
  d.seq_len = 0;
  d.batch = 3;
  d.rows = 9;
  d.cu_seqlens = reinterpret_cast<const int32_t *>(P);
  d.cu_seqlens_host = cu;
  cu[2] = 4;  // decreases
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  EXPECT_NE(Msg().find("must not decrease"), std::string::npos) << Msg();
  cu[2] = 5;
  cu[0] = 1;
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  cu[0] = 0;
  d.rows = 10;  // != cu[B]
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  EXPECT_NE(Msg().find("rows = 10"), std::string::npos) << Msg();
  d.rows = 9;
  d.seq_len = 3;  // both layouts
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  d.seq_len = 0;
  d.cu_seqlens = nullptr;  // host mirror alone
  EXPECT_EQ(Fwd(d), AL_EINVAL);
}

TEST(AdalnApi, RejectsBadOptionsAndPointers) {
  al_adaln_desc d = Good();
  al_adaln_options o{};
  o.eps = -1.0f;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  o = al_adaln_options{};
  o.flags = 0x80;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  o = al_adaln_options{};
  o.threads_per_row = 48;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  o = al_adaln_options{};
  o.bwd_path = 7;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  o = al_adaln_options{};
  o.rows_per_chunk = -2;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  o = al_adaln_options{};
  o.bwd_kernel = AL_ADALN_BWD_KERNEL_TILE_TIGHT + 1;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  EXPECT_NE(Msg().find("bwd_kernel"), std::string::npos) << Msg();
  o = al_adaln_options{};
  o.bwd_groups = -1;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  EXPECT_NE(Msg().find("bwd_groups"), std::string::npos) << Msg();
  o = al_adaln_options{};
  o.fwd_kernel = 3;
  EXPECT_EQ(Fwd(d, &o), AL_EINVAL);
  EXPECT_NE(Msg().find("fwd_kernel"), std::string::npos) << Msg();
  o = al_adaln_options{};
  o.fwd_kernel = AL_ADALN_FWD_KERNEL_TILE;  // the tile forward has no element-wise path
  o.force_general = 1;
  EXPECT_EQ(Fwd(d, &o), AL_EUNSUPPORTED);
  EXPECT_NE(Msg().find("fwd_kernel TILE"), std::string::npos) << Msg();

  EXPECT_EQ(Fwd(d, nullptr, nullptr), AL_EINVAL);  // x NULL
  EXPECT_EQ(al_adaln_forward(&d, nullptr, P, P, P, P, F, nullptr, nullptr), AL_EINVAL);
  float *odd = reinterpret_cast<float *>(0x20002);
  EXPECT_EQ(al_adaln_forward(&d, nullptr, P, P, P, P, odd, odd, nullptr), AL_EINVAL);

  EXPECT_EQ(al_adaln_backward(&d, nullptr, P, P, P, F, F, P, P, P, nullptr, 0, nullptr),
            AL_EINVAL);  // workspace NULL
  EXPECT_EQ(al_adaln_backward(&d, nullptr, P, P, P, F, F, P, P, P, (char *)P + 4, 1 << 20,
                              nullptr),
            AL_EINVAL);  // workspace misaligned
  size_t n = 1;
  EXPECT_EQ(al_adaln_backward_workspace_size(&d, nullptr, nullptr), AL_EINVAL);
  d.dim = 0;
  EXPECT_EQ(al_adaln_backward_workspace_size(&d, nullptr, &n), AL_ERANGE);
  EXPECT_EQ(n, 0u);
}

TEST(AdalnApi, DtypeSizes) {
  EXPECT_EQ(al_dtype_size(AL_DTYPE_BF16), 2u);
  EXPECT_EQ(al_dtype_size(AL_DTYPE_FP16), 2u);
  EXPECT_EQ(al_dtype_size(AL_DTYPE_FP32), 4u);
  EXPECT_EQ(al_dtype_size(0), 0u);
}

}  // namespace
