/*
 * parse_internal.h - whole-string number parsing, one rule everywhere user numbers enter
 * (CLI option values, environment settings, the benchmark tools). Internal to the modules,
 * not exported.
 *
 * A number is the whole string: no leading white space, no sign on unsigned values, no
 * suffix, nothing that overflows. strtoull alone accepts " -1" (as 2^64-1) and "+5"; these
 * refuse both. Thread-safe (no state; errno is saved and restored).
 */
#ifndef AL_PARSE_INTERNAL_H
#define AL_PARSE_INTERNAL_H

#include <stdint.h>

/* Decimal digits only, fitting 64 bits: 0 and *v set; -1 (and *v untouched) when `s` is
 * NULL, empty, has anything but digits, or overflows. */
int parse_u64(const char *s, uint64_t *v);

/* An optional '-' then decimal digits, fitting int64_t: 0 and *v set, else -1. */
int parse_i64(const char *s, int64_t *v);

/* A finite decimal or exponent number (strtod's syntax without leading white space, "nan"
 * or "inf"): 0 and *v set, else -1. */
int parse_double(const char *s, double *v);

#endif /* AL_PARSE_INTERNAL_H */
