/* adaptiveload plan: index -> manifest (planner/al_plan.h). */
#include <math.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/fidelity_print_internal.h"
#include "cli/options_internal.h"
#include "common/clock_internal.h"
#include "common/parse_internal.h"
#include "loader/al_index.h"
#include "loader/al_members.h"
#include "planner/al_plan.h"
#include "manifest/al_mixture.h"
#include "manifest/al_plan_index.h"
#include "manifest/al_report.h"

typedef struct plan_args {
  const char *index, *cost, *out, *buckets, *resume;
  const char *map, *save_map; /* --map (plan from an index map), --save-map (write one) */
  int json;
  uint64_t at_step;    /* UINT64_MAX: not given */
  double mem_capacity; /* 0: not given */
  double mem_safety;
  al_plan_options o;
  char members_buf[1024]; /* --require-members, split into member_names */
  const char *member_names[64];
  uint32_t sp_degrees[AL_PLAN_MAX_SP_DEGREES]; /* --sp-degrees */
  int chunked;                                 /* --planner chunked (or --steps) */
  uint32_t steps_a, steps_b;                   /* --steps A:B; 0:0 = every step */
  uint64_t rank;                               /* --rank R; UINT64_MAX: every rank */
  int check;                                   /* --check: prove the run, write nothing */
  const char *mixture;                         /* --mixture MIX.json */
  uint64_t reference_world;                    /* --reference-world W; 0: --world */
  const char *continues;                       /* --continues OLD_MIX.json (with --mixture) */
} plan_args;

static int parse_planner(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  plan_args *a = args;
  if (!strcmp(v, "epoch"))
    a->chunked = 0;
  else if (!strcmp(v, "chunked"))
    a->chunked = 1;
  else
    return CLI_BAD;
  return 0;
}

/* --steps A:B, 0 <= A < B < 2^32 (that B is within the run is checked once it is open). */
static int parse_steps(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  plan_args *a = args;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10), y;
  if (errno || end == v || *end != ':' || x > UINT32_MAX || v[0] == '-') return CLI_BAD;
  const char *w = end + 1;
  y = strtoull(w, &end, 10);
  if (errno || end == w || *end || y > UINT32_MAX || y <= x || w[0] == '-') return CLI_BAD;
  a->steps_a = (uint32_t)x, a->steps_b = (uint32_t)y;
  a->chunked = 1;
  return 0;
}

/* --sp-degrees 1,2,4,8: distinct powers of two 1..1024, at most AL_PLAN_MAX_SP_DEGREES of them
 * (that each divides --world is checked once the world is known). */
static int parse_sp_degrees(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  plan_args *a = args;
  size_t n = 0;
  int rc = cli_parse_sp_degrees(verb, v, a->sp_degrees, &n);
  if (rc) return rc;
  a->o.sp_degrees = a->sp_degrees;
  a->o.n_sp_degrees = n;
  return 0;
}

static int parse_sync(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  return al_sync_parse(v, &((plan_args *)args)->o.sync) == AL_OK ? 0 : CLI_BAD;
}

/* --require-members A,B,...: a comma list of member extensions, no empty parts. */
static int parse_require(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  plan_args *a = args;
  size_t n = 0;
  if (cli_split_list(v, a->members_buf, sizeof a->members_buf, a->member_names,
                     sizeof a->member_names / sizeof *a->member_names, &n))
    return cli_usage(verb, CLI_SAY_BLANK,
                     "bad --require-members '%s' (a comma list of member extensions, e.g. "
                     "latent.npy,t5.npy)",
                     v);
  a->o.require_members = a->member_names;
  a->o.n_require_members = n;
  return 0;
}

static int parse_policy(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  return al_policy_parse(v, &((plan_args *)args)->o.policy) == AL_OK ? 0 : CLI_BAD;
}

static int parse_last_step(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  return al_last_step_parse(v, &((plan_args *)args)->o.last_step) == AL_OK ? 0 : CLI_BAD;
}

/* --geometry ST,SS,PT,PH,PW: five numbers 1..2^32-1. */
static int parse_geometry(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  return cli_parse_geometry(v, &((plan_args *)args)->o.geom);
}

