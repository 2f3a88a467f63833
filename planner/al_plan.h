/*
 * al_plan.h - planning one epoch: buckets, batch sizes, a per-step per-rank
 * schedule, and the records a manifest holds of it (saved with al_plan_save and
 * read back with manifest/al_manifest.h).
 *
 * The plan is a pure function of (sample shapes, cost model, options): the
 * same inputs give a byte-identical manifest on any machine. The planner core
 * takes plain arrays (width, height, frames per index position) so it does not
 * depend on the loader; cli/cmd_plan.c fills them from an index.
 *
 * Batch sizes (dual constraint), per bucket of S tokens:
 *   B = max(1, min(floor(M_mem / S), floor(M_comp / c(S))))
 * with c(S) the cost model's per-sample (B-proportional) cost. Defaults:
 * M_mem = 65,536 tokens; M_comp = c(S*) where S* is the largest bucket that
 * fits M_mem, so the longest clip runs alone and every other full batch costs
 * about the same. Policy equal-token ignores M_comp: B = max(1, floor(M_mem / S)).
 *
 * The step (the training contract, docs/DESIGN.md section 3): every step
 * gives every rank exactly K micro-batches (micro_per_step, default 1), so
 * FSDP / ZeRO-3 / tensor and sequence parallel collectives stay in lock-step,
 * and holds about T tokens over all ranks (step_tokens, default W x K x M_mem:
 * what equal-token takes per step). Micro-batches aim at T / (W x K) tokens,
 * which replaces M_mem in the memory term of B (M_mem still caps every sample).
 *
 * Schedule (planner/README.md has the details and the reasons):
 *   1. shuffle the planned samples (xoshiro256** seeded from seed, epoch);
 *   2. walk them and fill one open batch per bucket; a full batch joins the
 *      batch sequence; leftovers join at the end (bucket order);
 *   3. equal-token: deal the sequence, W x K batches per step, round-robin
 *      over ranks; adaptive: cut the sequence into windows of `window` steps
 *      (W x K x window batches) and sort each window's batches by predicted
 *      cost; K = 1: each run of W neighbours is one step (level ranks); K > 1:
 *      deal the window's batches K per (step, rank) so that every rank of
 *      every step carries about the same cost (level ranks and level steps);
 *   4. the last step: adaptive first splits batches (every sample stays real)
 *      until the batch count is a multiple of W x K; what is still short (and
 *      equal-token's short last step) is padded (one-sample micro-batches
 *      repeating a planned sample, marked padded) or dropped, per last_step.
 *
 * Ownership: the caller owns an al_plan (al_plan_free). The plan does not keep
 * pointers into al_plan_input or the options after al_plan_build returns
 * (the bucket table is copied into the plan's bucket list).
 * Thread safety: a built plan is immutable; al_plan_build uses one thread and
 * no global state, so distinct plans may be built concurrently.
 * Errors: al_status codes; al_last_error() says what and where.
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_plan_options, al_plan_input,
 * al_replan_options and the records (al_manifest_info, al_bucket_info, al_micro_ref,
 * al_step_info) start with `size_t struct_size`, the caller's sizeof, set in one line with
 * the struct's AL_*_INIT macro. The library reads and writes only the bytes that fit in it (fields
 * past it read as zero, are not written), so a caller built against an older header keeps working.
 * A struct the library fills must carry its size; an options struct it reads takes 0 as this
 * header's struct (so `= {0}` keeps
 * working). A size below the struct's AL_*_V1 (its first sized version) or above
 * the library's is AL_EINVAL naming the function, the struct and both sizes.
 */
#ifndef AL_PLAN_H
#define AL_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "planner/al_buckets.h"
#include "cost/al_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* adaptive: dual-constraint batch sizes, steps balanced by predicted cost (ours);
 * equal-token: B = m / S, batches dealt in shuffled order (the usual baseline);
 * adaptive-unbalanced: adaptive's batch sizes dealt like equal-token, with no per-step
 * balancing across ranks (the method of the paper this project builds on, for comparisons). */
typedef enum al_policy {
  AL_POLICY_ADAPTIVE = 0,
  AL_POLICY_EQUAL_TOKEN = 1,
  AL_POLICY_ADAPTIVE_UNBALANCED = 2
} al_policy;

typedef enum al_last_step {
  AL_LAST_PAD = 0, /* ranks without a micro-batch get a padding one */
  AL_LAST_DROP = 1 /* the incomplete last step is dropped; samples counted */
} al_last_step;

