/* The option parser, help pages and usage errors of the verbs; see options_internal.h. */
#include "cli/options_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse_internal.h"
#include "common/url_internal.h"

int cli_usage(const cli_verb *verb, cli_say say, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "adaptiveload %s: ", verb->name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (say == CLI_SAY_HINT) {
    fprintf(stderr, "\nrun 'adaptiveload %s --help' for usage\n", verb->name);
  } else {
    fprintf(stderr, "\n\n");
    if (say == CLI_SAY_PAGE) cli_print_help(stderr, verb);
  }
  return AL_EXIT_USAGE;
}

int cli_parse_u64_list(const char *s, uint64_t *v, size_t n) {
  char item[32];
  for (size_t i = 0; i < n; i++) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if ((end != NULL) != (i + 1 < n) || len >= sizeof item) return -1;
    memcpy(item, s, len);
    item[len] = '\0';
    if (parse_u64(item, &v[i])) return -1;
    s = end ? end + 1 : s + len;
  }
  return 0;
}

/* ---- help ------------------------------------------------------------------------------ */

/* "  -o, --out DIR": its length, or it printed when `out` is not NULL. */
static int print_label(FILE *out, const cli_option *o) {
  char label[128];
  int n = snprintf(label, sizeof label, "  %s%s%s%s%s", o->alias ? o->alias : "",
                   o->alias ? ", " : "", o->name, o->metavar ? " " : "",
                   o->metavar ? o->metavar : "");
  if (out) fputs(label, out);
  return n;
}

void cli_print_help(FILE *out, const cli_verb *verb) {
  int column = 0;
  for (const cli_option *o = verb->options; o->name; o++) {
    int n = o->help ? print_label(NULL, o) : 0;
    if (n > column) column = n;
  }
  column += 2;
  fprintf(out, "%s", verb->usage);
  fprintf(out, "options:\n");
  for (const cli_option *o = verb->options; o->name; o++) {
    if (!o->help) continue;
    fprintf(out, "%*s", column - print_label(out, o), "");
    for (const char *p = o->help; *p; p++) {
      fputc(*p, out);
      if (*p == '\n') fprintf(out, "%*s", column, "");
    }
    if (o->def) fprintf(out, " (default %s)", o->def);
    fputc('\n', out);
  }
  if (verb->epilogue) fprintf(out, "\n%s", verb->epilogue);
}

/* ---- parsing --------------------------------------------------------------------------- */

static int wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}

static const cli_option *find_option(const cli_verb *verb, const char *arg) {
  for (const cli_option *o = verb->options; o->name; o++)
    if (!strcmp(arg, o->name) || (o->alias && !strcmp(arg, o->alias))) return o;
  return NULL;
}

/* An integer of any width: the low `size` bytes of v (the row's range keeps v representable;
 * a flag's negative .set arrives as its two's complement). */
static void store_integer(void *dest, size_t size, uint64_t v) {
  if (size == 1) {
    uint8_t x = (uint8_t)v;
    memcpy(dest, &x, 1);
  } else if (size == 2) {
    uint16_t x = (uint16_t)v;
    memcpy(dest, &x, 2);
  } else if (size == 4) {
    uint32_t x = (uint32_t)v;
    memcpy(dest, &x, 4);
  } else {
    memcpy(dest, &v, sizeof v);
  }
}

static int read_number(const cli_option *o, const char *v, void *dest) {
  if (o->type == CLI_U64) {
    uint64_t n;
    /* Past the destination's width is refused too, so no row without .max can wrap. */
    uint64_t cap = o->size >= sizeof n ? UINT64_MAX : (UINT64_C(1) << (8 * o->size)) - 1;
    if (parse_u64(v, &n) || n < o->min || (o->max && n > o->max) || n > cap) return CLI_BAD;
    store_integer(dest, o->size, n);
    return 0;
  }
  double x;
  if (parse_double(v, &x) || x < o->lo || (o->hi && x > o->hi) ||
      ((o->flags & CLI_ABOVE_LO) && x == o->lo))
    return CLI_BAD;
  memcpy(dest, &x, sizeof x);
  return 0;
}

