/* adaptiveload synth: placeholder until its issue lands. */
#include <stdio.h>

#include "cli/al_cli.h"

int al_cmd_synth(int argc, char **argv) {
  if (al_cli_wants_help(argc, argv)) {
    printf("usage: adaptiveload synth ...\n\n(not implemented yet)\n");
    return AL_EXIT_OK;
  }
  return al_cli_not_implemented("synth");
}
