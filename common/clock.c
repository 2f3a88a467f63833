/* The monotonic clock; see clock_internal.h. */
#include "common/clock_internal.h"

#include <time.h>

double clock_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