/* --step-ms (a step's length in ms) no longer exists: refused with what replaced it. */
static int refuse_step_ms(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt, (void)v, (void)args;
  fprintf(stderr,
          "adaptiveload %s: --step-ms was removed: every step now holds\n"
          "--micro-per-step K micro-batches on every rank and about --step-tokens T tokens\n",
          verb->name);
  return AL_EXIT_USAGE;
}

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--index", .type = CLI_STRING, CLI_AT(plan_args, index), .metavar = "INDEX",
     .help = "index file (adaptiveload index)"},
    {.name = "--mixture", .type = CLI_STRING, CLI_AT(plan_args, mixture), .metavar = "MIX.json",
     .help = "plan several indexes as one chunked run, each a named,\n"
             "weighted source (manifest/al_mixture.h): shares by tokens,\n"
             "samples or compute, sources that repeat or stop; instead of\n"
             "--index"},
    {.name = "--world", .type = CLI_U64, CLI_AT(plan_args, o.world), .min = 1, .max = 1u << 20,
     .metavar = "W", .help = "data-parallel ranks"},
    {.name = "--out", .alias = "-o", .type = CLI_STRING, CLI_AT(plan_args, out), .metavar = "FILE",
     .help = "manifest to write"},
    {.name = "--cost", .type = CLI_STRING, CLI_AT(plan_args, cost), .metavar = "COST",
     .help = "cost model written by adaptiveload fit", .def = "the embedded H200 benchmark"},
    {.name = "--policy", .type = CLI_CUSTOM, .parse = parse_policy, .metavar = "P",
     .help = "adaptive (default), equal-token, or adaptive-unbalanced\n"
             "(adaptive's batch sizes dealt like equal-token, no per-step\n"
             "balancing: the paper's method, for comparisons)"},
    {.name = "--seed", .type = CLI_U64, CLI_AT(plan_args, o.seed), .metavar = "S",
     .help = "shuffle seed", .def = "0"},
    {.name = "--epoch", .type = CLI_U64, CLI_AT(plan_args, o.epoch), .max = UINT32_MAX,
     .metavar = "E", .help = "epoch of the shuffle", .def = "0"},
    {.name = "--mem-tokens", .type = CLI_U64, CLI_AT(plan_args, o.mem_tokens), .min = 1,
     .metavar = "M", .help = "M_mem, tokens per micro-batch (at most 2^32 - 1)", .def = "65536"},
    {.name = "--mem-capacity", .type = CLI_DOUBLE, CLI_AT(plan_args, mem_capacity),
     .flags = CLI_ABOVE_LO, .metavar = "B",
     .help = "derive M_mem from the cost model's memory fit and B bytes"},
    {.name = "--mem-safety", .type = CLI_DOUBLE, CLI_AT(plan_args, mem_safety), .hi = 1,
     .flags = CLI_ABOVE_LO, .metavar = "F", .help = "fraction of --mem-capacity to use",
     .def = "0.9"},
    {.name = "--comp-ms", .type = CLI_DOUBLE, CLI_AT(plan_args, o.comp_budget_ms),
     .flags = CLI_ABOVE_LO, .metavar = "MS",
     .help = "M_comp, predicted ms per micro-batch (default: c(S) of the\n"
             "largest bucket within M_mem, so it runs alone; with\n"
             "--sp-degrees the largest such cost over the degrees, each\n"
             "at its degree within d x M_mem)"},
    {.name = "--step-ms", .type = CLI_CUSTOM, .parse = refuse_step_ms},
    {.name = "--micro-per-step", .type = CLI_U64, CLI_AT(plan_args, o.micro_per_step), .min = 1,
     .max = 1u << 20, .metavar = "K",
     .help = "micro-batches of every rank in every step (default 1, or the\n"
             "fewest that fit --step-tokens); W x K at most 4194304"},
    {.name = "--step-tokens", .type = CLI_U64, CLI_AT(plan_args, o.step_tokens), .min = 1,
     .metavar = "T",
     .help = "target tokens per optimizer step over all ranks (default\n"
             "W x K x M_mem, what equal-token takes per step)"},
    {.name = "--window", .type = CLI_U64, CLI_AT(plan_args, o.window), .min = 1, .max = 1000000,
     .metavar = "N", .help = "adaptive: balance inside windows of N steps", .def = "64"},
    {.name = "--last-step", .type = CLI_CUSTOM, .parse = parse_last_step, .metavar = "P",
     .help = "pad: ranks short of work in the last step get a padding\n"
             "micro-batch (marked); drop: that step is dropped",
     .def = "pad"},
    {.name = "--buckets", .type = CLI_STRING, CLI_AT(plan_args, buckets), .metavar = "FILE",
     .help = "bucket table (text or JSON, see planner/README.md)"},
    {.name = "--geometry", .type = CLI_CUSTOM, .parse = parse_geometry, .metavar = "G",
     .help = "latent geometry: VAE stride t,s and patch t,h,w", .def = "4,8,1,2,2"},
    {.name = "--start-step", .type = CLI_U64, CLI_AT(plan_args, o.start_step), .max = UINT32_MAX,
     .metavar = "K", .help = "write only steps >= K (identical to the full plan's steps)"},
    {.name = "--resume-from", .type = CLI_STRING, CLI_AT(plan_args, resume), .metavar = "OLD",
     .help = "elastic resume: re-plan what OLD schedules at steps >= K,\n"
             "keeping OLD's steps and tokens per step (K2 = ceil(K_old x\n"
             "W_old / W2); refused when they cannot be kept within 1%);\n"
             "--step-tokens T2 plans a new global batch instead"},
    {.name = "--at-step", .type = CLI_U64, CLI_AT(plan_args, at_step), .max = UINT32_MAX,
     .metavar = "K", .help = "... for --world W2; new steps are numbered from K"},
    {.name = "--planner", .type = CLI_CUSTOM, .parse = parse_planner, .metavar = "P",
     .help = "epoch: plan the whole epoch at once; chunked: plan the pass\n"
             "window by window from keyed draws (planner/al_run.h): any\n"
             "steps at once, the same samples a step at every world size,\n"
             "T held per step at K > 1 (no --sp-degrees above 1 yet)",
     .def = "epoch"},
    {.name = "--continues", .type = CLI_STRING, CLI_AT(plan_args, continues),
     .metavar = "OLD.json",
     .help = "with --mixture and --at-step K: MIX.json changes the schedule of\n"
             "the mixture OLD.json (planned with the same options) from the\n"
             "first of its window boundaries at or after step K; the steps\n"
             "before are OLD's, every source's pass goes on (OLD's sources\n"
             "first, in its order; sources may be added after them)"},
    {.name = "--reference-world", .type = CLI_U64, CLI_AT(plan_args, reference_world), .min = 1,
     .max = 1u << 20, .metavar = "W_REF",
     .help = "chunked or --mixture: open the run at W_REF ranks (K per rank:\n"
             "--micro-per-step) and lay its steps out at --world, K' =\n"
             "ceil(K x W_REF / W): the resize of a run, every step holding the\n"
             "same samples at either world (with --steps K:END, the rest of a\n"
             "run killed at step K)",
     .def = "--world"},
    {.name = "--map", .type = CLI_STRING, CLI_AT(plan_args, map), .metavar = "MAP",
     .help = "chunked: plan from an index map (--save-map) instead of\n"
             "--index: the map is read mapped, never loaded; the manifest's\n"
             "keys are empty (the stream takes it with the index)"},
    {.name = "--save-map", .type = CLI_STRING, CLI_AT(plan_args, save_map), .metavar = "MAP",
     .help = "write the index map of --index (its samples' shapes and\n"
             "latent grids as classes with their positions) to MAP and\n"
             "exit"},
    {.name = "--steps", .type = CLI_CUSTOM, .parse = parse_steps, .metavar = "A:B",
     .help = "chunked: plan and write only steps [A, B), step for step\n"
             "what the full chunked plan holds there (implies --planner\n"
             "chunked)"},
    {.name = "--rank", .type = CLI_U64, CLI_AT(plan_args, rank), .max = (1u << 20) - 1,
     .metavar = "R",
     .help = "write only rank R's work in every step (with the step's\n"
             "totals over all ranks) and the keys of its samples: what\n"
             "rank R streams; streaming it as another rank is refused"},
    {.name = "--check", .type = CLI_FLAG, CLI_AT(plan_args, check), .set = 1,
     .help = "chunked: plan every window of the run without writing and\n"
             "prove every planned sample is in exactly one step (one bit a\n"
             "sample); prints the steps, samples and time, or the first\n"
             "step and sample that break it"},
    {.name = "--json", .type = CLI_FLAG, CLI_AT(plan_args, json), .set = 1,
     .help = "print the summary as one JSON object on stdout"},
    {.name = "--require-members", .type = CLI_CUSTOM, .parse = parse_require, .metavar = "A,B,...",
     .help = "leave out, before bucketing, the samples lacking any of\n"
             "these members (KEY.A or KEY.A.lz4), so every step the stream\n"
             "reads stays full; they are counted and the first named on\n"
             "stderr, and all listed by inspect --rejected"},
    {.name = "--sp-degrees", .type = CLI_CUSTOM, .parse = parse_sp_degrees, .metavar = "D,...",
     .help = "sequence-parallel degrees a micro-batch may run at (powers\n"
             "of two dividing W; 1 is not implied): each bucket runs at the\n"
             "smallest d with S <= d x M_mem, on aligned groups of d ranks",
     .def = "1"},
    {.name = "--sync", .type = CLI_CUSTOM, .parse = parse_sync, .metavar = "M",
     .help = "the sync model balanced for: step (ranks meet once a step,\n"
             "DDP), micro (every micro-batch, FSDP / SP) or auto (micro\n"
             "when K > 1 or a degree above 1 is allowed, else step)",
     .def = "auto"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb PLAN = {
    .name = "plan",
    .usage =
        "usage: adaptiveload plan --index INDEX --world W -o MANIFEST [--cost COST]\n"
        "                         [--policy adaptive|equal-token|adaptive-unbalanced] [--seed S]\n"
        "                         [--epoch E]\n"
        "                         [--mem-tokens M | --mem-capacity BYTES [--mem-safety F]]\n"
        "                         [--micro-per-step K] [--step-tokens T] [--comp-ms MS] [--window N]\n"
        "                         [--last-step pad|drop]\n"
        "                         [--buckets FILE] [--geometry ST,SS,PT,PH,PW] [--start-step K] [--json]\n"
        "                         [--sp-degrees 1,2,4,8] [--sync step|micro|auto]\n"
        "       adaptiveload plan --resume-from OLD_MANIFEST --at-step K --world W2 -o MANIFEST\n"
        "                         [--step-tokens T2] [--micro-per-step K2] [--json]\n\n"
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
        "manifest is a pure function of the inputs: same inputs, byte-identical file.\n\n",
    .options = OPTIONS,
    .say = CLI_SAY_PAGE,
    .missing = "bad option or value: %s ",
    .unknown = "bad option or value: %s %s",
    .bad = "bad option or value: %s %s",
    .bad_say = CLI_SAY_PAGE,
};

/* The options --resume-from takes; every other one is refused, whatever its value: the re-plan
 * takes the rest of the configuration from OLD_MANIFEST. */
static const char *const RESUME_TAKES[] =
    {"--resume-from", "--at-step",        "--world", "--out", "-o",
     "--step-tokens", "--micro-per-step", "--json",  NULL};

static int resume_takes(const char *name) {
  for (const char *const *t = RESUME_TAKES; *t; t++)
    if (!strcmp(name, *t)) return 1;
  return 0;
}

/* With --resume-from: the options of argv (read as cli_parse reads them) that a re-plan does
 * not take, named in one message; AL_EXIT_USAGE, or CLI_RUN when there are none. */
static int refuse_for_resume(int argc, char **argv) {
  char names[512];
  size_t used = 0;
  names[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const cli_option *o = OPTIONS;
    while (o->name && strcmp(argv[i], o->name) && !(o->alias && !strcmp(argv[i], o->alias))) o++;
    if (!o->name) continue;
    if (!resume_takes(argv[i]) && used + strlen(argv[i]) + 3 < sizeof names)
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                               argv[i]);
    i += o->type != CLI_FLAG;
  }
  if (!used) return CLI_RUN;
  fprintf(stderr,
          "adaptiveload plan: --resume-from re-plans OLD_MANIFEST with its own index positions, cost "
          "model, buckets, policy, seed, epoch, limits, window, last-step policy and geometry; it takes "
          "only --at-step, --world, -o, --step-tokens, --micro-per-step and --json: %s %s not apply\n",
          names, strchr(names, ',') ? "do" : "does");
  return AL_EXIT_USAGE;
}

