/* adaptiveload: one binary, one verb per stage of the pipeline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env_internal.h"
#include "cli/cli_internal.h"
#include "common/al_version.h"

typedef struct verb {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} verb;

static const verb VERBS[] = {
    {"synth", cli_cmd_synth, "write a synthetic WebDataset corpus (images + videos)"},
    {"index", cli_cmd_index, "index WebDataset tar shards into an index file"},
    {"fit", cli_cmd_fit, "fit a cost model to a shape benchmark CSV"},
    {"buckets", cli_cmd_buckets, "print a bucket table, or fit one to a corpus (--fit INDEX)"},
    {"plan", cli_cmd_plan, "plan buckets, batch sizes and a per-rank schedule into a manifest"},
    {"inspect", cli_cmd_inspect, "summarise a manifest (balance, bubbles, throughput)"},
    {"stream", cli_cmd_stream, "read one rank's packed batches from a manifest"},
    {"verify", cli_cmd_verify, "check a corpus before training: shards, members, plan, crop"},
    {"demo", cli_cmd_demo, "run the whole pipeline on a small embedded default corpus"},
};
#define N_VERBS (sizeof VERBS / sizeof VERBS[0])

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload VERB [ARGS...]\n"
          "       adaptiveload VERB --help\n"
          "       adaptiveload --version\n\n"
          "Shape-bucketed, load-balanced data loading for video diffusion transformers.\n\n"
          "verbs:\n");
  for (size_t i = 0; i < N_VERBS; i++) fprintf(out, "  %-8s %s\n", VERBS[i].name, VERBS[i].summary);
  fprintf(out,
          "\n--version prints \"adaptiveload VERSION\", the version of the library it runs.\n");
}

/* `bazel run //:adaptiveload -- VERB ...` runs the binary in its runfiles tree; the
 * caller's relative paths (shards, -o, --index) are relative to where bazel was run,
 * which bazel passes as BUILD_WORKING_DIRECTORY. The CLI needs nothing from its runfiles
 * (the default cost model and demo corpus are embedded), so it works from there. */
static int enter_caller_directory(void) {
  const char *wd = env_text("BUILD_WORKING_DIRECTORY");
  if (!wd || !*wd) return 0;
  if (chdir(wd) != 0) {
    fprintf(stderr, "adaptiveload: cannot enter BUILD_WORKING_DIRECTORY '%s': %s\n", wd,
            strerror(errno));
    return -1;
  }
  return 0;
}

static int dispatch(int argc, char **argv) {
  if (enter_caller_directory()) return AL_EXIT_FAIL;
  if (argc < 2) {
    usage(stderr);
    return AL_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("adaptiveload %s\n", al_version());
    return AL_EXIT_OK;
  }
  for (size_t i = 0; i < N_VERBS; i++)
    if (!strcmp(argv[1], VERBS[i].name)) return VERBS[i].run(argc - 1, argv + 1);
  fprintf(stderr, "adaptiveload: unknown verb '%s'\n\n", argv[1]);
  usage(stderr);
  return AL_EXIT_USAGE;
}

/* What a verb printed on stdout (a report, JSON, the stream's listing) must have been written:
 * an error flushing or writing it (a full disk, EIO) fails the run instead of exit 0. */
int main(int argc, char **argv) {
  int rc = dispatch(argc, argv);
  errno = 0;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "adaptiveload: writing standard output failed: %s\n",
            errno ? strerror(errno) : "write error");
    return rc == AL_EXIT_OK ? AL_EXIT_FAIL : rc;
  }
  return rc;
}