/* The parallel mode a plan balances for (docs/DESIGN.md, "Sequence parallelism"):
 * step:  a step costs the slowest rank's sum over its K micro-batches (DDP with no_sync: ranks
 *        meet once per step);
 * micro: a step costs the sum over its K micro-batch slots of the slowest group in that slot
 *        (FSDP all-gathers and sequence-parallel all-to-alls inside every layer of every
 *        micro-batch: ranks meet at every layer).
 * AL_SYNC_AUTO is micro when K > 1 or a degree above 1 is allowed (the FSDP / SP case), else
 * step: at K = 1 without SP the two models are the same and the plan is the step schedule byte
 * for byte. A K > 1 DDP plan (no_sync) asks for step. */
typedef enum al_sync { AL_SYNC_AUTO = 0, AL_SYNC_STEP = 1, AL_SYNC_MICRO = 2 } al_sync;

AL_API const char *al_policy_name(al_policy p);
AL_API int al_policy_parse(const char *s, al_policy *out);
AL_API const char *al_last_step_name(al_last_step l);
AL_API int al_last_step_parse(const char *s, al_last_step *out);
/* "step" | "micro" (al_sync_name(AL_SYNC_AUTO) is "auto"). */
AL_API const char *al_sync_name(al_sync s);
AL_API int al_sync_parse(const char *s, al_sync *out);

/* The sequence-parallel degree rule, the one check the CLI, Python and the planner share:
 * `n` distinct powers of two in 1..1024, at most AL_PLAN_MAX_SP_DEGREES, each dividing `world`
 * (0: not checked). AL_OK, or AL_EINVAL / AL_ERANGE with a message "NAME: ..." naming the
 * degree at fault (`name` as the caller spells the argument: "--sp-degrees", "sp_degrees";
 * NULL: "sp-degrees"). Thread-safe (it reads only its arguments). */
AL_API int al_plan_check_sp_degrees(const char *name, const uint32_t *degrees, size_t n,
                                    uint32_t world);

/* The most sequence-parallel degrees a plan may allow: the powers of two 1..1024. */
#define AL_PLAN_MAX_SP_DEGREES 11u

#define AL_PLAN_DEFAULT_MEM_TOKENS 65536u
#define AL_PLAN_DEFAULT_WINDOW 64u
/* The largest M_mem (mem_tokens): 2^32 - 1 tokens per micro-batch, so that every token count of
 * a plan (at most 2^32 - 1 samples of at most M_mem tokens each; W x K x M_mem) fits in 64 bits. */
#define AL_PLAN_MAX_MEM_TOKENS 4294967295u
/* The most micro-batches one step may hold over all ranks, W x K: a step is one manifest record
 * (at most 256 MiB), which 16,777,216 one-sample micro-batches overflow (408 MB); 4,194,304
 * take about 100 MB there and 0.75 GB to plan (planner/README.md §11). */
#define AL_PLAN_MAX_STEP_MICRO 4194304u

/* Zero means default for every field except world (required, >= 1). */
typedef struct al_plan_options {
  size_t struct_size; /* sizeof(al_plan_options) (AL_PLAN_OPTIONS_INIT); 0 = this header's struct */
  al_policy policy;
  uint32_t world;
  uint64_t seed;
  uint32_t epoch;
  uint64_t mem_tokens;   /* M_mem; 0 = AL_PLAN_DEFAULT_MEM_TOKENS; at most AL_PLAN_MAX_MEM_TOKENS */
  double comp_budget_ms; /* M_comp; 0 = the largest over the allowed SP degrees d of c_d(largest
                            bucket fitting d x M_mem), c(largest bucket fitting M_mem) without
                            SP; finite, >= 0 */
  double step_cost_ms;   /* must be 0 (a nonzero value is refused, AL_EINVAL): steps are set by
                            micro_per_step and step_tokens */
  uint32_t window;       /* adaptive: steps per balancing window; 0 = AL_PLAN_DEFAULT_WINDOW */
  al_last_step last_step;
  al_latent_geom geom;            /* zero fields = Wan 2.1 */
  const al_bucket_table *buckets; /* NULL = al_bucket_table_default() */
  uint32_t start_step;            /* keep only steps >= start_step (same steps as the full plan) */
  /* The global batch. Both policies honour them. */
  uint32_t micro_per_step; /* K, micro-batches of every rank in every step (1..2^20); 0 = 1, or
                              ceil(step_tokens / (W x M_mem)) when only step_tokens is set;
                              W x K at most AL_PLAN_MAX_STEP_MICRO */
  uint64_t step_tokens;    /* T, target tokens per step over all ranks; 0 = W x K x M_mem.
                              T / (W x K) > M_mem is refused (AL_ERANGE): raise K */
  /* Added at the end: members every planned sample must hold (KEY.EXT or KEY.EXT.lz4, as the
   * stream reads them). al_plan_build_index (and al_plan_index_write) leave the samples lacking
   * any out before bucketing, so every step stays full when the stream reads them; the key
   * table marks them (status 18, al_manifest_key_status; `inspect --rejected` lists them).
   * A member no sample holds, or every sample lacking one, is an error (AL_ENOTFOUND) naming
   * it. al_plan_build has no index and refuses them (AL_EINVAL). NULL / 0 = none. */
  const char *const *require_members;
  size_t n_require_members;
  /* Added at the end: sequence parallelism. The degrees a micro-batch may run at (powers of
   * two, each dividing world, at most AL_PLAN_MAX_SP_DEGREES of them; NULL / 0 = {1}). Each
   * micro-batch slot of each step partitions the ranks into aligned groups (a group of degree
   * d is ranks [g, g + d) with g a multiple of d); a group's micro-batch holds at most d x M_mem
   * tokens and all d ranks process every sample of it, each holding S / d of its tokens. A
   * bucket runs at the smallest allowed degree whose groups hold one of its samples, so a
   * sample is cut in time only when even the largest degree cannot hold it. */
  const uint32_t *sp_degrees;
  size_t n_sp_degrees;
  al_sync sync; /* the model the schedule is balanced for; AL_SYNC_AUTO (0) as above */
} al_plan_options;
#define AL_PLAN_OPTIONS_INIT AL_STRUCT_INIT(al_plan_options)
#define AL_PLAN_OPTIONS_V1 offsetof(al_plan_options, require_members)

