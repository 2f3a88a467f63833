/* Option value parsing shared by the verbs. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"

/* Decimal digits only: strtoull alone accepts leading white space and a sign, so " -1"
 * would parse as 2^64-1 and "+5" as 5. */
int cli_parse_u64(const char *s, unsigned long long *v) {
  char *end;
  errno = 0;
  if (!s || !isdigit((unsigned char)*s)) return -1;
  *v = strtoull(s, &end, 10);
  return (errno || *end) ? -1 : 0;
}

int cli_parse_double(const char *s, double *v) {
  char *end;
  errno = 0;
  if (!s || !*s || isspace((unsigned char)*s)) return -1;
  *v = strtod(s, &end);
  /* strtod also reads "nan" and "inf": no option takes them (and JSON has no spelling). */
  return (errno || *end || !isfinite(*v)) ? -1 : 0;
}

int cli_is_mem_option(const char *opt) {
  return !strcmp(opt, "--mem-capacity") || !strcmp(opt, "--mem-safety");
}

int cli_parse_mem_option(const char *opt, const char *v, cli_mem_opts *m) {
  if (!strcmp(opt, "--mem-capacity"))
    return cli_parse_double(v, &m->capacity) || !(m->capacity > 0) ? -1 : 0;
  return cli_parse_double(v, &m->safety) || !(m->safety > 0) || m->safety > 1 ? -1 : 0;
}
