/*
 * cli_internal.h - the verbs of the `adaptiveload` command and helpers they share.
 *
 * Each verb lives in cli/cmd_<verb>.c as `int cli_cmd_<verb>(int argc, char **argv)`,
 * where argv[0] is the verb. It returns the process exit status: 0 success,
 * 1 failure of the work, 2 usage error (or a verb not implemented yet).
 * `--help` / `-h` anywhere prints the verb's usage on stdout and returns 0.
 */
#ifndef AL_CLI_H
#define AL_CLI_H

#include <stdio.h>

#define AL_EXIT_OK 0
#define AL_EXIT_FAIL 1
#define AL_EXIT_USAGE 2

int cli_cmd_synth(int argc, char **argv);
int cli_cmd_index(int argc, char **argv);
int cli_cmd_fit(int argc, char **argv);
int cli_cmd_plan(int argc, char **argv);
int cli_cmd_inspect(int argc, char **argv);
int cli_cmd_stream(int argc, char **argv);
int cli_cmd_demo(int argc, char **argv);

/* Nonzero when argv holds --help or -h. */
int cli_wants_help(int argc, char **argv);

/* For verbs whose issue has not landed: prints "<verb>: not implemented yet"
 * on stderr and returns AL_EXIT_USAGE. */
int cli_not_implemented(const char *verb);

/* Whole-string number parsing for option values: 0 on success, -1 when `s` is
 * NULL, empty, not entirely a number, out of range, or (u64) negative. */
int cli_parse_u64(const char *s, unsigned long long *v);
int cli_parse_double(const char *s, double *v);

/* Prints "adaptiveload <verb>: <al_last_error()>" on stderr; returns AL_EXIT_FAIL. */
int cli_fail(const char *verb);

/* Usage errors, on stderr; both return AL_EXIT_USAGE. cli_usage_error prints
 * "adaptiveload <verb>: <message>" and a pointer to --help (the verbs whose
 * usage is a page); cli_usage_page prints the message, a blank line and the
 * verb's usage. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_usage_page(const char *verb, void (*usage)(FILE *), const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --mem-capacity BYTES and --mem-safety F (fit and plan): the token cap
 * M_mem = (capacity * safety - m0) / m1 from a cost model's memory fit. */
typedef struct cli_mem_opts {
  double capacity; /* 0: not given */
  double safety;   /* default 0.9 */
} cli_mem_opts;

#define CLI_MEM_OPTS_INIT \
  { 0, 0.9 }

/* Nonzero when `opt` is --mem-capacity or --mem-safety. */
int cli_is_mem_option(const char *opt);

/* Parses the value `v` of such an option into *m: 0, or -1 when it is bad. */
int cli_parse_mem_option(const char *opt, const char *v, cli_mem_opts *m);

#endif /* AL_CLI_H */
