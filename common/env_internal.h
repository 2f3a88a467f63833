/*
 * env_internal.h - the process environment, read one way everywhere: the launcher's RANK,
 * WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, the AWS_* storage settings, the size limits
 * (ADAPTIVELOAD_MAX_*_BYTES), the remote timeout, TMPDIR and PWD. No other file of the
 * library calls getenv. Internal to the modules, not exported. Thread safety: as getenv's (the
 * library never sets the environment).
 */
#ifndef AL_ENV_INTERNAL_H
#define AL_ENV_INTERNAL_H

#include <stdint.h>

/* The value of `name` when it is set and not empty, else NULL. */
const char *env_text(const char *name);

/* The value of environment variable `name` when it is a positive decimal number (digits only,
 * fitting 64 bits), else `dflt` (unset, empty, zero, signs, spaces, suffixes, overflow). */
uint64_t env_u64(const char *name, uint64_t dflt);

/* 0 when `name` is unset or empty; 1 with *out set when it is a decimal number 0..LONG_MAX
 * (digits only); -1 when it is anything else (the caller names the variable and its value). */
int env_long(const char *name, long *out);

/* A positive number of seconds below 10^6 (strtod's syntax, nothing after it), else 0. */
double env_seconds(const char *name);

#endif /* AL_ENV_INTERNAL_H */
