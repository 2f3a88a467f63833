/* Size settings from the environment; see env_internal.h. */
#include "common/env_internal.h"

#include <stdlib.h>

#include "common/parse_internal.h"

uint64_t env_u64(const char *name, uint64_t dflt) {
  uint64_t v = 0;
  return !parse_u64(getenv(name), &v) && v > 0 ? v : dflt;
}
