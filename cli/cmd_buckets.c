/* adaptiveload buckets: bucket tables. --fit INDEX proposes one from the corpus's own latent
 * grids (planner/bucket_fit_internal.h); without it the table (default or --buckets FILE) is
 * printed in its text form. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/fidelity_print_internal.h"
#include "cli/options_internal.h"
#include "common/atomic_file_internal.h"
#include "loader/al_index.h"
#include "planner/al_plan.h"
#include "planner/bucket_fit_internal.h"

typedef struct buckets_args {
  const char *fit, *out, *buckets;
  uint64_t max_sizes, mem_tokens;
  al_latent_geom geom;
  int quiet;
} buckets_args;

/* --geometry ST,SS,PT,PH,PW: five numbers 1..2^32-1 (as plan --geometry). */
static int parse_geometry(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  return cli_parse_geometry(v, &((buckets_args *)args)->geom);
}

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--fit", .type = CLI_STRING, CLI_AT(buckets_args, fit), .metavar = "INDEX",
     .help = "propose a table from INDEX's latent grids that keeps the most\n"
             "native latent tokens"},
    {.name = "--out", .alias = "-o", .type = CLI_STRING, CLI_AT(buckets_args, out),
     .metavar = "TABLE", .help = "write the table here (plan --buckets TABLE)", .def = "stdout"},
    {.name = "--max-sizes", .type = CLI_U64, CLI_AT(buckets_args, max_sizes), .min = 1,
     .max = BUCKET_FIT_MAX_SIZES, .metavar = "N", .help = "--fit: at most N (W, H) sizes",
     .def = "16"},
    {.name = "--mem-tokens", .type = CLI_U64, CLI_AT(buckets_args, mem_tokens), .min = 1,
     .max = AL_PLAN_MAX_MEM_TOKENS, .metavar = "M",
     .help = "--fit: the per-sample token cap M_mem the plan will use", .def = "65536"},
    {.name = "--geometry", .type = CLI_CUSTOM, .parse = parse_geometry, .metavar = "ST,SS,PT,PH,PW",
     .help = "--fit: VAE strides and patch of the plan (plan --geometry)", .def = "4,8,1,2,2"},
    {.name = "--buckets", .type = CLI_STRING, CLI_AT(buckets_args, buckets), .metavar = "FILE",
     .help = "without --fit: the table to print (checked and normalised)",
     .def = "the default table"},
    {.name = "--quiet", .alias = "-q", .type = CLI_FLAG, CLI_AT(buckets_args, quiet), .set = 1,
     .help = "--fit: no progress lines"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb BUCKETS = {
    .name = "buckets",
    .usage =
        "usage: adaptiveload buckets --fit INDEX [-o TABLE] [--max-sizes N] [--mem-tokens M]\n"
        "                            [--geometry ST,SS,PT,PH,PW] [--quiet]\n"
        "       adaptiveload buckets [--buckets FILE] [-o TABLE]\n\n"
        "--fit proposes a bucket table (the text form plan --buckets reads) from the corpus's\n"
        "own latent grids: at most N sizes, each the grid of some samples (a typed latent's\n"
        "H x W, else the pixels' H/s x W/s, whole patches) times the VAE stride, in an aspect\n"
        "group named by its reduced ratio, and the frame counts of the corpus's latent\n"
        "lengths. Sizes are added greedily, each the one whose table keeps the most native\n"
        "latent tokens with every sample assigned as plan assigns it (crop only for typed\n"
        "latents; M_mem cuts long samples in time), so the kept fraction it prints is what\n"
        "plan --buckets TABLE --mem-tokens M then keeps. The same index gives the same\n"
        "bytes. Progress goes to stderr, one line per size.\n\n"
        "Without --fit the table (default or --buckets FILE) is written in its text form.\n\n",
    .options = OPTIONS,
    .say = CLI_SAY_HINT,
    .missing = "%s needs a value (or is unknown)",
    .unknown = "bad option or value: %s %s",
    .bad = "bad option or value: %s %s",
    .bad_say = CLI_SAY_HINT,
};

/* The table's text form to a->out (atomically) or stdout: 0 or an al_status. */
static int write_table(const al_bucket_table *t, const char *path) {
  if (!path) return al_bucket_table_write(t, stdout);
  char *buf = NULL;
  size_t n = 0;
  FILE *mem = open_memstream(&buf, &n);
  if (!mem) return al_set_error(AL_ENOMEM, "buckets: out of memory");
  int rc = al_bucket_table_write(t, mem);
  fclose(mem);
  if (!rc) rc = afile_write_all(path, buf, n);
  free(buf);
  return rc;
}

/* buckets --fit INDEX: fit, write, and report the predicted kept fraction on stderr. */
static int fit(const buckets_args *a) {
  al_index *idx = NULL;
  al_bucket_table *t = NULL;
  bucket_fit_result res;
  bucket_fit_options o = {(size_t)a->max_sizes, a->mem_tokens, a->geom, a->quiet ? NULL : stderr};
  int rc = al_index_load(&idx, a->fit);
  if (!rc) rc = bucket_fit(&t, &res, idx, &o);
  if (!rc) rc = write_table(t, a->out);
  if (!rc)
    fprintf(stderr,
            "buckets: %zu sizes, %zu frame counts from %zu candidate sizes (%zu distinct "
            "shapes): %.2f%% of native latent tokens kept (%llu of %llu) -> %s\n",
            res.sizes, res.frames, res.candidates, res.shapes,
            100 * fidprint_fraction(res.kept_tokens, res.native_tokens),
            (unsigned long long)res.kept_tokens, (unsigned long long)res.native_tokens,
            a->out ? a->out : "stdout");
  al_bucket_table_free(t);
  al_index_free(idx);
  return rc ? cli_fail("buckets") : AL_EXIT_OK;
}

int cli_cmd_buckets(int argc, char **argv) {
  buckets_args a;
  memset(&a, 0, sizeof a);
  int ec = cli_parse(&BUCKETS, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  if (a.fit) {
    if (a.buckets) return cli_usage(&BUCKETS, CLI_SAY_HINT, "give --fit or --buckets, not both");
    return fit(&a);
  }
  if (a.max_sizes || a.mem_tokens || a.geom.vae_stride_t)
    return cli_usage(&BUCKETS, CLI_SAY_HINT, "--max-sizes, --mem-tokens and --geometry need --fit");
  al_bucket_table *t = NULL;
  int rc = a.buckets ? al_bucket_table_load(&t, a.buckets) : al_bucket_table_default(&t);
  if (!rc) rc = write_table(t, a.out);
  al_bucket_table_free(t);
  return rc ? cli_fail("buckets") : AL_EXIT_OK;
}
