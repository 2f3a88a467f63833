/* run_draw_internal.h - the order in which a chunked run visits a source's samples: a keyed
 * bijection inside each class and dithered cumulative counts over one pass.
 *
 * A pass of a source visits its samples class by class. Progress through a pass is one
 * fixed-point scalar f in [0, RUN_F_ONE] (units of 2^-48). At progress f, class k of n_k samples
 * has given up run_cum(n_k, f, phi_k) = floor((n_k f + phi_k) / 2^48) samples, phi_k a keyed
 * dither in [0, 2^48): monotone in f, 0 at f = 0 and n_k at f = RUN_F_ONE, so every sample of the
 * pass is drawn exactly once whatever stretches [f0, f1) the pass is cut into. The j-th draw of
 * class k is the class list's entry run_perm_at(perm_k, j), perm_k a keyed bijection of [0, n_k).
 * Everything is integer arithmetic (128-bit products), so every machine computes the same draws.
 *
 * Pure functions on caller-owned values; no allocation, no globals; reentrant. */
#ifndef AL_RUN_DRAW_INTERNAL_H
#define AL_RUN_DRAW_INTERNAL_H

#include <stdint.h>

/* Progress 1 (a whole pass) in the fixed-point units of f. */
#define RUN_F_BITS 48
#define RUN_F_ONE (UINT64_C(1) << RUN_F_BITS)

/* What a key is for: the Feistel round keys and the dither of the same class differ. */
typedef enum run_key_use { RUN_KEY_PERM = 1, RUN_KEY_DITHER = 2 } run_key_use;

/* The key of (seed, epoch, source, pass, class, use): splitmix64 over each field in turn. */
uint64_t run_key(uint64_t seed, uint64_t epoch, uint32_t source, uint32_t pass, uint64_t cls,
                 run_key_use use);

/* A keyed bijection of [0, n): a balanced six-round Feistel network on the smallest even bit
 * width 2h with 2^(2h) >= n, cycle-walked into [0, n) (at most 4 evaluations expected). */
typedef struct run_perm {
  uint64_t n;
  uint32_t half_bits; /* h; 0 when n <= 1 (the identity) */
  uint64_t round_key[6];
} run_perm;

/* The bijection of [0, n) for `key` (run_key(..., RUN_KEY_PERM)). Any n, 0 included. */
void run_perm_init(run_perm *p, uint64_t n, uint64_t key);

/* The image of j (j < p->n; the result is < p->n). */
uint64_t run_perm_at(const run_perm *p, uint64_t j);

/* The dither of a class, in [0, RUN_F_ONE), from run_key(..., RUN_KEY_DITHER). */
static inline uint64_t run_dither(uint64_t key) { return key >> (64 - RUN_F_BITS); }

/* Samples of a class of n drawn by progress f (f <= RUN_F_ONE, phi < RUN_F_ONE). */
static inline uint64_t run_cum(uint64_t n, uint64_t f, uint64_t phi) {
  return (uint64_t)(((unsigned __int128)n * f + phi) >> RUN_F_BITS);
}

/* floor(a * b / c) without overflow (c > 0; the result must fit 64 bits). */
static inline uint64_t run_mul_div(uint64_t a, uint64_t b, uint64_t c) {
  return (uint64_t)(((unsigned __int128)a * b) / c);
}

#endif /* AL_RUN_DRAW_INTERNAL_H */
