// The levelling swaps of the K > 1 schedule (planner/bin_level.c): the sorted search makes
// exactly the swaps of the all-pairs search (same bins, same sums, bit for bit), on bins of
// random, repeated, tied, ulp-close, negative and zero costs; and it is fast where all pairs
// are not.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

extern "C" {
#include "planner/bin_level_internal.h"
}

namespace {

struct Bins {
  size_t nb = 0;
  uint32_t K = 0;
  std::vector<double> cost, load;
  std::vector<uint32_t> bin_of, member, count;
};

// The costs dealt like schedule.c's rounds would leave them: bin_of a random permutation
// grouped K per bin, the loads their sums (in batch order, as the rounds add them).
Bins Make(size_t nb, uint32_t K, const std::vector<double> &cost, uint64_t seed) {
  Bins b;
  b.nb = nb, b.K = K, b.cost = cost;
  size_t m = nb * K;
  std::vector<uint32_t> perm(m);
  for (size_t x = 0; x < m; x++) perm[x] = (uint32_t)x;
  altest::SplitMix64 rng(seed);
  for (size_t i = m; i > 1; i--) std::swap(perm[i - 1], perm[rng.Next() % i]);
  b.bin_of.resize(m);
  for (size_t x = 0; x < m; x++) b.bin_of[perm[x]] = (uint32_t)(x / K);
  b.load.assign(nb, 0.0);
  for (size_t x = 0; x < m; x++) b.load[b.bin_of[x]] += cost[x];
  b.member.resize(m);
  b.count.resize(nb);
  return b;
}

void Level(Bins *b, plan_level_search how) {
  plan_bins g = {b->nb,          b->K,
                 b->cost.data(), b->bin_of.data(),
                 b->load.data(), b->member.data(),
                 b->count.data()};
  ASSERT_EQ(plan_level_bins(&g, how), AL_OK);
}

// PAIRS and SORTED from the same start: the same bins and bit-identical sums; *moved when
// the swaps moved any batch.
void ExpectSame(size_t nb, uint32_t K, const std::vector<double> &cost, uint64_t seed,
                const std::string &what, bool *moved) {
  Bins a = Make(nb, K, cost, seed), s = a;
  std::vector<uint32_t> start = a.bin_of;
  Level(&a, PLAN_LEVEL_PAIRS);
  Level(&s, PLAN_LEVEL_SORTED);
  ASSERT_EQ(a.bin_of, s.bin_of) << what;
  for (size_t i = 0; i < nb; i++)
    ASSERT_EQ(std::memcmp(&a.load[i], &s.load[i], sizeof(double)), 0) << what << " bin " << i;
  // Every bin keeps K batches.
  std::vector<uint32_t> n(nb, 0);
  for (uint32_t b : a.bin_of) n[b]++;
  for (size_t i = 0; i < nb; i++) ASSERT_EQ(n[i], K) << what;
  *moved = a.bin_of != start;
}

enum Kind { kWide, kFew, kTies, kUlp, kSigned, kPadding };

std::vector<double> Costs(size_t m, Kind kind, uint64_t seed) {
  altest::SplitMix64 rng(seed);
  std::vector<double> c(m);
  for (size_t x = 0; x < m; x++) {
    uint64_t r = rng.Next();
    double u = (double)(r >> 11) / 9007199254740992.0;
    switch (kind) {
      case kWide: c[x] = 5.0 + 3000.0 * u * u * u; break;
      case kFew: c[x] = 10.0 * (double)(1 + r % 7); break;
      case kTies: c[x] = r % 3 ? 12.5 : 700.0 + (double)(r % 5); break;
      // Costs one or two ulps apart: sums and differences that round to the same value.
      case kUlp: c[x] = 100.0 + (double)(r % 8) * std::ldexp(1.0, -46); break; // ulp(100) = 2^-46
      case kSigned: c[x] = (double)((int64_t)(r % 41) - 20) * 0.5; break;
      // Like a padded step: a few real batches, the rest one-sample padding of two costs.
      case kPadding: c[x] = x < m / 20 ? 50.0 + 600.0 * u : (r % 2 ? 9.75 : 10.25); break;
    }
  }
  return c;
}

TEST(BinLevel, SortedSearchMakesTheSwapsOfAllPairs) {
  const uint32_t ks[] = {2, 3, 5, 16, 17, 33, 64, 130};
  const size_t nbs[] = {1, 2, 3, 8, 21};
  int cases = 0, moved = 0;
  for (uint32_t K : ks)
    for (size_t nb : nbs)
      for (int kind = kWide; kind <= kPadding; kind++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
          std::string what = "K " + std::to_string(K) + " bins " + std::to_string(nb) + " kind " +
                             std::to_string(kind) + " seed " + std::to_string(seed);
          bool m = false;
          ExpectSame(nb, K, Costs(nb * K, (Kind)kind, seed * 7919 + K), seed, what, &m);
          cases++, moved += m;
        }
  EXPECT_EQ(cases, 8 * 5 * 6 * 3);
  // One bin has nothing to trade with; most other cases swap (the comparison is not vacuous):
  // 516 of the 576.
  EXPECT_GE(moved, 500);
}

// Costs sorted descending and dealt like schedule.c's first rounds: the swaps then start
// from nearly level bins, the case where ties between candidate pairs are most common.
TEST(BinLevel, SortedSearchMatchesFromDealtRounds) {
  for (uint32_t K : {17u, 40u, 256u})
    for (size_t nb : {2u, 7u, 64u}) {
      size_t m = nb * K;
      std::vector<double> c = Costs(m, kWide, K * 31 + nb);
      std::sort(c.begin(), c.end(), [](double x, double y) { return x > y; });
      Bins a;
      a.nb = nb, a.K = K, a.cost = c;
      a.bin_of.resize(m), a.load.assign(nb, 0.0), a.member.resize(m), a.count.resize(nb);
      for (size_t x = 0; x < m; x++) {
        size_t round = x / nb, q = x % nb;
        uint32_t b = (uint32_t)(round % 2 ? nb - 1 - q : q); // snake order
        a.bin_of[x] = b;
        a.load[b] += c[x];
      }
      Bins s = a;
      Level(&a, PLAN_LEVEL_PAIRS);
      Level(&s, PLAN_LEVEL_SORTED);
      ASSERT_EQ(a.bin_of, s.bin_of) << "K " << K << " bins " << nb;
      ASSERT_EQ(std::memcmp(a.load.data(), s.load.data(), nb * sizeof(double)), 0);
    }
}

// What made K = 65,536 plans take seconds to minutes: all pairs of two bins of K batches.
// The sorted search (AUTO above K = 16) levels two bins of 262,144 mostly-padding batches in
// well under a second (all pairs: about 6.9e10 pairs per swap).
TEST(BinLevel, LargeBinsAreFast) {
  const uint32_t K = 262144;
  const size_t nb = 2;
  Bins b = Make(nb, K, Costs(nb * K, kPadding, 5), 9);
  auto t0 = std::chrono::steady_clock::now();
  Level(&b, PLAN_LEVEL_AUTO);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
  double total = 0;
  for (double c : b.cost) total += c;
  EXPECT_NEAR(b.load[0] + b.load[1], total, 1e-6 * total);
}

// Non-finite costs: AUTO keeps all pairs (NaN comparisons are not monotone).
TEST(BinLevel, NonFiniteCostsUseAllPairs) {
  std::vector<double> c = Costs(3 * 20, kWide, 3);
  c[4] = INFINITY;
  Bins a = Make(3, 20, c, 2), s = a;
  Level(&a, PLAN_LEVEL_PAIRS);
  Level(&s, PLAN_LEVEL_AUTO);
  EXPECT_EQ(a.bin_of, s.bin_of);
}

} // namespace