/* The options a run needs and the ones --resume-from excludes: AL_EXIT_USAGE with a
 * message, or CLI_RUN. */
static int check_args(const plan_args *a, int argc, char **argv) {
  if (a->save_map)
    return a->index ? CLI_RUN : cli_usage(&PLAN, CLI_SAY_PAGE, "--save-map needs --index INDEX");
  if (a->mixture && (a->index || a->map || a->resume || a->check || a->o.start_step)) {
    fprintf(stderr,
            "adaptiveload plan: --mixture plans its sources' indexes itself; --index, --map, "
            "--resume-from, --check and --start-step do not apply\n");
    return AL_EXIT_USAGE;
  }
  if (a->map && (a->index || a->resume)) {
    fprintf(stderr,
            "adaptiveload plan: --map plans from the index map alone; --index and "
            "--resume-from do not apply\n");
    return AL_EXIT_USAGE;
  }
  const char *missing = !a->out && !a->check ? "-o MANIFEST" : !a->o.world ? "--world W" : NULL;
  if (!missing && a->resume && a->at_step == UINT64_MAX)
    missing = "--at-step K (with --resume-from)";
  if (!missing && a->at_step != UINT64_MAX && !a->resume && !a->continues)
    return cli_usage(&PLAN, CLI_SAY_PAGE,
                     "--at-step K goes with --resume-from OLD_MANIFEST or --continues OLD.json");
  if (!missing && a->continues && a->at_step == UINT64_MAX)
    missing = "--at-step K (with --continues)";
  if (!missing && a->continues && !a->mixture)
    missing = "--mixture NEW.json (with --continues OLD.json)";
  if (!missing && !a->resume && !a->index && !a->map && !a->mixture)
    missing = "--index INDEX (or --mixture MIX.json)";
  if (missing) return cli_usage(&PLAN, CLI_SAY_PAGE, "%s is required", missing);
  const al_plan_options *o = &a->o;
  if (a->resume && o->n_require_members) {
    fprintf(stderr,
            "adaptiveload plan: --resume-from keeps OLD_MANIFEST's samples (those it left "
            "out stay out); --require-members does not apply\n");
    return AL_EXIT_USAGE;
  }
  if ((a->chunked || a->map) && (a->resume || o->start_step)) {
    fprintf(stderr,
            "adaptiveload plan: --planner chunked plans any steps itself (--steps A:B); "
            "--resume-from and --start-step do not apply\n");
    return AL_EXIT_USAGE;
  }
  if (a->reference_world && !a->chunked && !a->map && !a->mixture)
    return cli_usage(&PLAN, CLI_SAY_BLANK,
                     "--reference-world opens a chunked run (--planner chunked, --steps, --map "
                     "or --mixture) at another world than --world");
  if (a->rank != UINT64_MAX && a->rank >= o->world)
    return cli_usage(&PLAN, CLI_SAY_BLANK, "--rank %llu: a world of %llu ranks has ranks 0..%llu",
                     (unsigned long long)a->rank, (unsigned long long)o->world,
                     (unsigned long long)o->world - 1);
  if (a->check && (a->out || a->steps_b || a->rank != UINT64_MAX || a->resume)) {
    fprintf(stderr,
            "adaptiveload plan: --check plans every step of the run and writes nothing; -o, "
            "--steps, --rank and --resume-from do not apply\n");
    return AL_EXIT_USAGE;
  }
  if (al_plan_check_sp_degrees("--sp-degrees", o->sp_degrees, o->n_sp_degrees, o->world))
    return cli_usage(&PLAN, CLI_SAY_BLANK, "bad %s", al_last_error());
  return a->resume ? refuse_for_resume(argc, argv) : CLI_RUN;
}

