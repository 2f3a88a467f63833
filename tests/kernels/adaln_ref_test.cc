// CPU reference against closed forms (no GPU needed; runs in CI).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/al_status.h"
#include "kernels/adaln_ref_internal.h"
#include "tests/kernels/adaln_test_util.h"

namespace {

adaln_ref_shape Fixed(int B, int N, int D) {
  adaln_ref_shape s{};
  s.rows = (int64_t)B * N;
  s.batch = B;
  s.dim = D;
  s.seq_len = N;
  return s;
}

TEST(AdalnRef, ConstantRowsGiveShift) {
  const int B = 2, N = 3, D = 5;
  adaln_ref_shape s = Fixed(B, N, D);
  std::vector<float> x(B * N * D), scale(B * D), shift(B * D), y(x.size()), mean(B * N),
      rstd(B * N);
  for (int r = 0; r < B * N; ++r)
    for (int d = 0; d < D; ++d) x[r * D + d] = 7.0f + r;
  for (int i = 0; i < B * D; ++i) {
    scale[i] = 0.5f * i;
    shift[i] = -1.0f + i;
  }
  ASSERT_EQ(adaln_ref_forward(&s, x.data(), scale.data(), shift.data(), y.data(), mean.data(),
                              rstd.data()),
            AL_OK);
  for (int r = 0; r < B * N; ++r) {
    EXPECT_FLOAT_EQ(mean[r], 7.0f + r);
    EXPECT_NEAR(rstd[r], 1.0 / std::sqrt(1e-6), 1e-3); // var 0: rstd = 1/sqrt(eps)
    for (int d = 0; d < D; ++d) EXPECT_FLOAT_EQ(y[r * D + d], shift[(r / N) * D + d]);
  }
}

// Rows of two values a (first half) and c (second half): mean (a+c)/2, var ((c-a)/2)^2,
// xhat = -+ h / sqrt(h^2 + eps) with h = (c-a)/2.
TEST(AdalnRef, TwoValueRows) {
  const int N = 4, D = 8;
  for (int plain = 0; plain <= 1; ++plain) {
    adaln_ref_shape s = Fixed(1, N, D);
    s.plain_scale = plain;
    s.eps = 1e-5;
    std::vector<float> x(N * D), scale(D), shift(D), y(N * D), mean(N), rstd(N);
    for (int r = 0; r < N; ++r)
      for (int d = 0; d < D; ++d) x[r * D + d] = d < D / 2 ? 1.0f + r : 5.0f + 3 * r;
    for (int d = 0; d < D; ++d) {
      scale[d] = 0.25f * d;
      shift[d] = 0.125f * d;
    }
    ASSERT_EQ(adaln_ref_forward(&s, x.data(), scale.data(), shift.data(), y.data(), mean.data(),
                                rstd.data()),
              AL_OK);
    for (int r = 0; r < N; ++r) {
      const double a = 1.0 + r, c = 5.0 + 3 * r, h = (c - a) / 2;
      EXPECT_NEAR(mean[r], (a + c) / 2, 1e-6);
      EXPECT_NEAR(rstd[r], 1.0 / std::sqrt(h * h + 1e-5), 1e-6);
      for (int d = 0; d < D; ++d) {
        const double xh = (d < D / 2 ? -h : h) / std::sqrt(h * h + 1e-5);
        const double f = plain ? scale[d] : 1.0 + scale[d];
        EXPECT_NEAR(y[r * D + d], xh * f + shift[d], 1e-5) << "r " << r << " d " << d;
      }
    }
  }
}

// Backward sums on a packed batch with an empty and a one-token sample:
// dy = 1 everywhere -> dshift[b,d] = rows of b; two-value rows -> dscale[b,d] = rows * xhat_d.
// Constant dy with scale 0 makes g constant per row, so dx = rstd*(c - c - xhat*0) = 0.
TEST(AdalnRef, BackwardSumsPackedWithEmptySamples) {
  const int B = 4, D = 6;
  const int32_t cu[B + 1] = {0, 3, 3, 4, 9}; // lengths 3, 0, 1, 5
  adaln_ref_shape s{};
  s.rows = 9;
  s.batch = B;
  s.dim = D;
  s.cu_seqlens = cu;
  std::vector<float> x(9 * D), dy(9 * D, 1.0f), scale(B * D, 0.0f), dx(9 * D), ds(B * D), dh(B * D);
  for (int r = 0; r < 9; ++r)
    for (int d = 0; d < D; ++d) x[r * D + d] = d < D / 2 ? -2.0f : 2.0f; // xhat = -+ ~1
  ASSERT_EQ(adaln_ref_backward(&s, dy.data(), x.data(), scale.data(), dx.data(), ds.data(),
                               dh.data()),
            AL_OK);
  const double xh = 2.0 / std::sqrt(4.0 + 1e-6);
  for (int b = 0; b < B; ++b) {
    const int n = cu[b + 1] - cu[b];
    for (int d = 0; d < D; ++d) {
      EXPECT_FLOAT_EQ(dh[b * D + d], (float)n);
      EXPECT_NEAR(ds[b * D + d], n * (d < D / 2 ? -xh : xh), 1e-5);
    }
  }
  for (float v : dx) EXPECT_NEAR(v, 0.0f, 1e-6);
}

// dy = xhat with scale 0: mean(g) = 0, mean(g*xhat) = var/(var+eps), so
// dx = rstd * xhat * eps / (var + eps).
TEST(AdalnRef, DxClosedForm) {
  const int D = 4;
  adaln_ref_shape s = Fixed(1, 1, D);
  s.eps = 0.5;
  std::vector<float> x = {0, 1, 2, 3}, scale(D, 0.0f), dy(D), dx(D), ds(D), dh(D);
  const double m = 1.5, var = 1.25, rs = 1.0 / std::sqrt(var + 0.5);
  for (int d = 0; d < D; ++d) dy[d] = (float)((x[d] - m) * rs);
  ASSERT_EQ(adaln_ref_backward(&s, dy.data(), x.data(), scale.data(), dx.data(), ds.data(),
                               dh.data()),
            AL_OK);
  for (int d = 0; d < D; ++d) {
    const double xh = (x[d] - m) * rs;
    EXPECT_NEAR(dx[d], rs * xh * 0.5 / (var + 0.5), 1e-6);
  }
}

// Central differences of L = sum(w * y) against the backward, in both modulation forms.
TEST(AdalnRef, BackwardMatchesFiniteDifferences) {
  const int B = 2, N = 3, D = 7;
  adaln_test::Rng rng(42);
  for (int plain = 0; plain <= 1; ++plain) {
    adaln_ref_shape s = Fixed(B, N, D);
    s.plain_scale = plain;
    std::vector<float> x(B * N * D), scale(B * D), shift(B * D), w(x.size()), y(x.size()),
        dx(x.size()), ds(B * D), dh(B * D);
    for (auto &v : x) v = rng.Normal(0.3f, 1.5f);
    for (auto &v : scale) v = rng.Normal(0.0f, 0.5f);
    for (auto &v : shift) v = rng.Normal(0.0f, 0.5f);
    for (auto &v : w) v = rng.Normal(0.0f, 1.0f);
    ASSERT_EQ(adaln_ref_backward(&s, w.data(), x.data(), scale.data(), dx.data(), ds.data(),
                                 dh.data()),
              AL_OK);
    auto loss = [&]() {
      adaln_ref_forward(&s, x.data(), scale.data(), shift.data(), y.data(), nullptr, nullptr);
      double L = 0.0;
      for (size_t i = 0; i < y.size(); ++i) L += (double)w[i] * y[i];
      return L;
    };
    auto check = [&](std::vector<float> &p, const std::vector<float> &g, const char *what) {
      for (size_t i = 0; i < p.size(); ++i) {
        const float keep = p[i], h = 1e-2f;
        p[i] = keep + h;
        const double lp = loss();
        p[i] = keep - h;
        const double lm = loss();
        p[i] = keep;
        const double fd = (lp - lm) / (2.0 * h);
        EXPECT_NEAR(g[i], fd, 2e-3 * (1.0 + std::fabs(fd))) << what << " " << i;
      }
    };
    check(x, dx, "dx");
    check(scale, ds, "dscale");
    check(shift, dh, "dshift");
  }
}

TEST(AdalnRef, RejectsBadOffsets) {
  const int32_t bad[3] = {0, 5, 3};
  adaln_ref_shape s{};
  s.rows = 3;
  s.batch = 2;
  s.dim = 4;
  s.cu_seqlens = bad;
  std::vector<float> x(12), sc(8), sh(8), y(12);
  EXPECT_EQ(adaln_ref_forward(&s, x.data(), sc.data(), sh.data(), y.data(), nullptr, nullptr),
            AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("decreases"), std::string::npos) << al_last_error();
  s.cu_seqlens = nullptr;
  EXPECT_EQ(adaln_ref_forward(&s, x.data(), sc.data(), sh.data(), y.data(), nullptr, nullptr),
            AL_EINVAL);
}

TEST(AdalnTestUtil, HalfAndBfloatRounding) {
  using namespace adaln_test;
  EXPECT_EQ(f2h(1.0f), 0x3c00);
  EXPECT_EQ(f2h(65504.0f), 0x7bff);
  EXPECT_EQ(f2h(1e6f), 0x7c00);
  EXPECT_EQ(f2h(5.960464477539063e-08f), 0x0001); // 2^-24
  EXPECT_EQ(f2h(1.0f + 1.0f / 2048), 0x3c00);     // tie -> even
  EXPECT_EQ(f2h(1.0f + 3.0f / 2048), 0x3c02);     // tie -> even (up)
  EXPECT_FLOAT_EQ(h2f(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(h2f(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f2bf(1.0f), 0x3f80);
  EXPECT_EQ(f2bf(1.00390625f), 0x3f80); // tie -> even
  EXPECT_FLOAT_EQ(bf2f(0x3f81), 1.0078125f);
}

} // namespace
