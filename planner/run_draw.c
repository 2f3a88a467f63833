/* run_draw.c - the keyed bijection and the keys of a chunked run's draws (run_draw_internal.h). */
#include "planner/run_draw_internal.h"

#include "planner/rng_internal.h"

static uint64_t mix_in(uint64_t h, uint64_t v) {
  uint64_t x = h ^ (v * UINT64_C(0x9e6c63d0676a9a99));
  return plan_splitmix64(&x);
}

uint64_t run_key(uint64_t seed, uint64_t epoch, uint32_t source, uint32_t pass, uint64_t cls,
                 run_key_use use) {
  uint64_t h = mix_in(UINT64_C(0x52554e5f44524157), seed); /* "RUN_DRAW" */
  h = mix_in(h, epoch);
  h = mix_in(h, ((uint64_t)source << 32) | pass);
  h = mix_in(h, cls);
  return mix_in(h, (uint64_t)use);
}

void run_perm_init(run_perm *p, uint64_t n, uint64_t key) {
  p->n = n;
  p->half_bits = 0;
  if (n > 1)
    while (p->half_bits < 32 && ((n - 1) >> (2 * p->half_bits)) != 0) p->half_bits++;
  uint64_t x = key;
  for (int i = 0; i < 6; i++) p->round_key[i] = plan_splitmix64(&x);
}

/* The round function: a splitmix64-style finaliser of (round key, half). */
static uint64_t round_fn(uint64_t key, uint64_t half) {
  uint64_t z = key ^ (half * UINT64_C(0xbf58476d1ce4e5b9));
  z = (z ^ (z >> 31)) * UINT64_C(0x94d049bb133111eb);
  z = (z ^ (z >> 29)) * UINT64_C(0xd6e8feb86659fd93);
  return z ^ (z >> 32);
}

static uint64_t feistel(const run_perm *p, uint64_t x) {
  uint32_t h = p->half_bits;
  uint64_t mask = h == 32 ? UINT64_C(0xffffffff) : (UINT64_C(1) << h) - 1;
  uint64_t l = x >> h, r = x & mask;
  for (int i = 0; i < 6; i++) {
    uint64_t t = l ^ (round_fn(p->round_key[i], r) & mask);
    l = r;
    r = t;
  }
  return (l << h) | r;
}

uint64_t run_perm_at(const run_perm *p, uint64_t j) {
  if (p->half_bits == 0) return j;
  /* Cycle-walking: E restricted to [0, n) by iterating until the value falls inside is a
   * bijection of [0, n), since E permutes [0, 2^(2h)) and j < n. */
  uint64_t x = feistel(p, j);
  while (x >= p->n) x = feistel(p, x);
  return x;
}
