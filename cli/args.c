/* Option value parsing shared by the verbs. */
#include <errno.h>
#include <stdlib.h>

#include "cli/cli_internal.h"

int cli_parse_u64(const char *s, unsigned long long *v) {
  char *end;
  errno = 0;
  if (!s || !*s || *s == '-') return -1;
  *v = strtoull(s, &end, 10);
  return (errno || *end) ? -1 : 0;
}

int cli_parse_double(const char *s, double *v) {
  char *end;
  errno = 0;
  if (!s || !*s) return -1;
  *v = strtod(s, &end);
  return (errno || *end) ? -1 : 0;
}