/* Lists a few rejected samples per reason on stderr; all of them are in the
 * manifest's key table (adaptiveload inspect --rejected). */
static void report_rejects(const al_plan *p, const al_index *idx) {
  for (int r = 1; r < AL_REJECT_COUNT; r++) {
    uint64_t n = al_plan_rejected(p, (al_reject_reason)r);
    if (!n) continue;
    uint64_t first = al_plan_first_rejected(p, (al_reject_reason)r);
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    if (idx) al_index_sample(idx, (size_t)first, &si);
    fprintf(stderr, "plan: %llu samples rejected: %s (first: '%s' %ux%u x %u frames)\n",
            (unsigned long long)n, al_reject_reason_name((al_reject_reason)r), si.key ? si.key : "",
            si.width, si.height, si.frames);
  }
}

/* --require-members: how many samples were left out and the first few, on stderr (all of them
 * are in the manifest's key table: adaptiveload inspect --rejected). */
static void report_lacking(const al_plan_options *o, const al_index *idx) {
  uint64_t n = 0;
  if (!o->n_require_members ||
      al_index_require_members(idx, o->require_members, o->n_require_members, NULL, 0, &n) == AL_OK)
    return;
  fprintf(stderr, "plan: %llu samples left out (--require-members): %s\n", (unsigned long long)n,
          al_last_error());
}

