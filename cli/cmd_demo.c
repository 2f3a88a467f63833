/*
 * adaptiveload demo: the whole pipeline on a small synthetic corpus.
 *
 * Runs the other verbs in-process with the arguments a user would type, so the
 * demo exercises exactly what the CLI ships and prints each command before it
 * runs (copy them to reproduce a step by hand).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "common/al_status.h"
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"
#include "manifest/al_report.h"

/* The values are handed to the other verbs as typed, which check them. */
typedef struct demo_args {
  const char *out, *samples, *shards, *world, *micro, *seed, *batches;
} demo_args;

#define DEMO_OPTION(flag, member, meta, text, dflt)                                             \
  {                                                                                             \
    .name = flag, .type = CLI_STRING, CLI_AT(demo_args, member), .metavar = meta, .help = text, \
    .def = dflt                                                                                 \
  }

/* clang-format off */
static const cli_option OPTIONS[] = {
    DEMO_OPTION("--out", out, "DIR", "working directory, reused if present", "adaptiveload-demo"),
    DEMO_OPTION("--samples", samples, "N", "corpus size, about 1.8 MB of latents per sample",
                "1000"),
    DEMO_OPTION("--shards", shards, "SHARDS", "shards", "8"),
    DEMO_OPTION("--world", world, "W", "data-parallel ranks to plan for", "8"),
    DEMO_OPTION("--micro-per-step", micro, "K",
                "micro-batches per rank per step (gradient accumulation)", "4"),
    DEMO_OPTION("--seed", seed, "S", "corpus and shuffle seed", "0"),
    DEMO_OPTION("--batches", batches, "M", "micro-batches to stream", "6"),
    {.name = NULL},
};
/* clang-format on */

static const cli_verb DEMO = {
    .name = "demo",
    .usage =
        "usage: adaptiveload demo [--out DIR] [--samples N] [--shards SHARDS] [--world W]\n"
        "                         [--micro-per-step K] [--seed S] [--batches M]\n\n"
        "Runs the pipeline on an embedded default: writes a synthetic WebDataset corpus\n"
        "(images and videos with real-size bf16 latents), indexes it, plans one epoch\n"
        "with both policies (adaptive and equal-token) for W ranks and K micro-batches\n"
        "per rank per step using the embedded H200 cost model, prints the balance\n"
        "comparison, draws each plan as an SVG, and streams the first M packed\n"
        "micro-batches of rank 0.\n\n",
    .options = OPTIONS,
    .say = CLI_SAY_PAGE,
    .missing = "missing value for '%s'",
    .unknown = "unknown option '%s'",
    .unknown_first = 1,
};

/* Prints and runs one verb. argv is NULL-terminated; argv[0] is the verb. */
static int run_verb(int (*fn)(int, char **), char **argv) {
  int argc = 0;
  printf("\n$ adaptiveload");
  while (argv[argc]) printf(" %s", argv[argc++]);
  printf("\n");
  fflush(stdout);
  int exit_code = fn(argc, argv);
  fflush(stdout);
  fflush(stderr);
  if (exit_code != AL_EXIT_OK)
    fprintf(stderr, "adaptiveload demo: '%s' failed (exit %d)\n", argv[0], exit_code);
  return exit_code;
}

static void section(int n, const char *title) {
  printf("\n== %d/5 %s ==\n", n, title);
  fflush(stdout);
}

/* Mean latent bytes per sample of `synth`'s default mix (measured: 1000 samples, 1.75 GB). */
#define DEMO_BYTES_PER_SAMPLE 1.8e6

/* Says where the corpus goes and about how big it is before anything is written; refuses when
 * the file system holds less than that. 0, or AL_EXIT_FAIL with the reason printed. */
static int announce(const char *out, const char *samples) {
  char *end = NULL;
  unsigned long long n = strtoull(samples, &end, 10);
  double bytes = end && !*end ? (double)n * DEMO_BYTES_PER_SAMPLE : 0;
  char where[4096];
  if (!realpath(out, where)) snprintf(where, sizeof where, "%s", out);
  struct statvfs fs;
  double avail = statvfs(where, &fs) == 0 ? (double)fs.f_bavail * (double)fs.f_frsize : -1;
  printf(
      "adaptiveload demo: writing a corpus of about %.1f GB (%s samples, about 1.8 MB of latents "
      "each) into %s/corpus (--out DIR to put it elsewhere, --samples N for a smaller one)\n",
      bytes / 1e9, samples, where);
  if (avail >= 0)
    printf("  %.1f GB free there\n", avail / 1e9);
  else
    printf("  free space there unknown\n");
  if (avail >= 0 && bytes > avail) {
    fprintf(stderr,
            "adaptiveload demo: %s has %.1f GB free, the corpus needs about %.1f GB: choose "
            "another --out or fewer --samples\n",
            where, avail / 1e9, bytes / 1e9);
    return AL_EXIT_FAIL;
  }
  return 0;
}

