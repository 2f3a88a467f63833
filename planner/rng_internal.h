/* rng_internal.h - the planner's PRNG: xoshiro256** seeded through splitmix64.
 * Never rand(): the schedule must be identical on every machine and libc. */
#ifndef AL_RNG_INTERNAL_H
#define AL_RNG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct plan_rng {
  uint64_t s[4];
} plan_rng;

static inline uint64_t plan_splitmix64(uint64_t *x) {
  uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Independent streams for (seed, epoch, stream): stream distinguishes a
 * re-plan (at_step, world) from the epoch's first plan. */
static inline void plan_rng_seed(plan_rng *r, uint64_t seed, uint64_t epoch, uint64_t stream) {
  uint64_t x = seed;
  uint64_t mix = plan_splitmix64(&x);
  x = mix ^ (epoch * UINT64_C(0xd1342543de82ef95));
  mix = plan_splitmix64(&x);
  x = mix ^ (stream * UINT64_C(0xaf251af3b0f025b5));
  for (int i = 0; i < 4; i++) r->s[i] = plan_splitmix64(&x);
}

static inline uint64_t plan_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t plan_rng_next(plan_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = plan_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = plan_rotl(s[3], 45);
  return out;
}

/* Uniform in [0, n), n >= 1, unbiased (Lemire's multiply-and-reject on 32 bits
 * when n fits, which is every use here; 64-bit modulo rejection otherwise). */
static inline uint64_t plan_rng_below(plan_rng *r, uint64_t n) {
  if (n <= UINT32_MAX) {
    uint32_t n32 = (uint32_t)n;
    uint64_t m = (plan_rng_next(r) >> 32) * n32;
    uint32_t lo = (uint32_t)m;
    if (lo < n32) {
      uint32_t thresh = (uint32_t)(-n32) % n32;
      while (lo < thresh) {
        m = (plan_rng_next(r) >> 32) * n32;
        lo = (uint32_t)m;
      }
    }
    return m >> 32;
  }
  uint64_t lim = UINT64_MAX - UINT64_MAX % n, v;
  do v = plan_rng_next(r);
  while (v >= lim);
  return v % n;
}

/* Fisher-Yates shuffle of a[0..n) drawn from r. */
static inline void plan_shuffle_u32(plan_rng *r, uint32_t *a, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)plan_rng_below(r, i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

#endif /* AL_RNG_INTERNAL_H */
