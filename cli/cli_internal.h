/*
 * cli_internal.h - the verbs of the `adaptiveload` command and helpers they share.
 *
 * Each verb lives in cli/cmd_<verb>.c as `int al_cmd_<verb>(int argc, char **argv)`,
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

#endif /* AL_CLI_H */