/* Key of index position i, for the manifest's key table. */
typedef const char *(*al_key_fn)(void *ctx, uint64_t i);

/* The samples to plan: index positions 0..n-1. */
typedef struct al_plan_input {
  size_t struct_size; /* sizeof(al_plan_input) (AL_PLAN_INPUT_INIT); 0 = this header's struct */
  size_t n;
  const uint32_t *width;
  const uint32_t *height;
  const uint32_t *frames;
  uint64_t index_fingerprint; /* recorded in the manifest; 0 if unknown */
} al_plan_input;
#define AL_PLAN_INPUT_INIT AL_STRUCT_INIT(al_plan_input)
#define AL_PLAN_INPUT_V1 sizeof(al_plan_input)

typedef struct al_plan al_plan;

/* Plans one epoch. Errors (no plan is made): n == 0, world == 0, M_mem below
 * the smallest bucket's tokens (AL_ERANGE: nothing could ever fit), no sample
 * fitting any bucket (AL_ENOTFOUND, with the reject counts in the message),
 * start_step past the end; AL_ERANGE naming the option for a number past its limit (world,
 * micro_per_step, W x K, mem_tokens, step_tokens / (W x K) above M_mem, comp_budget_ms not
 * finite or negative) or a cost model predicting a non-finite batch cost. Samples fitting no bucket
 * are otherwise counted per reason (al_plan_rejected) and listed in the manifest's key table. */
AL_API int al_plan_build(al_plan **out, const al_plan_input *in, const al_cost_model *cost,
                         const al_plan_options *opts);

/* Elastic resume: what a re-plan may change (al_plan_replan_opts, manifest/al_manifest.h). Zero
 * means default for every field except world (required, 1..2^20). */
typedef struct al_replan_options {
  size_t struct_size;      /* sizeof(al_replan_options) (AL_REPLAN_OPTIONS_INIT); 0 = this header's
                              struct */
  uint32_t world;          /* W2, the new world size */
  uint32_t micro_per_step; /* K2; 0 = ceil(K_old x W_old / W2) keeping T, or with step_tokens
                              the fewest K2 with step_tokens / (W2 x K2) <= M_mem */
  uint64_t step_tokens;    /* 0 = keep the old global batch (below); nonzero: a new T, planned
                              as al_plan_build plans T (the steps then hold about T tokens) */
} al_replan_options;
#define AL_REPLAN_OPTIONS_INIT AL_STRUCT_INIT(al_replan_options)
#define AL_REPLAN_OPTIONS_V1 sizeof(al_replan_options)

AL_API void al_plan_free(al_plan *p);

/* The records of a plan as its manifest holds them: the summary (al_plan_get_info here,
 * al_manifest_get_info from a loaded manifest), a bucket, one rank's micro-batch and a step's
 * totals (al_manifest_bucket, al_manifest_micro and al_manifest_step: manifest/al_manifest.h). */
