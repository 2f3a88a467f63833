/* The process environment, read here only; see env_internal.h. */
#include "common/env_internal.h"

#include <limits.h>
#include <stdlib.h>

#include "common/parse_internal.h"

const char *env_text(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

uint64_t env_u64(const char *name, uint64_t dflt) {
  uint64_t v = 0;
  return !parse_u64(getenv(name), &v) && v > 0 ? v : dflt;
}

int env_long(const char *name, long *out) {
  const char *v = env_text(name);
  if (!v) return 0;
  uint64_t x;
  if (parse_u64(v, &x) != 0 || x > (uint64_t)LONG_MAX) return -1;
  *out = (long)x;
  return 1;
}

double env_seconds(const char *name) {
  const char *v = env_text(name);
  if (!v) return 0;
  char *end;
  double x = strtod(v, &end);
  return *end == 0 && x > 0 && x < 1e6 ? x : 0;
}
