/* adaptiveload plan: index -> manifest (planner/al_plan.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_internal.h"
#include "loader/al_index.h"
#include "planner/al_plan.h"
#include "planner/al_plan_index.h"
#include "planner/al_report.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload plan --index INDEX --world W -o MANIFEST [--cost COST]\n"
          "                         [--policy adaptive|equal-token|adaptive-unbalanced] [--seed S]\n"
          "                         [--epoch E]\n"
          "                         [--mem-tokens M | --mem-capacity BYTES [--mem-safety F]]\n"
          "                         [--micro-per-step K] [--step-tokens T] [--comp-ms MS] [--window N]\n"
          "                         [--last-step pad|drop]\n"
          "                         [--buckets FILE] [--geometry ST,SS,PT,PH,PW] [--start-step K] [--json]\n"
          "       adaptiveload plan --resume-from OLD_MANIFEST --at-step K --world W2 -o MANIFEST [--json]\n\n"
          "Puts every indexed sample into a shape bucket, gives each bucket a batch size from\n"
          "the memory and compute limits, and schedules one epoch for W data-parallel ranks:\n"
          "  B = max(1, min(floor(m / S), floor(M_comp / c(S))))     m = T / (W x K) <= M_mem\n"
          "with c(S) the cost model's per-sample cost. Every step gives every rank exactly K\n"
          "micro-batches (FSDP, ZeRO-3, tensor and sequence parallelism stay in lock-step) and\n"
          "holds about T tokens over all ranks, with either policy. Policy adaptive chooses which\n"
          "batches share a step inside a window so that the ranks' predicted costs are about\n"
          "equal (K = 1: neighbours by cost; K > 1: every (step, rank) of the window levelled,\n"
          "so steps cost alike too); equal-token\n"
          "gives B = m / S and deals the shuffled batches in order (the usual baseline). The\n"
          "manifest is a pure function of the inputs: same inputs, byte-identical file.\n\n"
          "options:\n"
          "  --index INDEX       index file (adaptiveload index)\n"
          "  --world W           data-parallel ranks\n"
          "  -o, --out FILE      manifest to write\n"
          "  --cost COST         cost model (adaptiveload fit); default: the embedded H200 benchmark\n"
          "  --policy P          adaptive (default), equal-token, or adaptive-unbalanced\n"
          "                      (adaptive's batch sizes dealt like equal-token, no per-step\n"
          "                      balancing: the paper's method, for comparisons)\n"
          "  --seed S, --epoch E shuffle seed and epoch (default 0, 0)\n"
          "  --mem-tokens M      M_mem, tokens per micro-batch (default 65536)\n"
          "  --mem-capacity B    derive M_mem from the cost model's memory fit and B bytes\n"
          "  --mem-safety F      fraction of --mem-capacity to use (default 0.9)\n"
          "  --comp-ms MS        M_comp, predicted ms per micro-batch (default: c(S) of the\n"
          "                      largest bucket within M_mem, so it runs alone)\n"
          "  --micro-per-step K  micro-batches of every rank in every step (default 1, or the\n"
          "                      fewest that fit --step-tokens)\n"
          "  --step-tokens T     target tokens per optimizer step over all ranks (default\n"
          "                      W x K x M_mem, what equal-token takes per step)\n"
          "  --window N          adaptive: balance inside windows of N steps (default 64)\n"
          "  --last-step P       pad (default): ranks short of work in the last step get a\n"
          "                      padding micro-batch (marked); drop: that step is dropped\n"
          "  --buckets FILE      bucket table (text or JSON, see planner/README.md)\n"
          "  --geometry G        latent geometry: VAE stride t,s and patch t,h,w (default 4,8,1,2,2)\n"
          "  --start-step K      write only steps >= K (identical to the full plan's steps)\n"
          "  --resume-from OLD   elastic resume: re-plan what OLD schedules at steps >= K\n"
          "  --at-step K         ... for --world W2; new steps are numbered from K\n"
          "  --json              print the summary as one JSON object on stdout\n");
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Lists a few rejected samples per reason on stderr; all of them are in the
 * manifest's key table (adaptiveload inspect --rejected). */
static void report_rejects(const al_plan *p, const al_index *idx) {
  for (int r = 1; r < AL_REJECT_COUNT; r++) {
    uint64_t n = al_plan_rejected(p, (al_reject_reason)r);
    if (!n) continue;
    uint64_t first = al_plan_first_rejected(p, (al_reject_reason)r);
    al_sample_info si;
    memset(&si, 0, sizeof si);
    if (idx) al_index_sample(idx, (size_t)first, &si);
    fprintf(stderr, "plan: %llu samples rejected: %s (first: '%s' %ux%u x %u frames)\n",
            (unsigned long long)n, al_reject_reason_name((al_reject_reason)r), si.key ? si.key : "",
            si.width, si.height, si.frames);
  }
}

