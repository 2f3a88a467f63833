/* Whole-string number parsing; see parse_internal.h. */
#include "common/parse_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

int parse_u64(const char *s, uint64_t *v) {
  if (!s || !isdigit((unsigned char)*s)) return -1;
  int saved = errno;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(s, &end, 10);
  int bad = errno || *end;
  errno = saved;
  if (bad) return -1;
  *v = (uint64_t)x;
  return 0;
}

int parse_i64(const char *s, int64_t *v) {
  if (!s) return -1;
  const char *d = *s == '-' ? s + 1 : s;
  if (!isdigit((unsigned char)*d)) return -1;
  int saved = errno;
  errno = 0;
  char *end;
  long long x = strtoll(s, &end, 10);
  int bad = errno || *end;
  errno = saved;
  if (bad) return -1;
  *v = (int64_t)x;
  return 0;
}

int parse_double(const char *s, double *v) {
  if (!s || !*s || isspace((unsigned char)*s)) return -1;
  int saved = errno;
  errno = 0;
  char *end;
  double x = strtod(s, &end);
  int bad = errno || *end || !isfinite(x);
  errno = saved;
  if (bad) return -1;
  *v = x;
  return 0;
}
