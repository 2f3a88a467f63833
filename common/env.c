/* Size settings from the environment; see env_internal.h. */
#include "common/env_internal.h"

#include <errno.h>
#include <stdlib.h>

uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *e = getenv(name);
  if (!e || *e < '0' || *e > '9') return dflt;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(e, &end, 10);
  return !errno && !*end && v > 0 ? (uint64_t)v : dflt;
}