int cli_cmd_plan(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  const char *index = NULL, *cost_path = NULL, *out = NULL, *buckets = NULL, *resume = NULL;
  int json = 0, have_at = 0;
  unsigned long long at_step = 0;
  cli_mem_opts mem = CLI_MEM_OPTS_INIT;
  al_plan_options o;
  memset(&o, 0, sizeof o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    unsigned long long n = 0;
    int bad = !v;
    if (bad) {
    } else if (!strcmp(a, "--index")) {
      index = v;
    } else if (!strcmp(a, "--cost")) {
      cost_path = v;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
      out = v;
    } else if (!strcmp(a, "--world")) {
      bad = cli_parse_u64(v, &n) || !n || n > (1u << 20);
      o.world = (uint32_t)n;
    } else if (!strcmp(a, "--policy")) {
      bad = al_policy_parse(v, &o.policy) != AL_OK;
    } else if (!strcmp(a, "--seed")) {
      bad = cli_parse_u64(v, &n);
      o.seed = n;
    } else if (!strcmp(a, "--epoch")) {
      bad = cli_parse_u64(v, &n) || n > UINT32_MAX;
      o.epoch = (uint32_t)n;
    } else if (!strcmp(a, "--mem-tokens")) {
      bad = cli_parse_u64(v, &n) || !n;
      o.mem_tokens = n;
    } else if (cli_is_mem_option(a)) {
      bad = cli_parse_mem_option(a, v, &mem);
    } else if (!strcmp(a, "--comp-ms")) {
      bad = cli_parse_double(v, &o.comp_budget_ms) || !(o.comp_budget_ms > 0);
    } else if (!strcmp(a, "--step-ms")) {
      fprintf(stderr,
              "adaptiveload plan: --step-ms was removed (issue 14): every step now holds\n"
              "--micro-per-step K micro-batches on every rank and about --step-tokens T tokens\n");
      return AL_EXIT_USAGE;
    } else if (!strcmp(a, "--micro-per-step")) {
      bad = cli_parse_u64(v, &n) || !n || n > (1u << 20);
      o.micro_per_step = (uint32_t)n;
    } else if (!strcmp(a, "--step-tokens")) {
      bad = cli_parse_u64(v, &n) || !n;
      o.step_tokens = n;
    } else if (!strcmp(a, "--window")) {
      bad = cli_parse_u64(v, &n) || !n || n > 1000000;
      o.window = (uint32_t)n;
    } else if (!strcmp(a, "--last-step")) {
      bad = al_last_step_parse(v, &o.last_step) != AL_OK;
    } else if (!strcmp(a, "--buckets")) {
      buckets = v;
    } else if (!strcmp(a, "--geometry")) {
      unsigned g[5];
      bad = sscanf(v, "%u,%u,%u,%u,%u", &g[0], &g[1], &g[2], &g[3], &g[4]) != 5 || !g[0] || !g[1] ||
            !g[2] || !g[3] || !g[4];
      al_latent_geom geom = {g[0], g[1], g[2], g[3], g[4]};
      if (!bad) o.geom = geom;
    } else if (!strcmp(a, "--start-step")) {
      bad = cli_parse_u64(v, &n) || n > UINT32_MAX;
      o.start_step = (uint32_t)n;
    } else if (!strcmp(a, "--resume-from")) {
      resume = v;
    } else if (!strcmp(a, "--at-step")) {
      bad = cli_parse_u64(v, &at_step) || at_step > UINT32_MAX;
      have_at = 1;
    } else {
      bad = 1;
    }
    if (bad) return cli_usage_page("plan", usage, "bad option or value: %s %s", a, v ? v : "");
    i++;
  }
  const char *missing = !out ? "-o MANIFEST" : !o.world ? "--world W" : NULL;
  if (!missing && resume && !have_at) missing = "--at-step K (with --resume-from)";
  if (!missing && !resume && !index) missing = "--index INDEX";
  if (missing) return cli_usage_page("plan", usage, "%s is required", missing);
  if (resume &&
      (index || cost_path || buckets || o.start_step || o.micro_per_step || o.step_tokens)) {
    fprintf(stderr,
            "adaptiveload plan: --resume-from takes its index positions, cost model, buckets and config from "
            "OLD_MANIFEST (K becomes round(K_old x W_old / W2), step tokens stay); "
            "--index/--cost/--buckets/--start-step/--micro-per-step/--step-tokens do not apply\n");
    return AL_EXIT_USAGE;
  }
  double t0 = now();
  al_plan *plan = NULL;
  al_index *idx = NULL;
  al_manifest *old = NULL;
  int rc;
  if (resume) {
    if ((rc = al_manifest_load(&old, resume))) return cli_fail("plan");
    rc = al_plan_replan(&plan, old, (uint32_t)at_step, o.world);
    if (!rc) rc = al_plan_save(plan, out, al_manifest_key_fn, old);
  } else {
    al_cost_model cost;
    al_bucket_table *table = NULL;
    rc = cost_path ? al_cost_load(&cost, cost_path) : al_cost_default(&cost);
    if (!rc && mem.capacity > 0) {
      uint64_t mt;
      rc = al_cost_mem_tokens(&cost, mem.capacity, mem.safety, &mt);
      if (!rc && o.mem_tokens) {
        fprintf(stderr, "adaptiveload plan: give --mem-tokens or --mem-capacity, not both\n");
        return AL_EXIT_USAGE;
      }
      o.mem_tokens = mt;
    }
    if (!rc && buckets) rc = al_bucket_table_load(&table, buckets);
    o.buckets = table;
    if (!rc) rc = al_index_load(&idx, index);
    double t_load = now();
    if (!rc) {
      rc = al_plan_build_index(&plan, idx, &cost, &o);
      if (rc) al_error_prefix(rc, "%s", index);
    }
    al_bucket_table_free(table);
    double t_plan = now();
    if (!rc) report_rejects(plan, idx);
    if (!rc) rc = al_plan_save(plan, out, al_plan_index_key, idx);
    if (!rc && !json)
      fprintf(stderr, "plan: index %.2f s, plan %.2f s, write %.2f s\n", t_load - t0,
              t_plan - t_load, now() - t_plan);
  }
  if (!rc) {
    if (json)
      al_plan_print_json(stdout, plan);
    else
      al_plan_print_summary(stderr, plan, out);
  }
  al_plan_free(plan);
  al_index_free(idx);
  al_manifest_free(old);
  return rc ? cli_fail("plan") : AL_EXIT_OK;
}
