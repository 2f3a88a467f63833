/*
 * hash_internal.h - a small, fast, deterministic 64-bit hash for keys and fingerprints.
 *
 * Fingerprints are stored in index and manifest files, so this function is part
 * of the file format: changing it changes every fingerprint. It reads 8 bytes at
 * a time little-endian (memcpy, so any alignment) and finishes with a
 * murmur3-style avalanche; good enough for hash tables and for catching a
 * manifest used with the wrong index, not a cryptographic hash.
 */
#ifndef AL_HASH_INTERNAL_H
#define AL_HASH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t hash_mix64(uint64_t h) {
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  h *= UINT64_C(0xc4ceb9fe1a85ec53);
  h ^= h >> 33;
  return h;
}

static inline uint64_t hash_load64le(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static inline uint64_t hash64(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t h = seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (len + 1));
  while (len >= 8) {
    h = (h ^ hash_mix64(hash_load64le(p))) * UINT64_C(0x9e3779b97f4a7c15);
    h = (h << 27) | (h >> 37);
    p += 8;
    len -= 8;
  }
  uint64_t tail = 0;
  for (size_t i = 0; i < len; i++) tail |= (uint64_t)p[i] << (8 * i);
  h ^= hash_mix64(tail ^ UINT64_C(0x2545f4914f6cdd1d));
  return hash_mix64(h);
}

/* Folds one more value into a running hash: order matters. */
static inline uint64_t hash_fold(uint64_t state, uint64_t v) {
  return hash_mix64(state ^ (v + UINT64_C(0x9e3779b97f4a7c15) + (state << 6) + (state >> 2)));
}

#endif /* AL_HASH_INTERNAL_H */
