/*
 * strtab_internal.h - interned strings: each distinct string gets a dense id (0, 1, ...).
 *
 * Used for member extensions ("json", "latent"): a sample stores a 16-bit id,
 * the table holds each spelling once. Strings are copied into the table; the
 * pointers strtab_get returns stay valid until strtab_free (each string is
 * its own allocation, so growing the table never moves them).
 * Not thread-safe; one table per thread while building.
 */
#ifndef AL_STRTAB_INTERNAL_H
#define AL_STRTAB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct strtab {
  char **strs; /* by id */
  uint32_t n;
  size_t cap;
  uint32_t *slots; /* open addressing: id + 1, 0 = empty */
  uint32_t n_slots;
} strtab;

/* Id of `s` (length `len`), adding it when new. Returns AL_OK or AL_ENOMEM/AL_ERANGE
 * (more than `max_ids` distinct strings). */
int strtab_intern(strtab *t, const char *s, size_t len, uint32_t max_ids, uint32_t *id);

/* Id of `s` or -1 when absent. */
int64_t strtab_find(const strtab *t, const char *s, size_t len);

static inline const char *strtab_get(const strtab *t, uint32_t id) { return t->strs[id]; }

void strtab_free(strtab *t);

#endif /* AL_STRTAB_INTERNAL_H */
