// Argument checks of the AdaLN C API. Every case here fails before any CUDA call, so the test
// runs (and must pass) on machines without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/al_status.h"
#include "kernels/al_adaln.h"
#include "kernels/al_adaln_tuning.h"

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

// One bad argument: what it is, a change that makes a good struct (S) bad, the status the
// call must return and, when not empty, a part of its message.
template <typename S>
struct Bad {
  const char *what;
  std::function<void(S &)> change;
  int rc;
  const char *msg;
};

template <typename S>
void ExpectStatus(const Bad<S> &c, int got) {
  EXPECT_EQ(got, c.rc) << c.what << ": " << Msg();
  if (*c.msg) {
    EXPECT_NE(Msg().find(c.msg), std::string::npos) << c.what << ": " << Msg();
  }
}

TEST(AdalnApi, RejectsBadDescriptors) {
  const Bad<al_adaln_desc> cases[] = {
      {"dtype 0", [](al_adaln_desc &d) { d.dtype = 0; }, AL_EINVAL, "dtype"},
      {"dim 0", [](al_adaln_desc &d) { d.dim = 0; }, AL_ERANGE, ""},
      {"dim 16385", [](al_adaln_desc &d) { d.dim = 16385; }, AL_ERANGE, "16385"},
      {"batch 0", [](al_adaln_desc &d) { d.batch = 0; }, AL_ERANGE, ""},
      {"batch 70000", [](al_adaln_desc &d) { d.batch = 70000; }, AL_ERANGE, ""},
      {"no layout", [](al_adaln_desc &d) { d.seq_len = 0; }, AL_EINVAL, ""},
      {"rows 33 != 2 x 16", [](al_adaln_desc &d) { d.rows = 33; }, AL_EINVAL, ""},
      {"seq_len 2^31", [](al_adaln_desc &d) { d.seq_len = 1LL << 31; }, AL_ERANGE, ""},
      {"rows -1", [](al_adaln_desc &d) { d.rows = -1; }, AL_ERANGE, ""},
      {"struct_size above the library's", [](al_adaln_desc &d) { d.struct_size = sizeof d + 8; },
       AL_EINVAL, "al_adaln_forward: al_adaln_desc.struct_size is"},
      {"struct_size below the first version", [](al_adaln_desc &d) { d.struct_size = 8; },
       AL_EINVAL, "below the first version's"},
  };
  for (const Bad<al_adaln_desc> &c : cases) {
    al_adaln_desc d = Good();
    c.change(d);
    ExpectStatus(c, Fwd(d));
  }
  EXPECT_EQ(al_adaln_forward(nullptr, nullptr, P, P, P, P, F, F, nullptr), AL_EINVAL);
  // Options too: a struct_size above the library's is refused before anything runs.
  al_adaln_options o = AL_ADALN_OPTIONS_INIT;
  o.struct_size += 8;
  EXPECT_EQ(Fwd(Good(), &o), AL_EINVAL);
  EXPECT_NE(Msg().find("al_adaln_options.struct_size is"), std::string::npos) << Msg();
}

TEST(AdalnApi, ChecksHostOffsets) {
  int32_t cu[4] = {0, 5, 5, 9};
  al_adaln_desc d = Good();
  d.seq_len = 0;
  d.batch = 3;
  d.rows = 9;
  d.cu_seqlens = reinterpret_cast<const int32_t *>(P);
  d.cu_seqlens_host = cu;
  cu[2] = 4; // decreases
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  EXPECT_NE(Msg().find("must not decrease"), std::string::npos) << Msg();
  cu[2] = 5;
  cu[0] = 1;
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  cu[0] = 0;
  d.rows = 10; // != cu[B]
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  EXPECT_NE(Msg().find("rows = 10"), std::string::npos) << Msg();
  d.rows = 9;
  d.seq_len = 3; // both layouts
  EXPECT_EQ(Fwd(d), AL_EINVAL);
  d.seq_len = 0;
  d.cu_seqlens = nullptr; // host mirror alone
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

  // Tuning knobs (al_adaln_tuning.h) out of range, or forcing what cannot run.
  const Bad<al_adaln_tuning> knobs[] = {
      {"threads_per_row 48", [](al_adaln_tuning &t) { t.threads_per_row = 48; }, AL_EINVAL, ""},
      {"bwd_path 7", [](al_adaln_tuning &t) { t.bwd_path = 7; }, AL_EINVAL, ""},
      {"rows_per_chunk -2", [](al_adaln_tuning &t) { t.rows_per_chunk = -2; }, AL_EINVAL, ""},
      {"bwd_kernel past TILE_TIGHT",
       [](al_adaln_tuning &t) { t.bwd_kernel = AL_ADALN_BWD_KERNEL_TILE_TIGHT + 1; }, AL_EINVAL,
       "bwd_kernel"},
      {"bwd_groups -1", [](al_adaln_tuning &t) { t.bwd_groups = -1; }, AL_EINVAL, "bwd_groups"},
      {"fwd_kernel 3", [](al_adaln_tuning &t) { t.fwd_kernel = 3; }, AL_EINVAL, "fwd_kernel"},
      {"fwd_kernel TILE on the element-wise path (the tile forward has none)",
       [](al_adaln_tuning &t) {
         t.fwd_kernel = AL_ADALN_FWD_KERNEL_TILE;
         t.force_general = 1;
       },
       AL_EUNSUPPORTED, "fwd_kernel TILE"},
  };
  for (const Bad<al_adaln_tuning> &c : knobs) {
    al_adaln_tuning t{};
    c.change(t);
    al_adaln_options ot{};
    ot.tuning = &t;
    ExpectStatus(c, Fwd(d, &ot));
  }

  EXPECT_EQ(Fwd(d, nullptr, nullptr), AL_EINVAL); // x NULL
  EXPECT_EQ(al_adaln_forward(&d, nullptr, P, P, P, P, F, nullptr, nullptr), AL_EINVAL);
  float *odd = reinterpret_cast<float *>(0x20002);
  EXPECT_EQ(al_adaln_forward(&d, nullptr, P, P, P, P, odd, odd, nullptr), AL_EINVAL);

  EXPECT_EQ(al_adaln_backward(&d, nullptr, P, P, P, F, F, P, P, P, nullptr, 0, nullptr),
            AL_EINVAL); // workspace NULL
  EXPECT_EQ(al_adaln_backward(&d, nullptr, P, P, P, F, F, P, P, P, (char *)P + 4, 1 << 20, nullptr),
            AL_EINVAL); // workspace misaligned
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

// What bindings compare their struct layouts with (python/adaptiveload/_lib.py).
TEST(AdalnApi, StructSizes) {
  EXPECT_EQ(al_adaln_struct_size(AL_ADALN_STRUCT_DESC), sizeof(al_adaln_desc));
  EXPECT_EQ(al_adaln_struct_size(AL_ADALN_STRUCT_OPTIONS), sizeof(al_adaln_options));
  EXPECT_EQ(al_adaln_struct_size(AL_ADALN_STRUCT_TUNING), sizeof(al_adaln_tuning));
  EXPECT_EQ(al_adaln_struct_size(3), 0u);
}

} // namespace