typedef struct al_manifest_info {
  size_t struct_size; /* sizeof(al_manifest_info), set by the caller: AL_MANIFEST_INFO_INIT */
  const char *policy; /* "adaptive" | "equal-token" */
  uint32_t world;
  uint64_t seed;
  uint32_t epoch;
  uint32_t first_step; /* first step held (0 unless re-planned) */
  uint32_t steps;      /* steps held */
  uint64_t samples;    /* real samples planned */
  uint64_t dropped;
  uint64_t padded;
  uint64_t tokens;
  uint64_t index_fingerprint;
  size_t buckets;
  double imbalance_cv;
  double bubble;
  double predicted_seconds;
  double predicted_tokens_per_s;
  /* The rest of the plan's configuration. */
  const char *last_step;   /* "pad" | "drop" */
  uint64_t mem_tokens;     /* M_mem */
  double comp_budget_ms;   /* M_comp */
  double step_cost_ms;     /* adaptive per-rank step target */
  uint32_t window;         /* adaptive balancing window, in steps */
  uint64_t index_samples;  /* samples in the index planned from */
  uint64_t rejected;       /* samples fitting no bucket */
  uint64_t micro_batches;  /* micro-batches held, padding included */
  const char *cost_family; /* "power" | "poly2" */
  /* The global batch and what the steps hold. */
  uint32_t micro_per_step; /* K: micro-batches of every rank in every step (checked on
                              load); 0 = a manifest that records no K (not checked) */
  uint64_t step_tokens;    /* T: target tokens per step over all ranks */
  uint64_t micro_tokens;   /* T / (W x K): the per-micro-batch token target */
  uint32_t unequal_steps;  /* steps whose ranks hold different micro-batch counts */
  double step_tokens_mean; /* real tokens per step over all ranks: mean and population CV */
  double step_tokens_cv;
  double step_samples_mean; /* real samples per step over all ranks: mean and CV */
  double step_samples_cv;
  double step_time_cv; /* predicted step time (the slowest rank's cost) over steps: population CV */
  /* Added at the end: sequence parallelism and the sync model. */
  const char *sync;      /* "step" | "micro": the model bubble and predicted_seconds follow */
  uint32_t n_sp_degrees; /* the allowed degrees ({1} for a plan without SP) */
  uint32_t sp_degrees[AL_PLAN_MAX_SP_DEGREES];
  uint32_t sp_max_degree; /* the largest degree a micro-batch of this plan runs at */
  double bubble_step;  /* 1 - sum of rank costs / (W x sum over steps of the slowest rank's sum) */
  double bubble_micro; /* 1 - sum of rank costs / (W x sum over steps and slots of the slowest) */
  /* Added at the end: slices of a chunked run (al_plan_save_opts); 0 for a plan in memory. */
  uint32_t only_rank; /* R + 1: a manifest of rank R's work alone (its steps' totals are all
                         ranks'); 0: every rank's */
  int own_keys;       /* nonzero: the key table lists only the samples the steps hold (or none) */
} al_manifest_info;
#define AL_MANIFEST_INFO_INIT AL_STRUCT_INIT(al_manifest_info)
#define AL_MANIFEST_INFO_V1 offsetof(al_manifest_info, sync)

typedef struct al_bucket_info {
  size_t struct_size; /* sizeof(al_bucket_info), set by the caller: AL_BUCKET_INFO_INIT */
  uint32_t id;
  uint32_t width, height, frames;
  uint64_t tokens; /* per sample */
  uint32_t batch_size;
  double batch_cost_ms;
  uint64_t samples;
  const char *limited_by; /* "memory" | "compute" | "one" */
  uint32_t sp_degree;     /* added at the end: the degree its micro-batches run at (1 without SP) */
} al_bucket_info;
#define AL_BUCKET_INFO_INIT AL_STRUCT_INIT(al_bucket_info)
#define AL_BUCKET_INFO_V1 offsetof(al_bucket_info, sp_degree)

