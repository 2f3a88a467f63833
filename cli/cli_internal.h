/*
 * cli_internal.h - the verbs of the `adaptiveload` command.
 *
 * Each verb lives in cli/cmd_<verb>.c as `int cli_cmd_<verb>(int argc, char **argv)`,
 * where argv[0] is the verb. It returns the process exit status: 0 success,
 * 1 failure of the work, 2 usage error. `--help` / `-h` anywhere prints the verb's help
 * on stdout and returns 0. Its options are a table read by cli/options_internal.h.
 */
#ifndef AL_CLI_INTERNAL_H
#define AL_CLI_INTERNAL_H

#include <stdio.h>

#include "common/al_status.h"

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
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_buckets(int argc, char **argv);

/* Prints "adaptiveload <verb>: <al_last_error()>" on stderr; returns AL_EXIT_FAIL. */
static inline int cli_fail(const char *verb) {
  fprintf(stderr, "adaptiveload %s: %s\n", verb, al_last_error());
  return AL_EXIT_FAIL;
}

#endif /* AL_CLI_INTERNAL_H */
