// rng.h - the tests' one pseudo-random generator: splitmix64 with uniform and
// normal draws, so synthetic data is the same on every machine and every run.
// Header-only with no dependencies: the kernel tests use it on the GPU machine
// without the loader's libraries.
#ifndef AL_TESTS_COMMON_RNG_H
#define AL_TESTS_COMMON_RNG_H

#include <cmath>
#include <cstdint>

namespace altest {

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): 53 random bits, centred in their interval.
  double Uniform() { return ((Next() >> 11) + 0.5) / 9007199254740992.0; }
  // Standard normal (Box-Muller; one value per two draws).
  double Normal() {
    double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Normal with the given mean and deviation, rounded to float (the kernel tests'
  // inputs; the product is formed in this order so their data stays bit for bit).
  float Normal(float mean, float std) {
    const double u1 = Uniform(), u2 = Uniform();
    return (float)(mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

} // namespace altest

#endif // AL_TESTS_COMMON_RNG_H