/* What a run made; freed after the summary is printed, which may read them. */
typedef struct plan_run {
  al_plan *plan;
  al_index *idx;    /* planning an index */
  al_manifest *old; /* --resume-from */
} plan_run;

/* Elastic resume: re-plans OLD's steps >= K for the new world and saves the manifest: 0 or
 * -1 (al_last_error). */
static int replan(const plan_args *a, plan_run *r) {
  al_replan_options ro = {sizeof(al_replan_options), a->o.world, a->o.micro_per_step,
                          a->o.step_tokens};
  int rc = al_manifest_load(&r->old, a->resume);
  if (!rc && al_manifest_source_count(r->old))
    rc = al_set_error(AL_EINVAL,
                      "%s is a mixture's run, whose steps hold the same samples at every world: "
                      "resize it by planning the mixture again, plan --mixture MIX.json --world "
                      "W2 --reference-world W_OLD --steps K:END",
                      a->resume);
  if (!rc) rc = al_plan_replan_opts(&r->plan, r->old, (uint32_t)a->at_step, &ro);
  if (!rc) rc = al_plan_save(r->plan, a->out, al_manifest_key_fn, r->old);
  return rc ? -1 : 0;
}

/* After a re-plan's summary: OLD's mean tokens per step over the steps re-planned, beside the
 * new plan's (the global batch kept, or the new one asked for); keeping it, the range of
 * tokens per step over OLD's steps, which every re-planned step holds (or it was refused). */
static void print_replan_tokens(FILE *out, const al_plan *p, const al_manifest *old, int kept) {
  al_manifest_info ni = AL_MANIFEST_INFO_INIT, oi = AL_MANIFEST_INFO_INIT;
  al_plan_get_info(p, &ni);
  al_manifest_get_info(old, &oi);
  double sum = 0, sq = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  uint32_t n = 0;
  for (uint32_t s = oi.first_step; s - oi.first_step < oi.steps; s++) {
    al_step_info st = AL_STEP_INFO_INIT;
    if (al_manifest_step(old, s, &st) != AL_OK) continue;
    if (st.tokens < lo) lo = st.tokens;
    if (st.tokens > hi) hi = st.tokens;
    if (s < ni.first_step) continue;
    sum += (double)st.tokens, sq += (double)st.tokens * (double)st.tokens, n++;
  }
  if (!n) return;
  fprintf(out,
          "plan: %.0f tokens per step; the old plan's steps %u..%u held %.0f (%+.2f%%, target "
          "%llu)\n",
          ni.step_tokens_mean, ni.first_step, ni.first_step + n - 1, sum / n,
          sum > 0 ? 100 * (ni.step_tokens_mean * n / sum - 1) : 0.0,
          (unsigned long long)ni.step_tokens);
  if (!kept) return;
  double mean = sum / n, var = sq / n - mean * mean;
  fprintf(out,
          "plan: every step within the old plan's %llu..%llu tokens per step; CV %.2f%% (the old "
          "plan's steps %u..%u: %.2f%%)\n",
          (unsigned long long)lo, (unsigned long long)hi, 100 * ni.step_tokens_cv, ni.first_step,
          ni.first_step + n - 1, mean > 0 ? 100 * sqrt(var > 0 ? var : 0) / mean : 0.0);
}

