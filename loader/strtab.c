/* Interned strings; see strtab_internal.h. */
#include "loader/strtab_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "common/grow_internal.h"
#include "loader/hash_internal.h"

static uint32_t slot_of(const strtab *t, const char *s, size_t len, int *found) {
  uint32_t mask = t->n_slots - 1;
  uint32_t i = (uint32_t)hash64(s, len, 0) & mask;
  for (;;) {
    uint32_t v = t->slots[i];
    if (v == 0) {
      *found = 0;
      return i;
    }
    const char *c = t->strs[v - 1];
    if (strncmp(c, s, len) == 0 && c[len] == '\0') {
      *found = 1;
      return i;
    }
    i = (i + 1) & mask;
  }
}

static int rehash(strtab *t, uint32_t n_slots) {
  uint32_t *slots = calloc(n_slots, sizeof *slots);
  if (!slots) return al_set_error(AL_ENOMEM, "out of memory (string table)");
  free(t->slots);
  t->slots = slots;
  t->n_slots = n_slots;
  for (uint32_t id = 0; id < t->n; id++) {
    int found;
    uint32_t s = slot_of(t, t->strs[id], strlen(t->strs[id]), &found);
    t->slots[s] = id + 1;
  }
  return AL_OK;
}

int64_t strtab_find(const strtab *t, const char *s, size_t len) {
  if (!t->n_slots) return -1;
  int found;
  uint32_t i = slot_of(t, s, len, &found);
  return found ? (int64_t)t->slots[i] - 1 : -1;
}

int strtab_intern(strtab *t, const char *s, size_t len, uint32_t max_ids, uint32_t *id) {
  if (!t->n_slots) {
    int rc = rehash(t, 16);
    if (rc) return rc;
  }
  int found;
  uint32_t i = slot_of(t, s, len, &found);
  if (found) {
    *id = t->slots[i] - 1;
    return AL_OK;
  }
  if (t->n >= max_ids)
    return al_set_error(AL_ERANGE, "more than %u distinct member extensions", max_ids);
  int rc = grow_array((void **)&t->strs, &t->cap, (size_t)t->n + 1, sizeof *t->strs,
                      "the string table");
  if (rc) return rc;
  char *copy = malloc(len + 1);
  if (!copy) return al_set_error(AL_ENOMEM, "out of memory (string table)");
  memcpy(copy, s, len);
  copy[len] = '\0';
  t->strs[t->n] = copy;
  t->slots[i] = t->n + 1;
  *id = t->n++;
  if ((uint64_t)t->n * 2 > t->n_slots) return rehash(t, t->n_slots * 2);
  return AL_OK;
}

void strtab_free(strtab *t) {
  for (uint32_t i = 0; i < t->n; i++) free(t->strs[i]);
  free(t->strs);
  free(t->slots);
  memset(t, 0, sizeof *t);
}