typedef struct al_micro_ref {
  size_t struct_size; /* sizeof(al_micro_ref), set by the caller: AL_MICRO_REF_INIT */
  uint32_t step;      /* absolute step in the epoch */
  uint32_t rank;
  uint32_t micro; /* 0 .. n_micro-1 within (step, rank) */
  uint32_t n_micro;
  uint32_t bucket;
  size_t n_samples;
  const uint64_t *samples; /* index positions */
  const uint64_t *tokens;  /* per sample */
  size_t n_padded;
  const uint32_t *padded; /* positions in samples[] that are padding repeats; NULL when none */
  double cost_ms;         /* predicted */
  uint64_t step_samples;  /* totals over all ranks of this step, for loss normalisation */
  uint64_t step_tokens;   /* (each sample counted once, however many ranks process it) */
  /* Added at the end: the sequence-parallel group this rank runs this micro-batch in, ranks
   * [rank - sp_rank, rank - sp_rank + sp_degree). Every rank of the group gets the group's
   * samples, tokens, padding and cost (the file stores them once, at sp_rank 0); 1 and 0
   * without SP. */
  uint32_t sp_degree;
  uint32_t sp_rank;
} al_micro_ref;
#define AL_MICRO_REF_INIT AL_STRUCT_INIT(al_micro_ref)
#define AL_MICRO_REF_V1 offsetof(al_micro_ref, sp_degree)

/* Totals of one step (what al_micro_ref repeats per micro-batch) and its
 * per-rank predicted cost spread. */
typedef struct al_step_info {
  size_t struct_size; /* sizeof(al_step_info), set by the caller: AL_STEP_INFO_INIT */
  uint32_t step;
  uint64_t samples; /* real samples over all ranks */
  uint64_t tokens;
  double max_cost_ms; /* slowest rank */
  double mean_cost_ms;
} al_step_info;
#define AL_STEP_INFO_INIT AL_STRUCT_INIT(al_step_info)
#define AL_STEP_INFO_V1 sizeof(al_step_info)

/* Summary figures, as al_manifest_get_info gives them after a save/load. */
AL_API int al_plan_get_info(const al_plan *p, al_manifest_info *out);
/* Samples rejected for reason r (AL_REJECT_*); r = AL_REJECT_NONE gives the total. */
AL_API uint64_t al_plan_rejected(const al_plan *p, al_reject_reason r);
/* First rejected sample for reason r (index position), or UINT64_MAX. */
AL_API uint64_t al_plan_first_rejected(const al_plan *p, al_reject_reason r);
/* Buckets holding at least one sample. */
AL_API size_t al_plan_buckets_used(const al_plan *p);

/* Ids of al_plan_struct_size: the structs of al_plan.h and al_manifest.h, and the sized ones of
 * al_buckets.h and al_cost.h. */
typedef enum al_plan_struct {
  AL_PLAN_STRUCT_OPTIONS = 0,          /* al_plan_options */
  AL_PLAN_STRUCT_INPUT = 1,            /* al_plan_input */
  AL_PLAN_STRUCT_MANIFEST_INFO = 2,    /* al_manifest_info */
  AL_PLAN_STRUCT_BUCKET_INFO = 3,      /* al_bucket_info */
  AL_PLAN_STRUCT_MICRO_REF = 4,        /* al_micro_ref */
  AL_PLAN_STRUCT_STEP_INFO = 5,        /* al_step_info */
  AL_PLAN_STRUCT_REPLAN_OPTIONS = 6,   /* al_replan_options */
  AL_PLAN_STRUCT_BUCKET_SHAPE = 7,     /* al_bucket_shape */
  AL_PLAN_STRUCT_COST_MODEL = 8,       /* al_cost_model */
  AL_PLAN_STRUCT_BENCH = 9,            /* al_bench */
  AL_PLAN_STRUCT_RUN_INFO = 10,        /* al_run_info (planner/al_run.h) */
  AL_PLAN_STRUCT_RUN_SOURCE = 11,      /* al_run_source (planner/al_run.h) */
  AL_PLAN_STRUCT_RUN_MIX = 12,         /* al_run_mix (planner/al_run.h) */
  AL_PLAN_STRUCT_RUN_SOURCE_INFO = 13, /* al_run_source_info (planner/al_run.h) */
  AL_PLAN_STRUCT_RUN_STAGE = 14        /* al_run_stage (planner/al_run.h) */
} al_plan_struct;

/* sizeof of the struct `which` (an al_plan_struct) names; 0 for any other value. Bindings
 * (Python ctypes) check their struct mirrors against it. Thread-safe. */
AL_API size_t al_plan_struct_size(int which);

/* The value of the integer constant `name` of the planner's public headers (al_plan.h,
 * al_manifest.h, al_buckets.h, al_cost.h: "AL_PLAN_MAX_SP_DEGREES" -> 11, the policies, the
 * reject reasons, the struct ids, ...; the floating-point defaults are not in it): AL_OK with
 * *value set; AL_ENOTFOUND (message naming it) for a name they do not define; AL_EINVAL for
 * NULL. As al_status_constant (common/al_status.h): bindings read constants here instead of
 * copying them. Thread-safe. */
AL_API int al_plan_constant(const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* AL_PLAN_H */
