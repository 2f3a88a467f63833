/* adaptiveload fit: fit a cost model to a shape benchmark (cost/al_cost.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "common/json_write_internal.h"
#include "cost/al_cost.h"
#include "manifest/al_report.h"

typedef struct fit_args {
  const char *bench, *trace, *out;
  int json, use_default;
  double mem_capacity; /* 0: not given */
  double mem_safety;
  al_cost_fit_options fo;
} fit_args;

static int parse_model(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  if (al_cost_family_parse(v, &((fit_args *)args)->fo.family) == AL_OK) return 0;
  fprintf(stderr, "adaptiveload %s: %s\n", verb->name, al_last_error());
  return AL_EXIT_USAGE;
}

static const cli_choice LOSSES[] = {{"rel", AL_LOSS_REL}, {"abs", AL_LOSS_ABS}, {NULL, 0}};

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--bench", .type = CLI_STRING, CLI_AT(fit_args, bench), .metavar = "FILE",
     .help = "benchmark CSV or JSON"},
    {.name = "--trace", .type = CLI_STRING, CLI_AT(fit_args, trace), .metavar = "TRACE",
     .help = "measured micro-batch times of a training run (JSONL: B, S or\n"
             "tokens, ms per line; examples/train_dit.py --trace writes it):\n"
             "the median time of each (B, S) is one row, fitted alone or\n"
             "with --bench (the closed loop: plan, train, refit, plan)"},
    {.name = "--default", .type = CLI_FLAG, CLI_AT(fit_args, use_default), .set = 1,
     .help = "fit the embedded H200 benchmark (what plan uses without --cost)"},
    {.name = "--out", .alias = "-o", .type = CLI_STRING, CLI_AT(fit_args, out), .metavar = "COST",
     .help = "write the cost model file (proto container, kind cost model)"},
    {.name = "--model", .type = CLI_CUSTOM, .parse = parse_model, .metavar = "M",
     .help = "auto, power, poly2 or floor", .def = "auto"},
    {.name = "--loss", .type = CLI_CHOICE, CLI_AT(fit_args, fo.loss), .choices = LOSSES,
     .metavar = "L", .help = "rel: relative residuals; abs: plain residuals", .def = "rel"},
    {.name = "--min-tokens", .type = CLI_U64, CLI_AT(fit_args, fo.min_tokens), .min = 1,
     .metavar = "N", .help = "leave out rows with B*S < N; 1 keeps all\n"
                             "(default: 4096 for power and poly2, 1 for floor)"},
    {.name = "--folds", .type = CLI_U64, CLI_AT(fit_args, fo.folds), .min = 2, .max = 1000,
     .metavar = "K", .help = "k-fold held-out evaluation", .def = "5"},
    {.name = "--mem-capacity", .type = CLI_DOUBLE, CLI_AT(fit_args, mem_capacity),
     .flags = CLI_ABOVE_LO, .metavar = "B",
     .help = "GPU memory in bytes, to derive M_mem from the memory fit"},
    {.name = "--mem-safety", .type = CLI_DOUBLE, CLI_AT(fit_args, mem_safety), .hi = 1,
     .flags = CLI_ABOVE_LO, .metavar = "F", .help = "fraction of the capacity to plan for",
     .def = "0.9"},
    {.name = "--sp-a2a-bytes-per-token", .type = CLI_DOUBLE,
     CLI_AT(fit_args, fo.sp_a2a_bytes_per_token), .flags = CLI_ABOVE_LO, .metavar = "B",
     .help = "bytes one token moves through the SP all-to-alls per step\n"
             "(default: 8 x hidden x dtype_bytes x layers from the benchmark's\n"
             "metadata, else the embedded model's 98304)"},
    {.name = "--sp-link-gbps", .type = CLI_DOUBLE, CLI_AT(fit_args, fo.sp_link_gbps),
     .flags = CLI_ABOVE_LO, .metavar = "G",
     .help = "all-to-all GB/s per GPU per direction (default 350: NVLink 4)"},
    {.name = "--json", .type = CLI_FLAG, CLI_AT(fit_args, json), .set = 1,
     .help = "print one JSON object (model, parameters, errors)"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb FIT = {
    .name = "fit",
    .usage =
        "usage: adaptiveload fit --bench FILE [--trace TRACE] [-o COST] [--model auto|power|poly2] [--json]\n"
        "       adaptiveload fit --trace TRACE [-o COST] [options]\n"
        "                        [--loss rel|abs] [--min-tokens N] [--folds K]\n"
        "                        [--mem-capacity BYTES] [--mem-safety F]\n"
        "       adaptiveload fit --default [-o COST] [--json]\n\n"
        "Fits the step time of a shape benchmark by three model families:\n"
        "  power: t = a + b * B * S^p              (Levenberg-Marquardt)\n"
        "  poly2: t = a + b * B * S + c * B * S^2  (linear least squares, QR)\n"
        "  floor: t = smax(F, a + s * B + b * B * S + c * B * S^2)\n"
        "         (a launch floor F, smooth maximum (x^8 + y^8)^(1/8); Levenberg-Marquardt)\n"
        "and reports R^2 and the median and max relative error on held-out rows\n"
        "(deterministic k-fold: row i is in fold i mod k), and by band of tokens per\n"
        "sample over every row. `auto` keeps the family with the lowest held-out max\n"
        "error over every row. power and poly2 leave out rows with B*S < min-tokens\n"
        "(launch-bound: kernel-launch overhead, not work) and count them; floor fits them.\n\n"
        "FILE is a CSV with a header row naming B, S, step_ms (alias ms) and optionally\n"
        "peak_mem_bytes and d (alias sp_degree), in any order, or the JSON of\n"
        "cost/data/h200_dit_block_cost.json ({\"rows\": [{\"B\", \"S\", \"ms\"}]}).\n"
        "examples/shape_bench.py writes the CSV. With a d column (shape_bench.py\n"
        "--sp-degrees) the d = 1 rows give the model above and each degree d > 1 a floor\n"
        "fit of one rank's share, t = smax(F, a + s B + (b B S + c B S^2) / d), that\n"
        "plans with sequence parallelism use, plus the modelled all-to-all\n"
        "B S (d - 1) / d^2 x bytes-per-token / link rate.\n"
        "With peak memory, memory ~ m0 + m1 * B * S is fitted too, and with\n"
        "--mem-capacity the token cap M_mem = (capacity * safety - m0) / m1 is printed\n"
        "(plan takes the same flags).\n\n",
    .options = OPTIONS,
    .say = CLI_SAY_PAGE,
    .missing = "bad option or value: %s ",
    .unknown = "bad option or value: %s %s",
    .bad = "bad option or value: %s %s",
    .bad_say = CLI_SAY_PAGE,
};

/* The rows to fit into *b: the benchmark (--bench or --default) and the trace. */
static int load_rows(const fit_args *a, al_bench *b) {
  memset(b, 0, sizeof *b);
  b->struct_size = sizeof *b;
  int rc = AL_OK;
  if (a->bench || a->use_default)
    rc = a->bench ? al_bench_load(b, a->bench)
                  : al_bench_parse(b, al_cost_default_json(), strlen(al_cost_default_json()),
                                   "embedded h200_dit_block_cost.json");
  if (rc || !a->trace) return rc; /* a failed load leaves *b empty */
  al_bench t = AL_BENCH_INIT;
  al_trace_stats ts = AL_TRACE_STATS_INIT;
  rc = al_bench_load_trace(&t, a->trace, &ts);
  if (!rc) {
    fprintf(stderr,
            "fit: trace %s: %zu lines, %zu measurements in %zu (B, S) shapes, %zu warm-up, "
            "%zu skipped%s%s\n",
            a->trace, ts.lines, ts.used, ts.groups, ts.warmup, ts.skipped,
            ts.skipped ? "; first: " : "", ts.first_skipped);
    if (b->n) {
      rc = al_bench_append(b, &t);
      al_bench_free(&t);
    } else {
      *b = t;
    }
  }
  if (rc) al_bench_free(b);
  return rc;
}

static void print_fit(const al_cost_fit *f, const char *tag) {
  const double *p = f->params;
  if (f->family == AL_COST_POWER)
    printf("  %-6s power  t = %.4g + %.4g * B * S^%.4f ms\n", tag, p[0], p[1], p[2]);
  else if (f->family == AL_COST_FLOOR)
    printf("  %-6s floor  t = smax_%g(%.4g, %.4g + %.4g * B + %.4g * B*S + %.4g * B*S^2) ms\n", tag,
           f->sharpness, f->floor_ms, p[0], f->per_sample_ms, p[1], p[2]);
  else
    printf("  %-6s poly2  t = %.4g + %.4g * B*S + %.4g * B*S^2 ms\n", tag, p[0], p[1], p[2]);
  printf("         R^2 %.5f, held-out relative error: median %.2f%%, max %.2f%%\n", f->r2,
         100 * f->median_rel_err, 100 * f->max_rel_err);
}

static void print_band_row(const char *deg, const al_cost_band *bands, const al_cost_band *all) {
  printf("    %-4s", deg);
  for (int i = 0; i < AL_COST_BANDS; i++) {
    const al_cost_band *b = &bands[i];
    if (b->rows)
      printf(" %5.1f%% %5.1f%% %3u", 100 * b->median_rel_err, 100 * b->max_rel_err, b->rows);
    else
      printf(" %18s", "-");
  }
  printf(" %5.1f%% %5.1f%% %3u\n", 100 * all->median_rel_err, 100 * all->max_rel_err, all->rows);
}

/* Held-out errors by band of tokens per sample, one line per degree. */
static void print_bands(const al_cost_model *m) {
  printf(
      "  held-out relative error by tokens per sample S (median, max, rows):\n"
      "    %-4s %18s %18s %18s %18s %18s\n",
      "d", "S < 2k", "2k <= S < 8k", "8k <= S < 32k", "S >= 32k", "all");
  print_band_row("1", m->bands, &m->all_rows);
  for (uint32_t i = 0; i < m->n_sp_fits; i++) {
    char deg[16];
    snprintf(deg, sizeof deg, "%u", m->sp_fits[i].degree);
    print_band_row(deg, m->sp_fits[i].bands, &m->sp_fits[i].all_rows);
  }
}

static void print_sp(const al_cost_model *m) {
  for (uint32_t i = 0; i < m->n_sp_fits; i++) {
    const al_cost_sp_fit *s = &m->sp_fits[i];
    const al_cost_fit *f = &s->fit;
    printf(
        "  d = %-4u floor  t = smax_%g(%.4g, %.4g + %.4g * B + (%.4g * B*S + %.4g * B*S^2) / %u) "
        "ms, %u rows\n",
        s->degree, f->sharpness, f->floor_ms, f->params[0], f->per_sample_ms, f->params[1],
        f->params[2], s->degree, s->rows);
  }
  double bytes = m->sp_a2a_bytes_per_token > 0 ? m->sp_a2a_bytes_per_token
                                               : AL_COST_DEFAULT_SP_A2A_BYTES_PER_TOKEN;
  double gbps = m->sp_link_gbps > 0 ? m->sp_link_gbps : AL_COST_DEFAULT_SP_LINK_GBPS;
  printf(
      "  SP all-to-all: %.0f bytes per token%s at %.4g GB/s%s; d > 1 adds B*S (d-1)/d^2 x "
      "%.4g ms\n",
      bytes, m->sp_a2a_bytes_per_token > 0 ? "" : " (default)", gbps,
      m->sp_link_gbps > 0 ? "" : " (default)", bytes / (gbps * 1e6));
}

/* --json: the model's one JSON object (al_cost_print_json), with M_mem's inputs and value as
 * its last keys when derived, so that stdout holds one JSON document either way. */
static int print_model_json(const al_cost_model *m, const fit_args *a, uint64_t mem_tokens) {
  if (!mem_tokens) return al_cost_print_json(m, stdout);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return al_set_error(AL_ENOMEM, "fit: no memory for the JSON output");
  int rc = al_cost_print_json(m, mem);
  fclose(mem);
  if (rc) {
    free(text);
    return rc;
  }
  if (len && text[len - 1] == '\n') len--;
  if (len && text[len - 1] == '}') len--; /* the object stays open for the keys below */
  fwrite(text, 1, len, stdout);
  free(text);
  printf(", \"mem_capacity\": ");
  jsonw_number(stdout, "%.0f", a->mem_capacity);
  printf(", \"mem_safety\": ");
  jsonw_number(stdout, "%.3f", a->mem_safety);
  printf(", \"mem_tokens\": %llu}\n", (unsigned long long)mem_tokens);
  return 0;
}

/* The fitted model (and M_mem when derived) on stdout, as JSON or text. */
static int print_model(const al_cost_model *m, const fit_args *a, uint64_t mem_tokens) {
  if (a->json) return print_model_json(m, a, mem_tokens);
  printf("fit of %s: %u rows (%u launch-bound rows with B*S < %.0f left out)%s, %s residuals%s%s\n",
         m->source, m->rows, m->rows_excluded, m->min_tokens,
         m->n_sp_fits ? " of degree d = 1" : "", m->abs_loss ? "absolute" : "relative",
         m->device[0] ? ", device " : "", m->device);
  print_fit(&m->fit, "chosen");
  if (m->alt.family) print_fit(&m->alt, "other");
  if (m->all_rows.rows) print_bands(m);
  print_sp(m);
  if (m->has_mem) printf("  memory bytes = %.4g + %.4g * B * S\n", m->mem_m0, m->mem_m1);
  if (mem_tokens)
    printf("  M_mem for %.0f bytes x %.2f: %llu tokens per micro-batch\n", a->mem_capacity,
           a->mem_safety, (unsigned long long)mem_tokens);
  if (a->out) printf("wrote %s\n", a->out);
  return 0;
}

int cli_cmd_fit(int argc, char **argv) {
  fit_args a;
  memset(&a, 0, sizeof a);
  a.mem_safety = 0.9;
  int ec = cli_parse(&FIT, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  if (!a.bench && !a.trace && !a.use_default)
    return cli_usage(&FIT, CLI_SAY_PAGE, "--bench FILE, --trace TRACE (or --default) is required");
  al_bench b = AL_BENCH_INIT;
  if (load_rows(&a, &b)) return cli_fail("fit");
  al_cost_model m = AL_COST_MODEL_INIT;
  int rc = al_cost_fit_bench(&b, &a.fo, &m);
  al_bench_free(&b);
  if (rc) return cli_fail("fit");
  uint64_t mem_tokens = 0;
  if (a.mem_capacity > 0 && al_cost_mem_tokens(&m, a.mem_capacity, a.mem_safety, &mem_tokens))
    return cli_fail("fit");
  if (a.out && al_cost_save(&m, a.out)) return cli_fail("fit");
  if (print_model(&m, &a, mem_tokens)) return cli_fail("fit");
  return AL_EXIT_OK;
}