/* The cost model, M_mem from --mem-capacity and the bucket table into *cost and *o:
 * 0, AL_EXIT_USAGE (both --mem-tokens and --mem-capacity), or -1 (al_last_error). */
static int load_inputs(const plan_args *a, al_cost_model *cost, al_bucket_table **table,
                       al_plan_options *o) {
  int rc = a->cost ? al_cost_load(cost, a->cost) : al_cost_default(cost);
  if (!rc && a->mem_capacity > 0) {
    uint64_t mt;
    rc = al_cost_mem_tokens(cost, a->mem_capacity, a->mem_safety, &mt);
    if (!rc && o->mem_tokens) {
      fprintf(stderr, "adaptiveload plan: give --mem-tokens or --mem-capacity, not both\n");
      return AL_EXIT_USAGE;
    }
    o->mem_tokens = mt;
  }
  if (!rc && a->buckets) rc = al_bucket_table_load(table, a->buckets);
  o->buckets = *table;
  return rc ? -1 : 0;
}

/* --planner chunked: the run of the index (or of --map), then its steps [A, B) (every step by
 * default). */
static int plan_chunked(const plan_args *a, plan_run *r, const al_cost_model *cost,
                        const al_plan_options *o) {
  al_run *run = NULL;
  al_plan_options ro = *o;
  if (a->reference_world) ro.world = (uint32_t)a->reference_world;
  int rc = a->map ? al_run_open_map(&run, a->map, cost, &ro)
                  : al_run_open_index(&run, r->idx, cost, &ro);
  al_run_info ri = AL_RUN_INFO_INIT;
  if (!rc) rc = al_run_get_info(run, &ri);
  uint32_t first = a->steps_b ? a->steps_a : 0, end = a->steps_b ? a->steps_b : ri.steps;
  if (!rc && !a->json)
    fprintf(stderr,
            "plan: chunked run of %u steps (windows of %u, %llu tokens a step, capacity %llu), "
            "writing steps %u:%u\n",
            ri.steps, ri.window, (unsigned long long)ri.step_tokens,
            (unsigned long long)ri.capacity, first, end);
  if (!rc) rc = al_run_plan_steps(run, o->world, first, end, &r->plan);
  al_run_free(run);
  return rc;
}

/* --check: every window of the run planned and proved exactly-once over the pass (al_run_check),
 * nothing written: 0 or the exit status of a failure. */
static int check_run(const plan_args *a) {
  double t0 = clock_now_s();
  al_plan_options o = a->o;
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_bucket_table *table = NULL;
  al_index *idx = NULL;
  al_run *run = NULL;
  int rc = load_inputs(a, &cost, &table, &o);
  if (rc == AL_EXIT_USAGE) return rc;
  if (!rc && !a->map) rc = al_index_load(&idx, a->index);
  if (!rc)
    rc = a->map ? al_run_open_map(&run, a->map, &cost, &o)
                : al_run_open_index(&run, idx, &cost, &o);
  al_index_free(idx);
  al_bucket_table_free(table);
  double t_open = clock_now_s();
  al_run_check_info ci = AL_RUN_CHECK_INFO_INIT;
  if (!rc) rc = al_run_check(run, o.world, &ci);
  al_run_free(run);
  if (rc) {
    al_error_prefix(rc, "%s", a->map ? a->map : a->index);
    return cli_fail("plan --check");
  }
  double t1 = clock_now_s();
  if (a->json)
    printf(
        "{\"steps\": %u, \"samples\": %llu, \"padded\": %llu, \"micro_batches\": %llu, "
        "\"open_s\": %.3f, \"check_s\": %.3f}\n",
        ci.steps, (unsigned long long)ci.samples, (unsigned long long)ci.padded,
        (unsigned long long)ci.micro_batches, t_open - t0, t1 - t_open);
  else
    fprintf(stderr,
            "plan --check: %u steps, %llu samples each in exactly one step (%llu padding, %llu "
            "micro-batches at world %llu): open %.2f s, check %.2f s (%.2fM samples/s)\n",
            ci.steps, (unsigned long long)ci.samples, (unsigned long long)ci.padded,
            (unsigned long long)ci.micro_batches, (unsigned long long)o.world, t_open - t0,
            t1 - t_open, t1 > t_open ? (double)ci.samples / (t1 - t_open) / 1e6 : 0.0);
  return AL_EXIT_OK;
}

/* --mixture: the sources' run, its steps [A, B) saved with the sources' keys, and a line per
 * source (weight, passes, what the run draws of it): 0 or -1 (al_last_error). */
