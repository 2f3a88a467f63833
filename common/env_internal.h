/*
 * env_internal.h - size settings from the environment (ADAPTIVELOAD_MAX_*_BYTES), read one
 * way everywhere. Internal to the modules, not exported.
 */
#ifndef AL_ENV_INTERNAL_H
#define AL_ENV_INTERNAL_H

#include <stdint.h>

/* The value of environment variable `name` when it is a positive decimal number (digits only,
 * fitting 64 bits), else `dflt` (unset, empty, zero, signs, spaces, suffixes, overflow). */
uint64_t env_u64(const char *name, uint64_t dflt);

#endif /* AL_ENV_INTERNAL_H */
