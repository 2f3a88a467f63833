// Helpers shared by the AdaLN tests: host dtype conversions (round to nearest even), a small
// deterministic RNG, normwise relative error.
#ifndef AL_TESTS_KERNELS_ADALN_TEST_UTIL_H
#define AL_TESTS_KERNELS_ADALN_TEST_UTIL_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/al_adaln.h"
#include "tests/common/rng.h"

namespace adaln_test {

inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f2bf(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
inline float bf2f(uint16_t h) { return u2f((uint32_t)h << 16); }

inline uint16_t f2h(float f) {
  const uint32_t u = f2u(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                       // below 2^-14: subnormal or zero
    const float v = u2f(a) * 16777216.0f;      // in units of 2^-24, exact
    return sign | (uint16_t)std::nearbyint(v); // round to nearest even (default mode)
  }
  uint32_t h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3ffu);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | (uint16_t)h;
}
inline float h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return (sign ? -1.0f : 1.0f) * (float)m * (1.0f / 16777216.0f);
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
  return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

// Rounds v to the dtype in place (so host and device see the same values) and returns the
// device bytes.
inline std::vector<uint8_t> to_device_bytes(std::vector<float> &v, int dtype) {
  std::vector<uint8_t> out;
  if (dtype == AL_DTYPE_FP32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  out.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = dtype == AL_DTYPE_BF16 ? f2bf(v[i]) : f2h(v[i]);
    v[i] = dtype == AL_DTYPE_BF16 ? bf2f(h) : h2f(h);
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}

inline std::vector<float> from_device_bytes(const std::vector<uint8_t> &b, int dtype) {
  const size_t es = dtype == AL_DTYPE_FP32 ? 4 : 2;
  std::vector<float> v(b.size() / es);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == AL_DTYPE_FP32) {
      std::memcpy(&v[i], &b[4 * i], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &b[2 * i], 2);
      v[i] = dtype == AL_DTYPE_BF16 ? bf2f(h) : h2f(h);
    }
  }
  return v;
}

// The tests' generator (tests/common/rng.h): Normal(mean, std) gives the inputs.
using Rng = altest::SplitMix64;

// ||out - ref|| / ||ref||; NaN if any output is not finite. 0 when both are empty or zero.
inline double rel_err(const std::vector<float> &out, const std::vector<float> &ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) return NAN;
    const double d = (double)out[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

} // namespace adaln_test

#endif // AL_TESTS_KERNELS_ADALN_TEST_UTIL_H
