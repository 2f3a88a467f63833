/*
 * al_plan.h - planning one epoch: buckets, batch sizes, a per-step per-rank
 * schedule, and the manifest file it is saved as (read back with
 * planner/al_manifest.h).
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
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_plan_options, al_plan_input
 * and al_replan_options start with `size_t struct_size`, the caller's sizeof, set in one line with
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
#include "planner/al_manifest.h"

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

/* Elastic resume: what a re-plan may change. Zero means default for every field except world
 * (required, 1..2^20). */
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

/* The most a re-plan that keeps the global batch may move the mean tokens per step. */
#define AL_REPLAN_TOKEN_TOLERANCE 0.01

/* Elastic resume: re-plans the samples that `old` schedules at steps >= at_step (padding
 * excluded) for o->world ranks. Steps are numbered from at_step (info.first_step = at_step);
 * buckets (each sample keeps its bucket), cost model, policy, seed, epoch, M_mem, window,
 * last-step policy and geometry come from `old`.
 *
 * The global batch (step_tokens 0): the re-plan keeps T (recorded as old's step_tokens) and
 * the number of steps old holds from at_step on, so its steps hold on average exactly the
 * tokens old's steps from at_step on hold. Where W2 x K2 = W_old x K_old the old batch sizes
 * are kept when they fill those steps; otherwise every bucket's batch size is re-derived (B =
 * max(1, min(floor(m / S), floor(r M_comp / c(S)))), M_comp scaled by the same r = m / m_old)
 * with the smallest micro-batch target m <= M_mem whose batches fit the steps. Where the mean
 * tokens per step would still move by more than AL_REPLAN_TOKEN_TOLERANCE (too few samples
 * left for W2 x K2 micro-batches a step, or too many batches even at M_mem) it refuses
 * (AL_ERANGE, saying what each figure is): pass step_tokens, or another micro_per_step. Each
 * step, too, holds between the fewest and the most real tokens of old's steps (so never above
 * T where old's steps are not): micro-batches (sequence-parallel groups, aligned spans of
 * ranks) are exchanged between steps until they do, or it refuses (AL_ERANGE naming the range
 * and the first step outside it).
 * With step_tokens set, micro-batches aim at T2 / (W2 x K2) (M_comp scaled along) as in
 * al_plan_build; T2 / (W2 x K2) > M_mem is refused (AL_ERANGE).
 *
 * The old steps < at_step plus the new plan hold every sample of the old plan exactly once;
 * samples old dropped or rejected stay so (counted in the summary). `old` must hold step at_step
 * (old first_step <= at_step <= old first_step + steps). The old plan is read through the
 * al_manifest.h accessors only; errors name it by al_manifest_path. */
AL_API int al_plan_replan_opts(al_plan **out, const al_manifest *old, uint32_t at_step,
                               const al_replan_options *o);

/* al_plan_replan_opts with only the world size set (the global batch kept). */
AL_API int al_plan_replan(al_plan **out, const al_manifest *old, uint32_t at_step, uint32_t world);

/* al_plan_replan_opts, then al_plan_save to `path` with old's keys: the re-planned manifest in
 * one call (what Python's Planner.resume uses). */
AL_API int al_plan_replan_write(const al_manifest *old, uint32_t at_step,
                                const al_replan_options *o, const char *path);

/* Writes the manifest. `key` (may be NULL: keys are then "") gives the key
 * of each index position; al_manifest_key_fn (al_manifest.h) adapts a loaded
 * manifest. */
AL_API int al_plan_save(const al_plan *p, const char *path, al_key_fn key, void *key_ctx);

AL_API void al_plan_free(al_plan *p);

/* Summary figures, as al_manifest_get_info gives them after a save/load. */
AL_API int al_plan_get_info(const al_plan *p, al_manifest_info *out);
/* Samples rejected for reason r (AL_REJECT_*); r = AL_REJECT_NONE gives the total. */
AL_API uint64_t al_plan_rejected(const al_plan *p, al_reject_reason r);
/* First rejected sample for reason r (index position), or UINT64_MAX. */
AL_API uint64_t al_plan_first_rejected(const al_plan *p, al_reject_reason r);
/* Buckets holding at least one sample. */
AL_API size_t al_plan_buckets_used(const al_plan *p);

/* Ids of al_plan_struct_size: the structs of al_plan.h and al_manifest.h. */
typedef enum al_plan_struct {
  AL_PLAN_STRUCT_OPTIONS = 0,       /* al_plan_options */
  AL_PLAN_STRUCT_INPUT = 1,         /* al_plan_input */
  AL_PLAN_STRUCT_MANIFEST_INFO = 2, /* al_manifest_info */
  AL_PLAN_STRUCT_BUCKET_INFO = 3,   /* al_bucket_info */
  AL_PLAN_STRUCT_MICRO_REF = 4,     /* al_micro_ref */
  AL_PLAN_STRUCT_STEP_INFO = 5,     /* al_step_info */
  AL_PLAN_STRUCT_REPLAN_OPTIONS = 6 /* al_replan_options */
} al_plan_struct;

/* sizeof of the struct `which` (an al_plan_struct) names; 0 for any other value. Bindings
 * (Python ctypes) check their struct mirrors against it. Thread-safe. */
AL_API size_t al_plan_struct_size(int which);

#ifdef __cplusplus
}
#endif

#endif /* AL_PLAN_H */