static int plan_mixture(const plan_args *a, plan_run *r, const al_cost_model *cost,
                        const al_plan_options *o) {
  al_mixture *mx = NULL, *old = NULL;
  const al_run *run = NULL;
  al_plan_options ro = *o;
  if (a->reference_world) ro.world = (uint32_t)a->reference_world;
  int rc = al_mixture_load(&mx, a->mixture);
  if (!rc && a->continues) {
    rc = al_mixture_load(&old, a->continues);
    if (!rc) rc = al_mixture_continue(mx, old, (uint32_t)a->at_step);
  }
  if (!rc) rc = al_mixture_open_run(mx, cost, &ro, &run);
  if (!rc && a->continues && !a->json)
    fprintf(stderr,
            "plan: the schedule of %s changes to %s's from step %u (the first window boundary "
            "at or after step %llu)\n",
            a->continues, a->mixture, al_run_continued_at(run), (unsigned long long)a->at_step);
  al_run_info ri = AL_RUN_INFO_INIT;
  if (!rc) rc = al_run_get_info(run, &ri);
  if (!rc && a->steps_b && a->steps_b > ri.steps)
    rc = al_set_error(AL_ERANGE, "--steps %u:%u: the mixture's run has %u steps", a->steps_a,
                      a->steps_b, ri.steps);
  uint32_t first = a->steps_b ? a->steps_a : 0, end = a->steps_b ? a->steps_b : ri.steps;
  if (!rc && !a->json)
    fprintf(stderr,
            "plan: mixture of %u sources, %u steps (windows of %u, %llu tokens a step, capacity "
            "%llu), writing steps %u:%u\n",
            ri.sources, ri.steps, ri.window, (unsigned long long)ri.step_tokens,
            (unsigned long long)ri.capacity, first, end);
  for (uint32_t i = 0; !rc && !a->json && i < ri.sources; i++) {
    al_run_source_info si = AL_RUN_SOURCE_INFO_INIT;
    rc = al_run_source_get(run, i, &si);
    if (!rc)
      fprintf(stderr,
              "plan: source %s: weight %.4f, %s, %u pass%s of %llu samples, draws %llu samples "
              "(%llu tokens, %.1f s predicted)\n",
              si.name, si.weight, si.on_exhaust == AL_EXHAUST_STOP ? "stop" : "repeat", si.passes,
              si.passes == 1 ? "" : "es", (unsigned long long)si.pass_samples,
              (unsigned long long)si.drawn, (unsigned long long)si.drawn_tokens,
              si.drawn_ms / 1000);
    if (!rc && !a->json && si.stop_step < ri.steps)
      fprintf(stderr, "plan: source %s leaves at step %u\n", si.name, si.stop_step);
  }
  for (uint32_t k = 0; !rc && !a->json && k < al_run_stage_count(run); k++) {
    double w[AL_RUN_MAX_SOURCES];
    uint32_t from = 0;
    rc = al_run_stage_get(run, k, &from, w, AL_RUN_MAX_SOURCES);
    fprintf(stderr, "plan: stage %u from step %u:", k, from);
    for (uint32_t i = 0; !rc && i < ri.sources; i++) {
      al_run_source_info si = AL_RUN_SOURCE_INFO_INIT;
      rc = al_run_source_get(run, i, &si);
      if (!rc) fprintf(stderr, "%s %s %.4f", i ? "," : "", si.name, w[i]);
    }
    fprintf(stderr, "\n");
  }
  if (!rc) rc = al_run_plan_steps(run, o->world, first, end, &r->plan);
  al_plan_save_options so = AL_PLAN_SAVE_OPTIONS_INIT;
  so.only_rank = a->rank == UINT64_MAX ? 0 : (uint32_t)a->rank + 1;
  if (!rc) rc = al_mixture_save(mx, r->plan, a->out, &so);
  al_mixture_free(mx);
  al_mixture_free(old);
  return rc ? -1 : 0;
}

/* Plans the index and saves the manifest, with the time each stage took: 0, -1 (al_last_error)
 * or AL_EXIT_USAGE. */
static int plan_index(const plan_args *a, plan_run *r) {
  double t0 = clock_now_s();
  al_plan_options o = a->o;
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_bucket_table *table = NULL;
  int rc = load_inputs(a, &cost, &table, &o);
  if (rc == AL_EXIT_USAGE) return rc;
  if (a->mixture) {
    if (!rc) rc = plan_mixture(a, r, &cost, &o);
    al_bucket_table_free(table);
    if (!rc && !a->json)
      fprintf(stderr, "plan: mixture planned and written in %.2f s\n", clock_now_s() - t0);
    return rc;
  }
  if (!rc && !a->map) rc = al_index_load(&r->idx, a->index);
  double t_load = clock_now_s();
  if (!rc) {
    rc = a->chunked || a->map ? plan_chunked(a, r, &cost, &o)
                              : al_plan_build_index(&r->plan, r->idx, &cost, &o);
    if (rc) al_error_prefix(rc, "%s", a->map ? a->map : a->index);
  }
  al_bucket_table_free(table);
  double t_plan = clock_now_s();
  if (!rc) report_rejects(r->plan, r->idx);
  if (!rc && r->idx) report_lacking(&o, r->idx);
  al_plan_save_options so = AL_PLAN_SAVE_OPTIONS_INIT;
  so.only_rank = a->rank == UINT64_MAX ? 0 : (uint32_t)a->rank + 1;
  if (!rc) rc = al_plan_save_opts(r->plan, a->out, r->idx ? al_plan_index_key : NULL, r->idx, &so);
  if (!rc && !a->json)
    fprintf(stderr, "plan: index %.2f s, plan %.2f s, write %.2f s\n", t_load - t0, t_plan - t_load,
            clock_now_s() - t_plan);
  return rc ? -1 : 0;
}

