/* Lookups in the constant tables. See constant_table_internal.h. */
#include "common/constant_table_internal.h"

#include <string.h>

#include "common/al_status.h"

int constant_lookup(const constant_entry *t, size_t n, const char *name, int64_t *value,
                    const char *query, const char *headers) {
  if (!name || !value)
    return al_set_error(AL_EINVAL, "%s: %s is NULL", query, !name ? "name" : "value");
  for (size_t i = 0; i < n; i++) {
    if (strcmp(t[i].name, name) == 0) {
      *value = t[i].value;
      return AL_OK;
    }
  }
  return al_set_error(AL_ENOTFOUND, "%s: no constant '%s' here (%s)", query, name, headers);
}
