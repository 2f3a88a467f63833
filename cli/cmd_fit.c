/* adaptiveload fit: fit a cost model to a shape benchmark (planner/al_cost.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "common/json_write_internal.h"
#include "planner/al_cost.h"
#include "planner/al_report.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload fit --bench FILE [--trace TRACE] [-o COST] [--model auto|power|poly2] [--json]\n"
          "       adaptiveload fit --trace TRACE [-o COST] [options]\n"
          "                        [--loss rel|abs] [--min-tokens N] [--folds K]\n"
          "                        [--mem-capacity BYTES] [--mem-safety F]\n"
          "       adaptiveload fit --default [-o COST] [--json]\n\n"
          "Fits the step time of a shape benchmark by two model families:\n"
          "  power: t = a + b * B * S^p              (Levenberg-Marquardt)\n"
          "  poly2: t = a + b * B * S + c * B * S^2  (linear least squares, QR)\n"
          "and reports R^2 and the median and max relative error on held-out rows\n"
          "(deterministic k-fold: row i is in fold i mod k). `auto` keeps the family with\n"
          "the lower held-out median error. Rows with B*S < min-tokens are launch-bound\n"
          "(kernel-launch overhead, not work) and are left out and counted.\n\n"
          "FILE is a CSV with a header row naming B, S, step_ms (alias ms) and optionally\n"
          "peak_mem_bytes, in any order, or the JSON of planner/data/h200_dit_block_cost.json\n"
          "({\"rows\": [{\"B\", \"S\", \"ms\"}]}). examples/shape_bench.py writes the CSV.\n"
          "With peak memory, memory ~ m0 + m1 * B * S is fitted too, and with\n"
          "--mem-capacity the token cap M_mem = (capacity * safety - m0) / m1 is printed\n"
          "(plan takes the same flags).\n\n"
          "options:\n"
          "  --bench FILE        benchmark CSV or JSON\n"
          "  --trace TRACE       measured micro-batch times of a training run (JSONL: B, S or\n"
          "                      tokens, ms per line; examples/train_dit.py --trace writes it):\n"
          "                      the median time of each (B, S) is one row, fitted alone or\n"
          "                      with --bench (the closed loop: plan, train, refit, plan)\n"
          "  --default           fit the embedded H200 benchmark (what plan uses without --cost)\n"
          "  -o, --out COST      write the cost model file (proto container, kind cost model)\n"
          "  --model M           auto (default), power or poly2\n"
          "  --loss L            rel (default: relative residuals) or abs (plain residuals)\n"
          "  --min-tokens N      leave out rows with B*S < N (default 4096; 1 keeps all)\n"
          "  --folds K           k-fold held-out evaluation (default 5)\n"
          "  --mem-capacity B    GPU memory in bytes, to derive M_mem from the memory fit\n"
          "  --mem-safety F      fraction of the capacity to plan for (default 0.9)\n"
          "  --json              print one JSON object (model, parameters, errors)\n");
}

static void print_fit(const al_cost_fit *f, const char *tag) {
  const double *p = f->params;
  if (f->family == AL_COST_POWER)
    printf("  %-6s power  t = %.4g + %.4g * B * S^%.4f ms\n", tag, p[0], p[1], p[2]);
  else
    printf("  %-6s poly2  t = %.4g + %.4g * B*S + %.4g * B*S^2 ms\n", tag, p[0], p[1], p[2]);
  printf("         R^2 %.5f, held-out relative error: median %.2f%%, max %.2f%%\n", f->r2,
         100 * f->median_rel_err, 100 * f->max_rel_err);
}

int cli_cmd_fit(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  const char *bench = NULL, *trace = NULL, *out = NULL;
  int json = 0, use_default = 0;
  cli_mem_opts mem = CLI_MEM_OPTS_INIT;
  al_cost_fit_options fo;
  memset(&fo, 0, sizeof fo);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    if (!strcmp(a, "--default")) {
      use_default = 1;
      continue;
    }
    unsigned long long n;
    int bad = !v;
    if (bad) {
    } else if (!strcmp(a, "--bench")) {
      bench = v;
    } else if (!strcmp(a, "--trace")) {
      trace = v;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
      out = v;
    } else if (!strcmp(a, "--model")) {
      if (al_cost_family_parse(v, &fo.family)) {
        fprintf(stderr, "adaptiveload fit: %s\n", al_last_error());
        return AL_EXIT_USAGE;
      }
    } else if (!strcmp(a, "--loss")) {
      if (!strcmp(v, "rel"))
        fo.loss = AL_LOSS_REL;
      else if (!strcmp(v, "abs"))
        fo.loss = AL_LOSS_ABS;
      else
        bad = 1;
    } else if (!strcmp(a, "--min-tokens")) {
      bad = cli_parse_u64(v, &n) || !n;
      fo.min_tokens = n;
    } else if (!strcmp(a, "--folds")) {
      bad = cli_parse_u64(v, &n) || n < 2 || n > 1000;
      fo.folds = (uint32_t)n;
    } else if (cli_is_mem_option(a)) {
      bad = cli_parse_mem_option(a, v, &mem);
    } else {
      bad = 1;
    }
    if (bad) return cli_usage_page("fit", usage, "bad option or value: %s %s", a, v ? v : "");
    i++;
  }
  if (!bench && !trace && !use_default)
    return cli_usage_page("fit", usage, "--bench FILE, --trace TRACE (or --default) is required");
  al_bench b;
  memset(&b, 0, sizeof b);
  int rc = AL_OK;
  if (bench || use_default)
    rc = bench ? al_bench_load(&b, bench)
               : al_bench_parse(&b, al_cost_default_json(), strlen(al_cost_default_json()),
                                "embedded h200_dit_block_cost.json");
  if (rc) return cli_fail("fit");
  if (trace) {
    al_bench t;
    al_trace_stats ts;
    rc = al_bench_load_trace(&t, trace, &ts);
    if (!rc) {
      fprintf(stderr,
              "fit: trace %s: %zu lines, %zu measurements in %zu (B, S) shapes, %zu warm-up, "
              "%zu skipped%s%s\n",
              trace, ts.lines, ts.used, ts.groups, ts.warmup, ts.skipped,
              ts.skipped ? "; first: " : "", ts.first_skipped);
      if (b.n) {
        rc = al_bench_append(&b, &t);
        al_bench_free(&t);
      } else {
        b = t;
      }
    }
    if (rc) {
      al_bench_free(&b);
      return cli_fail("fit");
    }
  }
  al_cost_model m;
  rc = al_cost_fit_bench(&b, &fo, &m);
  al_bench_free(&b);
  if (rc) return cli_fail("fit");
  uint64_t mem_tokens = 0;
  if (mem.capacity > 0 && al_cost_mem_tokens(&m, mem.capacity, mem.safety, &mem_tokens))
    return cli_fail("fit");
  if (out && al_cost_save(&m, out)) return cli_fail("fit");
  if (json) {
    al_cost_print_json(&m, stdout);
    if (mem_tokens) {
      printf("{\"mem_capacity\": ");
      jsonw_number(stdout, "%.0f", mem.capacity);
      printf(", \"mem_safety\": ");
      jsonw_number(stdout, "%.3f", mem.safety);
      printf(", \"mem_tokens\": %llu}\n", (unsigned long long)mem_tokens);
    }
  } else {
    printf("fit of %s: %u rows (%u launch-bound rows with B*S < %.0f left out), %s residuals%s%s\n",
           m.source, m.rows, m.rows_excluded, m.min_tokens, m.abs_loss ? "absolute" : "relative",
           m.device[0] ? ", device " : "", m.device);
    print_fit(&m.fit, "chosen");
    if (m.alt.family) print_fit(&m.alt, "other");
    if (m.has_mem) printf("  memory bytes = %.4g + %.4g * B * S\n", m.mem_m0, m.mem_m1);
    if (mem_tokens)
      printf("  M_mem for %.0f bytes x %.2f: %llu tokens per micro-batch\n", mem.capacity,
             mem.safety, (unsigned long long)mem_tokens);
    if (out) printf("wrote %s\n", out);
  }
  return AL_EXIT_OK;
}