/* The crop report of the plan just written (planning an index), from the plan in memory: 0 or
 * an al_status. */
static int plan_fidelity(const plan_args *a, const plan_run *r, fid_report *fid) {
  al_bucket_table *t = NULL;
  int rc = a->buckets ? al_bucket_table_load(&t, a->buckets) : AL_OK;
  if (!rc) rc = fidelity_from_plan(fid, r->idx, r->plan, t, 0);
  al_bucket_table_free(t);
  return rc;
}

/* The samples --require-members left out (0 when none was required). */
static uint64_t left_out_count(const plan_args *a, const plan_run *r) {
  uint64_t n = 0;
  if (r->idx && a->o.n_require_members)
    al_index_require_members(r->idx, a->o.require_members, a->o.n_require_members, NULL, 0, &n);
  return n;
}

/* al_plan_print_json with, before its closing brace, "left_out_members" (with
 * --require-members) and the "fidelity" field (fid; NULL: none). */
static int print_plan_json(const plan_args *a, const plan_run *r, const fid_report *fid) {
  if (!fid && !a->o.n_require_members) {
    al_plan_print_json(stdout, r->plan);
    return AL_OK;
  }
  char *buf = NULL;
  size_t n = 0;
  FILE *mem = open_memstream(&buf, &n);
  if (!mem) return al_set_error(AL_ENOMEM, "plan --json: out of memory");
  al_plan_print_json(mem, r->plan);
  fclose(mem);
  if (n && buf[n - 1] == '\n') n--;
  if (n && buf[n - 1] == '}') n--;
  fwrite(buf, 1, n, stdout);
  if (a->o.n_require_members)
    printf(", \"left_out_members\": %llu", (unsigned long long)left_out_count(a, r));
  if (fid) {
    fputs(", ", stdout);
    fidprint_plan_json(stdout, fid);
  }
  fputs("}\n", stdout);
  free(buf);
  return AL_OK;
}

/* The summary on stderr (or --json on stdout) and, planning an index, its fidelity. */
static int print_summary(const plan_args *a, const plan_run *r) {
  fid_report fid;
  int has = 0;
  if (r->idx) {
    int rc = plan_fidelity(a, r, &fid);
    if (rc) return rc;
    has = 1;
  }
  int rc = AL_OK;
  if (a->json)
    rc = print_plan_json(a, r, has ? &fid : NULL);
  else
    al_plan_print_summary(stderr, r->plan, a->out);
  if (!a->json && r->old) print_replan_tokens(stderr, r->plan, r->old, !a->o.step_tokens);
  if (!a->json && has) fidprint_plan_line(stderr, &fid);
  if (has) fidelity_free(&fid);
  return rc;
}

/* --save-map: the index map of --index, written to MAP. */
static int save_map(const plan_args *a) {
  al_index *idx = NULL;
  int rc = al_index_load(&idx, a->index);
  if (!rc) rc = al_run_map_write_index(idx, a->save_map);
  if (!rc)
    fprintf(stderr, "plan: wrote the index map %s (%zu samples)\n", a->save_map,
            al_index_sample_count(idx));
  al_index_free(idx);
  return rc ? cli_fail("plan") : AL_EXIT_OK;
}

int cli_cmd_plan(int argc, char **argv) {
  plan_args a;
  memset(&a, 0, sizeof a);
  a.at_step = UINT64_MAX;
  a.rank = UINT64_MAX;
  a.mem_safety = 0.9;
  int ec = cli_parse(&PLAN, argc, argv, &a);
  if (ec == CLI_RUN) ec = check_args(&a, argc, argv);
  if (ec != CLI_RUN) return ec;
  if (a.save_map) return save_map(&a);
  if (a.check) return check_run(&a);
  plan_run r = {NULL, NULL, NULL};
  int rc = a.resume ? replan(&a, &r) : plan_index(&a, &r);
  if (!rc) rc = print_summary(&a, &r) ? -1 : 0;
  al_plan_free(r.plan);
  al_index_free(r.idx);
  al_manifest_free(r.old);
  if (rc == AL_EXIT_USAGE) return rc;
  return rc ? cli_fail("plan") : AL_EXIT_OK;
}