int cli_cmd_demo(int argc, char **argv) {
  demo_args a = {"adaptiveload-demo", "1000", "8", "8", "4", "0", "6"};
  int ec = cli_parse(&DEMO, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  const char *out = a.out, *samples = a.samples, *shards = a.shards, *world = a.world;
  const char *micro = a.micro, *seed = a.seed, *batches = a.batches;
  /* The verbs report on stderr and list on stdout; a demo reads as one story, so
   * send both down one line-buffered stream and keep them in order when piped. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  fflush(stderr);
  dup2(STDOUT_FILENO, STDERR_FILENO);
  if (mkdir(out, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "adaptiveload demo: cannot create %s: %s\n", out, strerror(errno));
    return AL_EXIT_FAIL;
  }
  if (announce(out, samples)) return AL_EXIT_FAIL;
  char corpus[4096], index[4096], man_a[4096], man_e[4096], svg_a[4096], svg_e[4096];
  snprintf(corpus, sizeof corpus, "%s/corpus", out);
  snprintf(index, sizeof index, "%s/index.alidx", out);
  snprintf(man_a, sizeof man_a, "%s/adaptive.alman", out);
  snprintf(man_e, sizeof man_e, "%s/equal-token.alman", out);
  snprintf(svg_a, sizeof svg_a, "%s/adaptive.svg", out);
  snprintf(svg_e, sizeof svg_e, "%s/equal-token.svg", out);

  int exit_code;
  section(1, "synthetic corpus: images and videos, real-size Wan 2.1 latents");
  char *a_synth[] = {"synth",    "--out",        corpus,   "--samples",  (char *)samples,
                     "--shards", (char *)shards, "--seed", (char *)seed, NULL};
  if ((exit_code = run_verb(cli_cmd_synth, a_synth))) return exit_code;

  section(2, "index the shards");
  char *a_index[] = {"index", "-o", index, corpus, NULL};
  if ((exit_code = run_verb(cli_cmd_index, a_index))) return exit_code;

  section(3, "plan one epoch with both policies (embedded H200 cost model)");
  char *a_plan_a[] = {"plan",        "--index",  index,    "--world",    (char *)world,
                      "--policy",    "adaptive", "--seed", (char *)seed, "--micro-per-step",
                      (char *)micro, "-o",       man_a,    NULL};
  if ((exit_code = run_verb(cli_cmd_plan, a_plan_a))) return exit_code;
  char *a_plan_e[] = {"plan",        "--index",     index,    "--world",    (char *)world,
                      "--policy",    "equal-token", "--seed", (char *)seed, "--micro-per-step",
                      (char *)micro, "-o",          man_e,    NULL};
  if ((exit_code = run_verb(cli_cmd_plan, a_plan_e))) return exit_code;

  section(4, "balance: adaptive vs equal-token");
  al_manifest *ma = NULL, *me = NULL;
  if (al_manifest_load(&ma, man_a) || al_manifest_load(&me, man_e)) {
    al_manifest_free(ma);
    return cli_fail("demo");
  }
  al_plan_compare_print(stdout, ma, me);
  int rc = al_manifest_write_svg(ma, svg_a);
  if (!rc) rc = al_manifest_write_svg(me, svg_e);
  al_manifest_free(ma);
  al_manifest_free(me);
  if (rc) return cli_fail("demo");
  printf("per-step per-rank load drawn in %s and %s\n", svg_a, svg_e);

  section(5, "stream rank 0's first packed micro-batches");
  char *a_stream[] = {"stream", "--index", index,           "--manifest",    man_a,
                      "--rank", "0",       "--max-batches", (char *)batches, NULL};
  if ((exit_code = run_verb(cli_cmd_stream, a_stream))) return exit_code;

  printf("\ndemo done: files in %s/ (inspect them with `adaptiveload inspect %s`)\n", out, man_a);
  return AL_EXIT_OK;
}