/* Reads option `o` (spelled `opt`) with value `v` (NULL for flags): 0 or an exit status. */
static int read_option(const cli_verb *verb, const cli_option *o, const char *opt, const char *v,
                       void *args) {
  void *dest = (char *)args + o->offset;
  int rc = CLI_BAD;
  switch (o->type) {
    case CLI_FLAG: store_integer(dest, o->size, (uint64_t)o->set); return 0;
    case CLI_STRING: memcpy(dest, &v, sizeof v); return 0;
    case CLI_U64:
    case CLI_DOUBLE: rc = read_number(o, v, dest); break;
    case CLI_CHOICE:
      for (const cli_choice *c = o->choices; c->name; c++) {
        if (strcmp(v, c->name)) continue;
        store_integer(dest, o->size, (uint64_t)(int64_t)c->value);
        return 0;
      }
      break;
    case CLI_CUSTOM: rc = o->parse(verb, opt, v, args); break;
  }
  if (rc != CLI_BAD) return rc;
  if (o->bad) return cli_usage(verb, verb->bad_say, o->bad, v);
  return cli_usage(verb, verb->bad_say, verb->bad ? verb->bad : "bad %s '%s'", opt, v);
}

/* An argument that is not an option: 0 or an exit status. */
static int read_positional(const cli_verb *verb, const char *arg, void *args) {
  int rc = verb->positional ? verb->positional(verb, arg, args) : CLI_BAD;
  return rc == CLI_BAD ? cli_usage(verb, verb->say, verb->stray, arg) : rc;
}

static int is_positional(const cli_verb *verb, const char *arg) {
  if (verb->positional) return arg[0] != '-' || arg[1] == '\0';
  return verb->stray && arg[0] != '-';
}

/* The value of option `o` when `next` follows it, or NULL. */
static const char *value_of(const cli_option *o, const char *next) {
  if (o->type == CLI_FLAG) return NULL;
  if (o->flags & CLI_VALUE_IF_DIGIT) return next && isdigit((unsigned char)next[0]) ? next : NULL;
  return next;
}

static int needs_value(const cli_option *o) {
  return o->type != CLI_FLAG && !(o->flags & CLI_VALUE_IF_DIGIT);
}

int cli_parse(const cli_verb *verb, int argc, char **argv, void *args) {
  if (wants_help(argc, argv)) {
    cli_print_help(stdout, verb);
    return AL_EXIT_OK;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0;
    if (verb->dashdash && !strcmp(a, "--")) {
      for (i++; i < argc && !rc; i++) rc = read_positional(verb, argv[i], args);
      return rc ? rc : CLI_RUN;
    }
    if (is_positional(verb, a)) {
      if ((rc = read_positional(verb, a, args))) return rc;
      continue;
    }
    const cli_option *o = find_option(verb, a);
    if (!o)
      return cli_usage(verb, verb->say, next || verb->unknown_first ? verb->unknown : verb->missing,
                       a, next ? next : "");
    const char *v = value_of(o, next);
    if (!v && needs_value(o)) return cli_usage(verb, verb->say, verb->missing, a);
    if ((rc = read_option(verb, o, a, v, args))) return rc;
    i += v != NULL;
  }
  return CLI_RUN;
}

int cli_parse_root(const cli_verb *verb, const char *v, const char **roots, size_t *n, size_t cap) {
  const char *eq = strchr(v, '=');
  if (eq && eq != v && eq[1] && *n < cap) {
    roots[(*n)++] = v;
    return 0;
  }
  char *shown = url_redact(v);
  int rc = cli_usage(verb, CLI_SAY_BLANK, "bad --root '%s' (FROM=TO, at most %zu)",
                     shown ? shown : "...", cap);
  free(shown);
  return rc;
}
